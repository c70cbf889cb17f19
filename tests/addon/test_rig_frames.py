"""Rigs made in Blender (issue 8, points 1 and 2) on real bpy.

- Targets mean the bone's orientation: an Empty snapped to the effector bone
  (``matrix_world = armature.matrix_world @ pose_bone.matrix``) is already solved there;
  Import/Export Targets turn targets.json's joint frames into that and back.
- Locks and limits hold in the bone's own axes, whatever its rest orientation.
- The main effector's position / orientation weights.

Rigs: ANGLED_ARM (hand-made, angled and rolled bones: upper arm with an IK limit on X,
forearm hinge, hand with lock_ik_y) and the Rigify human metarig, which the bpy module
ships. References are Blender's own numbers (pose-bone matrices, mathutils Euler and
quaternion decompositions), never dhik's. Rotations in radians, lengths in metres.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import bpy
import numpy as np
import pytest
from addon_helpers import (
    FOREARM_X,
    UPPER_ARM_X,
    blender_joint_worlds,
    bone_world,
    build_angled_arm,
    build_metarig,
    export_skeleton,
    keyed_root,
    write_json,
)
from mathutils import Euler, Matrix, Quaternion

ARM_BONES = ("upper_arm", "forearm", "hand")


def _np(m: Any) -> np.ndarray:
    return np.array(m, dtype=float)


def _hand_pose(upper: tuple[float, float, float], fore: float,
               hand: tuple[float, float, float]) -> dict[str, Quaternion]:
    """Pose channels of ANGLED_ARM: intrinsic XYZ angles (Euler 'ZYX' is Rx Ry Rz) of the
    upper arm and the hand, the forearm's angle about its X axis."""
    return {
        "upper_arm": Euler(upper, "ZYX").to_quaternion(),
        "forearm": Quaternion((1.0, 0.0, 0.0), fore),
        "hand": Euler(hand, "ZYX").to_quaternion(),
    }


def _set_pose(ob: bpy.types.Object, pose: dict[str, Quaternion], frame: int | None = None) -> None:
    for name, q in pose.items():
        pb = ob.pose.bones[name]
        pb.rotation_quaternion = q
        if frame is not None:
            pb.keyframe_insert("rotation_quaternion", frame=frame)
    bpy.context.view_layer.update()


def _snapped_empty(ob: bpy.types.Object, bone: str, name: str = "goal") -> bpy.types.Object:
    """An Empty whose world matrix is the bone's (what Snap / copying the matrix gives)."""
    empty = bpy.data.objects.new(name, None)
    bpy.context.collection.objects.link(empty)
    empty.matrix_world = ob.matrix_world @ ob.pose.bones[bone].matrix
    bpy.context.view_layer.update()
    return empty


def _rotations(ob: bpy.types.Object) -> dict[str, Quaternion]:
    """Every pose bone's rotation relative to its rest (``matrix_basis``)."""
    return {pb.name: pb.matrix_basis.to_quaternion() for pb in ob.pose.bones}


def _angle(a: Quaternion, b: Quaternion) -> float:
    return float(a.rotation_difference(b).angle)


def _bake_range(ob: bpy.types.Object, target: bpy.types.Object, effector: str, start: int,
                end: int, tolerance: float | None = None) -> None:
    s = bpy.context.scene.dhik
    s.armature, s.target, s.effector = ob, target, effector
    s.use_scene_range = False
    s.frame_start, s.frame_end = start, end
    if tolerance is not None:
        s.position_tolerance = s.orientation_tolerance = tolerance
    assert bpy.ops.dhik.bake() == {"FINISHED"}


def _max_change(before: dict[str, Quaternion], after: dict[str, Quaternion]) -> float:
    return max(_angle(before[n], after[n]) for n in before)


# --------------------------------------------------------------- point 1: snapped targets


def test_empty_snapped_to_a_posed_hand_is_already_solved():
    """ANGLED_ARM posed at frame 5, an Empty snapped to the hand: the bake moves no joint."""
    ob = build_angled_arm()
    _set_pose(ob, _hand_pose((0.3, -0.2, 0.25), 0.8, (0.3, 0.0, -0.25)), frame=5)
    bpy.context.scene.frame_set(5)
    before = _rotations(ob)
    empty = _snapped_empty(ob, "hand")
    _bake_range(ob, empty, "hand", 5, 5, tolerance=1e-7)
    bpy.context.scene.frame_set(5)
    after = _rotations(ob)
    assert bpy.context.scene.dhik.result_converged == 1
    assert _max_change(before, after) < 1e-6
    assert np.allclose(bone_world(ob, "hand"), _np(empty.matrix_world), atol=1e-6)


