"""Bake into the current action (issue 8, point 5) on real bpy.

A body-like rig: a spine and head that the arm's effector does not need (their user
animation must survive), and an arm whose bones use Euler, quaternion and axis-angle
rotation modes. Existing keys on the arm outside the bake's range must survive too.
Blender's evaluated pose is compared with the core's FK of the baked joint values.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import bpy
import numpy as np
import pytest
from addon_helpers import blender_joint_worlds, write_json
from bpy_extras import anim_utils
from mathutils import Quaternion

BODY: dict[str, Any] = {
    "root_name": "Root",
    "joints": [
        {"name": "Root", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {"name": "Spine", "type": "spherical", "offset": [0, 0, 0.9], "parent": "Root"},
        {"name": "Head", "type": "spherical", "offset": [0, 0, 0.6], "parent": "Spine"},
        {"name": "HeadTop", "type": "fixed", "offset": [0, 0, 0.25], "parent": "Head"},
        {"name": "Shoulder", "type": "spherical", "offset": [0.25, 0, 1.4], "parent": "Root"},
        {"name": "Elbow", "type": "revolute", "offset": [0, 0, 0.35], "parent": "Shoulder",
         "axis": [1, 0, 0]},
        {"name": "Wrist", "type": "spherical", "offset": [0, 0, 0.3], "parent": "Elbow"},
        {"name": "Hand", "type": "revolute", "offset": [0, 0, 0.1], "parent": "Wrist",
         "axis": [0, 0, 1]},
        {"name": "Tip", "type": "fixed", "offset": [0, 0.12, 0], "parent": "Hand"},
    ],
}
# The effector Hand's bone lies along +Y with its Z on the joint's Z axis: its rest
# rotation is the identity, so the bone's orientation and the joint's frame are the same
# and the snapped target means the same thing in both.
ARM = ("Shoulder", "Elbow", "Wrist", "Hand")
START, END = 10, 130  # the bake range; the scene runs 0..140
MODES = {"Shoulder": "ZXY", "Elbow": "XYZ", "Wrist": "QUATERNION"}


def snapped_hand_target(ob: bpy.types.Object, frames: list[int]) -> bpy.types.Object:
    """An empty keyed on every frame at the hand bone's world pose for a smooth arm motion
    (the elbow turns from 0.3 to 4.3 rad, past pi); the arm is left at rest."""
    goal = bpy.data.objects.new("goal", None)
    bpy.context.collection.objects.link(goal)
    goal.rotation_mode = "XYZ"
    bones = ob.pose.bones
    hinge = [0.0, 0.0, 0.0]  # the elbow's free bone axis (the only unlocked IK axis)
    hinge[next(i for i, a in enumerate("xyz") if not getattr(bones["Elbow"], f"lock_ik_{a}"))] = 1
    previous = None
    for f in frames:
        t = (f - START) / (END - START)
        bones["Shoulder"].rotation_quaternion = Quaternion((1, 0.4, 0.2), math.radians(20 + 40 * t))
        bones["Elbow"].rotation_quaternion = Quaternion(hinge, 0.3 + 4.0 * t)
        bones["Wrist"].rotation_quaternion = Quaternion((0.2, 1, 0.3), math.radians(10 + 50 * t))
        bpy.context.view_layer.update()
        loc, rot, _scale = (ob.matrix_world @ bones["Hand"].matrix).decompose()
        previous = rot.to_euler("XYZ", previous) if previous else rot.to_euler("XYZ")
        goal.location, goal.rotation_euler = loc, previous
        goal.keyframe_insert("location", frame=f)
        goal.keyframe_insert("rotation_euler", frame=f)
    for name in ARM:
        bones[name].rotation_quaternion = (1, 0, 0, 0)
    return goal


@pytest.fixture
def body(tmp_path: Path, core) -> tuple[bpy.types.Object, bpy.types.Object]:
    """The imported rig, an empty snapped to its hand on every frame of START..END, and the
    scene range 0..140 (the bake range is START..END)."""
    skel = write_json(tmp_path / "body" / "skeleton.json", BODY)
    assert bpy.ops.dhik.import_skeleton(filepath=str(skel)) == {"FINISHED"}
    scene = bpy.context.scene
    s = scene.dhik
    ob = s.armature
    s.target = snapped_hand_target(ob, list(range(START, END + 1)))
    scene.frame_start, scene.frame_end = 0, 140
    s.use_scene_range = False
    s.frame_start, s.frame_end = START, END
    s.effector = "Hand"
    s.animation_path = str(tmp_path / "animation.json")
    for name, mode in MODES.items():
        ob.pose.bones[name].rotation_mode = mode
    rest = np.array(ob.data.bones["Hand"].matrix_local.to_3x3(), dtype=float)
    assert np.allclose(rest, np.eye(3), atol=1e-6)
    return ob, s.target


def user_animation(ob: bpy.types.Object) -> None:
    """Keys a user made: spine and head over 0..140, the arm outside and inside START..END."""
    bones = ob.pose.bones
    for f, angle in [(0, 0.0), (20, 0.4), (40, -0.3), (90, 0.5), (140, 0.2)]:
        bones["Spine"].rotation_quaternion = Quaternion((0, 1, 0), angle)
        bones["Spine"].keyframe_insert("rotation_quaternion", frame=f)
        bones["Head"].rotation_quaternion = Quaternion((0, 0, 1), -angle)
        bones["Head"].keyframe_insert("rotation_quaternion", frame=f)
    bones["Head"].location = (0.0, 0.0, 0.0)
    bones["Head"].keyframe_insert("location", frame=30)
    for f, angle in [(0, 0.2), (5, 0.5), (25, 1.0), (135, -0.5), (140, 0.1)]:
        bones["Elbow"].rotation_euler = (angle, 0.0, 0.0)
        bones["Elbow"].keyframe_insert("rotation_euler", frame=f)
        bones["Shoulder"].rotation_euler = (0.0, angle, 0.1)
        bones["Shoulder"].keyframe_insert("rotation_euler", frame=f)
    bones["Elbow"].location = (0.0, 0.01, 0.0)  # a solved bone's other channel, keyed
    bones["Elbow"].keyframe_insert("location", frame=2)
    bones["Elbow"].keyframe_insert("location", frame=138)


def channelbag(ob: bpy.types.Object):
    ad = ob.animation_data
    return anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot)


# The curves a bake adds besides the bones': the effector's per-frame errors
# (test_bake_progress.py checks their values).
ERROR_PROPS = {"dhik pos: Hand", "dhik rot: Hand"}
ERROR_CURVES = {(f'["{p}"]', 0) for p in ERROR_PROPS}


def bone_curves(ob: bpy.types.Object) -> list:
    """The F-curves of pose bones in the armature's action."""
    return [fc for fc in channelbag(ob).fcurves if fc.data_path.startswith("pose.bones")]


