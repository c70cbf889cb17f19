"""After a bake: what Blender shows of the effectors, against their targets.

The keys are written and the scene is stepped through the baked frames; on each frame
the depsgraph evaluates the armature as Blender plays it (NLA, drivers, constraints,
key interpolation between reduced keys, float32 keys: everything) and each effector
bone's evaluated pose in armature space is copied. After the loop, all frames at once,
each pose, turned into its joint frame (``R_bone @ N``, targets.py), is compared with
the target the core solved for on that frame.

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
from numpy.typing import NDArray

from ..core.app.results import record_arrays
from ..core.rotations import Vec, matrix_to_quat_rows, matrix_to_rotvec_rows, quat_to_matrix_rows
from .access import pose_of, scene_of
from .frames import frame_loop
from .props import settings
from .targets import orthonormal

if TYPE_CHECKING:
    from mathutils import Matrix

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
    (see the module docstring); the current frame is restored.

    The frame loop only sets each frame and copies the effector bones' evaluated
    matrices; the gaps of all frames are computed together afterwards (:func:`gaps`)."""
    ob = job.armature
    scene = scene_of(context)
    tol_p = job.settings.position_tolerance + POSITION_SLACK
    tol_r = job.settings.orientation_tolerance + ORIENTATION_SLACK
    numbers, flags, _ = record_arrays(result.records, len(job.tracks))
    converged = dict(zip(numbers.tolist(), flags.tolist(), strict=True))
    frames, step = sample(sorted(converged))
    tracks = []
    for track in job.tracks:
        jm = job.maps[track.name]
        targets = dict(track.targets)
        tracks.append((jm.bone, orthonormal(jm.to_bone), targets, track.rot_weight > 0.0))
    # the (frame, track) pairs that have a target, frame by frame: the bones read there
    pairs = [(i, j) for i, f in enumerate(frames)
             for j, (_, _, targets, _) in enumerate(tracks) if targets.get(f) is not None]
    reads: list[list[str]] = [[] for _ in frames]
    for i, j in pairs:
        reads[i].append(tracks[j][0])
    out = Check(len(frames), step)
    bones = pose_of(ob).bones
    current = scene.frame_current
    copies: list[Matrix] = []  # the evaluated matrices, in the order of ``pairs``
    with frame_loop(scene):
        try:
            for f, names in zip(frames, reads, strict=True):
                scene.frame_set(f)
                copies += [bones[name].matrix.copy() for name in names]
        finally:
            scene.frame_set(current)
    if not pairs:
        return out
    rows, cols = np.array(pairs).T
    position, orientation = gaps(
        np.array(copies, dtype=float).reshape(-1, 4, 4),
        np.array([tracks[j][2][frames[i]] for i, j in pairs], dtype=float),
        np.array([n for _, n, _, _ in tracks])[cols],
        np.array([oriented for _, _, _, oriented in tracks], dtype=bool)[cols])
    worst_p = _worst(position, rows, cols, (len(frames), len(tracks)))
    worst_r = _worst(orientation, rows, cols, (len(frames), len(tracks)))
    out.max_position = float(worst_p.max())
    out.max_orientation = float(worst_r.max())
    out.missed = [frames[k] for k in np.flatnonzero((worst_p > tol_p) | (worst_r > tol_r))]
    out.missed_converged = [f for f in out.missed if converged[f]]
    return out


def gaps(matrices: Vec, targets: Vec, to_joint: Vec, oriented: NDArray[np.bool_]
         ) -> tuple[Vec, Vec]:  # fmt: skip
    """Position (armature units) and orientation (rad) gaps (k,) of evaluated bone
    matrices (k, 4, 4) from their targets (k, 4, 4), both in armature space, the bone
    turned into its joint frame by ``to_joint`` (k, 3, 3);
    the orientation gap is 0 where not ``oriented`` (k,). ValueError, like the scalar
    conversions, on a non-finite rotation where oriented."""
    position = _norms(matrices[:, :3, 3] - targets[:, :3, 3])
    orientation = np.zeros(len(matrices))
    if oriented.any():
        m = matrices[oriented, :3, :3]
        r = quat_to_matrix_rows(matrix_to_quat_rows(m)) @ to_joint[oriented]
        gap = matrix_to_rotvec_rows(targets[oriented, :3, :3] @ r.transpose(0, 2, 1))
        orientation[oriented] = _norms(gap)
        if not np.isfinite(orientation).all():
            raise ValueError("quaternion must be finite and non-zero")
    return position, orientation


def _norms(v: Vec) -> Vec:
    """The length of each row of ``v`` (k, 3), summed by the dot kernel as
    ``np.linalg.norm`` of one row sums it: the same float to the last bit."""
    v = np.ascontiguousarray(v)
    return np.sqrt((v[:, None, :] @ v[:, :, None])[:, 0, 0])


def _worst(gap: Vec, rows: NDArray[np.intp], cols: NDArray[np.intp],
           shape: tuple[int, int]) -> Vec:  # fmt: skip
    """Each frame's largest gap, from the gaps of its ``(frame, track)`` pairs: 0 where
    it has none, NaN left out (as Python's ``max`` from 0 leaves it out)."""
    per = np.zeros(shape)
    per[rows, cols] = np.where(gap > 0.0, gap, 0.0)
    return per.max(axis=1)


def report(context: bpy.types.Context, job: BakeJob, result: BakeResult) -> Check:
    """:func:`check_bake`, then its markers (this armature's, in the baked range, replace
    the earlier ones there) and the panel's result: the converged count leaves out the
    frames Blender shows off target, the largest errors take Blender's, the summary
    says so. Called once, after the keys are written."""
    check = check_bake(context, job, result)
    scene = scene_of(context)
    name = marker_name(job.armature.name)
    frames = record_arrays(result.records, len(job.tracks))[0].tolist()
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
