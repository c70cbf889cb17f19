"""A clip's flip-free path, whole: ``solve_path``, the robust method's answer to a
trajectory.

Frames: world; units: metres, radians. The path is planned by ``plan.plan_path`` (passes,
retries, cuts, stretches out of reach, cycles). Around that plan this module handles
what concerns the whole answer: hinges whose limits span more than a turn searched
free, modulo a turn, then placed within the limits (``turns``); poles, the path planned
without them and swung toward them (``swing``), every cycle of a repeating clip swung
alike (``cycles.alike``); and a path still rough after every retry at loose
tolerances, planned once more at tighter ones (``ROUGH_PLAN``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kinematics import BatchedKinematics
from ..lm.poles import PoleSet
from ..lm.problem import ENGINE_SETTINGS, Problem
from ..settings import RobustOptions, SolverSettings
from .cycles import alike, cycle_sources, period, repeated
from .judge import better, rough_frames, rough_free
from .plan import plan_path, told_done
from .search import PathResult, Search
from .stretches import target_cuts
from .swing import swing_to_poles
from .turns import wide_hinges, within_limits

Array = NDArray[np.float64]

# with poles on a self-motion of more than one dimension (without them), the pole-free
# path the swing turns toward them is planned at the engine's tolerances
# (``problem.ENGINE_SETTINGS``, 1e-5 m and 1e-4 rad) where the user's are looser (its
# frames converged as the user's judge them): planned loosely, its frames wander within
# the tolerance along the dimensions a pole does not fix, and the swing relaxes the
# peaks that leaves. Rigify's human arm with a pole, position only (bench/characters.py,
# 30 clips of 160 frames, seeds 101-130), at the panel's tolerances (1e-3 m, 0.1 rad):
# dhik's bake 1.20x -> 0.72x Blender's IK + Bake Action in the same run (its core solve
# 0.135 -> 0.066 s a clip), the largest per-bone step 2.29 -> 1.03x the reference's, the
# elbow 0.054 -> 0.010 m off its reference's; at the bench's 1e-4 m the same answers.
# arm7 full pose (one dimension) keeps the user's: planned tightly, its fixed pole's
# swivel on bench/clips.py speeds up to 3.4x on 2 of 20 clips, as at 1e-5 m
POLED_PLAN_TIGHT = True


# a path still rough after every retry, planned at looser tolerances than these (m, rad;
# the CLI's and the panel's 1e-3 m and 0.1 rad), is planned once more at these, judged
# by the user's (``_rough_planned_tighter``). Within 0.1 rad a frame of a chain without
# redundancy may stand well off its solution where that moves fast (near a wrist
# singularity), so a branch that turns fast there looks cheap to the search: UR5 and
# UR3 (five hinges of +-2 pi), smooth 1,000-frame clips, seeds 0-29 (bench/robots.py),
# one clip each at 2.27x and 2.11x the truth's largest step, 1.67x and 1.57x so (their
# mean ms a frame 0.74 -> 0.87 and 0.75 -> 1.02, the medians as before). No arm7 clip at
# the CLI's tolerances took it (2,000-frame paths 500-519, 5,000-frame loops 1-8).
# Planning every clip so instead: UR's no better on seeds 30-59 and 15 % slower, arm7's
# loops 2.2x slower in mean (a retry)
ROUGH_PLAN = (1e-4, 1e-3)


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
    ``poles`` per frame (:mod:`..lm.poles`; the path is planned without them, on a
    self-motion of more than one dimension at least as tightly as ``POLED_PLAN_TIGHT``
    says, and swung toward them). Returns per-frame coordinates, convergence,
    errors, and the frames where no continuous path was found. When a solve leaves
    jumps, steps that stand out of the clip's (``judge.rough_frames``) or unconverged
    frames within reach, it is done again with coarse frames twice as dense (up to
    ``options.retries`` times, denser each time; once only while frames within reach
    stay unconverged; the first pass is quick, its retries are not:
    ``candidates.QUICK_BUDGET``) and the better answer kept (``judge.score``): where the
    frames within ``judge.MEND_FRAMES`` of the rough and missed ones are
    ``judge.MEND_SHARE`` of the clip at most (``MEND_SHARE_FAR`` where they hold frames
    beyond reach), those frames alone (``_mended``; frames they leave missed are left),
    then, while frames stay rough, those of the next retry (``MEND_AGAIN``), the whole
    clip only when the last retry's windows leave frames rough. A path left with no jump
    but a swing short of rough (``judge.SWING_SPIKE``) has its windows planned once more
    (``judge.swing_frames``), and the whole clip where a swing stays
    (``judge.WHOLE_SWING_SPIKE``); one still rough after every retry is planned once
    more as the first pass plans it, from other random draws (``REDRAW``), and where
    the user's tolerances are looser than ``ROUGH_PLAN``, once more at those. Where the
    targets cut (:func:`target_cuts`), the stretches between the cuts are planned
    apart. Where the targets and held values repeat every P frames over two cycles or
    more, the first two cycles are planned and one is repeated (``cycles``): every
    cycle alike.
    Deterministic for a given ``options.seed``.

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
    wide = wide_hinges(model)
    if not wide.any():
        return _solve(model, targets, weights, settings, opts, start, before, after, held,
                      poles, progress)
    # the poses the path joins: its first frame's (given, or the frame's before), the
    # frame's after its last
    anchors = [(0, np.asarray(p, dtype=float).reshape(model.n))
               for p in (start if start is not None else before,) if p is not None]
    if after is not None and len(targets):
        anchors.append((len(targets) - 1, np.asarray(after, dtype=float).reshape(model.n)))
    # searched free, modulo a turn, its ends at their own turns where it joins poses,
    # then moved within the limits (``turns``)
    free = _solve(model.with_turns_free(wide, bool(anchors)), targets, weights, settings,
                  opts, start, before, after, held, poles, progress)
    q = within_limits(model, free.q, wide, anchors)
    if q is not None:
        free.q = q
        rows = None if held is None else np.asarray(held, dtype=float).reshape(
            len(targets), model.n)
        if not rough_free(free, Search(model, targets, weights, settings, opts, rows)):
            return free
    # searched within the limits: where no whole turn fits, or where ``rough_free`` says
    again = _solve(model, targets, weights, settings, opts, start, before, after, held,
                   poles, told_done(progress))
    again.iterations = again.iterations + free.iterations  # that search was work too
    if q is None:
        return again
    best = better(model, opts, free, again)
    best.iterations = again.iterations  # both searches' work, whichever is kept
    return best


def _solve(model: BatchedKinematics, targets: Array,
           weights: Sequence[tuple[float, float]] | None, settings: SolverSettings | None,
           opts: RobustOptions, start: ArrayLike | None, before: ArrayLike | None,
           after: ArrayLike | None, held: ArrayLike | None, poles: PoleSet | None,
           progress: Callable[[float], None] | None) -> PathResult:  # fmt: skip
    """:func:`solve_path` within the model's limits as they are."""
    if poles is not None:  # planned without them, then swung toward them (``swing``)
        tick = None if progress is None else (lambda x: progress(0.9 * x))
        plain = Search(model, targets, weights, settings, opts, held)  # its problem's
        user = plain.problem.settings
        planned = _at_most(user, ENGINE_SETTINGS.position_tolerance,
                           ENGINE_SETTINGS.orientation_tolerance)
        tight = POLED_PLAN_TIGHT and plain.redundancy() > 1 and planned != user
        # planned on the effectors alone: the poles' points have no say before the swing
        path = plan_path(model.without_points(), targets, weights,
                         planned if tight else settings, opts, start, before, after, held, tick)
        if tight:  # converged as the user's tolerances judge it (the swing leaves the rest)
            path.converged = plain.problem.badness(path.position_error,
                                                   path.orientation_error) < 1.0
        pinned = start is not None or before is not None
        rows = None if held is None else \
            np.asarray(held, dtype=float).reshape(len(targets), model.n)
        # the swing's ends differ: every cycle swung alike
        cycle = None if after is not None else period(targets, rows, model, poles.position)
        out = _swung_cycles(model, plain, path, weights, settings, opts, rows, poles, cycle,
                            pinned)
        if out is None:  # the whole clip swung
            poled = Problem(model, targets, weights, settings, opts, held, poles)
            out = alike(model, plain.problem, plain.solved,
                        swing_to_poles(model, poled, plain.problem, path, pinned,
                                       after is not None, opts.flip_factor,
                                       target_cuts(plain)), cycle, pinned)
        if progress is not None:
            progress(1.0)
        return out
    path = plan_path(model, targets, weights, settings, opts, start, before, after, held,
                     progress)
    return _rough_planned_tighter(model, targets, weights, settings, opts,
                                  (start, before, after), held, path, progress)