def snapshot(cb) -> dict[tuple[str, int], list[tuple]]:
    """Every key of every F-curve: frame, value, interpolation, handles and their types,
    whether it is selected."""
    out = {}
    for fc in cb.fcurves:
        out[(fc.data_path, fc.array_index)] = [
            (tuple(k.co), k.interpolation, tuple(k.handle_left), tuple(k.handle_right),
             k.handle_left_type, k.handle_right_type, k.easing, k.type,
             k.select_control_point)
            for k in fc.keyframe_points
        ]
    return out


def solved_channel(path: str) -> bool:
    return any(f'"{b}"' in path for b in ARM)


def bake() -> None:
    assert bpy.ops.dhik.bake() == {"FINISHED"}


def pose_matches_bake(core, ob, animation: Path, joints=ARM, atol=2e-6) -> float:
    """Largest difference between Blender's evaluated joint frames (``joints``) and the
    core's FK of the baked values, over the baked frames."""
    skel = core.Skeleton(core.formats.load_skeleton(_export(ob)))
    rest = {n: w[:3, :3] for n, w in skel.world_transforms().items()}
    obj = np.array(ob.matrix_world, dtype=float)
    worst = 0.0
    for fr in core.formats.load_animation(animation):
        bpy.context.scene.frame_set(fr["frame"])
        skel.reset()
        skel.set_joint_values({n: v for n, v in fr["joints"].items() if n in joints})
        want = skel.world_transforms()
        got = blender_joint_worlds(ob, {n: rest[n] for n in joints})
        for n in joints:
            worst = max(worst, float(np.abs(got[n] - obj @ want[n]).max()))
    assert worst < atol, worst
    return worst


def _export(ob) -> str:
    from addon_helpers import export_skeleton

    return export_skeleton(ob)


