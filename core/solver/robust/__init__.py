"""The robust IK method (issue 5): Levenberg-Marquardt on any ``Kinematics`` model.

Frames: world. Units: metres and radians (prismatic columns in metres). One solve drives
one or more effectors at once: their weighted error rows are stacked into one residual
and one Jacobian, so joints shared by several effectors get one update.

Spherical limits (decision by the lead): a spherical joint's limits bound the intrinsic
XYZ angles ``(a, b, c)`` of its rotation relative to rest, ``R = Rx(a) Ry(b) Rz(c)``:
the convention of its virtual chain v1 -> v2 -> v3 (DECISIONS.md). The robust method
enforces these true angles. On a ``CompiledKinematics`` (the bake, the CLI, the add-on)
its coordinates for such a joint are the angles themselves: the Jacobian columns are
those of ``Rx(a) Ry(b) Rz(c)`` (the virtual columns mixed by the current angles), the box
``lo <= angle <= hi`` is kept exactly by the step's clamping, the quaternion is rebuilt
from the angles after every step, and the virtual joints' shifted limits are kept at
``(lo - angle, hi - angle)`` so a ``save()`` says it all. A box beyond ``b = +-pi/2``
keeps its meaning through the rotation's other angle triple. Random restarts draw the
angles inside the box. A spherical joint without any limit keeps the virtual chain's
increments (no gimbal lock). The ``spec`` method keeps SPEC 4.3's shifted-limit
mechanism as written (joints.py, solver.py). On other models (``ObjectKinematics``,
``solver.solve(method="robust")``) the numpy implementation below works on the virtual
columns and their shifted limits, as before.

One solve, per iteration (both implementations):

- damping adapts to the error (Chan): ``W = damping * E + damping_floor`` with
  ``E = |e|^2 / 2`` over the weighted residual; a step that does not lower ``E`` is
  rejected and the damping multiplied by 10, an accepted step halves it again;
- limits as in Blender's Standard solver: a column whose step would cross its limit is
  clamped to the limit and its column removed, and the rest of the step is solved again
  for the error left, so every step stays a damped descent step within the limits;
- with an anchor (trajectories: the previous frame's pose moved toward mid-range) the
  step is damped toward it instead of toward no motion,
  ``min |J dq - e|^2 + W |dq - d|^2`` with ``d`` the way to the anchor: as ``W -> 0``
  this is the pseudo-inverse step plus the projection of ``d`` on the Jacobian's null
  space, so redundant joints stay where they were and drift back from their limits;
- a search that stalls (no acceptable step, or no progress) restarts from a random
  configuration within the limits, drawn from ``numpy.random.default_rng(seed)``.

Position rows are divided by a length scale (the largest distance from a joint axis to
an effector at the start, metres), so damping and weights compare metres with radians on
chains of any size; tolerances stay absolute (m, rad). On a ``CompiledKinematics`` the
whole loop runs on plain floats (hand-written 6x6 Cholesky, the model's float FK,
errors and Jacobian columns): numpy's per-call overhead dominates at a handful of joints.

A trajectory (:func:`solve_trajectory`, :class:`Tracker`) starts each frame from a
parabola through the three previous solutions and anchors it at the previous solution
moved ``track_posture`` of the way to mid-range; frame 0 takes, of several solutions,
the one farthest from the limits; a frame that cannot be reached so is solved with
restarts, and a few such flips are then bridged backward from the later frames.
"""

from __future__ import annotations

from .engine import solve_robust
from .options import RobustOptions, RobustResult, Weight, checked_weights
from .tracking import FrameSolution, Progress, solve_trajectory, trajectory_frames

__all__ = [
    "FrameSolution",
    "Progress",
    "RobustOptions",
    "RobustResult",
    "Weight",
    "checked_weights",
    "solve_robust",
    "solve_trajectory",
    "trajectory_frames",
]
