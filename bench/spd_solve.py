"""The LM's batched SPD solve: LAPACK's against the vectorised Cholesky, per batch size.

``.venv/bin/python bench/spd_solve.py`` (numpy 2) and ``.venv-bpy/bin/python
bench/spd_solve.py`` (Blender's numpy 1.26; a few seconds each). For ``r`` x ``r``
systems (6: one full-pose effector; 12 and 24: two and four) in batches of ``k``, the
microseconds of ``solver.lm.step.lapack_solve`` and ``cholesky_solve`` (best of three,
batch-last arrays as the LM passes them) and which one ``spd_solve`` takes there
(``solve_rows``): the numbers behind that crossover. Prints a markdown table.
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from core.solver.lm.step import cholesky_solve, lapack_solve, solve_rows  # noqa: E402


def main() -> int:
    rng = np.random.default_rng(0)
    print(f"numpy {np.__version__}: microseconds per call (best of 3)\n")
    print("| r | k | LAPACK solve | vectorised Cholesky | spd_solve takes |")
    print("|---|---|---|---|---|")
    for r in (6, 12, 24):
        for k in (8, 16, 32, 64, 128, 256, 512, 1024, 4096):
            m = rng.normal(size=(k, r, r))
            a = np.ascontiguousarray((m @ m.transpose(0, 2, 1) + np.eye(r)).transpose(1, 2, 0))
            b = rng.normal(size=(r, k))
            np.testing.assert_allclose(cholesky_solve(a, b), lapack_solve(a, b), rtol=1e-6,
                                       atol=1e-9)
            n = max(3, 20_000 // k)
            times = [min(timeit.repeat(lambda f=f, a=a, b=b: f(a, b), number=n, repeat=3)) / n * 1e6
                     for f in (lapack_solve, cholesky_solve)]
            taken = "LAPACK" if k < solve_rows(r) else "Cholesky"
            print(f"| {r} | {k} | {times[0]:.0f} | {times[1]:.0f} | {taken} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
