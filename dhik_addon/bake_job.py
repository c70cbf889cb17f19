"""One bake, in three steps: prepare (validate, read targets), solve (core), apply (keys).

The main effector/target and every extra effector row become one core
``EffectorTrack`` each (targets in armature space, metres), solved together by the
chosen method.

``prepare`` reads Blender but changes nothing except the current frame, which it
restores; ``solve`` touches no Blender data, so it may run in a worker thread;
``apply`` plans every key first (bake_keys: rotation modes, frame step, key reduction),
writes animation.json, and only then keys the armature (its current action or a new
one, ``scene.dhik.bake_action``), so a failure anywhere leaves the scene as it was.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np

from ..core.app.bake import BakeResult, EffectorTrack, simulate, summary_line
from ..core.app.formats import save_animation
from ..core.errors import DhikError
from ..core.model.skeleton import Skeleton
from ..core.solver.settings import SolverSettings
from .access import pose_of, scene_of
from .animation import channel_quaternion
from .armature_read import chain_joint_count, joint_maps, read_skeleton
from .bake_keys import (
    KeyPlan,
    check_current_action,
    check_effector_moves,
    keyed_outside,
    path_joints,
    plan_keys,
    solved_joints,
    values_before,
    write_current,
    write_new,
)
from .frames import frame_loop
from .joint_map import JointMap
from .props import DHIK_PG_settings, scene_settings, settings
from .rig_checks import FrameCheck, check_nla, check_rig, nla_in_use
from .safety import check_applied_scale, require_in_scene
from .targets import armature_space_tracks, joint_frame_track
from .verify import Check
from .verify import report as report_blender_check

MARKER_NAME = "dhik: not converged"


class BakeCancelled(Exception):
    """Raised inside the core's progress callback to stop a bake."""


