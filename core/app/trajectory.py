"""Keyframes to per-frame targets (SPEC 3.2, 6 Edit; DECISIONS targets.json).

Frames run from 0 to the last keyframe inclusive. Before the first keyframe its target
holds; between keyframes ``pos`` (metres) and ``euler`` (degrees, XYZ = Rz Ry Rx) are
interpolated linearly channel by channel.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..model.definition import Keyframe
from ..rotations import euler_xyz_to_matrix, make_transform

Target = tuple[int, NDArray[np.float64]]


def target_matrix(pos: ArrayLike, euler_deg: ArrayLike) -> NDArray[np.float64]:
    """World 4x4 target from a position (m) and XYZ Euler angles in degrees."""
    e = np.radians(np.asarray(euler_deg, dtype=float))
    return make_transform(euler_xyz_to_matrix(e), np.asarray(pos, dtype=float))


def interpolate_keyframes(keyframes: list[Keyframe]) -> list[Target]:
    """``(frame, world 4x4 target)`` for every frame 0 .. last keyframe (sorted keys)."""
    out: list[Target] = []
    last = keyframes[-1].frame
    k = 0
    for frame in range(last + 1):
        while k + 1 < len(keyframes) and keyframes[k + 1].frame <= frame:
            k += 1
        a = keyframes[k]
        if frame <= a.frame or k + 1 == len(keyframes):
            out.append((frame, target_matrix(a.pos, a.euler)))
            continue
        b = keyframes[k + 1]
        t = (frame - a.frame) / (b.frame - a.frame)
        pos = np.add(a.pos, t * np.subtract(b.pos, a.pos))
        eul = np.add(a.euler, t * np.subtract(b.euler, a.euler))
        out.append((frame, target_matrix(pos, eul)))
    return out