def test_empty_snapped_to_the_metarig_hand_is_already_solved():
    """The Rigify metarig at rest, an Empty snapped to hand.L: no bone of the chain from
    the spine to the hand (nor any other) turns."""
    ob = build_metarig()
    if ob is None:
        pytest.skip("this bpy has no Rigify human metarig")
    before = _rotations(ob)
    empty = _snapped_empty(ob, "hand.L")
    _bake_range(ob, empty, "hand.L", 0, 0)
    bpy.context.scene.frame_set(0)
    assert bpy.context.scene.dhik.result_converged == 1
    assert _max_change(before, _rotations(ob)) < 1e-6


def _metarig_with_locks() -> bpy.types.Object:
    """The metarig with lock_ik_y on hand.L and an IK limit on upper_arm.L's X axis."""
    ob = build_metarig()
    if ob is None:
        pytest.skip("this bpy has no Rigify human metarig")
    pose = ob.pose.bones
    pose["hand.L"].lock_ik_y = True
    upper = pose["upper_arm.L"]
    upper.use_ik_limit_x, upper.ik_min_x, upper.ik_max_x = True, -0.6, 0.9
    return ob


def test_metarig_with_locks_snapped_at_rest_spec_method():
    """With a lock and a limit (rest joints in the exported skeleton) the snapped hand is
    still solved at rest: the spec method starts at the T-pose and stops there."""
    ob = _metarig_with_locks()
    before = _rotations(ob)
    empty = _snapped_empty(ob, "hand.L")
    bpy.context.scene.dhik.method = "spec"
    _bake_range(ob, empty, "hand.L", 0, 0)
    bpy.context.scene.frame_set(0)
    assert bpy.context.scene.dhik.result_converged == 1
    assert _max_change(before, _rotations(ob)) < 1e-6


def test_metarig_with_locks_snapped_at_rest_robust_method():
    ob = _metarig_with_locks()
    before = _rotations(ob)
    empty = _snapped_empty(ob, "hand.L")
    _bake_range(ob, empty, "hand.L", 0, 0)
    bpy.context.scene.frame_set(0)
    assert _max_change(before, _rotations(ob)) < 1e-6


# ------------------------------------------------------- point 1: import / export targets

KEYS = [
    {"frame": 4, "pos": [0.6, 0.1, 1.0], "euler": [90.0, 0.0, 45.0]},
    {"frame": 10, "pos": [0.55, -0.1, 0.9], "euler": [-90.0, 45.0, 0.0]},
    {"frame": 16, "pos": [0.5, 0.0, 1.1], "euler": [0.0, 12.5, 200.0]},
]


def _to_joint(core: Any, ob: bpy.types.Object, bone: str) -> np.ndarray:
    """``B^T C``: Blender's rest rotation of ``bone`` and its joint's T-pose rotation from
    the core's FK of the exported skeleton (R_joint = R_bone @ B^T C)."""
    skel = core.Skeleton(core.formats.load_skeleton(export_skeleton(ob)))
    c = skel.world_transforms()[bone][:3, :3]
    b = _np(ob.data.bones[bone].matrix_local.to_3x3())
    return b.T @ c


