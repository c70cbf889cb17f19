"""Batched Levenberg-Marquardt: B independent IK problems in one set of numpy operations.

Each row of a ``(B, n)`` coordinate array is one problem (a pose, a frame of a
trajectory, a candidate track, a restart). Every iteration evaluates the errors and
Jacobians of all active rows at once through a :class:`BatchedKinematics` model, takes a
damped step per row, and keeps per-row damping, acceptance and convergence masks:

- residual per effector: ``(p_t - p) * w_p / scale`` (m, divided by the chain's length
  scale so metres compare with radians) and ``rotvec(R_t R^T) * w_r`` (rad), world frame;
- damping adapts to the error (Chan), ``W = mult * (damping * E + floor)`` with
  ``E = |e|^2 / 2``; a step that does not lower ``E`` is rejected and ``mult`` grows
  tenfold, an accepted one halves it;
- the step solves ``min |J s - e|^2 + W |s - d|^2`` (``d``: an optional pull toward a
  reference configuration; as ``W -> 0`` its null-space part is what remains);
- limits: a column whose step would leave its box goes to the limit and leaves the
  problem, the rest is solved again for the error left (clamp and remove, as Blender's
  Standard solver), so every iterate lies within the limits;
- a row converges when every counted effector error is within the tolerances (m, rad)
  and stalls when ``mult`` explodes or ``E`` stops falling; stalled rows of a cold solve
  restart from random configurations within the limits, several per problem, as extra
  rows of the next batch (a counter-based generator keyed by the problem's targets and
  the seed: deterministic, and independent of the rest of the batch).

Public API: :func:`solve_many` (independent targets); :func:`levenberg_marquardt` (the
loop, from given starts, used by ``solver.tracks``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
Index = NDArray[np.intp]  # row or frame indices

REVOLUTE, PRISMATIC = 1, 2  # column kinds (a spherical joint's angles are REVOLUTE)


class BatchedKinematics(Protocol):
    """What the batched solver needs from a model (``model.batched.BatchedModel``)."""

    n: int  # columns
    effectors: list[str]
    kinds: NDArray[np.int_]  # REVOLUTE or PRISMATIC per column
    lo: Array  # limits per column (rad or m), +-inf when none
    hi: Array
    held: NDArray[np.bool_]  # columns whose values come from outside (Problem.held)

    def pose_t(self, q: Array) -> tuple[Array, Array]:
        """Batch last: ``q`` (n, k) -> effector world rotations (m, 3, 3, k) and
        positions (m, 3, k) (m)."""
        ...

    def pose_jacobian_t(self, q: Array) -> tuple[Array, Array, Array]:
        """``pose_t(q)`` and the world Jacobian (m, 6, n, k), rows ``[linear (m/unit);
        angular (rad/unit)]``."""
        ...


@dataclass(frozen=True)
class BatchOptions:
    """Tolerances (m, rad), budgets and knobs of the batched LM."""

    position_tolerance: float = 1e-5
    orientation_tolerance: float = 1e-4
    max_iterations: int = 100
    damping: float = 0.1  # Chan: W = mult * (damping * E + floor)
    damping_floor: float = 1e-9
    restarts: int = 8  # rounds of random restarts of the unconverged problems
    restart_rows: int = 8  # random starts per unconverged problem and round
    restart_iterations: int = 40
    # iterations over which E must fall below stall_ratio of itself (a row that does not
    # is stalled: a cold solve restarts it, a track lets it die)
    stall_window: int = 4
    stall_ratio: float = 0.5
    seed: int = 0
    scaled_columns: bool = True  # steps in units of each column's half range


@dataclass
class BatchResult:
    """Per row: coordinates (B, n), converged (B,), iterations (B,), and each effector's
    position (m) and orientation (rad) error (B, m)."""

    q: Array
    converged: BoolArray
    iterations: NDArray[np.int_]
    position_error: Array
    orientation_error: Array


def rotvec(e: Array) -> Array:
    """Rotation vectors (3, ...) (rad) of rotation matrices ``e`` (3, 3, ...), batch last."""
    s = np.empty((3, *e.shape[2:]))
    np.subtract(e[2, 1], e[1, 2], out=s[0])
    np.subtract(e[0, 2], e[2, 0], out=s[1])
    np.subtract(e[1, 0], e[0, 1], out=s[2])
    s *= 0.5
    c = np.clip(0.5 * (e[0, 0] + e[1, 1] + e[2, 2] - 1.0), -1.0, 1.0)
    sn = np.sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2])
    theta = np.arctan2(sn, c)
    f = 1.0 + theta * theta / 6.0  # theta / sin(theta) near zero
    np.divide(theta, sn, out=f, where=sn > 1e-12)
    out = s * f
    far = c < -0.9  # near a half turn: the axis from the symmetric part
    if far.any():
        ef = np.moveaxis(e[:, :, far], -1, 0)  # (j, 3, 3)
        cf = c[far]
        sym = 0.5 * (ef + np.swapaxes(ef, -1, -2)) - cf[:, None, None] * np.eye(3)
        diag = np.einsum("kii->ki", sym)
        j = np.argmax(diag, axis=1)
        col = sym[np.arange(len(j)), :, j]
        u = col / np.linalg.norm(col, axis=1, keepdims=True)
        sf = np.moveaxis(s[:, far], 0, -1)
        sign = np.where(np.einsum("ki,ki->k", u, sf) < 0.0, -1.0, 1.0)
        out[:, far] = (u * (sign * theta[far])[:, None]).T
    return out


class Problem:
    """Targets (batch last), weights and tolerances of B problems on one model, and the
    values of its held columns per problem (``held`` (B, n), rad or m; None: zero, the
    T-pose): every LM run puts them in and keeps them."""

    def __init__(self, model: BatchedKinematics, targets: ArrayLike,
                 weights: Sequence[tuple[float, float]] | None,
                 options: BatchOptions, held: ArrayLike | None = None) -> None:  # fmt: skip
        self.model = model
        t = np.asarray(targets, dtype=float)
        m = len(model.effectors)
        if t.ndim == 3:
            t = t[:, None]
        if t.ndim != 4 or t.shape[1:] != (m, 4, 4):
            raise ValueError(f"targets must have shape (B, {m}, 4, 4), got {t.shape}")
        self.count = len(t)
        self.held_cols = np.flatnonzero(model.held)
        self.held: Array | None = None  # (h, B): the held columns' values per problem
        if self.held_cols.size:
            hv = np.zeros((self.count, model.n)) if held is None else \
                np.asarray(held, dtype=float).reshape(self.count, model.n)
            self.held = np.ascontiguousarray(hv[:, self.held_cols].T)
        self.t_rot = np.ascontiguousarray(t[:, :, :3, :3].transpose(1, 2, 3, 0))  # (m,3,3,B)
        self.t_pos = np.ascontiguousarray(t[:, :, :3, 3].transpose(1, 2, 0))  # (m, 3, B)
        w = [(1.0, 1.0)] * m if weights is None else [(float(a), float(b)) for a, b in weights]
        if len(w) != m or any(not (x >= 0.0 and math.isfinite(x)) for p in w for x in p):
            raise ValueError(f"need {m} pairs of finite weights >= 0")
        self.options = options
        self.scale = length_scale(model)
        self.wp = np.array([a for a, _ in w])
        self.wr = np.array([b for _, b in w])
        rows = np.repeat(np.stack([self.wp / self.scale, self.wr], axis=1), 3, axis=1)
        self.row_w = rows.reshape(-1)  # (6m,)
        self.count_p = self.wp > 0.0
        self.count_r = self.wr > 0.0
        lo, hi = search_limits(model)
        half = 0.5 * (hi - lo)
        finite = np.isfinite(half) & options.scaled_columns
        self.col_scale = np.clip(np.where(finite, half, 1.0), 1e-3, 1e3)  # (n,)

    def hold(self, q: Array, rows: Index) -> Array:
        """``q`` (k, n) (rad, m) with the held columns set to problems ``rows``' values
        (a copy)."""
        q = np.array(q, dtype=float)
        if self.held is not None:
            q[:, self.held_cols] = self.held[:, rows].T
        return q

    def residual(self, tr: Array, tp: Array, rot: Array, pos: Array
                 ) -> tuple[Array, Array, Array]:  # fmt: skip
        """Weighted residual (6m, k) and per-effector errors (m, k) (m), (m, k) (rad) of
        effector poses ``rot`` (m, 3, 3, k), ``pos`` (m, 3, k) (world, m) against target
        rotations ``tr`` (m, 3, 3, k) and positions ``tp`` (m, 3, k) (world, m), the
        problems' targets (``t_rot``, ``t_pos``) gathered by the caller."""
        dp = tp - pos  # (m, 3, k)
        err = np.einsum("milk,mjlk->ijmk", tr, rot)  # R_t R^T, (3, 3, m, k)
        dr = rotvec(err).transpose(1, 0, 2)  # (m, 3, k)
        pe = np.sqrt(np.einsum("mik,mik->mk", dp, dp))
        re = np.sqrt(np.einsum("mik,mik->mk", dr, dr))
        e = np.concatenate((dp, dr), axis=1).reshape(len(self.row_w), dp.shape[-1]) \
            * self.row_w[:, None]
        return e, pe, re

    def badness(self, pe: Array, re: Array) -> Array:
        """Per row: the largest counted error over its tolerance (below 1: converged);
        ``pe`` (m) and ``re`` (rad) (B, m), rows first."""
        o = self.options
        bp = np.where(self.count_p, pe / o.position_tolerance, 0.0)
        br = np.where(self.count_r, re / o.orientation_tolerance, 0.0)
        return np.maximum(bp.max(axis=1, initial=0.0), br.max(axis=1, initial=0.0))

    def converged(self, pe: Array, re: Array) -> BoolArray:
        """Per row: every counted error within its tolerance (``pe``, ``re`` (m, k))."""
        o = self.options
        ok_p = (pe < o.position_tolerance) | ~self.count_p[:, None]
        ok_r = (re < o.orientation_tolerance) | ~self.count_r[:, None]
        return np.all(ok_p & ok_r, axis=0)


