"""Hinges whose limits span more than a turn (a robot's +-2 pi joints): a path searched
with them free, modulo a turn, then moved back within their limits by whole turns.

Within such limits most angles have two values a turn apart, and for the search each is
a branch of its own: a track that runs into a limit dies there while the same pose a
turn away would go on, and a chain without redundancy has twice the branches per such
hinge (UR5 from example-robot-data, six hinges, five of them +-2 pi: up to 256 where the
same arm with +-pi limits has 8). Searched within those limits, UR5's smooth
1,000-frame clips (seeds 0-9, the CLI's tolerances) all stepped 95-143x the largest step
of the joint path that made their targets, and xarm7's (four hinges of +-2 pi) 12-52x.

Searched free (``BatchedKinematics.with_turns_free``: no limits, values modulo a turn,
as for a hinge without limits), the path is continuous modulo a turn; unwrapped, each
such hinge's path is moved by the whole number of turns that puts it within its limits,
nearest their middle. On a redundant arm the least motion modulo a turn may wind further
than the limits allow (xArm7's seed 0: 9.1 and 10.0 rad against the truth's 7.5, at no
whole turn within +-2 pi), so the ladder's search counts the turns of the hinges its
path leaves the limits on (``TurnStates``) and keeps to the least-motion path within
them. Where the path joins given poses (``solve_path``'s ``start``, ``before``,
``after``: a re-baked part of an animation), its ends stand at those poses' own turns:
the search ties them there (``TurnStates``' ``tie_start``, ``tie_end``) and the path is
moved by the whole turns that join them (``within_limits``' ``anchors``). Where no whole
number of turns places the path still, it is searched again within the limits, as
before. Angles rad.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kinematics import BatchedKinematics

Array = NDArray[np.float64]
Costs = NDArray[np.float32]  # edge costs (ladder.py's), in single precision

TURN = 2.0 * math.pi
# limits this much wider than a turn are a turn and more (+-pi, a whole turn exactly,
# has one value per angle: there the limits themselves forbid the way across)
SLACK = 1e-6


def wide_hinges(model: BatchedKinematics) -> NDArray[np.bool_]:
    """Per column: a solved revolute joint whose limits span more than a turn."""
    ranged = model.hinges & ~model.held & ~model.wraps  # wraps: already modulo a turn
    span = np.where(ranged, model.hi, 0.0) - np.where(ranged, model.lo, 0.0)
    return ranged & (span > TURN + SLACK)


def fitting_turns(lo: ArrayLike, hi: ArrayLike, low: ArrayLike, high: ArrayLike
                  ) -> tuple[Array, Array]:  # fmt: skip
    """The fewest and the most whole turns that move a path spanning ``low``..``high``
    within the limits ``lo``..``hi`` (rad; per hinge, or scalars); none where the first
    is above the second."""
    first = np.ceil((np.asarray(lo) - low) / TURN - 1e-9)
    last = np.floor((np.asarray(hi) - high) / TURN + 1e-9)
    return first, last


def within_limits(model: BatchedKinematics, q: Array, cols: NDArray[np.bool_],
                  anchors: Sequence[tuple[int, Array]] = ()) -> Array | None:  # fmt: skip
    """``q`` (F, n) with each of the columns ``cols`` made continuous (each step the
    nearest way, whole turns added: the same poses) and moved by the whole number of
    turns that puts its path within its limits, nearest their middle; with ``anchors``
    (frame, pose (n,)): by the whole number that puts each anchor's frame nearest its
    pose (the poses a path joins: the frames before and after it). None where no whole
    number does (rad)."""
    out = q.copy()
    if len(q) == 0:
        return out
    out[:, cols] = np.unwrap(q[:, cols], axis=0)
    for c in np.flatnonzero(cols):
        low, high = float(out[:, c].min()), float(out[:, c].max())
        first, last = (int(x) for x in fitting_turns(model.lo[c], model.hi[c], low, high))
        joins = {round((float(pose[c]) - out[f, c]) / TURN) for f, pose in anchors}
        if first > last or len(joins) > 1 or (joins and not first <= min(joins) <= last):
            return None
        middle = 0.5 * (model.lo[c] + model.hi[c]) - 0.5 * (low + high)
        turns = min(joins) if joins else min(max(round(middle / TURN), first), last)
        out[:, c] = np.clip(out[:, c] + turns * TURN, model.lo[c], model.hi[c])
    return out


def winds_within(model: BatchedKinematics, q: Array) -> bool:
    """Whether the path ``q`` (F, n) of a model searched modulo a turn
    (``BatchedKinematics.with_turns_free``) fits, each counted hinge unwrapped and moved
    by some whole number of turns, within that hinge's limits (``turn_lo``..``turn_hi``)
    (rad). A path found without counting turns (the cheap pass's) may not: UR10, a
    smooth 1,000-frame clip (seed 19) at 1e-5 m, its wrist a half turn off the truth's
    over 7.5 rad, fits no whole turn within +-2 pi."""
    cols = np.flatnonzero(np.isfinite(model.turn_lo) & np.isfinite(model.turn_hi))
    if cols.size == 0 or len(q) == 0:
        return True
    path = np.unwrap(q[:, cols], axis=0)
    first, last = fitting_turns(model.turn_lo[cols], model.turn_hi[cols],
                                path.min(axis=0), path.max(axis=0))
    return bool(np.all(first <= last))


# the most states a node may have (the product of each counted hinge's whole turns within
# its limits: xArm7's four hinges of +-2 pi, 16): beyond, no more hinges are counted, and
# a path that no whole turn places is searched within the limits (``solve.solve_path``)
MAX_STATES = 256
# a state's miss count where no path through it stays within the limits (misses count
# frames: far below)
BEYOND = 1 << 40


class TurnStates:
    """The ladder's least-motion search (``ladder.Ladder``) with the turns of hinges
    searched modulo a turn counted (``BatchedKinematics.with_turns_free``: ``turn_lo``..
    ``turn_hi``). A node is a pose whose such hinges may each stand at any whole turn
    within those limits, and a path through the nodes, unwrapped, fixes which: a state is
    a node and one such choice per hinge (its turns above the fewest within the limits),
    an edge leads from a state to the state its motion the nearest way reaches, at the
    edge's cost (a fill is the same modulo turns), and a state beyond the limits, or an
    edge whose filled frames leave them (``interior``), is out. The path chosen is the
    least-motion one that stays within the limits, where the search modulo a turn alone
    may wind further than they allow (xArm7: four hinges of +-2 pi), without a copy of
    each node per turn (each with its own fills and edges). As the ladder's, two passes
    are kept between rounds (into each state from the first coarse frame, and from each
    state to the last), brought together in the middle of the stretch whose edges
    changed.

    ``qs`` per coarse frame its candidates (N_i, n), ``nodes`` per coarse frame the
    positions of those in the graph. Angles rad."""

    def __init__(self, model: BatchedKinematics, qs: Sequence[Array],
                 nodes: list[NDArray[np.intp]],
                 tie_start: bool = False, tie_end: bool = False) -> None:  # fmt: skip
        # the first (last) coarse frame's one node stands at its own turns: a path that
        # joins the poses around it
        self.ties = (tie_start, tie_end)
        hinges = np.flatnonzero(np.isfinite(model.turn_lo) & np.isfinite(model.turn_hi))
        self.hinges = hinges
        self.all_lo, self.all_hi = model.turn_lo[hinges], model.turn_hi[hinges]
        self.all_values = [qs[i][nd][:, hinges] for i, nd in enumerate(nodes)]  # (N_i, H)
        # per transition, the filled edges' (to, from) frames: least and most of each
        # hinge beyond the edge's start (``interior``)
        self.reach: dict[int, dict[tuple[int, int], tuple[Array, Array]]] = {}
        self.sizes = [len(nd) for nd in nodes]
        # per hinge the most whole turns within its limits a node has (``_choices``)
        self.all_choices = np.ones(hinges.size, dtype=np.int64)
        for v in self.all_values:
            if v.size:
                _, fit = _turns_within(v, self.all_lo, self.all_hi)
                self.all_choices = np.maximum(self.all_choices, fit.max(axis=0))
        self.track(np.zeros(hinges.size, dtype=bool))

    def track(self, which: NDArray[np.bool_]) -> None:
        """Count the turns of the hinges ``which`` (over ``hinges``); the passes start
        again."""
        self.which = which
        self.fore, self.aft = -1, len(self.sizes)  # passes valid up to fore, from aft
        if not which.any():  # the ladder's own path (``path``)
            return
        self.lo, self.hi = self.all_lo[which], self.all_hi[which]
        self.values = [v[:, which] for v in self.all_values]
        # per node and hinge the fewest turns within the limits, and how many fit
        self.low, fits = [], []
        for v in self.values:
            low, fit = _turns_within(v, self.lo, self.hi)
            self.low.append(low)
            fits.append(fit)
        reps = self._choices(which)  # choices per hinge, over the nodes
        self.reps, self.k = reps, int(np.prod(reps))
        # per state (K, H) its choice per hinge
        self.choice = np.stack(np.unravel_index(np.arange(self.k), tuple(reps)), axis=1)
        self.within = [np.all(self.choice[None] < f[:, None], axis=2) for f in fits]
        for at, tied in zip((0, -1), self.ties, strict=True):
            if tied:  # only the state of no turn added
                self.within[at] &= np.all(self.low[at][:, None] + self.choice[None] == 0, axis=2)
        self._tables()
        self.codes: dict[int, NDArray[np.int16]] = {}  # per transition (``_codes``)
        # per transition, the filled edges (to, from) whose frames leave the limits from
        # some states of their start: those states (K,)
        self.out: dict[int, dict[tuple[int, int], NDArray[np.bool_]]] = {}
        for i, edges in self.reach.items():
            for (to, frm), reach in edges.items():
                self._out(i, to, frm, reach)
        f32, k = np.float32, self.k
        self.cost = [np.zeros((n, k), dtype=f32) for n in self.sizes]  # into each state
        self.count = [np.zeros((n, k), dtype=np.int64) for n in self.sizes]
        self.back = [np.zeros((n, k), dtype=np.intp) for n in self.sizes]
        self.ahead = [np.zeros((n, k), dtype=f32) for n in self.sizes]  # to the last frame
        self.ahead_count = [np.zeros((n, k), dtype=np.int64) for n in self.sizes]
        self.next = [np.zeros((n, k), dtype=np.intp) for n in self.sizes]
        # per coarse frame the misses every path into (out of) a state within has, where
        # all have the same: passes skip the misses there
        self.flat: list[int | None] = [None] * len(self.sizes)
        self.flat_ahead: list[int | None] = [None] * len(self.sizes)

    def _tables(self) -> None:
        """Per shift (its code: the end's choice minus the start's, per hinge, clipped to
        +-reps) the start's state of each end's state (``before``, (K, codes)) and the
        end's of each start's (``after``), K where the choice leaves its range."""
        width = 2 * self.reps + 1
        self.radix = np.array([int(np.prod(width[j + 1:])) for j in range(self.reps.size)],
                              dtype=np.int64)
        shifts = np.stack(np.unravel_index(np.arange(int(np.prod(width))), tuple(width)),
                          axis=1) - self.reps  # (codes, H)
        stride = np.array([int(np.prod(self.reps[j + 1:])) for j in range(self.reps.size)],
                          dtype=np.int64)

        def states(choices: NDArray[np.int64]) -> NDArray[np.int16]:
            ok = np.all((choices >= 0) & (choices < self.reps), axis=2)
            return np.where(ok, choices @ stride, self.k).astype(np.int16)

        self.before = states(self.choice[:, None] - shifts[None])  # (K, codes)
        self.after = states(self.choice[:, None] + shifts[None])

    def _codes(self, i: int) -> NDArray[np.int16]:
        """Per edge into coarse frame ``i`` (to, from) the code of its shift."""
        got = self.codes.get(i)
        if got is None:
            va, vb = self.values[i - 1], self.values[i]
            turns = np.round((vb[:, None] - va[None]) / TURN).astype(np.int64)
            # start at va + TURN (low_a + a); the end, the nearest way, at
            # vb + TURN (low_a + a - turns) = vb + TURN (low_b + b)
            shift = self.low[i - 1][None] - self.low[i][:, None] - turns
            shift = np.clip(shift, -self.reps, self.reps) + self.reps
            got = self.codes[i] = (shift @ self.radix).astype(np.int16)
        return got

    def stale(self, i: int) -> None:
        """The edges into coarse frame ``i`` changed."""
        self.fore = min(self.fore, i - 1)
        self.aft = max(self.aft, i)

    def interior(self, i: int, to: int, frm: int, q: Array) -> None:
        """The edge into coarse frame ``i`` from node ``frm`` to node ``to`` (positions in
        their frames' nodes) passes through ``q`` (k, n), its known frames in order from
        its start: the states of its start from which that leaves the limits are out."""
        u = np.unwrap(q[:, self.hinges], axis=0)
        reach = (u - u[0]).min(axis=0), (u - u[0]).max(axis=0)
        self.reach.setdefault(i, {})[(to, frm)] = reach
        if self._out(i, to, frm, reach):
            self.stale(i)

    def _out(self, i: int, to: int, frm: int, reach: tuple[Array, Array]) -> bool:
        """Whether some state of the edge's start leaves the counted hinges' limits,
        reaching ``reach`` beyond it (``out``)."""
        if not self.which.any():
            return False
        start = self.values[i - 1][frm] + TURN * (self.low[i - 1][frm] + self.choice)
        least, most = reach[0][self.which], reach[1][self.which]
        out = np.any((start + least < self.lo - SLACK) | (start + most > self.hi + SLACK),
                     axis=1)
        if out.any():
            self.out.setdefault(i, {})[(to, frm)] = out
        return bool(out.any())

    def unplaced(self, path: NDArray[np.intp]) -> NDArray[np.bool_]:
        """Per hinge (over ``hinges``) whether no whole turn puts the path through the
        nodes ``path`` (per coarse frame, positions in its nodes) within its limits, its
        filled edges' frames with it."""
        v = np.array([vals[j] for vals, j in zip(self.all_values, path, strict=True)])
        u = np.unwrap(v, axis=0)  # (C, H), each step the nearest way
        low, high = u.min(axis=0), u.max(axis=0)
        for i in range(1, len(path)):
            reach = self.reach.get(i, {}).get((int(path[i]), int(path[i - 1])))
            if reach is not None:
                low = np.minimum(low, u[i - 1] + reach[0])
                high = np.maximum(high, u[i - 1] + reach[1])
        first, last = fitting_turns(self.all_lo, self.all_hi, low, high)
        out = first > last
        tie_start, tie_end = self.ties
        joins = [np.zeros(len(u[0]))] if tie_start else []  # the turns each tie asks
        if tie_end:
            joins.append(np.round((v[-1] - u[-1]) / TURN))
        for turns in joins:
            out |= (turns < first) | (turns > last) | (turns != joins[0])
        return out

    def _totals(self, i: int, forward: bool) -> tuple[Costs, NDArray[np.int64] | None]:
        """The edges into coarse frame ``i`` with the pass behind them: forward, per state
        of frame i, node of frame i - 1 (K, N_i, N_i-1) the cost of the path into i from
        the first frame; backward, per state of frame i - 1, node of frame i (K, N_i-1,
        N_i), of the path from i - 1 to the last one (out: inf). With them their misses,
        or None where every such path has the same (``flat``)."""
        code = self._codes(i)
        if forward:
            cost, count, table, flat = self.cost[i - 1], self.count[i - 1], self.before, \
                self.flat[i - 1]
            edges, em = self.edge_costs[i], self.edge_misses[i]
        else:
            cost, count, table, flat = self.ahead[i], self.ahead_count[i], self.after, \
                self.flat_ahead[i]
            edges, em, code = self.edge_costs[i].T, self.edge_misses[i], code.T
            em = None if em is None else em.T
        other = cost.shape[0]
        state = table[:, code]  # (K, rows, other)
        where = np.add(state, np.arange(0, other * (self.k + 1), self.k + 1, dtype=np.int32),
                       dtype=np.int32)
        pad = np.full((other, 1), np.inf, np.float32)
        total: Costs = np.take(np.concatenate((cost, pad), axis=1).ravel(), where)
        total += edges[None]
        for (to, frm), out in self.out.get(i, {}).items():
            if forward:
                total[np.append(out, False)[state[:, to, frm]], to, frm] = np.inf
            else:
                total[out, frm, to] = np.inf
        misses = self.misses[i]
        if em is None and flat is not None and (forward or _same(misses)):
            return total, None
        came: NDArray[np.int64] = np.take(
            np.concatenate((count, np.full((other, 1), BEYOND)), axis=1).ravel(), where)
        if em is not None:
            came += em[None]
        if not forward:  # the misses of frame i, on the way from i - 1
            came += misses[None, None]
        came[np.isinf(total)] = BEYOND
        return total, came

    def _pass(self, i: int, forward: bool) -> None:
        """One step of a pass: forward into coarse frame ``i``, backward into ``i`` - 1."""
        total, came = self._totals(i, forward)
        frame = i if forward else i - 1
        if came is not None:
            fewest = came.min(axis=2)  # (K, rows)
            total[came > fewest[:, :, None]] = np.inf
        best = total.argmin(axis=2)
        cost: Costs = np.take_along_axis(total, best[:, :, None], axis=2)[:, :, 0].T
        gone = ~self.within[frame] | np.isinf(cost)
        cost[gone] = np.inf
        if came is not None:
            count = fewest.T.copy()
        else:  # every path behind has the same misses
            behind = self.flat[i - 1] if forward else self.flat_ahead[i]
            assert behind is not None  # as ``_totals`` found it
            if not forward:  # the misses of frame i, on the way from i - 1
                behind += int(self.misses[i][0])
            count = np.full(cost.shape, behind, dtype=np.int64)
        if forward:
            count += self.misses[i][:, None]
        count[gone] = BEYOND
        flat = _flat(count)
        if forward:
            self.cost[i], self.count[i], self.back[i], self.flat[i] = cost, count, best.T, flat
        else:
            self.ahead[i - 1], self.ahead_count[i - 1], self.next[i - 1] = cost, count, best.T
            self.flat_ahead[i - 1] = flat

    def path(self, edges: list[Costs], misses: list[NDArray[np.intp]],
             edge_misses: list[NDArray[np.intp] | None],
             plain: Callable[[], NDArray[np.intp]]) -> NDArray[np.intp] | None:
        """Per coarse frame the node (its position in the frame's nodes) of the path with
        the fewest misses, then the least cost (``ladder.Ladder``'s rule, ``plain``: its
        path, turns uncounted), within the limits; None where none is. The turns of a
        hinge are counted once a path chosen without them leaves its limits: most paths
        need few counted or none (a state per choice of every hinge: xArm7's four, 16)."""
        if not self.which.any():
            return plain()
        while True:
            at = self._path(edges, misses, edge_misses)
            if at is None or not self.retrack(at):
                return at

    def retrack(self, path: Sequence[int] | NDArray[np.intp]) -> bool:
        """Count the turns of the hinges the path through the nodes ``path`` (per coarse
        frame, positions in its nodes) leaves the limits of, uncounted so far; whether
        there were any."""
        beyond = self.unplaced(np.asarray(path, dtype=np.intp)) & ~self.which
        if not beyond.any() or np.prod(self._choices(self.which | beyond)) > MAX_STATES:
            return False
        self.track(self.which | beyond)
        return True

    def _choices(self, which: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Per hinge of ``which`` the most whole turns within its limits a node has (at
        least 1): a node's states are their product."""
        return self.all_choices[which]

    def _path(self, edges: list[Costs], misses: list[NDArray[np.intp]],
              edge_misses: list[NDArray[np.intp] | None]) -> NDArray[np.intp] | None:
        """``path`` with the turns of the hinges ``which`` counted."""
        self.edge_costs, self.misses, self.edge_misses = edges, misses, edge_misses
        c = len(self.values)
        if self.fore < 0:
            self.cost[0] = np.where(self.within[0], 0.0, np.inf).astype(np.float32)
            self.count[0] = np.where(self.within[0], misses[0][:, None], BEYOND)
            self.flat[0] = _flat(self.count[0])
            self.fore = 0
        if self.aft > c - 1:
            self.ahead[-1] = np.where(self.within[-1], 0.0, np.inf).astype(np.float32)
            self.ahead_count[-1] = np.where(self.within[-1], 0, BEYOND)
            self.flat_ahead[-1] = _flat(self.ahead_count[-1])
            self.aft = c - 1
        meet = (self.fore + self.aft + 1) // 2
        for i in range(self.fore + 1, meet + 1):
            self._pass(i, True)
        for i in range(self.aft, meet, -1):
            self._pass(i, False)
        self.fore = self.aft = meet
        count = self.count[meet] + self.ahead_count[meet]
        least = int(count.min())
        if least >= BEYOND:
            return None
        pick = int(np.argmin(np.where(count > least, np.inf,
                                      self.cost[meet] + self.ahead[meet])))
        node, state = divmod(pick, self.k)
        out = np.zeros(c, dtype=np.intp)
        at, st = node, state
        for i in range(meet, -1, -1):
            out[i] = at
            if i > 0:
                frm = int(self.back[i][at, st])
                st, at = int(self.before[st, self._codes(i)[at, frm]]), frm
        at, st = node, state
        for i in range(meet + 1, c):
            to = int(self.next[i - 1][at, st])
            st, at = int(self.after[st, self._codes(i)[to, at]]), to
            out[i] = at
        return out


def _turns_within(v: Array, lo: Array, hi: Array) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per row and column of angles ``v`` (k, H) the fewest whole turns that put it within
    ``lo``..``hi`` (H,), and how many do (rad)."""
    low = np.ceil((lo - v) / TURN - 1e-9).astype(np.int64)
    return low, np.floor((hi - v) / TURN + 1e-9).astype(np.int64) - low + 1


def _same(counts: NDArray[np.intp]) -> bool:
    """Whether every entry of ``counts`` is the same."""
    return counts.size == 0 or bool(counts.min() == counts.max())


def _flat(count: NDArray[np.int64]) -> int | None:
    """The misses of every state within (below ``BEYOND``) where all have the same, else
    None (0 where none is within)."""
    within = count[count < BEYOND]
    if within.size == 0:
        return 0
    low = int(within.min())
    return low if int(within.max()) == low else None
