"""Plain-float rotations and small linear algebra for the compiled model and solvers.

Matrices are row-major 9-tuples, quaternions ``(w, x, y, z)``, angles in radians.
numpy's per-call overhead dominates at a handful of joints, so these run on Python floats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import mul

Mat3 = tuple[float, float, float, float, float, float, float, float, float]  # row-major
Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]  # w, x, y, z

IDENT: Mat3 = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
ZERO: Vec3 = (0.0, 0.0, 0.0)
INF = math.inf

# ----------------------------------------------------------------- plain-float rotations


def mat_mul(a: Sequence[float], b: Sequence[float]) -> Mat3:
    """Product of two row-major 3x3 matrices."""
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = a
    b0, b1, b2, b3, b4, b5, b6, b7, b8 = b
    return (
        a0 * b0 + a1 * b3 + a2 * b6, a0 * b1 + a1 * b4 + a2 * b7, a0 * b2 + a1 * b5 + a2 * b8,
        a3 * b0 + a4 * b3 + a5 * b6, a3 * b1 + a4 * b4 + a5 * b7, a3 * b2 + a4 * b5 + a5 * b8,
        a6 * b0 + a7 * b3 + a8 * b6, a6 * b1 + a7 * b4 + a8 * b7, a6 * b2 + a7 * b5 + a8 * b8,
    )  # fmt: skip


def quat_mul(a: Sequence[float], b: Sequence[float]) -> Quat:
    """Hamilton product ``a * b`` (``R(a) R(b)``)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


def quat_unit(q: Sequence[float]) -> Quat:
    """``q / |q|`` (q finite and non-zero)."""
    w, x, y, z = q
    n = math.sqrt(w * w + x * x + y * y + z * z)
    return (w / n, x / n, y / n, z / n)


def quat_mat(q: Sequence[float]) -> Mat3:
    """Rotation matrix of a quaternion (normalised first, as ``rotations.quat_to_matrix``)."""
    w, x, y, z = quat_unit(q)
    return (
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    )  # fmt: skip


def axis_rot(r: Mat3, axis: int, angle: float) -> Mat3:
    """``r @ R_axis(angle)`` for a coordinate axis (0 = X, 1 = Y, 2 = Z)."""
    c, s = math.cos(angle), math.sin(angle)
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = r
    if axis == 2:
        return (c * r0 + s * r1, c * r1 - s * r0, r2,
                c * r3 + s * r4, c * r4 - s * r3, r5,
                c * r6 + s * r7, c * r7 - s * r6, r8)  # fmt: skip
    if axis == 1:
        return (c * r0 - s * r2, r1, s * r0 + c * r2,
                c * r3 - s * r5, r4, s * r3 + c * r5,
                c * r6 - s * r8, r7, s * r6 + c * r8)  # fmt: skip
    return (r0, c * r1 + s * r2, c * r2 - s * r1,
            r3, c * r4 + s * r5, c * r5 - s * r4,
            r6, c * r7 + s * r8, c * r8 - s * r7)  # fmt: skip


def axis_angle_mat(axis: Vec3, angle: float) -> Mat3:
    """Rotation by ``angle`` about the unit ``axis``, via its quaternion."""
    h = 0.5 * angle
    s = math.sin(h)
    return quat_mat((math.cos(h), axis[0] * s, axis[1] * s, axis[2] * s))


def intrinsic_xyz(a: float, b: float, c: float) -> Quat:
    """Quaternion of ``Rx(a) Ry(b) Rz(c)`` (the fold of a spherical joint's increments)."""
    ha, hb, hc = 0.5 * a, 0.5 * b, 0.5 * c
    qx = (math.cos(ha), math.sin(ha), 0.0, 0.0)
    qy = (math.cos(hb), 0.0, math.sin(hb), 0.0)
    qz = (math.cos(hc), 0.0, 0.0, math.sin(hc))
    return quat_mul(quat_mul(qx, qy), qz)


