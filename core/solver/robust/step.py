"""One damped, bounded least-squares step on plain floats (world; m, rad).

Columns are 6-tuples ``[linear; angular]``; a hand-written 6x6 Cholesky keeps numpy's
per-call overhead out of the loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import mul

from ...floatmath import dls6, solve_spd
from .angles import Coords


def damped_step(cols: list[Sequence[float]], r: list[float], w: float,
            d: list[float]) -> list[float] | None:  # fmt: skip
    """``argmin |J s - r|^2 + w |s - d|^2`` for ``J`` given by its columns (floats).

    ``s = d + J^T (J J^T + w I)^-1 (r - J d)``, or the normal equations when ``J`` has
    fewer columns than rows; None when the system is not numerically solvable.
    """
    m, k = len(r), len(cols)
    if m == 6 and k >= 6:
        r0, r1, r2, r3, r4, r5 = r
        for (c0, c1, c2, c3, c4, c5), dj in zip(cols, d, strict=True):
            if dj:
                r0 -= c0 * dj
                r1 -= c1 * dj
                r2 -= c2 * dj
                r3 -= c3 * dj
                r4 -= c4 * dj
                r5 -= c5 * dj
        s = dls6(cols, w, (r0, r1, r2, r3, r4, r5))
        return None if s is None else [sj + dj for sj, dj in zip(s, d, strict=True)]
    if any(d):
        r = r[:]
        for col, dj in zip(cols, d, strict=True):
            if dj:
                for i in range(m):
                    r[i] -= col[i] * dj
    if m <= k:
        rows = list(zip(*cols, strict=True))
        a = [[sum(map(mul, ri, rj)) for rj in rows] for ri in rows]
        for i in range(m):
            a[i][i] += w
        beta = solve_spd(a, r)
        s = None if beta is None else [sum(map(mul, col, beta)) for col in cols]
    else:
        a = [[sum(map(mul, ci, cj)) for cj in cols] for ci in cols]
        for i in range(k):
            a[i][i] += w
        s = solve_spd(a, [sum(map(mul, col, r)) for col in cols])
    if s is None:
        return None
    return [sj + dj for sj, dj in zip(s, d, strict=True)]


def factor6(cols: Sequence[Sequence[float]], w: float) -> tuple[float, ...] | None:
    """Cholesky factor (21 floats, row-major lower triangle) of ``J J^T + w I`` for a
    6-row ``J`` given by its columns; None when not numerically positive definite."""
    a = [0.0] * 21  # lower triangle of J J^T, row-major: (0,0), (1,0), (1,1), (2,0), ...
    for col in cols:
        k = 0
        for i in range(6):
            ci = col[i]
            for j in range(i + 1):
                a[k] += ci * col[j]
                k += 1
    low = [0.0] * 21
    for i in range(6):
        ri = i * (i + 1) // 2
        for j in range(i + 1):
            rj = j * (j + 1) // 2
            acc = a[ri + j] - sum(low[ri + t] * low[rj + t] for t in range(j))
            if i == j:
                acc += w
                if not acc > 0.0:
                    return None
                low[ri + i] = math.sqrt(acc)
            else:
                low[ri + j] = acc / low[rj + j]
    return tuple(low)


def solve6(low: tuple[float, ...], cols: Sequence[Sequence[float]],
            r: Sequence[float]) -> list[float]:  # fmt: skip
    """``J^T (J J^T + w I)^-1 r`` from :func:`factor6`'s factor of the same ``J``."""
    y = [0.0] * 6
    for i in range(6):
        ri = i * (i + 1) // 2
        acc = r[i]
        for t in range(i):
            acc -= low[ri + t] * y[t]
        y[i] = acc / low[ri + i]
    beta = [0.0] * 6
    for i in range(5, -1, -1):
        acc = y[i]
        for t in range(i + 1, 6):
            acc -= low[t * (t + 1) // 2 + i] * beta[t]
        beta[i] = acc / low[i * (i + 1) // 2 + i]
    b0, b1, b2, b3, b4, b5 = beta
    return [b0 * c0 + b1 * c1 + b2 * c2 + b3 * c3 + b4 * c4 + b5 * c5
            for c0, c1, c2, c3, c4, c5 in cols]


def bounded_step(cols: list[Sequence[float]], e: list[float], x: Coords, lo: Coords,
                  hi: Coords, w: float, d: list[float]) -> list[float] | None:  # fmt: skip
    """Damped step that keeps ``lo <= x + dx <= hi`` by clamping and removing columns.

    A column whose step would cross its limit moves to the limit and leaves the problem;
    the others are solved again for the residual left (Blender's Standard solver).
    """
    n = len(cols)
    step = damped_step(cols, e, w, d)  # first with every column: most steps stop here
    if step is None:
        return None
    if all(a <= v + s <= b for v, s, a, b in zip(x, step, lo, hi, strict=True)):
        return step
    dx = [0.0] * n
    free = list(range(n))
    rest = e
    while free:
        step = damped_step([cols[c] for c in free], rest, w, [d[c] for c in free])
        if step is None:
            return None
        keep = []
        for c, s in zip(free, step, strict=True):
            v = x[c] + s
            if lo[c] <= v <= hi[c]:
                keep.append((c, s))
                continue
            if not math.isfinite(v):
                return None
            dx[c] = t = (hi[c] if v > hi[c] else lo[c]) - x[c]
            rest = [ri - t * ci for ri, ci in zip(rest, cols[c], strict=True)]
        if len(keep) == len(free):
            for c, s in keep:
                dx[c] = s
            return dx
        free = [c for c, _ in keep]
    return dx


