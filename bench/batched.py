"""The robust engine on the benchmark's workloads, in one run.

``.venv/bin/python bench/batched.py`` (about a minute on the 2-core VM). Rows per scene:
A, cold solves of the benchmark's random reachable poses (bench/scenes.py, seed
12345): ``solver.lm.solve_many`` as one batch, and ``solver.lm.solve_one`` one pose at
a time from the T-pose (what ``solve_ik(method="robust")`` runs); B, the benchmark's
2,000-frame trajectory (seed 2): ``solver.path.solve_path``; for arm7 also the ten
random trajectories of bench/run.py (seeds 100-109). Every answer is re-checked with
bench/refk.py (bench/run.py ``check``: 1e-5 m / 1e-4 rad AND within limits); flips are
bench/run.py ``jumps`` (frames where a joint moves more than twice the largest true
per-frame step of any joint / of its own).

Times, microseconds per pose or frame: ``mean`` is the wall time of the call divided by
the count. ``solve_one``'s median and p99 are over its per-pose times. A batched call
has no per-pose clock: its median and p99 attribute the wall time to the rows in
proportion to their LM iterations (marked ``~``); for a trajectory, to the frames in
proportion to the LM iterations spent on each (``PathResult.iterations``: its
candidates, fills and retries).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import FLIP_SEEDS, SEED_A, SEED_B, check, jumps  # noqa: E402
from scenes import Scene, load_scenes  # noqa: E402


def refk_values(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v.get("angle", v.get("displacement", v.get("quaternion")))
            for k, v in values.items()}


def stats(times_us: np.ndarray, approx: bool = False) -> dict[str, Any]:
    return {"mean": float(np.mean(times_us)), "median": float(np.median(times_us)),
            "p99": float(np.percentile(times_us, 99)), "approx": approx}


def attributed(wall: float, iterations: np.ndarray) -> np.ndarray:
    """Per-row share (us) of a batched call's wall time, by LM iterations (>= 1)."""
    it = np.maximum(iterations.astype(float), 1.0)
    return wall * 1e6 * it / it.sum()


class Engine:
    """The robust engine (``solver.lm``, ``solver.path``) on one scene's joint space."""

    def __init__(self, scene: Scene) -> None:
        from dhik.app.formats import parse_skeleton
        from dhik.model.joint_space import BatchedModel
        from dhik.solver.settings import SolverSettings

        self.model = BatchedModel(parse_skeleton(scene.skeleton), [scene.effector])
        self.s = SolverSettings(max_iterations=100, position_tolerance=1e-5,
                                orientation_tolerance=1e-4)

    def answers(self, q: np.ndarray) -> list[dict[str, Any]]:
        return [refk_values(self.model.joint_values(row)) for row in q]

    def many(self, targets: list[np.ndarray]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """A as one batch: ``solve_many``."""
        from dhik.solver.lm import solve_many

        t0 = time.perf_counter()
        res = solve_many(self.model, np.array(targets)[:, None], settings=self.s)
        wall = time.perf_counter() - t0
        st = stats(attributed(wall, res.iterations), approx=True)
        st["mean"] = wall * 1e6 / len(targets)
        return self.answers(res.q), st

    def one(self, targets: list[np.ndarray]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """A one pose at a time from the T-pose: ``solve_one``."""
        from dhik.solver.lm import solve_one

        zero = np.clip(np.zeros(self.model.n), self.model.lo, self.model.hi)
        rows, times = [], []
        for t in targets:
            t0 = time.perf_counter()
            res = solve_one(self.model, t, zero, settings=self.s)
            times.append((time.perf_counter() - t0) * 1e6)
            rows.append(res.q[0])
        return self.answers(np.array(rows)), stats(np.array(times))

    def path(self, targets: list[np.ndarray]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """A trajectory as one problem: ``solve_path``."""
        from dhik.solver.path import solve_path

        t0 = time.perf_counter()
        res = solve_path(self.model, np.array(targets)[:, None], settings=self.s)
        wall = time.perf_counter() - t0
        st = stats(attributed(wall, res.iterations), approx=True)
        st["mean"] = wall * 1e6 / len(targets)
        st["reported_jumps"] = len(res.jumps)
        return self.answers(res.q), st


def row(scene: Scene, engine: str, workload: str, targets: list[np.ndarray],
        answers: list[dict[str, Any]], st: dict[str, Any],
        truth: np.ndarray | None) -> dict[str, Any]:  # fmt: skip
    checks = [check(scene, v, t) for v, t in zip(answers, targets, strict=True)]
    out = {"scene": scene.name, "engine": engine, "workload": workload, "n": len(targets),
           "tight": sum(c["tight"] for c in checks) / len(checks), **st}
    if truth is not None:
        out["jumps"] = jumps(scene, answers, truth)
    return out


def fmt_us(v: Any, approx: bool) -> str:
    return "—" if v is None else ("~" if approx else "") + f"{v:.0f}"


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| scene | engine | workload | n | success 1e-5 m / 1e-4 rad, limits | mean µs | "
             "median µs | p99 µs | flips (any joint / own) | largest ratio |",
             "|" + "---|" * 10]
    for r in rows:
        j = r.get("jumps")
        flips = "—" if j is None else f"{j['overall']} / {j['per_channel']}"
        if r.get("reported_jumps") is not None:
            flips += f" (reported: {r['reported_jumps']})"
        ratio = "—" if j is None else f"{j['max_overall_ratio']:.1f}"
        lines.append(f"| {r['scene']} | {r['engine']} | {r['workload']} | {r['n']} | "
                     f"{100 * r['tight']:.1f}% | {r['mean']:.0f} | "
                     f"{fmt_us(r['median'], r['approx'])} | {fmt_us(r['p99'], r['approx'])} | "
                     f"{flips} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poses", type=int, default=1000)
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=len(FLIP_SEEDS), help="random paths")
    parser.add_argument("--scenes", nargs="*", default=None)
    parser.add_argument("--out", default=str(HERE / "results" / "batched.md"),
                        help="where the table is written as markdown ('' for nowhere)")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for scene in load_scenes():
        if args.scenes and scene.name not in args.scenes:
            continue
        a = scene.poses(args.poses, SEED_A)
        paths = [("B", SEED_B)]
        if scene.name == "arm7":
            paths += [(f"seed {s}", s) for s in FLIP_SEEDS[: args.seeds]]
        eng = Engine(scene)
        for name, solve in (("solve_many", eng.many), ("solve_one", eng.one)):
            answers, st = solve(a)
            rows.append(row(scene, name, "A (cold)", a, answers, st, None))
            print(f"[{time.perf_counter() - started:5.0f} s] {scene.name} {name} A", flush=True)
        for label, seed in paths:
            truth = scene.trajectory_channels(args.frames, seed)
            b = [scene.chain.fk(scene.values(x), scene.effector) for x in truth]
            answers, st = eng.path(b)
            rows.append(row(scene, "solve_path", label, b, answers, st, truth))
            print(f"[{time.perf_counter() - started:5.0f} s] {scene.name} solve_path {label}",
                  flush=True)
    text = table(rows)
    print(text)
    if args.out:
        import platform

        import numpy

        head = (f"bench/batched.py on {platform.machine()}, {os.cpu_count()} cores, Python "
                f"{platform.python_version()}, numpy {numpy.__version__}; "
                f"{args.poses} poses (A), {args.frames} frames per path; "
                f"{time.perf_counter() - started:.0f} s in all.\n\n")
        Path(args.out).write_text(head + text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
