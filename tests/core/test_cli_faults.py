"""What fuzzing and stress found in the dhik command (issue 9, point 7), one test per finding.

Every bad case: exactly one ``dhik: error: ...`` line on stderr (one line even when a name
holds a newline or a lone surrogate), nothing on stdout, exit status 2, and neither the
output nor a temporary file left behind. Every valid case: it works. The command runs for
real: ``main()`` in this process, or ``python -m dhik`` where a process is needed (signals,
a closed stdout, the recursion limit).
"""

from __future__ import annotations

import json
import math
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dhik.app import bake as bake_module
from dhik.app.cli import main
from dhik.app.formats import MAX_FRAME, MAX_LENGTH
from dhik.model.skeleton import Skeleton

ROOT = Path(__file__).resolve().parents[2]
PLANAR = ROOT / "sample_scenes" / "planar2"


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8",
                    errors="surrogatepass")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error(code: int, out: str, err: str, folder: Path, *gone: Path,
                     says: str = "") -> str:
    """Exit 2, stdout empty, one ``dhik: error:`` line, no temp file, ``gone`` absent."""
    assert code == 2, (code, out, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dhik: error: "), err
    assert says in lines[0], lines[0]
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
    for path in gone:
        assert not path.exists(), path
    return lines[0]


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN and Infinity (they are not JSON)."""
    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def gantry(limits: list[float] | None) -> dict[str, Any]:
    """Two prismatic joints (x then y) below a fixed root, the tool 1 m along x at rest."""
    lim = {} if limits is None else {"limits": limits}
    return {"root_name": "Base", "joints": [
        {"name": "Base", "type": "fixed", "parent": None},
        {"name": "X", "type": "prismatic", "parent": "Base", "axis": [1, 0, 0], **lim},
        {"name": "Y", "type": "prismatic", "parent": "X", "axis": [0, 1, 0], **lim},
        {"name": "Tool", "type": "fixed", "parent": "Y", "offset": [0, 0, 0]}]}


GANTRY_KEYS = [{"frame": 0, "pos": [1.0, 0.0, 0.0], "euler": [0, 0, 0]},
               {"frame": 3, "pos": [1.0, 0.6, 0.0], "euler": [0, 0, 0]}]


def bake_report(capsys, tmp_path: Path, skeleton: dict[str, Any], keys: list[dict[str, Any]],
                *extra: str) -> dict[str, Any]:
    """Bake (exit 0 required) and return the report, with the frames under "animation"."""
    skel, targets = write(tmp_path / "s.json", skeleton), write(tmp_path / "t.json", keys)
    out, report = tmp_path / "a.json", tmp_path / "r.json"
    code, stdout, err = run(capsys, "bake", skel, targets, "-o", out, "--report", report, *extra)
    assert code == 0 and err == "", err
    assert len(stdout.splitlines()) == 1
    rep = json.loads(report.read_text())
    rep["animation"] = strict_json(out.read_text(encoding="utf-8"))["frames"]
    return rep


# ----------------------------------------------------------------- cold starts, wide limits


@pytest.mark.parametrize("limits", [[-300, 300], [-1000, 1000], [0, 1000], [-1e100, 1e100],
                                    [-1e308, 1e308], None])
def test_gantry_with_wide_limits_converges_like_the_spec_method(limits, tmp_path, capsys):
    """The T-pose is 1 m from every target: the default cold start must do as well."""
    for method in ("spec", "robust"):
        rep = bake_report(capsys, tmp_path, gantry(limits), GANTRY_KEYS, "--method", method,
                          "--cold-start")
        assert rep["converged"] == rep["frames"] == 4, (method, rep["records"])
        for fr, y in zip(rep["animation"], (0.0, 0.2, 0.4, 0.6), strict=True):
            assert fr["joints"]["X"]["displacement"] == pytest.approx(1.0, abs=1e-3)
            assert fr["joints"]["Y"]["displacement"] == pytest.approx(y, abs=1e-3)


@pytest.mark.parametrize("limits", [[-1e308, 1e308], [-1.7e308, 1.7e308]])
def test_huge_revolute_limits_bake(limits, tmp_path, capsys):
    """Random restarts within [-1e308, 1e308] overflowed (Generator.uniform)."""
    skel = json.loads((PLANAR / "skeleton.json").read_text())
    for j in skel["joints"]:
        if j["type"] == "revolute":
            j["limits"] = limits
    keys = [{"frame": 0, "pos": [0.3, 1.1, 0.0], "euler": [0, 0, 60]},
            {"frame": 2, "pos": [-1.5, 0.2, 0.0], "euler": [0, 0, 170]}]  # a far jump
    rep = bake_report(capsys, tmp_path, skel, keys)
    assert rep["frames"] == 3 and all(math.isfinite(r["position_error"])
                                      for r in rep["records"])


def test_limits_zero_and_minus_zero_lock_the_joint(tmp_path, capsys):
    """[0.0, -0.0] crashed with "high - low < 0": it is a locked joint at 0."""
    rep = bake_report(capsys, tmp_path, gantry([0.0, -0.0]), GANTRY_KEYS)
    for fr in rep["animation"]:
        assert fr["joints"]["X"]["displacement"] == 0.0
        assert fr["joints"]["Y"]["displacement"] == 0.0


# ------------------------------------------------------------------------ names and values


@pytest.mark.parametrize("name", ["\ud800", "a\nb", "tab\there", "\udfff\ud800x", "é\u2028"])
def test_odd_joint_names_bake_validate_and_fk(name, tmp_path, capsys):
    """A lone surrogate or a newline in a name: valid JSON strings, so valid names.
    Written back escaped; every message stays on one line."""
    skel = json.loads((PLANAR / "skeleton.json").read_text())
    old = skel["joints"][-1]["name"]
    skel["joints"][-1]["name"] = name
    skel_path = tmp_path / "s.json"
    skel_path.write_text(json.dumps(skel), encoding="ascii")  # \uXXXX escapes
    out = tmp_path / "a.json"
    code, stdout, err = run(capsys, "bake", skel_path, PLANAR / "targets.json", "-o", out,
                            "--effector", name)
    assert code == 0 and err == "" and len(stdout.splitlines()) == 1, (stdout, err)
    frames = strict_json(out.read_text(encoding="utf-8"))["frames"]
    assert len(frames) == 120
    code, stdout, err = run(capsys, "validate", skel_path, out)
    assert code == 0 and len(stdout.splitlines()) == 2
    code, stdout, err = run(capsys, "fk", skel_path)
    assert code == 0 and name in strict_json(stdout) and old not in strict_json(stdout)
    # a bad case naming it: one line
    code, stdout, err = run(capsys, "bake", skel_path, PLANAR / "targets.json", "-o", out,
                            "--effector", name + "\n")
    assert_one_error(code, stdout, err, tmp_path)


def test_duplicate_name_with_a_newline_is_one_line(tmp_path, capsys):
    skel = json.loads((PLANAR / "skeleton.json").read_text())
    skel["joints"][1]["name"] = skel["joints"][2]["name"] = "x\ny\ud800"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(skel))
    code, out, err = run(capsys, "bake", path, PLANAR / "targets.json", "-o", tmp_path / "a")
    assert_one_error(code, out, err, tmp_path, tmp_path / "a", says="duplicate name")
    code, out, err = run(capsys, "validate", path)
    assert code == 2 and out == "" and len(err.splitlines()) == 1


def test_empty_effector_is_refused(tmp_path, capsys):
    out = tmp_path / "a.json"
    code, stdout, err = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                            "-o", out, "--effector", "")
    assert_one_error(code, stdout, err, tmp_path, out, says="--effector")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_are_not_json(literal, tmp_path, capsys):
    """Even in a field that is ignored (the axis of a fixed joint)."""
    text = (PLANAR / "skeleton.json").read_text()
    skel = json.loads(text)
    skel["joints"][0]["axis"] = [0, 0, 1]
    bad = json.dumps(skel).replace('"axis": [0, 0, 1]', f'"axis": [0, 0, {literal}]', 1)
    path = tmp_path / "s.json"
    path.write_text(bad)
    out = tmp_path / "a.json"
    code, stdout, err = run(capsys, "bake", path, PLANAR / "targets.json", "-o", out)
    line = assert_one_error(code, stdout, err, tmp_path, out, says=literal)
    assert "line" in line and "column" in line
    targets = tmp_path / "t.json"
    targets.write_text(f'[{{"frame": 0, "pos": [1, 1, 0], "euler": [0, 0, 0], "x": {literal}}}]')
    code, stdout, err = run(capsys, "validate", targets)
    assert code == 2 and literal in err and len(err.splitlines()) == 1 and stdout == ""


def test_offsets_beyond_the_maximum_are_refused_alike(tmp_path, capsys):
    """Offsets of 1e154 crashed the robust method and 1e308 made fk print Infinity."""
    for offset in (1e154, 1e308, MAX_LENGTH * 1.5):
        skel = json.loads((PLANAR / "skeleton.json").read_text())
        skel["joints"][1]["offset"] = [offset, 0, 0]
        path = write(tmp_path / "s.json", skel)
        out = tmp_path / "a.json"
        messages = set()
        for argv in (["bake", path, PLANAR / "targets.json", "-o", out], ["fk", path]):
            code, stdout, err = run(capsys, *argv)
            messages.add(assert_one_error(code, stdout, err, tmp_path, out))
        code, stdout, err = run(capsys, "validate", path)
        assert code == 2 and stdout == ""
        assert {m.removeprefix("dhik: error: ") for m in messages} == {
            err.strip().removeprefix("dhik: error: ")}
    skel["joints"][1]["offset"] = [MAX_LENGTH, 0, 0]  # the maximum itself is fine
    code, stdout, _ = run(capsys, "fk", write(tmp_path / "s.json", skel))
    assert code == 0 and strict_json(stdout)


def test_fk_output_is_always_json(tmp_path, capsys):
    """An animation quaternion of [1e200, 1e200, 0, 0] is valid (validate says so): fk
    poses it as [1, 1, 0, 0]; a pose whose FK overflows is refused in one line."""
    skel = {"root_name": "R", "joints": [
        {"name": "R", "type": "fixed", "parent": None},
        {"name": "S", "type": "spherical", "parent": "R", "offset": [0, 0, 1]},
        {"name": "P", "type": "prismatic", "parent": "S", "axis": [1, 0, 0],
         "offset": [0, 0, 1]},
        {"name": "Q", "type": "prismatic", "parent": "P", "axis": [1, 0, 0]},
        {"name": "T", "type": "fixed", "parent": "Q", "offset": [1, 0, 0]}]}
    sk_path = write(tmp_path / "s.json", skel)

    def animation(quat: list[float], d: float, e: float = 0.0) -> Path:
        return write(tmp_path / "anim.json", {"frames": [{"frame": 0, "joints": {
            "S": {"type": "spherical", "euler": [0, 0, 0], "quaternion": quat},
            "P": {"type": "prismatic", "displacement": d},
            "Q": {"type": "prismatic", "displacement": e}}}]})

    code, out, err = run(capsys, "validate", animation([1e200, 1e200, 0, 0], 0.5))
    assert code == 0, out
    code, out, err = run(capsys, "fk", sk_path, "--animation", tmp_path / "anim.json",
                         "--frame", "0")
    assert code == 0, err
    big = strict_json(out)
    run(capsys, "fk", sk_path, "--animation", animation([1, 1, 0, 0], 0.5), "--frame", "0")
    code, out, err = run(capsys, "fk", sk_path, "--animation", tmp_path / "anim.json",
                         "--frame", "0")
    assert code == 0
    small = strict_json(out)
    for name in small:
        np.testing.assert_allclose(big[name]["position"], small[name]["position"], atol=1e-15)
        np.testing.assert_allclose(big[name]["rotation"], small[name]["rotation"], atol=1e-15)
    code, out, err = run(capsys, "fk", sk_path, "--animation", animation([1, 0, 0, 0], 1e308),
                         "--frame", "0")
    assert code == 0 and strict_json(out)  # 1e308 + 1: still finite
    anim = animation([1, 1, 0, 0], 1e308, 1e308)  # valid values, but 2e308 overflows
    code, out, err = run(capsys, "fk", sk_path, "--animation", anim, "--frame", "0")
    assert_one_error(code, out, err, tmp_path, says="non-finite")


# --------------------------------------------------------------------------- deep chains


def deep_chain(n: int) -> dict[str, Any]:
    joints: list[dict[str, Any]] = [{"name": "R", "type": "fixed", "parent": None}]
    for i in range(n):
        joints.append({"name": f"J{i}", "type": "revolute", "parent": joints[-1]["name"],
                       "offset": [0, 0, 0.001], "axis": [[0, 1, 0], [1, 0, 0]][i % 2],
                       "limits": [-0.5, 0.5]})
    return {"root_name": "R", "joints": joints}


def test_deep_chains_without_recursion(tmp_path):
    """5,000 joints: validate, fk and a bake run with a recursion limit of 300 frames
    (recursing once per joint, as FK did, would need 5,000)."""
    n = 5000
    path = write(tmp_path / "s.json", deep_chain(n))
    keys = write(tmp_path / "t.json", [{"frame": 0, "pos": [0.2, 0.1, 4.9],
                                        "euler": [0, 0, 0]}])
    out = tmp_path / "a.json"
    script = ("import sys; from dhik.app.cli import main; sys.setrecursionlimit(300); "
              "raise SystemExit(main(sys.argv[1:]))")
    for argv in (["validate", path], ["fk", path],
                 ["bake", path, keys, "-o", out, "--method", "spec", "--max-iterations", "3"]):
        done = subprocess.run([sys.executable, "-c", script, *map(str, argv)],
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        if argv[0] == "fk":
            fk = strict_json(done.stdout)
            assert fk[f"J{n - 1}"]["position"] == pytest.approx([0, 0, n * 0.001])
    assert len(strict_json(out.read_text())["frames"][0]["joints"]) == n


def test_deep_chain_fk_matches_a_hand_product() -> None:
    """FK of a 3,000-joint chain (iterative) against the product of its local matrices."""
    defn_data = deep_chain(3000)
    from dhik.app.formats import parse_skeleton

    sk = Skeleton(parse_skeleton(defn_data))
    rng = np.random.default_rng(5)
    values = {f"J{i}": {"type": "revolute", "angle": float(a)}
              for i, a in enumerate(rng.uniform(-0.01, 0.01, 3000))}
    sk.set_joint_values(values)
    m = np.eye(4)
    for i in range(3000):
        a = values[f"J{i}"]["angle"]
        c, s = math.cos(a), math.sin(a)
        rot = (np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]) if i % 2 == 0
               else np.array([[1, 0, 0], [0, c, -s], [0, s, c]]))
        local = np.eye(4)
        local[:3, :3] = rot
        local[:3, 3] = [0, 0, 0.001]
        m = m @ local
    np.testing.assert_allclose(sk.world_transforms()["J2999"], m, atol=1e-12)


# ------------------------------------------------------------------------------ frames


@pytest.mark.parametrize("frame", [MAX_FRAME + 1, 10_000_000, 10**19])
def test_frames_beyond_the_maximum_are_refused(frame, tmp_path, capsys):
    keys = write(tmp_path / "t.json", [{"frame": frame, "pos": [1, 1, 0], "euler": [0, 0, 0]}])
    out = tmp_path / "a.json"
    code, stdout, err = run(capsys, "bake", PLANAR / "skeleton.json", keys, "-o", out)
    assert_one_error(code, stdout, err, tmp_path, out, says=str(MAX_FRAME))
    anim = write(tmp_path / "anim.json", {"frames": [{"frame": frame, "joints": {}}]})
    code, stdout, err = run(capsys, "validate", keys, anim)
    assert code == 2 and err.count(str(MAX_FRAME)) == 2 and stdout == ""


def test_the_maximum_frame_itself_is_valid(tmp_path, capsys):
    keys = write(tmp_path / "t.json", [{"frame": MAX_FRAME, "pos": [1, 1, 0],
                                        "euler": [0, 0, 0]}])
    code, out, _ = run(capsys, "validate", keys)
    assert code == 0 and f"frames 0..{MAX_FRAME}" in out


# ---------------------------------------------------------------------------- outputs


def test_output_equal_to_an_input_is_refused(tmp_path, capsys):
    skel = tmp_path / "skeleton.json"
    skel.write_bytes((PLANAR / "skeleton.json").read_bytes())
    targets = tmp_path / "targets.json"
    targets.write_bytes((PLANAR / "targets.json").read_bytes())
    link = tmp_path / "link.json"
    link.symlink_to(skel)
    before = skel.read_bytes(), targets.read_bytes()
    for out in (skel, tmp_path / "." / "targets.json", link):
        code, stdout, err = run(capsys, "bake", skel, targets, "-o", out)
        assert_one_error(code, stdout, err, tmp_path, says="input")
        code, stdout, err = run(capsys, "bake", skel, targets, "-o", tmp_path / "a.json",
                                "--report", out)
        assert_one_error(code, stdout, err, tmp_path, tmp_path / "a.json", says="input")
    assert (skel.read_bytes(), targets.read_bytes()) == before
    code, stdout, err = run(capsys, "bake", skel, targets, "-o", tmp_path / "a.json",
                            "--report", tmp_path / "a.json")
    assert_one_error(code, stdout, err, tmp_path, tmp_path / "a.json")


def test_output_into_a_fifo_is_written_not_replaced(tmp_path, capsys):
    """A non-regular file (a FIFO here; /dev/null alike) is written into, never renamed
    over (as root, `-o /dev/null` replaced /dev/null with a regular file)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    code, out, err = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                         "-o", fifo)
    reader.join()  # the bake has returned: the FIFO is closed, the read has its EOF
    assert code == 0 and err == ""
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert len(strict_json(got[0].decode())["frames"]) == 120
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_report_into_a_missing_folder_fails_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "a.json"
    code, stdout, err = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                            "-o", out, "--report", tmp_path / "nope" / "r.json")
    assert_one_error(code, stdout, err, tmp_path, out, says="nope")
    code, stdout, err = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                            "-o", tmp_path / "nope" / "a.json")
    assert_one_error(code, stdout, err, tmp_path, says="nope")
    code, stdout, err = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                            "-o", tmp_path)
    assert_one_error(code, stdout, err, tmp_path, says="folder")


