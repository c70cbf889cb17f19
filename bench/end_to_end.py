"""End to end: ``dhik bake`` of a 5,000-frame arm7 trajectory as a user runs it.

``.venv/bin/python bench/end_to_end.py [--frames 5000] [--repeats 7]``

Each repeat is a fresh process (``python -m dhik bake SKELETON TARGETS -o OUT``), so the
times include interpreter start-up, imports, reading the files, interpolating the
keyframes, solving (robust method, warm-started) and writing animation.json. The
interpreter's own start-up (``python -c pass``) and the imports (``python -c "import
dhik.app.cli"``) are measured the same way, and "beyond start-up" is the bake's time minus
the interpreter's. Each command runs once untimed first, with bytecode written to a
temporary cache (``PYTHONPYCACHEPREFIX``, PYTHONDONTWRITEBYTECODE dropped), so the times
are an installed package's, not the compiling of every module on every run (0.05 s on
the 2-core VM). A last in-process run splits one bake into its phases. With the bpy
venv (``--bpy-python``), the same bake inside Blender through the add-on's operators
(bench/blender_bake.py) adds three rows. The trajectory is
workload B of bench/run.py (bench/scenes.py, seed 2): one keyframe per frame. Times in
seconds: mean, median and p99 over the repeats (p99 of few repeats is their maximum).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scenes import load_scenes  # noqa: E402

SEED_B = 2


def write_inputs(frames: int, folder: Path) -> tuple[Path, Path]:
    """arm7's skeleton.json and a targets.json with a keyframe on every frame."""
    from dhik.rotations import matrix_to_euler_xyz

    arm = next(s for s in load_scenes() if s.name == "arm7")
    skel = folder / "skeleton.json"
    skel.write_text(json.dumps(arm.skeleton))
    keys = []
    for f, t in enumerate(arm.trajectory(frames, SEED_B)):
        keys.append({"frame": f, "pos": [float(v) for v in t[:3, 3]],
                     "euler": [math.degrees(float(v)) for v in matrix_to_euler_xyz(t[:3, :3])]})
    tpath = folder / "targets.json"
    tpath.write_text(json.dumps(keys))
    return skel, tpath


def bytecode_env(cache: Path) -> dict[str, str]:
    """The environment for the timed processes: bytecode written to and read from
    ``cache``, as an installed package has it (pip compiles it at install); a shell with
    PYTHONDONTWRITEBYTECODE set would otherwise compile every module on every run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def timed(argv: list[str], repeats: int, env: dict[str, str] | None = None) -> list[float]:
    """Wall times (s) of ``repeats`` fresh processes running ``argv`` (exit 0 required),
    after one untimed run (which writes the bytecode)."""
    out = []
    subprocess.run(argv, capture_output=True, text=True, env=env)
    for _ in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        out.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return out


def stats(times: list[float]) -> tuple[float, float, float]:
    """Mean, median and p99 (nearest rank) of ``times``."""
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]
    return statistics.fmean(times), statistics.median(times), p99


def phases(skel: Path, tpath: Path, out: Path) -> dict[str, float]:
    """One bake in this process, split into its phases (s)."""
    from dhik.app.bake import simulate
    from dhik.app.formats import load_skeleton, load_targets, save_animation
    from dhik.app.trajectory import interpolate_keyframes
    from dhik.model.skeleton import Skeleton

    t = [time.perf_counter()]
    skeleton = Skeleton(load_skeleton(skel))
    keys = load_targets(tpath)
    t.append(time.perf_counter())
    targets = interpolate_keyframes(keys)
    t.append(time.perf_counter())
    result = simulate(skeleton, targets, "Tool", method="robust")
    t.append(time.perf_counter())
    save_animation(result.frames, out)
    t.append(time.perf_counter())
    names = ("read files", "interpolate keyframes", "solve (simulate)", "write animation.json")
    return {name: b - a for name, a, b in zip(names, t, t[1:], strict=False)}


def blender(python: str, skel: Path, tpath: Path, repeats: int,
            env: dict[str, str] | None = None) -> list[tuple[str, list[float]]]:
    """Rows of the same bake inside Blender (bench/blender_bake.py in the bpy venv: the
    add-on's import_skeleton + import_targets, then bake with keys and animation.json),
    timed inside the process (bpy's own start-up not counted), after one untimed run."""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats + 1):
            out = Path(tmp) / "out.json"
            proc = subprocess.run([python, str(HERE / "blender_bake.py"), str(skel), str(tpath),
                                   str(out)], capture_output=True, text=True, timeout=900,
                                  env=env)
            if proc.returncode != 0 or not out.exists():
                raise SystemExit(f"blender_bake.py: exit {proc.returncode}: "
                                 f"{proc.stderr.strip()[-500:]}")
            runs.append(json.loads(out.read_text()))
    runs = runs[1:]
    return [("Blender: import skeleton + targets", [r["import_s"] for r in runs]),
            ("Blender: bake (solve, keys, animation.json)", [r["bake_s"] for r in runs]),
            ("Blender: import + bake", [r["wall_s"] for r in runs])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--bpy-python", default=str(HERE.parent / ".venv-bpy" / "bin" / "python"),
                        help="the bpy venv's python for the Blender rows ('' to skip them)")
    parser.add_argument("--bpy-repeats", type=int, default=3)
    args = parser.parse_args(argv)
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        skel, tpath = write_inputs(args.frames, Path(tmp))
        out = Path(tmp) / "animation.json"
        env = bytecode_env(Path(tmp) / "pycache")
        rows = [
            ("interpreter start-up (python -c pass)",
             timed([py, "-c", "pass"], args.repeats, env)),
            ("imports (python -c 'import dhik.app.cli')",
             timed([py, "-c", "import dhik.app.cli"], args.repeats, env)),
            (f"dhik bake, arm7, {args.frames} frames (robust)",
             timed([py, "-m", "dhik", "bake", str(skel), str(tpath), "-o", str(out)],
                   args.repeats, env)),
        ]
        size = out.stat().st_size
        split = phases(skel, tpath, Path(tmp) / "again.json")
        same = (Path(tmp) / "again.json").read_bytes() == out.read_bytes()
        start_up = statistics.fmean(rows[0][1])
        bake = rows[2][1]
        rows.append(("dhik bake beyond interpreter start-up", [b - start_up for b in bake]))
        if args.bpy_python and Path(args.bpy_python).exists():
            rows.extend(blender(args.bpy_python, skel, tpath, args.bpy_repeats, env))
    width = max(len(r[0]) for r in rows)
    print(f"{args.repeats} repeats ({args.bpy_repeats} in Blender), fresh process each; "
          "seconds")
    print(f"| {'what':<{width}} | mean   | median | p99    |")
    print(f"|{'-' * (width + 2)}|--------|--------|--------|")
    for name, times in rows:
        mean, median, p99 = stats(times)
        print(f"| {name:<{width}} | {mean:.3f}  | {median:.3f}  | {p99:.3f}  |")
    print(f"\nanimation.json: {size / 1e6:.2f} MB; in-process phases of one bake "
          f"(s; output {'identical' if same else 'DIFFERENT'} to the CLI's):")
    for name, seconds in split.items():
        print(f"  {name:<24} {seconds:.3f}")
    _ = np  # numpy: imported by scenes; kept explicit for readers
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
