"""A clip that stands still (every frame the same targets) is one pose held
(``path.ends.still_path``): no search, the least motion there is, and where the clip
joins a pose before it, the solution LM reaches from that pose. Coordinates rad and m."""

from __future__ import annotations

import numpy as np
import pytest
from dhik.app.formats import load_skeleton
from dhik.solver.lm import Problem, levenberg_marquardt, solve_many, solve_one
from dhik.solver.path import plan, solve_path
from fixtures import ARM7, arm7_path, check_answers, largest_step, planned_passes


def test_a_still_clip_is_one_pose_on_target_without_a_search(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """60 frames of frame 100's target: every frame the same pose, on target as fresh
    joint objects pose it, the work all on the first frame; the search is not run. The
    search itself (still_path off) also answers with no motion at all, in more work."""
    model, _, targets = arm7_path(200, 11)
    still = np.repeat(targets[100:101], 60, axis=0)
    planned = planned_passes(monkeypatch)
    res = solve_path(model, still)
    assert planned == [] and res.converged.all() and res.jumps == []
    np.testing.assert_array_equal(res.q, np.repeat(res.q[:1], 60, axis=0))
    check_answers(load_skeleton(ARM7), model, res.q[:1], still[:1], 1e-5, 1e-4)
    # the pose solve_many gives the frame (the T-pose or a cold start, with restarts)
    np.testing.assert_array_equal(res.q[0], solve_many(model, still[:1]).q[0])
    assert res.iterations[0] > 0 and not res.iterations[1:].any()
    monkeypatch.setattr(plan, "still_path", lambda *args: None)
    searched = solve_path(model, still)
    assert planned and searched.converged.all() and largest_step(model, searched.q) == 0.0
    assert searched.iterations.sum() > 10 * res.iterations.sum()


def test_a_still_clip_holds_the_solution_reached_from_the_pose_before() -> None:
    """With the pose before the clip: the frame's solution LM reaches from it, pulled
    toward it (``solve_one``), on every frame, within one true step of that pose."""
    model, truth, targets = arm7_path(200, 11)
    still = np.repeat(targets[100:101], 40, axis=0)
    res = solve_path(model, still, before=truth[99])
    near = solve_one(model, still[0], truth[99])
    assert res.converged.all() and res.jumps == []
    np.testing.assert_allclose(res.q, np.repeat(near.q[:1], 40, axis=0), atol=1e-9)
    true_step = np.abs(np.diff(truth, axis=0)).max()
    assert np.abs(res.q[0] - truth[99]).max() <= true_step
    ahead = solve_path(model, still, start=truth[100])  # a given start is held as it is
    np.testing.assert_array_equal(ahead.q, np.repeat(truth[100:101], 40, axis=0))


def test_a_still_clip_between_two_other_poses_is_searched(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Joined to a pose before and a different one after (another point of the arm's
    self-motion), the path must move between them: searched, continuous, from the one
    to the other."""
    model, truth, targets = arm7_path(200, 11)
    still = np.repeat(targets[100:101], 40, axis=0)
    # another solution of the same target, along the self-motion: the first joint
    # turned 0.2 rad and locked there, the others solving the rest
    turned = truth[100].copy()
    turned[0] += 0.2
    locked = np.zeros(model.n, dtype=bool)
    locked[0] = True
    other = levenberg_marquardt(model, Problem(model, still[:1], None), turned[None], 100,
                                frozen=locked)
    assert other.converged[0] and other.q[0, 0] == turned[0]
    planned = planned_passes(monkeypatch)
    res = solve_path(model, still, start=truth[100], after=other.q[0])
    assert planned and res.converged.all() and res.jumps == []
    np.testing.assert_array_equal(res.q[0], truth[100])
    np.testing.assert_allclose(res.q[-1], other.q[0], atol=1e-3)
    assert largest_step(model, res.q) < 0.2 * np.abs(other.q[0] - truth[100]).max()


def test_a_still_clip_beyond_reach_holds_its_closest_approach(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A target beyond the arm's reach held still (frame 150's moved out to 3x its
    distance): no pose meets it, so the search runs; its closest approach is held on
    every frame (searched frame by frame, the approaches differed by up to 0.91 rad and
    seven frames were reported as jumps), at least as near as ``solve_many``'s."""
    model, _, targets = arm7_path(200, 11)
    far = targets[150:151].copy()
    far[..., :3, 3] *= 3.0
    still = np.repeat(far, 30, axis=0)
    planned = planned_passes(monkeypatch)
    res = solve_path(model, still)
    assert planned and not res.converged.any() and res.jumps == []
    assert largest_step(model, res.q) == 0.0
    problem = Problem(model, far, None)
    alone = solve_many(model, far)
    assert problem.shortfall(res.position_error[:1], res.orientation_error[:1])[0] <= \
        problem.shortfall(alone.position_error, alone.orientation_error)[0]
    reached = model.pose(res.q[:1])[1][0, 0]  # the effector's world position (m)
    np.testing.assert_allclose(res.position_error[0, 0],
                               np.linalg.norm(reached - far[0, 0, :3, 3]), atol=1e-9)


def test_a_held_stretch_between_cuts_is_one_pose() -> None:
    """A path cut into a pose held for 20 frames and back (an edit): the held stretch is
    one pose, the solution reached from the pose before the cut, every frame converged,
    and the path moves continuously on each side of the cuts."""
    model, truth, _ = arm7_path(200, 11)
    rng = np.random.default_rng(5)
    clip = truth[:160].copy()
    clip[70:90] = model.lo + rng.uniform(0.2, 0.8, model.n) * (model.hi - model.lo)
    res = solve_path(model, model.transforms(clip))
    assert res.converged.all()
    np.testing.assert_array_equal(res.q[70:90], np.repeat(res.q[70:71], 20, axis=0))
    near = solve_one(model, model.transforms(clip[70:71])[0], res.q[69])
    if near.converged[0]:  # LM reached it from the pose before the cut: held as it is
        np.testing.assert_allclose(res.q[70], near.q[0], atol=1e-9)
    true_step = np.abs(np.diff(truth[:160], axis=0)).max()
    for part in (slice(0, 70), slice(90, 160)):
        assert largest_step(model, res.q[part]) <= 2.0 * true_step
