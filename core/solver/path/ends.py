"""Where a trajectory's path starts and ends: the given start, or the first frame's
solution reached from the pose before it, and the last frame's reached from the pose
after it (the keys a re-baked part of an animation joins). Frames: world; units:
metres, radians."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kinematics import BatchedKinematics
from ..lm.loop import levenberg_marquardt
from ..lm.poles import PoleSet
from ..lm.problem import Problem
from ..settings import RobustOptions, SolverSettings
from .fill import SLOW_STALL_WINDOW

Array = NDArray[np.float64]


def path_ends(model: BatchedKinematics, targets: Array,
              weights: Sequence[tuple[float, float]] | None,
              settings: SolverSettings | None, opts: RobustOptions,
              start: ArrayLike | None, before: ArrayLike | None, after: ArrayLike | None,
              held: ArrayLike | None, poles: PoleSet | None
              ) -> tuple[Array | None, Array | None, Array | None]:  # fmt: skip
    """The held values (F, n), and where the path must start and end (n,) or None
    (``plan.solve_path``'s ``start``, ``before`` and ``after``)."""
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
