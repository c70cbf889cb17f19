"""The joint classes of SPEC 4: JointNode and its four kinds.

State lives in scalars (``q``: radians or metres) and quaternions (``[w, x, y, z]``).
``global_transform`` (4x4, world frame) is rebuilt from them by every FK pass and never
accumulated. A joint's local matrix is ``translate(local_offset) @ motion``, where the
motion is the joint's own rotation or slide expressed in the parent's frame; at rest every
frame is world-aligned unless a fixed joint carries a quaternion.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .rotations import (
    IDENTITY_QUAT,
    axis_angle_to_matrix,
    intrinsic_xyz_to_quat,
    quat_multiply,
    quat_normalize,
    quat_to_matrix,
)

Mat4 = NDArray[np.float64]
Limits = tuple[float, float] | None

SYNC_THRESHOLD = 1e-10  # SPEC 4.3: virtual increments below this are not folded in


def _vec3(v: ArrayLike) -> NDArray[np.float64]:
    return np.array(v, dtype=float).reshape(3)


def _unit(v: ArrayLike) -> NDArray[np.float64]:
    a = _vec3(v)
    n = float(np.linalg.norm(a))
    if not np.isfinite(n) or n == 0.0:
        raise ValueError("axis must be a finite non-zero 3-vector")
    return a / n


def _clip(q: float, limits: Limits) -> float:
    if limits is None:
        return q
    lo, hi = limits
    return min(max(q, lo), hi)


class JointNode:
    """Abstract joint: a node of the scene graph (SPEC 4.1).

    ``local_offset`` is the static translation from the parent's frame (metres, parent
    frame); ``global_transform`` the cached world transform (4x4).
    """

    def __init__(self, name: str, offset: ArrayLike = (0.0, 0.0, 0.0)) -> None:
        self.name = name
        self.parent: JointNode | None = None
        self.children: list[JointNode] = []
        self.local_offset = _vec3(offset)
        self.global_transform: Mat4 = np.eye(4)
        self.spherical_parent: SphericalJoint | None = None  # set on virtual joints only

    # -- scene graph ------------------------------------------------------------------
    def add_child(self, child: JointNode) -> None:
        """Attach ``child`` below this joint and run both hooks."""
        self.children.append(child)
        self.on_child_added(child)
        child.parent = self
        child.on_parent_set(self)

    def on_child_added(self, child: JointNode) -> None:
        """Hook: a child was added (overridden by SphericalJoint)."""

    def on_parent_set(self, parent: JointNode) -> None:
        """Hook: the parent was set (overridden by SphericalJoint)."""

    def update_global_transform(self) -> None:
        """FK (SPEC 5.1): rebuild this joint's world transform, then its children's."""
        local = self.get_local_matrix()
        parent = self.parent
        self.global_transform = local if parent is None else parent.global_transform @ local
        for child in self.children:
            child.update_global_transform()

    # -- solver interface -------------------------------------------------------------
    def get_local_matrix(self) -> Mat4:
        """Local 4x4 transform (parent frame) from the current joint variables."""
        raise NotImplementedError

    def compute_jacobian_column(self, end_effector_pos: ArrayLike) -> NDArray[np.float64]:
        """6-vector ``[linear; angular]`` for the effector at ``end_effector_pos`` (world, m)."""
        raise NotImplementedError

    def apply_delta(self, delta_q: float) -> None:
        """Add ``delta_q`` (radians or metres) to the variable and clip it to the limits."""
        raise NotImplementedError

    def get_dof(self) -> int:
        """Degrees of freedom: 0, 1 or 3."""
        raise NotImplementedError

    def append_to_ik_chain(self, ik_chain: list[JointNode]) -> None:
        """Append this joint's 1-DoF solver nodes to ``ik_chain``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class _OneDofJoint(JointNode):
    """Shared state of revolute and prismatic joints: ``axis`` (unit, local), ``q``, limits."""

    def __init__(
        self, name: str, offset: ArrayLike, axis: ArrayLike, limits: Limits = None
    ) -> None:
        super().__init__(name, offset)
        self.axis = _unit(axis)
        self.q = 0.0
        self.limits: Limits = None if limits is None else (float(limits[0]), float(limits[1]))

    def world_axis(self) -> NDArray[np.float64]:
        """The joint axis in world space (unit vector)."""
        return self.global_transform[:3, :3] @ self.axis

    def apply_delta(self, delta_q: float) -> None:
        self.q = _clip(self.q + delta_q, self.limits)

    def get_dof(self) -> int:
        return 1

    def append_to_ik_chain(self, ik_chain: list[JointNode]) -> None:
        ik_chain.append(self)


