"""The robust method (issue 5): cold solves, limits, restarts, trajectories, spec untouched.

Poses come from the FK of joint vectors within the limits, so every target is reachable;
success is re-checked with the joint objects' own FK. Frames: world; metres, radians.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from dhik import solve, solve_ik
from dhik.app.bake import simulate, summary_line
from dhik.app.formats import load_skeleton, load_targets, parse_skeleton
from dhik.app.trajectory import interpolate_keyframes
from dhik.model.compiled import CompiledKinematics
from dhik.model.skeleton import Skeleton
from dhik.model.spherical import SphericalJoint
from dhik.rotations import matrix_to_rotvec
from dhik.solver.dls import pose_error
from dhik.solver.dls import solve as solve_spec_objects
from dhik.solver.joints import PrismaticJoint, RevoluteJoint
from dhik.solver.robust import RobustOptions, solve_robust, solve_trajectory
from dhik.solver.settings import SolverSettings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

ARM7 = "sample_scenes/arm7/skeleton.json"
ARM7_NAMES = ["J1", "J2", "J3", "J4", "J5", "J6", "J7"]
TIGHT = SolverSettings(position_tolerance=1e-5, orientation_tolerance=1e-4)


def arm7() -> Skeleton:
    return Skeleton(load_skeleton(ARM7))


def arm7_limits(sk: Skeleton) -> np.ndarray:
    return np.array([sk.joints[n].limits for n in ARM7_NAMES])  # type: ignore[attr-defined]


def pose_of(sk: Skeleton, q: np.ndarray, effector: str = "Tool") -> np.ndarray:
    """World 4x4 of ``effector`` with the arm's joints at ``q`` (radians)."""
    sk.set_joint_values({n: {"type": "revolute", "angle": float(a)}
                         for n, a in zip(ARM7_NAMES, q, strict=True)})
    return sk.joints[effector].global_transform.copy()


def reached(sk: Skeleton, q: np.ndarray, target: np.ndarray) -> bool:
    """Independent check: FK of ``q`` within 1e-5 m / 1e-4 rad and ``q`` within limits."""
    lim = arm7_limits(sk)
    dp, dr = pose_error(_posed(sk, q), target)
    inside = bool(np.all(q >= lim[:, 0]) and np.all(q <= lim[:, 1]))
    return float(np.linalg.norm(dp)) < 1e-5 and float(np.linalg.norm(dr)) < 1e-4 and inside


def _posed(sk: Skeleton, q: np.ndarray):  # noqa: ANN202
    pose_of(sk, q)
    return sk.joints["Tool"]


# ------------------------------------------------------------------------ cold solves


def test_cold_solves_reach_random_reachable_poses_within_limits() -> None:
    ref = arm7()
    lim = arm7_limits(ref)
    rng = np.random.default_rng(12345)
    sk = arm7()
    model = CompiledKinematics(sk, ["Tool"])
    for q_true in rng.uniform(lim[:, 0], lim[:, 1], size=(40, 7)):
        target = pose_of(ref, q_true)
        model.reset()
        res = solve_robust(model, [target], TIGHT, rng=rng)
        q = model.increments()
        assert res.converged and reached(ref, q, target)
        assert res.position_error < 1e-5 and res.orientation_error < 1e-4


def test_solve_method_robust_on_the_joint_objects() -> None:
    ref, sk = arm7(), arm7()
    q_true = np.array([0.4, -0.7, 0.3, -2.0, 0.5, 1.6, -0.4])
    target = pose_of(ref, q_true)
    res = solve(sk.root, sk.joints["Tool"], target, position_tolerance=1e-6,
                orientation_tolerance=1e-6, method="robust")
    assert res.converged
    dp, dr = pose_error(sk.joints["Tool"], target)  # the joints were left solved, FK current
    assert np.linalg.norm(dp) < 1e-6 and np.linalg.norm(dr) < 1e-6
    sk.reset()
    assert solve_ik(sk.root, sk.joints["Tool"], target, method="robust")
    with pytest.raises(ValueError, match="unknown IK method"):
        solve(sk.root, sk.joints["Tool"], target, method="fancy")


