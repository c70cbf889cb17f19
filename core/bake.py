"""Simulate and bake (SPEC 6): solve every target frame, record it, build animation.json.

Targets are world 4x4 matrices (metres). Frames are solved in order from the T-pose,
each warm-started from the previous frame's solution unless ``warm_start`` is False.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .fast import CompiledKinematics, solve_spec
from .skeleton import Skeleton
from .solver import SolverSettings

Progress = Callable[[int, int], None]


@dataclass
class FrameRecord:
    """One solved frame: errors in metres and radians."""

    frame: int
    converged: bool
    iterations: int
    position_error: float
    orientation_error: float


@dataclass
class BakeResult:
    """Per-frame records, the animation.json frames, and what ran."""

    records: list[FrameRecord]
    frames: list[dict[str, Any]]
    effector: str
    method: str = "spec"
    wall_time: float = 0.0  # seconds
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def converged_count(self) -> int:
        return sum(r.converged for r in self.records)

    def report(self) -> dict[str, Any]:
        """The JSON report: summary figures and every frame's record."""
        return {
            "effector": self.effector,
            "method": self.method,
            "settings": self.settings,
            "frames": len(self.records),
            "converged": self.converged_count,
            "wall_time_s": self.wall_time,
            "records": [asdict(r) for r in self.records],
        }


def align_quaternion_signs(frames: list[dict[str, Any]]) -> None:
    """Flip spherical quaternions so each has a non-negative dot with the previous frame's."""
    previous: dict[str, NDArray[np.float64]] = {}
    for fr in frames:
        for name, entry in fr["joints"].items():
            if entry.get("type") != "spherical":
                continue
            q = np.asarray(entry["quaternion"], dtype=float)
            prev = previous.get(name)
            if prev is not None and float(q @ prev) < 0.0:
                q = -q
                entry["quaternion"] = [float(c) for c in q]
            previous[name] = q


def simulate(
    skeleton: Skeleton,
    targets: list[tuple[int, NDArray[np.float64]]],
    effector: str | None = None,
    settings: SolverSettings | None = None,
    warm_start: bool = True,
    progress: Progress | None = None,
) -> BakeResult:
    """Solve ``targets`` (``(frame, world 4x4)``) in order and collect the bake.

    The skeleton is reset to the T-pose first and is left in the last frame's pose.
    """
    settings = settings or SolverSettings()
    name = effector or skeleton.default_effector()
    kwargs = settings.kwargs()
    records: list[FrameRecord] = []
    frames: list[dict[str, Any]] = []
    start = time.perf_counter()
    skeleton.reset()
    model = CompiledKinematics(skeleton, [name])  # compiled once; solve's iterates, faster
    for i, (frame, target) in enumerate(targets):
        if not warm_start:
            model.reset()
        res = solve_spec(model, target, settings)
        records.append(
            FrameRecord(frame, res.converged, res.iterations, res.position_error,
                        res.orientation_error)
        )
        model.write_back(skeleton, fk=False)  # joint values need no FK
        frames.append({"frame": frame, "joints": skeleton.joint_values()})
        if progress is not None:
            progress(i + 1, len(targets))
    model.write_back(skeleton)  # the last frame's pose, FK current
    align_quaternion_signs(frames)
    return BakeResult(records, frames, name, "spec", time.perf_counter() - start, kwargs)


def summary_line(result: BakeResult) -> str:
    """One line: frames, converged, max/median errors (m, rad), wall time, method."""
    recs = result.records
    n = len(recs)
    if n == 0:
        return "dhik bake: 0 frames"
    pe = [r.position_error for r in recs]
    oe = [r.orientation_error for r in recs]
    unconverged = n - result.converged_count
    verdict = "all converged" if unconverged == 0 else f"{unconverged} NOT converged"
    return (
        f"dhik bake: {n} frames, {result.converged_count}/{n} converged ({verdict}), "
        f"position error max {max(pe):.3g} m median {statistics.median(pe):.3g} m, "
        f"orientation error max {max(oe):.3g} rad median {statistics.median(oe):.3g} rad, "
        f"effector {result.effector}, method {result.method}, {result.wall_time:.2f} s"
    )
