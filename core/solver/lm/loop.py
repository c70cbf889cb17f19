"""The robust method's Levenberg-Marquardt loop, written once, for many rows at once.

Each row of a ``(k, n)`` coordinate array is one problem's search (a pose, a frame of a
trajectory, a candidate track, a restart). Every iteration linearises all active rows at
once (:meth:`~.problem.Problem.linearise`), takes a damped bounded step per row
(:func:`~.step.bounded_step`) and keeps per-row damping, acceptance and convergence:

- damping adapts to the error (Chan), ``W = mult * (lm_damping * E + floor)`` with
  ``E = |e|^2 / 2``; a step that does not lower ``E`` is rejected and ``mult`` grows
  tenfold, an accepted one halves it;
- steps are taken in units of each column's half range (damping and pulls weigh joints
  alike), rotation-vector charts re-centred after each step (``model.recentre``);
- one stall rule: a row whose ``E`` has not fallen below ``stall_ratio`` of itself over
  ``stall_window`` iterations, or whose ``mult`` explodes, stops (a cold solve then
  restarts it, a track lets it die).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..kinematics import BatchedKinematics
from .blocks import StepBlocks
from .problem import Index, Problem
from .step import bounded_step

Array = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

# with the poles as a pull, a row stops on its poles once their arcs are below this
# share of the position tolerance (or when it stalls)
EXACT = 1e-3
FEW_ROWS = 32  # see _step


@dataclass
class LMResult:
    """Per row: coordinates (k, n) (rad, m), converged (k,), iterations (k,), each
    effector's position (m) and orientation (rad) error (k, m), and each pole's arc left
    (m) (k, P)."""

    q: Array
    converged: BoolArray
    iterations: NDArray[np.int_]
    position_error: Array
    orientation_error: Array
    pole_error: Array

    def put(self, rows: Index, other: LMResult, keep: BoolArray | None = None) -> None:
        """Rows ``rows`` of this result solved again as ``other`` (one row each): its
        answer where ``keep`` (default everywhere), its iterations added everywhere."""
        take = slice(None) if keep is None else keep
        at = rows[take]
        self.q[at], self.converged[at] = other.q[take], other.converged[take]
        self.position_error[at] = other.position_error[take]
        self.orientation_error[at] = other.orientation_error[take]
        self.pole_error[at] = other.pole_error[take]
        self.iterations[rows] += other.iterations


def levenberg_marquardt(model: BatchedKinematics, problem: Problem, q0: Array,
                        budget: int, rows: Index | None = None, pull: Array | None = None,
                        pull_gain: float = 1.0, frozen: NDArray[np.bool_] | None = None,
                        first_wins: bool = False, stall_window: int | None = None,
                        exact_pull: bool = False, stall_ratio: float | None = None,
                        stationary: float | None = None) -> LMResult:  # fmt: skip
    """Run the LM from ``q0`` (k, n) for problems ``rows`` (default all, in order), at
    most ``budget`` iterations per row. ``pull`` (k, n): a reference the step is damped
    toward (its null-space part survives), ``pull_gain`` of the way. ``frozen`` (n,) for
    all rows or (k, n) per row: columns that keep their starting values. ``first_wins``:
    rows of the same problem (``rows``) stop once one of them has converged.
    ``stall_window``, ``stall_ratio``: instead of the problem's ``options.stall_window``
    and ``options.stall_ratio`` (of the energy, the squared error). ``stationary``: a
    row also stops once an accepted step lowers its energy by less than this share of
    it (a closest approach reached: the stall rule alone waits out its window).
    ``exact_pull``: with light rows, the pull taken in the null space of all rows
    (``step.damped``): a row converges onto its poles in a few iterations, where the
    damped pull leaks into their light rows and leaves them only as fast as the damping
    shrinks.

    With poles (``problem.poles``) a row searches until its targets and its poles are
    met; one that then misses its targets (a pole the limits do not allow beside them)
    is solved again from there for its targets alone, pulled toward where it was: the
    targets come first, and they alone say whether a row converged."""
    opts = problem.options
    lo, hi = model.lo, model.hi
    q = np.ascontiguousarray(np.clip(np.asarray(q0, dtype=float), lo, hi).T)  # (n, k)
    k = q.shape[1]
    if k == 0:
        m, p = len(model.effectors), problem.pole_count
        return LMResult(np.zeros((0, model.n)), np.zeros(0, dtype=bool),
                        np.zeros(0, dtype=int), np.zeros((0, m)), np.zeros((0, m)),
                        np.zeros((0, p)))
    idx = np.arange(k) if rows is None else np.asarray(rows)
    if problem.held is not None:  # the held columns take the problems' values and keep them
        q[problem.held_cols] = problem.held[:, idx]
        frozen = model.held if frozen is None else np.asarray(frozen, dtype=bool) | model.held
    q = model.recentre(q)
    pl = None if pull is None else np.ascontiguousarray(np.asarray(pull, dtype=float).T)
    # steps in the free columns alone (problem.cols: the Jacobian's), c of them
    cols, every_col = problem.cols, problem.all_free
    cs = problem.col_scale[cols][:, None]
    if frozen is None:
        keep = np.ones((cols.size, 1))
    else:  # (n,) for every row or (k, n) per row -> (c, 1) or (c, k)
        fz = np.asarray(frozen, dtype=bool)
        keep = (~fz)[cols].astype(float)[:, None] if fz.ndim == 1 else \
            (~fz).T[cols].astype(float)
    per_row = keep.shape[1] > 1
    lo_c, hi_c = lo[cols][:, None], hi[cols][:, None]
    lo_s, hi_s = lo_c[:, 0] / cs[:, 0], hi_c[:, 0] / cs[:, 0]

    def free(a: Array) -> Array:  # (n, k) -> the free columns' rows (c, k)
        return a if every_col else a[cols]

    def moved(qa: Array, step: Array) -> Array:  # qa (n, k) + step (c, k), clipped
        if every_col:
            return model.recentre(np.clip(qa + step, lo_c, hi_c))
        out = qa.copy()
        out[cols] = np.clip(qa[cols] + step, lo_c, hi_c)
        return model.recentre(out)

    every_rows = problem.rows.take(idx)  # gathered once
    # limbs apart, targets alone: the Jacobian in the step's blocks (Problem.linearise)
    eb = problem.effector_blocks()
    blocked = eb is not None
    lin = problem.linearise(q, every_rows, blocked=blocked)
    assert lin.jac is not None
    e, pe, re, po = lin.e, lin.pe, lin.re, lin.po
    weighted: Array = lin.jac
    # the poles or a posture as a pull (problem.light): light rows in the residual
    posture = problem.rows.posture is not None
    pulled = problem.light and (problem.poles is not None or posture)
    energy = 0.5 * np.einsum("rk,rk->k", e, e)
    conv = problem.converged(lin)
    iters = np.zeros(k, dtype=int)
    mult = np.ones(k)
    window = max(opts.stall_window if stall_window is None else stall_window, 1)
    ratio = opts.stall_ratio if stall_ratio is None else stall_ratio
    hist = np.repeat(energy[None], window, axis=0)
    dead = np.zeros(k, dtype=bool)
    # with the poles as a pull: a row on target goes on toward its poles, until it meets
    # them or stalls
    # (tighter than the tolerance: a pole met anywhere within it would jitter)
    near = EXACT * problem.settings.position_tolerance
    met = np.ones(k, dtype=bool) if not pulled else np.all(po < near, axis=0) & (not posture)
    for it in range(budget):
        act = np.flatnonzero(~(conv & met) & ~dead)
        if act.size == 0:
            break
        every = act.size == k  # every row: no gathers, and no scatters when all accept
        if every:
            qa, wa, ea, ena, ma, ra = q, weighted, e, energy, mult, every_rows
        else:
            qa, wa, ea, ena, ma = q[:, act], weighted[..., act], e[:, act], energy[act], \
                mult[act]
            ra = every_rows.take(act)
        sel = slice(None) if every else act
        wd = ma * (opts.lm_damping * ena + opts.lm_damping_floor)
        # the pull shrinks as the damping grows: a rejected step must get shorter
        kp = keep[:, sel] if per_row else keep  # (c, k or 1): 0 on a frozen column
        d = None if pl is None else \
            (free(pl[:, sel]) - free(qa)) * (pull_gain / np.maximum(ma, 1.0))
        if d is not None and frozen is not None:
            d = d * kp
        cs_k = cs * kp  # (c, k or 1)
        cs3 = cs_k[None] if eb is None else cs_k[eb[0].cix][:, None]  # as the Jacobian
        step = _step(problem, wa * cs3, ea, free(qa) / cs, lo_s, hi_s, wd,
                     None if d is None else d / cs, pulled and exact_pull,
                     None if eb is None else eb[0]) * cs
        qt = moved(qa, step)
        lt = problem.linearise(qt, ra, blocked=blocked)
        assert lt.jac is not None
        if pulled:  # a corrector: back onto the targets (their rows alone), so that the
            # turn's second-order drift off them does not hide its progress
            rt = len(problem.row_w)
            fix = _step(problem, lt.jac[:rt] * cs3, lt.e[:rt], free(qt) / cs, lo_s, hi_s,
                        np.full(act.size, opts.lm_damping_floor), None, False) * cs
            qt = moved(qt, fix)
            lt = problem.linearise(qt, ra)
        jac_t = lt.jac
        assert jac_t is not None
        en = 0.5 * np.einsum("rk,rk->k", lt.e, lt.e)
        ct = problem.converged(lt)
        # pulled: the energy counts the light rows, so a step is kept only when it lowers
        # them together (on target is not enough)
        ok = en < ena if pulled else (en < ena) | ct
        if every and ok.all():
            q, e, energy, pe, re, po, conv = qt, lt.e, en, lt.pe, lt.re, lt.po, ct
            weighted = jac_t
            iters += 1
            mult = np.maximum(mult * 0.5, 1e-6)
            acc = act
        else:
            acc = act[ok]
            q[:, acc] = qt[:, ok]
            e[:, acc] = lt.e[:, ok]
            energy[acc] = en[ok]
            pe[:, acc], re[:, acc], po[:, acc] = lt.pe[:, ok], lt.re[:, ok], lt.po[:, ok]
            weighted[..., acc] = jac_t[..., ok]
            conv[acc] = ct[ok]
            iters[act] += 1
            mult[act] = np.where(ok, np.maximum(ma * 0.5, 1e-6), ma * 10.0)
        if stationary is not None:
            dead[act] |= ok & (ena - en <= stationary * ena)
        slot = it % window
        if it >= window:
            dead[act] |= energy[act] > ratio * hist[slot, act]
        hist[slot, act] = energy[act]
        dead |= mult > 1e8
        if first_wins and conv[acc].any():
            dead |= np.isin(idx, idx[acc[conv[acc]]])
        if pulled:  # a row on target that stalls stops there, converged
            met = np.all(po < near, axis=0) & (not posture)
        else:
            dead &= ~conv
    out = LMResult(np.ascontiguousarray(q.T), conv, iters, np.ascontiguousarray(pe.T),
                   np.ascontiguousarray(re.T), np.ascontiguousarray(po.T))
    if problem.poles is not None and not problem.light:
        _targets_first(model, problem, out, idx, frozen, stall_window, budget)
    if pulled and not conv.all() and budget > 0:  # light rows may leave a row just off
        # its targets where it stopped: back onto them from there, the targets alone
        miss = np.flatnonzero(~conv)
        back = _again(model, problem.targets_only(), out, idx, miss, frozen, stall_window,
                      budget)
        take = miss[back.converged]
        out.q[take], out.converged[take] = back.q[back.converged], True
        out.position_error[take] = back.position_error[back.converged]
        out.orientation_error[take] = back.orientation_error[back.converged]
        out.iterations[miss] += back.iterations
    return out


def _step(problem: Problem, jac: Array, e: Array, x: Array, lo: Array, hi: Array,
          w: Array, d: Array | None, exact: bool, given: StepBlocks | None = None
          ) -> Array:  # fmt: skip
    """``step.bounded_step`` on the free columns (``Problem.cols``), block by block where
    the problem splits (``Problem.step_blocks``: four legs under a held body) on two rows
    or more (one block: from ``FEW_ROWS`` rows); below, the gathers cost more than they
    save (measured on the quadruped: one row 0.85x with the whole step, two 1.20x);
    ``exact``: the pull in the rows' null space (light rows: ``step.damped``);
    ``given``: the blocks ``jac`` is already in (``Problem.effector_blocks``)."""
    if given is not None:
        return given.step_blocked(functools.partial(bounded_step, exact=exact), jac, e, x,
                                  lo, hi, w, d)
    blocks = problem.step_blocks(len(e))
    k = e.shape[1]
    if blocks is None or k == 1 or (len(blocks.rix) == 1 and k < FEW_ROWS):
        return bounded_step(jac, e, x, lo, hi, w, d, exact)
    return blocks.step(functools.partial(bounded_step, exact=exact), jac, e, x, lo, hi, w, d)


def _targets_first(model: BatchedKinematics, problem: Problem, res: LMResult, idx: Index,
                   frozen: NDArray[np.bool_] | None, stall_window: int | None,
                   budget: int) -> None:  # fmt: skip
    """A poled search's rows that miss their targets, solved again from where they are
    with the targets alone in the residual and the poles as a pull in their null space
    (as close to the poles as the targets and limits allow), in place; every row's
    ``converged`` then says whether its targets are met."""
    lin = problem.linearise(np.ascontiguousarray(res.q.T), problem.rows.take(idx),
                            jacobian=False)
    met = problem.targets_met(lin)
    miss = np.flatnonzero(~met)
    res.converged = met
    if miss.size == 0 or budget <= 0:
        return
    again = _again(model, problem.as_pole_pull(), res, idx, miss, frozen, stall_window,
                   budget)
    better = ~problem.nearer((res.position_error[miss], res.orientation_error[miss], None),
                             (again.position_error, again.orientation_error, None))
    res.put(miss, again, better)


def _again(model: BatchedKinematics, problem: Problem, res: LMResult, idx: Index,
           miss: Index, frozen: NDArray[np.bool_] | None, stall_window: int | None,
           budget: int) -> LMResult:  # fmt: skip
    """Rows ``miss`` of ``res`` (of problems ``idx``) solved again on ``problem`` from
    where they are, pulled toward there, their frozen columns kept."""
    fz = None if frozen is None else np.asarray(frozen)
    if fz is not None and fz.ndim == 2:
        fz = fz[miss]
    return levenberg_marquardt(model, problem, res.q[miss], budget, rows=idx[miss],
                               pull=res.q[miss], frozen=fz, stall_window=stall_window)


def on_target(model: BatchedKinematics, problem: Problem, q: Array,
              rows: Index | None = None) -> BoolArray:
    """Per row of ``q`` (k, n), whether it already meets problem ``rows`` (default all)."""
    return levenberg_marquardt(model, problem, q, 0, rows=rows).converged
