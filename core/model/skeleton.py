"""The model (SPEC 6 Setup): joint objects built from a SkeletonDef, with T-pose and state."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import DhikError
from ..rotations import IDENTITY_QUAT, quat_normalize, quat_to_euler_xyz
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
    """

    def __init__(self, defn: SkeletonDef) -> None:
        self.defn = defn
        self.joints: dict[str, JointNode] = {}
        for d in defn.joints:
            joint = make_joint(d)
            self.joints[d.name] = joint
            if d.parent is not None:
                self.joints[d.parent].add_child(joint)
        self.root = self.joints[defn.root_name]
        self.update()

    def update(self) -> None:
        """FK: rebuild every world transform from the joint variables."""
        self.root.update_global_transform()

    def reset(self, fk: bool = True) -> None:
        """T-pose (SPEC 6): q = 0, spherical quaternions identity, original limits; FK
        (``fk=False``: the caller runs it, as ``set_joint_values`` does)."""
        for joint in self.joints.values():
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
        return [name for name, j in self.joints.items() if not j.children]

    def default_effector(self) -> str:
        """The effector when none is named: the single leaf (DECISIONS)."""
        leaves = self.leaves()
        if len(leaves) != 1:
            raise DhikError(
                f"the skeleton has {len(leaves)} leaves ({', '.join(leaves)}): "
                "name the effector"
            )
        return leaves[0]

    def joint(self, name: str) -> JointNode:
        """The joint called ``name``; DhikError when there is none."""
        try:
            return self.joints[name]
        except KeyError:
            raise DhikError(f"no joint named {name!r} in the skeleton") from None

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
        """Pose the skeleton from SPEC 3.3 entries (joints not named keep their value); FK."""
        for name, entry in values.items():
            j = self.joint(name)
            if isinstance(j, RevoluteJoint):
                j.q = float(entry["angle"])
            elif isinstance(j, PrismaticJoint):
                j.q = float(entry["displacement"])
            elif isinstance(j, SphericalJoint):
                j.reset()
                quat = np.asarray(entry.get("quaternion", IDENTITY_QUAT), dtype=float)
                big = float(np.abs(quat).max())
                if not 1e-150 < big < 1e150:  # q @ q would overflow or underflow: scale
                    quat = quat / big
                j.quaternion = quat_normalize(quat)
                j.virtual_fix.quaternion = j.quaternion.copy()
        self.update()

    def world_transforms(self) -> dict[str, NDArray[np.float64]]:
        """World 4x4 transform of every real joint (copies)."""
        return {name: j.global_transform.copy() for name, j in self.joints.items()}
