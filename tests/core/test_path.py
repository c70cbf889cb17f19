"""Flip-free trajectories (``solver.path.solve_path``) against independent references.

Targets are the FK of smooth joint paths within the limits (reachable, one continuous
answer: the truth), unless said. A flip is a step in which a column moves more than
twice the truth's largest per-frame step; answers are re-checked with the joint objects'
FK and the skeleton's limits. Fixed seeds throughout. Frames: world; metres, radians.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import warnings
from collections.abc import Callable
from typing import Any

import fixtures
import numpy as np
import pytest
from dhik.app.formats import load_skeleton, parse_skeleton
from dhik.model.joint_space import BatchedModel
from dhik.model.skeleton import Skeleton
from dhik.solver.lm import ENGINE_SETTINGS, PoleSet, Problem, pole_points, solve_many
from dhik.solver.lm import loop as lm_loop
from dhik.solver.path import PathResult, judge, solve_path
from fixtures import (
    ARM7,
    HUMANOID_ARM,
    arm7_path,
    check_answers,
    largest_step,
    planned_passes,
    relaxed_passes,
    smooth_path,
    swivel,
)


@functools.cache
def arm7_solved() -> tuple[BatchedModel, np.ndarray, np.ndarray, PathResult]:
    """One 200-frame arm7 path (seed 11) and its solve, shared by the tests below."""
    model, truth, targets = arm7_path(200, 11)
    return model, truth, targets, solve_path(model, targets)


def test_path_converges_within_limits_and_is_deterministic() -> None:
    model, _, targets, res = arm7_solved()
    assert res.converged.all() and res.jumps == []
    check_answers(load_skeleton(ARM7), model, res.q, targets, 1e-5, 1e-4)
    again = solve_path(model, targets)
    np.testing.assert_array_equal(res.q, again.q)
    np.testing.assert_array_equal(res.iterations, again.iterations)


def test_path_has_no_flips() -> None:
    model, truth, _, res = arm7_solved()
    # the steps are those of a continuous path: none beyond twice the true path's largest
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth)


# the same arm with ball joints that turn freely (a Blender bone without locks): both
# solved in the rotation-vector chart
FREE_ARM = {**HUMANOID_ARM, "joints": [
    {k: v for k, v in j.items() if k != "limits" or j["type"] != "spherical"}
    for j in HUMANOID_ARM["joints"]]}
SLIDERS = {  # a 7-DoF chain with two prismatic joints
    "root_name": "Base",
    "joints": [
        {"name": "Base", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {"name": "Turn", "type": "revolute", "offset": [0, 0, 0.2], "parent": "Base",
         "axis": [0, 0, 1], "limits": [-3.0, 3.0]},
        {"name": "Lift", "type": "prismatic", "offset": [0, 0, 0.3], "parent": "Turn",
         "axis": [0, 0, 1], "limits": [0.0, 0.8]},
        {"name": "Pitch", "type": "revolute", "offset": [0, 0, 0.1], "parent": "Lift",
         "axis": [0, 1, 0], "limits": [-1.5, 1.5]},
        {"name": "Reach", "type": "prismatic", "offset": [0.2, 0, 0], "parent": "Pitch",
         "axis": [1, 0, 0], "limits": [0.0, 0.5]},
        {"name": "Roll", "type": "revolute", "offset": [0.1, 0, 0], "parent": "Reach",
         "axis": [1, 0, 0], "limits": [-3.0, 3.0]},
        {"name": "Bend", "type": "revolute", "offset": [0.0, 0, 0], "parent": "Roll",
         "axis": [0, 1, 0], "limits": [-2.0, 2.0]},
        {"name": "Twist", "type": "revolute", "offset": [0.05, 0, 0], "parent": "Bend",
         "axis": [0, 0, 1], "limits": [-2.9, 2.9]},
        {"name": "Tool", "type": "fixed", "offset": [0.08, 0, 0], "parent": "Twist"},
    ],
}


@pytest.mark.parametrize(("scene", "effector"), [(HUMANOID_ARM, "Hand"), (SLIDERS, "Tool"),
                                                 (FREE_ARM, "Hand")],
                         ids=["humanoid", "sliders", "free balls"])
def test_path_spherical_and_prismatic_chains(scene: dict, effector: str) -> None:
    """Boxed balls (intrinsic XYZ angles), sliders, and free balls (rotation vectors, the
    truth's up to 1.6 rad long, the elbow limited): every frame on target, no flip."""
    defn = parse_skeleton(scene)
    model = BatchedModel(defn, [effector])
    lo = np.where(np.isfinite(model.lo), model.lo, -1.6)
    hi = np.where(np.isfinite(model.hi), model.hi, 1.6)
    truth = smooth_path(lo, hi, 300, 4)
    targets = model.transforms(truth)
    res = solve_path(model, targets)
    assert res.converged.all()
    check_answers(defn, model, res.q, targets, 1e-5, 1e-4)
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth)


