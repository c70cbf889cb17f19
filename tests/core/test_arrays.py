"""Robot-learning output (issue 19): ``dhik bake --format npz|csv --fps`` and animation.json's
``fps``. Every array is read back and compared with the animation.json of the same bake,
and the root pose with the skeleton's own FK (joint objects, frame by frame).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dhik.app.arrays import load_arrays, root_joint
from dhik.app.cli import main
from dhik.app.formats import load_animation, load_json, load_skeleton, parse_animation
from dhik.errors import DhikError
from dhik.model.skeleton import Skeleton
from dhik.rotations import matrix_to_quat

ROOT = Path(__file__).resolve().parents[2]
SCENES = ROOT / "sample_scenes"


def run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def bake_all(capsys: pytest.CaptureFixture[str], tmp: Path, skeleton: Path, *args: Any,
             fps: str = "30") -> dict[str, Path]:
    """The same bake as animation.json, .npz and .csv."""
    paths = {fmt: tmp / f"anim.{fmt}" for fmt in ("json", "npz", "csv")}
    for path in paths.values():
        code, _, err = run(capsys, "bake", skeleton, *args, "-o", path, "--fps", fps)
        assert code == 0, err
    return paths


def check_against_animation(arrays: Any, frames: list[dict[str, Any]], skel: Skeleton) -> None:
    """Every array equals what animation.json holds; the root pose is the skeleton's FK."""
    assert arrays.frame.tolist() == [f["frame"] for f in frames]
    np.testing.assert_array_equal(arrays.time, arrays.frame / arrays.fps)
    movable = [j for j in skel.defn.joints if j.type != "fixed"]
    carried = set(root_joint(skel.defn)[1])
    assert arrays.dof_names == [j.name for j in movable if j.type != "spherical"
                                and j.name not in carried]
    assert arrays.ball_names == [j.name for j in movable if j.type == "spherical"
                                 and j.name not in carried]
    for i, fr in enumerate(frames):
        for k, name in enumerate(arrays.dof_names):
            e = fr["joints"][name]
            assert arrays.dof_pos[i, k] == e.get("angle", e.get("displacement"))
        for k, name in enumerate(arrays.ball_names):
            assert arrays.ball_quat[i, k].tolist() == fr["joints"][name]["quaternion"]
        skel.set_joint_values(fr["joints"])
        world = skel.world_transforms()[arrays.root_joint]
        np.testing.assert_allclose(arrays.root_pos[i], world[:3, 3], atol=1e-12)
        q = matrix_to_quat(world[:3, :3])
        assert min(np.abs(arrays.root_quat[i] - q).max(),
                   np.abs(arrays.root_quat[i] + q).max()) < 1e-12
    np.testing.assert_allclose(np.linalg.norm(arrays.root_quat, axis=1), 1.0, atol=1e-12)
    if len(frames) > 1:  # no sign flips from frame to frame
        assert (np.einsum("ij,ij->i", arrays.root_quat[1:], arrays.root_quat[:-1]) >= 0).all()


@pytest.mark.parametrize("scene", ["arm7", "spec_example"])
def test_arrays_hold_what_animation_json_holds(scene: str, tmp_path: Path, capsys) -> None:
    s = SCENES / scene
    paths = bake_all(capsys, tmp_path, s / "skeleton.json", s / "targets.json")
    data = load_json(paths["json"])
    assert data["fps"] == 30.0  # DECISIONS: animation.json's optional frame rate
    frames = parse_animation(data, "anim.json")
    skel = Skeleton(load_skeleton(s / "skeleton.json"))
    npz, csv = load_arrays(paths["npz"]), load_arrays(paths["csv"])
    assert npz.fps == csv.fps == 30.0
    check_against_animation(npz, frames, skel)
    for name in ("frame", "root_pos", "root_quat", "dof_pos", "ball_quat"):
        np.testing.assert_array_equal(getattr(csv, name), getattr(npz, name))  # exact
    assert (csv.root_joint, csv.dof_names, csv.dof_types, csv.ball_names) == (
        npz.root_joint, npz.dof_names, npz.dof_types, npz.ball_names)


