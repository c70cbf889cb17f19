"""The rig a bake (and the live preview) reads from ``scene.dhik``, validated.

:class:`BakeRig` holds the armature as a skeleton and, per effector (main first), its
bone, target, weights, chain length and pole. A target or pole is an object or a bone
of an armature (the IK constraint's Target + Bone): another armature's bone (a mocap
armature, a control rig), or a bone of the baked armature that the solve does not
move. Bone names are read through :mod:`.bone_refs`, so renamed bones are followed.
Every problem is one DhikError naming the ``scene.dhik`` setting.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np

from ..core.app.bake import EffectorTrack
from ..core.errors import DhikError
from ..core.model.skeleton import Skeleton
from ..core.solver.settings import SolverSettings
from . import bone_refs
from .access import armature_data, pose_of, scene_of
from .animation import channel_floats
from .armature_read import chain_joint_count, read_skeleton_notes, rig_joint_maps
from .bake_keys import (
    bone_joints,
    check_effector_moves,
    keyed_outside,
    path_joints,
    solved_joints,
)
from .frames import frame_loop
from .joint_map import JointMap
from .props import DHIK_PG_settings, scene_settings
from .rig_checks import check_rig
from .safety import check_applied_scale, require_in_scene
from .targets import joint_frame_track


def channels_still(ob: bpy.types.Object) -> bool:
    """Whether nothing changes ``ob``'s pose channels from frame to frame: no action,
    NLA track or driver on it, and no frame-change or depsgraph handler but dhik's own
    (a script's may pose it; dhik's do nothing inside a bake's frame loop,
    ``frames.PAUSED``). A bake then reads its driven bones once, not on every frame."""
    ad = ob.animation_data
    if ad is not None and (ad.action is not None or len(ad.nla_tracks) or len(ad.drivers)):
        return False
    h = bpy.app.handlers
    return all(getattr(fn, "__module__", "").startswith(_PACKAGE)
               for handlers in (h.frame_change_pre, h.frame_change_post,
                                h.depsgraph_update_pre, h.depsgraph_update_post)
               for fn in handlers)


_PACKAGE = __name__.rpartition(".")[0] + "."  # this add-on's modules


@dataclass
class BakeRig:
    """What a bake (and the live preview) reads from ``scene.dhik`` before any frame: the
    armature as a skeleton and the effectors with their targets, weights, chain lengths
    and poles, validated. One per effector, main first, in every list. A target or pole
    that is a bone of an armature is that object with the bone's name in
    ``target_bones`` / ``pole_bones`` ("" for an object)."""

    armature: bpy.types.Object
    skeleton: Skeleton
    maps: dict[str, JointMap]
    names: list[str]  # effector bones
    weights: list[tuple[float, float]]  # (position, orientation)
    lengths: list[int]  # the core's chain lengths (joints; 0: up to the root)
    targets: list[bpy.types.Object]
    poles: list[bpy.types.Object | None]
    pole_angles: list[float]  # rad
    solved: list[str]  # joints whose bones are keyed (moving joints on the chains)
    driven_names: list[str]  # joints on the effectors' paths that no chain solves
    settings: SolverSettings
    target_bones: list[str] = field(default_factory=list)  # per target: bone or ""
    pole_bones: list[str] = field(default_factory=list)  # per pole: bone or ""
    notes: list[str] = field(default_factory=list)  # armature_read.skeleton_notes

    @functools.cached_property
    def bone_owners(self) -> dict[str, tuple[str | None, list[str]]]:
        """Per bone, the joint on its rotation and those on its location
        (:func:`~.bake_keys.bone_joints` of ``maps``), worked out once per rig."""
        return bone_joints(self.maps)

    @property
    def objects(self) -> list[bpy.types.Object]:
        """The objects read each frame: every target, then every pole that is set."""
        return self.targets + [p for p in self.poles if p is not None]

    @property
    def bones(self) -> list[str]:
        """Per object of :attr:`objects`, the bone of it that is read ("" for the object):
        pass to :func:`~.targets.armature_space_poses`."""
        targets = self.target_bones or [""] * len(self.targets)
        poles = self.pole_bones or [""] * len(self.poles)
        return list(targets) + [b for p, b in zip(self.poles, poles, strict=True)
                                if p is not None]

    @property
    def roles(self) -> list[str]:
        """Where each of :attr:`objects` is set in ``scene.dhik`` (for error messages)."""
        where = ["" if i == 0 else f"effectors[{i - 1}]." for i in range(len(self.names))]
        return [f"{w}target" for w in where] + [
            f"{w}pole_target" for w, p in zip(where, self.poles, strict=True) if p is not None]

    @classmethod
    def read(cls, scene: bpy.types.Scene) -> BakeRig:
        """Validate ``scene.dhik`` and read the rig; DhikError on anything unusable."""
        s = scene_settings(scene)
        ob = s.armature
        if ob is None or ob.type != "ARMATURE":
            raise DhikError.at("DHIK", "armature", "choose an armature to bake")
        require_in_scene(scene, ob, "armature")
        main = _Row.main(s)
        defn, notes = read_skeleton_notes(ob)
        skeleton = Skeleton(defn)
        if main.bone and not skeleton.has(main.bone):
            raise DhikError.at("DHIK", "effector", f"{ob.name!r} has no bone {main.bone!r}")
        leaves = skeleton.leaves()
        if not main.bone and len(leaves) != 1:
            raise DhikError.at("DHIK", "effector", f"{ob.name!r} has {len(leaves)} leaf bones "
                               f"({', '.join(leaves)}): choose the effector")
        main.bone = main.bone or leaves[0]
        rows = [main, *_extra_rows(s, ob, skeleton, main.bone)]
        for row in rows:
            row.check_target(scene, ob)
            check_effector_moves(defn, row.bone, "DHIK", row.where or "effector")
        check_applied_scale(ob, defn)
        maps = rig_joint_maps(ob, defn)
        names = [r.bone for r in rows]
        lengths = [chain_joint_count(ob, defn, r.bone, r.chain_length) for r in rows]
        solved = solved_joints(defn, names, lengths)
        for row, n in zip(rows, lengths, strict=True):
            if not solved_joints(defn, [row.bone], [n]):
                raise DhikError.at("DHIK", row.prefix + "chain_length",
                                   f"the {row.chain_length} bone(s) ending at {row.bone!r} "
                                   "cannot move")
        driven_names = [n for n in path_joints(defn, names) if n not in solved]
        for row in rows:
            row.check_pole(scene, ob, s.method)
            row.check_not_moved(ob, solved)
        weights = [r.weights for r in rows]
        check_rig(ob, defn, maps, names, solved, weights)  # what the model cannot follow
        return cls(ob, skeleton, maps, names, weights, lengths,
                   [r.target for r in rows], [r.pole for r in rows],
                   [r.pole_angle for r in rows], solved, driven_names, s.solver_settings(),
                   [r.target_bone for r in rows], [r.pole_bone for r in rows], notes)

    def driven_values(self) -> dict[str, dict[str, Any]]:
        """The driven joints' values (SPEC 3.3 entries) from their bones' current pose."""
        return self.pose_values(self.driven_names)

    def pose_values(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """Joints' values (SPEC 3.3 entries: radians, metres) from their bones' current
        pose. A joint whose bone's channels read as on the last call keeps the entry
        made then (a bake reads the driven joints on every frame; most stand still)."""
        bones = pose_of(self.armature).bones
        seen = self._last_entries
        out: dict[str, dict[str, Any]] = {}
        for name in names:
            pb = bones[self.maps[name].bone]
            key = channel_floats(pb)  # plain floats: numpy only for a bone that moved
            last = seen.get(name)
            if last is None or last[0] != key:
                last = (key, self.maps[name].entry(np.array(key[:4]), np.array(key[4:])))
                seen[name] = last
            out[name] = last[1]
        return out

    @functools.cached_property
    def _last_entries(self) -> dict[str, tuple[tuple[float, ...], dict[str, Any]]]:
        """Per joint the channels last read and the entry made of them (pose_values)."""
        return {}

    def keyed_poses_around(self, context: bpy.types.Context, start: int, end: int
                           ) -> tuple[dict[str, dict[str, Any]] | None,
                                      dict[str, dict[str, Any]] | None]:  # fmt: skip
        """The solved joints' values on frames ``start - 1`` and ``end + 1``, each when
        the current action keys every solved bone on that side of the range (the keys a
        re-baked part of an animation sits between), else None. The current frame is
        restored."""
        before, after = keyed_outside(self.armature, self.solved, start, end)
        if not (before or after):
            return None, None
        scene = scene_of(context)
        current = scene.frame_current
        out: list[dict[str, dict[str, Any]] | None] = []
        with frame_loop(scene):
            try:
                for keyed, frame in ((before, start - 1), (after, end + 1)):
                    if keyed:
                        scene.frame_set(frame)
                    out.append(self.pose_values(self.solved) if keyed else None)
            finally:
                scene.frame_set(current)
        return out[0], out[1]

    def tracks(self, per_object: list[list[tuple[int, np.ndarray]]]) -> list[EffectorTrack]:
        """The core's tracks from ``(frame, armature-space 4x4)`` lists, one per object of
        :attr:`objects` (the targets show their bone's orientation; the core solves for
        the joint's frame; a pole's position is its origin)."""
        pole_tracks = iter(per_object[len(self.targets):])
        out = []
        for i, name in enumerate(self.names):
            # Targets show their bone's orientation; the core solves for the joint's frame.
            frames = joint_frame_track(per_object[i], self.maps, name, self.armature)
            pole = None if self.poles[i] is None else [
                (f, m[:3, 3].tolist()) for f, m in next(pole_tracks)]
            out.append(EffectorTrack(name, frames, *self.weights[i], self.lengths[i], pole,
                                     0.0 if pole is None else self.pole_angles[i]))
        return out


@dataclass
class _Row:
    """One effector row of ``scene.dhik`` (the main one or ``effectors[i]``), its bone
    names as they are now (renames followed: bone_refs)."""

    where: str  # "" for the main row, else "effectors[i]"
    bone: str
    target: bpy.types.Object
    target_bone: str
    weights: tuple[float, float]  # (position, orientation)
    chain_length: int  # bones, as Blender's IK constraint counts them
    pole: bpy.types.Object | None
    pole_bone: str
    pole_angle: float  # rad

    @property
    def prefix(self) -> str:
        """``scene.dhik`` path prefix of the row's properties ("" or "effectors[i].")."""
        return f"{self.where}." if self.where else ""

    @classmethod
    def main(cls, s: DHIK_PG_settings) -> _Row:
        """The main row; DhikError without a target or with weights both 0 (or other
        than 1 with the spec method)."""
        if s.target is None:
            raise DhikError.at("DHIK", "target", "choose a target object")
        weights = (float(s.position_weight), float(s.orientation_weight))
        if max(weights) <= 0.0:
            raise DhikError.at("DHIK", "position_weight", "position and orientation weight "
                               "of the main effector are both 0")
        if s.method == "spec" and weights != (1.0, 1.0):
            raise DhikError.at("DHIK", "orientation_weight" if weights[0] == 1.0 else
                               "position_weight", "weights other than 1 need the Robust method")
        return cls("", bone_refs.current(s.armature, s.effector, s.effector_tag), s.target,
                   _bone_of(s.target, s.target_bone, s.target_bone_tag), weights,
                   int(s.chain_length), s.pole_target,
                   _bone_of(s.pole_target, s.pole_bone, s.pole_bone_tag), float(s.pole_angle))

    def check_target(self, scene: bpy.types.Scene, ob: bpy.types.Object) -> None:
        """DhikError for a target not in the scene, the armature itself without a bone,
        or a bone its armature does not have."""
        _check_object(scene, ob, self.target, self.target_bone, self.prefix, "target")

    def check_pole(self, scene: bpy.types.Scene, ob: bpy.types.Object, method: str) -> None:
        """As :meth:`check_target` for the pole, which needs the robust method."""
        if self.pole is None:
            return
        _check_object(scene, ob, self.pole, self.pole_bone, self.prefix, "pole")
        if method != "robust":
            raise DhikError.at("DHIK", self.prefix + "pole_target",
                               "a pole target needs the Robust method")

    def check_not_moved(self, ob: bpy.types.Object, solved: list[str]) -> None:
        """DhikError when the target or pole is a bone of the baked armature that the
        solve moves (a solved bone or one below it): it would follow its own effector."""
        moving = set(solved)
        for kind, target, bone in (("target", self.target, self.target_bone),
                                   ("pole", self.pole, self.pole_bone)):
            if target is not ob or not bone:
                continue
            at: bpy.types.Bone | None = armature_data(ob).bones[bone]
            while at is not None and at.name not in moving:
                at = at.parent
            if at is not None:
                below = "" if at.name == bone else f" (it is below {at.name!r})"
                raise DhikError.at("DHIK", f"{self.prefix}{kind}_bone", f"bone {bone!r} "
                                   f"moves with the chain it is the {kind} of{below}; choose "
                                   "a bone the bake does not move")


