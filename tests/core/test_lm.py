"""The robust method's Levenberg-Marquardt (``solver.lm``): ``solve_many`` (a batch, cold),
``solve_one`` (one problem, warm), seeded restarts, limits, poles.

Targets come from the FK of coordinates within the limits (reachable) unless said;
answers are re-checked with the joint objects' FK (``Skeleton``) and the skeleton's
limits, spherical limits with scipy's intrinsic XYZ angles. Fixed seeds throughout.
Frames: world; metres, radians.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import fixtures
import numpy as np
import pytest
from dhik.app.formats import load_skeleton, parse_skeleton
from dhik.model.joint_space import BatchedModel
from dhik.model.skeleton import Skeleton
from dhik.model.spherical import SphericalJoint
from dhik.rotations import matrix_to_rotvec
from dhik.solver.joints import PrismaticJoint, RevoluteJoint
from dhik.solver.lm import (
    ENGINE_SETTINGS,
    PoleSet,
    Problem,
    pole_points,
    rotvec,
    solve_many,
    solve_one,
)
from dhik.solver.lm.starts import problem_keys, uniform_draws
from dhik.solver.path import solve_path
from dhik.solver.settings import RobustOptions, SolverSettings
from fixtures import (
    ARM7,
    boxed_angles,
    check_answers,
    random_tree,
    sample_coordinates,
    swivel,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation


def arm7_targets(count: int, seed: int) -> tuple[BatchedModel, np.ndarray]:
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    q = sample_coordinates(model, np.random.default_rng(seed), count)
    return model, model.transforms(q)


def test_rotvec_matches_scipy_including_half_turns() -> None:
    rots = Rotation.random(200, random_state=3)
    vecs = rots.as_rotvec()
    vecs[:20] *= (math.pi - 1e-7) / np.linalg.norm(vecs[:20], axis=1, keepdims=True)
    mats = Rotation.from_rotvec(vecs).as_matrix()
    got = rotvec(np.moveaxis(mats, 0, -1)).T
    np.testing.assert_allclose(got, vecs, atol=1e-6)


# ---------------------------------------------------------------------- solve_many


def test_solve_many_converges_within_limits() -> None:
    """Cold solves of 60 random reachable arm7 poses: every one on target by the joint
    objects' FK, within the limits; the errors reported are the FK's."""
    model, targets = arm7_targets(60, 5)
    res = solve_many(model, targets)
    assert res.converged.all()
    check_answers(load_skeleton(ARM7), model, res.q, targets, 1e-5, 1e-4)
    reached = model.transforms(res.q)
    pe = np.linalg.norm(reached[:, 0, :3, 3] - targets[:, 0, :3, 3], axis=1)
    re = [np.linalg.norm(matrix_to_rotvec(t[:3, :3] @ g[:3, :3].T))
          for t, g in zip(targets[:, 0], reached[:, 0], strict=True)]
    np.testing.assert_allclose(res.position_error[:, 0], pe, atol=1e-12)
    np.testing.assert_allclose(res.orientation_error[:, 0], re, atol=1e-12)


def test_solve_many_spherical_and_prismatic_chains() -> None:
    """A random tree of every joint type (a boxed and a free ball, sliders): at least 90 %
    of the poses reached (some are hard), none of them wrong."""
    rng = np.random.default_rng(7)
    defn, effs = random_tree(rng)
    model = BatchedModel(defn, effs[:1])
    targets = model.transforms(sample_coordinates(model, rng, 30))
    res = solve_many(model, targets, options=RobustOptions(restarts=20))
    assert res.converged.mean() >= 0.9
    ok = res.converged
    check_answers(defn, model, res.q[ok], targets[ok], 1e-5, 1e-4)


def test_solve_many_is_deterministic() -> None:
    model, targets = arm7_targets(20, 9)
    a, b = solve_many(model, targets), solve_many(model, targets)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.iterations, b.iterations)


def test_solve_many_two_effectors_and_weights() -> None:
    """Two effectors of a branching tree reached at once; a zero orientation weight
    leaves that effector's orientation free (its position still reached)."""
    rng = np.random.default_rng(12)
    defn, effs = random_tree(rng)
    model = BatchedModel(defn, effs)
    targets = model.transforms(sample_coordinates(model, rng, 20))
    res = solve_many(model, targets, options=RobustOptions(restarts=20))
    assert res.converged.mean() >= 0.9
    check_answers(defn, model, res.q[res.converged], targets[res.converged], 1e-5, 1e-4)
    other = targets.copy()
    other[:, 1, :3, :3] = np.eye(3)  # an orientation the second effector need not reach
    res = solve_many(model, other, weights=[(1.0, 1.0), (1.0, 0.0)],
                     options=RobustOptions(restarts=20))
    ok = res.converged
    assert ok.mean() >= 0.9
    reached = model.transforms(res.q[ok])
    np.testing.assert_allclose(reached[:, :, :3, 3], other[ok][:, :, :3, 3], atol=1e-5)
    assert np.all(res.orientation_error[ok, 0] < 1e-4)


