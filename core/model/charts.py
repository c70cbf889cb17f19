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
    """For rotation vectors ``r`` (3, k) (rad): ``theta = |r|`` and the coefficients of
    ``exp([r]x) = I + s K + c K^2`` (``s = sin(theta)/theta``, ``c = (1 - cos)/theta^2``)
    and of the left Jacobian ``J = I + c K + d K^2`` (``d = (theta - sin)/theta^3``),
    ``K = [r]x``; series below 1e-4 rad. ``J`` maps ``dr`` to the rotation's angular
    velocity in the frame ``r`` is expressed in."""
    t2 = np.einsum("ik,ik->k", r, r)
    t = np.sqrt(t2)
    small = t < 1e-4
    safe = np.where(small, 1.0, t)
    sn, cs = np.sin(safe), np.cos(safe)
    s = np.where(small, 1.0 - t2 / 6.0, sn / safe)
    c = np.where(small, 0.5 - t2 / 24.0, (1.0 - cs) / (safe * safe))
    d = np.where(small, 1.0 / 6.0 - t2 / 120.0, (safe - sn) / (safe * safe * safe))
    return t, s, c, d


def rotvec_recentred(r: Array) -> Array:
    """Rotation vectors ``r`` (3, k) with those longer than :data:`RECENTRE` replaced by
    the same rotation's shorter one (a copy)."""
    t = np.sqrt(np.einsum("ik,ik->k", r, r))
    long = t > RECENTRE
    if not long.any():
        return r
    out = r.copy()
    out[:, long] *= 1.0 - 2.0 * math.pi / t[long]
    return out


def rotvec_near(ref: Array, r: Array) -> Array:
    """Of ``r`` (3, k) and the same rotations' other vectors ``r (1 - 2 pi / |r|)``, the
    one nearer ``ref`` (3, k), per column (rad)."""
    t = np.sqrt(np.einsum("ik,ik->k", r, r))
    other = r * np.where(t > 1e-12, 1.0 - 2.0 * math.pi / np.maximum(t, 1e-12), 1.0)
    use = np.einsum("ik,ik->k", other - ref, other - ref) < \
        np.einsum("ik,ik->k", r - ref, r - ref)
    return np.where(use, other, r)
