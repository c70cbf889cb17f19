"""View3D > Sidebar > DHIK, and the File > Import / Export menu entries."""

from __future__ import annotations

from typing import Any

import bpy

from . import preview
from .access import layout_of, scene_of
from .props import METHOD_LABELS, DHIK_PG_effector, settings


def _bone_pickers(layout: bpy.types.UILayout, group: Any, pointer: str, bone: str,
                  text: str = "Bone") -> None:
    """``group.<pointer>`` (an object), and when it is an armature the bone picker of
    ``group.<bone>`` over its bones, as the IK constraint's Target + Bone."""
    layout.prop(group, pointer)
    ob = getattr(group, pointer)
    if ob is not None and ob.type == "ARMATURE":
        layout.prop_search(group, bone, ob.data, "bones", text=text, icon="BONE_DATA")


class DHIK_PT_panel(bpy.types.Panel):
    """Import, bake settings, bake, result and export."""

    bl_label = "DHIK"
    bl_idname = "DHIK_PT_panel"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "DHIK"

    def draw(self, context: bpy.types.Context) -> None:
        layout = layout_of(self)
        s = settings(context)
        col = layout.column(align=True)
        col.operator("dhik.import_skeleton", text="Import Skeleton", icon="ARMATURE_DATA")
        col.operator("dhik.import_targets", text="Import Targets", icon="EMPTY_ARROWS")
        col.operator("dhik.import_animation", text="Import Animation", icon="ACTION")

        col = layout.column()
        col.prop(s, "armature")
        if s.armature is not None:
            col.prop_search(s, "effector", s.armature.data, "bones")
        else:
            col.prop(s, "effector")
        _bone_pickers(col, s, "target", "target_bone")
        row = col.row(align=True)
        row.prop(s, "position_weight", text="Position")
        row.prop(s, "orientation_weight", text="Orientation")
        if s.orientation_weight == 0.0:
            col.label(text="Position only", icon="INFO")
        if s.method == "spec" and (s.position_weight, s.orientation_weight) != (1, 1):
            col.label(text="Weights other than 1 need the Robust method", icon="ERROR")
        col.prop(s, "chain_length")
        _bone_pickers(col, s, "pole_target", "pole_bone")
        if s.pole_target is not None:
            col.prop(s, "pole_angle")
        col.row().prop(s, "method", expand=True)
        col.prop(s, "cold_start")
        col.prop(s, "use_scene_range")
        if not s.use_scene_range:
            row = col.row(align=True)
            row.prop(s, "frame_start")
            row.prop(s, "frame_end")
        col.prop(s, "animation_path")
        col.label(text="Bake Into:")
        col.row().prop(s, "bake_action", expand=True)
        col.prop(s, "frame_step")
        col.prop(s, "key_reduction")
        layout.prop(s, "live_preview", toggle=True, icon="HIDE_OFF")
        if s.preview_error and not s.live_preview:
            layout.label(text=f"Preview stopped: {s.preview_error}", icon="ERROR")
        shows = preview.status(scene_of(context)) if s.live_preview else ""
        if shows:
            layout.label(text=f"Preview: {shows}",
                         icon="CHECKMARK" if shows == preview.PLANNED else "TIME")
        layout.operator("dhik.bake", icon="RENDER_ANIMATION")

        if s.has_result:
            box = layout.box()
            method = METHOD_LABELS.get(s.result_method, s.result_method)
            box.label(text=f"Method: {method}")
            box.label(text=f"Frames: {s.result_frames}")
            box.label(text=f"Converged: {s.result_converged}/{s.result_frames}",
                      icon="CHECKMARK" if s.result_converged == s.result_frames else "ERROR")
            box.label(text=f"Max position error: {s.result_max_position_error:.3g} m")
            box.label(text=f"Max orientation error: {s.result_max_orientation_error:.3g} rad")
            box.label(text=f"Keys: {s.result_keys} (key error up to {s.result_key_error:.3g})")

        col = layout.column(align=True)
        col.operator("dhik.export_skeleton", text="Export Skeleton")
        col.operator("dhik.export_targets", text="Export Targets")
        col.operator("dhik.export_animation", text="Export Animation")


class _SubPanel(bpy.types.Panel):
    """Where the DHIK sub-panels live: collapsed under the main panel (not registered)."""

    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "DHIK"
    bl_parent_id = "DHIK_PT_panel"
    bl_options = {"DEFAULT_CLOSED"}


