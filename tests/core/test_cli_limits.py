"""Issue 19's findings in ``dhik bake``, ``fk`` and ``validate``, one test each: outputs
replaced as a set (``--report /dev/full``), bounded sizes refused with their documented
limit, numbers in ASCII decimal digits only, and a spherical joint's ``euler`` that
disagrees with its ``quaternion`` (the quaternion wins, validate warns).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dhik.app.bakejob import MAX_EFFECTORS, MAX_ITERATIONS
from dhik.app.cli import MAX_WORKERS, main
from dhik.app.formats import MAX_FRAME, MAX_JOINTS
from dhik.rotations import euler_xyz_to_quat, quat_to_matrix

ROOT = Path(__file__).resolve().parents[2]
PLANAR = ROOT / "sample_scenes" / "planar2"


def run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code: int, out: str, err: str, says: str) -> str:
    assert code == 2 and out == "", (code, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dhik: error: "), err
    assert says in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------ outputs as a set


def test_report_into_dev_full_writes_no_animation(tmp_path: Path, capsys) -> None:
    """`dhik bake --report /dev/full` failed after animation.json was written; now the
    animation is renamed into place only once the report was written."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    out = tmp_path / "a.json"
    code, stdout, err = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                            "-o", out, "--report", "/dev/full")
    one_error(code, stdout, err, says="/dev/full: cannot write: No space left on device")
    assert list(tmp_path.iterdir()) == []
    out.write_text("old")  # an existing animation stays as it was
    code, stdout, err = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                            "-o", out, "--report", "/dev/full")
    assert code == 2 and out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]
    # and the other way round: animation.json to /dev/full, the report not replaced
    rep = tmp_path / "r.json"
    rep.write_text("old report")
    code, stdout, err = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                            "-o", "/dev/full", "--report", rep)
    one_error(code, stdout, err, says="/dev/full")
    assert rep.read_text() == "old report"


# ------------------------------------------------------------------ bounded sizes


def chain(n: int) -> dict[str, Any]:
    joints = [{"name": "J0", "type": "fixed", "parent": None}]
    joints += [{"name": f"J{i}", "type": "revolute", "parent": f"J{i - 1}",
                "offset": [0, 0, 0.01], "axis": [1, 0, 0]} for i in range(1, n)]
    return {"root_name": "J0", "joints": joints}


def test_a_skeleton_beyond_the_joint_limit_is_refused_at_once(tmp_path: Path, capsys) -> None:
    """A 100,000-joint chain ran past 420 s at 5 GB; beyond MAX_JOINTS every command
    refuses it while reading (the limit itself is accepted)."""
    big = tmp_path / "big.json"
    big.write_text(json.dumps(chain(MAX_JOINTS + 1)))
    keys = tmp_path / "t.json"
    keys.write_text('[{"frame": 0, "pos": [0, 0, 1], "euler": [0, 0, 0]}]')
    says = f"big.json: joints: {MAX_JOINTS + 1:,} joints: a skeleton holds at most {MAX_JOINTS:,}"
    for argv in (["bake", big, keys, "-o", tmp_path / "a.json"], ["fk", big],
                 ["validate", big]):
        code, out, err = run(capsys, *argv)
        one_error(code, out, err, says)
    edge = tmp_path / "edge.json"
    edge.write_text(json.dumps(chain(MAX_JOINTS)))
    code, out, err = run(capsys, "validate", edge)
    assert code == 0 and f"({'skeleton'}, {MAX_JOINTS} joints)" in out


def test_too_many_target_flags_are_refused_before_any_file_is_read(tmp_path: Path,
                                                                   capsys) -> None:
    """10,000 --target flags ran past 420 s; beyond MAX_EFFECTORS: one line at once (the
    files named do not even exist)."""
    flags = [a for i in range(MAX_EFFECTORS + 1) for a in ("--target", f"E{i}=t{i}.json")]
    code, out, err = run(capsys, "bake", PLANAR / "skeleton.json", *flags, "-o",
                         tmp_path / "a.json")
    one_error(code, out, err, f"{MAX_EFFECTORS + 1} effectors: a bake drives at most "
                              f"{MAX_EFFECTORS}")


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--max-iterations", str(10**9), f"must be at most {MAX_ITERATIONS:,}"),
    ("--max-iterations", str(MAX_ITERATIONS + 1), f"must be at most {MAX_ITERATIONS:,}"),
])
def test_max_iterations_has_a_limit(flag: str, value: str, says: str, tmp_path: Path,
                                    capsys) -> None:
    code, out, err = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                         "-o", tmp_path / "a.json", flag, value)
    one_error(code, out, err, says)
    code, out, _ = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                       "-o", tmp_path / "a.json", flag, str(MAX_ITERATIONS))
    assert code == 0


