"""Several effectors in one solve (issue 5): stacked rows, weights, tracks, the CLI form.

Targets come from the FK of joint values within the limits, so they are reachable together.
Frames: world; metres, radians (degrees only in targets.json).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dhik.app.bake import EffectorTrack, merge_tracks, simulate, summary_line
from dhik.app.cli import main
from dhik.app.formats import load_animation, parse_skeleton
from dhik.model.joint_space import BatchedModel
from dhik.model.skeleton import Skeleton
from dhik.rotations import matrix_to_euler_xyz
from dhik.solver.dls import pose_error
from dhik.solver.lm import solve_many, solve_one
from dhik.solver.settings import SolverSettings

TIGHT = SolverSettings(position_tolerance=1e-5, orientation_tolerance=1e-4)


def arm(side: str, y: float) -> list[dict[str, Any]]:
    """Spherical shoulder, revolute elbow, spherical wrist, hand: 7 DoF."""
    return [
        {"name": f"{side}Shoulder", "type": "spherical", "offset": [0, y, 0.4],
         "parent": "Torso", "limits": [[-2.0, 2.0], [-1.5, 1.5], [-2.0, 2.0]]},
        {"name": f"{side}Elbow", "type": "revolute", "offset": [0, 0, 0.35],
         "parent": f"{side}Shoulder", "axis": [1, 0, 0], "limits": [-2.5, 0.0]},
        {"name": f"{side}Wrist", "type": "spherical", "offset": [0, 0, 0.3],
         "parent": f"{side}Elbow", "limits": [[-1.2, 1.2], None, [-1.2, 1.2]]},
        {"name": f"{side}Hand", "type": "fixed", "offset": [0, 0, 0.1],
         "parent": f"{side}Wrist"},
    ]


TWO_ARMS = {
    "root_name": "Root",
    "joints": [
        {"name": "Root", "type": "fixed", "parent": None},
        {"name": "Torso", "type": "revolute", "offset": [0, 0, 1.0], "parent": "Root",
         "axis": [0, 0, 1], "limits": [-1.0, 1.0]},
        *arm("L", 0.2),
        *arm("R", -0.2),
    ],
}


def two_arms() -> Skeleton:
    return Skeleton(parse_skeleton(TWO_ARMS))


def random_pose(sk: Skeleton, rng: np.random.Generator, spread: float = 0.6) -> None:
    """Pose every joint at ``spread`` times a uniform draw within its limits."""
    values: dict[str, dict[str, Any]] = {"Torso": {"type": "revolute",
                                                    "angle": spread * rng.uniform(-1, 1)}}
    for side in "LR":
        values[f"{side}Elbow"] = {"type": "revolute", "angle": float(rng.uniform(-2.3, -0.3))}
        for name in (f"{side}Shoulder", f"{side}Wrist"):
            axis = rng.normal(size=3)
            angle = spread * rng.uniform(0, 1.0)
            half = angle / 2
            quat = [math.cos(half), *(math.sin(half) * axis / np.linalg.norm(axis))]
            values[name] = {"type": "spherical", "quaternion": quat}
    sk.set_joint_values(values)


def hands(sk: Skeleton) -> list[np.ndarray]:
    return [sk.joints["LHand"].global_transform.copy(), sk.joints["RHand"].global_transform.copy()]


def test_two_arms_reach_two_targets_at_once() -> None:
    """The shared torso is one column; both hands reach their targets together (cold, as
    a batch), re-checked on the joint objects, and each effector's errors are the
    objects'."""
    rng = np.random.default_rng(4)
    ref = two_arms()
    model = BatchedModel(parse_skeleton(TWO_ARMS), ["LHand", "RHand"])
    assert model.names.count("Torso") == 1  # the shared joint is one column
    assert model.n == 1 + 2 * 7
    targets = []
    for _ in range(6):
        random_pose(ref, rng)
        targets.append(hands(ref))
    res = solve_many(model, np.array(targets), settings=TIGHT)
    assert res.converged.all()
    sk = two_arms()
    for row, target, pe, oe in zip(res.q, targets, res.position_error, res.orientation_error,
                                   strict=True):
        sk.reset()
        sk.set_joint_values(model.joint_values(row))
        for k, name in enumerate(("LHand", "RHand")):
            dp, dr = pose_error(sk.joints[name], target[k])  # re-checked on the joint objects
            assert np.linalg.norm(dp) < 1e-5 and np.linalg.norm(dr) < 1e-4
            assert pe[k] == pytest.approx(np.linalg.norm(dp), abs=1e-12)
            assert oe[k] == pytest.approx(np.linalg.norm(dr), abs=1e-12)