# limits beyond +-SEARCH_LIMIT (rad or m) say nothing about where to look: the search
# (column scales, random starts, cold starts, grids) treats them as absent; steps are
# still clipped to the limits themselves
SEARCH_LIMIT = 1e6


def search_limits(model: BatchedKinematics) -> tuple[Array, Array]:
    """``(lo, hi)`` (n,) for the search: the limits, or -inf / inf beyond SEARCH_LIMIT."""
    lo = np.where(np.abs(model.lo) <= SEARCH_LIMIT, model.lo, -np.inf)
    hi = np.where(np.abs(model.hi) <= SEARCH_LIMIT, model.hi, np.inf)
    return lo, hi


def length_scale(model: BatchedKinematics) -> float:
    """The largest linear Jacobian column of a solved column at the T-pose clipped into
    the limits (m)."""
    q0 = np.clip(np.zeros(model.n), model.lo, model.hi)[:, None]
    _, _, jac = model.pose_jacobian_t(q0)
    jac = jac[:, :, ~model.held]  # the solved columns
    if jac.size == 0:
        return 1.0
    longest = float(np.max(np.linalg.norm(jac[:, :3, :, 0], axis=1)))
    return longest if longest > 1e-6 else 1.0


def bounded_step(jac: Array, e: Array, x: Array, lo: Array, hi: Array, w: Array,
                 d: Array | None = None) -> Array:  # fmt: skip
    """Per row ``argmin |J s - e|^2 + w |s - d|^2`` with ``lo <= x + s <= hi`` kept by
    clamping and removing columns; batch last: ``jac`` (r, n, k), ``e`` (r, k), ``x``
    (n, k), ``lo``/``hi`` (n,), ``w`` (k,), ``d`` (n, k) or None (no pull) -> (n, k)."""
    r, n, k = jac.shape
    lo_, hi_ = lo[:, None], hi[:, None]
    step = _damped(jac, e, w, d)
    v = x + step
    viol = (v < lo_) | (v > hi_)
    rows = np.flatnonzero(viol.any(axis=0))
    if rows.size == 0:
        return step
    # rows leave the loop once their step stays within the box: the rest is re-solved
    free = np.ones((n, rows.size), dtype=bool)
    fixed = np.zeros((n, rows.size))
    xs, js, es = x[:, rows], jac[..., rows], e[:, rows]
    ws = w[rows]
    ds = None if d is None else d[:, rows]
    sub_v, sub_viol = v[:, rows], viol[:, rows]
    for _ in range(n):
        fixed = np.where(sub_viol, np.clip(sub_v, lo_, hi_) - xs, fixed)
        free &= ~sub_viol
        rest = es - np.einsum("rnk,nk->rk", js, fixed)
        s = _damped(js * free, rest, ws, None if ds is None else ds * free)
        s = np.where(free, s, fixed)
        sub_v = xs + s
        sub_viol = free & ((sub_v < lo_) | (sub_v > hi_))
        again = sub_viol.any(axis=0)
        done = ~again
        step[:, rows[done]] = np.clip(sub_v[:, done], lo_, hi_) - xs[:, done]
        if not again.any():
            break
        rows, free, fixed, xs, js, es, ws = rows[again], free[:, again], fixed[:, again], \
            xs[:, again], js[..., again], es[:, again], ws[again]
        ds = None if ds is None else ds[:, again]
        sub_v, sub_viol = sub_v[:, again], sub_viol[:, again]
    else:
        step[:, rows] = np.clip(sub_v, lo_, hi_) - xs
    return step


