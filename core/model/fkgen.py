"""The spec twin's FK generator: one closure per joint, then one straight-line function.

``CompiledKinematics`` (model/compiled.py) lays the joints on the effectors' paths out as
``Step`` tuples; this module turns them into closures (``fixed_op``, ``revolute_op``,
``prismatic_op``, ``spherical_op``, ``driven_op``) and compiles the hinges, sliders and
fixed joints into one Python function of plain float arithmetic (``straight_line_fk``).
Frames: world. Units: metres, radians.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

from ..floatmath import (
    IDENT,
    ZERO,
    Mat3,
    Quat,
    Vec3,
    axis_angle_mat,
    axis_rot,
    intrinsic_xyz,
    mat_mul,
    quat_mat,
    quat_mul,
    quat_unit,
)
from ..solver.joints import SYNC_THRESHOLD
from ..solver.kinematics import FIXED, PRISMATIC, REVOLUTE


class ColumnState(Protocol):
    """The model state a spherical joint's closure folds into: per column ``q`` (rad) and
    current limits ``lo``/``hi``; per spherical joint its ``(w, x, y, z)`` quaternion."""

    q: list[float]
    lo: list[float]
    hi: list[float]
    quats: list[Quat]


Op = Callable[[], None]


def moved_point(rp: Mat3, pp: Vec3, off: Vec3) -> Vec3:
    """``pp + rp @ off``: a child's origin from its parent's frame (m)."""
    ox, oy, oz = off
    return (
        pp[0] + rp[0] * ox + rp[1] * oy + rp[2] * oz,
        pp[1] + rp[3] * ox + rp[4] * oy + rp[5] * oz,
        pp[2] + rp[6] * ox + rp[7] * oy + rp[8] * oz,
    )


class Frames:
    """FK output: per path joint its world rotation ``R`` and world position ``P`` (m);
    per virtual column its world rotation ``V``
    (with unfolded increments below the sync threshold, which only the Jacobian sees, as
    in ``SphericalJoint.update_global_transform``). Index -1 (the last slot) is the world
    frame."""

    def __init__(self, joints: int, columns: int) -> None:
        self.R: list[Mat3] = [IDENT] * (joints + 1)
        self.P: list[Vec3] = [ZERO] * (joints + 1)
        self.V: list[Mat3] = [IDENT] * columns


def fixed_op(f: Frames, i: int, parent: int, off: Vec3, rot: Mat3 | None) -> Op:
    R, P = f.R, f.P

    def op() -> None:
        rp = R[parent]
        P[i] = moved_point(rp, P[parent], off)
        R[i] = rp if rot is None else mat_mul(rp, rot)

    return op


def revolute_op(
    f: Frames, i: int, parent: int, off: Vec3, q: list[float], c: int, ax: int, axis: Vec3
) -> Op:
    """FK of a hinge: ``R = R_parent @ R_axis(q)``, ``p = p_parent + R_parent @ off``.

    Coordinate axes get the rotation written out (the hot path of most rigs)."""
    R, P = f.R, f.P
    ox, oy, oz = off
    cos, sin = math.cos, math.sin

    if ax < 0:

        def op() -> None:
            rp = R[parent]
            P[i] = moved_point(rp, P[parent], off)
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


def prismatic_op(f: Frames, i: int, parent: int, off: Vec3, q: list[float], c: int,
                  axis: Vec3) -> Op:  # fmt: skip
    R, P = f.R, f.P
    ax, ay, az = axis

    def op() -> None:
        rp = R[parent]
        d = q[c]
        R[i] = rp
        P[i] = moved_point(rp, P[parent], (off[0] + d * ax, off[1] + d * ay, off[2] + d * az))

    return op


def spherical_op(
    f: Frames, i: int, parent: int, off: Vec3, model: ColumnState, cols: tuple[int, ...],
    s: int,
) -> Op:  # fmt: skip
    R, P, V = f.R, f.P, f.V
    q, lo, hi, quats = model.q, model.lo, model.hi, model.quats
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
        P[i] = moved_point(rp, P[parent], off)
        r = mat_mul(rp, quat_mat(quats[s]))
        R[i] = r  # children hang below the joint itself, not below v3
        v1 = r if a == 0.0 else axis_rot(r, 0, a)  # unfolded (tiny) increments: Jacobian only
        v2 = v1 if b == 0.0 else axis_rot(v1, 1, b)
        V[c1], V[c2], V[c3] = v1, v2, v2 if g == 0.0 else axis_rot(v2, 2, g)

    return op



def driven_op(f: Frames, i: int, parent: int,
               local: list[tuple[Mat3 | None, Vec3]]) -> Op:
    """FK of a driven joint: its local rotation and offset are set from outside."""
    R, P = f.R, f.P

    def op() -> None:
        rot, off = local[i]
        rp = R[parent]
        P[i] = moved_point(rp, P[parent], off)
        R[i] = rp if rot is None else mat_mul(rp, rot)

    return op


DRIVEN = 5  # a step kind of the compiled FK: a joint moved from outside, not solved

# One FK step as data for the code generator: path joint, kind, parent, offset (m),
# column, coordinate axis (or -1), fixed rotation (or None), and the closure doing it.
Step = tuple[int, int, int, Vec3, int, int, "Mat3 | None", Op]


def straight_line_fk(steps: list[Step], f: Frames, q: list[float]) -> Op:
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
    exec(compile(src, "<dhik.model.compiled straight-line FK>", "exec"), namespace)  # noqa: S102
    return namespace["make"](f.R, f.P, q, [st[7] for st in steps], math.cos, math.sin)
