"""The compiled kinematics model and the SPEC 5.4 iterates on any ``Kinematics``.

``CompiledKinematics`` flattens the joints on the effectors' paths into a list of plain
tuples once; FK, errors and Jacobians then run on Python floats (numpy's per-call
overhead dominates at a handful of joints). Frames: world. Units: metres, radians.

``solve_spec`` is ``solver.solve`` on a model: the same loop, the same decisions, the
same iterates (within rounding), on one effector or several (stacked errors).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import mul
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .chain import path_to_root
from .joints import SYNC_THRESHOLD, JointNode, PrismaticJoint, RevoluteJoint, SphericalJoint
from .kinematics import Kinematics, union_chain
from .rotations import matrix_to_rotvec
from .skeleton import Skeleton
from .solver import SolveResult, SolverSettings

Array = NDArray[np.float64]
Mat3 = tuple[float, float, float, float, float, float, float, float, float]  # row-major
Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]  # w, x, y, z

IDENT: Mat3 = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
ZERO: Vec3 = (0.0, 0.0, 0.0)
FIXED, REVOLUTE, PRISMATIC, SPHERICAL, VIRTUAL = 0, 1, 2, 3, 4
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


# ----------------------------------------------------------------------- compiled model

Op = Callable[[], None]


def _moved(rp: Mat3, pp: Vec3, off: Vec3) -> Vec3:
    """``pp + rp @ off``: a child's origin from its parent's frame (m)."""
    ox, oy, oz = off
    return (
        pp[0] + rp[0] * ox + rp[1] * oy + rp[2] * oz,
        pp[1] + rp[3] * ox + rp[4] * oy + rp[5] * oz,
        pp[2] + rp[6] * ox + rp[7] * oy + rp[8] * oz,
    )


class _Frames:
    """FK output: per path joint its world rotation ``R`` and world position ``P`` (m);
    per virtual column its world rotation ``V``
    (with unfolded increments below the sync threshold, which only the Jacobian sees, as
    in ``SphericalJoint.update_global_transform``). Index -1 (the last slot) is the world
    frame."""

    def __init__(self, joints: int, columns: int) -> None:
        self.R: list[Mat3] = [IDENT] * (joints + 1)
        self.P: list[Vec3] = [ZERO] * (joints + 1)
        self.V: list[Mat3] = [IDENT] * columns


def _fixed_op(f: _Frames, i: int, parent: int, off: Vec3, rot: Mat3 | None) -> Op:
    R, P = f.R, f.P

    def op() -> None:
        rp = R[parent]
        P[i] = _moved(rp, P[parent], off)
        R[i] = rp if rot is None else mat_mul(rp, rot)

    return op


def _revolute_op(
    f: _Frames, i: int, parent: int, off: Vec3, q: list[float], c: int, ax: int, axis: Vec3
) -> Op:
    """FK of a hinge: ``R = R_parent @ R_axis(q)``, ``p = p_parent + R_parent @ off``.

    Coordinate axes get the rotation written out (the hot path of most rigs)."""
    R, P = f.R, f.P
    ox, oy, oz = off
    cos, sin = math.cos, math.sin

    if ax < 0:

        def op() -> None:
            rp = R[parent]
            P[i] = _moved(rp, P[parent], off)
            R[i] = mat_mul(rp, axis_angle_mat(axis, q[c]))

        return op

    def op_axis() -> None:
        r0, r1, r2, r3, r4, r5, r6, r7, r8 = R[parent]
        px, py, pz = P[parent]
        P[i] = (px + r0 * ox + r1 * oy + r2 * oz, py + r3 * ox + r4 * oy + r5 * oz,
                pz + r6 * ox + r7 * oy + r8 * oz)  # fmt: skip
        a = q[c]
        k, s = cos(a), sin(a)
        if ax == 2:
            R[i] = (k * r0 + s * r1, k * r1 - s * r0, r2,
                           k * r3 + s * r4, k * r4 - s * r3, r5,
                           k * r6 + s * r7, k * r7 - s * r6, r8)  # fmt: skip
        elif ax == 1:
            R[i] = (k * r0 - s * r2, r1, s * r0 + k * r2,
                           k * r3 - s * r5, r4, s * r3 + k * r5,
                           k * r6 - s * r8, r7, s * r6 + k * r8)  # fmt: skip
        else:
            R[i] = (r0, k * r1 + s * r2, k * r2 - s * r1,
                           r3, k * r4 + s * r5, k * r5 - s * r4,
                           r6, k * r7 + s * r8, k * r8 - s * r7)  # fmt: skip

    return op_axis


def _prismatic_op(f: _Frames, i: int, parent: int, off: Vec3, q: list[float], c: int,
                  axis: Vec3) -> Op:  # fmt: skip
    R, P = f.R, f.P
    ax, ay, az = axis

    def op() -> None:
        rp = R[parent]
        d = q[c]
        R[i] = rp
        P[i] = _moved(rp, P[parent], (off[0] + d * ax, off[1] + d * ay, off[2] + d * az))

    return op


def _spherical_op(
    f: _Frames, i: int, parent: int, off: Vec3, model: CompiledKinematics, cols: tuple[int, ...],
    s: int,
) -> Op:  # fmt: skip
    R, P, V = f.R, f.P, f.V
    q, lo, hi, quats = model._q, model._lo, model._hi, model._quats
    c1, c2, c3 = cols

    def op() -> None:
        a, b, g = q[c1], q[c2], q[c3]
        if max(abs(a), abs(b), abs(g)) >= SYNC_THRESHOLD:  # fold (SPEC 4.3)
            quats[s] = quat_unit(quat_mul(quats[s], intrinsic_xyz(a, b, g)))
            for cc, v in ((c1, a), (c2, b), (c3, g)):
                lo[cc] -= v
                hi[cc] -= v
                q[cc] = 0.0
            a = b = g = 0.0
        rp = R[parent]
        P[i] = _moved(rp, P[parent], off)
        r = mat_mul(rp, quat_mat(quats[s]))
        R[i] = r  # children hang below the joint itself, not below v3
        v1 = r if a == 0.0 else axis_rot(r, 0, a)  # unfolded (tiny) increments: Jacobian only
        v2 = v1 if b == 0.0 else axis_rot(v1, 1, b)
        V[c1], V[c2], V[c3] = v1, v2, v2 if g == 0.0 else axis_rot(v2, 2, g)

    return op



# One FK step as data for the code generator: path joint, kind, parent, offset (m),
# column, coordinate axis (or -1), fixed rotation (or None), and the closure doing it.
Step = tuple[int, int, int, Vec3, int, int, "Mat3 | None", Op]


def straight_line_fk(steps: list[Step], f: _Frames, q: list[float]) -> Op:
    """Compile FK into one Python function with every constant inlined.

    Hinges and sliders about coordinate axes and fixed joints become straight-line
    float arithmetic on local variables (zero offset components and zero/one rotation
    entries dropped: the same values as the closures); other joints call their closure.
    Every joint's ``R``/``P`` is still stored for the Jacobian and the closures.
    """
    lines: list[str] = []
    rot: dict[int, list[str]] = {}  # joint -> the 9 expressions of its world rotation
    pos: dict[int, list[str]] = {}  # joint -> the 3 expressions of its world position

    def frame(j: int) -> tuple[list[str], list[str]]:
        if j not in rot:  # not computed here (static, or done by a closure): load it
            tag = "w" if j < 0 else str(j)  # -1: the world frame in the last slot
            rot[j] = [f"r{tag}_{k}" for k in range(9)]
            pos[j] = [f"p{tag}_{k}" for k in range(3)]
            lines.append(f"{', '.join(rot[j])} = R[{j}]")
            lines.append(f"{', '.join(pos[j])} = P[{j}]")
        return rot[j], pos[j]

    def moved(r: list[str], p: list[str], off: list[str]) -> list[str]:
        terms = []
        for row in range(3):
            t = [p[row]] + [f"{r[3 * row + k]} * {o}" for k, o in enumerate(off) if o != "0.0"]
            terms.append(" + ".join(t))
        return terms

    for n, (i, kind, parent, off, c, ax, fixed_rot, _) in enumerate(steps):
        inline = kind == FIXED or (kind in (REVOLUTE, PRISMATIC) and ax >= 0)
        if not inline:
            lines.append(f"ops[{n}]()")
            rot.pop(i, None)
            continue
        r, p = frame(parent)
        offs = [repr(float(v)) for v in off]
        new_r = list(r)
        if kind == REVOLUTE:
            lines.append(f"v = q[{c}]")
            lines.append("k = cos(v)")
            lines.append("s = sin(v)")
            a, b = {2: (0, 1), 1: (2, 0), 0: (1, 2)}[ax]  # R_axis mixes columns a and b
            for row in range(3):
                ra, rb = r[3 * row + a], r[3 * row + b]
                na, nb = f"r{i}_{3 * row + a}", f"r{i}_{3 * row + b}"
                if ax == 1:  # Ry: col0' = c col0 - s col2, col2' = s col0 + c col2
                    lines.append(f"{nb} = k * {rb} - s * {ra}")
                    lines.append(f"{na} = s * {rb} + k * {ra}")
                else:  # Rz, Rx: col_a' = c col_a + s col_b, col_b' = c col_b - s col_a
                    lines.append(f"{na} = k * {ra} + s * {rb}")
                    lines.append(f"{nb} = k * {rb} - s * {ra}")
                new_r[3 * row + a], new_r[3 * row + b] = na, nb
        elif kind == PRISMATIC:
            lines.append(f"v = q[{c}]")
            offs[ax] = "v" if offs[ax] == "0.0" else f"({offs[ax]} + v)"
        elif fixed_rot is not None:
            for row in range(3):
                for col in range(3):
                    t = []
                    for k in range(3):
                        m = fixed_rot[3 * k + col]
                        if m == 1.0:
                            t.append(r[3 * row + k])
                        elif m != 0.0:
                            t.append(f"{r[3 * row + k]} * {m!r}")
                    name = f"r{i}_{3 * row + col}"
                    lines.append(f"{name} = {' + '.join(t) if t else '0.0'}")
                    new_r[3 * row + col] = name
        new_p = [f"p{i}_{k}" for k in range(3)]
        for name, expr in zip(new_p, moved(r, p, offs), strict=True):
            lines.append(f"{name} = {expr}")
        rot[i], pos[i] = new_r, new_p
        lines.append(f"R[{i}] = ({', '.join(new_r)})")
        lines.append(f"P[{i}] = ({', '.join(new_p)})")
    body = "\n".join("        " + ln for ln in lines) or "        pass"
    src = f"def make(R, P, q, ops, cos, sin):\n    def fk():\n{body}\n    return fk\n"
    namespace: dict[str, Any] = {}
    exec(compile(src, "<dhik.fast straight-line FK>", "exec"), namespace)  # noqa: S102
    return namespace["make"](f.R, f.P, q, [st[7] for st in steps], math.cos, math.sin)


class CompiledKinematics:
    """The kinematics protocol on flat lists, for the joints on the effectors' paths.

    Compiled once from a ``Skeleton``: one closure per path joint (constants bound, the
    joints with only fixed ancestors evaluated once). State: one float per column
    (radians, metres, or a spherical increment in radians), the current limits per
    column (shifted for virtual columns; +-inf when none) and one ``(w, x, y, z)``
    quaternion per spherical joint. Change it only through the protocol: ``update()``
    is skipped while nothing changed since the last FK.
    """

    def __init__(self, skeleton: Skeleton, effectors: list[str]) -> None:
        self.effectors = list(effectors)
        self.names = [node.name for node in union_chain(skeleton, self.effectors)]
        self.n = len(self.names)
        col = {name: i for i, name in enumerate(self.names)}
        paths = [path_to_root(skeleton.root, skeleton.joint(e)) for e in self.effectors]
        on_path = {j.name for path in paths for j in path}
        order = [name for name in skeleton.joints if name in on_path]  # parents first
        index = {name: i for i, name in enumerate(order)}
        self._eff = [index[e] for e in self.effectors]
        self._q = [0.0] * self.n
        self._lo0 = [-INF] * self.n
        self._hi0 = [INF] * self.n
        self._lo = list(self._lo0)
        self._hi = list(self._hi0)
        self._quats: list[Quat] = []
        self._sph_names: list[str] = []
        self._sph_cols: list[tuple[int, int, int]] = []
        # per column: (kind, path joint, coordinate axis or -1, unit axis); owner joint
        self._col_info: list[tuple[int, int, int, Vec3]] = [(REVOLUTE, 0, -1, ZERO)] * self.n
        self._col_joint: list[tuple[str, int]] = [("", -1)] * self.n
        self._frames = f = _Frames(len(order), self.n)
        static: list[Op] = []
        steps: list[Step] = []
        moving: set[int] = set()
        for i, name in enumerate(order):
            j = skeleton.joints[name]
            parent = -1 if j.parent is None else index[j.parent.name]
            off: Vec3 = tuple(float(v) for v in j.local_offset)  # type: ignore[assignment]
            if isinstance(j, RevoluteJoint | PrismaticJoint):
                c = col[name]
                axis: Vec3 = tuple(float(v) for v in j.axis)  # type: ignore[assignment]
                ax = axis.index(1.0) if sorted(axis) == [0.0, 0.0, 1.0] else -1
                if isinstance(j, RevoluteJoint):
                    kind, op = REVOLUTE, _revolute_op(f, i, parent, off, self._q, c, ax, axis)
                else:
                    kind, op = PRISMATIC, _prismatic_op(f, i, parent, off, self._q, c, axis)
                self._col_info[c] = (kind, i, ax, axis)
                step: Step = (i, kind, parent, off, c, ax, None, op)
                self._col_joint[c] = (name, -1)
                if j.limits is not None:
                    self._lo0[c], self._hi0[c] = j.limits
                moving.add(i)
            elif isinstance(j, SphericalJoint):
                cs = tuple(col[v.name] for v in j.virtual_chain)
                op = _spherical_op(f, i, parent, off, self, cs, len(self._sph_names))
                step = (i, SPHERICAL, parent, off, -1, -1, None, op)
                self._sph_names.append(name)
                self._sph_cols.append(cs)  # type: ignore[arg-type]
                self._quats.append((1.0, 0.0, 0.0, 0.0))
                for k, (c, lim) in enumerate(zip(cs, j.limits, strict=True)):
                    self._col_info[c] = (VIRTUAL, i, k, ZERO)
                    self._col_joint[c] = (name, k)
                    if lim is not None:
                        self._lo0[c], self._hi0[c] = lim
                moving.add(i)
            else:
                quat = tuple(float(v) for v in j.quaternion)  # type: ignore[attr-defined]
                rot = None if quat == (1.0, 0.0, 0.0, 0.0) else quat_mat(quat)
                op = _fixed_op(f, i, parent, off, rot)
                step = (i, FIXED, parent, off, -1, -1, rot, op)
                if parent in moving:
                    moving.add(i)
            if i in moving:
                steps.append(step)
            else:
                static.append(op)
        self._ops = [st[7] for st in steps]  # the closures: the reference for the FK below
        self._fk = straight_line_fk(steps, f, self._q)
        self._eff_cols = [
            [col[node.name] for j in path for node in _solver_nodes(j)] for path in paths
        ]
        for op in static:
            op()
        self._fresh = self._clipped = False
        self.read_from(skeleton)
        self.update()

    # -- FK ---------------------------------------------------------------------------
    def update(self) -> None:
        """FK of the path joints, folding spherical increments first (SPEC 4.3)."""
        if self._fresh:
            return
        self._fk()
        self._fresh = True

    # -- plain-float solver interface --------------------------------------------------
    def pose_error(self, k: int, target_r: Sequence[float], target_p: Sequence[float]
                   ) -> tuple[float, float, float, float, float, float]:  # fmt: skip
        """``(dp, dr)`` of effector ``k`` as 6 floats: ``p_t - p`` (m), ``rotvec(R_t R^T)``
        (rad), world frame; ``target_r`` row-major 3x3, ``target_p`` in metres."""
        e = self._eff[k]
        r0, r1, r2, r3, r4, r5, r6, r7, r8 = self._frames.R[e]
        p = self._frames.P[e]
        t0, t1, t2, t3, t4, t5, t6, t7, t8 = target_r
        drx, dry, drz = rotvec_of((
            t0 * r0 + t1 * r1 + t2 * r2, t0 * r3 + t1 * r4 + t2 * r5, t0 * r6 + t1 * r7 + t2 * r8,
            t3 * r0 + t4 * r1 + t5 * r2, t3 * r3 + t4 * r4 + t5 * r5, t3 * r6 + t4 * r7 + t5 * r8,
            t6 * r0 + t7 * r1 + t8 * r2, t6 * r3 + t7 * r4 + t8 * r5, t6 * r6 + t7 * r7 + t8 * r8,
        ))  # fmt: skip
        return (target_p[0] - p[0], target_p[1] - p[1], target_p[2] - p[2], drx, dry, drz)

    def jacobian_columns(self, k: int) -> list[tuple[float, ...]]:
        """Per model column its 6-vector ``[linear (m/unit); angular (rad/unit)]`` for
        effector ``k``, world frame; zeros for columns off its path."""
        f = self._frames
        R, P, V = f.R, f.P, f.V
        px, py, pz = P[self._eff[k]]
        cols: list[tuple[float, ...]] = [(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)] * self.n
        for c in self._eff_cols[k]:
            kind, i, ax, axis = self._col_info[c]
            r = V[c] if kind == VIRTUAL else R[i]
            if ax >= 0:
                zx, zy, zz = r[ax], r[3 + ax], r[6 + ax]
            else:
                a0, a1, a2 = axis
                zx = r[0] * a0 + r[1] * a1 + r[2] * a2
                zy = r[3] * a0 + r[4] * a1 + r[5] * a2
                zz = r[6] * a0 + r[7] * a1 + r[8] * a2
            if kind == PRISMATIC:
                cols[c] = (zx, zy, zz, 0.0, 0.0, 0.0)
            else:
                jx, jy, jz = P[i]
                dx, dy, dz = px - jx, py - jy, pz - jz
                cols[c] = (zy * dz - zz * dy, zz * dx - zx * dz, zx * dy - zy * dx, zx, zy, zz)
        return cols

    def apply_scaled(self, dq: Sequence[float], alpha: float) -> None:
        """``q += alpha * dq`` per column, clipped to the current limits."""
        q, lo, hi = self._q, self._lo, self._hi
        for c in range(self.n):
            v = q[c] + alpha * dq[c]
            if v < lo[c]:
                v = lo[c]
            elif v > hi[c]:
                v = hi[c]
            q[c] = v
        self._fresh = False
        self._clipped = True

    def clip(self) -> None:
        """Clip every column into its current limits (a no-op when nothing changed)."""
        if not self._clipped:
            self.apply_scaled([0.0] * self.n, 0.0)

    # -- the protocol (numpy at the boundary) ------------------------------------------
    def reset(self) -> None:
        """T-pose: q = 0, identity quaternions, the skeleton's limits; FK."""
        self._q[:] = [0.0] * self.n
        self._lo[:] = self._lo0
        self._hi[:] = self._hi0
        self._quats[:] = [(1.0, 0.0, 0.0, 0.0)] * len(self._quats)
        self._fresh = self._clipped = False
        self.update()

    def effector_transform(self, k: int) -> Array:
        e = self._eff[k]
        r0, r1, r2, r3, r4, r5, r6, r7, r8 = self._frames.R[e]
        p0, p1, p2 = self._frames.P[e]
        return np.array([[r0, r1, r2, p0], [r3, r4, r5, p1], [r6, r7, r8, p2],
                         [0.0, 0.0, 0.0, 1.0]])  # fmt: skip

    def jacobian(self, k: int) -> Array:
        return np.array(self.jacobian_columns(k), dtype=float).reshape(self.n, 6).T

    def apply_delta(self, dq: Array) -> None:
        self.apply_scaled(np.asarray(dq, dtype=float).tolist(), 1.0)

    def limits(self) -> tuple[Array, Array]:
        return np.array(self._lo, dtype=float), np.array(self._hi, dtype=float)

    def increments(self) -> Array:
        return np.array(self._q, dtype=float)

    def save(self) -> object:
        return (self._q[:], self._lo[:], self._hi[:], self._quats[:])

    def restore(self, state: object) -> None:
        q, lo, hi, quats = state  # type: ignore[misc]
        self._q[:] = q
        self._lo[:] = lo
        self._hi[:] = hi
        self._quats[:] = quats
        self._fresh = self._clipped = False

    def _node(self, skeleton: Skeleton, c: int) -> Any:
        name, k = self._col_joint[c]
        joint = skeleton.joints[name]
        return joint if k < 0 else joint.virtual_chain[k]  # type: ignore[attr-defined]

    def write_back(self, skeleton: Skeleton, fk: bool = True) -> None:
        """Copy q, quaternions and virtual limits into the joint objects, then FK (skipped
        when ``fk`` is False: joint values do not need it)."""
        for c in range(self.n):
            node = self._node(skeleton, c)
            node.q = self._q[c]
            if self._col_info[c][0] == VIRTUAL:
                lo, hi = self._lo[c], self._hi[c]
                node.limits = None if lo == -INF and hi == INF else (lo, hi)
        for s, name in enumerate(self._sph_names):
            sp = skeleton.joints[name]
            sp.quaternion = np.array(self._quats[s], dtype=float)  # type: ignore[attr-defined]
            sp.virtual_fix.quaternion = sp.quaternion.copy()  # type: ignore[attr-defined]
        if fk:
            skeleton.update()

    def joint_values(self, state: object) -> dict[str, dict[str, Any]]:
        """SPEC 3.3 entries (radians, metres, ``[w, x, y, z]``) of the model's joints in a
        ``save()`` state, without FK: what ``write_back`` + ``Skeleton.joint_values`` give
        (increments at or above the sync threshold folded in). Joints off the effectors'
        paths are not included."""
        q, _, _, quats = state  # type: ignore[misc]
        out: dict[str, dict[str, Any]] = {}
        for c, (name, k) in enumerate(self._col_joint):
            if k < 0:
                if self._col_info[c][0] == PRISMATIC:
                    out[name] = {"type": "prismatic", "displacement": q[c]}
                else:
                    out[name] = {"type": "revolute", "angle": q[c]}
        for s, name in enumerate(self._sph_names):
            c1, c2, c3 = self._sph_cols[s]
            a, b, g = q[c1], q[c2], q[c3]
            quat = quat_unit(quats[s])
            if max(abs(a), abs(b), abs(g)) >= SYNC_THRESHOLD:
                quat = quat_unit(quat_mul(quat, intrinsic_xyz(a, b, g)))
            out[name] = {"type": "spherical", "euler": list(euler_xyz_of(quat_mat(quat))),
                         "quaternion": list(quat)}
        return out

    def read_from(self, skeleton: Skeleton) -> None:
        for c in range(self.n):
            node = self._node(skeleton, c)
            self._q[c] = float(node.q)
            lim = node.limits
            self._lo[c], self._hi[c] = (-INF, INF) if lim is None else (float(lim[0]),
                                                                      float(lim[1]))
        for s, name in enumerate(self._sph_names):
            quat = skeleton.joints[name].quaternion  # type: ignore[attr-defined]
            self._quats[s] = (float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3]))
        self._fresh = self._clipped = False