def test_solve_many_edges() -> None:
    """No problems, answers as starts (no iteration), one effector's (B, 4, 4), and bad
    input refused with a ValueError."""
    model, targets = arm7_targets(5, 13)
    empty = solve_many(model, np.zeros((0, 1, 4, 4)))
    assert empty.q.shape == (0, model.n) and empty.converged.shape == (0,)
    q = sample_coordinates(model, np.random.default_rng(13), 5)
    again = solve_many(model, targets, q0=q)
    assert again.converged.all() and not again.iterations.any()
    assert solve_many(model, targets[:, 0]).converged.all()
    with pytest.raises(ValueError, match="weights"):
        solve_many(model, targets, weights=[(1.0, -1.0)])
    with pytest.raises(ValueError, match="shape"):
        solve_many(model, targets[:, :, :3])


# ------------------------------------------------------------------------ restarts


def test_restart_draws_are_uniform_and_keyed_per_problem() -> None:
    """The restarts' counter-based draws: uniform on [0, 1) (a chi-square test over 20
    bins, the mean and variance of 1/12), a row depends on its problem's key and its
    counter only, and different targets or seeds give different streams."""
    targets = np.random.default_rng(3).random((500, 16))
    keys = problem_keys(targets, 0)
    assert len(set(keys.tolist())) == 500
    rows = np.repeat(np.arange(500), 40)
    u = uniform_draws(keys[rows], np.tile(np.arange(40), 500), 7)  # (20000, 7)
    assert u.shape == (20000, 7) and u.min() >= 0.0 and u.max() < 1.0
    counts = np.bincount((u * 20).astype(int).ravel(), minlength=20)
    expected = u.size / 20
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 43.8  # 19 degrees of freedom, p = 0.001
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    # neighbouring columns and counters are uncorrelated
    assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 0.03
    assert abs(np.corrcoef(u[:-1, 0], u[1:, 0])[0, 1]) < 0.03
    # a row alone: the same numbers; another seed or a target changed in one bit: others
    np.testing.assert_array_equal(uniform_draws(keys[[7]], np.array([13]), 7),
                                  u[7 * 40 + 13][None])
    assert not np.array_equal(problem_keys(targets, 1), keys)
    bumped = targets.copy()
    bumped[0, 5] = np.nextafter(bumped[0, 5], 2.0)
    changed = problem_keys(bumped, 0) != keys
    assert changed[0] and not changed[1:].any()


def hard_tree_problems() -> tuple[Any, BatchedModel, np.ndarray, SolverSettings, RobustOptions]:
    """30 poses of a random tree with a short first search (30 iterations), several of
    which need restarts."""
    rng = np.random.default_rng(7)
    defn, effs = random_tree(rng)
    model = BatchedModel(defn, effs[:1])
    targets = model.transforms(sample_coordinates(model, rng, 30))
    short = dataclasses.replace(ENGINE_SETTINGS, max_iterations=30)
    return defn, model, targets, short, RobustOptions(restarts=6)


