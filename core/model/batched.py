"""The batched kinematics model: FK and world Jacobians of B poses at once, in numpy.

``BatchedModel`` is compiled once from a ``SkeletonDef`` (or a ``Skeleton``) and the
effectors' names. Its coordinates are one row of ``n`` floats per pose, for the joints on
the effectors' paths, parents first: a revolute angle (rad), a prismatic displacement
(m), or a spherical joint's three intrinsic XYZ angles ``(a, b, c)`` with
``R = Rx(a) Ry(b) Rz(c)`` relative to rest (rad), the convention of its virtual chain
(DECISIONS.md) and of the robust method, so a spherical joint's limits are a box on
those angles. Any root joint hangs below the fixed world frame. Frames: world; units:
metres, radians. It implements ``solver.batched.BatchedKinematics``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from ..rotations import (
    euler_xyz_to_quat,
    quat_to_euler_xyz,
    quat_to_euler_xyz_rows,
    quat_to_matrix,
)
from ..solver.batched import PRISMATIC, REVOLUTE
from ..solver.robust.angles import angles_in_box
from .definition import SkeletonDef
from .skeleton import Skeleton

Array = NDArray[np.float64]

_AXES = np.eye(3)
_WIDTH = {"revolute": 1, "prismatic": 1, "spherical": 3}  # columns per joint type


def _skew(v: Array) -> Array:
    x, y, z = v
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def _rodrigues_parts(axis: Array) -> tuple[Array, Array, Array]:
    """``(E0, EC, ES)`` with ``R(q) = E0 + cos(q) EC + sin(q) ES`` about the unit ``axis``."""
    k = _skew(axis)
    k2 = k @ k
    return np.eye(3) + k2, -k2, k


@dataclass(frozen=True)
class _Step:
    """One FK step: path joint ``i`` below ``parent`` (-1: world), of ``kind``."""

    i: int
    parent: int
    kind: str  # "fixed", "revolute", "prismatic", "spherical"
    offset: Array
    col: int  # first coordinate column, -1 for fixed joints
    axis: Array | None  # unit axis (revolute, prismatic)
    rot: Array | None  # fixed rotation (fixed joints), None for identity


class BatchedModel:
    """FK and Jacobians for a (B, n) array of coordinates (module docstring).

    Attributes: ``effectors`` (names), ``n`` columns, ``names`` (one per column: the joint
    name, ``name.x``/``.y``/``.z`` for spherical angles), ``kinds`` (REVOLUTE or
    PRISMATIC per column; spherical angles are REVOLUTE), ``lo``/``hi`` (limits per
    column, +-inf when none), ``held`` (per column: its joint is outside every solved
    chain, so its value comes from outside, frame by frame, and its limits are +-inf).

    ``chain_lengths``: per effector, the solve moves the last n joints of its path only
    (n = 0: all), counted as Blender's IK constraint counts bones (``CompiledKinematics``
    counts alike); the other joints on the paths are held.
    """

    def __init__(self, skeleton: Skeleton | SkeletonDef, effectors: list[str],
                 chain_lengths: list[int] | None = None) -> None:  # fmt: skip
        defn = skeleton.defn if isinstance(skeleton, Skeleton) else skeleton
        self.effectors = list(effectors)
        by_name = {d.name: d for d in defn.joints}
        on_path: set[str] = set()
        solved: set[str] = set()
        lengths = [0] * len(self.effectors) if chain_lengths is None else list(chain_lengths)
        if len(lengths) != len(self.effectors) or any(n < 0 for n in lengths):
            raise ValueError("need one chain length >= 0 per effector")
        for e, length in zip(self.effectors, lengths, strict=True):
            if e not in by_name:
                raise ValueError(f"no joint named {e!r} in the skeleton")
            name: str | None = e
            path: list[str] = []
            while name is not None:
                path.append(name)
                name = by_name[name].parent
            on_path.update(path)
            solved.update(path[:length] if length else path)  # path runs effector first
        order = [d for d in defn.joints if d.name in on_path]
        index = {d.name: i for i, d in enumerate(order)}
        self.joint_names = [d.name for d in order]
        self._steps: list[_Step] = []
        names: list[str] = []
        kinds: list[int] = []
        lo: list[float] = []
        hi: list[float] = []
        self._spherical: list[tuple[str, int]] = []  # (joint name, first column)
        self._one_dof: list[tuple[str, int, int]] = []  # (joint name, column, kind)
        held: list[bool] = []
        for i, d in enumerate(order):
            held.extend([d.name not in solved] * _WIDTH.get(d.type, 0))
            parent = -1 if d.parent is None else index[d.parent]
            off = np.array(d.offset, dtype=float)
            col = -1
            axis = rot = None
            if d.type in ("revolute", "prismatic"):
                col = len(names)
                axis = np.array(d.axis, dtype=float)
                axis = axis / np.linalg.norm(axis)
                names.append(d.name)
                kind = REVOLUTE if d.type == "revolute" else PRISMATIC
                kinds.append(kind)
                lim = cast("tuple[float, float] | None", d.limits)
                lo.append(-math.inf if lim is None else float(lim[0]))
                hi.append(math.inf if lim is None else float(lim[1]))
                self._one_dof.append((d.name, col, kind))
            elif d.type == "spherical":
                col = len(names)
                lims = cast("tuple[tuple[float, float] | None, ...]",
                            d.limits or (None, None, None))
                for k, box in enumerate(lims):
                    names.append(f"{d.name}.{'xyz'[k]}")
                    kinds.append(REVOLUTE)
                    lo.append(-math.inf if box is None else float(box[0]))
                    hi.append(math.inf if box is None else float(box[1]))
                self._spherical.append((d.name, col))
            elif d.quaternion is not None and tuple(d.quaternion) != (1.0, 0.0, 0.0, 0.0):
                rot = quat_to_matrix(np.array(d.quaternion, dtype=float))
            self._steps.append(_Step(i, parent, d.type, off, col, axis, rot))
        self.names = names
        self.n = len(names)
        self.kinds = np.array(kinds, dtype=int)
        self.held = np.array(held, dtype=bool)
        self.solved = frozenset(solved)  # the joints the solve moves (and fixed ones)
        self.lo = np.where(self.held, -np.inf, np.array(lo, dtype=float))
        self.hi = np.where(self.held, np.inf, np.array(hi, dtype=float))
        self._eff = [index[e] for e in self.effectors]
        # per effector: which columns move it (its path from the root)
        self.paths = np.zeros((len(self.effectors), self.n), dtype=bool)
        for k, e in enumerate(self.effectors):
            name = e
            while name is not None:
                st = self._steps[index[name]]
                if st.col >= 0:
                    self.paths[k, st.col:st.col + _WIDTH[st.kind]] = True
                name = by_name[name].parent
        self._parts = {st.i: _rodrigues_parts(st.axis) for st in self._steps
                       if st.kind == "revolute" and st.axis is not None}
        self._elem = [_rodrigues_parts(_AXES[k]) for k in range(3)]
        self._coord_axis = {st.i: int(np.flatnonzero(st.axis)[0]) for st in self._steps
                            if st.kind == "revolute" and st.axis is not None
                            and np.count_nonzero(st.axis) == 1}
        self._prismatic = self.kinds == PRISMATIC
        self._any_prismatic = bool(self._prismatic.any())
        self._path_cols = [np.flatnonzero(p) for p in self.paths]
        self._path_prism = [np.flatnonzero(p & self._prismatic) for p in self.paths]

    # -- FK ------------------------------------------------------------------------------
    def _forward(self, q: Array, columns: bool) -> tuple[Array, Array, Array | None,
                                                         Array | None]:  # fmt: skip
        """Batch-last FK of ``q`` (n, k): effector rotations (m, 3, 3, k) and positions
        (m, 3, k), and (``columns``) each column's world axis and joint origin (n, 3, k).
        A rotation is kept as its three columns (3, k each): a turn about a coordinate
        axis rewrites two of them and shares the third."""
        k = q.shape[1]
        rots: list[Cols] = []
        poss: list[Array] = []
        axes = np.empty((self.n, 3, k)) if columns else None
        origins = np.empty((self.n, 3, k)) if columns else None
        ident: Cols = (_AXES[:, 0, None], _AXES[:, 1, None], _AXES[:, 2, None])
        zero = np.zeros((3, 1))
        # every hinge's cosine and sine in two calls (sliders' rows unused)
        ang = np.where(self._prismatic[:, None], 0.0, q) if self._any_prismatic else q
        cq, sq = np.cos(ang), np.sin(ang)
        for st in self._steps:
            rp = ident if st.parent < 0 else rots[st.parent]
            p = zero if st.parent < 0 else poss[st.parent]
            for j in range(3):
                if st.offset[j] != 0.0:
                    p = p + rp[j] * st.offset[j]
            if st.kind == "fixed":
                r = rp if st.rot is None else _mix(rp, st.rot)
            elif st.kind == "revolute":
                c = st.col
                if columns:
                    axes[c] = self._axis_world(rp, st)  # type: ignore[index]
                    origins[c] = p  # type: ignore[index]
                r = self._turn(rp, st, cq[c], sq[c])
            elif st.kind == "prismatic":
                r = rp
                w = self._axis_world(rp, st)
                p = p + w * q[st.col]
                if columns:
                    axes[st.col] = w  # type: ignore[index]
                    origins[st.col] = p  # type: ignore[index]
            else:  # spherical: Rx(a) Ry(b) Rz(c)
                r = rp
                for j in range(3):
                    c = st.col + j
                    if columns:
                        axes[c] = r[j]  # type: ignore[index]
                        origins[c] = p  # type: ignore[index]
                    r = _coordinate_turn(r, j, cq[c], sq[c])
            rots.append(r)
            poss.append(p)
        rot = np.empty((len(self._eff), 3, 3, k))
        pos = np.empty((len(self._eff), 3, k))
        for e, i in enumerate(self._eff):
            for j in range(3):
                rot[e, :, j] = rots[i][j]
            pos[e] = poss[i]
        return rot, pos, axes, origins

    @staticmethod
    def _axis_world(rp: Cols, st: _Step) -> Array:
        """The joint's unit axis in the world (3, k)."""
        assert st.axis is not None
        out = None
        for j in range(3):
            if st.axis[j] != 0.0:
                term = rp[j] if st.axis[j] == 1.0 else rp[j] * st.axis[j]
                out = term if out is None else out + term
        assert out is not None
        return out

    def _turn(self, rp: Cols, st: _Step, c: Array, s: Array) -> Cols:
        """``rp @ R_axis(v)`` for a revolute step, as columns, from ``c = cos v`` and
        ``s = sin v`` (k,)."""
        j = self._coord_axis.get(st.i, -1)
        if j >= 0:
            assert st.axis is not None
            return _coordinate_turn(rp, j, c, s if st.axis[j] > 0 else -s)
        e0, ec, es = self._parts[st.i]
        local = e0[:, :, None] + ec[:, :, None] * c + es[:, :, None] * s
        return _mix(rp, local)

    def pose_t(self, q: Array) -> tuple[Array, Array]:
        """Batch-last :meth:`pose`: ``q`` (n, k) -> (m, 3, 3, k), (m, 3, k)."""
        rot, pos, _, _ = self._forward(q, False)
        return rot, pos

    def pose_jacobian_t(self, q: Array) -> tuple[Array, Array, Array]:
        """Batch-last :meth:`pose_jacobian`: ``q`` (n, k) -> rotations (m, 3, 3, k),
        positions (m, 3, k) and the Jacobian (m, 6, n, k)."""
        rot, pos, axes, origins = self._forward(q, True)
        assert axes is not None and origins is not None
        k, m = q.shape[1], len(self._eff)
        jac = np.zeros((m, 6, self.n, k))
        for e in range(m):
            cols = self._path_cols[e]
            ax, d = axes[cols], pos[e][None] - origins[cols]  # (c, 3, k)
            jac[e, 0, cols] = ax[:, 1] * d[:, 2] - ax[:, 2] * d[:, 1]
            jac[e, 1, cols] = ax[:, 2] * d[:, 0] - ax[:, 0] * d[:, 2]
            jac[e, 2, cols] = ax[:, 0] * d[:, 1] - ax[:, 1] * d[:, 0]
            jac[e, 3:, cols] = ax  # mixed indexing: (c, 3, k)
            sl = self._path_prism[e]
            if sl.size:
                jac[e, :3, sl] = axes[sl]
                jac[e, 3:, sl] = 0.0
        return rot, pos, jac

    def pose(self, q: Array) -> tuple[Array, Array]:
        """Effector world rotations (B, m, 3, 3) and positions (B, m, 3) (m) at ``q``
        (B, n)."""
        rot, pos = self.pose_t(np.ascontiguousarray(np.asarray(q, dtype=float).T))
        return rot.transpose(3, 0, 1, 2), pos.transpose(2, 0, 1)

    def pose_jacobian(self, q: Array) -> tuple[Array, Array, Array]:
        """``pose(q)`` and the world Jacobian (B, m, 6, n): rows ``[linear (m/unit);
        angular (rad/unit)]`` of each effector, zeros for columns off its path."""
        rot, pos, jac = self.pose_jacobian_t(
            np.ascontiguousarray(np.asarray(q, dtype=float).T))
        return rot.transpose(3, 0, 1, 2), pos.transpose(2, 0, 1), jac.transpose(3, 0, 1, 2)

    def transforms(self, q: Array) -> Array:
        """Effector world 4x4 transforms (B, m, 4, 4) at ``q`` (B, n) (metres)."""
        rot, pos = self.pose(q)
        out = np.zeros((*rot.shape[:2], 4, 4))
        out[..., :3, :3] = rot
        out[..., :3, 3] = pos
        out[..., 3, 3] = 1.0
        return out

    # -- coordinates <-> joint values --------------------------------------------------
    def joint_values(self, q: Array) -> dict[str, dict[str, Any]]:
        """SPEC 3.3 entries (radians, metres, ``[w, x, y, z]``) of the model's joints for
        one coordinate row ``q`` (n,)."""
        q = np.asarray(q, dtype=float)
        out: dict[str, dict[str, Any]] = {}
        for name, c, kind in self._one_dof:
            if kind == PRISMATIC:
                out[name] = {"type": "prismatic", "displacement": float(q[c])}
            else:
                out[name] = {"type": "revolute", "angle": float(q[c])}
        for name, c in self._spherical:
            quat = intrinsic_xyz_quat(float(q[c]), float(q[c + 1]), float(q[c + 2]))
            out[name] = {"type": "spherical",
                         "euler": [float(v) for v in quat_to_euler_xyz(np.array(quat))],
                         "quaternion": list(quat)}
        return out

    def value_columns(self, q: Array) -> dict[str, tuple[str, Array]]:
        """:meth:`joint_values` of many rows ``q`` (k, n) at once, as arrays: per joint
        ``(type, values)``, values (k,) (rad or m) for a revolute or prismatic joint and
        (k, 7) for a spherical one (its file ``euler`` XYZ, rad, then ``quaternion``
        ``[w, x, y, z]``)."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        out: dict[str, tuple[str, Array]] = {}
        for name, c, kind in self._one_dof:
            out[name] = ("prismatic" if kind == PRISMATIC else "revolute", q[:, c])
        for name, c in self._spherical:
            quat = intrinsic_xyz_quat_rows(q[:, c], q[:, c + 1], q[:, c + 2])
            out[name] = ("spherical", np.column_stack([quat_to_euler_xyz_rows(quat), quat]))
        return out

    def coordinates(self, values: Mapping[str, Mapping[str, Any]]) -> Array:
        """The coordinate row (n,) of SPEC 3.3 joint values (radians, metres, ``[w, x,
        y, z]``), the inverse of :meth:`joint_values`: a spherical joint's intrinsic XYZ
        angles nearest its box (clamped into it); a joint not in ``values`` at the
        T-pose."""
        q = np.zeros(self.n)
        for name, c, kind in self._one_dof:
            entry = values.get(name)
            if entry is not None:
                q[c] = float(entry["displacement" if kind == PRISMATIC else "angle"])
        for name, c in self._spherical:
            entry = values.get(name)
            if entry is not None:
                quat = entry["quaternion"] if "quaternion" in entry else \
                    euler_xyz_to_quat(entry["euler"])
                q[c:c + 3] = angles_in_box([float(v) for v in quat], self.lo[c:c + 3].tolist(),
                                           self.hi[c:c + 3].tolist())
        return q


_MIX = {0: (1, 2), 1: (2, 0), 2: (0, 1)}  # columns a turn about X, Y, Z mixes


Cols = tuple[Array, Array, Array]  # a rotation's three columns, (3, k) or (3, 1) each


def _coordinate_turn(rp: Cols, axis: int, c: Array, s: Array) -> Cols:
    """``rp @ R_axis(v)`` for a coordinate axis (0, 1, 2), as columns (batch last), from
    ``c = cos v`` and ``s = sin v`` (k,)."""
    a, b = _MIX[axis]
    ca, cb = rp[a], rp[b]
    out = list(rp)
    out[a] = ca * c + cb * s
    out[b] = cb * c - ca * s
    return out[0], out[1], out[2]


def _mix(rp: Cols, m: Array) -> Cols:
    """``rp @ m`` as columns, for a constant (3, 3) or per-row (3, 3, k) ``m``."""
    out = []
    for j in range(3):
        acc = None
        for i in range(3):
            f = m[i, j]
            if m.ndim == 2 and f == 0.0:
                continue
            term = rp[i] if m.ndim == 2 and f == 1.0 else rp[i] * f
            acc = term if acc is None else acc + term
        out.append(np.zeros((3, 1)) if acc is None else acc)
    return out[0], out[1], out[2]


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
