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
``AGREE`` of its median step. A walk that travels (keyed hips that carry the legs,
moved on by a step each cycle, the feet's targets with them) repeats as its chains see
it: the inputs are compared as seen from the frames the held columns place
(:func:`cycle_inputs`), and every frame keeps its own held values. The two cycles'
passes track their grid over one cycle, the second taking the first's candidates
(``Search.period``, ``candidates.GridTracks``): their paths then agree over most of the
cycle (arm7's loops, seeds 2-9: on 418-1,000 frames of the 1,000 exactly, against 5-609
within ``AGREE`` tracking both). With poles (repeating with the targets), the path
swung toward them is made alike too (:func:`alike`): the swing's ends differed from the
cycles between (arm7 with a pole, up to 0.068 rad; in Blender's bones, 0.17). Frames:
world; coordinates rad and m.
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
# sinusoid of whole periods differs by rounding (about 1e-14), a walk that travels
# (Blender's Cycles modifier with an offset, float32) by its rounding (about 1e-7 m)
REPEAT = 1e-6
# candidate periods (frames where the first frames' inputs recur) checked in full, at
# most: a clip that returns to its first pose now and then without repeating costs a
# pass over it each
CANDIDATES = 16
# two cycles agree at a phase where they differ by at most this share of the planned
# path's median step (every joint; the nearest way for charts): the seam's step is
# then at most this much larger than the plan's own. arm7's loops agree within 0.03 of
# it; a biped's two legs walking on (the hips travelling), whose cheap pass places its
# coarse frames by the targets' world motion, cycle after cycle 0.17-0.20 of it apart
AGREE = 0.25


def cycle_inputs(model: BatchedKinematics | None, targets: Array, held: Array | None
                 ) -> Array:  # fmt: skip
    """Per frame what its solve depends on (F, K): ``targets`` (F, m, 4, 4) (world, m)
    and ``held`` (F, n) (rad, m; or None) as they are; but where held columns alone
    place the frames the chains hang from (``model.prefix_t``: keyed hips that carry the
    legs), those frames count only as seen from the first of them: the targets and the
    other frames in its frame, and the held columns below them. So a walk that travels
    (the hips and the feet's targets moved on by a step each cycle) repeats where its
    steps do, and the solved columns with it."""
    frames = len(targets)
    rows = targets.reshape(frames, -1)
    if held is None:
        return rows
    if model is None:
        return np.hstack([rows, held.reshape(frames, -1)])
    base = model.prefix_t(np.ascontiguousarray(held.T))
    if base is None:  # the held columns' values as they are (the others mean nothing)
        return np.hstack([rows, held[:, model.held]])
    frames_of = np.moveaxis(base, -1, 0)  # (F, A, 3, 4): the anchors' [R p], world
    inv = np.swapaxes(frames_of[:, :1, :, :3], -1, -2)  # the first anchor's R^T
    at = frames_of[:, :1, :, 3]
    seen_t = inv @ targets[..., :3, :]  # (F, m, 3, 4): rotations, and positions...
    seen_t[..., 3] = np.einsum("fmij,fmj->fmi", inv, targets[..., :3, 3] - at)
    seen_a = inv @ frames_of[:, 1:]
    seen_a[..., 3] = np.einsum("faij,faj->fai", inv, frames_of[:, 1:, :, 3] - at)
    below = np.setdiff1d(np.flatnonzero(model.held), model.prefix_cols)
    return np.hstack([seen_t.reshape(frames, -1), seen_a.reshape(frames, -1),
                      held[:, below]])


def period(targets: Array, held: Array | None, model: BatchedKinematics | None = None,
           points: Array | None = None) -> int | None:
    """The smallest ``P`` with ``2 * P <= F`` for which a clip's inputs repeat every
    ``P`` frames (within ``REPEAT``), or None: ``targets`` (F, m, 4, 4) (world, m),
    ``held`` (F, n) (rad, m; or None) and ``points`` (F, P, 3) (world, m; poles, or
    None), as ``model``'s solves see them (:func:`cycle_inputs`, the points as the
    targets' positions; without a model, as they are). A clip that stands still has
    ``P`` 1."""
    frames = len(targets)
    if frames < 2:
        return None
    if points is not None:  # each point as a target where only its position counts
        at = np.zeros((frames, points.shape[1], 4, 4))
        at[..., :3, 3] = points
        targets = np.concatenate([targets, at], axis=1)
    rows = cycle_inputs(model, targets, held)
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
    of ``q`` (two cycles or more of its planned path, (S, n), rad and m) it takes: the
    cycle of ``q`` from the first frame ``s`` where one planned cycle agrees with the
    next (``AGREE``), repeated; with ``pinned`` (the path joins a given start), the
    frames before ``s`` are ``q``'s own. None where no two cycles agree."""
    median = float(np.median(frame_steps(model, q, solved)))
    for c in range(len(q) // cycle - 1):
        a = c * cycle
        apart = pair_steps(model, q[a:a + cycle], q[a + cycle:a + 2 * cycle], solved)
        phase = int(np.argmin(apart))
        if apart[phase] <= AGREE * median:
            seam = a + phase
            f = np.arange(frames)
            source = seam + (f - seam) % cycle
            return np.where(f < seam, f, source) if pinned else source
    return None


def cyclic_path(model: BatchedKinematics, problem: Problem, solved: NDArray[np.bool_],
                plan: Callable[[int], PathResult | None], cycle: int, pinned: bool
                ) -> PathResult | None:  # fmt: skip
    """The path of a clip that repeats every ``cycle`` frames (:func:`period`;
    ``problem``: its frames'): ``plan(count)`` plans its first ``count`` frames (two
    cycles, or the whole clip where that is shorter than three; None: no answer, as a
    cheap pass may give), and a cycle where two agree (:func:`cycle_sources`) is
    repeated; where the two agree nowhere, the whole clip as ``plan`` plans it, a cycle
    of it repeated where two of its cycles agree (a greedy cheap pass may settle only
    after a few). Every frame's errors are its own; ``iterations`` holds the planning's
    work on the frames planned."""
    frames = len(problem.targets)
    span = frames if frames < 3 * cycle else 2 * cycle
    part = plan(span)
    if part is None:
        return None
    work = np.zeros(frames, dtype=np.int64)
    work[:span] = part.iterations
    source = cycle_sources(model, part.q, solved, cycle, frames, pinned)
    if source is None and span < frames:
        whole = plan(frames)
        if whole is None:
            return None
        part, work = whole, whole.iterations + work  # the two cycles were work too
        source = cycle_sources(model, part.q, solved, cycle, frames, pinned)
    if source is None:
        part.iterations = work
        return part
    return repeated(model, problem, part, source, work)


def alike(model: BatchedKinematics, problem: Problem, solved: NDArray[np.bool_],
          path: PathResult, cycle: int | None, pinned: bool) -> PathResult:
    """``path`` (all of ``problem``'s frames) with every cycle alike where its inputs
    repeat every ``cycle`` frames (:func:`period`; None: they do not) and two of its
    cycles agree (:func:`cycle_sources`: one repeated from there), else as it is."""
    source = None if cycle is None or cycle < 2 else \
        cycle_sources(model, path.q, solved, cycle, len(path.q), pinned)
    return path if source is None else repeated(model, problem, path, source,
                                                path.iterations)


def repeated(model: BatchedKinematics, problem: Problem, path: PathResult, source: Index,
             work: NDArray[np.int64]) -> PathResult:
    """The clip of ``problem``'s frames that takes, per frame, ``path``'s frame
    ``source`` (:func:`cycle_sources`), with its own held values and errors, hinges
    without limits wound on over the seams; ``work``: the LM iterations per frame."""
    q = path.q[source]
    if model.wraps.any():  # hinges without limits wind on over the seams (a wheel turning
        # once a cycle is a turn further each cycle), not a turn back at each
        q[:, model.wraps] = np.unwrap(q[:, model.wraps], axis=0)
    if problem.held is not None:  # each frame's own held values (a walk's hips travel)
        q[:, problem.held_cols] = problem.held.T
    res = levenberg_marquardt(model, problem, q, 0)  # each frame's own errors
    # a frame steps as the planned path steps into its source (at a seam, into the
    # frame one cycle after the source)
    into = np.r_[0, np.where(source[1:] == source[:-1] + 1, source[1:], source[:-1] + 1)]
    jumps = np.flatnonzero(np.isin(into, np.asarray(path.jumps, dtype=np.intp)))
    return PathResult(q, res.converged, res.position_error, res.orientation_error,
                      [int(j) for j in jumps if j > 0], work)
