"""What a trajectory's planner searches again, and what it leaves (``solver.path.plan``):
clips whose targets cut, frames a first pass missed, windows still rough after their
retry.

arm7 (seven hinges, full pose) on smooth paths of the test generator; targets are their
FK, unless said. A flip is a step in which a column moves more than twice the truth's
largest per-frame step. Fixed seeds throughout. Frames: world; metres, radians.
"""

from __future__ import annotations

import numpy as np
import pytest
from dhik.solver.path import ends, judge, plan, solve_path
from dhik.solver.path.search import Search
from dhik.solver.settings import RobustOptions, SolverSettings
from fixtures import (
    arm7_path,
    arm7_ramped,
    arm7_ramped_out,
    largest_step,
    planned_passes,
    relaxed_passes,
)


def with_cuts(frames: int, seed: int, stretches: list[tuple[int, int]],
              ramp: int | None = None) -> tuple[object, np.ndarray, np.ndarray]:  # fmt: skip
    """``arm7_path(frames, seed)`` (``arm7_ramped(frames, seed, ramp)`` with ``ramp``)
    with each of ``stretches`` (first frame, length) held at one random pose within the
    limits (its targets that pose's FK, the truth too): the targets jump into the
    stretch and out of it."""
    model, truth, targets = arm7_path(frames, seed) if ramp is None else \
        arm7_ramped(frames, seed, ramp)
    truth, targets = truth.copy(), targets.copy()
    rng = np.random.default_rng(seed)
    for a, length in stretches:
        pose = model.lo + rng.uniform(0.1, 0.9, model.n) * (model.hi - model.lo)
        truth[a:a + length] = pose
        targets[a:a + length] = model.transforms(pose[None])
    return model, truth, targets


def test_smooth_clips_have_no_cuts() -> None:
    """The test generator's paths, at their speed and squeezed into 200 frames (1-3
    sweeps of 60 % of each range in 200 frames), have no cut: their targets never jump
    by the joints' rule and ``coarse_motion`` at once."""
    for frames in (200, 2000):
        for seed in range(5):
            model, _, targets = arm7_path(frames, seed)
            search = Search(model, targets, None, None, RobustOptions())
            assert plan.target_cuts(search).size == 0, (frames, seed)


def test_a_clip_whose_targets_cut_is_planned_a_stretch_at_a_time(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7, 2,000 frames (seed 300), whose targets jump to a far pose for frames
    188-208 and 835-851 and back: the four cuts are found, each stretch between them is
    planned alone (no pass spans a cut: before, the whole clip was planned three times,
    each pass with fast swings before the cuts), each from the solution nearest the pose
    before its cut but the last (planned from its own start too, which swings less),
    every frame converges, the jumps reported are the cuts, no step
    within a stretch is a flip, and the stretches held at one pose stay there (not
    planned: one pose held)."""
    model, truth, targets = with_cuts(2000, 300, [(188, 21), (835, 17)])
    cuts = [188, 209, 835, 852]
    search = Search(model, targets, None, None, RobustOptions())
    assert plan.target_cuts(search).tolist() == cuts
    planned = planned_passes(monkeypatch)
    res = solve_path(model, targets)
    # the stretches that move, each once (those held at one pose are that pose, the
    # solution reached from the pose before the cut: ``ends.still_path``); the last
    # again from its own start (``_rough``: its quick pass from the pose before the cut
    # swings faster than the rest of it)
    assert planned == [188, 626, 1148, 1148]
    assert res.converged.all()
    assert res.jumps == cuts
    bounds = [0, *cuts, 2000]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        assert largest_step(model, res.q[a:b]) < 2.0 * max(largest_step(model, truth[a:b]),
                                                         1e-3), (a, b)
    for a, b in ((188, 209), (835, 852)):
        assert largest_step(model, res.q[a:b]) == 0.0
    # each stretch after a cut starts at the solution its first frame's LM reaches from
    # the pose before the cut (the least motion across it) where its quick pass was
    # clean; the last one's swung 1.78x the truth's largest step (a swing that stands
    # out, ``judge.rough_frames``), and its plan from its own start, 1.05x, is kept
    opts = RobustOptions()
    assert largest_step(model, res.q[852:]) < 1.2 * largest_step(model, truth[852:])
    for c in cuts[:3]:
        near = ends.continued(model, targets[c:c + 1], None, None, opts, res.q[c - 1], 0,
                              None, None)
        assert near is not None and np.allclose(res.q[c], near, atol=1e-12), c


def test_frames_missed_beside_a_jump_are_mended_and_windows_planned_again(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7, 2,000 frames, seed 43: the first pass leaves ten frames within reach
    unconverged beside a jump. They are planned again within ``MEND_FRAMES`` of them
    (before, the whole clip was planned again at once), where they converge; the jump
    the window still leaves is planned again in its own window at the next retry's
    density (``plan.MEND_AGAIN``), and only then, that window still rough, the whole clip.
    The answer: every frame converged, no jump, no flip."""
    model, truth, targets = arm7_path(2000, 43)
    planned = planned_passes(monkeypatch)
    passes = relaxed_passes(monkeypatch)
    res = solve_path(model, targets)
    first, mended = passes[0], passes[1]
    missed = np.flatnonzero(~first.converged)
    assert missed.size and first.jumps
    assert planned[0] == 2000 and planned[1] < 2000 // 4  # the clip, then a window
    assert mended.converged.all()  # the missed frames reached in the window
    assert planned[2] < 2000 // 4 and planned[3:] == [2000]  # again a window; the clip
    assert res.converged.all() and not res.jumps
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth)


