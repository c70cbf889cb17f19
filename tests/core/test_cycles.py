"""A clip whose targets repeat (a cycle baked over and over) is planned over two cycles
and the cycle repeated from where the two agree (``path.cycles``): every cycle is
baked alike, continuous at its seams, and the search runs on two cycles only.
Coordinates rad and m."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dhik.app.formats import load_skeleton, parse_skeleton
from dhik.model.joint_space import BatchedModel
from dhik.solver.lm import solve_one
from dhik.solver.path import cheap_path, solve_path
from dhik.solver.path.cycles import period
from fixtures import ARM7, HUMANOID_ARM, check_answers, largest_step, planned_passes


def cyclic(model: Any, cycle: int, frames: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A joint path (frames, n) of ``model`` that repeats every ``cycle`` frames
    (sinusoids of one or two whole periods a cycle at 60 % of each half-range around
    mid-range: it closes on itself) and its targets (frames, 1, 4, 4), world m."""
    rng = np.random.default_rng(seed)
    mid, half = (model.lo + model.hi) / 2, (model.hi - model.lo) / 2
    periods = rng.integers(1, 3, model.n)
    phase = rng.uniform(0, 2 * math.pi, model.n)
    t = np.arange(cycle)[:, None] / cycle
    one = mid + 0.6 * half * np.sin(2 * math.pi * periods * t + phase)
    truth = np.resize(one, (frames, model.n))  # the cycle repeated, cut at ``frames``
    return truth, model.transforms(truth)