def _damped(jac: Array, e: Array, w: Array, d: Array | None) -> Array:
    """``argmin |J s - e|^2 + w |s - d|^2`` per row, batch last (``jac`` (r, n, k));
    where a column of ``J`` is zero, ``s = d`` there (callers zero ``d`` there)."""
    r, n, k = jac.shape
    if d is not None:
        e = e - np.einsum("rnk,nk->rk", jac, d)
    if n >= r:
        a = np.ascontiguousarray(np.einsum("rnk,snk->rsk", jac, jac))
        a.reshape(r * r, k)[:: r + 1] += w  # the diagonal
        s = np.einsum("rnk,rk->nk", jac, spd_solve(a, e))
    else:
        a = np.ascontiguousarray(np.einsum("rnk,rpk->npk", jac, jac))
        a.reshape(n * n, k)[:: n + 1] += w
        s = spd_solve(a, np.einsum("rnk,rk->nk", jac, e))
    return s if d is None else s + d


def spd_solve(a: Array, b: Array) -> Array:
    """``x`` with ``a x = b`` for symmetric positive definite ``a`` (r, r, k), ``b``
    (r, k), batch last: a Cholesky factorisation vectorised over the batch (a pivot
    that is not positive is replaced by a tiny one: the damping keeps it rare)."""
    r, k = a.shape[0], a.shape[-1]
    if k < 128:  # small batches: LAPACK's per-matrix solve costs less than r^3/6 numpy calls
        try:
            sol = np.linalg.solve(a.transpose(2, 0, 1), b.T[..., None])[..., 0].T
            return cast(Array, sol)
        except np.linalg.LinAlgError:
            pass  # a singular matrix: the factorisation below replaces its pivot
    low: list[list[Array]] = [[] for _ in range(r)]
    tiny = 1e-300
    for i in range(r):
        for j in range(i + 1):
            acc = a[i, j]
            for t in range(j):
                acc = acc - low[i][t] * low[j][t]
            if i == j:
                low[i].append(np.sqrt(np.maximum(acc, tiny)))
            else:
                low[i].append(acc / low[j][j])
    y: list[Array] = []
    for i in range(r):
        acc = b[i]
        for t in range(i):
            acc = acc - low[i][t] * y[t]
        y.append(acc / low[i][i])
    x: list[Array] = [y[0]] * r
    for i in range(r - 1, -1, -1):
        acc = y[i]
        for t in range(i + 1, r):
            acc = acc - low[t][i] * x[t]
        x[i] = acc / low[i][i]
    return np.stack(x)


