"""Checks that stop an operator before it reads stale or unusable Blender data.

- Objects deleted with X stay alive as orphans while ``scene.dhik`` points at them;
  their transforms are frozen, so a bake against them would silently solve a still
  target. So are objects the view layer does not evaluate (disabled in viewports,
  excluded collection). :func:`require_in_scene` names them instead.
- :func:`bake_unavailable` is the reason ``dhik.bake`` is disabled (``poll_message_set``).
- :func:`check_applied_scale` recognises Apply Scale on an armature that carries dhik
  joint data (bone heads scaled against the stored offsets) and says so.
- :func:`require_kind` and :func:`check_targets_for_blender` refuse a file before an
  import creates anything: the wrong kind of dhik file, frames beyond Blender's last
  frame, numbers beyond float32.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import bpy
import numpy as np

from ..core.app.formats import detect_kind
from ..core.errors import DhikError
from ..core.model.definition import SkeletonDef
from . import keying
from .access import armature_data
from .layout import rest_frames
from .rig_checks import path_bones

REST_TOLERANCE = 1e-4  # m, as armature_read: bone heads may be off the joints this much
SCALE_KEY = "dhik_type"  # armature_build.PROP_TYPE: the bone carries stored joint data


def in_scene(scene: bpy.types.Scene, ob: bpy.types.Object) -> bool:
    """Whether ``ob`` is one of ``scene``'s objects (False for an object deleted with X)."""
    found = scene.objects.get(ob.name)
    return found is not None and found == ob


def require_in_scene(scene: bpy.types.Scene, ob: bpy.types.Object, role: str) -> None:
    """DhikError naming ``ob`` (``role``: where it is set) when it is not in ``scene``, or
    when the view layer does not evaluate it (Disable in Viewports on it or on its
    collection, or its collection excluded): then its animation does not play and a bake
    would read a frozen transform."""
    if not in_scene(scene, ob):
        raise DhikError.at("DHIK", role, f"object {ob.name!r} is not in scene {scene.name!r} "
                           "(deleted?); choose another one")
    layer = bpy.context.view_layer
    if layer is not None and not evaluated_in(layer, ob):
        raise DhikError.at("DHIK", role, f"object {ob.name!r} is not evaluated in view layer "
                           f"{layer.name!r} (disabled in viewports, or its collection is "
                           "excluded or disabled), so its animation does not play; enable it")


def evaluated_in(layer: bpy.types.ViewLayer, ob: bpy.types.Object) -> bool:
    """Whether ``layer``'s depsgraph evaluates ``ob``: not disabled in viewports, and in a
    collection reached through collections neither excluded nor disabled in viewports.
    (Hiding with the eye keeps it evaluated. ``Object.evaluated_get`` cannot tell: it may
    hand back a stale evaluated copy.)"""
    if ob.hide_viewport:
        return False

    def reaches(lc: bpy.types.LayerCollection) -> bool:
        if lc.exclude or lc.collection.hide_viewport:
            return False
        if lc.collection.objects.get(ob.name) == ob:
            return True
        return any(reaches(child) for child in lc.children)

    return reaches(layer.layer_collection)


def bake_unavailable(context: bpy.types.Context) -> str | None:
    """Why ``dhik.bake`` cannot run in ``context``, or None when it can."""
    scene = context.scene
    if scene is None:
        return "No scene"
    s = scene.dhik  # type: ignore[attr-defined]
    if context.mode not in ("OBJECT", "POSE"):
        return "Switch to Object or Pose Mode to bake"
    ob, target = s.armature, s.target
    if ob is None:
        return "Choose an armature in the DHIK panel"
    if not in_scene(scene, ob):
        return f"Armature {ob.name!r} is not in the scene (deleted?)"
    arm = ob.data
    if not isinstance(arm, bpy.types.Armature) or len(arm.bones) == 0:
        return f"Armature {ob.name!r} has no bones"
    if target is None:
        return "Choose a target object in the DHIK panel"
    if not in_scene(scene, target):
        return f"Target {target.name!r} is not in the scene (deleted?)"
    return None


TRANSFORMS = ("location", "rotation_quaternion", "rotation_euler", "rotation_axis_angle",
              "scale")


def posed_fixed_bones(
    ob: bpy.types.Object, defn: SkeletonDef, effectors: Sequence[str]
) -> list[str]:
    """Bones of fixed joints between the effectors and the root (root included) that are
    posed or animated in ``ob``'s current action. The solve takes them at rest, so where
    they move, Blender's pose differs from the solved one (a WARNING, not an error: the
    user's animation is kept as it is)."""
    on_path = set(path_bones(ob, defn, effectors))
    pose = ob.pose
    if pose is None:
        return []
    cb = keying.assigned_channelbag(ob)
    out: list[str] = []
    for j in defn.joints:
        pb = pose.bones.get(j.name)
        if j.type != "fixed" or j.name not in on_path or pb is None:
            continue
        basis = np.array(pb.matrix_basis, dtype=np.float64)
        keyed = cb is not None and any(
            cb.fcurves.find(pb.path_from_id(prop), index=i) is not None
            for prop in TRANSFORMS for i in range(4))
        if keyed or not np.allclose(basis, np.eye(4), atol=1e-9):
            out.append(j.name)
    return out


