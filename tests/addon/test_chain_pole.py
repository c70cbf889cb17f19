"""Chain length, pole target and bones outside the chain (issue 8, points 3-4), real bpy.

An arm on an animated spine: the spine bone has its own keys (an existing action); the
hand follows an empty made from the core's FK of an arm motion on top of that spine.
With Chain Length 3 (hand, elbow, shoulder) the spine keeps its animation, F-curves and
all, and carries the arm. Frames: the armature sits at the origin (armature space =
world); metres and radians.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import bpy
import numpy as np
from addon_helpers import write_json
from fixtures import SPINE_ARM as ARM

FRAMES = list(range(11))


def _fcurves(ob: bpy.types.Object) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """Every pose-bone F-curve of the armature's action (slotted or not): its keyframe
    points (the bake's error curves left out)."""
    action = ob.animation_data.action
    curves = action.fcurves if hasattr(action, "fcurves") and action.fcurves else [
        fc for layer in action.layers for strip in layer.strips
        for bag in strip.channelbags for fc in bag.fcurves]
    return {(fc.data_path, fc.array_index): [tuple(k.co) for k in fc.keyframe_points]
            for fc in curves if fc.data_path.startswith("pose.bones")}


def _scene(tmp_path: Path, core: Any, shoulder: bool = True
           ) -> tuple[bpy.types.Object, bpy.types.Object, dict]:
    """The arm with keys on its spine, and an empty the hand can reach on every frame (by
    shoulder and elbow, or with ``shoulder=False`` by the elbow alone)."""
    assert bpy.ops.dhik.import_skeleton(
        filepath=str(write_json(tmp_path / "skeleton.json", ARM))) == {"FINISHED"}
    ob = bpy.context.scene.dhik.armature
    spine = ob.pose.bones["Spine"]
    spine.rotation_mode = "QUATERNION"
    for f, angle in ((0, -0.3), (10, 0.4)):
        # the joint turns about world Z; in the bone's rest frame that is B^T z
        z = np.array(spine.bone.matrix_local.to_3x3(), dtype=float).T @ [0.0, 0.0, 1.0]
        spine.rotation_quaternion = [math.cos(angle / 2), *(math.sin(angle / 2) * z)]
        spine.keyframe_insert("rotation_quaternion", frame=f)
    # the spine's own joint values per frame, read back through the add-on
    out = tmp_path / "spine.json"
    s = bpy.context.scene.dhik
    s.use_scene_range = False
    s.frame_start, s.frame_end = FRAMES[0], FRAMES[-1]
    assert bpy.ops.dhik.export_animation(filepath=str(out)) == {"FINISHED"}
    spine_values = {fr["frame"]: fr["joints"]["Spine"]
                    for fr in core.formats.load_animation(out)}
    skel = core.Skeleton(core.formats.parse_skeleton(ARM))
    keys = []
    for f in FRAMES:
        skel.reset()
        turn = [0.1, 0.2 + 0.02 * f, 0.3] if shoulder else [0.0, 0.0, 0.0]
        skel.set_joint_values({"Spine": spine_values[f], "Shoulder": {
            "type": "spherical", "quaternion": list(core.rotations.euler_xyz_to_quat(turn))},
            "Elbow": {"type": "revolute", "angle": 0.8 + 0.03 * f}})
        m = skel.world_transforms()["Hand"]
        keys.append({"frame": f, "pos": [float(v) for v in m[:3, 3]], "euler": [
            math.degrees(float(a)) for a in core.rotations.matrix_to_euler_xyz(m[:3, :3])]})
    assert bpy.ops.dhik.import_targets(filepath=str(write_json(tmp_path / "targets.json",
                                                               keys))) == {"FINISHED"}
    target = s.target
    s.effector = "Hand"
    s.orientation_weight = 0.0  # position only: the arm has a free turn for the pole
    s.position_tolerance = 1e-6
    return ob, target, spine_values


def _hand_and_spine(ob: bpy.types.Object) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for f in FRAMES:
        bpy.context.scene.frame_set(f)
        out[f] = (np.array(ob.matrix_world @ ob.pose.bones["Hand"].head, dtype=float),
                  np.array(ob.pose.bones["Spine"].matrix, dtype=float))
    return out


def test_chain_length_keeps_the_spine_animation(tmp_path, core) -> None:
    ob, target, _ = _scene(tmp_path, core)
    s = bpy.context.scene.dhik
    s.chain_length = 3  # hand, elbow, shoulder
    spine_before = {k: v for k, v in _fcurves(ob).items() if "Spine" in k[0]}
    pose_before = _hand_and_spine(ob)
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    curves = _fcurves(ob)
    assert {k: v for k, v in curves.items() if "Spine" in k[0]} == spine_before
    keyed = {k[0].split('"')[1] for k in curves}
    assert keyed == {"Spine", "Shoulder", "Elbow"}  # the chain's bones and the spine's own
    after = _hand_and_spine(ob)
    for f in FRAMES:
        bpy.context.scene.frame_set(f)
        want = np.array(target.matrix_world.translation, dtype=float)
        assert np.linalg.norm(after[f][0] - want) < 1e-5, f  # the hand is on target
        assert np.allclose(after[f][1], pose_before[f][1], atol=1e-6)  # spine as animated


def test_chain_length_two_moves_the_elbow_alone(tmp_path, core) -> None:
    """Two bones (hand, elbow): the shoulder keeps its rest pose and gets no keys, the
    spine its own keys, and the elbow alone puts the hand on a target it can reach."""
    ob, target, _ = _scene(tmp_path, core, shoulder=False)
    s = bpy.context.scene.dhik
    s.chain_length = 2
    spine_before = {k: v for k, v in _fcurves(ob).items() if "Spine" in k[0]}
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert s.result_converged == len(FRAMES)
    curves = _fcurves(ob)
    assert {k[0].split('"')[1] for k in curves} == {"Spine", "Elbow"}
    assert {k: v for k, v in curves.items() if "Spine" in k[0]} == spine_before
    for f in FRAMES:
        bpy.context.scene.frame_set(f)
        shoulder = ob.pose.bones["Shoulder"]
        assert np.allclose(np.array(shoulder.matrix_basis, dtype=float), np.eye(4), atol=1e-7)
        want = np.array(target.matrix_world.translation, dtype=float)
        hand = np.array(ob.matrix_world @ ob.pose.bones["Hand"].head, dtype=float)
        assert np.linalg.norm(hand - want) < 1e-5, f


def test_chain_length_zero_moves_the_spine(tmp_path, core) -> None:
    ob, _, _ = _scene(tmp_path, core)
    spine_before = {k: v for k, v in _fcurves(ob).items() if "Spine" in k[0]}
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert {k: v for k, v in _fcurves(ob).items() if "Spine" in k[0]} != spine_before


def _swivel(ob: bpy.types.Object, pole: np.ndarray, target: np.ndarray) -> float:
    """Angle (rad) of the elbow from the pole's direction about the shoulder-target line."""
    bones = ob.pose.bones
    r0 = np.array(ob.matrix_world @ bones["Shoulder"].head, dtype=float)
    u = (target - r0) / np.linalg.norm(target - r0)
    b = np.array(ob.matrix_world @ bones["Elbow"].head, dtype=float) - r0
    b -= (b @ u) * u
    p = pole - r0
    p -= (p @ u) * u
    return math.atan2(u @ np.cross(b, p), b @ p)


def test_pole_target_bends_the_chain_toward_it(tmp_path, core) -> None:
    ob, target, _ = _scene(tmp_path, core)
    s = bpy.context.scene.dhik
    s.chain_length = 3
    results = []
    for y in (1.0, -1.0):
        pole = bpy.data.objects.new(f"pole{y}", None)
        bpy.context.collection.objects.link(pole)
        pole.location = (0.5, y, 1.0)
        s.pole_target = pole
        assert bpy.ops.dhik.bake() == {"FINISHED"}
        assert s.result_converged == len(FRAMES)
        worst = 0.0
        for f in FRAMES:
            bpy.context.scene.frame_set(f)
            t = np.array(target.matrix_world.translation, dtype=float)
            assert np.linalg.norm(np.array(ob.matrix_world @ ob.pose.bones["Hand"].head) - t) \
                < 1e-5
            worst = max(worst, abs(_swivel(ob, np.array(pole.location, dtype=float), t)))
        results.append(worst)
    assert max(results) < 2e-3  # bone matrices are float32 in Blender


def test_pole_with_the_spec_method_is_refused(tmp_path, core) -> None:
    ob, _, _ = _scene(tmp_path, core)
    s = bpy.context.scene.dhik
    pole = bpy.data.objects.new("pole", None)
    bpy.context.collection.objects.link(pole)
    s.pole_target, s.method, s.orientation_weight = pole, "spec", 1.0
    before = _fcurves(ob)
    try:
        bpy.ops.dhik.bake()
    except RuntimeError as err:
        assert "pole target needs the Robust method" in str(err)
    else:
        raise AssertionError("the bake should have been refused")
    assert _fcurves(ob) == before


def test_a_chain_on_an_animated_bone_bakes_without_flips(tmp_path, core) -> None:
    """arm7 on a keyed turntable bone, Chain Length up to the arm's base: the bake keeps
    the turntable's F-curves, puts the tool on its target on every frame, and no arm
    joint turns more between two frames than twice the largest per-frame turn of the
    joint path that made the targets (the frame-by-frame tracker flipped on such paths:
    up to 28x)."""
    from fixtures import arm7_on_a_turntable, smooth_path

    skeleton = arm7_on_a_turntable()
    assert bpy.ops.dhik.import_skeleton(
        filepath=str(write_json(tmp_path / "skeleton.json", skeleton))) == {"FINISHED"}
    ob = bpy.context.scene.dhik.armature
    table = ob.pose.bones["Turntable"]
    table.rotation_mode = "QUATERNION"
    frames = list(range(120))
    z = np.array(table.bone.matrix_local.to_3x3(), dtype=float).T @ [0.0, 0.0, 1.0]
    for f, angle in ((frames[0], -0.4), (frames[-1], 0.5)):
        table.rotation_quaternion = [math.cos(angle / 2), *(math.sin(angle / 2) * z)]
        table.keyframe_insert("rotation_quaternion", frame=f)
    s = bpy.context.scene.dhik
    s.use_scene_range = False
    s.frame_start, s.frame_end = frames[0], frames[-1]
    out = tmp_path / "table.json"
    assert bpy.ops.dhik.export_animation(filepath=str(out)) == {"FINISHED"}
    turn = {fr["frame"]: fr["joints"]["Turntable"] for fr in core.formats.load_animation(out)}
    arm = [j["name"] for j in skeleton["joints"]
           if j["type"] == "revolute" and j["name"] != "Turntable"]
    limits = np.array([j["limits"] for j in skeleton["joints"] if j["name"] in arm])
    truth = smooth_path(limits[:, 0], limits[:, 1], len(frames), 5)
    ref = core.Skeleton(core.formats.parse_skeleton(skeleton))
    keys = []
    for f in frames:
        ref.set_joint_values({"Turntable": turn[f], **{
            name: {"type": "revolute", "angle": float(v)}
            for name, v in zip(arm, truth[f], strict=True)}})
        m = ref.world_transforms()["Tool"]
        keys.append({"frame": f, "pos": [float(v) for v in m[:3, 3]], "euler": [
            math.degrees(float(a)) for a in core.rotations.matrix_to_euler_xyz(m[:3, :3])]})
    assert bpy.ops.dhik.import_targets(filepath=str(write_json(tmp_path / "targets.json",
                                                               keys))) == {"FINISHED"}
    s.effector = "Tool"
    s.chain_length = len(skeleton["joints"]) - 2  # every bone below the turntable
    s.position_tolerance, s.orientation_tolerance = 1e-5, 1e-4
    table_before = {k: v for k, v in _fcurves(ob).items() if "Turntable" in k[0]}
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert s.result_converged == len(frames)
    assert {k: v for k, v in _fcurves(ob).items() if "Turntable" in k[0]} == table_before
    baked = tmp_path / "baked.json"
    assert bpy.ops.dhik.export_animation(filepath=str(baked)) == {"FINISHED"}
    got = np.array([[fr["joints"][n]["angle"] for n in arm]
                    for fr in core.formats.load_animation(baked)])
    true_step = np.abs(np.diff(truth, axis=0)).max()
    steps = np.abs(np.diff(got, axis=0)).max(axis=1)
    assert steps.max() < 2.0 * true_step, (steps.max(), true_step)
    for f in (frames[0], 61, frames[-1]):
        bpy.context.scene.frame_set(f)
        tool = np.array(ob.matrix_world @ ob.pose.bones["Tool"].head, dtype=float)
        assert np.linalg.norm(tool - keys[f]["pos"]) < 2e-5, f
