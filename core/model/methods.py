"""``solve`` / ``solve_ik`` with SPEC 5.4's signature and a choice of method.

``method="spec"`` is SPEC 5.4's damped least squares on the joint objects
(``solver.dls``), unchanged. ``method="robust"`` compiles the joints below ``root`` into a
``CompiledKinematics`` and runs the same robust engine as the bake
(``solver.robust.solve_robust``), then writes the result back into the joint objects.
Targets are world 4x4 matrices (metres); errors in metres and radians.
"""

from __future__ import annotations

from numpy.typing import ArrayLike

from ..solver.dls import solve as solve_spec_objects
from ..solver.joints import JointNode
from ..solver.robust import solve_robust
from ..solver.settings import SolveResult, SolverSettings
from .compiled import CompiledKinematics

METHODS = ("robust", "spec")


class NodeTree:
    """The joints below ``root`` seen as a skeleton (parents first), for compiling."""

    def __init__(self, root: JointNode) -> None:
        self.root = root
        self.joints: dict[str, JointNode] = {}
        stack = [root]
        while stack:
            node = stack.pop()
            self.joints[node.name] = node
            stack.extend(reversed(node.children))

    def joint(self, name: str) -> JointNode:
        return self.joints[name]

    def update(self) -> None:
        self.root.update_global_transform()


def solve(
    root: JointNode,
    effector: JointNode,
    target_transform: ArrayLike,
    ik_chain: list[JointNode] | None = None,
    max_iterations: int = 100,
    position_tolerance: float = 1e-3,
    orientation_tolerance: float = 1e-1,
    damping: float = 0.0001,
    enable_line_search: bool = True,
    line_search_alpha: float = 1.0,
    line_search_alpha_min: float = 1e-2,
    *,
    method: str = "spec",
) -> SolveResult:
    """Solve ``effector`` toward ``target_transform`` (world 4x4, metres) by ``method``.

    The joints are left in the final state with FK current. The robust method ignores
    ``damping`` and the line-search arguments (it has its own), builds its own IK chain
    (``ik_chain`` must be None or the chain ``build_ik_chain`` gives) and bounds a
    spherical joint's intrinsic XYZ angles by its limits.
    """
    args = (max_iterations, position_tolerance, orientation_tolerance, damping,
            enable_line_search, line_search_alpha, line_search_alpha_min)
    if method == "spec":
        return solve_spec_objects(root, effector, target_transform, ik_chain, *args)
    if method != "robust":
        raise ValueError(f"unknown IK method {method!r}: use 'spec' or 'robust'")
    tree = NodeTree(root)
    model = CompiledKinematics(tree, [effector.name])  # type: ignore[arg-type]
    if ik_chain is not None and [node.name for node in ik_chain] != model.names:
        raise ValueError("method='robust' builds its own IK chain: pass ik_chain=None")
    result = solve_robust(model, [target_transform], SolverSettings(*args))
    model.write_back(tree)  # type: ignore[arg-type]
    return result


def solve_ik(
    root: JointNode,
    effector: JointNode,
    target_transform: ArrayLike,
    ik_chain: list[JointNode] | None = None,
    max_iterations: int = 100,
    position_tolerance: float = 1e-3,
    orientation_tolerance: float = 1e-1,
    damping: float = 0.0001,
    enable_line_search: bool = True,
    line_search_alpha: float = 1.0,
    line_search_alpha_min: float = 1e-2,
    *,
    method: str = "spec",
) -> bool:
    """SPEC 5.4 entry point: True when the effector reached the target within tolerance."""
    return solve(root, effector, target_transform, ik_chain, max_iterations,
                 position_tolerance, orientation_tolerance, damping, enable_line_search,
                 line_search_alpha, line_search_alpha_min, method=method).converged
