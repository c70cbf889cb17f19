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

Space. targets.json is in the skeleton's frame, which is the armature's space (what
Export Skeleton writes, and what a bake solves in): Import Targets parents the keyed
empty to the panel's armature, and Export Targets writes the target's pose in the
armature's space (targets_export).

Bone targets. A target or pole may be a bone of an armature: its pose is
``armature.matrix_world @ pose_bone.matrix`` as Blender evaluates it (the bone's head,
Y along the bone), what Blender's IK constraint reads from Target + Bone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import bpy
import numpy as np
from mathutils import Euler, Matrix

from ..core.errors import DhikError
from ..core.model.definition import Keyframe
from ..core.rotations import (
    euler_xyz_to_matrix,
    matrix_to_quat,
    matrix_to_rotvec,
    quat_to_matrix,
    quat_to_matrix_rows,
)
from . import bone_refs, keying
from .access import armature_data, collection_of, scene_of
from .armature_read import read_skeleton, rig_joint_maps
from .frames import frame_loop
from .joint_map import JointMap
from .key_curves import matrices_to_euler
from .props import settings
from .target_curves import TargetCurves

POS_DECIMALS = 7  # 0.1 micrometre: below float32 resolution of the keyed values
EULER_DECIMALS = 5  # degrees, for the angles of a target's own keys
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
            return bone_refs.current(s.armature, row.bone, row.bone_tag)
    if s.effector or s.armature is None:
        return bone_refs.current(s.armature, s.effector, s.effector_tag)
    leaves = [b.name for b in armature_data(s.armature).bones if not b.children]
    return leaves[0] if len(leaves) == 1 else ""


def bone_to_joint(context: bpy.types.Context, bone: str) -> np.ndarray | None:
    """``N = B^T C`` of ``bone`` of the panel's armature (3x3): ``R_joint = R_bone @ N``;
    None without an armature or a bone. DhikError when the armature has no such bone."""
    ob = settings(context).armature
    if ob is None or not bone:
        return None
    maps = rig_joint_maps(ob, read_skeleton(ob))
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
    to_joint: np.ndarray | None = None, parent: bpy.types.Object | None = None,
) -> bpy.types.Object:
    """New 'ARROWS' empty in the active collection, keyed at every keyframe (LINEAR).

    With ``to_joint`` (``N``, 3x3, not the identity) the keys go to a plain-axes empty
    ``<name>_keys`` and the returned target is its child turned by ``N^T``: its world
    rotation is the bone's orientation for the file's joint frames. With ``parent`` (the
    armature) the keyed empty is its child (no parent inverse): the file's frame is the
    armature's space, as the skeleton's is, so the targets move with the armature.
    """
    if to_joint is not None and float(np.abs(to_joint - np.eye(3)).max()) > SAME_ROTATION:
        carrier = create_target_empty(context, keyframes, name + CARRIER_SUFFIX,
                                      parent=parent)
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
    ob.parent = parent
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


def _decimal(value: float, decimals: int) -> float:
    """``value`` (a float32 number from Blender) rounded to ``decimals`` when that is the
    same float32 (so a file's numbers come back as written), else to 10 decimals."""
    short = round(value, decimals)
    return short if np.float32(short) == np.float32(value) else round(value, 10)


