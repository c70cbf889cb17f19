"""Poles on a planned path (``solver.path.swing``), peaks relaxed (``solver.path.relax``)
and the LM's light pulls in the targets' null space (``Problem.with_posture``,
``Problem.as_pole_pull``).

Shares are checked against hand-computed ramps; LM answers against the joint objects'
FK (``Skeleton``), the limits, and a central finite-difference Jacobian of the FK for
the null space. Fixed seeds throughout. Frames: world; metres, radians.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from dhik.app.formats import load_skeleton, parse_skeleton
from dhik.model.joint_space import BatchedModel
from dhik.solver.lm import ENGINE_SETTINGS, PoleSet, Problem, pole_points
from dhik.solver.lm.loop import levenberg_marquardt
from dhik.solver.path import relax, swing
from dhik.solver.path.search import PathResult, frame_steps
from fixtures import (
    ARM7,
    SPINE_ARM,
    check_answers,
    make_scenes,
    sample_coordinates,
    smooth_path,
    swivel,
)

# --------------------------------------------------------------------------- shares


def test_a_jump_of_the_swings_is_swung_out_of_and_back_into_at_the_pace() -> None:
    """Swings of length 1 rad whose change jumps into frame 10: shares 0 on frames 9 and
    10, rising from there by SWING_PACE times the path's step (0.1 rad) per frame, over
    the swing's length: 0.05 a frame, hand-computed; 1 beyond the ramps."""
    frames = 40
    turns = np.full(frames - 1, 0.01)
    turns[9] = 1.0  # the step into frame 10
    share = swing.swing_shares(np.ones(frames), turns, np.full(frames - 1, 0.1),
                               np.ones(frames, dtype=bool), 2.5, False, False)
    rate = swing.SWING_PACE * 0.1
    want = np.minimum(1.0, np.minimum(np.abs(np.arange(frames) - 9.0),
                                      np.abs(np.arange(frames) - 10.0)) * rate)
    want[[9, 10]] = 0.0
    np.testing.assert_allclose(share, want)


def test_given_ends_swing_in_and_out() -> None:
    frames = 30
    share = swing.swing_shares(np.full(frames, 0.5), np.zeros(frames - 1),
                               np.full(frames - 1, 0.1), np.ones(frames, dtype=bool), 2.5,
                               True, True)
    rise = swing.SWING_PACE * 0.1 / 0.5
    t = np.arange(frames)
    np.testing.assert_allclose(share, np.minimum(1.0, np.minimum(t, frames - 1 - t) * rise))


def test_a_swing_the_limits_stop_may_not_outrun_the_path() -> None:
    """Where the pole is not met (the limits stop the swing), a change of the swings
    faster than BREAK times the path's step is a jump even when its neighbours change as
    fast; where the pole is met, only a change out of line with its neighbours is."""
    frames = 30
    turns = np.full(frames - 1, 0.3)  # three times the path's step, steadily
    path = np.full(frames - 1, 0.1)
    met = np.ones(frames, dtype=bool)
    assert swing.swing_shares(np.ones(frames), turns, path, met, 2.5, False, False).min() == 1
    met[15] = False
    share = swing.swing_shares(np.ones(frames), turns, path, met, 2.5, False, False)
    gap = np.min(np.abs(np.arange(frames)[:, None] - np.array([14, 15, 16])), axis=1)
    np.testing.assert_allclose(share, np.minimum(1.0, gap * swing.SWING_PACE * 0.1))


# --------------------------------------------------------------------------- the LM's pulls


