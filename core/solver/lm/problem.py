"""A batch of IK problems for the robust LM: targets, weights, tolerances, held columns
and poles, and the weighted residual with its Jacobian.

Frames: world; units: metres, radians. Each problem (a pose, a frame, a candidate) is a
row; arrays are batch last. The residual per effector is ``(p_t - p) * w_p / scale``
(metres over the chain's length ``scale``, so metres compare with radians) and
``rotvec(R_t R^T) * w_r`` (rad). A pole (Blender's IK pole, :mod:`.poles`) adds one row:
the arc (m, over ``scale``) its chain's bend point still has to swing about the line from
the chain's first joint to the target, so a pole is one more task, not another solver.
The targets come first: a row that misses its targets with its pole's row in the
residual is solved again with it as a light row (``as_pole_pull``: weighing
``LIGHT_SHARE`` of the targets', taken in their null space, ``loop``), and only the
targets decide whether a row has converged. A posture is such a light task too
(``with_posture``: the solution nearest a given pose).
"""

from __future__ import annotations

import copy
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kinematics import BatchedKinematics
from ..settings import RobustOptions, SolverSettings
from .blocks import StepBlocks
from .poles import PoleSet

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
Index = NDArray[np.intp]  # row or frame indices

# limits beyond +-SEARCH_LIMIT (rad or m) say nothing about where to look: the search
# (column scales, random starts, cold starts, grids) treats them as absent; steps are
# still clipped to the limits themselves
SEARCH_LIMIT = 1e6

# with the poles as a pull (``Problem.as_pole_pull``) or a posture
# (``Problem.with_posture``): their rows' weight beside the targets' (a step meets the
# targets and moves toward the poles or the posture in what the targets leave free)
LIGHT_SHARE = 1e-3

# the tolerances of the engine's own callers (benchmarks, tests) when none are given
ENGINE_SETTINGS = SolverSettings(position_tolerance=1e-5, orientation_tolerance=1e-4)


def rotvec(e: Array) -> Array:
    """Rotation vectors (3, ...) (rad) of rotation matrices ``e`` (3, 3, ...), batch last."""
    s = np.empty((3, *e.shape[2:]))
    np.subtract(e[2, 1], e[1, 2], out=s[0])
    np.subtract(e[0, 2], e[2, 0], out=s[1])
    np.subtract(e[1, 0], e[0, 1], out=s[2])
    s *= 0.5
    c = np.clip(0.5 * (e[0, 0] + e[1, 1] + e[2, 2] - 1.0), -1.0, 1.0)
    sn = np.sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2])
    theta = np.arctan2(sn, c)
    f = 1.0 + theta * theta / 6.0  # theta / sin(theta) near zero
    np.divide(theta, sn, out=f, where=sn > 1e-12)
    out = s * f
    far = c < -0.9  # near a half turn: the axis from the symmetric part
    if far.any():
        ef = np.moveaxis(e[:, :, far], -1, 0)  # (j, 3, 3)
        cf = c[far]
        sym = 0.5 * (ef + np.swapaxes(ef, -1, -2)) - cf[:, None, None] * np.eye(3)
        diag = np.einsum("kii->ki", sym)
        j = np.argmax(diag, axis=1)
        col = sym[np.arange(len(j)), :, j]
        u = col / np.linalg.norm(col, axis=1, keepdims=True)
        sf = np.moveaxis(s[:, far], 0, -1)
        sign = np.where(np.einsum("ki,ki->k", u, sf) < 0.0, -1.0, 1.0)
        out[:, far] = (u * (sign * theta[far])[:, None]).T
    return out


def search_limits(model: BatchedKinematics) -> tuple[Array, Array]:
    """``(lo, hi)`` (n,) for the search: the limits, or -inf / inf beyond SEARCH_LIMIT."""
    lo = np.where(np.abs(model.lo) <= SEARCH_LIMIT, model.lo, -np.inf)
    hi = np.where(np.abs(model.hi) <= SEARCH_LIMIT, model.hi, np.inf)
    return lo, hi


_SCALES: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
_BLOCKS: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = \
    weakref.WeakKeyDictionary()  # Problem.step_blocks and effector_blocks, per model


_BASES: weakref.WeakKeyDictionary[Any, tuple[bytes, Array | None]] = \
    weakref.WeakKeyDictionary()  # per model: the last held values and their base