def test_unreachable_target_ends_best_effort_within_limits() -> None:
    sk = arm7()
    model = CompiledKinematics(sk, ["Tool"])
    far = np.eye(4)
    far[:3, 3] = [3.0, 0.0, 0.5]  # the arm is about 1.2 m long
    start_error = np.linalg.norm(pose_error(sk.joints["Tool"], far)[0])
    res = solve_robust(model, [far], TIGHT, options=RobustOptions(max_restarts=5))
    assert not res.converged and res.restarts == 5
    model.write_back(sk)
    q = model.increments()
    lim = arm7_limits(sk)
    assert np.all(np.isfinite(q)) and np.all(q >= lim[:, 0]) and np.all(q <= lim[:, 1])
    dp, _ = pose_error(sk.joints["Tool"], far)
    assert np.linalg.norm(dp) == pytest.approx(res.position_error)
    assert res.position_error < start_error - 0.5  # it reached out toward the target


# ------------------------------------------------------------ restarts are reproducible


def test_restarts_are_reproducible_with_a_seed() -> None:
    ref = arm7()
    targets = [pose_of(ref, q) for q in ([2.5, 1.5, -2.5, -0.3, 2.5, 3.5, 2.0],
                                         [-2.7, -1.6, 2.6, -2.9, -2.6, 0.1, -2.5])]

    def run(seed: int) -> list[tuple[Any, list[float]]]:
        model = CompiledKinematics(arm7(), ["Tool"])
        out = []
        for target in targets:
            model.reset()
            res = solve_robust(model, [target], TIGHT, options=RobustOptions(seed=seed))
            out.append((res, model.increments().tolist()))
        return out

    first = run(7)
    assert first == run(7)  # same seed, same restarts, bit for bit
    assert any(res.restarts > 0 for res, _ in first)  # the test exercises restarts
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    a, b = CompiledKinematics(arm7(), ["Tool"]), CompiledKinematics(arm7(), ["Tool"])
    assert solve_robust(a, [targets[0]], TIGHT, rng=rng_a) == solve_robust(
        b, [targets[0]], TIGHT, rng=rng_b)
    assert a.increments().tolist() == b.increments().tolist()


# ---------------------------------------------------------- never outside the limits


def random_skeleton(rng: np.random.Generator, n: int) -> dict[str, Any]:
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


def assert_within_limits(sk: Skeleton) -> None:
    """Every joint variable within its skeleton.json limits (spherical: the increments
    folded so far, recorded by the shifted virtual limits, which must still hold 0)."""
    for d in sk.defn.joints:
        j = sk.joints[d.name]
        if isinstance(j, RevoluteJoint | PrismaticJoint) and j.limits is not None:
            assert j.limits[0] - 1e-12 <= j.q <= j.limits[1] + 1e-12, d.name
        elif isinstance(j, SphericalJoint):
            for v in j.virtual_chain:
                assert v.q == 0.0
                if v.limits is not None:
                    assert v.limits[0] <= 1e-12 and v.limits[1] >= -1e-12, v.name


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 5), trajectory=st.booleans())
def test_robust_never_leaves_the_limits(seed: int, n: int, trajectory: bool) -> None:
    rng = np.random.default_rng(seed)
    sk = Skeleton(parse_skeleton(random_skeleton(rng, n)))
    model = CompiledKinematics(sk, ["Tip"])
    targets = []
    for _ in range(3):  # anywhere near the chain: often unreachable
        t = np.eye(4)
        t[:3, :3] = _random_rotation(rng)
        t[:3, 3] = rng.uniform(-1.5, 1.5, 3)
        targets.append(t)
    opts = RobustOptions(max_restarts=3, restart_iterations=10, candidates=2,
                         probe_restarts=2, lookahead=2)
    fast = SolverSettings(max_iterations=20, position_tolerance=1e-4)
    if trajectory:
        frames = solve_trajectory(model, [[t] for t in targets], fast, options=opts)
        states = [f.state for f in frames]
    else:
        states = []
        for t in targets:
            solve_robust(model, [t], fast, options=opts)
            states.append(model.save())
    for state in states:
        model.restore(state)
        model.update()
        model.write_back(sk)
        assert_within_limits(sk)