@pytest.mark.parametrize("rig", ["arm", "metarig"])
def test_import_targets_shows_the_bone_orientation_and_exports_back(core, tmp_path, rig):
    """Targets for ANGLED_ARM's forearm (a hinge: its joint keeps the upper arm's frame,
    turned against the forearm bone) or the metarig's hand.L (a free spherical joint in
    the world-aligned frame) become a target parented to the keyed empty."""
    if rig == "arm":
        ob, bone = build_angled_arm(), "forearm"
    else:
        ob, bone = build_metarig(), "hand.L"
        if ob is None:
            pytest.skip("this bpy has no Rigify human metarig")
    s = bpy.context.scene.dhik
    s.armature, s.effector = ob, ""
    path = write_json(tmp_path / "t" / "targets.json", KEYS)
    assert bpy.ops.dhik.import_targets(filepath=str(path), bone=bone) == {"FINISHED"}
    target = s.target
    assert keyed_root(target) is not target  # the keys sit on the target's parent
    n = _to_joint(core, ob, bone)
    assert not np.allclose(n, np.eye(3), atol=1e-3)  # an angled, rolled bone
    s.effector = bone  # Export Targets converts for the panel's effector
    spec = dict(core.trajectory.interpolate_keyframes(core.formats.parse_targets(KEYS)))
    for f in range(0, 17):
        bpy.context.scene.frame_set(f)
        world = _np(target.matrix_world)
        assert np.allclose(world[:3, 3], spec[f][:3, 3], atol=1e-6), f
        # the target shows the bone: rotation = joint frame (the spec's, interpolated) @ N^T
        assert np.allclose(world[:3, :3], spec[f][:3, :3] @ n.T, atol=1e-6), f
    out = tmp_path / "out.json"
    assert bpy.ops.dhik.export_targets(filepath=str(out)) == {"FINISHED"}
    got = json.loads(out.read_text())
    assert [k["frame"] for k in got] == [4, 10, 16]
    for a, b in zip(got, KEYS, strict=True):
        assert np.abs(np.subtract(a["pos"], b["pos"])).max() < 1e-9
        assert np.abs(np.subtract(a["euler"], b["euler"])).max() < 1e-9


def test_export_targets_of_a_snapped_empty_is_the_joint_frame(core, tmp_path):
    """Every Frame export of an Empty snapped to the posed forearm writes the forearm
    joint's frame: the bone's world rotation @ B^T C (not the identity on this bone)."""
    ob = build_angled_arm()
    _set_pose(ob, _hand_pose((0.2, 0.1, -0.3), 1.1, (-0.2, 0.0, 0.4)))
    empty = _snapped_empty(ob, "forearm")
    scene = bpy.context.scene
    s = scene.dhik
    s.armature, s.effector, s.target = ob, "forearm", empty
    scene.frame_start = scene.frame_end = 0
    out = tmp_path / "snap.json"
    assert bpy.ops.dhik.export_targets(filepath=str(out), every_frame=True) == {"FINISHED"}
    (key,) = core.formats.load_targets(out)
    n = _to_joint(core, ob, "forearm")
    assert not np.allclose(n, np.eye(3), atol=1e-3)
    joint = _np(bone_world(ob, "forearm"))[:3, :3] @ n
    r = core.rotations.euler_xyz_to_matrix(np.radians(key.euler))
    assert np.allclose(r, joint, atol=1e-5)  # 5 decimals in degrees
    assert np.allclose(key.pos, bone_world(ob, "forearm")[:3, 3], atol=1e-6)


# ------------------------------------------------------------ point 2: locks and limits


def _twisting_targets(ob: bpy.types.Object) -> tuple[bpy.types.Object, list[int]]:
    """An Empty keyed on frames 0..6 at the hand of poses that twist the hand about its
    locked Y axis and turn the upper arm up to 0.5 rad about its X; the arm's pose is
    cleared."""
    poses = [
        _hand_pose((0.1 * i, -0.15 * i, 0.1 * i), 0.3 + 0.2 * i, (0.2, 0.35 - 0.1 * i, -0.3))
        for i in range(6)
    ] + [_hand_pose((0.5, 0.2, 0.1), 0.9, (0.1, 0.4, 0.2))]
    empty = bpy.data.objects.new("goal", None)
    bpy.context.collection.objects.link(empty)
    frames = list(range(len(poses)))
    for f, pose in zip(frames, poses, strict=True):
        _set_pose(ob, pose)
        empty.matrix_world = ob.matrix_world @ ob.pose.bones["hand"].matrix
        empty.keyframe_insert("location", frame=f)
        empty.keyframe_insert("rotation_euler", frame=f)
    _set_pose(ob, {n: Quaternion() for n in ARM_BONES})
    return empty, frames


def _assert_pose_is_core_fk(core: Any, ob: bpy.types.Object, animation: Path) -> None:
    """Blender's evaluated bones (head, rotation @ B^T C) equal the core's FK of the
    exported skeleton (with its ``.rest`` joints) for every baked frame, within 1e-6."""
    frames = core.formats.load_animation(animation)
    skel = core.Skeleton(core.formats.load_skeleton(export_skeleton(ob)))
    rest = {n: w[:3, :3] for n, w in skel.world_transforms().items()}
    worst = 0.0
    for fr in frames:
        bpy.context.scene.frame_set(fr["frame"])
        skel.reset()
        skel.set_joint_values(fr["joints"])
        expected = skel.world_transforms()
        for name, got in blender_joint_worlds(ob, rest).items():
            worst = max(worst, float(np.abs(got - _np(ob.matrix_world) @ expected[name]).max()))
    assert worst < 1e-6, worst


