"""The model (SPEC 6 Setup): joint objects built from a SkeletonDef, with T-pose and state."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import DhikError
from ..rotations import IDENTITY_QUAT, quat_normalize, quat_to_euler_xyz, quat_to_matrix
from ..solver.joints import FixedJoint, JointNode, PrismaticJoint, RevoluteJoint
from .definition import JointDef, SkeletonDef
from .spherical import SphericalJoint


def make_joint(d: JointDef) -> JointNode:
    """One joint object from its definition, in the T-pose."""
    if d.type == "revolute":
        return RevoluteJoint(d.name, d.offset, d.axis, d.limits)  # type: ignore[arg-type]
    if d.type == "prismatic":
        return PrismaticJoint(d.name, d.offset, d.axis, d.limits)  # type: ignore[arg-type]
    if d.type == "spherical":
        return SphericalJoint(d.name, d.offset, d.limits)  # type: ignore[arg-type]
    if d.type == "fixed":
        return FixedJoint(d.name, d.offset, d.quaternion)
    raise ValueError(f"unknown joint type {d.type!r}")


class Skeleton:
    """Scene graph of one skeleton: ``root``, ``joints`` by name (parents before children).

    Joint variables are local: revolute angles in radians, prismatic displacements in
    metres, spherical quaternions ``[w, x, y, z]``. World transforms are in metres.

    The joint objects are built on first use (``joints``, ``root``, ``joint``,
    ``joint_values``, ``world_transforms``), in the T-pose with the values set so far:
    a caller that only reads the definition and sets values (a robust bake of a whole
    Rigify rig, 336 joints) never pays for them.
    """

    def __init__(self, defn: SkeletonDef) -> None:
        self.defn = defn
        self._defs: dict[str, JointDef] = {d.name: d for d in defn.joints}
        self._joints: dict[str, JointNode] | None = None
        self._pending: dict[str, float | NDArray[np.float64]] = {}  # values, not yet built

    @property
    def joints(self) -> dict[str, JointNode]:
        """The joint objects by name, parents first (built on first use)."""
        if self._joints is None:
            joints: dict[str, JointNode] = {}
            for d in self.defn.joints:
                joint = make_joint(d)
                joints[d.name] = joint
                if d.parent is not None:
                    joints[d.parent].add_child(joint)
            self._joints = joints
            pending, self._pending = self._pending, {}
            for name, value in pending.items():
                _put(joints[name], value)
            self.update()
        return self._joints

    @property
    def root(self) -> JointNode:
        """The root joint object."""
        return self.joints[self.defn.root_name]

    def update(self) -> None:
        """FK: rebuild every world transform from the joint variables (nothing to do
        before the joint objects exist: they are built with theirs)."""
        if self._joints is not None:
            self.root.update_global_transform()

    def reset(self, fk: bool = True) -> None:
        """T-pose (SPEC 6): q = 0, spherical quaternions identity, original limits; FK
        (``fk=False``: the caller runs it, as ``set_joint_values`` does)."""
        self._pending = {}
        if self._joints is None:
            return
        for joint in self._joints.values():
            if isinstance(joint, SphericalJoint):
                joint.reset()
            elif isinstance(joint, RevoluteJoint | PrismaticJoint):
                joint.q = 0.0
        if fk:
            self.update()

    def tpose_values(self) -> dict[str, dict[str, Any]]:
        """SPEC 3.3 entries of every non-fixed joint in the T-pose (what ``joint_values``
        gives after ``reset``), from the definition alone."""
        euler = [float(a) for a in quat_to_euler_xyz(IDENTITY_QUAT)]
        unit = [float(c) for c in IDENTITY_QUAT]
        out: dict[str, dict[str, Any]] = {}
        for d in self.defn.joints:
            if d.type == "revolute":
                out[d.name] = {"type": "revolute", "angle": 0.0}
            elif d.type == "prismatic":
                out[d.name] = {"type": "prismatic", "displacement": 0.0}
            elif d.type == "spherical":
                out[d.name] = {"type": "spherical", "euler": list(euler), "quaternion": list(unit)}
        return out

    def leaves(self) -> list[str]:
        """Names of the joints without children."""
        parents = {d.parent for d in self.defn.joints}
        return [d.name for d in self.defn.joints if d.name not in parents]

    def default_effector(self) -> str:
        """The effector when none is named: the single leaf (DECISIONS)."""
        leaves = self.leaves()
        if len(leaves) != 1:
            raise DhikError(
                f"the skeleton has {len(leaves)} leaves ({', '.join(leaves)}): "
                "name the effector"
            )
        return leaves[0]

    def definition(self, name: str) -> JointDef:
        """The definition of the joint called ``name``; DhikError when there is none."""
        try:
            return self._defs[name]
        except KeyError:
            raise DhikError(f"no joint named {name!r} in the skeleton") from None

    def joint(self, name: str) -> JointNode:
        """The joint called ``name``; DhikError when there is none."""
        self.definition(name)
        return self.joints[name]

    def joint_values(self) -> dict[str, dict[str, Any]]:
        """SPEC 3.3 entries of every non-fixed joint (radians, metres, [w, x, y, z])."""
        out: dict[str, dict[str, Any]] = {}
        for name, j in self.joints.items():
            if isinstance(j, RevoluteJoint):
                out[name] = {"type": "revolute", "angle": float(j.q)}
            elif isinstance(j, PrismaticJoint):
                out[name] = {"type": "prismatic", "displacement": float(j.q)}
            elif isinstance(j, SphericalJoint):
                j.sync_virtual_joints()
                q = quat_normalize(j.quaternion)
                out[name] = {
                    "type": "spherical",
                    "euler": [float(a) for a in quat_to_euler_xyz(q)],
                    "quaternion": [float(c) for c in q],
                }
        return out

    def set_joint_values(self, values: dict[str, dict[str, Any]]) -> None:
        """Pose the skeleton from SPEC 3.3 entries (joints not named keep their value); FK.
        Before the joint objects exist the values wait for them, read and checked now."""
        read = [(name, _value(self.definition(name).type, entry))
                for name, entry in values.items()]
        if self._joints is None:
            self._pending.update((name, v) for name, v in read if v is not None)
            return
        for name, value in read:
            if value is not None:
                _put(self._joints[name], value)
        self.update()

    def rest_transforms(self) -> dict[str, NDArray[np.float64]]:
        """World 4x4 transform (metres) of every real joint in the T-pose (what
        ``world_transforms`` gives after ``reset``), from the definition alone: each
        joint at its parent's frame moved by its offset, turned only by a fixed joint's
        quaternion."""
        out: dict[str, NDArray[np.float64]] = {}
        for d in self.defn.joints:
            m = np.eye(4)
            if d.type == "fixed" and d.quaternion is not None:
                m[:3, :3] = quat_to_matrix(d.quaternion)
            m[:3, 3] = d.offset
            out[d.name] = m if d.parent is None else out[d.parent] @ m
        return out

    def has(self, name: str) -> bool:
        """Whether the skeleton has a joint called ``name``."""
        return name in self._defs

    def world_transforms(self) -> dict[str, NDArray[np.float64]]:
        """World 4x4 transform of every real joint (copies)."""
        return {name: j.global_transform.copy() for name, j in self.joints.items()}


def _value(kind: str, entry: dict[str, Any]) -> float | NDArray[np.float64] | None:
    """A joint's variable from its SPEC 3.3 entry: an angle (rad), a displacement (m), a
    unit quaternion ``[w, x, y, z]``; None for a fixed joint (no variable)."""
    if kind == "revolute":
        return float(entry["angle"])
    if kind == "prismatic":
        return float(entry["displacement"])
    if kind == "spherical":
        quat = np.asarray(entry.get("quaternion", IDENTITY_QUAT), dtype=float)
        big = float(np.abs(quat).max())
        if not 1e-150 < big < 1e150:  # q @ q would overflow or underflow: scale
            quat = quat / big
        return quat_normalize(quat)
    return None


def _put(joint: JointNode, value: float | NDArray[np.float64]) -> None:
    """Set ``joint``'s variable (``_value``'s), a spherical joint from its T-pose."""
    if isinstance(joint, SphericalJoint):
        joint.reset()
        joint.quaternion = np.array(value, dtype=float)
        joint.virtual_fix.quaternion = joint.quaternion.copy()
    elif isinstance(joint, RevoluteJoint | PrismaticJoint):
        joint.q = float(value)