def test_the_files_state_the_frame_rate_joint_order_and_quaternion_order(tmp_path: Path,
                                                                         capsys) -> None:
    s = SCENES / "spec_example"
    paths = bake_all(capsys, tmp_path, s / "skeleton.json", s / "targets.json", fps="29.97")
    with np.load(paths["npz"], allow_pickle=False) as z:
        assert str(z["quaternion_order"]) == "w, x, y, z" and float(z["fps"]) == 29.97
        assert str(z["format"]) == "dhik animation arrays 1"
        assert z["dof_names"].tolist() == ["Elbow", "Piston"]
        assert z["dof_types"].tolist() == ["revolute", "prismatic"]
        assert z["ball_names"].tolist() == ["Shoulder"] and str(z["root_joint"]) == "Root"
        assert z["ball_quat"].shape == (241, 1, 4) and z["dof_pos"].shape == (241, 2)
    lines = paths["csv"].read_text().splitlines()
    assert lines[:6] == [
        "# format: dhik animation arrays 1", "# fps: 29.97", "# quaternion order: w, x, y, z",
        "# time = frame / fps (s); root = the world pose of the root joint (m)",
        '# root joint: "Root"',
        '# joints (skeleton.json order, rad / m / quaternion): [["Elbow", "revolute"], '
        '["Piston", "prismatic"], ["Shoulder", "spherical"]]']
    assert lines[6] == ("frame,time,root.px,root.py,root.pz,root.qw,root.qx,root.qy,root.qz,"
                        "Elbow,Piston,Shoulder.qw,Shoulder.qx,Shoulder.qy,Shoulder.qz")
    assert len(lines) == 7 + 241


FREE_ROOT = {"root_name": "World", "joints": [
    {"name": "World", "type": "fixed", "parent": None},
    {"name": "Hips.tx", "type": "prismatic", "parent": "World", "axis": [1, 0, 0],
     "offset": [0, 0, 1]},
    {"name": "Hips.ty", "type": "prismatic", "parent": "Hips.tx", "axis": [0, 1, 0]},
    {"name": "Hips.tz", "type": "prismatic", "parent": "Hips.ty", "axis": [0, 0, 1]},
    {"name": "Hips", "type": "spherical", "parent": "Hips.tz"},
    {"name": "Knee", "type": "revolute", "parent": "Hips", "offset": [0.1, 0, -0.5],
     "axis": [0, 1, 0]},
    {"name": "Foot", "type": "fixed", "parent": "Knee", "offset": [0, 0, -0.5]}]}


def test_a_free_root_is_the_root_pose(tmp_path: Path, capsys) -> None:
    """DECISIONS' free root (X.tx, X.ty, X.tz, X): the root pose is X's world pose, and
    those four joints are in it, not in the joint arrays."""
    skel_path = tmp_path / "s.json"
    skel_path.write_text(json.dumps(FREE_ROOT))
    rng = np.random.default_rng(4)
    frames = []
    for f in range(12):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        frames.append({"frame": f, "joints": {
            "Hips.tx": {"type": "prismatic", "displacement": float(rng.uniform(-1, 1))},
            "Hips.ty": {"type": "prismatic", "displacement": float(rng.uniform(-1, 1))},
            "Hips.tz": {"type": "prismatic", "displacement": float(rng.uniform(-1, 1))},
            "Hips": {"type": "spherical", "euler": [0, 0, 0], "quaternion": q.tolist()},
            "Knee": {"type": "revolute", "angle": float(rng.uniform(-1, 1))}}})
    from dhik.app.arrays import array_writer

    defn = load_skeleton(skel_path)
    assert root_joint(defn) == ("Hips", ["Hips.tx", "Hips.ty", "Hips.tz", "Hips"])
    for fmt in ("npz", "csv"):
        path = tmp_path / f"a.{fmt}"
        with open(path, "wb") as f:
            array_writer(fmt, defn, frames, 50.0, str(path))(f)
        arrays = load_arrays(path)
        assert arrays.root_joint == "Hips" and arrays.dof_names == ["Knee"]
        assert arrays.ball_names == []
        check_against_animation(arrays, frames, Skeleton(defn))


