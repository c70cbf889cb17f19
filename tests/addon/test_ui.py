"""The sidebar panel's draw (mock layout), the menus, and every operator's poll()."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import bpy
import pytest


def _draw(panel_cls) -> list:
    layout = mock.MagicMock()
    panel_cls.draw(SimpleNamespace(layout=layout), bpy.context)
    return layout.mock_calls


def _operators(calls) -> list[str]:
    return [c.args[0] for c in calls if c[0].endswith("operator")]


def test_panel_draws_settings_operators_and_result(addon, mixed_files, tmp_path):
    ui = addon.dhik_addon.panel
    calls = _draw(ui.DHIK_PT_panel)
    assert _operators(calls) == [
        "dhik.import_skeleton", "dhik.import_targets", "dhik.import_animation", "dhik.bake",
        "dhik.export_skeleton", "dhik.export_targets", "dhik.export_animation",
    ]
    assert not any(c[0].endswith("prop_search") for c in calls)  # no armature yet

    bpy.ops.dhik.import_skeleton(filepath=str(mixed_files[0]))
    bpy.ops.dhik.import_targets(filepath=str(mixed_files[1]))
    s = bpy.context.scene.dhik
    s.use_scene_range = False
    s.animation_path = str(tmp_path / "a.json")
    bpy.ops.dhik.bake()
    calls = _draw(ui.DHIK_PT_panel)
    search = [c for c in calls if c[0].endswith("prop_search")]
    assert search and search[0].args[1:] == ("effector", s.armature.data, "bones")
    props = [c.args[1] for c in calls if c[0].endswith(".prop")]
    assert {"armature", "target", "method", "cold_start", "use_scene_range", "frame_start",
            "frame_end", "animation_path"} <= set(props)
    labels = " | ".join(c.kwargs["text"] for c in calls if c[0].endswith("label"))
    assert "Method: Robust" in labels
    assert f"Frames: {s.result_frames}" in labels and "Converged:" in labels
    assert "Max position error" in labels and "Max orientation error" in labels


def test_result_names_the_method_that_ran(addon, mixed_files, tmp_path):
    bpy.ops.dhik.import_skeleton(filepath=str(mixed_files[0]))
    bpy.ops.dhik.import_targets(filepath=str(mixed_files[1]))
    s = bpy.context.scene.dhik
    s.method = "spec"
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    s.method = "robust"  # changed after the bake: the result still says what ran
    labels = [c.kwargs["text"] for c in _draw(addon.dhik_addon.panel.DHIK_PT_panel)
              if c[0].endswith("label")]
    assert "Method: Spec" in labels and s.result_method == "spec"
    assert "method spec" in s.result_summary


def test_effector_rows_add_remove_and_draw(addon, mixed_files):
    ui = addon.dhik_addon.panel
    s = bpy.context.scene.dhik
    ops = bpy.ops.dhik
    assert ops.effector_add.poll() and not ops.effector_remove.poll()
    calls = _draw(ui.DHIK_PT_effectors)
    lists = [c for c in calls if c[0].endswith("template_list")]
    assert lists and lists[0].args == ("DHIK_UL_effectors", "", s, "effectors", s,
                                       "effector_index")
    assert _operators(calls) == ["dhik.effector_add", "dhik.effector_remove"]
    assert not any(c[0].endswith(".prop") for c in calls)  # no row yet

    bpy.ops.dhik.import_skeleton(filepath=str(mixed_files[0]))
    assert ops.effector_add() == ops.effector_add() == {"FINISHED"}
    assert len(s.effectors) == 2 and s.effector_index == 1
    row = s.effectors[1]
    assert (row.bone, row.target, row.position_weight, row.orientation_weight) == (
        "", None, 1.0, 1.0)
    row.bone, row.orientation_weight = "Elbow", 0.0
    calls = _draw(ui.DHIK_PT_effectors)
    search = [c for c in calls if c[0].endswith("prop_search")]
    assert search and search[0].args[:4] == (row, "bone", s.armature.data, "bones")
    props = [c.args[1] for c in calls if c[0].endswith(".prop")]
    assert props == ["target", "position_weight", "orientation_weight", "chain_length",
                     "pole_target"]
    labels = [c.kwargs["text"] for c in calls if c[0].endswith("label")]
    assert labels == ["Position only"]
    s.method = "spec"
    labels = [c.kwargs["text"] for c in _draw(ui.DHIK_PT_effectors) if c[0].endswith("label")]
    assert "Weights other than 1 need the Robust method" in labels

    layout = mock.MagicMock()
    ui.DHIK_UL_effectors.draw_item(None, bpy.context, layout, s, row, 0, s, "effector_index", 1)
    drawn = [c.args[:2] for c in layout.mock_calls
             if c[0].endswith("prop_search") or c[0].endswith(".prop")]
    assert drawn == [(row, "bone"), (row, "target")]

    assert ops.effector_remove() == {"FINISHED"}
    assert len(s.effectors) == 1 and s.effector_index == 0
    assert ops.effector_remove() == {"FINISHED"}
    assert len(s.effectors) == 0 and not ops.effector_remove.poll()


def test_solver_subpanel_shows_spec_parameters(addon):
    s = bpy.context.scene.dhik
    s.method = "spec"  # damping and line search are the spec method's (test_solver_panel)
    calls = _draw(addon.dhik_addon.panel.DHIK_PT_solver)
    props = [c.args[1] for c in calls if c[0].endswith(".prop")]
    assert props == ["max_iterations", "position_tolerance", "orientation_tolerance",
                     "damping", "enable_line_search", "line_search_alpha",
                     "line_search_alpha_min"]
    assert (s.max_iterations, s.enable_line_search) == (100, True)
    assert abs(s.position_tolerance - 1e-3) < 1e-9 and abs(s.orientation_tolerance - 0.1) < 1e-7
    assert abs(s.damping - 1e-4) < 1e-9 and abs(s.line_search_alpha_min - 0.01) < 1e-9


def test_menu_entries(addon):
    ui = addon.dhik_addon.panel
    layout = mock.MagicMock()
    ui.menu_import(SimpleNamespace(layout=layout), bpy.context)
    ui.menu_export(SimpleNamespace(layout=layout), bpy.context)
    assert _operators(layout.mock_calls) == [
        "dhik.import_skeleton", "dhik.import_targets", "dhik.import_animation",
        "dhik.import_urdf", "dhik.export_skeleton", "dhik.export_targets", "dhik.export_animation",
    ]
    assert ui.menu_import in bpy.types.TOPBAR_MT_file_import._dyn_ui_initialize()
    assert ui.menu_export in bpy.types.TOPBAR_MT_file_export._dyn_ui_initialize()


def test_operator_polls(mixed_files):
    ops = bpy.ops.dhik
    assert ops.import_skeleton.poll() and ops.import_targets.poll()
    assert not ops.export_skeleton.poll() and not ops.export_animation.poll()
    assert not ops.export_targets.poll() and not ops.bake.poll()

    ops.import_skeleton(filepath=str(mixed_files[0]))
    assert ops.export_skeleton.poll() and ops.export_animation.poll()
    assert not ops.bake.poll()  # no target yet
    ops.import_targets(filepath=str(mixed_files[1]))
    assert ops.export_targets.poll() and ops.bake.poll()

    ob = bpy.context.scene.dhik.armature
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    try:
        assert not ops.import_skeleton.poll() and not ops.bake.poll()
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")


def test_armature_and_target_pickers_filter_objects(addon, mixed_files):
    """The armature picker lists armatures only; a target may be any object, the baked
    armature too (one of its control bones: test_bone_targets.py)."""
    bpy.ops.dhik.import_skeleton(filepath=str(mixed_files[0]))
    bpy.ops.dhik.import_targets(filepath=str(mixed_files[1]))
    props = addon.dhik_addon.props
    s = bpy.context.scene.dhik
    assert props._is_armature(s, s.armature) and not props._is_armature(s, s.target)
    target = props.DHIK_PG_settings.bl_rna.properties["target"]
    assert target.fixed_type.identifier == "Object"
    s.target = s.armature
    assert s.target is s.armature


_RNA_KIND = {"bool": "BOOLEAN", "int": "INT", "float": "FLOAT", "str": ("STRING", "ENUM")}


@pytest.mark.parametrize("class_name", ["DHIK_PG_settings", "DHIK_PG_effector"])
def test_typed_settings_match_the_properties(addon, class_name):
    """props.py declares each property twice (typed for mypy, bpy.props for Blender): the
    typed names and kinds must be the registered ones."""
    import ast
    import inspect

    props = addon.dhik_addon.props
    tree = ast.parse(inspect.getsource(props))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    branch = next(n for n in cls.body if isinstance(n, ast.If))
    assert ast.unparse(branch.test) == "TYPE_CHECKING"
    typed = {n.target.id: ast.unparse(n.annotation) for n in branch.body
             if isinstance(n, ast.AnnAssign)}
    rna = {p.identifier: p.type for p in getattr(props, class_name).bl_rna.properties
           if p.identifier not in ("rna_type", "name")}
    assert set(typed) == set(rna)
    for name, annotation in typed.items():
        kind = _RNA_KIND.get(annotation)
        if kind is None:
            kind = "COLLECTION" if "bpy_prop_collection" in annotation else "POINTER"
        assert rna[name] in (kind if isinstance(kind, tuple) else (kind,)), (name, annotation)
