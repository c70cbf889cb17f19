"""File operators: skeleton.json, targets.json and animation.json in and out.

Every file is validated by the core before anything is created, and any DhikError
becomes an ERROR report with ``{'CANCELLED'}``, the scene left as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import bpy
from bpy.props import BoolProperty, EnumProperty, StringProperty
from bpy_extras.io_utils import ExportHelper, ImportHelper

from ..core.app.arrays import array_writer, output_format
from ..core.app.blas_threads import one_blas_thread
from ..core.app.collector import collector_paused
from ..core.app.filesets import write_files
from ..core.app.formats import (
    parse_skeleton,
    parse_targets,
    save_animation,
    save_skeleton,
    save_targets,
)
from ..core.app.jsonio import load_json
from ..core.app.urdf import load_urdf
from ..core.errors import DhikError
from . import bone_refs
from .access import armature_data, scene_fps, scene_of
from .animation import read_animation
from .armature_build import create_armature
from .armature_read import read_skeleton, skeleton_notes
from .props import active_armature, active_target, settings
from .safety import (
    check_targets_for_blender,
    import_unavailable,
    object_unavailable,
    require_kind,
)
from .targets import bone_to_joint, create_target_empty, target_bone
from .targets_export import export_targets

if TYPE_CHECKING:
    from .access import OperatorResult


def _scene_name(path: str, default: str) -> str:
    """``arm7`` for ``.../arm7/skeleton.json`` (the default file name), else the file stem."""
    p = Path(path)
    return (p.parent.name or default) if p.stem == default else p.stem


class _JsonImport(ImportHelper):
    if TYPE_CHECKING:
        filepath: str  # ImportHelper's StringProperty
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        problem = import_unavailable(context)
        if problem is not None:
            cls.poll_message_set(problem)
        return problem is None


class _JsonExport(ExportHelper):
    if TYPE_CHECKING:
        filepath: str  # ExportHelper's StringProperty
    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})  # type: ignore[valid-type]
    default_name = "file.json"

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> OperatorResult:
        if not self.filepath:
            self.filepath = self.default_name
        result: OperatorResult = ExportHelper.invoke(self, context, event)
        return result


class DHIK_OT_import_skeleton(bpy.types.Operator, _JsonImport):
    """Create an armature from a skeleton.json: one bone per joint"""

    bl_idname = "dhik.import_skeleton"
    bl_label = "Import DHIK Skeleton (.json)"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: bpy.types.Context) -> OperatorResult:
        try:
            data = load_json(self.filepath)
            require_kind(data, self.filepath, "skeleton")
            defn = parse_skeleton(data, self.filepath)
            ob = create_armature(context, defn, _scene_name(self.filepath, "skeleton"),
                                 self.filepath)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        _make_current(context, ob)
        self.report({"INFO"}, f"Imported {len(defn.joints)} joints as {ob.name!r}")
        return {"FINISHED"}


def _make_current(context: bpy.types.Context, ob: bpy.types.Object) -> None:
    """The panel's armature becomes ``ob``; its effector the single leaf, if there is one."""
    s = settings(context)
    s.armature = ob
    leaves = [b.name for b in armature_data(ob).bones if not b.children]
    s.effector = leaves[0] if len(leaves) == 1 else ""


class DHIK_OT_import_urdf(bpy.types.Operator, _JsonImport):
    """Create an armature from a URDF robot: one bone per joint, named as in the URDF"""

    bl_idname = "dhik.import_urdf"
    bl_label = "Import URDF Robot (.urdf)"
    bl_options = {"REGISTER", "UNDO"}
    filename_ext = ".urdf"  # the file browser and poll of the JSON importers, URDF files
    filter_glob: StringProperty(default="*.urdf", options={"HIDDEN"})  # type: ignore[valid-type]

    def execute(self, context: bpy.types.Context) -> OperatorResult:
        try:
            defn, warnings = load_urdf(self.filepath)
            ob = create_armature(context, defn, Path(self.filepath).stem or "robot",
                                 self.filepath)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        _make_current(context, ob)
        for warning in warnings:  # mimic joints imported as independent ones, locked joints
            self.report({"WARNING"}, warning)
        moving = sum(j.type != "fixed" for j in defn.joints)
        self.report({"INFO"}, f"Imported {len(defn.joints)} joints ({moving} moving) as "
                              f"{ob.name!r}")
        return {"FINISHED"}


