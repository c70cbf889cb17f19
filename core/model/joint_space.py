"""The joint space of the robust engine: FK and world Jacobians of B poses at once.

``BatchedModel`` is compiled once from a ``SkeletonDef`` (or a ``Skeleton``) and the
effectors' names. Its coordinates are one row of ``n`` floats per pose, for the joints on
the effectors' paths, parents first: a revolute angle (rad), a prismatic displacement
(m), or a spherical joint's three coordinates in its chart (``model.charts``): with
limits, the intrinsic XYZ angles ``(a, b, c)``, ``R = Rx(a) Ry(b) Rz(c)`` relative to
rest (rad), so its limits are a box on those angles (DECISIONS.md); without limits, a
rotation vector (rad) re-centred before its singularity. A free root or a bone that
translates is three prismatic joints and a spherical one in the file (DECISIONS.md): here
three sliders and a rotation vector. Any root joint hangs below the fixed world frame.
Frames: world; units: metres, radians. It implements ``solver.kinematics.BatchedKinematics``
(configuration-space operations ``recentre``, ``nearest`` and ``difference`` included).
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
    quat_to_rotvec,
)
from ..solver.kinematics import PRISMATIC, REVOLUTE, ROTVEC
from ..solver.lm.problem import SEARCH_LIMIT
from .charts import angles_in_box, rotvec_coefficients, rotvec_near, rotvec_recentred
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
    rotvec: bool = False  # a spherical joint without limits: a rotation-vector chart


class BatchedModel:
    """FK and Jacobians for a (B, n) array of coordinates (module docstring).

    Attributes: ``effectors`` (names), ``n`` columns, ``names`` (one per column: the joint
    name, ``name.x``/``.y``/``.z`` for spherical coordinates), ``kinds`` (REVOLUTE,
    PRISMATIC or ROTVEC per column; a boxed spherical joint's angles are REVOLUTE),
    ``lo``/``hi`` (limits per column, +-inf when none), ``held`` (per column: its joint is
    outside every solved chain, so its value comes from outside, frame by frame, and its
    limits are +-inf).

    ``chain_lengths``: per effector, the solve moves the last n joints of its path only
    (n = 0: all), counted as Blender's IK constraint counts bones (``CompiledKinematics``
    counts alike); the other joints on the paths are held.

    ``points``: joints on the effectors' paths whose world positions and positional
    Jacobians :meth:`pose_jacobian_t` gives after the effectors' (a pole's bend points).
    """

    def __init__(self, skeleton: Skeleton | SkeletonDef, effectors: list[str],
                 chain_lengths: list[int] | None = None,
                 points: list[str] | None = None) -> None:  # fmt: skip
        defn = skeleton.defn if isinstance(skeleton, Skeleton) else skeleton
        self.effectors = list(effectors)
        self.points = list(points or [])
        by_name = {d.name: d for d in defn.joints}
        on_path: set[str] = set()
        solved: set[str] = set()
        lengths = [0] * len(self.effectors) if chain_lengths is None else list(chain_lengths)
        if len(lengths) != len(self.effectors) or any(n < 0 for n in lengths):
            raise ValueError("need one chain length >= 0 per effector")
        self.chains: list[list[str]] = []  # per effector: its solved joints, root first
        for e, length in zip(self.effectors, lengths, strict=True):
            if e not in by_name:
                raise ValueError(f"no joint named {e!r} in the skeleton")
            name: str | None = e
            path: list[str] = []
            while name is not None:
                path.append(name)
                name = by_name[name].parent
            on_path.update(path)
            chain = path[:length] if length else path  # path runs effector first
            solved.update(chain)
            self.chains.append(chain[::-1])
        for p in self.points:
            if p not in on_path:
                raise ValueError(f"point {p!r} is not on an effector's path")
        order = [d for d in defn.joints if d.name in on_path]
        index = {d.name: i for i, d in enumerate(order)}
        self.joint_names = [d.name for d in order]
        self._steps: list[_Step] = []
        names: list[str] = []
        kinds: list[int] = []
        lo: list[float] = []
        hi: list[float] = []
        self._spherical: list[tuple[str, int, bool]] = []  # (joint, first column, rotvec)
        self._one_dof: list[tuple[str, int, int]] = []  # (joint name, column, kind)
        held: list[bool] = []
        for i, d in enumerate(order):
            held.extend([d.name not in solved] * _WIDTH.get(d.type, 0))
            parent = -1 if d.parent is None else index[d.parent]
            off = np.array(d.offset, dtype=float)
            col = -1
            axis = rot = None
            chart_rotvec = False
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
                chart_rotvec = all(box is None for box in lims)
                for k, box in enumerate(lims):
                    names.append(f"{d.name}.{'xyz'[k]}")
                    kinds.append(ROTVEC if chart_rotvec else REVOLUTE)
                    lo.append(-math.inf if box is None else float(box[0]))
                    hi.append(math.inf if box is None else float(box[1]))
                self._spherical.append((d.name, col, chart_rotvec))
            elif d.quaternion is not None and tuple(d.quaternion) != (1.0, 0.0, 0.0, 0.0):
                rot = quat_to_matrix(np.array(d.quaternion, dtype=float))
            self._steps.append(_Step(i, parent, d.type, off, col, axis, rot, chart_rotvec))
        self.names = names
        self.n = len(names)
        self.kinds = np.array(kinds, dtype=int)
        self.held = np.array(held, dtype=bool)
        self.solved = frozenset(solved)  # the joints the solve moves (and fixed ones)
        self.lo = np.where(self.held, -np.inf, np.array(lo, dtype=float))
        self.hi = np.where(self.held, np.inf, np.array(hi, dtype=float))
        self._eff = [index[e] for e in self.effectors] + [index[p] for p in self.points]
        # per effector (and point): which columns move it (its path from the root)
        self.paths = np.zeros((len(self._eff), self.n), dtype=bool)
        for k, e in enumerate(self.effectors + self.points):
            name = e
            while name is not None:
                st = self._steps[index[name]]
                if st.col >= 0:
                    self.paths[k, st.col:st.col + _WIDTH[st.kind]] = True
                name = by_name[name].parent
        self._parts = {st.i: _rodrigues_parts(st.axis) for st in self._steps
                       if st.kind == "revolute" and st.axis is not None}
        self._coord_axis = {st.i: int(np.flatnonzero(st.axis)[0]) for st in self._steps
                            if st.kind == "revolute" and st.axis is not None
                            and np.count_nonzero(st.axis) == 1}
        self._prismatic = self.kinds == PRISMATIC
        self._rotvec = self.kinds == ROTVEC
        self._any_trig = bool((self.kinds == REVOLUTE).any())
        self._angle_rows = self.kinds == REVOLUTE
        # the first column of each rotation vector (an unlimited spherical joint)
        self.rotvec_starts = np.array([c for _, c, rv in self._spherical if rv], dtype=int)
        # per effector: the lengths of the offsets from its first solved joint down (m)
        self._reach = np.zeros(len(self.effectors))
        for k in range(len(self.effectors)):
            steps_k = [index[name] for name in self.chains[k]]
            moving_k = [i for i in steps_k if self._steps[i].col >= 0]
            if moving_k:
                below = steps_k[steps_k.index(moving_k[0]) + 1:]
                self._reach[k] = sum(float(np.linalg.norm(self._steps[i].offset))
                                     for i in below)
        # per column: a hinge angle without limits (within +-SEARCH_LIMIT rad), whose
        # value matters modulo a turn
        self.wraps = (self.kinds == REVOLUTE) & (np.abs(self.lo) > SEARCH_LIMIT) \
            & (np.abs(self.hi) > SEARCH_LIMIT) & ~self.held
        self._any_prismatic = bool(self._prismatic.any())
        self._prismatic_cols = np.flatnonzero(self._prismatic)
        self._full_path = [bool(p.all()) for p in self.paths]
        self._path_mask = [p.astype(float)[None, :, None] for p in self.paths]  # (1, n, 1)

    # -- FK ------------------------------------------------------------------------------
    def _forward(self, q: Array, columns: bool) -> tuple[Array, Array, Array | None,
                                                         Array | None]:  # fmt: skip
        """Batch-last FK of ``q`` (n, k): effector (and point) rotations (m, 3, 3, k) and
        positions (m, 3, k), and (``columns``) each column's world axis (the angular
        velocity per unit of the column: unit for a hinge or slider, a column of the
        rotation vector's left Jacobian for ROTVEC) and joint origin (n, 3, k). A
        rotation is kept as its three columns (3, k each): a turn about a coordinate axis
        rewrites two of them and shares the third."""
        k = q.shape[1]
        rots: list[Cols] = []
        poss: list[Array] = []
        axes = np.empty((self.n, 3, k)) if columns else None
        origins = np.empty((self.n, 3, k)) if columns else None
        ident: Cols = (_AXES[:, 0, None], _AXES[:, 1, None], _AXES[:, 2, None])
        zero = np.zeros((3, 1))
        # every rotation vector's matrix (and left Jacobian) at once: (J, 3, 3, k)
        rv_index = {int(c): j for j, c in enumerate(self.rotvec_starts)}
        rv_local = rv_left = None
        if rv_index:
            rv_local, rv_left = _rotvec_matrices(q, self.rotvec_starts, columns)
        # every hinge's cosine and sine in two calls (other rows unused)
        if self._any_trig:
            ang = q if self._angle_rows.all() else np.where(self._angle_rows[:, None], q, 0.0)
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
            elif st.rotvec:  # R = exp([v]x), v the joint's three coordinates
                j = rv_index[st.col]
                assert rv_local is not None
                stacked = np.stack(np.broadcast_arrays(*rp))  # (3 columns, 3, k)
                r = tuple(np.einsum("ick,ijk->jck", stacked, rv_local[j]))
                if columns:
                    assert rv_left is not None
                    axes[st.col:st.col + 3] = np.einsum("ick,ijk->jck", stacked, rv_left[j])  # type: ignore[index]
                    origins[st.col:st.col + 3] = p  # type: ignore[index]
            else:  # spherical in a box: Rx(a) Ry(b) Rz(c)
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
        """Batch-last :meth:`pose`: ``q`` (n, k) -> (m, 3, 3, k), (m, 3, k) (effectors,
        then points)."""
        rot, pos, _, _ = self._forward(q, False)
        return rot, pos

    def reach_t(self, q: Array) -> tuple[Array, Array]:
        """Per effector a ball its effector cannot leave whatever the solved columns do:
        the centre (m, 3, k) (world, m: the first solved joint on its path, placed by
        ``q``'s held columns, which are all that move it) and the radius (m,) (m: the
        lengths from there to the effector, plus each solved slider's farthest limit;
        inf with an unlimited slider or no solved joint)."""
        _, _, _, origins = self._forward(q, True)
        assert origins is not None
        k = q.shape[1]
        centre = np.zeros((len(self.effectors), 3, k))
        radius = np.full(len(self.effectors), np.inf)
        for e in range(len(self.effectors)):
            cols = np.flatnonzero(self.paths[e] & ~self.held)
            if cols.size == 0:
                continue
            centre[e] = origins[cols[0]]
            radius[e] = self._reach[e] + float(np.sum(np.maximum(
                np.abs(self.lo[cols]), np.abs(self.hi[cols]))[self.kinds[cols] == PRISMATIC]))
        return centre, radius

    def pose_jacobian_t(self, q: Array) -> tuple[Array, Array, Array]:
        """Batch-last :meth:`pose_jacobian`: ``q`` (n, k) -> rotations (m, 3, 3, k),
        positions (m, 3, k) and the Jacobian (m, 6, n, k) (effectors, then points)."""
        rot, pos, axes, origins = self._forward(q, True)
        assert axes is not None and origins is not None
        k, m = q.shape[1], len(self._eff)
        jac = np.empty((m, 6, self.n, k))
        ax0, ax1, ax2 = axes[:, 0], axes[:, 1], axes[:, 2]  # (n, k) each
        for e in range(m):
            d = pos[e][None] - origins  # (n, 3, k): from each joint to the effector
            d0, d1, d2 = d[:, 0], d[:, 1], d[:, 2]
            out = jac[e]
            np.subtract(ax1 * d2, ax2 * d1, out=out[0])
            np.subtract(ax2 * d0, ax0 * d2, out=out[1])
            np.subtract(ax0 * d1, ax1 * d0, out=out[2])
            out[3], out[4], out[5] = ax0, ax1, ax2
            if self._any_prismatic:  # a slider moves the effector along its axis
                sl = self._prismatic_cols
                out[0:3, sl] = axes[sl].transpose(1, 0, 2)
                out[3:, sl] = 0.0
            if not self._full_path[e]:  # columns off the effector's path do not move it
                out *= self._path_mask[e]
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

    # -- configuration space -----------------------------------------------------------
    def recentre(self, q: Array) -> Array:
        """``q`` (n, k) with every rotation vector longer than ``charts.RECENTRE`` replaced
        by its rotation's shorter one (the same pose; a copy where anything changed)."""
        if self.rotvec_starts.size == 0:
            return q
        out = q
        for c in self.rotvec_starts:
            v = q[c:c + 3]
            w = rotvec_recentred(v)
            if w is not v:
                if out is q:
                    out = q.copy()
                out[c:c + 3] = w
        return out

    def nearest(self, ref: Array, q: Array) -> Array:
        """Rows ``q`` (k, n) written as the same poses' coordinates nearest ``ref`` (k, n)
        or (n,): hinges without limits by whole turns, rotation vectors by their other
        vector (rad, m)."""
        q = np.asarray(q, dtype=float)
        ref = np.broadcast_to(np.asarray(ref, dtype=float), q.shape)
        out = np.where(self.wraps, ref + (q - ref + np.pi) % (2 * np.pi) - np.pi, q)
        for c in self.rotvec_starts:
            out[:, c:c + 3] = rotvec_near(ref[:, c:c + 3].T, q[:, c:c + 3].T).T
        return out

    def difference(self, a: Array, b: Array) -> Array:
        """Per column the motion from rows ``a`` to rows ``b`` (k, n), the nearest way
        (:meth:`nearest`): rad, m."""
        a = np.asarray(a, dtype=float)
        return self.nearest(a, b) - a

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
        for name, c, rv in self._spherical:
            quat = self._quats(q[None, c:c + 3], rv)[0]
            out[name] = {"type": "spherical",
                         "euler": [float(v) for v in quat_to_euler_xyz(quat)],
                         "quaternion": [float(v) for v in quat]}
        return out

    @staticmethod
    def _quats(v: Array, rotvec: bool) -> Array:
        """Quaternions (k, 4) ``[w, x, y, z]`` of a spherical joint's coordinates (k, 3)."""
        if rotvec:
            return rotvec_quat_rows(v)
        return intrinsic_xyz_quat_rows(v[:, 0], v[:, 1], v[:, 2])

    def value_columns(self, q: Array) -> dict[str, tuple[str, Array]]:
        """:meth:`joint_values` of many rows ``q`` (k, n) at once, as arrays: per joint
        ``(type, values)``, values (k,) (rad or m) for a revolute or prismatic joint and
        (k, 7) for a spherical one (its file ``euler`` XYZ, rad, then ``quaternion``
        ``[w, x, y, z]``)."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        out: dict[str, tuple[str, Array]] = {}
        for name, c, kind in self._one_dof:
            out[name] = ("prismatic" if kind == PRISMATIC else "revolute", q[:, c])
        for name, c, rv in self._spherical:
            quat = self._quats(q[:, c:c + 3], rv)
            out[name] = ("spherical", np.column_stack([quat_to_euler_xyz_rows(quat), quat]))
        return out

    def coordinates(self, values: Mapping[str, Mapping[str, Any]]) -> Array:
        """The coordinate row (n,) of SPEC 3.3 joint values (radians, metres, ``[w, x,
        y, z]``), the inverse of :meth:`joint_values`: a boxed spherical joint's intrinsic
        XYZ angles nearest its box (clamped into it), an unlimited one's rotation vector
        (angle at most pi); a joint not in ``values`` at the T-pose."""
        q = np.zeros(self.n)
        for name, c, kind in self._one_dof:
            entry = values.get(name)
            if entry is not None:
                q[c] = float(entry["displacement" if kind == PRISMATIC else "angle"])
        for name, c, rv in self._spherical:
            entry = values.get(name)
            if entry is not None:
                quat = entry["quaternion"] if "quaternion" in entry else \
                    euler_xyz_to_quat(entry["euler"])
                if rv:
                    q[c:c + 3] = quat_to_rotvec(np.asarray(quat, dtype=float))
                else:
                    q[c:c + 3] = angles_in_box([float(v) for v in quat],
                                               self.lo[c:c + 3].tolist(),
                                               self.hi[c:c + 3].tolist())
        return q


_MIX = {0: (1, 2), 1: (2, 0), 2: (0, 1)}  # columns a turn about X, Y, Z mixes


Cols = tuple[Array, Array, Array]  # a rotation's three columns, (3, k) or (3, 1) each


def _rotvec_matrices(q: Array, starts: Array, left: bool) -> tuple[Array, Array | None]:
    """For the rotation vectors starting at columns ``starts`` (J,) of ``q`` (n, k):
    ``exp([v]x)`` (J, 3, 3, k) and, with ``left``, the left Jacobians (J, 3, 3, k)
    (``charts.rotvec_coefficients``), all joints at once:
    ``R = cos I + s [v]x + c v v^T`` and ``J = (1 - d t^2) I + c [v]x + d v v^T``."""
    v = q[starts[:, None] + np.arange(3)[None]]  # (J, 3, k)
    jn, k = len(starts), q.shape[1]
    t, s, c, d = rotvec_coefficients(v.transpose(1, 0, 2).reshape(3, jn * k))
    s, c, d, t2 = (a.reshape(jn, k) for a in (s, c, d, t * t))
    outer = v[:, :, None] * v[:, None, :]  # (J, 3, 3, k)
    skew = np.zeros((jn, 3, 3, k))
    skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -v[:, 2], v[:, 1], -v[:, 0]
    skew[:, 1, 0], skew[:, 2, 0], skew[:, 2, 1] = v[:, 2], -v[:, 1], v[:, 0]
    eye = _AXES[None, :, :, None]
    rot = (1.0 - c * t2)[:, None, None] * eye + s[:, None, None] * skew \
        + c[:, None, None] * outer
    if not left:
        return rot, None
    jac = (1.0 - d * t2)[:, None, None] * eye + c[:, None, None] * skew \
        + d[:, None, None] * outer
    return rot, jac


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


def rotvec_quat_rows(v: Array) -> Array:
    """Quaternions (k, 4) ``[w, x, y, z]`` of rotation vectors (k, 3) (rad), ``w >= 0``."""
    t = np.sqrt(np.einsum("ki,ki->k", v, v))
    half = 0.5 * t
    k = np.where(t < 1e-8, 0.5 - t * t / 48.0, np.sin(half) / np.where(t < 1e-8, 1.0, t))
    out = np.column_stack([np.cos(half), v * k[:, None]])
    return np.where(out[:, :1] < 0.0, -out, out)
