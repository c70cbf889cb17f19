"""Rotation conversions in numpy only (no scipy, so the core runs inside Blender).

Conventions (DECISIONS.md): quaternions are ``[w, x, y, z]``; angles are radians;
``euler_xyz`` means ``R = Rz(z) @ Ry(y) @ Rx(x)`` (scipy ``'xyz'``, Blender ``'XYZ'``);
``intrinsic_xyz`` means ``R = Rx(a) @ Ry(b) @ Rz(c)`` (scipy ``'XYZ'``), the rotation of
a spherical joint's virtual chain. A rotation vector's direction is the axis and its
norm the angle. Every function accepts array-likes and returns new float64 arrays.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

Vec = NDArray[np.float64]

IDENTITY_QUAT: Vec = np.array([1.0, 0.0, 0.0, 0.0])


def quat_normalize(q: ArrayLike) -> Vec:
    """Unit quaternion; raises ValueError on a zero or non-finite quaternion."""
    q = np.asarray(q, dtype=float)
    n = math.sqrt(float(q @ q))
    if not math.isfinite(n) or n == 0.0:
        raise ValueError("quaternion must be finite and non-zero")
    return q / n


def quat_multiply(a: ArrayLike, b: ArrayLike) -> Vec:
    """Hamilton product ``a * b``: the rotation ``R(a) @ R(b)``. Components may be
    arrays (``(4, F)``, batch last) for many products at once."""
    aw, ax, ay, az = np.asarray(a, dtype=float)
    bw, bx, by, bz = np.asarray(b, dtype=float)
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def quat_conjugate(q: ArrayLike) -> Vec:
    """Conjugate (the inverse of a unit quaternion)."""
    w, x, y, z = np.asarray(q, dtype=float)
    return np.array([w, -x, -y, -z])


def quat_to_matrix(q: ArrayLike) -> Vec:
    """3x3 rotation matrix of a quaternion (normalised first)."""
    w, x, y, z = quat_normalize(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


quaternion_to_rotation_matrix = quat_to_matrix  # the name SPEC 4.2 uses


def matrix_to_quat(r: ArrayLike) -> Vec:
    """Unit quaternion (w >= 0) of a rotation matrix, by Shepperd's method."""
    m = np.asarray(r, dtype=float)
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    diag = (m[0, 0], m[1, 1], m[2, 2])
    if tr >= max(diag):
        s = 2.0 * math.sqrt(max(1.0 + tr, 0.0))
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif diag[0] >= diag[1] and diag[0] >= diag[2]:
        s = 2.0 * math.sqrt(max(1.0 + m[0, 0] - m[1, 1] - m[2, 2], 0.0))
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif diag[1] >= diag[2]:
        s = 2.0 * math.sqrt(max(1.0 - m[0, 0] + m[1, 1] - m[2, 2], 0.0))
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(max(1.0 - m[0, 0] - m[1, 1] + m[2, 2], 0.0))
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    out = quat_normalize(q)
    return -out if out[0] < 0 else out


def axis_angle_to_quat(axis: ArrayLike, angle: float) -> Vec:
    """Quaternion of a rotation by ``angle`` radians about ``axis`` (normalised here)."""
    a = np.asarray(axis, dtype=float)
    n = math.sqrt(float(a @ a))
    if n == 0.0:
        return IDENTITY_QUAT.copy()
    h = 0.5 * angle
    s = math.sin(h) / n
    return np.array([math.cos(h), a[0] * s, a[1] * s, a[2] * s])


def axis_angle_to_matrix(axis: ArrayLike, angle: float) -> Vec:
    """Rotation matrix of ``angle`` radians about ``axis`` (Rodrigues, via quaternion)."""
    return quat_to_matrix(axis_angle_to_quat(axis, angle))


def _rx(a: float) -> Vec:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def _ry(a: float) -> Vec:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _rz(a: float) -> Vec:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def euler_xyz_to_matrix(euler: ArrayLike) -> Vec:
    """``Rz(z) @ Ry(y) @ Rx(x)`` for ``euler = [x, y, z]`` in radians."""
    x, y, z = np.asarray(euler, dtype=float)
    return _rz(z) @ _ry(y) @ _rx(x)


