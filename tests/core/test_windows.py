"""Long trajectories are tracked a window at a time (issue 9, point 7: memory bounded).

``RobustOptions.window`` frames are tracked and repaired together; the solutions of a
window are handed on before the next, which goes on from the last ``lookback + 3``
frames. Targets are the FK of smooth joint paths within the limits (reachable); results
are checked with the skeleton's own FK. Frames: world; metres, radians.
"""

from __future__ import annotations

import gc
import math
import weakref

import numpy as np
import pytest
from dhik.app.bake import simulate
from dhik.app.formats import load_skeleton
from dhik.model.compiled import CompiledKinematics
from dhik.model.skeleton import Skeleton
from dhik.solver.dls import pose_error
from dhik.solver.robust import FrameSolution, RobustOptions, solve_trajectory, trajectory_frames
from dhik.solver.settings import SolverSettings

ARM7 = "sample_scenes/arm7/skeleton.json"
NAMES = ["J1", "J2", "J3", "J4", "J5", "J6", "J7"]
TIGHT = SolverSettings(position_tolerance=1e-5, orientation_tolerance=1e-4)


def arm7() -> Skeleton:
    return Skeleton(load_skeleton(ARM7))


def smooth_targets(frames: int, seed: int = 3) -> list[np.ndarray]:
    """The Tool's world 4x4 along a smooth joint path (40 % of each half-range)."""
    sk = arm7()
    lim = np.array([sk.joints[n].limits for n in NAMES])  # type: ignore[attr-defined]
    rng = np.random.default_rng(seed)
    mid, half = lim.mean(axis=1), (lim[:, 1] - lim[:, 0]) / 2
    periods, phase = rng.uniform(0.5, 1.5, 7), rng.uniform(0, 2 * math.pi, 7)
    out = []
    for t in np.arange(frames) / frames:
        q = mid + 0.4 * half * np.sin(2 * math.pi * periods * t + phase)
        sk.set_joint_values({n: {"type": "revolute", "angle": float(a)}
                             for n, a in zip(NAMES, q, strict=True)})
        out.append(sk.joints["Tool"].global_transform.copy())
    return out


def run(targets: list[np.ndarray], **options: int) -> list[FrameSolution]:
    model = CompiledKinematics(arm7(), ["Tool"])
    return solve_trajectory(model, [[t] for t in targets], TIGHT,
                            options=RobustOptions(**options))


def test_windows_without_repair_give_the_frames_of_one_pass() -> None:
    """With nothing to repair, a window goes on exactly where the one before stopped:
    every frame equals the one-window solve's, across 5 window boundaries."""
    targets = smooth_targets(300)
    one = run(targets, bridges=0, lookback=20)
    windowed = run(targets, bridges=0, lookback=20, window=50)
    assert len(windowed) == len(one) == 300
    for a, b in zip(one, windowed, strict=True):
        assert a.x == b.x and a.quats == b.quats
        assert a.result.converged and b.result.converged


def test_windows_with_repair_converge_on_every_frame_and_stay_continuous() -> None:
    targets = smooth_targets(300)
    frames = run(targets, lookback=20, window=50)
    sk = arm7()
    model = CompiledKinematics(sk, ["Tool"])
    steps = []
    for k, (fr, target) in enumerate(zip(frames, targets, strict=True)):
        assert fr.result.converged, k
        model.restore(fr.state)
        model.update()
        model.write_back(sk)
        dp, dr = pose_error(sk.joints["Tool"], target)
        assert np.linalg.norm(dp) < 1e-5 and np.linalg.norm(dr) < 1e-4, k
        if k:
            steps.append(max(abs(a - b) for a, b in zip(fr.x, frames[k - 1].x, strict=True)))
    # the joint path that made the targets moves at most ~0.024 rad a frame
    assert max(steps) < 0.1


def test_an_unreachable_stretch_across_a_window_boundary() -> None:
    """Frames 45-64 (over the boundary at 50) are out of reach: they are reported, the
    others converge, and tracking picks the path up again after them."""
    targets = smooth_targets(160)
    far = np.eye(4)
    far[:3, 3] = (9.0, 0.0, 0.0)
    for k in range(45, 65):
        targets[k] = far
    frames = run(targets, lookback=20, window=50, probe_restarts=2, max_restarts=4)
    assert len(frames) == 160
    lost = [k for k, fr in enumerate(frames) if not fr.result.converged]
    assert lost == list(range(45, 65))


def test_a_window_of_frames_is_all_that_is_held() -> None:
    """Frames handed on and dropped by the caller are freed: at most a window plus the
    frames it goes on from are alive at any time."""
    targets = smooth_targets(400)
    model = CompiledKinematics(arm7(), ["Tool"])
    refs: list[weakref.ref[FrameSolution]] = []
    most, count, seen = 0, 0, []
    opts = RobustOptions(lookback=20, window=50)
    for fr in trajectory_frames(model, [[t] for t in targets], TIGHT, options=opts,
                                progress=lambda done, total: seen.append((done, total))):
        refs.append(weakref.ref(fr))
        count += 1
        del fr
        if count % 25 == 0:
            gc.collect()
            most = max(most, sum(r() is not None for r in refs))
    assert count == 400
    assert most <= 50 + 23 + 1
    assert [d for d, _ in seen] == list(range(1, 401)) and {t for _, t in seen} == {400}


