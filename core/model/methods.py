"""``solve`` / ``solve_ik`` with SPEC 5.4's signature and a choice of method.

``method="spec"`` is SPEC 5.4's damped least squares on the joint objects
(``solver.dls``), unchanged. ``method="robust"`` is the robust engine every bake uses
(``solver.lm.solve_one``: a warm batch of one, from the joints' current state, with
restarts only when that search fails): the joints below ``root`` are read into its joint
space, solved, and the answer written back into the joint objects. Targets are world
4x4 matrices (metres); errors in metres and radians.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from ..floatmath import Quat
from ..rotations import matrix_to_quat
from ..solver.chain import build_ik_chain
from ..solver.dls import solve as solve_spec_objects
from ..solver.joints import FixedJoint, JointNode, PrismaticJoint, RevoluteJoint
from ..solver.lm import solve_one
from ..solver.settings import SolveResult, SolverSettings
from .definition import JointDef, Range, SkeletonDef
from .joint_space import BatchedModel
from .spherical import SphericalJoint

METHODS = ("robust", "spec")
WORLD = "\0world"  # the frame a root with a parent hangs in (no joint can be named so)


def definition_of(root: JointNode) -> SkeletonDef:
    """The joints below ``root`` (itself included) as a SkeletonDef, with their current
    offsets, axes and limits; a ``root`` that has a parent hangs below a fixed joint at
    that parent's world transform."""
    joints: list[JointDef] = []
    top: str | None = None
    if root.parent is not None:
        g = root.parent.global_transform
        joints.append(JointDef(WORLD, "fixed", _xyz(g[:3, 3]), None, None, None,
                               cast(Quat, tuple(float(v) for v in matrix_to_quat(g[:3, :3])))))
        top = WORLD
    stack: list[tuple[JointNode, str | None]] = [(root, top)]
    while stack:
        node, parent = stack.pop()
        offset = _xyz(node.local_offset)
        if isinstance(node, RevoluteJoint | PrismaticJoint):
            kind = "revolute" if isinstance(node, RevoluteJoint) else "prismatic"
            joints.append(JointDef(node.name, kind, offset, parent, _xyz(node.axis),
                                   None if node.limits is None
                                   else cast(Range, tuple(node.limits))))
        elif isinstance(node, SphericalJoint):
            lims = tuple(None if lim is None else (float(lim[0]), float(lim[1]))
                         for lim in node.limits)
            joints.append(JointDef(node.name, "spherical", offset, parent,
                                   limits=lims if any(lims) else None))  # type: ignore[arg-type]
        else:
            quat = tuple(float(v) for v in getattr(node, "quaternion", (1.0, 0, 0, 0)))
            joints.append(JointDef(node.name, "fixed", offset, parent,
                                   quaternion=quat))  # type: ignore[arg-type]
        stack.extend((child, node.name) for child in reversed(node.children))
    return SkeletonDef(joints[0].name, tuple(joints))


def _xyz(v: Any) -> tuple[float, float, float]:
    return float(v[0]), float(v[1]), float(v[2])


def _current(nodes: dict[str, JointNode]) -> dict[str, dict[str, Any]]:
    """SPEC 3.3 entries of the joint objects' current state."""
    out: dict[str, dict[str, Any]] = {}
    for name, node in nodes.items():
        if isinstance(node, RevoluteJoint):
            out[name] = {"type": "revolute", "angle": float(node.q)}
        elif isinstance(node, PrismaticJoint):
            out[name] = {"type": "prismatic", "displacement": float(node.q)}
        elif isinstance(node, SphericalJoint):
            node.sync_virtual_joints()
            out[name] = {"type": "spherical",
                         "quaternion": [float(v) for v in node.quaternion]}
    return out


def _write(nodes: dict[str, JointNode], values: dict[str, dict[str, Any]]) -> None:
    """Put SPEC 3.3 entries into the joint objects (a spherical joint's virtual increments
    and limits as after a reset)."""
    for name, entry in values.items():
        node = nodes[name]
        if isinstance(node, RevoluteJoint):
            node.q = float(entry["angle"])
        elif isinstance(node, PrismaticJoint):
            node.q = float(entry["displacement"])
        elif isinstance(node, SphericalJoint):
            node.reset()
            node.quaternion = np.array(entry["quaternion"], dtype=float)
            node.virtual_fix.quaternion = node.quaternion.copy()


def _nodes(root: JointNode) -> dict[str, JointNode]:
    out: dict[str, JointNode] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        out[node.name] = node
        stack.extend(node.children)
    return out


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

    The joints are left in the final state with FK current. The robust method has no
    line search and its own damping (the ``damping`` and line-search arguments are the
    spec method's and are refused unless at their defaults), builds its own IK chain
    (``ik_chain`` must be None or the chain ``build_ik_chain`` gives) and bounds a
    spherical joint's intrinsic XYZ angles by its limits.
    """
    args = (max_iterations, position_tolerance, orientation_tolerance, damping,
            enable_line_search, line_search_alpha, line_search_alpha_min)
    if method == "spec":
        return solve_spec_objects(root, effector, target_transform, ik_chain, *args)
    if method != "robust":
        raise ValueError(f"unknown IK method {method!r}: use 'spec' or 'robust'")
    settings = SolverSettings(*args)
    spec_only = {k: v for k, v in settings.kwargs().items()
                 if k in SPEC_ONLY and v != getattr(SolverSettings(), k)}
    if spec_only:
        raise ValueError(f"method='robust' has no {', '.join(spec_only)}: they are the "
                         "spec method's")
    if ik_chain is not None and [n.name for n in ik_chain] != \
            [n.name for n in build_ik_chain(root, effector)]:
        raise ValueError("method='robust' builds its own IK chain: pass ik_chain=None")
    nodes = _nodes(root)
    model = BatchedModel(definition_of(root), [effector.name])
    root.update_global_transform()
    q0 = model.coordinates(_current(nodes))
    target = np.asarray(target_transform, dtype=float).reshape(1, 1, 4, 4)
    res = solve_one(model, target, q0, settings=settings)
    _write(nodes, {k: v for k, v in model.joint_values(res.q[0]).items() if k in nodes})
    root.update_global_transform()
    return SolveResult(bool(res.converged[0]), int(res.iterations[0]),
                       float(res.position_error[0, 0]), float(res.orientation_error[0, 0]))


# the SolverSettings fields only SPEC 5.4's method uses
SPEC_ONLY = ("damping", "enable_line_search", "line_search_alpha", "line_search_alpha_min")


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


__all__ = ["METHODS", "FixedJoint", "definition_of", "solve", "solve_ik"]
