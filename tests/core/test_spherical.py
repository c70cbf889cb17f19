"""SphericalJoint (SPEC 4.3): virtual chain wiring, state sync, limit shifting."""

from __future__ import annotations

import numpy as np
import pytest
from dhik.model.spherical import SphericalJoint
from dhik.solver.joints import FixedJoint, RevoluteJoint
from scipy.spatial.transform import Rotation


def wxyz(rot: Rotation) -> np.ndarray:
    x, y, z, w = rot.as_quat()
    return np.array([w, x, y, z])


@pytest.fixture
def tree() -> tuple[FixedJoint, SphericalJoint, RevoluteJoint, FixedJoint]:
    root = FixedJoint("Root", [0.1, 0.2, 0.3], [0.9, 0.2, -0.1, 0.3])
    ball = SphericalJoint("Ball", [0, 1.5, 0], [(-3.14, 3.14), None, (-0.5, 0.5)])
    elbow = RevoluteJoint("Elbow", [0, 0, 2], [1, 0, 0], (0.0, 2.5))
    tip = FixedJoint("Tip", [0, 0.3, 1])
    root.add_child(ball)
    ball.add_child(elbow)
    elbow.add_child(tip)
    root.update_global_transform()
    return root, ball, elbow, tip


def test_virtual_structure(tree) -> None:
    root, ball, elbow, _ = tree
    v1, v2, v3 = ball.virtual_chain
    assert ball.virtual_fix.parent is root
    np.testing.assert_array_equal(ball.virtual_fix.local_offset, ball.local_offset)
    assert (v1.parent, v2.parent, v3.parent) == (ball.virtual_fix, v1, v2)
    assert [list(v.axis) for v in (v1, v2, v3)] == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    assert [v.limits for v in (v1, v2, v3)] == [(-3.14, 3.14), None, (-0.5, 0.5)]
    assert v3.children == [elbow] and v3.children is not ball.children
    assert all(v.spherical_parent is ball for v in (*ball.virtual_chain, ball.virtual_fix))
    assert all(not v.local_offset.any() for v in (v1, v2, v3))
    assert ball.get_dof() == 3
    with pytest.raises(NotImplementedError):
        ball.apply_delta(0.1)
    with pytest.raises(NotImplementedError):
        ball.compute_jacobian_column(np.zeros(3))


def test_virtual_frames_equal_the_joint_frame_after_fk(tree) -> None:
    _, ball, _, _ = tree
    for v in (ball.virtual_fix, *ball.virtual_chain):
        np.testing.assert_array_equal(v.global_transform, ball.global_transform)


def test_sync_folds_intrinsic_xyz_and_moves_nothing(tree) -> None:
    root, ball, elbow, tip = tree
    ball.quaternion = wxyz(Rotation.from_rotvec([0.2, -0.4, 0.1]))
    ball.virtual_fix.quaternion = ball.quaternion.copy()
    root.update_global_transform()
    q_before = ball.quaternion.copy()
    v1, v2, v3 = ball.virtual_chain
    v1.apply_delta(0.3)
    v2.apply_delta(-0.7)
    v3.apply_delta(0.45)  # inside the limit 0.5
    # world transforms just before the sync: the virtual chain turned, children below v3
    before_v3 = (ball.virtual_fix.global_transform @ v1.get_local_matrix()
                 @ v2.get_local_matrix() @ v3.get_local_matrix())
    before_tip = before_v3 @ elbow.get_local_matrix() @ tip.get_local_matrix()
    root.update_global_transform()  # the sync
    expected = Rotation.from_quat(np.roll(q_before, -1)) * Rotation.from_euler(
        "XYZ", [0.3, -0.7, 0.45])
    np.testing.assert_allclose(np.abs(ball.quaternion @ wxyz(expected)), 1.0, atol=1e-14)
    assert abs(np.linalg.norm(ball.quaternion) - 1.0) < 1e-15
    assert [v.q for v in ball.virtual_chain] == [0.0, 0.0, 0.0]
    np.testing.assert_array_equal(ball.virtual_fix.quaternion, ball.quaternion)
    np.testing.assert_allclose(ball.global_transform, before_v3, atol=1e-14)
    np.testing.assert_allclose(tip.global_transform, before_tip, atol=1e-14)
    # limits shifted by the folded amounts, None stays None
    assert v1.limits == pytest.approx((-3.14 - 0.3, 3.14 - 0.3))
    assert v2.limits is None
    assert v3.limits == pytest.approx((-0.5 - 0.45, 0.5 - 0.45))


def test_limits_accumulate_over_syncs_and_clip(tree) -> None:
    root, ball, _, _ = tree
    v3 = ball.virtual_chain[2]
    v3.apply_delta(0.3)
    root.update_global_transform()
    v3.apply_delta(0.9)  # only 0.2 left before the original 0.5
    assert v3.q == pytest.approx(0.2)
    root.update_global_transform()
    assert v3.limits == pytest.approx((-1.0, 0.0))
    v3.apply_delta(0.5)
    assert v3.q == 0.0
    ball.reset()
    assert v3.limits == (-0.5, 0.5)
    np.testing.assert_array_equal(ball.quaternion, [1, 0, 0, 0])


def test_sync_skipped_below_threshold(tree) -> None:
    root, ball, _, _ = tree
    v1 = ball.virtual_chain[0]
    v1.q = 5e-11
    root.update_global_transform()
    assert v1.q == 5e-11
    np.testing.assert_array_equal(ball.quaternion, [1, 0, 0, 0])
    assert v1.limits == (-3.14, 3.14)


def test_child_added_later_and_parent_hooks() -> None:
    ball = SphericalJoint("Ball")
    child = FixedJoint("C", [0, 0, 1])
    ball.add_child(child)
    assert ball.virtual_chain[2].children == [child]
    root = FixedJoint("R")
    root.add_child(ball)
    assert ball.parent is root and ball.virtual_fix.parent is root
