"""Extra effectors, method and cold start through the real operators on real bpy.

A two-arm armature (TWO_ARMS) reaches two animated empties in one bake; targets come
from the core's FK of poses within the limits, keyed on every frame, so each frame is
reachable. Frames: the armature object sits at the origin, so armature space = world;
metres and radians.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bpy
import numpy as np
import pytest
from addon_helpers import (
    TWO_ARMS,
    bone_world,
    export_skeleton,
    reachable_targets,
    two_arm_poses,
    write_json,
)

MARKER = "dhik: not converged"
FRAMES = list(range(9))


def _two_arm_scene(
    tmp_path: Path, core: Any, right_euler: list[float] | None = None
) -> tuple[bpy.types.Object, bpy.types.Object, bpy.types.Object]:
    """Import TWO_ARMS and one empty per hand; main effector LHand, one row for RHand.

    ``right_euler`` (degrees) replaces the right hand's target rotation on every frame.
    Returns (armature, left empty, right empty).
    """
    poses = two_arm_poses(len(FRAMES))
    skel = write_json(tmp_path / "arms" / "skeleton.json", TWO_ARMS)
    left = reachable_targets(core, TWO_ARMS, poses, "LHand", FRAMES)
    right = reachable_targets(core, TWO_ARMS, poses, "RHand", FRAMES)
    if right_euler is not None:
        for key in right:
            key["euler"] = right_euler
    assert bpy.ops.dhik.import_skeleton(filepath=str(skel)) == {"FINISHED"}
    s = bpy.context.scene.dhik
    assert s.effector == ""  # two leaves: the main effector must be chosen
    for name, keys, bone in (("left", left, "LHand"), ("right", right, "RHand")):
        path = write_json(tmp_path / "arms" / f"{name}.json", keys)
        assert bpy.ops.dhik.import_targets(filepath=str(path), bone=bone) == {"FINISHED"}
    ob = s.armature
    left_ob, right_ob = bpy.data.objects["left_target"], bpy.data.objects["right_target"]
    s.effector, s.target = "LHand", left_ob
    assert bpy.ops.dhik.effector_add() == {"FINISHED"}
    row = s.effectors[s.effector_index]
    row.bone, row.target = "RHand", right_ob
    return ob, left_ob, right_ob


def _bake(tmp_path: Path) -> Path:
    anim = tmp_path / "animation.json"
    bpy.context.scene.dhik.animation_path = str(anim)
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    return anim


def _errors(core: Any, ob: bpy.types.Object, effector: str,
            target: bpy.types.Object) -> dict[int, tuple[float, float]]:
    """Per baked frame: (position m, orientation rad) error of ``effector``'s bone against
    ``target`` (which shows the bone's orientation), both read from Blender's evaluated
    matrices."""
    out = {}
    for f in FRAMES:
        bpy.context.scene.frame_set(f)
        eff = bone_world(ob, effector)
        t = np.array(target.matrix_world, dtype=float)
        dp = float(np.linalg.norm(t[:3, 3] - eff[:3, 3]))
        dr = float(np.linalg.norm(core.rotations.matrix_to_rotvec(t[:3, :3] @ eff[:3, :3].T)))
        out[f] = (dp, dr)
    return out


def _converged_frames() -> set[int]:
    unconverged = {m.frame for m in bpy.context.scene.timeline_markers if m.name.startswith(MARKER)}
    return set(FRAMES) - unconverged


def test_two_arms_reach_two_empties_in_one_bake(tmp_path, core):
    ob, left, right = _two_arm_scene(tmp_path, core)
    s = bpy.context.scene.dhik
    assert s.method == "robust" and not s.cold_start  # the defaults
    _bake(tmp_path)
    assert s.result_frames == len(FRAMES) and s.result_method == "robust"
    converged = _converged_frames()
    assert len(converged) == s.result_converged == len(FRAMES)  # reachable by construction
    for bone, target in (("LHand", left), ("RHand", right)):
        errors = _errors(core, ob, bone, target)
        for f in converged:
            dp, dr = errors[f]
            assert dp < s.position_tolerance and dr < s.orientation_tolerance, (bone, f, dp, dr)
    assert "effectors LHand,RHand" in s.result_summary


def test_position_only_row_ignores_the_target_rotation(tmp_path, core):
    # A right-hand rotation the arm cannot hold while its position follows the poses.
    ob, left, right = _two_arm_scene(tmp_path, core, right_euler=[170.0, -80.0, 45.0])
    s = bpy.context.scene.dhik
    s.effectors[0].orientation_weight = 0.0
    _bake(tmp_path)
    converged = _converged_frames()
    assert len(converged) == s.result_converged == len(FRAMES)
    left_errors, right_errors = _errors(core, ob, "LHand", left), _errors(core, ob, "RHand", right)
    for f in converged:
        assert left_errors[f][0] < s.position_tolerance
        assert left_errors[f][1] < s.orientation_tolerance
        assert right_errors[f][0] < s.position_tolerance
    assert max(dr for _dp, dr in right_errors.values()) > 0.5  # its rotation was not asked for


def test_position_only_row_needs_the_robust_method(tmp_path, core):
    ob, _left, _right = _two_arm_scene(tmp_path, core)
    s = bpy.context.scene.dhik
    s.method = "spec"
    s.effectors[0].orientation_weight = 0.0
    with pytest.raises(RuntimeError, match=r"effectors\[0\].*Robust method"):
        bpy.ops.dhik.bake()
    assert ob.animation_data is None and not s.has_result


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda row: setattr(row, "bone", "Nope"), "no bone 'Nope'"),
        (lambda row: setattr(row, "bone", ""), "choose a bone"),
        (lambda row: setattr(row, "bone", "LHand"), "'LHand' already has a target"),
        (lambda row: setattr(row, "target", None), "choose a target"),
        (lambda row: (setattr(row, "position_weight", 0.0),
                      setattr(row, "orientation_weight", 0.0)), "both 0"),
    ],
)
def test_bad_effector_row_reports_and_changes_nothing(tmp_path, core, change, message):
    ob, _left, _right = _two_arm_scene(tmp_path, core)
    change(bpy.context.scene.dhik.effectors[0])
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.dhik.bake()
    assert ob.animation_data is None


@pytest.mark.parametrize(("method", "cold_start"), [("spec", False), ("robust", False),
                                                    ("robust", True)])
def test_bake_equals_core_simulate(tmp_path, core, addon, monkeypatch, method, cold_start):
    """The bake's joint values are the core's ``simulate`` on the same tracks, with the
    panel's method and cold start; the other choices give other results."""
    ob, left, right = _two_arm_scene(tmp_path, core)
    s = bpy.context.scene.dhik
    s.method, s.cold_start = method, cold_start
    bake_job = addon.dhik_addon.bake_job
    seen: list[Any] = []

    def recording_simulate(skeleton, tracks, *args, **kwargs):
        seen.append(tracks)
        return core.bake.simulate(skeleton, tracks, *args, **kwargs)

    monkeypatch.setattr(bake_job, "simulate", recording_simulate)
    anim = _bake(tmp_path)
    (tracks,) = seen
    # The inputs: one track per effector, targets = Blender's evaluated empties turned
    # from the bone's orientation to the joint's frame (@ B^T C, B the bone's rest
    # rotation, C the joint's from the core's FK at the T-pose).
    assert [(t.name, t.pos_weight, t.rot_weight) for t in tracks] == [
        ("LHand", 1.0, 1.0), ("RHand", 1.0, 1.0)]
    skeleton = core.Skeleton(core.formats.load_skeleton(export_skeleton(ob)))
    rest = skeleton.world_transforms()
    for track, empty in zip(tracks, (left, right), strict=True):
        assert [f for f, _m in track.targets] == FRAMES
        n = np.eye(4)
        b = np.array(ob.data.bones[track.name].matrix_local.to_3x3(), dtype=float)
        n[:3, :3] = b.T @ rest[track.name][:3, :3]
        for f, m in track.targets:
            bpy.context.scene.frame_set(f)
            assert np.allclose(m, np.array(empty.matrix_world, dtype=float) @ n, atol=1e-6)
    settings = s.solver_settings()  # the panel's values (float32 properties)
    results = {
        (m, cold): core.bake.simulate(skeleton, tracks, None, settings, not cold, method=m)
        for m in ("spec", "robust") for cold in (False, True)
    }
    baked = core.formats.load_animation(anim)
    assert s.result_method == method
    assert s.result_converged == results[method, cold_start].converged_count
    for key, result in results.items():
        difference = _max_difference(baked, result.frames)
        if key == (method, cold_start):
            assert difference < 1e-9
        else:  # the panel's choice made the difference
            assert difference > 1e-6, key


def _max_difference(a: list[dict], b: list[dict]) -> float:
    """Largest difference of any joint value between two animation.json frame lists."""
    assert [f["frame"] for f in a] == [f["frame"] for f in b]
    worst = 0.0
    for fa, fb in zip(a, b, strict=True):
        for name, ja in fa["joints"].items():
            jb = fb["joints"][name]
            for key in ("angle", "displacement", "quaternion"):
                if key in ja:
                    va, vb = np.atleast_1d(ja[key]), np.atleast_1d(jb[key])
                    worst = max(worst, float(np.abs(va - vb).max()))
    return worst