def test_locks_and_limits_hold_in_the_bone_axes(core, tmp_path):
    ob = build_angled_arm()
    upper = ob.pose.bones["upper_arm"]
    upper.ik_min_x, upper.ik_max_x = limit = (-0.1, 0.1)  # the targets' poses go to 0.5
    empty, frames = _twisting_targets(ob)
    bpy.context.scene.dhik.animation_path = str(tmp_path / "animation.json")
    _bake_range(ob, empty, "hand", frames[0], frames[-1])
    _assert_pose_is_core_fk(core, ob, tmp_path / "animation.json")
    baked = json.loads((tmp_path / "animation.json").read_text())["frames"]
    assert all(set(f["joints"]) == set(ARM_BONES) for f in baked)  # fixed joints: no values
    upper_x, twist_y, fore = [], [], []
    for f in frames:
        bpy.context.scene.frame_set(f)
        rot = _rotations(ob)
        # hand: lock_ik_y. Its rotation has no angle about its own Y in the XYZ sense ...
        twist_y.append(abs(rot["hand"].to_euler("ZYX").y))
        # upper arm: IK limit on its own X axis (intrinsic X angle)
        upper_x.append(rot["upper_arm"].to_euler("ZYX").x)
        # forearm: a hinge about its own X axis, within its limits
        q = rot["forearm"]
        assert math.hypot(q.y, q.z) < 1e-6, f
        fore.append(2.0 * math.atan2(q.x, q.w))
    assert max(twist_y) < 1e-6
    assert min(upper_x) >= limit[0] - 1e-6 and max(upper_x) <= limit[1] + 1e-6
    assert max(upper_x) > limit[1] - 1e-3  # the limit was reached: it is in force
    assert min(fore) >= FOREARM_X[0] - 1e-6 and max(fore) <= FOREARM_X[1] + 1e-6


def test_metarig_hand_lock_and_upper_arm_limit_hold():
    """The metarig (chain spine.001 .. hand.L): hand.L never turns about its own Y, the
    upper arm's X angle stays in its limit, on targets that ask for a twisted hand."""
    ob = _metarig_with_locks()
    empty = bpy.data.objects.new("goal", None)
    bpy.context.collection.objects.link(empty)
    pose = ob.pose.bones
    for f in range(6):
        t = f / 5
        for name, angles in (("upper_arm.L", (0.9 * t, -0.3 * t, 0.2)),
                             ("forearm.L", (0.4 + 0.6 * t, 0.0, 0.0)),
                             ("hand.L", (0.3, 0.7 * (t - 0.5), -0.3))):  # a Y angle: twist
            pose[name].rotation_mode = "QUATERNION"
            pose[name].rotation_quaternion = Euler(angles, "ZYX").to_quaternion()
        bpy.context.view_layer.update()
        empty.matrix_world = ob.matrix_world @ pose["hand.L"].matrix
        empty.keyframe_insert("location", frame=f)
        empty.keyframe_insert("rotation_euler", frame=f)
    for pb in pose:
        pb.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    _bake_range(ob, empty, "hand.L", 0, 5)
    for f in range(6):
        bpy.context.scene.frame_set(f)
        rot = _rotations(ob)
        assert abs(rot["hand.L"].to_euler("ZYX").y) < 1e-6, f
        assert -0.6 - 1e-6 <= rot["upper_arm.L"].to_euler("ZYX").x <= 0.9 + 1e-6, f


