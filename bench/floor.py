"""Where the floor of the robust engine is: the cost of one LM iteration per row, the
iterations each frame takes, and what cutting the flip-free search costs in flips.

``.venv/bin/python bench/floor.py`` (about two minutes on the 2-core VM). Issue 9 asks for
a flip-free bake at 20 µs a frame (B) and 30 µs (the ten random paths), and cold solves
at 50 µs a pose (A). This script measures, in one run, the three numbers those goals
rest on:

1. µs per row-iteration of ``solver.lm.levenberg_marquardt`` by batch size (arm7,
   random starts toward the A poses, five iterations: FK, Jacobian, residual and the
   bounded damped step of every row), beside the smallest batched numpy LM doing that
   work (bench/minimal_lm.py, issue 17 point 5: the engine at most 1.5x it), and the C++
   reference: roboticstoolbox's ``ik_LM`` on B, µs per iteration (its call time over its
   iterations);
2. per frame (B, the ten paths) and per pose (A): the wall time and the rows the
   engine evaluates (FK and Jacobian rows, counted on the model), and the floor they
   imply at the cheapest row-iteration measured in 1;
3. the flip-free search cut (fewer grid values, fewer locked columns): flip frames
   (bench/run.py ``jumps``, any joint) and µs per frame.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from dhik.app.formats import parse_skeleton
from dhik.model.joint_space import BatchedModel
from dhik.solver.lm import Problem, levenberg_marquardt, solve_many
from dhik.solver.lm.starts import random_starts
from dhik.solver.path import solve_path
from dhik.solver.settings import RobustOptions

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from batched import refk_values  # noqa: E402
from minimal_lm import MinimalLM  # noqa: E402
from run import FLIP_SEEDS, SEED_A, SEED_B, jumps  # noqa: E402
from scenes import Scene, load_scenes  # noqa: E402

# solver.path's functions that run LMs: where a row is counted (the innermost on the stack)
PHASES = {"grid_pass": "grid tracks", "_reseed": "grid tracks", "seeds": "grid tracks",
          "advance": "path fills"}


class Counted(BatchedModel):
    """The model, counting the rows it evaluates (FK and Jacobian, one per row-iteration
    or start), in all and by the phase of ``solve_path`` that asked for them."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.rows = 0
        self.by_phase: dict[str, int] = {}

    def pose_jacobian_t(self, q: np.ndarray, base: Any = None, cols: Any = None) -> Any:
        self.rows += q.shape[1]
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name not in PHASES:
            frame = frame.f_back
        phase = PHASES[frame.f_code.co_name] if frame is not None else "other"
        self.by_phase[phase] = self.by_phase.get(phase, 0) + q.shape[1]
        return super().pose_jacobian_t(q, base, cols)