def test_path_without_redundancy() -> None:
    """arm7 with J3 fixed: six columns for six error rows, branches instead of a grid."""
    arm = load_skeleton(ARM7)
    joints = tuple(dataclasses.replace(j, type="fixed", axis=None, limits=None)
                   if j.name == "J3" else j for j in arm.joints)
    defn = dataclasses.replace(arm, joints=joints)
    model = BatchedModel(defn, ["Tool"])
    assert model.n == 6
    truth = smooth_path(model.lo, model.hi, 300, 8)
    targets = model.transforms(truth)
    res = solve_path(model, targets)
    assert res.converged.all()
    check_answers(defn, model, res.q, targets, 1e-5, 1e-4)
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth)


def test_path_reports_a_forced_jump() -> None:
    """The targets jump between frames 199 and 200 (the base turns by 1 rad at once):
    every frame converges, frame 200 is reported, and no other frame is."""
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    truth = smooth_path(model.lo, model.hi, 400, 5)
    truth[200:, 0] += 1.0
    res = solve_path(model, model.transforms(np.clip(truth, model.lo, model.hi)))
    assert res.converged.all()
    assert res.jumps == [200]


def test_path_hinges_without_limits() -> None:
    """arm7 with every limit removed: the self-motion is gridded over one turn and a
    whole turn between segments is unwrapped, so no frame jumps."""
    arm = load_skeleton(ARM7)
    free = dataclasses.replace(arm, joints=tuple(dataclasses.replace(j, limits=None)
                                                 for j in arm.joints))
    limited, model = BatchedModel(arm, ["Tool"]), BatchedModel(free, ["Tool"])
    truth = smooth_path(limited.lo, limited.hi, 400, 3)
    targets = model.transforms(truth)
    res = solve_path(model, targets)
    assert res.converged.all()
    check_answers(free, model, res.q, targets, 1e-5, 1e-4)
    steps = np.abs(np.diff(res.q, axis=0)).max(axis=1)  # as written: no whole turns either
    assert steps.max() < 2.0 * np.abs(np.diff(truth, axis=0)).max()


def test_path_from_a_given_start() -> None:
    """``start``: the path leaves frame 0 from that solution (the end of the window
    before), and goes on from it without a jump."""
    model, truth, targets, _ = arm7_solved()
    start = truth[100]  # the true joints: one solution of frame 100 among many
    res = solve_path(model, targets[100:], start=start)
    np.testing.assert_array_equal(res.q[0], start)
    assert res.converged.all() and res.jumps == []
    assert largest_step(model, res.q) <= 2.0 * largest_step(model, truth)


@pytest.mark.parametrize("seed", [3, 7])
def test_path_joins_the_poses_before_and_after(seed: int) -> None:
    """``before`` and ``after``: the poses on the frames around the part solved (the keys
    a re-baked part of an animation sits between). Solved alone, the middle of a path
    may start and end on other branches of the redundant arm; told the poses around it,
    it starts and ends within one true step of them and moves no more than twice the true
    step anywhere."""
    model, truth, targets = arm7_path(200, seed)
    true_step = np.abs(np.diff(truth, axis=0)).max()
    res = solve_path(model, targets[100:150], before=truth[99], after=truth[150])
    assert res.converged.all() and res.jumps == []
    assert np.abs(res.q[0] - truth[99]).max() <= true_step
    assert np.abs(res.q[-1] - truth[150]).max() <= true_step
    assert np.abs(np.diff(res.q, axis=0)).max() <= 2.0 * true_step
    check_answers(load_skeleton(ARM7), model, res.q[::10], targets[100:150:10], 1e-5, 1e-4)
    ahead = solve_path(model, targets[100:], before=truth[99])  # only a start
    assert np.abs(ahead.q[0] - truth[99]).max() <= true_step and ahead.jumps == []


def test_path_with_a_locked_column_is_quiet() -> None:
    """A joint whose limits are one value (a locked axis, as Blender's lock_ik gives) has
    no range: choosing among candidates by their distance to the limits ignores it. The
    path converges, the joint keeps its value, and numpy warns of nothing."""
    arm = load_skeleton(ARM7)
    locked = dataclasses.replace(arm, joints=tuple(
        dataclasses.replace(j, limits=(0.3, 0.3)) if j.name == "J5" else j
        for j in arm.joints))
    model = BatchedModel(locked, ["Tool"])
    rng = np.random.default_rng(4)
    truth = fixtures.sample_coordinates(model, rng, 1)[0] + np.linspace(0.0, 0.05, 30)[:, None]
    truth[:, 4] = 0.3
    truth = np.clip(truth, model.lo, model.hi)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = solve_path(model, model.transforms(truth))
    assert res.converged.all()
    np.testing.assert_array_equal(res.q[:, 4], 0.3)