def test_exported_skeleton_keeps_locks_and_limits(tmp_path, capfd):
    ob = build_angled_arm()
    bpy.context.scene.dhik.armature = ob
    data = json.loads(Path(export_skeleton(ob)).read_text())
    joints = {j["name"]: j for j in data["joints"]}
    # the hand turns in its own axes: a fixed rest joint carries the bone's rest rotation
    rest = joints["hand.rest"]
    assert rest["type"] == "fixed" and rest["parent"] == "forearm"
    assert joints["hand"]["parent"] == "hand.rest" and joints["hand"]["type"] == "spherical"
    assert joints["hand"]["limits"] == [None, [0.0, 0.0], None]
    assert joints["upper_arm"]["limits"][0] == pytest.approx(UPPER_ARM_X)
    assert joints["upper_arm"]["limits"][1:] == [None, None]
    fore = joints["forearm"]
    assert fore["type"] == "revolute" and fore["limits"] == pytest.approx(FOREARM_X)
    # the hinge axis is the forearm bone's X, in the parent joint's frame (upper arm)
    c_upper = _rest_rotation(data, "upper_arm")
    x = _np(ob.data.bones["forearm"].matrix_local.to_3x3())[:, 0]
    assert np.allclose(c_upper @ np.array(fore["axis"]), x, atol=1e-6)
    # what only approximates Blender's IK is named in WARNING reports
    out = capfd.readouterr().out
    assert "Warning: Approximate: 'upper_arm': IK limits on X" in out
    assert "Warning: Approximate: 'hand': lock_ik_y" in out


def _rest_rotation(data: dict, name: str) -> np.ndarray:
    """A joint's T-pose rotation: the product of the fixed quaternions above it (mathutils)."""
    joints = {j["name"]: j for j in data["joints"]}
    m = Matrix.Identity(3)
    at = joints[name]["parent"]
    chain = []
    while at is not None:
        chain.append(joints[at])
        at = joints[at]["parent"]
    for j in reversed(chain + [joints[name]]):
        if j["type"] == "fixed" and j.get("quaternion"):
            m = m @ Quaternion(j["quaternion"]).to_matrix()
    return _np(m)


def test_chain_length_in_bones_counts_the_rest_joints_with_their_bone(addon):
    """Blender counts a chain in bones; the exported skeleton has a fixed ``.rest`` joint
    above the hand and the upper arm, so n bones are more than n joints of the path."""
    ob = build_angled_arm()
    armature_read = addon.dhik_addon.armature_read
    defn = armature_read.read_skeleton(ob)
    parent = {j.name: j.parent for j in defn.joints}
    path, at = [], "hand"
    while at is not None:
        path.append(at)
        at = parent[at]
    assert path == ["hand", "hand.rest", "forearm", "upper_arm", "upper_arm.rest", "root"]
    counts = [armature_read.chain_joint_count(ob, defn, "hand", n) for n in range(6)]
    assert counts == [0, 2, 3, 5, 6, 0]  # 4 bones: up to the root; 5: more than there are
    for n, k in enumerate(counts):
        if k:  # the last k joints of the path hold exactly n bones
            assert sum(name in ob.data.bones for name in path[:k]) == n


@pytest.mark.parametrize(
    ("locked", "blender"),
    [
        ("z", lambda a, b: Matrix.Rotation(a, 3, "X") @ Matrix.Rotation(b, 3, "Y")),
        ("x", lambda a, b: Matrix.Rotation(a, 3, "Z") @ Matrix.Rotation(b, 3, "Y")),
    ],
)
def test_two_free_axes_with_twist_are_blenders_segment(addon, core, locked, blender):
    """X+Y free is Blender's 'elbow' segment Rx(a) Ry(b), Z+Y free is Rz(a) Ry(b): the
    exported spherical joint (limits: first angle, twist, [0, 0]) gives exactly those
    bone rotations, on the angled, rolled forearm."""
    ob = build_angled_arm()
    pb = ob.pose.bones["forearm"]
    pb.lock_ik_x = pb.lock_ik_y = pb.lock_ik_z = False
    setattr(pb, f"lock_ik_{locked}", True)
    first = "x" if locked == "z" else "z"
    setattr(pb, f"use_ik_limit_{first}", True)
    setattr(pb, f"ik_min_{first}", -0.4)
    setattr(pb, f"ik_max_{first}", 1.2)
    pb.use_ik_limit_y, pb.ik_min_y, pb.ik_max_y = True, -0.3, 0.5
    armature_read = addon.dhik_addon.armature_read
    defn = armature_read.read_skeleton(ob)
    joint = next(j for j in defn.joints if j.name == "forearm")
    assert joint.type == "spherical"
    assert joint.limits[0] == pytest.approx((-0.4, 1.2))
    assert joint.limits[1] == pytest.approx((-0.3, 0.5)) and joint.limits[2] == (0.0, 0.0)
    assert armature_read.skeleton_notes(ob) == [
        n for n in armature_read.skeleton_notes(ob) if "'forearm'" not in n]  # exact
    jm = armature_read.joint_maps(ob, defn)["forearm"]
    for a, b in [(0.3, -0.2), (1.1, 0.45), (-0.35, 0.1)]:
        q = core.rotations.intrinsic_xyz_to_quat(a, b, 0.0)
        channel = Quaternion(jm.channel_value({"quaternion": list(q)}))
        assert _angle(channel, blender(a, b).to_quaternion()) < 1e-6


