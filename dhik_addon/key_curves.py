"""Pose-channel key values for a bake and their key reduction (numpy only: no bpy, no core).

A bone's rotation channel is written in the bone's own rotation mode, continuous from
frame to frame: quaternions with sign continuity, Euler triples (any of Blender's six
orders) unwrapped against the previous frame (no 2*pi jumps), axis-angle with a
continuous axis and angle. Key reduction then keeps, per bone, the fewest keys whose
LINEAR interpolation stays within a joint-space tolerance of the solved values
(Douglas-Peucker: split a segment at its worst frame until every frame is within).

Conventions (Blender's): quaternions ``(w, x, y, z)``; Euler order ``"XYZ"`` means X
is applied first, ``R = Rz @ Ry @ Rx``; axis-angle ``(angle, x, y, z)``; angles in
radians, locations in metres. Errors: the rotation angle between the interpolated and
the solved rotation (radians), or the distance between locations (metres). Key values
are rounded to float32 before the error is measured, as Blender stores them.

This file imports nothing from its package, so the core-only test venv can load it by
path (tests/addon/test_key_curves.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]
Rows = Sequence[int] | NDArray[np.intp]  # indices of rows (frames) kept as keys

EULER_ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
QUATERNION = "QUATERNION"
AXIS_ANGLE = "AXIS_ANGLE"
LOCATION = "LOCATION"  # a prismatic joint's pose location (metres)
KINDS = (QUATERNION, AXIS_ANGLE, LOCATION, *EULER_ORDERS)
_TWO_PI = 2.0 * math.pi


# --------------------------------------------------------------------------- rotations


def quat_to_matrices(q: Array) -> Array:
    """Rotation matrices ``(n, 3, 3)`` of quaternions ``(n, 4)`` (normalised first, as
    Blender does when it builds a pose matrix)."""
    q = np.asarray(q, dtype=float)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q.T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], 1)


def _axis_rotations(axis: int, angles: Array) -> Array:
    """``(n, 3, 3)`` rotations by ``angles`` (radians) about coordinate axis 0, 1 or 2."""
    c, s = np.cos(angles), np.sin(angles)
    m = np.zeros((len(angles), 3, 3))
    i, j = (axis + 1) % 3, (axis + 2) % 3
    m[:, axis, axis] = 1.0
    m[:, i, i] = c
    m[:, j, j] = c
    m[:, j, i] = s
    m[:, i, j] = -s
    return m


def euler_to_matrices(e: Array, order: str) -> Array:
    """``(n, 3, 3)`` of Euler triples ``(n, 3)`` (x, y, z angles, radians) in ``order``."""
    e = np.asarray(e, dtype=float)
    a, b, c = ("XYZ".index(ch) for ch in order)
    return _axis_rotations(c, e[:, c]) @ _axis_rotations(b, e[:, b]) @ _axis_rotations(a, e[:, a])


def axis_angle_to_matrices(aa: Array) -> Array:
    """``(n, 3, 3)`` of axis-angle rows ``(angle, x, y, z)`` (axis normalised; a zero axis
    gives the identity, as in Blender)."""
    aa = np.asarray(aa, dtype=float)
    norm = np.linalg.norm(aa[:, 1:], axis=1)
    safe = np.where(norm > 0.0, norm, 1.0)
    half = 0.5 * np.where(norm > 0.0, aa[:, 0], 0.0)
    q = np.column_stack([np.cos(half), np.sin(half)[:, None] * aa[:, 1:] / safe[:, None]])
    return quat_to_matrices(q)


def channel_matrices(kind: str, values: Array) -> Array:
    """Rotation matrices ``(n, 3, 3)`` of rotation-channel rows of ``kind``."""
    if kind == QUATERNION:
        return quat_to_matrices(values)
    if kind == AXIS_ANGLE:
        return axis_angle_to_matrices(values)
    if kind in EULER_ORDERS:
        return euler_to_matrices(values, kind)
    raise ValueError(f"{kind!r} is not a rotation channel")


def rotation_angles(a: Array, b: Array) -> Array:
    """Angle (radians) of ``a_i^T b_i`` for matrix stacks ``(n, 3, 3)``; exact near 0."""
    r = np.swapaxes(a, 1, 2) @ b
    cos = 0.5 * (np.trace(r, axis1=1, axis2=2) - 1.0)
    vee = np.stack([r[:, 2, 1] - r[:, 1, 2], r[:, 0, 2] - r[:, 2, 0], r[:, 1, 0] - r[:, 0, 1]], 1)
    sin = 0.5 * np.linalg.norm(vee, axis=1)
    return np.arctan2(sin, cos)


def quaternion_angles(a: Array, b: Array) -> Array:
    """Angle (radians) of the turn from each quaternion row ``[w, x, y, z]`` of ``a``
    (n, 4) to the one of ``b`` (both in the bone's rest frame); exact near 0: twice the
    angle whose tangent is the vector part of ``conj(a) b`` over its scalar part. Both
    parts scale alike with the rows' lengths, so rows need not be normalised (Blender
    normalises them)."""
    w = np.einsum("ij,ij->i", a, b)
    v = a[:, :1] * b[:, 1:] - b[:, :1] * a[:, 1:] - np.cross(a[:, 1:], b[:, 1:])
    return 2.0 * np.arctan2(np.sqrt(np.einsum("ij,ij->i", v, v)), np.abs(w))


def channel_errors(kind: str, got: Array, want: Array) -> Array:
    """Per-row joint-space error between channel rows ``got`` and ``want`` (rad or m)."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    if kind == LOCATION:
        return np.linalg.norm(got - want, axis=1)
    if kind == QUATERNION:
        return quaternion_angles(got, want)
    return rotation_angles(channel_matrices(kind, got), channel_matrices(kind, want))


