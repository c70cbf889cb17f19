"""Long bakes are solved a window of frames at a time (issue 9, point 7: memory bounded).

``RobustOptions.window`` frames are planned together (``solver.path.solve_path``); each
window starts where the one before ended (its last frame). Targets are the FK of smooth
joint paths within the limits (reachable); results are checked with the skeleton's own
FK. Frames: world; metres, radians.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from dhik.app import bake
from dhik.app.bake import EffectorTrack, simulate
from dhik.app.formats import load_skeleton
from dhik.model.skeleton import Skeleton
from dhik.solver.dls import pose_error
from dhik.solver.settings import RobustOptions, SolverSettings

ARM7 = "sample_scenes/arm7/skeleton.json"
NAMES = ["J1", "J2", "J3", "J4", "J5", "J6", "J7"]
TIGHT = SolverSettings(position_tolerance=1e-5, orientation_tolerance=1e-4)


def arm7() -> Skeleton:
    return Skeleton(load_skeleton(ARM7))


def arm7_truth(frames: int, seed: int, spread: float = 0.6, periods: tuple = (1.0, 3.0)
               ) -> np.ndarray:  # fmt: skip
    """A smooth arm7 joint path (sinusoids at ``spread`` of each half-range), rad."""
    sk = arm7()
    lim = np.array([sk.joints[n].limits for n in NAMES])  # type: ignore[attr-defined]
    rng = np.random.default_rng(seed)
    mid, half = lim.mean(axis=1), (lim[:, 1] - lim[:, 0]) / 2
    per, phase = rng.uniform(*periods, 7), rng.uniform(0, 2 * math.pi, 7)
    t = np.arange(frames)[:, None] / frames
    return mid + spread * half * np.sin(2 * math.pi * per * t + phase)


def fk_targets(truth: np.ndarray) -> list[tuple[int, np.ndarray]]:
    sk = arm7()
    out = []
    for f, q in enumerate(truth):
        sk.set_joint_values({n: {"type": "revolute", "angle": float(a)}
                             for n, a in zip(NAMES, q, strict=True)})
        out.append((f, sk.joints["Tool"].global_transform.copy()))
    return out


def baked_angles(result: Any) -> np.ndarray:
    return np.array([[fr["joints"][n]["angle"] for n in NAMES] for fr in result.frames])


def on_target(result: Any, targets: list[tuple[int, np.ndarray]], every: int = 1) -> None:
    """The baked values, posed on fresh joint objects, within the tolerances."""
    sk = arm7()
    for fr, (_, target) in list(zip(result.frames, targets, strict=True))[::every]:
        sk.set_joint_values(fr["joints"])
        dp, dr = pose_error(sk.joints["Tool"], target)
        assert np.linalg.norm(dp) < 1e-5 and np.linalg.norm(dr) < 1e-4, fr["frame"]


@pytest.mark.parametrize(("warm", "chain_length"), [(True, 0), (False, 0), (True, 8)],
                         ids=["path", "cold", "chain length"])
def test_windows_bake_what_one_window_bakes(warm: bool, chain_length: int) -> None:
    """Windows of 40 frames over 120: every frame converged and on target as in one
    window, every joint moved, no step across a window's boundary beyond twice the
    truth's largest (the next window starts at the last one's last frame); a cold bake
    solves each frame alone, so its windows give its frames up to the last bit."""
    truth = arm7_truth(120, 3, 0.4, (0.5, 1.5))
    targets = fk_targets(truth)
    bakes = []
    for window in (10**6, 40):
        res = simulate(arm7(), [EffectorTrack("Tool", targets, chain_length=chain_length)],
                       None, TIGHT, warm_start=warm, method="robust",
                       options=RobustOptions(window=window))
        assert res.converged_count == 120 and res.jumps == []
        on_target(res, targets)
        bakes.append(baked_angles(res))
    one, windowed = bakes
    assert np.all(np.abs(windowed).max(axis=0) > 0.0)
    if warm:
        true_step = np.abs(np.diff(truth, axis=0)).max()
        assert np.abs(np.diff(windowed, axis=0)).max() <= 2.0 * true_step
    else:
        np.testing.assert_allclose(windowed, one, atol=1e-12, rtol=0)


@pytest.mark.parametrize("window", [10**6, 70], ids=["one window", "windows of 70"])
def test_the_bake_solves_the_path_as_one_problem_window_by_window(window: int) -> None:
    """The robust bake of a 7-joint arm's path (redundant: one self-motion) has no
    flip: no joint moves more than twice the largest step of the joint path that made
    the targets, also across the boundaries of windows; every frame on target."""
    truth = arm7_truth(300, 11)
    targets = fk_targets(truth)
    result = simulate(arm7(), targets, "Tool", TIGHT, method="robust",
                      options=RobustOptions(window=window))
    assert result.converged_count == 300 and result.jumps == []
    on_target(result, targets, 7)
    true_step = np.abs(np.diff(truth, axis=0)).max()
    assert np.abs(np.diff(baked_angles(result), axis=0)).max() <= 2.0 * true_step


@pytest.mark.parametrize("window", [10**6, 150], ids=["one window", "windows of 150"])
def test_a_forced_jump_is_named_in_the_report(window: int) -> None:
    """The targets jump at frame 200 (the base turns by 1 rad at once): the bake
    converges on every frame and names frame 200, and only it, in the report and the
    summary line."""
    truth = arm7_truth(400, 5)
    truth[200:, 0] += 1.0
    sk = arm7()
    lim = np.array([sk.joints[n].limits for n in NAMES])  # type: ignore[attr-defined]
    targets = fk_targets(np.clip(truth, lim[:, 0], lim[:, 1]))
    result = simulate(arm7(), targets, "Tool", TIGHT, method="robust",
                      options=RobustOptions(window=window))
    assert result.converged_count == 400
    assert result.jumps == [200] and result.report()["jumps"] == [200]
    assert "1 jumps with no continuous path (frames 200)" in bake.summary_line(result)


def test_an_unreachable_stretch_across_a_window_boundary() -> None:
    """Frames 45-64 (over the boundary at 50) are out of reach: they, and only they, are
    not converged (the others are on target: the path picks up again after them), and
    every frame keeps the limits."""
    truth = arm7_truth(160, 3, 0.4, (0.5, 1.5))
    targets = fk_targets(truth)
    far = np.eye(4)
    far[:3, 3] = (9.0, 0.0, 0.0)
    for k in range(45, 65):
        targets[k] = (k, far)
    result = simulate(arm7(), targets, "Tool", TIGHT, method="robust",
                      options=RobustOptions(window=50))
    lost = [r.frame for r in result.records if not r.converged]
    assert lost == list(range(45, 65))
    got = baked_angles(result)
    sk = arm7()
    lim = np.array([sk.joints[n].limits for n in NAMES])  # type: ignore[attr-defined]
    assert np.all(got >= lim[:, 0]) and np.all(got <= lim[:, 1])
    kept = [k for k in range(160) if k not in lost]
    for k in kept[::9]:
        sk.set_joint_values(result.frames[k]["joints"])
        dp, _ = pose_error(sk.joints["Tool"], targets[k][1])
        assert np.linalg.norm(dp) < 1e-5


@pytest.mark.parametrize("warm", [True, False], ids=["path", "cold"])
def test_a_window_of_frames_is_all_that_is_solved_at_once(
        warm: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory stays bounded: the engine is handed at most ``window`` frames at a time,
    in order, covering every frame (a path window starts on the last one's last frame);
    ``progress`` counts frames up to the total, never backward."""
    targets = fk_targets(arm7_truth(230, 3, 0.4, (0.5, 1.5)))
    seen: list[int] = []
    for name in ("solve_path", "solve_many"):
        inner = getattr(bake, name)

        def spy(model: Any, frames: Any, *args: Any, _inner: Any = inner, **kwargs: Any
                ) -> Any:  # fmt: skip
            seen.append(len(frames))
            return _inner(model, frames, *args, **kwargs)

        monkeypatch.setattr(bake, name, spy)
    told: list[tuple[int, int]] = []
    result = simulate(arm7(), targets, "Tool", TIGHT, warm_start=warm, method="robust",
                      options=RobustOptions(window=50),
                      progress=lambda done, total: told.append((done, total)))
    assert result.converged_count == 230
    assert max(seen) <= 50
    assert sum(seen) == 230 + (len(seen) - 1 if warm else 0)  # overlaps of one frame
    done = [d for d, _ in told]
    assert done == sorted(done) and done[-1] == 230 and {t for _, t in told} == {230}


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