def local_rotations(ob, bones, frames) -> dict[tuple[str, int], np.ndarray]:
    """Each bone's evaluated local pose (matrix_basis, 4x4) at each frame."""
    out = {}
    for f in frames:
        bpy.context.scene.frame_set(f)
        for b in bones:
            out[(b, f)] = np.array(ob.pose.bones[b].matrix_basis, dtype=float)
    return out


def test_current_bake_keeps_every_other_curve_and_key(body, core, tmp_path):
    ob, _ = body
    user_animation(ob)
    for fc in channelbag(ob).fcurves:  # the rigger's selection: every other key
        for i, k in enumerate(fc.keyframe_points):
            k.select_control_point = i % 2 == 0
    action = ob.animation_data.action
    before = snapshot(channelbag(ob))
    others_before = local_rotations(ob, ["Spine", "Head"], range(0, 141, 7))
    actions_before = {a.name for a in bpy.data.actions}

    bake()

    assert ob.animation_data.action == action  # the same action, no new one
    assert {a.name for a in bpy.data.actions} == actions_before
    after = snapshot(channelbag(ob))
    assert set(before) <= set(after)
    added = set(after) - set(before)
    # Every channel the bake adds belongs to a solved bone, in that bone's rotation mode.
    assert added == {(f'pose.bones["{b}"].rotation_quaternion', i)
                     for b in ("Wrist", "Hand") for i in range(4)} | ERROR_CURVES
    kept_curves = [k for k in before if not solved_channel(k[0])]
    assert kept_curves  # spine and head curves
    for key in kept_curves:
        assert after[key] == before[key], key  # untouched, every attribute
    for key in before:
        if not solved_channel(key[0]):
            continue
        out_before = [k for k in before[key] if not START <= k[0][0] <= END]
        out_after = [k for k in after[key] if not START <= k[0][0] <= END]
        # Values, interpolation, handle types, easing, selection of the keys outside
        # the range.
        assert [(k[0], k[1], k[4:]) for k in out_after] == [
            (k[0], k[1], k[4:]) for k in out_before], key
    for key, keys in after.items():
        inside = [k[0][0] for k in keys if START <= k[0][0] <= END]
        if solved_channel(key[0]) and "location" not in key[0]:
            assert inside == list(range(START, END + 1)), key
            # new keys selected, as Blender's Bake Action leaves them
            assert all(k[8] for k in keys if START <= k[0][0] <= END), key
    # A solved bone's keyed location holds its rest value inside the range.
    loc = [k for k in after[('pose.bones["Elbow"].location', 1)] if START <= k[0][0] <= END]
    assert [(k[0][0], k[0][1]) for k in loc] == [(START, 0.0), (END, 0.0)]
    # Spine and head play as before on every frame, inside the range and out.
    assert local_rotations(ob, ["Spine", "Head"], range(0, 141, 7)).keys() == others_before.keys()
    for k, m in local_rotations(ob, ["Spine", "Head"], range(0, 141, 7)).items():
        assert np.allclose(m, others_before[k], atol=1e-7), k
    # The arm follows the bake: Blender's pose equals the core's FK of animation.json.
    pose_matches_bake(core, ob, Path(bpy.context.scene.dhik.animation_path))
    for name, mode in MODES.items():
        assert ob.pose.bones[name].rotation_mode == mode
    n_keys = sum(len(v) for v in after.values()) - sum(len(v) for v in before.values())
    print(f"\nFIGURES current bake: F-curves before {len(before)}, added {len(added)}, "
          f"kept untouched {len(kept_curves)}; keys before "
          f"{sum(len(v) for v in before.values())}, after {sum(len(v) for v in after.values())}"
          f" (net {n_keys:+d})")


def test_new_action_keeps_the_old_one(body, core):
    ob, _ = body
    user_animation(ob)
    old = ob.animation_data.action
    before = snapshot(channelbag(ob))
    bpy.context.scene.dhik.bake_action = "NEW"
    bake()
    new = ob.animation_data.action
    assert new != old and old.use_fake_user
    assert snapshot(anim_utils.action_get_channelbag_for_slot(old, old.slots[0])) == before
    paths = {fc.data_path.split('"')[1] for fc in channelbag(ob).fcurves}
    assert paths == set(ARM) | ERROR_PROPS  # only the solved bones (and the errors)
    pose_matches_bake(core, ob, Path(bpy.context.scene.dhik.animation_path))


