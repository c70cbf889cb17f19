"""Bulk F-curve keying into a new slotted action (Blender 4.4+), LINEAR interpolation.

Keys are written with ``keyframe_points.add`` + ``foreach_set`` (one call per curve),
not ``keyframe_insert`` per key.
"""

from __future__ import annotations

from collections.abc import Sequence

import bpy
import numpy as np
from bpy_extras import anim_utils

LINEAR = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value


def new_action(ob: bpy.types.Object, name: str) -> bpy.types.ActionChannelbag:
    """Assign a new action with one slot for ``ob``; return the slot's channelbag."""
    action = bpy.data.actions.new(name)
    slot = action.slots.new(id_type="OBJECT", name=ob.name)
    ad = ob.animation_data or ob.animation_data_create()
    ad.action = action
    ad.action_slot = slot
    return anim_utils.action_ensure_channelbag_for_slot(action, slot)


def write_curve(
    channelbag: bpy.types.ActionChannelbag,
    data_path: str,
    index: int,
    frames: Sequence[float],
    values: Sequence[float],
    group: str,
) -> bpy.types.FCurve:
    """One F-curve with a LINEAR key at each ``(frame, value)``."""
    fc = channelbag.fcurves.new(data_path, index=index, group_name=group)
    n = len(frames)
    co = np.empty((n, 2), dtype=np.float32)
    co[:, 0] = frames
    co[:, 1] = values
    fc.keyframe_points.add(n)
    fc.keyframe_points.foreach_set("co", co.ravel())
    fc.keyframe_points.foreach_set("interpolation", [LINEAR] * n)
    fc.update()
    return fc


def write_vector(
    channelbag: bpy.types.ActionChannelbag,
    data_path: str,
    frames: Sequence[float],
    values: np.ndarray,
    group: str,
) -> None:
    """One F-curve per column of ``values`` (shape ``(len(frames), k)``)."""
    for i in range(values.shape[1]):
        write_curve(channelbag, data_path, i, frames, values[:, i], group)


def key_frames(ob: bpy.types.Object) -> list[int]:
    """Sorted distinct frames of the keys in ``ob``'s assigned action slot."""
    ad = ob.animation_data
    if ad is None or ad.action is None:
        return []
    cb = anim_utils.animdata_get_channelbag_for_assigned_slot(ad)
    if cb is None:
        return []
    frames: set[int] = set()
    for fc in cb.fcurves:
        co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
        fc.keyframe_points.foreach_get("co", co)
        frames.update(int(round(float(f))) for f in co[0::2])
    return sorted(frames)
