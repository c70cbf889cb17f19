"""Flip-free trajectories on the batched LM: coarse candidate tracks, a least-motion path
through them, and every other frame filled in by batched bisection.

Frames: world; units: metres, radians. The bake knows every target in advance, so the
trajectory is solved as one problem:

1. coarse frames (every ``stride``-th) are tracked in order by ``candidates`` tracks at
   once (one batch): frame 0's tracks are distinct solutions from random restarts; each
   later coarse frame starts from each track's linear extrapolation and is pulled, in the
   null space, toward it moved ``posture`` of the way to mid-range (away from the limits,
   where tracks die). A track that does not converge is re-seeded from restarts;
2. the path through the coarse solutions with least joint motion (squared largest column
   step, summed) is chosen by dynamic programming over the ladder graph of candidates, as
   ROS-Industrial's Descartes planner does;
3. the frames between coarse frames are filled level by level (the midpoints of every
   gap at once, in one batch), each started from a cubic interpolation of its known
   neighbours in joint space and pulled toward it in the null space;
4. a frame whose step exceeds ``flip_factor`` times the local mean step of its coarse
   interval (a jump) has its interval re-tracked frame by frame from both ends; a jump
   that survives is reported: no continuous path was found there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .batched import (
    REVOLUTE,
    BatchedKinematics,
    BatchOptions,
    Problem,
    cold_start,
    levenberg_marquardt,
    random_starts,
)

Array = NDArray[np.float64]


@dataclass(frozen=True)
class TrackOptions:
    """Knobs of :func:`solve_track` (tolerances in m and rad)."""

    position_tolerance: float = 1e-5
    orientation_tolerance: float = 1e-4
    stride: int = 4  # frames between coarse frames
    candidates: int = 2  # tracks through the coarse frames
    restart_rows: int = 16  # random starts when seeding or re-seeding tracks
    posture: float = 0.02  # coarse tracking: pull toward mid-range (fraction per step)
    iterations: int = 30  # LM budget per stage
    flip_factor: float = 2.5  # a step this many times the local mean step is a jump
    repair: bool = False  # re-track intervals with a jump or an unconverged frame
    seed: int = 0


@dataclass
class TrackResult:
    """Per frame: coordinates (F, n), converged (F,), each effector's errors (F, m) (m,
    rad); ``jumps``: frames whose step from the previous frame is a jump that no
    continuous path avoided (the target path forces it, as far as the search tells)."""

    q: Array
    converged: NDArray[np.bool_]
    position_error: Array
    orientation_error: Array
    jumps: list[int] = field(default_factory=list)


class _Track:
    def __init__(self, model: BatchedKinematics, targets: ArrayLike,
                 weights: Sequence[tuple[float, float]] | None, options: TrackOptions
                 ) -> None:  # fmt: skip
        self.model = model
        self.opts = options
        self.batch = BatchOptions(position_tolerance=options.position_tolerance,
                                  orientation_tolerance=options.orientation_tolerance,
                                  seed=options.seed)
        self.problem = Problem(model, targets, weights, self.batch)
        self.frames = self.problem.count
        self.rng = np.random.default_rng(options.seed)
        lo, hi = model.lo, model.hi
        finite = np.isfinite(lo) & np.isfinite(hi)
        self.mid = 0.5 * (np.where(finite, lo, 0.0) + np.where(finite, hi, 0.0))
        self.finite = finite
        self.turn = model.kinds == REVOLUTE

    def lm(self, rows: Array, start: Array, pull: Array | None, budget: int | None = None
           ) -> tuple[Array, NDArray[np.bool_], Array, Array]:  # fmt: skip
        res = levenberg_marquardt(self.model, self.problem, start,
                                  budget or self.opts.iterations, rows=rows, pull=pull)
        return res.q, res.converged, res.position_error, res.orientation_error

    def toward_mid(self, q: Array) -> Array:
        return np.where(self.finite, q + self.opts.posture * (self.mid - q), q)  # type: ignore[no-any-return]

    # -- 1. seeds and coarse tracks ------------------------------------------------------
    def seeds(self, frame: int, count: int, keep: Array | None = None) -> Array:
        """Up to ``count`` distinct converged solutions of ``frame`` from restarts (far
        from ``keep``'s rows first); may be fewer (none when none converged)."""
        starts = random_starts(self.model, self.opts.restart_rows, self.rng, self.problem.scale)
        if keep is None:
            starts = np.vstack([cold_start(self.model)[None], starts])
        rows = np.full(len(starts), frame)
        q, ok, _, _ = self.lm(rows, starts, None, 60)
        sols = q[ok]
        chosen: list[Array] = [] if keep is None else list(keep)
        base = len(chosen)
        if keep is None and len(sols):  # first: the one farthest from the limits
            chosen.append(sols[int(np.argmax(self.margin(sols)))])
        while len(chosen) - base < count and len(sols):
            dist = np.min([np.max(np.abs(sols - c), axis=1) for c in chosen], axis=0) \
                if chosen else np.full(len(sols), np.inf)
            j = int(np.argmax(dist))
            if dist[j] < 1e-3:
                break
            chosen.append(sols[j])
        return np.array(chosen[base:]) if len(chosen) > base else np.zeros((0, self.model.n))

    def margin(self, q: Array) -> Array:
        """Per row: the smallest distance to a limit relative to the half-range."""
        half = np.where(self.finite, 0.5 * (np.where(self.finite, self.model.hi, 1.0)
                                            - np.where(self.finite, self.model.lo, -1.0)), np.inf)
        return np.min(1.0 - np.abs(q - self.mid) / half, axis=1)  # type: ignore[no-any-return]

    def coarse(self, stride: int) -> tuple[Array, Array, Array]:
        """Tracks through coarse frames, adaptively spaced: every ``stride`` frames, and
        half as far where a track's solution leaves its prediction by more than a jump
        (branch switches hide inside long strides). Returns the frames visited (C,),
        coordinates (C, K, n) and converged (C, K)."""
        k, last = self.opts.candidates, self.frames - 1
        first = self.seeds(0, k)
        if len(first) == 0:
            start = cold_start(self.model)[None]
            q, ok, _, _ = self.lm(np.array([0]), start, None, 100)
            first, ok0 = q, ok
        else:
            ok0 = np.ones(len(first), dtype=bool)
        reps = -(-k // len(first))
        frames = [0]
        qs, oks = [np.repeat(first, reps, axis=0)[:k]], [np.repeat(ok0, reps)[:k]]
        h = stride
        while frames[-1] < last:
            cur = frames[-1]
            nxt = min(cur + h, last)
            prev = qs[-1]
            pred = prev
            if len(frames) > 1:
                back = cur - frames[-2]
                pred = np.clip(prev + (nxt - cur) / back * (prev - qs[-2]), self.model.lo,
                               self.model.hi)
            rows = np.full(k, nxt)
            # start from the extrapolation, pulled toward the previous solution moved a
            # little toward mid-range: least joint motion, no momentum in the null space
            ref = self.toward_mid(prev)
            q, ok, _, _ = self.lm(rows, pred, ref)
            cs = self.problem.col_scale
            dev = np.max(np.abs(q - pred) / cs, axis=1)
            moved = np.max(np.abs(pred - prev) / cs, axis=1)
            jumped = ok & (dev > 0.1 + 2.0 * moved)
            if (jumped.any() or not ok.all()) and nxt - cur > 1:
                h = max((nxt - cur) // 2, 1)
                continue
            if not ok.all():
                dead = np.flatnonzero(~ok)
                fresh = self.seeds(nxt, len(dead), q[ok] if ok.any() else None)
                for d, sol in zip(dead, fresh, strict=False):
                    q[d], ok[d] = sol, True
            frames.append(nxt)
            qs.append(q)
            oks.append(ok)
            h = min(2 * (nxt - cur), stride)
        return np.array(frames), np.array(qs), np.array(oks)

    # -- 2. least motion path ------------------------------------------------------------
    @staticmethod
    def ladder(qs: Array, oks: Array) -> Array:
        """Per coarse frame the chosen candidate (C,): least summed squared step."""
        c, k, _ = qs.shape
        cost = np.where(oks[0], 0.0, 1e6)
        back = np.zeros((c, k), dtype=int)
        for i in range(1, c):
            step = np.max(np.abs(qs[i][:, None, :] - qs[i - 1][None, :, :]), axis=2)  # (K, K')
            total = cost[None, :] + step * step
            back[i] = np.argmin(total, axis=1)
            cost = total[np.arange(k), back[i]] + np.where(oks[i], 0.0, 1e6)
        path = np.zeros(c, dtype=int)
        path[-1] = int(np.argmin(cost))
        for i in range(c - 1, 0, -1):
            path[i - 1] = back[i, path[i]]
        return path

    # -- 3. fill -------------------------------------------------------------------------
    def fill(self, known: dict[int, Array]) -> tuple[Array, Array, Array, Array]:
        """Every frame from the coarse ones, by batched bisection (module docstring)."""
        n, f = self.model.n, self.frames
        q = np.zeros((f, n))
        have = np.zeros(f, dtype=bool)
        conv = np.zeros(f, dtype=bool)
        pe = np.zeros((f, len(self.model.effectors)))
        re = np.zeros_like(pe)
        for i, v in known.items():
            q[i], have[i] = v, True
        while not have.all():
            ks = np.flatnonzero(have)
            gaps = np.flatnonzero(np.diff(ks) > 1)
            a, b = ks[gaps], ks[gaps + 1]
            m = (a + b) // 2
            t = ((m - a) / (b - a))[:, None]
            # Catmull-Rom tangents from the known neighbours (one-sided at the ends)
            pa = ks[np.maximum(gaps - 1, 0)]
            nb = ks[np.minimum(gaps + 2, len(ks) - 1)]
            qa, qb = q[a], q[b]
            span = (b - a)[:, None].astype(float)
            ta = np.where((a > pa)[:, None], (qb - q[pa]) / np.maximum(b - pa, 1)[:, None],
                          (qb - qa) / span) * span
            tb = np.where((nb > b)[:, None], (q[nb] - qa) / np.maximum(nb - a, 1)[:, None],
                          (qb - qa) / span) * span
            h00, h10 = 2 * t**3 - 3 * t**2 + 1, t**3 - 2 * t**2 + t
            h01, h11 = -2 * t**3 + 3 * t**2, t**3 - t**2
            init = np.clip(h00 * qa + h10 * ta + h01 * qb + h11 * tb, self.model.lo,
                           self.model.hi)
            sol, ok, p, r = self.lm(m, init, init)
            q[m], conv[m], pe[m], re[m] = sol, ok, p, r
            have[m] = True
        return q, conv, pe, re


def solve_track(model: BatchedKinematics, targets: ArrayLike,
                weights: Sequence[tuple[float, float]] | None = None,
                options: TrackOptions | None = None) -> TrackResult:  # fmt: skip
    """Solve a trajectory: ``targets`` (F, m, 4, 4) world transforms (metres), one per
    frame and effector. Returns per-frame coordinates, convergence, errors, and the
    frames where no continuous path was found (module docstring). Deterministic for a
    given ``options.seed``."""
    opts = options or TrackOptions()
    tr = _Track(model, targets, weights, opts)
    f = tr.frames
    if f == 0:
        m = len(model.effectors)
        return TrackResult(np.zeros((0, model.n)), np.zeros(0, dtype=bool),
                           np.zeros((0, m)), np.zeros((0, m)))
    idx, qs, oks = tr.coarse(max(opts.stride, 1))
    path = tr.ladder(qs, oks)
    known = {int(i): qs[c, path[c]] for c, i in enumerate(idx)}
    q, conv, pe, re = tr.fill(known)
    # the coarse frames' own errors and convergence
    cidx = idx
    res = levenberg_marquardt(model, tr.problem, q[cidx], 0, rows=cidx)
    conv[cidx], pe[cidx], re[cidx] = res.converged, res.position_error, res.orientation_error
    if opts.repair:
        q, conv, pe, re, jumps = _repair(tr, idx, q, conv, pe, re)
    else:
        jumps = [int(j) for j in _jump_frames(q, idx, opts.flip_factor)]
    return TrackResult(q, conv, pe, re, jumps)


def _jump_frames(q: Array, idx: Array, factor: float) -> Array:
    """Frames whose largest column step exceeds ``factor`` times the local mean step
    (the larger of its coarse interval's and its neighbours' mean steps)."""
    f = len(q)
    if f < 2:
        return np.zeros(0, dtype=int)
    steps = np.max(np.abs(np.diff(q, axis=0)), axis=1)  # step into frame i + 1
    seg = np.searchsorted(idx, np.arange(1, f), side="right") - 1  # interval of each step
    mean = np.array([np.max(np.abs(q[idx[s + 1]] - q[idx[s]])) / max(idx[s + 1] - idx[s], 1)
                     for s in range(len(idx) - 1)] or [0.0])
    local = np.maximum.reduce([mean[np.clip(seg + d, 0, len(mean) - 1)] for d in (-1, 0, 1)])
    return np.flatnonzero(steps > factor * local + 1e-6) + 1  # type: ignore[no-any-return]


def _repair(tr: _Track, idx: Array, q: Array, conv: Array, pe: Array, re: Array
            ) -> tuple[Array, Array, Array, Array, list[int]]:  # fmt: skip
    """Re-track the coarse intervals holding a jump or an unconverged frame frame by
    frame, forward from their start (sequential; rare)."""
    bad = set(int(j) for j in _jump_frames(q, idx, tr.opts.flip_factor))
    bad |= set(int(j) for j in np.flatnonzero(~conv))
    segs = sorted({int(np.searchsorted(idx, j, side="right")) - 1 for j in bad})
    for s in segs:
        a = int(idx[max(s, 0)])
        b = int(idx[min(s + 1, len(idx) - 1)])
        cur = q[a][None]
        prev = None
        for j in range(a + 1, b + 1):
            pred = cur if prev is None else np.clip(2 * cur - prev, tr.model.lo, tr.model.hi)
            sol, ok, p, r = tr.lm(np.array([j]), pred, pred, 50)
            if not ok[0] and conv[j]:
                break  # keep what the fill found
            prev, cur = cur, sol
            q[j], conv[j], pe[j], re[j] = sol[0], ok[0], p[0], r[0]
    jumps = [int(j) for j in _jump_frames(q, idx, tr.opts.flip_factor)]
    return q, conv, pe, re, jumps