def test_solve_many_answers_each_problem_as_if_alone() -> None:
    """Restarts are drawn per problem (seeded by its targets): a problem's answer does
    not depend on the batch around it, up to the last bit of numpy's batched
    arithmetic."""
    _, model, targets, short, opts = hard_tree_problems()
    res = solve_many(model, targets, settings=short, options=opts)
    restarted = np.flatnonzero(res.iterations > short.max_iterations)
    assert restarted.size >= 3
    for p in [*restarted[:4], 0]:
        alone = solve_many(model, targets[p:p + 1], settings=short, options=opts)
        np.testing.assert_allclose(alone.q[0], res.q[p], atol=1e-12, rtol=0)
        assert alone.converged[0] == res.converged[p]
    # the same problems in another order: the same answers
    shuffled = solve_many(model, targets[::-1], settings=short, options=opts)
    np.testing.assert_allclose(shuffled.q[::-1], res.q, atol=1e-12, rtol=0)


def test_restarts_are_reproducible_with_a_seed() -> None:
    """The same seed gives the same restarts bit for bit; another seed other restarts
    (other answers where they were needed, the same where the first search converged);
    restarts are what reaches the problems the first search missed."""
    _, model, targets, short, opts = hard_tree_problems()
    a = solve_many(model, targets, settings=short, options=opts)
    b = solve_many(model, targets, settings=short, options=opts)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.iterations, b.iterations)
    other = solve_many(model, targets, settings=short, options=dataclasses.replace(opts, seed=5))
    restarted = a.iterations > short.max_iterations
    first = ~restarted
    np.testing.assert_array_equal(other.q[first], a.q[first])
    assert not np.array_equal(other.q[restarted], a.q[restarted])
    none = solve_many(model, targets, settings=short, options=dataclasses.replace(opts,
                                                                                    restarts=0))
    assert a.converged.sum() > none.converged.sum()
    assert np.all(none.iterations <= short.max_iterations)


# ----------------------------------------------------------------------- solve_one


def test_solve_one_keeps_a_redundant_chains_posture() -> None:
    """Warm from the previous frame's pose, the 7-joint arm (one self-motion) reaches the
    next frame's target without moving further than the path that made it; a cold solve
    of the same target lands on another posture, more than a radian away."""
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    truth = fixtures.smooth_path(model.lo, model.hi, 200, 3)
    targets = model.transforms(truth)
    for f in (20, 90, 150):
        res = solve_one(model, targets[f + 1], truth[f])
        assert res.converged.shape == (1,) and res.converged[0]
        assert res.iterations[0] <= ENGINE_SETTINGS.max_iterations  # no restart needed
        step = np.abs(truth[f + 1] - truth[f]).max()
        assert np.abs(res.q[0] - truth[f]).max() <= 2.0 * step
        check_answers(load_skeleton(ARM7), model, res.q, targets[f + 1:f + 2], 1e-5, 1e-4)
    cold = solve_many(model, targets[91:92])
    assert np.abs(cold.q[0] - truth[90]).max() > 1.0


def test_solve_one_restarts_when_the_warm_search_fails() -> None:
    """From a pose far from any solution the warm search stalls (restarts=0: not
    converged); then restarts reach the target, within the limits. Where the warm search
    converges no restart runs: the answer is the one without restarts, bit for bit."""
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    rng = np.random.default_rng(5)
    failed = 0
    for _ in range(8):
        start, goal = sample_coordinates(model, rng, 2)
        target = model.transforms(goal[None])[0]
        alone = solve_one(model, target, start, options=RobustOptions(restarts=0))
        res = solve_one(model, target, start)
        assert res.converged[0]
        check_answers(load_skeleton(ARM7), model, res.q, target[None], 1e-5, 1e-4)
        if alone.converged[0]:
            np.testing.assert_array_equal(res.q, alone.q)
            assert res.iterations[0] == alone.iterations[0]
        else:
            failed += 1
            assert res.iterations[0] > alone.iterations[0]
    assert 2 <= failed <= 6  # both cases were exercised