def cyclic_arm7(cycle: int, frames: int, seed: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """arm7 (effector "Tool"), a joint path that repeats (:func:`cyclic`), its targets."""
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    return model, *cyclic(model, cycle, frames, seed)


def test_the_period_is_the_smallest_repeat_of_targets_and_held_values() -> None:
    """Random inputs repeated every 7 frames (4 cycles and 3 frames): period 7, whatever
    the rounding (float32's, 1e-7); a difference of 1e-5 on one entry of one frame, or in
    a held value, and the clip repeats nowhere; two cycles are needed; a still clip's
    period is 1."""
    rng = np.random.default_rng(3)
    one = rng.normal(size=(7, 2, 4, 4))
    targets = np.resize(one, (31, 2, 4, 4))
    assert period(targets, None) == 7
    assert period(targets + 1e-7 * rng.uniform(-1, 1, size=targets.shape), None) == 7
    off = targets.copy()
    off[20, 1, 2, 3] += 1e-5
    assert period(off, None) is None
    held = np.resize(rng.normal(size=(7, 3)), (31, 3))
    assert period(targets, held) == 7
    held[30, 2] += 1e-5
    assert period(targets, held) is None
    assert period(targets[:13], None) is None  # under two cycles
    assert period(targets[:14], None) == 7
    # frames 0 and 1 recur at 7, but the clip repeats only every 14
    twice = np.resize(np.concatenate([one, one]), (42, 2, 4, 4))
    twice[7 + 3] += 1.0
    twice[21 + 3] += 1.0
    twice[35 + 3] += 1.0
    assert period(twice, None) == 14
    assert period(np.repeat(one[:1], 5, axis=0), None) == 1


def test_a_repeated_clip_bakes_every_cycle_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four cycles of 150 frames and 20 more: every frame poses as the frame a cycle
    before it, to the bit; the path is continuous over the seams (no step over twice
    the truth's largest), on target on every frame as fresh joint objects pose it, and
    the search planned the first two cycles only (its work there alone)."""
    cycle = 150
    model, truth, targets = cyclic_arm7(cycle, 4 * cycle + 20, 5)
    planned = planned_passes(monkeypatch)
    res = solve_path(model, targets)
    assert planned and max(planned) <= 2 * cycle
    assert res.converged.all() and res.jumps == []
    np.testing.assert_array_equal(res.q[cycle:], res.q[:-cycle])
    assert largest_step(model, res.q) <= 2 * np.abs(np.diff(truth, axis=0)).max()
    check_answers(load_skeleton(ARM7), model, res.q[::7], targets[::7], 1e-5, 1e-4)
    assert res.iterations[:2 * cycle].sum() > 0 and not res.iterations[2 * cycle:].any()
    assert (res.position_error[:, 0] < 1e-5).all() and (res.orientation_error[:, 0] < 1e-4).all()


def test_a_repeated_clip_joined_to_a_pose_before_starts_from_it() -> None:
    """With the pose before the clip (the cycle's last frame): frame 0 is the solution
    LM reaches from it, and from some frame of the first cycle on every frame poses as
    the frame a cycle before it; no jump."""
    cycle = 150
    model, truth, targets = cyclic_arm7(cycle, 3 * cycle, 5)
    res = solve_path(model, targets, before=truth[cycle - 1])
    assert res.converged.all() and res.jumps == []
    np.testing.assert_allclose(res.q[0], solve_one(model, targets[0], truth[cycle - 1]).q[0],
                               atol=1e-6)
    same = np.all(res.q[cycle:] == res.q[:-cycle], axis=1)
    start = int(np.argmax(same))
    assert start < cycle and same[start:].all()
    assert largest_step(model, res.q) <= 2 * np.abs(np.diff(truth, axis=0)).max()


def test_a_repeated_clip_that_joins_a_pose_after_is_planned_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Where the clip must end at the pose after it (a re-baked part of an animation),
    the cycle is not repeated: the whole clip is planned, to that pose."""
    cycle = 100
    model, truth, targets = cyclic_arm7(cycle, 3 * cycle, 5)
    planned = planned_passes(monkeypatch)
    res = solve_path(model, targets, after=truth[0])
    assert 3 * cycle in planned and res.converged.all()
    assert np.abs(res.q[-1] - truth[-1]).max() <= 2 * np.abs(np.diff(truth, axis=0)).max()


def test_a_repeated_clip_of_a_ball_joint_limb_takes_its_cheap_pass_alike() -> None:
    """A humanoid arm (ball shoulder and wrist), position only (a self-motion of four
    dimensions: the cheap pass is its answer, as for the bake's limbs taken together,
    ``cheap_path``), four cycles of 120 frames and 10 more: every frame as the frame a
    cycle before it, continuous, on target, the work on the first two cycles alone (a
    greedy track drifts from cycle to cycle along such a self-motion)."""
    cycle = 120
    model = BatchedModel(parse_skeleton(HUMANOID_ARM), ["Hand"])
    truth, targets = cyclic(model, cycle, 4 * cycle + 10, 7)
    res = cheap_path(model, targets, [(1.0, 0.0)])
    assert res is not None and res.converged.all() and res.jumps == []
    np.testing.assert_array_equal(res.q[cycle:], res.q[:-cycle])
    assert largest_step(model, res.q) <= 2 * np.abs(np.diff(truth, axis=0)).max()
    assert (res.position_error[:, 0] < 1e-5).all()
    assert not res.iterations[2 * cycle:].any()


def test_a_walk_that_travels_repeats_where_its_steps_do(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7 on a held slide (keyed hips that carry the legs, as the bake holds them):
    the arm's joints repeat every 150 frames while the slide travels 2 mm a frame and
    the targets with it, so no input repeats as it is; seen from the slide they do.
    The arm's joints repeat every cycle to the bit, the slide keeps its own values on
    every frame, every frame on target, no jump, the search on two cycles alone."""
    cycle, frames = 150, 3 * 150 + 20
    data = json.loads(Path(ARM7).read_text())
    for j in data["joints"]:
        if j["name"] == "J1":
            j["parent"] = "Slide"
    data["joints"].insert(1, {"name": "Slide", "type": "prismatic", "offset": [0, 0, 0],
                              "parent": "Base", "axis": [1, 0, 0], "limits": [-10, 10]})
    model = BatchedModel(parse_skeleton(data), ["Tool"], [8])
    slide = int(np.flatnonzero(model.held)[0])
    arm = BatchedModel(load_skeleton(ARM7), ["Tool"])
    joints, _ = cyclic(arm, cycle, frames, 5)
    truth = np.insert(joints, slide, 0.002 * np.arange(frames), axis=1)
    targets = model.transforms(truth)
    held = np.zeros_like(truth)
    held[:, slide] = truth[:, slide]
    assert period(targets, held) is None and period(targets, held, model) == cycle
    planned = planned_passes(monkeypatch)
    res = solve_path(model, targets, held=held)
    assert planned and max(planned) <= 2 * cycle
    assert res.converged.all() and res.jumps == []
    moving = ~model.held
    np.testing.assert_array_equal(res.q[cycle:, moving], res.q[:-cycle, moving])
    np.testing.assert_array_equal(res.q[:, slide], truth[:, slide])
    assert largest_step(model, res.q) <= 2 * np.abs(np.diff(truth, axis=0)).max()
    assert (res.position_error[:, 0] < 1e-5).all() and (res.orientation_error[:, 0] < 1e-4).all()


def test_the_grid_tracks_one_cycle_and_the_next_takes_its_candidates(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The two cycles planned: the grid's tracks run over one cycle's coarse frames and
    the next cycle's first (frames 0..150), and every coarse frame of the second cycle
    has the candidates of the first's at its phase, to the bit. A clip that does not
    repeat (the same motion slowed by a frame a cycle) is tracked over all its frames.
    Either way every frame is on target and no step is over twice the truth's."""
    import dhik.solver.path.candidates as candidates

    cycle = 150
    model, truth, targets = cyclic_arm7(cycle, 3 * cycle, 5)
    tracked: list[np.ndarray] = []
    found: list[tuple[np.ndarray, list[np.ndarray]]] = []
    track, grid = candidates.GridTracks.track, candidates.GridTracks.grid_tracks

    def tracking(self: Any, frames: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        tracked.append(frames)
        return track(self, frames, *args, **kwargs)

    def gridding(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = grid(self, *args, **kwargs)
        found.append((out[0], out[1]))
        return out

    monkeypatch.setattr(candidates.GridTracks, "track", tracking)
    monkeypatch.setattr(candidates.GridTracks, "grid_tracks", gridding)
    res = solve_path(model, targets)
    assert res.converged.all() and res.jumps == []
    assert largest_step(model, res.q) <= 2 * np.abs(np.diff(truth, axis=0)).max()
    idx, qs = found[0]
    assert tracked[0][-1] == cycle and idx[-1] == 2 * cycle - 1
    at = {int(f): q for f, q in zip(idx, qs, strict=True)}
    later = [f for f in at if f > cycle]
    assert later and all(f - cycle in at for f in later)
    for f in later:
        np.testing.assert_array_equal(at[f], at[f - cycle])

    tracked.clear()
    slowed = model.transforms(np.concatenate([truth[:cycle], truth[cycle - 1:2 * cycle]]))
    res = solve_path(model, slowed)
    assert res.converged.all() and res.jumps == []
    assert tracked[0][-1] == 2 * cycle


def test_a_hinge_without_limits_that_turns_once_a_cycle_winds_on() -> None:
    """planar2 with its shoulder unlimited, the hand's target going round it once every
    100 frames (three cycles and ten frames): the shoulder's angle winds on a turn
    each cycle, with no step over the truth's largest (the repeated cycle once stepped
    back a whole turn at each seam: 6.22 rad in one frame), and every frame poses as the
    frame a cycle before it; the search ran on two cycles."""
    data = json.loads(Path(ARM7).parents[1].joinpath("planar2", "skeleton.json").read_text())
    for j in data["joints"]:
        if j["name"] == "Shoulder":
            del j["limits"]
    effector = data["joints"][-1]["name"]
    model = BatchedModel(parse_skeleton(data), [effector])
    cycle, frames = 100, 310
    t = np.arange(frames) / cycle
    truth = np.stack([2 * math.pi * t, 0.6 + 0.3 * np.sin(2 * math.pi * t)], axis=1)
    targets = model.transforms(truth)
    res = solve_path(model, targets, [(1.0, 0.0)])
    assert res.converged.all() and res.jumps == []
    assert res.iterations[:2 * cycle].sum() > 0 and not res.iterations[2 * cycle:].any()
    true_step = np.abs(np.diff(truth, axis=0)).max()
    assert np.abs(np.diff(res.q, axis=0)).max() <= 1.01 * true_step
    np.testing.assert_allclose(res.q[cycle:, 0] - res.q[:-cycle, 0], 2 * math.pi, atol=1e-9)
    np.testing.assert_allclose(model.transforms(res.q[cycle:]), model.transforms(res.q[:-cycle]),
                               atol=1e-9)


def test_a_repeated_clip_with_a_pole_swings_every_cycle_alike() -> None:
    """arm7 (full pose) with a pole, three cycles of 150 frames and 20 more: the path
    planned without the pole repeats, and the swing toward the pole once differed near
    the clip's ends (frames 4-5 and 464-469, 0.015 rad and, with another pole, 0.068
    from the frame a cycle away); now every frame poses as the frame a cycle before it,
    on target, no jump. A pole that moves on (not with the cycle) is an input that does
    not repeat."""
    from dhik.solver.lm import PoleSet, pole_points

    cycle, frames = 150, 3 * 150 + 20
    plain, truth, targets = cyclic_arm7(cycle, frames, 5)
    model = BatchedModel(load_skeleton(ARM7), ["Tool"],
                         points=pole_points(plain.chains, [0]))
    for pole in ([0.5, 0.5, 1.0], [-0.4, 0.3, 0.8]):
        at = np.broadcast_to(np.array(pole), (frames, 1, 3))
        assert period(targets, None, model, at) == cycle
        res = solve_path(model, targets, poles=PoleSet.build(model, [0], at, [0.0]))
        assert res.converged.all() and res.jumps == []
        np.testing.assert_array_equal(res.q[cycle:], res.q[:-cycle])
        assert largest_step(model, res.q) <= 2 * np.abs(np.diff(truth, axis=0)).max()
    moving = at + np.linspace(0.0, 0.1, frames)[:, None, None]
    assert period(targets, None, model, moving) is None


def test_a_repeated_clip_with_a_pole_is_swung_over_two_cycles(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The swing toward the poles of a clip that repeats with them runs over its first
    two cycles, and a cycle of those is repeated (``solve._swung_cycles``): arm7 with a
    pole, five cycles of 150 frames and 20 more. The frames are about those of the
    whole clip swung and a cycle of it repeated (within 5e-5 rad with this pole; 0.006
    rad on two frames a cycle with another, where the arm turns 0.13-0.15 rad a frame
    either way), every cycle alike, on target, no jump; the whole clip is swung where
    the clip is shorter than three cycles."""
    from dhik.solver.lm import PoleSet, pole_points
    from dhik.solver.path import solve

    cycle, frames = 150, 5 * 150 + 20
    plain, truth, targets = cyclic_arm7(cycle, frames, 5)
    model = BatchedModel(load_skeleton(ARM7), ["Tool"],
                         points=pole_points(plain.chains, [0]))
    swung: list[int] = []
    inner = solve.swing_to_poles

    def counted(model: Any, poled: Any, plain: Any, path: Any, *args: Any) -> Any:
        swung.append(len(path.q))
        return inner(model, poled, plain, path, *args)

    monkeypatch.setattr(solve, "swing_to_poles", counted)
    at = np.broadcast_to(np.array([0.5, 0.5, 1.0]), (frames, 1, 3))
    poles = PoleSet.build(model, [0], at, [0.0])
    res = solve_path(model, targets, poles=poles)
    assert swung == [2 * cycle]
    assert res.converged.all() and res.jumps == []
    np.testing.assert_array_equal(res.q[cycle:], res.q[:-cycle])
    assert largest_step(model, res.q) <= 2 * np.abs(np.diff(truth, axis=0)).max()
    monkeypatch.setattr(solve, "_swung_cycles", lambda *args: None)
    whole = solve_path(model, targets, poles=poles)
    assert swung[1:] == [frames]
    assert np.abs(model.difference(whole.q, res.q)).max() < 1e-3
    short = 2 * cycle + 20
    monkeypatch.undo()
    monkeypatch.setattr(solve, "swing_to_poles", counted)
    solve_path(model, targets[:short], poles=poles.frames(np.arange(short)))
    assert swung[2:] == [short]
