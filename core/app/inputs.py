"""A bake's inputs as the engine takes them: effector tracks (targets, weights, chain
lengths, poles), merged on their frames, and each frame's driven joint values and poles.

Targets are world 4x4 matrices (metres); angles in radians; frames are clip frame numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from ..errors import DhikError
from ..model.definition import DOF
from ..model.skeleton import Skeleton
from ..rotations import quat_normalize, quat_to_euler_xyz
from ..solver.kinematics import Pole
from .trajectory import TargetTable

Target = tuple[int, NDArray[np.float64]]


@dataclass(frozen=True)
class EffectorTrack:
    """One effector's targets ``(frame, world 4x4)`` (metres) and its weights (>= 0).

    A weight of 0 ignores that part: ``rot_weight=0`` makes a position-only target.
    """

    name: str
    targets: Sequence[Target]
    pos_weight: float = 1.0
    rot_weight: float = 1.0
    # the bones the solve may move: the last ``chain_length`` joints of the path ending at
    # this effector, as Blender's IK constraint counts (0: up to the root)
    chain_length: int = 0
    # Blender's IK pole: ``(frame, world position (m))`` like the targets (held before the
    # first and after the last), and the angle (rad) about the first-joint-to-target line
    pole: Sequence[tuple[int, Sequence[float]]] | None = None
    pole_angle: float = 0.0



def check_tracks(
    skeleton: Skeleton, targets: Sequence[Target] | Sequence[EffectorTrack], effector: str | None
) -> list[EffectorTrack]:
    """The effector tracks of a simulate call, checked (DhikError on bad input)."""
    tracks: list[EffectorTrack]
    if targets and isinstance(targets[0], EffectorTrack):
        tracks = list(targets)  # type: ignore[arg-type]
        if effector is not None:
            raise DhikError("name the effectors in their tracks, not with effector=")
    else:
        name = effector or skeleton.default_effector()
        tracks = [EffectorTrack(name, targets)]  # type: ignore[arg-type]
    seen: set[str] = set()
    for t in tracks:
        skeleton.definition(t.name)
        if t.name in seen:
            raise DhikError(f"effector {t.name!r} has two target tracks")
        seen.add(t.name)
        weights = (t.pos_weight, t.rot_weight)
        if not all(math.isfinite(w) and w >= 0 for w in weights) or max(weights) == 0:
            raise DhikError(f"effector {t.name!r}: weights must be >= 0 and not both 0")
        if not t.targets:
            raise DhikError(f"effector {t.name!r} has no targets")
        if not isinstance(t.chain_length, int) or t.chain_length < 0:
            raise DhikError(f"effector {t.name!r}: chain length must be an integer >= 0")
    return tracks


def _xyz(v: Sequence[float]) -> tuple[float, float, float]:
    return float(v[0]), float(v[1]), float(v[2])


def _full_entry(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A driven joint's SPEC 3.3 entry with every field: a spherical joint's unit
    quaternion ``[w, x, y, z]`` and its XYZ Euler angles (rad) from it (DhikError when a
    value is missing or not finite)."""
    field_name = {"revolute": "angle", "prismatic": "displacement"}.get(entry["type"])
    if field_name is not None:
        value = entry.get(field_name)
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise DhikError(f"{where}: needs a finite {field_name!r}")
        return dict(entry)
    q = np.asarray(entry.get("quaternion", ()), dtype=float)
    if q.shape != (4,) or not np.all(np.isfinite(q)) or not 1e-12 < float(q @ q) < 1e300:
        raise DhikError(f"{where}: needs a non-zero finite 'quaternion' [w, x, y, z]")
    q = quat_normalize(q)
    return {"type": "spherical", "euler": [float(v) for v in quat_to_euler_xyz(q)],
            "quaternion": [float(v) for v in q]}


def _held(track: Sequence[tuple[int, Any]], numbers: list[int]) -> list[Any]:
    """Per frame of ``numbers`` the value of ``track`` (``(frame, value)`` pairs) at the
    latest frame at or before it; the first value before the first frame."""
    by_frame = dict(track)
    keys = sorted(by_frame)
    out, k = [], 0
    for frame in numbers:
        while k + 1 < len(keys) and keys[k + 1] <= frame:
            k += 1
        out.append(by_frame[keys[k]])
    return out