def test_an_unreachable_target_ends_best_effort_within_limits() -> None:
    """A target 3 m away (the arm is about 1.2 m long): not converged, every joint within
    its limits, the error reported is the joint objects' FK's, and the hand reached out
    toward the target (cold and warm); restarts never leave a worse answer."""
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    far = np.eye(4)
    far[:3, 3] = [3.0, 0.0, 0.5]
    sk = Skeleton(load_skeleton(ARM7))
    start_error = np.linalg.norm(sk.joints["Tool"].global_transform[:3, 3] - far[:3, 3])
    for res in (solve_many(model, far[None, None]), solve_one(model, far, np.zeros(model.n)),
                solve_one(model, far, np.zeros(model.n), options=RobustOptions(restarts=0))):
        assert not res.converged[0]
        q = res.q[0]
        assert np.all(np.isfinite(q)) and np.all(q >= model.lo) and np.all(q <= model.hi)
        sk.set_joint_values(model.joint_values(q))
        dp = sk.joints["Tool"].global_transform[:3, 3] - far[:3, 3]
        assert np.linalg.norm(dp) == pytest.approx(res.position_error[0, 0], abs=1e-12)
        assert res.position_error[0, 0] < start_error - 0.5
    # beyond any reach (outside the ball the hand cannot leave): no restart is tried
    assert Problem(model, far[None, None], None).out_of_reach()[0]
    with_restarts = solve_one(model, far, np.zeros(model.n))
    without = solve_one(model, far, np.zeros(model.n), options=RobustOptions(restarts=0))
    assert with_restarts.iterations[0] == without.iterations[0]
    # within the ball but out of the limits' reach (below the base): restarts are tried,
    # and never leave a worse answer
    centre, radius = model.reach_t(np.zeros((model.n, 1)))
    below = np.eye(4)
    below[:3, 3] = centre[0, :, 0] + [0.0, 0.0, -0.9 * float(radius[0])]
    assert not Problem(model, below[None, None], None).out_of_reach()[0]
    with_restarts = solve_one(model, below, np.zeros(model.n))
    without = solve_one(model, below, np.zeros(model.n), options=RobustOptions(restarts=0))
    assert not with_restarts.converged[0]
    assert with_restarts.position_error[0, 0] <= without.position_error[0, 0]
    assert with_restarts.iterations[0] > without.iterations[0]


@pytest.mark.parametrize("scene", ["arm7", "spine_arm", "scara"])
def test_no_pose_leaves_the_reach_ball(scene: str) -> None:
    """``reach_t``: the effector of 2,000 random configurations within the limits stays in
    the ball (centre at the first solved joint, placed by the held columns; radius the
    lengths below plus the sliders' farthest limits), and touches 90 % of its radius for
    a chain that can stretch out."""
    from fixtures import SCARA, SPINE_ARM

    defn = {"arm7": load_skeleton(ARM7), "spine_arm": parse_skeleton(SPINE_ARM),
            "scara": parse_skeleton(SCARA)}[scene]
    model = BatchedModel(defn, ["Tool" if scene != "spine_arm" else "Hand"])
    rng = np.random.default_rng(5)
    lo = np.where(np.isfinite(model.lo), model.lo, -np.pi)
    hi = np.where(np.isfinite(model.hi), model.hi, np.pi)
    q = rng.uniform(lo, hi, (2000, model.n))
    _, pos = model.pose(q)
    centre, radius = model.reach_t(np.ascontiguousarray(q.T))
    dist = np.linalg.norm(pos[:, 0] - centre[0].T, axis=1)
    assert np.all(dist <= radius[0] + 1e-9)
    if scene == "spine_arm":
        assert dist.max() > 0.9 * radius[0]


# ------------------------------------------------------------- never outside the limits