def boxed_angles(quat: np.ndarray, box: list[Any]) -> bool:
    """Whether a rotation has intrinsic XYZ angles (``Rx Ry Rz``, scipy ``'XYZ'``)
    within ``box`` (per axis ``[lo, hi]`` or None), 1e-9 rad: either of its two angle
    triples, each angle up to whole turns."""
    w, x, y, z = quat
    a, b, c = Rotation.from_quat([x, y, z, w]).as_euler("XYZ")
    for triple in ((a, b, c), (a + math.pi, math.pi - b, c + math.pi)):
        ok = True
        for t, lim in zip(triple, box, strict=True):
            if lim is None:
                continue
            k = math.floor((lim[1] + 1e-9 - t) / (2 * math.pi))  # the largest t + 2 pi k <= hi
            ok = ok and t + 2 * math.pi * k >= lim[0] - 1e-9
        if ok:
            return True
    return False


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 4), trajectory=st.booleans())
def test_robust_spherical_limits_bound_the_intrinsic_angles(seed: int, n: int,
                                                            trajectory: bool) -> None:
    rng = np.random.default_rng(seed)
    defn = random_skeleton(rng, n)
    for j in defn["joints"]:  # every joint spherical with a full box: the case under test
        if j["type"] != "fixed":
            j.pop("axis", None)
            j["type"] = "spherical"
            lo = rng.uniform(-2.5, 0.3, 3)
            j["limits"] = [[float(a), float(a + rng.uniform(0.0, 3.0))] for a in lo]
    sk = Skeleton(parse_skeleton(defn))
    model = CompiledKinematics(sk, ["Tip"])
    targets = []
    for _ in range(3):
        t = np.eye(4)
        t[:3, :3] = _random_rotation(rng)
        t[:3, 3] = rng.uniform(-1.0, 1.0, 3)
        targets.append(t)
    opts = RobustOptions(max_restarts=3, restart_iterations=10, candidates=2,
                         bridge_candidates=1, lookahead=2, lookback=2)
    fast = SolverSettings(max_iterations=20, position_tolerance=1e-4)
    if trajectory:
        states = [f.state for f in solve_trajectory(model, [[t] for t in targets], fast,
                                                    options=opts)]
    else:
        states = []
        for t in targets:
            solve_robust(model, [t], fast, options=opts)
            states.append(model.save())
    boxes = {j["name"]: j["limits"] for j in defn["joints"] if j["type"] == "spherical"}
    for state in states:
        model.restore(state)
        model.update()
        model.write_back(sk)
        for name, box in boxes.items():
            assert boxed_angles(sk.joints[name].quaternion, box), name  # type: ignore[attr-defined]


def test_humanoid_like_spherical_limits_hold_on_a_trajectory() -> None:
    arm = {"root_name": "Root", "joints": [
        {"name": "Root", "type": "fixed", "parent": None},
        {"name": "Shoulder", "type": "spherical", "offset": [0, 0, 1.0], "parent": "Root",
         "limits": [[-1.6, 1.6], [-1.3, 1.3], [-0.7, 1.6]]},
        {"name": "Elbow", "type": "revolute", "offset": [0, 0, 0.3], "parent": "Shoulder",
         "axis": [0, 0, 1], "limits": [-0.05, 2.6]},
        {"name": "Wrist", "type": "spherical", "offset": [0, 0.26, 0], "parent": "Elbow",
         "limits": [[-1.2, 1.2], [-0.5, 0.5], [-1.0, 1.0]]},
        {"name": "Hand", "type": "fixed", "offset": [0, 0.08, 0], "parent": "Wrist"}]}
    sk = Skeleton(parse_skeleton(arm))
    boxes = {"Shoulder": arm["joints"][1]["limits"], "Wrist": arm["joints"][3]["limits"]}
    poses = []
    for f in range(40):  # a smooth path of angles inside the boxes
        s = math.sin(2 * math.pi * f / 40)
        values = {"Elbow": {"type": "revolute", "angle": 1.2 + 0.8 * s}}
        for name, box in boxes.items():
            lo, hi = np.array(box).T
            a = (lo + hi) / 2 + 0.45 * (hi - lo) * np.array([s, math.cos(f / 7), s * s - 0.5])
            qx, qy, qz, qw = Rotation.from_euler("XYZ", a).as_quat()
            values[name] = {"type": "spherical", "quaternion": [qw, qx, qy, qz]}
        sk.set_joint_values(values)
        poses.append((f, sk.joints["Hand"].global_transform.copy()))
    result = simulate(Skeleton(parse_skeleton(arm)), poses, settings=TIGHT, method="robust")
    assert result.converged_count == 40
    for fr in result.frames:
        for name, box in boxes.items():
            assert boxed_angles(np.array(fr["joints"][name]["quaternion"]), box), name


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    q = rng.normal(size=4)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


