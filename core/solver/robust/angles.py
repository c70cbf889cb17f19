"""The coordinate chart of a boxed spherical joint: intrinsic XYZ angles (rad).

``R = Rx(a) Ry(b) Rz(c)`` relative to rest; its limits bound ``(a, b, c)`` exactly. A box
beyond ``b = +-pi/2`` keeps its meaning through the rotation's other angle triple.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import mul

from ...floatmath import quat_mat

Coords = list[float]


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




def same_rotation(p: Sequence[float], q: Sequence[float]) -> bool:
    """Whether two unit quaternions are the same rotation (to rounding)."""
    return abs(sum(map(mul, p, q))) > 1.0 - 1e-14


def quat_rotvec(q: Sequence[float]) -> tuple[float, float, float]:
    """Rotation vector (rad) of a unit quaternion, the short way round."""
    w, x, y, z = q
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    s = math.sqrt(x * x + y * y + z * z)
    k = 2.0 if s < 1e-12 else 2.0 * math.atan2(s, w) / s
    return (x * k, y * k, z * k)


