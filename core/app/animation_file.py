"""SPEC 3.3's animation.json: read and validate it, write it (atomically, a block of
frames at a time), and hold it as arrays (``AnimationColumns``, ``ColumnFrames``).

Angles in radians, displacements in metres, quaternions ``[w, x, y, z]`` (the
authoritative value of a spherical joint: its ``euler`` is informative, DECISIONS.md).
Every problem raises one ``DhikError`` naming the file and the JSON path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO, overload

import numpy as np
from numpy.typing import NDArray

from ..model.definition import (
    ANIMATED_TYPES,
)
from .fields import MAX_FRAME, PLAIN_NUMBERS
from .fields import (
    frame_number as _frame_number,
)
from .fields import (
    joint_type as _joint_type,
)
from .fields import (
    number as _number,
)
from .fields import (
    object as _object,
)
from .fields import (
    quaternion as _quaternion,
)
from .fields import (
    required as _required,
)
from .fields import (
    vec3 as _vec3,
)
from .jsonio import (
    atomic_write_text,
    dumps_json,
    fail,
    json_string,
    key_path,
    kind_of,
    load_json,
    show,
)


def _parse_joint_value(entry: Any, source: str, path: str) -> dict:
    _object(entry, source, path)
    joint_type = _joint_type(_required(entry, "type", source, path), ANIMATED_TYPES, source, path)
    if joint_type == "revolute":
        angle = _number(_required(entry, "angle", source, path), source, f"{path}.angle")
        return {"type": "revolute", "angle": angle}
    if joint_type == "prismatic":
        d = _required(entry, "displacement", source, path)
        return {"type": "prismatic", "displacement": _number(d, source, f"{path}.displacement")}
    euler = _vec3(_required(entry, "euler", source, path), source, f"{path}.euler")
    q = _required(entry, "quaternion", source, path)
    quaternion = _quaternion(q, source, f"{path}.quaternion", normalise=False)
    return {"type": "spherical", "euler": list(euler), "quaternion": list(quaternion)}


def animation_fps(data: Any, source: str = "animation.json") -> float | None:
    """The optional ``"fps"`` of parsed animation.json ``data`` (DECISIONS: the frame rate
    the frames were baked at, a number > 0); None when absent (unknown)."""
    if not isinstance(data, Mapping) or "fps" not in data:
        return None
    fps = _number(data["fps"], source, "fps")
    if fps <= 0:
        fail(source, "fps", f"must be a number > 0 (frames per second), got {show(data['fps'])}")
    return fps


def parse_animation(data: Any, source: str = "animation.json") -> list[dict]:
    """Validate parsed animation.json ``data`` (SPEC 3.3) into its list of frames; an
    ``"fps"`` beside the frames is checked too (:func:`animation_fps`).

    Each frame is ``{"frame": int, "joints": {name: entry}}`` with entries
    ``{"type": "revolute", "angle": rad}``, ``{"type": "prismatic",
    "displacement": m}`` or ``{"type": "spherical", "euler": [3 rad],
    "quaternion": [w, x, y, z]}``; frames strictly increasing. Numbers are floats.
    """
    _object(data, source, "", 'a JSON object with "frames"')
    items = _required(data, "frames", source, "")
    animation_fps(data, source)
    if not isinstance(items, (list, ColumnFrames)):
        fail(source, "frames", f"must be an array of frames, got {kind_of(items)}")
    frames: list[dict] = []
    previous: int | None = None
    for i, item in enumerate(items):
        path = f"frames[{i}]"
        _object(item, source, path)
        frame = _frame_number(_required(item, "frame", source, path), source, f"{path}.frame")
        if previous is not None and frame <= previous:
            fail(
                source,
                f"{path}.frame",
                f"{frame} does not follow the previous frame {previous}; "
                "frames must be strictly increasing",
            )
        previous = frame
        values = _object(
            _required(item, "joints", source, path),
            source,
            f"{path}.joints",
            "an object mapping joint names to values",
        )
        joints = {
            name: _parse_joint_value(entry, source, key_path(f"{path}.joints", name))
            for name, entry in values.items()
        }
        frames.append({"frame": frame, "joints": joints})
    return frames


#: How far (rad) a spherical joint's ``euler`` may lie from its ``quaternion`` before
#: ``dhik validate`` warns (DECISIONS: the quaternion is authoritative).
EULER_TOLERANCE = 1e-6


def euler_quaternion_mismatches(frames: Sequence[dict]) -> tuple[int, str, float]:
    """Spherical entries whose ``euler`` (file convention ``Rz·Ry·Rx``, rad) is another
    rotation than their ``quaternion`` by more than :data:`EULER_TOLERANCE` (rad): how
    many, the JSON path of the worst and its angle (rad). ``(0, "", 0.0)`` when none."""
    paths: list[str] = []
    eulers: list[Sequence[float]] = []
    quats: list[Sequence[float]] = []
    for i, fr in enumerate(frames):
        for name, e in fr["joints"].items():
            if e["type"] == "spherical":
                paths.append(key_path(f"frames[{i}].joints", name))
                eulers.append(e["euler"])
                quats.append(e["quaternion"])
    if not paths:
        return 0, "", 0.0
    half = np.asarray(eulers, dtype=float) / 2
    cx, cy, cz = np.cos(half).T
    sx, sy, sz = np.sin(half).T
    from_euler = np.stack([cz * cy * cx + sz * sy * sx, cz * cy * sx - sz * sy * cx,
                           cz * sy * cx + sz * cy * sx, sz * cy * cx - cz * sy * sx], axis=1)
    q = np.asarray(quats, dtype=float)
    q = q / np.abs(q).max(axis=1, keepdims=True)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    dot = np.abs(np.einsum("ij,ij->i", from_euler, q))
    # the angle between the two rotations, accurate for small angles too
    gap = np.linalg.norm(from_euler - q * np.where(np.einsum("ij,ij->i", from_euler, q) < 0,
                                                   -1.0, 1.0)[:, None], axis=1)
    angle = np.where(dot < 0.9, 2 * np.arccos(np.minimum(dot, 1.0)), 4 * np.arcsin(gap / 2))
    bad = angle > EULER_TOLERANCE
    if not bad.any():
        return 0, "", 0.0
    worst = int(np.argmax(angle))
    return int(bad.sum()), paths[worst], float(angle[worst])


def load_animation(path: str | os.PathLike) -> list[dict]:
    """Read and validate an animation.json file; returns its frames."""
    return parse_animation(load_json(path), str(path))


def save_animation(frames: Sequence[dict], path: str | os.PathLike,
                   fps: float | None = None) -> None:
    """Validate ``frames`` (DhikError naming ``path``) and write ``{"frames": ...}`` atomically
    (``{"fps": fps, "frames": ...}`` when the frame rate is given)."""
    atomic_write_text(path, animation_writer(frames, str(path), fps))


def animation_writer(frames: Sequence[dict], source: str,
                     fps: float | None = None) -> Callable[[TextIO], object]:
    """Check ``frames`` (and ``fps``: > 0) now, DhikError naming ``source``; the function
    that then writes animation.json's text to a file.

    Frames that all name the same joints in the same order (a bake's) are checked and
    written as arrays (:class:`AnimationColumns`); any other list goes through
    :func:`parse_animation` and the generic writer. Both write the same bytes.
    """
    head: dict[str, Any] = {} if fps is None else {"fps": float(fps)}
    animation_fps(head, source)
    if isinstance(frames, ColumnFrames):
        columns: AnimationColumns | None = frames.columns
    else:
        columns = AnimationColumns.from_frames(frames)
    if columns is None or columns.problem():
        clean = parse_animation({"frames": list(frames)}, source)
        text = dumps_json({**head, "frames": clean}, source) + "\n"
        return lambda f: f.write(text)
    return columns.writer(fps)


class AnimationColumns:
    """A whole animation.json as arrays: frame numbers (F,), the joints' names and types
    in file order, and their values (F, W): one column per revolute angle (rad) or
    prismatic displacement (m), seven per spherical joint (the file's XYZ ``euler``, rad,
    then its ``quaternion`` [w, x, y, z]). Written frame block by frame block
    from a text template: no per-frame objects, and the bytes of :func:`atomic_write_json`.
    """

    WIDTH = {"revolute": 1, "prismatic": 1, "spherical": 7}
    BLOCK = 4096  # frames formatted per write

    def __init__(self, frames: NDArray[np.int64], names: Sequence[str], kinds: Sequence[str],
                 values: NDArray[np.float64]) -> None:
        self.frames = np.asarray(frames, dtype=np.int64)
        self.names = list(names)
        self.kinds = list(kinds)
        self.values = np.asarray(values, dtype=float).reshape(len(self.frames), -1)

    @classmethod
    def from_frames(cls, frames: Sequence[Any]) -> AnimationColumns | None:
        """The columns of animation frames (``{"frame", "joints": {name: entry}}``) when
        every frame names the same joints in the same order with the same types and each
        value is a plain number; None otherwise (the caller validates the slow way)."""
        if not frames:
            return None
        try:
            first = frames[0]["joints"]
            names = list(first)
            kinds = [first[n]["type"] for n in names]
            if any(k not in cls.WIDTH for k in kinds):
                return None
            numbers = [fr["frame"] for fr in frames]
            flat: list[Any] = []
            add, extend = flat.append, flat.extend
            for fr in frames:
                joints = fr["joints"]
                if list(joints) != names:
                    return None
                for name, kind in zip(names, kinds, strict=True):
                    e = joints[name]
                    if e["type"] != kind:
                        return None
                    if kind == "revolute":
                        add(e["angle"])
                    elif kind == "prismatic":
                        add(e["displacement"])
                    else:
                        eu, q = e["euler"], e["quaternion"]
                        if len(eu) != 3 or len(q) != 4:
                            return None
                        extend(eu)
                        extend(q)
        except (KeyError, TypeError, IndexError, AttributeError):
            return None
        if not set(map(type, numbers)) <= {int} or not set(map(type, flat)) <= PLAIN_NUMBERS:
            return None
        return cls(np.array(numbers, dtype=np.int64), names, kinds,
                   np.array(flat, dtype=float).reshape(len(frames), -1))

    def problem(self) -> bool:
        """Whether anything breaks SPEC 3.3 (then :func:`parse_animation` names it): frame
        numbers not increasing or out of 0..MAX_FRAME, a non-finite value, a quaternion
        that is zero or too large to normalise."""
        f = self.frames
        if len(f) and (f[0] < 0 or f[-1] > MAX_FRAME or np.any(np.diff(f) <= 0)):
            return True
        if not np.isfinite(self.values).all():
            return True
        col = 0
        for kind in self.kinds:
            if kind == "spherical":
                q = self.values[:, col + 3:col + 7]
                m = np.abs(q).max(axis=1)
                if np.any(m == 0) or not np.isfinite(m * np.sqrt(((q / m[:, None]) ** 2)
                                                                 .sum(axis=1))).all():
                    return True
            col += self.WIDTH[kind]
        return False

    def frame(self, i: int) -> dict[str, Any]:
        """Frame ``i`` as its SPEC 3.3 dict (``{"frame": int, "joints": {...}}``)."""
        row = self.values[i].tolist()
        joints: dict[str, Any] = {}
        col = 0
        for name, kind in zip(self.names, self.kinds, strict=True):
            if kind == "spherical":
                joints[name] = {"type": kind, "euler": row[col:col + 3],
                                "quaternion": row[col + 3:col + 7]}
            elif kind == "revolute":
                joints[name] = {"type": kind, "angle": row[col]}
            else:
                joints[name] = {"type": kind, "displacement": row[col]}
            col += self.WIDTH[kind]
        return {"frame": int(self.frames[i]), "joints": joints}

    def column(self, name: str) -> NDArray[np.float64]:
        """Joint ``name``'s values over the frames: angles (F,) (rad), displacements (F,)
        (m) or, for a spherical joint, quaternions (F, 4) ``[w, x, y, z]`` (a view)."""
        col = 0
        for n, kind in zip(self.names, self.kinds, strict=True):
            if n == name:
                return self.values[:, col + 3:col + 7] if kind == "spherical" else \
                    self.values[:, col]
            col += self.WIDTH[kind]
        raise KeyError(name)

    def align_quaternion_signs(self) -> None:
        """Negate spherical quaternions so that each has a non-negative dot product with the
        previous frame's (as aligned): what ``bake.align_quaternion_signs`` does to dicts.
        Every spherical joint at once (columns (F, S, 4))."""
        starts, col = [], 0
        for kind in self.kinds:
            if kind == "spherical":
                starts.append(col + 3)
            col += self.WIDTH[kind]
        if not starts or len(self.frames) < 2:
            return
        cols = (np.array(starts)[:, None] + np.arange(4)).ravel()
        q = self.values[:, cols].reshape(len(self.frames), len(starts), 4)
        # a joint whose quaternion never changes never flips (most of a big rig's, which
        # keep their rest pose): the others alone
        moving = np.flatnonzero((q != q[:1]).any(axis=(0, 2)))
        if moving.size == 0:
            return
        cols = (np.array(starts)[moving, None] + np.arange(4)).ravel()
        q = q[:, moving]
        dot = np.einsum("fsi,fsi->fs", q[1:], q[:-1])
        zeros = np.zeros((1, len(moving)), dtype=np.int64)
        flips = np.concatenate((zeros, np.cumsum(dot < 0.0, axis=0)))
        # a dot of exactly 0 is not flipped whatever came before: parity restarts
        zero = np.concatenate((np.ones_like(zeros, dtype=bool), dot == 0.0))
        base = np.maximum.accumulate(np.where(zero, flips, 0), axis=0)
        negate = (flips - base) % 2 == 1
        q[negate] = -q[negate]
        self.values[:, cols] = q.reshape(len(self.frames), -1)

    def template(self) -> str:
        """One frame's text with ``%d`` for the frame and ``%r`` for each value."""
        entries = []
        pad = " " * 10
        for name, kind in zip(self.names, self.kinds, strict=True):
            if kind == "spherical":
                body = (f'{pad}"type": "spherical",\n{pad}"euler": [%r, %r, %r],\n'
                        f'{pad}"quaternion": [%r, %r, %r, %r]')
            else:
                field = "angle" if kind == "revolute" else "displacement"
                body = f'{pad}"type": "{kind}",\n{pad}"{field}": %r'
            entries.append(f"        {json_string(name).replace('%', '%%')}: {{\n{body}\n"
                           "        }")
        joints = "{\n" + ",\n".join(entries) + "\n      }" if entries else "{}"
        return f'    {{\n      "frame": %d,\n      "joints": {joints}\n    }}'

    def write(self, path: str | os.PathLike, fps: float | None = None) -> None:
        """Write animation.json atomically (the frames are not checked again)."""
        atomic_write_text(path, self.writer(fps))

    def writer(self, fps: float | None = None) -> Callable[[TextIO], object]:
        """The function that writes this animation.json's text (``"fps"`` first when
        given) to a file: the bytes :func:`dumps_json` gives the same data."""
        head = "" if fps is None else f'  "fps": {json.dumps(float(fps))},\n'
        if not len(self.frames):
            text = "{\n" + head + '  "frames": []\n}\n'
            return lambda f: f.write(text)
        template = self.template()

        def write(f: TextIO) -> None:
            f.write("{\n" + head + '  "frames": [\n')
            for start in range(0, len(self.frames), self.BLOCK):
                stop = start + self.BLOCK
                rows = self.values[start:stop].tolist()
                text = ",\n".join([template % (n, *row) for n, row in
                                    zip(self.frames[start:stop].tolist(), rows, strict=True)])
                f.write(",\n" + text if start else text)
            f.write("\n  ]\n}\n")

        return write


class ColumnFrames(Sequence[dict[str, Any]]):
    """The frames of an :class:`AnimationColumns` as a sequence of SPEC 3.3 dicts, each
    built when asked for (a bake of a million frames holds arrays, not dicts);
    :func:`save_animation` writes the columns directly."""

    def __init__(self, columns: AnimationColumns) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns.frames)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self.columns.frame(k) for k in range(len(self))[i]]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self.columns.frame(i % len(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other,
                                                                            strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]
