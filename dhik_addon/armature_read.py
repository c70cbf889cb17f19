"""Read an armature back as a SkeletonDef, and map its bones onto the core's joints.

A bone imported by dhik carries its joint in custom properties (exact). Any other
bone's joint is inferred from Blender's IK settings (README, "What export infers"),
in the bone's own axes whatever its rest orientation:

- the root bone (the one bone without a parent) is the skeleton's fixed root;
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
- offset: head minus the parent's head in the parent joint's frame (metres); prismatic
  joints are never inferred.
"""

from __future__ import annotations

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
    PROP_AXIS,
    PROP_INDEX,
    PROP_LIMITS,
    PROP_LIMITS_XYZ,
    PROP_OFFSET,
    PROP_QUATERNION,
    PROP_TYPE,
)
from .joint_map import JointMap
from .layout import rest_frames

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


def _stored_joint(bone: bpy.types.Bone) -> dict[str, Any]:
    joint: dict[str, Any] = {"name": bone.name, "type": str(bone[PROP_TYPE])}
    joint["offset"] = [float(v) for v in bone.get(PROP_OFFSET, (0.0, 0.0, 0.0))]
    joint["parent"] = bone.parent.name if bone.parent else None
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
    bone: bpy.types.Bone, pb: bpy.types.PoseBone, rest: np.ndarray, rest_name: str
) -> tuple[list[dict[str, Any]], np.ndarray, list[str]]:
    """Joints of a bone without dhik data, its joint's rest rotation C and the notes.

    ``rest`` is the parent joint's rest rotation (armature space); ``rest_name`` the
    name a rest joint would take. The list holds the bone's joint, preceded by a fixed
    rest joint when the joint needs the bone's own axes (locks or limits on a spherical
    joint whose bone is turned against the parent joint's frame).
    """
    head = np.array(bone.head_local, dtype=float)
    parent_head = np.array(bone.parent.head_local, dtype=float) if bone.parent else np.zeros(3)
    joint: dict[str, Any] = {
        "name": bone.name,
        "parent": bone.parent.name if bone.parent else None,
        "offset": [float(v) for v in rest.T @ (head - parent_head)],
    }
    free = [not getattr(pb, f"lock_ik_{a}") for a in AXES]
    b = np.array(bone.matrix_local.to_3x3(), dtype=float)  # bone axes, armature space
    notes = _approximations(bone.name, pb, free) if bone.parent is not None else []
    if bone.parent is None or not any(free):
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
    fixed = {"name": rest_name, "type": "fixed", "parent": joint["parent"],
             "offset": joint["offset"], "quaternion": [float(v) for v in q]}
    joint["parent"], joint["offset"] = rest_name, [0.0, 0.0, 0.0]
    return [fixed, joint], rest @ quat_to_matrix(q), notes


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name`` with ``_1``, ``_2`` ... appended, not in ``taken``."""
    out, n = name, 0
    while out in taken:
        n += 1
        out = f"{name}_{n}"
    return out


def _read(ob: bpy.types.Object) -> tuple[dict[str, Any], list[str]]:
    """skeleton.json object of ``ob`` and the notes on what its joints approximate."""
    arm = armature_data(ob)
    bones = pose_of(ob).bones
    roots = [b.name for b in arm.bones if b.parent is None]
    if len(roots) != 1:
        names = ", ".join(roots)
        problem = f"has {len(roots)} root bones ({names})" if roots else "has no bones"
        raise DhikError.at(f"armature {ob.name!r}", "", f"{problem}; dhik needs exactly one root")
    entries: list[tuple[tuple[int, int], int, int, dict[str, Any]]] = []
    rest: dict[str, np.ndarray] = {}
    taken = {b.name for b in arm.bones}
    notes: list[str] = []
    for position, bone in enumerate(_hierarchy(arm)):
        parent_rest = rest[bone.parent.name] if bone.parent else np.eye(3)
        if _has(bone, PROP_TYPE):
            joint = _stored_joint(bone)
            q = joint.get("quaternion")
            if joint["type"] == "fixed" and q is not None:
                rest[bone.name] = parent_rest @ quat_to_matrix(q)
            else:
                rest[bone.name] = parent_rest
            found = [joint]
        else:
            rest_name = _unique(bone.name + REST_SUFFIX, taken)
            found, rest[bone.name], more = _inferred_joints(
                bone, bones[bone.name], parent_rest, rest_name)
            notes.extend(more)
            taken.update(j["name"] for j in found)
        for sub, joint in enumerate(found):
            entries.append((_index_key(bone), position, sub, joint))
    data = {"root_name": roots[0], "joints": [e[3] for e in sorted(entries, key=lambda e: e[:3])]}
    return data, notes


def skeleton_dict(ob: bpy.types.Object) -> dict[str, Any]:
    """skeleton.json object of armature ``ob`` (stored dhik data, else inferred)."""
    return _read(ob)[0]


def skeleton_notes(ob: bpy.types.Object) -> list[str]:
    """One line per bone whose Blender IK settings the inferred joints only approximate
    (empty for an armature made by Import Skeleton); for a WARNING report."""
    return _read(ob)[1]


def chain_joint_count(ob: bpy.types.Object, defn: SkeletonDef, effector: str, bones: int) -> int:
    """The core's chain length (joints at the end of the path to ``effector``) for a chain
    of ``bones`` bones as Blender's IK constraint counts them (0, or more bones than the
    path has: 0, up to the root). A ``.rest`` joint has no bone: it counts with its bone."""
    if bones <= 0:
        return 0
    names = {b.name for b in armature_data(ob).bones}
    parent = {j.name: j.parent for j in defn.joints}
    count, seen = 0, 0
    at: str | None = effector
    while at is not None:
        count += 1
        if at in names:
            seen += 1
            if seen == bones:
                above = parent[at]
                return count + (1 if above is not None and above not in names else 0)
        at = parent[at]
    return 0


def read_skeleton(ob: bpy.types.Object) -> SkeletonDef:
    """Validated SkeletonDef of armature ``ob``; DhikError names the armature."""
    return parse_skeleton(skeleton_dict(ob), source=f"armature {ob.name!r}")


def joint_maps(ob: bpy.types.Object, defn: SkeletonDef) -> dict[str, JointMap]:
    """Joint -> bone channel maps, checking that bone heads sit on the joints' rest positions."""
    frames = rest_frames(defn)
    maps: dict[str, JointMap] = {}
    arm = armature_data(ob)
    for j in defn.joints:
        bone = arm.bones.get(j.name)
        if bone is None and j.type == "fixed":
            continue  # a rest joint (REST_SUFFIX): it has no bone and never moves
        if bone is None:
            raise DhikError.at(f"armature {ob.name!r}", f"bones[{j.name!r}]",
                               "is missing: the skeleton has a moving joint of that name")
        head = np.array(bone.head_local, dtype=float)
        gap = float(np.linalg.norm(head - frames[j.name].position))
        if gap > REST_TOLERANCE:
            raise DhikError.at(
                f"armature {ob.name!r}", f"bones[{j.name!r}]",
                f"head is {gap:.3g} m away from the joint's rest position "
                "(bone moved in Edit Mode after import?)",
            )
        b = np.array(bone.matrix_local.to_3x3(), dtype=float)
        axis = None if j.axis is None else np.asarray(j.axis, dtype=float)
        maps[j.name] = JointMap(j.name, j.type, axis, b.T @ frames[j.name].rotation)
    return maps