@pytest.mark.parametrize("kind", ["revolute", "prismatic", "spherical"])
def test_channel_values_are_channel_value_frame_by_frame(addon, core, kind):
    """A bake keys each joint from its whole column at once (``channel_values``): the
    same channels as converting its frames one by one (``channel_value``), for a
    rotated bone rest frame and an oblique axis."""
    rng = np.random.default_rng(7)
    unit = rng.normal(size=4)
    to_bone = core.rotations.quat_to_matrix(unit / np.linalg.norm(unit))
    axis = None if kind == "spherical" else rng.normal(size=3)
    jm = addon.dhik_addon.joint_map.JointMap("J", kind, None if axis is None else
                                             axis / np.linalg.norm(axis), to_bone)
    if kind == "spherical":
        values = rng.normal(size=(40, 4))
        values /= np.linalg.norm(values, axis=1, keepdims=True)
        entries = [{"quaternion": list(v)} for v in values]
    else:
        values = rng.uniform(-4.0, 4.0, 40)
        entries = [{"angle" if kind == "revolute" else "displacement": v} for v in values]
    one_by_one = np.array([jm.channel_value(e) for e in entries])
    np.testing.assert_allclose(jm.channel_values(values), one_by_one, rtol=0, atol=1e-14)


# ---------------------------------------------------------- point 1: main effector weights


def test_orientation_weight_zero_is_position_only():
    ob = build_angled_arm()
    _set_pose(ob, _hand_pose((0.3, -0.2, 0.25), 0.8, (0.3, 0.0, -0.25)))
    goal = bone_world(ob, "hand")
    _set_pose(ob, {n: Quaternion() for n in ARM_BONES})
    empty = bpy.data.objects.new("goal", None)
    bpy.context.collection.objects.link(empty)
    turn = Matrix.Rotation(2.0, 4, "Z")  # a rotation the hand is not asked to follow
    empty.matrix_world = Matrix.Translation(goal[:3, 3].tolist()) @ turn
    s = bpy.context.scene.dhik
    s.orientation_weight = 0.0
    _bake_range(ob, empty, "hand", 0, 0)
    bpy.context.scene.frame_set(0)
    hand = bone_world(ob, "hand")
    assert s.result_converged == 1
    assert np.linalg.norm(hand[:3, 3] - goal[:3, 3]) < s.position_tolerance
    r = _np(empty.matrix_world)[:3, :3] @ hand[:3, :3].T
    assert math.acos(max(-1.0, min(1.0, (np.trace(r) - 1) / 2))) > 0.5


@pytest.mark.parametrize(
    ("method", "weights", "message"),
    [
        ("spec", (1.0, 0.0), "Robust method"),
        ("spec", (2.0, 1.0), "Robust method"),
        ("robust", (0.0, 0.0), "both 0"),
    ],
)
def test_bad_main_weights_report_and_change_nothing(method, weights, message):
    ob = build_angled_arm()
    empty = _snapped_empty(ob, "hand")
    s = bpy.context.scene.dhik
    s.armature, s.target, s.method = ob, empty, method
    s.position_weight, s.orientation_weight = weights
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.dhik.bake()
    assert ob.animation_data is None and not s.has_result


def test_main_weights_reach_the_core(addon, core, monkeypatch):
    ob = build_angled_arm()
    empty = _snapped_empty(ob, "hand")
    s = bpy.context.scene.dhik
    s.position_weight, s.orientation_weight = 2.0, 0.5
    seen: list[Any] = []

    def recording_simulate(skeleton, tracks, *args, **kwargs):
        seen.append(tracks)
        return core.bake.simulate(skeleton, tracks, *args, **kwargs)

    monkeypatch.setattr(addon.dhik_addon.bake_job, "simulate", recording_simulate)
    _bake_range(ob, empty, "hand", 0, 0)
    ((track,),) = seen
    assert (track.name, track.pos_weight, track.rot_weight) == ("hand", 2.0, 0.5)
