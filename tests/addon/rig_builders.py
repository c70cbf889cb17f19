"""Rigs as a rigger builds them in Blender, for the whole-character tests (issue 18).

Armature space = world (the armature object sits at the origin unless a test moves it);
metres and radians. Every rig here is made with Blender's own operators and data (edit
bones, pose channels, keyframe_insert), and every target is Blender's own evaluated
bone: the tests judge a bake by what Blender then shows, never by dhik's numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import bpy
import numpy as np
from mathutils import Quaternion, Vector

# A biped's lower body: the hips are a root bone with free location and rotation (a
# floating base); each leg a thigh (not connected, location locked: it stays on the
# hips), shin and foot (connected). Bones point down the leg; the knee bends forward.
BIPED = [
    # name, head, tail, parent, connected
    ("hips", (0.0, 0.0, 1.0), (0.0, 0.0, 1.2), None, False),
    ("thigh.L", (0.1, 0.0, 0.95), (0.1, -0.03, 0.52), "hips", False),
    ("shin.L", (0.1, -0.03, 0.52), (0.1, 0.0, 0.1), "thigh.L", True),
    ("foot.L", (0.1, 0.0, 0.1), (0.1, -0.15, 0.02), "shin.L", True),
    ("thigh.R", (-0.1, 0.0, 0.95), (-0.1, -0.03, 0.52), "hips", False),
    ("shin.R", (-0.1, -0.03, 0.52), (-0.1, 0.0, 0.1), "thigh.R", True),
    ("foot.R", (-0.1, 0.0, 0.1), (-0.1, -0.15, 0.02), "shin.R", True),
]
LEG = ("thigh", "shin", "foot")


def build_bones(name: str, bones: Iterable[tuple[str, Any, Any, str | None, bool]]
                ) -> bpy.types.Object:  # fmt: skip
    """An armature object ``name`` at the origin with ``bones`` (name, head, tail, parent,
    connected), linked and active, in Object Mode; every pose bone in QUATERNION mode."""
    arm = bpy.data.armatures.new(name)
    ob = bpy.data.objects.new(name, arm)
    bpy.context.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    for bone, head, tail, parent, connected in bones:
        eb = arm.edit_bones.new(bone)
        eb.head, eb.tail = head, tail
        if parent is not None:
            eb.parent = arm.edit_bones[parent]
            eb.use_connect = connected
    bpy.ops.object.mode_set(mode="OBJECT")
    for pb in ob.pose.bones:
        pb.rotation_mode = "QUATERNION"
    return ob


def build_biped(name: str = "biped") -> bpy.types.Object:
    """:data:`BIPED`, thighs' location locked (the hips alone translate)."""
    ob = build_bones(name, BIPED)
    for side in "LR":
        ob.pose.bones[f"thigh.{side}"].lock_location = (True, True, True)
    return ob


def world_to_bone(pb: bpy.types.PoseBone, v: Any) -> Vector:
    """A world (= armature space) direction as the bone's rest-frame components: what its
    location channels take (pose = rest T(location) R S, at rest)."""
    return pb.bone.matrix_local.to_3x3().inverted() @ Vector(v)


def world_turn(pb: bpy.types.PoseBone, axis: Any, angle: float) -> Quaternion:
    """A rotation about a world axis (rad) as the bone's rotation channel (at rest)."""
    b = pb.bone.matrix_local.to_quaternion()
    return b.inverted() @ Quaternion(Vector(axis), angle) @ b


def key_channels(ob: bpy.types.Object, frames: Iterable[int],
                 pose: Callable[[int], dict[str, dict[str, Any]]]) -> None:  # fmt: skip
    """Key ``pose(f)`` (bone -> {channel: value}) on each frame (Blender's keyframe_insert,
    its default interpolation)."""
    for f in frames:
        for bone, channels in pose(f).items():
            pb = ob.pose.bones[bone]
            for prop, value in channels.items():
                setattr(pb, prop, value)
                pb.keyframe_insert(prop, frame=f)