def _held_base(model: BatchedKinematics, cols: Index, held: Array) -> Array | None:
    """``model.prefix_t`` of the held values ``held`` (h, B) in columns ``cols``: what
    the held columns alone place (a limb's spine), once per problem; the last one kept
    per model (a trajectory's problems share their held values)."""
    key = held.tobytes()
    try:
        last = _BASES.get(model)
    except TypeError:  # a model that cannot be weakly referenced
        last = None
    if last is not None and last[0] == key:
        return last[1]
    q = np.zeros((model.n, held.shape[1]))
    q[cols] = held
    base = model.prefix_t(q)
    try:
        _BASES[model] = (key, base)
    except TypeError:  # a model that cannot be weakly referenced: not kept
        pass
    return base


def length_scale(model: BatchedKinematics) -> float:
    """The largest linear Jacobian column of a solved column at the T-pose clipped into
    the limits (m); once per model (a constant of it)."""
    try:
        return _SCALES[model]
    except (KeyError, TypeError):
        pass
    scale = _length_scale(model)
    try:
        _SCALES[model] = scale
    except TypeError:  # a model that cannot be weakly referenced: not kept
        pass
    return scale


def _length_scale(model: BatchedKinematics) -> float:
    q0 = np.clip(np.zeros(model.n), model.lo, model.hi)[:, None]
    _, _, jac = model.pose_jacobian_t(q0)
    jac = jac[: len(model.effectors), :, ~model.held]  # the solved columns
    if jac.size == 0:
        return 1.0
    longest = float(np.max(np.linalg.norm(jac[:, :3, :, 0], axis=1)))
    return longest if longest > 1e-6 else 1.0


@dataclass
class Rows:
    """What a set of rows solves for, batch last: target rotations (m, 3, 3, k) and
    positions (m, 3, k) (world, m), pole positions (P, 3, k) (world, m) or None, a
    posture (n, k) (rad, m) the rows are pulled toward (``Problem.with_posture``) or
    None, and what the rows' held columns place (``base``, the model's ``prefix_t``:
    world frames ``[R p]`` (A, 3, 4, k), m) or None."""

    rot: Array
    pos: Array
    pole: Array | None
    posture: Array | None = None
    base: Array | None = None

    def take(self, sel: Index | slice) -> Rows:
        return Rows(self.rot[..., sel], self.pos[..., sel],
                    None if self.pole is None else self.pole[..., sel],
                    None if self.posture is None else self.posture[..., sel],
                    None if self.base is None else self.base[..., sel])


@dataclass
class Linearised:
    """A residual and its Jacobian at k coordinate rows: the weighted residual ``e``
    (r, k), each effector's position (m) and orientation (rad) error (m, k), each pole's
    remaining arc (m) (P, k), and the weighted Jacobian ``jac`` (r, c, k) of the free
    columns (``Problem.cols``) (None when only the errors were asked for)."""

    e: Array
    pe: Array
    re: Array
    po: Array
    jac: Array | None


