"""What Blender evaluates on a rig besides its bones' channels, checked before a bake.

The core solves a tree of joints whose values are the bones' channels. Whatever else
Blender applies on the way from the root to an effector is either modelled or refused
here with one DhikError line naming the bone (or strip) and the setting, before
anything changes (README, "What the add-on models and refuses"):

- modelled: the bones' location (translation joints, armature_read), keys, drivers and
  NLA strips on bones above the chains (their evaluated channels are read every frame),
  the armature object's evaluated transform (targets are taken into its space every
  frame), a bone's ``inherit_scale`` (it only matters under a scaled bone, refused
  below), ``use_local_location`` off (the translation joints' axes are the parent's);
- refused on the path from the root to an effector: the armature in Rest Position,
  Inherit Rotation off, Relative Parenting, an active bone constraint (IK, Limit
  Rotation, Copy Rotation ...), a scaled bone above the chains (keyed, static or
  inherited) and, on a solved bone, a driver or an F-curve modifier on a channel the
  bake keys; a bone above the chains that moves in a way its joints cannot (location on
  a locked or connected bone, a turn off a hinge's axis); an orientation target under
  a sheared or non-uniformly scaled armature object (positions stay exact: allowed with
  orientation weight 0); NLA: an active action that blends other than Replace at full
  influence over NLA strips, and tweak mode on a strip.

Bones off those paths (other roots, fingers, a face) are not checked: the bake never
touches them. :func:`check_rig` runs when the rig is read (bake and live preview),
:class:`FrameCheck` on every frame a bake reads, :func:`check_nla` before a bake keys.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import bpy
import numpy as np

from ..core.errors import DhikError
from ..core.model.definition import SkeletonDef
from . import keying
from .access import armature_data, pose_of
from .animation import channel_quaternion
from .frames import frame_loop
from .joint_map import JointMap

SCALE_TOLERANCE = 1e-5  # |scale - 1|, shear: below this a bone counts as unscaled (float32)
SLIDE_TOLERANCE = 1e-6  # m: a location channel this close to 0 does not move its bone
TURN_TOLERANCE = 1e-6  # rad: a turn off a hinge's axis below this is float noise
TRANSFORM_PROPS = ("location", "rotation_quaternion", "rotation_euler",
                   "rotation_axis_angle", "scale")


def path_bones(ob: bpy.types.Object, defn: SkeletonDef, effectors: Sequence[str]) -> list[str]:
    """Bones on the paths from the root to the effectors (effectors included), parents
    first."""
    parent = {j.name: j.parent for j in defn.joints}
    on_path: set[str] = set()
    for name in effectors:
        at: str | None = name
        while at is not None and at not in on_path:
            on_path.add(at)
            at = parent[at]
    bones = armature_data(ob).bones
    return [j.name for j in defn.joints if j.name in on_path and j.name in bones]


def _similarity_gap(m: np.ndarray) -> np.ndarray:
    """How far each 3x3 ``m`` (..., 3, 3) is from a rotation times a uniform scale
    (relative; inf for a zero matrix)."""
    gram = np.swapaxes(m, -1, -2) @ m
    size = np.trace(gram, axis1=-2, axis2=-1)[..., None, None] / 3.0
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.abs(gram / size - np.eye(3)).max(axis=(-2, -1))
    return np.where(size[..., 0, 0] > 0.0, gap, math.inf)


def _scale_gap(m: np.ndarray) -> np.ndarray:
    """How far each 3x3 ``m`` (..., 3, 3) is from a rotation (``|m^T m - I|``, largest
    entry; 0 for a rotation)."""
    return np.abs(np.swapaxes(m, -1, -2) @ m - np.eye(3)).max(axis=(-2, -1))


def check_armature_space(ob: bpy.types.Object, m: np.ndarray,
                         weights: Sequence[tuple[float, float]],
                         frame: int | None = None) -> None:  # fmt: skip
    """DhikError when an effector has an orientation target and the armature object's
    world matrix ``m`` (4x4) is not a rotation with a uniform scale: its bones' world
    orientations are then sheared and an orientation target has no exact meaning."""
    if all(w[1] <= 0.0 for w in weights):
        return
    if float(_similarity_gap(m[:3, :3])) > SCALE_TOLERANCE:
        at = "" if frame is None else f" at frame {frame}"
        parent = f" (from its parent {ob.parent.name!r})" if ob.parent is not None else ""
        raise DhikError.at(f"armature {ob.name!r}", "matrix_world", f"is sheared or scaled "
                           f"unevenly{at}{parent}, so its bones' world orientations are not "
                           "rotations and an orientation target cannot be met exactly; "
                           "scale it evenly, or use position-only targets (Orientation 0)")


def _active_constraints(pb: bpy.types.PoseBone) -> list[str]:
    return [f"{c.name!r} ({c.type})" for c in pb.constraints
            if c.enabled and (c.influence > 0.0 or _animated(pb, c))]


def _animated(pb: bpy.types.PoseBone, con: bpy.types.Constraint) -> bool:
    """Whether the constraint's influence is keyed or driven (it may be > 0 somewhere)."""
    ob = pb.id_data
    if not isinstance(ob, bpy.types.Object) or ob.animation_data is None:
        return False
    ad = ob.animation_data
    path = con.path_from_id("influence")
    return any(fc.data_path == path for fc in ad.drivers) or (
        ad.action is not None and _action_has(ob, path))


