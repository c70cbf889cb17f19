"""Joint values <-> pose-bone channels (no bpy; numpy float64).

Frames (notes/blender-extension.md section 5). For joint j with bone rest rotation
``B`` (``Bone.matrix_local``, armature space) and joint rest rotation ``C`` (the core's
T-pose world rotation; identity unless a fixed joint above carries a quaternion), the
posed bone is the joint's world transform times a constant rotation ``C^T B``:

    pose_bone.matrix = W_joint @ (C^T B)      (armature space, metres)

so the bone head is the joint position and the joint's world rotation is
``pose_rotation @ B^T @ C``. With ``M = B^T C`` (joint frame -> bone frame) the pose
channels (``PoseBone.matrix_basis``, bone rest frame) are:

- spherical: ``rotation_quaternion = M q M^T`` (``q`` the joint's local quaternion);
- revolute:  ``rotation_quaternion = axis_angle(M axis, angle)`` (radians);
- prismatic: ``location = M axis * displacement`` (metres; ``B`` is the frame the
  bone's location moves in: its own rest rotation, or its parent's when the bone's
  Local Location is off);
- fixed: identity channels.

A joint without a bone of its own (a bone's ``.tx``/``.ty``/``.tz`` translation joints)
maps onto the channels of the bone it belongs to (:attr:`JointMap.bone`); the bone's
location is the sum of its prismatic joints' ``M axis * displacement``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core.rotations import (
    axis_angle_to_quat,
    matrix_to_quat,
    quat_conjugate,
    quat_multiply,
)

Vec = NDArray[np.float64]


@dataclass(frozen=True)
class JointMap:
    """How one joint's value maps onto its bone's channels.

    ``to_bone`` is ``M = B^T C`` (3x3, joint frame -> bone rest frame); ``axis`` is the
    unit joint axis in the joint's local frame (revolute/prismatic, else None). ``bone``
    is the bone whose channels carry the joint (its own name unless it has no bone);
    ``read_axis`` (prismatic) the vector whose dot product with the bone's location is
    the displacement (the bone axis itself unless several joints share the location).
    """

    name: str
    type: str
    axis: Vec | None
    to_bone: Vec
    bone_name: str | None = None
    read_axis: Vec | None = None

    @property
    def bone(self) -> str:
        """The bone whose channels carry this joint."""
        return self.bone_name if self.bone_name is not None else self.name

    def bone_axis(self) -> Vec:
        """The joint axis in the bone's rest frame, ``M axis`` (revolute/prismatic)."""
        assert self.axis is not None, self.name
        return self.to_bone @ self.axis

    @property
    def channel(self) -> str | None:
        """The pose channel that carries the joint's value, None for fixed joints."""
        if self.type in ("spherical", "revolute"):
            return "rotation_quaternion"
        if self.type == "prismatic":
            return "location"
        return None

    def _to_bone_quat(self) -> Vec:
        return matrix_to_quat(self.to_bone)

    def channel_value(self, entry: dict[str, Any]) -> Vec:
        """Channel value (quaternion w,x,y,z or location in m) of an animation.json entry."""
        if self.type == "spherical":
            m = self._to_bone_quat()
            q = np.asarray(entry["quaternion"], dtype=float)
            return quat_multiply(quat_multiply(m, q), quat_conjugate(m))
        assert self.axis is not None
        bone_axis = self.to_bone @ self.axis
        if self.type == "revolute":
            return axis_angle_to_quat(bone_axis, float(entry["angle"]))
        if self.type == "prismatic":
            return bone_axis * float(entry["displacement"])
        raise ValueError(f"joint {self.name!r} ({self.type}) has no channel")

    def channel_values(self, values: Vec) -> Vec:
        """:meth:`channel_value` of many frames at once: ``values`` are the joint's angles
        (F,) (rad), displacements (F,) (m) or quaternions (F, 4); rows of quaternions
        (F, 4) ``[w, x, y, z]`` or locations (F, 3) (m)."""
        v = np.asarray(values, dtype=float)
        if self.type == "spherical":
            m = self._to_bone_quat()  # quat_multiply takes components batch last
            return quat_multiply(quat_multiply(m, v.T), quat_conjugate(m)).T
        assert self.axis is not None
        bone_axis = self.to_bone @ self.axis
        if self.type == "revolute":
            norm = math.sqrt(float(bone_axis @ bone_axis))
            if norm == 0.0:
                return np.tile([1.0, 0.0, 0.0, 0.0], (len(v), 1))
            h = 0.5 * v
            return np.column_stack([np.cos(h), np.outer(np.sin(h) / norm, bone_axis)])
        if self.type == "prismatic":
            return np.outer(v, bone_axis)
        raise ValueError(f"joint {self.name!r} ({self.type}) has no channel")

    def entry(self, rotation_quaternion: Vec, location: Vec) -> dict[str, Any]:
        """Animation.json-style value read back from the bone's channels.

        Spherical gives ``{"quaternion"}``; revolute ``{"angle"}`` (the twist about the
        axis, radians); prismatic ``{"displacement"}`` (the location along the axis, m).
        Components off the joint's degrees of freedom are dropped.
        """
        if self.type == "spherical":
            m = self._to_bone_quat()
            q = quat_multiply(quat_multiply(quat_conjugate(m), rotation_quaternion), m)
            return {"type": "spherical", "quaternion": [float(c) for c in q]}
        assert self.axis is not None
        bone_axis = self.to_bone @ self.axis
        if self.type == "revolute":
            w = float(rotation_quaternion[0])
            s = float(np.dot(rotation_quaternion[1:], bone_axis))
            return {"type": "revolute", "angle": 2.0 * math.atan2(s, w)}
        if self.type == "prismatic":
            read = bone_axis if self.read_axis is None else self.read_axis
            return {"type": "prismatic", "displacement": float(np.dot(location, read))}
        raise ValueError(f"joint {self.name!r} ({self.type}) has no value")


def align_signs(quats: Vec) -> Vec:
    """Flip quaternions (rows, w x y z) so each has a non-negative dot with the previous."""
    out = np.array(quats, dtype=float)
    for i in range(1, len(out)):
        if float(out[i] @ out[i - 1]) < 0.0:
            out[i] = -out[i]
    return out
