"""How a planned path is judged: the frames a retry plans again (jumps, and swings
that stand out of the clip's steps), the windows around them, which of two paths is
the better, and whether a free path is searched within the limits too. Coordinates rad
and m; frames counted from 0, a step into frame i + 1 indexed i.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..kinematics import BatchedKinematics
from ..settings import RobustOptions
from .cheap import SPIKE
from .search import PathResult, Search, frame_steps, join_span, standing_out
from .turns import winds_within

Array = NDArray[np.float64]

MEND_FRAMES = 128  # frames on each side of a jump planned again before the whole clip
# windows together over this share of the clip are not planned apart: the whole clip is
# planned again at once (a window's plan that leaves its jump costs about its share of a
# denser pass, before that pass). Half, not a quarter: the retries' windows of held-out
# arm7 clips (bench/held_out.py, one session) often cover a quarter to a half of a
# clip, and planning them apart costs less than the whole clip: 2,000-frame paths 178
# -> 161 µs a frame (p99 689 -> 480), 5,000-frame loops 272 -> 255, paths with cuts
# 480 -> 448, no flips either way; the whole clip gave about the same (bench/LOG.md)
MEND_SHARE = 0.5
# ... and this share where the windows hold frames beyond reach: there a denser plan of
# a window that holds a stretch out of reach may throw a frame inside it out and back
# (its coarse frames there reached by no candidate, their edges free) and still score
# better, by one frame reached beside the stretch (tests/core/test_out_of_reach.py's
# ramp: a 3.85 rad step at a window of a third of the clip)
MEND_SHARE_FAR = 0.25
# a path solved everywhere without a jump whose steps stand out over this many times the
# upper quartile of its steps (but not over ``SPIKE``: no retry) has those frames'
# windows planned once more at the first retry's density, the better path kept
# (``swing_frames``): a swing along the self-motion that is no jump, up to 2.26x the
# truth's largest step (arm7, one run against the path as left: bench/held_out.py's 12
# loops, 48 paths, 8 paths with cuts and 16 ramps out of reach: largest steps 1.93 ->
# 1.63, 1.82 -> 1.62, 1.60 -> 1.60, 2.26 -> 1.92, at 12 %, 17 %, 3 % and 3 % more time a
# frame; the test generator's 1,000 and 2,000-frame clips, seeds 100-147: 1.83 -> 1.68,
# 2.01 -> 1.91, at 11 % and 9 %; the flip bench, B and the loop take none. As the
# retries' test, 1.8 cost as much and kept more whole-clip passes: one path 7x its time)
SWING_SPIKE = 1.8
# a swing that still stands out this much after its windows' plan (the path outside
# them leads into it, on another part of the self-motion) has the whole clip planned
# once more at the first retry's density, the better path kept: arm7 at the CLI's
# tolerances (1e-3 m, 0.1 rad), bench/held_out.py's generator, 2,000-frame paths seeds
# 500-539: two clips, 2.31 -> 1.16 and 1.91 -> 1.11 times the truth's largest step, in
# 1.45x and 1.73x their time; 5,000-frame loops seeds 100-111: none. At 1.8 loop 104
# took it too (1.52 -> 1.12, in 3.5x its time). At B's tolerances none of 30 paths
WHOLE_SWING_SPIKE = 1.9


def swing_frames(model: BatchedKinematics, path: PathResult, far: NDArray[np.bool_],
                 spike: float = SWING_SPIKE) -> list[int]:  # fmt: skip
    """The frames of ``path`` (solved wherever reachable, none :func:`rough_frames`)
    whose steps stand out over ``SWING_SPIKE`` times the upper quartile of its steps,
    for one more plan of their windows; none where there are too many to mend in
    windows (:func:`windows`; ``far`` (F,): the frames beyond reach); ``spike``:
    instead of ``SWING_SPIKE``. A swing the
    retries' test (``SPIKE``) lets pass can still move a joint over twice as fast as
    the targets need: bench/held_out.py's ramp seed 404 before its ramp, frames 560-920
    on another part of the self-motion, 2.0 rad from the truth, 2.26x its largest
    step."""
    if not SWING_SPIKE or not (path.converged | far).all() or rough_frames(model, path, far):
        return []
    swings = rough_frames(model, path, far, spike)
    return swings if windows(swings, far) else []


def rough_frames(model: BatchedKinematics, path: PathResult, far: NDArray[np.bool_],
                 spike: float | None = None, before: Array | None = None
                 ) -> list[int]:  # fmt: skip
    """The frames a retry plans again: ``path``'s jumps, and the frames whose step stands
    out of the clip's (over ``SPIKE`` times the upper quartile of its steps; the cheap
    pass keeps its own answer below ``cheap.ACCEPT_SPIKE``): a fast swing along the
    self-motion that no step to its neighbours shows (arm7 full pose, 50 random
    2,000-frame paths: 3 that flipped, each with such a stretch, up to 2.6x the true
    largest step; none after the retry). Not a step into or out of a frame ``far`` (F,)
    marks out of reach: the targets force those.
    ``spike``: instead of ``SPIKE``; ``before``: the steps of the clip's frames before
    ``path`` (rad, m), counted in the quartile (a stretch after a cut that moves fast
    throughout stands out of the clip, not of itself)."""
    steps = frame_steps(model, path.q, ~model.held)
    spike = SPIKE if spike is None else spike
    rough = set(path.jumps) | {int(j) for j in standing_out(steps, spike, before)}
    return sorted(j for j in rough if not (far[j] or far[j - 1]))


def reached_steps(model: BatchedKinematics, path: PathResult, far: NDArray[np.bool_]
                  ) -> Array:  # fmt: skip
    """``path``'s steps (the largest solved column's, rad or m; ``frame_steps``) but
    those into or out of a frame ``far`` (F,) marks (beyond reach, or forced)."""
    steps = frame_steps(model, path.q, ~model.held)
    return steps[~(far[1:] | far[:-1])]


def windows(rough: Sequence[int], far: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """The stretches of frames (first, last) within ``MEND_FRAMES`` of the ``rough`` ones,
    joined where they meet; none where together they are over ``MEND_SHARE`` of the
    clip, or ``MEND_SHARE_FAR`` where they hold a frame ``far`` (F,) marks beyond reach
    (there the whole clip is planned again at once)."""
    frames = len(far)
    out: list[tuple[int, int]] = []
    for j in sorted(rough):
        join_span(out, max(j - MEND_FRAMES, 0), min(j + MEND_FRAMES, frames - 1))
    held_far = any(far[a:b + 1].any() for a, b in out)
    share = MEND_SHARE_FAR if held_far else MEND_SHARE
    return out if sum(b - a + 1 for a, b in out) <= share * frames else []


def score(model: BatchedKinematics, res: PathResult, power: float,
          forced: NDArray[np.bool_] | None = None) -> tuple[int, float]:
    """Worse answers score higher: unconverged frames, then the path's motion, the sum
    over its steps of the largest solved column's step to ``power`` (rad or m; the
    planner's own cost, ``RobustOptions.power``), so one large jump outweighs any
    number of small steps that stand out of their neighbours (counted as jumps first,
    a 218-frame arm7 clip after a ramp back within reach kept a pass with one jump of
    3.18 rad over a denser one's two of 0.23); ``forced`` (F,): frames whose steps in
    and out the targets force (beyond reach, or moved into fast), left out."""
    steps = frame_steps(model, res.q, ~model.held) if forced is None else \
        reached_steps(model, res, forced)
    return int(np.count_nonzero(~res.converged)), float(np.sum(steps ** power))


def better(model: BatchedKinematics, opts: RobustOptions, best: PathResult,
           other: PathResult) -> PathResult:
    """``other`` where it scores lower than ``best`` (``judge.score``), else ``best``;
    on a model searched modulo a turn, first the one that some whole turns place within
    the limits (``turns.winds_within``): a window planned again from the path's poses
    around it may wind a turn further than the path did there (xArm7, a smooth
    1,000-frame clip, seed 7, at 1e-5 m: no whole turn placed the mended path, and the
    search within the limits that followed jumped 54x the truth's largest step)."""
    fits = winds_within(model, best.q)
    if fits != winds_within(model, other.q):
        return best if fits else other
    return other if score(model, other, opts.power) < score(model, best, opts.power) else best


def rough_free(free: PathResult, search: Search) -> bool:
    """Whether the path ``free`` of a redundant chain, searched free (modulo a turn) and
    placed within the limits, is still rough after its retries (``judge.rough_frames``;
    ``search``: its problem within the limits), so that the chain is searched within the
    limits too and the better path kept (``judge.score``). UR5 with its tool's position
    only (a self-motion of three dimensions), 1,000-frame clips, seeds 2 and 3: 1.75x and
    2.40x the truth's largest step searched free, 1.39x and 1.50x so. Without redundancy
    the search within the limits follows a subset of the free one's branches."""
    opts = search.opts
    return opts.retries > 0 and search.redundancy() > 0 and bool(
        rough_frames(search.model, free, search.problem.out_of_reach()))
