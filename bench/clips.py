"""Short clips: the robust bake, without and with a pole target, flips and time.

Usage: ``.venv/bin/python bench/clips.py [--clips 20] [--frames 300] [--pole X,Y,Z]``
(about 20 s on the 2-core VM). Not a test: it prints a table.

The clips are bench/batch_throughput.py's: arm7 (sample_scenes/make_scenes.py), targets
the FK of a smooth joint path within the limits, a different path per clip, a keyframe
on every frame. Each is baked in this process by ``simulate(..., method="robust")``, the
whole path as one problem (``solver.path.solve_path``):

- bake: the default bake;
- bake with a pole: the same with a pole target (``EffectorTrack(pole=...)``, world m,
  ``--pole``), which takes the arm's one-dimensional self-motion (the elbow circle).

A flip frame is one where a joint moves more than twice the largest per-frame step of
the joint path that made the targets (bench/run.py ``jumps``, "any joint"); the ratio is
the largest step over that true step (a pole's answer is not the truth's, so its steps
differ, but a continuous answer has no step far beyond it). Times: seconds per clip,
mean / median / p99.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from batch_throughput import make_scenes
from dhik.app import bake
from dhik.app.formats import parse_skeleton, parse_targets
from dhik.app.trajectory import interpolate_keyframes
from dhik.model.skeleton import Skeleton


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=20)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--pole", default="0.6,0,1.2", help="the pole's position (world m)")
    args = parser.parse_args()
    pole = tuple(float(v) for v in args.pole.split(","))
    ms = make_scenes()
    names = [j[0] for j in ms._ARM7_JOINTS]
    limits = [j[3] for j in ms._ARM7_JOINTS]
    engines = ("bake", f"bake with a pole at {args.pole}")
    rows: dict[str, dict[str, list[float]]] = {
        e: {"time": [], "flips": [], "ratio": [], "converged": []} for e in engines}
    for k in range(args.clips):
        truth = np.array(ms.smooth_trajectory(limits, args.frames, seed=1000 + k))
        keys = parse_targets(ms.fk_targets(ms.ARM7, names, truth.tolist(), "Tool"))
        targets = interpolate_keyframes(keys)
        true_step = np.abs(np.diff(truth, axis=0)).max()
        for engine, row in rows.items():
            sk = Skeleton(parse_skeleton(ms.ARM7))
            track = bake.EffectorTrack("Tool", list(targets),
                                       pole=None if engine == "bake" else [(0, pole)])
            t0 = time.perf_counter()
            res = bake.simulate(sk, [track], method="robust")
            row["time"].append(time.perf_counter() - t0)
            got = np.array([[f["joints"][n]["angle"] for n in names] for f in res.frames])
            row["converged"].append(res.converged_count)
            steps = np.abs(np.diff(got[1:], axis=0)).max(axis=1)
            row["flips"].append(int((steps > 2.0 * true_step).sum()))
            row["ratio"].append(float(steps.max() / true_step))
    print(f"{args.clips} arm7 clips of {args.frames} frames, robust bake defaults\n")
    print_table(rows, args.clips * args.frames)


def print_table(rows: dict[str, dict[str, list[float]]], total: int) -> None:
    """One row per engine: frames converged of ``total``, flip frames (clips with any),
    the largest ratio, and the seconds per clip (mean / median / p99)."""
    print("| engine | converged | flip frames (clips with any) | largest ratio | "
          "s per clip: mean | median | p99 |")
    print("|---|---|---|---|---|---|---|")
    for engine, row in rows.items():
        t = np.array(row["time"])
        clips_with = sum(1 for f in row["flips"] if f)
        print(f"| {engine} | {int(sum(row['converged']))}/{total} | "
              f"{int(sum(row['flips']))} ({clips_with}) | {max(row['ratio']):.1f} | "
              f"{t.mean():.3f} | {statistics.median(t):.3f} | {np.percentile(t, 99):.3f} |")


if __name__ == "__main__":
    main()
