"""dhik_addon/key_curves.py without Blender: rotation modes, continuity, key reduction.

The module imports neither bpy nor its package, so it is loaded by path and these tests
also run in the core-only venv (see conftest.py). References are scipy's Rotation
(Blender's Euler "XYZ" is scipy's extrinsic "xyz") and plain numpy interpolation.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

Rotation = pytest.importorskip("scipy.spatial.transform").Rotation

_PATH = Path(__file__).resolve().parents[2] / "dhik_addon" / "key_curves.py"
_spec = importlib.util.spec_from_file_location("dhik_key_curves_standalone", _PATH)
assert _spec is not None and _spec.loader is not None
kc = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = kc
_spec.loader.exec_module(kc)

ORDERS = ["XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"]


def _scipy_quats(rot) -> np.ndarray:
    """scipy (x, y, z, w) -> (w, x, y, z)."""
    q = rot.as_quat()
    return np.column_stack([q[:, 3], q[:, :3]])


def _smooth_rotations(n: int, seed: int) -> np.ndarray:
    """``n`` rotations (3x3) along a smooth, several-turn path (rotation vectors)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, n)[:, None]
    a, b, c = rng.normal(size=(3, 3))
    rotvec = a * np.sin(5 * t) + b * t * 6 + c * np.cos(3 * t)
    return Rotation.from_rotvec(rotvec).as_matrix()


@pytest.mark.parametrize("order", ORDERS)
def test_euler_matrices_follow_blenders_order(order):
    rng = np.random.default_rng(1)
    e = rng.uniform(-4, 4, size=(50, 3))
    # Blender applies the first letter first: extrinsic rotations in that sequence.
    seq = order.lower()
    idx = ["xyz".index(ch) for ch in seq]
    want = Rotation.from_euler(seq, e[:, idx]).as_matrix()
    assert np.allclose(kc.euler_to_matrices(e, order), want, atol=1e-12)


@pytest.mark.parametrize("order", ORDERS)
def test_euler_from_matrices_is_exact_and_continuous(order):
    m = _smooth_rotations(400, seed=ORDERS.index(order))
    e = kc.matrices_to_euler(m, order)
    assert np.allclose(kc.euler_to_matrices(e, order), m, atol=1e-9)
    # The path turns < 0.06 rad a frame. Euler rates grow without bound near gimbal lock
    # (middle angle +-90 deg), elsewhere the angles move by about as much: no 2*pi jumps
    # and no switch to the other Euler branch.
    jumps = np.abs(np.diff(e, axis=0)).max(axis=1)
    middle = np.cos(e[:, "XYZ".index(order[1])])
    away = (np.abs(middle[1:]) > 0.2) & (np.abs(middle[:-1]) > 0.2)
    assert away.sum() > 200
    assert jumps[away].max() < 0.5, jumps[away].max()
    assert jumps.max() < math.pi


def test_euler_unwraps_past_a_full_turn():
    """A turn about Z from 0 to 3.5 turns comes back as the same growing angle."""
    angle = np.linspace(0.0, 7 * math.pi, 300)
    m = Rotation.from_euler("z", angle[:, None]).as_matrix()
    e = kc.matrices_to_euler(m, "XYZ")
    assert np.allclose(e[:, 2], angle, atol=1e-9)
    assert np.allclose(e[:, :2], 0.0, atol=1e-9)


def test_quaternion_signs_and_axis_angle():
    m = _smooth_rotations(300, seed=7)
    q = _scipy_quats(Rotation.from_matrix(m))
    q[::3] *= -1.0  # scrambled signs
    cq = kc.rotation_channel("QUATERNION", q)
    assert (np.einsum("ij,ij->i", cq[1:], cq[:-1]) >= 0).all()
    assert np.allclose(kc.quat_to_matrices(cq), m, atol=1e-9)
    aa = kc.rotation_channel("AXIS_ANGLE", q)
    assert np.allclose(kc.axis_angle_to_matrices(aa), m, atol=1e-9)
    assert np.abs(np.diff(aa, axis=0)).max() < 0.5  # continuous axis and angle