class DHIK_OT_export_skeleton(bpy.types.Operator, _JsonExport):
    """Write the armature as a skeleton.json (exact for an imported armature)"""

    bl_idname = "dhik.export_skeleton"
    bl_label = "Export DHIK Skeleton (.json)"
    bl_options = {"REGISTER", "UNDO"}
    default_name = "skeleton.json"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        problem = object_unavailable(context, active_armature(context), "armature")
        if problem is not None:
            cls.poll_message_set(problem)
        return problem is None

    def execute(self, context: bpy.types.Context) -> OperatorResult:
        ob = active_armature(context)
        assert ob is not None  # poll()
        try:
            save_skeleton(read_skeleton(ob), self.filepath)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        for note in skeleton_notes(ob):  # Blender IK settings kept only approximately
            self.report({"WARNING"}, f"Approximate: {note}")
        self.report({"INFO"}, f"Wrote {self.filepath}")
        return {"FINISHED"}


class DHIK_OT_import_targets(bpy.types.Operator, _JsonImport):
    """Create an empty keyed at every targets.json keyframe (LINEAR)"""

    bl_idname = "dhik.import_targets"
    bl_label = "Import DHIK Targets (.json)"
    bl_options = {"REGISTER", "UNDO"}

    set_frame_range: BoolProperty(  # type: ignore[valid-type]
        name="Set Frame Range", default=True,
        description="Set the scene's range to 0 .. last keyframe (the range dhik solves)",
    )
    bone: StringProperty(  # type: ignore[valid-type]
        name="Bone", default="",
        description="Bone whose orientation the empty shows; the file holds its joint's "
        "frames (empty: the panel's effector)",
    )

    def execute(self, context: bpy.types.Context) -> OperatorResult:
        # a full collection walks all of Blender's objects; OpenBLAS threads stall
        with collector_paused(), one_blas_thread():
            return self._execute(context)

    def _execute(self, context: bpy.types.Context) -> OperatorResult:
        try:
            data = load_json(self.filepath)
            require_kind(data, self.filepath, "targets")
            keyframes = parse_targets(data, self.filepath)
            check_targets_for_blender(data, self.filepath)
            bone = self.bone or target_bone(context, None)
            to_joint = bone_to_joint(context, bone)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        name = f"{_scene_name(self.filepath, 'targets')}_target"
        objects = {o.as_pointer() for o in bpy.data.objects}
        actions = {a.as_pointer() for a in bpy.data.actions}
        armature = settings(context).armature
        try:
            ob = create_target_empty(context, keyframes, name, to_joint, armature)
        except Exception:  # nothing half-made stays behind
            for a in [a for a in bpy.data.actions if a.as_pointer() not in actions]:
                bpy.data.actions.remove(a)
            for o in [o for o in bpy.data.objects if o.as_pointer() not in objects]:
                bpy.data.objects.remove(o)
            raise
        settings(context).target = ob
        if self.set_frame_range:
            scene = scene_of(context)
            scene.frame_start = 0
            scene.frame_end = keyframes[-1].frame
        if to_joint is None:
            self.report({"WARNING"}, "No armature or effector chosen: the empty shows the "
                        "file's joint frames, not the effector bone's orientation")
        space = f" in armature {armature.name!r}'s space" if armature is not None else ""
        self.report({"INFO"}, f"Imported {len(keyframes)} keyframes as {ob.name!r}{space}")
        return {"FINISHED"}


class DHIK_OT_export_targets(bpy.types.Operator, _JsonExport):
    """Write the target object's world pose as targets.json keyframes"""

    bl_idname = "dhik.export_targets"
    bl_label = "Export DHIK Targets (.json)"
    bl_options = {"REGISTER", "UNDO"}
    default_name = "targets.json"

    every_frame: BoolProperty(  # type: ignore[valid-type]
        name="Every Frame", default=False,
        description="A keyframe at every frame of the range instead of at the object's keys",
    )

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        problem = object_unavailable(context, active_target(context), "target object")
        if problem is not None:
            cls.poll_message_set(problem)
        return problem is None

    def execute(self, context: bpy.types.Context) -> OperatorResult:
        ob = active_target(context)
        assert ob is not None  # poll()
        armature = settings(context).armature
        try:
            frames = None
            if self.every_frame:
                start, end = settings(context).frame_range(scene_of(context))
                frames = list(range(start, end + 1))
            effector, bone = _exported_target(context, ob)
            to_joint = bone_to_joint(context, effector)
            out = export_targets(context, ob, bone, armature, to_joint, frames)
            save_targets(out.keyframes, self.filepath)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        what = f"{ob.name!r}" + (f" bone {bone!r}" if bone else "")
        space = f"armature {armature.name!r}'s space" if armature is not None else "world space"
        self.report({"INFO"}, f"Wrote {len(out.keyframes)} keyframes of {what} to "
                    f"{self.filepath} ({space})")
        if out.added:
            self.report({"INFO"}, f"{out.added} of them are frames between the target's "
                        f"{out.keys} keys: dhik bake interpolates targets.json linearly in "
                        "its joint frame, and there the target moves otherwise (Bezier or "
                        "other non-linear keys, or channels in another frame)")
        return {"FINISHED"}


