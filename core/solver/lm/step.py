"""The damped step of the robust LM, bounded by the limits, for many rows at once.

Per row ``argmin |J s - e|^2 + w |s - d|^2`` (``d``: a pull toward a reference; as
``w -> 0`` its null-space part is what remains), with the limits kept as Blender's
Standard solver keeps them: a column whose step would leave its box goes to the limit and
leaves the problem, and the rest is solved again for the error left (clamp and remove),
so every iterate lies within the limits. Arrays are batch last; units are the columns'
(rad, m), scaled by the caller.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


def bounded_step(jac: Array, e: Array, x: Array, lo: Array, hi: Array, w: Array,
                 d: Array | None = None, exact: bool = False) -> Array:  # fmt: skip
    """Per row ``argmin |J s - e|^2 + w |s - d|^2`` with ``lo <= x + s <= hi`` kept by
    clamping and removing columns; batch last: ``jac`` (r, n, k), ``e`` (r, k), ``x``
    (n, k), ``lo``/``hi`` (n,) or per row (n, k), ``w`` (k,), ``d`` (n, k) or None (no
    pull) -> (n, k); ``exact``: the pull in the rows' null space (:func:`damped`)."""
    r, n, k = jac.shape
    per_row = lo.ndim == 2
    lo_, hi_ = (lo, hi) if per_row else (lo[:, None], hi[:, None])
    step = damped(jac, e, w, d, exact)
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
    los, his = (lo_[:, rows], hi_[:, rows]) if per_row else (lo_, hi_)
    sub_v, sub_viol = v[:, rows], viol[:, rows]
    for _ in range(n):
        fixed = np.where(sub_viol, np.clip(sub_v, los, his) - xs, fixed)
        free &= ~sub_viol
        rest = es - np.einsum("rnk,nk->rk", js, fixed)
        s = damped(js * free, rest, ws, None if ds is None else ds * free, exact)
        s = np.where(free, s, fixed)
        sub_v = xs + s
        sub_viol = free & ((sub_v < los) | (sub_v > his))
        again = sub_viol.any(axis=0)
        done = ~again
        step[:, rows[done]] = np.clip(sub_v[:, done], *_cut(los, his, done)) - xs[:, done]
        if not again.any():
            break
        rows, free, fixed, xs, js, es, ws = rows[again], free[:, again], fixed[:, again], \
            xs[:, again], js[..., again], es[:, again], ws[again]
        ds = None if ds is None else ds[:, again]
        los, his = _cut(los, his, again)
        sub_v, sub_viol = sub_v[:, again], sub_viol[:, again]
    else:
        step[:, rows] = np.clip(sub_v, los, his) - xs
    return step


def _cut(lo: Array, hi: Array, keep: NDArray[np.bool_] | np.bool_) -> tuple[Array, Array]:
    """The bounds of the rows ``keep`` (per-row bounds (n, k)), or the shared (n, 1)."""
    return (lo[:, keep], hi[:, keep]) if lo.shape[1] > 1 else (lo, hi)


def damped(jac: Array, e: Array, w: Array, d: Array | None, exact: bool = False) -> Array:
    """``argmin |J s - e|^2 + w |s - d|^2`` per row, batch last (``jac`` (r, n, k));
    where a column of ``J`` is zero, ``s = d`` there (callers zero ``d`` there).

    ``exact``: the pull instead taken exactly in the null space of ``J`` (the damped
    step toward ``e`` plus the part of ``d`` that no row sees), so that it moves no row
    at any damping: the damping ``w`` weighs against light rows (a pole's, a thousandth
    of the targets'), and a pull damped alike leaks into them, a bias on the pole that
    shrinks only as the damping does."""
    r, n, k = jac.shape
    exact = exact and d is not None
    if d is not None and not exact:
        e = e - np.einsum("rnk,nk->rk", jac, d)
    rows = n >= r  # (J J^T + w) y = e, s = J^T y; else (J^T J + w) s = J^T e
    g = np.einsum("rnk,snk->rsk", jac, jac) if rows else np.einsum("rnk,rpk->npk", jac, jac)
    rhs, diag = (e if rows else np.einsum("rnk,rk->nk", jac, e)), w
    if exact:  # beside it, the part of d any row sees: (.. + eps) y' = J d, in one solve
        assert d is not None
        jd = np.einsum("rnk,nk->rk", jac, d)
        g = np.concatenate((g, g), axis=2)
        rhs = np.concatenate((rhs, jd if rows else np.einsum("rnk,rk->nk", jac, jd)), axis=1)
        diag = np.concatenate((w, _eps(g[..., :k])))
    a = np.ascontiguousarray(g)
    size = len(a)
    a.reshape(size * size, a.shape[2])[:: size + 1] += diag  # the diagonal
    y = spd_solve(a, rhs)
    if exact:
        y = y[:, :k] - y[:, k:]
    s = np.einsum("rnk,rk->nk", jac, y) if rows else y
    return s if d is None else s + d


def _eps(g: Array) -> Array:
    """A regularisation per row (k,) at the rounding of ``g``'s (r, r, k) largest
    diagonal entry: the null space's projector stays bounded where ``J`` loses rank,
    and leaks next to nothing into a light row (a pole's, a millionth of the targets'
    on that diagonal)."""
    return 1e-15 * np.einsum("iik->ik", g).max(axis=0) + 1e-300


# Below this many rows (batch size k) of r x r systems, LAPACK's batched solve (k r^3
# flops in C, a per-matrix cost) beats the Cholesky factorisation vectorised over the
# batch (about r^3/6 numpy calls, a per-call cost). Measured by bench/spd_solve.py: numpy
# 2's solve costs about 0.35 us a 6x6 matrix (crossover about 200 + r^2 rows: r = 6,
# ~250; r = 24, four effectors, ~800); numpy 1.26's (Blender's) about 1.8 us, five times
# as much (crossover about 30 + r^2 / 2 rows: r = 6, ~50; r = 12, ~100; r = 24, ~350)
SLOW_BATCHED_SOLVE = np.lib.NumpyVersion(np.__version__) < "2.0.0"


def solve_rows(r: int) -> int:
    """Batches of ``r`` x ``r`` systems smaller than this go to LAPACK's solve."""
    return 30 + r * r // 2 if SLOW_BATCHED_SOLVE else 200 + r * r


def spd_solve(a: Array, b: Array) -> Array:
    """``x`` with ``a x = b`` for symmetric positive definite ``a`` (r, r, k), ``b``
    (r, k), batch last: LAPACK's solve on small batches (:func:`solve_rows`), else (or
    on a singular matrix) :func:`cholesky_solve`."""
    r, k = a.shape[0], a.shape[-1]
    if k < solve_rows(r):
        try:
            return lapack_solve(a, b)
        except np.linalg.LinAlgError:
            pass  # a singular matrix: the factorisation replaces its pivot
    return cholesky_solve(a, b)


def lapack_solve(a: Array, b: Array) -> Array:
    """:func:`spd_solve` by numpy's batched ``linalg.solve`` (LinAlgError on a singular
    matrix)."""
    return cast(Array, np.linalg.solve(a.transpose(2, 0, 1), b.T[..., None])[..., 0].T)


def cholesky_solve(a: Array, b: Array) -> Array:
    """:func:`spd_solve` by a Cholesky factorisation vectorised over the batch (a pivot
    that is not positive is replaced by a tiny one: the damping keeps it rare)."""
    r = a.shape[0]
    if r == 0:  # no rows left (every column held or removed): nothing to solve
        return np.zeros_like(b)
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