def test_bake_without_an_action_makes_one(body, core):
    ob, _ = body
    assert ob.animation_data is None
    bake()
    assert ob.animation_data.action is not None
    assert {fc.data_path.split('"')[1] for fc in channelbag(ob).fcurves} == set(ARM) | \
        ERROR_PROPS
    pose_matches_bake(core, ob, Path(bpy.context.scene.dhik.animation_path))


def test_partial_rebake_replaces_only_its_range(body, core, tmp_path):
    ob, target = body
    user_animation(ob)
    s = bpy.context.scene.dhik
    bake()
    first = snapshot(channelbag(ob))
    # Move the target for the second bake, so new keys differ from the first bake's.
    target.delta_location = (0.0, 0.03, -0.02)
    s.frame_start, s.frame_end = 20, 30
    s.animation_path = str(tmp_path / "second.json")
    bake()
    second = snapshot(channelbag(ob))
    assert set(second) == set(first)
    changed = 0
    for key in first:
        out_a = [k for k in first[key] if not 20 <= k[0][0] <= 30]
        out_b = [k for k in second[key] if not 20 <= k[0][0] <= 30]
        assert [(k[0], k[1]) for k in out_b] == [(k[0], k[1]) for k in out_a], key
        if solved_channel(key[0]) and "location" not in key[0]:
            assert [k[0][0] for k in second[key] if 20 <= k[0][0] <= 30] == list(range(20, 31))
            inside_a = [k[0][1] for k in first[key] if 20 <= k[0][0] <= 30]
            inside_b = [k[0][1] for k in second[key] if 20 <= k[0][0] <= 30]
            changed += not np.allclose(inside_a, inside_b, atol=1e-6)
    assert changed > 0  # the re-bake did key new values inside 20..30
    pose_matches_bake(core, ob, tmp_path / "second.json")


def test_euler_bones_keep_their_mode_with_continuous_curves(body, core):
    ob, _ = body
    bake()
    cb = channelbag(ob)
    paths = {fc.data_path for fc in cb.fcurves}
    assert 'pose.bones["Shoulder"].rotation_euler' in paths
    assert 'pose.bones["Elbow"].rotation_euler' in paths
    assert not any("Shoulder" in p and "quaternion" in p for p in paths)
    assert not any("Elbow" in p and "quaternion" in p for p in paths)
    hinge = next(i for i, a in enumerate("xyz") if not getattr(ob.pose.bones["Elbow"],
                                                               f"lock_ik_{a}"))
    elbow = None
    for fc in cb.fcurves:
        co = np.array([k.co[1] for k in fc.keyframe_points])
        assert np.abs(np.diff(co)).max() < 0.5, (fc.data_path, fc.array_index)  # no 2*pi jumps
        if fc.data_path.endswith('"Elbow"].rotation_euler') and fc.array_index == hinge:
            elbow = co
    assert elbow is not None and elbow.max() - elbow.min() > math.pi  # turned past pi
    pose_matches_bake(core, ob, Path(bpy.context.scene.dhik.animation_path))


def test_rebake_past_a_half_turn_continues_the_curves(body, core, tmp_path):
    """A sub-range re-baked where the elbow is past pi continues the Euler turns (and the
    quaternion signs) of the keys before it: no 2*pi jump at the range's edges."""
    ob, _ = body
    bake()
    s = bpy.context.scene.dhik
    s.frame_start, s.frame_end = 100, 110  # elbow angle about 3.3 .. 3.6 rad
    s.animation_path = str(tmp_path / "part.json")
    bake()
    for fc in channelbag(ob).fcurves:
        co = np.array([k.co[1] for k in fc.keyframe_points])
        assert np.abs(np.diff(co)).max() < 0.5, (fc.data_path, fc.array_index)
    pose_matches_bake(core, ob, tmp_path / "part.json")