def _solver_nodes(joint: JointNode) -> list[JointNode]:
    """The 1-DoF solver nodes a joint adds to an IK chain (``append_to_ik_chain``)."""
    nodes: list[JointNode] = []
    joint.append_to_ik_chain(nodes)
    return nodes


# --------------------------------------------------------------------- the spec solver


def _targets(target: ArrayLike | Sequence[ArrayLike], m: int) -> list[Array]:
    if m == 1 and isinstance(target, np.ndarray) and target.shape == (4, 4):
        return [target]
    arr = np.asarray(target, dtype=float)
    ts = [arr] if arr.ndim == 2 else list(arr)
    if len(ts) != m or any(t.shape != (4, 4) for t in ts):
        raise ValueError(f"expected {m} target 4x4 matrices, one per effector")
    return ts


class _FloatStepper:
    """The loop's operations on a CompiledKinematics, in plain floats."""

    def __init__(self, model: CompiledKinematics, targets: list[Array], damping: float) -> None:
        self.model = model
        self.targets = []
        for t in targets:
            (r0, r1, r2, p0), (r3, r4, r5, p1), (r6, r7, r8, p2), _ = t.tolist()
            self.targets.append(((r0, r1, r2, r3, r4, r5, r6, r7, r8), (p0, p1, p2)))
        self.damping = damping

    def measure(self) -> tuple[list[float], list[tuple[float, float]]]:
        dx: list[float] = []
        errs = []
        for k, (tr, tp) in enumerate(self.targets):
            e = self.model.pose_error(k, tr, tp)  # type: ignore[arg-type]
            dx.extend(e)
            errs.append((math.sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]),
                         math.sqrt(e[3] * e[3] + e[4] * e[4] + e[5] * e[5])))
        return dx, errs

    def norm(self, dx: list[float]) -> float:
        return math.sqrt(sum(map(mul, dx, dx)))

    def step(self, dx: list[float]) -> list[float] | None:
        """``J^T (J J^T + damping I)^-1 dx``; None when the system cannot be solved."""
        model = self.model
        cols = model.jacobian_columns(0)
        if len(self.targets) == 1:
            dq = dls6(cols, self.damping, dx)
            if dq is not None:
                return dq
        for k in range(1, len(self.targets)):
            cols = [a + b for a, b in zip(cols, model.jacobian_columns(k), strict=True)]
        rows = list(zip(*cols, strict=True))
        a = [[sum(map(mul, ri, rj)) for rj in rows] for ri in rows]
        for i in range(len(rows)):
            a[i][i] += self.damping
        beta = solve_spd(a, dx)
        if beta is None:  # not numerically positive definite (damping 0): LU, as solve does
            try:
                beta = [float(v) for v in np.linalg.solve(np.array(a), np.array(dx))]
            except np.linalg.LinAlgError:
                return None
        return [sum(map(mul, col, beta)) for col in cols]

    def apply(self, dq: list[float], alpha: float) -> None:
        self.model.apply_scaled(dq, alpha)

    def clip(self) -> None:
        self.model.clip()