def _action_has(ob: bpy.types.Object, path: str) -> bool:
    cb = keying.assigned_channelbag(ob)
    return cb is not None and any(fc.data_path == path for fc in cb.fcurves)


def check_rig(ob: bpy.types.Object, defn: SkeletonDef, maps: dict[str, JointMap],
              effectors: Sequence[str], solved: Sequence[str],
              weights: Sequence[tuple[float, float]]) -> None:  # fmt: skip
    """DhikError (one line: armature, bone, setting) for what the model cannot follow on
    the paths to ``effectors`` (see the module docstring); nothing is changed."""
    where = f"armature {ob.name!r}"
    arm = armature_data(ob)
    if arm.pose_position == "REST":
        raise DhikError.at(where, "pose_position", "is Rest Position: Blender shows the rest "
                           "pose whatever the keys; switch to Pose Position to bake")
    check_armature_space(ob, np.array(ob.matrix_world, dtype=float), weights)
    pose = pose_of(ob).bones
    for name in path_bones(ob, defn, effectors):
        bone, pb = arm.bones[name], pose[name]
        here = f"bones[{name!r}]"
        if bone.parent is not None and not bone.use_inherit_rotation:
            raise DhikError.at(where, here, "has Inherit Rotation off: its rotation does not "
                               "follow its parent's, which no joint can do; turn it on "
                               "(Bone > Relations)")
        if bone.parent is not None and bone.use_relative_parent:
            raise DhikError.at(where, here, "has Relative Parenting on: dhik's joints follow "
                               "their parent's full pose; turn it off (Bone > Relations)")
        active = _active_constraints(pb)
        if active:
            raise DhikError.at(where, here, f"has the constraint {', '.join(active)}, which "
                               "changes its pose after the keys dhik writes; mute it or set "
                               "its influence to 0 to bake (or choose another effector)")
    _check_solved_curves(ob, maps, solved)


def _check_solved_curves(ob: bpy.types.Object, maps: dict[str, JointMap],
                         solved: Sequence[str]) -> None:  # fmt: skip
    """DhikError for a driver or an active F-curve modifier on a channel of a solved bone:
    either replaces the keys the bake writes."""
    ad = ob.animation_data
    if ad is None:
        return
    bones = {maps[n].bone for n in solved}
    pose = pose_of(ob).bones
    paths = {pose[b].path_from_id(p): b for b in bones for p in TRANSFORM_PROPS}
    where = f"armature {ob.name!r}"
    for fc in ad.drivers:
        if fc.data_path in paths and not fc.mute:
            raise DhikError.at(where, f"{fc.data_path}[{fc.array_index}]", "has a driver, which "
                               f"overrides the keys dhik writes on bone {paths[fc.data_path]!r}; "
                               "mute or remove the driver to bake that bone")
    cb = keying.assigned_channelbag(ob)
    for fc in cb.fcurves if cb is not None else ():
        mods = [m.type for m in fc.modifiers if m.active and not m.mute]
        if fc.data_path in paths and mods:
            raise DhikError.at(where, f"{fc.data_path}[{fc.array_index}]", f"has the F-curve "
                               f"modifier {', '.join(mods)}, which changes the keys dhik "
                               "writes; remove or mute it to bake that bone")


