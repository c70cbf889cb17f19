"""What every part of a trajectory's search shares: the problem of its frames, its LM
runs (with the work they cost per frame), seeds, coarse frames and the self-motion's
dimension. Frames: world; units: metres, radians."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..kinematics import REVOLUTE, ROTVEC, BatchedKinematics
from ..lm.loop import levenberg_marquardt
from ..lm.poles import PoleSet
from ..lm.problem import Index, Problem, rotvec, search_limits
from ..lm.starts import cold_start, random_starts
from ..settings import RobustOptions, SolverSettings

Array = NDArray[np.float64]

TRACK_ITERATIONS = 15  # LM budget of a tracking step or a fill level
SEED_ITERATIONS = 60  # LM budget of a seed's restart
# a slow clip's stride grows to at most this many times the options' (slow_stride). arm7,
# bench/run.py's random paths over 5,000 frames (seeds 1-16, same session): a stride of
# 32, 75 µs a frame and one clip at 2.03x the truth's largest step; the span of the
# clip's average motion capped at 2x, 57 µs and at most 1.59x; uncapped, 61 µs (the
# Blender bake's 5,000-frame clip, a span of 79 frames, then took a retry)
SLOW_STRIDE = 2.0
LOCAL_WINDOW = 10  # steps on each side a step's pace is measured against (local_steps)


class Search:
    """A trajectory's frames as one batch of problems (``targets`` (F, m, 4, 4), world
    m; ``held`` (F, n)), with per frame the LM iterations spent on it (``work``)."""

    def __init__(self, model: BatchedKinematics, targets: ArrayLike,
                 weights: Sequence[tuple[float, float]] | None,
                 settings: SolverSettings | None, options: RobustOptions,
                 held: ArrayLike | None = None, poles: PoleSet | None = None
                 ) -> None:  # fmt: skip
        self.model = model
        self.opts = options
        self.problem = Problem(model, targets, weights, settings, options, held, poles)
        self.settings = self.problem.settings
        self.solved = ~model.held  # the columns the path's motion is measured on
        self.frames = self.problem.count
        self.work = np.zeros(self.frames, dtype=np.int64)  # LM iterations per frame
        self.rng = np.random.default_rng(options.seed)
        lo, hi = search_limits(model)
        finite = np.isfinite(lo) & np.isfinite(hi)
        self.mid = 0.5 * (np.where(finite, lo, 0.0) + np.where(finite, hi, 0.0))
        self.finite = finite
        # hinges and sliders with a range (rotation vectors' bounds are no joint's range)
        self.ranged = finite & (hi > lo) & (model.kinds != ROTVEC) & ~model.held
        # the range a locked column is gridded over: its limits, or a turn for a hinge
        # or rotation-vector coordinate without limits (sliders without limits are never
        # locked)
        turn = (model.kinds == REVOLUTE) | (model.kinds == ROTVEC)
        self.grid_lo = np.where(finite, np.where(finite, lo, 0.0), np.where(turn, -np.pi, 0.0))
        self.grid_hi = np.where(finite, np.where(finite, hi, 0.0), np.where(turn, np.pi, 0.0))
        self.grid_ok = (finite | turn) & ~model.held
        self.wrap = model.wraps  # hinges without limits (held columns keep their values)
        # charts whose coordinates jump between equivalent values (rotation vectors):
        # motion is measured the nearest way (``model.difference``)
        self.charted = bool(np.any(model.kinds == ROTVEC))
        self.progress: Callable[[float], None] | None = None  # told fractions of the solve
        self.span = (0.0, 1.0)  # the share of the whole solve this search is
        # where set, the frames' inputs repeat every ``period`` frames from the first
        # (the first cycles of a clip that repeats, ``cycles.cyclic_path``) and the grid
        # tracks one cycle (``candidates.GridTracks``); None: they do not repeat
        self.period: int | None = None
        self._told = 0.0
        # the targets' motion: running sums, and per step to the power (spread)
        self._spread_terms: tuple[Array, Array] | None = None
        self._motion: Array | None = None
        self._steps: tuple[Array, Array] | None = None  # per effector (_effector_steps)

    def report(self, fraction: float) -> None:
        """Tell ``progress`` that ``fraction`` of this search is done (never backward)."""
        if self.progress is None:
            return
        lo, hi = self.span
        at = lo + (hi - lo) * min(max(fraction, 0.0), 1.0)
        if at >= self._told:
            self._told = at
            self.progress(at)

    def lm(self, rows: Index, start: Array, pull: Array | None, budget: int | None = None,
           frozen: NDArray[np.bool_] | None = None, stall: tuple[int, float] | None = None
           ) -> tuple[Array, NDArray[np.bool_], Array, Array]:  # fmt: skip
        """The LM on frames ``rows`` from ``start`` (k, n), pulled toward ``pull``:
        coordinates, converged and each effector's errors (m, rad); the iterations
        are counted on the frames. ``stall``: (window, ratio) of the stall rule instead
        of the options' (``levenberg_marquardt``)."""
        window, ratio = (None, None) if stall is None else stall
        res = levenberg_marquardt(self.model, self.problem, start,
                                  min(budget or TRACK_ITERATIONS, self.settings.max_iterations),
                                  rows=rows, pull=pull, frozen=frozen, stall_window=window,
                                  stall_ratio=ratio)
        np.add.at(self.work, rows, res.iterations)
        return res.q, res.converged, res.position_error, res.orientation_error

    def reversed(self) -> Search:
        """The same search over its frames in reverse order (a new search: its own
        ``work``, per reversed frame)."""
        pr, model = self.problem, self.model
        held = None
        if pr.held is not None:
            held = np.zeros((self.frames, model.n))
            held[:, pr.held_cols] = pr.held.T
            held = held[::-1]
        back = np.arange(self.frames)[::-1]
        out = Search(model, pr.targets[::-1], list(zip(pr.wp, pr.wr, strict=True)),
                     self.settings, self.opts, held,
                     None if pr.poles is None else pr.poles.frames(back))
        out.progress, out.span, out._told = self.progress, self.span, self._told
        return out

    def steps(self, a: Array, b: Array) -> Array:
        """Per pair of rows the largest motion of a solved column (k,) from ``a`` to
        ``b`` (k, n), the nearest way (rad, m)."""
        return pair_steps(self.model, a, b, self.solved)

    def seeds(self, frame: int, count: int, keep: Array | None = None) -> Array:
        """Up to ``count`` distinct converged solutions of ``frame`` from restarts (far
        from ``keep``'s rows first); may be fewer (none when none converged)."""
        starts = random_starts(self.model, 16, self.rng, self.problem.scale)
        if keep is None:
            starts = np.vstack([cold_start(self.model)[None], starts])
        rows = np.full(len(starts), frame)
        q, ok, _, _ = self.lm(rows, starts, None, SEED_ITERATIONS)
        sols = q[ok]
        chosen: list[Array] = [] if keep is None else list(keep)
        base = len(chosen)
        if keep is None and len(sols):  # first: the one farthest from the limits
            chosen.append(sols[int(np.argmax(self.margin(sols)))])
        while len(chosen) - base < count and len(sols):
            dist = np.min([np.max(np.abs(sols - c), axis=1) for c in chosen], axis=0) \
                if chosen else np.full(len(sols), np.inf)
            j = int(np.argmax(dist))
            if dist[j] < 1e-3:
                break
            chosen.append(sols[j])
        return np.array(chosen[base:]) if len(chosen) > base else np.zeros((0, self.model.n))

    def margin(self, q: Array) -> Array:
        """Per row: the smallest distance to a limit relative to the half-range (columns
        without a range, or locked, do not count)."""
        ranged = self.finite & (self.model.hi > self.model.lo)
        half = np.where(ranged, 0.5 * (np.where(ranged, self.model.hi, 1.0)
                                       - np.where(ranged, self.model.lo, -1.0)), np.inf)
        return np.min(1.0 - np.abs(q - self.mid) / half, axis=1)

    def toward_middle(self, q: Array, share: float) -> Array:
        """``q`` (k, n) moved ``share`` (0..1) of the way toward the middle of each
        ranged hinge's or slider's limits (rad, m); the other columns stay."""
        return np.where(self.ranged, q + share * (self.mid - q), q)

    def motion(self) -> Array:
        """Per step between frames (F-1,) the targets' motion: position over the chain's
        length scale plus rotation angle (rad), the largest over the effectors (worked
        out once)."""
        if self._motion is None:
            self._motion = self._target_motion()
        return self._motion

    def _target_motion(self) -> Array:
        dp, da = self._effector_steps()
        return np.max(dp + da, axis=0) if dp.size else np.zeros(0)

    def _effector_steps(self) -> tuple[Array, Array]:
        """Per effector and step between frames (m, F-1): the target's position step
        over the chain's length scale, and its rotation angle (rad) (worked out once:
        ``motion`` and ``counted_motion`` share it)."""
        if self._steps is None:
            pr = self.problem
            t_pos, t_rot = pr.rows.pos, pr.rows.rot
            dp = np.linalg.norm(np.diff(t_pos, axis=-1), axis=1) / pr.scale  # (m, F-1)
            rel = np.einsum("milk,mjlk->ijmk", t_rot[..., 1:], t_rot[..., :-1])
            self._steps = (dp, np.linalg.norm(rotvec(rel), axis=0))
        return self._steps

    def counted_motion(self) -> Array:
        """Per effector whose targets count (a position or orientation weight above 0)
        and step between frames (e, F-1): the motion of what counts of its target, the
        position step over the chain's length scale where its position counts plus the
        rotation angle (rad) where its orientation does."""
        pr = self.problem
        dp, da = self._effector_steps()
        out = np.where(pr.count_p[:, None], dp, 0.0) + np.where(pr.count_r[:, None], da, 0.0)
        return out[pr.count_p | pr.count_r]

    def spread(self, a: Index | int, b: Index | int) -> Array:
        """For stretches from frame ``a`` to frame ``b`` (arrays or ints), how a joint
        distance ``d`` over the stretch is expected to cost in the path's sum of steps to
        the ``power`` p: ``cost = d^p * spread``, with the steps shared out as the
        targets move (``sum_j w_j^p``, ``w_j`` each step's share of the targets' motion,
        a floor of a twentieth of the mean motion per step). 1 for a single step; for
        steady motion ``L^(1 - p)`` over ``L`` steps (the least any sharing costs).

        Where the targets jump (a step over ``flip_factor`` times the median of the ten
        on each side, the joints' jump rule: :func:`jump_frames`), that step counts in
        the numerator at that bound only: a single such step costs ``(bound / its
        motion)^p`` of its distance^p. The jump the targets force in the joints then
        costs what a step at the targets' usual rate would, and the path keeps it there
        in one step, not split over that step and one where the targets move smoothly
        (the sum of steps^p prefers two halves to one whole).

        The numerator is summed stretch by stretch, not as a difference of running sums:
        at p = 8 one fast step's m^p swamps a running sum's resolution for every
        stretch after it (arm7 with frames out of reach: estimates 40 % off)."""
        if self._spread_terms is None:
            move = self.motion()
            m = move + 0.05 * (float(move.mean()) if move.size else 0.0) + 1e-12
            bounded = np.minimum(m, self.opts.flip_factor * local_steps(m))
            # a 0 after the last step: a stretch may end on the last frame (reduceat)
            self._spread_terms = (np.concatenate([[0.0], np.cumsum(m)]),
                                  np.append(bounded ** self.opts.power, 0.0))
        cm, mp = self._spread_terms
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        fa, fb = a.ravel(), b.ravel()
        sums = np.zeros(fa.shape)
        if fa.size:  # mp[a:b] per stretch: reduceat over (a0, b0, a1, b1, ...), evens
            sums = np.add.reduceat(mp, np.column_stack([fa, fb]).ravel())[::2]
            sums = np.where(fb > fa, sums, 0.0)
        total = np.maximum(cm[b] - cm[a], 1e-300)
        return np.asarray(sums.reshape(a.shape) / total ** self.opts.power)

    def slow_stride(self, stride: int, coarse_motion: float) -> int:
        """``stride`` (frames), or more on a clip whose targets move less than
        ``coarse_motion`` (:meth:`motion`'s units: metres over the chain's length scale
        plus radians) over ``stride`` frames on average: the frames over which they move
        that much on average. The coarse frames then lie alike in the targets'
        motion whatever the frame rate: a clip played at half speed (twice the frames)
        is planned as at full speed, not with twice the coarse frames. At most
        ``SLOW_STRIDE`` times ``stride``."""
        total = float(np.sum(self.motion()))
        limit = coarse_motion * (self.frames - 1)
        if self.frames < 2 or not total * stride < limit:  # fast enough, or not finite
            return stride
        span = limit / total if total > 0 else math.inf
        return int(min(span, SLOW_STRIDE * stride))

    def coarse_frames(self, stride: int, coarse_motion: float) -> Index:
        """Coarse frames: at most ``stride`` apart, closer where the targets move fast
        (at most ``coarse_motion`` of :meth:`motion` apart), and the frames on either
        side of where the targets leave or come back into reach
        (``Problem.out_of_reach``): an edge from a frame within reach to one beyond
        would fill the frames within reach between them toward a pose that misses."""
        move = self.motion()
        far = self.problem.out_of_reach()
        edge = np.flatnonzero(far[1:] != far[:-1])  # frames before a change of reach
        border = np.zeros(self.frames, dtype=bool)
        border[edge], border[edge + 1] = True, True
        frames, acc, last = [0], 0.0, 0
        for f in range(1, self.frames):
            acc += move[f - 1]
            if f - last >= stride or acc >= coarse_motion or f == self.frames - 1 \
                    or border[f]:
                frames.append(f)
                acc, last = 0.0, f
        return np.array(frames)

    def redundancy(self) -> int:
        """Solved columns beyond the counted error rows (3 per position, 3 per orientation
        with a weight above 0, one per pole): the dimension of the self-motion, where it
        is regular."""
        return int(np.count_nonzero(self.solved)) - self.problem.counted_rows

    def free_columns(self, sols: Array, frame: int, count: int) -> list[int]:
        """Up to ``count`` columns to lock on a redundant chain (more columns than counted
        error rows), judged at solutions ``sols`` (k, n) of ``frame``: those whose removal
        leaves the best conditioned rest (largest smallest singular value, median over
        the samples). Empty for a chain without redundancy. Sliders without limits are
        never locked."""
        solved = np.flatnonzero(self.solved)  # held columns never move
        if self.redundancy() < 1 or len(sols) == 0:
            return []
        pr = self.problem
        lin = pr.linearise(np.ascontiguousarray(sols.T),
                           pr.rows.take(np.full(len(sols), frame)))
        assert lin.jac is not None
        counted = np.ones(len(lin.jac), dtype=bool)  # poles' rows count
        counted[: len(pr.row_w)] = pr.row_w > 0  # a weight of 0 leaves its rows out
        jw = (lin.jac * pr.col_scale[pr.cols][None, :, None])[counted]  # pr.cols: solved
        score = np.full(self.model.n, -1.0)
        for k, c in enumerate(solved):
            rest = np.delete(jw, k, axis=1)
            score[c] = float(np.median([np.linalg.svd(rest[:, :, j], compute_uv=False)[-1]
                                        for j in range(jw.shape[-1])]))
        score[~self.grid_ok] = -1.0
        order = [int(c) for c in np.argsort(-score, kind="stable") if score[c] > 0]
        return order[:count]


