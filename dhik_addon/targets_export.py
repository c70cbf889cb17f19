"""Export Targets: the target's motion as targets.json keyframes that ``dhik bake``
interpolates into the same per-frame targets as a bake in Blender reads.

The file is in the armature's space (when the panel has an armature: the skeleton's
frame, Export Skeleton's) and holds the effector joint's frame (targets: ``R @ N``).
``dhik bake`` interpolates positions and XYZ Euler angles linearly between keyframes
and holds the first keyframe before it (trajectory.interpolate_keyframes). Blender
interpolates the target's own channels, in its own frame, with each key's interpolation
(Bezier by default). The two agree only where the target moves linearly in the file's
frame, so the export reads the target on every frame from 0 to its last key and keeps
only the keys of the target (and of its keyed parents, or of the target bone's
armature) between which the file's interpolation gives back what Blender shows (within
:data:`POSITION_TOLERANCE` and :data:`ROTATION_TOLERANCE`); every other frame between
them is written as a keyframe of its own, and the export says how many.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import bpy
import numpy as np

from ..core.app.trajectory import interpolate_keyframes, target_matrices
from ..core.errors import DhikError
from ..core.model.definition import Keyframe
from .targets import target_key_frames, world_keyframes

POSITION_TOLERANCE = 1e-6  # m: the file's interpolation within this of Blender's target
ROTATION_TOLERANCE = 1e-6  # rad


@dataclass
class ExportedTargets:
    """The keyframes to write and what the export changed to get them."""

    keyframes: list[Keyframe]
    keys: int  # frames of the target's own keys that were kept
    added: int  # frames written because the file's interpolation would differ


def misses(keyframes: Sequence[Keyframe], reference: Sequence[Keyframe]) -> np.ndarray:
    """Per frame of ``reference`` (one keyframe per frame 0 .. n - 1), whether the file
    holding ``keyframes`` gives another target there (beyond the tolerances), as
    ``dhik bake`` interpolates it."""
    table = interpolate_keyframes(list(keyframes))
    got = table.matrices
    pos = np.array([k.pos for k in reference], dtype=float)
    eul = np.array([k.euler for k in reference], dtype=float)
    want = target_matrices(pos, eul)
    if len(got) < len(want):  # (a file ending early holds its last keyframe)
        got = np.concatenate([got, np.repeat(got[-1:], len(want) - len(got), axis=0)])
    dp = np.linalg.norm(got[:, :3, 3] - want[:, :3, 3], axis=1)
    r = np.swapaxes(want[:, :3, :3], 1, 2) @ got[:, :3, :3]
    cos = np.clip((np.trace(r, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
    vee = np.stack([r[:, 2, 1] - r[:, 1, 2], r[:, 0, 2] - r[:, 2, 0],
                    r[:, 1, 0] - r[:, 0, 1]], axis=1)
    angle = np.arctan2(0.5 * np.linalg.norm(vee, axis=1), cos)
    return (dp > POSITION_TOLERANCE) | (angle > ROTATION_TOLERANCE)


def fit_keyframes(reference: Sequence[Keyframe], keys: Sequence[int]) -> ExportedTargets:
    """The keyframes at ``keys`` (frames of ``reference``, which has one keyframe per
    frame 0 .. n - 1, the target as Blender shows it), plus every frame of each span
    between them (and before the first) where the file's interpolation misses
    ``reference``."""
    n = len(reference)
    own = {f for f in keys if 0 <= f < n}
    kept = sorted(own | {n - 1})
    wrong = misses([reference[f] for f in kept], reference)
    if wrong.any():
        bounds = [0, *kept]  # spans [0, k0], [k0, k1], ...
        extra: set[int] = set()
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            if wrong[a:b + 1].any():
                extra.update(range(a, b + 1))
        kept = sorted(set(kept) | extra)
    return ExportedTargets([reference[f] for f in kept], len(own), len(kept) - len(own))


def export_targets(context: bpy.types.Context, ob: bpy.types.Object, bone: str,
                   armature: bpy.types.Object | None, to_joint: np.ndarray | None,
                   frames: Sequence[int] | None = None) -> ExportedTargets:  # fmt: skip
    """targets.json keyframes of target ``ob`` (its ``bone`` when that is set): on each
    of ``frames`` when given ("Every Frame"), else fitted to the target's keys
    (:func:`fit_keyframes`). Poses in ``armature``'s space when given, else world;
    rotations turned by ``to_joint`` (``N``). DhikError for a target without keys."""
    if frames is not None:
        out = world_keyframes(context, ob, frames, to_joint, bone, armature)
        return ExportedTargets(out, 0, 0)
    keys = target_key_frames(ob)
    if not keys:
        raise DhikError.at(f"object {ob.name!r}", "", "has no keyframes; key it or export "
                           "every frame")
    last = max(keys[-1], 0)
    reference = world_keyframes(context, ob, range(last + 1), to_joint, bone, armature)
    return fit_keyframes(reference, keys)
