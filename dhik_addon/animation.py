"""The armature's keyed pose, read back frame by frame as animation.json frames."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import bpy
import numpy as np
from mathutils import Quaternion

from ..core.app.bake import align_quaternion_signs
from ..core.errors import DhikError
from ..core.model.skeleton import Skeleton
from .access import pose_of, scene_of
from .armature_read import read_skeleton, rig_joint_maps
from .frames import frame_loop


def _channel_rotation(pb: bpy.types.PoseBone) -> Quaternion:
    """The bone's rotation channel as a Blender quaternion, keeping its sign."""
    if pb.rotation_mode == "QUATERNION":
        return pb.rotation_quaternion
    return pb.matrix_basis.to_quaternion()


def channel_quaternion(pb: bpy.types.PoseBone) -> np.ndarray:
    """The bone's rotation channel as a quaternion (w, x, y, z), keeping its sign."""
    return np.array(_channel_rotation(pb), dtype=float)


def channel_floats(pb: bpy.types.PoseBone) -> tuple[float, ...]:
    """The bone's rotation channel as a quaternion (w, x, y, z, sign kept), then its
    location (x, y, z; the bone's rest frame, armature units): 7 plain floats (cheaper than
    arrays when read every frame)."""
    return (*_channel_rotation(pb)[:], *pb.location[:])


def read_animation(
    context: bpy.types.Context, ob: bpy.types.Object, frames: Sequence[int]
) -> list[dict[str, Any]]:
    """SPEC 3.3 frames of ``ob``'s evaluated pose at ``frames`` (radians, metres).

    Each moving joint's value is read from its bone's channels (see joint_map); what
    the joint cannot do (e.g. a twist off a revolute axis) is dropped. Spherical
    quaternions keep the previous frame's sign. The current frame is restored.
    """
    bad = [f for f in frames if f < 0]
    if bad:
        raise DhikError.at("DHIK", "frame range", f"frame {bad[0]} is negative; "
                           "animation.json frames start at 0")
    defn = read_skeleton(ob)
    maps = rig_joint_maps(ob, defn)
    skeleton = Skeleton(defn)
    scene = scene_of(context)
    bones = pose_of(ob).bones
    current = scene.frame_current
    out: list[dict[str, Any]] = []
    with frame_loop(scene):
        try:
            for f in frames:
                scene.frame_set(f)
                values = {}
                for name, jm in maps.items():
                    if jm.channel is None:
                        continue
                    pb = bones[jm.bone]
                    values[name] = jm.entry(channel_quaternion(pb), np.array(pb.location))
                skeleton.set_joint_values(values)
                out.append({"frame": int(f), "joints": skeleton.joint_values()})
        finally:
            scene.frame_set(current)
    align_quaternion_signs(out)
    return out
