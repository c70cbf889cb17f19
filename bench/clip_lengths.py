"""Clip length and the robust engine's cost: short clips and very long ones (arm7).

``.venv/bin/python bench/clip_lengths.py`` (about a minute on the 2-core VM; writes
bench/results/clip_lengths.md). Issue 17 point 5 asks for a 60-frame clip in at most
0.1 s of solving and a per-frame cost at 20,000 frames at most 1.2x that at 1,000.

1. 60-frame clips: windows of the ten random arm7 paths of bench/run.py (2,000 frames
   each, ``FLIP_SEEDS``: the speed of the flip bench), four per path, each solved alone
   by ``solver.path.solve_path`` (the bake's engine); and, beside them, five whole random
   paths squeezed into 60 frames (every joint sweeping 60 % of its range one to three
   times: far faster than an animation). Seconds per clip (mean, median, p99), frames
   converged, flip frames (a joint moving more than twice the clip's own largest true
   step, as in bench/batched.py).
2. Length: a 1,000-frame loop of workload B's kind (``trajectory_channels(..., block=
   1000)``: every joint a whole number of periods per 1,000 frames, so the loop joins
   itself) solved once, 5 and 20 times over, and a drifting clip of the same motion a
   frame that never repeats (a period of 1000 + 1/pi frames, searched whole where the
   loop is planned over two cycles and repeated): µs per frame and the ratio to 1,000 frames,
   and the solve's peak memory (numpy's arrays and Python's objects, by ``tracemalloc``,
   in a second, untimed solve: the bookkeeping is to stay bounded); and the loop with a
   fixed pole at (0.6, 0, 1.2) m (planned over two cycles, swung toward the pole over
   two cycles and repeated). Its flip frames count steps over twice the pole-free
   truth's largest: the poses on the pole themselves step up to 3.2 times that at
   phases 798-818 of each cycle (the swivel the pole asks for turns fast there), and
   the swing follows them (2.39x at most: 7 frames a cycle); a single cycle, planned
   whole, holds the swing back there (1.30x).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from batched import Engine  # noqa: E402
from report import write_report  # noqa: E402
from run import FLIP_SEEDS, SEED_B  # noqa: E402
from scenes import load_scenes  # noqa: E402

WINDOWS = (0, 500, 1000, 1500)  # first frames of the 60-frame windows of each path
POLE = np.array([0.6, 0.0, 1.2])  # the loop's fixed pole (m, world)


def fk_targets(scene, truth: np.ndarray) -> np.ndarray:
    """The effector's world transforms (F, 1, 4, 4) (m) of ``truth``'s joint values
    (F, channels) (rad, m)."""
    return np.array([scene.chain.fk(scene.values(x), scene.effector) for x in truth])[:, None]


def solve(eng: Engine, scene, truth: np.ndarray, targets: np.ndarray | None = None,
          pole: tuple[Any, Any] | None = None) -> tuple[float, int, int]:  # fmt: skip
    """Seconds, frames converged and flip frames of ``solve_path`` on ``truth``'s FK
    (``targets``, :func:`fk_targets`, when already worked out); ``pole``: the model with
    a pole and its ``PoleSet`` (:func:`fixed_pole`)."""
    from dhik.solver.path import solve_path

    if targets is None:
        targets = fk_targets(scene, truth)
    model, poles = pole if pole is not None else (eng.model, None)
    t0 = time.perf_counter()
    res = solve_path(model, targets, settings=eng.s, poles=poles)
    seconds = time.perf_counter() - t0
    true_step = np.abs(np.diff(truth, axis=0)).max()
    steps = np.abs(np.diff(res.q, axis=0)).max(axis=1)
    return seconds, int(res.converged.sum()), int((steps > 2.0 * true_step).sum())


def fixed_pole(scene, frames: int) -> tuple[Any, Any]:
    """arm7 with a pole on its chain (``pole_points``) and a pole fixed at POLE (m,
    world) on each of ``frames`` frames (a ``PoleSet``)."""
    from dhik.app.formats import parse_skeleton
    from dhik.model.joint_space import BatchedModel
    from dhik.solver.lm import PoleSet, pole_points

    defn = parse_skeleton(scene.skeleton)
    plain = BatchedModel(defn, [scene.effector])
    model = BatchedModel(defn, [scene.effector], points=pole_points(plain.chains, [0]))
    return model, PoleSet.build(model, [0], np.broadcast_to(POLE, (frames, 1, 3)), [0.0])


def peak_mb(eng: Engine, targets: np.ndarray, pole: tuple[Any, Any] | None = None) -> float:
    """The peak memory (MB) ``solve_path`` allocates on ``targets`` (:func:`fk_targets`)
    beyond them, traced (numpy's arrays count: they report to ``tracemalloc``)."""
    from dhik.solver.path import solve_path

    model, poles = pole if pole is not None else (eng.model, None)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        solve_path(model, targets, settings=eng.s, poles=poles)
        return (tracemalloc.get_traced_memory()[1] - base) / 1e6
    finally:
        tracemalloc.stop()


def row(name: str, runs: list[tuple[float, int, int]], frames: int) -> str:
    t = [r[0] for r in runs]
    return (f"| {name} | {len(runs)} | {sum(r[1] for r in runs)}/{frames * len(runs)} | "
            f"{sum(r[2] for r in runs)} | {statistics.fmean(t):.3f} | {statistics.median(t):.3f} "
            f"| {np.percentile(t, 99):.3f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "results" / "clip_lengths.md"),
                        help="where the tables are written as markdown ('' for nowhere)")
    args = parser.parse_args(argv)
    scene = next(s for s in load_scenes() if s.name == "arm7")
    eng = Engine(scene)
    started = time.perf_counter()
    warm = scene.trajectory_channels(60, SEED_B)
    solve(eng, scene, warm)  # imports and first calls outside the timings
    lines = ["## 1. 60-frame clips (arm7, `solve_path`, each clip alone)", "",
             "| clips | count | converged | flip frames | s per clip: mean | median | p99 |",
             "|---|---|---|---|---|---|---|"]
    windows = []
    for seed in FLIP_SEEDS:
        path = scene.trajectory_channels(2000, seed)
        windows += [solve(eng, scene, path[k:k + 60]) for k in WINDOWS]
    lines.append(row("windows of the ten random paths (bench speed)", windows, 60))
    squeezed = [solve(eng, scene, scene.trajectory_channels(60, seed))
                for seed in FLIP_SEEDS[:5]]
    lines.append(row("whole random paths squeezed into 60 frames", squeezed, 60))
    lines += ["", "## 2. Per-frame cost by length (arm7, B's kind of motion)", "",
              "The loop repeats every 1,000 frames (planned over two cycles and repeated: "
              "`solver/path/cycles.py`); the drifting clip has the same motion a frame but "
              "a period of 1000 + 1/pi frames, so it never repeats and is searched whole. "
              "With a fixed pole the loop's plan is swung toward it over two cycles and "
              "one repeated (`solver/path/solve.py`).",
              "",
              "| clip | frames | s | µs per frame | converged | flip frames "
              "| per frame / at 1,000 | peak MB |",
              "|---|---|---|---|---|---|---|---|"]
    for name, block, poled in (("loop", 1000.0, False),
                               ("drifting", 1000.0 + 1.0 / math.pi, False),
                               ("loop, fixed pole", 1000.0, True)):
        base = None
        for frames in (1000, 5000, 20000):
            truth = scene.trajectory_channels(frames, SEED_B, block=block)
            targets = fk_targets(scene, truth)
            pole = fixed_pole(scene, frames) if poled else None
            seconds, conv, flips = solve(eng, scene, truth, targets, pole)
            per = seconds / frames * 1e6
            base = base or per
            lines.append(f"| {name} | {frames} | {seconds:.2f} | {per:.0f} | {conv}/{frames} "
                         f"| {flips} | {per / base:.2f} | {peak_mb(eng, targets, pole):.0f} |")
            print(lines[-1], flush=True)
    write_report("clip_lengths.py", started, lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