def world_keyframes(
    context: bpy.types.Context, ob: bpy.types.Object, frames: Sequence[int],
    to_joint: np.ndarray | None = None, bone: str = "",
    armature: bpy.types.Object | None = None,
) -> list[Keyframe]:
    """``ob``'s evaluated pose at each frame as keyframes (m, degrees XYZ): its world
    pose, or with ``armature`` its pose in that armature's space (as a bake reads it:
    ``armature.matrix_world^-1 @ pose``, scale removed, the same float64 rotation). With
    ``bone``: that bone of armature ``ob`` (:func:`world_pose`).

    With ``to_joint`` (``N``, 3x3) the rotation written is ``R @ N``: the joint
    frame of a target that shows its bone's orientation. Each Euler triple (float64) is
    the one nearest to the keyed XYZ angles at that frame (the object's own channels, or
    its ``_keys`` parent's), and exactly those angles rounded when they give the same
    rotation within float32 noise (so an imported target gives back the file's angles,
    beyond +-180 degrees included); otherwise nearest to the previous frame's angles.
    Positions keep their decimals when those are the float32 Blender holds.
    The scene's current frame is restored.
    """
    bad = [f for f in frames if f < 0]
    if bad:
        raise DhikError.at(f"object {ob.name!r}", "", f"frame {bad[0]} is negative; "
                           "targets.json frames start at 0")
    scene, depsgraph = scene_of(context), context.evaluated_depsgraph_get()
    current = scene.frame_current
    previous = np.zeros(3)
    out: list[Keyframe] = []
    with frame_loop(scene):
        try:
            for f in frames:
                scene.frame_set(f)
                ev = ob.evaluated_get(depsgraph)
                m = world_pose(depsgraph, ob, bone)
                if armature is not None:
                    m = armature.evaluated_get(depsgraph).matrix_world.inverted_safe() @ m
                pose = _rigid(m)
                r = pose[:3, :3] if to_joint is None else pose[:3, :3] @ to_joint
                keyed = None if bone else _keyed_angles(ev)
                near = previous if keyed is None else np.asarray(keyed, dtype=float)
                angles = matrices_to_euler(r[None], "XYZ", near)[0]
                exact = False
                if keyed is not None:
                    rounded = np.round(np.degrees(np.asarray(keyed, dtype=float)), EULER_DECIMALS)
                    gap = matrix_to_rotvec(euler_xyz_to_matrix(np.radians(rounded)) @ r.T)
                    if float(np.linalg.norm(gap)) <= SAME_ROTATION:
                        angles, exact = np.radians(rounded), True
                previous = angles
                x, y, z = (_decimal(float(v), POS_DECIMALS) for v in pose[:3, 3])
                degrees = np.degrees(angles) if not exact else rounded
                ax, ay, az = (round(float(a), EULER_DECIMALS if exact else 10) for a in degrees)
                out.append(Keyframe(int(f), (x, y, z), (ax, ay, az)))
        finally:
            scene.frame_set(current)
    return out


def _rigid(m: Matrix) -> np.ndarray:
    """4x4 numpy rotation + translation of ``m`` (scale removed; the rotation made
    orthonormal in float64, as Export Targets writes it)."""
    return _rigid_rows([_decomposed(m)])[0]


def _decomposed(m: Matrix) -> tuple[float, ...]:
    """``m``'s rotation quaternion (w, x, y, z) and location, as Blender decomposes it
    (scale dropped): 7 floats, for :func:`_rigid_rows`."""
    loc, rot, _scale = m.decompose()
    return (*rot[:], *loc[:])


def _rigid_rows(rows: Sequence[Sequence[float]]) -> np.ndarray:
    """:func:`_rigid` of many decomposed matrices (k, 7) at once: (k, 4, 4)."""
    arr = np.array(rows, dtype=float).reshape(-1, 7)
    norm = np.linalg.norm(arr[:, :4], axis=1)
    if not np.isfinite(norm).all() or not norm.all():
        raise ValueError("quaternion must be finite and non-zero")
    out = np.zeros((len(arr), 4, 4))
    out[:, :3, :3] = quat_to_matrix_rows(arr[:, :4])
    out[:, :3, 3] = arr[:, 4:]
    out[:, 3, 3] = 1.0
    return out


def world_pose(depsgraph: bpy.types.Depsgraph, ob: bpy.types.Object, bone: str = "") -> Matrix:
    """The evaluated world matrix of ``ob``, or with ``bone`` of that pose bone of
    armature ``ob``: ``matrix_world @ pose_bone.matrix``, the bone's head and orientation
    (Y along the bone), which is what Blender's IK constraint takes from Target + Bone.
    DhikError when the armature has no such bone."""
    ev = ob.evaluated_get(depsgraph)
    if not bone:
        return ev.matrix_world
    pb = ev.pose.bones.get(bone) if ev.pose is not None else None
    if pb is None:
        raise DhikError.at(f"armature {ob.name!r}", f"bones[{bone!r}]", "no such bone")
    return ev.matrix_world @ pb.matrix