def _fd_jacobian(model: BatchedModel, q: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """The effector's position and rotation-vector rows (6, n) by central differences of
    the FK (world; m and rad per coordinate unit)."""
    from dhik.rotations import matrix_to_rotvec

    base = model.transforms(q[None])[0, 0]
    cols = []
    for c in range(model.n):
        up, down = q.copy(), q.copy()
        up[c] += h
        down[c] -= h
        tu, td = model.transforms(up[None])[0, 0], model.transforms(down[None])[0, 0]
        dp = (tu[:3, 3] - td[:3, 3]) / (2 * h)
        dr = (matrix_to_rotvec(tu[:3, :3] @ base[:3, :3].T)
              - matrix_to_rotvec(td[:3, :3] @ base[:3, :3].T)) / (2 * h)
        cols.append(np.r_[dp, dr])
    return np.array(cols).T


def test_a_posture_pull_ends_on_target_nearest_the_posture() -> None:
    """arm7 (one free turn): from a solution, pulled toward a posture off the target's
    solutions: the answer is on target (FK), no farther from the posture than the start,
    and the nearest in the column scales to first order: the posture's offset has no part
    along the self-motion (the FD Jacobian's null space)."""
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    rng = np.random.default_rng(4)
    truth = sample_coordinates(model, rng, 3)
    targets = model.transforms(truth)
    posture = np.clip(truth + rng.normal(0.0, 0.3, truth.shape), model.lo, model.hi)
    problem = Problem(model, targets, None, ENGINE_SETTINGS)
    res = levenberg_marquardt(model, problem.with_posture(posture), truth, 200)
    assert res.converged.all()
    check_answers(load_skeleton(ARM7), model, res.q, targets, 1e-5, 1e-4)
    scale = problem.col_scale
    for q, p, t in zip(res.q, posture, truth, strict=True):
        assert np.linalg.norm((q - p) / scale) <= np.linalg.norm((t - p) / scale) + 1e-9
        inside = (q > model.lo + 1e-6) & (q < model.hi - 1e-6)
        if not inside.all():
            continue  # a limit holds it: the nearest within the limits is elsewhere
        null = np.linalg.svd(_fd_jacobian(model, q) * scale)[2][-1]  # scaled columns
        offset = (q - p) / scale
        assert abs(null @ offset) < 1e-3 * np.linalg.norm(offset)


@pytest.mark.parametrize("pole_y", [1.0, -1.0])
def test_a_pole_pull_from_a_solution_swings_back_onto_the_pole(pole_y: float) -> None:
    """SPINE_ARM's hand (chain 3, position only: one free turn): solutions on the pole
    (``solve_many`` with it) moved along the self-motion (pulled toward the shoulder
    turned 0.3 rad), then pulled toward the pole again: on target and in the pole's
    half-plane within 1e-6 rad, where the moved ones were not."""
    from dhik.model.skeleton import Skeleton
    from dhik.solver.lm import solve_many

    defn = parse_skeleton(SPINE_ARM)
    plain = BatchedModel(defn, ["Hand"], [3])
    model = BatchedModel(defn, ["Hand"], [3], points=pole_points(plain.chains, [0]))
    truth = sample_coordinates(model, np.random.default_rng(2), 4)
    truth[:, model.held] = 0.0
    targets = plain.transforms(truth)
    pole = np.array([0.5, pole_y, 1.0])
    poles = PoleSet.build(model, [0], np.broadcast_to(pole, (4, 1, 3)), [0.0])
    on = solve_many(model, targets, [(1.0, 0.0)], ENGINE_SETTINGS, poles=poles)
    problem = Problem(model, targets, [(1.0, 0.0)], ENGINE_SETTINGS, poles=poles)
    turned = on.q.copy()
    turned[:, model.names.index("Shoulder.x")] += 0.3
    moved = levenberg_marquardt(model, problem.with_posture(turned), on.q, 200)
    res = levenberg_marquardt(model, problem.as_pole_pull(), moved.q, 200)
    assert on.converged.all() and moved.converged.all() and res.converged.all()
    sk = Skeleton(defn)

    def swivels(rows: np.ndarray) -> list[float]:
        out = []
        for row, target in zip(rows, targets, strict=True):
            sk.reset()
            sk.set_joint_values(model.joint_values(row))
            world = sk.world_transforms()
            assert np.linalg.norm(world["Hand"][:3, 3] - target[0][:3, 3]) < 1e-5
            out.append(abs(swivel(world, pole, target[0])))
        return out

    assert min(swivels(moved.q)) > 1e-2
    assert max(swivels(res.q)) < 1e-6


def test_twin_frames_are_swung_once_each_with_its_own_errors(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A path that repeats (a cycle planned and repeated): arm7, 12 frames of
    ``sample_coordinates`` and the same 12 again, the second's targets moved by 1e-14 m
    (a cycle's rounding) and one frame's coordinates by 1e-6 rad. ``distinct_frames``
    pairs the twins (rounded to ``TWIN``), not that frame; the polish solves the 13
    distinct frames (one LM row each) and gives each twin its first's answer with its
    own errors (its own FK against its own targets and pole), as the polish without
    twins gives within 1e-9 rad."""
    plain = BatchedModel(load_skeleton(ARM7), ["Tool"])
    model = BatchedModel(load_skeleton(ARM7), ["Tool"], points=pole_points(plain.chains, [0]))
    one = sample_coordinates(model, np.random.default_rng(4), 12)
    q = np.vstack([one, one])
    q[15, 2] += 1e-6
    targets = plain.transforms(np.vstack([one, one]))
    targets[12:, 0, :3, 3] += 1e-14
    poles = PoleSet.build(model, [0], np.broadcast_to([0.6, 0.0, 1.2], (24, 1, 3)), [0.0])
    problem = Problem(model, targets, [(1.0, 1.0)], ENGINE_SETTINGS, poles=poles)
    rows, first = swing.distinct_frames(problem, q)
    assert rows.tolist() == [*range(12), 15]
    assert first.tolist() == [*range(12), *range(3), 12, *range(4, 12)]
    solved: list[int] = []
    inner = swing.levenberg_marquardt

    def counted(model: Any, problem: Any, q0: Any, budget: int, **kwargs: Any) -> Any:
        if budget > 0:
            solved.append(len(q0))
        return inner(model, problem, q0, budget, **kwargs)

    monkeypatch.setattr(swing, "levenberg_marquardt", counted)
    out = swing._polish(model, problem, q, 50)
    assert solved[0] == 13
    twins = [f for f in range(12, 24) if f != 15]
    np.testing.assert_array_equal(out.q[twins], out.q[[f - 12 for f in twins]])
    own = inner(model, problem.as_pole_pull(), out.q, 0)
    np.testing.assert_allclose(out.position_error, own.position_error, atol=1e-15)
    np.testing.assert_allclose(out.pole_error, own.pole_error, atol=1e-15)
    assert (out.iterations[twins] == 0).all() and (out.iterations[:12] > 0).all()
    monkeypatch.setattr(swing, "distinct_frames",
                        lambda problem, q: (np.arange(len(q)), np.arange(len(q))))
    each = swing._polish(model, problem, q, 50)
    assert np.abs(each.q - out.q).max() < 1e-9


# --------------------------------------------------------------------------- peaks


def test_a_detour_on_one_frame_is_relaxed_back_onto_the_path() -> None:
    """An arm7 path whose frame 50 was moved 0.5 rad along the self-motion (still on
    target): relaxed, the frame is back near the truth (its steps in line with their
    neighbours'), on target, and every other frame within 0.01 rad of the truth."""
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    truth = smooth_path(model.lo, model.hi, 300, 3)
    targets = model.transforms(truth)
    problem = Problem(model, targets, None, ENGINE_SETTINGS)
    posture = truth.copy()
    posture[50, 0] += 0.5
    moved = levenberg_marquardt(model, problem.with_posture(posture), truth[50:51], 200,
                                rows=np.array([50]))
    q = truth.copy()
    q[50] = moved.q[0]
    before = frame_steps(model, q, ~model.held)
    assert before[49] > 4 * np.median(before)  # a detour
    path = PathResult(q.copy(), np.ones(300, dtype=bool), np.zeros((300, 1)),
                      np.zeros((300, 1)), [], np.zeros(300, dtype=np.int64))
    out = relax.relax_peaks(model, problem, path, 2.5)
    after = frame_steps(model, out.q, ~model.held)
    assert max(after[49], after[50]) < 1.5 * np.median(after)  # before: over 4 times
    assert np.abs(out.q[50] - truth[50]).max() < 0.05
    assert np.abs(np.delete(out.q - truth, 50, axis=0)).max() < 0.01  # only smoothed
    check_answers(load_skeleton(ARM7), model, out.q, targets, 1e-5, 1e-4)
    assert out.jumps == []


def _bench_clip(seed: int, frames: int = 300) -> tuple[Any, list[str], np.ndarray, Any]:
    """bench/clips.py's clip: sample_scenes' make_scenes module, arm7's joint names, the
    smooth joint path (frames, 7) (rad) of ``seed`` and its interpolated FK targets."""
    from dhik.app.formats import parse_targets
    from dhik.app.trajectory import interpolate_keyframes

    ms = make_scenes()
    names = [j[0] for j in ms._ARM7_JOINTS]
    truth = np.array(ms.smooth_trajectory([j[3] for j in ms._ARM7_JOINTS], frames, seed=seed))
    targets = interpolate_keyframes(parse_targets(ms.fk_targets(ms.ARM7, names,
                                                                truth.tolist(), "Tool")))
    return ms, names, truth, targets


def _pole_bake_steps(ms: Any, names: list[str], truth: np.ndarray, targets: Any,
                     pole: np.ndarray) -> np.ndarray:
    """The robust bake of ``targets`` with a fixed ``pole`` (world m): every frame's
    largest joint step over the largest step of ``truth`` (frames 1..)."""
    from dhik.app import bake
    from dhik.model.skeleton import Skeleton

    track = bake.EffectorTrack("Tool", list(targets), pole=[(0, pole)])
    res = bake.simulate(Skeleton(parse_skeleton(ms.ARM7)), [track], method="robust")
    assert res.converged_count == len(targets)
    got = np.array([[f["joints"][n]["angle"] for n in names] for f in res.frames])
    return np.abs(np.diff(got, axis=0)).max(axis=1) / np.abs(np.diff(truth, axis=0)).max()


def test_pole_bakes_of_the_clip_bench_have_no_flip_frame() -> None:
    """Issue 17, point 3: bench/clips.py's 20 clips (seeds 1000-1019, 300 frames) baked
    with its fixed pole at (0.6, 0, 1.2) m: no frame where a joint moves more than twice
    the largest per-frame step of the joint path that made the targets (its frame 1 on,
    as the bench counts)."""
    pole = np.array([0.6, 0.0, 1.2])
    worst = []
    for k in range(20):
        steps = _pole_bake_steps(*_bench_clip(1000 + k), pole)
        worst.append(float(steps[1:].max()))
    assert max(worst) < 2.0, worst


@pytest.mark.parametrize(("rotation", "planned"), [(0.0, 1e-5), (1.0, 1e-3)])
def test_a_poled_path_is_planned_tightly_where_its_self_motion_has_more_dimensions(
        monkeypatch: pytest.MonkeyPatch, rotation: float, planned: float) -> None:  # fmt: skip
    """At the CLI's tolerances (1e-3 m, 0.1 rad), bench/clips.py's clip 1000 with its
    fixed pole: position only (a self-motion of four dimensions without the pole) the
    pole-free path the swing turns is planned at the engine's 1e-5 m
    (``solve.POLED_PLAN_TIGHT``: Rigify's arm with a pole at the panel's tolerances, 0.72x
    Blender's time instead of 1.20x, bench/LOG.md), every frame still converged as the
    user's tolerance judges it; full pose (one dimension) at the user's. Either way on
    the effector alone (``without_points``: the pole's bend points have no say before
    the swing, and their FK costs every row)."""
    from dhik.app import bake
    from dhik.model.skeleton import Skeleton
    from dhik.solver.path import solve
    from dhik.solver.settings import SolverSettings

    tolerances: list[float] = []
    points: list[list[str]] = []
    inner = solve.plan_path

    def recorded(model: Any, targets: Any, weights: Any, settings: Any, *args: Any,
                 **kwargs: Any) -> Any:  # fmt: skip
        tolerances.append(settings.position_tolerance)
        points.append(model.points)
        return inner(model, targets, weights, settings, *args, **kwargs)

    monkeypatch.setattr(solve, "plan_path", recorded)
    ms, _, _, targets = _bench_clip(1000, 120)
    track = bake.EffectorTrack("Tool", list(targets), 1.0, rotation,
                               pole=[(0, [0.6, 0.0, 1.2])])
    res = bake.simulate(Skeleton(parse_skeleton(ms.ARM7)), [track],
                        settings=SolverSettings(), method="robust")
    assert tolerances[0] == planned and points[0] == []
    assert res.converged_count == len(targets)
    assert max(r.position_error for r in res.records) < 1e-3


def test_a_frame_swung_part_way_keeps_its_plan_where_its_solve_lands_far(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """bench/clips.py's clip 17 (sample_scenes' arm7 and smooth path generator, seed 1017,
    300 frames) baked with a fixed pole at (0.6, 0, 1.2) m: around frame 84 the polished
    frames jump, and frames swung a fifth or a half of the way there solve, from that
    share of the straight way to their polished poses, to the polished poses themselves
    (the straight way cuts across the self-motion). Kept only where they lie within
    ``SHARE_REACH`` times their share of the swing, the bake has no step over twice the
    largest step of the joint path that made the targets; keeping every such solve (the
    swing before) leaves 2.8 times it at frame 84."""
    clip = _bench_clip(1017)

    def largest(reach: float) -> tuple[float, int]:
        monkeypatch.setattr(swing, "SHARE_REACH", reach)
        steps = _pole_bake_steps(*clip, np.array([0.6, 0.0, 1.2]))
        return float(steps.max()), int(np.argmax(steps)) + 1

    kept, _ = largest(swing.SHARE_REACH)
    before, at = largest(np.inf)
    assert kept < 2.0 < before and at == 84
