"""Bulk F-curve keying into a new slotted action (Blender 4.4+), LINEAR interpolation.

Keys are written with ``keyframe_points.add`` + ``foreach_set`` (one call per curve),
not ``keyframe_insert`` per key. Channelbags are reached through the layered-action API
(``Action.layers[0].strips[0].channelbag(slot)``), which 4.4, 4.5 and 5.0 share; the
``bpy_extras.anim_utils`` helpers differ between them and ``Action.fcurves`` is gone in 5.0.
"""

from __future__ import annotations

from collections.abc import Sequence

import bpy
import numpy as np
from numpy.typing import ArrayLike


def _enum_value(struct: type[bpy.types.bpy_struct], prop: str, item: str) -> int:
    """The integer value ``foreach_set`` takes for enum ``item`` of ``struct.prop``."""
    rna = struct.bl_rna.properties[prop]
    assert isinstance(rna, bpy.types.EnumProperty)
    return rna.enum_items[item].value


LINEAR = _enum_value(bpy.types.Keyframe, "interpolation", "LINEAR")


def ensure_channelbag(
    action: bpy.types.Action, slot: bpy.types.ActionSlot
) -> bpy.types.ActionChannelbag:
    """``slot``'s channelbag on the first keyframe strip of the first layer (made if missing)."""
    layer = action.layers[0] if action.layers else action.layers.new("Layer")
    strip = layer.strips[0] if layer.strips else layer.strips.new(type="KEYFRAME")
    assert isinstance(strip, bpy.types.ActionKeyframeStrip)
    return strip.channelbag(slot, ensure=True)


def assigned_channelbag(ob: bpy.types.Object) -> bpy.types.ActionChannelbag | None:
    """The channelbag of ``ob``'s assigned action and slot, or None (no action, slot or keys)."""
    ad = ob.animation_data
    if ad is None or ad.action is None or ad.action_slot is None:
        return None
    for layer in ad.action.layers:
        for strip in layer.strips:
            if isinstance(strip, bpy.types.ActionKeyframeStrip):
                found: bpy.types.ActionChannelbag | None = strip.channelbag(ad.action_slot)
                if found is not None:
                    return found
    return None


def new_action(
    ob: bpy.types.Object, name: str
) -> tuple[bpy.types.Action, bpy.types.ActionChannelbag]:
    """Assign a new action with one slot for ``ob``; the action and the slot's channelbag."""
    action = bpy.data.actions.new(name)
    slot = action.slots.new(id_type="OBJECT", name=ob.name)
    ad = ob.animation_data or ob.animation_data_create()
    ad.action = action
    ad.action_slot = slot
    return action, ensure_channelbag(action, slot)


def write_curve(
    channelbag: bpy.types.ActionChannelbag,
    data_path: str,
    index: int,
    frames: Sequence[float],
    values: ArrayLike,
    group: str,
) -> bpy.types.FCurve:
    """One F-curve with a LINEAR key at each ``(frame, value)``."""
    # fcurves.new(..., group_name=) exists from 5.0 on; assigning the group works in 4.4+.
    fc = channelbag.fcurves.new(data_path, index=index)
    fc.group = channelbag.groups.get(group) or channelbag.groups.new(group)
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
    cb = assigned_channelbag(ob)
    if cb is None:
        return []
    frames: set[int] = set()
    for fc in cb.fcurves:
        co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
        fc.keyframe_points.foreach_get("co", co)
        frames.update(int(round(float(f))) for f in co[0::2])
    return sorted(frames)
