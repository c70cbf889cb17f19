"""Bones' per-frame turns and flip frames against a reference motion (numpy only).

Rotations are unit quaternions ``[w, x, y, z]``, arrays ``(frames, bones, 4)`` of each
bone's local rotation (Blender's ``matrix_basis``); angles in radians. Used by
bench/characters.py (in Blender) and bench/character_rtb.py (outside it).
"""

from __future__ import annotations

import math

import numpy as np


def angle(r: np.ndarray) -> float:
    """Rotation angle (rad) of a 3x3 rotation, exact near 0."""
    skew = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    return math.atan2(float(np.linalg.norm(skew)) / 2, (float(np.trace(r)) - 1) / 2)


def turns(q: np.ndarray) -> np.ndarray:
    """(F-1, B): the angle (rad) each bone's local rotation turns between frames."""
    a, b = q[:-1], q[1:]
    w = np.sum(a * b, axis=-1)
    v = a[..., :1] * b[..., 1:] - b[..., :1] * a[..., 1:] - np.cross(a[..., 1:], b[..., 1:])
    out: np.ndarray = 2 * np.arctan2(np.linalg.norm(v, axis=-1), np.abs(w))
    return out


def flips(solved: np.ndarray, ref: np.ndarray) -> tuple[int, int, float]:
    """Flip frames of ``solved`` against the reference ``ref``: frames where a bone turns
    more than twice its own largest reference turn (a bone the reference keeps still:
    twice the largest of any bone), frames where a bone turns more than twice the
    largest reference turn of any bone, and the largest turn over its bone's bound."""
    got, true = turns(solved), turns(ref)
    bound = true.max(axis=0)
    overall = float(bound.max())
    bound = np.where(bound > 1e-9, bound, overall)
    per = int((got > 2 * bound).any(axis=1).sum())
    over = int((got > 2 * overall).any(axis=1).sum())
    return per, over, float((got / bound).max())
