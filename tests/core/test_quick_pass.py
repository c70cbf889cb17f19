"""The grid's tracking on a first pass with a retry behind it (``candidates.QUICK_BUDGET``)
and its random re-seeding near a lane's end (``candidates.RESEED_TAIL``).

arm7 (seven hinges, full pose: a self-motion of one dimension; position only: four) on
smooth paths of the test generator. Frames: world; metres, radians."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from dhik.solver.lm.loop import levenberg_marquardt
from dhik.solver.path import PathResult, candidates, judge, plan, solve_path
from dhik.solver.path.search import Search
from dhik.solver.settings import RobustOptions
from fixtures import arm7_path, largest_step, relaxed_passes


def tracking_budgets(monkeypatch: pytest.MonkeyPatch, stalls: bool = False) -> list[list[Any]]:
    """Per pass of the planner (``plan.ladder_path``), the budgets its searches' LM runs
    were given (None: ``search.TRACK_ITERATIONS``), in order; with ``stalls``, each as
    (budget, stall rule) (None: the options'). The cheap pass's runs before are left out."""
    passes: list[list[Any]] = []
    inner_pass, inner_lm = plan.ladder_path, Search.lm

    def one_pass(*args: Any, **kwargs: Any) -> PathResult:
        passes.append([])
        return inner_pass(*args, **kwargs)

    def lm(self: Search, rows: Any, start: Any, pull: Any, budget: int | None = None,
           frozen: Any = None, stall: Any = None) -> Any:  # fmt: skip
        if passes:  # not the cheap pass's, before any
            passes[-1].append((budget, stall) if stalls else budget)
        return inner_lm(self, rows, start, pull, budget, frozen, stall)

    monkeypatch.setattr(plan, "ladder_path", one_pass)
    monkeypatch.setattr(Search, "lm", lm)
    return passes


def test_a_first_pass_stops_slow_tracks_and_its_retries_do_not(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7, 1,000 frames, seed 12, passes near a singular pose (J2 near 0) where a track
    converges slowly. The first pass stops its tracks after ``QUICK_BUDGET`` iterations
    and leaves jumps there; its retries track with the full budget and find the
    continuous path (no jump, largest step under twice the truth's). With quick passes
    throughout the jumps stay: the retries' full budget is what finds the path. (With
    ``ladder.SLACK`` or ``ladder.HARD`` on the first pass, or retries on every column,
    ``plan.WIDE_RETRIES``, or the quick pass's stall rule, ``candidates.QUICK_STALL``, or
    the jumps' windows planned apart up to half the clip, ``judge.MEND_SHARE``, the quick
    passes find it here too: this is the budget's test, so they are left out.)"""
    from dhik.solver.path import ladder

    model, truth, targets = arm7_path(1000, 12)

    def budget_alone() -> None:  # the first pass's other rules and the wide retries out
        monkeypatch.setattr(ladder, "SLACK", 0.0)
        monkeypatch.setattr(ladder, "HARD", np.inf)
        monkeypatch.setattr(plan, "WIDE_RETRIES", False)
        monkeypatch.setattr(candidates, "QUICK_STALL", None)
        monkeypatch.setattr(judge, "MEND_SHARE", 0.25)

    budget_alone()
    budgets = tracking_budgets(monkeypatch)
    firsts = relaxed_passes(monkeypatch)
    res = solve_path(model, targets)
    assert firsts[0].jumps  # the quick first pass
    assert len(budgets) >= 2
    assert candidates.QUICK_BUDGET in budgets[0]
    assert all(candidates.QUICK_BUDGET not in b for b in budgets[1:])
    assert res.converged.all() and not res.jumps
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth)

    monkeypatch.undo()
    budget_alone()
    quick = candidates.GridTracks.__init__

    def always_quick(self: candidates.GridTracks, search: Search, _: bool = False,
                     wide: bool = False) -> None:  # fmt: skip
        quick(self, search, True, wide)

    monkeypatch.setattr(candidates.GridTracks, "__init__", always_quick)
    assert solve_path(model, targets).jumps


def test_a_pass_without_a_retry_tracks_with_the_full_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """``retries=0``: the only pass is not quick (nothing would plan its jumps again)."""
    model, _, targets = arm7_path(200, 3)
    budgets = tracking_budgets(monkeypatch)
    solve_path(model, targets, options=RobustOptions(retries=0))
    assert len(budgets) == 1 and None in budgets[0]
    assert candidates.QUICK_BUDGET not in budgets[0]


