"""The least-motion path through a trajectory's candidates, searched lazily: dynamic
programming over the ladder graph (as ROS-Industrial's Descartes planner does over IK
solutions), for the least sum of the ``power``-th power of the largest column step per
frame (nearly least-max).
An edge's first cost is a lower bound from its ends; every edge of the path chosen is
then taken one bisection level further (all in one batch), the lower bound its known
frames now give replaces its cost (exact once it is filled), and the path is chosen
again until every edge of it has been filled: a branch switch hidden between two coarse
frames shows in its fill and is avoided, and an edge the search leaves behind has cost a
midpoint, not every frame. Coordinates rad and m."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from ..kinematics import BatchedKinematics
from ..lm.loop import levenberg_marquardt, on_target
from ..lm.problem import Index
from ..lm.starts import t_pose
from .candidates import GRID_SHARE, GridTracks
from .fill import Fill, Filler
from .search import PathResult, Search, frame_steps, jump_frames
from .turns import TURN, TurnStates

MISSED_NODES = 16  # candidates kept at a coarse frame where none converged
# on a first pass (a quick one, with retries behind it) an edge no fill has touched
# counts 1 + SLACK times its estimate: the lazy search then stops at a path within
# 1 + SLACK of the least cost its estimates allow (as far as they are lower bounds),
# instead of trying each of the near-equal routes beside a hard spot in turn (the 11
# paths of bench/run.py's flip bench, 2,000 frames: 0.88x the time; 0.5 gave 0.8x but
# flipped a 5,000-frame clip the retries' exact search does not flip)
SLACK = 0.2
# on a first pass, an edge whose fill costs over HARD times its estimate raises the
# estimates of the untouched edges whose ends lie within BESIDE (rad or m, the largest
# column distance) of its ends to that ratio times their own: the routes beside a hard
# spot move about as fast as it does, and the lazy search no longer tries them one round
# at a time (arm7, with the retries on every column, same session: the flip bench 96 ->
# 84 µs a frame; test-generator clips of 200-2,000 frames 11-28 % faster, 5,000-frame
# loops 43.8 -> 22.4 s; the same clips flipped, largest ratios within 2)
HARD = 2.0
BESIDE = 0.1
# rounds of the lazy search after which a ``probe`` (``ladder_path``) is asked once
# whether the path chosen then is worth finishing: most clips' first passes are done by
# then (arm7: B 5 rounds, the 5,000-frame loop 7); one that leaves a stretch out of reach
# ran its 100 rounds around it, all thrown away when the clip is cut there (a ramp of
# bench/held_out.py, 583 of 1,650 ms)
PROBE_ROUNDS = 8
# coarse frames or transitions between two reports of the bookkeeping's progress (a
# long clip's graph takes seconds to score: a stop must be seen, issue 18)
REPORT_EVERY = 16

Array = NDArray[np.float64]
Costs = NDArray[np.float32]  # edge costs, in single precision


class Ladder:
    """Dynamic programming over the ladder graph: per coarse frame the candidate of the
    best path, judged first by its misses (unconverged nodes, ``misses`` per coarse
    frame and node 1 or 0, and unconverged frames inside its edges, :meth:`set`), then
    by its summed edge cost (``edges`` from :func:`edge_costs`, entry i (to, from) into
    coarse frame i, measured costs written over the estimates). The two are kept apart,
    not summed with a large weight on the misses: an edge's cost (the ``power``-th
    power of steps of hundredths of a radian) is far below a float's resolution beside
    such a weight, and a path after an unreachable stretch would be chosen blind to its
    motion.

    Two passes are kept between rounds: the best into each node from the first coarse
    frame (``cost``, ``count``: valid up to ``fore``) and from each node to the last one
    (``ahead``, ``ahead_count``: valid from ``aft``). Changed edges make both stale
    beyond them; a round brings them together again at a frame in the middle of the
    stale stretch, so a search that keeps changing the edges in one place (a hard spot
    the lazy search tries the ways around) redoes a few coarse frames there, not the
    whole clip after them."""

    def __init__(self, edges: list[Costs], nodes: list[Index], misses: list[Index]) -> None:
        self.edges, self.nodes, self.misses = edges, nodes, misses
        # the same costs (from, to), kept alike: the pass toward the first frame takes
        # its least over each row (a third of the time of a column's over a strided axis)
        self.edges_t = [e.T.copy() for e in edges]
        c = len(nodes)
        # per transition, the unconverged frames inside each edge (to, from), once a
        # fill has found one there
        self.edge_misses: list[Index | None] = [None] * c
        # per transition, the edges a fill has costed (to, from), once there is one
        self.measured: list[NDArray[np.bool_] | None] = [None] * c
        # the passes' sums in single precision, as the edges are: half the time of a
        # round's passes (a long clip's lazy search takes tens of rounds); routes that
        # differ by less than its resolution are alike
        f32 = np.float32
        self.cost: list[Array] = [np.zeros(len(nodes[0]), dtype=f32)] * c  # into each node
        self.count: list[Index] = [misses[0]] * c  # its own miss in
        self.back: list[Index] = [np.zeros(0, dtype=np.intp)] * c
        self.ahead: list[Array] = [np.zeros(len(nd), dtype=f32) for nd in nodes]  # to the end
        self.ahead_count: list[Index] = [np.zeros(len(nd), dtype=np.intp) for nd in nodes]
        self.next: list[Index] = [np.zeros(0, dtype=np.intp)] * c
        self.fore, self.aft = 0, c - 1  # forward valid up to fore, backward from aft
        self.rows = [np.arange(len(nd)) for nd in nodes]
        # the least of each miss count and whether all its nodes share it (most frames:
        # then no node is masked, and a pass's step asks no array for it)
        self.miss_low = [_least(m) for m in misses]
        self.count_low = [self.miss_low[0]] * c
        self.ahead_low = [(0, True)] * c
        self.turns: TurnStates | None = None  # hinges' turns counted (``turns``)

    def set(self, i: int, to: int, frm: int, cost: float, missed: int) -> None:
        """The edge into coarse frame ``i`` from node ``frm`` (an index into the nodes of
        frame i - 1) to node ``to`` costs ``cost`` and has ``missed`` unconverged frames
        inside."""
        self.edges[i][to, frm] = self.edges_t[i][frm, to] = cost
        done = self.measured[i]
        if done is None:
            done = self.measured[i] = np.zeros(self.edges[i].shape, dtype=bool)
        done[to, frm] = True
        if missed and self.edge_misses[i] is None:
            self.edge_misses[i] = np.zeros(self.edges[i].shape, dtype=np.intp)
        em = self.edge_misses[i]
        if em is not None:
            em[to, frm] = missed
        self.fore = min(self.fore, i - 1)
        self.aft = max(self.aft, i)
        if self.turns is not None:
            self.turns.stale(i)

    def raise_untouched(self, i: int, tos: Index, frms: Index, floor: Costs) -> None:
        """The edges into coarse frame ``i`` from nodes ``frms`` to nodes ``tos`` that no
        fill has costed count at least ``floor`` (len(tos), len(frms))."""
        block = np.ix_(tos, frms)
        cur = self.edges[i][block]
        raised = np.maximum(cur, floor)
        done = self.measured[i]
        new = raised if done is None else np.where(done[block], cur, raised)
        self.edges[i][block] = new
        self.edges_t[i][np.ix_(frms, tos)] = new.T
        self.fore = min(self.fore, i - 1)
        self.aft = max(self.aft, i)
        if self.turns is not None:
            self.turns.stale(i)

    def path(self) -> Index:
        """Per coarse frame the chosen candidate (C,)."""
        if self.turns is not None:  # within the limits, where a path is
            at = self.turns.path(self.edges, self.misses, self.edge_misses, self._positions)
            if at is not None:
                return np.array([nd[j] for nd, j in zip(self.nodes, at, strict=True)])
        return np.array([nd[j] for nd, j in zip(self.nodes, self._positions(), strict=True)])

    def _positions(self) -> Index:
        """Per coarse frame the chosen node's position in its frame's nodes (C,)."""
        c = len(self.nodes)
        meet = (self.fore + self.aft + 1) // 2  # both passes brought to this frame
        for i in range(self.fore + 1, meet + 1):
            em, came = self.edge_misses[i], self.count[i - 1]
            total = self.edges[i] + self.cost[i - 1]  # (to, from)
            if em is None:  # the misses of the path into each node of frame i - 1
                least, flat = self.count_low[i - 1]
                if not flat:
                    total[:, came > least] = np.inf
                into: Index | int = least
            else:
                tc = em + came
                fewest = tc.min(axis=1)
                total[tc > fewest[:, None]] = np.inf
                into = fewest
            best = total.argmin(axis=1)
            self.back[i] = best
            self.cost[i] = total[self.rows[i], best]
            self.count[i] = self.misses[i] + into
            ml, mflat = self.miss_low[i]
            self.count_low[i] = (ml + least, mflat) if em is None else _least(self.count[i])
        for i in range(self.aft, meet, -1):  # into i - 1 from frame i's side
            em, goes = self.edge_misses[i], self.ahead_count[i] + self.misses[i]
            total = self.edges_t[i] + self.ahead[i]  # (from, to)
            if em is None:
                (al, aflat), (ml, mflat) = self.ahead_low[i], self.miss_low[i]
                least = al + ml
                if not (aflat and mflat):
                    least = int(goes.min())
                    total[:, goes > least] = np.inf
                lows = np.full(len(self.nodes[i - 1]), least)
                self.ahead_low[i - 1] = (least, True)
            else:
                tc = em.T + goes
                lows = tc.min(axis=1)
                total[tc > lows[:, None]] = np.inf
                self.ahead_low[i - 1] = _least(lows)
            best = total.argmin(axis=1)
            self.next[i - 1] = best
            self.ahead[i - 1] = total[self.rows[i - 1], best]
            self.ahead_count[i - 1] = lows
        self.fore = self.aft = meet
        count = self.count[meet] + self.ahead_count[meet]
        pos = int(np.argmin(np.where(count > count.min(), np.inf,
                                     self.cost[meet] + self.ahead[meet])))
        path = np.zeros(c, dtype=int)
        at = pos
        for i in range(meet, -1, -1):
            path[i] = at
            if i > 0:
                at = int(self.back[i][at])
        at = pos
        for i in range(meet + 1, c):
            at = int(self.next[i - 1][at])
            path[i] = at
        return path


def _least(counts: Index) -> tuple[int, bool]:
    """The least of ``counts`` (0 where empty) and whether every entry equals it."""
    if counts.size == 0:
        return 0, True
    low = int(counts.min())
    return low, bool(counts.max() == low)


def _beside_hard(ladder: Ladder, search: Search, qs: Sequence[Array], nodes: list[Index],
                 est: Costs, i: int, at: tuple[int, int], cost: float) -> None:  # fmt: skip
    """A first pass's edge into coarse frame ``i`` (``at``: its from and to nodes'
    positions) that a fill costs ``cost``, over ``HARD`` times its estimate (``est``,
    the transition's, before the slack): the untouched edges whose ends lie within
    ``BESIDE`` of its ends count that ratio times their estimates."""
    frm, to = at
    estimate = float(est[to, frm])
    if not estimate > 0 or cost <= HARD * estimate:
        return
    ratio = cost / estimate
    qa, qb = qs[i - 1][nodes[i - 1]], qs[i][nodes[i]]
    near_from = np.flatnonzero(search.steps(qa, np.repeat(qa[frm:frm + 1], len(qa), 0))
                               <= BESIDE)
    near_to = np.flatnonzero(search.steps(qb, np.repeat(qb[to:to + 1], len(qb), 0)) <= BESIDE)
    ladder.raise_untouched(i, near_to, near_from,
                           est[np.ix_(near_to, near_from)] * np.float32(ratio))


def live_nodes(qs: Sequence[Array], oks: Sequence[NDArray[np.bool_]],
               report: Callable[[float], None] | None = None) -> list[Index]:
    """Per coarse frame the candidates kept in the graph: converged ones, one of each
    group equal to 1e-4 (both passes and neighbouring cells often agree); where none
    converged (the frame is then out of reach), ``MISSED_NODES`` of the distinct ones at
    most, spread over the slots (the closest approach solves such frames again; every
    slot of a long clip's lanes there made the graph's edges millions of entries each).
    ``report(fraction)`` is told how far it is, every ``REPORT_EVERY`` coarse frames."""
    out = []
    for i, (q, ok) in enumerate(zip(qs, oks, strict=True)):
        if report is not None and i % REPORT_EVERY == 0:
            report(i / len(qs))
        live = np.flatnonzero(ok)
        if live.size:
            out.append(_distinct(q, live))
            continue
        missed = _distinct(q, np.arange(len(ok)))
        if missed.size > MISSED_NODES:
            missed = missed[np.linspace(0, missed.size - 1, MISSED_NODES).round().astype(int)]
        out.append(missed)
    return out


def _distinct(q: Array, rows: Index) -> Index:
    """``rows`` (sorted) with one of each group of ``q``'s rows (coordinates, rad and m)
    equal to 1e-4."""
    keys = np.ascontiguousarray(np.round(q[rows] * 1e4).astype(np.int64))
    as_bytes = keys.view(np.dtype((np.void, keys.itemsize * keys.shape[1])))[:, 0]
    _, first = np.unique(as_bytes, return_index=True)  # one sort key a row
    return rows[np.sort(first)]


def edge_costs(model: BatchedKinematics, solved: NDArray[np.bool_], qs: Sequence[Array],
               idx: Index, nodes: list[Index], power: float, spread: Array | None = None,
               report: Callable[[float], None] | None = None) -> list[Costs]:
    """Per transition into coarse frame i (i >= 1) the estimated cost of every edge
    between its ``nodes`` (to, from): ``L (d / L)^power`` from the ends' largest motion
    ``d`` of a ``solved`` column over its ``L`` frames (the nearest way: a hinge without
    limits by the nearest turn, a rotation vector by its nearer vector), shared out over
    the edge's steps as ``spread`` (per transition: :meth:`~.search.Search.spread`; None:
    evenly, ``L (d / L)^power``, the least it can cost); entry 0 is unused.
    ``report(fraction)`` is told how far it is, every ``REPORT_EVERY`` transitions."""
    out = [np.zeros((0, 0), dtype=np.float32)]
    triples = [int(c) for c in model.rotvec_starts if solved[c]]
    in_triple = np.zeros(model.n, dtype=bool)
    for c in model.rotvec_starts:
        in_triple[c:c + 3] = True
    plain = np.flatnonzero(solved & ~in_triple)
    wraps = model.wraps[plain]
    for i in range(1, len(idx)):
        if report is not None and i % REPORT_EVERY == 0:
            report(i / len(idx))
        span = float(max(idx[i] - idx[i - 1], 1))
        a, b = qs[i][nodes[i]], qs[i - 1][nodes[i - 1]]
        # each column's differences in place, its values contiguous, in single precision
        # as the costs are kept (half the time; a step's rounding, 1e-7 rad, is a
        # ten-thousandth of its cost at power 8, and a fill replaces the estimate)
        step = np.zeros((len(a), len(b)), dtype=np.float32)
        dc = np.empty_like(step)
        ca = np.ascontiguousarray(a[:, plain].T, dtype=np.float32)
        cb = np.ascontiguousarray(b[:, plain].T, dtype=np.float32)
        for j in range(plain.size):
            np.subtract(ca[j][:, None], cb[j][None, :], out=dc)
            if wraps[j]:  # a hinge without limits: the nearest turn
                dc += np.pi
                np.remainder(dc, 2 * np.pi, out=dc)
                dc -= np.pi
            np.abs(dc, out=dc)
            np.maximum(step, dc, out=step)
        for c in triples:  # a rotation vector: the nearer of its two vectors
            va, vb = a[:, c:c + 3], b[:, c:c + 3]
            t = np.linalg.norm(vb, axis=1, keepdims=True)
            alt = vb * np.where(t > 1e-12, 1.0 - 2.0 * np.pi / np.maximum(t, 1e-12), 1.0)
            d1 = np.abs(va[:, None] - vb[None]).max(axis=2)
            d2 = np.abs(va[:, None] - alt[None]).max(axis=2)
            np.maximum(step, np.minimum(d1, d2), out=step)
        share = span ** (1.0 - power) if spread is None else float(spread[i])
        out.append(_power(step, power) * np.float32(share))
    return out


def _power(x: Costs, p: float) -> Costs:
    """``x ** p``, by squaring ``x`` in place where ``p`` is 2, 4, 8 or 16 (a float
    power costs a ``pow`` call per element: on a long clip's edges, 4 ms of 5)."""
    if p in (2.0, 4.0, 8.0, 16.0):
        for _ in range(int(p).bit_length() - 1):
            np.multiply(x, x, out=x)
        return x
    return np.power(x, np.float32(p))


def _finished(filler: Filler, fills: list[Fill]) -> list[Fill]:
    """Copies of ``fills`` with every frame filled, all at once (``fills`` stay)."""
    out = [replace(fl, q=fl.q.copy(), conv=fl.conv.copy(), pe=fl.pe.copy(),
                   re=fl.re.copy(), have=fl.have.copy()) for fl in fills]
    left = out
    while left:
        filler.advance(left)
        left = [fl for fl in left if not fl.done]
    return out


def _converged_on(frames: int, edges: list[tuple[int, int, int]],
                  fills: dict[tuple[int, int, int], Fill], idx: Index,
                  oks: Sequence[NDArray[np.bool_]]) -> NDArray[np.bool_]:  # fmt: skip
    """Per frame (``frames``,): whether the path through ``edges`` converges there, each
    coarse frame ``idx`` as its chosen candidate did (``oks``); a frame a fill has not
    reached yet counts as converged."""
    conv = np.zeros(frames, dtype=bool)
    for i, a, b in edges:
        fl = fills[(i, a, b)]
        conv[fl.first:fl.first + len(fl.q)] = fl.conv
        conv[idx[i - 1]], conv[idx[i]] = oks[i - 1][a], oks[i][b]
    return conv


def ladder_path(search: Search, stride: int, coarse_motion: float, lane_frames: int,
                start: Array | None = None, end: Array | None = None,
                quick: bool = False, wide: bool = False,
                probe: Callable[[NDArray[np.bool_]], bool] | None = None
                ) -> PathResult:  # fmt: skip
    """The path through grid tracks of coarse frames (``stride``, ``coarse_motion``,
    ``lane_frames``: :class:`~.candidates.GridTracks`) from ``start`` (n,) (else from the
    T-pose when it is on the first target) and to ``end`` (n,) when given, every frame
    filled, unconverged frames approached as closely as the LM gets. ``quick``: a first
    pass with a retry behind it (:class:`~.candidates.GridTracks`), whose lazy search
    weighs untouched edges ``1 + SLACK`` times their estimates; ``wide``: grid tracks on
    every column (a retry). ``probe``: asked once, when the search is not done after
    ``PROBE_ROUNDS`` rounds and the path chosen then misses a frame that its fills or
    candidates have reached so far, with the frames (F,) that path converges on (its
    unfinished edges filled on copies, which the search does not see); True ends the
    search with that path, which the caller only needs to see where it misses."""
    model, problem, opts = search.model, search.problem, search.opts
    f = search.frames
    m = len(model.effectors)
    if f == 0:
        return PathResult(np.zeros((0, model.n)), np.zeros(0, dtype=bool),
                          np.zeros((0, m)), np.zeros((0, m)), [], np.zeros(0, dtype=np.int64))
    if not search.solved.any():  # every column held: nothing to search, only errors to take
        every = np.arange(f)
        q = problem.hold(np.zeros((f, model.n)), every)
        res = levenberg_marquardt(model, problem, q, 0, rows=every)
        return PathResult(q, res.converged, res.position_error, res.orientation_error, [],
                          search.work)
    if start is None:  # a T-pose already on the first target is where the path starts
        tpose = t_pose(model)
        if on_target(model, problem, tpose[None], np.zeros(1, dtype=np.intp))[0]:
            start = tpose
    if start is not None:  # the ends given carry their frames' held values
        start = problem.hold(start[None], np.zeros(1, dtype=np.intp))[0]
    if end is not None:
        end = problem.hold(end[None], np.array([f - 1]))[0]
    idx, qs, oks = GridTracks(search, quick, wide).grid_tracks(max(stride, 1), coarse_motion,
                                                               lane_frames, start, end)
    filler = Filler(search)
    nodes = live_nodes(qs, oks, lambda x: search.report(GRID_SHARE + 0.01 * x))
    if start is not None:  # the path leaves frame 0 from ``start`` only
        qs[0][0], oks[0][0] = start, True
        nodes[0] = np.zeros(1, dtype=np.intp)
    if end is not None and len(idx) > 1:  # and reaches the last frame at ``end`` only
        qs[-1][0], oks[-1][0] = end, True
        nodes[-1] = np.zeros(1, dtype=np.intp)
    where = [{int(k): j for j, k in enumerate(nd)} for nd in nodes]
    costs = edge_costs(model, search.solved, qs, idx, nodes, opts.power,
                       np.r_[0.0, search.spread(idx[:-1], idx[1:])],
                       lambda x: search.report(GRID_SHARE + 0.01 + 0.04 * x))
    # a coarse frame no candidate reached (out of reach): its candidates' motion means
    # nothing, the steps into and out of it and the misses between are the targets'
    # doing, and the closest approach solves those frames again. Its edges cost nothing
    # beyond its nodes' misses: they do not choose the path on either side, and the
    # search does not try each pair of its candidates in turn for one without misses
    blind = np.array([not ok[nd].any() for ok, nd in zip(oks, nodes, strict=True)])
    for k in np.flatnonzero(blind[1:] | blind[:-1]) + 1:
        costs[int(k)][:] = 0.0
    est = [c.copy() for c in costs] if quick else None  # before the slack (HARD)
    if quick:  # the estimates, weighed against what fills find (``SLACK``)
        for c in costs[1:]:
            c *= np.float32(1.0 + SLACK)
    ladder = Ladder(costs, nodes, [(~ok[nd]).astype(np.intp)
                                   for ok, nd in zip(oks, nodes, strict=True)])
    if np.isfinite(model.turn_lo).any():  # hinges searched modulo a turn within limits
        ladder.turns = TurnStates(model, qs, nodes, model.turns_placed and start is not None,
                                  model.turns_placed and end is not None and len(idx) > 1)
    fills: dict[tuple[int, int, int], Fill] = {}
    edges: list[tuple[int, int, int]] = []
    rounds = max(opts.path_rounds, 1)
    budget, round_, path = opts.path_rounds, 0, None
    while True:
        if round_ < budget:
            at, share = 0.6 + 0.35 * min(round_ / rounds, 1.0), 0.35 / rounds  # its progress
            search.report(at)
            path = ladder.path()
            edges = [(i, int(path[i - 1]), int(path[i])) for i in range(1, len(idx))]
            for i, a, b in edges:
                if (i, a, b) not in fills:
                    fills[(i, a, b)] = filler.start_fill(int(idx[i - 1]), int(idx[i]),
                                                         qs[i - 1][a], qs[i][b])
        todo = [e for e in edges if not fills[e].done]
        if not todo or round_ >= budget:
            # done, or out of rounds: a path that leaves the limits of hinges whose turns
            # go uncounted has them counted, and the search goes on (``turns``)
            if path is None or ladder.turns is None or not ladder.turns.retrack(
                    [where[i][int(k)] for i, k in enumerate(path)]):
                break
            budget = max(budget, round_ + opts.path_rounds)
            continue
        if probe is not None and round_ == PROBE_ROUNDS and \
                not _converged_on(f, edges, fills, idx, oks).all():
            ahead = dict(zip(todo, _finished(filler, [fills[e] for e in todo]), strict=True))
            if probe(_converged_on(f, edges, {**fills, **ahead}, idx, oks)):
                fills.update(ahead)
                break
        filler.advance([fills[e] for e in todo])
        search.report(at + share * 0.5)
        seen = [e for e in todo if not (blind[e[0]] or blind[e[0] - 1])]
        paid, missed = filler.fill_costs([fills[e] for e in seen])
        cost_of = {e: (float(c), int(n)) for e, c, n in zip(seen, paid, missed, strict=True)}
        for j, e in enumerate(todo):
            if j % (4 * REPORT_EVERY) == 0:  # a long clip's round scores thousands
                search.report(at + share * (0.5 + 0.5 * j / len(todo)))
            i, frm, to = e
            cost = cost_of.get(e, (0.0, 0))
            ladder.set(i, where[i][to], where[i - 1][frm], *cost)
            if ladder.turns is not None:  # where its known frames take the hinges
                fl = fills[e]
                ladder.turns.interior(i, where[i][to], where[i - 1][frm], fl.q[fl.have])
            if est is not None:
                _beside_hard(ladder, search, qs, nodes, est[i], i,
                             (where[i - 1][frm], where[i][to]), cost[0])
        round_ += 1
    left = [fills[e] for e in edges if not fills[e].done]
    while left:  # out of rounds: finish the path chosen last
        search.report(0.95)  # unchanged: told only so that a stop is seen
        filler.advance(left)
        left = [fl for fl in left if not fl.done]
    n = model.n
    q, conv = np.zeros((f, n)), np.zeros(f, dtype=bool)
    pe, re = np.zeros((f, m)), np.zeros((f, m))
    for e in edges:
        fl = fills[e]
        lo_f, hi_f = fl.first, fl.first + len(fl.q) - 1
        q[lo_f:hi_f + 1], conv[lo_f:hi_f + 1] = fl.q, fl.conv
        pe[lo_f:hi_f + 1], re[lo_f:hi_f + 1] = fl.pe, fl.re
    if len(idx) == 1:
        q[0] = qs[0][int(np.argmax(oks[0]))]
    if search.wrap.any():  # segments may end a whole turn apart: join them
        q[:, search.wrap] = np.unwrap(q[:, search.wrap], axis=0)
    if ladder.turns is not None and ladder.turns.ties[1] and start is None and end is not None:
        # its end at its own turns, as the search placed it (``TurnStates``)
        cols = ladder.turns.hinges
        q[:, cols] += TURN * np.round((end[cols] - q[-1, cols]) / TURN)
    # the coarse frames' own errors and convergence; a coarse frame no candidate reached
    # may hold a slot that never lived: every frame within the limits, its held values in
    q[idx] = problem.hold(np.clip(q[idx], model.lo, model.hi), idx)
    final = levenberg_marquardt(model, problem, q[idx], 0, rows=idx)
    conv[idx], pe[idx], re[idx] = final.converged, final.position_error, \
        final.orientation_error
    if not conv.all():
        filler.closest(q, conv, pe, re, start is not None)
    search.report(1.0)
    jumps = jump_frames(frame_steps(model, q, search.solved), opts.flip_factor)
    return PathResult(q, conv, pe, re, [int(j) for j in jumps], search.work)