# ----------------------------------------------------- the work a path's frames cost


def spy_on_the_lm(monkeypatch: pytest.MonkeyPatch, wrap: Callable[..., Any]) -> None:
    """Route every LM run of the solver's modules through ``wrap(inner, *args,
    **kwargs)``: wherever a module of ``dhik.solver`` holds ``levenberg_marquardt``."""
    inner = lm_loop.levenberg_marquardt

    def spy(*args: Any, **kwargs: Any) -> Any:
        return wrap(inner, *args, **kwargs)

    patched = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("dhik.solver.") and module is not lm_loop and \
                getattr(module, "levenberg_marquardt", None) is inner:
            monkeypatch.setattr(module, "levenberg_marquardt", spy)
            patched += 1
    assert patched >= 2  # the path's modules and solve_many's


def test_path_counts_each_frames_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """``iterations``: per frame, the LM iterations its rows took over every pass. The
    total is what every LM run of the solve reported (counted here independently), a
    coarse frame (many candidates) costs far more than a frame filled between coarse
    ones, and the count is the same on a second run."""
    model, _, targets = arm7_path(200, 3)  # one pass (a retry is every frame's work)
    spent: list[np.ndarray] = []

    def counting(inner: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        res = inner(*args, **kwargs)
        rows = kwargs.get("rows")
        spent.append(np.bincount(np.arange(len(res.q)) if rows is None else rows,
                                 weights=res.iterations, minlength=len(targets)))
        return res

    spy_on_the_lm(monkeypatch, counting)
    res = solve_path(model, targets)
    assert res.iterations.shape == (len(targets),)
    np.testing.assert_array_equal(res.iterations, np.sum(spent, axis=0))
    assert res.iterations.min() >= 0 and res.iterations.sum() > len(targets)
    assert res.iterations.max() > 10 * np.median(res.iterations)
    monkeypatch.undo()
    np.testing.assert_array_equal(solve_path(model, targets).iterations, res.iterations)


def test_path_caps_every_lm_run_at_max_iterations(monkeypatch: pytest.MonkeyPatch) -> None:
    """``settings.max_iterations`` (the bake's ``--max-iterations``) caps the budget of
    every LM run of the trajectory engine: tracking, seeds, fills and the closest
    approach."""
    model, _, targets = arm7_path(60, 3)
    targets[20:23, 0, 0, 3] += 5.0  # out of reach: the closest approach runs too
    budgets: list[int] = []

    def spy(inner: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        budget = int(kwargs["budget"] if "budget" in kwargs else args[3])
        budgets.append(budget)
        res = inner(*args, **kwargs)
        assert res.iterations.max(initial=0) <= budget
        return res

    spy_on_the_lm(monkeypatch, spy)
    solve_path(model, targets)
    assert max(budgets) > 12  # the default budgets: tracking at 15, seeds at 60, ...
    budgets.clear()
    res = solve_path(model, targets,
                     settings=dataclasses.replace(ENGINE_SETTINGS, max_iterations=8))
    assert budgets and max(budgets) == 8
    assert res.iterations.shape == (60,)


# ------------------------------------------------------------- held columns, reach


def test_held_columns_keep_the_values_given_per_frame() -> None:
    """``solve_path`` and ``solve_many`` with ``held``: every frame's held column has
    exactly its value, and the solved columns reach targets made with those values."""
    defn = parse_skeleton(fixtures.SPINE_ARM)
    model = BatchedModel(defn, ["Hand"], [3])  # the spine is held
    whole = BatchedModel(defn, ["Hand"])
    frames = 60
    truth = smooth_path(np.array([-1.0, -0.5, -0.5, -0.5, 0.3]),
                        np.array([1.0, 0.5, 0.5, 0.5, 2.0]), frames, 4)
    targets = whole.transforms(truth)
    held = np.zeros_like(truth)
    held[:, 0] = truth[:, 0]
    path = solve_path(model, targets, weights=[(1.0, 0.0)], held=held)
    many = solve_many(model, targets, weights=[(1.0, 0.0)], held=held)
    for q, conv in ((path.q, path.converged), (many.q, many.converged)):
        assert conv.all()
        np.testing.assert_array_equal(q[:, 0], truth[:, 0])
        pos = whole.transforms(q)[:, 0, :3, 3]
        assert np.abs(pos - targets[:, 0, :3, 3]).max() < 1e-5
    # without the values the spine stays at the T-pose, and the targets are missed
    alone = solve_many(model, targets, weights=[(1.0, 0.0)])
    assert np.all(alone.q[:, 0] == 0.0) and not alone.converged.all()


def test_held_columns_do_not_count_as_redundancy() -> None:
    """arm7 on a turntable with the turntable and J1 held leaves six solved hinges for a
    full pose: no redundancy, so no column is locked on a grid (locking one left five
    columns for six error rows). Every frame converges, the held values stay as given,
    and the path follows the truth."""
    defn = parse_skeleton(fixtures.arm7_on_a_turntable())
    names = [j.name for j in defn.joints]
    model = BatchedModel(defn, ["Tool"], [len(names) - names.index("J1") - 1])
    whole = BatchedModel(defn, ["Tool"])
    assert model.held.tolist() == [True, True] + [False] * 6
    frames = 200
    truth = smooth_path(whole.lo[1:], whole.hi[1:], frames, 3)
    q = np.column_stack([0.6 * np.sin(np.linspace(0, 2 * math.pi, frames)), truth])
    res = solve_path(model, whole.transforms(q), held=q)
    assert res.converged.all() and not res.jumps
    np.testing.assert_array_equal(res.q[:, :2], q[:, :2])
    true_step = np.abs(np.diff(q[:, 2:], axis=0)).max()
    assert np.abs(np.diff(res.q[:, 2:], axis=0)).max() < 2.0 * true_step


def test_frames_out_of_reach_stay_within_the_limits() -> None:
    """A target reached only outside a limit (the T-pose hand of the spine arm, whose
    elbow is limited to >= 0.05 rad, the elbow alone solving): no frame converges, and
    every frame of ``solve_path`` and ``solve_many`` keeps the elbow at its limit, the
    closest approach within it."""
    defn = parse_skeleton(fixtures.SPINE_ARM)
    model = BatchedModel(defn, ["Hand"], [2])  # the elbow alone
    hand = Skeleton(defn).world_transforms()["Hand"]
    targets = np.array([hand] * 40)[:, None]
    for res in (solve_path(model, targets), solve_many(model, targets)):
        assert not res.converged.any()
        assert np.all(res.q >= model.lo) and np.all(res.q <= model.hi)
        np.testing.assert_array_equal(res.q[:, -1], 0.05)


def test_unreachable_frames_get_the_closest_approach_and_the_rest_converge() -> None:
    """Frames 20-24 of an arm7 path are 5 m away: they are not converged, reach out
    toward their targets (closer than the frames on either side, posed alike, would be),
    within the limits; every other frame converges."""
    model, truth, targets = arm7_path(60, 3)
    targets[20:25, 0, 0, 3] += 5.0
    res = solve_path(model, targets)
    lost = np.flatnonzero(~res.converged).tolist()
    assert lost == list(range(20, 25))
    assert np.all(res.q >= model.lo) and np.all(res.q <= model.hi)
    for f in lost:
        neighbour = model.transforms(res.q[[19]])[0, 0, :3, 3]
        assert res.position_error[f, 0] < np.linalg.norm(targets[f, 0, :3, 3] - neighbour)


# --------------------------------------------------------------------------- poles


def test_a_pole_on_a_path_bends_every_frame_toward_it_without_flips() -> None:
    """The spine arm's shoulder, elbow and hand (chain length 3, position-only targets,
    one free turn) on a 60-frame path with a pole above the shoulder (far from every
    shoulder-to-target line: a pole near that line turns its half-plane fast, a jump the
    targets force): every hand on target, every elbow within 1e-3 rad of the pole's
    half-plane, no jump reported, and no step beyond twice the largest of the joint path
    that made the targets (which bends elsewhere)."""
    defn = parse_skeleton(fixtures.SPINE_ARM)
    plain = BatchedModel(defn, ["Hand"], [3])
    model = BatchedModel(defn, ["Hand"], [3], points=pole_points(plain.chains, [0]))
    frames = 60
    lo = np.where(np.isfinite(model.lo), model.lo, -0.8)
    hi = np.where(np.isfinite(model.hi), model.hi, 0.8)
    lo[model.held], hi[model.held] = 0.0, 0.0
    truth = smooth_path(lo, hi, frames, 6)
    targets = plain.transforms(truth)
    pole = np.array([0.2, 0.0, 6.0])
    poles = PoleSet.build(model, [0], np.broadcast_to(pole, (frames, 1, 3)), [0.0])
    tight = dataclasses.replace(ENGINE_SETTINGS, max_iterations=200,
                                position_tolerance=1e-6)
    res = solve_path(model, targets, [(1.0, 0.0)], tight, poles=poles)
    assert res.converged.all() and res.jumps == []
    sk = Skeleton(defn)
    for row, target in zip(res.q, targets, strict=True):
        sk.reset()
        sk.set_joint_values(model.joint_values(row))
        world = sk.world_transforms()
        assert np.linalg.norm(world["Hand"][:3, 3] - target[0][:3, 3]) < 1e-6
        assert abs(swivel(world, pole, target[0])) < 1e-3
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth)



def _arm7_swivels(model: BatchedModel, q: np.ndarray, targets: np.ndarray,
                  poles: np.ndarray) -> np.ndarray:
    """Per frame |swivel| (rad) of arm7's chain against its pole (``poles`` (F, 3),
    world m), from the joint objects' FK: the bend point (mean of the joints between the
    chain's first joint and the tool) against the pole, about the line from the first
    joint to the target."""
    chain = model.chains[0]
    sk = Skeleton(load_skeleton(ARM7))
    out = []
    for row, target, pole in zip(q, targets, poles, strict=True):
        sk.reset()
        sk.set_joint_values(model.joint_values(row))
        world = sk.world_transforms()
        r0 = world[chain[0]][:3, 3]
        u = target[0][:3, 3] - r0
        u /= np.linalg.norm(u)
        b = np.mean([world[j][:3, 3] for j in chain[1:-1]], axis=0) - r0
        b -= (b @ u) * u
        p = pole - r0
        p -= (p @ u) * u
        out.append(abs(math.atan2(u @ np.cross(b, p), b @ p)))
    return np.array(out)


def _arm7_poled(frames: int, seed: int) -> tuple[BatchedModel, BatchedModel, np.ndarray,
                                                 np.ndarray]:  # fmt: skip
    """arm7 without and with its pole's points, a smooth joint path and its targets."""
    plain, truth, targets = arm7_path(frames, seed)
    model = BatchedModel(load_skeleton(ARM7), ["Tool"], points=pole_points(plain.chains, [0]))
    return plain, model, truth, targets


@pytest.mark.parametrize("seed", [1, 6])
def test_a_pole_the_limits_forbid_swings_toward_it_without_flips(seed: int) -> None:
    """A fixed pole (0.6, 0, 1.2) on a 300-frame arm7 path: its swivel is beyond what the
    limits allow on most frames, where the nearest allowed swivel jumps from one end of
    the allowed range to the other (the engine that counted the pole as an error row
    flipped on every such clip, bench/clips.py: 1,499 flip frames in 20). Every frame
    converges, no step exceeds twice the truth's largest, and the path is nearer the
    pole than the pole-free path (median swivel)."""
    plain, model, truth, targets = _arm7_poled(300, seed)
    pole = np.broadcast_to(np.array([0.6, 0.0, 1.2]), (300, 3))
    res = solve_path(model, targets, poles=PoleSet.build(model, [0], pole[:, None], [0.0]))
    assert res.converged.all()
    check_answers(load_skeleton(ARM7), model, res.q, targets, 1e-5, 1e-4)
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth)
    free = solve_path(plain, targets)
    assert np.median(_arm7_swivels(model, res.q, targets, pole)) < \
        np.median(_arm7_swivels(model, free.q, targets, pole))