@dataclass
class BakeRig:
    """What a bake (and the live preview) reads from ``scene.dhik`` before any frame: the
    armature as a skeleton and the effectors with their targets, weights, chain lengths
    and poles, validated. One per effector, main first, in every list."""

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

    @property
    def objects(self) -> list[bpy.types.Object]:
        """The objects read each frame: every target, then every pole that is set."""
        return self.targets + [p for p in self.poles if p is not None]

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
        ob, target = s.armature, s.target
        if ob is None or ob.type != "ARMATURE":
            raise DhikError.at("DHIK", "armature", "choose an armature to bake")
        if target is None:
            raise DhikError.at("DHIK", "target", "choose a target object")
        require_in_scene(scene, ob, "armature")
        require_in_scene(scene, target, "target")
        if target is ob:
            raise DhikError.at("DHIK", "target", "the target cannot be the armature itself")
        defn = read_skeleton(ob)
        skeleton = Skeleton(defn)
        effector = s.effector or None
        if effector is not None and effector not in skeleton.joints:
            raise DhikError.at("DHIK", "effector", f"{ob.name!r} has no bone {effector!r}")
        leaves = skeleton.leaves()
        if effector is None and len(leaves) != 1:
            raise DhikError.at("DHIK", "effector", f"{ob.name!r} has {len(leaves)} leaf bones "
                               f"({', '.join(leaves)}): choose the effector")
        main = effector or leaves[0]
        check_effector_moves(defn, main, "DHIK", "effector")
        rows = _extra_rows(s, ob, skeleton, main)
        for i, row in enumerate(rows):
            require_in_scene(scene, row[1], f"effectors[{i}].target")
            check_effector_moves(defn, row[0], "DHIK", f"effectors[{i}]")
        check_applied_scale(ob, defn)
        maps = joint_maps(ob, defn)
        names = [main] + [r[0] for r in rows]
        bone_lengths = [int(s.chain_length)] + [r[4] for r in rows]
        lengths = [chain_joint_count(ob, defn, name, n)
                   for name, n in zip(names, bone_lengths, strict=True)]
        solved = solved_joints(defn, names, lengths)
        for i, (name, n) in enumerate(zip(names, bone_lengths, strict=True)):
            if not solved_joints(defn, [name], [lengths[i]]):
                raise DhikError.at("DHIK", "chain_length" if i == 0 else
                                   f"effectors[{i - 1}].chain_length",
                                   f"the {n} bone(s) ending at {name!r} cannot move")
        driven_names = [n for n in path_joints(defn, names) if n not in solved]
        poles = [s.pole_target] + [r[5] for r in rows]
        for i, pole in enumerate(poles):
            if pole is not None:
                where = "pole_target" if i == 0 else f"effectors[{i - 1}].pole_target"
                require_in_scene(scene, pole, where)
                if pole is ob:
                    raise DhikError.at("DHIK", where, "the pole cannot be the armature itself")
                if s.method != "robust":
                    raise DhikError.at("DHIK", where, "a pole target needs the Robust method")
        weights = [_main_weights(s)] + [(r[2], r[3]) for r in rows]
        check_rig(ob, defn, maps, names, solved, weights)  # what the model cannot follow
        return cls(ob, skeleton, maps, names, weights, lengths,
                   [target] + [r[1] for r in rows], poles,
                   [float(s.pole_angle)] + [r[6] for r in rows], solved, driven_names,
                   s.solver_settings())

    def driven_values(self) -> dict[str, dict[str, Any]]:
        """The driven joints' values (SPEC 3.3 entries) from their bones' current pose."""
        return self.pose_values(self.driven_names)

    def pose_values(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """Joints' values (SPEC 3.3 entries: radians, metres) from their bones' current
        pose."""
        bones = pose_of(self.armature).bones
        return {name: self.maps[name].entry(channel_quaternion(bones[self.maps[name].bone]),
                                            np.array(bones[self.maps[name].bone].location))
                for name in names}

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
class BakeJob:
    """Everything a bake needs, read from the scene before anything changes."""

    armature: bpy.types.Object
    skeleton: Skeleton
    maps: dict[str, JointMap]
    tracks: list[EffectorTrack]  # main effector first; targets (frame, armature-space 4x4, m)
    method: str  # "robust" or "spec"
    warm_start: bool  # False: every frame starts from the T-pose (cold start)
    settings: SolverSettings
    animation_path: str
    solved: list[str]  # joints whose bones are keyed (moving joints on the effectors' chains)
    bake_action: str  # "CURRENT" or "NEW"
    frame_step: int  # key every n-th frame (and the last one)
    key_reduction: float  # largest joint error (rad or m) allowed when keys are dropped
    # per frame the values of the joints on the effectors' paths that no chain solves:
    # their bones' own animation, evaluated (None: every joint up to the root is solved)
    driven: list[tuple[int, dict[str, Any]]] | None = None
    # the solved joints on the frames before and after the range, keyed in the current
    # action: a warm bake starts and ends at them (a re-baked part joins the keys around)
    previous: dict[str, dict[str, Any]] | None = None
    following: dict[str, dict[str, Any]] | None = None
    blender_check: Check | None = None  # what Blender shows after the keys (verify.py)

    @property
    def frame_count(self) -> int:
        """Number of frames to solve."""
        return len(self.tracks[0].targets)

    @classmethod
    def prepare(cls, context: bpy.types.Context) -> BakeJob:
        """Validate the scene and read the targets; DhikError on anything unusable."""
        s = settings(context)
        scene = scene_of(context)
        rig = BakeRig.read(scene)
        start, end = s.frame_range(scene)
        if start < 0 or end < start:
            raise DhikError.at("DHIK", "frame range", f"{start}..{end} is not a range of "
                               "frames >= 0")
        if s.bake_action == "CURRENT":
            check_current_action(rig.armature)
        check_nla(rig.armature)
        path = bpy.path.abspath(s.animation_path) if s.animation_path else ""
        driven: list[tuple[int, dict[str, Any]]] = []
        check = FrameCheck(rig.armature, rig.skeleton.defn, rig.maps, rig.names, rig.solved,
                           rig.weights)

        def read_driven(frame: int) -> None:  # the unsolved bones' own animation
            check(frame)
            if rig.driven_names:
                driven.append((frame, rig.driven_values()))

        per_object = armature_space_tracks(context, rig.objects, rig.armature,
                                           range(start, end + 1), read_driven)
        previous = following = None
        if s.bake_action == "CURRENT" and not s.cold_start:
            previous, following = rig.keyed_poses_around(context, start, end)
        return cls(rig.armature, rig.skeleton, rig.maps, rig.tracks(per_object), s.method,
                   not s.cold_start, rig.settings, path, rig.solved, s.bake_action,
                   s.frame_step, s.key_reduction, driven or None, previous, following)

    def solve(self, progress: Callable[[int, int], None] | None = None) -> BakeResult:
        """Run the core's bake (warm-started frame to frame unless cold); no Blender data
        is touched."""
        return simulate(self.skeleton, self.tracks, None, self.settings, self.warm_start,
                        progress, method=self.method, driven=self.driven,
                        previous=self.previous, following=self.following)

    def apply(self, context: bpy.types.Context, result: BakeResult) -> KeyPlan:
        """Plan the keys, write animation.json (if asked), key the bones, mark unconverged
        frames; the key plan. Anything that can fail runs before Blender data changes."""
        # An interactive bake solves in the background: the armature may be gone by now.
        require_in_scene(scene_of(context), self.armature, "armature")
        before = None
        if self.bake_action == "CURRENT" and result.frames:
            before = values_before(self.armature, self.solved, result.frames[0]["frame"])
        keyed = self.solved
        if self.bake_action == "NEW" and self.driven:  # the new action carries them too
            keyed = self.solved + [n for n in self.driven[0][1] if n not in self.solved]
        plan = plan_keys(self.armature, self.maps, result.frames, keyed,
                         self.frame_step, self.key_reduction, before)
        if self.animation_path:
            save_animation(result.frames, self.animation_path)
        if self.bake_action == "NEW":
            write_new(self.armature, plan, nla_in_use(self.armature))
        else:
            write_current(self.armature, plan, nla_in_use(self.armature))
        scene = scene_of(context)
        for m in [m for m in scene.timeline_markers if m.name == MARKER_NAME
                  and (self.bake_action == "NEW" or plan.start <= m.frame <= plan.end)]:
            scene.timeline_markers.remove(m)
        for r in result.records:
            if not r.converged:
                scene.timeline_markers.new(MARKER_NAME, frame=r.frame)
        s: DHIK_PG_settings = settings(context)
        s.has_result = True
        s.result_frames = len(result.records)
        s.result_converged = result.converged_count
        s.result_max_position_error = max((r.position_error for r in result.records), default=0)
        s.result_max_orientation_error = max(
            (r.orientation_error for r in result.records), default=0
        )
        s.result_summary = summary_line(result)
        s.result_method = result.method
        s.result_keys = plan.key_count
        s.result_key_error = plan.max_error
        self.blender_check = report_blender_check(context, self, result)  # verify.py
        return plan


def _main_weights(s: DHIK_PG_settings) -> tuple[float, float]:
    """``(position, orientation)`` weight of the main effector (orientation 0: position
    only); DhikError when both are 0, or weights other than 1 with the spec method."""
    weights = (float(s.position_weight), float(s.orientation_weight))
    if max(weights) <= 0.0:
        raise DhikError.at("DHIK", "position_weight", "position and orientation weight of the "
                           "main effector are both 0")
    if s.method == "spec" and weights != (1.0, 1.0):
        raise DhikError.at("DHIK", "orientation_weight" if weights[0] == 1.0 else
                           "position_weight", "weights other than 1 need the Robust method")
    return weights


ExtraRow = tuple[str, bpy.types.Object, float, float, int, "bpy.types.Object | None", float]


def _extra_rows(
    s: DHIK_PG_settings, ob: bpy.types.Object, skeleton: Skeleton, main: str
) -> list[ExtraRow]:
    """``(bone, target, position weight, orientation weight, chain length (bones), pole
    target, pole angle (rad))`` of each extra effector row.

    DhikError names the row (``effectors[i]``) for a missing or repeated bone, a missing
    target, weights that are both 0, or weights other than 1 with the spec method.
    """
    rows = []
    used = {main}
    for i, row in enumerate(s.effectors):
        where = f"effectors[{i}]"
        if row.bone not in skeleton.joints:
            problem = f"{ob.name!r} has no bone {row.bone!r}" if row.bone else "choose a bone"
            raise DhikError.at("DHIK", where, problem)
        if row.bone in used:
            raise DhikError.at("DHIK", where, f"bone {row.bone!r} already has a target")
        used.add(row.bone)
        if row.target is None:
            raise DhikError.at("DHIK", where, "choose a target object")
        if row.target is ob:
            raise DhikError.at("DHIK", where, "the target cannot be the armature itself")
        weights = (row.position_weight, row.orientation_weight)
        if max(weights) <= 0.0:
            raise DhikError.at("DHIK", where, "position and orientation weight are both 0")
        if s.method == "spec" and weights != (1.0, 1.0):
            raise DhikError.at("DHIK", where, "weights other than 1 need the Robust method")
        rows.append((row.bone, row.target, *weights, int(row.chain_length), row.pole_target,
                     float(row.pole_angle)))
    return rows


class BakeThread:
    """The solve step in a worker thread, with progress and cancellation (modal bakes)."""

    def __init__(self, job: BakeJob) -> None:
        self.job = job
        self.done = 0
        self.total = job.frame_count
        self.result: BakeResult | None = None
        self.error: BaseException | None = None
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dhik-bake", daemon=True)

    def _progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if self._cancel.is_set():
            raise BakeCancelled

    def _run(self) -> None:
        try:
            self.result = self.job.solve(self._progress)
        except BakeCancelled:
            pass
        except BaseException as err:  # reported by the operator in the main thread
            self.error = err

    def start(self) -> None:
        self._thread.start()

    def finished(self) -> bool:
        return not self._thread.is_alive()

    def cancel(self) -> None:
        """Stop after the frame being solved; wait for the thread."""
        self._cancel.set()
        self._thread.join()
