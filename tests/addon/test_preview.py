"""scene.dhik.live_preview on real bpy: the armature follows the targets at the current
frame (scripted frame_set and moved targets), nothing is keyed, turning it off restores
the exact pose, and faults turn it off with a report instead of raising."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import bpy
import numpy as np
from addon_helpers import (
    TWO_ARMS,
    keyed_root,
    leg_with_goal,
    reachable_targets,
    two_arm_poses,
    write_json,
)
from fixtures import SPINE_ARM
from mathutils import Matrix

FRAMES = range(0, 13)


def _setup(skel: Path, tgt: Path) -> tuple[bpy.types.Object, bpy.types.Object]:
    assert bpy.ops.dhik.import_skeleton(filepath=str(skel)) == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=str(tgt)) == {"FINISHED"}
    s = bpy.context.scene.dhik
    return s.armature, s.target


def _preview(addon):
    return addon.dhik_addon.preview


def _bone_worlds(ob: bpy.types.Object) -> dict[str, np.ndarray]:
    """Every pose bone's world 4x4, from Blender's evaluated pose."""
    bpy.context.view_layer.update()
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return {pb.name: np.array(ev.matrix_world @ pb.matrix, dtype=float) for pb in ev.pose.bones}


def _channels(ob: bpy.types.Object) -> dict[str, tuple[float, ...]]:
    out = {}
    for pb in ob.pose.bones:
        for prop in ("location", "rotation_quaternion", "rotation_euler", "rotation_axis_angle",
                     "scale"):
            out[f"{pb.name}.{prop}"] = tuple(getattr(pb, prop))
        out[f"{pb.name}.mode"] = (pb.rotation_mode,)
    return out


def _rotation_gap(a: np.ndarray, b: np.ndarray) -> float:
    """Angle (rad) between the rotations of two 4x4 matrices (scale-free)."""
    ra = a[:3, :3] / np.linalg.norm(a[:3, :3], axis=0)
    rb = b[:3, :3] / np.linalg.norm(b[:3, :3], axis=0)
    c = (np.trace(ra @ rb.T) - 1.0) / 2.0
    return math.acos(max(-1.0, min(1.0, c)))


def _on_target(ob, bone: str, target, s) -> tuple[float, float]:
    """Position (m) and rotation (rad) gap between ``bone`` (evaluated) and ``target``."""
    bpy.context.view_layer.update()
    dg = bpy.context.evaluated_depsgraph_get()
    ev = ob.evaluated_get(dg)
    eff = np.array(ev.matrix_world @ ev.pose.bones[bone].matrix, dtype=float)
    t = np.array(target.evaluated_get(dg).matrix_world, dtype=float)
    return float(np.linalg.norm(eff[:3, 3] - t[:3, 3])), _rotation_gap(eff, t)


def _handlers(addon) -> list[str]:
    """Which of the preview's handlers are installed."""
    pv = _preview(addon)
    found = []
    for name in ("frame_change_post", "depsgraph_update_post", "load_post"):
        handlers = getattr(bpy.app.handlers, name)
        if any(getattr(fn, "__module__", "") == pv.__name__ for fn in handlers):
            found.append(name)
    return found


def _keyed_state() -> dict[str, list[tuple[str, int, int]]]:
    """Every action's F-curves and their key counts."""
    out = {}
    for action in bpy.data.actions:
        curves = []
        for layer in action.layers:
            for strip in layer.strips:
                for bag in strip.channelbags:
                    curves += [(fc.data_path, fc.array_index, len(fc.keyframe_points))
                               for fc in bag.fcurves]
        out[action.name] = sorted(curves)
    return out


