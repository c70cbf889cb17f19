"""Every frame of a chosen path: its edges filled by bisection, and frames left
unconverged solved again for their closest approach. Coordinates rad and m; errors m
and rad."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..lm.loop import levenberg_marquardt
from .search import Search

Array = NDArray[np.float64]

FILL_LEVELS = 1  # bisection levels of a fill (midpoints) before the rest at once
# LM runs that may converge slowly (a closest approach, a continuation from a nearby
# pose) stop when their error has not halved in this many iterations
SLOW_STALL_WINDOW = 10
# and once an accepted step lowers the error by less than this share of it (squared
# error, the LM's energy): a closest approach started at or near itself stops in a few
# iterations, not after the whole window (bench/held_out.py's 16 paths ramped out of
# reach, 771 -> 633 µs a frame, every clip's largest step and converged frames the same)
SLOW_STATIONARY = 1e-5


@dataclass
class Fill:
    """An edge's frames, filled by bisection: coordinates (L + 1, n) from its first frame
    ``first``, converged, errors (L + 1, m) (m, rad), which frames are known yet, and
    the bisection levels done."""

    first: int
    q: Array
    conv: NDArray[np.bool_]
    pe: Array
    re: Array
    have: NDArray[np.bool_]
    level: int = 0
    done: bool = False  # every frame known (kept with ``have``: asked every round)


class Filler:
    """Fills edges and approaches unreachable frames on a :class:`~.search.Search`."""

    def __init__(self, search: Search) -> None:
        self.search = search

    def start_fill(self, a: int, b: int, qa: Array, qb: Array) -> Fill:
        """The fill of an edge from frame ``a`` at ``qa`` to frame ``b`` at ``qb`` (n,)
        (rad, m): its ends known, nothing between yet."""
        model = self.search.model
        n, m = model.n, len(model.effectors)
        q = np.zeros((b - a + 1, n))
        # the end as the coordinates nearest the start (a hinge without limits: the
        # nearest turn; a rotation vector: the nearer one)
        q[0], q[-1] = qa, model.nearest(qa[None], qb[None])[0]
        have = np.zeros(b - a + 1, dtype=bool)
        have[0] = have[-1] = True
        return Fill(a, q, np.ones(b - a + 1, dtype=bool), np.zeros((b - a + 1, m)),
                     np.zeros((b - a + 1, m)), have, done=b - a <= 1)

    def advance(self, fills: list[Fill]) -> None:
        """One bisection level of every unfinished fill, all in one batched LM call: the
        midpoint of each gap for the first ``fill_levels`` levels, then every frame left
        at once. Each frame starts from the straight line between its known neighbours
        and is pulled toward it in the null space."""
        rows, inits, where = [], [], []
        for fl in fills:
            level, fl.level = fl.level, fl.level + 1
            if fl.done:
                continue
            ks = np.flatnonzero(fl.have)
            if level < FILL_LEVELS:  # the midpoint of each gap
                gaps = np.flatnonzero(np.diff(ks) > 1)
                lft, rgt = ks[gaps], ks[gaps + 1]
                mids = (lft + rgt) // 2
            else:  # every frame left, each between its known neighbours
                mids = np.flatnonzero(~fl.have)
                nxt = np.searchsorted(ks, mids)
                lft, rgt = ks[nxt - 1], ks[nxt]
            t = ((mids - lft) / (rgt - lft))[:, None]
            rows.append(fl.first + mids)
            left = fl.q[lft]
            right = self.search.model.nearest(left, fl.q[rgt]) if self.search.charted \
                else fl.q[rgt]
            inits.append(left + t * (right - left))
            where.append((fl, mids))
        if not rows:
            return
        init = np.concatenate(inits)
        sol, ok, p, r = self.search.lm(np.concatenate(rows), init, init)
        at = 0
        for fl, mids in where:
            part = slice(at, at + len(mids))
            fl.q[mids], fl.conv[mids], fl.pe[mids], fl.re[mids] = sol[part], ok[part], \
                p[part], r[part]
            fl.have[mids] = True
            fl.done = bool(fl.have.all())
            at += len(mids)

    def fill_costs(self, fills: list[Fill]) -> tuple[Array, NDArray[np.intp]]:
        """Each edge's cost as far as its fill knows it: over each stretch between known
        frames, ``d^power * spread`` (``d`` the largest column distance, ``spread`` how
        the targets' motion shares it out over the stretch's steps:
        :meth:`~.search.Search.spread`), an estimate of the finished fill's cost (a sum
        of the largest column step per frame to the ``power``), and that cost itself
        once every frame is known; and the known unconverged frames inside. All fills'
        stretches in one batch (len(fills),) each."""
        if not fills:
            return np.zeros(0), np.zeros(0, dtype=np.intp)
        sr = self.search
        ks = [np.flatnonzero(fl.have) for fl in fills]
        known = np.concatenate([fl.q[k] for fl, k in zip(fills, ks, strict=True)])
        frames = np.concatenate([fl.first + k for fl, k in zip(fills, ks, strict=True)])
        inner = np.concatenate([~fl.conv[k[1:-1]] for fl, k in zip(fills, ks, strict=True)])
        sizes = np.array([len(k) for k in ks])
        ends = np.cumsum(sizes)  # a fill's known frames end here; each has both its ends
        pair = np.ones(len(known) - 1, dtype=bool)
        pair[ends[:-1] - 1] = False  # no stretch from one fill's last frame to the next's
        a = np.flatnonzero(pair)
        d = sr.steps(known[a], known[a + 1]) if sr.charted else \
            np.max(np.abs(known[a + 1][:, sr.solved] - known[a][:, sr.solved]), axis=1,
                   initial=0.0)
        terms = d ** sr.opts.power * sr.spread(frames[a], frames[a + 1])
        # each fill's sizes - 1 stretches in order, and sizes - 2 frames inside
        cost = np.add.reduceat(terms, np.r_[0, np.cumsum(sizes - 1)[:-1]])
        missed = np.zeros(len(fills), dtype=np.intp)
        owner = np.repeat(np.arange(len(fills)), sizes - 2)
        np.add.at(missed, owner[inner], 1)
        return cost, missed

    def closest(self, q: Array, conv: NDArray[np.bool_], pe: Array, re: Array,
                keep_first: bool) -> None:  # fmt: skip
        """Frames left unconverged (out of reach, or missed): each stretch of them solved
        again in order, every frame from the one before (the first from its own value),
        for the closest approach (the slow stall rule, or until a step stops paying:
        ``SLOW_STATIONARY``); an answer replaces the frame's where its error is
        smaller. All stretches advance together; ``q`` (F, n) coordinates (rad, m),
        ``conv``, ``pe`` (m) and ``re`` (rad) (F, m) in place. ``keep_first``: frame 0 is
        given (a start) and stays."""
        bad = np.flatnonzero(~conv)
        if keep_first:
            bad = bad[bad > 0]
        if bad.size == 0:
            return
        cut = np.flatnonzero(np.diff(bad) > 1)
        first = bad[np.r_[0, cut + 1]]
        length = bad[np.r_[cut, bad.size - 1]] - first + 1
        sr = self.search
        model, problem = sr.model, sr.problem
        for j in range(int(length.max())):
            rows = first[length > j] + j
            init = q[np.maximum(rows - 1, 0)].copy()
            init[rows == 0] = q[0]
            res = levenberg_marquardt(model, problem, init, sr.settings.max_iterations,
                                      rows=rows, stall_window=SLOW_STALL_WINDOW,
                                      stationary=SLOW_STATIONARY)
            np.add.at(sr.work, rows, res.iterations)
            now = levenberg_marquardt(model, problem, q[rows], 0, rows=rows)
            better = problem.nearer((res.position_error, res.orientation_error,
                                     res.pole_error),
                                    (now.position_error, now.orientation_error,
                                     now.pole_error))
            take = rows[better]
            q[take], conv[take] = res.q[better], res.converged[better]
            pe[take], re[take] = res.position_error[better], res.orientation_error[better]
