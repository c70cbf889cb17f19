"""Read an armature back as a SkeletonDef, and map its bones onto the core's joints.

A bone imported by dhik carries its joint in custom properties (exact). Any other
bone's joint is inferred from Blender's IK settings (README, "What export infers"),
in the bone's own axes whatever its rest orientation:

- several root bones hang below one fixed joint :data:`ORIGIN` at the armature origin
  (skeleton.json has exactly one root); a single root bone is the skeleton's root;
- a bone whose location channels are free (not connected, not all ``lock_location``)
  first gets three prismatic joints ``<bone>.tx``, ``.ty``, ``.tz`` along its rest
  frame's axes (where Blender's location channels live: pose = rest T(loc) R(rot) S;
  its parent's with Local Location off, :func:`location_frame`), a locked axis limited
  to ``[0, 0]``; a root bone with free location and rotation is a floating base
  (``.tx .ty .tz``, then an unlimited spherical joint);
- no free IK axis (``lock_ik_x/y/z`` all on): fixed;
- one free axis: revolute about that bone axis, limits from ``ik_min``/``ik_max``
  when ``use_ik_limit`` is on (exact, like Blender's revolute IK segment);
- two or three free axes: spherical. Without locks or limits its frame does not matter
  and it keeps the parent's. Otherwise a fixed joint named ``<bone>.rest`` (no bone)
  carries the bone's rest rotation, so the spherical joint's intrinsic XYZ angles are
  angles about bone axes: a locked axis is limited to ``[0, 0]``, an IK limit bounds its
  axis. X+Y free (Blender: X then Y twist) and Z+Y free (Z then Y twist, through a frame
  whose X is the bone's Z) are exact; X+Z free (Blender: swing without twist) and
  limits with three free axes (Blender: swing/twist ellipse) are approximate and named
  by :func:`skeleton_notes`;
- offset: head minus the parent's head in the parent joint's frame (metres).

Joints without a bone of their own (``.rest``, ``.tx``/``.ty``/``.tz``) belong to the
bone below them (:func:`joint_bones`): they count with it in a chain length and their
values live on its channels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import bpy
import numpy as np

from ..core.app.formats import parse_skeleton
from ..core.errors import DhikError
from ..core.model.definition import SkeletonDef
from ..core.rotations import matrix_to_quat, quat_normalize, quat_to_matrix
from .access import armature_data, pose_of
from .armature_build import (
    AXES,
    ORIGIN,
    PROP_AXIS,
    PROP_INDEX,
    PROP_LIMITS,
    PROP_LIMITS_XYZ,
    PROP_OFFSET,
    PROP_QUATERNION,
    PROP_TYPE,
    TRANSLATION_SUFFIXES,
    stored_translation,
)
from .joint_map import JointMap
from .layout import rest_frames
from .rig_fingerprint import rig_fingerprint

REST_TOLERANCE = 1e-4  # m: bone heads may differ this much from the joints' rest positions


def _has(bone: bpy.types.Bone, key: str) -> bool:
    """Whether ``bone`` has the custom property ``key``."""
    return key in bone.keys()


def _index_key(bone: bpy.types.Bone) -> tuple[int, int]:
    """Stored joint order first; bones without dhik data after them."""
    return (0, int(bone[PROP_INDEX])) if _has(bone, PROP_INDEX) else (1, 0)


def _hierarchy(arm: bpy.types.Armature) -> list[bpy.types.Bone]:
    """Bones parents first (depth first, stored joint order among siblings)."""
    order: list[bpy.types.Bone] = []
    stack = sorted((b for b in arm.bones if b.parent is None), key=_index_key, reverse=True)
    while stack:
        bone = stack.pop()
        order.append(bone)
        stack.extend(sorted(bone.children, key=_index_key, reverse=True))
    return order


def _ik_limit(pb: bpy.types.PoseBone, k: int, sign: float) -> list[float] | None:
    a = AXES[k]
    if not getattr(pb, f"use_ik_limit_{a}"):
        return None
    lo, hi = getattr(pb, f"ik_min_{a}"), getattr(pb, f"ik_max_{a}")
    return [lo, hi] if sign > 0 else [-hi, -lo]


def _stored_joint(bone: bpy.types.Bone, parent: str | None) -> dict[str, Any]:
    """The joint stored on ``bone`` by Import Skeleton; ``parent`` the joint above it."""
    joint: dict[str, Any] = {"name": bone.name, "type": str(bone[PROP_TYPE])}
    joint["offset"] = [float(v) for v in bone.get(PROP_OFFSET, (0.0, 0.0, 0.0))]
    joint["parent"] = parent
    if _has(bone, PROP_AXIS):
        joint["axis"] = [float(v) for v in bone[PROP_AXIS]]
    if _has(bone, PROP_LIMITS):
        joint["limits"] = [float(v) for v in bone[PROP_LIMITS]]
    if joint["type"] == "spherical" and any(_has(bone, k) for k in PROP_LIMITS_XYZ):
        joint["limits"] = [
            [float(v) for v in bone[k]] if _has(bone, k) else None for k in PROP_LIMITS_XYZ
        ]
    if _has(bone, PROP_QUATERNION):
        joint["quaternion"] = [float(v) for v in bone[PROP_QUATERNION]]
    return joint


def location_free(bone: bpy.types.Bone, pb: bpy.types.PoseBone) -> bool:
    """Whether Blender moves ``bone`` by its location channels and a rigger may: not
    connected (Blender ignores a connected bone's location) and not every axis locked."""
    return not bone.use_connect and not all(pb.lock_location)


def location_frame(bone: bpy.types.Bone) -> np.ndarray:
    """The rest rotation (armature space) whose axes ``bone``'s location channels move
    along: its own (Local Location on, Blender's default), else its parent's (the
    armature's for a root bone)."""
    if bone.use_local_location:
        return np.array(bone.matrix_local.to_3x3(), dtype=float)
    if bone.parent is None:
        return np.eye(3)
    return np.array(bone.parent.matrix_local.to_3x3(), dtype=float)


def _translation_joints(
    bone: bpy.types.Bone, pb: bpy.types.PoseBone, rest: np.ndarray, parent: str | None,
    offset: list[float], taken: set[str],
) -> list[dict[str, Any]]:
    """``<bone>.tx``, ``.ty``, ``.tz``: prismatic joints along its location channels' axes
    (:func:`location_frame`) in the parent joint's frame (``rest``: its rest rotation),
    the first at the bone's head (``offset`` from ``parent``), a locked axis ``[0, 0]``."""
    axes = rest.T @ location_frame(bone)
    out: list[dict[str, Any]] = []
    for k, suffix in enumerate(TRANSLATION_SUFFIXES):
        name = _unique(bone.name + suffix, taken)
        taken.add(name)
        joint: dict[str, Any] = {
            "name": name, "type": "prismatic", "parent": parent,
            "offset": offset if k == 0 else [0.0, 0.0, 0.0],
            "axis": [float(v) for v in axes[:, k]]}
        if pb.lock_location[k]:
            joint["limits"] = [0.0, 0.0]
        out.append(joint)
        parent = name
    return out


REST_SUFFIX = ".rest"  # the fixed joint (no bone) that carries a bone's rest rotation
FRAME_TOLERANCE = 1e-9  # a bone frame this close to its parent joint's needs no rest joint

# The spherical joint's axes in bone coordinates (columns), by free bone axes: Blender's IK
# turns a bone with Z and Y free about Z, then twists it about Y, which is the intrinsic
# X'Y' order of the frame X' = bone Z, Y' = bone Y, Z' = -bone X; every other set keeps
# the bone's own axes (X and Y free: X then Y twist, exact; three free: any frame).
_ZY_FRAME = np.array([[0.0, 0.0, -1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def _spherical_limits(
    pb: bpy.types.PoseBone, free: list[bool], frame: np.ndarray
) -> list[list[float] | None]:
    """Per joint axis (columns of ``frame``, bone coordinates): its bone axis's IK limit,
    ``[0, 0]`` when that bone axis is locked (radians)."""
    out: list[list[float] | None] = []
    for i in range(3):
        k = int(np.argmax(np.abs(frame[:, i])))
        out.append(_ik_limit(pb, k, float(frame[k, i])) if free[k] else [0.0, 0.0])
    return out


def _approximations(bone: str, pb: bpy.types.PoseBone, free: list[bool]) -> list[str]:
    """What Blender's IK does on this bone that the inferred joint only approximates."""
    notes = []
    limited = [free[k] and bool(getattr(pb, f"use_ik_limit_{a}")) for k, a in enumerate(AXES)]
    if free == [True, False, True]:
        notes.append(f"{bone!r}: lock_ik_y with X and Z free: Blender swings the bone without "
                     "twist, dhik turns it about X then Z (no Y angle; a twist of about "
                     "x*z/2 about Y when both turn)")
    if any(limited) and sum(free) >= 2 and free != [True, True, False] and free != [
            False, True, True]:
        kind = "swing/twist" if all(free) else "swing"
        axes = "".join(a.upper() for a, on in zip(AXES, limited, strict=True) if on)
        notes.append(f"{bone!r}: IK limits on {axes} are Blender {kind} limits; dhik bounds "
                     "the intrinsic XYZ angles about the bone's axes instead")
    if pb.ik_stretch > 0.0:
        notes.append(f"{bone!r}: IK stretch is ignored (dhik never scales a bone)")
    return notes


def _inferred_joints(
    bone: bpy.types.Bone, pb: bpy.types.PoseBone, rest: np.ndarray, parent: str | None,
    offset: list[float], rest_name: str,
) -> tuple[list[dict[str, Any]], np.ndarray, list[str]]:
    """Rotation joints of a bone without dhik data, its joint's rest rotation C and the notes.

    ``rest`` is the rest rotation of the joint above (``parent``; armature space);
    ``offset`` the bone's head from it (metres, its frame); ``rest_name`` the name a rest
    joint would take. The list holds the bone's joint, preceded by a fixed rest joint when
    the joint needs the bone's own axes (locks or limits on a spherical joint whose bone is
    turned against the parent joint's frame).
    """
    joint: dict[str, Any] = {"name": bone.name, "parent": parent, "offset": offset}
    free = [not getattr(pb, f"lock_ik_{a}") for a in AXES]
    b = np.array(bone.matrix_local.to_3x3(), dtype=float)  # bone axes, armature space
    notes = _approximations(bone.name, pb, free)
    if not any(free):
        joint["type"] = "fixed"
        return [joint], rest, []
    if sum(free) == 1:
        k = free.index(True)
        joint["type"] = "revolute"
        joint["axis"] = [float(v) for v in (rest.T @ b)[:, k]]
        lim = _ik_limit(pb, k, 1.0)
        if lim is not None:
            joint["limits"] = lim
        return [joint], rest, notes
    joint["type"] = "spherical"
    limited = any(free[k] and getattr(pb, f"use_ik_limit_{a}") for k, a in enumerate(AXES))
    if all(free) and not limited:
        return [joint], rest, notes
    frame = _ZY_FRAME if free == [False, True, True] else np.eye(3)
    joint["limits"] = _spherical_limits(pb, free, frame)
    local = rest.T @ b @ frame  # the joint's axes in the parent joint's frame
    if float(np.abs(local - np.eye(3)).max()) <= FRAME_TOLERANCE:
        return [joint], rest, notes
    q = quat_normalize(matrix_to_quat(local))
    fixed = {"name": rest_name, "type": "fixed", "parent": parent,
             "offset": offset, "quaternion": [float(v) for v in q]}
    joint["parent"], joint["offset"] = rest_name, [0.0, 0.0, 0.0]
    return [fixed, joint], rest @ quat_to_matrix(q), notes


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name`` with ``_1``, ``_2`` ... appended, not in ``taken``."""
    out, n = name, 0
    while out in taken:
        n += 1
        out = f"{name}_{n}"
    return out


Entry = tuple[tuple[int, int], int, int, dict[str, Any]]  # sort key parts, the joint


def _read(ob: bpy.types.Object) -> tuple[dict[str, Any], list[str]]:
    """skeleton.json object of ``ob`` and the notes on what its joints approximate."""
    arm = armature_data(ob)
    bones = pose_of(ob).bones
    roots = [b.name for b in arm.bones if b.parent is None]
    if not roots:
        raise DhikError.at(f"armature {ob.name!r}", "", "has no bones")
    taken = {b.name for b in arm.bones}
    entries: list[Entry] = []
    origin = None
    if len(roots) > 1:  # skeleton.json has one root: a fixed joint at the armature origin
        origin = _unique(ORIGIN, taken)
        taken.add(origin)
        entries.append(((-1, 0), 0, 0, {"name": origin, "type": "fixed", "parent": None,
                                        "offset": [0.0, 0.0, 0.0]}))
    rest: dict[str, np.ndarray] = {}
    notes: list[str] = []
    for position, bone in enumerate(_hierarchy(arm)):
        parent = bone.parent.name if bone.parent else origin
        parent_rest = rest[bone.parent.name] if bone.parent else np.eye(3)
        found: list[dict[str, Any]] = []
        keys: list[tuple[int, int]] = []
        if _has(bone, PROP_TYPE):
            for joint, index in stored_translation(bone):
                found.append({**joint, "parent": parent})
                keys.append((0, index))
                parent = joint["name"]
            joint = _stored_joint(bone, parent)
            q = joint.get("quaternion")
            if joint["type"] == "fixed" and q is not None:
                rest[bone.name] = parent_rest @ quat_to_matrix(q)
            else:
                rest[bone.name] = parent_rest
            found.append(joint)
            keys.append(_index_key(bone))
        else:
            head = np.array(bone.head_local, dtype=float)
            above = np.array(bone.parent.head_local, dtype=float) if bone.parent else np.zeros(3)
            offset = [float(v) for v in parent_rest.T @ (head - above)]
            if location_free(bone, bones[bone.name]):
                found = _translation_joints(bone, bones[bone.name], parent_rest, parent,
                                            offset, taken)
                parent, offset = found[-1]["name"], [0.0, 0.0, 0.0]
            rest_name = _unique(bone.name + REST_SUFFIX, taken)
            turned, rest[bone.name], more = _inferred_joints(
                bone, bones[bone.name], parent_rest, parent, offset, rest_name)
            found += turned
            notes.extend(more)
            taken.update(j["name"] for j in found)
            keys = [_index_key(bone)] * len(found)
        for sub, (key, joint) in enumerate(zip(keys, found, strict=True)):
            entries.append((key, position, sub, joint))
    top = origin if origin is not None else next(e[3]["name"] for e in entries
                                                 if e[3]["parent"] is None)
    data = {"root_name": top, "joints": [e[3] for e in sorted(entries, key=lambda e: e[:3])]}
    return data, notes


def skeleton_dict(ob: bpy.types.Object) -> dict[str, Any]:
    """skeleton.json object of armature ``ob`` (stored dhik data, else inferred)."""
    return _read(ob)[0]


def skeleton_notes(ob: bpy.types.Object) -> list[str]:
    """One line per bone whose Blender IK settings the inferred joints only approximate
    (empty for an armature made by Import Skeleton); for a WARNING report."""
    return read_skeleton_notes(ob)[1]


def joint_bones(defn: SkeletonDef, bone_names: set[str] | frozenset[str]) -> dict[str, str | None]:
    """The bone each joint belongs to: its own, or for a joint without one (``.rest``,
    ``.tx``/``.ty``/``.tz``) the bone below it; None for :data:`ORIGIN`."""
    children: dict[str, list[str]] = {}
    for j in defn.joints:
        if j.parent is not None:
            children.setdefault(j.parent, []).append(j.name)
    out: dict[str, str | None] = {}
    for j in reversed(defn.joints):  # children first (the definition lists parents first)
        kids = children.get(j.name, [])
        out[j.name] = j.name if j.name in bone_names else (
            out[kids[0]] if len(kids) == 1 else None)
    return out


def chain_joint_count(ob: bpy.types.Object, defn: SkeletonDef, effector: str, bones: int) -> int:
    """The core's chain length (joints at the end of the path to ``effector``) for a chain
    of ``bones`` bones as Blender's IK constraint counts them (0, or more bones than the
    path has: 0, up to the root).

    A joint without a bone counts with the bone below it (:func:`joint_bones`), with one
    exception: the chain's first bone keeps its location joints outside the chain (held at
    its keys), as Blender's IK turns a chain's bones about their heads and never slides
    the first one off its parent; a root bone has no parent to stay on, so a chain that
    reaches it solves its location too (a floating base)."""
    if bones <= 0:
        return 0
    arm = armature_data(ob)
    owner = joint_bones(defn, {b.name for b in arm.bones})
    joints = {j.name: j for j in defn.joints}
    count, seen = 0, 0
    at: str | None = effector
    while at is not None:
        count += 1
        if at == owner[at]:
            seen += 1
            if seen == bones:
                top = arm.bones[at]
                above = joints[at].parent
                while above is not None and owner[above] == at and (
                        top.parent is None or joints[above].type != "prismatic"):
                    count += 1
                    above = joints[above].parent
                return count
        at = joints[at].parent
    return 0


def read_skeleton(ob: bpy.types.Object) -> SkeletonDef:
    """Validated SkeletonDef of armature ``ob``; DhikError names the armature."""
    return read_skeleton_notes(ob)[0]


def read_skeleton_notes(ob: bpy.types.Object) -> tuple[SkeletonDef, list[str]]:
    """:func:`read_skeleton` and :func:`skeleton_notes` from one read of the bones."""
    kept = _kept_read(ob)
    return kept.defn, list(kept.notes)


def rig_joint_maps(ob: bpy.types.Object, defn: SkeletonDef) -> dict[str, JointMap]:
    """:func:`joint_maps`, kept with the read of ``ob`` (:func:`_kept_read`) where
    ``defn`` is that read's skeleton."""
    kept = _kept_read(ob)
    if kept.defn is not defn:
        return joint_maps(ob, defn)
    if kept.maps is None:
        kept.maps = joint_maps(ob, defn)
    return dict(kept.maps)


@dataclass
class _Read:
    """A read of an armature (:func:`_kept_read`) and the fingerprint it was read at."""

    fingerprint: bytes
    defn: SkeletonDef
    notes: tuple[str, ...]
    maps: dict[str, JointMap] | None = None


KEPT_READS = 4  # armatures whose last read is kept (the least recently read go first)
_KEPT: dict[tuple[int, int], _Read] = {}


def _kept_read(ob: bpy.types.Object) -> _Read:
    """The read of ``ob`` (validated SkeletonDef and notes), kept per object and armature
    while their :func:`~.rig_fingerprint.rig_fingerprint` stays the same: a bake reads
    every bone of the rig (a Rigify metarig's 159: 12 ms of a 160-frame bake's 88),
    the fingerprint 0.4 ms. A read that fails (DhikError) is not kept."""
    arm = armature_data(ob)
    key = (ob.as_pointer(), arm.as_pointer())
    fingerprint = rig_fingerprint(arm, pose_of(ob))
    kept = _KEPT.pop(key, None)
    if kept is None or kept.fingerprint != fingerprint:
        data, notes = _read(ob)
        kept = _Read(fingerprint, parse_skeleton(data, source=f"armature {ob.name!r}"),
                     tuple(notes))
    _KEPT[key] = kept  # the most recent last
    while len(_KEPT) > KEPT_READS:
        del _KEPT[next(iter(_KEPT))]
    return kept


class RestBones:
    """An armature's bones at rest as arrays (one ``foreach_get`` each, not an RNA read
    per bone), armature space: row of each bone by name, heads (n, 3) (m), rest
    rotations (n, 3, 3), whether each bone's location channels move along its own axes."""

    def __init__(self, arm: bpy.types.Armature) -> None:
        bones = arm.bones
        n = len(bones)
        self.bones = bones
        self.row = {name: k for k, name in enumerate(bones.keys())}
        heads, matrices = np.empty(n * 3), np.empty(n * 16)
        bones.foreach_get("head_local", heads)
        bones.foreach_get("matrix_local", matrices)  # column-major 4x4
        self.heads = heads.reshape(n, 3)
        self.rotations = matrices.reshape(n, 4, 4)[:, :3, :3].transpose(0, 2, 1)
        self.local_location = np.empty(n, dtype=bool)
        bones.foreach_get("use_local_location", self.local_location)

    def location_frame(self, name: str) -> np.ndarray:
        """:func:`location_frame` of bone ``name``."""
        k = self.row[name]
        return self.rotations[k] if self.local_location[k] else location_frame(self.bones[k])


def joint_maps(ob: bpy.types.Object, defn: SkeletonDef) -> dict[str, JointMap]:
    """Joint -> bone channel maps, checking that bone heads sit on the joints' rest positions.

    A bone's prismatic joints (its ``.tx``/``.ty``/``.tz``, or an imported prismatic bone)
    share its location channel: each adds ``M axis * displacement``, and each reads its
    displacement back through the matching row of the pseudo-inverse of their axes."""
    frames = rest_frames(defn)
    maps: dict[str, JointMap] = {}
    arm = armature_data(ob)
    rest = RestBones(arm)
    heads = rest.heads.tolist()
    owner = joint_bones(defn, set(rest.row))
    slides: dict[str, list[str]] = {}
    for j in defn.joints:
        name = owner[j.name]
        if name is None or (name != j.name and j.type == "fixed"):
            continue  # ORIGIN or a rest joint (REST_SUFFIX): no bone, never moves
        if j.type != "fixed" and name != j.name and j.type != "prismatic":
            raise DhikError.at(f"armature {ob.name!r}", f"bones[{j.name!r}]",
                               "is missing: the skeleton has a moving joint of that name")
        gap = math.dist(heads[rest.row[name]], frames[j.name].position)
        if gap > REST_TOLERANCE:
            raise DhikError.at(
                f"armature {ob.name!r}", f"bones[{name!r}]",
                f"head is {gap:.3g} m away from the joint's rest position "
                "(bone moved in Edit Mode after import?)",
            )
        b = rest.location_frame(name) if j.type == "prismatic" else rest.rotations[rest.row[name]]
        axis = None if j.axis is None else np.asarray(j.axis, dtype=float)
        maps[j.name] = JointMap(j.name, j.type, axis, b.T @ frames[j.name].rotation, name)
        if j.type == "prismatic":
            slides.setdefault(name, []).append(j.name)
    for names in slides.values():  # location -> displacements: pseudo-inverse of the axes
        columns = np.column_stack([maps[n].bone_axis() for n in names])
        # a bone's own .tx/.ty/.tz: three independent axes, whose pseudo-inverse is the
        # inverse (orthonormal but for the rest matrices' float32 rounding)
        square = columns.shape == (3, 3) and abs(np.linalg.det(columns)) > 1e-6
        inverse = np.linalg.inv(columns) if square else np.linalg.pinv(columns)
        for n, row in zip(names, inverse, strict=True):
            maps[n] = replace(maps[n], read_axis=row)
    return maps
