"""The LM step split into independent blocks: the rows and free columns that touch.

Four legs under a held body are four problems of 6 rows by 9 columns, not one of 24 by
66: their Jacobian is block diagonal once the held columns (the body's, which no step
moves) are left out, so ``J J^T + w I`` is block diagonal and the damped step, its
clamping at the limits included, is the same block by block. Each block becomes rows of
one batch (blocks padded to the largest with zero rows and columns, which change
nothing): about ``(24 * 66) / (6 * 9)`` times fewer products per row. Batch last, as in
``step``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
Step = Callable[..., Array]


class StepBlocks:
    """Blocks of residual rows and columns (indices, padded): ``rix`` (B, R) and ``cix``
    (B, N), with masks of the real entries."""

    def __init__(self, rows: Sequence[Sequence[int]], cols: Sequence[Sequence[int]]) -> None:
        b = len(rows)
        r_max = max(1, max(len(r) for r in rows))
        n_max = max(len(c) for c in cols)
        self.rix = np.zeros((b, r_max), dtype=np.intp)
        self.cix = np.zeros((b, n_max), dtype=np.intp)
        self.rmask = np.zeros((b, r_max), dtype=bool)
        self.cmask = np.zeros((b, n_max), dtype=bool)
        for i, (r, c) in enumerate(zip(rows, cols, strict=True)):
            self.rix[i, :len(r)], self.rmask[i, :len(r)] = r, True
            self.cix[i, :len(c)], self.cmask[i, :len(c)] = c, True
        self.columns = self.cix[self.cmask]  # every block's columns, block by block
        self.mask = (self.rmask[:, :, None] & self.cmask[:, None, :])[..., None]  # (B, R, N, 1)

    @classmethod
    def of(cls, supports: Sequence[NDArray[np.bool_]], free: NDArray[np.bool_]
           ) -> StepBlocks | None:  # fmt: skip
        """The blocks of rows whose column ``supports`` (each (n,)) share ``free``
        columns, directly or through other rows; rows touching no free column are left
        out (their step is zero). None when it would be the whole problem in one block
        (nothing to gain), no column is free, or a free column is touched by no row."""
        n = len(free)
        if not free.any():
            return None
        parent = list(range(n))

        def find(c: int) -> int:
            while parent[c] != c:
                parent[c] = parent[parent[c]]
                c = parent[c]
            return c

        touched = np.zeros(n, dtype=bool)
        row_cols = []
        for s in supports:
            hit = np.flatnonzero(s & free)
            row_cols.append(hit)
            touched[hit] = True
            for c in hit[1:]:
                parent[find(int(c))] = find(int(hit[0]))
        if not np.array_equal(touched, free):
            return None
        roots = sorted({find(int(c)) for c in np.flatnonzero(free)})
        if len(roots) == 1 and free.all():
            return None
        which = {r: i for i, r in enumerate(roots)}
        rows: list[list[int]] = [[] for _ in roots]
        cols: list[list[int]] = [[] for _ in roots]
        for c in np.flatnonzero(free):
            cols[which[find(int(c))]].append(int(c))
        for i, rc in enumerate(row_cols):
            if rc.size:
                rows[which[find(int(rc[0]))]].append(i)
        return cls(rows, cols)

    # -- gathers and the step ---------------------------------------------------------
    def _cols(self, a: Array) -> Array:
        """(n, k) -> (N, B k): each block's columns, zero where padded."""
        g = a[self.cix] * self.cmask[..., None]  # (B, N, k)
        return np.ascontiguousarray(g.transpose(1, 0, 2)).reshape(g.shape[1], -1)

    def step(self, step: Step, jac: Array, e: Array, x: Array, lo: Array, hi: Array,
             w: Array, d: Array | None) -> Array:
        """``step(jac, e, x, lo, hi, w, d)`` (``step.bounded_step``'s arguments, batch
        last: ``jac`` (r, n, k), ``lo``/``hi`` (n,)) solved block by block -> (n, k); the
        columns in no block (held) do not move."""
        j = jac[self.rix[:, :, None], self.cix[:, None, :]] * self.mask  # (B, R, N, k)
        return self.step_blocked(step, j, e, x, lo, hi, w, d)

    def step_blocked(self, step: Step, j: Array, e: Array, x: Array, lo: Array, hi: Array,
                     w: Array, d: Array | None) -> Array:
        """:meth:`step` from the Jacobian already in blocks ``j`` (B, R, N, k), zero where
        padded (``Problem.linearise(..., blocked=True)``)."""
        b, k = len(self.rix), j.shape[-1]
        nb = self.cix.shape[1]
        jb = np.ascontiguousarray(j.transpose(1, 2, 0, 3)).reshape(j.shape[1], nb, b * k)
        eb = e[self.rix] * self.rmask[..., None]  # (B, R, k)
        eb = np.ascontiguousarray(eb.transpose(1, 0, 2)).reshape(eb.shape[1], b * k)
        bounds = (np.where(self.cmask, lo[self.cix], 0.0), np.where(self.cmask, hi[self.cix], 0.0))
        lob, hib = (np.repeat(v.T, k, axis=1) for v in bounds)  # (N, B k)
        s = step(jb, eb, self._cols(x), lob, hib, np.tile(w, b),
                 None if d is None else self._cols(d))
        out = np.zeros_like(x)
        out[self.columns] = s.reshape(nb, b, k).transpose(1, 0, 2)[self.cmask]
        return out