def import_unavailable(context: bpy.types.Context) -> str | None:
    """Why an import cannot run in ``context``, or None when it can."""
    if context.scene is None:
        return "No scene"
    if context.mode != "OBJECT":
        return "Switch to Object Mode to import"
    return None


def object_unavailable(
    context: bpy.types.Context, ob: bpy.types.Object | None, role: str
) -> str | None:
    """Why an export of ``ob`` (``role``: "armature" or "target object") cannot run."""
    if context.scene is None:
        return "No scene"
    if ob is None:
        return f"Select an {role} or choose one in the DHIK panel" if role[0] in "aeiou" \
            else f"Select a {role} or choose one in the DHIK panel"
    if not in_scene(context.scene, ob):
        return f"{role.capitalize()} {ob.name!r} is not in the scene (deleted?)"
    return None


def check_applied_scale(ob: bpy.types.Object, defn: SkeletonDef) -> None:
    """DhikError "armature scale was applied" when the bones carrying stored dhik data
    sit at the stored joint positions scaled per axis (Apply Scale after import).

    Does nothing when the bones are on their joints, or when no scale explains the gap
    (that is reported as a moved bone by joint_maps).
    """
    arm = armature_data(ob)
    names: list[str] = []
    for j in defn.joints:
        bone = arm.bones.get(j.name)  # None: a joint without a bone of its own
        if bone is not None and SCALE_KEY in bone.keys():
            names.append(j.name)
    if not names:
        return
    frames = rest_frames(defn)
    want = np.array([frames[n].position for n in names], dtype=np.float64)
    heads = np.array([arm.bones[n].head_local for n in names], dtype=np.float64)
    if float(np.linalg.norm(heads - want, axis=1).max()) <= REST_TOLERANCE:
        return
    den = (want**2).sum(axis=0)
    scale = np.where(den > 1e-12, (heads * want).sum(axis=0) / np.where(den > 0, den, 1.0), 1.0)
    fit = float(np.linalg.norm(heads - want * scale, axis=1).max())
    if fit > REST_TOLERANCE * max(1.0, float(np.abs(scale).max())):
        return
    if np.allclose(scale, scale[0], rtol=1e-4):
        factor = f"{scale[0]:.6g} times"
    else:
        factor = "(" + ", ".join(f"{v:.6g}" for v in scale) + ") times per axis"
    raise DhikError.at(
        f"armature {ob.name!r}", "",
        f"armature scale was applied: the bones are {factor} the size of the dhik skeleton "
        "stored on them; undo Apply Scale (keep the scale on the object) or re-import the "
        "skeleton",
    )


MAXFRAME = 1_048_574  # Blender's last frame (MAXFRAME in DNA_scene_types.h)
FLT_MAX = 3.4028234e38  # Blender keeps locations, rotations and keys as float32
KIND_ADVICE = {"skeleton": "use Import Skeleton", "targets": "use Import Targets",
               "animation": "use Import Animation"}


def require_kind(data: Any, source: str, kind: str) -> None:
    """DhikError naming the file's kind when ``data`` is not a ``kind`` file."""
    found = detect_kind(data, source)
    if found != kind:
        raise DhikError.at(source, "", f"this is {_article(found)} {found} file, not "
                           f"{_article(kind)} {kind} file; {KIND_ADVICE[found]}")


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def check_targets_for_blender(data: list, source: str) -> None:
    """DhikError for parsed-valid targets.json ``data`` that Blender cannot hold: a frame
    beyond :data:`MAXFRAME`, a position or angle beyond float32 (:data:`FLT_MAX`).
    All frames are checked at once; only a file that fails is walked item by item, to
    name the first culprit."""
    try:
        frames = np.array([item["frame"] for item in data], dtype=float)
        values = np.array([(*item["pos"], *item["euler"]) for item in data], dtype=float)
        if not (frames > MAXFRAME).any() and np.isfinite(values).all() and \
                not (np.abs(values) > FLT_MAX).any():
            return
    except (TypeError, ValueError, OverflowError):
        pass  # the walk below names the item
    for i, item in enumerate(data):
        frame = int(item["frame"])
        if frame > MAXFRAME:
            raise DhikError.at(source, f"[{i}].frame", f"{frame} is beyond Blender's last "
                               f"frame {MAXFRAME:,}")
        for key in ("pos", "euler"):
            for k, value in enumerate(item[key]):
                x = float(value)
                if not math.isfinite(x) or abs(x) > FLT_MAX:
                    raise DhikError.at(source, f"[{i}].{key}[{k}]", f"{value!r} is outside "
                                       f"Blender's float range (|x| <= {FLT_MAX:.8g})")