def levenberg_marquardt(model: BatchedKinematics, problem: Problem, q0: Array,
                        budget: int, rows: Index | None = None, pull: Array | None = None,
                        pull_gain: float = 1.0, polish: bool = False,
                        frozen: NDArray[np.bool_] | None = None,
                        first_wins: bool = False, stall_window: int | None = None
                        ) -> BatchResult:  # fmt: skip
    """Run the batched LM from ``q0`` (k, n) for problems ``rows`` (default all, in
    order), at most ``budget`` iterations per row. ``pull`` (k, n): a reference the
    step is damped toward (its null-space part survives), ``pull_gain`` of the way.
    ``polish``: converged rows keep iterating (toward ``pull``) for the whole budget,
    a step kept when it stays converged or lowers the error. ``frozen`` (n,) for all
    rows or (k, n) per row: columns that keep their starting values. ``first_wins``:
    rows of the same problem (``rows``) stop once one of them has converged.
    ``stall_window``: instead of the problem's ``options.stall_window``."""
    opts = problem.options
    lo, hi = model.lo, model.hi
    q = np.ascontiguousarray(np.clip(np.asarray(q0, dtype=float), lo, hi).T)  # (n, k)
    k = q.shape[1]
    if k == 0:
        m = len(model.effectors)
        return BatchResult(np.zeros((0, model.n)), np.zeros(0, dtype=bool),
                           np.zeros(0, dtype=int), np.zeros((0, m)), np.zeros((0, m)))
    idx = np.arange(k) if rows is None else np.asarray(rows)
    if problem.held is not None:  # the held columns take the problems' values and keep them
        q[problem.held_cols] = problem.held[:, idx]
        frozen = model.held if frozen is None else np.asarray(frozen, dtype=bool) | model.held
    pl = None if pull is None else np.ascontiguousarray(np.asarray(pull, dtype=float).T)
    nr = len(problem.row_w)
    roww = problem.row_w[:, None, None]
    cs = problem.col_scale[:, None]
    if frozen is None:
        keep = np.ones((model.n, 1))
    else:  # (n,) for every row or (k, n) per row -> (n, 1) or (n, k)
        fz = np.asarray(frozen, dtype=bool)
        keep = (~fz).astype(float)[:, None] if fz.ndim == 1 else (~fz).T.astype(float)
    per_row = keep.shape[1] > 1
    lo_s, hi_s = lo / problem.col_scale, hi / problem.col_scale
    tr_all, tp_all = problem.t_rot[..., idx], problem.t_pos[..., idx]  # gathered once
    rot, pos, jac = model.pose_jacobian_t(q)
    e, pe, re = problem.residual(tr_all, tp_all, rot, pos)
    weighted = jac.reshape(nr, model.n, k) * roww
    energy = 0.5 * np.einsum("rk,rk->k", e, e)
    conv = problem.converged(pe, re)
    iters = np.zeros(k, dtype=int)
    mult = np.ones(k)
    window = max(opts.stall_window if stall_window is None else stall_window, 1)
    hist = np.repeat(energy[None], window, axis=0)
    dead = np.zeros(k, dtype=bool)
    for it in range(budget):
        act = np.flatnonzero(~dead if polish else ~conv & ~dead)
        if act.size == 0:
            break
        every = act.size == k  # every row: no gathers, and no scatters when all accept
        if every:
            qa, wa, ea, ena, ma, tra, tpa = q, weighted, e, energy, mult, tr_all, tp_all
        else:
            qa, wa, ea, ena, ma = q[:, act], weighted[..., act], e[:, act], energy[act], \
                mult[act]
            tra, tpa = tr_all[..., act], tp_all[..., act]
        sel = slice(None) if every else act
        wd = ma * (opts.damping * ena + opts.damping_floor)
        # the pull shrinks as the damping grows: a rejected step must get shorter
        d = None if pl is None else (pl[:, sel] - qa) * (pull_gain / np.maximum(ma, 1.0))
        if d is not None and frozen is not None:
            d = d * (keep[:, sel] if per_row else keep)
        # in units of each column's half range: damping and pulls weigh joints alike
        cs3 = (cs * (keep[:, sel] if per_row else keep))[None]
        step = bounded_step(wa * cs3, ea, qa / cs, lo_s, hi_s, wd,
                            None if d is None else d / cs) * cs
        qt = np.clip(qa + step, lo[:, None], hi[:, None])
        rot, pos, jt = model.pose_jacobian_t(qt)
        et, pet, ret = problem.residual(tra, tpa, rot, pos)
        en = 0.5 * np.einsum("rk,rk->k", et, et)
        ct = problem.converged(pet, ret)
        ok = (en < ena) | ct
        if every and ok.all():
            q, e, energy, pe, re, conv = qt, et, en, pet, ret, ct
            weighted = jt.reshape(nr, model.n, k) * roww
            iters += 1
            mult = np.maximum(mult * 0.5, 1e-6)
            acc = act
        else:
            acc = act[ok]
            q[:, acc] = qt[:, ok]
            e[:, acc] = et[:, ok]
            energy[acc] = en[ok]
            pe[:, acc], re[:, acc] = pet[:, ok], ret[:, ok]
            weighted[..., acc] = jt.reshape(nr, model.n, jt.shape[-1])[..., ok] * roww
            conv[acc] = ct[ok]
            iters[act] += 1
            mult[act] = np.where(ok, np.maximum(ma * 0.5, 1e-6), ma * 10.0)
        slot = it % window
        if it >= window:
            dead[act] |= energy[act] > opts.stall_ratio * hist[slot, act]
        hist[slot, act] = energy[act]
        dead |= mult > 1e8
        if first_wins and conv[acc].any():
            dead |= np.isin(idx, idx[acc[conv[acc]]])
        dead &= ~conv
    return BatchResult(np.ascontiguousarray(q.T), conv, iters, np.ascontiguousarray(pe.T),
                       np.ascontiguousarray(re.T))