def test_a_report_that_cannot_be_written_leaves_no_animation(tmp_path, capsys, monkeypatch):
    """A report holding a non-finite number is refused before animation.json is written."""
    real = bake_module.BakeResult.report

    def poisoned(self: bake_module.BakeResult) -> dict[str, Any]:
        rep = real(self)
        rep["records"][3]["position_error"] = math.inf
        return rep

    monkeypatch.setattr(bake_module.BakeResult, "report", poisoned)
    out = tmp_path / "a.json"
    code, stdout, err = run(capsys, "bake", PLANAR / "skeleton.json", PLANAR / "targets.json",
                            "-o", out, "--report", tmp_path / "r.json")
    assert_one_error(code, stdout, err, tmp_path, out, tmp_path / "r.json",
                     says="records[3].position_error")


def dhik_process(*argv: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dhik", *map(str, argv)], text=True,
                          capture_output=kwargs.pop("capture_output", True), timeout=300,
                          check=False, **kwargs)


def test_closed_stdout_fails_before_solving(tmp_path):
    out = tmp_path / "a.json"
    done = subprocess.run([sys.executable, "-m", "dhik", "bake", str(PLANAR / "skeleton.json"),
                           str(PLANAR / "targets.json"), "-o", str(out)],
                          stdout=None, stderr=subprocess.PIPE, text=True, timeout=300,
                          check=False, preexec_fn=lambda: os.close(1))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dhik: error: ") and "stdout" in lines[0]
    assert not out.exists() and not list(tmp_path.iterdir())