def frame_extras(
    skeleton: Skeleton,
    tracks: Sequence[EffectorTrack],
    numbers: list[int],
    driven: Sequence[tuple[int, Mapping[str, Mapping[str, Any]]]] | None,
) -> list[tuple[Mapping[str, Any] | None, list[Pole | None] | None]] | None:
    """Per frame the driven joint values and the poles (None when no track has either)."""
    if not driven and not any(t.pole for t in tracks):
        return None
    for t in tracks:
        if t.pole is not None:
            path = [t.name]
            above = skeleton.definition(t.name).parent
            while above is not None:
                path.append(above)
                above = skeleton.definition(above).parent
            if len(path[: t.chain_length or None]) < 3:
                raise DhikError(f"effector {t.name!r}: a pole needs a chain of 3 joints or "
                                "more (2 bones and the effector)")
            for frame, pos in t.pole:
                if len(pos) != 3 or not all(math.isfinite(float(v)) for v in pos):
                    raise DhikError(f"effector {t.name!r}: pole at frame {frame}: "
                                    "need 3 finite numbers (m)")
            if not math.isfinite(t.pole_angle):
                raise DhikError(f"effector {t.name!r}: pole angle must be finite (rad)")
    kinds = {d.name: DOF[d.type] for d in skeleton.defn.joints}
    checked: Mapping[str, Any] | None = None
    for frame, entries in driven or ():
        if entries is checked:  # a still body's frames share one mapping: checked once
            continue
        checked = entries
        for name, entry in entries.items():
            if name not in kinds:
                raise DhikError(f"driven values, frame {frame}: no joint {name!r}")
            want = {1: ("revolute", "prismatic"), 3: ("spherical",)}.get(kinds[name], ())
            if entry.get("type") not in want:
                raise DhikError(f"driven values, frame {frame}: joint {name!r} is not "
                                f"{entry.get('type')!r}")
    if driven:  # whole SPEC 3.3 entries: a spherical value may come as a quaternion alone
        full: list[tuple[int, Mapping[str, Any]]] = []
        last_in: Mapping[str, Any] | None = None
        last_out: Mapping[str, Any] = {}
        for frame, entries in driven:
            if entries is not last_in and entries != last_in:  # a still body repeats its
                # values (often as the same mapping): one full mapping for all
                last_in, last_out = entries, {
                    name: _full_entry(e, f"driven values, frame {frame}: joint {name!r}")
                    for name, e in entries.items()}
            full.append((frame, last_out))
        driven = full
    values = _held(driven, numbers) if driven else [None] * len(numbers)
    poles = [
        None if t.pole is None else [Pole(_xyz(pos), t.pole_angle)
                                     for pos in _held(t.pole, numbers)]
        for t in tracks
    ]
    rows: list[list[Pole | None] | None] = [
        None if all(p is None for p in poles) else
        [None if p is None else p[i] for p in poles] for i in range(len(numbers))
    ]
    return list(zip(values, rows, strict=True))


class _OneTrack(Sequence[list[NDArray[np.float64]]]):
    """Each frame's targets when one track's :class:`TargetTable` gives them all: a
    one-item list built when asked for (no per-frame objects held for a long bake)."""

    def __init__(self, matrices: NDArray[np.float64]) -> None:
        self.matrices = matrices

    def __len__(self) -> int:
        return len(self.matrices)

    @overload
    def __getitem__(self, i: int) -> list[NDArray[np.float64]]: ...
    @overload
    def __getitem__(self, i: slice) -> list[list[NDArray[np.float64]]]: ...
    def __getitem__(self, i: int | slice
                    ) -> list[NDArray[np.float64]] | list[list[NDArray[np.float64]]]:
        if isinstance(i, slice):
            return [[m] for m in self.matrices[i]]
        return [self.matrices[i]]


def merge_tracks(tracks: Sequence[EffectorTrack]) -> tuple[list[int], Sequence[list[Any]]]:
    """Frame numbers (the union of the tracks') and each frame's targets, track order.

    A track holds its first target before its first frame and its last after its last.
    """
    if len(tracks) == 1 and isinstance(tracks[0].targets, TargetTable):
        table = tracks[0].targets  # frames 0 .. last, every one
        return table.frame_numbers.tolist(), _OneTrack(table.matrices)
    numbers = sorted({frame for t in tracks for frame, _ in t.targets})
    per_track = [_held(t.targets, numbers) for t in tracks]
    return numbers, [list(row) for row in zip(*per_track, strict=True)]