class Problem:
    """B problems on one model: targets (B, m, 4, 4) world (m), weights per effector,
    the tolerances of ``settings`` (m, rad), the held columns' values per problem
    (``held`` (B, n), rad or m; None: zero, the T-pose; every LM run puts them in and
    keeps them) and poles (``poles``: a :class:`~.poles.PoleSet`, or None)."""

    def __init__(self, model: BatchedKinematics, targets: ArrayLike,
                 weights: Sequence[tuple[float, float]] | None,
                 settings: SolverSettings | None = None,
                 options: RobustOptions | None = None, held: ArrayLike | None = None,
                 poles: PoleSet | None = None) -> None:  # fmt: skip
        self.model = model
        self.settings = settings or ENGINE_SETTINGS
        self.options = options or RobustOptions()
        t = np.asarray(targets, dtype=float)
        m = len(model.effectors)
        if t.ndim == 3:
            t = t[:, None]
        if t.ndim != 4 or t.shape[1:] != (m, 4, 4):
            raise ValueError(f"targets must have shape (B, {m}, 4, 4), got {t.shape}")
        self.count = len(t)
        self.targets = t
        self.held_cols = np.flatnonzero(model.held)
        # the columns a solve may move: linearise's Jacobian has these alone
        self.cols = np.flatnonzero(~model.held)
        self.all_free = self.cols.size == model.n
        self.held: Array | None = None  # (h, B): the held columns' values per problem
        if self.held_cols.size:
            hv = np.zeros((self.count, model.n)) if held is None else \
                np.asarray(held, dtype=float).reshape(self.count, model.n)
            self.held = np.ascontiguousarray(hv[:, self.held_cols].T)
        self.poles = poles
        # the poles' rows (and a posture's) are light: a pull in the targets' null space
        # (as_pole_pull, with_posture)
        self.light = False
        self._far: BoolArray | None = None
        pole_pos = None if poles is None else poles.positions(self.count)
        base = None if self.held is None else _held_base(model, self.held_cols, self.held)
        self.rows = Rows(np.ascontiguousarray(t[:, :, :3, :3].transpose(1, 2, 3, 0)),
                         np.ascontiguousarray(t[:, :, :3, 3].transpose(1, 2, 0)), pole_pos,
                         None, base)
        w = [(1.0, 1.0)] * m if weights is None else [(float(a), float(b)) for a, b in weights]
        if len(w) != m or any(not (x >= 0.0 and math.isfinite(x)) for p in w for x in p):
            raise ValueError(f"need {m} pairs of finite weights >= 0")
        self.scale = length_scale(model)
        self.wp = np.array([a for a, _ in w])
        self.wr = np.array([b for _, b in w])
        rows = np.repeat(np.stack([self.wp / self.scale, self.wr], axis=1), 3, axis=1)
        self.row_w = rows.reshape(-1)  # (6m,)
        self.count_p = self.wp > 0.0
        self.count_r = self.wr > 0.0
        lo, hi = search_limits(model)
        half = 0.5 * (hi - lo)
        finite = np.isfinite(half) & self.options.scaled_columns
        self.col_scale = np.clip(np.where(finite, half, 1.0), 1e-3, 1e3)  # (n,)

    def step_blocks(self, r: int) -> StepBlocks | None:
        """The independent blocks of the first ``r`` rows of :meth:`linearise`'s residual
        (the effectors' six rows each, then the poles', then a posture's one per free
        column) and of its Jacobian's columns (:attr:`cols`) (:class:`~.blocks.StepBlocks`),
        or None; kept per model (every problem of a search shares them)."""
        posture = self.rows.posture is not None
        poled = () if self.poles is None else tuple(int(e) for e in self.poles.effectors)
        key = (r, poled, posture)
        cache = _BLOCKS.setdefault(self.model, {})
        if key not in cache:
            model, m, c = self.model, len(self.model.effectors), self.cols
            supports = [model.paths[e, c] for e in range(m) for _ in range(6)]
            supports += [model.paths[e, c] for e in poled]
            if posture:
                supports += list(np.eye(c.size, dtype=bool))
            cache[key] = StepBlocks.of(supports[:r], np.ones(c.size, dtype=bool))
        return cache[key]

    def effector_blocks(self) -> tuple[StepBlocks, Index, Index] | None:
        """Where the residual is the targets' rows alone (no poles, no posture) and the
        step splits into one block per effector (limbs that share no free column): the
        blocks (:meth:`step_blocks`), each block's effector (B,) and its columns as model
        columns (B, N) (padded as the blocks are); else None. The Jacobian is then
        computed in these blocks alone (:meth:`linearise` ``blocked``)."""
        if self.poles is not None or self.rows.posture is not None:
            return None
        key = "effectors"
        cache = _BLOCKS.setdefault(self.model, {})
        if key not in cache:
            blocks = self.step_blocks(6 * len(self.model.effectors))
            found = None
            if blocks is not None and len(blocks.rix) > 1 and blocks.rix.shape[1] == 6 \
                    and blocks.rmask.all():
                effs = blocks.rix[:, 0] // 6
                if np.array_equal(blocks.rix, 6 * effs[:, None] + np.arange(6)):
                    found = (blocks, effs, self.cols[blocks.cix])
            cache[key] = found
        out: tuple[StepBlocks, Index, Index] | None = cache[key]
        return out

    @property
    def pole_count(self) -> int:
        return 0 if self.poles is None else len(self.poles.effectors)

    @property
    def counted_rows(self) -> int:
        """Error rows that count: 3 per position and per orientation with a weight above
        0, and one per pole."""
        return int(3 * self.count_p.sum() + 3 * self.count_r.sum()) + self.pole_count

    def out_of_reach(self) -> BoolArray:
        """Per problem (B,): whether a counted effector's target position lies beyond
        what its chain can reach at all (``model.reach_t``: a ball it cannot leave), so
        that no search can converge there and restarts would be spent for nothing."""
        if self._far is None:
            q = np.zeros((self.model.n, self.count))
            if self.held is not None:
                q[self.held_cols] = self.held
            centre, radius = self.model.reach_t(q, self.rows.base)  # (m, 3, B), (m,)
            dist = np.sqrt(np.einsum("mik,mik->mk", self.rows.pos - centre,
                                     self.rows.pos - centre))
            far = dist > radius[:, None] + self.settings.position_tolerance
            self._far = np.any(far & self.count_p[:, None], axis=0)
        return self._far

    def hold(self, q: Array, rows: Index) -> Array:
        """``q`` (k, n) (rad, m) with the held columns set to problems ``rows``' values
        (a copy)."""
        q = np.array(q, dtype=float)
        if self.held is not None:
            q[:, self.held_cols] = self.held[:, rows].T
        return q

    def linearise(self, q: Array, rows: Rows, jacobian: bool = True,
                  blocked: bool = False) -> Linearised:
        """The residual (and, with ``jacobian``, its Jacobian, of the free columns
        :attr:`cols`) at coordinates ``q`` (n, k) against ``rows`` (the problems' targets,
        gathered by the caller; ``q``'s held columns hold their values, which
        ``rows.base`` folds). ``blocked`` (where :meth:`effector_blocks` are): the
        weighted Jacobian in those blocks, (B, 6, N, k)."""
        model = self.model
        m = len(model.effectors)
        c = self.cols.size
        eb = self.effector_blocks() if blocked and jacobian else None
        jb = None
        if eb is not None:
            jac = None
            rot, pos, jb = model.pose_jacobian_blocks_t(q, rows.base, eb[1], eb[2],
                                                        eb[0].cmask)
            jb *= self.row_w[eb[0].rix][:, :, None, None]
        elif jacobian:
            rot, pos, jac = model.pose_jacobian_t(q, rows.base,
                                                  None if self.all_free else self.cols)
        else:
            (rot, pos), jac = model.pose_t(q, rows.base), None
        dp = rows.pos - pos[:m]  # (m, 3, k)
        err = np.einsum("milk,mjlk->ijmk", rows.rot, rot[:m])  # R_t R^T, (3, 3, m, k)
        dr = rotvec(err).transpose(1, 0, 2)  # (m, 3, k)
        pe = np.sqrt(np.einsum("mik,mik->mk", dp, dp))
        re = np.sqrt(np.einsum("mik,mik->mk", dr, dr))
        k = q.shape[1]
        e = np.concatenate((dp, dr), axis=1).reshape(6 * m, k) * self.row_w[:, None]
        po = np.zeros((0, k))
        poled = self.poles is not None and rows.pole is not None
        if poled:
            assert self.poles is not None and rows.pole is not None
            pe_rows, pj_rows, po = self.poles.rows(model, rows.pos, rows.pole, pos, jac,
                                                   self.scale)
        wjac = None
        if jac is not None:  # weighted in place: the poles' rows are taken, jac is ours
            wjac = jac[:m].reshape(6 * m, c, k)
            wjac *= self.row_w[:, None, None]
        if poled:
            share = LIGHT_SHARE if self.light else 1.0
            e = np.concatenate((e, pe_rows * share))
            if wjac is not None:
                assert pj_rows is not None
                wjac = np.concatenate((wjac, pj_rows * share))
        if rows.posture is not None:  # light rows (posture - q) over the column scales
            w = LIGHT_SHARE / self.col_scale[self.cols]
            e = np.concatenate((e, (rows.posture - q)[self.cols] * w[:, None]))
            if wjac is not None:
                eye = np.broadcast_to(np.diag(w)[:, :, None], (c, c, k))
                wjac = np.concatenate((wjac, eye))
        return Linearised(e, pe, re, po, wjac if jb is None else jb)

    def badness(self, pe: Array, re: Array, po: Array | None = None) -> Array:
        """Per row: the largest counted error over its tolerance (below 1: converged);
        ``pe`` (m) and ``re`` (rad) (B, m), ``po`` (m) (B, P), rows first."""
        s = self.settings
        bp = np.where(self.count_p, pe / s.position_tolerance, 0.0)
        br = np.where(self.count_r, re / s.orientation_tolerance, 0.0)
        out = np.maximum(bp.max(axis=1, initial=0.0), br.max(axis=1, initial=0.0))
        if po is not None and po.size:
            out = np.maximum(out, po.max(axis=1) / s.position_tolerance)
        return out

    def shortfall(self, pe: Array, re: Array) -> Array:
        """Per row: how far its targets are missed as the LM weighs them, the energy it
        minimises (twice it: the sum over the effectors of ``(w_p pe / scale)^2 +
        (w_r re)^2``); ``pe`` (m) and ``re`` (rad) (B, m), rows first. Approaches that
        both miss are judged by it (``nearer``, ``rank``): by ``badness``, the largest
        error over its tolerance alone, a pose reaching 8 cm further toward a target
        out of reach with its orientation 2.3 rad off was the better one (arm7, a
        target moved out of reach: single frames thrown 2 rad off and back)."""
        return np.sum((self.wp * pe / self.scale) ** 2 + (self.wr * re) ** 2, axis=1)

    def nearer(self, a: tuple[Array, Array, Array | None],
               b: tuple[Array, Array, Array | None]) -> BoolArray:
        """Per row: answer ``a`` is nearer its targets than ``b``, each (pe, re, po) as
        for ``badness``: where either meets its targets, by ``badness``; where both
        miss, by ``shortfall``."""
        ba, bb = self.badness(*a), self.badness(*b)
        return np.where((ba < 1.0) | (bb < 1.0), ba < bb,
                        self.shortfall(a[0], a[1]) < self.shortfall(b[0], b[1]))

    def rank(self, pe: Array, re: Array, po: Array) -> Array:
        """Per row, lower is better, targets first: below 1 when the targets and poles
        are met (their badness), in [1, 2) when only the targets are (by the poles' arc
        left), 2 and above when the targets are not (2 + their ``shortfall``)."""
        targets = self.badness(pe, re)
        missed = 2.0 + self.shortfall(pe, re)
        if not po.size:
            return np.where(targets < 1.0, targets, missed)
        arc = po.max(axis=1) / self.settings.position_tolerance
        return np.where(targets >= 1.0, missed,
                        np.where(arc < 1.0, np.maximum(targets, arc), 1.0 + arc / (1.0 + arc)))

    def as_pole_pull(self) -> Problem:
        """The same problems with the poles' rows light (``LIGHT_SHARE``): a pull in the
        targets' null space (the loop moves toward the poles as far as the targets and
        limits allow, and stays on target once there)."""
        out = copy.copy(self)
        out.light = True
        return out

    def targets_only(self) -> Problem:
        """The same problems' targets alone: no poles, no posture."""
        out = copy.copy(self)
        out.light, out.poles = False, None
        out.rows = Rows(self.rows.rot, self.rows.pos, None, None, self.rows.base)
        return out

    def with_posture(self, posture: Array) -> Problem:
        """The same problems with the targets alone as their tasks and a pull toward
        ``posture`` (B, n) (rad, m) in their null space: a row ends on its targets, at
        the solution nearest the posture (in units of the column scales) that the LM
        reaches, no poles asked."""
        out = copy.copy(self)
        out.light = True
        out.poles = None
        out.rows = Rows(self.rows.rot, self.rows.pos, None,
                        np.ascontiguousarray(np.asarray(posture, dtype=float).T),
                        self.rows.base)
        return out

    def targets_met(self, lin: Linearised) -> BoolArray:
        """Per row: every counted target error within its tolerance (poles aside)."""
        s = self.settings
        ok_p = (lin.pe < s.position_tolerance) | ~self.count_p[:, None]
        ok_r = (lin.re < s.orientation_tolerance) | ~self.count_r[:, None]
        return np.all(ok_p & ok_r, axis=0)

    def converged(self, lin: Linearised) -> BoolArray:
        """Per row: every counted error within its tolerance, the poles' arcs included
        (where a search stops)."""
        s = self.settings
        ok_p = (lin.pe < s.position_tolerance) | ~self.count_p[:, None]
        ok_r = (lin.re < s.orientation_tolerance) | ~self.count_r[:, None]
        ok = np.all(ok_p & ok_r, axis=0)
        if lin.po.size and not self.light:
            ok &= np.all(lin.po < s.position_tolerance, axis=0)
        return ok