class DHIK_UL_effectors(bpy.types.UIList):
    """One extra effector per row: its bone and its target (weights below the list)."""

    def draw_item(
        self,
        context: bpy.types.Context,
        layout: bpy.types.UILayout,
        data: Any | None,
        item: Any | None,
        icon: int | None,
        active_data: Any,
        active_property: str | None,
        index: int | None = 0,
        flt_flag: int | None = 0,
    ) -> None:
        assert isinstance(item, DHIK_PG_effector)
        row = layout.row(align=True)
        armature = settings(context).armature
        if armature is not None:
            row.prop_search(item, "bone", armature.data, "bones", text="", icon="BONE_DATA")
        else:
            row.prop(item, "bone", text="", icon="BONE_DATA")
        row.prop(item, "target", text="")
        target = item.target
        if target is not None and target.type == "ARMATURE":
            row.prop_search(item, "target_bone", target.data, "bones", text="",
                            icon="BONE_DATA")
        if item.orientation_weight == 0.0:
            row.label(text="", icon="ORIENTATION_GLOBAL")  # position only


class DHIK_PT_effectors(_SubPanel):
    """Extra effectors solved together with the main one (each with its own target)."""

    bl_label = "Extra Effectors"
    bl_idname = "DHIK_PT_effectors"

    def draw(self, context: bpy.types.Context) -> None:
        layout = layout_of(self)
        s = settings(context)
        row = layout.row()
        row.template_list("DHIK_UL_effectors", "", s, "effectors", s, "effector_index", rows=3)
        buttons = row.column(align=True)
        buttons.operator("dhik.effector_add", text="", icon="ADD")
        buttons.operator("dhik.effector_remove", text="", icon="REMOVE")
        if 0 <= s.effector_index < len(s.effectors):
            item = s.effectors[s.effector_index]
            col = layout.column()
            if s.armature is not None:
                col.prop_search(item, "bone", s.armature.data, "bones")
            else:
                col.prop(item, "bone")
            _bone_pickers(col, item, "target", "target_bone")
            col.prop(item, "position_weight")
            col.prop(item, "orientation_weight")
            col.prop(item, "chain_length")
            _bone_pickers(col, item, "pole_target", "pole_bone")
            if item.pole_target is not None:
                col.prop(item, "pole_angle")
            if item.orientation_weight == 0.0:
                col.label(text="Position only", icon="INFO")
            if s.method == "spec" and (item.position_weight, item.orientation_weight) != (1, 1):
                col.label(text="Weights other than 1 need the Robust method", icon="ERROR")


# the solver fields each method reads: damping and line search are SPEC 5.4's only (the
# robust method adapts its own damping and accepts or rejects whole steps)
SOLVER_FIELDS = {
    "robust": ("max_iterations", "position_tolerance", "orientation_tolerance"),
    "spec": ("max_iterations", "position_tolerance", "orientation_tolerance", "damping",
             "enable_line_search", "line_search_alpha", "line_search_alpha_min"),
}


class DHIK_PT_solver(_SubPanel):
    """The chosen method's solver parameters (collapsed by default)."""

    bl_label = "Solver"
    bl_idname = "DHIK_PT_solver"

    def draw(self, context: bpy.types.Context) -> None:
        s = settings(context)
        col = layout_of(self).column()
        for name in SOLVER_FIELDS.get(s.method, SOLVER_FIELDS["spec"]):
            col.prop(s, name)


def menu_import(self: bpy.types.Menu, _context: bpy.types.Context) -> None:
    layout = layout_of(self)
    layout.operator("dhik.import_skeleton", text="DHIK Skeleton (.json)")
    layout.operator("dhik.import_targets", text="DHIK Targets (.json)")
    layout.operator("dhik.import_animation", text="DHIK Animation (.json)")
    layout.operator("dhik.import_urdf", text="URDF Robot (.urdf)")


def menu_export(self: bpy.types.Menu, _context: bpy.types.Context) -> None:
    layout = layout_of(self)
    layout.operator("dhik.export_skeleton", text="DHIK Skeleton (.json)")
    layout.operator("dhik.export_targets", text="DHIK Targets (.json)")
    layout.operator("dhik.export_animation", text="DHIK Animation (.json, .npz, .csv)")
