"""The SPEC 5.4 DLS solver: convergence, limits, line search, failure modes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dhik.app.formats import load_skeleton, parse_skeleton
from dhik.model.skeleton import Skeleton
from dhik.model.spherical import SphericalJoint
from dhik.rotations import euler_xyz_to_matrix, make_transform
from dhik.solver.chain import build_ik_chain
from dhik.solver.dls import pose_error, solve, solve_ik
from dhik.solver.joints import FixedJoint, PrismaticJoint, RevoluteJoint
from hypothesis import given, settings
from hypothesis import strategies as st

from .test_jacobian import random_pose, random_skeleton_dict

SCENES = "sample_scenes"


def arm7() -> Skeleton:
    return Skeleton(load_skeleton(f"{SCENES}/arm7/skeleton.json"))


def state_of(sk: Skeleton) -> list:
    out = []
    for j in sk.joints.values():
        if isinstance(j, RevoluteJoint | PrismaticJoint):
            out.append((j.name, j.q))
        elif isinstance(j, SphericalJoint):
            out.append((j.name, tuple(j.quaternion),
                        tuple((v.q, v.limits) for v in j.virtual_chain)))
    return out


def test_reaches_a_reachable_target_from_nearby() -> None:
    sk = arm7()
    q_true = [0.3, -0.5, 0.2, -1.8, 0.4, 1.6, -0.3]
    sk.set_joint_values({f"J{i + 1}": {"type": "revolute", "angle": a}
                         for i, a in enumerate(q_true)})
    target = sk.joints["Tool"].global_transform.copy()
    sk.set_joint_values({f"J{i + 1}": {"type": "revolute", "angle": a + 0.1}
                         for i, a in enumerate(q_true)})
    res = solve(sk.root, sk.joints["Tool"], target, position_tolerance=1e-6,
                orientation_tolerance=1e-6)
    assert res.converged and 0 < res.iterations < 20
    dp, dr = pose_error(sk.joints["Tool"], target)
    assert np.linalg.norm(dp) < 1e-6 and np.linalg.norm(dr) < 1e-6
    assert res.position_error == pytest.approx(np.linalg.norm(dp))


def test_solve_ik_signature_defaults_and_bool() -> None:
    import inspect
    sig = inspect.signature(solve_ik)
    defaults = {k: v.default for k, v in sig.parameters.items()
                if v.default is not inspect.Parameter.empty}
    assert list(sig.parameters)[:4] == ["root", "effector", "target_transform", "ik_chain"]
    assert {k: defaults[k] for k in ("ik_chain", "max_iterations", "position_tolerance",
            "orientation_tolerance", "damping", "enable_line_search", "line_search_alpha",
            "line_search_alpha_min")} == {
        "ik_chain": None, "max_iterations": 100, "position_tolerance": 1e-3,
        "orientation_tolerance": 1e-1, "damping": 0.0001, "enable_line_search": True,
        "line_search_alpha": 1.0, "line_search_alpha_min": 1e-2}
    sk = arm7()
    assert solve_ik(sk.root, sk.joints["Tool"], sk.joints["Tool"].global_transform) is True


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 8), line_search=st.booleans())
def test_limits_never_exceeded_and_state_finite(seed: int, n: int, line_search: bool) -> None:
    rng = np.random.default_rng(seed)
    defn = parse_skeleton(random_skeleton_dict(rng, n))
    sk = Skeleton(defn)
    eff = sk.joints[f"J{n - 1}"]
    target = make_transform(euler_xyz_to_matrix(rng.uniform(-3, 3, 3)), rng.uniform(-3, 3, 3))
    res = solve(sk.root, eff, target, max_iterations=30, enable_line_search=line_search)
    assert math.isfinite(res.position_error) and math.isfinite(res.orientation_error)
    limits = {d.name: d.limits for d in defn.joints}
    moved = {n.name for n in build_ik_chain(sk.root, eff)}  # others keep their T-pose
    for j in sk.joints.values():
        if j.name in moved and j.limits is not None:
            assert limits[j.name][0] - 1e-12 <= j.q <= limits[j.name][1] + 1e-12
        if isinstance(j, SphericalJoint):
            assert np.all(np.isfinite(j.quaternion))
            for v in j.virtual_chain:  # shifted limits keep 0 inside: the total stays inside
                if v.limits is not None:
                    assert v.limits[0] <= 1e-12 and v.limits[1] >= -1e-12
        assert np.all(np.isfinite(j.global_transform))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_line_search_never_accepts_a_worse_step(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sk = Skeleton(parse_skeleton(random_skeleton_dict(rng, 6)))
    eff = sk.joints["J5"]
    random_pose(sk, rng)
    target = eff.global_transform.copy()
    sk.reset()
    errors = []
    for k in range(12):  # the same deterministic solve, stopped after k steps
        sk.reset()
        res = solve(sk.root, eff, target, max_iterations=k, position_tolerance=1e-12,
                    orientation_tolerance=1e-12)
        errors.append(math.hypot(res.position_error, res.orientation_error))
        assert res.iterations <= k
    assert all(b <= a + 1e-15 for a, b in zip(errors, errors[1:], strict=False))


def blocked_arm() -> tuple[Skeleton, np.ndarray]:
    """An arm whose only way to the target is past a limit: the line search must fail."""
    sk = Skeleton(parse_skeleton({"root_name": "R", "joints": [
        {"name": "R", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {"name": "Ball", "type": "spherical", "offset": [0, 0, 0], "parent": "R",
         "limits": [[-0.2, 0.2], [-0.2, 0.2], [-0.2, 0.2]]},
        {"name": "Slide", "type": "prismatic", "offset": [0, 0, 1], "parent": "Ball",
         "axis": [0, 0, 1], "limits": [0, 0.1]},
        {"name": "Tip", "type": "fixed", "offset": [0, 0, 0.5], "parent": "Slide"},
    ]}))
    return sk, make_transform(np.eye(3), [0, 1.5, -0.3])


def test_rejected_step_leaves_no_trace() -> None:
    sk, target = blocked_arm()
    res = solve(sk.root, sk.joints["Tip"], target)
    assert not res.converged and res.iterations < 100  # stopped by the line search
    failed = state_of(sk)
    sk.reset()
    solve(sk.root, sk.joints["Tip"], target, max_iterations=res.iterations)
    assert state_of(sk) == failed  # the rejected trials changed nothing, limits included
    world = sk.world_transforms()
    sk.update()
    for name, m in sk.world_transforms().items():
        np.testing.assert_array_equal(m, world[name])


def test_unreachable_target_returns_false_with_finite_state() -> None:
    sk = arm7()
    far = make_transform(np.eye(3), [5.0, 0.0, 0.5])
    res = solve(sk.root, sk.joints["Tool"], far)
    assert res.converged is False
    assert 3.5 < res.position_error < 5.0
    assert all(np.all(np.isfinite(m)) for m in sk.world_transforms().values())


def test_singular_pose_returns_false_with_finite_state() -> None:
    sk = arm7()  # straight up at rest: the Jacobian is rank-deficient
    above = make_transform(np.eye(3), [0.0, 0.0, 3.0])
    assert solve_ik(sk.root, sk.joints["Tool"], above) is False
    assert all(np.all(np.isfinite(m)) for m in sk.world_transforms().values())
    # damping 0 makes J J^T singular for fewer than 6 columns: no NaN, just False
    sk2, target = blocked_arm()
    res = solve(sk2.root, sk2.joints["Tip"], target, damping=0.0)
    assert not res.converged
    assert all(np.all(np.isfinite(m)) for m in sk2.world_transforms().values())


def test_without_line_search_keeps_the_best_state() -> None:
    sk, target = blocked_arm()
    res = solve(sk.root, sk.joints["Tip"], target, enable_line_search=False,
                max_iterations=50, damping=1e-6)
    sk.reset()
    start = solve(sk.root, sk.joints["Tip"], target, max_iterations=0)
    assert math.hypot(res.position_error, res.orientation_error) <= math.hypot(
        start.position_error, start.orientation_error)


def test_fixed_joint_column_warns_and_is_zero() -> None:
    f = FixedJoint("F")
    with pytest.warns(UserWarning):
        col = f.compute_jacobian_column(np.zeros(3))
    np.testing.assert_array_equal(col, np.zeros(6))
    chain: list = []
    f.append_to_ik_chain(chain)
    assert chain == [] and f.get_dof() == 0


def test_chain_given_or_built_gives_the_same_result() -> None:
    sk = arm7()
    target = make_transform(euler_xyz_to_matrix([0.1, 2.8, 0.2]), [0.4, 0.1, 0.6])
    a = solve(sk.root, sk.joints["Tool"], target)
    qa = state_of(sk)
    sk.reset()
    b = solve(sk.root, sk.joints["Tool"], target,
              ik_chain=build_ik_chain(sk.root, sk.joints["Tool"]))
    assert a == b and state_of(sk) == qa
