"""Coordinate charts of a spherical joint (rad), for the batched model's columns.

- A spherical joint with limits: intrinsic XYZ angles ``(a, b, c)``,
  ``R = Rx(a) Ry(b) Rz(c)`` relative to rest, the order of SPEC 4.3's virtual chain
  (DECISIONS.md); its limits bound ``(a, b, c)`` exactly. A box beyond ``b = +-pi/2``
  keeps its meaning through the rotation's other angle triple.
- A spherical joint without limits: a rotation vector ``r`` (axis times angle) relative
  to rest, ``R = exp([r]x)``; singular only at ``|r| = 2 pi``, so the model re-centres
  a vector longer than ``RECENTRE`` to the same rotation's shorter one (no pole at a
  middle angle, as the XYZ angles have at ``b = +-pi/2``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..floatmath import quat_mat

Array = NDArray[np.float64]

# a rotation vector longer than this (rad) is replaced by the same rotation's shorter one,
# ``r (1 - 2 pi / |r|)`` (length ``2 pi - |r|``): far from the chart's singularity at 2 pi
RECENTRE = 1.25 * math.pi


def intrinsic_angles(quat: Sequence[float]) -> tuple[float, float, float]:
    """``(a, b, c)`` (rad) with ``R(quat) = Rx(a) Ry(b) Rz(c)``, ``b`` in [-pi/2, pi/2]."""
    m0, m1, m2, _, _, m5, _, _, m8 = quat_mat(quat)
    b = math.asin(max(-1.0, min(1.0, m2)))
    return math.atan2(-m5, m8), b, math.atan2(-m1, m0)


def box_angles(theta: Sequence[float], lo: Sequence[float], hi: Sequence[float]
               ) -> list[float]:  # fmt: skip
    """``theta`` clamped into ``[lo, hi]`` per axis (rad)."""
    return [min(max(t, a), b) for t, a, b in zip(theta, lo, hi, strict=True)]


def angles_in_box(quat: Sequence[float], lo: Sequence[float], hi: Sequence[float]
                  ) -> list[float]:  # fmt: skip
    """Intrinsic XYZ angles of ``quat`` (rad) nearest to the box ``[lo, hi]``, clamped
    into it. Of the two angle triples of a rotation, ``(a, b, c)`` and
    ``(a + pi, pi - b, c + pi)``, each angle shifted by whole turns toward its range,
    the one nearest the box is taken: a box beyond ``b = +-pi/2`` keeps its meaning."""
    a, b, c = intrinsic_angles(quat)
    best: tuple[float, list[float]] | None = None
    for triple in ((a, b, c), (a + math.pi, math.pi - b, c + math.pi)):
        moved = []
        for t, x, y in zip(triple, lo, hi, strict=True):
            mid = 0.5 * (x + y) if math.isfinite(x) and math.isfinite(y) else (
                x if math.isfinite(x) else y if math.isfinite(y) else t)
            moved.append(t + 2.0 * math.pi * round((mid - t) / (2.0 * math.pi)))
        outside = sum(max(x - t, 0.0) + max(t - y, 0.0)
                      for t, x, y in zip(moved, lo, hi, strict=True))
        if best is None or outside < best[0] - 1e-12:
            best = (outside, moved)
    assert best is not None
    return box_angles(best[1], lo, hi)


def rotvec_coefficients(r: Array) -> tuple[Array, Array, Array, Array]:
    """For rotation vectors ``r`` (3, ...) (rad): ``theta = |r|`` and the coefficients of
    ``exp([r]x) = I + s K + c K^2`` (``s = sin(theta)/theta``, ``c = (1 - cos)/theta^2``)
    and of the left Jacobian ``J = I + c K + d K^2`` (``d = (theta - sin)/theta^3``),
    ``K = [r]x``; series below 1e-4 rad. ``J`` maps ``dr`` to the rotation's angular
    velocity in the frame ``r`` is expressed in."""
    t2 = np.einsum("i...,i...->...", r, r)
    t = np.sqrt(t2)
    small = t < 1e-4
    safe = np.where(small, 1.0, t)
    sn, cs = np.sin(safe), np.cos(safe)
    s = np.where(small, 1.0 - t2 / 6.0, sn / safe)
    c = np.where(small, 0.5 - t2 / 24.0, (1.0 - cs) / (safe * safe))
    d = np.where(small, 1.0 / 6.0 - t2 / 120.0, (safe - sn) / (safe * safe * safe))
    return t, s, c, d


# [r]x row-major, (9, 3): ``(_SKEW @ r).reshape(3, 3)``
_SKEW = np.array([[0, 0, 0], [0, 0, -1], [0, 1, 0], [0, 0, 1], [0, 0, 0], [-1, 0, 0],
                  [0, -1, 0], [1, 0, 0], [0, 0, 0]], dtype=float)


def rotvec_matrices(r: Array, left: bool = True) -> tuple[Array, Array | None]:
    """``exp([r]x)`` and (``left``) the left Jacobian, each (3, 3, ...), of rotation
    vectors ``r`` (3, ...) (rad): with :func:`rotvec_coefficients` and ``K^2 = r r^T -
    theta^2 I``, ``(1 - c theta^2) I + s K + c r r^T`` and ``(1 - d theta^2) I + c K +
    d r r^T``, in a few whole-array operations."""
    t, s, c, d = rotvec_coefficients(r)
    t2 = t * t
    outer = r[:, None] * r[None]
    skew = (_SKEW @ r.reshape(3, t.size)).reshape(outer.shape)

    def part(a: Array, b: Array) -> Array:  # (1 - b theta^2) I + a K + b r r^T
        m = b * outer
        m += a * skew
        m.reshape(9, t.size)[::4] += (1.0 - b * t2).reshape(t.size)  # the diagonal
        return m

    return part(s, c), part(c, d) if left else None


def rotvec_recentred(r: Array) -> Array:
    """Rotation vectors ``r`` (3, ...) with those longer than :data:`RECENTRE` replaced
    by the same rotation's shorter one (a copy; ``r`` itself when none is)."""
    t = np.sqrt(np.einsum("i...,i...->...", r, r))
    long = t > RECENTRE
    if not long.any():
        return r
    return r * np.where(long, 1.0 - 2.0 * math.pi / np.maximum(t, RECENTRE), 1.0)