def test_long_steps_between_coarse_frames_keep_the_full_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Where the targets move more between two frames than ``SHORT_STEP`` times
    ``coarse_motion`` (every frame a coarse frame, each step long), a first pass tracks
    with the full budget: its linear prediction is far off, and a track converging
    slowly there is no sign of a dead one. On a smooth 200-frame path the same clip's
    short steps are quick."""
    model, _, targets = arm7_path(1000, 3)
    sparse = targets[::60]  # 17 frames
    opts = RobustOptions()
    motion = Search(model, sparse, None, None, opts).motion()
    assert motion.min() > candidates.SHORT_STEP * opts.coarse_motion
    budgets = tracking_budgets(monkeypatch)
    solve_path(model, sparse)
    assert budgets and all(candidates.QUICK_BUDGET not in b for b in budgets)
    budgets.clear()
    solve_path(model, targets[:200])
    assert candidates.QUICK_BUDGET in budgets[0]


def test_lanes_are_not_reseeded_near_their_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dead tracks are re-seeded every ``RESEED_EVERY`` coarse frames, but not within
    ``RESEED_TAIL`` of a lane's end, where the lane tracked the other way starts (and is
    seeded). arm7, 200 frames, a coarse frame every other frame in two lanes of about
    50 coarse frames each, both ways."""
    model, _, targets = arm7_path(200, 3)
    search = Search(model, targets, None, None, RobustOptions())
    grid = candidates.GridTracks(search)
    seen: dict[int, np.ndarray] = {}  # coarse step -> slots the re-seeding may reach
    inner = grid._reseed

    def reseed(i: int, slot_frame: Any, active: np.ndarray, *args: Any) -> None:
        seen[i] = active.copy()
        inner(i, slot_frame, active, *args)

    monkeypatch.setattr(grid, "_reseed", reseed)
    frames, _, _ = grid.grid_tracks(2, 10.0, 40)
    lengths = [len(x) for x in np.array_split(np.arange(len(frames)), 2)]
    assert min(lengths) > 3 * candidates.RESEED_EVERY
    every = candidates.RESEED_EVERY
    assert sorted(seen) == list(range(0, max(lengths) + 1, every))[: len(seen)]
    last = max(seen)
    assert max(lengths) - last <= candidates.RESEED_TAIL  # the last one is near the end
    assert not seen[last].any()
    assert seen[last - every].all() and seen[0].all()


def test_each_coarse_frame_keeps_the_candidates_of_the_lanes_passing_it() -> None:
    """The grid tracks are kept per coarse frame for the lanes that pass it alone (a long
    clip's lane passes a sixteenth of its frames: every slot on every frame took 74 MB
    on 5,000 frames), each where its lane solved it. arm7, 200 frames, a coarse frame
    every other frame, two segments tracked both ways, a start given (one more slot on
    the first lane): each frame holds the grid's width per passing lane (two inside a
    segment, four where segments meet), the start's slot on the first lane, and every
    candidate marked converged is on that frame's target."""
    model, truth, targets = arm7_path(200, 3)
    search = Search(model, targets, None, None, RobustOptions())
    grid = candidates.GridTracks(search)
    frames, qs, oks = grid.grid_tracks(2, 10.0, 40, start=truth[0])
    meet = round((len(frames) - 1) / 2)  # the segments' shared coarse frame
    for i in range(len(frames)):
        lanes = 4 if i == meet else 2
        extra = 1 if i <= meet else 0  # the start's slot, on the first lane
        assert len(qs[i]) == len(oks[i]) == lanes * grid.width + extra, i
    rows = np.concatenate([np.full(len(q), frames[i]) for i, q in enumerate(qs)])
    q, ok = np.concatenate(qs), np.concatenate(oks)
    check = levenberg_marquardt(model, search.problem, q[ok], 0, rows=rows[ok])
    assert ok.sum() > len(frames) * grid.width // 2  # many tracks live
    assert check.converged.all()


def test_a_first_pass_lets_stalled_tracks_die_sooner(monkeypatch: pytest.MonkeyPatch) -> None:
    """arm7, 1,000 frames, seed 5 (a first pass and a retry): the first pass's quick
    tracking steps (``QUICK_BUDGET``) run the stall rule ``QUICK_STALL`` (a track whose
    cell the self-motion leaves stops an iteration sooner), the retry's steps the
    options' rule. With it the solve evaluates fewer LM rows than with the options' rule
    on the first pass too, and both paths are continuous: converged, no jump, a largest
    step under twice the truth's."""
    model, truth, targets = arm7_path(1000, 5)
    calls = tracking_budgets(monkeypatch, stalls=True)
    res = solve_path(model, targets)
    assert len(calls) >= 2
    quick = [s for b, s in calls[0] if b == candidates.QUICK_BUDGET]
    assert quick and all(s == candidates.QUICK_STALL for s in quick)
    assert all(s is None for later in calls[1:] for _, s in later)
    monkeypatch.setattr(candidates, "QUICK_STALL", None)
    plain = solve_path(model, targets)
    assert res.iterations.sum() < plain.iterations.sum()
    for r in (res, plain):
        assert r.converged.all() and not r.jumps
        assert largest_step(model, r.q) < 2.0 * largest_step(model, truth)


def test_a_wider_self_motion_is_tracked_quickly_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """arm7 with position-only targets (a self-motion of four dimensions), 300 frames
    (seed 1, which the cheap pass leaves to the search):
    its first pass is quick as a self-motion of one dimension's is (``QUICK_BUDGET``
    steps under ``QUICK_STALL``), and the path is continuous: converged, no jump, a
    largest step under twice the truth's."""
    model, truth, targets = arm7_path(300, 1)
    calls = tracking_budgets(monkeypatch, stalls=True)
    res = solve_path(model, targets, [(1.0, 0.0)])
    assert calls, "the cheap pass answered: no search to look at"
    assert Search(model, targets, [(1.0, 0.0)], None, RobustOptions()).redundancy() == 4
    quick = [s for b, s in calls[0] if b == candidates.QUICK_BUDGET]
    assert quick and all(s == candidates.QUICK_STALL for s in quick)
    assert res.converged.all() and not res.jumps
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth)
