"""Headless demo: import a sample scene with the real add-on, bake it, save the results.

Usage: ``.venv-bpy/bin/python tools/demo_bake.py sample_scenes/arm7 out/``, or in a
Blender (the script's arguments after ``--``, Blender's convention):
``blender -b --python-exit-code 2 -P tools/demo_bake.py -- sample_scenes/arm7 out/``

In a fresh factory scene it runs ``dhik.import_skeleton`` and ``dhik.import_targets``
on ``<scene>/skeleton.json`` and ``<scene>/targets.json``, then ``dhik.bake`` (through
``execute``, as scripts do), and writes ``<out>/<scene>.blend`` and
``<out>/animation.json``. It prints the core's bake summary line (which says how many
frames converged). Exit status: 0 when the bake ran, 2 on bad input.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
ALIAS = "dhik_blender"  # not "dhik": that name is the pip package of the core


def load_addon() -> ModuleType:
    """Import the repository root as the extension package and register it."""
    spec = importlib.util.spec_from_file_location(
        ALIAS, ROOT / "__init__.py", submodule_search_locations=[str(ROOT)]
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[ALIAS] = mod
    spec.loader.exec_module(mod)
    mod.register()
    return mod


def run(scene_dir: Path, out_dir: Path) -> int:
    import bpy

    for name in ("skeleton.json", "targets.json"):
        if not (scene_dir / name).is_file():
            print(f"demo_bake: error: {scene_dir / name} does not exist", file=sys.stderr)
            return 2
    addon = load_addon()
    try:
        return _bake(bpy, scene_dir, out_dir)
    finally:
        # bpy 4.5 as a module hangs at interpreter exit while Python callables (menu
        # entries, property poll functions) are still registered.
        addon.unregister()


def _bake(bpy: ModuleType, scene_dir: Path, out_dir: Path) -> int:
    """Import, bake and save in a fresh factory scene; the exit status."""
    bpy.ops.wm.read_homefile(use_empty=True, use_factory_startup=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        bpy.ops.dhik.import_skeleton(filepath=str(scene_dir / "skeleton.json"))
        bpy.ops.dhik.import_targets(filepath=str(scene_dir / "targets.json"))
        settings = bpy.context.scene.dhik
        settings.animation_path = str(out_dir / "animation.json")
        bpy.ops.dhik.bake()
    except RuntimeError as err:  # an operator's ERROR report
        print(f"demo_bake: error: {str(err).strip()}", file=sys.stderr)
        return 2
    blend = out_dir / f"{scene_dir.resolve().name}.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    print(settings.result_summary)
    print(f"demo_bake: wrote {blend} and {settings.animation_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Bake a sample scene headless in Blender.")
    parser.add_argument("scene", type=Path, help="directory with skeleton.json and targets.json")
    parser.add_argument("out", type=Path, help="output directory")
    if argv is None and "--" in sys.argv:  # blender [options] -P demo_bake.py -- SCENE OUT
        argv = sys.argv[sys.argv.index("--") + 1:]
    args = parser.parse_args(argv)
    return run(args.scene, args.out)


if __name__ == "__main__":
    sys.exit(main())
