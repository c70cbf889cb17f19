"""Issue 8, point 7 on real bpy: every fault is one clear ERROR and the scene stays as it was.

Each test takes a snapshot of what a bake or an import could change (objects, actions
and all their keys, pose channels, markers, frame range and current frame) before the
faulty operation and compares it afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bpy
import numpy as np
import pytest
from addon_helpers import write_json
from bpy_extras import anim_utils

MARKER = "dhik: not converged"


def _setup(skel: Path, tgt: Path) -> tuple[bpy.types.Object, bpy.types.Object]:
    assert bpy.ops.dhik.import_skeleton(filepath=str(skel)) == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=str(tgt)) == {"FINISHED"}
    s = bpy.context.scene.dhik
    return s.armature, s.target


def scene_state() -> dict[str, Any]:
    """Everything a bake or import may touch, as plain comparable values."""
    scene = bpy.context.scene
    actions = {}
    for a in bpy.data.actions:
        curves = {}
        for slot in a.slots:
            cb = anim_utils.action_get_channelbag_for_slot(a, slot)
            for fc in cb.fcurves if cb is not None else []:
                curves[(slot.identifier, fc.data_path, fc.array_index)] = [
                    (tuple(k.co), k.interpolation, tuple(k.handle_left), tuple(k.handle_right))
                    for k in fc.keyframe_points
                ]
        actions[a.name] = (a.use_fake_user, curves)
    pose = {}
    for ob in bpy.data.objects:
        if ob.pose is not None:
            for pb in ob.pose.bones:
                pose[(ob.name, pb.name)] = (
                    tuple(pb.location), tuple(pb.rotation_quaternion), tuple(pb.rotation_euler),
                    tuple(pb.rotation_axis_angle), tuple(pb.scale), pb.rotation_mode)
    return {
        "objects": sorted(o.name for o in bpy.data.objects),
        "scene_objects": sorted(o.name for o in scene.objects),
        "assigned": {o.name: (o.animation_data.action.name if o.animation_data
                              and o.animation_data.action else None) for o in bpy.data.objects},
        "actions": actions,
        "pose": pose,
        "markers": sorted((m.name, m.frame) for m in scene.timeline_markers),
        "frames": (scene.frame_start, scene.frame_end, scene.frame_current),
    }


def _delete(ob: bpy.types.Object) -> None:
    """Delete ``ob`` as X in the viewport does (the panel's pointer keeps it alive)."""
    for o in bpy.context.view_layer.objects:
        o.select_set(False)
    ob.select_set(True)
    bpy.context.view_layer.objects.active = ob
    assert bpy.ops.object.delete() == {"FINISHED"}


def test_deleted_target_is_an_error_naming_it(mixed_files):
    ob, target = _setup(*mixed_files)
    name = target.name
    _delete(target)
    s = bpy.context.scene.dhik
    assert s.target is not None and s.target.name == name  # the orphan is still pointed at
    before = scene_state()
    with pytest.raises(RuntimeError, match=f"{name}.*not in the scene"):
        bpy.ops.dhik.bake()
    assert scene_state() == before
    assert ob.animation_data is None


@pytest.mark.parametrize("how", ["object disabled", "collection disabled",
                                 "collection excluded", "hidden with the eye"])
def test_target_the_view_layer_does_not_evaluate_is_an_error(mixed_files, how):
    """Such a target's animation does not play: a bake would read a frozen transform.
    A target only hidden (the eye) still plays and bakes."""
    _setup(*mixed_files)
    target = bpy.context.scene.dhik.target
    if how == "hidden with the eye":
        target.hide_set(True)
        assert bpy.ops.dhik.bake() == {"FINISHED"}
        return
    if how == "object disabled":
        target.hide_viewport = True
    else:
        coll = bpy.data.collections.new("hidden")
        bpy.context.scene.collection.children.link(coll)
        for c in list(target.users_collection):
            c.objects.unlink(target)
        coll.objects.link(target)
        if how == "collection disabled":
            coll.hide_viewport = True
        else:
            bpy.context.view_layer.layer_collection.children["hidden"].exclude = True
    before = scene_state()
    with pytest.raises(RuntimeError, match=f"{target.name}.*not evaluated in view layer"):
        bpy.ops.dhik.bake()
    assert scene_state() == before


def test_deleted_armature_is_an_error_naming_it(mixed_files):
    ob, _ = _setup(*mixed_files)
    name = ob.name
    _delete(ob)
    before = scene_state()
    with pytest.raises(RuntimeError, match=f"{name}.*not in the scene"):
        bpy.ops.dhik.bake()
    with pytest.raises(RuntimeError, match=f"{name}.*not in the scene"):
        bpy.ops.dhik.export_skeleton(filepath="/tmp/never.json")
    assert scene_state() == before


def test_deleted_extra_target_is_an_error(mixed_files, addon):
    ob, _ = _setup(*mixed_files)
    extra = bpy.data.objects.new("extra_goal", None)
    bpy.context.collection.objects.link(extra)
    s = bpy.context.scene.dhik
    s.effector = "Tool"
    row = s.effectors.add()
    row.bone, row.target = "Twist", extra
    _delete(extra)
    before = scene_state()
    with pytest.raises(RuntimeError, match=r"effectors\[0\].*extra_goal.*not in scene"):
        bpy.ops.dhik.bake()
    assert scene_state() == before


def _poll_message(op) -> str:
    with pytest.raises(RuntimeError) as info:
        op()
    return str(info.value)


def test_disabled_operators_say_why(mixed_files):
    ops = bpy.ops.dhik
    assert "Choose an armature" in _poll_message(ops.bake)
    assert "Select an armature" in _poll_message(ops.export_skeleton)
    assert "Select an armature" in _poll_message(ops.export_animation)
    assert "Select a target object" in _poll_message(ops.export_targets)
    assert "No extra effector row" in _poll_message(ops.effector_remove)
    arm = bpy.data.armatures.new("empty_rig")
    rig = bpy.data.objects.new("empty_rig", arm)
    bpy.context.collection.objects.link(rig)
    bpy.context.scene.dhik.armature = rig
    assert "'empty_rig' has no bones" in _poll_message(ops.bake)
    _setup(*mixed_files)
    bpy.context.scene.dhik.target = None
    assert "Choose a target object" in _poll_message(ops.bake)
    ob = bpy.context.scene.dhik.armature
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    try:
        assert "Object Mode" in _poll_message(ops.import_targets)
        assert "Object Mode" in _poll_message(ops.import_skeleton)
        assert "Object or Pose Mode" in _poll_message(ops.bake)
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")


@pytest.mark.parametrize(("bone", "problem"), [
    ("Base", "'Base' is the fixed root"),
])
def test_fixed_root_is_refused_as_effector(mixed_files, bone, problem):
    _setup(*mixed_files)
    bpy.context.scene.dhik.effector = bone
    before = scene_state()
    with pytest.raises(RuntimeError, match=problem):
        bpy.ops.dhik.bake()
    assert scene_state() == before


def test_bone_without_a_movable_joint_above_is_refused(tmp_path, core):
    """A fixed chain under the root: its tip cannot follow anything."""
    skel = {"root_name": "Base", "joints": [
        {"name": "Base", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {"name": "Post", "type": "fixed", "offset": [0, 0, 0.5], "parent": "Base"},
        {"name": "Tip", "type": "fixed", "offset": [0, 0, 0.3], "parent": "Post"},
        {"name": "Arm", "type": "revolute", "offset": [0.2, 0, 0.2], "parent": "Base",
         "axis": [0, 1, 0]},
        {"name": "ArmTip", "type": "fixed", "offset": [0, 0, 0.3], "parent": "Arm"},
    ]}
    path = write_json(tmp_path / "fixed" / "skeleton.json", skel)
    tgt = write_json(tmp_path / "fixed" / "targets.json",
                     [{"frame": 0, "pos": [0, 0, 0.8], "euler": [0, 0, 0]}])
    _setup(path, tgt)
    s = bpy.context.scene.dhik
    s.effector = "Tip"
    before = scene_state()
    with pytest.raises(RuntimeError, match="'Tip' has no movable joint between it and the root"):
        bpy.ops.dhik.bake()
    assert scene_state() == before
    s.effector = "ArmTip"
    row = s.effectors.add()
    row.bone, row.target = "Post", s.target
    with pytest.raises(RuntimeError, match=r"effectors\[0\].*'Post' has no movable joint"):
        bpy.ops.dhik.bake()
    assert scene_state() == before


GOOD = [{"frame": 0, "pos": [0, 0, 1], "euler": [0, 0, 0]},
        {"frame": 10, "pos": [0, 0.5, 1], "euler": [0, 0, 90]}]


@pytest.mark.parametrize(("change", "message"), [
    # (the core's parser already stops frames past Blender's last one; either says so)
    (lambda k: k[1].update(frame=2**40), r"\[1\]\.frame: .*1,?048,?574"),
    (lambda k: k[1].update(frame=2_000_000), r"\[1\]\.frame: .*1,?048,?574"),
    # (the core's parser bounds positions at 1e9 m; either message names the value's place)
    (lambda k: k[0]["pos"].__setitem__(1, 1e39), r"\[0\]\.pos\[1\]: (1e\+39 is outside "
     r"Blender's float range|must be within)"),
    (lambda k: k[1]["euler"].__setitem__(2, -4e38), r"\[1\]\.euler\[2\]: -4e\+38 is outside"),
])
def test_targets_blender_cannot_hold_are_refused(tmp_path, change, message):
    keys = [dict(k, pos=list(k["pos"]), euler=list(k["euler"])) for k in GOOD]
    change(keys)
    path = write_json(tmp_path / "t" / "targets.json", keys)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 3, 7
    before = scene_state()
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.dhik.import_targets(filepath=str(path))
    assert scene_state() == before
    assert bpy.context.scene.dhik.target is None


def test_float32_edge_is_accepted(tmp_path):
    keys = [dict(k, pos=list(k["pos"]), euler=list(k["euler"])) for k in GOOD]
    keys[1]["frame"] = 1_048_574
    keys[0]["euler"][0] = 3.4e38  # degrees: a float32 once in radians
    path = write_json(tmp_path / "t" / "targets.json", keys)
    assert bpy.ops.dhik.import_targets(filepath=str(path)) == {"FINISHED"}
    assert bpy.context.scene.frame_end == 1_048_574


def test_wrong_kind_of_file_is_named(mixed_files):
    skel, tgt = mixed_files
    before = scene_state()
    with pytest.raises(RuntimeError, match="this is a skeleton file, not a targets file"):
        bpy.ops.dhik.import_targets(filepath=str(skel))
    with pytest.raises(RuntimeError, match="this is a targets file, not a skeleton file; use "
                       "Import Targets"):
        bpy.ops.dhik.import_skeleton(filepath=str(tgt))
    anim = write_json(skel.parent / "animation.json", {"frames": []})
    with pytest.raises(RuntimeError, match="this is an animation file, not a targets file; "
                       "use Import Animation"):
        bpy.ops.dhik.import_targets(filepath=str(anim))
    assert scene_state() == before


@pytest.mark.parametrize(("scale", "message"), [
    ((2.0, 2.0, 2.0), "the bones are 2 times the size"),
    ((1.5, 1.0, 0.5), r"the bones are \(1\.5, 1, 0\.5\) times per axis"),
])
def test_applied_scale_is_reported_as_such(mixed_files, scale, message):
    ob, _ = _setup(*mixed_files)
    ob.scale = scale
    for o in bpy.context.view_layer.objects:
        o.select_set(o == ob)
    bpy.context.view_layer.objects.active = ob
    assert bpy.ops.object.transform_apply(location=False, rotation=False, scale=True) == {
        "FINISHED"}
    before = scene_state()
    with pytest.raises(RuntimeError, match="armature scale was applied: " + message):
        bpy.ops.dhik.bake()
    assert scene_state() == before


def test_failed_bake_changes_nothing(mixed_files, tmp_path):
    """A bake that fails after the solve (animation.json cannot be written)."""
    ob, _ = _setup(*mixed_files)
    s = bpy.context.scene.dhik
    pb = ob.pose.bones["Elbow"]
    pb.keyframe_insert("rotation_quaternion", frame=3)
    bpy.context.scene.timeline_markers.new(MARKER, frame=2)
    bpy.context.scene.frame_set(5)
    s.animation_path = str(tmp_path / "missing_dir" / "animation.json")
    before = scene_state()
    with pytest.raises(RuntimeError, match="missing_dir"):
        bpy.ops.dhik.bake()
    assert scene_state() == before
    assert not s.has_result


def test_cancelled_bake_changes_nothing(mixed_files, addon):
    """The modal path's worker stopped by Esc: nothing is written."""
    ob, _ = _setup(*mixed_files)
    ob.pose.bones["Elbow"].keyframe_insert("rotation_quaternion", frame=3)
    bpy.context.scene.frame_set(4)
    before = scene_state()
    bake_job = addon.dhik_addon.bake_job
    job = bake_job.BakeJob.prepare(bpy.context)
    worker = addon.dhik_addon.bake_run.BakeThread(job)
    worker.start()
    worker.cancel()
    assert worker.finished() and worker.error is None
    assert scene_state() == before
    assert np.isfinite(job.frame_count)


def test_armature_deleted_while_a_bake_solves(mixed_files, addon):
    """The interactive bake solves in a worker thread; if the armature is deleted before
    the keys are written, the bake stops with the error and writes nothing."""
    ob, _ = _setup(*mixed_files)
    bake_job = addon.dhik_addon.bake_job
    job = bake_job.BakeJob.prepare(bpy.context)
    result = job.solve()
    _delete(ob)
    before = scene_state()
    with pytest.raises(Exception, match=f"{ob.name}.*not in scene"):
        job.apply(bpy.context, result)
    assert scene_state() == before
    assert not bpy.context.scene.dhik.has_result
