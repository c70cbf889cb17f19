"""The kinematics protocols (docs/architecture.md) and what a frame of a bake sets.

A ``Kinematics`` model is what the spec twin (``dls_compiled.solve_spec``) iterates on:
columns are the 1-DoF solver nodes of the effectors' IK chains (spherical joints as
their three virtual hinges), the state is every column value, spherical quaternion and
shifted virtual limit; ``FloatKinematics`` adds the plain-float operations of the
compiled model (``model.compiled``). ``BatchedKinematics`` is what the robust engine
(``solver.lm``, ``solver.path``) needs from its joint space (``model.joint_space``).
Frames: world. Units: metres and radians (prismatic columns in metres, the rest in
radians).

``model.objects.ObjectKinematics`` implements ``Kinematics`` directly on the joint
objects of a ``Skeleton``: slow, obviously right, and the reference the compiled model is
tested against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]

# the step and column kinds of the compiled model (FIXED, REVOLUTE, PRISMATIC, SPHERICAL,
# VIRTUAL: a spherical joint's virtual hinge) and the column kinds of the robust engine's
# joint space (``BatchedKinematics.kinds``: REVOLUTE, PRISMATIC, or ROTVEC, a coordinate
# of an unlimited spherical joint's rotation vector)
FIXED, REVOLUTE, PRISMATIC, SPHERICAL, VIRTUAL, ROTVEC = 0, 1, 2, 3, 4, 5


@runtime_checkable
class Kinematics(Protocol):
    """What a solver needs from a model (world frame; metres, radians)."""

    names: list[str]  # one per column, union of the effectors' chains, root first
    effectors: list[str]
    n: int

    def reset(self) -> None:
        """T-pose (as ``Skeleton.reset``), FK current."""

    def update(self) -> None:
        """FK; folds spherical increments as ``SphericalJoint.update_global_transform``."""

    def effector_transform(self, k: int) -> Array:
        """(4,4) world transform of effector ``k`` (metres)."""
        ...

    def jacobian(self, k: int) -> Array:
        """(6, n) world Jacobian of effector ``k``: rows linear (m/unit), angular (rad/unit)."""
        ...

    def apply_delta(self, dq: Array) -> None:
        """Per column: ``q += d``, clipped to the current limits."""

    def limits(self) -> tuple[Array, Array]:
        """Current (shifted) lower and upper limits per column; -inf/+inf when none."""
        ...

    def increments(self) -> Array:
        """Current column values (virtual columns are increments since the last fold)."""
        ...

    def save(self) -> object:
        """Snapshot of every q, spherical quaternion and shifted limit."""
        ...

    def restore(self, state: object) -> None:
        """Put back a ``save()`` (call ``update()`` afterwards)."""

    def write_back(self, skeleton: Any) -> None:
        """Copy the state into the joint objects of ``skeleton`` and run its FK."""

    def read_from(self, skeleton: Any) -> None:
        """Take the state from the joint objects of ``skeleton``."""


@runtime_checkable
class FloatKinematics(Kinematics, Protocol):
    """A model that also runs on plain floats (the compiled model): no numpy per step."""

    def pose_error(self, k: int, target_r: Any, target_p: Any) -> tuple[float, ...]:
        """Effector ``k``'s error ``(dp, dr)`` (world; m, rad) against a row-major target
        rotation and position."""
        ...

    def jacobian_columns(self, k: int) -> list[tuple[float, ...]]:
        """Effector ``k``'s Jacobian as one 6-tuple per column (world)."""
        ...

    def apply_scaled(self, dq: Any, alpha: float) -> None:
        """``q += alpha * dq`` per column, clipped to the current limits."""

    def clip(self) -> None:
        """Clip every column into its current limits."""


@dataclass(frozen=True)
class Pole:
    """Blender's IK pole for one effector's chain: the chain bends toward ``position``
    (world, m), turned by ``angle`` (rad) about the line from the chain's first joint to
    the target. A lower-priority objective: it moves the chain only in the null space of
    the targets."""

    position: tuple[float, float, float]
    angle: float = 0.0


class FrameTargets(list[Any]):
    """One frame's world 4x4 targets, one per effector (a list), with what else the frame
    sets: ``driven`` joint values (SPEC 3.3 entries by joint name: joints on the paths
    outside the solved chains, e.g. an animated spine) and ``poles`` (a :class:`Pole` or
    None per effector)."""

    def __init__(self, targets: Iterable[Any],
                 driven: Mapping[str, Mapping[str, Any]] | None = None,
                 poles: Sequence[Pole | None] | None = None) -> None:
        super().__init__(targets)
        self.driven = driven
        self.poles = poles


