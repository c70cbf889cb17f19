"""After a bake: what Blender shows of the effectors, against their targets.

The keys are written and the scene is stepped through the baked frames; on each frame
the depsgraph evaluates the armature as Blender plays it (NLA, drivers, constraints,
key interpolation between reduced keys, float32 keys: everything), and each effector
bone's evaluated pose in armature space, turned into its joint frame (``R_bone @ N``,
targets.py), is compared with the target the core solved for on that frame.

A frame *misses* when an effector is farther than the bake's position tolerance
(armature units) or, for an effector with an orientation weight, turned more than the
orientation tolerance (rad) from its target, plus :data:`POSITION_SLACK` and
:data:`ORIENTATION_SLACK` (what float32 keys reproduce). Long bakes are sampled: every
k-th frame and the last, so at most :data:`MAX_CHECKED` frames are evaluated.

Frames that miss where the solve converged get a marker named after the armature
(:func:`marker_name`), the panel's converged count leaves them out, the summary says
how many and the operator reports a WARNING: a bake never says "all converged" where
Blender shows otherwise.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import bpy
import numpy as np

from ..core.rotations import matrix_to_rotvec
from .access import pose_of, scene_of
from .frames import frame_loop
from .props import settings
from .targets import orthonormal

if TYPE_CHECKING:
    from ..core.app.bake import BakeResult
    from .bake_job import BakeJob

MAX_CHECKED = 500  # frames evaluated at most after a bake (every k-th frame beyond)
# added to the tolerances: float32 keys and bone matrices reproduce a solved pose to
# about 1e-6 (measured up to 1.2e-6 m and 3e-6 rad over the frames of the tests' rigs)
POSITION_SLACK = 1e-5  # armature units
ORIENTATION_SLACK = 1e-4  # rad


def marker_name(armature: str) -> str:
    """The marker on frames where Blender shows an effector of ``armature`` off target."""
    return f"dhik: off target in Blender ({armature})"


@dataclass
class Check:
    """What the check found: frames evaluated, frames that miss (and of those, the ones
    the solve counted converged), the largest gaps (armature units, rad)."""

    checked: int = 0
    step: int = 1
    missed: list[int] = field(default_factory=list)
    missed_converged: list[int] = field(default_factory=list)
    max_position: float = 0.0
    max_orientation: float = 0.0

    def line(self) -> str:
        """One line for the summary and the WARNING (empty when nothing misses)."""
        if not self.missed:
            return ""
        shown = ", ".join(map(str, self.missed[:5])) + (", ..." if len(self.missed) > 5 else "")
        sampled = f" (1 in {self.step} frames checked)" if self.step > 1 else ""
        return (f"Blender shows {len(self.missed)} of {self.checked} checked frames off "
                f"target{sampled}: frames {shown}; up to {self.max_position:.3g} m and "
                f"{self.max_orientation:.3g} rad")


def sample(frames: list[int], limit: int = MAX_CHECKED) -> tuple[list[int], int]:
    """``(frames to check, k)``: every k-th of ``frames`` and the last, at most ``limit``."""
    step = max(1, math.ceil(len(frames) / limit))
    picked = frames[::step]
    if picked and picked[-1] != frames[-1]:
        picked.append(frames[-1])
    return picked, step


def check_bake(context: bpy.types.Context, job: BakeJob, result: BakeResult) -> Check:
    """Evaluate the baked frames in Blender and compare each effector with its target
    (see the module docstring); the current frame is restored."""
    ob = job.armature
    scene = scene_of(context)
    tol_p = job.settings.position_tolerance + POSITION_SLACK
    tol_r = job.settings.orientation_tolerance + ORIENTATION_SLACK
    converged = {int(r.frame): bool(r.converged) for r in result.records}
    frames, step = sample(sorted(converged))
    tracks = []
    for track in job.tracks:
        jm = job.maps[track.name]
        targets = dict(track.targets)
        tracks.append((jm.bone, orthonormal(jm.to_bone), targets, track.rot_weight > 0.0))
    out = Check(len(frames), step)
    bones = pose_of(ob).bones
    current = scene.frame_current
    with frame_loop(scene):
        try:
            for f in frames:
                scene.frame_set(f)
                worst_p = worst_r = 0.0
                for bone, n, targets, oriented in tracks:
                    target = targets.get(f)
                    if target is None:
                        continue
                    m = np.array(bones[bone].matrix, dtype=float)
                    worst_p = max(worst_p, float(np.linalg.norm(m[:3, 3] - target[:3, 3])))
                    if oriented:
                        r = orthonormal(m[:3, :3]) @ n
                        gap = matrix_to_rotvec(target[:3, :3] @ r.T)
                        worst_r = max(worst_r, float(np.linalg.norm(gap)))
                out.max_position = max(out.max_position, worst_p)
                out.max_orientation = max(out.max_orientation, worst_r)
                if worst_p > tol_p or worst_r > tol_r:
                    out.missed.append(f)
                    if converged[f]:
                        out.missed_converged.append(f)
        finally:
            scene.frame_set(current)
    return out


def report(context: bpy.types.Context, job: BakeJob, result: BakeResult) -> Check:
    """:func:`check_bake`, then its markers (this armature's, in the baked range, replace
    the earlier ones there) and the panel's result: the converged count leaves out the
    frames Blender shows off target, the largest errors take Blender's, the summary
    says so. Called once, after the keys are written."""
    check = check_bake(context, job, result)
    scene = scene_of(context)
    name = marker_name(job.armature.name)
    frames = [int(r.frame) for r in result.records]
    lo, hi = (min(frames), max(frames)) if frames else (0, -1)
    for m in [m for m in scene.timeline_markers if m.name == name and lo <= m.frame <= hi]:
        scene.timeline_markers.remove(m)
    for f in check.missed_converged:
        scene.timeline_markers.new(name, frame=f)
    if check.missed:
        s = settings(context)
        s.result_converged = max(0, s.result_converged - len(check.missed_converged))
        s.result_max_position_error = max(s.result_max_position_error, check.max_position)
        s.result_max_orientation_error = max(s.result_max_orientation_error,
                                             check.max_orientation)
        s.result_summary = amend_summary(s.result_summary, check)
    return check


def amend_summary(summary: str, check: Check) -> str:
    """The core's summary line with its verdict saying what Blender shows: "all
    converged" becomes "converged in the solve", and the check's line is added."""
    if not check.missed:
        return summary
    verdict = re.sub(r"\(all converged\)", "(converged in the solve)", summary, count=1)
    return f"{verdict}; {check.line()}"
