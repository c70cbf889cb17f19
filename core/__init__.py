"""dhik: inverse kinematics of SPEC 4-6 on numpy alone (no Blender, no scipy).

The same files are the pip package ``dhik`` and the sub-package ``core`` of the Blender
extension, so every import inside is relative.
"""

from .errors import DhikError
from .joints import FixedJoint, JointNode, PrismaticJoint, RevoluteJoint, SphericalJoint
from .skeleton import Skeleton
from .solver import SolveResult, solve, solve_ik

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