def test_workers_have_a_limit(tmp_path: Path, capsys) -> None:
    code, out, err = run(capsys, "bake-many", PLANAR.parent, "-o", tmp_path / "out",
                         "--workers", str(MAX_WORKERS + 1))
    one_error(code, out, err, f"must be at most {MAX_WORKERS:,}")
    assert not (tmp_path / "out").exists()


def readme_bullets() -> list[str]:
    """The README's list items, each on one line (white space runs as one space)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [" ".join(item.split()) for item in text.split("\n- ")]


def test_the_limits_refused_are_the_ones_the_readme_documents() -> None:
    """Bounded sizes are refused "with a documented limit": the README's numbers are the
    code's."""
    (sizes,) = [b for b in readme_bullets() if b.startswith("sizes that would run for hours")]
    for phrase in (f"at most {MAX_JOINTS:,} joints in a skeleton",
                   f"{MAX_EFFECTORS} effectors in a bake",
                   f"`--max-iterations` {MAX_ITERATIONS:,}", f"`--workers` {MAX_WORKERS:,}"):
        assert phrase in sizes, phrase
    assert any(b.startswith(f"frames from 0 to {MAX_FRAME:,}") for b in readme_bullets())


# ------------------------------------------------------------------ numbers


@pytest.mark.parametrize("text", ["1_000", "\u0661\u0660", "\uff11\uff10", "\u00b2", " 10",
                                  "1e2"])
def test_integer_flags_take_ascii_decimal_digits_only(text: str, tmp_path: Path,
                                                      capsys) -> None:
    """int() reads '1_000', Arabic-Indic and fullwidth digits; '²' passed isdigit() and
    then crashed int() with a traceback."""
    for argv in (["--max-iterations", text], ["--chain-length", text]):
        code, out, err = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                             "-o", tmp_path / "a.json", *argv)
        one_error(code, out, err, argv[0])
    assert not (tmp_path / "a.json").exists()


@pytest.mark.parametrize("text", ["1_0", "\u0661", "\uff11", "inf", "nan", "0x1"])
def test_float_flags_take_ascii_decimal_numbers_only(text: str, tmp_path: Path,
                                                     capsys) -> None:
    for argv in (["--position-tolerance", text],
                 ["--target", f"Hand={PLANAR / 'targets.json'}:{text},1"],
                 ["--pole", f"Hand={text},0,0"]):
        args = ["bake", PLANAR / "skeleton.json"]
        args += [] if argv[0] == "--target" else [PLANAR / "targets.json"]
        code, out, err = run(capsys, *args, "-o", tmp_path / "a.json", *argv)
        assert code == 2 and out == "" and len(err.splitlines()) == 1, (argv, err)


# ------------------------------------------------------------------ euler and quaternion


SPHERE = {"root_name": "R", "joints": [
    {"name": "R", "type": "fixed", "parent": None},
    {"name": "Ball", "type": "spherical", "parent": "R", "offset": [0, 0, 1]},
    {"name": "Tip", "type": "fixed", "parent": "Ball", "offset": [0.5, 0.2, 0.1]}]}


def spherical_animation(path: Path, euler: list[float], quaternion: list[float]) -> Path:
    path.write_text(json.dumps({"frames": [{"frame": 0, "joints": {"Ball": {
        "type": "spherical", "euler": euler, "quaternion": quaternion}}}]}))
    return path


def test_validate_warns_when_euler_and_quaternion_disagree(tmp_path: Path, capsys) -> None:
    """SPEC 3.3's own example has them 0.83-0.92 rad apart; DECISIONS: the quaternion is
    authoritative and validate warns beyond 1e-6 rad."""
    e = [0.3, -0.4, 1.1]
    q = [float(c) for c in euler_xyz_to_quat(e)]
    same = spherical_animation(tmp_path / "same.json", e, q)
    code, out, err = run(capsys, "validate", same)
    assert code == 0 and err == "" and "ok (animation, 1 frames)" in out
    near = spherical_animation(tmp_path / "near.json", [e[0], e[1], e[2] + 5e-7], q)
    assert run(capsys, "validate", near)[2] == ""
    off = spherical_animation(tmp_path / "off.json", [e[0] + 0.5, e[1], e[2]], q)
    code, out, err = run(capsys, "validate", off)
    assert code == 0 and "ok (animation" in out
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"dhik: warning: {off}: frames[0].joints.Ball: euler is 0.5 rad from the quaternion")
    assert "the quaternion is the joint's rotation" in lines[0]
    assert run(capsys, "validate", "--quiet", off)[1:] == ("", "")