class _ArrayStepper:
    """The loop's operations on any Kinematics, through the protocol (numpy)."""

    def __init__(self, model: Kinematics, targets: list[Array], damping: float) -> None:
        self.model = model
        self.targets = targets
        self.eye = damping * np.eye(6 * len(targets))

    def measure(self) -> tuple[Array, list[tuple[float, float]]]:
        parts = []
        errs = []
        for k, t in enumerate(self.targets):
            g = self.model.effector_transform(k)
            dp = t[:3, 3] - g[:3, 3]
            dr = matrix_to_rotvec(t[:3, :3] @ g[:3, :3].T)
            parts += [dp, dr]
            errs.append((math.sqrt(dp @ dp), math.sqrt(dr @ dr)))
        return np.concatenate(parts), errs

    def norm(self, dx: Array) -> float:
        return float(np.linalg.norm(dx))

    def step(self, dx: Array) -> Array | None:
        jac = np.vstack([self.model.jacobian(k) for k in range(len(self.targets))])
        try:
            beta = np.linalg.solve(jac @ jac.T + self.eye, dx)
        except np.linalg.LinAlgError:
            return None
        return jac.T @ beta

    def apply(self, dq: Array | list[float], alpha: float) -> None:
        self.model.apply_delta(alpha * np.asarray(dq, dtype=float))

    def clip(self) -> None:
        self.model.apply_delta(np.zeros(self.model.n))


