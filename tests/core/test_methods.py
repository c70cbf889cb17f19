"""``solve`` / ``solve_ik`` on the joint objects (``model.methods``): the spec method
unchanged, the robust method (``solver.lm.solve_one``, warm from the joints' state).

Targets come from the FK of joint values within the limits; results are re-checked with
the joint objects' own FK (``pose_error``). Frames: world; metres, radians.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dhik import solve, solve_ik
from dhik.app.bake import simulate
from dhik.app.formats import load_skeleton, load_targets, parse_skeleton
from dhik.app.trajectory import interpolate_keyframes
from dhik.model.skeleton import Skeleton
from dhik.solver.chain import build_ik_chain
from dhik.solver.dls import pose_error
from dhik.solver.dls import solve as solve_spec_objects
from fixtures import ARM7, boxed_angles, smooth_path
from scipy.spatial.transform import Rotation

NAMES = ["J1", "J2", "J3", "J4", "J5", "J6", "J7"]


def arm7() -> Skeleton:
    return Skeleton(load_skeleton(ARM7))


def limits(sk: Skeleton) -> np.ndarray:
    return np.array([sk.joints[n].limits for n in NAMES])  # type: ignore[attr-defined]


def pose_of(sk: Skeleton, q: np.ndarray, effector: str = "Tool") -> np.ndarray:
    """World 4x4 of ``effector`` with the arm's joints at ``q`` (radians)."""
    sk.set_joint_values({n: {"type": "revolute", "angle": float(a)}
                         for n, a in zip(NAMES, q, strict=True)})
    return sk.joints[effector].global_transform.copy()


def angles(sk: Skeleton) -> np.ndarray:
    return np.array([sk.joints[n].q for n in NAMES])  # type: ignore[attr-defined]


def test_solve_method_robust_on_the_joint_objects() -> None:
    """The joints are left solved with FK current, within the limits; the result's
    errors are the joint objects' own; solve_ik says True; an unknown method is
    refused."""
    ref, sk = arm7(), arm7()
    target = pose_of(ref, np.array([0.4, -0.7, 0.3, -2.0, 0.5, 1.6, -0.4]))
    res = solve(sk.root, sk.joints["Tool"], target, position_tolerance=1e-6,
                orientation_tolerance=1e-6, method="robust")
    assert res.converged and type(res).__name__ == "SolveResult"
    dp, dr = pose_error(sk.joints["Tool"], target)
    assert np.linalg.norm(dp) < 1e-6 and np.linalg.norm(dr) < 1e-6
    assert res.position_error == pytest.approx(np.linalg.norm(dp), abs=1e-12)
    assert res.orientation_error == pytest.approx(np.linalg.norm(dr), abs=1e-12)
    lim = limits(sk)
    assert np.all(angles(sk) >= lim[:, 0]) and np.all(angles(sk) <= lim[:, 1])
    sk.reset()
    assert solve_ik(sk.root, sk.joints["Tool"], target, method="robust")
    with pytest.raises(ValueError, match="unknown IK method"):
        solve(sk.root, sk.joints["Tool"], target, method="fancy")


def test_robust_starts_from_the_joints_current_state() -> None:
    """A warm solve (a batch of one): posed on one frame of a smooth path, the redundant
    arm reaches the next frame's target moving no more than twice that frame's step (it
    keeps its posture); from the T-pose the same target is solved too, on another
    posture."""
    sk = arm7()
    lim = limits(sk)
    truth = smooth_path(lim[:, 0], lim[:, 1], 200, 3)
    ref = arm7()
    for f in (20, 90, 150):
        target = pose_of(ref, truth[f + 1])
        pose_of(sk, truth[f])
        res = solve(sk.root, sk.joints["Tool"], target, position_tolerance=1e-5,
                    orientation_tolerance=1e-4, method="robust")
        assert res.converged
        step = np.abs(truth[f + 1] - truth[f]).max()
        assert np.abs(angles(sk) - truth[f]).max() <= 2.0 * step
    sk.reset()
    assert solve(sk.root, sk.joints["Tool"], target, method="robust").converged
    assert np.abs(angles(sk) - truth[150]).max() > 2.0 * step


def test_tolerances_and_iterations_act_on_the_robust_method() -> None:
    """The tolerances given are the ones met (a looser one stops sooner), and
    ``max_iterations`` caps the first search (1 iteration: not converged from far)."""
    ref = arm7()
    target = pose_of(ref, np.array([1.2, -0.9, 0.8, -1.6, 1.0, 0.9, 1.1]))
    runs = []
    for tol in (1e-2, 1e-8):
        sk = arm7()
        res = solve(sk.root, sk.joints["Tool"], target, position_tolerance=tol,
                    orientation_tolerance=tol, method="robust")
        assert res.converged and res.position_error < tol and res.orientation_error < tol
        runs.append(res.iterations)
    assert runs[0] < runs[1]
    sk = arm7()
    one = solve(sk.root, sk.joints["Tool"], target, max_iterations=1, method="robust")
    assert not one.converged


@pytest.mark.parametrize("argument", [{"damping": 0.01}, {"enable_line_search": False},
                                      {"line_search_alpha": 0.5},
                                      {"line_search_alpha_min": 0.1}])
def test_robust_refuses_the_spec_methods_arguments(argument: dict) -> None:
    """Damping and line search are the spec method's: the robust method refuses them
    unless they are at their defaults (it would otherwise ignore them), and leaves the
    joints as they were."""
    sk = arm7()
    target = pose_of(arm7(), np.array([0.4, -0.7, 0.3, -2.0, 0.5, 1.6, -0.4]))
    with pytest.raises(ValueError, match="spec method"):
        solve(sk.root, sk.joints["Tool"], target, method="robust", **argument)
    assert not angles(sk).any()
    assert solve(sk.root, sk.joints["Tool"], target, method="spec", **argument) is not None


