"""SPEC 3: read, validate and write skeleton.json, targets.json and animation.json.

Pure data: no joint objects. Every problem in a file raises one ``DhikError``
whose message names the file and the JSON path, e.g.
``skeleton.json: joints[3].axis: must be a non-zero 3-vector``. The file name
in messages is the path exactly as the caller gave it (``str(path)``).

Units: offsets, positions and displacements in metres; joint angles, limits of
revolute/spherical joints and animation Euler angles in radians; targets.json
Euler angles in degrees. Quaternions are ``[w, x, y, z]``.

Choices beyond SPEC/DECISIONS (documented here for the other modules):

- Only ``name`` and ``type`` are required for every joint (plus ``axis`` for
  revolute/prismatic); ``offset`` defaults to ``[0, 0, 0]``, ``parent`` to
  null, ``limits`` and ``quaternion`` to null.
- A field that does not apply to a joint's type is ignored, not rejected:
  ``axis`` on fixed/spherical joints, ``limits`` on fixed joints and
  ``quaternion`` on non-fixed joints. Unknown fields are ignored too.
- The root (the one joint with ``parent`` null, named by ``root_name``) may be
  of any type (DECISIONS): its parent is the fixed world frame, which is what
  SPEC 5.4 calls the FixedJoint root. A planar arm or a SCARA has a revolute root.
- ``axis`` and a fixed joint's ``quaternion`` are normalised on load; a vector
  whose norm is already within 1e-12 of 1 is kept as it is, so that
  ``parse_skeleton(skeleton_to_dict(d)) == d`` holds exactly.
- Animation quaternions are checked (4 finite numbers, non-zero) but returned
  as written; consumers normalise them.
- Duplicate keys inside one JSON object are an error (JSON would silently keep
  the last one).
"""

from __future__ import annotations

import heapq
import json
import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO, overload

import numpy as np
from numpy.typing import NDArray

from ..model.definition import (
    ANIMATED_TYPES,
    JOINT_TYPES,
    JointDef,
    Keyframe,
    Range,
    SkeletonDef,
    Vec3,
)
from .jsonio import (
    atomic_write_json,
    atomic_write_text,
    dumps_json,
    fail,
    json_string,
    key_path,
    kind_of,
    load_json,
    show,
)

_PLAIN_NUMBERS = {float, int, np.float64}

_UNIT_TOLERANCE = 1e-12
#: The last frame a targets.json or animation.json may name: Blender's last frame
#: (MAXFRAME). Every frame from 0 to the last keyframe is baked, so this also bounds a bake.
MAX_FRAME = 1_048_574
#: The largest offset component (skeleton.json) and target position component
#: (targets.json), metres: beyond it, squared lengths in the solvers and FK overflow.
MAX_LENGTH = 1e9
#: The most joints a skeleton.json may hold. A chain of 8,000 revolute joints takes about
#: 30 s to bake 3 frames on a 2-core machine (0.6 GB), 16,000 a minute (1.1 GB); far
#: beyond any rig or robot (a Blender face rig has a few hundred bones).
MAX_JOINTS = 10_000


# --------------------------------------------------------------------------- helpers


def _is_array(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, (list, tuple))


def _required(obj: Mapping, key: str, source: str, path: str) -> Any:
    if key not in obj:
        fail(source, key_path(path, key), "required field is missing")
    return obj[key]


def _object(value: Any, source: str, path: str, what: str = "an object") -> Mapping:
    if not isinstance(value, Mapping):
        fail(source, path, f"must be {what}, got {kind_of(value)}")
    return value


def _number(value: Any, source: str, path: str) -> float:
    """A finite JSON number (booleans are not numbers) as a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        fail(source, path, f"must be a number, got {show(value)}")
    try:
        x = float(value)
    except OverflowError:
        x = math.inf
    if not math.isfinite(x):
        fail(source, path, f"must be a finite number, got {show(value)}")
    return x


def _frame_number(value: Any, source: str, path: str) -> int:
    """A frame: an integer from 0 to MAX_FRAME (3.0 and true are not integers)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 0:
        fail(source, path, f"must be an integer >= 0, got {show(value)}")
    if int(value) > MAX_FRAME:
        fail(source, path, f"must be at most {MAX_FRAME} (Blender's last frame), got {value}")
    return int(value)


def _name(value: Any, source: str, path: str) -> str:
    """A joint name: a non-empty string without NUL (C strings, Blender's bone names and
    numpy's string arrays end at NUL: two names would silently become one)."""
    if not isinstance(value, str) or not value:
        fail(source, path, f"must be a non-empty string, got {show(value)}")
    if "\0" in value:
        fail(source, path, f"must not hold a NUL character, got {show(value)}")
    return value


