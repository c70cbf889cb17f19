"""Build an armature from a SkeletonDef: bones, dhik custom properties, Blender IK settings.

Armature space is the core's world frame (metres). Every joint field is stored on its
``Bone`` as a custom property (:data:`PROP_TYPE`, ...) so export is lossless; Blender's
own IK locks and limits (``lock_ik_*``, ``use_ik_limit_*``, ``ik_min_*``/``ik_max_*``)
are set from the joint's degrees of freedom.

One bone per joint, except:

- a bone's translation, prismatic joints ``X.tx``, ``X.ty``, ``X.tz`` (any of them, in
  that order) right above joint ``X``, each the only child of the one before, at X's
  place: they are X's location channels, stored on bone X (:data:`PROP_TRANSLATION`);
  its ``lock_location`` frees the bone axes they move along;
- a fixed root :data:`ORIGIN` at the origin (no rotation) with several children, which
  Export Skeleton writes for an armature with several root bones: those bones are roots.
"""

from __future__ import annotations

import json
import math
from typing import Any, cast

import bpy
import numpy as np

from ..core.errors import DhikError
from ..core.model.definition import JointDef, Range, SkeletonDef, SphericalLimits
from .access import collection_of, pose_of, view_layer_of
from .joint_map import Vec
from .layout import bone_layout, rest_frames

PROP_TYPE = "dhik_type"
PROP_OFFSET = "dhik_offset"
PROP_AXIS = "dhik_axis"
PROP_LIMITS = "dhik_limits"  # revolute / prismatic: [min, max]
PROP_LIMITS_XYZ = ("dhik_limits_x", "dhik_limits_y", "dhik_limits_z")  # spherical, per axis
PROP_QUATERNION = "dhik_quaternion"  # fixed: [w, x, y, z]
PROP_INDEX = "dhik_index"  # position in the skeleton's joint list
# a bone's translation joints (JSON list of joint objects without "parent", with "index")
PROP_TRANSLATION = "dhik_translation"
TRANSLATION_SUFFIXES = (".tx", ".ty", ".tz")  # a bone's location joints, in this order
ORIGIN = "<origin>"  # the fixed root joint of an armature with several root bones

MAX_BONE_NAME_BYTES = 63  # Blender truncates longer bone names
ALIGNED = 1.0 - 1e-5  # |cos| above which a joint axis counts as a bone axis
AXES = "xyz"


def check_bone_names(defn: SkeletonDef, source: str) -> None:
    """DhikError for joint names that Blender cannot keep as bone names: longer than 63
    bytes (truncated), holding NUL (cut there: another rig) or a lone surrogate (no UTF-8
    for it: Blender's string conversion raised a traceback)."""
    for i, j in enumerate(defn.joints):
        try:
            encoded = j.name.encode("utf-8")
        except UnicodeEncodeError:
            shown = j.name.encode("utf-8", "backslashreplace").decode("ascii", "replace")
            raise DhikError.at(source, f"joints[{i}].name",
                               f"{shown!r} holds a lone surrogate, which a Blender bone "
                               "name cannot hold") from None
        if "\0" in j.name:
            raise DhikError.at(source, f"joints[{i}].name",
                               f"{j.name!r} holds a NUL character, which ends a Blender "
                               "bone name")
        if len(encoded) > MAX_BONE_NAME_BYTES:
            raise DhikError.at(
                source, f"joints[{i}].name",
                f"{j.name!r} is longer than Blender's {MAX_BONE_NAME_BYTES}-byte bone names",
            )


def range_limits(joint: JointDef) -> Range | None:
    """``(min, max)`` of a revolute or prismatic joint (radians or metres), or None."""
    assert joint.type in ("revolute", "prismatic"), joint.type
    return cast("Range | None", joint.limits)


def spherical_limits(joint: JointDef) -> SphericalLimits | None:
    """Per XYZ Euler angle ``(min, max)`` or None of a spherical joint (radians), or None."""
    assert joint.type == "spherical", joint.type
    return cast("SphericalLimits | None", joint.limits)