# --------------------------------------------------------------- trajectories, no flips


def sample_arm7_joint_path() -> np.ndarray:
    """The joint path whose FK is sample_scenes/arm7/targets.json (make_scenes.py):
    sinusoids at 50 % of each half-range around mid-range, 1-2 periods, 240 frames."""
    lim = arm7_limits(arm7())
    rng = np.random.default_rng(12345)
    mid, half = lim.mean(axis=1), (lim[:, 1] - lim[:, 0]) / 2
    periods = rng.uniform(1.0, 2.0, len(lim))
    phase = rng.uniform(0, 2 * math.pi, len(lim))
    t = np.arange(240)[:, None] / 240
    return mid + 0.5 * half * np.sin(2 * math.pi * periods * t + phase)


def test_sample_arm7_trajectory_is_tracked_without_flips() -> None:
    targets = interpolate_keyframes(load_targets("sample_scenes/arm7/targets.json"))
    path = sample_arm7_joint_path()
    ref = arm7()
    for q, (_, target) in list(zip(path, targets, strict=True))[::40]:  # the scene's truth
        assert reached(ref, q, target)
    robust = simulate(arm7(), targets, settings=TIGHT, method="robust")
    spec = simulate(arm7(), targets, settings=TIGHT, method="spec")
    assert robust.method == "robust" and "method robust" in summary_line(robust)
    assert robust.converged_count == len(targets) > spec.converged_count
    got = np.array([[fr["joints"][n]["angle"] for n in ARM7_NAMES] for fr in robust.frames])
    for q, (_, target) in zip(got, targets, strict=True):
        assert reached(ref, q, target)  # independent FK, limits included
    true_step = np.abs(np.diff(path, axis=0)).max()
    steps = np.abs(np.diff(got[1:], axis=0)).max()  # frame 0 comes cold from the T-pose
    assert steps <= 2.0 * true_step  # no flips


def generated_arm7_joint_path(seed: int, frames: int = 240) -> np.ndarray:
    """Sinusoids like the sample's (50 % of each half-range, 1-2 periods), other seeds."""
    lim = arm7_limits(arm7())
    rng = np.random.default_rng(seed)
    mid, half = lim.mean(axis=1), (lim[:, 1] - lim[:, 0]) / 2
    periods = rng.uniform(1.0, 2.0, len(lim))
    phase = rng.uniform(0, 2 * math.pi, len(lim))
    t = np.arange(frames)[:, None] / frames
    return mid + 0.5 * half * np.sin(2 * math.pi * periods * t + phase)


def bake_arm7_path(path: np.ndarray) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
    """The robust bake of the FK of ``path``: its joint angles per frame, and the targets."""
    ref = arm7()
    targets = [(f, pose_of(ref, q)) for f, q in enumerate(path)]
    result = simulate(arm7(), targets, settings=TIGHT, method="robust")
    assert result.converged_count == len(targets)
    got = np.array([[fr["joints"][n]["angle"] for n in ARM7_NAMES] for fr in result.frames])
    for q, (_, target) in zip(got, targets, strict=True):
        assert reached(ref, q, target)  # independent FK, limits included
    return got, targets


@pytest.mark.parametrize("seed", [1, 2])
def test_generated_arm7_trajectory_converges_every_frame_within_limits(seed: int) -> None:
    bake_arm7_path(generated_arm7_joint_path(seed))


@pytest.mark.parametrize("seed", [2, 7])
def test_generated_arm7_trajectory_has_no_flips(seed: int) -> None:
    """The bake solves the path as one problem: no joint moves more than twice the
    largest step of the joint path that made the targets (the robust tracker alone
    jumped here: its null-space path reached the limits)."""
    path = generated_arm7_joint_path(seed)
    got, _ = bake_arm7_path(path)
    true_step = np.abs(np.diff(path, axis=0)).max()
    assert np.abs(np.diff(got[1:], axis=0)).max() <= 2.0 * true_step