def snapped_targets(ob: bpy.types.Object, bones: list[str], frames: list[int],
                    pose: Callable[[int], dict[str, dict[str, Any]]] | None = None
                    ) -> dict[str, bpy.types.Object]:  # fmt: skip
    """Per bone an Empty keyed on every frame with the bone's evaluated world matrix (its
    orientation: what a bake's target means) while ``pose(f)`` is set on the bones on top
    of their animation; the bones ``pose`` names are put back at rest afterwards."""
    scene = bpy.context.scene
    empties = {}
    for bone in bones:
        empty = bpy.data.objects.new(f"goal_{bone}", None)
        bpy.context.collection.objects.link(empty)
        empty.rotation_mode = "XYZ"
        empties[bone] = empty
    touched: set[str] = set()
    for f in frames:
        scene.frame_set(f)
        for name, channels in (pose(f) if pose else {}).items():
            touched.add(name)
            for prop, value in channels.items():
                setattr(ob.pose.bones[name], prop, value)
        bpy.context.view_layer.update()
        for bone, empty in empties.items():
            m = ob.matrix_world @ ob.pose.bones[bone].matrix
            loc, rot, _scale = m.decompose()
            empty.location = loc
            empty.rotation_euler = rot.to_euler("XYZ", empty.rotation_euler)
            empty.keyframe_insert("location", frame=f)
            empty.keyframe_insert("rotation_euler", frame=f)
    for name in touched:
        pb = ob.pose.bones[name]
        pb.location, pb.rotation_quaternion, pb.scale = (0, 0, 0), (1, 0, 0, 0), (1, 1, 1)
    scene.frame_set(frames[0])
    return empties


def set_effectors(ob: bpy.types.Object, empties: dict[str, bpy.types.Object],
                  chain_length: int, start: int, end: int) -> None:  # fmt: skip
    """``scene.dhik``: the armature, the first bone of ``empties`` as the main effector,
    the others as extra rows, each with ``chain_length`` bones; frames ``start..end``."""
    s = bpy.context.scene.dhik
    (main, target), *rest = empties.items()
    s.armature, s.effector, s.target, s.chain_length = ob, main, target, chain_length
    for bone, empty in rest:
        assert bpy.ops.dhik.effector_add() == {"FINISHED"}
        row = s.effectors[s.effector_index]
        row.bone, row.target, row.chain_length = bone, empty, chain_length
    s.use_scene_range = False
    s.frame_start, s.frame_end = start, end


def misses(ob: bpy.types.Object, empties: dict[str, bpy.types.Object], frames: Iterable[int]
           ) -> tuple[float, float]:  # fmt: skip
    """The largest position (m) and orientation (rad) gap between each bone's evaluated
    world matrix and its Empty over ``frames``: what Blender shows."""
    worst_p = worst_r = 0.0
    for f in frames:
        bpy.context.scene.frame_set(f)
        for bone, empty in empties.items():
            m = np.array(ob.matrix_world @ ob.pose.bones[bone].matrix, dtype=float)
            t = np.array(empty.matrix_world, dtype=float)
            worst_p = max(worst_p, float(np.linalg.norm(m[:3, 3] - t[:3, 3])))
            worst_r = max(worst_r, rotation_angle(t[:3, :3] @ _orthonormal(m[:3, :3]).T))
    return worst_p, worst_r


def rotation_angle(r: np.ndarray) -> float:
    """The angle (rad) of the 3x3 rotation ``r``, in float64 and exact near 0 (a
    mathutils Quaternion is float32: its ``angle`` reads every turn below about 7e-4 rad
    as 0)."""
    vee = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]]) / 2
    return math.atan2(float(np.linalg.norm(vee)), (float(np.trace(r)) - 1) / 2)


def _orthonormal(m: np.ndarray) -> np.ndarray:
    u, _s, vt = np.linalg.svd(m)
    return u @ vt


def fcurves(ob: bpy.types.Object) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """Every F-curve of the armature's action (slotted or not): its keyframe points."""
    ad = ob.animation_data
    if ad is None or ad.action is None:
        return {}
    action = ad.action
    curves = action.fcurves if hasattr(action, "fcurves") and action.fcurves else [
        fc for layer in action.layers for strip in layer.strips
        for bag in strip.channelbags for fc in bag.fcurves]
    return {(fc.data_path, fc.array_index): [tuple(k.co) for k in fc.keyframe_points]
            for fc in curves}


def bone_curves(curves: dict[tuple[str, int], Any], bone: str) -> dict[tuple[str, int], Any]:
    """The F-curves of ``curves`` on pose bone ``bone``."""
    return {k: v for k, v in curves.items() if k[0].startswith(f'pose.bones["{bone}"].')}
