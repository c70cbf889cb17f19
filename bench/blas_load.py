"""numpy's OpenBLAS threads on a busy machine, with and without ``one_blas_thread``.

Run it in each venv (``.venv/bin/python`` has numpy 2, ``.venv-bpy/bin/python``
Blender's numpy 1.26): with 0 and with as many busy processes as the machine has cores
(``while True: pass``), it times a 9x9 ``numpy.linalg.solve`` (the LM's system size on
a three-bone limb) with numpy's own thread count and inside
``dhik.app.blas_threads.one_blas_thread``, and the robust bake of the arm7 sample's
first 120 frames with the limit off (``openblas_threads`` patched to None) and on.
Prints a markdown table; ``--out FILE`` also writes it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _core():  # noqa: ANN202 - the package, whichever way this venv has it
    try:
        import dhik
    except ImportError:
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "dhik", ROOT / "core" / "__init__.py", submodule_search_locations=[str(ROOT / "core")])
        assert spec is not None and spec.loader is not None
        dhik = importlib.util.module_from_spec(spec)
        sys.modules["dhik"] = dhik
        spec.loader.exec_module(dhik)
    return dhik


def _times(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 2,
                        help="busy processes in the loaded runs")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    _core()
    from dhik.app import blas_threads
    from dhik.app.bake import simulate
    from dhik.app.formats import load_skeleton, load_targets
    from dhik.app.trajectory import interpolate_keyframes
    from dhik.model.skeleton import Skeleton

    found = blas_threads.openblas_threads()
    rng = np.random.default_rng(0)
    a = rng.random((1, 9, 9))
    a = a @ a.transpose(0, 2, 1) + np.eye(9)
    b = rng.random((1, 9, 1))
    skeleton = Skeleton(load_skeleton(ROOT / "sample_scenes/arm7/skeleton.json"))
    targets = interpolate_keyframes(load_targets(ROOT / "sample_scenes/arm7/targets.json"))[:120]

    def solve_default() -> None:
        np.linalg.solve(a, b)

    def solve_one() -> None:
        with blas_threads.one_blas_thread():
            np.linalg.solve(a, b)

    def bake() -> None:
        simulate(skeleton, targets, "Tool", method="robust")

    def bake_unlimited() -> None:
        real = blas_threads.openblas_threads
        blas_threads.openblas_threads = lambda: None  # type: ignore[assignment]
        try:
            bake()
        finally:
            blas_threads.openblas_threads = real

    rows = []
    for busy in (0, args.busy):
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                   for _ in range(busy)]
        try:
            time.sleep(0.5)
            for what, fn, reps, unit in (
                    ("9x9 solve, numpy's threads", solve_default, 200, 1e6),
                    ("9x9 solve, one_blas_thread", solve_one, 200, 1e6),
                    ("robust bake, 120 arm7 frames, numpy's threads", bake_unlimited, 5, 1e3),
                    ("robust bake, 120 arm7 frames, one_blas_thread", bake, 5, 1e3)):
                ts = [t * unit for t in _times(fn, reps)]
                rows.append((busy, what, "µs" if unit == 1e6 else "ms", statistics.fmean(ts),
                             statistics.median(ts), float(np.percentile(ts, 99))))
        finally:
            for p in burners:
                p.kill()
                p.wait()
    head = (f"numpy {np.__version__}, {os.cpu_count()} cpus, OpenBLAS "
            f"{'found' if found else 'not found'}"
            + (f" ({found[0]()} threads outside)" if found else ""))
    lines = [head, "", "| busy processes | what | unit | mean | median | p99 |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {busy} | {what} | {unit} | {mean:.1f} | {median:.1f} | {p99:.1f} |"
              for busy, what, unit, mean, median, p99 in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
