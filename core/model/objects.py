"""The kinematics protocol on the joint objects of a Skeleton: the reference implementation.

Slow and obviously right; the compiled model is tested against it. Frames: world.
Units: metres and radians.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from ..solver.chain import build_ik_chain, chain_sphericals, compute_jacobian
from ..solver.joints import JointNode, PrismaticJoint, RevoluteJoint
from .skeleton import Skeleton
from .spherical import SphericalJoint

Array = NDArray[np.float64]


def union_chain(skeleton: Skeleton, effectors: list[str]) -> list[JointNode]:
    """Union of ``build_ik_chain`` for every effector: first-seen order, no repeats."""
    nodes: list[JointNode] = []
    seen: set[int] = set()
    for name in effectors:
        for node in build_ik_chain(skeleton.root, skeleton.joint(name)):
            if id(node) not in seen:
                seen.add(id(node))
                nodes.append(node)
    return nodes


def copy_joint_state(src: Skeleton, dst: Skeleton, names: list[str]) -> None:
    """Copy q, quaternions and virtual limits of the joints ``names`` from ``src`` to ``dst``."""
    for name in names:
        a, b = src.joints[name], dst.joints[name]
        if isinstance(a, RevoluteJoint | PrismaticJoint):
            b.q = a.q  # type: ignore[attr-defined]
        elif isinstance(a, SphericalJoint) and isinstance(b, SphericalJoint):
            b.quaternion = a.quaternion.copy()
            b.virtual_fix.quaternion = a.quaternion.copy()
            for va, vb in zip(a.virtual_chain, b.virtual_chain, strict=True):
                vb.q = va.q
                vb.limits = va.limits


class ObjectKinematics:
    """The protocol on the joint objects of ``skeleton`` (the reference implementation).

    The model *is* the skeleton: ``update()`` runs its FK, ``apply_delta`` calls each
    node's ``apply_delta``. Only joints on the effectors' paths are saved and restored.
    """

    def __init__(self, skeleton: Skeleton, effectors: list[str]) -> None:
        self.skeleton = skeleton
        self.effectors = list(effectors)
        self.effector_nodes = [skeleton.joint(e) for e in self.effectors]
        self.chains = [build_ik_chain(skeleton.root, e) for e in self.effector_nodes]
        self.nodes = union_chain(skeleton, self.effectors)
        self.names: list[str] = [node.name for node in self.nodes]
        self.n = len(self.nodes)
        index = {id(node): i for i, node in enumerate(self.nodes)}
        self.columns = [[index[id(node)] for node in chain] for chain in self.chains]
        self.sphericals = chain_sphericals(self.nodes)
        # real joints whose state the model covers (for write_back / read_from)
        self.real_names = list(
            dict.fromkeys(
                node.spherical_parent.name if node.spherical_parent is not None else node.name
                for node in self.nodes
            )
        )

    def reset(self) -> None:
        self.skeleton.reset()

    def update(self) -> None:
        self.skeleton.root.update_global_transform()

    def effector_transform(self, k: int) -> Array:
        return self.effector_nodes[k].global_transform.copy()

    def jacobian(self, k: int) -> Array:
        eff = self.effector_nodes[k]
        part = compute_jacobian(self.chains[k], eff.global_transform[:3, 3])
        jac = np.zeros((6, self.n))
        jac[:, self.columns[k]] = part
        return jac

    def apply_delta(self, dq: Array) -> None:
        for node, d in zip(self.nodes, dq, strict=True):
            node.apply_delta(float(d))

    def limits(self) -> tuple[Array, Array]:
        lo = np.full(self.n, -math.inf)
        hi = np.full(self.n, math.inf)
        for i, node in enumerate(self.nodes):
            lim = node.limits  # type: ignore[attr-defined]
            if lim is not None:
                lo[i], hi[i] = lim
        return lo, hi

    def increments(self) -> Array:
        return np.array([node.q for node in self.nodes],  # type: ignore[attr-defined]
                        dtype=np.float64)

    def save(self) -> object:
        return (
            [(node.q, node.limits) for node in self.nodes],  # type: ignore[attr-defined]
            [sp.quaternion.copy() for sp in self.sphericals],
        )

    def restore(self, state: object) -> None:
        values, quats = cast(tuple[list[tuple[float, Any]], list[Array]], state)
        for node, (q, limits) in zip(self.nodes, values, strict=True):
            node.q = q  # type: ignore[attr-defined]
            node.limits = limits  # type: ignore[attr-defined]
        for sp, quat in zip(self.sphericals, quats, strict=True):
            sp.quaternion = quat.copy()
            sp.virtual_fix.quaternion = quat.copy()

    def write_back(self, skeleton: Skeleton) -> None:
        if skeleton is not self.skeleton:
            copy_joint_state(self.skeleton, skeleton, self.real_names)
        skeleton.update()

    def read_from(self, skeleton: Skeleton) -> None:
        if skeleton is not self.skeleton:
            copy_joint_state(skeleton, self.skeleton, self.real_names)