def armature_space_poses(
    depsgraph: bpy.types.Depsgraph, targets: Sequence[bpy.types.Object],
    armature: bpy.types.Object, bones: Sequence[str] | None = None,
) -> list[np.ndarray]:
    """Per target (with ``bones``: per target and bone name, "" for the object itself),
    its evaluated world pose in the armature's space now (4x4, metres, scale removed;
    see :class:`TrackReader`)."""
    return list(_rigid_rows(_decomposed_poses(depsgraph, targets, armature, bones)))


def _decomposed_poses(depsgraph: bpy.types.Depsgraph, targets: Sequence[bpy.types.Object],
                      armature: bpy.types.Object, bones: Sequence[str] | None
                      ) -> list[tuple[float, ...]]:  # fmt: skip
    """:func:`armature_space_poses` as :func:`_decomposed` rows (the per-frame part of a
    read: Blender's matrices only, no numpy)."""
    inverse = armature.evaluated_get(depsgraph).matrix_world.inverted_safe()
    names = [""] * len(targets) if bones is None else list(bones)
    return [_decomposed(inverse @ world_pose(depsgraph, t, b))
            for t, b in zip(targets, names, strict=True)]


class TrackReader:
    """Per target, ``(frame, 4x4)``: its world pose in the armature's space at each of
    ``frames``, read a chunk of frames at a time (:meth:`read`), so an interactive bake
    can show its progress and stop in between.

    ``bones`` names a bone per target ("" for the object: see :func:`world_pose`).
    ``each_frame(f)`` runs at every frame, after the scene is set to it (to read other
    evaluated data in the same pass). Position is ``armature.matrix_world^-1 @ p``
    (metres of armature space, so an object scale scales the target distance); rotation
    is the target's rotation relative to the armature object's (scale removed). The
    scene's current frame is restored after every chunk. With :attr:`curves`
    (``target_curves.TargetCurves``: nothing but their keys places the targets, and the
    caller knows the rig is still) the poses come from the targets' F-curves: no frame
    is set and ``each_frame`` is not called.
    """

    def __init__(self, context: bpy.types.Context, targets: Sequence[bpy.types.Object],
                 armature: bpy.types.Object, frames: Sequence[int],
                 each_frame: Callable[[int], None] | None = None,
                 bones: Sequence[str] | None = None) -> None:  # fmt: skip
        self.scene = scene_of(context)
        self.depsgraph = context.evaluated_depsgraph_get()
        self.targets, self.armature = list(targets), armature
        self.bones = [""] * len(self.targets) if bones is None else list(bones)
        self.frames = [int(f) for f in frames]
        self.each_frame = each_frame
        self.tracks: list[list[tuple[int, np.ndarray]]] = [[] for _ in self.targets]
        self.done = 0
        self.curves: TargetCurves | None = None

    @property
    def total(self) -> int:
        return len(self.frames)

    @property
    def finished(self) -> bool:
        return self.done >= len(self.frames)

    def read(self, count: int) -> None:
        """Read the next ``count`` frames (fewer at the end)."""
        scene = self.scene
        current = scene.frame_current
        frames = self.frames[self.done:self.done + max(count, 1)]
        if self.curves is not None:  # the targets' own keys: no frame loop
            poses = self.curves.poses(frames)
            with frame_loop(scene):  # as after a loop: the current frame evaluated again
                scene.frame_set(current)
        else:
            rows: list[tuple[float, ...]] = []
            with frame_loop(scene):
                try:
                    for f in frames:
                        scene.frame_set(f)
                        rows.extend(_decomposed_poses(self.depsgraph, self.targets,
                                                      self.armature, self.bones))
                        if self.each_frame is not None:
                            self.each_frame(f)
                finally:
                    scene.frame_set(current)
            poses = _rigid_rows(rows).reshape(len(frames), len(self.targets), 4, 4)
        for i, track in enumerate(self.tracks):  # the poses of every frame read, at once
            track.extend(zip(frames, poses[:, i], strict=True))
        self.done += len(frames)


def armature_space_tracks(
    context: bpy.types.Context, targets: Sequence[bpy.types.Object], armature: bpy.types.Object,
    frames: Sequence[int], each_frame: Callable[[int], None] | None = None,
    bones: Sequence[str] | None = None,
) -> list[list[tuple[int, np.ndarray]]]:
    """:class:`TrackReader`'s tracks, all frames in one pass."""
    reader = TrackReader(context, targets, armature, frames, each_frame, bones)
    reader.read(reader.total)
    return reader.tracks
