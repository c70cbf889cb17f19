"""Peaks of a path's steps relaxed along the self-motion.

A planned path may take one step, or a few, far larger than the steps around it (a
coarse grid's corner, a swing that turns fast). Each frame at either end of such a step
is solved again for its targets, pulled toward the midpoint of its two neighbours in
the targets' null space (``Problem.with_posture``: the solution nearest that midpoint),
odd and even frames in turn; an answer is kept where the larger of its two steps
shrinks. A few rounds spread a peak over the frames around it where the self-motion
allows it; a frame whose answer was not kept is not solved again until it or a
neighbour moves (the same start and pull give the same answer). Coordinates rad and m.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..kinematics import BatchedKinematics
from ..lm.loop import levenberg_marquardt
from ..lm.problem import Problem
from .search import (
    LOCAL_WINDOW,
    PathResult,
    frame_steps,
    jump_frames,
    local_steps,
    pair_steps,
)

Array = NDArray[np.float64]

PEAK = 1.2  # a step this many times the local median step of the path is a peak
WINDOW = LOCAL_WINDOW  # ... the median of this many steps on each side (10)
# ... and of this many where the self-motion has more than one dimension: there a path
# travels along it in a hump of fast steps, not one (two arm7s on a solved turntable:
# 20-30 frames at 1.4-2.1x the truth's largest step), whose own steps are the 10 around
# each of its steps; against 60 the hump stands out and is spread over the frames
# around it (bench/self_motion.py's turntable clips, seeds 1-80: 2 over twice the
# truth's largest step, up to 2.14x, -> none, up to 1.93x, in the same time; its other
# cases, seeds 1-40, the same largest steps, the position-only ones in 7 % more time)
WIDE_WINDOW = 60
ROUNDS = 8  # rounds of relaxing the peaks, at most
RELAX_ITERATIONS = 12  # LM budget of a frame in a round
# ... which stops once an accepted step lowers its energy (targets and the pull toward the
# midpoint) by less than this share of it: pulled toward a posture a row never meets, it
# ran the whole budget where its answer moved less than 1e-9 rad after four iterations
RELAX_STATIONARY = 1e-6


def relax_peaks(model: BatchedKinematics, problem: Problem, path: PathResult,
                flip_factor: float, keep: NDArray[np.bool_] | None = None,
                cuts: NDArray[np.intp] | None = None, window: int = WINDOW
                ) -> PathResult:  # fmt: skip
    """``path`` (of ``problem``'s frames) with its peaks relaxed (module docstring), in
    place; its jumps measured again. Its first and last frames stay, and the frames in
    ``keep`` (F,) (on their poles). A step into one of ``cuts`` (frames the targets jump
    into, ``stretches.target_cuts``) is the targets' doing and no peak: relaxed, it was
    spread over the frames before it (arm7 with a pole and a cut: steps of 0.07-0.13 rad
    on the six frames before, 2.8x the truth's largest). ``window``: a peak's step is
    measured against the median of this many steps on each side (``WIDE_WINDOW``)."""
    q, frames = path.q, len(path.q)
    solved = ~model.held
    budget = min(problem.settings.max_iterations, RELAX_ITERATIONS)
    # frames whose last answer was not kept, nor they or a neighbour moved since
    settled = np.zeros(frames, dtype=bool)
    for _ in range(ROUNDS):
        steps = frame_steps(model, q, solved)
        conv = path.converged
        # a step into or out of a frame out of reach is the targets' doing: it stays
        peaks = np.flatnonzero((steps > PEAK * np.maximum(local_steps(steps, window), 1e-9))
                               & conv[1:] & conv[:-1])
        if cuts is not None and cuts.size:
            peaks = peaks[~np.isin(peaks + 1, cuts)]
        ends = np.union1d(peaks, peaks + 1)
        ends = ends[(ends > 0) & (ends < frames - 1)]
        ends = ends[conv[ends] & ~settled[ends] & (True if keep is None else ~keep[ends])]
        if ends.size == 0:
            break
        kept = 0
        for parity in (0, 1):
            rows = ends[ends % 2 == parity]
            if rows.size == 0:
                continue
            before, after = q[rows - 1], model.nearest(q[rows - 1], q[rows + 1])
            mid = 0.5 * (before + after)
            posture = np.zeros((frames, model.n))
            posture[rows] = mid
            res = levenberg_marquardt(model, problem.with_posture(posture), q[rows], budget,
                                      rows=rows, stationary=RELAX_STATIONARY)
            path.iterations[rows] += res.iterations
            old = np.maximum(pair_steps(model, before, q[rows], solved),
                             pair_steps(model, q[rows], after, solved))
            new = np.maximum(pair_steps(model, before, res.q, solved),
                             pair_steps(model, res.q, after, solved))
            take = res.converged & (new < old)
            settled[rows[~take]] = True
            moved = rows[take]
            settled[np.r_[moved - 1, moved, moved + 1].clip(0, frames - 1)] = False
            q[rows[take]] = res.q[take]
            path.position_error[rows[take]] = res.position_error[take]
            path.orientation_error[rows[take]] = res.orientation_error[take]
            kept += int(take.sum())
        if kept == 0:
            break
    path.jumps = [int(j) for j in jump_frames(frame_steps(model, q, solved), flip_factor)]
    return path

