"""Keyframes to per-frame targets (SPEC 3.2, 6 Edit; DECISIONS targets.json).

Frames run from 0 to the last keyframe inclusive. Before the first keyframe its target
holds; between keyframes ``pos`` (metres) and ``euler`` (degrees, XYZ = Rz Ry Rx) are
interpolated linearly channel by channel. All frames are computed at once with numpy,
with the same floating-point operations as :func:`target_matrix` on one frame (so the
matrices are bit for bit those of a frame-by-frame loop).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..model.definition import Keyframe
from ..rotations import euler_xyz_to_matrix, make_transform

Target = tuple[int, NDArray[np.float64]]


def target_matrix(pos: ArrayLike, euler_deg: ArrayLike) -> NDArray[np.float64]:
    """World 4x4 target from a position (m) and XYZ Euler angles in degrees."""
    e = np.radians(np.asarray(euler_deg, dtype=float))
    return make_transform(euler_xyz_to_matrix(e), np.asarray(pos, dtype=float))


def target_matrices(pos: ArrayLike, euler_deg: ArrayLike) -> NDArray[np.float64]:
    """(F, 4, 4) world targets of (F, 3) positions (m) and XYZ Euler angles (degrees);
    each equal, bit for bit, to :func:`target_matrix` of its row."""
    p = np.asarray(pos, dtype=float).reshape(-1, 3)
    r = np.radians(np.asarray(euler_deg, dtype=float).reshape(-1, 3))
    n = len(r)
    flat = r.ravel().tolist()  # math.cos/sin: the scalar path's functions (numpy may use SIMD)
    c = np.array([math.cos(a) for a in flat]).reshape(n, 3)
    s = np.array([math.sin(a) for a in flat]).reshape(n, 3)
    rx = np.zeros((n, 3, 3))
    ry = np.zeros((n, 3, 3))
    rz = np.zeros((n, 3, 3))
    rx[:, 0, 0] = ry[:, 1, 1] = rz[:, 2, 2] = 1.0
    rx[:, 1, 1] = rx[:, 2, 2] = c[:, 0]
    rx[:, 1, 2], rx[:, 2, 1] = -s[:, 0], s[:, 0]
    ry[:, 0, 0] = ry[:, 2, 2] = c[:, 1]
    ry[:, 0, 2], ry[:, 2, 0] = s[:, 1], -s[:, 1]
    rz[:, 0, 0] = rz[:, 1, 1] = c[:, 2]
    rz[:, 0, 1], rz[:, 1, 0] = -s[:, 2], s[:, 2]
    out = np.zeros((n, 4, 4))
    out[:, :3, :3] = rz @ ry @ rx
    out[:, :3, 3] = p
    out[:, 3, 3] = 1.0
    return out


class TargetTable(Sequence[Target]):
    """``(frame, world 4x4)`` pairs held as two arrays: frame numbers (F,) and matrices
    (F, 4, 4), metres. A sequence of :data:`Target` without one Python object per frame;
    item ``i`` is ``(int frame, read-only view of matrix i)``."""

    def __init__(self, frames: NDArray[np.int64], matrices: NDArray[np.float64]) -> None:
        self.frame_numbers = frames
        self.matrices = matrices
        self.matrices.flags.writeable = False

    def __len__(self) -> int:
        return len(self.frame_numbers)

    @overload
    def __getitem__(self, i: int) -> Target: ...
    @overload
    def __getitem__(self, i: slice) -> TargetTable: ...
    def __getitem__(self, i: int | slice) -> Target | TargetTable:
        if isinstance(i, slice):
            return TargetTable(self.frame_numbers[i], self.matrices[i])
        return int(self.frame_numbers[i]), self.matrices[i]

    def __iter__(self) -> Iterator[Target]:
        return zip(self.frame_numbers.tolist(), self.matrices, strict=True)


# frames interpolated at a time: a long bake's temporaries stay a few MB (the targets
# themselves take 128 bytes a frame)
BLOCK_FRAMES = 65_536


def interpolate_keyframes(keyframes: list[Keyframe]) -> TargetTable:
    """``(frame, world 4x4 target)`` for every frame 0 .. last keyframe (sorted keys)."""
    keys = np.array([k.frame for k in keyframes], dtype=np.int64)
    pos = np.array([k.pos for k in keyframes], dtype=float).reshape(-1, 3)
    eul = np.array([k.euler for k in keyframes], dtype=float).reshape(-1, 3)
    frames = np.arange(int(keys[-1]) + 1, dtype=np.int64)
    out = np.empty((len(frames), 4, 4))
    for start in range(0, len(frames), BLOCK_FRAMES):
        block = frames[start:start + BLOCK_FRAMES]
        # k: the last keyframe at or before each frame (0 before the first)
        k = np.maximum(np.searchsorted(keys, block, side="right") - 1, 0)
        p, e = pos[k], eul[k]
        inner = (block > keys[k]) & (k + 1 < len(keys))  # strictly between keys k and k + 1
        if inner.any():
            a, f = k[inner], block[inner]
            t = ((f - keys[a]) / (keys[a + 1] - keys[a]))[:, None]
            p[inner] = pos[a] + t * (pos[a + 1] - pos[a])
            e[inner] = eul[a] + t * (eul[a + 1] - eul[a])
        out[start:start + len(block)] = target_matrices(p, e)
    return TargetTable(frames, out)
