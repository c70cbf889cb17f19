"""IK-chain flattening (SPEC 5.2) and the 6xN geometric Jacobian (SPEC 5.3)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .joints import CompositeJoint, JointNode


def path_to_root(root: JointNode, effector: JointNode) -> list[JointNode]:
    """Real joints from ``root`` down to ``effector`` (both included), found by walking up."""
    path: list[JointNode] = []
    node: JointNode | None = effector
    while node is not None:
        path.append(node)
        if node is root:
            return path[::-1]
        node = node.parent
    raise ValueError(f"joint {effector.name!r} is not below {root.name!r}")


def build_ik_chain(root: JointNode, effector: JointNode) -> list[JointNode]:
    """Flattened list of 1-DoF solver nodes on the path root -> effector.

    Each joint on the path appends itself through ``append_to_ik_chain``: revolute and
    prismatic joints themselves, spherical joints their virtual ``[v1, v2, v3]``, fixed
    joints nothing. The order is the Jacobian's column order.
    """
    chain: list[JointNode] = []
    for node in path_to_root(root, effector):
        node.append_to_ik_chain(chain)
    return chain


def compute_jacobian(chain: list[JointNode], end_effector_pos: ArrayLike) -> NDArray[np.float64]:
    """6xN Jacobian in world space: rows 0-2 linear (m per unit), rows 3-5 angular (rad).

    ``end_effector_pos`` is the effector's world position (metres). Every node's
    ``global_transform`` must be current (run FK first).
    """
    p_end = np.asarray(end_effector_pos, dtype=float)
    jac = np.zeros((6, len(chain)))
    for i, node in enumerate(chain):
        if node.get_dof() == 0:
            continue
        jac[:, i] = node.compute_jacobian_column(p_end)
    return jac


def chain_sphericals(nodes: list[JointNode]) -> list[CompositeJoint]:
    """The spherical joints owning virtual nodes in ``nodes``, in order of appearance."""
    out: list[CompositeJoint] = []
    for node in nodes:
        sp = node.spherical_parent
        if sp is not None and sp not in out:
            out.append(sp)
    return out
