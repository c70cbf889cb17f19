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
    frames 100-149 of an arm7 path starts within one true step of frame 99's pose and
    ends within one true step of frame 150's, with or without a chain length (here
    longer than the chain: one engine either way). Every frame converges."""
    from dhik.app.bake import EffectorTrack
    from dhik.model.joint_space import BatchedModel
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
    if method == "robust":  # a long clip: the batched solves past the LAPACK route
        many = [(f, at.copy()) for f in range(400)]
        for f, t in many:
            t[0, 3] += 0.01 * f
        result = simulate(Skeleton(defn), many, "B", method=method, warm_start=warm)
        errors = [r.position_error for r in result.records]
        assert len(result.frames) == 400 and result.converged_count == 1
        np.testing.assert_allclose(errors, 0.01 * np.arange(400), atol=1e-12)


# ------------------------------------------------------ robust bakes (solver.path)

ARM7_NAMES = ["J1", "J2", "J3", "J4", "J5", "J6", "J7"]
TIGHT = SolverSettings(position_tolerance=1e-5, orientation_tolerance=1e-4)


def arm7() -> Skeleton:
    return Skeleton(load_skeleton("sample_scenes/arm7/skeleton.json"))


def arm7_limits() -> np.ndarray:
    sk = arm7()
    return np.array([sk.joints[n].limits for n in ARM7_NAMES])  # type: ignore[attr-defined]


def arm7_pose(sk: Skeleton, q: np.ndarray) -> np.ndarray:
    """World 4x4 of the Tool with the arm's joints at ``q`` (radians)."""
    sk.set_joint_values({n: {"type": "revolute", "angle": float(a)}
                         for n, a in zip(ARM7_NAMES, q, strict=True)})
    return sk.joints["Tool"].global_transform.copy()


def arm7_reached(sk: Skeleton, q: np.ndarray, target: np.ndarray) -> bool:
    """Independent check: FK of ``q`` within 1e-5 m / 1e-4 rad and ``q`` within limits."""
    lim = arm7_limits()
    arm7_pose(sk, q)
    dp, dr = pose_error(sk.joints["Tool"], target)
    inside = bool(np.all(q >= lim[:, 0]) and np.all(q <= lim[:, 1]))
    return float(np.linalg.norm(dp)) < 1e-5 and float(np.linalg.norm(dr)) < 1e-4 and inside


def arm7_joint_path(seed: int, frames: int = 240) -> np.ndarray:
    """Sinusoids at 50 % of each half-range around mid-range, 1-2 periods (seed 12345,
    240 frames: the joint path whose FK is sample_scenes/arm7/targets.json)."""
    lim = arm7_limits()
    rng = np.random.default_rng(seed)
    mid, half = lim.mean(axis=1), (lim[:, 1] - lim[:, 0]) / 2
    periods = rng.uniform(1.0, 2.0, len(lim))
    phase = rng.uniform(0, 2 * math.pi, len(lim))
    t = np.arange(frames)[:, None] / frames
    return mid + 0.5 * half * np.sin(2 * math.pi * periods * t + phase)


def baked_arm7(result) -> np.ndarray:  # noqa: ANN001
    return np.array([[fr["joints"][n]["angle"] for n in ARM7_NAMES] for fr in result.frames])