def test_preview_follows_scripted_frames_like_a_bake_and_keys_nothing(addon, mixed_files):
    ob, target = _setup(*mixed_files)
    s = bpy.context.scene.dhik
    s.use_scene_range = False
    s.frame_start, s.frame_end = FRAMES[0], FRAMES[-1]
    s.position_tolerance, s.orientation_tolerance = 1e-6, 1e-5  # m, rad
    assert not s.live_preview  # off by default
    assert ob.animation_data is None or ob.animation_data.action is None
    actions = _keyed_state()
    bpy.context.scene.frame_set(0)
    s.live_preview = True
    assert set(_handlers(addon)) == {"frame_change_post", "depsgraph_update_post", "load_post"}
    preview = {}
    for f in FRAMES:
        bpy.context.scene.frame_set(f)
        pe, oe = _on_target(ob, s.effector or "Tool", target, s)
        assert pe < s.position_tolerance and oe < s.orientation_tolerance, (f, pe, oe)
        preview[f] = _bone_worlds(ob)
    assert _preview(addon).solve_count(bpy.context.scene) >= len(FRAMES)
    # nothing keyed: no action on the armature, no action created or changed
    assert ob.animation_data is None or ob.animation_data.action is None
    assert _keyed_state() == actions
    s.live_preview = False
    assert _handlers(addon) == ["load_post"]
    # a bake of the same frames (the preview off) poses the bones the same way
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert s.result_converged == len(FRAMES)
    for f in FRAMES:
        bpy.context.scene.frame_set(f)
        baked = _bone_worlds(ob)
        for name, m in baked.items():  # float32 matrices: 1e-5 of what both solved
            assert np.abs(m - preview[f][name]).max() < 1e-5, (f, name)


def test_moving_a_target_updates_the_pose_and_own_updates_do_not_solve(addon, mixed_files):
    ob, target = _setup(*mixed_files)
    s = bpy.context.scene.dhik
    scene = bpy.context.scene
    scene.frame_set(12)
    s.live_preview = True
    far = np.array(target.matrix_world, dtype=float)  # a reachable pose: frame 12's target
    scene.frame_set(0)
    before = _bone_worlds(ob)
    count = _preview(addon).solve_count(scene)
    # nothing the preview reads changed: the updates it caused itself solve nothing
    bpy.context.view_layer.update()
    other = bpy.data.objects.new("unrelated", None)
    bpy.context.collection.objects.link(other)
    other.location = (3.0, 0.0, 0.0)
    bpy.context.view_layer.update()
    assert _preview(addon).solve_count(scene) == count
    # the target moved (its world matrix set directly, no frame change)
    target.matrix_world = Matrix(far.tolist())
    bpy.context.view_layer.update()
    assert _preview(addon).solve_count(scene) == count + 1
    pe, oe = _on_target(ob, "Tool", target, s)
    assert pe < s.position_tolerance and oe < s.orientation_tolerance
    moved = _bone_worlds(ob)
    assert np.abs(moved["Tool"][:3, 3] - before["Tool"][:3, 3]).max() > 0.05
    # moving it by location (the keyed parent of the imported target) works as well
    parent = keyed_root(target)
    parent.location.x += 0.05
    bpy.context.view_layer.update()
    assert _preview(addon).solve_count(scene) == count + 2
    pe, _ = _on_target(ob, "Tool", target, s)
    assert pe < s.position_tolerance
    # moving the armature object moves the targets in its space: solved again (Import
    # Targets made the keyed empty the armature's child; here it keeps its world place)
    world = parent.matrix_world.copy()
    parent.parent = None
    parent.matrix_world = world
    bpy.context.view_layer.update()
    count = _preview(addon).solve_count(scene) - 2
    ob.location.z += 0.01
    bpy.context.view_layer.update()
    assert _preview(addon).solve_count(scene) == count + 3
    pe, _ = _on_target(ob, "Tool", target, s)
    assert pe < s.position_tolerance
    s.live_preview = False


def test_turning_it_off_restores_the_exact_pose(addon, mixed_files):
    ob, _target = _setup(*mixed_files)
    s = bpy.context.scene.dhik
    bones = ob.pose.bones
    bones["Shoulder"].rotation_mode = "YXZ"
    bones["Shoulder"].rotation_euler = (0.3, -0.7, 1.9)
    bones["Elbow"].rotation_quaternion = (0.8, 0.6, 0.0, 0.0)
    bones["Slide"].location = (0.01, 0.02, 0.03)
    bones["Slide"].scale = (1.0, 1.5, 1.0)
    bones["Twist"].rotation_mode = "AXIS_ANGLE"
    bones["Twist"].rotation_axis_angle = (0.4, 0.0, 0.0, 1.0)
    bpy.context.scene.frame_set(4)
    channels, worlds = _channels(ob), _bone_worlds(ob)
    s.live_preview = True
    for f in (5, 9, 2):
        bpy.context.scene.frame_set(f)
    assert _channels(ob) != channels  # the preview posed the bones
    assert bones["Shoulder"].rotation_mode == "YXZ"  # in their own rotation modes
    assert bones["Twist"].rotation_mode == "AXIS_ANGLE"
    s.live_preview = False
    assert _channels(ob) == channels  # exactly, every channel of every bone
    after = _bone_worlds(ob)
    for name, m in worlds.items():
        assert np.array_equal(after[name], m), name
    assert not s.preview_saved


