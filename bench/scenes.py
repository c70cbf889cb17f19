"""The benchmark's scenes (skeleton.json dicts) and workloads (targets from refk FK).

Scenes: ``arm7`` (sample_scenes/arm7, effector Tool), ``humanoid_arm`` (clavicle fixed,
spherical shoulder and wrist with limits, revolute elbow) and ``prismatic`` (a 7-DoF
arm with two sliders). Workload A: poses from joint values drawn within the limits;
B: a smooth joint-space trajectory (sinusoids at 60 % of each half-range around
mid-range, 1-3 periods over the run). Spherical joints are drawn and animated through
their intrinsic XYZ angles (``Rx Ry Rz``, the virtual chain's order). Frames: world;
units: metres, radians.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from refk import Chain, intrinsic_angles, matrix_quat, quat_matrix, rot_xyz_intrinsic

ROOT = Path(__file__).resolve().parent.parent

HUMANOID_ARM = {
    "root_name": "Chest",
    "joints": [
        {"name": "Chest", "type": "fixed", "offset": [0, 0, 1.4], "parent": None},
        {"name": "Clavicle", "type": "fixed", "offset": [0.0, 0.18, 0.02], "parent": "Chest",
         "quaternion": [0.9962, 0.0, 0.0, 0.0872]},
        {"name": "Shoulder", "type": "spherical", "offset": [0.0, 0.03, 0.0],
         "parent": "Clavicle", "limits": [[-1.6, 1.6], [-1.3, 1.3], [-0.7, 1.6]]},
        {"name": "Elbow", "type": "revolute", "offset": [0.0, 0.30, 0.0], "parent": "Shoulder",
         "axis": [0, 0, 1], "limits": [-0.05, 2.6]},
        {"name": "Wrist", "type": "spherical", "offset": [0.0, 0.26, 0.0], "parent": "Elbow",
         "limits": [[-1.2, 1.2], [-0.5, 0.5], [-1.0, 1.0]]},
        {"name": "Hand", "type": "fixed", "offset": [0.0, 0.08, 0.01], "parent": "Wrist"},
    ],
}

PRISMATIC = {
    "root_name": "Base",
    "joints": [
        {"name": "Base", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {"name": "Turn", "type": "revolute", "offset": [0, 0, 0.2], "parent": "Base",
         "axis": [0, 0, 1], "limits": [-3.0, 3.0]},
        {"name": "Lift", "type": "prismatic", "offset": [0, 0, 0.3], "parent": "Turn",
         "axis": [0, 0, 1], "limits": [0.0, 0.8]},
        {"name": "Pitch", "type": "revolute", "offset": [0, 0, 0.1], "parent": "Lift",
         "axis": [0, 1, 0], "limits": [-1.5, 1.5]},
        {"name": "Reach", "type": "prismatic", "offset": [0.2, 0, 0], "parent": "Pitch",
         "axis": [1, 0, 0], "limits": [0.0, 0.5]},
        {"name": "Roll", "type": "revolute", "offset": [0.1, 0, 0], "parent": "Reach",
         "axis": [1, 0, 0], "limits": [-3.0, 3.0]},
        {"name": "Bend", "type": "revolute", "offset": [0.0, 0, 0], "parent": "Roll",
         "axis": [0, 1, 0], "limits": [-2.0, 2.0]},
        {"name": "Twist", "type": "revolute", "offset": [0.05, 0, 0], "parent": "Bend",
         "axis": [0, 0, 1], "limits": [-2.9, 2.9]},
        {"name": "Tool", "type": "fixed", "offset": [0.08, 0, 0], "parent": "Twist"},
    ],
}


@dataclass
class Scene:
    """A skeleton.json dict, its effector, and the channels a pose is drawn from."""

    name: str
    skeleton: dict[str, Any]
    effector: str
    chain: Chain = field(init=False)
    channels: list[tuple[str, int, float, float]] = field(init=False)  # joint, axis, lo, hi

    def __post_init__(self) -> None:
        self.chain = Chain(self.skeleton)
        path = []
        name: str | None = self.effector
        while name is not None:
            path.append(name)
            name = self.chain.joints[name].get("parent")
        self.channels = []
        for name in reversed(path):
            j = self.chain.joints[name]
            if j["type"] in ("revolute", "prismatic"):
                lo, hi = j.get("limits") or (-math.pi, math.pi)
                self.channels.append((name, -1, lo, hi))
            elif j["type"] == "spherical":
                lims = j.get("limits") or [None, None, None]
                for k, lim in enumerate(lims):
                    full = (-math.pi / 2, math.pi / 2) if k == 1 else (-math.pi, math.pi)
                    self.channels.append((name, k, *(lim or full)))

    def values(self, x: np.ndarray) -> dict[str, Any]:
        """Joint values (refk format) of one channel vector."""
        out: dict[str, Any] = {}
        angles: dict[str, list[float]] = {}
        for (name, k, _, _), v in zip(self.channels, x, strict=True):
            if k < 0:
                out[name] = float(v)
            else:
                angles.setdefault(name, [0.0, 0.0, 0.0])[k] = float(v)
        for name, (a, b, c) in angles.items():
            out[name] = matrix_quat(rot_xyz_intrinsic(a, b, c))
        return out

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo = np.array([c[2] for c in self.channels])
        hi = np.array([c[3] for c in self.channels])
        return lo, hi

    def poses(self, count: int, seed: int) -> list[np.ndarray]:
        """Workload A: FK of ``count`` channel vectors drawn uniformly within the limits."""
        rng = np.random.default_rng(seed)
        lo, hi = self.bounds()
        return [self.chain.fk(self.values(rng.uniform(lo, hi)), self.effector)
                for _ in range(count)]

    def trajectory(self, frames: int, seed: int, block: float | None = None) -> list[np.ndarray]:
        """Workload B: a smooth path, 60 % of each half-range around mid-range, 1-3 periods.

        With ``block``, whole periods (1, 2 or 3) per ``block`` frames: the path repeats
        itself every ``block`` frames (for the bake's cost-per-frame comparison)."""
        return [self.chain.fk(self.values(x), self.effector)
                for x in self.trajectory_channels(frames, seed, block)]

    def trajectory_channels(self, frames: int, seed: int, block: float | None = None
                            ) -> np.ndarray:  # fmt: skip
        """The channel vectors (frames, channels) whose FK is :meth:`trajectory`."""
        rng = np.random.default_rng(seed)
        lo, hi = self.bounds()
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        if block is None:
            periods = rng.uniform(1.0, 3.0, len(lo))
        else:
            periods = rng.integers(1, 4, len(lo)).astype(float)
        phase = rng.uniform(0.0, 2 * math.pi, len(lo))
        t = np.arange(frames)[:, None] / (block or frames)
        return mid + 0.6 * half * np.sin(2 * math.pi * periods * t + phase)

    def channels_of(self, values: dict[str, Any]) -> np.ndarray:
        """Inverse of :meth:`values`: one channel vector (spherical: intrinsic XYZ angles)."""
        out = []
        for name, k, _, _ in self.channels:
            v = values[name]
            out.append(float(v) if k < 0 else intrinsic_angles(quat_matrix(v))[k])
        return np.array(out)


def load_scenes() -> list[Scene]:
    arm7 = json.loads((ROOT / "sample_scenes" / "arm7" / "skeleton.json").read_text())
    return [
        Scene("arm7", arm7, "Tool"),
        Scene("humanoid_arm", HUMANOID_ARM, "Hand"),
        Scene("prismatic", PRISMATIC, "Tool"),
    ]