def test_a_swing_short_of_a_retry_has_its_window_planned_once_more(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7, 1,000 frames, seed 101: the first pass reaches every frame without a jump,
    and its largest step is 1.89 times the upper quartile of its steps, under the
    retries' test (``SPIKE``, 2) but 1.83 times the truth's largest step: a swing along
    the self-motion. Its window (``MEND_FRAMES`` on either side) is planned once more, at
    the first retry's density, and the path that keeps is no faster than 1.5 times the
    truth anywhere. Without it (``SWING_SPIKE`` 0) the swing stays."""
    model, truth, targets = arm7_path(1000, 101)
    true_step = largest_step(model, truth)
    planned = planned_passes(monkeypatch)
    passes = relaxed_passes(monkeypatch)
    res = solve_path(model, targets)
    first = passes[0]
    assert first.converged.all() and not first.jumps
    assert largest_step(model, first.q) > 1.8 * true_step
    assert planned[0] == 1000 and len(planned) == 2 and planned[1] < 1000 // 2
    assert res.converged.all() and not res.jumps
    assert largest_step(model, res.q) < 1.5 * true_step
    monkeypatch.setattr(judge, "SWING_SPIKE", 0.0)
    left = solve_path(model, targets)
    assert largest_step(model, left.q) > 1.8 * true_step


def test_a_swing_its_windows_leave_has_the_whole_clip_planned_once_more(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7, 2,000 frames, seed 533, at the CLI's tolerances (1e-3 m, 0.1 rad): the
    retries leave every frame solved without a jump, but with a swing along the
    self-motion (frames 330-420, the fifth joint turning at up to 2.31 times the truth's
    largest step) that stands out 1.98 times the upper quartile of the path's steps. Its
    windows' plan (``SWING_SPIKE``) keeps it: the path outside them leads into it. The
    whole clip planned once more at the first retry's density (``WHOLE_SWING_SPIKE``)
    keeps no step over 1.5 times the truth's. Without that pass the swing stays."""
    model, truth, targets = arm7_path(2000, 533)
    true_step = largest_step(model, truth)
    planned = planned_passes(monkeypatch)
    res = solve_path(model, targets, settings=SolverSettings())
    assert res.converged.all() and not res.jumps
    assert planned[-1] == 2000  # the last pass planned the whole clip
    assert largest_step(model, res.q) < 1.5 * true_step
    monkeypatch.setattr(plan, "WHOLE_SWING_SPIKE", float("inf"))
    left = solve_path(model, targets, settings=SolverSettings())
    assert left.converged.all() and not left.jumps
    assert largest_step(model, left.q) > 2.0 * true_step


def test_frames_out_of_reach_are_not_searched_again_but_followed(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7, 2,000 frames (seed 7), frames 1,000-1,059 moved 3x as far from the base and
    the ten on either side on the way (a ramp, no cut): 75 frames lie beyond the arm's
    reach, and three more within it are not reached. The first pass leaves them; no
    pass searches them again (before, their window was planned again as densely as a
    whole-clip retry, and left the same three): the stretch 989-1070 (the unconverged
    frames grown over the ramp's fast steps, ``stretches.stretches_out``) is followed
    frame by frame, and the frames before and after it are planned once each. Every
    other frame converges."""
    from dhik.solver.lm import Problem

    model, targets = arm7_ramped_out(2000, 7, 990)
    far = Problem(model, targets, None).out_of_reach()
    assert far.sum() == 75 and plan.target_cuts(Search(model, targets, None, None,
                                                       RobustOptions())).size == 0
    planned = planned_passes(monkeypatch)
    res = solve_path(model, targets)
    assert planned == [2000, 989, 2000 - 1071]
    missed = np.flatnonzero(~res.converged & ~far)
    assert 0 < missed.size <= 3 and (np.abs(missed - 1030) < 60).all()


@pytest.mark.parametrize("seed", [3, 7])
def test_a_stretch_between_cuts_that_leaves_reach_is_followed(
        monkeypatch: pytest.MonkeyPatch, seed: int) -> None:  # fmt: skip
    """arm7, 1,200 frames: frames 300-319 held at one pose (a cut in and out) and, in
    the stretch after the cut, frames 710-769 moved 3x as far from the base (a ramp out
    of reach and back). The stretch between the cuts is planned as a clip without cuts
    is: its frames out of reach followed (``stretches``), the frames before and after
    them planned apart. No step outside the cuts and the ramp is over twice the truth's
    largest, and every frame off the ramp is reached (on it, seed 3 misses 704-718 and
    771-775 as the clip without the cut does: their pose is beyond what the arm's reach
    test rules out). Planned whole, seed 3's stretch between the cuts swung 54x the
    truth's largest step at frame 678, reaching for the ramp; seed 7's quick pass from
    the pose nearest the one before the cut moved 2.7x as fast as the truth from the cut
    to frame 353, and was kept over the plan from its own start while the comparison
    counted the steps on the ramp's way out (``judge.score`` now leaves out the frames
    the targets move into fast: without that, 2.71x)."""
    from dhik.solver.lm import Problem
    from dhik.solver.path import stretches

    model, truth, targets = with_cuts(1200, seed, [(300, 20)], ramp=700)
    search = Search(model, targets, None, None, RobustOptions())
    assert plan.target_cuts(search).tolist() == [300, 320]
    followed: list[int] = []
    inner = stretches.followed_from

    def following(model_: object, problem: object, q: np.ndarray) -> object:
        followed.append(len(problem.targets))  # type: ignore[attr-defined]
        return inner(model_, problem, q)  # type: ignore[arg-type]

    monkeypatch.setattr(plan, "followed_from", following)
    res = solve_path(model, targets)
    assert followed and all(60 <= f <= 120 for f in followed)  # the ramp's stretch
    keep = np.ones(1200, dtype=bool)  # per frame: its step in counts
    keep[[0, 1, 300, 320]] = False
    keep[690:790] = False
    true_step = np.abs(np.diff(truth, axis=0)).max(axis=1)[keep[1:]].max()
    steps = np.abs(model.difference(res.q[:-1], res.q[1:])).max(axis=1)[keep[1:]]
    assert steps.max() < 2.0 * true_step
    far = Problem(model, targets, None).out_of_reach()
    missed = np.flatnonzero(~res.converged & ~far)
    assert ((missed >= 700) & (missed < 780)).all()  # on the ramp, as without the cut


def test_a_stretch_after_a_cut_that_moves_fast_throughout_is_rough() -> None:
    """A stretch after a cut planned from the pose nearest the one before the cut can
    land on a part of the self-motion that moves fast throughout: held_out.py-style
    clip 505 (three cuts and a ramp, seeds 500-515 drawn as ``with_cuts`` draws them)
    moved 2x as fast as the truth for 35 frames after its cut at 477. Nothing in the
    stretch stands out of its own steps, so ``judge.rough_frames`` counts the steps of the clip
    before it (``before``) in the quartile: there that stretch stands out, and it is
    planned from its own start too (that clip: 2.45x -> 1.70x the truth's largest step;
    16 such clips, 1 flip -> none)."""
    from dhik.solver.path.search import PathResult

    model, truth, _ = arm7_path(100, 1)
    q = np.zeros((100, model.n))
    q[:, 0] = 0.03 * np.arange(100)  # 0.03 rad a frame throughout (rad)
    path = PathResult(q, np.ones(100, dtype=bool), np.zeros((100, 1)), np.zeros((100, 1)),
                      [], np.zeros(100, dtype=int))
    near = np.zeros(100, dtype=bool)
    assert judge.rough_frames(model, path, near) == []
    slow = np.full(300, 0.012)  # the clip before the cut: 0.012 rad a frame
    assert judge.rough_frames(model, path, near, before=slow) == list(range(1, 100))
    assert judge.rough_frames(model, path, near, before=np.full(300, 0.02)) == []


def test_one_large_jump_is_worse_than_two_small_ones() -> None:
    """arm7, frames 838-1055 of a 1,200-frame clip (seed 1) whose targets were moved out
    to 3x their distance from the base at 786 and come back within reach over frames
    856-865 (18-27 here), all of them reachable. The first pass jumps 3.1 rad into frame
    57; the whole clip's denser retries step 0.2-0.3 rad on the ramp back, which stand out
    of their neighbours as jumps too. Paths are compared by their motion (steps to the
    8th power), not by how many jumps they have: the retry is kept (counted as jumps
    first, one against two, the 3.1 rad jump stayed), every frame reached, the steps
    after the ramp back within 1.5x the truth's largest."""
    model, truth, targets = arm7_ramped(1200, 1, 786)
    part = slice(838, 1056)
    res = solve_path(model, targets[part])
    assert res.converged.all()
    assert largest_step(model, res.q) < 0.5  # the ramp back's own steps (rad)
    assert largest_step(model, res.q[40:]) < 1.5 * largest_step(model, truth[part][40:])


def test_two_tries_are_compared_without_the_steps_the_targets_force() -> None:
    """Of a stretch after a cut, the quick pass from the pose before the cut and the plan
    from its own start are compared by ``judge.score``: misses, then the path's motion
    (its steps to the 8th power). A step into or out of a frame the targets force
    (beyond reach, or moved into fast: a ramp's way out) is not counted: there the try
    that swings where the targets move slowly loses to the one that steps further where
    they move fast (held_out.py's cut-and-ramp seed 514 kept a swing of 11x the truth's
    largest step right after its cut, for a step on the ramp's way out 1.2x larger)."""
    from dhik.solver.path.search import PathResult, frame_steps, jump_frames

    model, truth, _ = arm7_path(600, 1)

    def path(frame: int, step: float) -> PathResult:
        q = truth.copy()
        q[frame:, 0] += step  # one column steps ``step`` (rad) more into ``frame``
        jumps = jump_frames(frame_steps(model, q, ~model.held), 2.5)
        return PathResult(q, np.ones(600, dtype=bool), np.zeros((600, 1)),
                          np.zeros((600, 1)), [int(j) for j in jumps],
                          np.zeros(600, dtype=int))

    swing, ramp = path(100, 0.3), path(400, 0.5)  # a swing; a larger step on the ramp
    assert swing.jumps == [100] and ramp.jumps == [400]
    assert judge.score(model, swing, 8.0) < judge.score(model, ramp, 8.0)
    forced = np.zeros(600, dtype=bool)
    forced[400] = True  # the targets move into frame 400 fast
    assert judge.score(model, ramp, 8.0, forced) < judge.score(model, swing, 8.0, forced)


def test_a_cut_is_one_for_every_effector_whose_targets_count() -> None:
    """Two hands on one solved spine (400 frames of a smooth path): the left hand's
    targets jump to another pose for frames 150-179 while the right hand's move on: no
    cut, the right hand's path goes on through them; both hands' targets held at other
    poses there: the cuts 150 and 180. arm7 whose target turns over (3 rad about x) for
    frames 150-179, its position smooth: with full-pose targets the cuts 150 and 180, a
    position-only target none."""
    from dhik.app.formats import parse_skeleton
    from dhik.model.joint_space import BatchedModel
    from fixtures import sample_coordinates, smooth_path, two_hands_on_a_spine

    opts = RobustOptions()
    model = BatchedModel(parse_skeleton(two_hands_on_a_spine()), ["LHand", "RHand"])
    targets = model.transforms(smooth_path(model.lo, model.hi, 400, 4))
    other = model.transforms(sample_coordinates(model, np.random.default_rng(4), 1))[0]
    one, both = targets.copy(), targets.copy()
    one[150:180, 0] = other[0]
    both[150:180] = other
    assert plan.target_cuts(Search(model, one, None, None, opts)).size == 0
    assert plan.target_cuts(Search(model, both, None, None, opts)).tolist() == [150, 180]

    arm, _, turned = arm7_path(400, 4)
    turned = turned.copy()
    flip = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(3.0), -np.sin(3.0)],
                     [0.0, np.sin(3.0), np.cos(3.0)]])
    turned[150:180, :, :3, :3] = turned[150:180, :, :3, :3] @ flip
    full = Search(arm, turned, None, None, opts)
    position = Search(arm, turned, [(1.0, 0.0)], None, opts)
    assert plan.target_cuts(full).tolist() == [150, 180]
    assert plan.target_cuts(position).size == 0