def test_deleted_target_turns_preview_off_with_a_report(addon, mixed_files, capfd):
    ob, target = _setup(*mixed_files)
    s = bpy.context.scene.dhik
    channels = _channels(ob)
    s.live_preview = True
    bpy.context.scene.frame_set(6)
    assert _channels(ob) != channels
    capfd.readouterr()
    # deleted with X: unlinked from the scene, the pointer still set
    for coll in list(target.users_collection):
        coll.objects.unlink(target)
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(7)  # a later frame change does nothing either
    err = capfd.readouterr().err
    assert not s.live_preview
    assert repr(target.name) in s.preview_error and "not in scene" in s.preview_error
    assert err.count("live preview stopped") == 1 and "Traceback" not in err
    assert _channels(ob) == channels  # the pose from before the preview
    assert _handlers(addon) == ["load_post"]


def test_removed_target_and_removed_armature(addon, mixed_files, capfd):
    ob, target = _setup(*mixed_files)
    s = bpy.context.scene.dhik
    s.live_preview = True
    bpy.data.objects.remove(target)  # gone: the pointer is cleared
    bpy.context.view_layer.update()
    assert not s.live_preview and "choose a target" in s.preview_error
    # an armature removed while previewing: off, nothing to restore, no traceback
    _setup(*mixed_files)
    s.live_preview = True
    assert s.live_preview and not s.preview_error
    bpy.data.objects.remove(s.armature)
    bpy.context.scene.frame_set(3)
    assert not s.live_preview and "armature" in s.preview_error
    assert "Traceback" not in capfd.readouterr().err


def test_a_rig_the_bake_refuses_is_refused_when_turned_on(addon, mixed_files, capfd):
    ob, _target = _setup(*mixed_files)
    s = bpy.context.scene.dhik
    s.effector = "Base"  # the fixed root cannot follow a target
    channels = _channels(ob)
    s.live_preview = True
    assert not s.live_preview
    assert "'Base' is the fixed root" in s.preview_error
    assert _channels(ob) == channels
    assert "Traceback" not in capfd.readouterr().err


def test_a_rig_made_unusable_while_previewing_turns_it_off(addon, capfd):
    """A leg made in Blender: locking every IK axis of hip and knee leaves the toe without
    a movable joint, which the bake refuses; the preview stops with that report."""
    ob, target = leg_with_goal()
    s = bpy.context.scene.dhik
    channels = _channels(ob)
    s.live_preview = True
    pe, _ = _on_target(ob, "toe", target, s)
    assert s.live_preview and pe < s.position_tolerance
    for name in ("hip", "knee"):
        pb = ob.pose.bones[name]
        pb.lock_ik_x = pb.lock_ik_y = pb.lock_ik_z = True
    bpy.context.view_layer.update()
    assert not s.live_preview
    assert "'toe' has no movable joint" in s.preview_error
    assert _channels(ob) == channels
    assert "Traceback" not in capfd.readouterr().err


def test_a_rig_change_only_the_read_sees_restarts_it(addon):
    """Disconnecting the hip in Edit Mode frees its location: the bake's read of the rig
    then has the hip's sliders (hip.tx/.ty/.tz). The preview solves with that read too:
    no bone is renamed, reparented or turned at rest, and no IK setting changes."""
    ob, target = leg_with_goal()
    s = bpy.context.scene.dhik
    s.live_preview = True
    key = bpy.context.scene.name_full
    live = _preview(addon)._LIVE[key]
    assert "hip.tx" not in {j.name for j in live.rig.skeleton.defn.joints}
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    ob.data.edit_bones["hip"].use_connect = False
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.context.view_layer.update()
    assert s.live_preview
    live = _preview(addon)._LIVE[key]
    joints = {j.name for j in live.rig.skeleton.defn.joints}
    assert {"hip.tx", "hip.ty", "hip.tz"} <= joints
    assert live.rig.skeleton.defn == addon.dhik_addon.armature_read.read_skeleton(ob)
    pe, _ = _on_target(ob, "toe", target, s)
    assert pe < s.position_tolerance
    s.live_preview = False