def _swung_cycles(model: BatchedKinematics, plain: Search, path: PathResult,
                  weights: Sequence[tuple[float, float]] | None,
                  settings: SolverSettings | None, opts: RobustOptions, held: Array | None,
                  poles: PoleSet, cycle: int | None, pinned: bool) -> PathResult | None:
    """A clip whose targets, held values (``held`` (F, n)) and ``poles`` repeat every
    ``cycle`` frames (``cycles.period``), three cycles or more: ``path`` (``plain``'s
    plan, on all its frames) swung toward the poles over its first two cycles alone, and
    a cycle of that repeated from where the two agree (``cycles.cycle_sources``; from
    the first frame on where ``pinned``). None where the clip is not such a clip, or
    where the two swung cycles agree nowhere (the whole clip is then swung). A frame's
    swing depends on the frames around it, so this gives about the frames of the whole
    clip swung and a cycle of it repeated (``cycles.alike``) in less time: arm7, a
    5,000-frame loop with a pole (bench/run.py's, at the CLI's tolerances), 1.31 ->
    0.84 s, within 6e-5 rad; tests/core/test_cycles.py's loop within 5e-5 rad, and with
    another pole within 0.006 rad on two frames a cycle (where the arm turns 0.13-0.15
    rad a frame either way)."""
    frames = len(path.q)
    if cycle is None or cycle < 2 or 3 * cycle > frames:
        return None
    span = 2 * cycle
    first = None if held is None else held[:span]  # the two cycles' held values
    sub = Search(model, plain.problem.targets[:span], weights, settings, opts, first)
    poled = Problem(model, sub.problem.targets, weights, settings, opts, first,
                    poles.frames(slice(0, span)))
    planned = PathResult(path.q[:span], path.converged[:span], path.position_error[:span],
                         path.orientation_error[:span], [j for j in path.jumps if j < span],
                         path.iterations[:span])
    swung = swing_to_poles(model, poled, sub.problem, planned, pinned, False,
                           opts.flip_factor, target_cuts(sub))
    source = cycle_sources(model, swung.q, plain.solved, cycle, frames, pinned)
    if source is None:
        return None
    work = path.iterations.copy()
    work[:span] = swung.iterations
    return repeated(model, plain.problem, swung, source, work)


