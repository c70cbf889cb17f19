"""Flip-free trajectories: ``solve_path``, the robust method's answer to a whole clip.

Frames: world; units: metres, radians. The bake knows every target in advance, so a
trajectory is solved as one problem: candidates per coarse frame (``candidates``), the
least-motion path through them (``ladder``), every frame filled (``fill``), its peaks
relaxed (``relax``); with poles, that path is then swung toward them (``swing``).
Frames whose step from the previous frame is still a jump (more than ``flip_factor``
times the median step of the ten frames on each side) are reported: no continuous path
was found there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kinematics import BatchedKinematics
from ..lm.loop import levenberg_marquardt
from ..lm.poles import PoleSet
from ..lm.problem import Problem
from ..settings import RobustOptions, SolverSettings
from .cheap import cheap_pass
from .fill import SLOW_STALL_WINDOW
from .ladder import ladder_path
from .relax import relax_peaks
from .search import PathResult, Search, frame_steps
from .swing import swing_to_poles

Array = NDArray[np.float64]

LANE_FRAMES = 12  # fewest coarse frames per lane


def solve_path(model: BatchedKinematics, targets: ArrayLike,
               weights: Sequence[tuple[float, float]] | None = None,
               settings: SolverSettings | None = None,
               options: RobustOptions | None = None,
               start: ArrayLike | None = None, before: ArrayLike | None = None,
               after: ArrayLike | None = None, held: ArrayLike | None = None,
               poles: PoleSet | None = None,
               progress: Callable[[float], None] | None = None) -> PathResult:  # fmt: skip
    """Solve a trajectory: ``targets`` (F, m, 4, 4) world transforms (metres), one per
    frame and effector; ``held`` (F, n): the values of the model's held columns per
    frame (rad, m; None: the T-pose), which the path keeps and its motion leaves out;
    ``poles`` per frame (:mod:`..lm.poles`). Returns per-frame coordinates, convergence,
    errors, and the frames where no continuous path was found. When a solve leaves
    jumps or unconverged frames, it is done again with coarse frames twice as dense
    (``options.retries`` times) and the better answer kept. Deterministic for a given
    ``options.seed``.

    Where the path starts, coordinates (n,) (rad, m): ``start``, a solution of the first
    frame (the last frame of the part of a trajectory solved before); else, with
    ``before``, the pose on the frame before the first (the keys a re-baked part of an
    animation follows), the first frame's solution LM reaches from it, pulled toward it,
    when it reaches one; else the T-pose if that is already on the first target. Where
    it ends: with ``after``, the pose on the frame after the last (the keys that follow
    a re-baked part), the last frame's solution LM reaches from it, when it reaches one;
    else where the least motion leads.

    ``progress(fraction)`` is told the fraction (0..1) of the solve done, often (after
    every batch of LM iterations); an exception raised in it ends the solve."""
    opts = options or RobustOptions()
    targets = np.asarray(targets, dtype=float)
    if poles is not None:  # planned without them, then swung toward them (``swing``)
        tick = None if progress is None else (lambda x: progress(0.9 * x))
        path = _plan(model, targets, weights, settings, opts, start, before, after, held,
                     tick)
        poled = Problem(model, targets, weights, settings, opts, held, poles)
        plain = Problem(model, targets, weights, settings, opts, held)
        out = swing_to_poles(model, poled, plain, path, start is not None or
                             before is not None, after is not None, opts.flip_factor)
        if progress is not None:
            progress(1.0)
        return out
    return _plan(model, targets, weights, settings, opts, start, before, after, held,
                 progress)


def _plan(model: BatchedKinematics, targets: Array,
          weights: Sequence[tuple[float, float]] | None, settings: SolverSettings | None,
          opts: RobustOptions, start: ArrayLike | None, before: ArrayLike | None,
          after: ArrayLike | None, held: ArrayLike | None,
          progress: Callable[[float], None] | None) -> PathResult:  # fmt: skip
    """:func:`solve_path` without poles."""
    held, first, last = _ends(model, targets, weights, settings, opts, start, before, after,
                              held, None)

    def one_pass(stride: int, motion: float, lane_frames: int, span: tuple[float, float]
                 ) -> PathResult:  # fmt: skip
        search = Search(model, targets, weights, settings, opts, held)
        search.progress, search.span = progress, span
        return ladder_path(search, stride, motion, lane_frames, first, last)

    stride, motion, lane_frames = opts.stride, opts.coarse_motion, LANE_FRAMES
    search = Search(model, targets, weights, settings, opts, held)
    search.progress, search.span = progress, (0.0, 0.2)
    # a self-motion of one dimension is what the grid's lanes search best (each cell a
    # point, lanes side by side); there a greedy track's drift along it can force a fast
    # swivel later that the step test does not see, so only the search is trusted
    cheap = None if search.redundancy() == 1 else cheap_pass(search, stride, motion, first,
                                                             last)
    if cheap is not None:
        if progress is not None:
            progress(1.0)
        return cheap
    best = one_pass(stride, motion, lane_frames, (0.2, 1.0 if opts.retries < 1 else 0.7))
    best.iterations = best.iterations + search.work
    work = best.iterations
    for r in range(opts.retries):
        if not best.jumps and best.converged.all():
            break
        stride, motion, lane_frames = max(stride // 2, 1), motion / 2, 2 * lane_frames
        again = one_pass(stride, motion, lane_frames, (0.7 + 0.3 * r / opts.retries,
                                                       0.7 + 0.3 * (r + 1) / opts.retries))
        work = work + again.iterations  # the pass not kept was work too
        if _score(model, again) < _score(model, best):
            best = again
    best.iterations = work
    best = relax_peaks(model, search.problem, best, opts.flip_factor)
    if progress is not None:
        progress(1.0)
    return best


def cheap_path(model: BatchedKinematics, targets: ArrayLike,
               weights: Sequence[tuple[float, float]] | None = None,
               settings: SolverSettings | None = None,
               options: RobustOptions | None = None,
               start: ArrayLike | None = None, before: ArrayLike | None = None,
               after: ArrayLike | None = None, held: ArrayLike | None = None,
               poles: PoleSet | None = None) -> PathResult | None:  # fmt: skip
    """:func:`solve_path`'s cheap pass alone (same arguments): its answer where it is
    plainly continuous, else None (no search). For effectors that are solved apart but
    may take the cheap pass together, in one batch (the bake's parts)."""
    opts = options or RobustOptions()
    targets = np.asarray(targets, dtype=float)
    held, first, last = _ends(model, targets, weights, settings, opts, start, before, after,
                              held, poles)
    search = Search(model, targets, weights, settings, opts, held, poles)
    return cheap_pass(search, opts.stride, opts.coarse_motion, first, last)


def _ends(model: BatchedKinematics, targets: Array,
          weights: Sequence[tuple[float, float]] | None, settings: SolverSettings | None,
          opts: RobustOptions, start: ArrayLike | None, before: ArrayLike | None,
          after: ArrayLike | None, held: ArrayLike | None, poles: PoleSet | None
          ) -> tuple[Array | None, Array | None, Array | None]:  # fmt: skip
    """The held values (F, n), and where the path must start and end (n,) or None
    (:func:`solve_path`'s ``start``, ``before`` and ``after``)."""
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


def _score(model: BatchedKinematics, res: PathResult) -> tuple[int, int, float]:
    """Worse answers score higher: unconverged frames, then jumps, then the largest step
    of a solved column."""
    steps = frame_steps(model, res.q, ~model.held)
    return (int(np.count_nonzero(~res.converged)), len(res.jumps),
            float(np.max(steps, initial=0.0)))
