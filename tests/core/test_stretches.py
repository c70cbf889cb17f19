"""Stretches a clip's targets leave reach through (``solver.path.stretches``): found
after a first pass, cut around, and followed frame by frame both ways instead of
searched.

arm7 (seven hinges, full pose) on the test generator's smooth paths (tests/fixtures.py);
a ramp moves the targets of 80 frames out to 3x their distance from the base over ten
frames, holds them 60 and brings them back over ten. A flip is a step in which a column
moves more than twice the truth's largest per-frame step. Frames: world; metres, radians.
"""

from __future__ import annotations

import numpy as np
import pytest
from dhik.solver.lm import Problem
from dhik.solver.path import plan, solve_path
from dhik.solver.path.stretches import STRETCH_FRAMES, followed_from, stretches_out
from fixtures import arm7_path, arm7_ramped, planned_passes


class Moving:
    """What ``stretches_out`` asks of a search: the targets' motion per step (F-1,)."""

    def __init__(self, move: np.ndarray) -> None:
        self.move = move

    def motion(self) -> np.ndarray:
        return self.move


def test_a_stretch_entered_fast_is_grown_over_the_way_out_and_back() -> None:
    """100 frames moving one unit a step; the steps into frames 41-45 and 61-63 move ten
    (a ramp out and back). Unconverged 45-60: the stretch 40-63, grown over the fast
    steps on both sides. A stretch of the same length moving slowly is the search's to
    reach, unless a frame in it is beyond reach; one shorter than ``STRETCH_FRAMES``
    is none; two that grow into each other are one."""
    move = np.ones(99)
    move[40:45] = move[60:63] = 10.0
    conv = np.ones(100, dtype=bool)
    conv[45:61] = False
    far = np.zeros(100, dtype=bool)
    assert stretches_out(Moving(move), conv, far) == [(40, 63)]
    slow = np.ones(100, dtype=bool)
    slow[10:26] = False
    assert stretches_out(Moving(np.ones(99)), slow, far) == []
    beyond = far.copy()
    beyond[20] = True
    assert stretches_out(Moving(np.ones(99)), slow, beyond) == [(10, 25)]
    short = np.ones(100, dtype=bool)
    short[45:45 + STRETCH_FRAMES - 1] = False
    assert stretches_out(Moving(move), short, far) == []
    two = np.ones(100, dtype=bool)
    two[30:36] = two[41:47] = False
    fast = np.ones(99)
    fast[25:30] = fast[36:41] = 10.0  # the steps into frames 26-30 and 37-41
    assert stretches_out(Moving(fast), two, far) == [(25, 46)]
    assert stretches_out(Moving(move), np.ones(100, dtype=bool), far) == []


def test_a_stretch_is_followed_from_the_pose_before_it_in_one_motion() -> None:
    """Frames 560-639 of a 1,200-frame path (seed 4) ramped out: followed from the
    truth's pose on frame 559, every frame is solved from the one before: the first
    (its target 1.2x as far) within 0.5 rad of that pose, the frames beyond reach
    approached (none converges) with no step over 0.2 rad between them. Followed back
    from the truth's pose on frame 640, the last frames converge again."""
    model, truth, targets = arm7_ramped(1200, 4, 560)
    problem = Problem(model, targets[560:640], None)
    far = problem.out_of_reach()
    assert far.sum() > 40
    ahead = followed_from(model, problem, truth[559])
    inside = np.flatnonzero(far)
    steps = np.abs(model.difference(ahead.q[:-1], ahead.q[1:])).max(axis=1)
    assert not ahead.converged[far].any()
    assert steps[inside[0]:inside[-1]].max() < 0.2
    assert np.abs(model.difference(truth[559][None], ahead.q[:1])).max() < 0.5
    back = followed_from(model, problem, truth[640], backward=True)
    assert back.converged[-2:].all()