def random_chain(rng: np.random.Generator, n: int) -> dict[str, Any]:
    """A random chain of ``n`` moving joints (some limits exclude the T-pose)."""

    def limits() -> list[float] | None:
        if rng.random() < 0.3:
            return None
        lo = float(rng.uniform(-2.5, 0.3))
        return [lo, lo + float(rng.uniform(0.0, 3.0))]

    joints: list[dict[str, Any]] = [{"name": "J0", "type": "fixed", "parent": None}]
    for i in range(1, n + 1):
        kind = ["revolute", "prismatic", "spherical"][rng.choice(3, p=[0.5, 0.2, 0.3])]
        j: dict[str, Any] = {"name": f"J{i}", "type": kind, "parent": f"J{i - 1}",
                             "offset": [float(v) for v in rng.uniform(-0.5, 0.5, 3)]}
        if kind == "spherical":
            j["limits"] = None if rng.random() < 0.3 else [limits() for _ in range(3)]
        else:
            j["axis"] = [float(v) for v in rng.normal(size=3)]
            j["limits"] = limits()
        joints.append(j)
    joints.append({"name": "Tip", "type": "fixed", "parent": f"J{n}", "offset": [0, 0, 0.3]})
    return {"root_name": "J0", "joints": joints}


def assert_within_the_files_limits(defn_dict: dict[str, Any], model: BatchedModel,
                                   rows: np.ndarray) -> None:  # fmt: skip
    """Each row, posed on fresh joint objects, keeps every joint within its skeleton.json
    limits: hinges and sliders by their values, spherical joints by the intrinsic XYZ
    angles of their quaternions (scipy)."""
    assert np.all(np.isfinite(rows))
    assert np.all(rows >= model.lo) and np.all(rows <= model.hi)
    sk = Skeleton(parse_skeleton(defn_dict))
    boxes = {j["name"]: j["limits"] for j in defn_dict["joints"]
             if j["type"] == "spherical" and j.get("limits")}
    for row in rows:
        sk.reset()
        sk.set_joint_values(model.joint_values(row))
        for name, j in sk.joints.items():
            if isinstance(j, RevoluteJoint | PrismaticJoint) and j.limits is not None:
                assert j.limits[0] - 1e-12 <= j.q <= j.limits[1] + 1e-12, name
            elif isinstance(j, SphericalJoint) and name in boxes:
                assert boxed_angles(j.quaternion, boxes[name]), name


def random_targets(rng: np.random.Generator, reach: float) -> np.ndarray:
    """Three world targets (3, 1, 4, 4) anywhere within +-``reach`` m: often unreachable."""
    out = np.tile(np.eye(4), (3, 1, 1, 1))
    for t in out[:, 0]:
        t[:3, :3] = Rotation.random(random_state=int(rng.integers(2**31))).as_matrix()
        t[:3, 3] = rng.uniform(-reach, reach, 3)
    return out


FAST = SolverSettings(max_iterations=20, position_tolerance=1e-4)
FEW = RobustOptions(restarts=3, restart_iterations=10)


def solved_rows(engine: str, model: BatchedModel, targets: np.ndarray) -> np.ndarray:
    """Every robust entry point on the same targets: a batch, warm one at a time, or a
    trajectory."""
    if engine == "many":
        return solve_many(model, targets, settings=FAST, options=FEW).q
    if engine == "one":
        return np.vstack([solve_one(model, t, np.zeros(model.n), settings=FAST, options=FEW).q
                          for t in targets])
    return solve_path(model, targets, settings=FAST, options=dataclasses.replace(
        FEW, grid=4, free_count=1, retries=0)).q


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 5),
       engine=st.sampled_from(["many", "one", "path"]))
def test_robust_never_leaves_the_limits(seed: int, n: int, engine: str) -> None:
    rng = np.random.default_rng(seed)
    defn = random_chain(rng, n)
    model = BatchedModel(parse_skeleton(defn), ["Tip"])
    assert_within_the_files_limits(defn, model, solved_rows(engine, model,
                                                            random_targets(rng, 1.5)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 4),
       engine=st.sampled_from(["many", "one", "path"]))
def test_robust_spherical_limits_bound_the_intrinsic_angles(seed: int, n: int,
                                                            engine: str) -> None:
    """Every joint a spherical one with a full box: the case under test."""
    rng = np.random.default_rng(seed)
    defn = random_chain(rng, n)
    for j in defn["joints"]:
        if j["type"] != "fixed":
            j.pop("axis", None)
            j["type"] = "spherical"
            lo = rng.uniform(-2.5, 0.3, 3)
            j["limits"] = [[float(a), float(a + rng.uniform(0.0, 3.0))] for a in lo]
    model = BatchedModel(parse_skeleton(defn), ["Tip"])
    assert_within_the_files_limits(defn, model, solved_rows(engine, model,
                                                            random_targets(rng, 1.0)))