def test_a_poled_clip_with_a_cut_swings_without_spreading_the_cut() -> None:
    """arm7 with a fixed pole at (0.6, 0, 1.2), 600 frames (seed 5), the targets held at
    another pose for frames 200-229: the jumps reported are the two cuts, every frame
    converges, and no other step is a flip. Before, the swing's relaxing took the cut
    for a peak and spread it over the six frames before it (steps of 0.07-0.13 rad, 2.8x
    the truth's largest, frames 197-199 reported as jumps)."""
    from dhik.app.formats import load_skeleton
    from dhik.model.joint_space import BatchedModel
    from dhik.solver.lm import PoleSet, pole_points
    from fixtures import ARM7

    plain, truth, targets = with_cuts(600, 5, [(200, 30)])
    model = BatchedModel(load_skeleton(ARM7), ["Tool"], points=pole_points(plain.chains, [0]))
    pole = np.broadcast_to(np.array([0.6, 0.0, 1.2]), (600, 1, 3))
    res = solve_path(model, targets, poles=PoleSet.build(model, [0], pole, [0.0]))
    assert res.converged.all()
    assert res.jumps == [200, 230]
    steps = np.abs(model.difference(res.q[:-1], res.q[1:])).max(axis=1)
    steps[[199, 229]] = 0.0  # the cuts
    assert steps.max() < 2.0 * max(largest_step(model, truth[:200]),
                                   largest_step(model, truth[230:]))


def test_stepped_keys_are_no_cuts() -> None:
    """arm7, 600 frames held at every 6th frame's pose (stepped keys, as an animator's
    blocking pass has them): every key is a step of ``coarse_motion`` or more beside
    still frames, yet no cut, since every key is such a step (``target_cuts``' 90th
    percentile), and the clip is planned as one: no step beyond twice the truth's
    largest key step. Cut at its keys and planned a stretch at a time, seed 3 swung the
    arm 3.8 rad at one key (13x the truth's), seed 1 5.3 rad."""
    for seed in (1, 3):
        model, truth, targets = arm7_path(600, seed)
        held = (np.arange(600) // 6) * 6
        search = Search(model, targets[held], None, None, RobustOptions())
        assert plan.target_cuts(search).size == 0, seed
    model, truth, targets = arm7_path(600, 3)
    res = solve_path(model, targets[held])
    assert res.converged.all()
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth[held])