@pytest.mark.parametrize("seed", [4, 11])
def test_a_target_dragged_out_of_reach_and_back_leaves_no_flip(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """1,200-frame paths (seeds 4 and 11) ramped out over frames 560-639. Planned whole,
    their paths flipped far from the ramp (seed 4: a step 44x the truth's largest,
    seed 11: 31x), to reach the last frames a stretched arm reaches on the way out. Now
    the first pass's stretch out of reach is found, the clip planned before and after
    it (no pass after the first spans the stretch) and the stretch followed: no flip
    outside frames 550-649, every frame there converges, no frame beyond reach thrown
    out and back (two steps in a row over 0.5 rad; the closest approach itself may turn
    over once: seed 11, 1.4 rad at frame 589, planned whole too), and the jumps named
    lie on the ramp."""
    model, truth, targets = arm7_ramped(1200, seed, 560)
    far = Problem(model, targets, None).out_of_reach()
    planned = planned_passes(monkeypatch)
    res = solve_path(model, targets)
    assert planned[0] == 1200 and len(planned) > 1 and max(planned[1:]) < 600
    keep = np.ones(1200, dtype=bool)  # per frame: its step in counts
    keep[[0, 1]] = False
    keep[550:650] = False
    true_step = np.abs(np.diff(truth, axis=0)).max(axis=1)[keep[1:]].max()
    steps = np.abs(model.difference(res.q[:-1], res.q[1:])).max(axis=1)
    assert steps[keep[1:]].max() < 2.0 * true_step
    assert res.converged[keep].all()
    inside = np.flatnonzero(far)
    within = steps[inside[0]:inside[-1]]
    assert not np.any((within[1:] > 0.5) & (within[:-1] > 0.5))
    assert all(550 <= j < 650 for j in res.jumps)


def test_a_clip_without_a_stretch_out_of_reach_is_planned_as_before(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A smooth 1,200-frame path (seed 4) with every target within reach: no stretch, so
    one pass, and ``stretches_out`` is asked only once."""
    model, _, targets = arm7_path(1200, 4)
    asked: list[list[tuple[int, int]]] = []
    inner = plan.stretches_out

    def counting(*args: object) -> list[tuple[int, int]]:
        out = inner(*args)  # type: ignore[arg-type]
        asked.append(out)
        return out

    monkeypatch.setattr(plan, "stretches_out", counting)
    planned = planned_passes(monkeypatch)
    res = solve_path(model, targets)
    assert asked == [[]] and planned == [1200] and res.converged.all()


def test_a_way_back_fast_against_the_part_after_it_is_grown_into_the_stretch() -> None:
    """The clip moves 3 units a step up to frame 50 and 1 after the stretch; the steps
    into frames 61-69 (the way back into reach) move 6: under 3x the clip's median (3),
    over 3x the median of the part after the stretch (1). Unconverged 45-60, entered
    fast (10): the stretch is grown over the way back too, to 69. A part after it that
    holds still (no motion) counts half the clip's median step: steps under 1.5x that
    are not grown over."""
    move = np.r_[np.full(40, 3.0), np.full(5, 10.0), np.full(15, 3.0), np.full(9, 6.0),
                 np.ones(30)]
    conv = np.ones(100, dtype=bool)
    conv[45:61] = False
    far = np.zeros(100, dtype=bool)
    assert stretches_out(Moving(move), conv, far) == [(40, 69)]
    still = move.copy()
    still[60:69] = 4.0  # the way back at 4: over 3x a still part's median (0) ...
    still[69:] = 0.0
    assert stretches_out(Moving(still), conv, far) == [(40, 60)]  # ... not 1.5x the clip's
    still[60:69] = 5.0
    assert stretches_out(Moving(still), conv, far) == [(40, 69)]


def test_a_ramp_back_slower_than_the_clip_is_followed_with_its_stretch() -> None:
    """arm7, the first 990 frames of a 1,200-frame clip (seed 5) whose targets are moved
    out of reach at 783-842; the ramp back moves the targets 0.1 a step (2.7x the clip's
    median step, 5x the frames after it). Planned with the frames after it, the ramp back
    crossed onto another branch and the path jumped 0.71 rad into frame 972 (30x the
    truth's largest step); followed with the stretch, the frames after it planned alone,
    no step off the ramp is over 1.5x the truth's largest and every frame off it is
    reached."""
    model, truth, targets = arm7_ramped(1200, 5, 773)
    res = solve_path(model, targets[:990])
    keep = np.ones(990, dtype=bool)  # per frame: its step in counts
    keep[:2] = False
    keep[763:863] = False  # the ramp, ten frames on either side
    true_step = np.abs(np.diff(truth[:990], axis=0)).max(axis=1)[keep[1:]].max()
    steps = np.abs(model.difference(res.q[:-1], res.q[1:])).max(axis=1)[keep[1:]]
    assert steps.max() < 1.5 * true_step
    assert res.converged[keep].all()