def rotvec_of(m: Sequence[float]) -> Vec3:
    """Rotation vector of a rotation matrix, exactly as ``rotations.matrix_to_rotvec``."""
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = m
    tr = m00 + m11 + m22
    if tr >= max(m00, m11, m22):
        s = 2.0 * math.sqrt(max(1.0 + tr, 0.0))
        w, x, y, z = 0.25 * s, (m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s
    elif m00 >= m11 and m00 >= m22:
        s = 2.0 * math.sqrt(max(1.0 + m00 - m11 - m22, 0.0))
        w, x, y, z = (m21 - m12) / s, 0.25 * s, (m01 + m10) / s, (m02 + m20) / s
    elif m11 >= m22:
        s = 2.0 * math.sqrt(max(1.0 - m00 + m11 - m22, 0.0))
        w, x, y, z = (m02 - m20) / s, (m01 + m10) / s, 0.25 * s, (m12 + m21) / s
    else:
        s = 2.0 * math.sqrt(max(1.0 - m00 - m11 + m22, 0.0))
        w, x, y, z = (m10 - m01) / s, (m02 + m20) / s, (m12 + m21) / s, 0.25 * s
    n = math.sqrt(w * w + x * x + y * y + z * z)
    w, x, y, z = w / n, x / n, y / n, z / n
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    n = math.sqrt(w * w + x * x + y * y + z * z)  # quat_to_rotvec normalises again
    w, x, y, z = w / n, x / n, y / n, z / n
    s = math.sqrt(x * x + y * y + z * z)
    angle = 2.0 * math.atan2(s, w)
    k = 2.0 + (s * s) / 3.0 if s < 1e-8 else angle / s
    return (x * k, y * k, z * k)


def euler_xyz_of(m: Sequence[float]) -> Vec3:
    """XYZ Euler angles (``Rz Ry Rx``, rad) of a row-major rotation matrix, exactly as
    ``rotations.matrix_to_euler_xyz``."""
    m00, m01, _, m10, m11, _, m20, m21, m22 = m
    cy = math.hypot(m00, m10)
    y = math.atan2(-m20, cy)
    if cy > 1e-9:
        return (math.atan2(m21, m22), y, math.atan2(m10, m00))
    return (0.0, y, math.atan2(-m01, m11))


def solve_spd(a: list[list[float]], b: Sequence[float]) -> list[float] | None:
    """``x`` with ``a x = b`` by Cholesky; None when ``a`` is not numerically positive definite."""
    m = len(b)
    low: list[list[float]] = []
    for i in range(m):
        row = a[i]
        li: list[float] = []
        for j in range(i):
            lj = low[j]
            li.append((row[j] - sum(map(mul, li, lj[:j]))) / lj[j])
        d = row[i] - sum(map(mul, li, li))
        if not d > 0.0:
            return None
        li.append(math.sqrt(d))
        low.append(li)
    y: list[float] = []
    for i in range(m):
        y.append((b[i] - sum(map(mul, low[i][:i], y))) / low[i][i])
    x = [0.0] * m
    for i in range(m - 1, -1, -1):
        acc = y[i]
        for k in range(i + 1, m):
            acc -= low[k][i] * x[k]
        x[i] = acc / low[i][i]
    return x


def dls6(
    cols: Sequence[Sequence[float]], damping: float, dx: Sequence[float]
) -> list[float] | None:
    """``J^T (J J^T + damping I)^-1 dx`` for a 6-row ``J`` given by its columns, with
    ``J J^T`` accumulated column by column and a closed-form Cholesky; None when
    ``J J^T + damping I`` is not numerically positive definite."""
    s00 = s10 = s11 = s20 = s21 = s22 = s30 = s31 = s32 = s33 = s40 = 0.0
    s41 = s42 = s43 = s44 = s50 = s51 = s52 = s53 = s54 = s55 = 0.0
    for c0, c1, c2, c3, c4, c5 in cols:
        s00 += c0 * c0
        s10 += c1 * c0
        s11 += c1 * c1
        s20 += c2 * c0
        s21 += c2 * c1
        s22 += c2 * c2
        s30 += c3 * c0
        s31 += c3 * c1
        s32 += c3 * c2
        s33 += c3 * c3
        s40 += c4 * c0
        s41 += c4 * c1
        s42 += c4 * c2
        s43 += c4 * c3
        s44 += c4 * c4
        s50 += c5 * c0
        s51 += c5 * c1
        s52 += c5 * c2
        s53 += c5 * c3
        s54 += c5 * c4
        s55 += c5 * c5
    d = s00 + damping
    if not d > 0.0:
        return None
    l00 = math.sqrt(d)
    l10 = s10 / l00
    d = s11 + damping - l10 * l10
    if not d > 0.0:
        return None
    l11 = math.sqrt(d)
    l20 = s20 / l00
    l21 = (s21 - l20 * l10) / l11
    d = s22 + damping - l20 * l20 - l21 * l21
    if not d > 0.0:
        return None
    l22 = math.sqrt(d)
    l30 = s30 / l00
    l31 = (s31 - l30 * l10) / l11
    l32 = (s32 - l30 * l20 - l31 * l21) / l22
    d = s33 + damping - l30 * l30 - l31 * l31 - l32 * l32
    if not d > 0.0:
        return None
    l33 = math.sqrt(d)
    l40 = s40 / l00
    l41 = (s41 - l40 * l10) / l11
    l42 = (s42 - l40 * l20 - l41 * l21) / l22
    l43 = (s43 - l40 * l30 - l41 * l31 - l42 * l32) / l33
    d = s44 + damping - l40 * l40 - l41 * l41 - l42 * l42 - l43 * l43
    if not d > 0.0:
        return None
    l44 = math.sqrt(d)
    l50 = s50 / l00
    l51 = (s51 - l50 * l10) / l11
    l52 = (s52 - l50 * l20 - l51 * l21) / l22
    l53 = (s53 - l50 * l30 - l51 * l31 - l52 * l32) / l33
    l54 = (s54 - l50 * l40 - l51 * l41 - l52 * l42 - l53 * l43) / l44
    d = s55 + damping - l50 * l50 - l51 * l51 - l52 * l52 - l53 * l53 - l54 * l54
    if not d > 0.0:
        return None
    l55 = math.sqrt(d)
    b0, b1, b2, b3, b4, b5 = dx
    y0 = b0 / l00
    y1 = (b1 - l10 * y0) / l11
    y2 = (b2 - l20 * y0 - l21 * y1) / l22
    y3 = (b3 - l30 * y0 - l31 * y1 - l32 * y2) / l33
    y4 = (b4 - l40 * y0 - l41 * y1 - l42 * y2 - l43 * y3) / l44
    y5 = (b5 - l50 * y0 - l51 * y1 - l52 * y2 - l53 * y3 - l54 * y4) / l55
    x5 = y5 / l55
    x4 = (y4 - l54 * x5) / l44
    x3 = (y3 - l43 * x4 - l53 * x5) / l33
    x2 = (y2 - l32 * x3 - l42 * x4 - l52 * x5) / l22
    x1 = (y1 - l21 * x2 - l31 * x3 - l41 * x4 - l51 * x5) / l11
    x0 = (y0 - l10 * x1 - l20 * x2 - l30 * x3 - l40 * x4 - l50 * x5) / l00
    return [x0 * c0 + x1 * c1 + x2 * c2 + x3 * c3 + x4 * c4 + x5 * c5
            for c0, c1, c2, c3, c4, c5 in cols]
