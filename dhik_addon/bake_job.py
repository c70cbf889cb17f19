"""One bake, in three steps: prepare (validate, read targets), solve (core), apply (keys).

The main effector/target and every extra effector row become one core
``EffectorTrack`` each (targets in armature space, metres), solved together by the
chosen method (the rig: bake_rig).

``prepare`` (:class:`Preparation`, a chunk of frames at a time for an interactive bake)
reads Blender but changes nothing except the current frame, which it restores;
``solve`` touches no Blender data, so it may run in a worker thread (bake_run);
``apply`` is :meth:`BakeJob.plan` (every key planned: bake_keys' rotation modes, frame
step, key reduction; nothing changed) then :meth:`BakeJob.write` (animation.json first,
then the armature's keys in its current action or a new one, ``scene.dhik.bake_action``,
the error curves and markers: bake_marks), so a failure anywhere leaves the scene as
it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np

from ..core.app.bake import BakeResult, EffectorTrack, simulate, summary_line
from ..core.app.formats import save_animation
from ..core.app.results import record_arrays
from ..core.errors import DhikError
from ..core.model.skeleton import Skeleton
from ..core.solver.settings import SolverSettings
from .access import scene_fps, scene_of
from .bake_keys import (
    KeyPlan,
    check_current_action,
    held_in_use,
    plan_keys,
    values_before,
    write_current,
    write_new,
)
from .bake_marks import replace_markers, write_error_curves
from .bake_rig import BakeRig, channels_still
from .joint_map import JointMap
from .props import DHIK_PG_settings, settings
from .rig_checks import FrameCheck, check_nla, nla_in_use
from .safety import require_in_scene
from .target_curves import TargetCurves, rig_still
from .targets import TrackReader
from .verify import Check
from .verify import report as report_blender_check

__all__ = ["BakeCancelled", "BakeJob", "BakeRig", "Preparation"]


class BakeCancelled(Exception):
    """Raised inside the core's progress callback to stop a bake."""


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
    # (bone, property) of channels the bake held at rest that were not, and the frames
    held: list[tuple[str, str]] = field(default_factory=list)
    held_frames: tuple[int, int] = (0, 0)
    notes: list[str] = field(default_factory=list)  # armature_read.skeleton_notes

    @property
    def frame_count(self) -> int:
        """Number of frames to solve."""
        return len(self.tracks[0].targets)

    @classmethod
    def prepare(cls, context: bpy.types.Context) -> BakeJob:
        """Validate the scene and read the targets; DhikError on anything unusable."""
        prep = Preparation(context)
        prep.read(prep.total)
        return prep.finish(context)

    def solve(self, progress: Callable[[int, int], None] | None = None) -> BakeResult:
        """Run the core's bake (warm-started frame to frame unless cold); no Blender data
        is touched. ``progress(done, total)`` (frames) is the core's callback: an
        exception raised in it (:class:`BakeCancelled`) stops the solve."""
        return simulate(self.skeleton, self.tracks, None, self.settings, self.warm_start,
                        progress, method=self.method, driven=self.driven,
                        previous=self.previous, following=self.following)

    def apply(self, context: bpy.types.Context, result: BakeResult) -> KeyPlan:
        """:meth:`plan` then :meth:`write`: the key plan."""
        return self.write(context, result, self.plan(context, result))

    def plan(self, context: bpy.types.Context, result: BakeResult) -> KeyPlan:
        """Plan the keys (rotation modes, frame step, key reduction); DhikError when they
        cannot be written. Blender data is not changed."""
        # An interactive bake solves in the background: the armature may be gone by now.
        require_in_scene(scene_of(context), self.armature, "armature")
        before = None
        if self.bake_action == "CURRENT" and result.frames:
            before = values_before(self.armature, self.solved, result.frames[0]["frame"])
        keyed = self.solved
        if self.bake_action == "NEW" and self.driven:  # the new action carries them too
            keyed = self.solved + [n for n in self.driven[0][1] if n not in self.solved]
        return plan_keys(self.armature, self.maps, result.frames, keyed,
                         self.frame_step, self.key_reduction, before)

    def write(self, context: bpy.types.Context, result: BakeResult, plan: KeyPlan) -> KeyPlan:
        """Write animation.json (if asked; a failure there changes nothing), key the
        bones, the error curves and the markers of unconverged frames, and the panel's
        result; ``plan``."""
        require_in_scene(scene_of(context), self.armature, "armature")
        if self.animation_path:
            save_animation(result.frames, self.animation_path, scene_fps(scene_of(context)))
        self.held = held_in_use(self.armature, plan)  # named in the operator's WARNING
        self.held_frames = (plan.start, plan.end)
        nla = nla_in_use(self.armature)  # strips below: held channels keyed, not set
        if self.bake_action == "NEW":
            write_new(self.armature, plan, nla)
        else:
            write_current(self.armature, plan, nla)
        records = result.records
        frames, converged, per_effector = record_arrays(records, len(self.tracks))
        write_error_curves(self.armature, [t.name for t in self.tracks], frames,
                           per_effector, plan.start, plan.end)
        replace_markers(scene_of(context), self.armature, frames[~converged], plan.start,
                        plan.end, everywhere=self.bake_action == "NEW")
        s: DHIK_PG_settings = settings(context)
        s.has_result = True
        s.result_frames = len(records)
        s.result_converged = result.converged_count
        worst = per_effector.max(axis=(0, 1)) if len(records) else np.zeros(2)
        s.result_max_position_error = float(worst[0])
        s.result_max_orientation_error = float(worst[1])
        s.result_summary = summary_line(result)
        s.result_method = result.method
        s.result_keys = plan.key_count
        s.result_key_error = plan.max_error
        self.blender_check = report_blender_check(context, self, result)  # verify.py
        return plan


