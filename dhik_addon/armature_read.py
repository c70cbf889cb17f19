"""Read an armature back as a SkeletonDef, and map its bones onto the core's joints.

A bone imported by dhik carries its joint in custom properties (exact). Any other
bone's joint is inferred from Blender's IK settings (README, "What export infers"):

- the root bone (the one bone without a parent) is the skeleton's fixed root;
- no free IK axis (``lock_ik_x/y/z`` all on): fixed;
- one free axis: revolute about that bone axis, limits from ``ik_min``/``ik_max``
  when ``use_ik_limit`` is on;
- two or three free axes: spherical; where a bone axis lies along a joint (world) axis
  its IK limit becomes that axis's limit, and a locked one becomes ``[0, 0]``;
- offset: head minus the parent's head (armature space, metres); prismatic joints and
  fixed rotations are never inferred.
"""

from __future__ import annotations

from typing import Any

import bpy
import numpy as np

from ..core.app.formats import parse_skeleton
from ..core.errors import DhikError
from ..core.model.definition import SkeletonDef
from ..core.rotations import quat_to_matrix
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
    aligned_axis,
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


def _inferred_joint(bone: bpy.types.Bone, pb: bpy.types.PoseBone, rest: np.ndarray) -> dict:
    """Joint dict of a bone without dhik data; ``rest`` is its parent's rest rotation C."""
    head = np.array(bone.head_local, dtype=float)
    parent_head = np.array(bone.parent.head_local, dtype=float) if bone.parent else np.zeros(3)
    joint: dict[str, Any] = {
        "name": bone.name,
        "parent": bone.parent.name if bone.parent else None,
        "offset": [float(v) for v in rest.T @ (head - parent_head)],
    }
    free = [not getattr(pb, f"lock_ik_{a}") for a in AXES]
    b = rest.T @ np.array(bone.matrix_local.to_3x3(), dtype=float)  # bone axes, joint frame
    if bone.parent is None or not any(free):
        joint["type"] = "fixed"
    elif sum(free) == 1:
        k = free.index(True)
        joint["type"] = "revolute"
        joint["axis"] = [float(v) for v in b[:, k]]
        lim = _ik_limit(pb, k, 1.0)
        if lim is not None:
            joint["limits"] = lim
    else:
        joint["type"] = "spherical"
        limits: list[list[float] | None] = [None, None, None]
        for k in range(3):
            hit = aligned_axis(b[:, k])
            if hit is None:
                continue
            limits[hit[0]] = _ik_limit(pb, k, hit[1]) if free[k] else [0.0, 0.0]
        if any(lim is not None for lim in limits):
            joint["limits"] = limits
    return joint


def skeleton_dict(ob: bpy.types.Object) -> dict[str, Any]:
    """skeleton.json object of armature ``ob`` (stored dhik data, else inferred)."""
    arm = armature_data(ob)
    bones = pose_of(ob).bones
    roots = [b.name for b in arm.bones if b.parent is None]
    if len(roots) != 1:
        names = ", ".join(roots)
        problem = f"has {len(roots)} root bones ({names})" if roots else "has no bones"
        raise DhikError.at(f"armature {ob.name!r}", "", f"{problem}; dhik needs exactly one root")
    joints: list[tuple[tuple[int, int], int, dict[str, Any]]] = []
    rest: dict[str, np.ndarray] = {}
    for position, bone in enumerate(_hierarchy(arm)):
        parent_rest = rest[bone.parent.name] if bone.parent else np.eye(3)
        if _has(bone, PROP_TYPE):
            joint = _stored_joint(bone)
        else:
            joint = _inferred_joint(bone, bones[bone.name], parent_rest)
        q = joint.get("quaternion")
        if joint["type"] == "fixed" and q is not None:
            rest[bone.name] = parent_rest @ quat_to_matrix(q)
        else:
            rest[bone.name] = parent_rest
        joints.append((_index_key(bone), position, joint))
    return {"root_name": roots[0], "joints": [j for _, _, j in sorted(joints, key=lambda t: t[:2])]}


def read_skeleton(ob: bpy.types.Object) -> SkeletonDef:
    """Validated SkeletonDef of armature ``ob``; DhikError names the armature."""
    return parse_skeleton(skeleton_dict(ob), source=f"armature {ob.name!r}")


def joint_maps(ob: bpy.types.Object, defn: SkeletonDef) -> dict[str, JointMap]:
    """Joint -> bone channel maps, checking that bone heads sit on the joints' rest positions."""
    frames = rest_frames(defn)
    maps: dict[str, JointMap] = {}
    arm = armature_data(ob)
    for j in defn.joints:
        bone = arm.bones[j.name]
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