def test_the_torso_moves_when_one_arm_alone_cannot_reach() -> None:
    ref = two_arms()
    ref.set_joint_values({"Torso": {"type": "revolute", "angle": 0.9}})
    targets = hands(ref)  # both hands carried round by the torso
    model = BatchedModel(parse_skeleton(TWO_ARMS), ["LHand", "RHand"])
    res = solve_one(model, np.array(targets), np.zeros(model.n), settings=TIGHT)
    assert res.converged[0]
    assert abs(res.q[0, model.names.index("Torso")]) > 0.1


def test_position_only_target_ignores_orientation() -> None:
    """A 3-DoF arm reaches a position with any hand orientation asked for."""
    planar = {
        "root_name": "Base",
        "joints": [
            {"name": "Base", "type": "fixed", "parent": None},
            {"name": "Yaw", "type": "revolute", "offset": [0, 0, 0.3], "parent": "Base",
             "axis": [0, 0, 1], "limits": [-3, 3]},
            {"name": "Pitch", "type": "revolute", "offset": [0, 0, 0], "parent": "Yaw",
             "axis": [0, 1, 0], "limits": [-2, 2]},
            {"name": "Elbow", "type": "revolute", "offset": [0, 0, 0.5], "parent": "Pitch",
             "axis": [0, 1, 0], "limits": [-2.5, 2.5]},
            {"name": "Tip", "type": "fixed", "offset": [0, 0, 0.4], "parent": "Elbow"},
        ],
    }
    goal = np.array([0.3, 0.2, 0.6])
    model = BatchedModel(parse_skeleton(planar), ["Tip"])
    joints = []
    for euler in ([0, 0, 0], [1.0, -0.5, 2.0], [3.0, 1.0, -1.0]):
        target = np.eye(4)
        target[:3, :3] = _rot(euler)
        target[:3, 3] = goal
        res = solve_one(model, target, np.zeros(model.n), [(1.0, 0.0)], TIGHT)
        assert res.converged[0] and res.position_error[0, 0] < 1e-5
        assert res.orientation_error[0, 0] > 0.1  # not counted: the hand is not turned
        joints.append(res.q[0])
        full = solve_one(model, target, np.zeros(model.n), settings=TIGHT)
        assert not full.converged[0]  # 3 DoF: not the full pose
    # the orientation asked for does not steer the position-only solve at all
    np.testing.assert_array_equal(joints[0], joints[1])
    np.testing.assert_array_equal(joints[0], joints[2])


def _rot(euler: list[float]) -> np.ndarray:
    x, y, z = euler
    cx, sx, cy, sy, cz, sz = math.cos(x), math.sin(x), math.cos(y), math.sin(y), math.cos(z), \
        math.sin(z)
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx


# ---------------------------------------------------------------------- bake.simulate


def arm_tracks(frames_l: int, frames_r: int) -> tuple[list, list]:
    """Per-frame targets of both hands along a smooth joint motion (world 4x4)."""
    sk = two_arms()
    left, right = [], []
    for f in range(max(frames_l, frames_r)):
        a = f / 40
        sk.set_joint_values({
            "Torso": {"type": "revolute", "angle": 0.3 * math.sin(a)},
            "LElbow": {"type": "revolute", "angle": -1.2 + 0.4 * math.sin(2 * a)},
            "RElbow": {"type": "revolute", "angle": -1.0 - 0.3 * math.cos(a)},
            "LShoulder": {"type": "spherical", "quaternion": [1, 0.2 * math.sin(a), 0.1, 0]},
            "RShoulder": {"type": "spherical", "quaternion": [1, -0.1, 0.2 * math.cos(a), 0]},
        })
        left.append((f, sk.joints["LHand"].global_transform.copy()))
        right.append((f, sk.joints["RHand"].global_transform.copy()))
    return left[:frames_l], right[:frames_r]


