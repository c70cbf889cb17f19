"""Target empties <-> targets.json keyframes, and per-frame target matrices for a bake.

Keyframe ``pos`` is world space in metres, ``euler`` XYZ (``Rz Ry Rx``) in degrees; the
empty uses rotation mode 'XYZ' in radians. Keys are LINEAR, so Blender's playback is
the spec's channel-by-channel linear interpolation, and before the first key the first
key holds (constant extrapolation), as DECISIONS asks.

Frames. In targets.json (and in the core) a target is the effector *joint's* frame. In
Blender a target object's world rotation is the effector *bone's* orientation, what an
Empty snapped to the bone shows. With the joint map's ``N = B^T C`` (joint frame -> bone
rest frame, :class:`~.joint_map.JointMap`), ``R_joint = R_bone @ N``. Import Targets
therefore keys an empty ``<name>_keys`` with the file's values (the spec's interpolation
stays exact) and parents the target ``<name>`` to it, turned by the constant ``N^T``;
Export Targets multiplies the target's world rotation by ``N`` again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import bpy
import numpy as np
from mathutils import Euler, Matrix

from ..core.errors import DhikError
from ..core.model.definition import Keyframe
from ..core.rotations import euler_xyz_to_matrix, matrix_to_quat, matrix_to_rotvec, quat_to_matrix
from . import keying
from .access import armature_data, collection_of, scene_of
from .armature_read import joint_maps, read_skeleton
from .frames import frame_loop
from .joint_map import JointMap
from .props import settings

POS_DECIMALS = 7  # 0.1 micrometre: below float32 resolution of the keyed values
EULER_DECIMALS = 5  # degrees
SAME_ROTATION = 2e-6  # rad: keyed angles this close to the world pose are the pose (float32)
CARRIER_SUFFIX = "_keys"  # the keyed parent of an imported target shown as a bone


def orthonormal(m: np.ndarray) -> np.ndarray:
    """The rotation nearest ``m`` (3x3 from float32 Blender data), through a quaternion."""
    return quat_to_matrix(matrix_to_quat(np.asarray(m, dtype=float)))


def target_bone(context: bpy.types.Context, target: bpy.types.Object | None) -> str:
    """The bone whose orientation ``target`` stands for: the bone of the extra effector
    row it is the target of, else the main effector (the single leaf when unset), else ""."""
    s = settings(context)
    for row in s.effectors:
        if target is not None and row.target is target and row.bone:
            return str(row.bone)
    if s.effector or s.armature is None:
        return str(s.effector)
    leaves = [b.name for b in armature_data(s.armature).bones if not b.children]
    return leaves[0] if len(leaves) == 1 else ""


def bone_to_joint(context: bpy.types.Context, bone: str) -> np.ndarray | None:
    """``N = B^T C`` of ``bone`` of the panel's armature (3x3): ``R_joint = R_bone @ N``;
    None without an armature or a bone. DhikError when the armature has no such bone."""
    ob = settings(context).armature
    if ob is None or not bone:
        return None
    maps = joint_maps(ob, read_skeleton(ob))
    if bone not in maps:
        raise DhikError.at(f"armature {ob.name!r}", f"bones[{bone!r}]", "no such bone")
    return orthonormal(maps[bone].to_bone)


def joint_frame_track(
    track: Sequence[tuple[int, np.ndarray]], maps: dict[str, JointMap], bone: str,
    armature: bpy.types.Object,
) -> list[tuple[int, np.ndarray]]:
    """A target object's ``(frame, 4x4)`` poses (the bone's orientation) as the poses of
    ``bone``'s joint frame that the core solves for (same position, rotation ``R @ N``)."""
    jm = maps.get(bone)
    if jm is None:
        raise DhikError.at(f"armature {armature.name!r}", f"bones[{bone!r}]", "no such bone")
    n = np.eye(4)
    n[:3, :3] = orthonormal(jm.to_bone)
    return [(f, m @ n) for f, m in track]


def create_target_empty(
    context: bpy.types.Context, keyframes: Sequence[Keyframe], name: str,
    to_joint: np.ndarray | None = None,
) -> bpy.types.Object:
    """New 'ARROWS' empty in the active collection, keyed at every keyframe (LINEAR).

    With ``to_joint`` (``N``, 3x3, not the identity) the keys go to a plain-axes empty
    ``<name>_keys`` and the returned target is its child turned by ``N^T``: its world
    rotation is the bone's orientation for the file's joint frames.
    """
    if to_joint is not None and float(np.abs(to_joint - np.eye(3)).max()) > SAME_ROTATION:
        carrier = create_target_empty(context, keyframes, name + CARRIER_SUFFIX)
        carrier.empty_display_type = "PLAIN_AXES"
        ob = bpy.data.objects.new(name, None)
        ob.empty_display_type = "ARROWS"
        ob.parent = carrier
        ob.rotation_mode = "QUATERNION"
        ob.rotation_quaternion = [float(v) for v in matrix_to_quat(to_joint.T)]
        collection_of(context).objects.link(ob)
        return ob
    ob = bpy.data.objects.new(name, None)
    ob.empty_display_type = "ARROWS"
    ob.rotation_mode = "XYZ"
    first = keyframes[0]
    ob.location = first.pos
    ob.rotation_euler = [math.radians(a) for a in first.euler]
    collection_of(context).objects.link(ob)
    frames = [k.frame for k in keyframes]
    _action, cb = keying.new_action(ob, f"{name}_targets")
    keying.write_vector(cb, "location", frames, np.array([k.pos for k in keyframes]), "Object")
    eul = np.radians(np.array([k.euler for k in keyframes], dtype=float))
    keying.write_vector(cb, "rotation_euler", frames, eul, "Object")
    return ob