def test_sample_arm7_trajectory_is_solved_without_flips() -> None:
    """sample_scenes/arm7: the robust bake converges on every frame (the spec method on
    far fewer), every frame on target by independent FK within the limits, and no joint
    moves more than twice the largest step of the joint path that made the targets."""
    targets = interpolate_keyframes(load_targets("sample_scenes/arm7/targets.json"))
    path = arm7_joint_path(12345)
    ref = arm7()
    for q, (_, target) in list(zip(path, targets, strict=True))[::40]:  # the scene's truth
        assert arm7_reached(ref, q, target)
    robust = simulate(arm7(), targets, settings=TIGHT, method="robust")
    spec = simulate(arm7(), targets, settings=TIGHT, method="spec")
    assert robust.method == "robust" and "method robust" in summary_line(robust)
    assert robust.converged_count == len(targets) > spec.converged_count
    got = baked_arm7(robust)
    for q, (_, target) in zip(got, targets, strict=True):
        assert arm7_reached(ref, q, target)
    true_step = np.abs(np.diff(path, axis=0)).max()
    assert np.abs(np.diff(got, axis=0)).max() <= 2.0 * true_step


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_generated_arm7_trajectories_converge_without_flips(seed: int) -> None:
    """The bake solves the path as one problem: every frame on target within the limits,
    and no joint moves more than twice the largest step of the joint path that made the
    targets (a frame-by-frame tracker jumped on seeds 2 and 7: its null-space path
    reached the limits)."""
    path = arm7_joint_path(seed)
    ref = arm7()
    targets = [(f, arm7_pose(ref, q)) for f, q in enumerate(path)]
    result = simulate(arm7(), targets, settings=TIGHT, method="robust")
    assert result.converged_count == len(targets) and result.jumps == []
    got = baked_arm7(result)
    for q, (_, target) in zip(got, targets, strict=True):
        assert arm7_reached(ref, q, target)
    true_step = np.abs(np.diff(path, axis=0)).max()
    assert np.abs(np.diff(got, axis=0)).max() <= 2.0 * true_step


def test_humanoid_like_spherical_limits_hold_on_a_trajectory() -> None:
    """Boxed ball joints on a 40-frame trajectory: every frame converges and every baked
    quaternion has intrinsic XYZ angles within its box (scipy)."""
    from fixtures import boxed_angles

    arm = {"root_name": "Root", "joints": [
        {"name": "Root", "type": "fixed", "parent": None},
        {"name": "Shoulder", "type": "spherical", "offset": [0, 0, 1.0], "parent": "Root",
         "limits": [[-1.6, 1.6], [-1.3, 1.3], [-0.7, 1.6]]},
        {"name": "Elbow", "type": "revolute", "offset": [0, 0, 0.3], "parent": "Shoulder",
         "axis": [0, 0, 1], "limits": [-0.05, 2.6]},
        {"name": "Wrist", "type": "spherical", "offset": [0, 0.26, 0], "parent": "Elbow",
         "limits": [[-1.2, 1.2], [-0.5, 0.5], [-1.0, 1.0]]},
        {"name": "Hand", "type": "fixed", "offset": [0, 0.08, 0], "parent": "Wrist"}]}
    sk = Skeleton(parse_skeleton(arm))
    boxes = {"Shoulder": arm["joints"][1]["limits"], "Wrist": arm["joints"][3]["limits"]}
    poses = []
    for f in range(40):  # a smooth path of angles inside the boxes
        s = math.sin(2 * math.pi * f / 40)
        values = {"Elbow": {"type": "revolute", "angle": 1.2 + 0.8 * s}}
        for name, box in boxes.items():
            lo, hi = np.array(box).T
            a = (lo + hi) / 2 + 0.45 * (hi - lo) * np.array([s, math.cos(f / 7), s * s - 0.5])
            qx, qy, qz, qw = Rotation.from_euler("XYZ", a).as_quat()
            values[name] = {"type": "spherical", "quaternion": [qw, qx, qy, qz]}
        sk.set_joint_values(values)
        poses.append((f, sk.joints["Hand"].global_transform.copy()))
    result = simulate(Skeleton(parse_skeleton(arm)), poses, settings=TIGHT, method="robust")
    assert result.converged_count == 40
    for fr in result.frames:
        for name, box in boxes.items():
            assert boxed_angles(np.array(fr["joints"][name]["quaternion"]), box), name


