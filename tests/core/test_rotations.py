"""numpy rotation code against scipy's Rotation on thousands of random inputs."""

from __future__ import annotations

import numpy as np
import pytest
from dhik import rotations as r
from scipy.spatial.transform import Rotation

N = 3000


def wxyz(q_xyzw: np.ndarray) -> np.ndarray:
    return np.array([q_xyzw[3], q_xyzw[0], q_xyzw[1], q_xyzw[2]])


def same_rotation_quat(a: np.ndarray, b: np.ndarray, tol: float = 1e-12) -> bool:
    return min(np.abs(a - b).max(), np.abs(a + b).max()) < tol


@pytest.fixture(scope="module")
def rotations() -> Rotation:
    rng = np.random.default_rng(1)
    randoms = Rotation.random(N, random_state=2)
    # near identity and near pi, where naive formulas lose precision
    axes = rng.normal(size=(600, 3))
    axes /= np.linalg.norm(axes, axis=1)[:, None]
    tiny = Rotation.from_rotvec(axes[:200] * 10.0 ** rng.uniform(-12, -3, (200, 1)))
    near_pi = Rotation.from_rotvec(axes[200:400] * (np.pi - 10.0 ** rng.uniform(-12, -2, (200, 1))))
    exact_pi = Rotation.from_rotvec(axes[400:] * np.pi)
    return Rotation.concatenate([randoms, tiny, near_pi, exact_pi, Rotation.identity(1)])


def test_quat_to_matrix_and_back(rotations: Rotation) -> None:
    for rot in rotations:
        q = wxyz(rot.as_quat())
        np.testing.assert_allclose(r.quat_to_matrix(q), rot.as_matrix(), atol=1e-14)
        assert same_rotation_quat(r.matrix_to_quat(rot.as_matrix()), q, 1e-12)
        assert r.matrix_to_quat(rot.as_matrix())[0] >= 0.0


def test_rotvec_round_trip(rotations: Rotation) -> None:
    for rot in rotations:
        v_ref = rot.as_rotvec()
        v = r.matrix_to_rotvec(rot.as_matrix())
        angle = np.linalg.norm(v_ref)
        if angle > np.pi - 1e-6:  # at pi, v and -v are the same rotation
            assert min(np.abs(v - v_ref).max(), np.abs(v + v_ref).max()) < 1e-7
        else:
            np.testing.assert_allclose(v, v_ref, atol=1e-12, rtol=1e-9)
        np.testing.assert_allclose(r.rotvec_to_matrix(v_ref), rot.as_matrix(), atol=1e-14)
        assert same_rotation_quat(r.rotvec_to_quat(v_ref), wxyz(rot.as_quat()), 1e-12)


def test_tiny_rotvec_keeps_relative_precision() -> None:
    v = np.array([3e-13, -1e-13, 2e-13])
    np.testing.assert_allclose(r.quat_to_rotvec(r.rotvec_to_quat(v)), v, rtol=1e-12, atol=0)
    np.testing.assert_allclose(r.matrix_to_rotvec(Rotation.from_rotvec(v).as_matrix()), v,
                               rtol=1e-3, atol=1e-16)


def test_euler_xyz_is_scipy_extrinsic_xyz(rotations: Rotation) -> None:
    rng = np.random.default_rng(3)
    angles = rng.uniform(-4, 4, (N, 3))  # outside +-pi too
    for e in angles:
        ref = Rotation.from_euler("xyz", e)
        np.testing.assert_allclose(r.euler_xyz_to_matrix(e), ref.as_matrix(), atol=1e-14)
        assert same_rotation_quat(r.euler_xyz_to_quat(e), wxyz(ref.as_quat()), 1e-14)
    for rot in rotations:
        e = r.matrix_to_euler_xyz(rot.as_matrix())
        np.testing.assert_allclose(r.euler_xyz_to_matrix(e), rot.as_matrix(), atol=1e-9)
        assert abs(e[1]) <= np.pi / 2 + 1e-12
        if abs(abs(e[1]) - np.pi / 2) > 1e-3:  # away from gimbal lock scipy gives the same
            np.testing.assert_allclose(e, rot.as_euler("xyz"), atol=1e-9)


