"""The sidebar panel's draw (mock layout), the menus, and every operator's poll()."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import bpy


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
        "dhik.import_skeleton", "dhik.import_targets", "dhik.bake",
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
    assert {"armature", "target", "use_scene_range", "frame_start", "frame_end",
            "animation_path"} <= set(props)
    labels = " | ".join(c.kwargs["text"] for c in calls if c[0].endswith("label"))
    assert f"Frames: {s.result_frames}" in labels and "Converged:" in labels
    assert "Max position error" in labels and "Max orientation error" in labels


def test_solver_subpanel_shows_spec_parameters(addon):
    calls = _draw(addon.dhik_addon.panel.DHIK_PT_solver)
    props = [c.args[1] for c in calls if c[0].endswith(".prop")]
    assert props == ["max_iterations", "position_tolerance", "orientation_tolerance",
                     "damping", "enable_line_search", "line_search_alpha",
                     "line_search_alpha_min"]
    s = bpy.context.scene.dhik
    assert (s.max_iterations, s.enable_line_search) == (100, True)
    assert abs(s.position_tolerance - 1e-3) < 1e-9 and abs(s.orientation_tolerance - 0.1) < 1e-7
    assert abs(s.damping - 1e-4) < 1e-9 and abs(s.line_search_alpha_min - 0.01) < 1e-9


def test_menu_entries(addon):
    ui = addon.dhik_addon.panel
    layout = mock.MagicMock()
    ui.menu_import(SimpleNamespace(layout=layout), bpy.context)
    ui.menu_export(SimpleNamespace(layout=layout), bpy.context)
    assert _operators(layout.mock_calls) == [
        "dhik.import_skeleton", "dhik.import_targets",
        "dhik.export_skeleton", "dhik.export_targets", "dhik.export_animation",
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
    bpy.ops.dhik.import_skeleton(filepath=str(mixed_files[0]))
    bpy.ops.dhik.import_targets(filepath=str(mixed_files[1]))
    props = addon.dhik_addon.props
    s = bpy.context.scene.dhik
    assert props._is_armature(s, s.armature) and not props._is_armature(s, s.target)
    assert props._not_armature(s, s.target) and not props._not_armature(s, s.armature)


_RNA_KIND = {"bool": "BOOLEAN", "int": "INT", "float": "FLOAT", "str": ("STRING", "ENUM")}


def test_typed_settings_match_the_properties(addon):
    """props.py declares each property twice (typed for mypy, bpy.props for Blender): the
    typed names and kinds must be the registered ones."""
    import ast
    import inspect

    props = addon.dhik_addon.props
    tree = ast.parse(inspect.getsource(props))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef)
               and n.name == "DHIK_PG_settings")
    branch = next(n for n in cls.body if isinstance(n, ast.If))
    assert ast.unparse(branch.test) == "TYPE_CHECKING"
    typed = {n.target.id: ast.unparse(n.annotation) for n in branch.body
             if isinstance(n, ast.AnnAssign)}
    rna = {p.identifier: p.type for p in props.DHIK_PG_settings.bl_rna.properties
           if p.identifier not in ("rna_type", "name")}
    assert set(typed) == set(rna)
    for name, annotation in typed.items():
        kind = _RNA_KIND.get(annotation)
        if kind is None:
            kind = "COLLECTION" if "bpy_prop_collection" in annotation else "POINTER"
        assert rna[name] in (kind if isinstance(kind, tuple) else (kind,)), (name, annotation)