def _bone_of(target: bpy.types.Object | None, name: str, tag: str) -> str:
    """The bone a target setting names now: "" unless ``target`` is an armature."""
    if target is None or target.type != "ARMATURE":
        return ""
    return bone_refs.current(target, name, tag)


def _check_object(scene: bpy.types.Scene, ob: bpy.types.Object, target: bpy.types.Object,
                  bone: str, prefix: str, kind: str) -> None:  # fmt: skip
    """DhikError for a target or pole (``kind``) of the row at ``prefix`` not in the
    scene, the baked armature ``ob`` itself without a bone, or a bone its armature does
    not have."""
    where = prefix + ("target" if kind == "target" else "pole_target")
    require_in_scene(scene, target, where)
    if target is ob and not bone:
        raise DhikError.at("DHIK", where, f"the {kind} cannot be the armature itself; "
                           f"choose one of its bones as the {kind}'s Bone")
    if bone and bone not in armature_data(target).bones:
        raise DhikError.at("DHIK", f"{prefix}{kind}_bone",
                           f"armature {target.name!r} has no bone {bone!r}")


def _extra_rows(
    s: DHIK_PG_settings, ob: bpy.types.Object, skeleton: Skeleton, main: str
) -> list[_Row]:
    """The extra effector rows (``effectors[i]``).

    DhikError names the row for a missing or repeated bone, a missing target, weights
    that are both 0, or weights other than 1 with the spec method.
    """
    rows = []
    used = {main}
    for i, row in enumerate(s.effectors):
        where = f"effectors[{i}]"
        bone = bone_refs.current(ob, row.bone, row.bone_tag)
        if not skeleton.has(bone):
            problem = f"{ob.name!r} has no bone {bone!r}" if bone else "choose a bone"
            raise DhikError.at("DHIK", where, problem)
        if bone in used:
            raise DhikError.at("DHIK", where, f"bone {bone!r} already has a target")
        used.add(bone)
        if row.target is None:
            raise DhikError.at("DHIK", where, "choose a target object")
        weights = (float(row.position_weight), float(row.orientation_weight))
        if max(weights) <= 0.0:
            raise DhikError.at("DHIK", where, "position and orientation weight are both 0")
        if s.method == "spec" and weights != (1.0, 1.0):
            raise DhikError.at("DHIK", where, "weights other than 1 need the Robust method")
        rows.append(_Row(where, bone, row.target,
                         _bone_of(row.target, row.target_bone, row.target_bone_tag), weights,
                         int(row.chain_length), row.pole_target,
                         _bone_of(row.pole_target, row.pole_bone, row.pole_bone_tag),
                         float(row.pole_angle)))
    return rows
