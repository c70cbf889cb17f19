"""The batched model and solver (issue 9, points 1-2) against independent references.

FK is checked against the joint objects (``Skeleton``), Jacobians against the joint
objects' own columns and central finite differences of the batched FK; solves are
re-checked with the joint objects' FK and the skeleton's limits. Fixed seeds throughout.
Frames: world; metres, radians.
"""

from __future__ import annotations

import functools
import math

import fixtures
import numpy as np
import pytest
from dhik.app.formats import load_skeleton, parse_skeleton
from dhik.model.batched import BatchedModel
from dhik.model.definition import JointDef, SkeletonDef
from dhik.model.skeleton import Skeleton
from dhik.rotations import matrix_to_rotvec
from dhik.solver.batched import BatchOptions, problem_keys, rotvec, solve_many, uniform_draws
from dhik.solver.joints import PrismaticJoint, RevoluteJoint
from dhik.solver.tracks import TrackResult, solve_track
from scipy.spatial.transform import Rotation

ARM7 = fixtures.ARM7


def random_skeleton(rng: np.random.Generator, count: int = 9) -> tuple[SkeletonDef, list[str]]:
    """A random tree of every joint type (some limits, random axes, rotated fixed
    joints, one branch) and its two leaves as effectors."""
    joints = [JointDef("Root", "fixed", (0.0, 0.0, 0.1), None, None, None,
                       tuple(Rotation.random(random_state=1).as_quat(scalar_first=True)))]
    kinds = ["revolute", "prismatic", "spherical", "fixed"]
    for i in range(1, count):
        kind = kinds[i % 4] if i > 1 else "revolute"
        parent = joints[-1].name if i != count - 3 else joints[2].name  # one branch
        off = tuple(float(v) for v in rng.uniform(-0.3, 0.3, 3))
        axis = lim = quat = None
        if kind in ("revolute", "prismatic"):
            a = rng.normal(size=3) if i % 3 else np.eye(3)[i % 3] * (-1) ** i
            axis = tuple(float(v) for v in a / np.linalg.norm(a))
            lim = (-2.0, 2.0) if i % 2 else None
        elif kind == "spherical":
            lim = ((-1.0, 1.2), None, (-0.5, 0.5))
        else:
            quat = tuple(float(v) for v in Rotation.random(random_state=i).as_quat(
                scalar_first=True))
        joints.append(JointDef(f"J{i}", kind, off, parent, axis, lim, quat))  # type: ignore[arg-type]
    defn = SkeletonDef("Root", tuple(joints))
    children = {j.parent for j in joints}
    leaves = [j.name for j in joints if j.name not in children]
    return defn, leaves


def pose_objects(sk: Skeleton, model: BatchedModel, q: np.ndarray) -> None:
    """Pose the joint objects from one coordinate row (spherical: the angles' quaternion)."""
    sk.reset()
    sk.set_joint_values(model.joint_values(q))