@pytest.mark.parametrize("warm_start", [True, False], ids=["tracked", "cold"])
def test_simulate_with_windows_bakes_what_one_window_bakes(warm_start: bool) -> None:
    """A chain length sends the bake to the tracker (the batched engine has none): its
    windows give the bake of one window."""
    from dhik.app.bake import EffectorTrack

    targets = list(enumerate(smooth_targets(120)))
    bakes = []
    for window in (10**6, 40):
        sk = arm7()
        res = simulate(sk, [EffectorTrack("Tool", targets, chain_length=8)], None, TIGHT,
                       warm_start=warm_start, method="robust",
                       options=RobustOptions(bridges=0, lookback=10, window=window))
        bakes.append((list(res.frames), [r.converged for r in res.records]))
    assert bakes[0] == bakes[1]
    assert all(bakes[0][1])
    moved = {n for fr in bakes[0][0] for n in NAMES if fr["joints"][n]["angle"] != 0.0}
    assert moved == set(NAMES)


def test_keyframes_interpolated_block_by_block_are_the_frame_by_frame_targets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Targets are built a block of frames at a time: across block boundaries each
    frame is, bit for bit, ``target_matrix`` of its linearly interpolated pos/euler."""
    from dhik.app import trajectory
    from dhik.model.definition import Keyframe

    keys = [Keyframe(0, (0.0, 1.0, 0.5), (10.0, -20.0, 30.0)),
            Keyframe(9, (0.5, 1.5, 0.0), (40.0, 0.0, -60.0)),
            Keyframe(23, (-0.5, 0.0, 1.0), (0.0, 90.0, 10.0))]
    monkeypatch.setattr(trajectory, "BLOCK_FRAMES", 5)
    table = trajectory.interpolate_keyframes(keys)
    assert table.frame_numbers.tolist() == list(range(24))
    for frame, matrix in table:
        i = max(j for j, k in enumerate(keys) if k.frame <= frame)
        a = keys[i]
        if frame == a.frame or i + 1 == len(keys):
            pos, eul = a.pos, a.euler
        else:
            b = keys[i + 1]
            t = (frame - a.frame) / (b.frame - a.frame)
            pos = tuple(p + t * (q - p) for p, q in zip(a.pos, b.pos, strict=True))
            eul = tuple(p + t * (q - p) for p, q in zip(a.euler, b.euler, strict=True))
        assert np.array_equal(matrix, trajectory.target_matrix(pos, eul)), frame


def arm7_truth(frames: int, seed: int) -> np.ndarray:
    """A smooth arm7 joint path (sinusoids at 60 % of each half-range), rad."""
    sk = arm7()
    lim = np.array([sk.joints[n].limits for n in NAMES])  # type: ignore[attr-defined]
    rng = np.random.default_rng(seed)
    mid, half = lim.mean(axis=1), (lim[:, 1] - lim[:, 0]) / 2
    periods, phase = rng.uniform(1.0, 3.0, 7), rng.uniform(0, 2 * math.pi, 7)
    t = np.arange(frames)[:, None] / frames
    return mid + 0.6 * half * np.sin(2 * math.pi * periods * t + phase)


def fk_targets(truth: np.ndarray) -> list[tuple[int, np.ndarray]]:
    sk = arm7()
    out = []
    for f, q in enumerate(truth):
        sk.set_joint_values({n: {"type": "revolute", "angle": float(a)}
                             for n, a in zip(NAMES, q, strict=True)})
        out.append((f, sk.joints["Tool"].global_transform.copy()))
    return out


def baked_angles(result) -> np.ndarray:  # noqa: ANN001
    return np.array([[fr["joints"][n]["angle"] for n in NAMES] for fr in result.frames])


@pytest.mark.parametrize("window", [10**6, 70], ids=["one window", "windows of 70"])
def test_the_bake_solves_the_path_as_one_problem_window_by_window(
        window: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The robust bake of a 7-joint arm's path (redundant: one self-motion) has no
    flip: no joint moves more than twice the largest step of the joint path that made
    the targets, also across the boundaries of windows; every frame on target."""
    from dhik.app import bake

    monkeypatch.setattr(bake, "BATCH_WINDOW", window)
    truth = arm7_truth(300, 11)
    targets = fk_targets(truth)
    result = simulate(arm7(), targets, "Tool", TIGHT, method="robust")
    assert result.converged_count == 300 and result.jumps == []
    got = baked_angles(result)
    sk = arm7()
    for q, (_, target) in zip(got[::7], targets[::7], strict=True):
        sk.set_joint_values({n: {"type": "revolute", "angle": float(a)}
                             for n, a in zip(NAMES, q, strict=True)})
        dp, dr = pose_error(sk.joints["Tool"], target)
        assert np.linalg.norm(dp) < 1e-5 and np.linalg.norm(dr) < 1e-4
    true_step = np.abs(np.diff(truth, axis=0)).max()
    assert np.abs(np.diff(got, axis=0)).max() <= 2.0 * true_step


@pytest.mark.parametrize("window", [10**6, 150], ids=["one window", "windows of 150"])
def test_a_forced_jump_is_named_in_the_report(window: int,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The targets jump at frame 200 (the base turns by 1 rad at once): the bake
    converges on every frame and names frame 200, and only it, in the report and the
    summary line."""
    from dhik.app import bake

    monkeypatch.setattr(bake, "BATCH_WINDOW", window)
    truth = arm7_truth(400, 5)
    truth[200:, 0] += 1.0
    sk = arm7()
    lim = np.array([sk.joints[n].limits for n in NAMES])  # type: ignore[attr-defined]
    targets = fk_targets(np.clip(truth, lim[:, 0], lim[:, 1]))
    result = simulate(arm7(), targets, "Tool", TIGHT, method="robust")
    assert result.converged_count == 400
    assert result.jumps == [200] and result.report()["jumps"] == [200]
    assert "1 jumps with no continuous path (frames 200)" in bake.summary_line(result)
