"""Clips whose inputs repeat: a cycle (a walk cycle's targets under a Cycles modifier,
an NLA strip repeated) baked over and over is planned over two cycles and repeated from
where the two agree, so that every cycle is baked alike.

Planned whole, such a clip's path drifted along the self-motion from one cycle to the
next: arm7, a 1,000-frame loop of bench/run.py's B repeated five times (the CLI's
tolerances, seeds 2-9), consecutive cycles differed by 0.24-3.76 rad on some frame of the
same targets, though Blender's own IK, which solves each frame from the rest pose, poses
every cycle alike. A single cycle planned alone rarely ends where it starts (1 of those
8 seeds), but two cycles planned together meet: on every seed the second cycle's path
passes within 0.0006 rad of the first's at some phase of the cycle (on 18-565 of its
1,000 frames within 0.01 rad), where both run into the same limits or the search chose
the same candidates. From that phase on the first cycle's path is repeated; its seam (the
step into that phase, one cycle on) is the planned path's own step there, give or take
``AGREE`` of its median step. Frames: world; coordinates rad and m.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from ..kinematics import BatchedKinematics
from ..lm.loop import levenberg_marquardt
from ..lm.problem import Index, Problem
from .search import PathResult, frame_steps, pair_steps

Array = NDArray[np.float64]

# inputs (targets' entries, m and unitless; held values, rad and m) that differ by at
# most this repeat: a curve evaluated at cycled times gives the same floats, a
# sinusoid of whole periods differs by rounding (about 1e-14)
REPEAT = 1e-9
# candidate periods (frames where the first frames' inputs recur) checked in full, at
# most: a clip that returns to its first pose now and then without repeating costs a
# pass over it each
CANDIDATES = 16
# the two cycles agree at a phase where they differ by at most this share of the
# planned path's median step (every joint; the nearest way for charts)
AGREE = 0.1


def period(targets: Array, held: Array | None) -> int | None:
    """The smallest ``P`` with ``2 * P <= F`` for which ``targets`` (F, m, 4, 4) (world,
    m) and ``held`` (F, n) (rad, m; or None) repeat every ``P`` frames (within
    ``REPEAT``), or None. A clip that stands still has ``P`` 1."""
    frames = len(targets)
    if frames < 2:
        return None
    rows = targets.reshape(frames, -1)
    if held is not None:
        rows = np.hstack([rows, held.reshape(frames, -1)])
    half = frames // 2
    # where the first two frames recur
    recur = np.max(np.abs(rows[1:half + 1] - rows[0]), axis=1) <= REPEAT
    recur[:-1] &= np.max(np.abs(rows[2:half + 1] - rows[1]), axis=1) <= REPEAT
    for p in (np.flatnonzero(recur) + 1)[:CANDIDATES]:
        if np.max(np.abs(rows[p:] - rows[:-p])) <= REPEAT:
            return int(p)
    return None


def cycle_sources(model: BatchedKinematics, q: Array, solved: NDArray[np.bool_],
                  cycle: int, frames: int, pinned: bool) -> Index | None:
    """Per frame of a clip of ``frames`` frames that repeats every ``cycle``, the frame
    of ``q`` (two cycles or more of its planned path, (S, n), rad and m) it takes: from
    the first phase ``t`` where the two cycles agree (``AGREE``), frame ``t + k`` of the
    first; before it, the second cycle's frames (every cycle alike), or with ``pinned``
    (the path joins a given start) the first's own. None where they agree nowhere."""
    apart = pair_steps(model, q[:cycle], q[cycle:2 * cycle], solved)
    median = float(np.median(frame_steps(model, q, solved)))
    phase = int(np.argmin(apart))
    if apart[phase] > AGREE * median:
        return None
    f = np.arange(frames)
    source = phase + (f - phase) % cycle
    if phase and not pinned:
        return source
    return np.where(f < phase, f, source)


def cyclic_path(model: BatchedKinematics, problem: Problem, solved: NDArray[np.bool_],
                plan: Callable[[int], PathResult | None], cycle: int, pinned: bool
                ) -> PathResult | None:  # fmt: skip
    """The path of a clip that repeats every ``cycle`` frames (:func:`period`;
    ``problem``: its frames'): ``plan(count)`` plans its first ``count`` frames (two
    cycles, or the whole clip where that is shorter than three; None: no answer, as a
    cheap pass may give), and the cycle where they agree (:func:`cycle_sources`) is
    repeated; where they agree nowhere, the whole clip as ``plan`` plans it. Every
    frame's errors are its own; ``iterations`` holds the planning's work on the frames
    planned."""
    frames = len(problem.targets)
    span = frames if frames < 3 * cycle else 2 * cycle
    part = plan(span)
    if part is None:
        return None
    source = cycle_sources(model, part.q, solved, cycle, frames, pinned)
    work = np.zeros(frames, dtype=np.int64)
    work[:span] = part.iterations
    if source is None:
        if span == frames:
            return part
        whole = plan(frames)
        if whole is not None:
            whole.iterations = whole.iterations + work  # the two cycles were work too
        return whole
    q = part.q[source]
    res = levenberg_marquardt(model, problem, q, 0)  # each frame's own errors
    # a frame steps as the planned path steps into its source (at a seam, into the
    # frame one cycle after the source)
    into = np.r_[0, np.where(source[1:] == source[:-1] + 1, source[1:], source[:-1] + 1)]
    jumps = np.flatnonzero(np.isin(into, np.asarray(part.jumps, dtype=np.intp)))
    return PathResult(q, res.converged, res.position_error, res.orientation_error,
                      [int(j) for j in jumps if j > 0], work)
