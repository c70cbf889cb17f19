"""Everything the read of an armature as a skeleton (``armature_read``) looks at, as
bytes: two armatures with equal fingerprints read as the same skeleton, with the same
notes and joint maps, so a read can be kept while its fingerprint stays the same.

What a read looks at: each bone's name, parent and children (their order sets the
joints': Blender lists an armature's bones depth first, each bone's children in their
own order, so the list of names and parents holds it), its rest head and matrix
(armature space, float32 as Blender keeps them), whether it is connected and moves in
its own location frame, its ``dhik_*`` custom properties (a joint stored by Import
Skeleton), and its pose bone's location locks, IK locks, IK limits (rad) and IK
stretch. Nothing else of the rig is read (its pose, constraints and animation are the
bake's checks', read on every bake).
"""

from __future__ import annotations

from typing import Any

import bpy
import numpy as np

PREFIX = "dhik_"  # the custom properties a stored joint lives in (armature_build.PROP_*)
_BONE_FLOATS = (("head_local", 3), ("matrix_local", 16))
_BONE_FLAGS = ("use_connect", "use_local_location")
_POSE_FLOATS = tuple(f"{kind}_{a}" for kind in ("ik_min", "ik_max") for a in "xyz") + (
    "ik_stretch",)
_POSE_FLAGS = tuple(f"{kind}_{a}" for kind in ("lock_ik", "use_ik_limit") for a in "xyz")


def rig_fingerprint(arm: bpy.types.Armature, pose: bpy.types.Pose) -> bytes:
    """The fingerprint (module docstring) of an armature object: its armature's bones
    and its own ``pose``'s bones (two objects sharing an armature differ there)."""
    bones, pose_bones = arm.bones, pose.bones
    n, p = len(bones), len(pose_bones)
    parts = [_names(bones).encode(), "|".join(pose_bones.keys()).encode()]
    for name, width in _BONE_FLOATS:
        parts.append(_floats(bones, name, n * width))
    for name in _BONE_FLAGS:
        parts.append(_flags(bones, name, n))
    parts.append(_flags(pose_bones, "lock_location", 3 * p))
    for name in _POSE_FLAGS:
        parts.append(_flags(pose_bones, name, p))
    for name in _POSE_FLOATS:
        parts.append(_floats(pose_bones, name, p))
    return b"\0".join(parts)


def _names(bones: Any) -> str:
    """Per bone, in the armature's order (depth first: children in their order): its
    name, its parent's and its stored joint (``dhik_*`` properties, keys sorted)."""
    out = []
    for b in bones:
        parent = b.parent
        keys = sorted(k for k in b.keys() if k.startswith(PREFIX))
        stored = ";".join(f"{k}={_value(b[k])!r}" for k in keys)
        out.append(f"{b.name}<{parent.name if parent else ''}>[{stored}]")
    return "\n".join(out)


def _value(v: Any) -> Any:
    """A custom property's value as plain Python (arrays and groups as lists / dicts)."""
    if hasattr(v, "to_dict"):
        return v.to_dict()
    if hasattr(v, "to_list"):
        return v.to_list()
    return v


def _floats(coll: Any, name: str, size: int) -> bytes:
    out = np.empty(size, dtype=np.float32)
    coll.foreach_get(name, out)
    return out.tobytes()


def _flags(coll: Any, name: str, size: int) -> bytes:
    out = np.empty(size, dtype=bool)
    coll.foreach_get(name, out)
    return out.tobytes()
