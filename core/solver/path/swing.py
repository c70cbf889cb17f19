"""Poles on a planned path: the pole-free, flip-free path swung toward its poles,
without a jump.

A pole (Blender's IK pole, :mod:`..lm.poles`) picks a point of the chain's self-motion
(its swivel about the line from the chain's first joint to the target). Asked of each
frame alone, the answer is discontinuous where the pole's swivel leaves what the limits
allow (the nearest allowed swivel jumps from one end of the allowed range to the other),
where the pole crosses that line, or where another joint's limit stops the swing; and a
search that counts the pole as one more error row has no self-motion left to search and
tracks isolated branches. So ``solve.solve_path`` plans the path without the poles and
:func:`swing_to_poles` turns it toward them:

1. every frame swings from the planned pose toward its pole, in the targets' null space,
   as far as the limits allow, pulled toward the planned pose (the *polished* frame: on
   the pole where it can be, there nearest the plan);
2. a frame takes its polished pose where the polished frames move on continuously;
   around a jump of theirs the frames swing only a fraction of the way, down to none
   (the planned pose) on the two frames of the jump, the fraction changing per frame by
   at most ``SWING_PACE`` of the planned path's local median step over the length of the
   swing, so that a jump becomes a swing back to the planned path and out again;
3. a frame swung a share of the way is solved for its targets from that share of the
   straight way from its planned pose to its polished one, and pulled toward it: the
   solution nearest it, kept where it lies near that share (``SHARE_REACH``).

A path whose ends are given (a re-baked part between keys) keeps them and swings in and
out. Frames: world; coordinates rad and m.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..kinematics import BatchedKinematics
from ..lm.loop import EXACT, LMResult, levenberg_marquardt
from ..lm.problem import Problem
from .fill import SLOW_STALL_WINDOW
from .relax import relax_peaks
from .search import PathResult, local_steps

Array = NDArray[np.float64]

# the swing per frame, at most, around a jump of the polished frames: this share of the
# planned path's local median step (rad or m) ...
SWING_PACE = 0.5
# ... and at least this much (rad or m): a path that stands still still swings
MIN_SWING = 1e-3
# swings that change from one frame to the next by more than this many times the
# planned path's local median step are a jump of the polished frames
BREAK = 1.0
# a frame swung a share of the way keeps the solution nearest that share of its swing
# only where it moved at most this many times that share (largest column, plus
# MIN_SWING) from its planned pose; elsewhere it keeps the planned pose. Where the
# straight way to the polished pose cuts across the self-motion, the solution nearest a
# fifth of it can be the polished pose itself: a frame swung all the way beside one not
# swung (arm7, bench/clips.py's clip 17, a pole at (0.6, 0, 1.2): 2.8x the truth's largest
# step at frame 84, where frames 82 and 83, a half and a fifth of the way, landed 0.11
# rad from their planned poses, their whole swing)
SHARE_REACH = 2.0


def swing_to_poles(model: BatchedKinematics, poled: Problem, plain: Problem,
                   path: PathResult, keep_first: bool, keep_last: bool,
                   flip_factor: float, cuts: NDArray[np.intp] | None = None
                   ) -> PathResult:  # fmt: skip
    """``path`` (planned on ``plain``, the problem without poles) swung toward the poles
    of ``poled`` (the same frames with them), as the module docstring says; frames the
    path does not converge on stay. ``keep_first`` / ``keep_last``: the path's first /
    last frame is given and stays; ``cuts``: frames the targets jump into, whose steps
    the swing's relaxing leaves (``relax.relax_peaks``). Returns the new path, its jumps
    measured again."""
    frames = len(path.q)
    if frames == 0:
        return path
    budget = poled.settings.max_iterations
    polish = _polish(model, poled, path.q, budget)
    work = path.iterations + polish.iterations
    solved = ~model.held
    want = model.difference(path.q, polish.q)  # (F, n): the swing each frame asks for
    polished = polish.converged & path.converged
    want[~polished] = 0.0
    asked = path.q + want
    # on the pole: as near as the pull goes where nothing stops it (a pull the limits
    # stop may end anywhere within the tolerance, and elsewhere on the next frame)
    met = np.all(polish.pole_error < 10.0 * EXACT * poled.settings.position_tolerance,
                 axis=1)
    # how much the swing changes per step: the asked frames' motion against the path's
    # (each the nearest way: a chart's wrap is no change)
    moves = model.difference(path.q[:-1], path.q[1:])[:, solved]
    turns = model.difference(asked[:-1], asked[1:])[:, solved] - moves
    share = swing_shares(np.max(np.abs(want[:, solved]), axis=1, initial=0.0),
                         np.max(np.abs(turns), axis=1, initial=0.0),
                         np.max(np.abs(moves), axis=1, initial=0.0), met, flip_factor,
                         keep_first, keep_last)
    q = path.q.copy()
    conv = path.converged.copy()
    pe, re = path.position_error.copy(), path.orientation_error.copy()
    full = share >= 1.0
    q[full] = asked[full]
    took = full & polished  # elsewhere the asked pose is the path's, with its errors
    pe[took], re[took] = polish.position_error[took], polish.orientation_error[took]
    part = np.flatnonzero((share > 0.0) & ~full)
    if part.size:  # a share of the way: the solution nearest that share of the swing
        blend = path.q + share[:, None] * want
        res = levenberg_marquardt(model, plain.with_posture(blend), blend[part], budget,
                                  rows=part, stall_window=SLOW_STALL_WINDOW)
        work[part] += res.iterations
        # kept where it lies near its share of the swing (else the planned pose stays)
        asked_part = np.max(np.abs(share[part, None] * want[part][:, solved]), axis=1)
        moved = np.max(np.abs(model.difference(path.q[part], res.q)[:, solved]), axis=1)
        ok = res.converged & (moved <= SHARE_REACH * asked_part + MIN_SWING)
        q[part[ok]], pe[part[ok]], re[part[ok]] = res.q[ok], res.position_error[ok], \
            res.orientation_error[ok]
    out = PathResult(q, conv, pe, re, [], work)
    # the swing's own peaks (a polished stretch the limits stop, swung in and out)
    # (frames on their poles stay: a stall near a pole is no answer to keep)
    return relax_peaks(model, plain, out, flip_factor, keep=full & met, cuts=cuts)


def _polish(model: BatchedKinematics, poled: Problem, q: Array, budget: int) -> LMResult:
    """Every frame of ``q`` (F, n) swung toward its poles in the targets' null space,
    pulled toward ``q`` (the nearest pose on the poles): first with the pull taken
    exactly in the null space of targets and poles (a few iterations); a frame that does
    not end on its poles (the limits stop the swing) again from ``q`` with the damped
    pull, which also holds it back along the pole's own direction (a swing the limits
    stop then ends near the planned pose, the same way on the next frame)."""
    rows, copy_of = distinct_frames(poled, q)
    pull = poled.as_pole_pull()
    out = levenberg_marquardt(model, pull, q[rows], budget, rows=rows, pull=q[rows],
                              exact_pull=True)
    near = EXACT * poled.settings.position_tolerance
    miss = np.flatnonzero(~np.all(out.pole_error < near, axis=1))
    if miss.size:
        at = rows[miss]
        out.put(miss, levenberg_marquardt(model, pull, q[at], budget, rows=at,
                                          pull=q[at], stall_window=SLOW_STALL_WINDOW))
    if len(rows) == len(q):
        return out
    # a twin takes its first's answer, with its own errors (its inputs may differ by
    # rounding)
    twins = np.setdiff1d(np.arange(len(q)), rows)
    own = levenberg_marquardt(model, pull, out.q[copy_of[twins]], 0, rows=twins)
    work = np.zeros(len(q), dtype=out.iterations.dtype)
    work[rows] = out.iterations  # a twin costs no iterations of its own
    full = LMResult(out.q[copy_of], out.converged[copy_of], work,
                    out.position_error[copy_of], out.orientation_error[copy_of],
                    out.pole_error[copy_of])
    full.put(twins, own)
    return full


# frames whose coordinates and inputs agree after rounding to this (rad, m, unitless)
# are solved once (``distinct_frames``): far below any tolerance, above the rounding of
# a cycle's generated targets (a sinusoid of whole periods: about 1e-14)
TWIN = 1e-9


def distinct_frames(problem: Problem, q: Array) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The frames of ``problem`` whose coordinates ``q`` (F, n) (rad, m), targets and
    poles (world, m) and held values (rad, m), rounded to ``TWIN``, no earlier frame
    has, in order (D,), and per frame the index into them of its first twin (F,): a
    clip repeated (a cycle planned and repeated, a pose held) is swung once per
    distinct frame."""
    frames = len(q)
    parts = [q, problem.targets.reshape(frames, -1)]
    if problem.held is not None:
        parts.append(problem.held.T)
    if problem.poles is not None:
        parts.append(problem.poles.positions(frames).reshape(-1, frames).T)
    key = np.round(np.hstack(parts) / TWIN)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # the distinct frames in the clip's order
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order].astype(np.intp), rank[inverse.reshape(-1)].astype(np.intp)