@pytest.mark.parametrize("seed", [2, 6])
def test_a_pole_the_truth_meets_is_met_on_most_frames_without_flips(seed: int) -> None:
    """A pole per frame on the side the truth bends to (its bend point 0.5 m out from
    the first-joint-to-target line: the truth meets it on every frame, as a rigger's
    pole by the arm): every frame converges, no step exceeds twice the truth's largest,
    and at least a third of the frames are within 1e-3 rad of the pole's half-plane (the
    pole-free path: under a tenth as many, those it passes through on its way)."""
    plain, model, truth, targets = _arm7_poled(300, seed)
    _, pos = model.pose(truth)  # (F, 1 + points, 3): the tool, the first joint, the bends
    first, bend = pos[:, 1], pos[:, 2:].mean(axis=1)
    u = targets[:, 0, :3, 3] - first
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    out = bend - first
    out -= np.sum(out * u, axis=1, keepdims=True) * u
    pole = bend + 0.5 * out / np.linalg.norm(out, axis=1, keepdims=True)
    assert _arm7_swivels(model, truth, targets, pole).max() < 1e-9
    res = solve_path(model, targets, poles=PoleSet.build(model, [0], pole[:, None], [0.0]))
    assert res.converged.all()
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth)
    met = _arm7_swivels(model, res.q, targets, pole) < 1e-3
    free = _arm7_swivels(model, solve_path(plain, targets).q, targets, pole) < 1e-3
    assert met.sum() >= 100 and free.sum() < 0.1 * met.sum()