def random_starts(model: BatchedKinematics, count: int, rng: np.random.Generator | None,
                  scale: float = 1.0, u: Array | None = None) -> Array:  # fmt: skip
    """``count`` random configurations (count, n) within the limits: uniform in a finite
    box, else within +-pi (rad) or +-scale (m) of zero, clipped. ``u``: the uniform
    draws in [0, 1) (count, n) to use instead of ``rng``'s."""
    lo, hi = search_limits(model)
    prism = model.kinds == PRISMATIC
    half = np.where(prism, scale, math.pi)
    a = np.where(np.isfinite(lo), lo, np.where(np.isfinite(hi), np.minimum(hi, 0.0) - half, -half))
    b = np.where(np.isfinite(hi), hi, np.where(np.isfinite(lo), np.maximum(lo, 0.0) + half, half))
    span = np.minimum(b - a, 4.0 * half)  # huge boxes: a window, not the whole range
    a = np.where(b - a > span, np.clip(0.0, a, b) - span / 2, a)
    a = np.maximum(a, lo)
    b = np.minimum(a + span, hi)
    if u is None:
        assert rng is not None
        u = rng.random((count, model.n))
    return np.clip(a + u * (b - a), model.lo, model.hi)


def _mix64(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's finaliser, elementwise (uint64 arithmetic wraps)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def problem_keys(targets: Array, seed: int) -> NDArray[np.uint64]:
    """A 64-bit key per problem (B,) from its targets' bits (B, w) and ``seed``."""
    words = np.ascontiguousarray(targets, dtype=np.float64).view(np.uint64)
    key = np.full(len(words), np.uint64(seed & 0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            key = _mix64(key ^ words[:, j])
    return key


def uniform_draws(keys: NDArray[np.uint64], draw: NDArray[np.int_], n: int) -> Array:
    """Uniform numbers in [0, 1) (k, n): row ``i`` is draw number ``draw[i]`` of the
    stream ``keys[i]`` (a counter-based generator: each row depends on its key and
    counter only)."""
    with np.errstate(over="ignore"):
        base = _mix64(keys ^ _mix64(np.asarray(draw, dtype=np.uint64)))
        z = _mix64(base[:, None] + np.arange(1, n + 1, dtype=np.uint64)[None])
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def t_pose(model: BatchedKinematics) -> Array:
    """The T-pose's coordinates (n,), all zero (rad, m), clipped into the limits."""
    return np.clip(np.zeros(model.n), model.lo, model.hi)


def on_target(model: BatchedKinematics, problem: Problem, q: Array,
              rows: Index | None = None) -> BoolArray:
    """Per row of ``q`` (k, n), whether it already meets problem ``rows`` (default all)."""
    return levenberg_marquardt(model, problem, q, 0, rows=rows).converged


def cold_start(model: BatchedKinematics) -> Array:
    """Where a cold solve starts (n,): the T-pose clipped into the limits, with hinges of
    finite range moved 20 % of the way from mid-range to the upper limit (the T-pose is
    singular for many chains; sliders stay at the T-pose: a wide slider range says
    nothing about where the target is)."""
    zero = t_pose(model)
    lo, hi = search_limits(model)
    finite = np.isfinite(lo) & np.isfinite(hi) & (model.kinds == REVOLUTE)
    lo_f, hi_f = np.where(finite, lo, 0.0), np.where(finite, hi, 0.0)
    mid = 0.5 * (lo_f + hi_f)
    return np.where(finite, mid + 0.2 * (hi_f - mid), zero)


def solve_many(model: BatchedKinematics, targets: ArrayLike,
               weights: Sequence[tuple[float, float]] | None = None,
               options: BatchOptions | None = None, q0: ArrayLike | None = None,
               held: ArrayLike | None = None) -> BatchResult:  # fmt: skip
    """Solve B independent problems: ``targets`` (B, m, 4, 4) world transforms (metres),
    one per effector and problem; from ``q0`` (B, n), or from the T-pose where it is
    already on target and :func:`cold_start` elsewhere; ``held`` (B, n): the values of
    the model's held columns per problem (rad, m; see :class:`Problem`).

    Problems that do not converge restart from random configurations within the limits
    (``options.restart_rows`` per problem and round, ``options.restarts`` rounds), as
    extra rows of one batch; each keeps its best answer (converged first, then the
    smallest weighted error). Deterministic for a given ``options.seed``.
    """
    opts = options or BatchOptions()
    problem = Problem(model, targets, weights, opts, held)
    b = problem.count
    if q0 is None:  # a T-pose already on target stays; the others start cold
        start = np.broadcast_to(cold_start(model), (b, model.n)).copy()
        if b:
            tpose = t_pose(model)
            start[on_target(model, problem, np.broadcast_to(tpose, (b, model.n)))] = tpose
    else:
        start = np.asarray(q0, dtype=float).reshape(b, model.n)
    res = levenberg_marquardt(model, problem, start, opts.max_iterations)
    # each problem draws its restarts from its own stream, keyed by its targets: its
    # answer does not depend on the other problems of the batch
    keys = problem_keys(np.asarray(targets, dtype=float).reshape(b, -1) if b else
                        np.zeros((0, 1)), opts.seed)
    best_err = problem.badness(res.position_error, res.orientation_error)
    reps = opts.restart_rows
    for round_ in range(opts.restarts):
        todo = np.flatnonzero(~res.converged)
        if todo.size == 0:
            break
        rows = np.repeat(todo, reps)
        draw = round_ * reps + np.tile(np.arange(reps), todo.size)
        u = uniform_draws(keys[rows], draw, model.n)
        starts = random_starts(model, rows.size, None, problem.scale, u)
        sub = levenberg_marquardt(model, problem, starts,
                                  min(opts.restart_iterations, opts.max_iterations), rows=rows,
                                  first_wins=True)
        bad = problem.badness(sub.position_error, sub.orientation_error)
        bad = np.where(sub.converged, -1.0, bad)
        for j in np.argsort(bad, kind="stable")[::-1]:  # best last: it wins the write
            p = rows[j]
            if bad[j] < best_err[p]:
                best_err[p] = bad[j]
                res.q[p] = sub.q[j]
                res.converged[p] = sub.converged[j]
                res.position_error[p] = sub.position_error[j]
                res.orientation_error[p] = sub.orientation_error[j]
            res.iterations[p] += sub.iterations[j]
    return res