def test_weights_and_extra_rows_as_the_bake(addon, core, tmp_path):
    """Two arms: LHand the main effector (position only), RHand an extra row."""
    poses = two_arm_poses(3)
    skel = write_json(tmp_path / "skeleton.json", TWO_ARMS)
    left = reachable_targets(core, TWO_ARMS, poses, "LHand", [0, 5, 10])
    right = reachable_targets(core, TWO_ARMS, poses, "RHand", [0, 5, 10])
    assert bpy.ops.dhik.import_skeleton(filepath=str(skel)) == {"FINISHED"}
    s = bpy.context.scene.dhik
    ob = s.armature
    s.effector = "RHand"  # each target shows its bone's orientation
    assert bpy.ops.dhik.import_targets(
        filepath=str(write_json(tmp_path / "right.json", right))) == {"FINISHED"}
    rt = s.target
    s.effector = "LHand"
    assert bpy.ops.dhik.import_targets(
        filepath=str(write_json(tmp_path / "left.json", left))) == {"FINISHED"}
    lt = s.target
    s.effector, s.target, s.orientation_weight = "LHand", lt, 0.0
    row = s.effectors.add()
    row.bone, row.target = "RHand", rt
    s.live_preview = True
    for f in range(0, 11):
        bpy.context.scene.frame_set(f)
        pe, _ = _on_target(ob, "LHand", lt, s)
        assert pe < s.position_tolerance, f
        pe, oe = _on_target(ob, "RHand", rt, s)
        assert pe < s.position_tolerance and oe < s.orientation_tolerance, f
    # the main target turned far away from any reachable orientation: position only
    lt.rotation_mode = "XYZ"
    lt.rotation_euler.x += 2.5
    bpy.context.view_layer.update()
    pe, oe = _on_target(ob, "LHand", lt, s)
    assert pe < s.position_tolerance and oe > 1.0
    s.live_preview = False


def test_preview_survives_a_saved_and_loaded_file(addon, mixed_files, tmp_path):
    ob, target = _setup(*mixed_files)
    s = bpy.context.scene.dhik
    channels = _channels(ob)
    s.live_preview = True
    bpy.context.scene.frame_set(3)
    path = tmp_path / "previewing.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    bpy.ops.wm.read_homefile(use_empty=True, use_factory_startup=True)
    assert _handlers(addon) == ["load_post"]  # no scene previews any more
    bpy.ops.wm.open_mainfile(filepath=str(path))
    s = bpy.context.scene.dhik
    ob, target = s.armature, s.target
    assert s.live_preview
    assert set(_handlers(addon)) == {"frame_change_post", "depsgraph_update_post", "load_post"}
    bpy.context.scene.frame_set(9)
    pe, oe = _on_target(ob, "Tool", target, s)
    assert pe < s.position_tolerance and oe < s.orientation_tolerance
    s.live_preview = False
    assert _channels(ob) == channels  # the pose from before it was turned on, saved file


def test_unregister_removes_every_handler(addon, mixed_files):
    _setup(*mixed_files)
    bpy.context.scene.dhik.live_preview = True
    assert "frame_change_post" in _handlers(addon)
    addon.unregister()
    try:
        assert _handlers(addon) == []
    finally:
        addon.register()
    assert _handlers(addon) == ["load_post"]




