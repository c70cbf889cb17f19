"""Where a trajectory's path starts and ends: the given start, or the first frame's
solution reached from the pose before it, and the last frame's reached from the pose
after it (the keys a re-baked part of an animation joins); and the path of a clip that
stands still, which is its start held. Frames: world; units: metres, radians."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kinematics import BatchedKinematics
from ..lm.loop import levenberg_marquardt
from ..lm.poles import PoleSet
from ..lm.problem import Problem
from ..lm.solve import solve_many
from ..settings import RobustOptions, SolverSettings
from .fill import SLOW_STALL_WINDOW
from .search import PathResult

Array = NDArray[np.float64]


def path_ends(model: BatchedKinematics, targets: Array,
              weights: Sequence[tuple[float, float]] | None,
              settings: SolverSettings | None, opts: RobustOptions,
              start: ArrayLike | None, before: ArrayLike | None, after: ArrayLike | None,
              held: ArrayLike | None, poles: PoleSet | None
              ) -> tuple[Array | None, Array | None, Array | None]:  # fmt: skip
    """The held values (F, n), and where the path must start and end (n,) or None
    (``solve.solve_path``'s ``start``, ``before`` and ``after``)."""
    frames = len(targets)
    held = None if held is None else np.asarray(held, dtype=float).reshape(frames, model.n)
    first = None if start is None else np.asarray(start, dtype=float).reshape(model.n)
    if first is None and before is not None and frames:
        first = continued(model, targets, weights, settings, opts, before, 0, held, poles)
    last = None
    if after is not None and frames > 1:
        last = continued(model, targets, weights, settings, opts, after, frames - 1, held,
                         poles)
    return held, first, last


def continued(model: BatchedKinematics, targets: Array,
              weights: Sequence[tuple[float, float]] | None,
              settings: SolverSettings | None, opts: RobustOptions, pose: ArrayLike,
              frame: int, held: Array | None, poles: PoleSet | None) -> Array | None:  # fmt: skip
    """Frame ``frame``'s solution LM reaches from ``pose`` (n,) (rad, m), pulled toward
    it (least motion), or None when it does not converge."""
    one = targets[frame:frame + 1]
    problem = Problem(model, one, weights, settings, opts,
                      None if held is None else held[frame:frame + 1],
                      None if poles is None else poles.frames(slice(frame, frame + 1)))
    near = problem.hold(np.clip(np.asarray(pose, dtype=float).reshape(1, model.n), model.lo,
                                model.hi), np.zeros(1, dtype=np.intp))
    res = levenberg_marquardt(model, problem, near, problem.settings.max_iterations,
                              pull=near, stall_window=SLOW_STALL_WINDOW)
    return res.q[0] if res.converged[0] else None


def still_path(model: BatchedKinematics, targets: Array,
               weights: Sequence[tuple[float, float]] | None,
               settings: SolverSettings | None, opts: RobustOptions, held: Array | None,
               first: Array | None, last: Array | None, joined: bool
               ) -> PathResult | None:  # fmt: skip
    """The path of a clip that stands still (:func:`stands_still`: its targets (F, m, 4,
    4), world, m, and held values (F, n), rad and m, the same on every frame; the
    caller asks): one pose held, the least motion there is. That pose is ``first``
    (where the path must start), else ``last`` (where it must end), else, where the
    path joins no pose (``joined`` False: no start, pose before or after was given),
    the first frame solved as ``lm.solve_many`` solves it (the T-pose where it is on
    target, else cold, with restarts). None where ``first`` and ``last`` differ (the
    path moves along the self-motion between them: searched), where it joins a pose
    that LM reached no solution from (the search finds the one nearest), or where the
    pose misses the targets (beyond reach: the search approaches them,
    :func:`held_best`). A still clip, or a held stretch between two
    cuts (``plan._between_cuts``), took the whole search before: arm7, 250 frames of
    one target, 47-94 ms (4-14 ms now); bench/held_out.py's paths with cuts, 45-74 ms
    a held stretch of 11-33 frames."""
    frames = len(targets)
    if first is not None and last is not None and not np.array_equal(first, last):
        return None
    pose = first if first is not None else last
    if pose is None and joined:
        return None
    one = None if held is None else held[:1]
    if pose is None:
        res = solve_many(model, targets[:1], weights, settings, opts, held=one)
    else:  # a solution of the frame already (``path_ends``): its errors, no iteration
        problem = Problem(model, targets[:1], weights, settings, opts, one)
        res = levenberg_marquardt(model, problem, pose.reshape(1, model.n), 0)
    if not res.converged[0]:
        return None
    work = np.zeros(frames, dtype=np.int64)
    work[0] = res.iterations[0]
    return PathResult(np.repeat(res.q[:1], frames, axis=0), np.ones(frames, dtype=bool),
                      np.repeat(res.position_error[:1], frames, axis=0),
                      np.repeat(res.orientation_error[:1], frames, axis=0), [], work)


def stands_still(targets: Array, held: Array | None) -> bool:
    """Whether a clip of two frames or more has the same targets (F, m, 4, 4) (world,
    m) and held values (F, n) (rad, m) on every frame."""
    if len(targets) < 2 or np.any(targets != targets[:1]):
        return False
    return held is None or not np.any(held != held[:1])


def held_best(problem: Problem, path: PathResult) -> PathResult:
    """``path`` of a clip that stands still (:func:`stands_still`; ``problem``: its
    first frame's) with its best frame's pose on every frame (``Problem.rank``: on
    target first, else nearest as the LM weighs it): where the targets are beyond
    reach the search approaches them on each frame apart, a little differently (arm7,
    frame 150 of a smooth path moved out to 3x its distance, held for 30 frames: steps
    up to 0.91 rad, 7 frames reported as jumps); the one closest approach held moves
    nothing. Its ``iterations`` kept (the search's work)."""
    pe, re = path.position_error, path.orientation_error
    best = int(np.argmin(problem.rank(pe, re, np.zeros((len(pe), 0)))))
    frames = len(path.q)
    return PathResult(np.repeat(path.q[best:best + 1], frames, axis=0),
                      np.repeat(path.converged[best:best + 1], frames),
                      np.repeat(pe[best:best + 1], frames, axis=0),
                      np.repeat(re[best:best + 1], frames, axis=0), [], path.iterations)
