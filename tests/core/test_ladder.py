"""``ladder.Ladder``: the best path through a ladder graph (fewest misses, then least
summed edge cost), kept between rounds of changed edges, against a plain forward dynamic
programme in exact Python tuples and a brute-force enumeration of every path."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from dhik.solver.path.ladder import Ladder

Graph = tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[np.ndarray]]


def graph(rng: np.random.Generator, frames: int, most: int, scale: float = 1.0) -> Graph:
    """Random nodes (named apart), node misses (0 or 1), float32 edge costs times
    ``scale`` and edge misses (mostly 0)."""
    sizes = rng.integers(1, most + 1, frames)
    nodes = [np.sort(rng.choice(100, k, replace=False)) for k in sizes]
    misses = [(rng.random(k) < 0.2).astype(np.intp) for k in sizes]
    edges = [np.zeros((0, 0), dtype=np.float32)] + [
        (rng.random((sizes[i], sizes[i - 1])) * scale).astype(np.float32)
        for i in range(1, frames)]
    inside = [np.zeros(e.shape, dtype=np.intp) for e in edges]
    return edges, nodes, misses, inside


def score(g: Graph, at: list[int]) -> tuple[int, float]:
    """A path's misses and summed edge cost (node indices per frame), exactly."""
    edges, _, misses, inside = g
    count = int(misses[0][at[0]]) + sum(int(misses[i][at[i]] + inside[i][at[i], at[i - 1]])
                                        for i in range(1, len(at)))
    return count, sum(float(edges[i][at[i], at[i - 1]]) for i in range(1, len(at)))


def best(g: Graph) -> tuple[int, float]:
    """The best score, by a forward pass over tuples (misses, then cost)."""
    edges, nodes, misses, inside = g
    into = [(int(m), 0.0) for m in misses[0]]
    for i in range(1, len(nodes)):
        into = [min((into[j][0] + int(inside[i][k, j]) + int(misses[i][k]),
                     into[j][1] + float(edges[i][k, j])) for j in range(len(into)))
                for k in range(len(nodes[i]))]
    return min(into)


def chosen(g: Graph, path: np.ndarray) -> tuple[int, float]:
    nodes = g[1]
    return score(g, [int(np.flatnonzero(nd == p)[0]) for nd, p in zip(nodes, path, strict=True)])