def test_rebake_of_a_middle_part_joins_the_keys_around_it(body, tmp_path):
    """The arm has more angles than the hand's pose needs (ball shoulder and wrist, hinged
    elbow and hand: 8 for 6), so a part of the clip baked alone may take another of its
    solutions. Re-baked into the current action, frames 60-80 start from the pose keyed
    on frame 59 and end at the pose keyed on frame 81: no arm bone turns more between
    59 and 60, or 80 and 81, than twice its largest turn between frames of the first
    bake (evaluated local pose matrices)."""
    ob, _ = body
    bake()

    def local(frame: int) -> dict[str, np.ndarray]:
        bpy.context.scene.frame_set(frame)
        return {n: np.array(ob.pose.bones[n].matrix_basis, dtype=float) for n in ARM}

    poses = [local(f) for f in range(START, END + 1)]
    usual = max(_joint_error(a[n], b[n])
                for a, b in zip(poses[:-1], poses[1:], strict=True) for n in ARM)
    s = bpy.context.scene.dhik
    s.frame_start, s.frame_end = 60, 80
    s.animation_path = str(tmp_path / "part.json")
    bake()
    for f in (59, 80):
        a, b = local(f), local(f + 1)
        assert max(_joint_error(a[n], b[n]) for n in ARM) <= 2.0 * usual, f


@pytest.mark.parametrize("mode", ["XZY", "YXZ", "YZX", "ZYX", "AXIS_ANGLE"])
def test_every_rotation_mode_evaluates_to_the_solved_pose(body, core, mode):
    ob, _ = body
    for name in ARM:
        ob.pose.bones[name].rotation_mode = mode
    bake()
    prop = "rotation_axis_angle" if mode == "AXIS_ANGLE" else "rotation_euler"
    assert {fc.data_path for fc in bone_curves(ob)} == {
        f'pose.bones["{n}"].{prop}' for n in ARM}
    pose_matches_bake(core, ob, Path(bpy.context.scene.dhik.animation_path))


def _joint_error(a: np.ndarray, b: np.ndarray) -> float:
    """Rotation angle between two local pose matrices plus their location distance."""
    r = a[:3, :3].T @ b[:3, :3]
    angle = math.atan2(np.linalg.norm([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0],
                                       r[1, 0] - r[0, 1]]) / 2, (np.trace(r) - 1) / 2)
    return max(angle, float(np.linalg.norm(a[:3, 3] - b[:3, 3])))


def _key_count(ob) -> int:
    return sum(len(fc.keyframe_points) for fc in bone_curves(ob))


def test_frame_step_keys_every_nth_and_the_last_frame(body):
    ob, _ = body
    bpy.context.scene.dhik.frame_step = 7
    assert (END - START) % 7 != 0  # the last frame is not a multiple of the step
    bake()
    for fc in bone_curves(ob):
        assert [k.co[0] for k in fc.keyframe_points] == [*range(START, END + 1, 7), END]
    assert bpy.context.scene.dhik.result_keys == _key_count(ob)


def test_key_reduction_holds_its_bound_in_joint_space(body):
    ob, _ = body
    s = bpy.context.scene.dhik
    # Solved values scatter by about the solver's tolerances (1e-3 by default) from frame
    # to frame, and no reduction can drop keys below that scatter: solve tighter here.
    s.position_tolerance = s.orientation_tolerance = 1e-7
    frames = range(START, END + 1)
    bake()
    full_keys = _key_count(ob)
    full = local_rotations(ob, ARM, frames)
    s.key_reduction = 1e-3
    bake()
    reduced_keys = _key_count(ob)
    reduced = local_rotations(ob, ARM, frames)
    worst = max(_joint_error(reduced[k], full[k]) for k in full)
    assert worst <= 1e-3 + 1e-6, worst  # the full bake's keys are the solved values (float32)
    assert reduced_keys < 0.5 * full_keys
    assert s.result_keys == reduced_keys and s.result_key_error <= 1e-3
    print(f"\nFIGURES key_reduction 1e-3: {reduced_keys} keys vs {full_keys} without "
          f"(largest joint error {worst:.3g})")


def test_panel_shows_the_bake_options_with_tooltips(addon):
    from types import SimpleNamespace
    from unittest import mock

    layout = mock.MagicMock()
    addon.dhik_addon.panel.DHIK_PT_panel.draw(SimpleNamespace(layout=layout), bpy.context)
    drawn = [c.args[1] for c in layout.mock_calls if c[0].endswith(".prop")]
    for name in ("bake_action", "frame_step", "key_reduction"):
        assert name in drawn
    props = bpy.context.scene.dhik.bl_rna.properties
    assert props["bake_action"].default == "CURRENT"
    assert {i.identifier for i in props["bake_action"].enum_items} == {"CURRENT", "NEW"}
    assert props["frame_step"].hard_min == 1 and props["key_reduction"].hard_min == 0.0
    for name in ("bake_action", "frame_step", "key_reduction"):
        assert props[name].name and len(props[name].description) > 20  # label and tooltip
    for item in props["bake_action"].enum_items:
        assert len(item.description) > 20