def test_odd_names_are_exact_in_the_files(tmp_path: Path, capsys) -> None:
    """Names with a comma, a quote, a line break or a lone surrogate: exact in the npz
    and in the csv's JSON line; the csv header row stays one row (escaped there)."""
    skel = json.loads((SCENES / "arm7/skeleton.json").read_text())
    odd = ["a,b", 'q"uote', "new\nline", "lone\ud800"]
    moving = [j for j in skel["joints"] if j["type"] != "fixed"]
    renames = dict(zip([j["name"] for j in moving], odd, strict=False))
    for j in skel["joints"]:
        j["name"] = renames.get(j["name"], j["name"])
        j["parent"] = renames.get(j["parent"], j["parent"])
    skel["root_name"] = renames.get(skel["root_name"], skel["root_name"])
    path = tmp_path / "s.json"
    path.write_text(json.dumps(skel))
    effector = next(j["name"] for j in skel["joints"] if j["type"] == "fixed"
                    and j["parent"] is not None)
    names = [j["name"] for j in moving]  # renamed in place above
    assert names[:4] == odd
    for fmt in ("npz", "csv"):
        out = tmp_path / f"a.{fmt}"
        code, _, err = run(capsys, "bake", path, SCENES / "arm7/targets.json", "-o", out,
                           "--fps", "24", "--effector", effector, "--cold-start")
        assert code == 0, err
        assert load_arrays(out).dof_names == names
    header = (tmp_path / "a.csv").read_text(encoding="utf-8").splitlines()[6]
    assert header.count(",") >= 8 and "\\n" in header and "\\ud800" in header


def test_the_format_and_frame_rate_are_checked_before_solving(tmp_path: Path, capsys) -> None:
    s = SCENES / "planar2"
    for argv, says in (
            (["-o", tmp_path / "a.npz"], "--format npz: needs the frame rate"),
            (["-o", tmp_path / "a.json", "--format", "csv"], "--format csv: needs the frame"),
            (["-o", tmp_path / "a.json", "--fps", "0"], "argument --fps: must be > 0"),
            (["-o", tmp_path / "a.json", "--fps", "nan"], "argument --fps"),
            (["-o", tmp_path / "a.json", "--format", "xml"], "invalid choice: 'xml'")):
        code, out, err = run(capsys, "bake", s / "skeleton.json", s / "targets.json", *argv)
        assert code == 2 and out == "" and err.count("\n") == 1 and says in err, err
    assert list(tmp_path.iterdir()) == []
    # --format wins over the suffix
    code, _, _ = run(capsys, "bake", s / "skeleton.json", s / "targets.json", "-o",
                     tmp_path / "x.json", "--format", "npz", "--fps", "25")
    assert code == 0 and np.load(tmp_path / "x.json")["fps"] == 25.0


@pytest.mark.parametrize(("fps", "ok"), [(24, True), (29.97, True), (0, False), (-1, False),
                                         ("30", False), (None, False), (True, False)])
def test_animation_json_fps_is_a_number_above_zero(fps: Any, ok: bool, tmp_path: Path) -> None:
    data = {"fps": fps, "frames": [{"frame": 0, "joints": {}}]}
    if ok:
        assert parse_animation(data) == [{"frame": 0, "joints": {}}]
    else:
        with pytest.raises(DhikError, match=r"animation.json: fps: must be"):
            parse_animation(data)


def test_an_animation_without_fps_stays_as_it_was(tmp_path: Path, capsys) -> None:
    s = SCENES / "planar2"
    code, _, _ = run(capsys, "bake", s / "skeleton.json", s / "targets.json", "-o",
                     tmp_path / "a.json")
    text = (tmp_path / "a.json").read_text()
    assert code == 0 and text.startswith('{\n  "frames": [\n') and '"fps"' not in text
    assert len(load_animation(tmp_path / "a.json")) == 120