def test_chain_length_and_pole_as_the_bake(addon, core, tmp_path):
    """Chain of 3 bones on a keyed spine, with a pole: the spine keeps its animation under
    the preview, and the preview poses the arm as a bake with the same settings does."""
    assert bpy.ops.dhik.import_skeleton(
        filepath=str(write_json(tmp_path / "skeleton.json", SPINE_ARM))) == {"FINISHED"}
    s = bpy.context.scene.dhik
    ob = s.armature
    spine = ob.pose.bones["Spine"]
    z = np.array(spine.bone.matrix_local.to_3x3(), dtype=float).T @ [0.0, 0.0, 1.0]
    for f, angle in ((0, -0.3), (10, 0.4)):
        spine.rotation_quaternion = [math.cos(angle / 2), *(math.sin(angle / 2) * z)]
        spine.keyframe_insert("rotation_quaternion", frame=f)
    frames = range(11)
    keys = []  # hand positions the arm reaches on top of the spine (angle linear in f)
    skel = core.Skeleton(core.formats.parse_skeleton(SPINE_ARM))
    for f in frames:
        skel.reset()
        skel.set_joint_values({
            "Spine": {"type": "revolute", "angle": -0.3 + 0.07 * f},
            "Shoulder": {"type": "spherical", "quaternion": list(
                core.rotations.euler_xyz_to_quat([0.1, 0.2 + 0.02 * f, 0.3]))},
            "Elbow": {"type": "revolute", "angle": 0.8 + 0.03 * f}})
        m = skel.world_transforms()["Hand"]
        keys.append({"frame": f, "pos": [float(v) for v in m[:3, 3]], "euler": [0, 0, 0]})
    assert bpy.ops.dhik.import_targets(
        filepath=str(write_json(tmp_path / "targets.json", keys))) == {"FINISHED"}
    target = s.target
    pole = bpy.data.objects.new("pole", None)
    bpy.context.collection.objects.link(pole)
    pole.location = (0.5, 1.0, 1.0)
    s.effector, s.orientation_weight, s.chain_length, s.pole_target = "Hand", 0.0, 3, pole
    s.position_tolerance = 1e-6
    s.use_scene_range = False
    s.frame_start, s.frame_end = frames[0], frames[-1]
    own = {}
    for f in frames:  # the spine's own animation, the preview off
        bpy.context.scene.frame_set(f)
        own[f] = _bone_worlds(ob)["Spine"]
    curves = _keyed_state()
    s.live_preview = True
    preview = {}
    for f in frames:
        bpy.context.scene.frame_set(f)
        preview[f] = _bone_worlds(ob)
        assert np.array_equal(preview[f]["Spine"], own[f]), f  # untouched by the preview
        pe, _ = _on_target(ob, "Hand", target, s)
        assert pe < 1e-5, (f, pe)
    assert _keyed_state() == curves  # the spine's action unchanged, nothing added
    s.live_preview = False
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert s.result_converged == len(frames)
    for f in frames:
        bpy.context.scene.frame_set(f)
        baked = _bone_worlds(ob)
        for name in ("Spine", "Shoulder", "Elbow", "Hand"):
            assert np.abs(baked[name] - preview[f][name]).max() < 1e-4, (f, name)


def test_panel_shows_the_toggle_and_why_it_stopped(addon, mixed_files):
    rna = bpy.types.Scene.bl_rna.properties["dhik"].fixed_type.properties["live_preview"]
    assert rna.name == "Live Preview" and not rna.default
    assert "Nothing is keyed" in rna.description and "back as they were" in rna.description
    panel = addon.dhik_addon.panel.DHIK_PT_panel

    def drawn() -> tuple[list, list[str]]:
        layout = mock.MagicMock()
        panel.draw(SimpleNamespace(layout=layout), bpy.context)
        props = [c for c in layout.mock_calls if c[0].split(".")[-1] == "prop"]
        labels = [c.kwargs["text"] for c in layout.mock_calls if c[0].endswith("label")]
        return props, labels

    props, labels = drawn()
    assert any(c.args[1] == "live_preview" for c in props)
    assert not any(t.startswith("Preview stopped") for t in labels)
    _ob, target = _setup(*mixed_files)
    s = bpy.context.scene.dhik
    s.live_preview = True
    bpy.data.objects.remove(target)
    bpy.context.view_layer.update()
    _props, labels = drawn()
    assert [t for t in labels if t.startswith("Preview stopped")] == [
        f"Preview stopped: {s.preview_error}"]


def test_export_animation_with_the_preview_on_reads_the_keys(addon, core, mixed_files, tmp_path):
    """Export Animation (and a bake) step through frames themselves: the preview waits
    inside their loop, so the export reads the keyed pose, and it catches up after."""
    ob, target = _setup(*mixed_files)
    s = bpy.context.scene.dhik
    s.use_scene_range = False
    s.frame_start, s.frame_end = FRAMES[0], FRAMES[-1]
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    off = tmp_path / "off.json"
    assert bpy.ops.dhik.export_animation(filepath=str(off)) == {"FINISHED"}
    keys_root = target.parent if target.parent is not None else target
    keys_root.location = (keys_root.location[0] + 0.05, keys_root.location[1],
                          keys_root.location[2])  # the preview now differs from the keys
    if keys_root.animation_data is not None:
        keys_root.animation_data.action = None
    bpy.context.scene.frame_set(3)
    s.live_preview = True
    before = _preview(addon).solve_count(bpy.context.scene)
    on = tmp_path / "on.json"
    assert bpy.ops.dhik.export_animation(filepath=str(on)) == {"FINISHED"}
    assert core.formats.load_animation(on) == core.formats.load_animation(off)
    assert _preview(addon).solve_count(bpy.context.scene) == before + 1  # caught up once
    s.live_preview = False