# --------------------------------------------------------------------------- continuity


def continuous_quaternions(q: Array, start: ArrayLike | None = None) -> Array:
    """Quaternions ``(n, 4)`` flipped so each has a non-negative dot with the previous
    (the first one: with ``start``, when given)."""
    out = np.array(q, dtype=float)
    if start is not None and len(out) and float(out[0] @ np.asarray(start, dtype=float)) < 0:
        out[0] = -out[0]
    if len(out) < 2:
        return out
    # a row is turned where the negative dots since the last exactly-zero one (whose row
    # keeps its sign) are odd (as core's AnimationColumns.align_quaternion_signs)
    dot = np.einsum("ij,ij->i", out[1:], out[:-1])
    flips = np.concatenate(([0], np.cumsum(dot < 0.0)))
    base = np.maximum.accumulate(np.where(np.concatenate(([True], dot == 0.0)), flips, 0))
    negate = (flips - base) % 2 == 1
    out[negate] = -out[negate]
    return out


def _euler_pair(m: Array, order: str) -> tuple[Array, Array]:
    """The two Euler triples (x, y, z angles) of rotation ``m`` in ``order``."""
    i, j, k = ("XYZ".index(ch) for ch in order)
    s = 1.0 if (j - i) % 3 == 1 else -1.0  # even permutation of XYZ: +1
    cy = math.hypot(m[k, k], m[k, j])
    b = math.atan2(-s * m[k, i], cy)
    if cy > 1e-12:
        a = math.atan2(s * m[k, j], m[k, k])
        c = math.atan2(s * m[j, i], m[i, i])
    else:  # gimbal lock: put the whole turn on the first axis
        a = math.atan2(-s * m[j, k], m[j, j])
        c = 0.0
    first = np.zeros(3)
    first[[i, j, k]] = (a, b, c)
    second = np.zeros(3)
    second[[i, j, k]] = (a + math.pi, math.pi - b, c + math.pi)
    return first, second


def _nearest_turn(angles: Array, reference: Array) -> Array:
    """``angles`` shifted by whole turns (2*pi) to be nearest ``reference``."""
    return angles + _TWO_PI * np.round((reference - angles) / _TWO_PI)


def matrices_to_euler(m: Array, order: str, start: ArrayLike | None = None) -> Array:
    """Continuous Euler triples ``(n, 3)`` of rotations ``m`` ``(n, 3, 3)`` in ``order``.

    Each row is the one of the rotation's Euler triples (both branches, any whole turns)
    nearest to the previous row (the first row: nearest to ``start``, default 0), so
    the curves have no 2*pi jumps.
    """
    if order not in EULER_ORDERS:
        raise ValueError(f"{order!r} is not an Euler order")
    out = np.zeros((len(m), 3))
    previous = np.zeros(3) if start is None else np.asarray(start, dtype=float)
    for n, r in enumerate(np.asarray(m, dtype=float)):
        candidates = [_nearest_turn(e, previous) for e in _euler_pair(r, order)]
        best = min(candidates, key=lambda e: float(np.abs(e - previous).sum()))
        out[n] = best
        previous = best
    return out


def quaternions_to_axis_angle(q: Array, start: ArrayLike | None = None) -> Array:
    """Continuous axis-angle rows ``(angle, x, y, z)`` of quaternions ``(n, 4)``.

    The axis keeps the previous row's side (axis and angle negated together) and the
    angle the nearest whole turn; a zero rotation keeps the previous axis.
    """
    out = np.zeros((len(q), 4))
    prev_angle, prev_axis = 0.0, np.array([0.0, 1.0, 0.0])
    if start is not None:
        first = np.asarray(start, dtype=float)
        prev_angle, prev_axis = float(first[0]), first[1:]
    for n, row in enumerate(np.asarray(q, dtype=float)):
        row = row / np.linalg.norm(row)
        norm = float(np.linalg.norm(row[1:]))
        if norm < 1e-12:
            axis, angle = prev_axis, 0.0
        else:
            axis, angle = row[1:] / norm, 2.0 * math.atan2(norm, float(row[0]))
            if float(axis @ prev_axis) < 0.0:
                axis, angle = -axis, -angle
        angle = float(_nearest_turn(np.array([angle]), np.array([prev_angle]))[0])
        out[n, 0], out[n, 1:] = angle, axis
        prev_angle, prev_axis = angle, axis
    return out