def check_nla(ob: bpy.types.Object) -> None:
    """DhikError when the NLA makes the keys of the active action something else than
    the pose they key: tweak mode on a strip, or an active action that blends other
    than Replace at full influence over unmuted NLA strips. (Without NLA strips Blender
    plays the action as it is, whatever its blending.)"""
    ad = ob.animation_data
    if ad is None:
        return
    where = f"armature {ob.name!r}"
    if ad.use_tweak_mode:
        strip = next((f"{s.name!r} (track {t.name!r})" for t in ad.nla_tracks for s in t.strips
                      if s.action is not None and s.action == ad.action), "a strip")
        raise DhikError.at(where, "animation_data", f"is in NLA tweak mode on {strip}: its "
                           "keys play at the strip's mapped frames and blending; leave tweak "
                           "mode (Tab in the NLA editor) to bake into an action above the "
                           "strips")
    tracks = [t for t in ad.nla_tracks if not t.mute and any(not s.mute for s in t.strips)]
    if not (ad.use_nla and tracks):
        return
    below = f"the NLA track {tracks[0].name!r}" + (f" and {len(tracks) - 1} more"
                                                   if len(tracks) > 1 else "")
    if ad.action_blend_type != "REPLACE":
        raise DhikError.at(where, "animation_data.action_blend_type", f"is "
                           f"{ad.action_blend_type!r} over {below}: Blender would combine the "
                           "keys dhik writes with the strips; set the action's blending to "
                           "Replace (NLA editor, sidebar) to bake")
    if ad.action_influence < 1.0 or _influence_animated(ad):
        raise DhikError.at(where, "animation_data.action_influence", f"is "
                           f"{ad.action_influence:.3g} over {below}: Blender would mix the "
                           "keys dhik writes with the strips; set it to 1 to bake")


def _influence_animated(ad: bpy.types.AnimData) -> bool:
    return any(fc.data_path == "animation_data.action_influence" for fc in ad.drivers)


def nla_in_use(ob: bpy.types.Object) -> bool:
    """Whether NLA strips play below the active action (they may animate channels the
    action does not key)."""
    ad = ob.animation_data
    return ad is not None and ad.use_nla and any(
        not t.mute and any(not s.mute for s in t.strips) for t in ad.nla_tracks)