def test_euler_gimbal_lock_still_reproduces_the_rotation() -> None:
    for y in (np.pi / 2, -np.pi / 2):
        for x, z in ((0.3, -1.1), (2.0, 0.4)):
            m = r.euler_xyz_to_matrix([x, y, z])
            np.testing.assert_allclose(r.euler_xyz_to_matrix(r.matrix_to_euler_xyz(m)), m,
                                       atol=1e-12)


def test_intrinsic_xyz_is_scipy_uppercase_xyz() -> None:
    rng = np.random.default_rng(4)
    for a, b, c in rng.uniform(-4, 4, (N, 3)):
        ref = Rotation.from_euler("XYZ", [a, b, c])
        assert same_rotation_quat(r.intrinsic_xyz_to_quat(a, b, c), wxyz(ref.as_quat()), 1e-14)


def test_multiply_conjugate_axis_angle() -> None:
    rng = np.random.default_rng(5)
    ra, rb = Rotation.random(N, random_state=6), Rotation.random(N, random_state=7)
    for a, b in zip(ra, rb, strict=True):
        qa, qb = wxyz(a.as_quat()), wxyz(b.as_quat())
        assert same_rotation_quat(r.quat_multiply(qa, qb), wxyz((a * b).as_quat()), 1e-14)
        assert same_rotation_quat(r.quat_conjugate(qa), wxyz(a.inv().as_quat()), 1e-15)
    for axis, angle in zip(rng.normal(size=(N, 3)), rng.uniform(-7, 7, N), strict=True):
        ref = Rotation.from_rotvec(axis / np.linalg.norm(axis) * angle)
        np.testing.assert_allclose(r.axis_angle_to_matrix(axis, angle), ref.as_matrix(),
                                   atol=1e-14)


def test_bad_quaternion_is_refused() -> None:
    for q in ([0, 0, 0, 0], [np.nan, 0, 0, 1], [np.inf, 0, 0, 0]):
        with pytest.raises(ValueError):
            r.quat_normalize(q)


def test_make_transform() -> None:
    m = r.make_transform(r.euler_xyz_to_matrix([0.1, 0.2, 0.3]), [1, 2, 3])
    np.testing.assert_allclose(m @ [0, 0, 0, 1], [1, 2, 3, 1])
    np.testing.assert_allclose(m[3], [0, 0, 0, 1])


def test_rows_functions_match_the_scalar_ones_and_scipy(rotations: Rotation) -> None:
    """The batched conversions give, row by row, what the scalar ones give (the same
    branch of Shepperd's method, so equal to rounding), and scipy's rotations."""
    mats = rotations.as_matrix()
    quats = r.matrix_to_quat_rows(mats)
    assert quats.shape == (len(mats), 4)
    assert (quats[:, 0] >= 0.0).all()
    for m, q in zip(mats, quats, strict=True):
        np.testing.assert_allclose(q, r.matrix_to_quat(m), atol=1e-15, rtol=0)
    back = r.quat_to_matrix_rows(quats * 3.0)  # not unit: normalised first
    np.testing.assert_allclose(back, mats, atol=1e-12, rtol=0)
    vecs = r.matrix_to_rotvec_rows(mats)
    for m, v in zip(mats[::7], vecs[::7], strict=True):
        np.testing.assert_allclose(v, r.matrix_to_rotvec(m), atol=1e-15, rtol=0)
    sc = rotations.as_rotvec()
    angle = np.linalg.norm(sc, axis=1)
    clear = np.abs(angle - np.pi) > 1e-6  # at pi, v and -v are the same rotation
    np.testing.assert_allclose(vecs[clear], sc[clear], atol=1e-9, rtol=0)
