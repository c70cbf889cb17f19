"""Chain length, driven joints and pole targets (issue 8, points 3-4), no Blender.

References are computed here with numpy on the joint objects: the swivel angle of a
chain's bend point about the first-joint-to-target line and FK of the baked values (the
bend points' Jacobian against finite differences is in tests/core/test_joint_space.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dhik.app.bake import EffectorTrack, simulate
from dhik.app.formats import parse_skeleton
from dhik.errors import DhikError
from dhik.model.compiled import CompiledKinematics
from dhik.model.joint_space import BatchedModel
from dhik.model.skeleton import Skeleton
from dhik.rotations import intrinsic_xyz_to_quat
from dhik.solver.settings import SolverSettings
from fixtures import SPINE_ARM as ARM

TIGHT = SolverSettings(200, 1e-6, 1e-5)

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
    own joint included; here it is fixed, so n=1 moves nothing), in the robust method's
    joint space (the other columns held) and the spec method's compiled model (the other
    joints driven)."""
    model = BatchedModel(parse_skeleton(ARM), ["Hand"], [length])
    assert {name.split(".")[0] for name, held in zip(model.names, model.held, strict=True)
            if not held} == moving
    assert model.chains == [["Root", "Spine", "Shoulder", "Elbow", "Hand"][-length:]]
    spec = CompiledKinematics(arm(), ["Hand"], [length])
    assert {name.split(".")[0] for name in spec.names} == moving
    assert set(spec.driven_names) == {"Spine", "Shoulder", "Elbow"} - moving


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


# ------------------------------------------------------------------- the dhik command


def _files(tmp_path, n: int = 6):
    """skeleton.json, targets.json (Euler in degrees) and a driven animation.json."""
    import json

    from dhik.rotations import matrix_to_euler_xyz

    (tmp_path / "skeleton.json").write_text(json.dumps(ARM))
    keys = [{"frame": f, "pos": list(t[:3, 3]), "euler": list(np.degrees(matrix_to_euler_xyz(
        t[:3, :3])))} for f, t in hand_targets()[:n]]
    (tmp_path / "targets.json").write_text(json.dumps(keys))
    anim = [{"frame": f, "joints": spine(f)} for f in range(n)]
    (tmp_path / "spine.json").write_text(json.dumps({"frames": anim}))
    return [str(tmp_path / name) for name in ("skeleton.json", "targets.json", "spine.json")]


def test_cli_chain_length_pole_and_driven(tmp_path) -> None:
    from dhik.app.cli import main
    from dhik.app.formats import load_animation

    skel, targets, spine_json = _files(tmp_path)
    out = tmp_path / "animation.json"
    # position only (weights 1,0): the 4-DoF arm keeps one free turn for the pole
    assert main(["bake", skel, "--target", f"Hand={targets}:1,0", "-o", str(out),
                 "--chain-length", "Hand=3", "--driven", spine_json,
                 "--pole", "Hand=0.5,-1,1@0.3", "--position-tolerance", "1e-6"]) == 0
    frames = load_animation(out)
    for frame, (_, target) in zip(frames, hand_targets(), strict=False):
        assert frame["joints"]["Spine"] == spine(frame["frame"])["Spine"]
        w = fk_of(frame)
        assert np.linalg.norm(w["Hand"][:3, 3] - target[:3, 3]) < 1e-6
        assert abs(swivel(w, np.array([0.5, -1.0, 1.0]), target, 0.3)) < 1e-3


