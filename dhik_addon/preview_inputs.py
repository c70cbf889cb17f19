"""What the live preview watches (``preview.py``): the settings and the rig it solves
with, as signatures (a change restarts it), and whether a frame's inputs are those its
plan read (m, rad, quaternion parts)."""

from __future__ import annotations

from typing import Any

import bpy
import numpy as np

from .props import DHIK_PG_settings
from .rig_fingerprint import rig_fingerprint

# scene.dhik properties that do not change what the preview solves (the others, when
# changed, restart it), besides the last bake's results (``result_*``)
NOT_SOLVED = {"live_preview", "preview_saved", "preview_error", "animation_path",
              "bake_action", "frame_step", "key_reduction", "use_scene_range",
              "frame_start", "frame_end", "effector_index", "cold_start", "has_result"}
SAME = 1e-6  # inputs this close are the plan's (see same_inputs)


def rig_signature(ob: bpy.types.Object | None) -> bytes:
    """The armature's bones as the rig's read sees them (``rig_fingerprint``: a change,
    e.g. after Edit Mode or to a location lock, reads the rig again)."""
    if ob is None or not isinstance(ob.data, bpy.types.Armature) or ob.pose is None:
        return b""
    return rig_fingerprint(ob.data, ob.pose)


def solve_signature(s: DHIK_PG_settings) -> tuple[Any, ...]:
    """Every setting the solve depends on (objects by identity), rows included, and the
    armature's bones."""

    def values(group: Any) -> tuple[Any, ...]:
        out: list[Any] = []
        for prop in group.bl_rna.properties:
            name = prop.identifier
            if name == "rna_type" or name in NOT_SOLVED or name.startswith("result_"):
                continue
            value = getattr(group, name)
            if prop.type == "POINTER" and isinstance(value, bpy.types.ID):
                value = value.as_pointer()
            elif prop.type == "COLLECTION":
                value = tuple(values(item) for item in value)
            elif prop.type in ("FLOAT", "INT", "BOOLEAN") and getattr(prop, "is_array", False):
                value = tuple(value)
            out.append((name, value))
        return tuple(out)

    return values(s), rig_signature(s.armature)


def same_inputs(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """The same inputs to float32 rounding: a plan may have read its targets from their
    F-curves (``target_curves``) and a frame reads Blender's evaluated float32 matrices
    (they agree within about 1e-7 m and rad)."""
    return len(a) == len(b) and all(x.shape == y.shape and np.allclose(x, y, rtol=SAME, atol=SAME)
                                    for x, y in zip(a, b, strict=True))
