"""``Search.coarse_frames``: where the grid's candidates are tracked. arm7; world metres,
radians."""

from __future__ import annotations

import numpy as np
from dhik.solver.lm import Problem
from dhik.solver.path.search import Search
from dhik.solver.settings import RobustOptions
from fixtures import arm7_path


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
