"""What a bake leaves beside its keys: "not converged" markers and per-frame error curves.

Markers. Each frame that missed the tolerances gets a timeline marker
``dhik: not converged (<armature>)``. The armature object keeps the names its bakes gave
markers (custom property :data:`MARKERS_PROP`), so a later bake of the same armature
replaces its own markers (also after the armature was renamed) and never those of
another armature: inside the frame range for a Current Action bake, everywhere for a New
Action bake.

Error curves. Per effector, two custom float properties on the armature object,
``dhik pos: <bone>`` (metres of armature space) and ``dhik rot: <bone>`` (radians),
carry the bake's per-frame position and orientation errors as F-curves (LINEAR, one key
per solved frame) in the armature's action, group :data:`ERROR_GROUP`: select the
armature and the Graph Editor plots them. Their keys inside the range are replaced, as
the bone keys are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

import bpy
import numpy as np

from . import keying
from .keying import replace_range

MARKER_LABEL = "not converged"
MARKERS_PROP = "dhik_markers"  # on the armature object: marker names used, one a line
ERROR_GROUP = "DHIK errors"
ERROR_KINDS = (("pos", "position", "m"), ("rot", "orientation", "rad"))
MAX_PROP_NAME = 63  # bytes: Blender's limit on custom property names


def marker_name(ob: bpy.types.Object, label: str = MARKER_LABEL) -> str:
    """The name of ``ob``'s markers of kind ``label``: ``dhik: <label> (<armature>)``."""
    return f"dhik: {label} ({ob.name})"


def _used_names(ob: bpy.types.Object) -> set[str]:
    value = ob.get(MARKERS_PROP)
    return set(str(value).splitlines()) if isinstance(value, str) else set()


def replace_markers(scene: bpy.types.Scene, ob: bpy.types.Object, frames: Iterable[int],
                    start: int, end: int, everywhere: bool = False,
                    label: str = MARKER_LABEL) -> None:  # fmt: skip
    """Remove ``ob``'s markers of kind ``label`` in ``[start, end]`` (``everywhere``:
    all of them), then mark ``frames``."""
    name = marker_name(ob, label)
    prefix = f"dhik: {label} ("
    ours = {n for n in _used_names(ob) if n.startswith(prefix)} | {name}
    markers = scene.timeline_markers
    for m in [m for m in markers if m.name in ours and (everywhere or start <= m.frame <= end)]:
        markers.remove(m)
    for f in frames:
        markers.new(name, frame=int(f))
    ob[MARKERS_PROP] = "\n".join(sorted(_used_names(ob) | {name}))


def markers_of(scene: bpy.types.Scene, ob: bpy.types.Object,
               label: str = MARKER_LABEL) -> list[int]:  # fmt: skip
    """Frames of ``ob``'s markers of kind ``label`` (sorted)."""
    prefix = f"dhik: {label} ("
    ours = {n for n in _used_names(ob) if n.startswith(prefix)} | {marker_name(ob, label)}
    return sorted(m.frame for m in scene.timeline_markers if m.name in ours)


def error_property(bone: str, kind: str, index: int) -> str:
    """The custom property holding effector ``bone``'s errors of ``kind`` ("pos" or
    "rot"): ``dhik <kind>: <bone>``, or ``dhik <kind> #<index + 1>`` when that name is
    longer than Blender allows."""
    name = f"dhik {kind}: {bone}"
    return name if len(name.encode()) <= MAX_PROP_NAME else f"dhik {kind} #{index + 1}"


def error_path(name: str) -> str:
    """The F-curve data path of custom property ``name`` on the object."""
    return f'["{bpy.utils.escape_identifier(name)}"]'


def write_error_curves(ob: bpy.types.Object, effectors: Sequence[str], frames: np.ndarray,
                       errors: np.ndarray, start: int, end: int) -> None:  # fmt: skip
    """Key each effector's per-frame errors (``errors`` (F, E, 2): position m,
    orientation rad, at ``frames`` (F,)) as F-curves of its two custom properties in
    ``ob``'s assigned action, replacing their keys in ``[start, end]``."""
    cb = keying.assigned_channelbag(ob)
    assert cb is not None, "the bake's keys are written first"
    frames = np.asarray(frames, dtype=float)
    for e, bone in enumerate(effectors):
        for k, (kind, what, unit) in enumerate(ERROR_KINDS):
            name = error_property(bone, kind, e)
            if name not in ob.keys():
                ob[name] = 0.0
            ui: Any = cast(Any, ob).id_properties_ui(name)  # (the stubs: returns None)
            ui.update(min=0.0, description=f"DHIK: effector {bone!r}'s {what} error on each "
                      f"baked frame ({unit}, armature space)")
            path = error_path(name)
            fc = cb.fcurves.find(path, index=0)
            if fc is None:
                fc = cb.fcurves.new(path, index=0)
                fc.group = cb.groups.get(ERROR_GROUP) or cb.groups.new(ERROR_GROUP)
            replace_range(fc, start, end, frames, np.asarray(errors[:, e, k], dtype=float))
