"""ObjectKinematics: the kinematics protocol on the joint objects (no Blender)."""

from __future__ import annotations

import numpy as np
import pytest
from dhik.app.formats import parse_skeleton
from dhik.model.objects import ObjectKinematics
from dhik.model.skeleton import Skeleton
from dhik.solver.chain import build_ik_chain, compute_jacobian
from dhik.solver.kinematics import Kinematics

TREE = {
    "root_name": "Root",
    "joints": [
        {"name": "Root", "type": "fixed", "offset": [0, 0, 0], "parent": None,
         "quaternion": [0.9, 0.1, 0.3, -0.2]},
        {"name": "Hip", "type": "spherical", "offset": [0, 0.2, 0.5], "parent": "Root",
         "limits": [[-1.0, 1.0], None, [-0.5, 0.7]]},
        {"name": "Slide", "type": "prismatic", "offset": [0.1, 0, 0.3], "parent": "Hip",
         "axis": [0, 1, 1], "limits": [-0.2, 0.4]},
        {"name": "Left", "type": "revolute", "offset": [0.3, 0, 0], "parent": "Slide",
         "axis": [1, 0, 0], "limits": [-2.0, 2.0]},
        {"name": "LeftTip", "type": "fixed", "offset": [0, 0, 0.4], "parent": "Left"},
        {"name": "Right", "type": "spherical", "offset": [-0.3, 0, 0], "parent": "Slide"},
        {"name": "RightTip", "type": "fixed", "offset": [0, 0.2, 0.3], "parent": "Right",
         "quaternion": [0.7, 0.7, 0, 0]},
    ],
}


def make() -> tuple[Skeleton, ObjectKinematics]:
    sk = Skeleton(parse_skeleton(TREE))
    return sk, ObjectKinematics(sk, ["LeftTip", "RightTip"])


def test_columns_are_the_union_of_the_chains() -> None:
    sk, model = make()
    assert isinstance(model, Kinematics)
    assert model.names == ["Hip.v1", "Hip.v2", "Hip.v3", "Slide", "Left",
                           "Right.v1", "Right.v2", "Right.v3"]
    assert model.n == 8
    lo, hi = model.limits()
    assert lo[0] == -1.0 and hi[0] == 1.0 and np.isinf(lo[1]) and np.isinf(hi[1])
    assert (lo[3], hi[3]) == (-0.2, 0.4)


def test_jacobian_scatters_each_chain() -> None:
    sk, model = make()
    model.apply_delta(np.array([0.3, -0.2, 0.4, 0.1, 0.5, 0.2, 0.1, -0.3]))
    model.update()
    for k, eff in enumerate(["LeftTip", "RightTip"]):
        node = sk.joint(eff)
        chain = build_ik_chain(sk.root, node)
        ref = compute_jacobian(chain, node.global_transform[:3, 3])
        jac = model.jacobian(k)
        cols = [model.names.index(n.name) for n in chain]
        np.testing.assert_array_equal(jac[:, cols], ref)
        others = [i for i in range(model.n) if i not in cols]
        assert not jac[:, others].any()
        np.testing.assert_array_equal(model.effector_transform(k), node.global_transform)


def test_jacobian_matches_finite_differences() -> None:
    sk, model = make()
    model.apply_delta(np.array([0.3, -0.2, 0.4, 0.1, 0.5, 0.2, 0.1, -0.3]))
    model.update()
    base = model.save()
    t0 = model.effector_transform(0)
    jac = model.jacobian(0)
    h = 1e-7
    for i in range(model.n):
        model.restore(base)
        d = np.zeros(model.n)
        d[i] = h
        model.apply_delta(d)
        model.update()
        t1 = model.effector_transform(0)
        np.testing.assert_allclose((t1[:3, 3] - t0[:3, 3]) / h, jac[:3, i], atol=1e-5)
    model.restore(base)


def test_save_restore_and_clipping() -> None:
    sk, model = make()
    before = model.save()
    t0 = model.effector_transform(1)
    model.apply_delta(np.full(model.n, 5.0))
    q = model.increments()
    lo, hi = model.limits()
    assert np.all(q <= hi) and np.all(q >= lo) and q[3] == pytest.approx(0.4)
    model.update()  # folds the spherical increments and shifts their limits
    assert model.increments()[0] == 0.0
    assert model.limits()[0][0] == pytest.approx(-2.0)
    model.restore(before)
    model.update()
    np.testing.assert_array_equal(model.effector_transform(1), t0)
    np.testing.assert_array_equal(model.limits()[0], make()[1].limits()[0])


def test_write_back_and_read_from_another_skeleton() -> None:
    sk, model = make()
    model.apply_delta(np.array([0.3, -0.2, 0.4, 0.1, 0.5, 0.2, 0.1, -0.3]))
    model.update()
    other = Skeleton(parse_skeleton(TREE))
    model.write_back(other)
    for name in ("LeftTip", "RightTip"):
        np.testing.assert_allclose(other.joint(name).global_transform,
                                   sk.joint(name).global_transform, atol=1e-15)
    model.reset()
    model.read_from(other)
    model.update()
    np.testing.assert_allclose(model.effector_transform(0),
                               other.joint("LeftTip").global_transform, atol=1e-15)