@dataclass
class PathResult:
    """Per frame: coordinates (F, n) (rad, m), converged (F,), each effector's errors
    (F, m) (m, rad); ``jumps``: frames whose step from the previous frame is a jump that
    no continuous path avoided (the target path forces it, as far as the search tells);
    ``iterations`` (F,): the LM iterations spent on the frame over every pass (its
    candidates, fills and retries), the work the frame cost."""

    q: Array
    converged: NDArray[np.bool_]
    position_error: Array
    orientation_error: Array
    jumps: list[int] = field(default_factory=list)
    iterations: NDArray[np.int64] = field(
        default_factory=lambda: np.zeros(0, dtype=np.int64))


def pair_steps(model: BatchedKinematics, a: Array, b: Array, solved: NDArray[np.bool_]
               ) -> Array:  # fmt: skip
    """Per pair of rows the largest motion of a ``solved`` column (k,) from ``a`` to
    ``b`` (k, n), the nearest way (rad, m)."""
    return np.max(np.abs(model.difference(a, b)[:, solved]), axis=1, initial=0.0)


def frame_steps(model: BatchedKinematics, q: Array, solved: NDArray[np.bool_]) -> Array:
    """Per step into frame i + 1 (F-1,) the largest motion of a ``solved`` column, the
    nearest way for charts with equivalent coordinates (rad, m)."""
    if len(q) < 2:
        return np.zeros(0)
    if np.any(model.kinds == ROTVEC):
        d = model.difference(q[:-1], q[1:])[:, solved]
    else:
        d = np.diff(q[:, solved], axis=0)
    return np.max(np.abs(d), axis=1, initial=0.0)