def matrix_to_euler_xyz(r: ArrayLike) -> Vec:
    """Inverse of :func:`euler_xyz_to_matrix`; y in [-pi/2, pi/2], x = 0 at gimbal lock."""
    m = np.asarray(r, dtype=float)
    sy = -m[2, 0]
    cy = math.hypot(m[0, 0], m[1, 0])
    y = math.atan2(sy, cy)
    if cy > 1e-9:
        x = math.atan2(m[2, 1], m[2, 2])
        z = math.atan2(m[1, 0], m[0, 0])
    else:  # gimbal lock: only x -/+ z is defined, put it all on z
        x = 0.0
        z = math.atan2(-m[0, 1], m[1, 1])
    return np.array([x, y, z])


def euler_xyz_to_quat(euler: ArrayLike) -> Vec:
    """Quaternion of ``Rz(z) @ Ry(y) @ Rx(x)`` (radians)."""
    x, y, z = np.asarray(euler, dtype=float)
    qx = axis_angle_to_quat((1.0, 0.0, 0.0), x)
    qy = axis_angle_to_quat((0.0, 1.0, 0.0), y)
    qz = axis_angle_to_quat((0.0, 0.0, 1.0), z)
    return quat_multiply(quat_multiply(qz, qy), qx)


def quat_to_euler_xyz(q: ArrayLike) -> Vec:
    """XYZ Euler angles (file convention ``Rz @ Ry @ Rx``, radians) of a quaternion."""
    return matrix_to_euler_xyz(quat_to_matrix(q))


def quat_to_euler_xyz_rows(quat: Vec) -> Vec:
    """:func:`quat_to_euler_xyz` of quaternion rows (k, 4): the file's XYZ Euler
    angles (k, 3) (``Rz @ Ry @ Rx``, rad; at gimbal lock x = 0)."""
    m = quat_to_matrix_rows(quat)
    m00, m10, m20, m01, m11 = m[:, 0, 0], m[:, 1, 0], m[:, 2, 0], m[:, 0, 1], m[:, 1, 1]
    m21, m22 = m[:, 2, 1], m[:, 2, 2]
    cy = np.hypot(m00, m10)
    free = cy > 1e-9
    ex = np.where(free, np.arctan2(m21, m22), 0.0)
    ez = np.where(free, np.arctan2(m10, m00), np.arctan2(-m01, m11))
    return np.column_stack([ex, np.arctan2(-m20, cy), ez])


def intrinsic_xyz_to_quat(a: float, b: float, c: float) -> Vec:
    """Quaternion of ``Rx(a) @ Ry(b) @ Rz(c)``: turning about X, then the moved Y, then Z."""
    qx = axis_angle_to_quat((1.0, 0.0, 0.0), a)
    qy = axis_angle_to_quat((0.0, 1.0, 0.0), b)
    qz = axis_angle_to_quat((0.0, 0.0, 1.0), c)
    return quat_multiply(quat_multiply(qx, qy), qz)


def rotvec_to_quat(v: ArrayLike) -> Vec:
    """Quaternion of a rotation vector (radians); exact for tiny angles."""
    v = np.asarray(v, dtype=float)
    angle = math.sqrt(float(v @ v))
    if angle < 1e-8:  # sin(a/2)/a by its Taylor series
        k = 0.5 - angle * angle / 48.0
        return quat_normalize([1.0 - angle * angle / 8.0, v[0] * k, v[1] * k, v[2] * k])
    return axis_angle_to_quat(v / angle, angle)


def quat_to_rotvec(q: ArrayLike) -> Vec:
    """Rotation vector (angle in [0, pi]) of a quaternion; stable near 0 and pi."""
    w, x, y, z = quat_normalize(q)
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    s = math.sqrt(x * x + y * y + z * z)
    angle = 2.0 * math.atan2(s, w)
    k = 2.0 + (s * s) / 3.0 if s < 1e-8 else angle / s  # angle/sin(angle/2) near 0
    return np.array([x * k, y * k, z * k])


def rotvec_to_matrix(v: ArrayLike) -> Vec:
    """Rotation matrix of a rotation vector (radians)."""
    return quat_to_matrix(rotvec_to_quat(v))


def matrix_to_rotvec(r: ArrayLike) -> Vec:
    """Rotation vector of a rotation matrix, via the quaternion (accurate near 0 and pi)."""
    return quat_to_rotvec(matrix_to_quat(r))


