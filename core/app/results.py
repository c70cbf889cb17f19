"""What a bake gives back (SPEC 6): per-frame records, the animation frames, the summary.

Errors in metres and radians; frames are the clip's frame numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray


@dataclass
class FrameRecord:
    """One solved frame: errors in metres and radians."""

    frame: int
    converged: bool
    iterations: int
    position_error: float
    orientation_error: float
    # per effector {"position_error": m, "orientation_error": rad}; the fields above are
    # the maxima over the effectors (a part with weight 0 does not count)
    effector_errors: dict[str, dict[str, float]] = field(default_factory=dict)


class RecordTable(Sequence[FrameRecord]):
    """Every frame's record as arrays (frame numbers, converged, iterations, errors in m
    and rad, per effector); item ``i`` is a :class:`FrameRecord` built when asked for."""

    def __init__(self, frames: NDArray[np.int64], converged: NDArray[np.bool_],
                 iterations: NDArray[np.int64], errors: NDArray[np.float64],
                 per_effector: NDArray[np.float64], effectors: Sequence[str]) -> None:
        self.frame_numbers = frames
        self.converged = converged
        self.iterations = iterations
        self.errors = errors  # (F, 2): position (m), orientation (rad), max over effectors
        self.per_effector = per_effector  # (F, E, 2)
        self.effectors = list(effectors)

    def __len__(self) -> int:
        return len(self.frame_numbers)

    def record(self, i: int) -> FrameRecord:
        per = self.per_effector[i].tolist()
        return FrameRecord(
            int(self.frame_numbers[i]), bool(self.converged[i]), int(self.iterations[i]),
            float(self.errors[i, 0]), float(self.errors[i, 1]),
            {name: {"position_error": pe, "orientation_error": oe}
             for name, (pe, oe) in zip(self.effectors, per, strict=True)})

    def as_json(self) -> list[dict[str, Any]]:
        """Every record as ``dataclasses.asdict`` of its FrameRecord gives it (same keys,
        order and values), straight from the arrays."""
        names = self.effectors
        return [
            {"frame": f, "converged": c, "iterations": it, "position_error": pe,
             "orientation_error": oe,
             "effector_errors": {n: {"position_error": a, "orientation_error": b}
                                 for n, (a, b) in zip(names, per, strict=True)}}
            for f, c, it, (pe, oe), per in zip(
                self.frame_numbers.tolist(), self.converged.tolist(),
                self.iterations.tolist(), self.errors.tolist(), self.per_effector.tolist(),
                strict=True)]

    @overload
    def __getitem__(self, i: int) -> FrameRecord: ...
    @overload
    def __getitem__(self, i: slice) -> list[FrameRecord]: ...
    def __getitem__(self, i: int | slice) -> FrameRecord | list[FrameRecord]:
        if isinstance(i, slice):
            return [self.record(k) for k in range(len(self))[i]]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self.record(i % len(self))


def record_arrays(records: Sequence[FrameRecord], effectors: int
                  ) -> tuple[NDArray[np.int64], NDArray[np.bool_],
                             NDArray[np.float64]]:  # fmt: skip
    """``(frame numbers (F,), converged (F,), per-effector errors (F, E, 2): position m,
    orientation rad)`` of a bake's records (a RecordTable's arrays as they are; ``E`` =
    ``effectors`` for records built one by one)."""
    if isinstance(records, RecordTable):
        return (np.asarray(records.frame_numbers), np.asarray(records.converged, dtype=bool),
                np.asarray(records.per_effector, dtype=float))
    frames = np.array([r.frame for r in records], dtype=np.int64)
    converged = np.array([r.converged for r in records], dtype=bool)
    per = np.zeros((len(records), effectors, 2))
    for i, r in enumerate(records):
        errors = list(r.effector_errors.values()) or [
            {"position_error": r.position_error, "orientation_error": r.orientation_error}]
        for e, err in enumerate(errors):
            per[i, e] = err["position_error"], err["orientation_error"]
    return frames, converged, per


@dataclass
class BakeResult:
    """Per-frame records, the animation.json frames, and what ran.

    A bake's ``records`` and ``frames`` are a :class:`RecordTable` and a
    :class:`~.formats.ColumnFrames`: arrays, with each frame's record or dict built when
    asked for (no per-frame objects for a long bake that is only written out)."""

    records: Sequence[FrameRecord]
    frames: Sequence[dict[str, Any]]
    effector: str
    method: str = "spec"
    wall_time: float = 0.0  # seconds
    settings: dict[str, Any] = field(default_factory=dict)
    effectors: list[str] = field(default_factory=list)  # every effector, in track order
    # frames (numbers) whose joints jump from the frame before: no continuous path
    # through the targets was found there (a target path that forces a flip)
    jumps: list[int] = field(default_factory=list)

    @property
    def converged_count(self) -> int:
        if isinstance(self.records, RecordTable):
            return int(self.records.converged.sum())
        return sum(r.converged for r in self.records)

    def report(self) -> dict[str, Any]:
        """The JSON report: summary figures and every frame's record."""
        return {
            "effector": self.effector,
            "effectors": self.effectors or [self.effector],
            "method": self.method,
            "settings": self.settings,
            "frames": len(self.records),
            "converged": self.converged_count,
            "wall_time_s": self.wall_time,
            "jumps": self.jumps,
            "records": (self.records.as_json() if isinstance(self.records, RecordTable)
                        else [asdict(r) for r in self.records]),
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


def summary_line(result: BakeResult) -> str:
    """One line: frames, converged, max/median errors (m, rad), wall time, method."""
    recs = result.records
    n = len(recs)
    if n == 0:
        return "dhik bake: 0 frames"
    if isinstance(recs, RecordTable):  # arrays: no list of a million floats
        pe, oe = recs.errors[:, 0], recs.errors[:, 1]
    else:
        pe = np.array([r.position_error for r in recs], dtype=float)
        oe = np.array([r.orientation_error for r in recs], dtype=float)
    unconverged = n - result.converged_count
    verdict = "all converged" if unconverged == 0 else f"{unconverged} NOT converged"
    if result.jumps:
        shown = ", ".join(map(str, result.jumps[:5])) + (", ..." if len(result.jumps) > 5
                                                         else "")
        verdict += f"; {len(result.jumps)} jumps with no continuous path (frames {shown})"
    return (
        f"dhik bake: {n} frames, {result.converged_count}/{n} converged ({verdict}), "
        f"position error max {pe.max():.3g} m median {float(np.median(pe)):.3g} m, "
        f"orientation error max {oe.max():.3g} rad median {float(np.median(oe)):.3g} rad, "
        f"{'effectors' if len(result.effectors) > 1 else 'effector'} {result.effector}, "
        f"method {result.method}, {result.wall_time:.2f} s"
    )
