"""FK against the hand-computed examples of fk-chain-notes.md and bone-hierarchy-notes.md.

The notes' 2-D chains are embedded in 3-D: the plane is XY, joints turn about Z.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dhik.app.formats import parse_skeleton
from dhik.model.skeleton import Skeleton
from dhik.solver.joints import FixedJoint, RevoluteJoint

SQ3 = math.sqrt(3.0)


def planar_arm(upper: float = 1.0, fore: float = 1.0, axis=(0, 0, 1)) -> Skeleton:
    """Shoulder at the root, bones along +Y at rest (fk-chain-notes.md)."""
    return Skeleton(parse_skeleton({
        "root_name": "Root",
        "joints": [
            {"name": "Root", "type": "fixed", "offset": [0, 0, 0], "parent": None},
            {"name": "Shoulder", "type": "revolute", "offset": [0, 0, 0], "parent": "Root",
             "axis": list(axis)},
            {"name": "Elbow", "type": "revolute", "offset": [0, upper, 0],
             "parent": "Shoulder", "axis": list(axis)},
            {"name": "Hand", "type": "fixed", "offset": [0, fore, 0], "parent": "Elbow"},
        ],
    }))


def pose(sk: Skeleton, a_deg: float, b_deg: float) -> dict[str, np.ndarray]:
    sk.set_joint_values({"Shoulder": {"type": "revolute", "angle": math.radians(a_deg)},
                         "Elbow": {"type": "revolute", "angle": math.radians(b_deg)}})
    return {n: m[:3, 3] for n, m in sk.world_transforms().items()}


def test_shoulder_0_elbow_90() -> None:
    p = pose(planar_arm(), 0, 90)
    np.testing.assert_allclose(p["Elbow"], [0, 1, 0], atol=1e-15)
    np.testing.assert_allclose(p["Hand"], [-1, 1, 0], atol=1e-15)


def test_shoulder_30_elbow_60() -> None:
    sk = planar_arm()
    p = pose(sk, 30, 60)
    np.testing.assert_allclose(p["Elbow"], [-0.5, SQ3 / 2, 0], atol=1e-15)
    np.testing.assert_allclose(p["Hand"], [-1.5, SQ3 / 2, 0], atol=1e-15)
    # the elbow's world rotation is R(90 deg): the local 60 deg is not a world angle
    np.testing.assert_allclose(sk.joints["Elbow"].global_transform[:3, :3],
                               [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-15)


def test_general_two_link_formula() -> None:
    rng = np.random.default_rng(0)
    for l1, l2, a, b in rng.uniform([0.2, 0.2, -3, -3], [2, 2, 3, 3], (50, 4)):
        p = pose(planar_arm(l1, l2), math.degrees(a), math.degrees(b))
        elbow = [-l1 * math.sin(a), l1 * math.cos(a), 0]
        hand = [elbow[0] - l2 * math.sin(a + b), elbow[1] + l2 * math.cos(a + b), 0]
        np.testing.assert_allclose(p["Elbow"], elbow, atol=1e-14)
        np.testing.assert_allclose(p["Hand"], hand, atol=1e-14)


def test_exercise_forearm_2_and_moved_shoulder() -> None:
    p = pose(planar_arm(1.0, 2.0), 30, 60)
    np.testing.assert_allclose(p["Hand"], [-2.5, SQ3 / 2, 0], atol=1e-15)
    sk = Skeleton(parse_skeleton({
        "root_name": "Root",
        "joints": [
            {"name": "Root", "type": "fixed", "offset": [2, -1, 0], "parent": None},
            {"name": "Shoulder", "type": "revolute", "offset": [0, 0, 0], "parent": "Root",
             "axis": [0, 0, 1]},
            {"name": "Elbow", "type": "revolute", "offset": [0, 1, 0], "parent": "Shoulder",
             "axis": [0, 0, 1]},
            {"name": "Hand", "type": "fixed", "offset": [0, 2, 0], "parent": "Elbow"},
        ],
    }))
    np.testing.assert_allclose(pose(sk, 30, 60)["Hand"], [-0.5, SQ3 / 2 - 1, 0], atol=1e-15)


def test_bone_hierarchy_screen_example() -> None:
    """Root (180, 260), upper arm 155 at 25 deg, forearm 125 at +40 deg local.

    The notes use screen coordinates (y down): ``y_screen = -y``, so the notes' angles,
    which lower y_screen, are counter-clockwise turns about +Z; bones lie along +X at rest.
    """
    sk = Skeleton(parse_skeleton({
        "root_name": "Root",
        "joints": [
            {"name": "Root", "type": "fixed", "offset": [180, -260, 0], "parent": None},
            {"name": "Upper", "type": "revolute", "offset": [0, 0, 0], "parent": "Root",
             "axis": [0, 0, 1]},
            {"name": "Fore", "type": "revolute", "offset": [155, 0, 0], "parent": "Upper",
             "axis": [0, 0, 1]},
            {"name": "Hand", "type": "fixed", "offset": [125, 0, 0], "parent": "Fore"},
        ],
    }))
    sk.set_joint_values({"Upper": {"type": "revolute", "angle": math.radians(25)},
                         "Fore": {"type": "revolute", "angle": math.radians(40)}})
    screen = {n: (m[0, 3], -m[1, 3]) for n, m in sk.world_transforms().items()}
    np.testing.assert_allclose(screen["Fore"], (320.48, 194.49), atol=0.005)
    # the notes add rounded values (320.48 + 52.83, 194.49 - 113.29): 0.01 tolerance
    np.testing.assert_allclose(screen["Hand"], (373.31, 81.20), atol=0.01)


# --- the invariant table of bone-hierarchy-notes.md section 6 -------------------------

@pytest.fixture
def arm() -> Skeleton:
    return planar_arm(1.3, 0.7)


def test_identity_pose_keeps_rest_offsets(arm: Skeleton) -> None:
    arm.reset()
    p = {n: m[:3, 3] for n, m in arm.world_transforms().items()}
    np.testing.assert_array_equal(p["Elbow"], [0, 1.3, 0])
    np.testing.assert_array_equal(p["Hand"], [0, 2.0, 0])
    for m in arm.world_transforms().values():
        np.testing.assert_array_equal(m[:3, :3], np.eye(3))


def test_moving_only_the_root_moves_every_descendant_alike(arm: Skeleton) -> None:
    before = {n: m[:3, 3].copy() for n, m in arm.world_transforms().items()}
    arm.root.local_offset = np.array([20.0, -10.0, 0.0])
    arm.update()
    for name, m in arm.world_transforms().items():
        np.testing.assert_allclose(m[:3, 3], before[name] + [20, -10, 0], atol=1e-14)


def test_rotating_only_the_parent(arm: Skeleton) -> None:
    p = pose(arm, 30, 0)
    child = arm.joints["Elbow"].global_transform[:3, :3]
    assert math.isclose(math.degrees(math.atan2(child[1, 0], child[0, 0])), 30.0)
    assert math.isclose(np.linalg.norm(p["Hand"] - p["Elbow"]), 0.7)


def test_a_joint_turning_does_not_move_its_own_origin(arm: Skeleton) -> None:
    for b in (0, 45, 170):
        assert np.allclose(pose(arm, 10, b)["Elbow"], pose(arm, 10, 0)["Elbow"], atol=1e-15)


def test_lengths_and_determinants_are_preserved(arm: Skeleton) -> None:
    rng = np.random.default_rng(1)
    for a, b in rng.uniform(-180, 180, (100, 2)):
        p = pose(arm, a, b)
        assert math.isclose(np.linalg.norm(p["Elbow"] - p["Shoulder"]), 1.3, abs_tol=1e-14)
        assert math.isclose(np.linalg.norm(p["Hand"] - p["Elbow"]), 0.7, abs_tol=1e-14)
        for m in arm.world_transforms().values():
            assert math.isclose(np.linalg.det(m[:3, :3]), 1.0, abs_tol=1e-14)


def test_terminal_rotation_changes_orientation_not_position() -> None:
    root = FixedJoint("Root")
    hand = RevoluteJoint("Hand", [0, 1, 0], [0, 0, 1])
    root.add_child(hand)
    root.update_global_transform()
    p0, r0 = hand.global_transform[:3, 3].copy(), hand.global_transform[:3, :3].copy()
    hand.q = 0.8
    root.update_global_transform()
    np.testing.assert_array_equal(hand.global_transform[:3, 3], p0)
    assert not np.allclose(hand.global_transform[:3, :3], r0)


def test_fixed_joint_rotation_first_then_offset() -> None:
    """DECISIONS: a fixed joint's local transform is its quaternion, then its offset."""
    root = FixedJoint("Root")
    s = math.sqrt(0.5)
    bend = FixedJoint("Bend", [0, 0, 1], [s, 0, 0, s])  # 90 deg about Z
    tip = FixedJoint("Tip", [1, 0, 0])
    root.add_child(bend)
    bend.add_child(tip)
    root.update_global_transform()
    np.testing.assert_allclose(bend.global_transform[:3, 3], [0, 0, 1], atol=1e-15)
    np.testing.assert_allclose(tip.global_transform[:3, 3], [0, 1, 1], atol=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_values_set_before_the_joints_are_built_pose_them_alike(seed: int) -> None:
    """The joint objects are built on first use: values set (and a reset) before that
    pose them as on built ones; the T-pose's transforms and entries come from the
    definition alone, equal to the objects' after a reset. A tree of every joint type."""
    from fixtures import random_tree
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(seed)
    defn, _ = random_tree(rng)
    built = Skeleton(defn)
    built.reset()
    tpose = {n: m.copy() for n, m in built.world_transforms().items()}
    rest = Skeleton(defn).rest_transforms()
    assert rest.keys() == tpose.keys()
    for name, m in tpose.items():
        np.testing.assert_allclose(rest[name], m, rtol=0, atol=1e-12)
    assert Skeleton(defn).tpose_values() == built.joint_values()
    values = {}
    for d in defn.joints:
        if d.type == "spherical":
            q = Rotation.random(random_state=seed).as_quat(scalar_first=True) * 3.0
            values[d.name] = {"type": "spherical", "quaternion": [float(c) for c in q]}
        elif d.type in ("revolute", "prismatic"):
            key = "angle" if d.type == "revolute" else "displacement"
            values[d.name] = {"type": d.type, key: float(rng.uniform(-1, 1))}
    lazy = Skeleton(defn)
    lazy.set_joint_values({"J1": {"type": "revolute", "angle": 2.0}})
    lazy.reset(fk=False)  # forgets it
    lazy.set_joint_values(values)
    assert lazy._joints is None  # nothing built yet
    built.set_joint_values(values)
    assert lazy.joint_values() == built.joint_values()
    for name, m in built.world_transforms().items():
        np.testing.assert_allclose(lazy.world_transforms()[name], m, rtol=0, atol=1e-12)
    with pytest.raises(Exception, match="no joint named 'nope'"):
        Skeleton(defn).set_joint_values({"nope": {"type": "revolute", "angle": 0.0}})
