"""Where a clip is planned a stretch at a time: the frames its targets cut at
(:func:`target_cuts`), and the stretches its targets leave reach through (a target
dragged beyond the chain's reach and back): found after a first pass, and followed frame
by frame instead of searched.

Planned whole, a path anticipated such a stretch: it swung, or jumped hundreds of frames
before it, to reach the last frames a stretched arm reaches on the way out, and came back
on a branch it had to leave later (arm7, bench/held_out.py's ramps, seeds 400-447: 28 of
48 clips with a step over twice the truth's largest outside the ramp, 9 over ten times).
``plan`` now cuts the clip around each stretch and plans the rest a stretch at a time;
the stretch itself is followed from the pose before it and from the pose after it, each
frame solved from the one before (the closest approach), and the two joined where they
together reach the most frames with the least step between them. Coordinates rad and m.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..kinematics import BatchedKinematics
from ..lm.loop import levenberg_marquardt
from ..lm.problem import Problem
from .fill import SLOW_STALL_WINDOW, SLOW_STATIONARY
from .search import PathResult, Search, join_span, jump_frames, pair_steps

Array = NDArray[np.float64]

STRETCH_FRAMES = 5  # unconverged frames in a row, at least, to be a stretch out of reach
# a step of the targets' motion over this many times the clip's median is fast (arm7's
# ramps: the steps out to 3x the distance are 10-50 times it)
STRETCH_FAST = 3.0
# a stretch is also grown over the steps fast against the part of the clip beside it, whose
# median step counts as this share of the clip's at least (``_grown_locally``): a ramp back
# into reach at 2.7x the clip's median step, but 5x the part after it, was planned with
# that part, which crossed to another branch on the way back and jumped 0.71 rad 120
# frames later (arm7, a 990-frame test-generator clip; tests/core/test_stretches.py)
LOCAL_FLOOR = 0.5


def target_cuts(search: Search) -> NDArray[np.intp]:
    """The frames ``search``'s targets jump into (a cut in the clip): for every effector
    whose targets count, a step of what counts of its target's motion
    (:meth:`~.search.Search.counted_motion`) of ``coarse_motion`` or more that is also a
    jump by the joints' rule (over ``flip_factor`` times the median of the ten steps on
    each side) and over ``flip_factor`` times the clip's own large steps (the 90th
    percentile of its steps that move at all). So stepped keys are no cuts: every key
    is such a step, and the path between them is planned as one (arm7, 600 frames, a
    key every 6 frames: cut there, each stretch planned apart swung the arm 3.8-5.3 rad
    at a key where the clip planned whole stepped 0.35-0.46). Where one effector's
    target jumps and another's moves on smoothly (two hands on one solved spine), the
    clip is not cut: the other hand's path goes on. A position-only target's turn is
    no cut. Smooth clips have none (arm7, the loops and paths of bench/held_out.py:
    steps at most 2.3x the clip's median and 1.2x their neighbours')."""
    opts = search.opts
    cut: NDArray[np.bool_] | None = None
    for move in search.counted_motion():
        here = np.zeros(search.frames, dtype=bool)
        jumps = jump_frames(move, opts.flip_factor)
        moving = move[move > 1e-9]
        large = float(np.percentile(moving, 90)) if moving.size else 0.0
        step = move[jumps - 1]
        here[jumps[(step >= opts.coarse_motion) & (step > opts.flip_factor * large)]] = True
        cut = here if cut is None else cut & here
    return np.zeros(0, dtype=np.intp) if cut is None else np.flatnonzero(cut)


def fast_steps(motion: Array) -> NDArray[np.bool_]:
    """Per step (``motion`` (F-1,): :meth:`~.search.Search.motion`, metres over the
    chain's length scale plus radians) whether the targets move fast there: over
    ``STRETCH_FAST`` times the median step."""
    if motion.size == 0:
        return np.zeros(0, dtype=bool)
    return np.asarray(motion > STRETCH_FAST * float(np.median(motion)))


def stretches_out(search: Search, converged: NDArray[np.bool_],
                  far: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """The stretches (first, last frame) of ``STRETCH_FRAMES`` or more frames a first
    pass left unconverged (``converged`` (F,)) that the targets enter or leave fast (a
    step of :meth:`~.search.Search.motion` over ``STRETCH_FAST`` times its median) or
    that hold a frame ``far`` (F,) marks beyond reach, each grown over the fast steps on
    either side (the way out and back), then over those fast against the part of the clip
    beside it (:func:`_grown_locally`); stretches that meet are one. Other unconverged
    frames are the search's to reach (its retries)."""
    frames = len(converged)
    bad = np.flatnonzero(~converged)
    if frames < 2 or bad.size == 0:
        return []
    move = search.motion()  # per step into frame i + 1
    fast = fast_steps(move)
    out: list[tuple[int, int]] = []
    breaks = np.flatnonzero(np.diff(bad) > 1)
    for a, b in zip(bad[np.r_[0, breaks + 1]], bad[np.r_[breaks, bad.size - 1]], strict=True):
        a, b = int(a), int(b)
        entered = a > 0 and bool(fast[a - 1])
        left = b + 1 < frames and bool(fast[b])
        if b - a + 1 < STRETCH_FRAMES or not (entered or left or far[a:b + 1].any()):
            continue
        while a > 0 and fast[a - 1]:
            a -= 1
        while b + 1 < frames and fast[b]:
            b += 1
        join_span(out, a, b)
    return _grown_locally(out, move)


def _grown_locally(stretches: list[tuple[int, int]], motion: Array) -> list[tuple[int, int]]:
    """``stretches`` (first, last frame) grown further over the steps on either side that
    are fast against the part of the clip beside them: over ``STRETCH_FAST`` times the
    median step (``motion`` (F-1,), per step into frame i + 1: metres over the chain's
    length scale plus radians, :meth:`~.search.Search.motion`) between the stretch and
    the one before or after it (or the clip's end), that median taken as
    ``LOCAL_FLOOR`` of the clip's at least (a part that holds still makes no step
    fast)."""
    frames = len(motion) + 1
    floor = LOCAL_FLOOR * float(np.median(motion)) if motion.size else 0.0
    out: list[tuple[int, int]] = []
    for k, (a, b) in enumerate(stretches):
        lo = stretches[k - 1][1] + 1 if k else 0
        hi = stretches[k + 1][0] - 1 if k + 1 < len(stretches) else frames - 1
        if a - lo >= 2:  # the part before: the steps into frames lo + 1 .. a - 1
            ref = STRETCH_FAST * max(float(np.median(motion[lo:a - 1])), floor)
            while a > lo + 1 and motion[a - 1] > ref:
                a -= 1
        if hi - b >= 2:  # the part after: the steps into frames b + 2 .. hi
            ref = STRETCH_FAST * max(float(np.median(motion[b + 1:hi])), floor)
            while b + 1 < hi and motion[b] > ref:
                b += 1
        join_span(out, a, b)
    return out


def followed_from(model: BatchedKinematics, problem: Problem, pose: Array,
                  backward: bool = False) -> PathResult:
    """``problem``'s frames (a stretch) followed from ``pose`` (n,) (coordinates, rad and
    m): each frame solved from the one before (the LM to its slow stall rule, or until
    a step stops paying, ``fill.SLOW_STATIONARY``: the closest approach where it
    misses), the first from ``pose``; ``backward``: from the
    last frame to the first. The arm stretches toward targets beyond reach and comes
    back as they do, in one motion. No jumps are named (the caller measures the whole
    path's)."""
    f, m = problem.count, len(model.effectors)
    q = np.zeros((f, model.n))
    conv = np.zeros(f, dtype=bool)
    pe, re = np.zeros((f, m)), np.zeros((f, m))
    its = np.zeros(f, dtype=np.int64)
    at = np.asarray(pose, dtype=float)
    for i in (range(f - 1, -1, -1) if backward else range(f)):
        res = levenberg_marquardt(model, problem, at[None], problem.settings.max_iterations,
                                  rows=np.array([i]), stall_window=SLOW_STALL_WINDOW,
                                  stationary=SLOW_STATIONARY)
        at = q[i] = res.q[0]
        conv[i], pe[i], re[i], its[i] = (res.converged[0], res.position_error[0],
                                          res.orientation_error[0], res.iterations[0])
    return PathResult(q, conv, pe, re, [], its)


def followed_both_ways(model: BatchedKinematics, problem: Problem, before: Array,
                       ahead: PathResult, after: Array, motion: Array) -> PathResult:
    """A stretch (``problem``'s frames) followed from ``before`` (``ahead``, from
    :func:`followed_from`) and back from ``after`` (n,), the poses (coordinates, rad and
    m) on either side of it, joined: ``ahead`` up to a frame and the way back from
    there, where together they reach the most frames and, among those, where the one
    step between them (the largest column's, rad or m; out of ``before`` or into
    ``after`` at the ends) is the least against the targets' motion there (``motion``
    (F + 1,): :meth:`~.search.Search.motion` of the steps into each of the stretch's
    frames and into the frame after it, world positions over the chain's length scale
    plus turns in rad). So the arm meets the targets coming back into reach from the
    path after them, and a jump the two ways leave is where the targets move fast, not
    where they wait beyond reach. The work of both."""
    back = followed_from(model, problem, after, backward=True)
    f = len(ahead.q)
    solved = ~model.held
    # per frame s (0..f) where the way back takes over: [0, s) ahead's, [s, f) back's
    missed = np.r_[0, np.cumsum(~ahead.converged)] + \
        np.r_[np.cumsum((~back.converged)[::-1])[::-1], 0]
    step = np.zeros(f + 1)
    step[0] = pair_steps(model, before[None], back.q[:1], solved)[0]
    step[f] = pair_steps(model, ahead.q[-1:], after[None], solved)[0]
    if f > 1:
        step[1:f] = pair_steps(model, ahead.q[:-1], back.q[1:], solved)
    fewest = np.flatnonzero(missed == missed.min())
    s = int(fewest[np.argmin(step[fewest] / np.maximum(motion[fewest], 1e-12))])
    return PathResult(np.concatenate([ahead.q[:s], back.q[s:]]),
                      np.concatenate([ahead.converged[:s], back.converged[s:]]),
                      np.concatenate([ahead.position_error[:s], back.position_error[s:]]),
                      np.concatenate([ahead.orientation_error[:s],
                                      back.orientation_error[s:]]),
                      [], ahead.iterations + back.iterations)