def _joint_type(value: Any, allowed: tuple[str, ...], source: str, path: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        expected = ", ".join(f'"{t}"' for t in allowed)
        problem = f"unknown joint type {show(value)}; expected one of {expected}"
        fail(source, f"{path}.type", problem)
    return value


def _numbers(value: Any, n: int, source: str, path: str, shape: str) -> tuple[float, ...]:
    """``n`` finite numbers; ``shape`` describes the expected value in messages."""
    if not _is_array(value) or len(value) != n:
        fail(source, path, f"must be {shape}, got {show(value)}")
    return tuple(_number(x, source, f"{path}[{i}]") for i, x in enumerate(value))


def _vec3(value: Any, source: str, path: str) -> Vec3:
    return _numbers(value, 3, source, path, "an array of 3 numbers")  # type: ignore[return-value]


def _length3(value: Any, source: str, path: str) -> Vec3:
    """A 3-vector of lengths (m), each within +-MAX_LENGTH."""
    v = _vec3(value, source, path)
    for i, x in enumerate(v):
        if abs(x) > MAX_LENGTH:
            fail(source, f"{path}[{i}]", f"must be within +-{MAX_LENGTH:g} m, got {show(x)}")
    return v


def _normalised(v: tuple[float, ...]) -> tuple[float, ...] | None:
    """``v`` scaled to unit length (kept if already unit), None if zero."""
    norm = math.hypot(*v)
    if norm == 0.0 or not math.isfinite(norm):
        return None
    if abs(norm - 1.0) <= _UNIT_TOLERANCE:
        return v
    return tuple(x / norm for x in v)


def _axis(value: Any, source: str, path: str) -> Vec3:
    shape = "a non-zero 3-vector"
    unit = _normalised(_numbers(value, 3, source, path, shape))
    if unit is None:
        fail(source, path, f"must be {shape}")
    return unit  # type: ignore[return-value]


def _quaternion(value: Any, source: str, path: str, normalise: bool) -> tuple[float, ...]:
    shape = "a non-zero quaternion [w, x, y, z]"
    q = _numbers(value, 4, source, path, shape)
    unit = _normalised(q)
    if unit is None:
        fail(source, path, f"must be {shape}")
    return unit if normalise else q


def _range(value: Any, source: str, path: str) -> Range:
    """``[min, max]`` with min <= max (equal bounds lock the joint)."""
    lo, hi = _numbers(value, 2, source, path, "null or [min, max]")
    if lo > hi:
        fail(source, path, f"min {show(value[0])} is greater than max {show(value[1])}")
    return (lo + 0.0, hi + 0.0)  # -0.0 as 0.0: [0.0, -0.0] is the locked range [0, 0]


def _limits(value: Any, joint_type: str, source: str, path: str):
    if value is None or joint_type == "fixed":
        return None
    if joint_type != "spherical":
        return _range(value, source, path)
    if not _is_array(value) or len(value) != 3:
        fail(
            source,
            path,
            f"must be null or an array of 3 items, each [min, max] or null, got {show(value)}",
        )
    return tuple(
        None if v is None else _range(v, source, f"{path}[{i}]") for i, v in enumerate(value)
    )


# --------------------------------------------------------------------------- JSON files


def _parse_joint(item: Any, source: str, path: str) -> JointDef:
    _object(item, source, path)
    name = _name(_required(item, "name", source, path), source, f"{path}.name")
    joint_type = _joint_type(_required(item, "type", source, path), JOINT_TYPES, source, path)
    offset = (0.0, 0.0, 0.0)
    if "offset" in item:
        offset = _length3(item["offset"], source, f"{path}.offset")
    parent = item.get("parent")
    if parent is not None:
        parent = _name(parent, source, f"{path}.parent")
    axis = None
    if joint_type in ("revolute", "prismatic"):
        if "axis" not in item:
            fail(source, f"{path}.axis", f"required for a {joint_type} joint")
        axis = _axis(item["axis"], source, f"{path}.axis")
    limits = _limits(item.get("limits"), joint_type, source, f"{path}.limits")
    quaternion = None
    if joint_type == "fixed" and item.get("quaternion") is not None:
        quaternion = _quaternion(item["quaternion"], source, f"{path}.quaternion", normalise=True)
    return JointDef(name, joint_type, offset, parent, axis, limits,
                    quaternion)  # type: ignore[arg-type]  # 4 numbers


def _parents_first(joints: list[JointDef], root: int, source: str) -> tuple[JointDef, ...]:
    """Topological order from ``root``, earliest file position first among ready joints."""
    index = {j.name: i for i, j in enumerate(joints)}
    children: dict[int, list[int]] = {}
    for i, j in enumerate(joints):
        if j.parent is not None:
            children.setdefault(index[j.parent], []).append(i)
    order: list[int] = []
    ready = [root]
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for child in children.get(i, ()):
            heapq.heappush(ready, child)
    if len(order) < len(joints):  # the rest hang off a cycle: walk up from the first one
        placed = set(order)
        seen: dict[int, int] = {}  # joint index -> step of the walk
        i = min(k for k in range(len(joints)) if k not in placed)
        while i not in seen:
            seen[i] = len(seen)
            i = index[joints[i].parent]  # type: ignore[index]
        cycle = list(seen)[seen[i] :]
        start = cycle.index(min(cycle))
        cycle = cycle[start:] + cycle[:start]
        names = [joints[k].parent for k in cycle]  # each joint's parent: walk is child -> parent
        text = " -> ".join(show(n) for n in [joints[cycle[0]].name, *names])
        fail(source, f"joints[{cycle[0]}].parent", f"parent cycle: {text}")
    return tuple(joints[i] for i in order)


def parse_skeleton(data: Any, source: str = "skeleton.json") -> SkeletonDef:
    """Validate parsed skeleton.json ``data`` (SPEC 3.1) into a SkeletonDef."""
    _object(data, source, "", 'a JSON object with "root_name" and "joints"')
    root_name = _name(_required(data, "root_name", source, ""), source, "root_name")
    items = _required(data, "joints", source, "")
    if not isinstance(items, list):
        fail(source, "joints", f"must be an array of joints, got {kind_of(items)}")
    if not items:
        fail(source, "joints", "must contain at least one joint")
    if len(items) > MAX_JOINTS:
        fail(source, "joints", f"{len(items):,} joints: a skeleton holds at most "
                               f"{MAX_JOINTS:,}")
    joints = [_parse_joint(item, source, f"joints[{i}]") for i, item in enumerate(items)]

    first: dict[str, int] = {}
    for i, j in enumerate(joints):
        if j.name in first:
            also = f"joints[{first[j.name]}]"
            fail(source, f"joints[{i}].name", f"duplicate name {show(j.name)} (also {also})")
        first[j.name] = i
    for i, j in enumerate(joints):
        if j.parent is not None and j.parent not in first:
            fail(source, f"joints[{i}].parent", f"unknown joint {show(j.parent)}")
    roots = [i for i, j in enumerate(joints) if j.parent is None]
    if not roots:
        fail(source, "joints", 'no root: exactly one joint must have "parent": null')
    if len(roots) > 1:
        fail(
            source,
            f"joints[{roots[1]}].parent",
            f"null or missing, but {show(joints[roots[0]].name)} is already the root; "
            "exactly one joint may have no parent",
        )
    root = roots[0]
    if root_name not in first:
        fail(source, "root_name", f"{show(root_name)} is not the name of a joint")
    if root_name != joints[root].name:
        fail(
            source,
            "root_name",
            f"{show(root_name)} is not the root; the joint with no parent is "
            f"{show(joints[root].name)}",
        )
    return SkeletonDef(root_name, _parents_first(joints, root, source))


def skeleton_to_dict(defn: SkeletonDef) -> dict:
    """The SPEC 3.1 JSON object of ``defn`` (``axis`` only for revolute/prismatic,
    ``limits`` only when set, ``quaternion`` only for fixed joints that have one)."""
    joints = []
    for j in defn.joints:
        item: dict[str, Any] = {
            "name": j.name,
            "type": j.type,
            "offset": [float(x) for x in j.offset],
            "parent": j.parent,
        }
        if j.type in ("revolute", "prismatic") and j.axis is not None:
            item["axis"] = [float(x) for x in j.axis]
        if j.type != "fixed" and j.limits is not None:
            lim: Any = j.limits  # spherical: 3 ranges or None; else one range
            if j.type == "spherical":
                item["limits"] = [None if r is None else [float(x) for x in r] for r in lim]
            else:
                item["limits"] = [float(lim[0]), float(lim[1])]
        if j.type == "fixed" and j.quaternion is not None:
            item["quaternion"] = [float(x) for x in j.quaternion]
        joints.append(item)
    return {"root_name": defn.root_name, "joints": joints}


def load_skeleton(path: str | os.PathLike) -> SkeletonDef:
    """Read and validate a skeleton.json file."""
    return parse_skeleton(load_json(path), str(path))


def save_skeleton(defn: SkeletonDef, path: str | os.PathLike) -> None:
    """Validate ``defn`` (DhikError naming ``path``) and write it atomically."""
    data = skeleton_to_dict(defn)
    parse_skeleton(data, str(path))
    atomic_write_json(path, data)


# --------------------------------------------------------------------------- targets.json


def _targets_fast(data: Any) -> list[Keyframe] | None:
    """The keyframes of well-formed targets.json ``data``, checked in bulk; None when
    anything is unusual (then :func:`parse_targets` checks item by item and names it)."""
    if not isinstance(data, list) or not data or {type(item) for item in data} != {dict}:
        return None
    try:
        frames = [item["frame"] for item in data]
        vectors = [item["pos"] for item in data] + [item["euler"] for item in data]
    except KeyError:
        return None
    if {type(f) for f in frames} != {int} or {type(v) for v in vectors} != {list} or \
            {len(v) for v in vectors} != {3}:
        return None
    flat = [x for v in vectors for x in v]
    if not {type(x) for x in flat} <= {float, int}:
        return None
    try:
        numbers = np.array(flat, dtype=float).reshape(2, len(data), 3)
    except OverflowError:  # an integer beyond float
        return None
    if not np.isfinite(numbers).all() or np.abs(numbers[0]).max() > MAX_LENGTH:
        return None
    if min(frames) < 0 or max(frames) > MAX_FRAME or len(set(frames)) != len(frames):
        return None
    pos, euler = numbers.tolist()
    keys = [Keyframe(f, tuple(p), tuple(e))
            for f, p, e in zip(frames, pos, euler, strict=True)]
    return sorted(keys, key=lambda k: k.frame)


def parse_targets(data: Any, source: str = "targets.json") -> list[Keyframe]:
    """Validate parsed targets.json ``data`` (SPEC 3.2): keyframes sorted by frame."""
    fast = _targets_fast(data)
    if fast is not None:
        return fast
    if not isinstance(data, list):
        fail(source, "", f"must be a JSON array of keyframes, got {kind_of(data)}")
    if not data:
        fail(source, "", "must contain at least one keyframe")
    keyframes: list[Keyframe] = []
    first: dict[int, int] = {}
    for i, item in enumerate(data):
        path = f"[{i}]"
        _object(item, source, path)
        frame = _frame_number(_required(item, "frame", source, path), source, f"{path}.frame")
        if frame in first:
            fail(source, f"{path}.frame", f"duplicate frame {frame} (also [{first[frame]}])")
        first[frame] = i
        pos = _length3(_required(item, "pos", source, path), source, f"{path}.pos")
        euler = _vec3(_required(item, "euler", source, path), source, f"{path}.euler")
        keyframes.append(Keyframe(frame, pos, euler))
    return sorted(keyframes, key=lambda k: k.frame)


def targets_to_list(keyframes: Sequence[Keyframe]) -> list[dict]:
    """The SPEC 3.2 JSON array of ``keyframes`` (in the given order)."""
    return [
        {
            "frame": int(k.frame),
            "pos": [float(x) for x in k.pos],
            "euler": [float(x) for x in k.euler],
        }
        for k in keyframes
    ]


def load_targets(path: str | os.PathLike) -> list[Keyframe]:
    """Read and validate a targets.json file; keyframes sorted by frame."""
    return parse_targets(load_json(path), str(path))


def save_targets(keyframes: Sequence[Keyframe], path: str | os.PathLike) -> None:
    """Validate ``keyframes`` (DhikError naming ``path``) and write them atomically."""
    data = targets_to_list(keyframes)
    parse_targets(data, str(path))
    atomic_write_json(path, data)


# --------------------------------------------------------------------------- animation.json


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
        if not set(map(type, numbers)) <= {int} or not set(map(type, flat)) <= _PLAIN_NUMBERS:
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
        previous frame's (as aligned): what ``bake.align_quaternion_signs`` does to dicts."""
        col = 0
        for kind in self.kinds:
            if kind == "spherical" and len(self.frames) > 1:
                q = self.values[:, col + 3:col + 7]
                dot = np.einsum("ij,ij->i", q[1:], q[:-1])
                flips = np.concatenate(([0], np.cumsum(dot < 0.0)))
                # a dot of exactly 0 is not flipped whatever came before: parity restarts
                zero = np.concatenate(([True], dot == 0.0))
                base = np.maximum.accumulate(np.where(zero, flips, 0))
                negate = (flips - base) % 2 == 1
                q[negate] = -q[negate]
            col += self.WIDTH[kind]

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


# --------------------------------------------------------------------------- detection


def detect_kind(data: Any, source: str = "input") -> str:
    """``"skeleton"`` (object with a ``joints`` array), ``"animation"`` (object with
    ``frames``) or ``"targets"`` (array); DhikError otherwise."""
    if isinstance(data, Mapping):
        if isinstance(data.get("joints"), list):
            return "skeleton"
        if "frames" in data:
            return "animation"
    elif isinstance(data, list):
        return "targets"
    fail(
        source,
        "",
        'not a dhik file: expected a skeleton (object with a "joints" array), '
        'targets (array of keyframes) or an animation (object with "frames")',
    )
