"""The robust method: one batched Levenberg-Marquardt engine for every robust solve.

``problem`` (targets, weights, tolerances, held columns, poles; the residual; light
rows: the poles or a posture as a pull in the targets' null space), ``poles``
(Blender's pole as one more error row), ``step`` (the damped step bounded by the
limits), ``blocks`` (that step split where rows and free columns split: limbs under a
held body), ``loop`` (the LM iterations, one stall rule), ``starts`` (T-pose, cold
start, keyed random restarts), ``solve`` (``solve_many``, ``solve_one``). Trajectories
run on it in ``solver.path``.
"""

from .loop import LMResult, levenberg_marquardt, on_target
from .poles import PoleSet, pole_points
from .problem import ENGINE_SETTINGS, Problem, rotvec
from .solve import solve_many, solve_one

__all__ = ["ENGINE_SETTINGS", "LMResult", "PoleSet", "Problem", "levenberg_marquardt",
           "on_target", "pole_points", "rotvec", "solve_many", "solve_one"]
