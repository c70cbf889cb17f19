"""Robust solves of independent problems: ``solve_many`` (a batch, cold or from given
starts) and ``solve_one`` (one problem, warm: a batch of one), both with random
restarts for the problems a first search leaves unconverged.

Targets are world 4x4 transforms (metres), one per effector and problem; coordinates in
rad and m (``model.joint_space``). Every answer lies within the limits; each problem
keeps its best answer (converged first, then the smallest error over the tolerances).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kinematics import BatchedKinematics
from ..settings import RobustOptions, SolverSettings
from .loop import LMResult, levenberg_marquardt, on_target
from .poles import PoleSet
from .problem import Problem
from .starts import cold_start, problem_keys, random_starts, t_pose, uniform_draws

Array = NDArray[np.float64]


def solve_many(model: BatchedKinematics, targets: ArrayLike,
               weights: Sequence[tuple[float, float]] | None = None,
               settings: SolverSettings | None = None,
               options: RobustOptions | None = None, q0: ArrayLike | None = None,
               held: ArrayLike | None = None, poles: PoleSet | None = None
               ) -> LMResult:  # fmt: skip
    """Solve B independent problems: ``targets`` (B, m, 4, 4); from ``q0`` (B, n), or
    from the T-pose where it is already on target and :func:`~.starts.cold_start`
    elsewhere; ``held`` (B, n): the values of the model's held columns per problem (rad,
    m; see :class:`~.problem.Problem`); ``poles``: see :mod:`.poles`.

    Problems that do not converge restart from random configurations within the limits
    (``options.restart_rows`` per problem and round, ``options.restarts`` rounds), as
    extra rows of one batch. Deterministic for a given ``options.seed``.
    """
    problem = Problem(model, targets, weights, settings, options, held, poles)
    b = problem.count
    if q0 is None:  # a T-pose already on target stays; the others start cold
        start = np.broadcast_to(cold_start(model), (b, model.n)).copy()
        if b:
            tpose = t_pose(model)
            start[on_target(model, problem, np.broadcast_to(tpose, (b, model.n)))] = tpose
    else:
        start = np.asarray(q0, dtype=float).reshape(b, model.n)
    res = levenberg_marquardt(model, problem, start, problem.settings.max_iterations)
    return restarted(problem, res)


def solve_one(model: BatchedKinematics, targets: ArrayLike, q0: ArrayLike,
              weights: Sequence[tuple[float, float]] | None = None,
              settings: SolverSettings | None = None,
              options: RobustOptions | None = None, held: ArrayLike | None = None,
              poles: PoleSet | None = None, restart: bool = True) -> LMResult:  # fmt: skip
    """One problem solved warm from ``q0`` (n,) (rad, m): targets (m, 4, 4) or
    (1, m, 4, 4); the search is pulled toward ``q0`` (least motion: a redundant chain
    keeps its posture), and restarts (with ``restart``) only when it does not converge.
    A batch of one of the same engine as every other robust solve."""
    t = np.asarray(targets, dtype=float)
    t = t.reshape(1, len(model.effectors), 4, 4)
    problem = Problem(model, t, weights, settings, options,
                      None if held is None else np.asarray(held, dtype=float).reshape(1, -1),
                      poles)
    start = problem.hold(np.clip(np.asarray(q0, dtype=float).reshape(1, model.n), model.lo,
                                 model.hi), np.zeros(1, dtype=np.intp))
    res = levenberg_marquardt(model, problem, start, problem.settings.max_iterations,
                              pull=start)
    return restarted(problem, res) if restart else res


def restarted(problem: Problem, res: LMResult) -> LMResult:
    """``res`` with the problems whose targets (or poles) are not met restarted from
    random configurations, each problem from its own stream keyed by its targets (its
    answer does not depend on the other problems of the batch), but for those out of
    reach (``Problem.out_of_reach``); a restart's answer is kept where it ranks better
    (``Problem.rank``: targets first); ``res`` is updated in place and returned."""
    model, opts = problem.model, problem.options
    b = problem.count
    keys: NDArray[np.uint64] | None = None  # made when a round has work (64 mixes a row)
    best_err = problem.rank(res.position_error, res.orientation_error, res.pole_error)
    reps = opts.restart_rows
    budget = min(opts.restart_iterations, problem.settings.max_iterations)
    hopeless: NDArray[np.bool_] | None = None  # beyond any reach: restarts cannot help
    for round_ in range(opts.restarts):
        missed = best_err >= 1.0  # targets or poles not met
        if not missed.any():
            break
        if hopeless is None:
            hopeless = problem.out_of_reach()
        todo = np.flatnonzero(missed & ~hopeless)
        if todo.size == 0:
            break
        if keys is None:
            keys = problem_keys(problem.targets.reshape(b, -1), opts.seed)
        rows = np.repeat(todo, reps)
        draw = round_ * reps + np.tile(np.arange(reps), todo.size)
        u = uniform_draws(keys[rows], draw, model.n)
        starts = random_starts(model, rows.size, None, problem.scale, u)
        sub = levenberg_marquardt(model, problem, starts, budget, rows=rows, first_wins=True)
        bad = problem.rank(sub.position_error, sub.orientation_error, sub.pole_error)
        for j in np.argsort(bad, kind="stable")[::-1]:  # best last: it wins the write
            p = rows[j]
            if bad[j] < best_err[p]:
                best_err[p] = bad[j]
                res.q[p] = sub.q[j]
                res.converged[p] = sub.converged[j]
                res.position_error[p] = sub.position_error[j]
                res.orientation_error[p] = sub.orientation_error[j]
                res.pole_error[p] = sub.pole_error[j]
            res.iterations[p] += sub.iterations[j]
    return res
