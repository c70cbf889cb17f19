"""``dhik.import_animation``: an animation.json (``dhik bake``, ``dhik bake-many``) onto
the armature, keyed as a bake keys it.

The file must fit the armature: every frame names exactly the armature's moving joints
(those of its skeleton.json, Export Skeleton) with their types. Anything else is one
ERROR naming the file, the JSON path and the problem, and nothing changes.

The keys follow a bake's rules (bake_keys, the same key planner): each bone keeps its
rotation mode (Euler of any order, continuous; quaternions without sign flips;
axis-angle), LINEAR keys on the file's frames, into the armature's current action
(inside the file's frame range only, the keys before the range continued) or a new
action (``action``, as the bake's Bake Into). Spherical joints are read from their
quaternion (authoritative, DECISIONS).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import bpy
from bpy.props import EnumProperty, StringProperty
from bpy_extras.io_utils import ImportHelper

from ..core.app.formats import parse_animation
from ..core.app.jsonio import load_json
from ..core.errors import DhikError
from ..core.model.definition import SkeletonDef
from .access import scene_of
from .armature_read import joint_maps, read_skeleton
from .bake_keys import (
    KeyPlan,
    check_current_action,
    plan_keys,
    values_before,
    write_current,
    write_new,
)
from .props import BAKE_ACTION_ITEMS, active_armature
from .safety import FLT_MAX, import_unavailable, object_unavailable, require_kind

if TYPE_CHECKING:
    from .access import OperatorResult


def check_fits(frames: Sequence[dict[str, Any]], defn: SkeletonDef, source: str,
               armature: str) -> None:  # fmt: skip
    """DhikError (``source``, JSON path, problem) for the first frame that does not name
    exactly the moving joints of ``defn`` with their types, or holds a value Blender
    cannot key (beyond float32)."""
    types = {j.name: j.type for j in defn.joints}
    moving = [j.name for j in defn.joints if j.type != "fixed"]
    if not frames:
        raise DhikError.at(source, "frames", "has no frame")
    for i, frame in enumerate(frames):
        joints = frame["joints"]
        path = f"frames[{i}].joints"
        for name, entry in joints.items():
            where = f"{path}[{name!r}]"
            kind = types.get(name)
            if kind is None:
                raise DhikError.at(source, where, f"armature {armature!r} has no joint "
                                   f"{name!r} (the file is of another rig)")
            if kind == "fixed":
                raise DhikError.at(source, where, f"{name!r} is a fixed joint of armature "
                                   f"{armature!r}: it has no value")
            if entry["type"] != kind:
                raise DhikError.at(source, f"{where}.type", f"is {entry['type']!r}, but "
                                   f"{name!r} is a {kind} joint of armature {armature!r}")
            for key in ("angle", "displacement"):
                value = entry.get(key)
                if value is not None and not abs(float(value)) <= FLT_MAX:
                    raise DhikError.at(source, f"{where}.{key}", f"{value} is beyond what "
                                       "Blender keys hold (float32)")
        missing = [n for n in moving if n not in joints]
        if missing:
            names = ", ".join(repr(n) for n in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise DhikError.at(source, path, f"joint(s) {names}{more} of armature "
                               f"{armature!r} missing (animation.json holds every moving "
                               "joint in every frame)")


def key_animation(ob: bpy.types.Object, frames: Sequence[dict[str, Any]], source: str,
                  action: str) -> tuple[KeyPlan, list[str]]:  # fmt: skip
    """Check ``frames`` against armature ``ob`` and key them (``action``: "CURRENT" or
    "NEW"); the key plan and the joints keyed. DhikError before anything changes."""
    defn = read_skeleton(ob)
    check_fits(frames, defn, source, ob.name)
    maps = joint_maps(ob, defn)
    joints = [j.name for j in defn.joints if j.type != "fixed"]
    if action == "CURRENT":
        check_current_action(ob)
    before = values_before(ob, joints, frames[0]["frame"]) if action == "CURRENT" else None
    plan = plan_keys(ob, maps, frames, joints, 1, 0.0, before)
    if action == "NEW":
        write_new(ob, plan)
    else:
        write_current(ob, plan)
    return plan, joints


class DHIK_OT_import_animation(bpy.types.Operator, ImportHelper):
    """Key the armature with an animation.json (from dhik bake or bake-many), as a bake
    keys it"""

    bl_idname = "dhik.import_animation"
    bl_label = "Import DHIK Animation (.json)"
    bl_options = {"REGISTER", "UNDO"}

    if TYPE_CHECKING:
        filepath: str  # ImportHelper's StringProperty
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})  # type: ignore[valid-type]
    action: EnumProperty(  # type: ignore[valid-type]
        name="Into", items=BAKE_ACTION_ITEMS, default="CURRENT",
        description="Which action receives the keys (as a bake's Bake Into)",
    )

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        problem = import_unavailable(context) or object_unavailable(
            context, active_armature(context), "armature")
        if problem is not None:
            cls.poll_message_set(problem)
        return problem is None

    def execute(self, context: bpy.types.Context) -> OperatorResult:
        ob = active_armature(context)
        assert ob is not None  # poll()
        try:
            data = load_json(self.filepath)
            require_kind(data, self.filepath, "animation")
            frames = parse_animation(data, self.filepath)
            plan, joints = key_animation(ob, frames, self.filepath, self.action)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        fps = data.get("fps") if isinstance(data, dict) else None
        scene = scene_of(context)
        scene_fps = scene.render.fps / scene.render.fps_base
        if isinstance(fps, (int, float)) and not isinstance(fps, bool) and math.isfinite(
                fps) and fps > 0 and abs(fps - scene_fps) > 1e-6 * fps:
            self.report({"WARNING"}, f"{self.filepath}: baked at {fps:g} fps, the scene runs "
                        f"at {scene_fps:g}: keys are on the file's frame numbers")
        self.report({"INFO"}, f"Imported {len(frames)} frames ({plan.start}..{plan.end}) onto "
                    f"{ob.name!r}: {plan.key_count} keys on {len(joints)} joints")
        return {"FINISHED"}