def test_robust_builds_its_own_chain() -> None:
    """``ik_chain``: the chain ``build_ik_chain`` gives is accepted, another refused."""
    sk = arm7()
    target = pose_of(arm7(), np.array([0.4, -0.7, 0.3, -2.0, 0.5, 1.6, -0.4]))
    chain = build_ik_chain(sk.root, sk.joints["Tool"])
    assert solve(sk.root, sk.joints["Tool"], target, chain, method="robust").converged
    with pytest.raises(ValueError, match="its own IK chain"):
        solve(sk.root, sk.joints["Tool"], target, chain[1:], method="robust")


def test_robust_on_a_subtree_whose_root_has_a_parent() -> None:
    """``root`` below other joints: only the joints below it move, the ones above keep
    their values and carry the sub-tree (the target is reached in the world)."""
    ref, sk = arm7(), arm7()
    q = np.array([0.5, -0.6, 0.3, -1.9, 0.4, 1.2, -0.3])
    target = pose_of(ref, q)
    pose_of(sk, np.r_[q[:2], np.zeros(5)])
    res = solve(sk.joints["J3"], sk.joints["Tool"], target, position_tolerance=1e-6,
                orientation_tolerance=1e-6, method="robust")
    assert res.converged
    assert angles(sk)[:2].tolist() == q[:2].tolist()
    dp, dr = pose_error(sk.joints["Tool"], target)
    assert np.linalg.norm(dp) < 1e-6 and np.linalg.norm(dr) < 1e-6


ARM = {"root_name": "Root", "joints": [
    {"name": "Root", "type": "fixed", "parent": None},
    {"name": "Shoulder", "type": "spherical", "offset": [0, 0, 1.0], "parent": "Root",
     "limits": [[-1.6, 1.6], [-1.3, 1.3], [-0.7, 1.6]]},
    {"name": "Elbow", "type": "revolute", "offset": [0, 0, 0.3], "parent": "Shoulder",
     "axis": [0, 0, 1], "limits": [-0.05, 2.6]},
    {"name": "Wrist", "type": "spherical", "offset": [0, 0.26, 0], "parent": "Elbow",
     "limits": [[-1.2, 1.2], [-0.5, 0.5], [-1.0, 1.0]]},
    {"name": "Hand", "type": "fixed", "offset": [0, 0.08, 0], "parent": "Wrist"}]}


def test_robust_keeps_spherical_limits_on_the_joint_objects() -> None:
    """Balls with limits: the quaternions written back have intrinsic XYZ angles within
    the boxes (scipy), their virtual joints hold no increment and the file's limits
    again, and the hand is on target."""
    boxes = {"Shoulder": ARM["joints"][1]["limits"], "Wrist": ARM["joints"][3]["limits"]}
    ref = Skeleton(parse_skeleton(ARM))
    rng = np.random.default_rng(3)
    for _ in range(5):
        values = {"Elbow": {"type": "revolute", "angle": float(rng.uniform(0.2, 2.4))}}
        for name, box in boxes.items():
            lo, hi = np.array(box).T
            a = rng.uniform(lo * 0.9, hi * 0.9)
            qx, qy, qz, qw = Rotation.from_euler("XYZ", a).as_quat()
            values[name] = {"type": "spherical", "quaternion": [qw, qx, qy, qz]}
        ref.set_joint_values(values)
        target = ref.joints["Hand"].global_transform.copy()
        sk = Skeleton(parse_skeleton(ARM))
        res = solve(sk.root, sk.joints["Hand"], target, position_tolerance=1e-6,
                    orientation_tolerance=1e-6, method="robust")
        assert res.converged
        dp, dr = pose_error(sk.joints["Hand"], target)
        assert np.linalg.norm(dp) < 1e-6 and np.linalg.norm(dr) < 1e-6
        for name, box in boxes.items():
            joint = sk.joints[name]
            assert boxed_angles(joint.quaternion, box), name  # type: ignore[attr-defined]
            for v, lim in zip(joint.virtual_chain, box, strict=True):  # type: ignore[attr-defined]
                assert v.q == 0.0 and tuple(v.limits) == tuple(lim)


def test_spec_method_is_the_default_and_unchanged() -> None:
    ref = arm7()
    rng = np.random.default_rng(1)
    lim = limits(ref)
    for q_true in rng.uniform(lim[:, 0], lim[:, 1], (5, 7)):
        target = pose_of(ref, q_true)
        a, b = arm7(), arm7()
        ra = solve_spec_objects(a.root, a.joints["Tool"], target)
        rb = solve(b.root, b.joints["Tool"], target, method="spec")
        assert ra == rb and type(rb).__name__ == "SolveResult"
        assert a.joint_values() == b.joint_values()
        c = arm7()
        assert solve_ik(c.root, c.joints["Tool"], target) == ra.converged
        d = arm7()
        assert solve(d.root, d.joints["Tool"], target) == ra  # spec is the default
    targets = interpolate_keyframes(load_targets("sample_scenes/arm7/targets.json"))[:40]
    default = simulate(arm7(), targets)
    spec = simulate(arm7(), targets, method="spec")
    assert default.method == spec.method == "spec"
    assert [r.converged for r in default.records] == [r.converged for r in spec.records]
    assert default.frames == spec.frames
    assert math.isfinite(default.records[-1].position_error)