def _continued_row_by_row(q: np.ndarray, start: np.ndarray | None) -> np.ndarray:
    """The definition: each quaternion turned where its dot with the one before (as
    turned) is negative; the first against ``start``."""
    out = np.array(q, dtype=float)
    if start is not None and len(out) and out[0] @ start < 0:
        out[0] = -out[0]
    for i in range(1, len(out)):
        if out[i] @ out[i - 1] < 0.0:
            out[i] = -out[i]
    return out


@pytest.mark.parametrize("seed", range(4))
def test_continuous_quaternions_turn_the_signs_as_row_by_row(seed):
    """The running sign product gives the row-by-row definition's quaternions exactly:
    random signs, a quaternion's opposite next to it, and an exact right angle (a zero
    dot, where a row keeps its own sign), with and without a start."""
    rng = np.random.default_rng(seed)
    for n in (0, 1, 2, 9, 40):
        q = rng.normal(size=(n, 4))
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        if n > 7:
            q[4] = -q[3]
            q[5], q[6] = (0.0, 1.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)  # a zero dot
            q[7] = (-1.0, 0.0, 0.0, 0.0)
        for start in (None, rng.normal(size=4)):
            got = kc.continuous_quaternions(q, start)
            np.testing.assert_array_equal(got, _continued_row_by_row(q, start))


def test_errors_are_rotation_angles_and_distances():
    rng = np.random.default_rng(3)
    a = Rotation.random(20, random_state=4)
    b = Rotation.random(20, random_state=5)
    want = (a.inv() * b).magnitude()
    got = kc.channel_errors("QUATERNION", _scipy_quats(a), _scipy_quats(b))
    assert np.allclose(got, want, atol=1e-9)
    p, r = rng.normal(size=(2, 20, 3))
    assert np.allclose(kc.channel_errors("LOCATION", p, r), np.linalg.norm(p - r, axis=1))
    # tiny turns (float32 keys are off by about 1e-8 rad), either quaternion sign, and
    # rows not normalised: the angle to a few ulps of it, as the matrices give it
    turn = Rotation.from_rotvec(rng.normal(size=(20, 3)) * np.logspace(-12, -2, 20)[:, None])
    c = a * turn
    scale = rng.uniform(0.5, 2.0, size=(20, 1)) * rng.choice([-1.0, 1.0], size=(20, 1))
    got = kc.channel_errors("QUATERNION", _scipy_quats(a), _scipy_quats(c) * scale)
    np.testing.assert_allclose(got, turn.magnitude(), rtol=1e-6, atol=1e-15)
    euler = kc.channel_errors("XYZ", a.as_euler("xyz"), c.as_euler("xyz"))
    np.testing.assert_allclose(euler, turn.magnitude(), rtol=1e-5, atol=1e-15)


def test_stepped_keeps_the_last_frame():
    assert kc.stepped(10, 1) == list(range(10))
    assert kc.stepped(10, 3) == [0, 3, 6, 9]
    assert kc.stepped(11, 3) == [0, 3, 6, 9, 10]
    assert kc.stepped(1, 5) == [0]
    with pytest.raises(ValueError):
        kc.stepped(10, 0)


def _independent_max_error(order_or_kind, frames, values, kept):
    """Max joint error of LINEAR curves through the kept keys (float32), via scipy."""
    kf = frames[kept]
    kv = values[kept].astype(np.float32).astype(float)
    curve = np.column_stack([np.interp(frames, kf, kv[:, c]) for c in range(values.shape[1])])
    if order_or_kind == "LOCATION":
        return float(np.linalg.norm(curve - values, axis=1).max())
    seq = order_or_kind.lower()
    idx = ["xyz".index(ch) for ch in seq]
    got = Rotation.from_euler(seq, curve[:, idx])
    want = Rotation.from_euler(seq, values[:, idx])
    return float((got.inv() * want).magnitude().max())