def swing_shares(length: Array, turns: Array, path_steps: Array, met: NDArray[np.bool_],
                 flip_factor: float, keep_first: bool, keep_last: bool) -> Array:  # fmt: skip
    """Per frame the share (F,) of its swing taken, 0..1 (``length`` (F,): the swing's
    largest column, rad or m). 0 on both frames of a jump of the swings and on a given
    end, else 1; between them the share changes per frame by at most ``SWING_PACE``
    times the planned path's local median step (``path_steps`` (F-1,)), at least
    ``MIN_SWING``, over the swing's length. A jump: a change of the swings from one
    frame to the next (``turns`` (F-1,)) more than ``flip_factor`` times the local
    median change and the smaller neighbouring change; or, next to a frame whose pole
    is not met (``met`` (F,): where the limits stop the swing, which may stop elsewhere
    on the next frame), more than
    ``BREAK`` times the path's local median step."""
    frames = len(length)
    pace = local_steps(path_steps)
    cap = np.ones(frames)
    stopped = ~(met[1:] & met[:-1])
    # out of line: beyond the local median and one of its neighbours at least (a steady
    # acceleration is not)
    beside = np.minimum(np.r_[turns[1:2], turns[:-1]], np.r_[turns[1:], turns[-2:-1]]) \
        if len(turns) > 1 else np.zeros_like(turns)
    line = np.maximum(local_steps(turns), beside)
    jumps = np.flatnonzero((turns > np.maximum(flip_factor * line, 1e-4))
                           | (stopped & (turns > np.maximum(BREAK * pace, MIN_SWING)))) + 1
    cap[jumps] = 0.0
    cap[jumps - 1] = 0.0
    if keep_first:
        cap[0] = 0.0
    if keep_last:
        cap[-1] = 0.0
    longer = np.maximum(np.maximum(length[1:], length[:-1]), 1e-12)
    rise = (np.maximum(SWING_PACE * pace, MIN_SWING) / longer).tolist()  # into frame t + 1
    out = cap.tolist()
    for t in range(1, frames):
        out[t] = min(out[t], out[t - 1] + rise[t - 1])
    for t in range(frames - 2, -1, -1):
        out[t] = min(out[t], out[t + 1] + rise[t])
    return np.array(out)