class BatchedKinematics(Protocol):
    """What the robust engine needs from a model (``model.joint_space.BatchedModel``):
    FK and Jacobians of many coordinate rows at once, batch last, and the configuration
    space's operations. World frame; metres, radians."""

    n: int  # columns
    effectors: list[str]
    points: list[str]  # joints whose positions follow the effectors' in pose_t
    chains: list[list[str]]  # per effector: the joints its solve moves, root first
    kinds: NDArray[np.int_]  # REVOLUTE, PRISMATIC or ROTVEC per column
    lo: Array  # limits per column (rad or m), +-inf when none
    hi: Array
    held: NDArray[np.bool_]  # columns whose values come from outside (per problem)
    paths: NDArray[np.bool_]  # (effectors + points, n): the columns that move each
    wraps: NDArray[np.bool_]  # hinge angles without limits (their value modulo a turn)
    # limits of wrapping hinges searched modulo a turn within them (with_turns_free),
    # +-inf elsewhere
    turn_lo: Array
    turn_hi: Array
    turns_placed: bool  # a path's given ends stand at their own turns (with_turns_free)
    hinges: NDArray[np.bool_]  # revolute joints' angles (not a spherical joint's)
    rotvec_starts: NDArray[np.int_]  # first column of each rotation vector (ROTVEC triple)
    prefix_cols: NDArray[np.int_]  # the held columns that place prefix_t's frames alone

    def prefix_t(self, q: Array) -> Array | None:
        """What ``q``'s (n, k) held columns alone place, once per problem (the frames
        of a held prefix, a limb's spine), passed back as ``base``; or None."""
        ...

    def pose_t(self, q: Array, base: Array | None = None) -> tuple[Array, Array]:
        """``q`` (n, k) -> effector (then point) world rotations (m, 3, 3, k) and
        positions (m, 3, k) (m); ``base``: ``prefix_t`` of ``q``'s held values."""
        ...

    def pose_jacobian_t(self, q: Array, base: Array | None = None,
                        cols: NDArray[np.intp] | None = None
                        ) -> tuple[Array, Array, Array]:  # fmt: skip
        """``pose_t(q)`` and the world Jacobian (m, 6, c, k) of columns ``cols`` (default
        all n), rows ``[linear (m/unit); angular (rad/unit)]``; with ``base``, zero
        columns where only held columns above the solved ones are."""
        ...

    def pose_jacobian_blocks_t(self, q: Array, base: Array | None, effs: NDArray[np.intp],
                               cols: NDArray[np.intp], mask: NDArray[np.bool_]
                               ) -> tuple[Array, Array, Array]:  # fmt: skip
        """``pose_t(q)`` and the world Jacobian in blocks (B, 6, N, k), rows ``[linear
        (m/unit); angular (rad/unit)]``: block b the rows of effector ``effs[b]`` and the
        columns ``cols[b]`` (N,), zero where ``mask[b]`` is False (padding)."""
        ...

    def reach_t(self, q: Array, base: Array | None = None) -> tuple[Array, Array]:
        """Per effector the centre (m, 3, k) (world) and radius (m,) of a ball it cannot
        leave whatever the solved columns do (held columns from ``q`` (n, k); ``base``:
        ``prefix_t`` of them)."""
        ...

    def recentre(self, q: Array) -> Array:
        """``q`` (n, k) with every chart kept away from its singularity (same poses)."""
        ...

    def with_turns_free(self, cols: NDArray[np.bool_], placed: bool = False
                        ) -> BatchedKinematics:  # fmt: skip
        """The same model with the hinge columns ``cols`` (n,) without limits (values
        modulo a turn: ``wraps``), those limits kept as ``turn_lo``, ``turn_hi``;
        ``placed``: a path's given ends stand at their own turns."""
        ...

    def without_points(self) -> BatchedKinematics:
        """The same model without its ``points`` (FK of the effectors alone)."""
        ...

    def nearest(self, ref: Array, q: Array) -> Array:
        """Rows ``q`` (k, n) as the same poses' coordinates nearest ``ref``."""
        ...

    def difference(self, a: Array, b: Array) -> Array:
        """Per column the motion from rows ``a`` to rows ``b`` (k, n), the nearest way."""
        ...