def target_key_frames(ob: bpy.types.Object) -> list[int]:
    """Sorted frames of the keys of ``ob`` and of its parents (an imported target shown as
    a bone has its keys on its ``_keys`` parent)."""
    frames: set[int] = set()
    at: bpy.types.Object | None = ob
    while at is not None:
        frames.update(keying.key_frames(at))
        at = at.parent
    return sorted(frames)


def _keyed_angles(ev: bpy.types.Object) -> Euler | None:
    """XYZ rotation channels that may hold the pose's angles: the object's own, or those of
    its parent for an imported target (``<name>_keys``) whose own rotation is constant."""
    if ev.rotation_mode == "XYZ":
        return ev.rotation_euler.copy()
    parent = ev.parent
    if parent is not None and parent.rotation_mode == "XYZ" and parent.name.endswith(
            CARRIER_SUFFIX):
        return parent.rotation_euler.copy()
    return None


def world_keyframes(
    context: bpy.types.Context, ob: bpy.types.Object, frames: Sequence[int],
    to_joint: np.ndarray | None = None,
) -> list[Keyframe]:
    """``ob``'s evaluated world pose at each frame as keyframes (m, degrees XYZ).

    With ``to_joint`` (``N``, 3x3) the rotation written is ``R_world @ N``: the joint
    frame of a target that shows its bone's orientation. Each Euler triple is the one
    nearest to the keyed XYZ angles at that frame (the object's own channels, or its
    ``_keys`` parent's), and exactly those angles rounded when they give the same rotation
    within float32 noise (so an imported target gives back the file's angles, beyond
    +-180 degrees included); otherwise nearest to the previous frame's angles.
    The scene's current frame is restored.
    """
    bad = [f for f in frames if f < 0]
    if bad:
        raise DhikError.at(f"object {ob.name!r}", "", f"frame {bad[0]} is negative; "
                           "targets.json frames start at 0")
    scene, depsgraph = scene_of(context), context.evaluated_depsgraph_get()
    current = scene.frame_current
    previous = Euler()
    out: list[Keyframe] = []
    with frame_loop(scene):
        try:
            for f in frames:
                scene.frame_set(f)
                ev = ob.evaluated_get(depsgraph)
                loc, rot, _scale = ev.matrix_world.decompose()
                r = orthonormal(np.array(rot.to_matrix(), dtype=float))
                if to_joint is not None:
                    r = r @ to_joint
                keyed = _keyed_angles(ev)
                near = keyed if keyed is not None else previous
                previous = Matrix(r.tolist()).to_euler("XYZ", near)
                angles = np.asarray(previous, dtype=float)
                if keyed is not None:
                    rounded = np.round(np.degrees(np.asarray(keyed, dtype=float)), EULER_DECIMALS)
                    gap = matrix_to_rotvec(euler_xyz_to_matrix(np.radians(rounded)) @ r.T)
                    if float(np.linalg.norm(gap)) <= SAME_ROTATION:
                        angles = np.radians(rounded)
                        previous = Euler(angles.tolist(), "XYZ")
                x, y, z = (round(float(v), POS_DECIMALS) for v in np.asarray(loc, dtype=float))
                ax, ay, az = (round(math.degrees(float(a)), EULER_DECIMALS) for a in angles)
                out.append(Keyframe(int(f), (x, y, z), (ax, ay, az)))
        finally:
            scene.frame_set(current)
    return out


def _rigid(m: Matrix) -> np.ndarray:
    """4x4 numpy rotation + translation of ``m`` (scale removed)."""
    loc, rot, _scale = m.decompose()
    out = np.eye(4)
    out[:3, :3] = np.array(rot.to_matrix(), dtype=float)
    out[:3, 3] = np.array(loc, dtype=float)
    return out


def armature_space_poses(
    depsgraph: bpy.types.Depsgraph, targets: Sequence[bpy.types.Object],
    armature: bpy.types.Object,
) -> list[np.ndarray]:
    """Per target, its evaluated world pose in the armature's space now (4x4, metres,
    scale removed; see :func:`armature_space_tracks`)."""
    inverse = armature.evaluated_get(depsgraph).matrix_world.inverted_safe()
    return [_rigid(inverse @ t.evaluated_get(depsgraph).matrix_world) for t in targets]


def armature_space_tracks(
    context: bpy.types.Context, targets: Sequence[bpy.types.Object], armature: bpy.types.Object,
    frames: Sequence[int], each_frame: Callable[[int], None] | None = None,
) -> list[list[tuple[int, np.ndarray]]]:
    """Per target, ``(frame, 4x4)``: its world pose in the armature's space at each frame.

    ``each_frame(f)`` runs at every frame of the pass, after the scene is set to it (to
    read other evaluated data in the same pass).

    Position is ``armature.matrix_world^-1 @ p`` (metres of armature space, so an
    object scale scales the target distance); rotation is the target's rotation
    relative to the armature object's (scale removed). All targets are read in one pass
    over the frames; the current frame is restored.
    """
    scene, depsgraph = scene_of(context), context.evaluated_depsgraph_get()
    current = scene.frame_current
    out: list[list[tuple[int, np.ndarray]]] = [[] for _ in targets]
    with frame_loop(scene):
        try:
            for f in frames:
                scene.frame_set(f)
                poses = armature_space_poses(depsgraph, targets, armature)
                for track, pose in zip(out, poses, strict=True):
                    track.append((int(f), pose))
                if each_frame is not None:
                    each_frame(int(f))
        finally:
            scene.frame_set(current)
    return out
