"""A chain length over a driven joint: the bake's flip-free engine beside the tracker.

Usage: ``.venv/bin/python bench/chains.py [--clips 10] [--frames 1000]`` (about 30 s on
the 2-core VM). Not a test: it prints a table.

arm7 (sample_scenes) on a turntable (tests/fixtures.py ``arm7_on_a_turntable``): the
turntable is driven (``simulate(driven=...)``, 0.6 rad of sine over the clip, as an
animated parent bone in Blender), the chain length covers the arm below it. Targets are
the FK of a smooth arm path within the limits (a different path per clip) on top of the
turntable. Each clip is solved by:

- batched: ``simulate(..., method="robust", driven=...)`` with the chain length, the
  default bake (the flip-free engine, the turntable a held column);
- tracker: the frame-by-frame tracker (``solver.robust.trajectory_frames`` on the
  compiled model with the same chain length and driven values), which such a bake ran
  before and a bake with a pole target runs now; called directly, so its time leaves
  out the bake's bookkeeping.

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
from dhik.model.batched import BatchedModel
from dhik.model.compiled import CompiledKinematics
from dhik.model.skeleton import Skeleton
from dhik.solver.kinematics import FrameTargets
from dhik.solver.robust import trajectory_frames

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
        e: {"time": [], "flips": [], "ratio": [], "converged": []} for e in ("batched", "tracker")}
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
            if engine == "tracker":
                model = CompiledKinematics(sk, ["Tool"], [chain])
                per_frame = [FrameTargets([m], values) for m, (_, values)
                             in zip(targets, driven, strict=True)]
                solved = list(trajectory_frames(model, per_frame))
                row["time"].append(time.perf_counter() - t0)
                col = [model.names.index(n) for n in arm]
                got = np.array([np.asarray(f.coords)[col] for f in solved])
                row["converged"].append(sum(f.result.converged for f in solved))
            else:
                track = EffectorTrack("Tool", list(enumerate(targets)), chain_length=chain)
                res = simulate(sk, [track], method="robust", driven=driven)
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