def test_a_free_wrist_trajectory_reaches_every_frame() -> None:
    """A wrist without limits (the rotation-vector chart) and a partly boxed shoulder:
    every frame of a 60-frame trajectory on target by the joint objects' FK, and the
    quaternions' signs continuous."""
    poses = []
    sk = Skeleton(parse_skeleton(ARM))
    for f in range(60):
        a = 2 * math.pi * f / 60
        sk.set_joint_values({
            "Shoulder": {"type": "spherical", "quaternion": [math.cos(a / 4), 0.3 * math.sin(a),
                                                             0.2, 0.1]},
            "Elbow": {"type": "revolute", "angle": -1.0 - 0.5 * math.sin(a)},
            "Wrist": {"type": "spherical", "quaternion": [1.0, 0.2 * math.cos(a), 0.1, 0.0]},
        })
        poses.append((f, sk.joints["Hand"].global_transform.copy()))
    result = simulate(Skeleton(parse_skeleton(ARM)), poses, settings=TIGHT, method="robust")
    assert result.converged_count == 60
    check = Skeleton(parse_skeleton(ARM))
    for fr, (_, target) in zip(result.frames, poses, strict=True):
        check.set_joint_values(fr["joints"])
        dp, dr = pose_error(check.joints["Hand"], target)
        assert np.linalg.norm(dp) < 1e-5 and np.linalg.norm(dr) < 1e-4
    for a, b in zip(result.frames, result.frames[1:], strict=False):
        assert np.dot(a["joints"]["Wrist"]["quaternion"], b["joints"]["Wrist"]["quaternion"]) >= 0


def test_a_robust_cold_bake_solves_each_frame_alone() -> None:
    """``warm_start=False`` (``--cold-start``): every frame solved as if alone (each
    frame's restarts seeded by its own targets), up to the last bit of numpy's batched
    arithmetic."""
    ref = arm7()
    targets = [(f, arm7_pose(ref, q)) for f, q in enumerate(arm7_joint_path(12345)[::40])]
    cold = baked_arm7(simulate(arm7(), targets, settings=TIGHT, warm_start=False,
                               method="robust"))
    for f, target in targets:
        alone = simulate(arm7(), [(0, target)], settings=TIGHT, warm_start=False,
                         method="robust")
        np.testing.assert_allclose(baked_arm7(alone)[0], cold[f], atol=1e-12, rtol=0)
        assert arm7_reached(ref, cold[f], target)


def test_the_spec_method_takes_no_robust_options() -> None:
    from dhik.errors import DhikError
    from dhik.solver.settings import RobustOptions

    targets = circle_targets(3)
    with pytest.raises(DhikError, match="robust options do not apply to the spec method"):
        simulate(Skeleton(parse_skeleton(ARM)), targets, method="spec",
                 options=RobustOptions())
    with pytest.raises(DhikError, match="robust options"):
        simulate(Skeleton(parse_skeleton(ARM)), targets, options=RobustOptions(seed=3))


@pytest.mark.parametrize("warm", [True, False])
def test_the_settings_recorded_are_the_ones_that_acted(warm: bool) -> None:
    """``BakeResult.settings`` (``--report``'s ``settings``): a robust bake lists its
    tolerances, ``max_iterations``, ``cold_start`` and every ``RobustOptions`` field as
    given (not the spec method's damping or line search); a spec bake lists
    ``SolverSettings``."""
    import dataclasses

    from dhik.solver.settings import RobustOptions

    settings = SolverSettings(max_iterations=50, position_tolerance=1e-4,
                              orientation_tolerance=1e-3, damping=0.5,
                              enable_line_search=False)
    opts = RobustOptions(seed=4, grid=16, window=500)
    targets = circle_targets(4)
    robust = simulate(Skeleton(parse_skeleton(ARM)), targets, settings=settings,
                      warm_start=warm, method="robust", options=opts)
    assert robust.settings == {"position_tolerance": 1e-4, "orientation_tolerance": 1e-3,
                               "max_iterations": 50, "cold_start": not warm,
                               **dataclasses.asdict(opts)}
    assert robust.report()["settings"] == robust.settings
    assert "enable_line_search" not in robust.settings
    assert robust.settings["lm_damping"] == opts.lm_damping  # the LM's, not the spec method's
    default = simulate(Skeleton(parse_skeleton(ARM)), targets, settings=settings,
                       warm_start=warm, method="robust")
    assert {k: default.settings[k] for k in dataclasses.asdict(opts)} == \
        dataclasses.asdict(RobustOptions())
    spec = simulate(Skeleton(parse_skeleton(ARM)), targets, settings=settings,
                    warm_start=warm, method="spec")
    assert spec.settings == settings.kwargs()
