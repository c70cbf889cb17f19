"""SPEC 4.3's SphericalJoint, which the specification places in the model layer.

The solver never sees it: it appends its three virtual revolute joints to IK chains and
folds their increments into its quaternion ``[w, x, y, z]`` on every FK pass.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..rotations import (
    IDENTITY_QUAT,
    intrinsic_xyz_to_quat,
    quat_multiply,
    quat_normalize,
    quat_to_matrix,
)
from ..solver.joints import (
    SYNC_THRESHOLD,
    FixedJoint,
    JointNode,
    Limits,
    Mat4,
    RevoluteJoint,
    eye4,
)


class SphericalJoint(JointNode):
    """Ball joint (SPEC 4.3): state in ``quaternion``, solved through three virtual hinges.

    ``virtual_fix`` carries the current rotation; ``virtual_chain = [v1, v2, v3]`` turn
    about local X, the moved Y and the moved Z. Their ``q`` are increments that
    ``update_global_transform`` folds into the quaternion (``R_new = R_curr @ Rx Ry Rz``),
    shifting their limits by the folded amount. ``limits`` holds the three per-axis
    ``(min, max)`` or None, in radians, as given in skeleton.json.
    """

    def __init__(
        self,
        name: str,
        offset: ArrayLike = (0.0, 0.0, 0.0),
        limits: list[Limits] | tuple[Limits, ...] | None = None,
    ) -> None:
        super().__init__(name, offset)
        self.quaternion = IDENTITY_QUAT.copy()
        lims = [None, None, None] if limits is None else list(limits)
        self.limits: list[Limits] = [
            None if lim is None else (float(lim[0]), float(lim[1])) for lim in lims
        ]
        self.virtual_fix = FixedJoint(f"{name}.fix", offset, self.quaternion)
        self.virtual_fix.spherical_parent = self
        axes = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
        self.virtual_chain: list[RevoluteJoint] = []
        previous: JointNode = self.virtual_fix
        for i, (axis, lim) in enumerate(zip(axes, self.limits, strict=True)):
            v = RevoluteJoint(f"{name}.v{i + 1}", (0.0, 0.0, 0.0), axis, lim)
            v.spherical_parent = self
            v.parent = previous  # virtual links only: the real tree does not see them
            previous.children = [v]
            self.virtual_chain.append(v)
            previous = v

    # -- hooks --------------------------------------------------------------------------
    def on_child_added(self, child: JointNode) -> None:
        self.virtual_chain[2].children = list(self.children)

    def on_parent_set(self, parent: JointNode) -> None:
        self.virtual_fix.parent = parent

    # -- state ---------------------------------------------------------------------------
    def reset(self) -> None:
        """T-pose: identity quaternion, zero increments, the limits of skeleton.json."""
        self.quaternion = IDENTITY_QUAT.copy()
        self.virtual_fix.quaternion = self.quaternion.copy()
        for v, lim in zip(self.virtual_chain, self.limits, strict=True):
            v.q = 0.0
            v.limits = lim

    def sync_virtual_joints(self) -> None:
        """Fold the virtual increments into the quaternion (SPEC 4.3 state sync)."""
        v1, v2, v3 = self.virtual_chain
        if max(abs(v1.q), abs(v2.q), abs(v3.q)) < SYNC_THRESHOLD:
            return
        delta = intrinsic_xyz_to_quat(v1.q, v2.q, v3.q)
        self.quaternion = quat_normalize(quat_multiply(self.quaternion, delta))
        for v in self.virtual_chain:
            if v.limits is not None:
                v.limits = (v.limits[0] - v.q, v.limits[1] - v.q)
            v.q = 0.0
        self.virtual_fix.quaternion = self.quaternion.copy()

    def get_local_matrix(self) -> Mat4:
        m = eye4()
        m[:3, :3] = quat_to_matrix(self.quaternion)
        m[:3, 3] = self.local_offset
        return m

    def update_own_transform(self) -> None:
        """Sync the virtual joints, then the world transforms of this joint and its virtual
        chain (``update_global_transform`` then walks the children)."""
        self.sync_virtual_joints()
        local = self.get_local_matrix()
        parent = self.parent
        self.global_transform = local if parent is None else parent.global_transform @ local
        self.virtual_fix.global_transform = self.global_transform
        previous = self.global_transform
        for v in self.virtual_chain:
            v.global_transform = previous if v.q == 0.0 else previous @ v.get_local_matrix()
            previous = v.global_transform

    # -- solver interface ------------------------------------------------------------
    def compute_jacobian_column(self, end_effector_pos: ArrayLike) -> NDArray[np.float64]:
        raise NotImplementedError("a spherical joint is solved through its virtual chain")

    def apply_delta(self, delta_q: float) -> None:
        raise NotImplementedError("increments go to the virtual joints")

    def get_dof(self) -> int:
        return 3

    def append_to_ik_chain(self, ik_chain: list[JointNode]) -> None:
        ik_chain.extend(self.virtual_chain)