class Preparation:
    """:meth:`BakeJob.prepare` in steps: the scene is validated at once (DhikError), the
    targets are read :meth:`read` frames at a time (an interactive bake shows its
    progress and may stop in between: nothing has changed then but the current frame,
    which each step restores), then :meth:`finish` makes the job."""

    def __init__(self, context: bpy.types.Context) -> None:
        s = settings(context)
        scene = scene_of(context)
        rig = BakeRig.read(scene)
        start, end = s.frame_range(scene)
        if start < 0 or end < start:
            raise DhikError.at("DHIK", "frame range", f"{start}..{end} is not a range of "
                               "frames >= 0")
        check_nla(rig.armature)
        if s.bake_action == "CURRENT":
            check_current_action(rig.armature)
        else:  # a new action starts every bone but the solved ones at rest
            for obj, bone, role in zip(rig.objects, rig.bones, rig.roles, strict=True):
                if obj is rig.armature and bone:
                    where = (role.removesuffix("pole_target") + "pole_bone"
                             if role.endswith("pole_target") else role + "_bone")
                    raise DhikError.at("DHIK", where, f"bone {bone!r} of the baked armature "
                                       "is a target: a New Action bake would drop its "
                                       "animation; bake into the Current Action")
        self.rig, self.start, self.end = rig, start, end
        self.settings = s
        self.driven: list[tuple[int, dict[str, Any]]] = []
        # the driven bones' values while nothing can pose them (channels_still): read once
        self._still: dict[str, dict[str, Any]] | None = None
        self._read_once = False
        # what the model cannot follow, frame by frame (rig_checks): scale, location,
        # hinge turns above the chains, the armature's world matrix
        self.check = FrameCheck(rig.armature, rig.skeleton.defn, rig.maps, rig.names,
                                rig.solved, rig.weights)
        self.reader = TrackReader(context, rig.objects, rig.armature, range(start, end + 1),
                                  self._each_frame, rig.bones)

    def _each_frame(self, frame: int) -> None:
        self.check(frame)
        if self.rig.driven_names:  # the unsolved bones' own animation
            values = self._still
            if values is None:
                values = self.rig.driven_values()
                if self._read_once:  # one mapping for every frame of this read
                    self._still = values
            self.driven.append((frame, values))

    @property
    def done(self) -> int:
        return self.reader.done

    @property
    def total(self) -> int:
        return self.reader.total

    @property
    def finished(self) -> bool:
        return self.reader.finished

    def read(self, count: int) -> None:
        """Read the targets (and driven bones) of the next ``count`` frames (all that are
        left where the targets' F-curves give them: ``target_curves``)."""
        self._still = None  # between two reads the rig may have been posed
        self._read_once = channels_still(self.rig.armature)
        reader = self.reader
        reader.curves = None
        if self._read_once and rig_still(self.rig.armature):
            reader.curves = TargetCurves.of(reader.scene, reader.targets, reader.bones,
                                            self.rig.armature)
        if reader.curves is None:
            reader.read(count)
        else:  # nothing moves the rig: what Blender shows now, it shows on every frame;
            # the curves give every frame left at once (no frame is stepped)
            frames = reader.frames[reader.done:]
            reader.read(len(frames))
            if frames:
                self.check(frames[0])
            if self.rig.driven_names:
                values = self.rig.driven_values()
                self.driven.extend((f, values) for f in frames)
        self.check.flush(reader.scene)

    def finish(self, context: bpy.types.Context) -> BakeJob:
        """The job, once every frame is read."""
        assert self.finished
        s, rig = self.settings, self.rig
        path = bpy.path.abspath(s.animation_path) if s.animation_path else ""
        previous = following = None
        if s.bake_action == "CURRENT" and not s.cold_start:
            previous, following = rig.keyed_poses_around(context, self.start, self.end)
        return BakeJob(rig.armature, rig.skeleton, rig.maps, rig.tracks(self.reader.tracks),
                       s.method, not s.cold_start, rig.settings, path, rig.solved,
                       s.bake_action, s.frame_step, s.key_reduction, self.driven or None,
                       previous, following, notes=rig.notes)


