"""A clip's path planned without poles (``plan_path``), pass by pass.

Frames: world; units: metres, radians. The bake knows every target in advance, so a
trajectory is solved as one problem: candidates per coarse frame (``candidates``), the
least-motion path through them (``ladder``), every frame filled (``fill``), its peaks
relaxed (``relax``), jumps, steps that stand out of the clip's and frames missed left
planned again around them or over the whole clip with denser coarse frames. A clip
whose targets cut (jump) is planned a stretch at a time between the cuts; one whose
first pass leaves a stretch out of reach (``stretches``), a stretch at a time around it,
that stretch followed frame by frame both ways; one whose targets repeat, over its
first two cycles, one cycle then repeated (``cycles``). Frames whose step from the
previous frame is still a jump (more than ``flip_factor`` times the median step of the
ten frames on each side) are reported: no continuous path was found there.
``solve.solve_path`` calls it, with poles and hinges of several turns around it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kinematics import BatchedKinematics
from ..lm.problem import Problem
from ..settings import RobustOptions, SolverSettings
from .cheap import cheap_pass
from .cycles import cyclic_path, period
from .ends import held_best, path_ends, stands_still, still_path
from .judge import (
    WHOLE_SWING_SPIKE,
    better,
    reached_steps,
    rough_frames,
    score,
    swing_frames,
    windows,
)
from .ladder import ladder_path
from .relax import WIDE_WINDOW, WINDOW, relax_peaks
from .search import PathResult, Search, frame_steps, jump_frames
from .stretches import (
    fast_steps,
    followed_both_ways,
    followed_from,
    stretches_out,
    target_cuts,
)

Array = NDArray[np.float64]

LANE_FRAMES = 12  # fewest coarse frames per lane
# windows that stay rough after their retry are planned again at the next retry's density
# before the whole clip is (there, at the last retry's): a whole-clip retry costs about
# three first passes, and the denser windows do as well on most clips that reach it
# (bench/held_out.py's 24 arm7 loops of 5,000 frames, same session: 349 -> 261 µs a
# frame in mean, p99 1,417 -> 605; no flip either way, the largest step 1.81 -> 1.93
# times the truth's, seed 7, where the whole clip's retry found 1.28)
MEND_AGAIN = True
# retries lock every column of a self-motion of one dimension in turn (``GridTracks``'
# wide pass), not the ``free_count`` best conditioned on the first frame: a retry is
# there because a pass left a jump or a fast swing, and on long clips that is often a
# stretch where the path's part of the self-motion barely moves those columns, so that
# no cell of their grids holds a track there (arm7, test-generator clips, same session:
# 5,000 frames, seeds 1-96, 10 clips over twice the smooth reference's largest step, one
# a jump of 390x, -> 4, at most 2.25x, in 0.86x the time; 1,000 and 2,000 frames, seeds
# 100-147: 1 -> 0 each; the clips that take a retry cost more: 2,000 frames, seeds
# 200-249, 12 % more LM rows)
WIDE_RETRIES = True
# a path solved wherever reachable but still rough (``judge.rough_frames``) after every
# retry has the whole clip planned once more as the first pass plans it, its random
# draws (restarts, seeds of tracks) from ``options.seed`` plus this, the better path
# kept: the turntable of bench/self_motion.py (two arm7s, a self-motion of three
# dimensions) at the CLI's tolerances, 600 frames, seeds 200-245: seed 215's retries
# left a swing of 6.35 times the truth's largest step (its first pass a jump of 45x,
# which the windows' plan and the whole clip's denser pass kept), the new draws 1.54 in
# about the same time; seed 218 1.51 -> 1.39 in 1.3x its time; no other clip took it.
# arm7 at the CLI's tolerances (2,000-frame paths 500-539, 5,000-frame loops 100-111)
# and at B's (paths 200-223): none. 0: no such pass
REDRAW = 1
def told_done(progress: Callable[[float], None] | None) -> Callable[[float], None] | None:
    """``progress`` for a second search of a clip, after the first told it 1.0: told
    1.0 again as the second goes, so that a stop raised in it (the add-on's cancel)
    still ends the solve."""
    return None if progress is None else (lambda _done: progress(1.0))


def plan_path(model: BatchedKinematics, targets: Array,
              weights: Sequence[tuple[float, float]] | None, settings: SolverSettings | None,
              opts: RobustOptions, start: ArrayLike | None, before: ArrayLike | None,
              after: ArrayLike | None, held: ArrayLike | None,
              progress: Callable[[float], None] | None, wide: bool = False,
              slow: bool = True, split: bool = True, stretched: bool = True,
              moving: bool = False, cyclic: bool = True, repeats: int | None = None
              ) -> PathResult:  # fmt: skip
    """``solve.solve_path`` without poles, within the model's limits as they are (same
    arguments); ``wide``: its first pass a wide one (a retry's window,
    ``WIDE_RETRIES``); ``slow``: a slow clip's coarse frames farther apart
    (``Search.slow_stride``; not in a retry's window, whose stride a retry halved);
    ``split``: a clip whose targets cut planned a stretch at a time
    (:func:`_between_cuts`), and ``stretched``: one whose first pass leaves a stretch
    out of reach (``stretches.stretches_out``) too; ``moving``: searched even where the
    clip stands still (``ends.still_path``); ``cyclic``: a clip that repeats planned
    over its first two cycles, one cycle then repeated (``cycles.cyclic_path``; not
    where its end joins a pose, ``after``); ``repeats``: the inputs of those first
    cycles repeat every ``repeats`` frames, and the whole clip's passes track one cycle's
    candidates (``Search.period``). The stretches between target cuts
    are planned without ``split`` but with their own stretches out of reach followed;
    those beside a stretch out of reach, with neither."""
    rows = None if held is None else \
        np.asarray(held, dtype=float).reshape(len(targets), model.n)
    held = rows  # (F, n); ``rows`` the same, typed as an array
    search = Search(model, targets, weights, settings, opts, held)
    cycle = period(targets, rows, model) if cyclic and after is None else None
    if cycle is not None and cycle > 1:
        told = [progress]

        def part(frames: int) -> PathResult:
            tick, told[0] = told[0], told_done(progress)  # a second plan: told 1.0
            return plan_path(model, targets[:frames], weights, settings, opts, start, before,
                             None, None if rows is None else rows[:frames], tick, wide, slow,
                             split, stretched, moving, cyclic=False, repeats=cycle)

        looped = cyclic_path(model, search.problem, search.solved, part, cycle,
                             start is not None or before is not None)
        if looped is not None:  # (the plan always answers)
            return looped
    cuts = target_cuts(search) if split else np.zeros(0, dtype=np.intp)
    if cuts.size:
        return _between_cuts(model, targets, weights, settings, opts, (start, before, after),
                             held, progress, wide, slow, cuts, search.problem.out_of_reach(),
                             motion=search.motion())
    held, first, last = path_ends(model, targets, weights, settings, opts, start, before,
                                  after, held, None)
    if not moving and stands_still(targets, held):
        joined = start is not None or before is not None or after is not None
        still = still_path(model, targets, weights, settings, opts, held, first, last,
                           joined)
        if still is not None:  # one pose held
            if progress is not None:
                progress(1.0)
            return still
        if not joined:  # beyond reach: searched, its closest approach held
            searched = plan_path(model, targets, weights, settings, opts, start, before, after,
                                 held, progress, wide, slow, split, stretched, moving=True)
            one = None if held is None else held[:1]
            return held_best(Problem(model, targets[:1], weights, settings, opts, one),
                             searched)

    def one_pass(stride: int, motion: float, lane_frames: int, span: tuple[float, float],
                 quick: bool = False, wide: bool = False,
                 probe: Callable[[NDArray[np.bool_]], bool] | None = None,
                 draw: int = 0) -> PathResult:  # fmt: skip
        search = Search(model, targets, weights, settings,
                        replace(opts, seed=opts.seed + draw) if draw else opts, held)
        search.progress, search.span, search.period = progress, span, repeats
        return ladder_path(search, stride, motion, lane_frames, first, last, quick, wide,
                           probe)

    motion, lane_frames = opts.coarse_motion, LANE_FRAMES
    stride = search.slow_stride(opts.stride, motion) if slow else opts.stride
    first_pass = (stride, motion)
    first_retry = (max(stride // 2, 1), motion / 2)  # a retry's coarse frames: twice as dense
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

    window = WIDE_WINDOW if search.redundancy() > 1 else WINDOW

    def relaxed(path: PathResult) -> PathResult:
        """Every pass's path has its peaks relaxed before it is judged (``relax``): a
        jump the relaxing removes needs no retry. Where the self-motion has more than
        one dimension, against a wider stretch of the path (``relax.WIDE_WINDOW``)."""
        return relax_peaks(model, search.problem, path, opts.flip_factor, window=window)

    far = search.problem.out_of_reach()  # frames no pass can converge on
    # a first pass that already misses a stretch out of reach stops there: the clip is
    # cut around it and planned again a stretch at a time (``ladder.PROBE_ROUNDS``)
    probe = (lambda conv: bool(stretches_out(search, conv, far))) if stretched else None
    best = one_pass(stride, motion, lane_frames, (0.2, 1.0 if opts.retries < 1 else 0.7),
                    opts.retries > 0, wide, probe)
    best.iterations = best.iterations + search.work
    best = relaxed(best)
    work = best.iterations
    stretches = stretches_out(search, best.converged, far) if stretched else []
    cuts = np.array(sorted({c for a, b in stretches for c in (a, b + 1)
                            if 0 < c < len(targets)}), dtype=np.intp)
    if cuts.size:  # planned a stretch at a time, the stretches out followed
        tick = None if progress is None else (lambda x: progress(0.7 + 0.3 * x))
        out = _between_cuts(model, targets, weights, settings, opts, (start, before, after),
                            held, tick, wide, slow, cuts, far,
                            frozenset(a for a, _ in stretches), search.motion())
        out.iterations = out.iterations + work  # the first pass was work too
        return out
    for r in range(opts.retries):
        rough = rough_frames(model, best, far)
        missed = np.flatnonzero(~(best.converged | far))  # reachable frames not reached
        # missed frames get one denser pass (a second one seldom reaches them, and a clip
        # whose targets leave the chain's workspace would pay it in full); jumps and
        # swings on a clip solved everywhere get them all
        if (not rough and not missed.size) or (missed.size and r > 0):
            break
        stride, motion, lane_frames = max(stride // 2, 1), motion / 2, 2 * lane_frames
        lo, hi = 0.7 + 0.3 * r / opts.retries, 0.7 + 0.3 * (r + 1) / opts.retries
        spots = sorted({*rough, *(int(j) for j in missed)})
        if windows(spots, far):
            # rough and missed frames alone, in MEND_SHARE of the clip at most
            # (MEND_SHARE_FAR where they hold frames beyond reach): the frames around them
            cut = lo + 0.25 * (hi - lo)
            tick = None if progress is None else (lambda x, a=lo, b=cut: progress(a + (b - a) * x))
            mended = relaxed(_mended(model, targets, weights, settings, opts, held, best,
                                     spots, far, first, last, (stride, motion), tick,
                                     WIDE_RETRIES))
            work = work + mended.iterations - best.iterations  # the windows' passes
            best = better(model, opts, best, mended)
            if not (best.converged | far).all():
                # frames the windows' denser search did not reach: the whole clip's, as
                # dense, would not either (its candidates there are the same grid's)
                break
            # solved, or only rough with a retry left: its windows, denser, before the
            # whole clip (``MEND_AGAIN``)
            if not rough_frames(model, best, far) or (MEND_AGAIN and r + 1 < opts.retries):
                continue
            lo = cut
        again = relaxed(one_pass(stride, motion, lane_frames, (lo, hi), wide=WIDE_RETRIES))
        work = work + again.iterations  # the pass not kept was work too
        best = better(model, opts, best, again)
    if REDRAW and opts.retries > 0 and (best.converged | far).all() \
            and rough_frames(model, best, far):
        # solved everywhere within reach but rough after every retry: the whole clip
        # planned once more as the first pass plans it (not quick), from other random
        # draws (where frames within reach stay missed, the retries stop early: their
        # denser passes seldom reach them, nor would this)
        again = relaxed(one_pass(*first_pass, LANE_FRAMES, (1.0, 1.0), wide=wide,
                                 draw=REDRAW))
        work = work + again.iterations  # the pass not kept was work too
        best = better(model, opts, best, again)
    swings = swing_frames(model, best, far) if opts.retries > 0 else []
    if swings:  # at the first retry's density
        swung = relaxed(_mended(model, targets, weights, settings, opts, held, best, swings,
                                far, first, last, first_retry, None, WIDE_RETRIES))
        work = work + swung.iterations - best.iterations
        best = better(model, opts, best, swung)
        if swing_frames(model, best, far, WHOLE_SWING_SPIKE):  # the whole clip, as dense
            again = relaxed(one_pass(*first_retry, 2 * LANE_FRAMES, (1.0, 1.0),
                                     wide=WIDE_RETRIES))
            work = work + again.iterations  # the pass not kept was work too
            best = better(model, opts, best, again)
    best.iterations = work
    if progress is not None:
        progress(1.0)
    return best


def _between_cuts(model: BatchedKinematics, targets: Array,
                  weights: Sequence[tuple[float, float]] | None,
                  settings: SolverSettings | None, opts: RobustOptions,
                  ends: tuple[ArrayLike | None, ArrayLike | None, ArrayLike | None],
                  held: Array | None, progress: Callable[[float], None] | None,
                  wide: bool, slow: bool, cuts: NDArray[np.intp],
                  far: NDArray[np.bool_], followed: frozenset[int] = frozenset(),
                  motion: Array | None = None) -> PathResult:  # fmt: skip
    """The clip planned a stretch at a time, cut where its targets jump (``cuts``, the
    first frames of the stretches after the first): no path is continuous across a cut,
    and a search across one chose fast swings before it to shorten the jump (arm7,
    bench/held_out.py's 16 paths of 2,000 frames with three cuts each: a flip beside a
    cut in every one, 1,836 µs a frame). A stretch after a cut is tried from the
    solution nearest the pose before it (the least motion across it: a fast move taken
    for a cut goes on from where it was) in one quick pass, kept where that is clean
    (no jump, and no swing that stands out of the clip so far: ``judge.rough_frames``;
    a stretch that moves twice as fast as the truth throughout stood out of nothing in
    itself); else planned from its own start too, the better kept (``judge.score``, the
    steps beside frames beyond reach, or into or out of a frame the targets move into
    fast, left out: the targets force them). The 16 paths: 456 µs a frame,
    no flip; from their own starts alone, 242 µs, and one stretch (seed 307) swung 2.6x
    the truth's fastest; from the nearest poses with every retry, 3.8x that time.
    ``ends``: ``solve_path``'s ``start``, ``before`` (the first stretch's) and ``after``
    (the last's); ``held`` (F, n); ``far`` (F,): the frames beyond reach
    (``Problem.out_of_reach``, frame by frame). The stretches that begin at a frame in
    ``followed`` (after the first) are stretches out of reach (``stretches.py``): not
    planned, followed from the pose before them and back from the pose after them
    (joined where the targets move fast: ``motion`` (F-1,), ``Search.motion``, the
    targets' motion per step). The stretches between target cuts have their own
    stretches out of reach followed so (arm7, 1,200-frame test-generator clips, seeds
    1-12, with a cut at frames 300-319 and a ramp out of reach at 700: planned whole, 6
    flipped, by up to 90x the truth's largest step; now one, by 2.7x, at 20-30 % more
    time). The cuts are reported as jumps where the path jumps there (the targets'
    doing)."""
    start, before, after = ends
    f = len(targets)
    bounds = [0, *(int(c) for c in cuts), f]
    # frames the targets move into fast (as a stretch out of reach is grown over them)
    fast = np.zeros(f, dtype=bool)
    if motion is not None:
        fast[1:] = fast_steps(motion)
    parts: list[PathResult] = []
    stretch: dict[int, Problem] = {}  # the parts followed, by index
    seen: list[Array] = []  # the steps of the parts planned so far, beyond reach left out
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        tick = None if progress is None else \
            (lambda x, a=a, b=b: progress((a + (b - a) * x) / f))
        part_held = None if held is None else held[a:b]
        end = after if b == f else None
        if i == 0:
            parts.append(plan_path(model, targets[a:b], weights, settings, opts, start, before,
                                   end, part_held, tick, wide, slow, False, not followed))
            seen.append(reached_steps(model, parts[-1], far[a:b]))
            continue
        if a in followed:  # a stretch out of reach: followed from the pose before it
            stretch[i] = Problem(model, targets[a:b], weights, settings, opts, part_held)
            parts.append(followed_from(model, stretch[i], parts[-1].q[-1]))
            continue
        # from the pose nearest the one before the cut, one quick pass; kept where it is
        # clean (no jump or swing that stands out of the clip so far, every frame within
        # reach reached), else planned from its own start as well, the better kept
        near = plan_path(model, targets[a:b], weights, settings, replace(opts, retries=0), None,
                         parts[-1].q[-1], end, part_held, tick, wide, slow, False, not followed)
        rough = rough_frames(model, near, far[a:b], before=np.concatenate(seen))
        if rough or not (near.converged | far[a:b]).all():
            free = plan_path(model, targets[a:b], weights, settings, opts, None, None, end,
                             part_held, tick, wide, slow, False, not followed)
            work = free.iterations + near.iterations  # both tries were work
            forced = far[a:b] | fast[a:b]
            if score(model, free, opts.power, forced) < score(model, near, opts.power, forced):
                near = free
            near.iterations = work
        parts.append(near)
        seen.append(reached_steps(model, near, far[a:b]))
    for i, problem in stretch.items():  # and back from the pose after it
        if i + 1 < len(parts):
            assert motion is not None  # given with ``followed``
            a, b = bounds[i], bounds[i + 1]  # motion[j]: the step into frame j + 1
            parts[i] = followed_both_ways(model, problem, parts[i - 1].q[-1], parts[i],
                                          parts[i + 1].q[0], motion[a - 1:b])
    q = np.concatenate([p.q for p in parts])
    jumps = jump_frames(frame_steps(model, q, ~model.held), opts.flip_factor)
    return PathResult(q, np.concatenate([p.converged for p in parts]),
                      np.concatenate([p.position_error for p in parts]),
                      np.concatenate([p.orientation_error for p in parts]),
                      [int(j) for j in jumps], np.concatenate([p.iterations for p in parts]))


def _mended(model: BatchedKinematics, targets: Array,
            weights: Sequence[tuple[float, float]] | None, settings: SolverSettings | None,
            opts: RobustOptions, held: Array | None, path: PathResult, rough: list[int],
            far: NDArray[np.bool_], first: Array | None, last: Array | None,
            coarse: tuple[int, float], progress: Callable[[float], None] | None,
            wide: bool = False) -> PathResult:  # fmt: skip
    """``path`` with the frames within ``judge.MEND_FRAMES`` of each of its ``rough``
    frames (``judge.rough_frames``, and frames within reach it missed; ``far`` (F,): the
    frames beyond reach, ``judge.windows``) planned again, coarse frames ``coarse``
    (stride, target motion) apart, from the path's own pose on the frame before the
    window (else ``first``) to the pose its frame after the window leads to (else
    ``last``): a jump or swing that a denser search of its neighbourhood avoids needs no
    search of the whole clip again; ``wide``: the windows' passes wide ones
    (``WIDE_RETRIES``). A new path (its jumps measured again; ``iterations``: the path's
    and the windows' passes)."""
    f = len(targets)
    q, work = path.q.copy(), path.iterations.copy()
    conv, pe, re = path.converged.copy(), path.position_error.copy(), \
        path.orientation_error.copy()
    spans = windows(rough, far)
    sub_opts = replace(opts, retries=0, stride=coarse[0], coarse_motion=coarse[1])
    for i, (a, b) in enumerate(spans):
        tick = None if progress is None else \
            (lambda x, i=i: progress((i + x) / len(spans)))
        start = q[a] if a > 0 else first
        after = q[b + 1] if b + 1 < f else last
        part = slice(a, b + 1)
        sub = plan_path(model, targets[part], weights, settings, sub_opts, start, None, after,
                        None if held is None else held[part], tick, wide, slow=False)
        q[part], conv[part], pe[part], re[part] = sub.q, sub.converged, \
            sub.position_error, sub.orientation_error
        work[part] += sub.iterations
    jumps = jump_frames(frame_steps(model, q, ~model.held), opts.flip_factor)
    return PathResult(q, conv, pe, re, [int(j) for j in jumps], work)