@pytest.mark.parametrize("extra, message", [
    (["--chain-length", "x"], "--chain-length 'x': must be an integer >= 0"),
    (["--chain-length", "Nope=2"], "'Nope' is not a baked effector"),
    (["--pole", "1,2"], "expected X,Y,Z[@ANGLE]"),
    (["--pole", "1,2,3@nan"], "expected X,Y,Z[@ANGLE]"),
    (["--chain-length", "2", "--pole", "0,1,0"], "a pole needs a chain of 3 joints"),
])
def test_cli_chain_and_pole_faults(tmp_path, capsys, extra: list[str], message: str) -> None:
    from dhik.app.cli import main

    skel, targets, _ = _files(tmp_path, 2)
    out = tmp_path / "animation.json"
    assert main(["bake", skel, targets, "-o", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dhik: error:") and message in err[0]
    assert not out.exists()


def test_driven_values_of_unknown_joints_are_refused(tmp_path, capsys) -> None:
    import json

    from dhik.app.cli import main

    skel, targets, spine_json = _files(tmp_path, 2)
    (tmp_path / "bad.json").write_text(json.dumps(
        {"frames": [{"frame": 0, "joints": {"Knee": {"type": "revolute", "angle": 0.1}}}]}))
    assert main(["bake", skel, targets, "-o", str(tmp_path / "a.json"), "--chain-length", "3",
                 "--driven", str(tmp_path / "bad.json")]) == 2
    assert "no joint 'Knee'" in capsys.readouterr().err


def test_driven_spherical_values_may_come_as_a_quaternion_alone() -> None:
    """A driven ball joint given by its quaternion only (as the add-on reads a bone's
    channel) is baked with its XYZ Euler angles too, the quaternion normalised."""
    targets = hand_targets()[:2]
    q = intrinsic_xyz_to_quat(0.1, 0.2, 0.3)
    driven = [(0, {"Shoulder": {"type": "spherical", "quaternion": list(2.0 * q)}})]
    result = simulate(arm(), [EffectorTrack("Hand", targets, 1.0, 0.0, chain_length=2)],
                      settings=TIGHT, method="robust", driven=driven)
    entry = result.frames[1]["joints"]["Shoulder"]
    assert np.allclose(entry["quaternion"], q, atol=1e-12)
    from scipy.spatial.transform import Rotation

    want = Rotation.from_quat([q[1], q[2], q[3], q[0]]).as_euler("xyz")
    assert np.allclose(entry["euler"], want, atol=1e-9)


@pytest.mark.parametrize("entry, message", [
    ({"type": "spherical", "quaternion": [0.0, 0.0, 0.0, 0.0]}, "non-zero finite"),
    ({"type": "spherical"}, "non-zero finite"),
    ({"type": "spherical", "quaternion": [1.0, math.nan, 0.0, 0.0]}, "non-zero finite"),
])
def test_bad_driven_values_are_one_clear_error(entry: dict, message: str) -> None:
    with pytest.raises(DhikError, match=message):
        simulate(arm(), [EffectorTrack("Hand", hand_targets()[:2], chain_length=2)],
                 method="robust", driven=[(0, {"Shoulder": entry})])


def test_chain_length_and_driven_joints_bake_flip_free() -> None:
    """A chain length with driven joints above it runs the flip-free engine: an arm7 path
    on a turning turntable (driven) bakes with the turntable's values as given, every
    frame on target, and no frame where an arm joint moves more than twice the largest
    per-frame step of the path that made the targets (a frame-by-frame tracker flipped
    on this path)."""
    from fixtures import arm7_on_a_turntable, smooth_path

    defn = parse_skeleton(arm7_on_a_turntable())
    sk = Skeleton(defn)
    arm_joints = [j.name for j in defn.joints if j.type == "revolute" and j.name != "Turntable"]
    chain = len(defn.joints) - 2  # every joint below the turntable
    model = BatchedModel(defn, ["Tool"], [chain])
    assert model.names[0] == "Turntable" and model.held.tolist() == [True] + [False] * 7
    frames = 240
    truth = smooth_path(model.lo[1:], model.hi[1:], frames, 5)
    turn = 0.6 * np.sin(np.linspace(0.0, 2 * math.pi, frames))
    targets = model.transforms(np.column_stack([turn, truth]))[:, 0]
    driven = [(f, {"Turntable": {"type": "revolute", "angle": float(turn[f])}})
              for f in range(frames)]
    track = EffectorTrack("Tool", list(enumerate(targets)), chain_length=chain)
    result = simulate(sk, [track], method="robust", driven=driven)
    assert all(r.converged for r in result.records)
    got = np.array([[fr["joints"][n]["angle"] for n in arm_joints] for fr in result.frames])
    assert [fr["joints"]["Turntable"]["angle"] for fr in result.frames] == turn.tolist()
    # the baked values, posed on the joint objects, reach the targets: within the bake's
    # tolerance, and as far off as its record says (the objects' FK is the engine's)
    for f in (0, 77, frames - 1):
        ref = Skeleton(defn)
        ref.set_joint_values(result.frames[f]["joints"])
        off = np.linalg.norm(ref.world_transforms()["Tool"][:3, 3] - targets[f][:3, 3])
        assert off < SolverSettings().position_tolerance
        assert off == pytest.approx(result.records.errors[f, 0], abs=1e-9)
    true_step = np.abs(np.diff(truth, axis=0)).max()
    steps = np.abs(np.diff(got, axis=0)).max(axis=1)
    assert steps.max() < 2.0 * true_step, (steps.max(), true_step)


def test_two_arms_under_a_driven_turntable_bake_apart_and_flip_free() -> None:
    """Two arm7s on a driven turntable, each with a chain length up to its base: their
    solved joints do not touch, so each arm's path is solved apart (one path through
    both arms' candidates flipped: 78-89 flip frames in 600, largest step 31-44x the
    true one). Both tools on target on every frame, the turntable as given, and no arm
    joint moves more than twice the largest per-frame step of the path that made the
    targets. With chain length 0 the turntable is solved, and the arms are one problem."""
    from dhik.app.parts import coupled as _coupled
    from fixtures import smooth_path, two_arm7s_on_a_turntable

    defn = parse_skeleton(two_arm7s_on_a_turntable())
    chain = (len(defn.joints) - 2) // 2
    assert _coupled(BatchedModel(defn, ["LTool", "RTool"], [chain, chain])) == [[0], [1]]
    assert _coupled(BatchedModel(defn, ["LTool", "RTool"])) == [[0, 1]]
    whole = BatchedModel(defn, ["LTool", "RTool"])
    frames = 600
    truth = smooth_path(whole.lo[1:], whole.hi[1:], frames, 2)
    turn = 0.5 * np.sin(np.linspace(0, 2 * math.pi, frames))
    targets = whole.transforms(np.column_stack([turn, truth]))
    driven = [(f, {"Turntable": {"type": "revolute", "angle": float(turn[f])}})
              for f in range(frames)]
    tracks = [EffectorTrack(name, list(enumerate(targets[:, i])), chain_length=chain)
              for i, name in enumerate(["LTool", "RTool"])]
    result = simulate(Skeleton(defn), tracks, method="robust", driven=driven)
    assert result.converged_count == frames and not result.jumps
    assert [fr["joints"]["Turntable"]["angle"] for fr in result.frames] == turn.tolist()
    got = np.array([[fr["joints"][n]["angle"] for n in whole.names[1:]]
                    for fr in result.frames])
    true_step = np.abs(np.diff(truth, axis=0)).max()
    assert np.abs(np.diff(got, axis=0)).max() < 2.0 * true_step
