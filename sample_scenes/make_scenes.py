"""Regenerate the sample scenes: ``python sample_scenes/make_scenes.py``.

- ``spec_example``: SPEC 3.1's skeleton and SPEC 3.2's targets, effector Piston.
  It has 5 degrees of freedom, so not every full-pose target is reachable.
- ``planar2``: a two-link arm turning about Z in the XY plane; its targets are the FK of
  a smooth joint path (a keyframe on every frame: 2 joints cannot follow an arbitrary
  interpolated position plus heading), so every frame is reachable.
- ``arm7``: a Panda-like 7-DoF arm with limits on every joint; its targets are the FK of
  a smooth joint trajectory inside the limits (a keyframe on every frame), so every
  frame is reachable.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from dhik.app.formats import parse_skeleton
from dhik.model.skeleton import Skeleton
from dhik.rotations import matrix_to_euler_xyz

HERE = Path(__file__).resolve().parent

SPEC_SKELETON = {
    "root_name": "Root",
    "joints": [
        {"name": "Root", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {"name": "Shoulder", "type": "spherical", "offset": [0, 1.5, 0], "parent": "Root",
         "limits": [[-3.14, 3.14], None, [-0.5, 0.5]]},
        {"name": "Elbow", "type": "revolute", "offset": [0, 0, 2.0], "parent": "Shoulder",
         "axis": [1, 0, 0], "limits": [0.0, 2.5]},
        {"name": "Piston", "type": "prismatic", "offset": [0, 0, 1.0], "parent": "Elbow",
         "axis": [0, 0, 1], "limits": [0.0, 0.5]},
    ],
}
SPEC_TARGETS = [
    {"frame": 80, "pos": [1.0, 1.0, 1.0], "euler": [90.0, 0.0, 45.0]},
    {"frame": 160, "pos": [1.0, -1.0, 1.0], "euler": [-90.0, 45.0, 0.0]},
    {"frame": 240, "pos": [2.5, 0.0, 1.0], "euler": [0.0, 0.0, 0.0]},
]

PLANAR2 = {
    "root_name": "Base",
    "joints": [
        {"name": "Base", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {"name": "Shoulder", "type": "revolute", "offset": [0, 0, 0], "parent": "Base",
         "axis": [0, 0, 1], "limits": [-2.5, 2.5]},
        {"name": "Elbow", "type": "revolute", "offset": [0, 1, 0], "parent": "Shoulder",
         "axis": [0, 0, 1], "limits": [-2.6, 2.6]},
        {"name": "Hand", "type": "fixed", "offset": [0, 1, 0], "parent": "Elbow"},
    ],
}

_ARM7_JOINTS = [  # name, axis, offset, limits (radians)
    ("J1", "z", [0, 0, 0.333], [-2.9, 2.9]),
    ("J2", "y", [0, 0, 0], [-1.76, 1.76]),
    ("J3", "z", [0, 0, 0.316], [-2.9, 2.9]),
    ("J4", "y", [0.0825, 0, 0], [-3.07, 0.1]),
    ("J5", "z", [-0.0825, 0, 0.384], [-2.9, 2.9]),
    ("J6", "y", [0, 0, 0], [-0.1, 3.75]),
    ("J7", "z", [0.088, 0, 0], [-2.9, 2.9]),
]
_AXES = {"x": [1, 0, 0], "y": [0, 1, 0], "z": [0, 0, 1]}
ARM7 = {
    "root_name": "Base",
    "joints": [{"name": "Base", "type": "fixed", "offset": [0, 0, 0], "parent": None}]
    + [
        {"name": n, "type": "revolute", "offset": off, "parent": "Base" if i == 0
         else _ARM7_JOINTS[i - 1][0], "axis": _AXES[ax], "limits": lim}
        for i, (n, ax, off, lim) in enumerate(_ARM7_JOINTS)
    ]
    + [{"name": "Tool", "type": "fixed", "offset": [0, 0, 0.107], "parent": "J7"}],
}


def smooth_trajectory(limits: list[list[float]], frames: int, seed: int) -> np.ndarray:
    """Sinusoids around mid-range at 50 % of each half-range, 1-2 periods (radians)."""
    rng = np.random.default_rng(seed)
    lo, hi = np.array(limits).T
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    periods = rng.uniform(1.0, 2.0, len(limits))
    phase = rng.uniform(0, 2 * math.pi, len(limits))
    t = np.arange(frames)[:, None] / frames
    return mid + 0.5 * half * np.sin(2 * math.pi * periods * t + phase)


def fk_targets(skeleton_dict: dict, names: list[str], qs: np.ndarray, effector: str) -> list:
    """Keyframes (one per frame) of the effector's world pose along the joint path ``qs``."""
    sk = Skeleton(parse_skeleton(skeleton_dict))
    keys = []
    prev = None
    for frame, q in enumerate(qs):
        sk.set_joint_values({n: {"type": "revolute", "angle": float(a)}
                             for n, a in zip(names, q, strict=True)})
        m = sk.joints[effector].global_transform
        e = np.degrees(matrix_to_euler_xyz(m[:3, :3]))
        if prev is not None:  # keep each channel continuous (no 360-degree jumps)
            e = prev + (e - prev + 180.0) % 360.0 - 180.0
        prev = e
        keys.append({"frame": frame, "pos": [round(float(v), 9) for v in m[:3, 3]],
                     "euler": [round(float(v), 9) for v in e]})
    return keys


def write(name: str, skeleton: dict, targets: list) -> None:
    folder = HERE / name
    folder.mkdir(exist_ok=True)
    (folder / "skeleton.json").write_text(json.dumps(skeleton, indent=2) + "\n")
    (folder / "targets.json").write_text(json.dumps(targets, indent=1) + "\n")


def main() -> None:
    write("spec_example", SPEC_SKELETON, SPEC_TARGETS)
    planar_names = ["Shoulder", "Elbow"]
    planar_q = smooth_trajectory([[-1.2, 1.2], [0.3, 2.2]], 120, seed=7)
    write("planar2", PLANAR2, fk_targets(PLANAR2, planar_names, planar_q, "Hand"))
    arm_names = [j[0] for j in _ARM7_JOINTS]
    arm_q = smooth_trajectory([j[3] for j in _ARM7_JOINTS], 240, seed=12345)
    write("arm7", ARM7, fk_targets(ARM7, arm_names, arm_q, "Tool"))


if __name__ == "__main__":
    main()