def test_simulate_several_tracks_merges_frames_and_records_each_effector() -> None:
    left, right = arm_tracks(30, 12)
    tracks = [EffectorTrack("LHand", left), EffectorTrack("RHand", right, 1.0, 0.0)]
    result = simulate(two_arms(), tracks, settings=TIGHT, method="robust")
    assert result.method == "robust" and result.effectors == ["LHand", "RHand"]
    assert [r.frame for r in result.records] == list(range(30))  # union of the frames
    assert result.converged_count == 30
    check = two_arms()
    for rec, fr in zip(result.records, result.frames, strict=True):
        check.set_joint_values(fr["joints"])
        r_target = right[min(rec.frame, 11)][1]  # the right hand holds its last target
        dp_l, dr_l = pose_error(check.joints["LHand"], left[rec.frame][1])
        dp_r, dr_r = pose_error(check.joints["RHand"], r_target)
        errs = rec.effector_errors
        assert errs["LHand"]["position_error"] == pytest.approx(np.linalg.norm(dp_l), abs=1e-9)
        assert errs["RHand"]["position_error"] == pytest.approx(np.linalg.norm(dp_r), abs=1e-9)
        assert errs["RHand"]["orientation_error"] == pytest.approx(np.linalg.norm(dr_r),
                                                                   abs=1e-9)
        assert rec.position_error == max(errs["LHand"]["position_error"],
                                         errs["RHand"]["position_error"])
        assert rec.orientation_error == errs["LHand"]["orientation_error"]  # R: not counted
        assert np.linalg.norm(dp_r) < 1e-5
    line = summary_line(result)
    assert "effectors LHand,RHand" in line and "method robust" in line
    report = result.report()
    assert report["effectors"] == ["LHand", "RHand"]
    assert set(report["records"][0]["effector_errors"]) == {"LHand", "RHand"}


def test_merge_tracks_holds_first_and_last_targets() -> None:
    a = [(2, "a2"), (3, "a3")]
    b = [(0, "b0"), (1, "b1"), (5, "b5")]
    numbers, per_frame = merge_tracks([EffectorTrack("A", a), EffectorTrack("B", b)])
    assert numbers == [0, 1, 2, 3, 5]
    assert per_frame == [["a2", "b0"], ["a2", "b1"], ["a2", "b1"], ["a3", "b1"],
                         ["a3", "b5"]]


def test_single_effector_call_still_works_and_bad_tracks_are_refused() -> None:
    left, _ = arm_tracks(3, 3)
    sk = two_arms()
    one = simulate(sk, left, "LHand", TIGHT, method="robust")
    assert one.effector == "LHand" and one.effectors == ["LHand"]
    assert one.records[0].effector_errors.keys() == {"LHand"}
    from dhik.errors import DhikError

    with pytest.raises(DhikError, match="two target tracks"):
        simulate(sk, [EffectorTrack("LHand", left), EffectorTrack("LHand", left)])
    with pytest.raises(DhikError, match="no joint named"):
        simulate(sk, [EffectorTrack("Nope", left)], method="robust")
    with pytest.raises(DhikError, match="weights"):
        simulate(sk, [EffectorTrack("LHand", left, 0.0, 0.0)], method="robust")
    with pytest.raises(DhikError, match="need --method robust"):
        simulate(sk, [EffectorTrack("LHand", left, 1.0, 0.0)], method="spec")
    with pytest.raises(DhikError, match="unknown method"):
        simulate(sk, left, "LHand", method="fancy")


# ----------------------------------------------------------------------------- the CLI


def write_targets(path: Path, track: list[tuple[int, np.ndarray]]) -> None:
    keys = [{"frame": f, "pos": [float(v) for v in m[:3, 3]],
             "euler": [float(v) for v in np.degrees(matrix_to_euler_xyz(m[:3, :3]))]}
            for f, m in track]
    path.write_text(json.dumps(keys))


@pytest.fixture
def scene(tmp_path: Path) -> Path:
    left, right = arm_tracks(25, 10)
    (tmp_path / "skeleton.json").write_text(json.dumps(TWO_ARMS))
    write_targets(tmp_path / "left.json", left)
    write_targets(tmp_path / "right.json", right)
    return tmp_path