class FrameCheck:
    """Per frame of a bake's pass over the scene: what Blender shows of the bones above
    the chains (the part of the path the solve takes from the bones' own animation) must
    be what their joints can hold. DhikError names the bone, the setting and the frame.

    Checked: no scale (a scaled bone scales every offset below it: keyed, static or
    inherited squash and stretch), no location on a bone without translation joints
    (locked or connected ones are held at rest), no turn off a hinge's axis; and the
    armature's evaluated world matrix (see :func:`check_armature_space`).

    Calling it on a frame records what Blender evaluated there (all bones' matrices and
    locations in one read each); :meth:`flush` checks the frames recorded, all at once,
    and a frame the arrays flag is set again and checked bone by bone (:meth:`check_now`),
    which raises the one-line error."""

    def __init__(self, ob: bpy.types.Object, defn: SkeletonDef, maps: dict[str, JointMap],
                 effectors: Sequence[str], solved: Sequence[str],
                 weights: Sequence[tuple[float, float]]) -> None:  # fmt: skip
        self.ob, self.maps, self.weights = ob, maps, list(weights)
        moved = {maps[n].bone for n in solved}
        parent = {j.name: j.parent for j in defn.joints}
        arm = armature_data(ob)
        above: list[str] = []
        for name in path_bones(ob, defn, effectors):
            at: str | None = name
            while at is not None and at not in moved:
                at = parent[at]
            if at is None:  # nothing on its way to the root is solved
                above.append(name)
        self.above = above
        # against the rest matrix: float32 edit bones are orthonormal to about 1e-5 only
        self.rest_inverse = {n: np.linalg.inv(np.array(arm.bones[n].matrix_local.to_3x3(),
                                                       dtype=float)) for n in above}
        slides = {m.bone for m in maps.values() if m.type == "prismatic"}
        fixed = {j.name for j in defn.joints if j.type == "fixed"}  # safety: a WARNING
        self.fixed_place = [n for n in above if n not in slides and n not in fixed
                            and not arm.bones[n].use_connect]
        self.hinges = [n for n in above if n in maps and maps[n].type == "revolute"]
        index = {pb.name: i for i, pb in enumerate(pose_of(ob).bones)}
        self._count = len(index)
        self._above = np.array([index[n] for n in above], dtype=np.intp)
        self._place = np.array([index[n] for n in self.fixed_place], dtype=np.intp)
        self._rest = np.array([self.rest_inverse[n] for n in above]).reshape(-1, 3, 3)
        self._oriented = any(w[1] > 0.0 for w in self.weights)
        self._frames: list[int] = []
        self._world: list[np.ndarray] = []
        self._mats: list[np.ndarray] = []
        self._locs: list[np.ndarray] = []

    def __call__(self, frame: int) -> None:
        """Record what Blender evaluates at ``frame`` (the scene is set to it); with a
        hinge above the chains, check the frame now, bone by bone."""
        if self.hinges:
            self.check_now(frame)
            return
        ob = self.ob
        bones = pose_of(ob).bones
        self._frames.append(frame)
        if self._oriented:
            self._world.append(np.array(ob.matrix_world, dtype=float)[:3, :3])
        if self.above:  # column-major 4x4s, every bone in one read
            mats = np.empty(self._count * 16, dtype=np.float32)
            bones.foreach_get("matrix", mats)
            self._mats.append(mats.reshape(-1, 4, 4)[self._above])
        if self.fixed_place:
            locs = np.empty(self._count * 3, dtype=np.float32)
            bones.foreach_get("location", locs)
            self._locs.append(locs.reshape(-1, 3)[self._place])

    def flush(self, scene: bpy.types.Scene) -> None:
        """Check the frames recorded since the last flush, in order; a frame the arrays
        flag (at half the tolerances) is set again and checked by :meth:`check_now`, so
        the first problem raises its DhikError. The current frame is restored."""
        frames, self._frames = self._frames, []
        if not frames:
            return
        flagged = np.zeros(len(frames), dtype=bool)
        if self._oriented:
            flagged |= ~(_similarity_gap(np.array(self._world)) <= 0.5 * SCALE_TOLERANCE)
        if self.above:  # (F, A, 3, 3) bone matrices, transposed from column-major
            m = np.array(self._mats, dtype=float)[..., :3, :3].swapaxes(-1, -2) @ self._rest
            flagged |= _scale_gap(m).max(axis=1) > 0.5 * SCALE_TOLERANCE
        if self.fixed_place:
            flagged |= np.abs(np.array(self._locs, dtype=float)).max(axis=(1, 2)) \
                > 0.5 * SLIDE_TOLERANCE
        self._world, self._mats, self._locs = [], [], []
        if not flagged.any():
            return
        current = scene.frame_current
        with frame_loop(scene):
            try:
                for i in np.flatnonzero(flagged):
                    scene.frame_set(frames[int(i)])
                    self.check_now(frames[int(i)])
            finally:
                scene.frame_set(current)

    def check_now(self, frame: int) -> None:
        """The checks on the scene as it is now (``frame``), bone by bone: DhikError at
        the first problem."""
        ob = self.ob
        where = f"armature {ob.name!r}"
        pose = pose_of(ob).bones
        check_armature_space(ob, np.array(ob.matrix_world, dtype=float), self.weights, frame)
        for name in self.above:
            pb = pose[name]
            m = np.array(pb.matrix, dtype=float)[:3, :3] @ self.rest_inverse[name]
            if float(_scale_gap(m)) > SCALE_TOLERANCE:
                scale = ", ".join(f"{v:.4g}" for v in np.array(pb.scale, dtype=float))
                raise DhikError.at(where, f"bones[{name!r}]", f"is scaled at frame {frame} "
                                   f"(its scale channels ({scale}), inherited or constrained "
                                   "scale): a scaled bone above the chains scales the bones "
                                   "below it, which no joint can do; keep its scale 1 or put "
                                   "it in the chain (the bake holds a solved bone's scale at 1)")
        for name in self.fixed_place:
            loc = np.array(pose[name].location, dtype=float)
            if float(np.abs(loc).max()) > SLIDE_TOLERANCE:
                raise DhikError.at(where, f"bones[{name!r}]", f"has location "
                                   f"({', '.join(f'{v:.4g}' for v in loc)}) at frame {frame} "
                                   "while its location channels are all locked: dhik keeps "
                                   "it at its rest place; clear its location or unlock it")
        for name in self.hinges:
            jm = self.maps[name]
            q = channel_quaternion(pose[name])
            entry = jm.entry(q, np.zeros(3))
            back = jm.channel_value(entry)
            gap = 2.0 * math.acos(min(1.0, abs(float(np.dot(q / np.linalg.norm(q), back)))))
            if gap > TURN_TOLERANCE:
                raise DhikError.at(where, f"bones[{name!r}]", f"turns {gap:.3g} rad off its "
                                   f"hinge axis at frame {frame} (its IK locks leave one axis "
                                   "free, so its joint is a hinge); unlock the other axes or "
                                   "key it about its free axis only")
