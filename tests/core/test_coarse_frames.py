"""``Search.coarse_frames``: where the grid's candidates are tracked. arm7; world metres,
radians."""

from __future__ import annotations

import numpy as np
from dhik.solver.lm import Problem
from dhik.solver.path import solve_path
from dhik.solver.path.search import Search
from dhik.solver.settings import RobustOptions
from fixtures import arm7_path, largest_step


def test_coarse_frames_are_at_most_a_stride_apart_and_close_where_targets_move_fast() -> None:
    model, _, targets = arm7_path(600, 3)
    search = Search(model, targets, None, None, RobustOptions())
    frames = search.coarse_frames(32, 0.6)
    assert frames[0] == 0 and frames[-1] == 599
    assert np.diff(frames).max() <= 32
    travel = np.r_[0.0, np.cumsum(search.motion())]
    # each gap ends where the targets' motion since the last coarse frame reached 0.6
    # or the stride did; before its last frame it was below 0.6
    for a, b in zip(frames[:-1], frames[1:], strict=True):
        assert travel[b - 1] - travel[a] < 0.6 or b - a == 1


def test_the_frames_around_a_stretch_out_of_reach_are_coarse_frames() -> None:
    """Targets 3x as far from the base on frames 200-259 (out of reach): frames 199, 200,
    259 and 260 are coarse frames, so no edge joins a frame within reach to one beyond
    it across frames within reach (their fill would be pulled toward a pose that misses)."""
    model, _, targets = arm7_path(600, 3)
    targets = targets.copy()
    targets[200:260, :, :3, 3] *= 3.0
    assert Problem(model, targets, None).out_of_reach()[200:260].all()
    frames = Search(model, targets, None, None, RobustOptions()).coarse_frames(32, 0.6)
    assert {199, 200, 259, 260} <= set(frames.tolist())
    plain = Search(model, arm7_path(600, 3)[2], None, None, RobustOptions())
    assert not {199, 259} <= set(plain.coarse_frames(32, 0.6).tolist())


def _stride_and_count(frames: int, seed: int = 3) -> tuple[int, int, int, float]:
    """arm7's smooth path ``seed`` over ``frames`` frames (the same path, slower with
    more frames): its slow stride (from 32, 0.6 of motion), its coarse frames' count at
    that stride and at 32, and the span over which its targets move 0.6 on average."""
    model, _, targets = arm7_path(frames, seed)
    search = Search(model, targets, None, None, RobustOptions())
    stride = search.slow_stride(32, 0.6)
    span = 0.6 * (frames - 1) / float(search.motion().sum())
    return (stride, len(search.coarse_frames(stride, 0.6)),
            len(search.coarse_frames(32, 0.6)), span)


def test_a_clip_played_slower_is_planned_on_about_as_many_coarse_frames() -> None:
    """The same path over 1,000 and 3,000 frames: the fast clip moves 0.6 in fewer than
    32 frames on average and keeps the stride; the slow one takes the span it moves 0.6
    in (42 frames, under twice 32), and has about as many coarse frames as the fast one,
    where a stride of 32 frames gave it more (the extra frames are the targets' pauses
    played slower)."""
    fast, fast_count, fast_at_32, fast_span = _stride_and_count(1000)
    slow, slow_count, slow_at_32, slow_span = _stride_and_count(3000)
    assert fast_span < 32 and fast == 32 and fast_count == fast_at_32
    assert 32 < slow_span < 64 and slow == int(slow_span)
    assert slow_count <= 1.2 * fast_count < slow_at_32


def test_a_slow_stride_grows_at_most_twofold() -> None:
    """Past twice the stride (5,000 frames of the same path: a span of 71 frames), and on
    targets that never move, the stride is twice the options'; where the motion is not
    a number it is the options' own."""
    stride, count, at_32, span = _stride_and_count(5000)
    assert span > 64 and stride == 64 and count < at_32
    model, _, targets = arm7_path(50, 3)
    still = np.repeat(targets[:1], 200, axis=0)
    assert Search(model, still, None, None, RobustOptions()).slow_stride(32, 0.6) == 64
    unknown = still.copy()
    unknown[100, 0, 0, 3] = np.nan  # a motion that is not a number: the stride as given
    assert Search(model, unknown, None, None, RobustOptions()).slow_stride(32, 0.6) == 32


def test_a_slow_clip_on_its_longer_stride_moves_no_faster_than_the_truth_allows() -> None:
    """arm7's path 7 over 5,000 frames (a 71-frame span: a stride of 64): every frame
    converged and no step beyond 1.5 times the truth's largest (planned on a stride of
    32 frames, one step was 2.03 times it, in 1.5x the LM iterations)."""
    model, truth, targets = arm7_path(5000, 7)
    res = solve_path(model, targets)
    assert res.converged.all() and res.jumps == []
    assert largest_step(model, res.q) < 1.5 * largest_step(model, truth)
