"""dhik.bake on real bpy: Blender's evaluated pose equals the core's FK on every frame."""

from __future__ import annotations

import math
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_helpers import (
    blender_joint_worlds,
    bone_world,
    build_plain_rig,
    export_skeleton,
    keyed_root,
)
from bpy_extras import anim_utils
from mathutils import Euler, Matrix, Quaternion, Vector

MARKER = "dhik: not converged"


def _np(m) -> np.ndarray:
    return np.array(m, dtype=float)


def _setup(skel: Path, tgt: Path) -> tuple[bpy.types.Object, bpy.types.Object]:
    assert bpy.ops.dhik.import_skeleton(filepath=str(skel)) == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=str(tgt)) == {"FINISHED"}
    s = bpy.context.scene.dhik
    return s.armature, s.target


def _export(ob: bpy.types.Object) -> str:
    return export_skeleton(ob)


def assert_pose_matches_core(core, ob, animation: Path, atol: float = 1e-6) -> int:
    """Every joint on every baked frame: Blender == object matrix @ core FK."""
    frames = core.formats.load_animation(animation)
    skel = core.Skeleton(core.formats.load_skeleton(_export(ob)))
    rest = {n: w[:3, :3] for n, w in skel.world_transforms().items()}
    obj = _np(ob.matrix_world)
    worst = 0.0
    for fr in frames:
        bpy.context.scene.frame_set(fr["frame"])
        skel.reset()
        skel.set_joint_values(fr["joints"])
        expected = {n: obj @ w for n, w in skel.world_transforms().items()}
        got = blender_joint_worlds(ob, rest)  # every joint that has a bone
        for name in got:
            worst = max(worst, float(np.abs(got[name] - expected[name]).max()))
    assert worst < atol, worst
    return len(frames)


def _bake(tmp_path: Path) -> Path:
    anim = tmp_path / "animation.json"
    bpy.context.scene.dhik.animation_path = str(anim)
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    return anim


def test_bake_pose_equals_core_fk_every_frame(mixed_files, core, tmp_path):
    ob, _ = _setup(*mixed_files)
    anim = _bake(tmp_path)
    assert assert_pose_matches_core(core, ob, anim) == 13


def test_bake_with_moved_and_rotated_armature(mixed_files, core, tmp_path):
    ob, target = _setup(*mixed_files)
    turn = Euler((0.3, -0.2, 1.1)).to_matrix().to_4x4()
    ob.matrix_world = Matrix.Translation((0.7, -0.3, 0.2)) @ turn
    # Keep the targets reachable: move them (their keyed parent) with the armature.
    keyed_root(target).parent = ob
    anim = _bake(tmp_path)
    n = assert_pose_matches_core(core, ob, anim)
    assert n == 13
    s = bpy.context.scene.dhik
    assert s.result_converged > 0
    _assert_effector_on_target(core, ob, target, anim)


def _assert_effector_on_target(core, ob, target, anim: Path) -> None:
    s = bpy.context.scene.dhik
    unconverged = {m.frame for m in bpy.context.scene.timeline_markers if m.name.startswith(MARKER)}
    checked = 0
    for fr in core.formats.load_animation(anim):
        f = fr["frame"]
        if f in unconverged:
            continue
        bpy.context.scene.frame_set(f)
        eff = bone_world(ob, s.effector)  # the target shows the bone's orientation
        t = _np(target.matrix_world)
        assert np.linalg.norm(eff[:3, 3] - t[:3, 3]) < s.position_tolerance
        r_err = core.rotations.matrix_to_rotvec(t[:3, :3] @ eff[:3, :3].T)
        assert np.linalg.norm(r_err) < s.orientation_tolerance
        checked += 1
    assert checked == s.result_converged


def test_effector_reaches_target_on_converged_frames(mixed_files, core, tmp_path):
    ob, target = _setup(*mixed_files)
    anim = _bake(tmp_path)
    s = bpy.context.scene.dhik
    assert s.has_result and s.result_frames == 13
    assert s.result_converged >= 3  # the keyframes are FK poses of the skeleton
    markers = [m.frame for m in bpy.context.scene.timeline_markers if m.name.startswith(MARKER)]
    assert len(markers) == s.result_frames - s.result_converged
    _assert_effector_on_target(core, ob, target, anim)


def test_bake_keys_in_bulk_with_linear_interpolation(mixed_files, tmp_path):
    ob, _ = _setup(*mixed_files)
    _bake(tmp_path)
    ad = ob.animation_data
    cb = anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot)
    bones = [fc for fc in cb.fcurves if fc.data_path.startswith("pose.bones")]
    paths = {(fc.data_path, fc.array_index) for fc in bones}
    assert ('pose.bones["Shoulder"].rotation_quaternion', 3) in paths
    assert ('pose.bones["Elbow"].rotation_quaternion', 0) in paths
    assert ('pose.bones["Slide"].location', 2) in paths
    assert not any('"Base"' in p or '"Tool"' in p for p, _ in paths)
    for fc in bones:  # (the others: the bake's error curves, test_bake_progress.py)
        assert len(fc.keyframe_points) == 13
        assert {k.interpolation for k in fc.keyframe_points} == {"LINEAR"}
        assert fc.group is not None and f'"{fc.group.name}"' in fc.data_path  # bone's group


def test_animation_json_matches_export_animation(mixed_files, core, tmp_path):
    """Exporting the keyed pose gives back the baked joint values."""
    ob, _ = _setup(*mixed_files)
    anim = _bake(tmp_path)
    out = tmp_path / "exported.json"
    assert bpy.ops.dhik.export_animation(filepath=str(out)) == {"FINISHED"}
    baked = core.formats.load_animation(anim)
    read = core.formats.load_animation(out)
    assert [f["frame"] for f in read] == [f["frame"] for f in baked]
    for a, b in zip(baked, read, strict=True):
        assert a["joints"].keys() == b["joints"].keys()
        for name, ja in a["joints"].items():
            jb = b["joints"][name]
            for key in ("angle", "displacement", "quaternion", "euler"):
                if key in ja:
                    assert np.allclose(ja[key], jb[key], atol=2e-6), (name, key)


