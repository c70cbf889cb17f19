"""Fixtures for the add-on tests: real bpy, the repo root registered as ``dhik_blender``.

bpy can be imported once per process, so the add-on is registered once per session
and every test starts from an empty factory scene. The extension's own copy of the
core (``dhik_blender.core``) is used for comparisons, so its classes are the ones the
add-on raises and returns. Without bpy (the core-only venv) these tests are skipped.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALIAS = "dhik_blender"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from addon_helpers import MIXED_POSES, MIXED_SKELETON, reachable_targets, write_json  # noqa: E402

BPY_FREE = {"test_key_curves.py"}  # tests of bpy-free add-on modules, loaded by path

if importlib.util.find_spec("bpy") is None:
    collect_ignore = [
        str(p) for p in Path(__file__).resolve().parent.glob("test_*.py")
        if p.name not in BPY_FREE
    ]


def _load_root() -> ModuleType:
    if ALIAS in sys.modules:
        return sys.modules[ALIAS]
    spec = importlib.util.spec_from_file_location(
        ALIAS, ROOT / "__init__.py", submodule_search_locations=[str(ROOT)]
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[ALIAS] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def addon() -> Iterator[ModuleType]:
    """The extension root, registered once for the session."""
    mod = _load_root()
    mod.register()
    yield mod
    mod.unregister()


@pytest.fixture(scope="session")
def core(addon: ModuleType) -> SimpleNamespace:
    """The extension's copy of the core package."""
    for name in ("app.formats", "app.bake", "app.trajectory", "rotations"):
        importlib.import_module(f"{ALIAS}.core.{name}")
    pkg = sys.modules[f"{ALIAS}.core"]
    app = sys.modules[f"{ALIAS}.core.app"]
    # the modules the tests compare with, by their short names
    return SimpleNamespace(Skeleton=pkg.Skeleton, rotations=pkg.rotations,
                           formats=app.formats, bake=app.bake, trajectory=app.trajectory)


@pytest.fixture(autouse=True)
def fresh_scene(request: pytest.FixtureRequest) -> None:
    """An empty factory scene for every test (not for the bpy-free modules' tests)."""
    if Path(str(request.node.fspath)).name in BPY_FREE:
        return
    request.getfixturevalue("addon")
    import bpy

    bpy.ops.wm.read_homefile(use_empty=True, use_factory_startup=True)


@pytest.fixture
def mixed_files(tmp_path: Path, core: Any) -> tuple[Path, Path]:
    """``(skeleton.json, targets.json)`` of the mixed skeleton, targets on frames 0..12."""
    skel = write_json(tmp_path / "mixed" / "skeleton.json", MIXED_SKELETON)
    keys = reachable_targets(core, MIXED_SKELETON, MIXED_POSES, "Tool", [0, 6, 12])
    tgt = write_json(tmp_path / "mixed" / "targets.json", keys)
    return skel, tgt