def local_steps(steps: Array, window: int = LOCAL_WINDOW) -> Array:
    """Per step (``steps`` (F-1,)) the median of the ``window`` steps on each side, itself
    left out (rad or m): how fast the path moves around it."""
    if len(steps) == 0:
        return np.zeros(0)
    padded = np.pad(steps, window, mode="reflect")  # at an end: the steps beside it
    near = np.lib.stride_tricks.sliding_window_view(padded, 2 * window + 1)
    return np.asarray(np.median(np.delete(near, window, axis=1), axis=1))


def jump_frames(steps: Array, factor: float, window: int = 10) -> Index:
    """Frames whose step (``steps`` (F-1,), into frame i + 1) exceeds ``factor`` times the
    median step of the ``window`` steps on each side (and 1e-4, rad or m: smaller steps
    never show): a step out of line with its neighbours, not a fast stretch."""
    if len(steps) == 0:
        return np.zeros(0, dtype=np.intp)
    local = local_steps(steps, window)
    return np.flatnonzero(steps > np.maximum(factor * local, 1e-4)) + 1


def standing_out(steps: Array, factor: float, before: Array | None = None) -> Index:
    """Frames whose step (``steps`` (F-1,), into frame i + 1; rad or m) exceeds
    ``factor`` times the upper quartile of all the clip's steps (and 1e-4): a fast stretch
    the clip's other motion does not explain, which :func:`jump_frames` does not see where
    the steps around it are as fast. None with three steps or fewer. ``before``: the
    steps of the frames before these (rad or m), counted in the quartile too."""
    if len(steps) <= 3:
        return np.zeros(0, dtype=np.intp)
    pool = steps if before is None else np.concatenate([before, steps])
    return np.flatnonzero(steps > factor * float(np.percentile(pool, 75)) + 1e-4) + 1


def join_span(out: list[tuple[int, int]], a: int, b: int) -> None:
    """Append the span of frames ``a``..``b`` (first, last) to ``out`` (spans in order),
    joined with the last one where they meet or overlap."""
    if out and a <= out[-1][1] + 1:
        out[-1] = (out[-1][0], b)
    else:
        out.append((a, b))