def row_cost(model: BatchedModel, scene: Scene, sizes: list[int]) -> list[dict[str, Any]]:
    """µs per row-iteration of the batched LM and of FK + Jacobian alone, by batch size."""
    out = []
    for k in sizes:
        problem = Problem(model, np.array(scene.poses(k, SEED_A))[:, None], None, None,
                          RobustOptions())
        q0 = random_starts(model, k, np.random.default_rng(0))
        reps = max(1, 40000 // k)
        best_lm, best_fk = np.inf, np.inf
        for _ in range(3):
            t0 = time.perf_counter()
            its = 0
            for _ in range(reps):  # the stall window beyond the budget: every row runs
                its += int(levenberg_marquardt(model, problem, q0, 5,
                                               stall_window=99).iterations.sum())
            best_lm = min(best_lm, (time.perf_counter() - t0) * 1e6 / its)
            qt = np.ascontiguousarray(q0.T)
            t0 = time.perf_counter()
            for _ in range(reps):
                model.pose_jacobian_t(qt)
            best_fk = min(best_fk, (time.perf_counter() - t0) * 1e6 / (reps * k))
        # the smallest LM that does the same work per row-iteration (bench/minimal_lm.py),
        # on the same targets and starts, five iterations of every row
        lean = MinimalLM(scene.skeleton, scene.effector)
        t_rot, t_pos = problem.targets[:, 0, :3, :3], problem.targets[:, 0, :3, 3]
        best_min = np.inf
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(reps):
                lean.solve(q0, t_rot, t_pos, 5, problem.scale)
            best_min = min(best_min, (time.perf_counter() - t0) * 1e6 / (reps * k * 5))
        out.append({"k": k, "lm": best_lm, "fk": best_fk, "minimal": best_min})
    return out


def rtb_cost(scene: Scene, targets: list[np.ndarray]) -> dict[str, float] | None:
    """roboticstoolbox ``ik_LM`` warm along ``targets``: µs per call and per iteration."""
    from methods import Rtb

    rtb = Rtb("rtb", ilimit=100, slimit=1)
    if rtb.available() is not None:
        return None
    rtb.setup(scene)
    rtb.start()
    t0 = time.perf_counter()
    its = sum(rtb.solve(t, warm=True) or 0 for t in targets)
    wall = (time.perf_counter() - t0) * 1e6
    return {"call": wall / len(targets), "iteration": wall / max(its, 1)}


def work(scene: Scene, label: str, targets: list[np.ndarray], truth: np.ndarray | None,
         options: RobustOptions | None = None) -> dict[str, Any]:  # fmt: skip
    """One solve (a path when ``truth`` is given, else cold): µs and rows per frame."""
    model = Counted(parse_skeleton(scene.skeleton), [scene.effector])
    arr = np.array(targets)[:, None]
    t0 = time.perf_counter()
    if truth is None:
        res = solve_many(model, arr)
    else:
        res = solve_path(model, arr, options=options)
    wall = time.perf_counter() - t0
    out = {"label": label, "us": wall * 1e6 / len(targets), "rows": model.rows / len(targets),
           "converged": float(np.mean(res.converged)),
           "grid": model.by_phase.get("grid tracks", 0) / len(targets),
           "fill": model.by_phase.get("path fills", 0) / len(targets)}
    if truth is not None:
        answers = [refk_values(model.joint_values(q)) for q in res.q]
        out["flips"] = jumps(scene, answers, truth)["overall"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=len(FLIP_SEEDS))
    parser.add_argument("--out", default=str(HERE / "results" / "floor.md"),
                        help="where the tables are written as markdown ('' for nowhere)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    scene = next(s for s in load_scenes() if s.name == "arm7")
    model = BatchedModel(parse_skeleton(scene.skeleton), [scene.effector])
    paths = [("B", SEED_B)] + [(f"seed {s}", s) for s in FLIP_SEEDS[: args.seeds]]
    truths = {label: scene.trajectory_channels(args.frames, seed) for label, seed in paths}
    frames = {label: [scene.chain.fk(scene.values(x), scene.effector) for x in truth]
              for label, truth in truths.items()}
    solve_path(model, np.array(frames["B"][:100])[:, None])  # warm the caches up

    costs = row_cost(model, scene, [16, 64, 256, 1024, 4096, 16384])
    best = min(c["lm"] for c in costs)
    lines = ["## 1. One LM iteration per row (arm7)", "",
             "The engine's `levenberg_marquardt` beside the smallest batched numpy LM doing "
             "the same work per row-iteration (bench/minimal_lm.py: FK, 6x7 Jacobian, pose "
             "error, damped 6x6 solve, clamp-and-remove limits, accept/reject), same targets "
             "and starts, in this run.", "",
             "| batch rows | engine µs per row-iteration | of which FK + Jacobian µs | "
             "minimal LM µs | engine / minimal |", "|---|---|---|---|---|"]
    lines += [f"| {c['k']} | {c['lm']:.2f} | {c['fk']:.2f} | {c['minimal']:.2f} | "
              f"{c['lm'] / c['minimal']:.2f} |" for c in costs]
    rtb = rtb_cost(scene, frames["B"])
    lines += ["", "roboticstoolbox ik_LM (C++), warm along B: " + (
        "not installed" if rtb is None else
        f"{rtb['call']:.1f} µs per call, {rtb['iteration']:.2f} µs per iteration")]
    print("\n".join(lines), flush=True)

    rows = [work(scene, "A (cold, 1000 poses)", scene.poses(1000, SEED_A), None)]
    rows += [work(scene, label, frames[label], truths[label]) for label, _ in paths]
    lines += ["", "## 2. Rows evaluated per frame or pose, and the floor they imply", "",
              f"Floor: rows per frame times the cheapest row-iteration of table 1 ({best:.2f} "
              "µs).", "",
              "| workload | µs per frame (mean) | rows per frame | of which grid tracks / "
              "path fills | floor µs | floor of the fills alone µs | converged | flips |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        split = f"{r['grid']:.1f} / {r['fill']:.1f}" if "flips" in r else "—"
        fills = f"{r['fill'] * best:.0f}" if "flips" in r else "—"
        lines.append(f"| {r['label']} | {r['us']:.0f} | {r['rows']:.1f} | {split} | "
                     f"{r['rows'] * best:.0f} | {fills} | {100 * r['converged']:.1f}% | "
                     f"{r.get('flips', '—')} |")
    print("\n".join(lines[-len(rows) - 2:]), flush=True)

    cuts = [("as shipped", RobustOptions()), ("grid 16 (of 32)", RobustOptions(grid=16)),
            ("2 locked columns (of 4)", RobustOptions(free_count=2)),
            ("both", RobustOptions(grid=16, free_count=2))]
    lines += ["", "## 3. The flip-free search cut", "",
              "| search | paths with flips | flip frames (all paths) | µs per frame, mean over "
              "paths | rows per frame |", "|---|---|---|---|---|"]
    for name, opts in cuts:
        got = [work(scene, label, frames[label], truths[label], opts) for label, _ in paths]
        lines.append(f"| {name} | {sum(g['flips'] > 0 for g in got)} of {len(got)} | "
                     f"{sum(g['flips'] for g in got)} | "
                     f"{np.mean([g['us'] for g in got]):.0f} | "
                     f"{np.mean([g['rows'] for g in got]):.1f} |")
        print(lines[-1], flush=True)
    head = (f"bench/floor.py on {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, numpy {np.__version__}; {args.frames} frames per "
            f"path; {time.perf_counter() - started:.0f} s in all.\n\n")
    if args.out:
        Path(args.out).write_text(head + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
