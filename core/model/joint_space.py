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

import copy
import math
from functools import cached_property
from typing import cast

import numpy as np
from numpy.typing import NDArray

from ..rotations import quat_to_matrix
from ..solver.kinematics import PRISMATIC, REVOLUTE, ROTVEC
from ..solver.lm.problem import SEARCH_LIMIT
from .charts import rotvec_near, rotvec_recentred
from .definition import SkeletonDef
from .fk_columns import Step, forward_columns
from .fk_rows import WIDTH, RowsPlan, forward_rows, rodrigues_parts
from .joint_values import JointValues
from .skeleton import Skeleton

Array = NDArray[np.float64]

# FK runs batch-first up to a plan's ``few_rows`` rows (numpy's per-call cost dominates),
# batch-last beyond (fewer passes over smaller arrays); floats in a Jacobian's temporary
_CHUNK = 2**14


class BatchedModel(JointValues):
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
        self._steps: list[Step] = []
        names: list[str] = []
        kinds: list[int] = []
        lo: list[float] = []
        hi: list[float] = []
        self._spherical: list[tuple[str, int, bool]] = []  # (joint, first column, rotvec)
        self._one_dof: list[tuple[str, int, int]] = []  # (joint name, column, kind)
        held: list[bool] = []
        for i, d in enumerate(order):
            held.extend([d.name not in solved] * WIDTH.get(d.type, 0))
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
            self._steps.append(Step(i, parent, d.type, off, col, axis, rot, chart_rotvec))
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
                    self.paths[k, st.col:st.col + WIDTH[st.kind]] = True
                name = by_name[name].parent
        self._parts = {st.i: rodrigues_parts(st.axis) for st in self._steps
                       if st.kind == "revolute" and st.axis is not None}
        self._coord_axis = {st.i: int(np.flatnonzero(st.axis)[0]) for st in self._steps
                            if st.kind == "revolute" and st.axis is not None
                            and np.count_nonzero(st.axis) == 1}
        self._angle_rows = self.kinds == REVOLUTE
        self._any_trig = bool(self._angle_rows.any())
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
        self.hinges = np.zeros(self.n, dtype=bool)  # per column: a revolute joint's angle
        self.hinges[[c for _, c, kind in self._one_dof if kind == REVOLUTE]] = True
        # per column: a hinge angle without limits (within +-SEARCH_LIMIT rad), whose
        # value matters modulo a turn
        self.wraps = (self.kinds == REVOLUTE) & (np.abs(self.lo) > SEARCH_LIMIT) \
            & (np.abs(self.hi) > SEARCH_LIMIT) & ~self.held
        # the limits of hinges searched modulo a turn within them (``with_turns_free``)
        self.turn_lo = np.full(self.n, -np.inf)
        self.turn_hi = np.full(self.n, np.inf)
        self.turns_placed = False  # a path's given ends stand at their own turns
        self._all_cols = np.arange(self.n)
        self._col_tables: dict[bytes, tuple[NDArray[np.intp], Array, NDArray[np.bool_]]] = {}
        self._fold_prefix()

    def _fold_prefix(self) -> None:
        """The held prefix: steps with no solved column at or above them (a limb's spine).
        Their frames are the same on every LM iteration of a problem, which computes
        them once (:meth:`prefix_t`) and passes them to every FK as ``base``: the FK
        starts at the ``anchors`` (prefix steps the rest hangs from, or an output).
        Folded only where the prefix holds a held column."""
        moves: list[bool] = []  # per step: a solved column at or above it
        for st in self._steps:
            own = st.col >= 0 and not self.held[st.col]
            moves.append(own or (st.parent >= 0 and moves[st.parent]))
        self._prefix = [not mv for mv in moves]
        prefix_cols = [c for st in self._steps if self._prefix[st.i] and st.col >= 0
                       for c in range(st.col, st.col + WIDTH[st.kind])]
        anchors: set[int] = set()
        if prefix_cols:
            anchors = {st.parent for st in self._steps if not self._prefix[st.i]
                       and st.parent >= 0 and self._prefix[st.parent]}
            anchors |= {i for i in self._eff if self._prefix[i]}
        self.anchors = sorted(anchors)  # step indices; empty: nothing folded
        self._anchor_of = {a: j for j, a in enumerate(self.anchors)}
        self.prefix_cols = np.array(prefix_cols, dtype=int)  # what places the anchors
        starts = self.rotvec_starts
        self._moving_rotvecs = starts[~np.isin(starts, self.prefix_cols)]

    @property
    def few_rows(self) -> int:
        """Up to this many rows the FK runs batch first (without a base)."""
        return self._plan.few_rows

    @cached_property
    def _plan(self) -> RowsPlan:
        """The tables of :func:`~.fk_rows.forward_rows`, :meth:`recentre`, :meth:`nearest`."""
        return RowsPlan(self._steps, self.n, self._eff, self.kinds, self.rotvec_starts,
                        self.wraps)

    @cached_property
    def _folded_plan(self) -> RowsPlan:
        """:attr:`_plan` without the held prefix (its anchors' frames given)."""
        return RowsPlan(self._steps, self.n, self._eff, self.kinds, self.rotvec_starts,
                        self.wraps, self._prefix, self.anchors)

    @cached_property
    def _anchor_plan(self) -> RowsPlan:
        """:attr:`_plan` with the anchors as its outputs (:meth:`prefix_t`)."""
        return RowsPlan(self._steps, self.n, self.anchors, self.kinds, self.rotvec_starts,
                        self.wraps)

    def prefix_t(self, q: Array) -> Array | None:
        """The anchors' world frames ``[R p]`` (A, 3, 4, k) (m) at ``q`` (n, k), whose
        held columns are all that move them: the ``base`` of :meth:`pose_t` and
        :meth:`pose_jacobian_t` for rows with these held values; None where the model
        folds nothing."""
        if not self.anchors:
            return None
        if q.shape[1] <= self._anchor_plan.few_rows:
            rot, pos, _, _ = forward_rows(self._anchor_plan, q, False)
        else:
            rot, pos, _, _ = self._forward(q, False, outputs=self.anchors)
        return np.concatenate((rot, pos[:, :, None]), axis=2)

    # -- FK ------------------------------------------------------------------------------
    def _forward(self, q: Array, columns: bool, base: Array | None = None,
                 outputs: list[int] | None = None
                 ) -> tuple[Array, Array, Array | None, Array | None]:  # fmt: skip
        """FK of ``q`` (n, k): effector (and point) rotations (m, 3, 3, k) and positions
        (m, 3, k), and (``columns``) each column's world axis (the angular velocity per
        unit of the column: unit for a hinge or slider, a column of the rotation vector's
        left Jacobian for ROTVEC) and joint origin (n, 3, k); batch first on a few rows
        (:func:`.fk_rows.forward_rows`), batch last on many
        (:func:`.fk_columns.forward_columns`). ``base``: the anchors' frames
        (:meth:`prefix_t`), the held prefix folded (its columns' axes and origins zero);
        ``outputs``: other steps than the effectors' and points'."""
        fold = base is not None and bool(self.anchors)
        plan = self._folded_plan if fold else self._plan
        if q.shape[1] <= plan.few_rows and outputs is None:
            return forward_rows(plan, q, columns, base if fold else None)
        return forward_columns(self, q, columns, base if fold else None,
                               self._eff if outputs is None else outputs)

    def pose_t(self, q: Array, base: Array | None = None) -> tuple[Array, Array]:
        """Batch-last :meth:`pose`: ``q`` (n, k) -> (m, 3, 3, k), (m, 3, k) (effectors,
        then points); ``base``: :meth:`prefix_t` of ``q``'s held values (or None)."""
        rot, pos, _, _ = self._forward(q, False, base)
        return rot, pos

    def reach_t(self, q: Array, base: Array | None = None) -> tuple[Array, Array]:
        """Per effector a ball its effector cannot leave whatever the solved columns do:
        the centre (m, 3, k) (world, m: the first solved joint on its path, placed by
        ``q``'s held columns, which are all that move it) and the radius (m,) (m: the
        lengths from there to the effector, plus each solved slider's farthest limit;
        inf with an unlimited slider or no solved joint). ``base``: :meth:`prefix_t` of
        ``q``'s held values (or None)."""
        _, _, _, origins = self._forward(q, True, base)
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

    def pose_jacobian_t(self, q: Array, base: Array | None = None,
                        cols: NDArray[np.intp] | None = None
                        ) -> tuple[Array, Array, Array]:  # fmt: skip
        """Batch-last :meth:`pose_jacobian`: ``q`` (n, k) -> rotations (m, 3, 3, k),
        positions (m, 3, k) and the Jacobian (m, 6, c, k) (effectors, then points) of
        columns ``cols`` (c,) (default all n). ``base``: :meth:`prefix_t` of ``q``'s held
        values (or None); with it the columns of the held prefix get zero Jacobian
        columns (no solve moves them)."""
        rot, pos, axes, origins = self._forward(q, True, base)
        assert axes is not None and origins is not None
        if cols is None:
            return rot, pos, self._jacobian(pos, axes, origins, self._all_cols)
        return rot, pos, self._jacobian(pos, axes[cols], origins[cols], cols)

    def pose_jacobian_blocks_t(self, q: Array, base: Array | None, effs: NDArray[np.intp],
                               cols: NDArray[np.intp], mask: NDArray[np.bool_]
                               ) -> tuple[Array, Array, Array]:  # fmt: skip
        """:meth:`pose_jacobian_t` with the Jacobian only where limbs apart need it:
        per block b (B, 6, N, k) the world rows ``[linear (m/unit); angular (rad/unit)]``
        of effector ``effs[b]`` and the columns ``cols[b]`` (N,) (model columns), zero
        where ``mask[b]`` (N,) is False (padding). Four legs of 9 columns: a quarter of
        the products of the dense (4, 6, 36, k)."""
        rot, pos, axes, origins = self._forward(q, True, base)
        assert axes is not None and origins is not None
        a = axes[cols]  # (B, N, 3, k)
        d = pos[effs][:, None] - origins[cols]  # (B, N, 3, k): from each joint to the effector
        jb = np.empty((len(effs), 6, cols.shape[1], q.shape[1]))
        _axis_rows(jb, a, d)
        slide = (self.kinds[cols] == PRISMATIC) & mask
        if slide.any():  # a slider moves the effector along its axis
            s = slide[:, None, :, None]
            jb[:, :3] = np.where(s, a.transpose(0, 2, 1, 3), jb[:, :3])
            jb[:, 3:] = np.where(s, 0.0, jb[:, 3:])
        if not mask.all():
            jb *= mask[:, None, :, None]
        return rot, pos, jb

    def _column_tables(self, cols: NDArray[np.intp]) -> tuple[NDArray[np.intp], Array,
                                                              NDArray[np.bool_]]:  # fmt: skip
        """For Jacobian columns ``cols``: which of them are sliders, each effector's (and
        point's) mask of them as floats (m, c), and whether it has all of them (m,); kept
        per column set (a problem asks for the same free columns every iteration)."""
        key = cols.tobytes()
        if key not in self._col_tables:
            paths = self.paths[:, cols]
            self._col_tables[key] = (np.flatnonzero(self.kinds[cols] == PRISMATIC),
                                     paths.astype(float), np.all(paths, axis=1))
        return self._col_tables[key]

    def _jacobian(self, pos: Array, axes: Array, origins: Array,
                  cols: NDArray[np.intp]) -> Array:
        """The world Jacobian (m, 6, c, k) of columns ``cols`` (c,), rows ``[linear
        (m/unit); angular (rad/unit)]``, from the effectors' (and points') world positions
        (m, 3, k) (m) and the columns' world axes and origins (c, 3, k) (m)."""
        c, k, m = len(cols), pos.shape[-1], len(self._eff)
        jac = np.empty((m, 6, c, k))
        step = max(1, _CHUNK // (3 * c * k + 1))  # effectors at once: fewer, small arrays
        slide, mask, full = self._column_tables(cols)
        for e in range(0, m, step):
            out = jac[e:e + step]
            d = pos[e:e + step, None] - origins  # (g, c, 3, k): from each joint to the effector
            _axis_rows(out, axes[None], d)
            if slide.size:  # a slider moves the effector along its axis
                out[:, 0:3, slide] = axes[slide].transpose(1, 0, 2)
                out[:, 3:, slide] = 0.0
            if not full[e:e + step].all():  # columns off its path do not move it
                out *= mask[e:e + step, None, :, None]
        return jac

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
    def with_turns_free(self, cols: NDArray[np.bool_], placed: bool = False) -> BatchedModel:
        """This model with the solved hinges among the columns ``cols`` (n,) without
        limits: their angles (rad) matter modulo a turn (``wraps``), their limits kept as
        ``turn_lo``, ``turn_hi`` (the path search counts their turns within them);
        ``placed``: a path's given start and end are where the path is to join (the poses
        around it), at their own turns. The same FK; a copy."""
        free = cols & self.hinges & ~self.held
        out = copy.copy(self)
        for name in ("_plan", "_folded_plan", "_anchor_plan"):  # built from ``wraps``
            out.__dict__.pop(name, None)
        out.lo = np.where(free, -np.inf, self.lo)
        out.hi = np.where(free, np.inf, self.hi)
        out.wraps = self.wraps | free
        out.turn_lo = np.where(free, self.lo, self.turn_lo)
        out.turn_hi = np.where(free, self.hi, self.turn_hi)
        out.turns_placed = placed
        return out

    def without_points(self) -> BatchedModel:
        """This model without its points (a pole's bend points): the same columns, FK
        and Jacobians of the effectors alone, where no pole is asked (a path planned
        before it is swung toward its poles). A copy (this model where it has none)."""
        if not self.points:
            return self
        out = copy.copy(self)
        for name in ("_plan", "_folded_plan", "_anchor_plan"):  # built from ``_eff``
            out.__dict__.pop(name, None)
        m = len(self.effectors)
        out.points, out._eff, out.paths = [], self._eff[:m], self.paths[:m]
        out._col_tables = {}  # its own: built from ``paths``
        return out

    def recentre(self, q: Array) -> Array:
        """``q`` (n, k) with every rotation vector longer than ``charts.RECENTRE`` replaced
        by its rotation's shorter one (the same pose; a copy where anything changed)."""
        if not self._plan.rotvec_cols.size:  # no rotation vector: nothing to re-centre
            return q
        v = q[self._plan.rotvec_cols]  # (3, J, k)
        w = rotvec_recentred(v)
        if w is v:  # none too long
            return q
        out = q.copy()
        out[self._plan.rotvec_cols] = w
        return out

    def nearest(self, ref: Array, q: Array) -> Array:
        """Rows ``q`` (k, n) written as the same poses' coordinates nearest ``ref`` (k, n)
        or (n,): hinges without limits by whole turns, rotation vectors by their other
        vector (rad, m)."""
        q = np.asarray(q, dtype=float)
        ref = np.broadcast_to(np.asarray(ref, dtype=float), q.shape)
        out = q.copy()
        w = self._plan.wrap_cols
        if w.size:
            out[..., w] = ref[..., w] + (q[..., w] - ref[..., w] + np.pi) % (2 * np.pi) - np.pi
        if self.rotvec_starts.size:  # the vectors batch-last, (3, J, k)
            near = rotvec_near(ref.T[self._plan.rotvec_cols], q.T[self._plan.rotvec_cols])
            out[:, self._plan.rotvec_cols] = near.transpose(2, 0, 1)
        return out

    def difference(self, a: Array, b: Array) -> Array:
        """Per column the motion from rows ``a`` to rows ``b`` (k, n), the nearest way
        (:meth:`nearest`): rad, m."""
        a = np.asarray(a, dtype=float)
        return self.nearest(a, b) - a


def _axis_rows(out: Array, a: Array, d: Array) -> None:
    """A hinge's (or a rotation vector's) Jacobian columns into ``out`` (g, 6, N, k):
    ``[a x d; a]`` from the columns' unit axes ``a`` (g or 1, N, 3, k) and the offsets
    ``d`` (g, N, 3, k) (m) from each column's joint to the effector, both world (linear
    rows m/rad, angular rows rad/rad)."""
    a0, a1, a2 = a[:, :, 0], a[:, :, 1], a[:, :, 2]
    d0, d1, d2 = d[:, :, 0], d[:, :, 1], d[:, :, 2]
    np.subtract(a1 * d2, a2 * d1, out=out[:, 0])  # linear: axis x d
    np.subtract(a2 * d0, a0 * d2, out=out[:, 1])
    np.subtract(a0 * d1, a1 * d0, out=out[:, 2])
    out[:, 3:] = a.transpose(0, 2, 1, 3)