def _exported_target(context: bpy.types.Context, ob: bpy.types.Object) -> tuple[str, str]:
    """``(effector bone, target bone)`` for exporting target object ``ob``: the main
    row's when ``ob`` is the panel's target, else those of the extra row whose target
    it is, else the main effector and no bone. Renamed bones are followed."""
    s = settings(context)
    if ob is not s.target:
        for row in s.effectors:
            if row.target is ob:
                bone = bone_refs.current(ob, row.target_bone, row.target_bone_tag) \
                    if ob.type == "ARMATURE" else ""
                return bone_refs.current(s.armature, row.bone, row.bone_tag), bone
        return target_bone(context, None), ""
    bone = bone_refs.current(ob, s.target_bone, s.target_bone_tag) \
        if ob.type == "ARMATURE" else ""
    return target_bone(context, None), bone


ANIMATION_FORMATS = [
    ("AUTO", "From Extension", "animation.json, or arrays for a .npz or .csv file name"),
    ("JSON", "animation.json", "SPEC 3.3's file, with the scene's frame rate as \"fps\""),
    ("NPZ", "NumPy Arrays (.npz)", "frames x joints arrays for robot learning: joint names "
     "in skeleton order, root pose, fps, quaternions w, x, y, z"),
    ("CSV", "CSV Table (.csv)", "the same arrays as one table, a header row and # lines"),
]


class DHIK_OT_export_animation(bpy.types.Operator, _JsonExport):
    """Write the armature's keyed pose over the bake's frame range: animation.json, or
    frames x joints arrays (.npz, .csv) at the scene's frame rate"""

    bl_idname = "dhik.export_animation"
    bl_label = "Export DHIK Animation (.json, .npz, .csv)"
    bl_options = {"REGISTER", "UNDO"}
    default_name = "animation.json"
    filter_glob: StringProperty(  # type: ignore[valid-type]
        default="*.json;*.npz;*.csv", options={"HIDDEN"})
    file_format: EnumProperty(  # type: ignore[valid-type]
        name="Format", items=ANIMATION_FORMATS, default="AUTO",
        description="What to write; the frame rate is the scene's (Output > Frame Rate)")

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        problem = object_unavailable(context, active_armature(context), "armature")
        if problem is not None:
            cls.poll_message_set(problem)
        return problem is None

    def check(self, context: bpy.types.Context) -> bool:
        """The file browser's name follows the chosen format's extension."""
        wanted = {"JSON": ".json", "NPZ": ".npz", "CSV": ".csv"}.get(self.file_format)
        if wanted is None:
            return False
        path = Path(self.filepath)
        if path.suffix.lower() == wanted:
            return False
        self.filepath = str(path.with_suffix(wanted))
        return True

    def execute(self, context: bpy.types.Context) -> OperatorResult:
        ob = active_armature(context)
        assert ob is not None  # poll()
        scene = scene_of(context)
        start, end = settings(context).frame_range(scene)
        given = None if self.file_format == "AUTO" else self.file_format.lower()
        fps = scene_fps(scene)
        try:
            fmt = output_format(given, self.filepath)
            frames = read_animation(context, ob, range(start, end + 1))
            if fmt == "json":
                save_animation(frames, self.filepath, fps)
            else:
                writer = array_writer(fmt, read_skeleton(ob), frames, fps, self.filepath)
                write_files([(self.filepath, writer)])
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Wrote {len(frames)} frames ({fmt}, {fps:g} fps) to "
                              f"{self.filepath}")
        return {"FINISHED"}
