"""Target empties <-> targets.json keyframes, and per-frame target matrices for a bake.

Keyframe ``pos`` is world space in metres, ``euler`` XYZ (``Rz Ry Rx``) in degrees; the
empty uses rotation mode 'XYZ' in radians. Keys are LINEAR, so Blender's playback is
the spec's channel-by-channel linear interpolation, and before the first key the first
key holds (constant extrapolation), as DECISIONS asks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import bpy
import numpy as np
from mathutils import Euler, Matrix

from ..core.errors import DhikError
from ..core.model.definition import Keyframe
from . import keying
from .access import collection_of, scene_of

POS_DECIMALS = 7  # 0.1 micrometre: below float32 resolution of the keyed values
EULER_DECIMALS = 5  # degrees


def create_target_empty(
    context: bpy.types.Context, keyframes: Sequence[Keyframe], name: str
) -> bpy.types.Object:
    """New 'ARROWS' empty in the active collection, keyed at every keyframe (LINEAR)."""
    ob = bpy.data.objects.new(name, None)
    ob.empty_display_type = "ARROWS"
    ob.rotation_mode = "XYZ"
    first = keyframes[0]
    ob.location = first.pos
    ob.rotation_euler = [math.radians(a) for a in first.euler]
    collection_of(context).objects.link(ob)
    frames = [k.frame for k in keyframes]
    _action, cb = keying.new_action(ob, f"{name}_targets")
    keying.write_vector(cb, "location", frames, np.array([k.pos for k in keyframes]), "Object")
    eul = np.radians(np.array([k.euler for k in keyframes], dtype=float))
    keying.write_vector(cb, "rotation_euler", frames, eul, "Object")
    return ob


def world_keyframes(
    context: bpy.types.Context, ob: bpy.types.Object, frames: Sequence[int]
) -> list[Keyframe]:
    """``ob``'s evaluated world pose at each frame as keyframes (m, degrees XYZ).

    Each Euler triple is the one nearest to the object's own XYZ rotation channels at
    that frame (so an unparented empty gives back its keyed angles, beyond +-180
    degrees included), or to the previous frame's angles for other rotation modes.
    The scene's current frame is restored.
    """
    bad = [f for f in frames if f < 0]
    if bad:
        raise DhikError.at(f"object {ob.name!r}", "", f"frame {bad[0]} is negative; "
                           "targets.json frames start at 0")
    scene, depsgraph = scene_of(context), context.evaluated_depsgraph_get()
    current = scene.frame_current
    previous = Euler()
    out: list[Keyframe] = []
    try:
        for f in frames:
            scene.frame_set(f)
            ev = ob.evaluated_get(depsgraph)
            loc, rot, _scale = ev.matrix_world.decompose()
            near = ev.rotation_euler.copy() if ev.rotation_mode == "XYZ" else previous
            previous = rot.to_matrix().to_euler("XYZ", near)
            x, y, z = (round(float(v), POS_DECIMALS) for v in np.asarray(loc, dtype=float))
            ax, ay, az = (
                round(math.degrees(float(a)), EULER_DECIMALS)
                for a in np.asarray(previous, dtype=float)
            )
            out.append(Keyframe(int(f), (x, y, z), (ax, ay, az)))
    finally:
        scene.frame_set(current)
    return out


def _rigid(m: Matrix) -> np.ndarray:
    """4x4 numpy rotation + translation of ``m`` (scale removed)."""
    loc, rot, _scale = m.decompose()
    out = np.eye(4)
    out[:3, :3] = np.array(rot.to_matrix(), dtype=float)
    out[:3, 3] = np.array(loc, dtype=float)
    return out


def armature_space_tracks(
    context: bpy.types.Context, targets: Sequence[bpy.types.Object], armature: bpy.types.Object,
    frames: Sequence[int],
) -> list[list[tuple[int, np.ndarray]]]:
    """Per target, ``(frame, 4x4)``: its world pose in the armature's space at each frame.

    Position is ``armature.matrix_world^-1 @ p`` (metres of armature space, so an
    object scale scales the target distance); rotation is the target's rotation
    relative to the armature object's (scale removed). All targets are read in one pass
    over the frames; the current frame is restored.
    """
    scene, depsgraph = scene_of(context), context.evaluated_depsgraph_get()
    current = scene.frame_current
    out: list[list[tuple[int, np.ndarray]]] = [[] for _ in targets]
    try:
        for f in frames:
            scene.frame_set(f)
            inverse = armature.evaluated_get(depsgraph).matrix_world.inverted_safe()
            for track, target in zip(out, targets, strict=True):
                local = inverse @ target.evaluated_get(depsgraph).matrix_world
                track.append((int(f), _rigid(local)))
    finally:
        scene.frame_set(current)
    return out