def test_cli_target_form_end_to_end(scene: Path, capsys) -> None:
    out, report = scene / "animation.json", scene / "report.json"
    code = main(["bake", str(scene / "skeleton.json"), "--target",
                 f"LHand={scene / 'left.json'}", "--target",
                 f"RHand={scene / 'right.json'}:1,0", "-o", str(out), "--report", str(report),
                 "--position-tolerance", "1e-5", "--orientation-tolerance", "1e-4"])
    stdout, stderr = capsys.readouterr()
    assert code == 0 and stderr == ""
    assert stdout.count("\n") == 1 and "25/25 converged" in stdout
    assert "effectors LHand,RHand" in stdout and "method robust" in stdout
    frames = load_animation(out)
    assert [f["frame"] for f in frames] == list(range(25))
    rep = json.loads(report.read_text())
    assert rep["method"] == "robust" and rep["effectors"] == ["LHand", "RHand"]
    assert all(r["effector_errors"]["RHand"]["position_error"] < 1e-5 for r in rep["records"])
    code = main(["bake", str(scene / "skeleton.json"), "--target",
                 f"LHand={scene / 'left.json'}", "-o", str(out), "--method", "spec"])
    stdout, _ = capsys.readouterr()
    assert code == 0 and "method spec" in stdout and "effector LHand" in stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bake", "{s}", "-o", "{o}"], "bake needs TARGETS or at least one --target"),
        (["bake", "{s}", "{l}", "--target", "LHand={l}", "-o", "{o}"], "not both"),
        (["bake", "{s}", "--target", "LHand", "-o", "{o}"], "argument --target: expected"),
        (["bake", "{s}", "--target", "={l}", "-o", "{o}"], "argument --target: expected"),
        (["bake", "{s}", "--target", "LHand={l}:1,x", "-o", "{o}"], "weights must be numbers"),
        (["bake", "{s}", "--target", "LHand={l}:0,0", "-o", "{o}"], "not both 0"),
        (["bake", "{s}", "--target", "LHand={l}:-1,1", "-o", "{o}"], "must be >= 0"),
        (["bake", "{s}", "--target", "Nope={l}", "-o", "{o}"], "no joint named 'Nope'"),
        (["bake", "{s}", "--target", "LHand={l}", "--target", "LHand={r}", "-o", "{o}"],
         "two target tracks"),
        (["bake", "{s}", "--target", "LHand=missing.json", "-o", "{o}"], "missing.json"),
        (["bake", "{s}", "--target", "LHand={l}", "--effector", "LHand", "-o", "{o}"],
         "--effector goes with TARGETS"),
        (["bake", "{s}", "--target", "LHand={l}:1,0", "--method", "spec", "-o", "{o}"],
         "need --method robust"),
        (["bake", "{s}", "{l}", "--effector", "LHand", "--method", "fast", "-o", "{o}"],
         "argument --method: invalid choice"),
    ],
)
def test_cli_target_bad_input_one_line_exit_2(argv, message, scene: Path, capsys) -> None:
    o = scene / "out.json"
    o.write_text("precious")
    names = {"s": scene / "skeleton.json", "l": scene / "left.json", "r": scene / "right.json",
             "o": o}
    code = main([a.format(**names) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("dhik: error: ")
    assert message in err and "Traceback" not in err
    assert o.read_text() == "precious"


def test_cli_cold_start_solves_each_frame_from_the_t_pose(scene: Path, capsys) -> None:
    out, report = scene / "a.json", scene / "r.json"
    code = main(["bake", str(scene / "skeleton.json"), str(scene / "left.json"), "--effector",
                 "LHand", "--cold-start", "-o", str(out), "--report", str(report)])
    capsys.readouterr()
    assert code == 0
    rep = json.loads(report.read_text())
    assert rep["method"] == "robust" and rep["converged"] == rep["frames"] == 25
    keys = json.loads((scene / "left.json").read_text())
    (scene / "one.json").write_text(json.dumps([{**keys[7], "frame": 0}]))
    code = main(["bake", str(scene / "skeleton.json"), str(scene / "one.json"), "--effector",
                 "LHand", "--cold-start", "-o", str(scene / "one_out.json")])
    capsys.readouterr()
    alone = load_animation(scene / "one_out.json")[0]["joints"]
    # each frame is solved as if alone (solve_many: its own restarts), up to the rounding
    # of numpy's batched arithmetic (the last bit)
    got = load_animation(out)[7]["joints"]
    for name in ("Torso", "LElbow"):
        assert got[name]["angle"] == pytest.approx(alone[name]["angle"], abs=1e-12)
    for name in ("LShoulder", "LWrist"):
        assert got[name]["quaternion"] == pytest.approx(alone[name]["quaternion"], abs=1e-12)
