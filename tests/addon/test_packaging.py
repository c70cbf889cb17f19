"""The extension zip: built and validated by Blender's tool, installed headless, operators run.

Installing needs BLENDER_USER_RESOURCES set before bpy is imported, and bpy can be
imported only once per process, so the install runs in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from addon_helpers import MIXED_POSES, MIXED_SKELETON, reachable_targets, write_json

ROOT = Path(__file__).resolve().parents[2]
VERSION = next(line.split('"')[1] for line in (ROOT / "core" / "__init__.py").read_text()
               .splitlines() if line.startswith("__version__"))  # the one version source


@pytest.fixture(scope="module")
def built_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_zip.py"), "--output-dir", str(out)],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    path = Path(proc.stdout.strip().splitlines()[-1])
    assert path == out / f"dhik-{VERSION}.zip"
    return path


def test_zip_holds_the_extension_only(built_zip):
    names = zipfile.ZipFile(built_zip).namelist()
    assert {"blender_manifest.toml", "__init__.py", "core/app/bake.py", "core/solver/dls.py",
            "core/model/skeleton.py",
            "dhik_addon/__init__.py", "dhik_addon/operators_bake.py"} <= set(names)
    for banned in ("tests/", "tools/", "bench/", "docs/", "sample_scenes/", ".venv", "dist/",
                   "Makefile", "pyproject.toml", "__pycache__", ".egg-info"):
        assert not any(banned in n for n in names), banned


INSTALL_SCRIPT = textwrap.dedent('''
    import json, sys
    import bpy
    zip_path, skeleton, targets, anim = sys.argv[1:5]
    res = bpy.ops.extensions.package_install_files(
        filepath=zip_path, repo="user_default", enable_on_install=True)
    out = {"install": sorted(res), "module": "bl_ext.user_default.dhik" in sys.modules}
    out["import"] = sorted(bpy.ops.dhik.import_skeleton(filepath=skeleton))
    out["targets"] = sorted(bpy.ops.dhik.import_targets(filepath=targets))
    bpy.context.scene.dhik.animation_path = anim
    out["bake"] = sorted(bpy.ops.dhik.bake())
    out["summary"] = bpy.context.scene.dhik.result_summary
    print("RESULT " + json.dumps(out))
''')


def test_zip_installs_and_runs(built_zip, tmp_path, core):
    skel = write_json(tmp_path / "s" / "skeleton.json", MIXED_SKELETON)
    keys = reachable_targets(core, MIXED_SKELETON, MIXED_POSES, "Tool", [0, 5, 9])
    tgt = write_json(tmp_path / "s" / "targets.json", keys)
    anim = tmp_path / "animation.json"
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "user"))
    proc = subprocess.run(
        [sys.executable, "-c", INSTALL_SCRIPT, str(built_zip), str(skel), str(tgt), str(anim)],
        capture_output=True, text=True, check=False, env=env, cwd=tmp_path, timeout=300,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["install"] == ["FINISHED"] and out["module"]
    assert out["import"] == out["targets"] == out["bake"] == ["FINISHED"]
    assert out["summary"].startswith("dhik bake: 10 frames")
    assert len(core.formats.load_animation(anim)) == 10
    assert (tmp_path / "user" / "extensions" / "user_default" / "dhik" / "dhik_addon").is_dir()


def test_demo_bake_script(tmp_path, core):
    skel = write_json(tmp_path / "demo" / "skeleton.json", MIXED_SKELETON)
    keys = reachable_targets(core, MIXED_SKELETON, MIXED_POSES, "Tool", [0, 4, 8])
    write_json(tmp_path / "demo" / "targets.json", keys)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "demo_bake.py"), str(skel.parent), str(out)],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = [ln for ln in proc.stdout.splitlines() if ln.startswith("dhik bake: ")]
    assert summary and summary[-1].startswith("dhik bake: 9 frames")
    assert (out / "demo.blend").is_file() and (out / "animation.json").is_file()
    assert len(core.formats.load_animation(out / "animation.json")) == 9


def test_demo_bake_reports_missing_scene(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "demo_bake.py"), str(tmp_path / "nope"),
         str(tmp_path / "out")],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert proc.returncode == 2 and "does not exist" in proc.stderr