def rotvec_near(ref: Array, r: Array) -> Array:
    """Of ``r`` (3, ...) and the same rotations' other vectors ``r (1 - 2 pi / |r|)``,
    the one nearer ``ref`` (3, ...), per vector (rad)."""
    t = np.sqrt(np.einsum("i...,i...->...", r, r))
    other = r * np.where(t > 1e-12, 1.0 - 2.0 * math.pi / np.maximum(t, 1e-12), 1.0)
    use = np.einsum("i...,i...->...", other - ref, other - ref) < \
        np.einsum("i...,i...->...", r - ref, r - ref)
    return np.where(use, other, r)


def intrinsic_xyz_quat(a: float, b: float, c: float) -> tuple[float, float, float, float]:
    """The unit quaternion ``(w, x, y, z)`` of ``Rx(a) Ry(b) Rz(c)`` (rad)."""
    ca, sa = math.cos(a / 2), math.sin(a / 2)
    cb, sb = math.cos(b / 2), math.sin(b / 2)
    cc, sc = math.cos(c / 2), math.sin(c / 2)
    w, x, y, z = ca, sa, 0.0, 0.0  # qx
    w, x, y, z = w * cb, x * cb, w * sb, x * sb  # qx * qy
    return (w * cc - z * sc, x * cc + y * sc, y * cc - x * sc, z * cc + w * sc)


def intrinsic_xyz_quat_rows(a: Array, b: Array, c: Array) -> Array:
    """:func:`intrinsic_xyz_quat` of arrays of angles (k,) (rad): quaternions (k, 4)."""
    ca, sa = np.cos(a / 2), np.sin(a / 2)
    cb, sb = np.cos(b / 2), np.sin(b / 2)
    cc, sc = np.cos(c / 2), np.sin(c / 2)
    w, x, y, z = ca * cb, sa * cb, ca * sb, sa * sb  # qx * qy
    return np.column_stack([w * cc - z * sc, x * cc + y * sc, y * cc - x * sc, z * cc + w * sc])


def rotvec_quat_rows(v: Array) -> Array:
    """Quaternions (k, 4) ``[w, x, y, z]`` of rotation vectors (k, 3) (rad), ``w >= 0``."""
    t = np.sqrt(np.einsum("ki,ki->k", v, v))
    half = 0.5 * t
    k = np.where(t < 1e-8, 0.5 - t * t / 48.0, np.sin(half) / np.where(t < 1e-8, 1.0, t))
    out = np.column_stack([np.cos(half), v * k[:, None]])
    return np.where(out[:, :1] < 0.0, -out, out)


def chart_quats(v: Array, rotvec: bool) -> Array:
    """Quaternions (k, 4) ``[w, x, y, z]`` of a spherical joint's coordinates (k, 3) in
    its chart: a rotation vector (``rotvec``) or intrinsic XYZ angles (rad)."""
    return rotvec_quat_rows(v) if rotvec else intrinsic_xyz_quat_rows(v[:, 0], v[:, 1], v[:, 2])
