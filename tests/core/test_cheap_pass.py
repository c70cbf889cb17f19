"""The cheap pass of a trajectory (``solver.path.cheap``) on a real character limb.

The clip is bench/characters.py's Rigify human metarig, its left arm (upper arm,
forearm and hand: three free ball joints, 9 columns) with a position-only target (a
6-dimensional self-motion), 160 frames, seed 9, written from Blender (the arm's path from
the root in ``data/metarig_arm.json``, the targets and the held spine's columns in
``data/metarig_arm_clip.npz``). Its cheap pass at the default density reaches the last
coarse frame far along the self-motion, so the last twelve frames step three times
faster than the rest. Frames: world; metres, radians.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from dhik.app.formats import parse_skeleton
from dhik.model.joint_space import BatchedModel
from dhik.solver.path import cheap, plan, solve_path
from dhik.solver.path.search import Search, frame_steps
from dhik.solver.settings import RobustOptions, SolverSettings

DATA = Path(__file__).parent / "data"
WEIGHTS = [(1.0, 0.0)]  # position only, as the bench's arm
SETTINGS = SolverSettings(position_tolerance=1e-4, orientation_tolerance=1e-3)


@pytest.fixture(scope="module")
def clip() -> tuple[BatchedModel, np.ndarray, np.ndarray]:
    defn = parse_skeleton(json.loads((DATA / "metarig_arm.json").read_text()))
    model = BatchedModel(defn, ["hand.L"], [3])
    data = np.load(DATA / "metarig_arm_clip.npz")
    return model, data["targets"], data["held"]


def test_a_drifting_cheap_pass_is_tried_denser_before_the_search(
        clip: tuple[BatchedModel, np.ndarray, np.ndarray],
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """At the default density the cheap pass is not the answer (its steps spike); with
    coarse frames twice as dense it is: every frame on target, no jump, and no step
    larger than 1.2 times the largest step of the search's answer (the ladder, the
    cheap pass turned off), against 2.2 times for the default density's track."""
    model, targets, held = clip
    opts = RobustOptions()
    search = Search(model, targets, WEIGHTS, SETTINGS, opts, held)
    assert cheap._cheap_once(search, opts.stride, opts.coarse_motion, None, None, False) is None
    out = cheap.cheap_path(model, targets, WEIGHTS, SETTINGS, opts, held=held)
    assert out is not None
    assert out.converged.all() and not out.jumps
    assert np.abs(out.q[:, model.held] - held[:, model.held]).max() == 0.0
    monkeypatch.setattr(plan, "cheap_pass", lambda *args, **kwargs: None)
    ladder = solve_path(model, targets, WEIGHTS, SETTINGS, opts, held=held)
    assert ladder.converged.all() and not ladder.jumps
    solved = ~model.held
    largest = frame_steps(model, ladder.q, solved).max()
    assert frame_steps(model, out.q, solved).max() <= 1.2 * largest


@pytest.mark.parametrize("lengths, at_once", [((3, 3), True), ((0, 3), False)])
def test_limbs_apart_try_their_coarse_frames_at_once_first(
        lengths: tuple[int, int], at_once: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Two legs under a held body (no solved joint shared) try their coarse frames all at
    once first, twice as far apart as the search's; then, and with the body solved for
    one leg (moved by both effectors) from the start, the tries are chained at the
    search's spacing, then twice as dense, as before."""
    from fixtures import TWO_LEGS

    model = BatchedModel(parse_skeleton(TWO_LEGS), ["toeL", "toeR"], list(lengths))
    rng = np.random.default_rng(4)
    q = np.clip(np.cumsum(rng.normal(scale=0.01, size=(40, model.n)), axis=0), model.lo,
                model.hi)
    opts = RobustOptions()
    tries: list[tuple[int, float, bool]] = []
    monkeypatch.setattr(cheap, "_cheap_once",
                        lambda search, every, motion, first, last, now:
                        tries.append((every, motion, now)))
    search = Search(model, model.transforms(q), None, SETTINGS, opts, np.zeros_like(q))
    assert cheap.cheap_pass(search, opts.stride, opts.coarse_motion) is None
    chained = [(opts.stride, opts.coarse_motion, False),
               (opts.stride // 2, opts.coarse_motion / 2, False)]
    sparse = opts.coarse_motion * cheap.SPARSER
    assert tries == ([(opts.stride, sparse, True), *chained] if at_once else chained)


def test_an_over_determined_chain_whose_targets_it_can_meet_is_searched(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7 with its last four hinges solved (chain length 5, the first three held at 0)
    and full-pose targets: four columns for six rows. Its targets made from its own
    smooth path (600 frames, seeds 5-7) can all be met, yet the cheap pass, which takes
    what the LM reaches from its neighbours as the answer for such a chain, met 456, 566
    and 289 of them and jumped 58-157x the truth's largest step. Where such a chain
    meets some targets within reach and not others, that try is not the answer: the
    next (coarse frames twice as dense) or the search finds the branch, every frame
    converges and the path is the truth's (its largest step at most 1.05x the truth's).
    Targets none of which it can meet (each turned 1 rad about x) keep the first try:
    no search."""
    from dhik.app.formats import load_skeleton
    from fixtures import ARM7, planned_passes, smooth_path

    model = BatchedModel(load_skeleton(ARM7), ["Tool"], chain_lengths=[5])
    assert int(np.count_nonzero(~model.held)) == 4
    lo = np.where(np.isfinite(model.lo), model.lo, -1.0)
    hi = np.where(np.isfinite(model.hi), model.hi, 1.0)
    held = np.zeros((600, model.n))
    for seed in (5, 6, 7):
        truth = smooth_path(lo, hi, 600, seed)
        truth[:, model.held] = 0.0
        targets = model.transforms(truth)
        res = solve_path(model, targets, held=held)
        assert res.converged.all(), seed
        largest = np.abs(np.diff(truth, axis=0)).max()
        assert frame_steps(model, res.q, ~model.held).max() <= 1.05 * largest, seed
    turned = targets.copy()
    c, s = np.cos(1.0), np.sin(1.0)
    turned[:, 0, :3, :3] = turned[:, 0, :3, :3] @ np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    planned = planned_passes(monkeypatch)
    res = solve_path(model, turned, held=held)
    assert not res.converged.any() and planned == []
