"""The joint classes of SPEC 4: JointNode and its four kinds.

State lives in scalars (``q``: radians or metres) and quaternions (``[w, x, y, z]``).
``global_transform`` (4x4, world frame) is rebuilt from them by every FK pass and never
accumulated. A joint's local matrix is ``translate(local_offset) @ motion``, where the
motion is the joint's own rotation or slide expressed in the parent's frame; at rest every
frame is world-aligned unless a fixed joint carries a quaternion.
"""

from __future__ import annotations

import math
import warnings
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..rotations import IDENTITY_QUAT, axis_angle_to_matrix, quat_normalize, quat_to_matrix

Mat4 = NDArray[np.float64]
Limits = tuple[float, float] | None

SYNC_THRESHOLD = 1e-10  # SPEC 4.3: virtual increments below this are not folded in

_EYE4 = np.eye(4)  # copied, never handed out: np.eye costs 6x a copy (many joints)


def eye4() -> Mat4:
    """A new 4x4 identity."""
    return _EYE4.copy()


def _vec3(v: ArrayLike) -> NDArray[np.float64]:
    return np.array(v, dtype=float).reshape(3)


def _unit(v: ArrayLike) -> NDArray[np.float64]:
    a = _vec3(v)
    n = math.sqrt(float(a @ a))
    if not math.isfinite(n) or n == 0.0:
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
        self.global_transform: Mat4 = eye4()
        self.spherical_parent: CompositeJoint | None = None  # set on virtual joints only

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
        """FK (SPEC 5.1): rebuild this joint's world transform, then its descendants'.

        Parents before children, depth first in child order, with a stack rather than
        recursion: any depth of chain, in time linear in the number of joints.
        """
        stack: list[JointNode] = [self]
        while stack:
            node = stack.pop()
            node.update_own_transform()
            stack.extend(reversed(node.children))

    def update_own_transform(self) -> None:
        """This joint's world transform from its parent's (current) and its local one."""
        local = self.get_local_matrix()
        parent = self.parent
        self.global_transform = local if parent is None else parent.global_transform @ local

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
        m = eye4()
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
        m = eye4()
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
        m = eye4()
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


class CompositeJoint(Protocol):
    """A model-layer joint the solver sees only through its virtual 1-DoF nodes.

    SPEC 4.3's SphericalJoint (model/spherical.py): the solver saves and restores its
    ``quaternion`` ``[w, x, y, z]`` (rotation relative to the parent, as carried by
    ``virtual_fix``) around a rejected line-search trial.
    """

    name: str
    quaternion: NDArray[np.float64]
    virtual_fix: FixedJoint