def store_joint(bone: bpy.types.Bone, joint: JointDef, index: int) -> None:
    """Write ``joint``'s fields as custom properties of ``bone`` (float64, exact)."""
    bone[PROP_TYPE] = joint.type
    bone[PROP_OFFSET] = [float(v) for v in joint.offset]
    bone[PROP_INDEX] = index
    if joint.axis is not None and joint.type in ("revolute", "prismatic"):
        bone[PROP_AXIS] = [float(v) for v in joint.axis]
    if joint.type in ("revolute", "prismatic"):
        lim_range = range_limits(joint)
        if lim_range is not None:
            bone[PROP_LIMITS] = [float(v) for v in lim_range]
    if joint.type == "spherical":
        for key, lim in zip(PROP_LIMITS_XYZ, spherical_limits(joint) or (None,) * 3, strict=True):
            if lim is not None:
                bone[key] = [float(v) for v in lim]
    if joint.type == "fixed" and joint.quaternion is not None:
        bone[PROP_QUATERNION] = [float(v) for v in joint.quaternion]


def aligned_axis(vector_in_bone: Vec) -> tuple[int, float] | None:
    """``(k, sign)`` when the unit vector lies along bone axis k, else None."""
    k = int(np.argmax(np.abs(vector_in_bone)))
    if abs(vector_in_bone[k]) >= ALIGNED:
        return k, math.copysign(1.0, float(vector_in_bone[k]))
    return None


def _set_ik_limit(pb: bpy.types.PoseBone, k: int, sign: float, lim: tuple[float, float]) -> None:
    """Blender IK limit on bone axis k; Blender clamps min to [-pi, 0], max to [0, pi]."""
    lo, hi = (lim[0], lim[1]) if sign > 0 else (-lim[1], -lim[0])
    a = AXES[k]
    setattr(pb, f"use_ik_limit_{a}", True)
    setattr(pb, f"ik_min_{a}", min(0.0, max(-math.pi, lo)))
    setattr(pb, f"ik_max_{a}", max(0.0, min(math.pi, hi)))


def set_ik_settings(pb: bpy.types.PoseBone, joint: JointDef, to_bone: Vec) -> None:
    """Blender IK locks/limits and channel locks from the joint's DoF.

    ``to_bone`` is ``B^T C`` (joint frame -> bone frame). Revolute: exact when the axis is
    a bone axis (the layout makes it one whenever the axis is along or across the bone);
    an oblique axis frees every bone axis it has a component on, without limits.
    Spherical: all axes free; a limit is copied where a bone axis is a joint axis.
    Fixed and prismatic: every rotation locked (Blender's IK cannot slide a bone).
    """
    free = [False, False, False]
    slide: int | None = None
    if joint.type in ("revolute", "prismatic"):
        v = to_bone @ np.asarray(joint.axis, dtype=float)
        hit = aligned_axis(v)
        if joint.type == "revolute":
            if hit is not None:
                free[hit[0]] = True
                lim_range = range_limits(joint)
                if lim_range is not None:
                    _set_ik_limit(pb, hit[0], hit[1], lim_range)
            else:
                free = [bool(abs(c) > 1e-6) for c in v]
        elif hit is not None:
            slide = hit[0]
    elif joint.type == "spherical":
        free = [True, True, True]
        lims = spherical_limits(joint) or (None, None, None)
        for k in range(3):
            hit = aligned_axis(to_bone[k, :])  # bone axis k in joint-frame components
            lim = lims[hit[0]] if hit is not None else None
            if hit is not None and lim is not None:
                _set_ik_limit(pb, k, hit[1], lim)
    for k, a in enumerate(AXES):
        setattr(pb, f"lock_ik_{a}", not free[k])
    pb.lock_rotation = [not f for f in free]
    if joint.type == "prismatic":
        pb.lock_location = [slide is not None and k != slide for k in range(3)]
    else:
        pb.lock_location = (True, True, True)
    pb.rotation_mode = "QUATERNION"


def translation_groups(defn: SkeletonDef) -> dict[str, list[JointDef]]:
    """Joint ``X`` -> the prismatic joints ``X.tx``/``.ty``/``.tz`` right above it that are
    its bone's location channels (top first; see the module docstring)."""
    joints = {j.name: j for j in defn.joints}
    children: dict[str, int] = {}
    for j in defn.joints:
        if j.parent is not None:
            children[j.parent] = children.get(j.parent, 0) + 1
    groups: dict[str, list[JointDef]] = {}
    for j in defn.joints:
        if j.parent is None or any(j.offset):
            continue  # X sits at its translation joints' place
        found: list[JointDef] = []
        at, allowed = j, len(TRANSLATION_SUFFIXES)
        while at.parent is not None:
            up = joints[at.parent]
            ks = [k for k in range(allowed) if up.name == j.name + TRANSLATION_SUFFIXES[k]]
            if up.type != "prismatic" or not ks or children[up.name] != 1:
                break
            found.insert(0, up)
            allowed, at = ks[0], up
            if any(up.offset):
                break  # the top one carries the offset from the parent
        if found:
            groups[j.name] = found
    return groups


