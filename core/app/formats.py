"""SPEC 3: read, validate and write skeleton.json, targets.json and animation.json.

animation.json lives in ``animation_file`` and the field checks in ``fields``; their
names are here too, so every format is one import away.

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
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..model.definition import (
    JOINT_TYPES,
    JointDef,
    Keyframe,
    SkeletonDef,
)
from . import fields
from .animation_file import (  # noqa: F401 (the formats' names, one import away)
    EULER_TOLERANCE,
    AnimationColumns,
    ColumnFrames,
    animation_fps,
    animation_writer,
    euler_quaternion_mismatches,
    load_animation,
    parse_animation,
    save_animation,
)
from .fields import MAX_FRAME, MAX_JOINTS, MAX_LENGTH
from .jsonio import (
    atomic_write_json,
    fail,
    kind_of,
    load_json,
    show,
)

__all__ = ["EULER_TOLERANCE", "MAX_FRAME", "MAX_JOINTS", "MAX_LENGTH", "AnimationColumns",
           "ColumnFrames", "animation_fps", "animation_writer", "detect_kind",
           "euler_quaternion_mismatches", "load_animation", "load_skeleton", "load_targets",
           "parse_animation", "parse_skeleton", "parse_targets", "save_animation",
           "save_skeleton", "save_targets", "skeleton_to_dict", "targets_to_list"]


def _parse_joint(item: Any, source: str, path: str) -> JointDef:
    fields.object(item, source, path)
    name = fields.name(fields.required(item, "name", source, path), source, f"{path}.name")
    joint_type = fields.joint_type(fields.required(item, "type", source, path), JOINT_TYPES,
                                   source, path)
    offset = (0.0, 0.0, 0.0)
    if "offset" in item:
        offset = fields.length3(item["offset"], source, f"{path}.offset")
    parent = item.get("parent")
    if parent is not None:
        parent = fields.name(parent, source, f"{path}.parent")
    axis = None
    if joint_type in ("revolute", "prismatic"):
        if "axis" not in item:
            fail(source, f"{path}.axis", f"required for a {joint_type} joint")
        axis = fields.axis(item["axis"], source, f"{path}.axis")
    limits = fields.limits(item.get("limits"), joint_type, source, f"{path}.limits")
    quaternion = None
    if joint_type == "fixed" and item.get("quaternion") is not None:
        quaternion = fields.quaternion(item["quaternion"], source, f"{path}.quaternion",
                                       normalise=True)
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
    fields.object(data, source, "", 'a JSON object with "root_name" and "joints"')
    root_name = fields.name(fields.required(data, "root_name", source, ""), source, "root_name")
    items = fields.required(data, "joints", source, "")
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
        fields.object(item, source, path)
        frame = fields.frame_number(fields.required(item, "frame", source, path), source,
                                    f"{path}.frame")
        if frame in first:
            fail(source, f"{path}.frame", f"duplicate frame {frame} (also [{first[frame]}])")
        first[frame] = i
        pos = fields.length3(fields.required(item, "pos", source, path), source, f"{path}.pos")
        euler = fields.vec3(fields.required(item, "euler", source, path), source, f"{path}.euler")
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