def test_a_swing_that_stands_out_is_planned_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A path whose largest step stands out of the clip's (over ``SPIKE`` times their
    upper quartile) is planned again, though no step is out of line with its neighbours
    (no jump): arm7, 600 frames, seed 1, largest step 1.67x the truth's (without the
    retry, ``SPIKE`` infinite, and without ``SWING_SPIKE``'s one more plan of its
    window: 2.49x, a flip)."""
    model, truth, targets = arm7_path(600, 1)
    res = solve_path(model, targets)
    assert res.converged.all() and not res.jumps
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth)
    monkeypatch.setattr(judge, "SPIKE", float("inf"))
    monkeypatch.setattr(judge, "SWING_SPIKE", 0.0)
    once = solve_path(model, targets)
    assert once.converged.all() and not once.jumps
    assert largest_step(model, once.q) > 2.0 * largest_step(model, truth)


def test_a_jump_is_mended_around_it_not_by_planning_the_whole_clip(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A first pass that leaves a jump (arm7, 2,000 frames, seed 10) is planned again
    within ``MEND_FRAMES`` of it, from its own poses at either side, and the whole clip
    is not searched again: every frame converged, no jump, no step beyond twice the
    truth's largest, the frames away from the jump as the first pass left them (but for
    a few its peaks' relaxing moves again). Where the windows would be over
    ``MEND_SHARE`` of the clip, the whole clip is planned again at once. (The first
    pass without ``ladder.HARD``'s raised estimates, which find the path here at once,
    and without its tracks' quicker stall rule, ``candidates.QUICK_STALL``, whose first
    pass leaves the jump between poses from which the window's plan does not avoid it:
    the whole clip is planned again.)"""
    from dhik.solver.path import candidates, ladder

    width = 2 * judge.MEND_FRAMES + 1  # one jump's window, away from the clip's ends
    fits = int(np.ceil(width / judge.MEND_SHARE))  # the shortest clip it is planned in
    mid = fits // 2

    def near(frames: int, beyond: tuple[int, ...] = ()) -> np.ndarray:
        far = np.zeros(frames, dtype=bool)  # frames beyond reach
        far[list(beyond)] = True
        return far

    assert judge.windows([mid], near(fits)) == [(mid - judge.MEND_FRAMES,
                                                 mid + judge.MEND_FRAMES)]
    assert judge.windows([mid], near(fits - 1)) == []
    # a window that holds a frame beyond reach is planned apart in a longer clip only
    assert judge.windows([mid], near(fits, (mid + 1,))) == []
    long = int(np.ceil(width / judge.MEND_SHARE_FAR))
    assert judge.windows([mid], near(long, (mid + 1,))) == [(mid - judge.MEND_FRAMES,
                                                             mid + judge.MEND_FRAMES)]
    assert judge.windows([500, 520, 900], near(4000)) == [
        (500 - judge.MEND_FRAMES, 520 + judge.MEND_FRAMES),
        (900 - judge.MEND_FRAMES, 900 + judge.MEND_FRAMES)]
    model, truth, targets = arm7_path(2000, 10)
    monkeypatch.setattr(ladder, "HARD", np.inf)
    monkeypatch.setattr(candidates, "QUICK_STALL", None)
    planned = planned_passes(monkeypatch)
    passes = relaxed_passes(monkeypatch)
    res = solve_path(model, targets)
    first = passes[0]
    assert first.converged.all() and len(first.jumps) == 1
    (a, b), = judge.windows(first.jumps, near(2000))
    assert (a, b) == (first.jumps[0] - judge.MEND_FRAMES, first.jumps[0] + judge.MEND_FRAMES)
    assert planned == [2000, b - a + 1]  # the clip, then the window
    assert res.converged.all() and not res.jumps
    assert largest_step(model, res.q) < 2.0 * largest_step(model, truth)
    away = np.r_[0:a, b + 1:2000]
    moved = np.any(res.q[away] != first.q[away], axis=1)
    assert moved.sum() <= 0.02 * len(away)
    assert res.iterations.sum() > first.iterations.sum()