def _metarig() -> bpy.types.Object | None:
    """The Rigify human metarig (bundled with the bpy module), or None without Rigify."""
    try:
        bpy.ops.preferences.addon_enable(module="rigify")
        bpy.ops.object.armature_human_metarig_add()
    except (RuntimeError, AttributeError):
        return None
    ob = bpy.context.active_object
    return ob if ob is not None and ob.type == "ARMATURE" else None


def test_metarig_arm_bake_keeps_the_head_and_the_arm_outside_the_range():
    """A rigger's rig: the head and neck keep their animation, the arm keeps its keys
    outside the range, the Euler upper arm stays Euler, and only the chain is keyed."""
    ob = _metarig()
    if ob is None:
        pytest.skip("this bpy has no Rigify human metarig")
    pose = ob.pose.bones
    arm = ("upper_arm.L", "forearm.L", "hand.L")
    for f, a in [(0, 0.0), (40, 0.3), (90, -0.2), (140, 0.1)]:
        for name in ("spine.004", "spine.006"):  # neck and head
            pose[name].rotation_quaternion = Quaternion((0, 0, 1), a)
            pose[name].keyframe_insert("rotation_quaternion", frame=f)
    for f, a in [(0, 0.2), (5, 0.4), (135, -0.3), (140, 0.0)]:
        pose["forearm.L"].rotation_quaternion = Quaternion((1, 0, 0), a)
        pose["forearm.L"].keyframe_insert("rotation_quaternion", frame=f)
    # An empty following the hand of an FK motion of the arm (set after the action plays).
    goal = bpy.data.objects.new("goal", None)
    bpy.context.collection.objects.link(goal)
    goal.rotation_mode = "XYZ"
    previous = None
    for f in range(START, END + 1):
        t = (f - START) / (END - START)
        bpy.context.scene.frame_set(f)
        pose["upper_arm.L"].rotation_quaternion = Quaternion((1, 0.3, 0.2), 0.3 + 0.6 * t)
        pose["forearm.L"].rotation_quaternion = Quaternion((1, 0, 0), 0.2 + 0.8 * t)
        pose["hand.L"].rotation_quaternion = Quaternion((0.3, 0, 1), 0.4 * t)
        bpy.context.view_layer.update()
        loc, rot, _scale = (ob.matrix_world @ pose["hand.L"].matrix).decompose()
        previous = rot.to_euler("XYZ", previous) if previous else rot.to_euler("XYZ")
        goal.location, goal.rotation_euler = loc, previous
        goal.keyframe_insert("location", frame=f)
        goal.keyframe_insert("rotation_euler", frame=f)
    for name in arm:
        pose[name].rotation_quaternion = (1, 0, 0, 0)
    pose["upper_arm.L"].rotation_mode = "XYZ"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 0, 140
    s = scene.dhik
    s.armature, s.target, s.effector = ob, goal, "hand.L"
    s.use_scene_range = False
    s.frame_start, s.frame_end = START, END
    before = snapshot(channelbag(ob))
    head_before = local_rotations(ob, ["spine.004", "spine.006"], range(0, 141, 7))
    bake()
    after = snapshot(channelbag(ob))
    for key, keys in before.items():
        if '"forearm.L"' in key[0]:
            assert [k[:2] for k in after[key] if not START <= k[0][0] <= END] == [
                k[:2] for k in keys if not START <= k[0][0] <= END]
        else:
            assert after[key] == keys, key
    keyed = {k[0].split('"')[1] for k in after if after[k] != before.get(k)}
    assert set(arm) <= keyed and "spine.006" not in keyed and "hand.R" not in keyed
    assert len(keyed) < 12  # the chain from the hand to the root, not all 159 bones
    assert any(k[0] == 'pose.bones["upper_arm.L"].rotation_euler' for k in after)
    assert pose["upper_arm.L"].rotation_mode == "XYZ"
    for k, m in local_rotations(ob, ["spine.004", "spine.006"], range(0, 141, 7)).items():
        assert np.allclose(m, head_before[k], atol=1e-7), k
    for key, keys in after.items():
        if key[0].endswith("rotation_euler"):
            co = np.array([k[0][1] for k in keys])
            assert np.abs(np.diff(co)).max() < 0.5, key
    print(f"\nFIGURES metarig: {len(ob.pose.bones)} bones, {len(keyed)} keyed "
          f"({', '.join(sorted(keyed))}); F-curves {len(before)} -> {len(after)}, "
          f"{sum(after[k] == before[k] for k in before)} untouched; keys "
          f"{sum(map(len, before.values()))} -> {sum(map(len, after.values()))}")


