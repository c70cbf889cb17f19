"""The cheap pass of a trajectory: coarse frames tracked in order, every frame between
filled, and the answer kept only where it is plainly continuous. Frames no search
can reach (beyond the chain's reach, or any frame of a chain with fewer solved columns
than counted error rows that meets none of its targets within reach) are approached as
closely as the LM gets, not searched.

Coarse frames (``Search.coarse_frames``) are solved after the first (cold,
``lm.solve_many``, or the given start): on the first try all at once from the first,
pulled toward it (the solutions nearest it: where a limb has no branch in between, one
continuous family, for one batched LM call), on the later ones in order, each from the
one before (extrapolated) and pulled toward it (least motion); every frame between two
coarse frames then starts from the straight line between them and is pulled toward it
(one batch for the whole clip). With a self-motion of more than one dimension the
coarse frames' pulls are moved ``candidates.MIDDLE_PULL`` of the way toward the middle
of the ranged joints' limits, as the grid's tracks' are: pulled toward the last pose
alone, a track drifts along the self-motion into a limit and turns fast there
(bench/self_motion.py's two hands on a spine, 60 clips of 600 frames, position only and
full pose: 8 and 4 frames over twice the truth's largest step, up to 2.18x, in 13.6 and
17.0 s; with the pull none, up to 1.74x and 1.90x, in 4.0 and 3.1 s; position-only arm7
none either way, up to 1.86x -> 1.58x; a humanoid arm none either way, but up to 1.74x
-> 1.94x, its mean 1.18x -> 1.29x. A pull of 0.1 left 11 such frames on position-only
arm7).
Where one track follows one continuous family of solutions (a ball-joint limb solved
from rest, a chain without redundancy away from its singularities), this is the whole
answer at a few LM rows a frame. (``solve.solve_path`` does not try it on a self-motion
of one dimension, which its grid search handles best.) It is given up (None: the planner searches,
``solve.solve_path``) as soon as a coarse frame is lost, and after the fill when a step
is a jump, a frame between two reached coarse frames is missed, or the largest step
stands out of the clip's steps (more than ``ACCEPT_SPIKE`` times their upper quartile: a
stretch near a singularity or a fold that another branch may avoid, or a hump along the
self-motion). Where its largest step stands out less (over ``REVIEW`` times that
quartile), the same try is also tracked back from the last frame and the track with the
smaller largest step kept. Coordinates rad and m.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kinematics import BatchedKinematics
from ..lm.loop import levenberg_marquardt
from ..lm.poles import PoleSet
from ..lm.solve import solve_many
from ..settings import RobustOptions, SolverSettings
from .candidates import MIDDLE_PULL
from .cycles import cyclic_path, period
from .ends import path_ends
from .fill import FILL_LEVELS, SLOW_STALL_WINDOW, Fill, Filler
from .search import PathResult, Search, frame_steps, jump_frames, standing_out
from .turns import winds_within

Array = NDArray[np.float64]

SPIKE = 2.0  # the largest step over the upper quartile of the steps, at most (see above)
# ... for the cheap pass's own answer to be kept (above it the planner searches). A greedy
# track can hump along a self-motion of several dimensions: bench/self_motion.py's
# humanoid arm, position only, seed 233 (600 frames, the CLI's tolerances) at 2.14x the
# truth's largest step over 30 frames, 1.67x the upper quartile of its steps; searched,
# 1.01x. Its six cases but the turntable, seeds 216-255 (240 clips): 30 flip frames in
# one clip -> none, the largest steps (humanoid arm, prismatic chain, two hands on a
# spine, position only) 2.14, 1.82, 1.94 -> 1.49, 1.48, 1.79x, in 75.6 -> 90.5 s; seeds
# 1-40: no flip either way, arm7 and the humanoid arm, position only, 1.47, 1.91 ->
# 1.29, 1.75x, in 89.2 -> 100.9 s. bench/characters.py's Rigify scenes (at 1e-4 m and
# at 1e-3 m), bench/run.py's B on the humanoid arm and the prismatic chain and the
# sample scenes' bakes: the same answers
ACCEPT_SPIKE = 1.6
REVIEW = 1.5  # from this ratio on, the track from the last frame is tried too
SPARSER = 2.0  # limbs apart: the at-once try's coarse frames this many times farther apart
DENSER = 1  # chained tries more, each with coarse frames twice as dense, before the search


def cheap_pass(search: Search, stride: int, coarse_motion: float,
               first: Array | None = None, last: Array | None = None
               ) -> PathResult | None:  # fmt: skip
    """The cheap pass over ``search``'s frames (module docstring), or None where it is
    not the answer; ``first`` / ``last`` (n,): solutions the path must start / end at
    (rad, m). Limbs that share no solved joint (four legs under a held body, an arm
    below its spine) first try coarse frames ``SPARSER`` times ``coarse_motion`` of
    target motion apart, solved all at once (module docstring; the quadruped's and the
    human's four limbs: 0.7x the time of chaining them); joints shared by several
    effectors (two hands on a solved spine) do not (at once, the spine's share of the
    motion can turn fast between coarse frames: bench/self_motion.py's two hands on a
    spine, 3 flip frames). Then, or where that is not the answer, coarse frames
    ``coarse_motion`` apart chained, then twice as dense (a coarse frame the track
    reached far along the self-motion makes the frames before it fast: shorter legs
    drift less), still far cheaper than the search."""
    model = search.model
    moved_by = (model.paths[:len(model.effectors)] & ~model.held[None, :]).sum(axis=0)
    # (stride, coarse motion, at once) per try
    tries = [(max(stride >> i, 1), coarse_motion / 2**i, False) for i in range(1 + DENSER)]
    if moved_by.max(initial=0) <= 1:  # limbs that share no solved joint
        sparse = coarse_motion * SPARSER
        tries = [(stride, sparse, True), *tries]
    for every, motion, at_once in tries:
        out = _cheap_once(search, every, motion, first, last, at_once)
        if out is not None:
            out = _reviewed(search, out, (every, motion, at_once), first, last)
            # hinges searched modulo a turn: the ladder counts their turns, a track
            # does not (a path no whole turn places is searched within the limits,
            # where it jumps: ``turns``)
            return out if winds_within(model, out.q) else None
    return None


def _reviewed(search: Search, out: PathResult, how: tuple[int, float, bool],
              first: Array | None, last: Array | None) -> PathResult:  # fmt: skip
    """``out``, or the same try tracked backward from the last frame where ``out``'s
    largest step stands out (over ``REVIEW`` times the upper quartile of its steps) and
    the backward track's largest step is smaller. A greedy track drifts along the
    self-motion from where it starts: on two hands on a spine (full pose), one from the
    first frame ends in a stretch where the elbows turn twice as fast as the targets ask,
    while the track from the last frame stays slow there. Not where the start is given
    (``first``: the backward track would have to end exactly on it)."""
    ahead = _stand_out(search, out)
    if first is not None or ahead[0] <= REVIEW * ahead[1]:
        return out
    back = search.reversed()
    every, motion, at_once = how
    rev = _cheap_once(back, every, motion, last, None, at_once)
    work = out.iterations + back.work[::-1]
    if rev is None or _stand_out(back, rev)[0] >= ahead[0]:
        out.iterations = work
        return out
    return turned(rev, work)


def turned(res: PathResult, work: NDArray[np.int64]) -> PathResult:
    """``res``, a path solved over its frames in reverse order, in frame order, with
    ``work`` (F,) as its iterations: a jump into reversed frame j is the step between
    frames F - j and F - 1 - j, a jump into frame F - j."""
    f = len(res.q)
    return PathResult(res.q[::-1].copy(), res.converged[::-1].copy(),
                      res.position_error[::-1].copy(), res.orientation_error[::-1].copy(),
                      sorted(f - j for j in res.jumps), work)


def _plain_steps(search: Search, res: PathResult) -> Array:
    """The steps of ``res`` between frames the LM reached or could reach (rad, m)."""
    steps = frame_steps(search.model, res.q, search.solved)
    hopeless = ~res.converged & _hopeless(search, res.converged)
    return steps[~(hopeless[1:] | hopeless[:-1])]


def _stand_out(search: Search, res: PathResult) -> tuple[float, float]:
    """The largest of :func:`_plain_steps` and their upper quartile (rad, m; 0 where
    there are three or fewer)."""
    plain = _plain_steps(search, res)
    if len(plain) <= 3:
        return 0.0, 0.0
    return float(plain.max()), float(np.percentile(plain, 75))


def _cheap_once(search: Search, stride: int, coarse_motion: float, first: Array | None,
                last: Array | None, at_once: bool) -> PathResult | None:  # fmt: skip
    """:func:`cheap_pass` with coarse frames at most ``stride`` frames and
    ``coarse_motion`` of target motion apart, solved all at once from the first
    (``at_once``) or in order."""
    model, problem = search.model, search.problem
    f, m = search.frames, len(model.effectors)
    if f == 0 or not search.solved.any():
        return None
    idx = search.coarse_frames(max(stride, 1), coarse_motion)
    qs = _chained(search, idx, first, at_once)
    if qs is None:
        return None
    if last is not None and len(idx) > 1:  # the path must end there: it is the last track
        near = model.difference(qs[-1][None], last[None])[0]
        if np.max(np.abs(near[search.solved]), initial=0.0) > 1e-6:
            return None
    search.report(0.5)
    filler = Filler(search)
    fills: list[Fill] = []
    for i in range(1, len(idx)):
        fl = filler.start_fill(int(idx[i - 1]), int(idx[i]), qs[i - 1], qs[i])
        fl.level = FILL_LEVELS  # every frame at once: no midpoints first
        fills.append(fl)
    filler.advance(fills)
    search.report(0.8)
    q, conv = np.zeros((f, model.n)), np.ones(f, dtype=bool)
    pe, re = np.zeros((f, m)), np.zeros((f, m))
    for fl in fills:
        part = slice(fl.first, fl.first + len(fl.q))
        q[part], conv[part], pe[part], re[part] = fl.q, fl.conv, fl.pe, fl.re
    q[idx] = qs
    final = levenberg_marquardt(model, problem, q[idx], 0, rows=idx)
    conv[idx], pe[idx], re[idx] = final.converged, final.position_error, \
        final.orientation_error
    bad = np.flatnonzero(~conv & ~_hopeless(search, conv))
    if bad.size:  # a reachable frame was missed: the search may find it
        return None
    out = np.flatnonzero(~conv)
    if out.size:  # out of reach: as close as the LM gets, from where the fill left them
        res = levenberg_marquardt(model, problem, q[out], search.settings.max_iterations,
                                  rows=out, stall_window=SLOW_STALL_WINDOW)
        np.add.at(search.work, out, res.iterations)
        better = problem.nearer((res.position_error, res.orientation_error, res.pole_error),
                                (pe[out], re[out], None))
        take = out[better]
        q[take], pe[take], re[take] = res.q[better], res.position_error[better], \
            res.orientation_error[better]
    if search.wrap.any():  # the fills' ends were taken the nearest turn
        q[:, search.wrap] = np.unwrap(q[:, search.wrap], axis=0)
    steps = frame_steps(model, q, search.solved)
    # a jump next to a frame no search can reach is the targets' doing: it is reported;
    # any other jump, or a step that stands out among the reached frames', is not plain
    hopeless = ~conv & _hopeless(search, conv)
    jumps = jump_frames(steps, search.opts.flip_factor)
    forced = hopeless[jumps] | hopeless[jumps - 1]
    if not forced.all():
        return None
    path = PathResult(q, conv, pe, re, [int(j) for j in jumps], search.work)
    if standing_out(_plain_steps(search, path), ACCEPT_SPIKE).size:
        return None
    search.report(1.0)
    return path


def _hopeless(search: Search, converged: NDArray[np.bool_] | None = None
              ) -> NDArray[np.bool_]:  # fmt: skip
    """Per frame: no search can do better than the closest approach, because the target
    lies beyond the chain's reach (``Problem.out_of_reach``) or the chain has fewer
    solved columns than counted error rows (an over-determined chain meets an arbitrary
    target only by chance: what the LM reaches from its neighbours is the answer).
    With a pass's ``converged`` (F,): an over-determined chain that met some of its
    targets within reach may meet the others on another branch of its solutions, which
    the denser try or the search's restarts find, so only the frames beyond reach are
    (arm7 with four hinges solved and full-pose targets made from its own poses: 289-566
    of 600 frames met and jumps of 59-157x the truth's largest step; searched, every
    frame on the truth's path)."""
    far = search.problem.out_of_reach()
    if search.redundancy() >= 0:
        return far
    if converged is not None and converged[~far].any():
        return far
    return np.ones_like(far)


def _chained(search: Search, idx: NDArray[np.intp], first: Array | None,
             at_once: bool = False) -> Array | None:  # fmt: skip
    """Coarse frames (C, n): the first from ``first`` or a cold solve, the others in
    order, each from the one before (extrapolated), pulled toward it (least motion), or
    (``at_once``) all from the first and pulled toward it, in one LM call, falling back
    to the order where one is not reached. None as soon as a frame is not reached."""
    model, problem = search.model, search.problem
    n = model.n
    far = _hopeless(search)  # frames no search can reach: best effort is the answer
    qs = np.zeros((len(idx), n))
    if first is not None:
        qs[0] = problem.hold(first[None], np.zeros(1, dtype=np.intp))[0]
    else:
        pr = problem
        opts = search.opts if search.redundancy() >= 0 else replace(search.opts, restarts=1)
        one = solve_many(model, pr.targets[idx[:1]],
                         [(float(a), float(b)) for a, b in zip(pr.wp, pr.wr, strict=True)],
                         search.settings, opts,
                         held=None if pr.held is None else pr.hold(np.zeros((1, n)), idx[:1]),
                         poles=None if pr.poles is None else pr.poles.frames(idx[:1]))
        search.work[0] += int(one.iterations[0])
        if not one.converged[0] and not far[idx[0]]:
            return None
        qs[0] = one.q[0]
    budget = search.settings.max_iterations
    middle = MIDDLE_PULL if search.redundancy() > 1 else 0.0
    if at_once and len(idx) > 2:
        start = np.repeat(qs[:1], len(idx) - 1, axis=0)
        q, ok, _, _ = search.lm(idx[1:], start, search.toward_middle(start, middle), budget)
        if (ok | far[idx[1:]]).all():
            qs[1:] = q
            return qs
    for i in range(1, len(idx)):
        prev = qs[i - 1]
        guess = prev if i < 2 else np.clip(
            prev + model.difference(qs[i - 2][None], prev[None])[0], model.lo, model.hi)
        q, ok, _, _ = search.lm(idx[i:i + 1], guess[None],
                                search.toward_middle(prev[None], middle), budget)
        if not ok[0]:  # a long way: without the pull, and slower to give up
            res = levenberg_marquardt(model, problem, prev[None], budget, rows=idx[i:i + 1],
                                      stall_window=SLOW_STALL_WINDOW)
            search.work[idx[i]] += int(res.iterations[0])
            if not res.converged[0] and not far[idx[i]]:
                return None
            q = res.q
        qs[i] = q[0]
    return qs


def cheap_path(model: BatchedKinematics, targets: ArrayLike,
               weights: Sequence[tuple[float, float]] | None = None,
               settings: SolverSettings | None = None,
               options: RobustOptions | None = None,
               start: ArrayLike | None = None, before: ArrayLike | None = None,
               after: ArrayLike | None = None, held: ArrayLike | None = None,
               poles: PoleSet | None = None) -> PathResult | None:  # fmt: skip
    """``solve.solve_path``'s cheap pass alone (same arguments): its answer where it is
    plainly continuous, else None (no search). For effectors that are solved apart but
    may take the cheap pass together, in one batch (the bake's parts)."""
    opts = options or RobustOptions()
    targets = np.asarray(targets, dtype=float)
    held, first, last = path_ends(model, targets, weights, settings, opts, start, before,
                                  after, held, poles)
    search = Search(model, targets, weights, settings, opts, held, poles)

    def part(frames: int) -> PathResult | None:
        sub = search if frames == search.frames else Search(
            model, targets[:frames], weights, settings, opts,
            None if held is None else held[:frames])
        return cheap_pass(sub, sub.slow_stride(opts.stride, opts.coarse_motion),
                          opts.coarse_motion, first, None if sub is not search else last)

    # a clip that repeats, its cheap pass over two cycles and one repeated, as the
    # planner's (``cycles``): a greedy track drifts from cycle to cycle (a humanoid arm's
    # 300-frame cycle, four times: 0.07-0.23 rad apart)
    cycle = period(targets, held, model) if poles is None and after is None else None
    if cycle is not None and cycle > 1:
        return cyclic_path(model, search.problem, search.solved, part, cycle,
                           first is not None)
    return part(search.frames)