def test_trajectory_cold_start_solves_each_frame_alone() -> None:
    ref = arm7()
    per_frame = [[pose_of(ref, q)] for q in sample_arm7_joint_path()[::40]]
    model = CompiledKinematics(arm7(), ["Tool"])
    frames = solve_trajectory(model, per_frame, TIGHT, cold_start=True)
    for sol, targets in zip(frames, per_frame, strict=True):
        alone = CompiledKinematics(arm7(), ["Tool"])
        solve_robust(alone, targets, TIGHT)
        model.restore(sol.state)
        assert model.increments().tolist() == alone.increments().tolist()


def test_trajectory_with_spherical_joints_reaches_every_frame() -> None:
    arm = {
        "root_name": "Root",
        "joints": [
            {"name": "Root", "type": "fixed", "parent": None},
            {"name": "Shoulder", "type": "spherical", "offset": [0, 0, 1.0], "parent": "Root",
             "limits": [[-2.5, 2.5], None, [-2.0, 2.0]]},
            {"name": "Elbow", "type": "revolute", "offset": [0, 0, 0.5], "parent": "Shoulder",
             "axis": [1, 0, 0], "limits": [-2.6, 0.0]},
            {"name": "Wrist", "type": "spherical", "offset": [0, 0, 0.4], "parent": "Elbow"},
            {"name": "Hand", "type": "fixed", "offset": [0, 0.05, 0.1], "parent": "Wrist"},
        ],
    }
    sk = Skeleton(parse_skeleton(arm))
    poses = []
    for f in range(60):
        a = 2 * math.pi * f / 60
        sk.set_joint_values({
            "Shoulder": {"type": "spherical", "quaternion": [math.cos(a / 4), 0.3 * math.sin(a),
                                                             0.2, 0.1]},
            "Elbow": {"type": "revolute", "angle": -1.0 - 0.5 * math.sin(a)},
            "Wrist": {"type": "spherical", "quaternion": [1.0, 0.2 * math.cos(a), 0.1, 0.0]},
        })
        poses.append((f, sk.joints["Hand"].global_transform.copy()))
    result = simulate(Skeleton(parse_skeleton(arm)), poses, settings=TIGHT, method="robust")
    assert result.converged_count == 60
    check = Skeleton(parse_skeleton(arm))
    for fr, (_, target) in zip(result.frames, poses, strict=True):
        check.set_joint_values(fr["joints"])
        dp, dr = pose_error(check.joints["Hand"], target)
        assert np.linalg.norm(dp) < 1e-5 and np.linalg.norm(dr) < 1e-4


# --------------------------------------------------------- the spec method is unchanged


def test_spec_method_is_the_default_and_unchanged() -> None:
    ref = arm7()
    rng = np.random.default_rng(1)
    for q_true in rng.uniform(arm7_limits(ref)[:, 0], arm7_limits(ref)[:, 1], (5, 7)):
        target = pose_of(ref, q_true)
        a, b = arm7(), arm7()
        ra = solve_spec_objects(a.root, a.joints["Tool"], target)
        rb = solve(b.root, b.joints["Tool"], target, method="spec")
        assert ra == rb and type(rb).__name__ == "SolveResult"
        assert a.joint_values() == b.joint_values()
        c = arm7()
        assert solve_ik(c.root, c.joints["Tool"], target) == ra.converged
    targets = interpolate_keyframes(load_targets("sample_scenes/arm7/targets.json"))[:40]
    default = simulate(arm7(), targets)
    spec = simulate(arm7(), targets, method="spec")
    assert default.method == spec.method == "spec"
    assert [r.converged for r in default.records] == [r.converged for r in spec.records]
    assert default.frames == spec.frames


def test_result_errors_are_the_models() -> None:
    ref = arm7()
    target = pose_of(ref, np.array([0.1, 0.2, 0.3, -1.0, 0.2, 1.0, 0.0]))
    model = CompiledKinematics(arm7(), ["Tool"])
    res = solve_robust(model, [target], TIGHT)
    g = model.effector_transform(0)
    assert res.position_error == pytest.approx(np.linalg.norm(target[:3, 3] - g[:3, 3]))
    assert res.orientation_error == pytest.approx(
        np.linalg.norm(matrix_to_rotvec(target[:3, :3] @ g[:3, :3].T)))
    assert res.effector_errors == [(res.position_error, res.orientation_error)]