def assert_best(g: Graph, path: np.ndarray) -> None:
    got, want = chosen(g, path), best(g)
    assert got[0] == want[0] and got[1] == pytest.approx(want[1], rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("seed", range(20))
def test_every_round_finds_the_best_path(seed: int) -> None:
    """Rounds of changed edges (a fill raises an edge's cost and may find unconverged
    frames inside), mostly in one place: after each, the path chosen scores what a
    forward pass over the whole graph gives as the best."""
    rng = np.random.default_rng(seed)
    frames = int(rng.integers(1, 40))
    g = graph(rng, frames, 8)
    edges, nodes, misses, inside = g
    ladder = Ladder([e.copy() for e in edges], nodes, misses)
    spot = int(rng.integers(1, max(frames, 2)))
    for _ in range(12):
        path = ladder.path()
        assert len(path) == frames
        assert_best(g, path)
        for _ in range(int(rng.integers(0, 4))):
            if frames < 2:
                break
            i = spot if rng.random() < 0.7 else int(rng.integers(1, frames))
            i = min(max(i + int(rng.integers(-1, 2)), 1), frames - 1)
            to, frm = int(rng.integers(edges[i].shape[0])), int(rng.integers(edges[i].shape[1]))
            edges[i][to, frm] += np.float32(rng.random() * 2)
            inside[i][to, frm] = int(rng.random() < 0.2)
            ladder.set(i, to, frm, float(edges[i][to, frm]), int(inside[i][to, frm]))


def test_the_best_path_of_a_small_graph_is_the_best_of_all_paths() -> None:
    """Every path of a small graph enumerated: none scores better than the one chosen."""
    g = graph(np.random.default_rng(7), 5, 3)
    every = [score(g, list(p)) for p in itertools.product(*(range(len(n)) for n in g[1]))]
    got = chosen(g, Ladder(g[0], g[1], g[2]).path())
    assert got[0] == min(every)[0] and got[1] == pytest.approx(min(every)[1], rel=1e-9)


def test_motion_after_an_unreachable_stretch_still_counts() -> None:
    """Edge costs of 1e-13 (steps of a hundredth of a radian to the 8th power, shared
    out) after a stretch where every node misses: the path chosen still has the least
    motion there, which a cost summing 1e6 per miss could no longer see."""
    rng = np.random.default_rng(5)
    g = graph(rng, 30, 6, scale=1e-13)
    for i in range(10, 15):
        g[2][i][:] = 1
    assert_best(g, Ladder(g[0], g[1], g[2]).path())
    summed = [m * 1e6 for m in g[2]]  # the old way, for contrast: blind after the stretch
    cost = summed[0].astype(float)
    for i in range(1, 30):
        cost = (g[0][i] + cost[None, :]).min(axis=1) + summed[i]
    assert len(np.unique(cost)) < len(cost)  # ties: the motion lost in the rounding


def test_a_round_after_changes_in_one_place_redoes_only_frames_near_them() -> None:
    """Changes in one place (coarse frames 20-22 of 160) after the first round: the next
    rounds bring the passes together near them, so their work shrinks to a few frames;
    the path still scores the best."""
    rng = np.random.default_rng(3)
    g = graph(rng, 160, 6)
    ladder = Ladder([e.copy() for e in g[0]], g[1], g[2])
    ladder.path()
    widths = []
    for _ in range(8):
        for i in (20, 21, 22):
            g[0][i][0, 0] += np.float32(0.5)
            ladder.set(i, 0, 0, float(g[0][i][0, 0]), 0)
        widths.append(ladder.aft - ladder.fore)
        assert_best(g, ladder.path())
    assert widths[0] > 50 and max(widths[-3:]) <= 4


@pytest.mark.parametrize("seed", range(8))
def test_raised_edges_keep_the_measured_ones_and_the_best_path(seed: int) -> None:
    """``raise_untouched``: the edges of a block that no fill has costed (``set``) count at
    least the floor given, the costed ones keep their cost, the others outside the block
    are unchanged, and the next path scores the best of the graph so changed."""
    rng = np.random.default_rng(seed)
    g = graph(rng, 12, 6)
    edges, nodes, misses, inside = g
    ladder = Ladder([e.copy() for e in edges], nodes, misses)
    ladder.path()
    i = int(rng.integers(1, 12))
    rows, cols = edges[i].shape
    to, frm = int(rng.integers(rows)), int(rng.integers(cols))
    edges[i][to, frm] = np.float32(0.25)
    ladder.set(i, to, frm, 0.25, 0)
    tos, frms = np.arange(rows), np.arange(cols)
    floor = np.full((rows, cols), 5.0, dtype=np.float32)
    before = ladder.edges[i].copy()
    ladder.raise_untouched(i, tos, frms, floor)
    want = np.maximum(before, floor)
    want[to, frm] = np.float32(0.25)
    np.testing.assert_array_equal(ladder.edges[i], want)
    edges[i][:] = want
    assert_best(g, ladder.path())


def test_a_hard_spot_raises_the_routes_beside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """arm7, 1,000 frames (seed 17), solved in one pass: on the first pass an edge whose
    fill costs over ``HARD`` times its estimate raises the untouched edges within
    ``BESIDE`` of its ends to that ratio times their estimates. The lazy search then
    takes under half the rounds it takes without (37 against 90, trying those routes one
    at a time), and its path is as good: a sum of the largest step per frame to the 8th
    power within ``1 + SLACK``, the same largest step within 5 %."""
    from dhik.solver.path import ladder, solve_path
    from dhik.solver.path.search import frame_steps
    from fixtures import arm7_path, largest_step

    model, truth, targets = arm7_path(1000, 17)
    rounds: list[int] = []
    inner = ladder.Ladder.path

    def counted(self: ladder.Ladder) -> np.ndarray:
        rounds.append(1)
        return inner(self)

    monkeypatch.setattr(ladder.Ladder, "path", counted)
    with_rule = solve_path(model, targets)
    raised = len(rounds)
    rounds.clear()
    monkeypatch.setattr(ladder, "HARD", np.inf)
    without = solve_path(model, targets)
    assert 2 * raised < len(rounds)
    for res in (with_rule, without):
        assert res.converged.all() and not res.jumps
        assert largest_step(model, res.q) < 1.5 * largest_step(model, truth)
    steps = [frame_steps(model, r.q, ~model.held) for r in (with_rule, without)]
    assert np.sum(steps[0] ** 8) <= (1 + ladder.SLACK) * np.sum(steps[1] ** 8)
    assert steps[0].max() <= 1.05 * steps[1].max()


def test_a_stretch_out_of_reach_keeps_the_graph_small_and_the_rounds_few(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7, 1,200 frames, frames 500-559 moved 3x as far from the base (out of reach;
    the targets cut into them and out, so they are planned apart: ``plan.target_cuts``).
    Its coarse frames keep ``MISSED_NODES`` candidates at most (every slot of the lanes
    before: 1,280 a frame, and edges of a million entries), their edges cost nothing
    beyond their nodes' misses, and no pass runs out of rounds (before, each tried the
    pairs of junk candidates in turn for one without misses: 100 rounds a pass, 15 s).
    Every frame within reach converges. (Seed 3: seed 5's first pass runs out of rounds
    at a hard spot within reach, frames 825-1130, where every route moves far faster
    than its edge estimates; the plain clip has none.)"""
    from dhik.solver.lm import Problem
    from dhik.solver.path import ladder, solve_path
    from fixtures import arm7_path

    model, _, targets = arm7_path(1200, 3)
    targets = targets.copy()
    targets[500:560, :, :3, 3] *= 3.0
    far = Problem(model, targets, None).out_of_reach()
    assert far[500:560].all() and far.sum() == 60
    rounds: list[int] = []  # per pass, its rounds
    most: list[int] = []  # per pass, the most candidates of a coarse frame no one reached
    inner_nodes, inner_path = ladder.live_nodes, ladder.Ladder.path

    def nodes(qs: np.ndarray, oks: np.ndarray, *args: object) -> list[np.ndarray]:
        out = inner_nodes(qs, oks, *args)  # type: ignore[arg-type]
        most.append(max((len(nd) for nd, ok in zip(out, oks, strict=True) if not ok.any()),
                        default=0))
        rounds.append(0)
        return out

    def path(self: ladder.Ladder) -> np.ndarray:
        rounds[-1] += 1
        return inner_path(self)

    monkeypatch.setattr(ladder, "live_nodes", nodes)
    monkeypatch.setattr(ladder.Ladder, "path", path)
    res = solve_path(model, targets)
    assert 0 < max(most) <= ladder.MISSED_NODES  # a pass with coarse frames out of reach
    assert rounds and max(rounds) < 100  # RobustOptions.path_rounds
    assert res.converged[~far].all()


def test_slack_stops_the_first_pass_near_the_least_cost_in_fewer_rounds(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7, 300 frames (seed 7), solved in one pass: with untouched edges weighed
    ``1 + SLACK`` times their estimates, the lazy search of the first pass (a quick one,
    with retries behind it) takes at most three quarters of the rounds it takes without
    (it no longer tries each of the near-equal routes beside a hard spot in turn), and
    its path is as good: a sum of the largest step per frame to the 8th power at most
    ``1 + SLACK`` times, a largest step at most 6 % larger, no jump."""
    import dhik.solver.path.plan as plan
    from dhik.solver.path import ladder, solve_path
    from dhik.solver.path.search import frame_steps
    from fixtures import arm7_path, largest_step

    model, _, targets = arm7_path(300, 7)
    inner_path, inner_pass = ladder.Ladder.path, plan.ladder_path
    rounds: list[int] = []  # per pass, its rounds

    def path(self: ladder.Ladder) -> np.ndarray:
        rounds[-1] += 1
        return inner_path(self)

    def one_pass(*args: object, **kwargs: object) -> object:
        rounds.append(0)
        return inner_pass(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ladder.Ladder, "path", path)
    monkeypatch.setattr(plan, "ladder_path", one_pass)
    out = {}
    assert ladder.SLACK > 0
    for slack in (0.0, ladder.SLACK):
        monkeypatch.setattr(ladder, "SLACK", slack)
        rounds.clear()
        res = solve_path(model, targets)
        assert len(rounds) == 1 and res.converged.all() and not res.jumps
        steps = frame_steps(model, res.q, ~model.held)
        out[slack] = rounds[0], float(np.sum(steps ** 8)), largest_step(model, res.q)
    (exact_rounds, exact_cost, exact_step), (rounds_, cost, step) = out[0.0], out[ladder.SLACK]
    assert 4 * rounds_ <= 3 * exact_rounds
    assert cost <= (1 + ladder.SLACK) * exact_cost and step <= 1.06 * exact_step


def _advances(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list holding one count, of the ``Filler.advance`` calls (fill rounds) since."""
    from dhik.solver.path import fill

    calls = [0]
    inner = fill.Filler.advance

    def counting(self: fill.Filler, fills: list[fill.Fill]) -> None:
        calls[0] += 1
        inner(self, fills)

    monkeypatch.setattr(fill.Filler, "advance", counting)
    return calls


def test_a_probe_that_declines_leaves_the_search_as_it_was(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7, 1,200 frames (seed 4), targets of 80 frames ramped out to 3x their distance
    from the base and back: the first pass's lazy search runs past ``PROBE_ROUNDS``.
    A probe asked there is asked once, with a flag per frame, and one that declines
    leaves the path the search then finds exactly as without a probe (the probe's
    fills are copies), at the cost of those copies' rounds (their LM iterations count
    in the work)."""
    from dhik.solver.path import ladder
    from dhik.solver.path.search import Search
    from dhik.solver.settings import RobustOptions
    from fixtures import arm7_ramped

    model, _, targets = arm7_ramped(1200, 4, 560)
    rounds = _advances(monkeypatch)

    def planned(probe: object) -> tuple[object, int]:
        rounds[0] = 0
        search = Search(model, targets, None, None, RobustOptions(), None)
        out = ladder.ladder_path(search, 32, 0.6, 12, quick=True,
                                 probe=probe)  # type: ignore[arg-type]
        return out, rounds[0]

    plain, plain_rounds = planned(None)
    assert plain_rounds > ladder.PROBE_ROUNDS + 2
    asked: list[np.ndarray] = []
    probed, probed_rounds = planned(lambda conv: asked.append(conv.copy()) or False)
    assert len(asked) == 1 and asked[0].shape == (1200,) and asked[0].dtype == bool
    assert not asked[0][580:620].any() and asked[0][:500].all()
    for name in ("q", "converged", "position_error", "orientation_error", "jumps"):
        np.testing.assert_array_equal(getattr(plain, name), getattr(probed, name))
    assert plain_rounds < probed_rounds <= plain_rounds + 2


def test_a_first_pass_missing_a_stretch_out_of_reach_stops_at_the_probe(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The same clip through ``solve_path``: its first pass stops at the probe (the
    stretch out of reach shows in its misses), in at most ``PROBE_ROUNDS`` + 2 fill
    rounds against over 30 without the probe, and the clip, cut around the stretch as
    before, is solved exactly as without it."""
    import dhik.solver.path.plan as plan
    from dhik.solver.path import ladder, solve_path
    from fixtures import arm7_ramped

    model, _, targets = arm7_ramped(1200, 4, 560)
    rounds = _advances(monkeypatch)
    inner = plan.ladder_path
    first: list[int] = []  # the fill rounds of the first pass

    def one_pass(*args: object, **kwargs: object) -> object:
        before = rounds[0]
        out = inner(*args, **kwargs)  # type: ignore[arg-type]
        if not first:
            first.append(rounds[0] - before)
        return out

    monkeypatch.setattr(plan, "ladder_path", one_pass)
    probed = solve_path(model, targets)
    probed_first = first.pop()
    monkeypatch.setattr(ladder, "PROBE_ROUNDS", 10**6)
    plain = solve_path(model, targets)
    assert probed_first <= ladder.PROBE_ROUNDS + 2 and first[0] > 30
    for name in ("q", "converged", "position_error", "orientation_error", "jumps"):
        np.testing.assert_array_equal(getattr(plain, name), getattr(probed, name))