def test_export_animation_after_a_hand_tweak(mixed_files, core, tmp_path):
    ob, _ = _setup(*mixed_files)
    _bake(tmp_path)
    pb = ob.pose.bones["Elbow"]
    bpy.context.scene.frame_set(6)
    q = pb.rotation_quaternion.copy()
    extra = Vector(_np(pb.bone.matrix_local.to_3x3().inverted() @ Vector((1, 0, 0))))
    pb.rotation_quaternion = q @ Quaternion(extra, 0.25)
    pb.keyframe_insert("rotation_quaternion", frame=6)
    out = tmp_path / "tweaked.json"
    assert bpy.ops.dhik.export_animation(filepath=str(out)) == {"FINISHED"}
    before = core.formats.load_animation(tmp_path / "animation.json")
    after = core.formats.load_animation(out)
    delta = after[6]["joints"]["Elbow"]["angle"] - before[6]["joints"]["Elbow"]["angle"]
    assert delta == pytest.approx(0.25, abs=1e-5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: setattr(s, "target", None), "target"),
        (lambda s: setattr(s, "effector", "Nope"), "no bone 'Nope'"),
        (lambda s: (setattr(s, "use_scene_range", False), setattr(s, "frame_end", 0),
                    setattr(s, "frame_start", 5)), "frame range"),
    ],
)
def test_bad_scene_state_reports_and_changes_nothing(mixed_files, change, message):
    ob, _ = _setup(*mixed_files)
    change(bpy.context.scene.dhik)
    if bpy.context.scene.dhik.target is None:  # poll fails: the operator cannot even start
        with pytest.raises(RuntimeError, match="poll"):
            bpy.ops.dhik.bake()
        return
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.dhik.bake()
    assert ob.animation_data is None
    assert len(bpy.data.actions) == 1  # the target's


def test_moved_bone_is_reported(mixed_files):
    ob, _ = _setup(*mixed_files)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    ob.data.edit_bones["Elbow"].head.x += 0.1
    ob.data.edit_bones["Elbow"].use_connect = False
    bpy.ops.object.mode_set(mode="OBJECT")
    with pytest.raises(RuntimeError, match="Elbow.*rest position"):
        bpy.ops.dhik.bake()
    assert ob.animation_data is None


def test_cancelled_worker_changes_nothing(mixed_files, addon):
    """The modal path's worker: cancelling stops the solve and nothing is keyed."""
    ob, _ = _setup(*mixed_files)
    bake_job = addon.dhik_addon.bake_job
    job = bake_job.BakeJob.prepare(bpy.context)
    worker = addon.dhik_addon.bake_run.BakeThread(job)
    worker.start()
    worker.cancel()
    assert worker.finished() and worker.error is None
    assert worker.result is None or len(worker.result.records) == 13
    assert ob.animation_data is None and not bpy.context.scene.dhik.has_result


def test_rebake_replaces_markers(mixed_files, tmp_path):
    _setup(*mixed_files)
    s = bpy.context.scene.dhik
    s.method = "spec"  # one spec iteration leaves frames unconverged
    s.max_iterations = 1
    _bake(tmp_path)
    first = len([m for m in bpy.context.scene.timeline_markers if m.name.startswith(MARKER)])
    assert first == s.result_frames - s.result_converged > 0
    s.max_iterations = 100
    _bake(tmp_path)
    again = len([m for m in bpy.context.scene.timeline_markers if m.name.startswith(MARKER)])
    assert again == s.result_frames - s.result_converged < first
    assert not any(a.use_fake_user for a in bpy.data.actions)  # earlier bakes are not kept
    assert math.isfinite(s.result_max_position_error)


def test_new_action_bake_keeps_a_hand_made_action(mixed_files, tmp_path):
    ob, _ = _setup(*mixed_files)
    ob.pose.bones["Elbow"].keyframe_insert("rotation_quaternion", frame=1)
    hand = ob.animation_data.action
    bpy.context.scene.dhik.bake_action = "NEW"
    _bake(tmp_path)
    assert ob.animation_data.action is not hand and hand.use_fake_user


SAMPLES = Path(__file__).resolve().parents[2] / "sample_scenes"


@pytest.mark.parametrize("scene", ["spec_example", "planar2", "arm7"])
def test_sample_scene_bake_matches_core(scene, core, tmp_path):
    d = SAMPLES / scene
    if not (d / "skeleton.json").is_file():
        pytest.skip(f"{d} not there yet")
    ob, target = _setup(d / "skeleton.json", d / "targets.json")
    anim = _bake(tmp_path)
    frames = core.formats.load_targets(d / "targets.json")[-1].frame + 1
    assert assert_pose_matches_core(core, ob, anim) == frames
    _assert_effector_on_target(core, ob, target, anim)


def test_plain_rig_bakes_with_inferred_joints(core, tmp_path):
    """A rig made in Blender (no dhik data) bakes through the inferred skeleton."""
    ob = build_plain_rig()
    target = bpy.data.objects.new("goal", None)
    bpy.context.collection.objects.link(target)
    target.location = (0.0, -0.5, 1.6)
    target.rotation_euler = (-0.6, 0.0, 0.0)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 0, 3
    s = scene.dhik
    s.armature, s.target = ob, target
    anim = _bake(tmp_path)
    assert s.effector == "" and s.result_frames == 4
    assert assert_pose_matches_core(core, ob, anim) == 4
