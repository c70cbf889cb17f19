"""A bake inside Blender through the real add-on, timed: run in the bpy venv.

Usage: ``.venv-bpy/bin/python bench/blender_bake.py skeleton.json targets.json out.json
[method]``. In a fresh factory scene: ``dhik.import_skeleton``, ``dhik.import_targets``,
then ``dhik.bake`` with ``animation_path`` set (keys on the armature and animation.json
written). Writes ``{"wall_s", "import_s", "bake_s", "summary"}`` to out.json (seconds of
wall time; ``wall_s`` covers both imports and the bake).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    import bpy

    skeleton, targets, out = (Path(a) for a in argv[:3])
    method = argv[3] if len(argv) > 3 else "robust"
    spec = importlib.util.spec_from_file_location(
        "dhik_blender", ROOT / "__init__.py", submodule_search_locations=[str(ROOT)])
    assert spec is not None and spec.loader is not None
    addon = importlib.util.module_from_spec(spec)
    sys.modules["dhik_blender"] = addon
    spec.loader.exec_module(addon)
    addon.register()
    try:
        bpy.ops.wm.read_homefile(use_empty=True, use_factory_startup=True)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            bpy.ops.dhik.import_skeleton(filepath=str(skeleton))
            bpy.ops.dhik.import_targets(filepath=str(targets))
            t1 = time.perf_counter()
            settings = bpy.context.scene.dhik
            settings.animation_path = str(Path(tmp) / "animation.json")
            if hasattr(settings, "method"):
                settings.method = method
            bpy.ops.dhik.bake()
            t2 = time.perf_counter()
            frames = len(json.loads(Path(settings.animation_path).read_text())["frames"])
        out.write_text(json.dumps({"wall_s": t2 - t0, "import_s": t1 - t0, "bake_s": t2 - t1,
                                   "frames": frames, "summary": settings.result_summary}))
    finally:
        addon.unregister()  # bpy as a module hangs at exit with callables registered
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