def test_interactive_path_honours_the_options(body, addon):
    """The UI's bake (a worker thread solves, then the operator applies) keys exactly what
    the scripted bake keys, with frame_step and key_reduction."""
    import time

    ob, _ = body
    user_animation(ob)
    s = bpy.context.scene.dhik
    s.frame_step, s.key_reduction = 2, 1e-3
    bake_job = addon.dhik_addon.bake_job
    job = bake_job.BakeJob.prepare(bpy.context)
    worker = addon.dhik_addon.bake_run.BakeThread(job)
    worker.start()
    while not worker.finished():
        time.sleep(0.01)
    assert worker.error is None and worker.result is not None
    job.apply(bpy.context, worker.result)
    interactive = snapshot(channelbag(ob))
    keys = s.result_keys
    user_animation(ob)  # the same user keys again (they were replaced in the range)
    bake()
    assert snapshot(channelbag(ob)) == interactive and s.result_keys == keys
    inside = [k[0][0] for k in interactive[('pose.bones["Wrist"].rotation_quaternion', 0)]
              if START <= k[0][0] <= END]
    assert set(inside) <= set(range(START, END + 1, 2)) | {END} and len(inside) < 61


def test_posed_fixed_bone_on_the_chain_is_warned_about(body, capfd):
    """The fixed root keyed by the user keeps its keys, and the bake says it took it at
    rest; a bone off the chain (the head) or a NEW bake gives no such warning."""
    ob, _ = body
    root = ob.pose.bones["Root"]
    root.location = (0.0, 0.0, 0.1)
    root.keyframe_insert("location", frame=0)
    ob.pose.bones["Head"].keyframe_insert("rotation_quaternion", frame=0)
    before = snapshot(channelbag(ob))
    capfd.readouterr()
    bake()
    out = capfd.readouterr().out
    assert "Bones 'Root' are fixed joints on the chain but posed or animated" in out
    after = snapshot(channelbag(ob))
    assert after[('pose.bones["Root"].location', 2)] == before[('pose.bones["Root"].location', 2)]
    bpy.context.scene.dhik.bake_action = "NEW"
    bake()
    assert "fixed joints on the chain" not in capfd.readouterr().out


def test_a_new_curves_keys_get_every_attribute_as_when_all_are_set(addon):
    """``replace_range`` leaves the attributes ``keyframe_points.add`` gives (and the
    auto-clamped handles ``FCurve.update`` sets) alone on a curve without keys: each key
    ends exactly as when every attribute is written."""
    from dhik_blender.dhik_addon import keying

    act = bpy.data.actions.new("keys")
    slot = act.slots.new(id_type="OBJECT", name="E")
    bag = act.layers.new("L").strips.new(type="KEYFRAME").channelbag(slot, ensure=True)
    frames, values = np.arange(5, 12, dtype=float), np.linspace(-1.0, 2.0, 7)
    fast, full = bag.fcurves.new("location", index=0), bag.fcurves.new("location", index=1)
    keying.replace_range(fast, 5, 11, frames, values)
    full.keyframe_points.add(1)  # a key in the range: not fresh, every attribute written
    full.keyframe_points[0].co = (6.0, 0.0)
    keying.replace_range(full, 5, 11, frames, values)
    got, want = keying._read_keys(fast), keying._read_keys(full)
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    defaults = keying._new_keys(frames, values)
    for name in keying._ADDED - {"handle_left", "handle_right"}:  # update() sets those
        np.testing.assert_array_equal(got[name].ravel(), defaults[name].ravel(), err_msg=name)
    bpy.data.actions.remove(act)
