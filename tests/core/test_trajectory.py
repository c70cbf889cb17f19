"""Keyframes to per-frame targets: frames 0..last, hold before the first, linear per channel."""

from __future__ import annotations

import numpy as np
from dhik.app.formats import parse_targets
from dhik.app.trajectory import interpolate_keyframes, target_matrix
from dhik.model.definition import Keyframe
from scipy.spatial.transform import Rotation


def test_target_matrix_uses_degrees_and_xyz() -> None:
    m = target_matrix([1, 2, 3], [90, 0, 45])
    np.testing.assert_allclose(m[:3, :3], Rotation.from_euler("xyz", [90, 0, 45],
                                                              degrees=True).as_matrix(),
                               atol=1e-15)
    np.testing.assert_array_equal(m[:3, 3], [1, 2, 3])
    np.testing.assert_array_equal(m[3], [0, 0, 0, 1])


def test_spec_example_frames_hold_and_interpolate() -> None:
    keys = parse_targets([
        {"frame": 160, "pos": [1.0, -1.0, 1.0], "euler": [-90.0, 45.0, 0.0]},
        {"frame": 80, "pos": [1.0, 1.0, 1.0], "euler": [90.0, 0.0, 45.0]},
        {"frame": 240, "pos": [2.5, 0.0, 1.0], "euler": [0.0, 0.0, 0.0]},
    ])
    targets = interpolate_keyframes(keys)
    assert [f for f, _ in targets] == list(range(241))
    first = target_matrix([1, 1, 1], [90, 0, 45])
    for f in (0, 40, 80):
        np.testing.assert_allclose(targets[f][1], first, atol=1e-15)
    # frame 120: halfway between 80 and 160, channel by channel (not slerp)
    np.testing.assert_allclose(targets[120][1], target_matrix([1, 0, 1], [0, 22.5, 22.5]),
                               atol=1e-15)
    np.testing.assert_allclose(targets[200][1], target_matrix([1.75, -0.5, 1], [-45, 22.5, 0]),
                               atol=1e-15)
    np.testing.assert_allclose(targets[240][1], target_matrix([2.5, 0, 1], [0, 0, 0]),
                               atol=1e-15)


def test_euler_outside_180_interpolates_the_long_way_as_written() -> None:
    keys = [Keyframe(0, (0, 0, 0), (0, 0, 0)), Keyframe(4, (0, 0, 0), (0, 0, 360))]
    for (_, m), z in zip(interpolate_keyframes(keys), (0, 90, 180, 270, 360), strict=True):
        ref = Rotation.from_euler("z", z, degrees=True).as_matrix()
        np.testing.assert_allclose(m[:3, :3], ref, atol=1e-15)


def test_single_keyframe_at_zero() -> None:
    targets = interpolate_keyframes([Keyframe(0, (1, 2, 3), (10, 20, 30))])
    assert len(targets) == 1 and targets[0][0] == 0