@pytest.mark.parametrize(("euler", "quaternion"), [
    ([0.523, 0.0, 0.785], [0.924, 0.383, 0.0, 0.0]),  # SPEC 3.3's frame 0
    ([0.628, 0.087, 0.890], [0.918, 0.396, 0.0, 0.0]),  # and frame 1
])
def test_the_spec_examples_disagreement_is_warned_about(euler: list[float],
                                                        quaternion: list[float],
                                                        tmp_path: Path, capsys) -> None:
    """The two are 0.83 and 0.92 rad apart in the specification's own example."""
    path = spherical_animation(tmp_path / "spec.json", euler, quaternion)
    _, _, err = run(capsys, "validate", path)
    angle = float(err.split("euler is ")[1].split(" rad")[0])
    assert 0.8 < angle < 0.95


def test_fk_poses_a_spherical_joint_by_its_quaternion(tmp_path: Path, capsys) -> None:
    skel = tmp_path / "s.json"
    skel.write_text(json.dumps(SPHERE))
    q = np.array([0.9, 0.1, -0.3, 0.2])
    q /= np.linalg.norm(q)
    anim = spherical_animation(tmp_path / "a.json", [1.0, 2.0, -1.0], q.tolist())
    code, out, err = run(capsys, "fk", skel, "--animation", anim, "--frame", "0")
    assert code == 0, err
    tip = json.loads(out)["Tip"]["position"]
    by_hand = np.array([0, 0, 1.0]) + quat_to_matrix(q) @ np.array([0.5, 0.2, 0.1])
    np.testing.assert_allclose(tip, by_hand, atol=1e-12)
    # the euler's pose is another one, so the test tells the two apart
    from_euler = np.array([0, 0, 1.0]) + quat_to_matrix(euler_xyz_to_quat([1.0, 2.0, -1.0])) \
        @ np.array([0.5, 0.2, 0.1])
    assert np.linalg.norm(from_euler - by_hand) > 0.1


def test_the_readme_says_which_angles_spherical_limits_bound() -> None:
    """DECISIONS settles it (intrinsic X-Y-Z, the virtual chain's order, in every method);
    the README says it where it explains limits (its Conventions)."""
    (bullet,) = [b for b in readme_bullets() if b.startswith("a spherical joint's limits")]
    for phrase in ("intrinsic X-Y-Z", "R = Rx(a)·Ry(b)·Rz(c)", "virtual chain",
                   "in every method", "need not lie inside the limits"):
        assert phrase in bullet, phrase


def test_a_urdf_beyond_the_joint_limit_is_refused_in_urdf_terms(tmp_path: Path,
                                                               capsys) -> None:
    links = "".join(f'<link name="l{i}"/>' for i in range(MAX_JOINTS + 1))
    joints = "".join(f'<joint name="j{i}" type="fixed"><parent link="l{i}"/>'
                     f'<child link="l{i + 1}"/></joint>' for i in range(MAX_JOINTS))
    urdf = tmp_path / "long.urdf"
    urdf.write_text(f'<robot name="r">{links}{joints}</robot>')
    code, out, err = run(capsys, "import-urdf", urdf, "-o", tmp_path / "s.json")
    one_error(code, out, err, f"long.urdf: robot: more than {MAX_JOINTS:,} skeleton joints")
    assert not (tmp_path / "s.json").exists()


def test_a_name_holding_nul_is_one_error_everywhere(tmp_path: Path, capsys) -> None:
    """NUL ends a C string, a Blender bone name and a numpy string: "a\\0b" and "a\\0c"
    would become one joint there, so no command takes it."""
    skel = json.loads((PLANAR / "skeleton.json").read_text())
    skel["joints"][-1]["name"] = "Hand\u0000x"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(skel))
    for argv in (["validate", path], ["fk", path],
                 ["bake", path, PLANAR / "targets.json", "-o", tmp_path / "a.json"]):
        code, out, err = run(capsys, *argv)
        one_error(code, out, err, 'joints[3].name: must not hold a NUL character, got '
                                  '"Hand\\u0000x"')


def test_bake_many_quiet_prints_nothing_but_errors(tmp_path: Path, capsys) -> None:
    clips = tmp_path / "clips"
    (clips / "p").mkdir(parents=True)
    for name in ("skeleton.json", "targets.json"):
        (clips / "p" / name).write_bytes((PLANAR / name).read_bytes())
    code, out, err = run(capsys, "bake-many", clips, "-o", tmp_path / "out", "--quiet")
    assert (code, out, err) == (0, "", "")
    assert (tmp_path / "out/p/animation.json").is_file()
