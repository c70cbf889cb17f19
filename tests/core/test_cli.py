"""The dhik command end to end on sample_scenes, and its one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dhik.app import bake
from dhik.app.cli import main
from dhik.app.formats import load_animation, load_skeleton, load_targets
from dhik.app.trajectory import interpolate_keyframes
from dhik.model.skeleton import Skeleton
from dhik.solver.dls import pose_error
from dhik.solver.settings import RobustOptions, SolverSettings
from fixtures import run_on_terminal

ROOT = Path(__file__).resolve().parents[2]
SCENES = ROOT / "sample_scenes"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("scene", ["spec_example", "planar2", "arm7"])
def test_bake_sample_scene(scene: str, tmp_path: Path, capsys) -> None:
    out_file, report = tmp_path / "animation.json", tmp_path / "report.json"
    code, out, err = run(capsys, "bake", SCENES / scene / "skeleton.json",
                         SCENES / scene / "targets.json", "-o", out_file, "--report", report)
    assert code == 0 and err == ""
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dhik bake: ")  # no bar: not a TTY
    frames = load_animation(out_file)
    keys = load_targets(SCENES / scene / "targets.json")
    assert [f["frame"] for f in frames] == list(range(keys[-1].frame + 1))
    rep = json.loads(report.read_text())
    assert rep["frames"] == len(frames) == len(rep["records"])
    assert f"{rep['converged']}/{len(frames)} converged" in lines[0]
    # the report's errors are those of the written animation, re-checked by FK
    sk = Skeleton(load_skeleton(SCENES / scene / "skeleton.json"))
    eff = sk.joints[rep["effector"]]
    for fr, rec, (_, target) in list(zip(frames, rep["records"],
                                         interpolate_keyframes(keys), strict=True))[::17]:
        sk.set_joint_values(fr["joints"])
        dp, dr = pose_error(eff, target)
        assert abs(np.linalg.norm(dp) - rec["position_error"]) < 1e-9
        assert abs(np.linalg.norm(dr) - rec["orientation_error"]) < 1e-9
    if scene == "planar2":
        assert rep["converged"] == len(frames)
    if scene == "spec_example":  # 5 DoF cannot follow every full pose: said, not hidden
        assert rep["converged"] < len(frames) and "NOT converged" in lines[0]


def test_bake_options_reach_the_solver(tmp_path: Path, capsys, monkeypatch) -> None:
    """The tolerances and ``--max-iterations`` reach the robust (default) trajectory
    engine, and the report lists what acted: those, ``cold_start`` and the robust
    options, not the spec method's ``--damping`` and ``--no-line-search`` (which a spec
    bake lists)."""
    args = ["bake", SCENES / "planar2/skeleton.json", SCENES / "planar2/targets.json",
            "-o", tmp_path / "a.json", "--report", tmp_path / "r.json", "--effector", "Hand",
            "--max-iterations", "7", "--position-tolerance", "1e-7",
            "--orientation-tolerance", "1e-6"]
    seen: list[SolverSettings] = []
    inner = bake.solve_path

    def spy(*a: Any, **kw: Any) -> Any:
        seen.append(a[3])
        return inner(*a, **kw)

    monkeypatch.setattr(bake, "solve_path", spy)
    code, _, _ = run(capsys, *args)
    rep = json.loads((tmp_path / "r.json").read_text())
    assert code == 0 and rep["method"] == "robust"
    assert rep["settings"]["max_iterations"] == 7
    assert rep["settings"]["position_tolerance"] == 1e-7
    assert rep["settings"]["orientation_tolerance"] == 1e-6
    assert rep["settings"]["cold_start"] is False
    assert rep["settings"]["lm_damping"] == RobustOptions().lm_damping  # the LM's own
    assert "enable_line_search" not in rep["settings"]
    # every LM run of the trajectory engine is capped at 7; the report counts the
    # iterations of every run on a frame
    assert [(o.max_iterations, o.position_tolerance, o.orientation_tolerance)
            for o in seen] == [(7, 1e-7, 1e-6)]
    assert all(r["iterations"] >= 0 for r in rep["records"])
    code, _, _ = run(capsys, *args, "--method", "spec", "-o", tmp_path / "s.json",
                     "--damping", "0.01", "--no-line-search")
    rep = json.loads((tmp_path / "r.json").read_text())
    assert code == 0 and rep["method"] == "spec"
    assert rep["settings"]["damping"] == 0.01
    assert rep["settings"]["enable_line_search"] is False
    assert max(r["iterations"] for r in rep["records"]) <= 7
    assert rep["settings"] == {"max_iterations": 7, "position_tolerance": 1e-7,
                               "orientation_tolerance": 1e-6, "damping": 0.01,
                               "enable_line_search": False, "line_search_alpha": 1.0,
                               "line_search_alpha_min": 0.01}


@pytest.mark.parametrize("flag", [["--damping", "0.01"], ["--damping", "0"],
                                  ["--no-line-search"]])
def test_spec_only_settings_are_refused_with_the_robust_method(flag: list[str], tmp_path: Path,
                                                               capsys) -> None:
    """--damping and --no-line-search did nothing with the robust method (the default)
    while --report said they were set: now one line, exit 2, nothing written."""
    out = tmp_path / "a.json"
    for method in ([], ["--method", "robust"]):
        code, stdout, err = run(capsys, "bake", SCENES / "planar2/skeleton.json",
                                SCENES / "planar2/targets.json", "-o", out, *flag, *method)
        assert code == 2 and stdout == ""
        assert err == (f"dhik: error: {flag[0]}: acts only with --method spec; the robust "
                       "method (the default) does not use it\n")
        assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bake", "missing.json", "{t}", "-o", "{o}"], "missing.json: "),
        (["bake", "{s}", "{t}"], "the following arguments are required: -o/--output"),
        (["bake", "{s}", "{t}", "-o", "{o}", "--effector", "Nope"], "no joint named 'Nope'"),
        (["bake", "{s}", "{t}", "-o", "{o}", "--damping", "-1"], "argument --damping"),
        (["bake", "{s}", "{t}", "-o", "{o}", "--position-tolerance", "nan"], "tolerance"),
        (["bake", "{s}", "{t}", "-o", "{o}", "--max-iterations", "x"], "--max-iterations"),
        (["bake", "{s}", "{s}", "-o", "{o}"], "skeleton.json: must be a JSON array of keyframes"),
        (["bake", "{s}", "{t}", "-o", "/nonexistent/dir/a.json"], "/nonexistent/dir/a.json"),
        (["fk", "{s}", "--frame", "3"], "--frame needs --animation"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_one_line_exit_2(argv, message, tmp_path: Path, capsys) -> None:
    s, t = SCENES / "planar2/skeleton.json", SCENES / "planar2/targets.json"
    o = tmp_path / "out.json"
    o.write_text("precious")
    code, out, err = run(capsys, *[a.format(s=s, t=t, o=o) for a in argv])
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("dhik: error: ")
    assert message in err
    assert "Traceback" not in err
    assert o.read_text() == "precious"  # nothing half-written or lost


def test_bad_skeleton_names_file_and_json_path(tmp_path: Path, capsys) -> None:
    data = json.loads((SCENES / "arm7/skeleton.json").read_text())
    data["joints"][3]["axis"] = [0, 0, 0]
    bad = tmp_path / "skeleton.json"
    bad.write_text(json.dumps(data))
    code, _, err = run(capsys, "bake", bad, SCENES / "arm7/targets.json", "-o",
                       tmp_path / "a.json")
    assert code == 2
    assert err.strip() == f"dhik: error: {bad}: joints[3].axis: must be a non-zero 3-vector"
    assert not (tmp_path / "a.json").exists()


def test_fk_rest_pose_and_animation_frame(tmp_path: Path, capsys) -> None:
    code, out, _ = run(capsys, "fk", SCENES / "planar2/skeleton.json")
    rest = json.loads(out)
    assert code == 0 and set(rest) == {"Base", "Shoulder", "Elbow", "Hand"}
    assert rest["Hand"]["position"] == [0.0, 2.0, 0.0]
    assert rest["Elbow"]["rotation"] == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    anim = tmp_path / "a.json"
    anim.write_text(json.dumps({"frames": [{"frame": 4, "joints": {
        "Shoulder": {"type": "revolute", "angle": np.pi / 2},
        "Elbow": {"type": "revolute", "angle": -np.pi / 2}}}]}))
    code, out, _ = run(capsys, "fk", SCENES / "planar2/skeleton.json", "--animation", anim,
                       "--frame", "4")
    posed = json.loads(out)
    np.testing.assert_allclose(posed["Elbow"]["position"], [-1, 0, 0], atol=1e-15)
    np.testing.assert_allclose(posed["Hand"]["position"], [-1, 1, 0], atol=1e-15)
    code, _, err = run(capsys, "fk", SCENES / "planar2/skeleton.json", "--animation", anim,
                       "--frame", "5")
    assert code == 2 and "no frame 5" in err
    anim.write_text(json.dumps({"frames": [{"frame": 0, "joints": {
        "Shoulder": {"type": "prismatic", "displacement": 1.0}}}]}))
    code, _, err = run(capsys, "fk", SCENES / "planar2/skeleton.json", "--animation", anim,
                       "--frame", "0")
    assert code == 2 and "joints.Shoulder.type" in err


def test_validate_tells_kinds_and_fails_on_any_bad_file(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"frame": 1, "pos": [0, 0], "euler": [0, 0, 0]}]')
    anim = tmp_path / "anim.json"
    main(["bake", str(SCENES / "planar2/skeleton.json"), str(SCENES / "planar2/targets.json"),
          "-o", str(anim)])
    capsys.readouterr()
    code, out, _ = run(capsys, "validate", SCENES / "arm7/skeleton.json",
                       SCENES / "arm7/targets.json", anim)
    assert code == 0
    kinds = [line.split("(")[1].split(",")[0] for line in out.strip().splitlines()]
    assert kinds == ["skeleton", "targets", "animation"]
    code, out, err = run(capsys, "validate", SCENES / "arm7/skeleton.json", bad)
    assert code == 2
    # the verdict on stdout, the error on stderr (issue 19: errors never on stdout)
    assert out.splitlines() == [f"{SCENES / 'arm7/skeleton.json'}: ok (skeleton, 9 joints)"]
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"dhik: error: {bad}: [0].pos")
    code, out, err = run(capsys, "validate", "--quiet", SCENES / "arm7/skeleton.json", bad)
    assert code == 2 and out == "" and len(err.splitlines()) == 1


def test_console_script_and_python_m(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    args = ["bake", str(SCENES / "planar2/skeleton.json"), str(SCENES / "planar2/targets.json"),
            "-o", str(tmp_path / "a.json")]
    for cmd in ([sys.executable, "-m", "dhik"], [str(Path(sys.executable).parent / "dhik")]):
        done = subprocess.run(cmd + args, capture_output=True, text=True, env=env, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("dhik bake: 120 frames, 120/120 converged")
    done = subprocess.run([sys.executable, "-m", "dhik", "bake", "nope.json", "x", "-o", "y"],
                          capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1


def test_progress_bar_only_on_a_terminal_and_on_stderr(tmp_path: Path) -> None:
    """The bar goes to stderr (a terminal), stdout carries the summary line only."""
    args = [sys.executable, "-m", "dhik", "bake", str(SCENES / "planar2/skeleton.json"),
            str(SCENES / "planar2/targets.json"), "-o", str(tmp_path / "a.json")]
    proc, shown = run_on_terminal(args, "stderr")
    assert proc.returncode == 0
    assert "100% frame 120/120" in shown and "\r" in shown
    assert proc.stdout.startswith("dhik bake: 120 frames") and "\r" not in proc.stdout
    proc, shown = run_on_terminal(args, "stdout")  # stdout a terminal, stderr a pipe
    assert proc.returncode == 0 and "%" not in shown and proc.stderr == ""
    # --quiet: neither bar nor summary, the file written all the same
    proc, shown = run_on_terminal([*args, "--quiet", "-o", str(tmp_path / "q.json")], "stderr")
    assert proc.returncode == 0 and shown == "" and proc.stdout == ""
    assert (tmp_path / "q.json").read_bytes() == (tmp_path / "a.json").read_bytes()


def test_quiet_keeps_errors_only(tmp_path: Path, capsys) -> None:
    s, t = SCENES / "planar2/skeleton.json", SCENES / "planar2/targets.json"
    code, out, err = run(capsys, "bake", s, t, "-o", tmp_path / "a.json", "-q")
    assert (code, out, err) == (0, "", "")
    code, out, err = run(capsys, "validate", "--quiet", s, t)
    assert (code, out, err) == (0, "", "")
    code, out, err = run(capsys, "bake", s, "nope.json", "-o", tmp_path / "a.json", "-q")
    assert code == 2 and out == "" and err.startswith("dhik: error: nope.json: ")
    code, out, err = run(capsys, "fk", s, "--quiet")  # fk's JSON is its result: kept
    assert code == 0 and "Hand" in json.loads(out)


def test_stdout_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    """`dhik fk > /dev/full` said `dhik: error: : No space left on device`."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    for argv in (["fk", str(SCENES / "planar2/skeleton.json")],
                 ["validate", str(SCENES / "planar2/skeleton.json")],
                 ["bake", str(SCENES / "planar2/skeleton.json"),
                  str(SCENES / "planar2/targets.json"), "-o", str(tmp_path / "a.json")]):
        with open("/dev/full", "w") as full:
            done = subprocess.run([sys.executable, "-m", "dhik", *argv], stdout=full,
                                  stderr=subprocess.PIPE, text=True, check=False)
        assert done.returncode == 2, done.stderr
        assert done.stderr == "dhik: error: stdout: cannot write: No space left on device\n"
