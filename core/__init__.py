"""dhik: inverse kinematics of SPEC 4-6 on numpy alone (no Blender, no scipy).

The same files are the pip package ``dhik`` and the sub-package ``core`` of the Blender
extension, so every import inside is relative. Layers as folders (SPEC 2): ``solver/``
(1-DoF joints, chain, Jacobian, solvers) <- ``model/`` (definitions, SphericalJoint,
Skeleton, compiled model) <- ``app/`` (formats, trajectory, bake, CLI); imports point down.
"""

from .errors import DhikError
from .model.methods import solve, solve_ik
from .model.skeleton import Skeleton
from .model.spherical import SphericalJoint
from .solver.joints import FixedJoint, JointNode, PrismaticJoint, RevoluteJoint
from .solver.settings import SolveResult

__version__ = "0.1.0"

__all__ = [
    "DhikError",
    "FixedJoint",
    "JointNode",
    "PrismaticJoint",
    "RevoluteJoint",
    "Skeleton",
    "SolveResult",
    "SphericalJoint",
    "solve",
    "solve_ik",
]
