"""Short clips: the robust bake, without and with a pole target, flips and time.

Usage: ``.venv/bin/python bench/clips.py [--clips 20] [--frames 300] [--pole X,Y,Z]``
(about 20 s on the 2-core VM). Not a test: it prints a table.

The clips are bench/batch_throughput.py's: arm7 (sample_scenes/make_scenes.py), targets
the FK of a smooth joint path within the limits, a different path per clip, a keyframe
on every frame. Each is baked in this process by ``simulate(..., method="robust")``, the
whole path as one problem (``solver.path.solve_path``):

- bake: the default bake;
- bake with a pole: the same with a pole target (``EffectorTrack(pole=...)``, world m,
  ``--pole``), which takes the arm's one-dimensional self-motion (the elbow circle);
- bake with a pole on the reference's side: an animated pole, each frame on the side
  the joint path that made the targets bends to (its bend point pushed 0.5 m out from
  the line from the chain's first joint to the target, as poles.py measures the swivel),
  so that the reference itself meets the pole on every frame: a pole a rigger places by
  the arm, where the fixed ``--pole`` may ask for swivels the joint limits forbid.

Frames on the pole: the share of frames whose bend point (the mean of the chain's
joints between the first and the tool) lies within 1e-3 rad of the pole's half-plane
about the line from the first joint to the tool.

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
from types import ModuleType

import numpy as np
from batch_throughput import make_scenes
from dhik.app import bake
from dhik.app.formats import parse_skeleton, parse_targets
from dhik.app.trajectory import interpolate_keyframes
from dhik.model.joint_space import BatchedModel
from dhik.model.skeleton import Skeleton
from dhik.solver.lm import pole_points


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
    engines = ("bake", f"bake with a pole at {args.pole}",
               "bake with a pole on the reference's side")
    rows: dict[str, dict[str, list[float]]] = {
        e: {"time": [], "flips": [], "ratio": [], "converged": [], "on pole": []}
        for e in engines}
    for k in range(args.clips):
        truth = np.array(ms.smooth_trajectory(limits, args.frames, seed=1000 + k))
        keys = parse_targets(ms.fk_targets(ms.ARM7, names, truth.tolist(), "Tool"))
        targets = interpolate_keyframes(keys)
        true_step = np.abs(np.diff(truth, axis=0)).max()
        poles = {engines[0]: None, engines[1]: [(0, pole)],
                 engines[2]: reference_poles(ms, names, truth)}
        for engine, row in rows.items():
            sk = Skeleton(parse_skeleton(ms.ARM7))
            track = bake.EffectorTrack("Tool", list(targets), pole=poles[engine])
            t0 = time.perf_counter()
            res = bake.simulate(sk, [track], method="robust")
            row["time"].append(time.perf_counter() - t0)
            got = np.array([[f["joints"][n]["angle"] for n in names] for f in res.frames])
            row["converged"].append(res.converged_count)
            steps = np.abs(np.diff(got[1:], axis=0)).max(axis=1)
            row["flips"].append(int((steps > 2.0 * true_step).sum()))
            row["ratio"].append(float(steps.max() / true_step))
            if poles[engine] is not None:
                row["on pole"].append(float(np.mean(
                    swivels(ms, names, got, poles[engine]) < 1e-3)))
    print(f"{args.clips} arm7 clips of {args.frames} frames, robust bake defaults\n")
    print_table(rows, args.clips * args.frames)


def chain_points(ms: ModuleType, names: list[str], rows: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """For joint rows (F, 7) (rad) of arm7, world (m) per frame: the tool, the chain's
    first joint and its bend point (the mean of the joints between; solver/lm/poles.py)."""
    defn = parse_skeleton(ms.ARM7)
    model = BatchedModel(defn, ["Tool"])
    model = BatchedModel(defn, ["Tool"], points=pole_points(model.chains, [0]))
    q = np.array([model.coordinates({n: {"type": "revolute", "angle": float(v)}
                                     for n, v in zip(names, row, strict=True)})
                  for row in rows])
    _, pos = model.pose(q)  # (F, 1 + points, 3): the tool, the first joint, the bends
    return pos[:, 0], pos[:, 1], pos[:, 2:].mean(axis=1)


def reference_poles(ms: ModuleType, names: list[str], truth: np.ndarray
                    ) -> list[tuple[int, list[float]]]:  # fmt: skip
    """Per frame a pole the joint path ``truth`` (F, 7) (rad) meets: its bend point (the
    mean of the chain's joints between the first and the tool, solver/lm/poles.py) pushed
    0.5 m out from the line from the first joint to the tool, world m."""
    tool, first, bend = chain_points(ms, names, truth)
    u = tool - first
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    out = bend - first
    out -= np.sum(out * u, axis=1, keepdims=True) * u
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return [(f, (bend[f] + 0.5 * out[f]).tolist()) for f in range(len(truth))]


def swivels(ms: ModuleType, names: list[str], got: np.ndarray,
            poles: list[tuple[int, list[float]]]) -> np.ndarray:  # fmt: skip
    """Per frame |swivel| (rad) of the answer ``got`` (F, 7) (rad) against its pole
    (``poles``: (first frame, world m) entries, the latest one holds): the bend point
    (mean of the chain's joints between the first and the tool) against the pole, about
    the line from the chain's first joint to the tool."""
    tool, first, bend = chain_points(ms, names, got)
    at = np.array([f for f, _ in poles])
    pole = np.array([p for _, p in poles])[np.searchsorted(at, np.arange(len(got)),
                                                           side="right") - 1]
    u = tool - first
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    b = bend - first
    b -= np.sum(b * u, axis=1, keepdims=True) * u
    p = pole - first
    p -= np.sum(p * u, axis=1, keepdims=True) * u
    return np.abs(np.arctan2(np.sum(u * np.cross(b, p), axis=1), np.sum(b * p, axis=1)))


def print_table(rows: dict[str, dict[str, list[float]]], total: int) -> None:
    """One row per engine: frames converged of ``total``, flip frames (clips with any),
    the largest ratio, and the seconds per clip (mean / median / p99)."""
    print("| engine | converged | flip frames (clips with any) | largest ratio | "
          "frames on the pole (1e-3 rad) | s per clip: mean | median | p99 |")
    print("|---|---|---|---|---|---|---|---|")
    for engine, row in rows.items():
        t = np.array(row["time"])
        clips_with = sum(1 for f in row["flips"] if f)
        poled = row.get("on pole")  # rows without a pole (bench/chains.py) have none
        on = f"{100 * np.mean(poled):.0f} %" if poled else "—"
        print(f"| {engine} | {int(sum(row['converged']))}/{total} | "
              f"{int(sum(row['flips']))} ({clips_with}) | {max(row['ratio']):.1f} | {on} | "
              f"{t.mean():.3f} | {statistics.median(t):.3f} | {np.percentile(t, 99):.3f} |")


if __name__ == "__main__":
    main()
