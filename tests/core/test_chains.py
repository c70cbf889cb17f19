"""Chain length, driven joints and pole targets (issue 8, points 3-4), no Blender.

References are computed here with numpy on the joint objects: the swivel angle of a
chain's bend point about the first-joint-to-target line, FK of the baked values, and
central finite differences for the joint-position Jacobian.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dhik.app.bake import EffectorTrack, simulate
from dhik.app.formats import parse_skeleton
from dhik.errors import DhikError
from dhik.model.compiled import CompiledKinematics
from dhik.model.skeleton import Skeleton
from dhik.rotations import intrinsic_xyz_to_quat
from dhik.solver.settings import SolverSettings

TIGHT = SolverSettings(200, 1e-6, 1e-5)

# a spine that turns, a ball shoulder, a hinged elbow and a hand: Blender's arm chain
ARM = {"root_name": "Root", "joints": [
    {"name": "Root", "type": "fixed", "offset": [0, 0, 0], "parent": None},
    {"name": "Spine", "type": "revolute", "offset": [0, 0, 0.5], "parent": "Root",
     "axis": [0, 0, 1]},
    {"name": "Shoulder", "type": "spherical", "offset": [0.2, 0, 0.5], "parent": "Spine"},
    {"name": "Elbow", "type": "revolute", "offset": [0.3, 0, 0], "parent": "Shoulder",
     "axis": [0, 0, 1], "limits": [0.05, 2.5]},
    {"name": "Hand", "type": "fixed", "offset": [0.3, 0, 0], "parent": "Elbow"},
]}
FRAMES = range(25)


def arm() -> Skeleton:
    return Skeleton(parse_skeleton(ARM))


def spine(f: int) -> dict:
    return {"Spine": {"type": "revolute", "angle": 0.03 * f - 0.2}}


def hand_targets() -> list[tuple[int, np.ndarray]]:
    """FK of an arm motion on top of the animated spine (reachable by the arm alone)."""
    ref = arm()
    out = []
    for f in FRAMES:
        ref.set_joint_values({**spine(f), "Shoulder": {
            "type": "spherical", "quaternion": list(intrinsic_xyz_to_quat(0.1, 0.2 + 0.01 * f,
                                                                          0.3))},
            "Elbow": {"type": "revolute", "angle": 0.8 + 0.01 * f}})
        out.append((f, ref.world_transforms()["Hand"].copy()))
    return out


def fk_of(frame: dict) -> dict[str, np.ndarray]:
    sk = arm()
    sk.set_joint_values(frame["joints"])
    return sk.world_transforms()


def swivel(w: dict[str, np.ndarray], pole: np.ndarray, target: np.ndarray,
           angle: float = 0.0) -> float:
    """Signed angle (rad) from the elbow's direction to the pole's (turned by ``angle``)
    about the shoulder-to-target line."""
    r0 = w["Shoulder"][:3, 3]
    u = target[:3, 3] - r0
    u /= np.linalg.norm(u)
    b = w["Elbow"][:3, 3] - r0
    b -= (b @ u) * u
    p = pole - r0
    p -= (p @ u) * u
    p = p * math.cos(angle) + np.cross(u, p) * math.sin(angle)
    return math.atan2(u @ np.cross(b, p), b @ p)


def test_driven_spine_keeps_its_animation_and_the_arm_reaches() -> None:
    targets = hand_targets()
    driven = [(f, spine(f)) for f in FRAMES]
    result = simulate(arm(), [EffectorTrack("Hand", targets, 1.0, 0.0, chain_length=3)],
                      settings=TIGHT, method="robust", driven=driven)
    assert all(r.converged for r in result.records)
    for frame, (_, target) in zip(result.frames, targets, strict=True):
        assert frame["joints"]["Spine"]["angle"] == spine(frame["frame"])["Spine"]["angle"]
        w = fk_of(frame)  # the baked values, posed on fresh joint objects
        assert np.linalg.norm(w["Hand"][:3, 3] - target[:3, 3]) < 1e-6


def test_without_a_chain_length_the_spine_is_solved_too() -> None:
    """Chain length 0 (up to the root) moves the spine; driven values then do not apply."""
    targets = hand_targets()
    result = simulate(arm(), [EffectorTrack("Hand", targets, 1.0, 0.0)], settings=TIGHT,
                      method="robust", driven=[(f, spine(f)) for f in FRAMES])
    assert all(r.converged for r in result.records)
    spines = [fr["joints"]["Spine"]["angle"] for fr in result.frames]
    assert spines != [spine(f)["Spine"]["angle"] for f in FRAMES]


@pytest.mark.parametrize("length, moving", [(1, set()), (2, {"Elbow"}),
                                            (3, {"Elbow", "Shoulder"})])
def test_chain_length_counts_joints_from_the_effector(length: int, moving: set[str]) -> None:
    """As Blender counts bones: n = the n joints ending at the effector (the effector's
    own joint included; here it is fixed, so n=1 moves nothing)."""
    model = CompiledKinematics(arm(), ["Hand"], [length])
    assert {name for name, _ in model.column_joint} == moving
    assert model.chains == [["Root", "Spine", "Shoulder", "Elbow", "Hand"][-length:]]
    assert set(model.driven_names) == {"Spine", "Shoulder", "Elbow"} - moving


def test_joints_outside_the_chain_hold_without_driven_values() -> None:
    targets = hand_targets()[:3]
    result = simulate(arm(), [EffectorTrack("Hand", targets, 1.0, 0.0, chain_length=2)],
                      settings=TIGHT, method="robust")
    for frame in result.frames:  # only the elbow moves: spine and shoulder keep the T-pose
        assert frame["joints"]["Spine"]["angle"] == 0.0
        assert frame["joints"]["Shoulder"]["quaternion"] == [1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("pole_y, angle", [(1.0, 0.0), (-1.0, 0.0), (1.0, math.pi / 2)])
def test_the_chain_bends_toward_the_pole(pole_y: float, angle: float) -> None:
    targets = hand_targets()[:10]
    pole = np.array([0.5, pole_y, 1.0])
    track = EffectorTrack("Hand", targets, 1.0, 0.0, chain_length=3,
                          pole=[(0, tuple(pole))], pole_angle=angle)
    result = simulate(arm(), [track], settings=TIGHT, method="robust",
                      driven=[(f, spine(f)) for f in FRAMES])
    assert all(r.converged for r in result.records)
    for frame, (_, target) in zip(result.frames, targets, strict=True):
        w = fk_of(frame)
        assert np.linalg.norm(w["Hand"][:3, 3] - target[:3, 3]) < 1e-6  # targets first
        assert abs(swivel(w, pole, target, angle)) < 1e-3


def test_opposite_poles_bend_the_elbow_to_opposite_sides() -> None:
    target = hand_targets()[:1]
    sides = []
    for pole_y in (1.0, -1.0):
        pole = np.array([0.4, pole_y, 1.0])
        result = simulate(arm(), [EffectorTrack("Hand", target, 1.0, 0.0, chain_length=3,
                                                pole=[(0, tuple(pole))])],
                          settings=TIGHT, method="robust")
        w = fk_of(result.frames[0])
        r0, t = w["Shoulder"][:3, 3], target[0][1][:3, 3]
        normal = np.cross(t - r0, [0.0, 0.0, 1.0])  # which side of the vertical plane
        sides.append(np.sign(normal @ (w["Elbow"][:3, 3] - r0)))
    assert sides[0] == -sides[1] != 0


def test_pole_faults_are_one_clear_error() -> None:
    targets = hand_targets()[:2]
    with pytest.raises(DhikError, match="a pole needs a chain of 3 joints"):
        simulate(arm(), [EffectorTrack("Hand", targets, chain_length=2,
                                       pole=[(0, (0.0, 1.0, 0.0))])], method="robust")
    with pytest.raises(DhikError, match="pole targets need --method robust"):
        simulate(arm(), [EffectorTrack("Hand", targets, pole=[(0, (0.0, 1.0, 0.0))])],
                 method="spec")
    with pytest.raises(DhikError, match="3 finite numbers"):
        simulate(arm(), [EffectorTrack("Hand", targets, pole=[(0, (0.0, math.nan, 0.0))])],
                 method="robust")
    with pytest.raises(DhikError, match="chain length must be an integer >= 0"):
        simulate(arm(), [EffectorTrack("Hand", targets, chain_length=-1)], method="robust")


def test_point_columns_are_the_joint_position_derivatives() -> None:
    """Central finite differences of ``joint_position`` against ``point_columns``."""
    sk = arm()
    sk.set_joint_values({**spine(3), "Shoulder": {"type": "spherical", "quaternion": list(
        intrinsic_xyz_to_quat(0.3, -0.2, 0.5))}, "Elbow": {"type": "revolute", "angle": 1.1}})
    model = CompiledKinematics(sk, ["Hand"])
    model.update()
    h = 1e-6
    for name in ("Shoulder", "Elbow", "Hand"):
        cols = model.point_columns(name)
        for c in range(model.n):
            state = model.save()
            model.q[c] += h
            model.touch()
            model.update()
            plus = np.array(model.joint_position(name))
            model.restore(state)
            model.q[c] -= h
            model.touch()
            model.update()
            minus = np.array(model.joint_position(name))
            model.restore(state)
            model.update()
            assert np.allclose((plus - minus) / (2 * h), cols[c], atol=1e-7), (name, c)
