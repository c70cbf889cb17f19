"""The live preview's hold on the bones: their channels set as a bake keys them, and the
channels it sets saved before and written back after (``scene.dhik.preview_saved``)."""

from __future__ import annotations

import json
from typing import Any

import bpy
import numpy as np

from .access import pose_of
from .bake_job import BakeRig
from .bake_keys import REST, bone_channels, held_props, rotation_prop
from .props import scene_settings

CHANNELS = ("location", "rotation_quaternion", "rotation_euler", "rotation_axis_angle",
            "scale")  # what is saved and restored per bone


def pose_bones(rig: BakeRig, values: dict[str, dict[str, Any]]) -> None:
    """Set the solved bones' channels to ``values`` (SPEC 3.3 entries of every joint on
    the paths) as a bake keys them (:func:`~.bake_keys.bone_channels` of one frame: each
    bone's rotation mode, Euler angles continued from the current ones, a bone's
    translation joints on its location); their other transform channels at rest, as a
    bake holds them."""
    bones = pose_of(rig.armature).bones
    names = [n for n in rig.solved if n in values and rig.maps[n].channel is not None]
    if not names:
        return
    before = {}
    for n in names:
        if rig.maps[n].channel != "location":
            pb = bones[rig.maps[n].bone]
            before[n] = np.array(getattr(pb, rotation_prop(pb.rotation_mode)), dtype=float)
    for bone, covered, prop, _kind, rows in bone_channels(
            rig.armature, rig.maps, [{"frame": 0, "joints": values}], names, before,
            rig.bone_owners):
        pb = bones[bone]
        if prop is not None:
            setattr(pb, prop, rows[0].tolist())
        for held in held_props(pb, covered):
            setattr(pb, held, REST[held])


def save_channels(scene: bpy.types.Scene, rig: BakeRig) -> None:
    """Keep the channels of the bones the preview sets in ``scene.dhik.preview_saved``.

    Channels already saved for the same armature are kept: a file saved while previewing
    (or an undo step) still restores the pose from before the preview."""
    s = scene_settings(scene)
    bones = pose_of(rig.armature).bones
    keyed = dict.fromkeys(rig.maps[n].bone for n in rig.solved)  # bones, in order
    saved = {name: {prop: [float(v) for v in getattr(bones[name], prop)] for prop in CHANNELS}
             for name in keyed if name in bones}
    if s.preview_saved:
        earlier = json.loads(s.preview_saved)
        if earlier.get("armature") == rig.armature.name:
            saved.update(earlier["bones"])
    s.preview_saved = json.dumps({"armature": rig.armature.name, "bones": saved})


def restore_channels(scene: bpy.types.Scene) -> None:
    """Write the saved channels back (bones and armature that still exist) and forget them."""
    s = getattr(scene, "dhik", None)
    if s is None or not s.preview_saved:
        return
    data = json.loads(s.preview_saved)
    s.preview_saved = ""
    ob = bpy.data.objects.get(data["armature"])
    if ob is None or ob.type != "ARMATURE" or ob.pose is None:
        return
    bones = ob.pose.bones
    for name, channels in data["bones"].items():
        pb = bones.get(name)
        if pb is not None:
            for prop, value in channels.items():
                setattr(pb, prop, value)