def sample(model: BatchedModel, rng: np.random.Generator, count: int) -> np.ndarray:
    lo = np.where(np.isfinite(model.lo), model.lo, -math.pi)
    hi = np.where(np.isfinite(model.hi), model.hi, math.pi)
    return rng.uniform(lo, hi, (count, model.n))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fk_equals_the_joint_objects(seed: int) -> None:
    rng = np.random.default_rng(seed)
    defn, effs = random_skeleton(rng)
    model = BatchedModel(defn, effs)
    sk = Skeleton(defn)
    qs = sample(model, rng, 6)
    got = model.transforms(qs)
    assert got.shape == (6, len(effs), 4, 4)
    for b, q in enumerate(qs):
        pose_objects(sk, model, q)
        for k, e in enumerate(effs):
            np.testing.assert_allclose(got[b, k], sk.joints[e].global_transform, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jacobian_matches_finite_differences_and_the_joint_objects(seed: int) -> None:
    rng = np.random.default_rng(seed)
    defn, effs = random_skeleton(rng)
    model = BatchedModel(defn, effs)
    sk = Skeleton(defn)
    q = sample(model, rng, 3)
    rot, pos, jac = model.pose_jacobian(q)
    h = 1e-6
    for c in range(model.n):
        up, down = q.copy(), q.copy()
        up[:, c] += h
        down[:, c] -= h
        r1, p1 = model.pose(up)
        r0, p0 = model.pose(down)
        lin = (p1 - p0) / (2 * h)
        ang = np.array([[matrix_to_rotvec(r1[b, k] @ r0[b, k].T) / (2 * h)
                         for k in range(len(effs))] for b in range(len(q))])
        np.testing.assert_allclose(jac[:, :, :3, c], lin, atol=1e-6)
        np.testing.assert_allclose(jac[:, :, 3:, c], ang, atol=1e-6)
    for b in range(len(q)):  # 1-DoF columns: the joint objects' own Jacobian columns
        pose_objects(sk, model, q[b])
        for k, e in enumerate(effs):
            p_eff = sk.joints[e].global_transform[:3, 3]
            for c, name in enumerate(model.names):
                joint = sk.joints.get(name)
                if isinstance(joint, RevoluteJoint | PrismaticJoint):
                    want = joint.compute_jacobian_column(p_eff) if model.paths[k, c] else 0.0
                    np.testing.assert_allclose(jac[b, k, :, c], want, atol=1e-12)


def test_rotvec_matches_scipy_including_half_turns() -> None:
    rots = Rotation.random(200, random_state=3)
    vecs = rots.as_rotvec()
    vecs[:20] *= (math.pi - 1e-7) / np.linalg.norm(vecs[:20], axis=1, keepdims=True)
    mats = Rotation.from_rotvec(vecs).as_matrix()
    got = rotvec(np.moveaxis(mats, 0, -1)).T
    np.testing.assert_allclose(got, vecs, atol=1e-6)


def arm7_targets(count: int, seed: int) -> tuple[BatchedModel, np.ndarray]:
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    q = sample(model, np.random.default_rng(seed), count)
    return model, model.transforms(q)


def check_answers(defn: SkeletonDef, model: BatchedModel, q: np.ndarray,
                  targets: np.ndarray, ptol: float, otol: float) -> None:
    """Every answer reaches its target by the joint objects' FK and keeps the limits."""
    sk = Skeleton(defn)
    assert np.all(q >= model.lo) and np.all(q <= model.hi)
    for row, target in zip(q, targets, strict=True):
        pose_objects(sk, model, row)
        for k, e in enumerate(model.effectors):
            g = sk.joints[e].global_transform
            assert np.linalg.norm(g[:3, 3] - target[k][:3, 3]) < ptol
            assert np.linalg.norm(matrix_to_rotvec(target[k][:3, :3] @ g[:3, :3].T)) < otol


def test_solve_many_converges_within_limits() -> None:
    model, targets = arm7_targets(60, 5)
    res = solve_many(model, targets)
    assert res.converged.all()
    check_answers(load_skeleton(ARM7), model, res.q, targets, 1e-5, 1e-4)


def test_solve_many_spherical_and_prismatic_chains() -> None:
    rng = np.random.default_rng(7)
    defn, effs = random_skeleton(rng)
    model = BatchedModel(defn, effs[:1])
    targets = model.transforms(sample(model, rng, 30))
    res = solve_many(model, targets, options=BatchOptions(restarts=20))
    assert res.converged.mean() >= 0.9  # random trees: some poses are hard, none wrong
    ok = res.converged
    check_answers(defn, model, res.q[ok], targets[ok], 1e-5, 1e-4)


def test_solve_many_is_deterministic() -> None:
    model, targets = arm7_targets(20, 9)
    a, b = solve_many(model, targets), solve_many(model, targets)
    np.testing.assert_array_equal(a.q, b.q)


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


def smooth_path(model: BatchedModel, frames: int, seed: int) -> np.ndarray:
    """A smooth joint path (frames, n) within ``model``'s limits (fixtures.smooth_path)."""
    return fixtures.smooth_path(model.lo, model.hi, frames, seed)


def arm7_path(frames: int, seed: int) -> tuple[BatchedModel, np.ndarray, np.ndarray]:
    """A smooth arm7 joint path (:func:`smooth_path`) and its targets."""
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    truth = smooth_path(model, frames, seed)
    return model, truth, model.transforms(truth)


@functools.cache
def arm7_track() -> tuple[BatchedModel, np.ndarray, np.ndarray, TrackResult]:
    """One 200-frame arm7 path (seed 11) and its track, shared by the tests below."""
    model, truth, targets = arm7_path(200, 11)
    return model, truth, targets, solve_track(model, targets)


def test_track_converges_within_limits_and_is_deterministic() -> None:
    model, truth, targets, res = arm7_track()
    assert res.converged.all()
    check_answers(load_skeleton(ARM7), model, res.q, targets, 1e-5, 1e-4)
    again = solve_track(model, targets)
    np.testing.assert_array_equal(res.q, again.q)


def test_track_has_no_flips() -> None:
    model, truth, targets, res = arm7_track()
    # the steps are those of a continuous path: none beyond twice the true path's largest
    steps = np.abs(np.diff(res.q, axis=0)).max(axis=1)
    true_step = np.abs(np.diff(truth, axis=0)).max()
    assert steps.max() < 2.0 * true_step, steps.max() / true_step


HUMANOID_ARM = {  # clavicle fixed and rotated, limited spherical shoulder and wrist
    "root_name": "Chest",
    "joints": [
        {"name": "Chest", "type": "fixed", "offset": [0, 0, 1.4], "parent": None},
        {"name": "Clavicle", "type": "fixed", "offset": [0.0, 0.18, 0.02], "parent": "Chest",
         "quaternion": [0.9962, 0.0, 0.0, 0.0872]},
        {"name": "Shoulder", "type": "spherical", "offset": [0.0, 0.03, 0.0],
         "parent": "Clavicle", "limits": [[-1.6, 1.6], [-1.3, 1.3], [-0.7, 1.6]]},
        {"name": "Elbow", "type": "revolute", "offset": [0.0, 0.30, 0.0], "parent": "Shoulder",
         "axis": [0, 0, 1], "limits": [-0.05, 2.6]},
        {"name": "Wrist", "type": "spherical", "offset": [0.0, 0.26, 0.0], "parent": "Elbow",
         "limits": [[-1.2, 1.2], [-0.5, 0.5], [-1.0, 1.0]]},
        {"name": "Hand", "type": "fixed", "offset": [0.0, 0.08, 0.01], "parent": "Wrist"},
    ],
}
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


@pytest.mark.parametrize(("scene", "effector"), [(HUMANOID_ARM, "Hand"), (SLIDERS, "Tool")])
def test_track_spherical_and_prismatic_chains(scene: dict, effector: str) -> None:
    from dhik.app.formats import parse_skeleton

    defn = parse_skeleton(scene)
    model = BatchedModel(defn, [effector])
    truth = smooth_path(model, 300, 4)
    targets = model.transforms(truth)
    res = solve_track(model, targets)
    assert res.converged.all()
    check_answers(defn, model, res.q, targets, 1e-5, 1e-4)
    steps = np.abs(np.diff(res.q, axis=0)).max(axis=1)
    assert steps.max() < 2.0 * np.abs(np.diff(truth, axis=0)).max()


def test_track_without_redundancy() -> None:
    """arm7 with J3 fixed: six columns for six error rows, branches instead of a grid."""
    import dataclasses

    arm = load_skeleton(ARM7)
    joints = tuple(dataclasses.replace(j, type="fixed", axis=None, limits=None)
                   if j.name == "J3" else j for j in arm.joints)
    defn = dataclasses.replace(arm, joints=joints)
    model = BatchedModel(defn, ["Tool"])
    assert model.n == 6
    truth = smooth_path(model, 300, 8)
    targets = model.transforms(truth)
    res = solve_track(model, targets)
    assert res.converged.all()
    check_answers(defn, model, res.q, targets, 1e-5, 1e-4)
    steps = np.abs(np.diff(res.q, axis=0)).max(axis=1)
    assert steps.max() < 2.0 * np.abs(np.diff(truth, axis=0)).max()


def test_solve_many_two_effectors_and_weights() -> None:
    """Two effectors of a branching tree reached at once; a zero orientation weight
    leaves that effector's orientation free (its position still reached)."""
    rng = np.random.default_rng(12)
    defn, effs = random_skeleton(rng)
    model = BatchedModel(defn, effs)
    targets = model.transforms(sample(model, rng, 20))
    res = solve_many(model, targets, options=BatchOptions(restarts=20))
    assert res.converged.mean() >= 0.9
    check_answers(defn, model, res.q[res.converged], targets[res.converged], 1e-5, 1e-4)
    other = targets.copy()
    other[:, 1, :3, :3] = np.eye(3)  # an orientation the second effector need not reach
    res = solve_many(model, other, weights=[(1.0, 1.0), (1.0, 0.0)],
                     options=BatchOptions(restarts=20))
    ok = res.converged
    assert ok.mean() >= 0.9
    reached = model.transforms(res.q[ok])
    np.testing.assert_allclose(reached[:, :, :3, 3], other[ok][:, :, :3, 3], atol=1e-5)
    assert np.all(res.orientation_error[ok, 0] < 1e-4)


def test_track_reports_a_forced_jump() -> None:
    """The targets jump between frames 199 and 200 (the base turns by 1 rad at once):
    every frame converges, frame 200 is reported, and no other frame is."""
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    truth = smooth_path(model, 400, 5)
    truth[200:, 0] += 1.0
    res = solve_track(model, model.transforms(np.clip(truth, model.lo, model.hi)))
    assert res.converged.all()
    assert res.jumps == [200]


def test_solve_many_edges() -> None:
    """No problems, answers as starts (no iteration), one effector's (B, 4, 4), and bad
    input refused with a ValueError."""
    model, targets = arm7_targets(5, 13)
    empty = solve_many(model, np.zeros((0, 1, 4, 4)))
    assert empty.q.shape == (0, model.n) and empty.converged.shape == (0,)
    q = sample(model, np.random.default_rng(13), 5)
    again = solve_many(model, targets, q0=q)
    assert again.converged.all() and not again.iterations.any()
    assert solve_many(model, targets[:, 0]).converged.all()
    with pytest.raises(ValueError, match="weights"):
        solve_many(model, targets, weights=[(1.0, -1.0)])
    with pytest.raises(ValueError, match="shape"):
        solve_many(model, targets[:, :, :3])


def test_track_hinges_without_limits() -> None:
    """arm7 with every limit removed: the self-motion is gridded over one turn and a
    whole turn between segments is unwrapped, so no frame jumps."""
    import dataclasses

    arm = load_skeleton(ARM7)
    free = dataclasses.replace(arm, joints=tuple(dataclasses.replace(j, limits=None)
                                                 for j in arm.joints))
    limited, model = BatchedModel(arm, ["Tool"]), BatchedModel(free, ["Tool"])
    truth = smooth_path(limited, 400, 3)
    targets = model.transforms(truth)
    res = solve_track(model, targets)
    assert res.converged.all()
    check_answers(free, model, res.q, targets, 1e-5, 1e-4)
    steps = np.abs(np.diff(res.q, axis=0)).max(axis=1)
    assert steps.max() < 2.0 * np.abs(np.diff(truth, axis=0)).max()


def test_solve_many_answers_each_problem_as_if_alone() -> None:
    """Restarts are drawn per problem (seeded by its targets): a problem's answer does
    not depend on the batch around it, up to the last bit of numpy's batched
    arithmetic. Poses of a random tree, several of which need restarts."""
    rng = np.random.default_rng(7)
    defn, effs = random_skeleton(rng)
    model = BatchedModel(defn, effs[:1])
    targets = model.transforms(sample(model, rng, 30))
    opts = BatchOptions(max_iterations=30, restarts=6)
    res = solve_many(model, targets, options=opts)
    restarted = np.flatnonzero(res.iterations > opts.max_iterations)
    assert restarted.size >= 3
    for p in [*restarted[:4], 0]:
        alone = solve_many(model, targets[p:p + 1], options=opts)
        np.testing.assert_allclose(alone.q[0], res.q[p], atol=1e-12, rtol=0)
        assert alone.converged[0] == res.converged[p]
        # the same problem among others in another order: the same answer
    shuffled = solve_many(model, targets[::-1], options=opts)
    np.testing.assert_allclose(shuffled.q[::-1], res.q, atol=1e-12, rtol=0)


def test_track_from_a_given_start() -> None:
    """``start``: the path leaves frame 0 from that solution (the end of the window
    before), and goes on from it without a jump."""
    model, truth, targets, _ = arm7_track()
    start = truth[100]  # the true joints: one solution of frame 100 among many
    res = solve_track(model, targets[100:], start=start)
    np.testing.assert_array_equal(res.q[0], start)
    assert res.converged.all() and res.jumps == []
    true_step = np.abs(np.diff(truth, axis=0)).max()
    assert np.abs(np.diff(res.q, axis=0)).max() <= 2.0 * true_step


def test_track_with_a_locked_column_is_quiet() -> None:
    """A joint whose limits are one value (a locked axis, as Blender's lock_ik gives) has
    no range: choosing among candidates by their distance to the limits ignores it
    (it divided 0 by 0). The path converges and numpy warns of nothing."""
    import dataclasses
    import warnings

    arm = load_skeleton(ARM7)
    locked = dataclasses.replace(arm, joints=tuple(
        dataclasses.replace(j, limits=(0.3, 0.3)) if j.name == "J5" else j
        for j in arm.joints))
    model = BatchedModel(locked, ["Tool"])
    rng = np.random.default_rng(4)
    truth = sample(model, rng, 1)[0] + np.linspace(0.0, 0.05, 30)[:, None]
    truth[:, 4] = 0.3
    truth = np.clip(truth, model.lo, model.hi)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = solve_track(model, model.transforms(truth))
    assert res.converged.all()
    np.testing.assert_array_equal(res.q[:, 4], 0.3)


def test_track_counts_each_frames_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """``iterations``: per frame, the LM iterations its rows took over every pass. The
    total is what every LM call of the solve reported (counted here independently), a
    coarse frame (hundreds of candidates) costs far more than a frame filled between
    coarse ones, and the count is the same on a second run."""
    import dhik.solver.tracks as tracks

    model, truth, targets = arm7_path(200, 11)
    spent: list[np.ndarray] = []
    inner = tracks.levenberg_marquardt

    def counting(*args: object, **kwargs: object) -> object:
        res = inner(*args, **kwargs)  # type: ignore[arg-type]
        rows = kwargs.get("rows")
        spent.append(np.bincount(np.arange(len(res.q)) if rows is None else rows,
                                 weights=res.iterations, minlength=len(targets)))
        return res

    monkeypatch.setattr(tracks, "levenberg_marquardt", counting)
    res = solve_track(model, targets)
    assert res.iterations.shape == (len(targets),)
    np.testing.assert_array_equal(res.iterations, np.sum(spent, axis=0))
    assert res.iterations.min() >= 0 and res.iterations.sum() > len(targets)
    assert res.iterations.max() > 10 * np.median(res.iterations)
    monkeypatch.setattr(tracks, "levenberg_marquardt", inner)
    np.testing.assert_array_equal(solve_track(model, targets).iterations, res.iterations)


def test_track_caps_every_lm_run_at_max_iterations(monkeypatch: pytest.MonkeyPatch) -> None:
    """``max_iterations`` (the bake's ``--max-iterations``) caps the budget of every LM
    run of the trajectory engine: tracking, restarts, fills and the closest approach."""
    import dataclasses

    import dhik.solver.tracks as tracks

    model, truth, targets = arm7_path(60, 3)
    budgets: list[int] = []
    inner = tracks.levenberg_marquardt

    def spy(*args: object, **kwargs: object) -> object:
        budgets.append(int(args[3]))  # type: ignore[call-overload]
        res = inner(*args, **kwargs)  # type: ignore[arg-type]
        assert res.iterations.max(initial=0) <= int(args[3])  # type: ignore[call-overload]
        return res

    monkeypatch.setattr(tracks, "levenberg_marquardt", spy)
    solve_track(model, targets)
    assert max(budgets) > 12  # the default budgets, tracking at 15 and restarts at 60
    budgets.clear()
    res = solve_track(model, targets, options=dataclasses.replace(
        tracks.TrackOptions(), max_iterations=4))
    assert budgets and max(budgets) == 4
    assert res.iterations.shape == (60,)


@pytest.mark.parametrize("seed", [0, 1])
def test_coordinates_invert_joint_values(seed: int) -> None:
    """``coordinates`` is the inverse of ``joint_values``: the same FK (a spherical joint
    may come back as its rotation's other angle triple) and, for arm7's hinges, the same
    numbers."""
    defn, leaves = random_skeleton(np.random.default_rng(seed))
    model = BatchedModel(defn, leaves)
    q = np.clip(sample(model, np.random.default_rng(seed + 10), 20), model.lo, model.hi)
    back = np.array([model.coordinates(model.joint_values(row)) for row in q])
    np.testing.assert_allclose(model.transforms(back), model.transforms(q), atol=1e-12)
    assert np.all(back >= model.lo) and np.all(back <= model.hi)
    arm = BatchedModel(load_skeleton(ARM7), ["Tool"])
    row = smooth_path(arm, 10, seed)[3]
    np.testing.assert_array_equal(arm.coordinates(arm.joint_values(row)), row)
    assert np.all(arm.coordinates({}) == 0.0)  # joints not given: the T-pose


@pytest.mark.parametrize("seed", [3, 7])
def test_track_joins_the_poses_before_and_after(seed: int) -> None:
    """``before`` and ``after``: the poses on the frames around the part solved (the keys
    a re-baked part of an animation sits between). Solved alone, the middle of a path
    may start and end on other branches of the redundant arm (seed 7: more than 1 rad
    away at both ends); told the poses around it, it starts and ends within one true
    step of them and moves no more than twice the true step anywhere."""
    model, truth, targets = arm7_path(200, seed)
    true_step = np.abs(np.diff(truth, axis=0)).max()
    res = solve_track(model, targets[100:150], before=truth[99], after=truth[150])
    assert res.converged.all() and res.jumps == []
    assert np.abs(res.q[0] - truth[99]).max() <= true_step
    assert np.abs(res.q[-1] - truth[150]).max() <= true_step
    assert np.abs(np.diff(res.q, axis=0)).max() <= 2.0 * true_step
    check_answers(load_skeleton(ARM7), model, res.q[::10], targets[100:150:10], 1e-5, 1e-4)
    ahead = solve_track(model, targets[100:], before=truth[99])  # only a start
    assert np.abs(ahead.q[0] - truth[99]).max() <= true_step and ahead.jumps == []


@pytest.mark.parametrize("seed", [0, 1])
def test_value_columns_are_joint_values_row_by_row(seed: int) -> None:
    """A bake writes its animation columns from ``value_columns`` (all rows at once): the
    numbers ``joint_values`` gives row by row (spherical quaternions exactly, their XYZ
    Euler angles to rounding), gimbal-locked rows included."""
    defn, leaves = random_skeleton(np.random.default_rng(seed))
    model = BatchedModel(defn, leaves)
    q = sample(model, np.random.default_rng(seed + 20), 30)
    middle = next(c for c, name in enumerate(model.names) if name.endswith(".y"))
    q[:3, middle - 1:middle + 2] = [0.0, math.pi / 2, 0.0]  # Ry(pi/2): the file's gimbal lock
    cols = model.value_columns(q)
    for k, row in enumerate(q):
        for name, entry in model.joint_values(row).items():
            kind, values = cols[name]
            assert kind == entry["type"]
            if kind == "spherical":
                np.testing.assert_array_equal(values[k, 3:], entry["quaternion"])
                got = Rotation.from_euler("xyz", values[k, :3]).as_matrix()
                want = Rotation.from_euler("xyz", entry["euler"]).as_matrix()
                np.testing.assert_allclose(got, want, atol=1e-12)
            else:
                assert values[k] == entry["angle" if kind == "revolute" else "displacement"]


@pytest.mark.parametrize("length", [1, 2, 3, 4, 0])
def test_chain_lengths_hold_the_joints_the_compiled_model_drives(length: int) -> None:
    """``BatchedModel(..., chain_lengths)`` holds the columns of the joints that
    ``CompiledKinematics`` drives for the same chain length (Blender's count), with
    limits +-inf, and its FK does not change."""
    from dhik.model.compiled import CompiledKinematics

    defn = parse_skeleton(fixtures.SPINE_ARM)
    model = BatchedModel(defn, ["Hand"], [length])
    whole = BatchedModel(defn, ["Hand"])
    driven = set(CompiledKinematics(Skeleton(defn), ["Hand"], [length]).driven_names)
    held = {name.split(".")[0] for name, h in zip(model.names, model.held, strict=True) if h}
    assert held == driven
    assert np.all(np.isinf(model.lo[model.held])) and np.all(np.isinf(model.hi[model.held]))
    q = sample(whole, np.random.default_rng(length), 5)
    np.testing.assert_array_equal(model.transforms(q), whole.transforms(q))


def test_held_columns_keep_the_values_given_per_frame() -> None:
    """``solve_track`` and ``solve_many`` with ``held``: every frame's held column has
    exactly its value, and the solved columns reach targets made with those values."""
    defn = parse_skeleton(fixtures.SPINE_ARM)
    model = BatchedModel(defn, ["Hand"], [3])  # the spine is held
    whole = BatchedModel(defn, ["Hand"])
    frames = 60
    truth = fixtures.smooth_path(np.array([-1.0, -0.5, -0.5, -0.5, 0.3]),
                                 np.array([1.0, 0.5, 0.5, 0.5, 2.0]), frames, 4)
    targets = whole.transforms(truth)
    held = np.zeros_like(truth)
    held[:, 0] = truth[:, 0]
    track = solve_track(model, targets, weights=[(1.0, 0.0)], held=held)
    many = solve_many(model, targets, weights=[(1.0, 0.0)], held=held)
    for q, conv in ((track.q, track.converged), (many.q, many.converged)):
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
    columns for six error rows: 86 % converged, 10 jumps, 34 s for 200 frames). Every
    frame converges, the held values stay as given, and the path follows the truth."""
    defn = parse_skeleton(fixtures.arm7_on_a_turntable())
    names = [j.name for j in defn.joints]
    model = BatchedModel(defn, ["Tool"], [len(names) - names.index("J1") - 1])
    whole = BatchedModel(defn, ["Tool"])
    assert model.held.tolist() == [True, True] + [False] * 6
    frames = 200
    truth = fixtures.smooth_path(whole.lo[1:], whole.hi[1:], frames, 3)
    q = np.column_stack([0.6 * np.sin(np.linspace(0, 2 * math.pi, frames)), truth])
    res = solve_track(model, whole.transforms(q), held=q)
    assert res.converged.all() and not res.jumps
    np.testing.assert_array_equal(res.q[:, :2], q[:, :2])
    true_step = np.abs(np.diff(q[:, 2:], axis=0)).max()
    assert np.abs(np.diff(res.q[:, 2:], axis=0)).max() < 2.0 * true_step


def test_frames_out_of_reach_stay_within_the_limits() -> None:
    """A target reached only outside a limit (the T-pose hand of the spine arm, whose
    elbow is limited to >= 0.05 rad, the elbow alone solving): no frame converges, and
    every frame of ``solve_track`` and ``solve_many`` keeps the elbow at its limit, the
    closest approach within it. A coarse frame used to keep a candidate slot that never
    lived (all zeros, below the limit): its error was smaller, so the closest-approach
    pass kept it."""
    defn = parse_skeleton(fixtures.SPINE_ARM)
    model = BatchedModel(defn, ["Hand"], [2])  # the elbow alone
    hand = Skeleton(defn).world_transforms()["Hand"]
    targets = np.array([hand] * 40)[:, None]
    for q in (solve_track(model, targets).q, solve_many(model, targets).q):
        assert np.all(q >= model.lo) and np.all(q <= model.hi)
        np.testing.assert_array_equal(q[:, -1], 0.05)