def is_origin(defn: SkeletonDef) -> bool:
    """Whether the root is :data:`ORIGIN` as Export Skeleton writes it for several root
    bones (fixed, at the origin, no rotation, two children or more): then no bone."""
    root = next(j for j in defn.joints if j.name == defn.root_name)
    kids = sum(1 for j in defn.joints if j.parent == root.name)
    q = root.quaternion
    return (root.name == ORIGIN and root.type == "fixed" and not any(root.offset)
            and (q is None or tuple(q) == (1.0, 0.0, 0.0, 0.0)) and kids >= 2)


def _joint_object(joint: JointDef, index: int) -> dict[str, Any]:
    """A prismatic joint's fields for :data:`PROP_TRANSLATION` (its parent is implied)."""
    out: dict[str, Any] = {"name": joint.name, "type": joint.type, "index": index,
                           "offset": [float(v) for v in joint.offset],
                           "axis": [float(v) for v in joint.axis or (0.0, 0.0, 1.0)]}
    lim = range_limits(joint)
    if lim is not None:
        out["limits"] = [float(v) for v in lim]
    return out


def stored_translation(bone: bpy.types.Bone) -> list[tuple[dict[str, Any], int]]:
    """``(joint object without parent, index)`` of each translation joint stored on
    ``bone`` by Import Skeleton, top first (empty for other bones)."""
    raw = bone.get(PROP_TRANSLATION)
    if not raw:
        return []
    out = []
    for item in json.loads(str(raw)):
        joint = {k: v for k, v in item.items() if k != "index"}
        out.append((joint, int(item["index"])))
    return out


def _free_location(to_bone: Vec, group: list[JointDef]) -> list[bool]:
    """Bone axes that the group's unlocked prismatic joints move along."""
    free = [False, False, False]
    for g in group:
        if range_limits(g) == (0.0, 0.0):
            continue
        v = to_bone @ np.asarray(g.axis, dtype=float)
        free = [f or bool(abs(c) > 1e-6) for f, c in zip(free, v, strict=True)]
    return free


def create_armature(
    context: bpy.types.Context, defn: SkeletonDef, name: str, source: str
) -> bpy.types.Object:
    """New armature object for ``defn`` in the active collection, made active (OBJECT mode).

    Raises DhikError before creating anything when the skeleton cannot be built.
    """
    check_bone_names(defn, source)
    groups = translation_groups(defn)
    member = {g.name: x for x, group in groups.items() for g in group}
    skipped = set(member) | ({defn.root_name} if is_origin(defn) else set())
    top_parent = {x: group[0].parent for x, group in groups.items()}
    specs = bone_layout(defn)
    frames = rest_frames(defn)
    index = {j.name: i for i, j in enumerate(defn.joints)}
    arm = bpy.data.armatures.new(name)
    ob = bpy.data.objects.new(name, arm)
    try:
        collection_of(context).objects.link(ob)
        layer = view_layer_of(context)
        for other in layer.objects:
            other.select_set(False)
        layer.objects.active = ob
        ob.select_set(True)
        bpy.ops.object.mode_set(mode="EDIT")
        try:
            for spec in specs:
                if spec.name in skipped:
                    continue
                eb = arm.edit_bones.new(spec.name)
                eb.head = spec.head.tolist()
                eb.tail = spec.tail.tolist()
                eb.align_roll(spec.roll_reference.tolist())
                parent = top_parent.get(spec.name, spec.parent)
                if parent is not None and parent not in skipped:
                    eb.parent = arm.edit_bones[parent]
                    eb.use_connect = spec.connect and spec.name not in groups
        finally:
            bpy.ops.object.mode_set(mode="OBJECT")
        for joint in defn.joints:
            if joint.name in skipped:
                continue
            bone = arm.bones[joint.name]
            store_joint(bone, joint, index[joint.name])
            b = np.array(bone.matrix_local.to_3x3(), dtype=float)
            to_bone = b.T @ frames[joint.name].rotation
            pb = pose_of(ob).bones[joint.name]
            set_ik_settings(pb, joint, to_bone)
            if joint.name in groups:
                group = groups[joint.name]
                bone[PROP_TRANSLATION] = json.dumps(
                    [_joint_object(g, index[g.name]) for g in group])
                pb.lock_location = [not f for f in _free_location(to_bone, group)]
    except Exception:
        bpy.data.objects.remove(ob)
        bpy.data.armatures.remove(arm)
        raise
    return ob