def test_a_jump_the_first_retry_leaves_gets_a_denser_one(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """arm7, 600 frames, seed 12: the shoulder passes near J2 = 0, where the first pass
    leaves a jump. Its retry, on every column (``plan.WIDE_RETRIES``), finds the
    continuous path: no jump, largest step 1.11x the truth's. With retries on the first
    pass's four columns (and the first pass without ``ladder.HARD``'s raised
    estimates, which find the path here at once), and the whole clip planned again
    where the jump's window is over a quarter of it (``judge.MEND_SHARE`` 0.25: its
    window alone, at twice the density, finds the path), the first (coarse frames twice
    as dense) leaves the jump and the second (four times as dense) finds the path
    (1.23x)."""
    import dhik.solver.path.plan as plan
    from dhik.solver.path import ladder
    from dhik.solver.settings import RobustOptions

    model, truth, targets = arm7_path(600, 12)
    for retries in (1, 2):
        res = solve_path(model, targets, options=RobustOptions(retries=retries))
        assert res.converged.all() and not res.jumps
        assert largest_step(model, res.q) < 1.5 * largest_step(model, truth)
    monkeypatch.setattr(plan, "WIDE_RETRIES", False)
    monkeypatch.setattr(ladder, "HARD", np.inf)
    monkeypatch.setattr(judge, "MEND_SHARE", 0.25)
    assert solve_path(model, targets, options=RobustOptions(retries=1)).jumps
    res = solve_path(model, targets)
    assert not res.jumps and largest_step(model, res.q) < 1.5 * largest_step(model, truth)


def test_a_hump_of_the_cheap_pass_has_the_clip_searched(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The humanoid arm, position only (a self-motion of four dimensions), 600 frames,
    seed 233, the bake's default tolerances: the cheap pass's track humps at 2.14x the
    truth's largest step over 30 frames, 1.67x the upper quartile of its own steps. Over
    ``cheap.ACCEPT_SPIKE`` (1.6) the planner searches the clip instead: 1.01x. With the
    retries' 2 (``SPIKE``) as the cheap pass's test, as before, the hump is kept."""
    from dhik.app.bake import EffectorTrack, simulate
    from dhik.solver.path import cheap

    defn = parse_skeleton(HUMANOID_ARM)
    model = BatchedModel(defn, ["Hand"])
    truth = fixtures.smooth_path(model.lo, model.hi, 600, 233)
    targets = model.transforms(truth)

    def ratio() -> float:
        track = EffectorTrack("Hand", list(enumerate(targets[:, 0])), 1.0, 0.0)
        res = simulate(Skeleton(defn), [track], method="robust")
        assert res.converged_count == 600 and not res.jumps
        got = np.array([model.coordinates(f["joints"]) for f in res.frames])
        return float(np.abs(np.diff(got, axis=0)).max() / np.abs(np.diff(truth, axis=0)).max())

    assert ratio() < 1.5
    monkeypatch.setattr(cheap, "ACCEPT_SPIKE", cheap.SPIKE)
    assert ratio() > 2.0


def test_a_retry_locks_every_column(monkeypatch: pytest.MonkeyPatch) -> None:
    """arm7, 1,000 frames, seed 137: the first pass (on the four columns best conditioned
    on frame 0, ``free_count``) leaves a fast swing, over twice the truth's largest
    step; its retry locks each of the seven columns in turn (``plan.WIDE_RETRIES``) and
    finds a path within 1.5x of it. With the retries on the four columns and the whole
    clip planned again (``judge.MEND_SHARE`` 0.25: the swing's window alone, narrow,
    finds a path within 1.5x) the swing stays (2.16x), when the rough path left is
    not planned from other random draws (``plan.REDRAW``: 1.59x)."""
    import dhik.solver.path.plan as plan
    from dhik.solver.path.search import Search

    model, truth, targets = arm7_path(1000, 137)
    locked: list[tuple[bool, bool, int]] = []  # per pass: quick, wide, columns locked
    inner, columns = plan.ladder_path, Search.free_columns

    def pass_(search: Any, *args: Any) -> PathResult:
        locked.append((args[5], args[6], 0))  # quick, wide (after stride .. last)
        return inner(search, *args)

    def counted(self: Search, sols: np.ndarray, frame: int, count: int) -> list[int]:
        out = columns(self, sols, frame, count)
        locked[-1] = (*locked[-1][:2], len(out))
        return out

    monkeypatch.setattr(plan, "ladder_path", pass_)
    monkeypatch.setattr(Search, "free_columns", counted)
    res = solve_path(model, targets)
    assert res.converged.all() and not res.jumps
    assert largest_step(model, res.q) < 1.5 * largest_step(model, truth)
    assert locked == [(True, False, 4), (False, True, 7)]
    monkeypatch.setattr(plan, "WIDE_RETRIES", False)
    monkeypatch.setattr(judge, "MEND_SHARE", 0.25)
    monkeypatch.setattr(plan, "REDRAW", 0)  # (which takes the swing apart too: 1.59x)
    narrow = solve_path(model, targets)
    assert largest_step(model, narrow.q) > 2.0 * largest_step(model, truth)


@pytest.mark.parametrize(("seed", "passes"), [(3, [60]), (7, [60, 32, 60, 32, 32])])
def test_frames_out_of_reach_are_not_planned_again(monkeypatch: pytest.MonkeyPatch,
                                                   seed: int, passes: list[int]
                                                   ) -> None:  # fmt: skip
    """arm7, 600 frames, frames 200-259 moved 3x as far from the base (the targets cut
    into them and out: ``stretches.target_cuts``, each stretch planned alone). Seed 3:
    every one of them lies beyond the arm's reach (``Problem.out_of_reach``), no pass
    can reach them and the jumps into and out of them are the targets' doing: each
    stretch is planned once. Seed 7: 29 of them lie within reach but are not reached,
    28 in a row at the end (232-259, 12 of them beyond reach: a stretch out of reach,
    followed, the 32 frames before it planned apart): their stretch, tried from the pose
    nearest the one before the cut, is planned from its own start too, and there the 32
    frames once more, denser (their first frame missed): one denser pass, not the two
    a jump on a clip solved everywhere gets."""
    model, _, targets = arm7_path(600, seed)
    targets = targets.copy()
    targets[200:260, :, :3, 3] *= 3.0
    planned = planned_passes(monkeypatch)
    res = solve_path(model, targets)
    assert planned == [200, *passes, 340]
    assert res.converged[:200].all() and res.converged[260:].all()
    far = Problem(model, targets, None).out_of_reach()
    assert far[200:260].all() == (seed == 3) and not far[:200].any()
    assert (~res.converged).sum() == (60 if seed == 3 else 29)


@pytest.mark.parametrize("seed", [3, 6])
def test_a_poled_part_joins_the_poses_around_it(seed: int) -> None:
    """A re-baked part of an arm7 clip with a fixed pole (frames 100-199 of 300, the
    truth's poses on frames 99 and 200 given, which bend elsewhere than the pole asks):
    the swing keeps the given ends and swings in and out, so no step exceeds twice the
    truth's largest, the seams with the given poses included (swung on its first or
    last frame too, these parts jumped 2.2 and 5.5 true steps there)."""
    _, model, truth, targets = _arm7_poled(300, seed)
    part = slice(100, 200)
    pole = np.broadcast_to(np.array([0.6, 0.0, 1.2]), (100, 1, 3))
    res = solve_path(model, targets[part], poles=PoleSet.build(model, [0], pole, [0.0]),
                     before=truth[99], after=truth[200])
    assert res.converged.all()
    assert largest_step(model, np.vstack([truth[99], res.q, truth[200]])) < \
        2.0 * largest_step(model, truth)


def test_the_ladders_bookkeeping_reports_progress_as_it_goes() -> None:
    """Scoring the coarse frames' graph takes seconds on a long clip (3.5-5 s of a
    20,000-frame bake, issue 18: Blender's progress stood still and Esc waited): its two
    loops tell ``report`` how far they are every ``REPORT_EVERY`` coarse frames or
    transitions, in increasing fractions; a search's progress passes through that
    stretch (between the grid tracks' share and the rounds') on a clip that needs it."""
    from dhik.solver.path import ladder

    rng = np.random.default_rng(3)
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    coarse, cands = 100, 5
    qs = rng.uniform(-1, 1, size=(coarse, cands, model.n))
    oks = np.ones((coarse, cands), dtype=bool)
    told: list[float] = []
    nodes = ladder.live_nodes(qs, oks, told.append)
    assert len(told) == math.ceil(coarse / ladder.REPORT_EVERY)
    assert told == sorted(told) and told[-1] < 1.0
    told.clear()
    idx = np.arange(coarse) * 20
    costs = ladder.edge_costs(model, ~model.held, qs, idx, nodes, 2.0, report=told.append)
    assert len(told) == (coarse - 1) // ladder.REPORT_EVERY and told == sorted(told)
    quiet = ladder.edge_costs(model, ~model.held, qs, idx, nodes, 2.0)  # the same costs
    assert all(np.array_equal(a, b) for a, b in zip(costs, quiet, strict=True))

    truth = smooth_path(model.lo, model.hi, 2400, 5)  # searched: arm7 takes no cheap pass
    fractions: list[float] = []
    solve_path(model, model.transforms(truth), progress=fractions.append)
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    from dhik.solver.path.candidates import GRID_SHARE
    inside = [f for f in fractions if 0.2 + 0.5 * GRID_SHARE < f < 0.2 + 0.5 * 0.6]
    assert len(inside) >= 2, fractions