class RevoluteJoint(_OneDofJoint):
    """Hinge about ``axis`` (local frame); ``q`` in radians."""

    def get_local_matrix(self) -> Mat4:
        m = np.eye(4)
        m[:3, :3] = axis_angle_to_matrix(self.axis, self.q)
        m[:3, 3] = self.local_offset
        return m

    def compute_jacobian_column(self, end_effector_pos: ArrayLike) -> NDArray[np.float64]:
        z = self.world_axis()
        p = self.global_transform[:3, 3]
        return np.concatenate((np.cross(z, np.asarray(end_effector_pos, dtype=float) - p), z))


class PrismaticJoint(_OneDofJoint):
    """Slider along ``axis`` (local frame); ``q`` in metres."""

    def get_local_matrix(self) -> Mat4:
        m = np.eye(4)
        m[:3, 3] = self.local_offset + self.q * self.axis
        return m

    def compute_jacobian_column(self, end_effector_pos: ArrayLike) -> NDArray[np.float64]:
        return np.concatenate((self.world_axis(), np.zeros(3)))


class FixedJoint(JointNode):
    """Rigid connection: rotation by ``quaternion`` first, then ``local_offset``."""

    def __init__(
        self, name: str, offset: ArrayLike = (0.0, 0.0, 0.0), quaternion: ArrayLike | None = None
    ) -> None:
        super().__init__(name, offset)
        self.quaternion = IDENTITY_QUAT.copy() if quaternion is None else quat_normalize(quaternion)

    def get_local_matrix(self) -> Mat4:
        m = np.eye(4)
        m[:3, :3] = quat_to_matrix(self.quaternion)
        m[:3, 3] = self.local_offset
        return m

    def compute_jacobian_column(self, end_effector_pos: ArrayLike) -> NDArray[np.float64]:
        warnings.warn(f"fixed joint {self.name!r} is in an IK chain", stacklevel=2)
        return np.zeros(6)

    def apply_delta(self, delta_q: float) -> None:
        """Nothing to do: a fixed joint has no variable."""

    def get_dof(self) -> int:
        return 0

    def append_to_ik_chain(self, ik_chain: list[JointNode]) -> None:
        """Skipped: a fixed joint adds no column."""


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
        m = np.eye(4)
        m[:3, :3] = quat_to_matrix(self.quaternion)
        m[:3, 3] = self.local_offset
        return m

    def update_global_transform(self) -> None:
        """Sync the virtual joints, then FK of this joint, its virtual chain and children."""
        self.sync_virtual_joints()
        local = self.get_local_matrix()
        parent = self.parent
        self.global_transform = local if parent is None else parent.global_transform @ local
        self.virtual_fix.global_transform = self.global_transform
        previous = self.global_transform
        for v in self.virtual_chain:
            v.global_transform = previous if v.q == 0.0 else previous @ v.get_local_matrix()
            previous = v.global_transform
        for child in self.children:
            child.update_global_transform()

    # -- solver interface ------------------------------------------------------------
    def compute_jacobian_column(self, end_effector_pos: ArrayLike) -> NDArray[np.float64]:
        raise NotImplementedError("a spherical joint is solved through its virtual chain")

    def apply_delta(self, delta_q: float) -> None:
        raise NotImplementedError("increments go to the virtual joints")

    def get_dof(self) -> int:
        return 3

    def append_to_ik_chain(self, ik_chain: list[JointNode]) -> None:
        ik_chain.extend(self.virtual_chain)