# --------------------------------------------------------------------------- poles


@pytest.mark.parametrize("pole_y, angle", [(1.0, 0.0), (-1.0, 0.0), (1.0, math.pi / 2)])
def test_a_pole_bends_the_chain_toward_it(pole_y: float, angle: float) -> None:
    """SPINE_ARM's shoulder, elbow and hand (chain length 3) with position-only targets:
    one free turn, which the pole's row takes. Cold (solve_many) and warm (solve_one) the
    hands are on target and the elbows within 1e-3 rad of the pole's half-plane (turned
    by the pole angle); without the pole they are not."""
    defn = parse_skeleton(fixtures.SPINE_ARM)
    plain = BatchedModel(defn, ["Hand"], [3])
    model = BatchedModel(defn, ["Hand"], [3], points=pole_points(plain.chains, [0]))
    assert model.points == ["Shoulder", "Elbow"]
    truth = sample_coordinates(model, np.random.default_rng(2), 6)
    truth[:, model.held] = 0.0
    targets = plain.transforms(truth)
    pole = np.array([0.5, pole_y, 1.0])
    poles = PoleSet.build(model, [0], np.broadcast_to(pole, (6, 1, 3)), [angle])
    tight = SolverSettings(200, 1e-6, 1e-5)
    many = solve_many(model, targets, [(1.0, 0.0)], tight, poles=poles)
    ones = [solve_one(model, targets[b], truth[b], [(1.0, 0.0)], tight,
                      poles=poles.frames(slice(b, b + 1))) for b in range(6)]
    rows = np.vstack([many.q, *[r.q for r in ones]])
    assert many.converged.all() and all(r.converged[0] for r in ones)
    sk = Skeleton(defn)
    for row, target in zip(rows, np.vstack([targets, targets]), strict=True):
        sk.reset()
        sk.set_joint_values(model.joint_values(row))
        world = sk.world_transforms()
        assert np.linalg.norm(world["Hand"][:3, 3] - target[0][:3, 3]) < 1e-6
        assert abs(swivel(world, pole, target[0], angle)) < 1e-3
    assert np.abs(many.pole_error).max() < 1e-6  # the arc left (m)
    without = solve_many(plain, targets, [(1.0, 0.0)], tight)
    assert max(abs(swivel(_world(defn, plain, row), pole, t[0], angle))
               for row, t in zip(without.q, targets, strict=True)) > 0.1  # poles matter


def _world(defn: Any, model: BatchedModel, row: np.ndarray) -> dict[str, np.ndarray]:
    sk = Skeleton(defn)
    sk.set_joint_values(model.joint_values(row))
    return sk.world_transforms()


def test_a_pole_needs_a_chain_of_three_joints() -> None:
    defn = parse_skeleton(fixtures.SPINE_ARM)
    plain = BatchedModel(defn, ["Hand"], [2])
    model = BatchedModel(defn, ["Hand"], [2], points=pole_points(plain.chains, [0]))
    with pytest.raises(ValueError, match="a pole needs a chain of 3 joints"):
        PoleSet.build(model, [0], np.zeros((1, 1, 3)), [0.0])


