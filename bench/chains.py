"""A chain length over a driven joint: the robust bake, flips and time.

Usage: ``.venv/bin/python bench/chains.py [--clips 10] [--frames 1000]`` (about 30 s on
the 2-core VM). Not a test: it prints a table.

arm7 (sample_scenes) on a turntable (tests/fixtures.py ``arm7_on_a_turntable``): the
turntable is driven (``simulate(driven=...)``, 0.6 rad of sine over the clip, as an
animated parent bone in Blender), the chain length covers the arm below it. Targets are
the FK of a smooth arm path within the limits (a different path per clip) on top of the
turntable. Each clip is baked by ``simulate(..., method="robust", driven=...)`` with the
chain length: the path as one problem (``solver.path.solve_path``, the turntable a held
column), and with ``warm_start=False`` (``--cold-start``: every frame alone,
``solver.lm.solve_many``), which may flip.

A flip frame is one where an arm joint moves more than twice the largest per-frame step
of the arm path that made the targets; the ratio is the largest step over that step.
Times: seconds per clip, mean / median / p99.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from dhik.app.bake import EffectorTrack, simulate
from dhik.app.formats import parse_skeleton
from dhik.model.joint_space import BatchedModel
from dhik.model.skeleton import Skeleton

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from clips import print_table  # noqa: E402
from fixtures import arm7_on_a_turntable, smooth_path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=10)
    parser.add_argument("--frames", type=int, default=1000)
    args = parser.parse_args()
    defn = parse_skeleton(arm7_on_a_turntable())
    arm = [j.name for j in defn.joints if j.type == "revolute" and j.name != "Turntable"]
    chain = len(defn.joints) - 2  # every joint below the turntable
    whole = BatchedModel(defn, ["Tool"])
    rows: dict[str, dict[str, list[float]]] = {
        e: {"time": [], "flips": [], "ratio": [], "converged": []} for e in ("path", "cold")}
    frames = args.frames
    turn = 0.6 * np.sin(np.linspace(0.0, 2 * math.pi, frames))
    driven = [(f, {"Turntable": {"type": "revolute", "angle": float(turn[f])}})
              for f in range(frames)]
    for k in range(args.clips):
        truth = smooth_path(whole.lo[1:], whole.hi[1:], frames, 100 + k)
        targets = whole.transforms(np.column_stack([turn, truth]))[:, 0]
        true_step = np.abs(np.diff(truth, axis=0)).max()
        for engine, row in rows.items():
            sk = Skeleton(defn)
            t0 = time.perf_counter()
            track = EffectorTrack("Tool", list(enumerate(targets)), chain_length=chain)
            res = simulate(sk, [track], method="robust", driven=driven,
                           warm_start=engine == "path")
            row["time"].append(time.perf_counter() - t0)
            got = np.array([[f["joints"][n]["angle"] for n in arm] for f in res.frames])
            row["converged"].append(res.converged_count)
            steps = np.abs(np.diff(got, axis=0)).max(axis=1)
            row["flips"].append(int((steps > 2.0 * true_step).sum()))
            row["ratio"].append(float(steps.max() / true_step))
    print(f"{args.clips} clips of {frames} frames: arm7 on a driven turntable, chain length "
          f"{chain}, robust bake defaults\n")
    print_table(rows, args.clips * frames)


if __name__ == "__main__":
    main()
