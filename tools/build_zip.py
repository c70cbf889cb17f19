"""Build dist/dhik-<version>.zip with Blender's own extension tool, then validate it.

Usage: ``python tools/build_zip.py [--output-dir dist]`` from any Python >= 3.11 that
has the ``bpy`` wheel installed (the tool is found inside it, without importing bpy).
The manifest is validated first, the zip is built with Blender's tag list
(``--valid-tags``), and the zip itself is validated again. Prints the zip's path.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bpy_scripts_dir() -> Path:
    """``.../bpy/<major.minor>/scripts`` of the installed bpy wheel (bpy is not imported)."""
    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("build_zip: the bpy wheel is not installed (make .venv-bpy/.ok)")
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*/scripts"))
    if not found:
        raise SystemExit("build_zip: no scripts directory inside the bpy wheel")
    return found[-1]


def blender_ext_tool() -> tuple[Path, Path]:
    """Paths of ``blender_ext.py`` and of Blender's ``tags.py``."""
    scripts = bpy_scripts_dir()
    tool = scripts / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"
    tags = scripts / "modules" / "_bpy_internal" / "extensions" / "tags.py"
    for p in (tool, tags):
        if not p.is_file():
            raise SystemExit(f"build_zip: missing {p}")
    return tool, tags


def manifest_version(root: Path = ROOT) -> tuple[str, str]:
    """``(id, version)`` from blender_manifest.toml."""
    with open(root / "blender_manifest.toml", "rb") as fh:
        data = tomllib.load(fh)
    return str(data["id"]), str(data["version"])


def run_tool(*args: str) -> None:
    """Run blender_ext.py with ``args``; exit with its output on failure."""
    tool, tags = blender_ext_tool()
    cmd = [sys.executable, str(tool), *args, "--valid-tags", str(tags)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"build_zip: {' '.join(args[:1])} failed:\n{proc.stdout}{proc.stderr}")


def build(output_dir: Path, root: Path = ROOT) -> Path:
    """Validate the source, build the zip into ``output_dir``, validate the zip; its path."""
    ext_id, version = manifest_version(root)
    output_dir.mkdir(parents=True, exist_ok=True)
    zip_path = output_dir / f"{ext_id}-{version}.zip"
    zip_path.unlink(missing_ok=True)
    run_tool("validate", str(root))
    run_tool("build", "--source-dir", str(root), "--output-dir", str(output_dir))
    if not zip_path.is_file():
        raise SystemExit(f"build_zip: Blender's tool did not write {zip_path}")
    run_tool("validate", str(zip_path))
    return zip_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=ROOT / "dist")
    args = parser.parse_args(argv)
    print(build(args.output_dir.resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