def rotation_channel(
    kind: str, quaternions: Array, start: ArrayLike | None = None
) -> Array:
    """Channel rows of ``kind`` (continuous) for the solved channel ``quaternions``; the
    first row continues ``start`` (a channel value of ``kind``, e.g. the key before a
    re-baked range) when given."""
    if kind == QUATERNION:
        return continuous_quaternions(quaternions, start)
    if kind == AXIS_ANGLE:
        return quaternions_to_axis_angle(quaternions, start)
    return matrices_to_euler(quat_to_matrices(quaternions), kind, start)


# --------------------------------------------------------------------------- keys


def stepped(count: int, step: int) -> list[int]:
    """Indices ``0, step, 2*step, ...`` of ``count`` frames, and always the last one."""
    if step < 1:
        raise ValueError(f"frame step must be >= 1, got {step}")
    if count <= 0:
        return []
    out = list(range(0, count, step))
    if out[-1] != count - 1:
        out.append(count - 1)
    return out


def linear(key_frames: Array, key_values: Array, frames: Array) -> Array:
    """LINEAR F-curves through ``(key_frames, key_values (k, c))`` at ``frames`` (constant
    beyond the end keys, as Blender extrapolates)."""
    kf = np.asarray(key_frames, dtype=float)
    kv = np.asarray(key_values, dtype=float)
    f = np.asarray(frames, dtype=float)
    return np.column_stack([np.interp(f, kf, kv[:, c]) for c in range(kv.shape[1])])


def as_stored(values: Array) -> Array:
    """``values`` as Blender keeps them in keyframe points (float32), back in float64."""
    return np.asarray(values, dtype=np.float32).astype(np.float64)


def max_key_error(kind: str, frames: Array, values: Array, kept: Rows) -> float:
    """Largest joint error (rad or m) over ``frames`` of the LINEAR curves through the
    kept rows of ``values`` (stored as float32) against the solved ``values``."""
    frames = np.asarray(frames, dtype=float)
    values = np.asarray(values, dtype=float)
    if len(frames) == 0:
        return 0.0
    idx = list(kept)
    if len(idx) == len(frames):  # a key on every frame: the curve is the keys themselves
        curve = as_stored(values)
    else:
        curve = linear(frames[idx], as_stored(values[idx]), frames)
    return float(channel_errors(kind, curve, values).max())


def max_key_errors(channels: Sequence[tuple[str, Array, Array, Rows]]) -> list[float]:
    """:func:`max_key_error` of each ``(kind, frames, values, kept)``; the channels keyed
    on every frame, of one kind, in one pass (a bake's dozen bones: one conversion of
    their rows to matrices, not twelve)."""
    out = [0.0] * len(channels)
    whole: dict[str, list[int]] = {}
    for i, (kind, frames, values, kept) in enumerate(channels):
        if len(frames) and len(kept) == len(frames):
            whole.setdefault(kind, []).append(i)
        else:
            out[i] = max_key_error(kind, frames, values, kept)
    for kind, idx in whole.items():
        values = np.concatenate([np.asarray(channels[i][2], dtype=float) for i in idx])
        errors = channel_errors(kind, as_stored(values), values)
        ends = np.cumsum([len(channels[i][1]) for i in idx])
        for i, part in zip(idx, np.split(errors, ends[:-1]), strict=True):
            out[i] = float(part.max())
    return out


def reduce_keys(kind: str, frames: Array, values: Array, tolerance: float) -> list[int]:
    """Indices of the rows to key so that LINEAR curves through them stay within
    ``tolerance`` (rad or m, joint space) of every row of ``values`` at ``frames``.

    The first and last rows are always kept; ``tolerance <= 0`` keeps every row. A
    segment between two kept rows is split at its worst row until no row between
    them is off by more than ``tolerance`` (key values rounded to float32 first).
    """
    frames = np.asarray(frames, dtype=float)
    values = np.asarray(values, dtype=float)
    n = len(frames)
    if tolerance <= 0.0 or n <= 2:
        return list(range(n))
    stored = as_stored(values)
    kept = {0, n - 1}
    stack = [(0, n - 1)]
    while stack:
        a, b = stack.pop()
        if b - a < 2:
            continue
        inner = slice(a + 1, b)
        t = (frames[inner] - frames[a]) / (frames[b] - frames[a])
        curve = stored[a] + t[:, None] * (stored[b] - stored[a])
        errors = channel_errors(kind, curve, values[inner])
        worst = int(np.argmax(errors))
        if errors[worst] > tolerance:
            split = a + 1 + worst
            kept.add(split)
            stack.append((a, split))
            stack.append((split, b))
    return sorted(kept)