def make_transform(r: ArrayLike, p: ArrayLike) -> Vec:
    """4x4 homogeneous transform with rotation ``r`` (3x3) and translation ``p`` (3,)."""
    t = np.eye(4)
    t[:3, :3] = r
    t[:3, 3] = p
    return t


# --------------------------------------------------------------- many rotations at once


def quat_to_matrix_rows(quat: ArrayLike) -> Vec:
    """:func:`quat_to_matrix` of quaternion rows (k, 4) ``[w, x, y, z]`` (normalised
    first): rotation matrices (k, 3, 3)."""
    q = np.asarray(quat, dtype=float)
    w, x, y, z = (q / np.linalg.norm(q, axis=1, keepdims=True)).T
    out = np.empty((len(q), 3, 3))
    out[:, 0, 0], out[:, 0, 1], out[:, 0, 2] = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), \
        2 * (x * z + w * y)
    out[:, 1, 0], out[:, 1, 1], out[:, 1, 2] = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z), \
        2 * (y * z - w * x)
    out[:, 2, 0], out[:, 2, 1], out[:, 2, 2] = 2 * (x * z - w * y), 2 * (y * z + w * x), \
        1 - 2 * (x * x + y * y)
    return out


def matrix_to_quat_rows(r: ArrayLike) -> Vec:
    """:func:`matrix_to_quat` of rotation matrices (k, 3, 3): unit quaternions (k, 4),
    ``w >= 0``, each by the branch of Shepperd's method the scalar function takes."""
    m = np.asarray(r, dtype=float)
    d0, d1, d2 = m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]
    tr = d0 + d1 + d2
    # the largest of 4 w^2, 4 x^2, 4 y^2, 4 z^2 (times a common factor) picks the branch
    branch = np.where(tr >= np.maximum(np.maximum(d0, d1), d2), 0,
                      np.where((d0 >= d1) & (d0 >= d2), 1, np.where(d1 >= d2, 2, 3)))
    sums = np.stack([1.0 + tr, 1.0 + d0 - d1 - d2, 1.0 - d0 + d1 - d2, 1.0 - d0 - d1 + d2])
    s = 2.0 * np.sqrt(np.maximum(np.take_along_axis(sums, branch[None], 0)[0], 0.0))
    a = m[:, 2, 1] - m[:, 1, 2]  # 4 w x
    b = m[:, 0, 2] - m[:, 2, 0]  # 4 w y
    c = m[:, 1, 0] - m[:, 0, 1]  # 4 w z
    e = m[:, 0, 1] + m[:, 1, 0]  # 4 x y
    f = m[:, 0, 2] + m[:, 2, 0]  # 4 x z
    g = m[:, 1, 2] + m[:, 2, 1]  # 4 y z
    quarter = 0.25 * s
    table = np.stack([
        np.stack([quarter, a / s, b / s, c / s]),
        np.stack([a / s, quarter, e / s, f / s]),
        np.stack([b / s, e / s, quarter, g / s]),
        np.stack([c / s, f / s, g / s, quarter]),
    ])  # (branch, component, k)
    q = np.take_along_axis(table, branch[None, None], 0)[0].T
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    return np.where(q[:, :1] < 0.0, -q, q)


def quat_to_rotvec_rows(quat: ArrayLike) -> Vec:
    """:func:`quat_to_rotvec` of quaternion rows (k, 4): rotation vectors (k, 3) (rad),
    angle in [0, pi]."""
    q = np.asarray(quat, dtype=float)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    q = np.where(q[:, :1] < 0.0, -q, q)
    v = q[:, 1:]
    s = np.linalg.norm(v, axis=1)
    angle = 2.0 * np.arctan2(s, q[:, 0])
    k = np.where(s < 1e-8, 2.0 + s * s / 3.0, angle / np.where(s < 1e-8, 1.0, s))
    return v * k[:, None]


def matrix_to_rotvec_rows(r: ArrayLike) -> Vec:
    """:func:`matrix_to_rotvec` of rotation matrices (k, 3, 3): rotation vectors (k, 3)
    (rad)."""
    return quat_to_rotvec_rows(matrix_to_quat_rows(r))