def solve_spec(
    model: Kinematics,
    target: ArrayLike | Sequence[ArrayLike],
    settings: SolverSettings | None = None,
) -> SolveResult:
    """SPEC 5.4 DLS on ``model``: the iterates of ``solver.solve``, one decision at a time.

    ``target`` is one world 4x4 (metres) or one per effector; several effectors stack
    their 6-vector errors and Jacobians, and converge when every effector is within the
    tolerances. The model is left in the final state, FK current. The result's errors
    are the largest over the effectors (m, rad).
    """
    s = settings or SolverSettings()
    targets = _targets(target, len(model.effectors))
    stepper: _FloatStepper | _ArrayStepper
    if isinstance(model, CompiledKinematics):
        stepper = _FloatStepper(model, targets, s.damping)
    else:
        stepper = _ArrayStepper(model, targets, s.damping)
    ptol, otol = s.position_tolerance, s.orientation_tolerance
    iterations = 0
    best: tuple[float, object] | None = None

    def result(converged: bool, errs: list[tuple[float, float]]) -> SolveResult:
        return SolveResult(converged, iterations, max(e[0] for e in errs),
                           max(e[1] for e in errs))

    stepper.clip()  # a start outside the limits is clipped into them, as solve does
    model.update()
    dx, errs = stepper.measure()
    while True:
        if all(pe < ptol and oe < otol for pe, oe in errs):
            return result(True, errs)
        if iterations >= s.max_iterations or model.n == 0:
            break
        err = stepper.norm(dx)  # type: ignore[arg-type]
        dq = stepper.step(dx)  # type: ignore[arg-type]
        if dq is None or not all(math.isfinite(d) for d in dq):
            break
        if s.enable_line_search:
            before = model.save()
            alpha = s.line_search_alpha
            while alpha >= s.line_search_alpha_min:
                stepper.apply(dq, alpha)  # type: ignore[arg-type]
                model.update()
                dx, errs = stepper.measure()
                if stepper.norm(dx) < err:  # type: ignore[arg-type]
                    break
                model.restore(before)
                alpha *= 0.5
            else:  # no step size improves the error: stop (SPEC 5.4)
                model.update()
                return result(False, stepper.measure()[1])
        else:
            if best is None or err < best[0]:
                best = (err, model.save())
            stepper.apply(dq, 1.0)  # type: ignore[arg-type]
            model.update()
            dx, errs = stepper.measure()
        iterations += 1
    if best is not None and best[0] < stepper.norm(dx):  # type: ignore[arg-type]
        model.restore(best[1])
        model.update()
        errs = stepper.measure()[1]
    return result(False, errs)