def test_sigterm_during_the_write_leaves_nothing(tmp_path):
    """SIGTERM arriving while animation.json is being written (here: raised by the write
    itself) is handled like Ctrl-C: the temporary file is removed, exit 143."""
    out = tmp_path / "a.json"
    script = (
        "import os, signal, sys\n"
        "from dhik.app import jsonio\n"
        "real = jsonio.os.fsync\n"
        "def fsync(fd):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    real(fd)\n"
        "jsonio.os.fsync = fsync\n"
        "from dhik.app.cli import main\n"
        "raise SystemExit(main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-c", script, "bake", str(PLANAR / "skeleton.json"),
                           str(PLANAR / "targets.json"), "-o", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert done.stdout == "" and done.stderr.strip() == "dhik: terminated"
    assert list(tmp_path.iterdir()) == []


def test_import_urdf_never_writes_over_its_input(tmp_path, capsys):
    """`dhik import-urdf robot.urdf -o robot.urdf` would have replaced the robot."""
    urdf = tmp_path / "robot.urdf"
    urdf.write_text('<robot name="r"><link name="base"/><link name="a"/>'
                    '<joint name="j" type="revolute"><parent link="base"/><child link="a"/>'
                    '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>'
                    "</joint></robot>")
    before = urdf.read_bytes()
    code, out, err = run(capsys, "import-urdf", urdf, "-o", tmp_path / "." / "robot.urdf")
    assert_one_error(code, out, err, tmp_path, says="input")
    assert urdf.read_bytes() == before
    code, out, err = run(capsys, "import-urdf", urdf, "-o", tmp_path / "no" / "s.json")
    assert_one_error(code, out, err, tmp_path, says="no folder")
    code, out, err = run(capsys, "import-urdf", urdf, "-o", tmp_path / "s.json")
    assert code == 0 and err == "" and (tmp_path / "s.json").exists()