@pytest.mark.parametrize(("window", "ratio"), [(4, 0.5), (3, 0.1), (3, 0.01)])
def test_a_search_that_stalls_stops_as_its_rule_says(window: int, ratio: float) -> None:
    """The stall rule (``stall_window``, ``stall_ratio``: the options' 4 and 0.5, the
    quick pass's 3 and 0.1, ``candidates.QUICK_STALL``, and a stricter one): a row stops
    at the first iteration ``i >= window`` whose energy (half the squared weighted error)
    is over ``ratio`` times the energy ``window`` iterations before, unless it converged
    first. The energies are taken from runs of 0, 1, 2, ... iterations, and the stop they
    predict is the one the LM makes: on a target out of reach (it stalls at once) and on
    one within reach from the T-pose (its error falls 25-fold in one step, then 33-fold
    in three: the strict rule stops it there, unconverged; the others let it converge)."""
    from dhik.solver.lm.loop import levenberg_marquardt

    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    rng = np.random.default_rng(4)
    near = rng.uniform(0.3 * model.lo, 0.3 * model.hi)
    targets = model.transforms(near[None])[:, 0].copy()
    far = targets.copy()
    far[:, :3, 3] *= 4.0  # the same target four times as far from the base: out of reach
    outcomes = []
    for target in (far, targets):
        problem = Problem(model, target[:, None], None, ENGINE_SETTINGS)
        start = np.zeros((1, model.n))
        budget = 12
        runs = [levenberg_marquardt(model, problem, start, b, stall_window=budget)
                for b in range(budget + 1)]
        trace = [0.5 * float(np.sum(problem.linearise(
            r.q.T.copy(), problem.rows.take(np.zeros(1, dtype=np.intp))).e ** 2))
            for r in runs]
        done = next((b for b, r in enumerate(runs) if r.converged[0]), budget + 1)
        stop = next((i + 1 for i in range(window, budget)
                     if i + 1 < done and trace[i + 1] > ratio * trace[i + 1 - window]), None)
        res = levenberg_marquardt(model, problem, start, budget, stall_window=window,
                                  stall_ratio=ratio)
        if stop is None:
            assert res.converged[0] and res.iterations[0] == done
        else:
            assert not res.converged[0] and res.iterations[0] == stop
        outcomes.append(bool(res.converged[0]))
    assert outcomes == [False, ratio > 0.01]


def test_a_closest_approach_stops_once_its_steps_stop_paying() -> None:
    """``stationary``: a row stops at the first accepted step that lowers its energy by
    no more than that share of it. On a target out of reach (arm7's, four times as far
    from the base), the stop predicted from runs of 0, 1, 2, ... iterations is the one
    the LM makes. Started where the slow stall rule (``fill.SLOW_STALL_WINDOW``) left
    it, as close as that rule gets, the row stops within half that window, no
    farther from the target, where that rule alone runs its whole window again (a
    stretch beyond reach followed frame by frame, each frame from the one before)."""
    from dhik.solver.lm.loop import levenberg_marquardt
    from dhik.solver.path.fill import SLOW_STALL_WINDOW, SLOW_STATIONARY

    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    rng = np.random.default_rng(4)
    near = rng.uniform(0.3 * model.lo, 0.3 * model.hi)
    far = model.transforms(near[None])[:, 0].copy()
    far[:, :3, 3] *= 4.0
    problem = Problem(model, far[:, None], None, ENGINE_SETTINGS)
    row = np.zeros(1, dtype=np.intp)

    def energy(q: np.ndarray) -> float:
        return 0.5 * float(np.sum(problem.linearise(q.T.copy(), problem.rows.take(row)).e ** 2))

    start = np.zeros((1, model.n))
    budget = 60
    trace = [energy(levenberg_marquardt(model, problem, start, b, stall_window=budget).q)
             for b in range(budget + 1)]
    stop = next(b for b in range(1, budget + 1)
                if trace[b] < trace[b - 1] and trace[b - 1] - trace[b] <= SLOW_STATIONARY
                * trace[b - 1])
    res = levenberg_marquardt(model, problem, start, budget, stall_window=budget,
                              stationary=SLOW_STATIONARY)
    assert not res.converged[0] and res.iterations[0] == stop < budget
    at = levenberg_marquardt(model, problem, start, budget, stall_window=SLOW_STALL_WINDOW).q
    quick = levenberg_marquardt(model, problem, at, budget, stall_window=SLOW_STALL_WINDOW,
                                stationary=SLOW_STATIONARY)
    slow = levenberg_marquardt(model, problem, at, budget, stall_window=SLOW_STALL_WINDOW)
    assert quick.iterations[0] < SLOW_STALL_WINDOW // 2 < SLOW_STALL_WINDOW <= slow.iterations[0]
    assert energy(quick.q) <= energy(at) and energy(slow.q) <= energy(at)
    assert energy(quick.q) <= energy(slow.q) * (1 + 1e-4)
