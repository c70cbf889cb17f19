"""Bakes of chains whose self-motion has more than one dimension: flips and seconds.

Usage: ``.venv/bin/python bench/self_motion.py [--clips 5] [--frames 600] [--label L]``
(about a minute on the 2-core VM). Not a test: it prints a table. To compare two
versions of the core side by side, run it twice in one session, the other one with
``PYTHONPATH`` pointing at a package folder of that version (``--label`` names the rows).

Each case bakes ``--clips`` clips (``simulate(..., method="robust")``, the default bake)
of targets made by FK of a smooth joint path within the limits (tests/fixtures.py
``smooth_path``, seeds 1, 2, ...; for the turntable, 0.5 rad of sine). The dimension
of the self-motion is the solved columns beyond the counted error rows:

- arm7 (sample_scenes), humanoid arm and prismatic chain (bench/scenes.py) with
  position-only targets (Blender's IK constraint without "Rotation", its default): 4;
- two hands on a spine (tests/fixtures.py ``two_hands_on_a_spine``), position only: 14,
  and full pose: 8;
- two arm7s on a solved turntable (``two_arm7s_on_a_turntable``), full pose: 3;
- arm7, full pose: 1 (the lanes of the coarse search stay: bench/batched.py's case).

A flip frame is one where a column moves more than twice the largest per-frame step of
the path that made the targets (the truth is one continuous answer); the ratio is the
largest step over that step. Times: seconds per clip, mean / median / p99.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from dhik.app.bake import EffectorTrack, simulate
from dhik.app.formats import parse_skeleton
from dhik.model.skeleton import Skeleton

try:
    from dhik.model.joint_space import BatchedModel
except ImportError:  # a version of the core before the one robust engine (--label)
    from dhik.model.batched import BatchedModel  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from fixtures import (  # noqa: E402
    ARM7,
    smooth_path,
    two_arm7s_on_a_turntable,
    two_hands_on_a_spine,
)
from scenes import HUMANOID_ARM, PRISMATIC  # noqa: E402


def cases() -> list[tuple[str, dict[str, Any], list[str], float, bool]]:
    """(name, skeleton, effectors, rotation weight, a driven-looking turntable column)."""
    arm7 = json.loads(Path(ARM7).read_text())
    hands, arms = ["LHand", "RHand"], ["LTool", "RTool"]
    return [("arm7, position only", arm7, ["Tool"], 0.0, False),
            ("humanoid arm, position only", HUMANOID_ARM, ["Hand"], 0.0, False),
            ("prismatic chain, position only", PRISMATIC, ["Tool"], 0.0, False),
            ("two hands on a spine, position only", two_hands_on_a_spine(), hands, 0.0, False),
            ("two hands on a spine, full pose", two_hands_on_a_spine(), hands, 1.0, False),
            ("two arm7s on a solved turntable", two_arm7s_on_a_turntable(), arms, 1.0, True),
            ("arm7, full pose", arm7, ["Tool"], 1.0, False)]


def bake_clip(defn: Any, effectors: list[str], rot: float, turntable: bool, frames: int,
              seed: int) -> tuple[float, int, float, int]:  # fmt: skip
    """One clip: seconds, flip frames, largest ratio, frames converged."""
    model = BatchedModel(defn, effectors)
    if turntable:
        turn = 0.5 * np.sin(np.linspace(0.0, 2 * math.pi, frames))
        truth = np.column_stack([turn, smooth_path(model.lo[1:], model.hi[1:], frames, seed)])
    else:
        truth = smooth_path(model.lo, model.hi, frames, seed)
    targets = model.transforms(truth)
    tracks = [EffectorTrack(name, list(enumerate(targets[:, i])), 1.0, rot)
              for i, name in enumerate(effectors)]
    t0 = time.perf_counter()
    result = simulate(Skeleton(defn), tracks, method="robust")
    seconds = time.perf_counter() - t0
    got = np.array([model.coordinates(fr["joints"]) for fr in result.frames])
    true_step = np.abs(np.diff(truth, axis=0)).max()
    steps = np.abs(np.diff(got, axis=0)).max(axis=1)
    return (seconds, int((steps > 2.0 * true_step).sum()), float(steps.max() / true_step),
            result.converged_count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=5)
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--label", default="this version")
    args = parser.parse_args()
    print(f"{args.clips} clips of {args.frames} frames per case, {args.label}\n")
    print("| case | converged | flip frames (clips with any) | largest ratio | "
          "s per clip: mean | median | p99 |")
    print("|---|---|---|---|---|---|---|")
    for name, skeleton, effectors, rot, turntable in cases():
        defn = parse_skeleton(skeleton)
        runs = [bake_clip(defn, effectors, rot, turntable, args.frames, seed)
                for seed in range(1, args.clips + 1)]
        t = np.array([r[0] for r in runs])
        flips = [r[1] for r in runs]
        print(f"| {name} | {sum(r[3] for r in runs)}/{args.clips * args.frames} | "
              f"{sum(flips)} ({sum(1 for f in flips if f)}) | "
              f"{max(r[2] for r in runs):.1f} | {t.mean():.2f} | {statistics.median(t):.2f} | "
              f"{np.percentile(t, 99):.2f} |", flush=True)


if __name__ == "__main__":
    main()