def _rough_planned_tighter(model: BatchedKinematics, targets: Array,
                           weights: Sequence[tuple[float, float]] | None,
                           settings: SolverSettings | None, opts: RobustOptions,
                           ends: tuple[ArrayLike | None, ArrayLike | None, ArrayLike | None],
                           held: ArrayLike | None, path: PathResult,
                           progress: Callable[[float], None] | None) -> PathResult:  # fmt: skip
    """``path``, or, where it is solved within reach but still rough after every retry
    (``judge.rough_frames``) and the user's tolerances are looser than ``ROUGH_PLAN``,
    the clip planned once more at those (``ends``: ``solve_path``'s start, before and
    after), its frames converged as the user's tolerances judge them, and the better
    path kept (``judge.score``); ``progress`` told 1.0 as it goes (``told_done``)."""
    user = settings or ENGINE_SETTINGS
    tight = _at_most(user, *ROUGH_PLAN)
    if tight == user or opts.retries < 1:
        return path
    problem = Problem(model, targets, weights, settings, opts, held)
    far = problem.out_of_reach()
    if not (path.converged | far).all() or not rough_frames(model, path, far):
        return path
    again = plan_path(model, targets, weights, tight, opts, *ends, held, told_done(progress))
    again.converged = problem.badness(again.position_error, again.orientation_error) < 1.0
    best = better(model, opts, path, again)
    best.iterations = path.iterations + again.iterations  # both plans' work
    return best


def _at_most(settings: SolverSettings, position: float, orientation: float
             ) -> SolverSettings:  # fmt: skip
    """``settings`` with its tolerances no looser than ``position`` (m) and
    ``orientation`` (rad)."""
    return replace(settings, position_tolerance=min(settings.position_tolerance, position),
                   orientation_tolerance=min(settings.orientation_tolerance, orientation))