@pytest.mark.parametrize("kind", ["XYZ", "ZXY", "QUATERNION", "AXIS_ANGLE", "LOCATION"])
def test_reduction_holds_the_bound_and_drops_keys(kind):
    n = 481
    frames = np.arange(10, 10 + n, dtype=float)
    m = _smooth_rotations(n, seed=11)
    if kind == "LOCATION":
        t = np.linspace(0, 1, n)[:, None]
        values = np.hstack([np.sin(4 * t), t ** 2, np.cos(7 * t)]) * 0.3
    else:
        values = kc.rotation_channel(kind, _scipy_quats(Rotation.from_matrix(m)))
    tol = 1e-3
    kept = kc.reduce_keys(kind, frames, values, tol)
    assert kept[0] == 0 and kept[-1] == n - 1 and kept == sorted(set(kept))
    err = kc.max_key_error(kind, frames, values, kept)
    assert err <= tol
    if kind in ("XYZ", "ZXY", "LOCATION"):  # checked independently of the module's math
        assert _independent_max_error(kind, frames, values, kept) <= tol * (1 + 1e-9)
    assert len(kept) < n / 3  # a smooth path needs far fewer keys
    # A tighter bound keeps more keys, a looser one fewer.
    assert len(kc.reduce_keys(kind, frames, values, 1e-4)) > len(kept)
    assert len(kc.reduce_keys(kind, frames, values, 1e-2)) < len(kept)


def test_reduction_off_or_piecewise_linear():
    frames = np.arange(0, 21, dtype=float)
    corner = np.minimum(frames, 12.0)  # piecewise linear with one corner at frame 12
    values = np.column_stack([corner * 0.01, -corner * 0.02, np.zeros_like(corner)])
    assert kc.reduce_keys("LOCATION", frames, values, 0.0) == list(range(21))
    assert kc.reduce_keys("LOCATION", frames, values, 1e-5) == [0, 12, 20]


@pytest.mark.parametrize("kind", ["XYZ", "YZX", "QUATERNION", "AXIS_ANGLE"])
def test_channel_continues_a_given_start(kind):
    """A re-baked range continues the key before it: two and a half turns about X keyed in
    two pieces give the same curve as in one piece."""
    angle = np.linspace(0.0, 5 * math.pi, 200)
    q = _scipy_quats(Rotation.from_rotvec(np.column_stack(
        [angle, 0.2 * np.sin(angle), np.zeros_like(angle)])))
    q[1::2] *= -1.0
    whole = kc.rotation_channel(kind, q)
    head = kc.rotation_channel(kind, q[:121])
    tail = kc.rotation_channel(kind, q[121:], start=head[-1])
    assert np.allclose(np.vstack([head, tail]), whole, atol=1e-9)
    cold = kc.rotation_channel(kind, q[121:])  # without the start: off by turns or sign
    assert not np.allclose(cold, whole[121:], atol=1e-6)


def test_errors_of_several_channels_at_once_equal_each_alone():
    """``max_key_errors`` (a bake's bones in one pass per kind) gives each channel's own
    ``max_key_error``, float for float: channels keyed on every frame (grouped) beside
    reduced ones (alone), of several kinds and lengths."""
    channels = []
    for seed, (kind, n) in enumerate([("QUATERNION", 40), ("XYZ", 25), ("QUATERNION", 33),
                                      ("LOCATION", 40), ("XYZ", 60), ("QUATERNION", 50)]):
        frames = np.arange(n, dtype=float)
        if kind == "LOCATION":
            values = np.random.default_rng(seed).normal(0.0, 0.3, (n, 3)).cumsum(axis=0)
        else:
            quats = _scipy_quats(Rotation.from_matrix(_smooth_rotations(n, seed=seed)))
            values = kc.rotation_channel(kind, quats)
        kept = list(range(n)) if seed % 2 == 0 else kc.reduce_keys(kind, frames, values, 1e-3)
        channels.append((kind, frames, values, kept))
    got = kc.max_key_errors(channels)
    want = [kc.max_key_error(*ch) for ch in channels]
    assert got == want
    assert all(e > 0.0 for e in got[0::2])  # float32 storage: never exactly zero
