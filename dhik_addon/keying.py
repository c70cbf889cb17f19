"""Bulk F-curve keying (Blender 4.4+), LINEAR interpolation: whole curves into a new
slotted action, or a range of an existing curve's keys replaced (:func:`replace_range`,
the keys outside it kept with every attribute).

Keys are written with ``keyframe_points.add`` + ``foreach_set`` (one call per curve and
attribute), not ``keyframe_insert`` per key. Channelbags are reached through the
layered-action API (``Action.layers[0].strips[0].channelbag(slot)``), which 4.4, 4.5 and
5.0 share; the ``bpy_extras.anim_utils`` helpers differ between them and
``Action.fcurves`` is gone in 5.0.
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

# Keyframe attributes kept as they were for keys outside the range (foreach_get/set).
_KEY_FLOATS = {"co": 2, "handle_left": 2, "handle_right": 2, "back": 1, "amplitude": 1,
               "period": 1}
_KEY_ENUMS = ("interpolation", "handle_left_type", "handle_right_type", "easing", "type")
_KEY_BOOLS = ("select_control_point", "select_left_handle", "select_right_handle")
# what ``keyframe_points.add`` gives a new point as :func:`_new_keys` would set it (easing
# and elastic values zero, AUTO_CLAMPED handles, a KEYFRAME, selected): a curve's first
# keys skip them (tested against setting everything)
_ADDED = frozenset({"back", "amplitude", "period", "handle_left_type", "handle_right_type",
                    "easing", "type", *_KEY_BOOLS,
                    # auto-clamped: ``FCurve.update`` sets them, whatever they were
                    "handle_left", "handle_right"})


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


# ------------------------------------------------ replacing a range of an F-curve's keys


def _float_default(prop: str) -> float:
    rna = bpy.types.Keyframe.bl_rna.properties[prop]
    assert isinstance(rna, bpy.types.FloatProperty)
    return float(rna.default)


# a new key's easing values and enums (looked up once, not per curve)
_NEW_FLOATS = {name: _float_default(name) for name in ("back", "amplitude", "period")}
_NEW_ENUMS = {name: _enum_value(bpy.types.Keyframe, name, item) for name, item in (
    ("interpolation", "LINEAR"), ("handle_left_type", "AUTO_CLAMPED"),
    ("handle_right_type", "AUTO_CLAMPED"), ("easing", "AUTO"), ("type", "KEYFRAME"))}


def _read_keys(fc: bpy.types.FCurve) -> dict[str, np.ndarray]:
    """Every kept attribute of ``fc``'s keyframe points, as flat arrays."""
    n = len(fc.keyframe_points)
    out: dict[str, np.ndarray] = {}
    for name, width in _KEY_FLOATS.items():
        arr = np.empty(n * width, dtype=np.float32)
        fc.keyframe_points.foreach_get(name, arr)
        out[name] = arr.reshape(n, width)
    for name in (*_KEY_ENUMS, *_KEY_BOOLS):
        arr_i = np.empty(n, dtype=np.int32)
        fc.keyframe_points.foreach_get(name, arr_i)
        out[name] = arr_i
    return out


def _new_keys(frames: np.ndarray, values: np.ndarray) -> dict[str, np.ndarray]:
    """Attributes of new LINEAR keys (handles on the key; Blender sets them on update),
    selected, as ``keyframe_points.add``, a New Action bake and Blender's Bake Action
    leave new keys."""
    n = len(frames)
    co = np.column_stack([frames, values]).astype(np.float32)
    out: dict[str, np.ndarray] = {"co": co, "handle_left": co.copy(), "handle_right": co.copy()}
    for name, default in _NEW_FLOATS.items():
        out[name] = np.full((n, 1), default, dtype=np.float32)
    for name, value in _NEW_ENUMS.items():
        out[name] = np.full(n, value, dtype=np.int32)
    for name in _KEY_BOOLS:
        out[name] = np.ones(n, dtype=np.int32)
    return out


def replace_range(
    fc: bpy.types.FCurve, start: float, end: float, frames: np.ndarray, values: np.ndarray
) -> None:
    """Replace ``fc``'s keys in ``[start, end]`` by LINEAR keys ``(frames, values)``; the
    keys outside the range keep every attribute (value, handles, interpolation ...)."""
    kps = fc.keyframe_points
    co = np.empty(len(kps) * 2, dtype=np.float32)
    kps.foreach_get("co", co)
    outside = (co[0::2] < start) | (co[0::2] > end)
    new = _new_keys(frames, values)
    if outside.any():  # keys outside the range keep every attribute
        old = _read_keys(fc)
        merged = {k: np.concatenate([old[k][outside], new[k]]) for k in old}
    else:  # all in the range (a bake over the same frames): only new keys
        merged = new
    order = np.argsort(merged["co"][:, 0], kind="stable")
    total = len(order)
    fresh = len(kps) == 0  # every point new: the attributes ``add`` gives are left alone
    if total > len(kps):
        kps.add(total - len(kps))
    while len(kps) > total:
        kps.remove(kps[len(kps) - 1], fast=True)
    for name, arr in merged.items():
        if not (fresh and name in _ADDED):
            kps.foreach_set(name, np.ascontiguousarray(arr[order]).ravel())
    fc.update()
