"""Robots' arms from example-robot-data's URDFs: the robust bake's flips and time, clip by
clip.

``.venv/bin/python bench/robots.py [--clips 10] [--first-seed 0] [--frames 1000] [--robots
ur5 xarm7] [--position-tolerance 1e-3] [--orientation-tolerance 0.1]``
(about three minutes on the 2-core VM; writes bench/results/robots.md; needs the
``robots`` extra). Not a test: it prints tables.

Each robot is imported as the CLI's ``import-urdf`` does (``app.urdf.load_urdf``), its
tool the effector (full pose; Baxter's two tools and G1's hands and feet at once, one
problem). A clip's targets are the FK of a smooth joint path within the limits
(tests/fixtures.py ``smooth_path``: sinusoids of 1-3 periods at 60 % of each half-range;
+-pi for a hinge without limits), solved by ``solver.path.solve_path`` (the
bake's engine, one call for the clip) at the CLI's tolerances (1e-3 m, 0.1 rad) unless
told others. Per
robot: clips with a flip (a step of any joint over twice the largest step of the path
that made the targets; a hinge without limits steps the nearest way), the largest step
ratio, frames converged, and ms a frame (mean / median / p99 over the clips).

Where hinges' limits span more than a turn (UR's +-2 pi, xArm7's) the path is searched
modulo a turn and moved back within the limits (solver/path/turns.py).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from dhik.app.urdf import load_urdf
from dhik.model.joint_space import BatchedModel
from dhik.solver.path import solve_path
from dhik.solver.settings import SolverSettings

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from fixtures import smooth_path  # noqa: E402
from report import write_report  # noqa: E402

# name: (URDF under example-robot-data's robots folder, the effectors' joints separated
# by spaces, what it shows)
ROBOTS = {
    "ur5": ("ur_description/urdf/ur5_robot.urdf", "ee_fixed_joint",
            "6 hinges, 5 of +-2 pi"),
    "ur5 (+-pi)": ("ur_description/urdf/ur5_joint_limited_robot.urdf", "ee_fixed_joint",
                   "6 hinges of +-pi"),
    "ur10": ("ur_description/urdf/ur10_robot.urdf", "ee_fixed_joint", "6 hinges, 5 of +-2 pi"),
    "ur3": ("ur_description/urdf/ur3_robot.urdf", "ee_fixed_joint", "6 hinges, 5 of +-2 pi"),
    "z1": ("z1_description/urdf/z1.urdf", "jointGripper", "6 hinges"),
    "panda": ("panda_description/urdf/panda.urdf", "panda_hand_tcp_joint",
              "7 hinges within +-2.9"),
    "xarm7": ("xarm_description/urdf/xarm7.urdf", "joint_eef", "7 hinges, 4 of +-2 pi"),
    "kinova": ("kinova_description/robots/kinova.urdf", "j2s6s200_joint_end_effector",
               "6 hinges, 3 without limits"),
    "talos arm": ("talos_data/robots/talos_left_arm.urdf", "gripper_left_joint",
                  "7 hinges"),
    "baxter arm": ("baxter_description/urdf/baxter.urdf", "right_hand_range_joint",
                   "7 hinges (the right arm)"),
    "baxter, both arms": ("baxter_description/urdf/baxter.urdf",
                          "right_hand_range_joint left_hand_range_joint",
                          "14 hinges, two tools"),
    "so101": ("so_arm_description/urdf/so101.urdf", "gripper_frame_joint",
              "5 hinges (LeRobot's SO-101)"),
    "tiago": ("tiago_description/robots/tiago_no_hand.urdf", "wrist_tool_joint",
              "torso slider and 7 hinges"),
    "g1": ("g1_description/urdf/g1_29dof_rev_1_0.urdf",
           "left_hand_palm_joint right_hand_palm_joint left_ankle_roll_joint "
           "right_ankle_roll_joint", "29 hinges, hands and feet"),
}


def robots_dir() -> Path:
    """example-robot-data's robots folder."""
    dist = importlib.metadata.distribution("example-robot-data")
    return Path(str(dist.locate_file("cmeel.prefix/share/example-robot-data/robots")))


def clip(model: BatchedModel, frames: int, seed: int, settings: SolverSettings
         ) -> tuple[float, int, float]:  # fmt: skip
    """One clip: its largest step over the truth's, frames converged, seconds."""
    # a hinge without limits (URDF "continuous") sweeps within +-pi
    truth = smooth_path(np.where(np.isfinite(model.lo), model.lo, -np.pi),
                        np.where(np.isfinite(model.hi), model.hi, np.pi), frames, seed)
    targets = model.transforms(truth)
    t0 = time.perf_counter()
    res = solve_path(model, targets, settings=settings)
    seconds = time.perf_counter() - t0
    solved = ~model.held  # whole turns: a hinge without limits may take the nearest way
    steps = np.abs(model.difference(res.q[:-1], res.q[1:]))[:, solved].max(axis=1)
    ratio = float(steps.max() / np.abs(np.diff(truth, axis=0))[:, solved].max())
    return ratio, int(res.converged.sum()), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=10)
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--position-tolerance", type=float, default=1e-3, help="m")
    parser.add_argument("--orientation-tolerance", type=float, default=0.1, help="rad")
    parser.add_argument("--robots", nargs="*", default=list(ROBOTS))
    parser.add_argument("--out", default=str(HERE / "results" / "robots.md"))
    args = parser.parse_args()
    started = time.perf_counter()
    root = robots_dir()
    seeds = range(args.first_seed, args.first_seed + args.clips)
    settings = SolverSettings(position_tolerance=args.position_tolerance,
                              orientation_tolerance=args.orientation_tolerance)
    told = "the CLI's" if settings == SolverSettings() else \
        f"{args.position_tolerance:g} m and {args.orientation_tolerance:g} rad"
    lines = [f"{args.clips} clips of {args.frames} frames a robot (seeds {seeds[0]}.."
             f"{seeds[-1]}), {told} tolerances.", "",
             "| robot | joints | clips with a flip | largest ratio | converged | "
             "ms a frame: mean / median / p99 |", "|---|---|---|---|---|---|"]
    for name in args.robots:
        path, tools, what = ROBOTS[name]
        skel, _ = load_urdf(root / path)
        model = BatchedModel(skel, tools.split())
        rows = [clip(model, args.frames, seed, settings) for seed in seeds]
        ms = [1e3 * s / args.frames for _, _, s in rows]
        ratios = [r for r, _, _ in rows]
        lines.append(f"| {name} | {what} | {sum(r > 2.0 for r in ratios)} of {len(rows)} | "
                     f"{max(ratios):.2f} | {sum(c for _, c, _ in rows)}/"
                     f"{len(rows) * args.frames} | {statistics.mean(ms):.2f} / "
                     f"{statistics.median(ms):.2f} / {float(np.percentile(ms, 99)):.2f} |")
        print(lines[-1], flush=True)
    write_report("robots.py", started, lines, args.out)


if __name__ == "__main__":
    main()
