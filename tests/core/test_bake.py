"""Simulate / bake (SPEC 6): records, animation frames, sign continuity, no drift."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dhik.app.bake import align_quaternion_signs, simulate, summary_line
from dhik.app.formats import load_skeleton, load_targets, parse_animation, parse_skeleton
from dhik.app.trajectory import interpolate_keyframes
from dhik.model.skeleton import Skeleton
from dhik.rotations import euler_xyz_to_matrix, make_transform
from dhik.solver.dls import pose_error
from dhik.solver.settings import SolverSettings
from scipy.spatial.transform import Rotation

ARM = {
    "root_name": "Root",
    "joints": [
        {"name": "Root", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {"name": "Shoulder", "type": "spherical", "offset": [0, 0, 1.0], "parent": "Root",
         "limits": [[-2.5, 2.5], None, [-2.0, 2.0]]},
        {"name": "Elbow", "type": "revolute", "offset": [0, 0, 0.5], "parent": "Shoulder",
         "axis": [1, 0, 0], "limits": [-2.6, 0.0]},
        {"name": "Wrist", "type": "spherical", "offset": [0, 0, 0.4], "parent": "Elbow"},
        {"name": "Hand", "type": "fixed", "offset": [0, 0.05, 0.1], "parent": "Wrist",
         "quaternion": [0.96, 0.0, 0.28, 0.0]},
    ],
}


def circle_targets(frames: int, turns: float = 1.0) -> list[tuple[int, np.ndarray]]:
    """A slow circle in front of the arm, turning the hand about Z as it goes."""
    out = []
    for f in range(frames):
        a = 2 * math.pi * turns * f / frames
        pos = [0.35 * math.cos(a), 0.5 + 0.2 * math.sin(a), 1.2 + 0.1 * math.sin(2 * a)]
        out.append((f, make_transform(euler_xyz_to_matrix([0.4, 0.2, a]), pos)))
    return out


def test_every_frame_recorded_and_reproducible_by_fk() -> None:
    sk = Skeleton(parse_skeleton(ARM))
    targets = circle_targets(60)
    result = simulate(sk, targets, settings=SolverSettings(position_tolerance=1e-6,
                                                           orientation_tolerance=1e-6))
    assert result.effector == "Hand" and len(result.records) == len(result.frames) == 60
    assert result.converged_count == 60
    parse_animation({"frames": result.frames})  # the frames are valid animation.json
    check = Skeleton(parse_skeleton(ARM))
    for rec, fr, (frame, target) in zip(result.records, result.frames, targets, strict=True):
        assert rec.frame == fr["frame"] == frame
        assert set(fr["joints"]) == {"Shoulder", "Elbow", "Wrist"}  # no fixed joints
        check.set_joint_values(fr["joints"])
        dp, dr = pose_error(check.joints["Hand"], target)
        assert np.linalg.norm(dp) == pytest.approx(rec.position_error, abs=1e-9)
        assert np.linalg.norm(dr) == pytest.approx(rec.orientation_error, abs=1e-9)
        assert rec.position_error < 1e-6 and rec.orientation_error < 1e-6
        sh = fr["joints"]["Shoulder"]
        ref = Rotation.from_quat(np.roll(sh["quaternion"], -1)).as_euler("xyz")
        np.testing.assert_allclose(sh["euler"], ref, atol=1e-9)


def test_quaternion_signs_are_continuous() -> None:
    q = [0.1, 0.0, 0.0, 0.995]
    frames = [{"frame": i, "joints": {"S": {"type": "spherical", "euler": [0, 0, 0],
                                            "quaternion": list(np.multiply(q, s))}}}
              for i, s in enumerate((1, -1, -1, 1))]
    align_quaternion_signs(frames)
    signs = [np.sign(f["joints"]["S"]["quaternion"][3]) for f in frames]
    assert signs == [1, 1, 1, 1]
    sk = Skeleton(parse_skeleton(ARM))
    result = simulate(sk, circle_targets(200, turns=2.0))
    for a, b in zip(result.frames, result.frames[1:], strict=False):
        for name in ("Shoulder", "Wrist"):
            assert np.dot(a["joints"][name]["quaternion"], b["joints"][name]["quaternion"]) >= 0


def test_cold_start_solves_each_frame_from_the_t_pose() -> None:
    sk = Skeleton(parse_skeleton(ARM))
    targets = circle_targets(5)
    cold = simulate(sk, targets, warm_start=False)
    for frame_target in targets:
        alone = simulate(Skeleton(parse_skeleton(ARM)), [frame_target]).frames[0]["joints"]
        got = cold.frames[frame_target[0]]["joints"]
        assert alone["Elbow"] == got["Elbow"]
        for name in ("Shoulder", "Wrist"):  # equal up to the sign kept for continuity
            assert alone[name]["euler"] == got[name]["euler"]
            a, b = alone[name]["quaternion"], got[name]["quaternion"]
            assert np.abs(a).tolist() == np.abs(b).tolist()


def test_summary_line_is_honest_about_unconverged_frames() -> None:
    sk = Skeleton(load_skeleton("sample_scenes/spec_example/skeleton.json"))
    result = simulate(sk, interpolate_keyframes(load_targets(
        "sample_scenes/spec_example/targets.json")))
    line = summary_line(result)
    n_bad = len(result.records) - result.converged_count
    assert n_bad > 0 and f"{n_bad} NOT converged" in line
    assert "241 frames" in line and "effector Piston" in line
    assert f"max {max(r.position_error for r in result.records):.3g} m" in line


def test_ten_thousand_frames_without_drift() -> None:
    """State lives in scalars and quaternions: nothing accumulates over a long bake."""
    sk = Skeleton(parse_skeleton(ARM))
    result = simulate(sk, circle_targets(10_000, turns=25.0))
    assert len(result.frames) == 10_000
    check = Skeleton(parse_skeleton(ARM))
    worst_orth = worst_det = worst_norm = 0.0
    for fr in result.frames:
        for entry in fr["joints"].values():
            if entry["type"] == "spherical":
                worst_norm = max(worst_norm, abs(np.linalg.norm(entry["quaternion"]) - 1.0))
        check.set_joint_values(fr["joints"])
        for m in check.world_transforms().values():
            r = m[:3, :3]
            worst_orth = max(worst_orth, np.abs(r @ r.T - np.eye(3)).max())
            worst_det = max(worst_det, abs(np.linalg.det(r) - 1.0))
    # and the live joint objects after 10,000 warm-started solves
    for j in sk.joints.values():
        r = j.global_transform[:3, :3]
        worst_orth = max(worst_orth, np.abs(r @ r.T - np.eye(3)).max())
        if hasattr(j, "virtual_chain"):
            worst_norm = max(worst_norm, abs(np.linalg.norm(j.quaternion) - 1.0))
    assert worst_orth < 1e-9 and worst_det < 1e-9
    assert worst_norm < 1e-12


@pytest.mark.parametrize("chain_length", [0, 17])
def test_a_warm_bake_joins_the_poses_around_it(chain_length: int) -> None:
    """``previous``: the pose on the frame before the first (a re-baked part of an
    animation, in Blender); ``following``: on the frame after the last. The bake of
    frames 100-149 of an arm7 path starts within one true step of frame 99's pose, on
    the flip-free engine (chain length 0) and frame by frame (a chain length, here
    longer than the chain: the tracker); the flip-free engine also ends within one true
    step of frame 150's. Every frame converges."""
    from dhik.app.bake import EffectorTrack
    from dhik.model.batched import BatchedModel
    from fixtures import ARM7, smooth_path

    defn = load_skeleton(ARM7)
    model = BatchedModel(defn, ["Tool"])
    truth = smooth_path(model.lo, model.hi, 200, 3)
    targets = model.transforms(truth)
    true_step = np.abs(np.diff(truth, axis=0)).max()
    track = EffectorTrack("Tool", [(f, targets[f, 0]) for f in range(100, 150)],
                          chain_length=chain_length)
    res = simulate(Skeleton(defn), [track], previous=model.joint_values(truth[99]),
                   following=model.joint_values(truth[150]), method="robust")
    first = model.coordinates(res.frames[0]["joints"])
    assert np.abs(first - truth[99]).max() <= true_step
    if chain_length == 0:
        last = model.coordinates(res.frames[-1]["joints"])
        assert np.abs(last - truth[150]).max() <= true_step
    assert res.converged_count == 50


@pytest.mark.parametrize("method, warm", [("robust", True), ("robust", False), ("spec", True)])
def test_a_skeleton_without_moving_joints_bakes(method: str, warm: bool) -> None:
    """Only fixed joints (or a chain length that leaves none to solve): every frame is
    recorded with the effector where the skeleton puts it and its error to the target;
    the robust engine used to crash on it (a reduction over no columns)."""
    defn = parse_skeleton({"root_name": "A", "joints": [
        {"name": "A", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {"name": "B", "type": "fixed", "offset": [1, 0, 0], "parent": "A"}]})
    at = Skeleton(defn).world_transforms()["B"]
    targets = []
    for f in range(5):
        t = at.copy()
        t[0, 3] += 0.05 * f
        targets.append((f, t))
    result = simulate(Skeleton(defn), targets, "B", method=method, warm_start=warm)
    errors = [r.position_error for r in result.records]
    assert len(result.frames) == 5 and result.converged_count == 1
    np.testing.assert_allclose(errors, [0.0, 0.05, 0.1, 0.15, 0.2], atol=1e-12)
