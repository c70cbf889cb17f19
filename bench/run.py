"""Run the IK benchmark: ``bench/run.sh`` (or ``bench/.venv/bin/python bench/run.py``).

Workloads per scene (bench/scenes.py): A, cold solves of random reachable poses, each
from the T-pose; B, a smooth trajectory, each frame warm-started from the previous
frame's answer (frame 0 from the T-pose); C, ``dhik bake`` of B end to end through the
CLI (reading skeleton.json/targets.json, writing animation.json). Every answer is
re-checked with bench/refk.py. Success: pose error below the threshold AND every joint
within its limits. Times cover the solver call only (A, B) and are the median over
``--repeats`` runs of each run's median and mean. Writes bench/results/latest.json and
latest.md and prints the table; then bench/side_by_side.py's one table (dhik, rtb and
Blender's IK on arm7 and on the character rigs, in this run), also in latest.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from methods import METHODS, Method  # noqa: E402
from refk import pose_errors  # noqa: E402
from scenes import Scene, load_scenes  # noqa: E402

SPEC_TOL = (1e-3, 1e-1)  # m, rad
TIGHT_TOL = (1e-5, 1e-4)
SEED_A, SEED_B = 12345, 2
BAKE_METHODS = ("spec", "robust")  # workload C rows: one per `dhik bake --method`
FLIP_SEEDS = tuple(range(100, 110))  # arm7: ten random smooth trajectories for the flips


def check(scene: Scene, values: dict[str, Any], target: np.ndarray) -> dict[str, Any]:
    """Our own verdict on one answer: errors by refk FK, limits, both success levels."""
    try:
        reached = scene.chain.fk(values, scene.effector)
        pe, oe = pose_errors(target, reached)
        ok_limits = scene.chain.within_limits(values)
    except (KeyError, ValueError, TypeError):
        pe = oe = float("inf")
        ok_limits = False
    finite = np.isfinite(pe) and np.isfinite(oe)
    return {
        "pe": pe, "oe": oe, "limits": ok_limits,
        "spec": bool(finite and ok_limits and pe < SPEC_TOL[0] and oe < SPEC_TOL[1]),
        "tight": bool(finite and ok_limits and pe < TIGHT_TOL[0] and oe < TIGHT_TOL[1]),
        "loose": bool(finite and pe < SPEC_TOL[0] and oe < SPEC_TOL[1]),
    }


def jumps(scene: Scene, answers: list[dict[str, Any]], truth: np.ndarray) -> dict[str, Any]:
    """Flips of a trajectory's answers against the true channel path (rad, m): frames
    (from frame 2 on: frame 1 may come from a cold frame 0) where a channel moves more
    than twice its own largest true step (``per_channel``), or more than twice the
    largest true step of any channel (``overall``), and the largest such ratio."""
    got = np.array([scene.channels_of(v) for v in answers])
    true_step = np.abs(np.diff(truth, axis=0)).max(axis=0)
    steps = np.abs(np.diff(got[1:], axis=0))
    per = (steps > 2.0 * true_step).any(axis=1)
    overall = steps.max(axis=1) > 2.0 * true_step.max()
    return {"per_channel": int(per.sum()), "overall": int(overall.sum()),
            "max_ratio": float((steps / true_step).max()) if steps.size else 0.0,
            "max_overall_ratio": float(steps.max() / true_step.max()) if steps.size else 0.0}


def run_workload(method: Method, scene: Scene, targets: list[np.ndarray], warm: bool,
                 repeats: int, truth: np.ndarray | None = None) -> dict[str, Any]:
    """Solve ``targets`` cold (A) or as a warm-started trajectory (B; ``truth``: its true
    channel path, for the flip count)."""
    answers: list[dict[str, Any]] = []
    medians, means, p99s = [], [], []
    checks: list[dict[str, Any]] = []
    iters: list[int] = []
    first: list[float] = []
    if warm and method.whole_trajectory:  # one call for all frames: per-frame average
        for run in range(repeats):
            method.start()
            t0 = time.perf_counter()
            solved = method.trajectory(targets)
            per_frame = (time.perf_counter() - t0) / len(targets)
            own = method.trajectory_times(solved)  # per frame, when the method records it
            medians.append(statistics.median(own or [per_frame]) * 1e6)
            means.append(per_frame * 1e6)
            p99s.append(float(np.percentile(own or [per_frame], 99)) * 1e6)
            if run == 0:
                values, iters = method.trajectory_answers(solved)
                checks = [check(scene, v, t) for v, t in zip(values, targets, strict=True)]
                first = own or [per_frame] * len(targets)
                answers = values
        repeats = 0
    for run in range(repeats):
        times = []
        method.start()
        for i, target in enumerate(targets):
            if not warm:
                method.start()
            t0 = time.perf_counter()
            it = method.solve(target, warm and i > 0)
            times.append(time.perf_counter() - t0)
            if run == 0:
                answer = method.values()
                checks.append(check(scene, answer, target))
                if warm:
                    answers.append(answer)
                if it is not None:
                    iters.append(it)
            elif warm:
                method.values()  # same untimed work as in run 0
        first = first or times
        medians.append(statistics.median(times) * 1e6)
        means.append(statistics.mean(times) * 1e6)
        p99s.append(float(np.percentile(times, 99)) * 1e6)
    n = len(checks)
    good = [t * 1e6 for t, c in zip(first, checks, strict=True) if c["spec"]]
    if warm and truth is not None and answers:
        flips = jumps(scene, answers, truth)
    else:
        flips = None
    return {
        "jumps": flips,
        "n": n,
        "success_spec": sum(c["spec"] for c in checks) / n,
        "success_tight": sum(c["tight"] for c in checks) / n,
        "loose_ignoring_limits": sum(c["loose"] for c in checks) / n,
        "median_us": statistics.median(medians),
        "mean_us": statistics.median(means),
        "p99_us": statistics.median(p99s) if p99s else None,
        "median_iterations": statistics.median(iters) if iters else None,
        "median_pos_err": statistics.median(c["pe"] for c in checks),
        "median_rot_err": statistics.median(c["oe"] for c in checks),
        "median_us_successful": statistics.median(good) if good else None,
    }


def write_scene_files(scene: Scene, targets: list[np.ndarray], folder: Path) -> tuple[Path, Path]:
    """skeleton.json and targets.json (one keyframe per frame, Euler XYZ in degrees)."""
    from scipy.spatial.transform import Rotation

    skel = folder / "skeleton.json"
    skel.write_text(json.dumps(scene.skeleton))
    keys = []
    for f, t in enumerate(targets):
        e = np.degrees(Rotation.from_matrix(t[:3, :3]).as_euler("xyz"))
        keys.append({"frame": f, "pos": [float(v) for v in t[:3, 3]],
                     "euler": [float(v) for v in e]})
    tpath = folder / "targets.json"
    tpath.write_text(json.dumps(keys))
    return skel, tpath


def run_bake(scene: Scene, targets: list[np.ndarray], method: str = "spec") -> dict[str, Any]:
    """Workload C: ``dhik bake --method METHOD`` through the CLI in-process (its summary
    line goes to stdout); frames/s and refk checks of animation.json."""
    import contextlib
    import io

    from dhik.app.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        skel, tpath = write_scene_files(scene, targets, Path(tmp))
        out = Path(tmp) / "animation.json"
        argv = ["bake", str(skel), str(tpath), "-o", str(out), "--effector", scene.effector]
        err = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stderr(err):
            status = main([*argv, "--method", method])
            if status != 0 and method == "spec" and "--method" in err.getvalue():
                t0 = time.perf_counter()  # a CLI without --method: its bake is the spec's
                status = main(argv)
        wall = time.perf_counter() - t0
        if status != 0 or not out.exists():
            return {"unavailable": f"dhik bake --method {method}: exit {status}: "
                    + err.getvalue().strip()[-200:]}
        frames = json.loads(out.read_text())["frames"] if out.exists() else []
    checks = []
    for fr, target in zip(frames, targets, strict=False):
        vals = {}
        for name, v in fr["joints"].items():
            vals[name] = v.get("angle", v.get("displacement", v.get("quaternion")))
        checks.append(check(scene, vals, target))
    n = len(targets)
    return {"n": n, "status": status, "wall_s": wall, "frames_per_s": n / wall,
            "success_spec": sum(c["spec"] for c in checks) / n,
            "success_tight": sum(c["tight"] for c in checks) / n,
            "loose_ignoring_limits": sum(c["loose"] for c in checks) / n}


def run_blender(scene: Scene, a: list[np.ndarray], b: list[np.ndarray], python: str,
                limit_a: int) -> list[dict[str, Any]]:
    """Blender's IK constraint (Legacy, iTaSC) in the bpy venv, as a subprocess."""
    if not Path(python).exists():
        return [{"method": "Blender IK (bpy)", "unavailable": f"no bpy venv at {python}"}]
    with tempfile.TemporaryDirectory() as tmp:
        inp, outp = Path(tmp) / "in.json", Path(tmp) / "out.json"
        inp.write_text(json.dumps({
            "skeleton": scene.skeleton, "effector": scene.effector,
            "A": [t.tolist() for t in a[:limit_a]], "B": [t.tolist() for t in b]}))
        proc = subprocess.run([python, str(HERE / "blender_ik.py"), str(inp), str(outp)],
                              capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0 or not outp.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return [{"method": "Blender IK (bpy)", "unavailable": " | ".join(tail)}]
        data = json.loads(outp.read_text())
    rows = []
    for cfg in data["configs"]:
        for wl, targets in (("A", a[:limit_a]), ("B", b)):
            res = cfg.get(wl)
            if res is None:
                continue
            checks = [check(scene, v, t) for v, t in zip(res["values"], targets, strict=True)]
            n = len(checks)
            rows.append({
                "method": f"Blender {cfg['name']}", "workload": wl, "n": n,
                "success_spec": sum(c["spec"] for c in checks) / n,
                "success_tight": sum(c["tight"] for c in checks) / n,
                "loose_ignoring_limits": sum(c["loose"] for c in checks) / n,
                "median_us": statistics.median(res["times_us"]),
                "mean_us": statistics.mean(res["times_us"]),
                "p99_us": float(np.percentile(res["times_us"], 99)),
                "muted_update_us": res.get("muted_us"),
                "median_iterations": None,
                "median_pos_err": statistics.median(c["pe"] for c in checks),
                "median_rot_err": statistics.median(c["oe"] for c in checks),
                "note": "; ".join(x for x in (cfg.get("note", ""), f"first {limit_a} poses"
                                              if wl == "A" and limit_a < len(a) else "") if x),
            })
    return rows


def run_blender_bake(scene: Scene, long: list[np.ndarray], block: int, python: str
                     ) -> dict[str, Any]:  # fmt: skip
    """A ``block``-frame and a ``len(long)``-frame bake inside Blender through the add-on's
    operators (bench/blender_bake.py in the bpy venv): wall times (s) and their ratio."""
    if not Path(python).exists():
        return {"unavailable": f"no bpy venv at {python}"}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, targets in (("small", long[:block]), ("large", long)):
            folder = Path(tmp) / key
            folder.mkdir()
            skel, tpath = write_scene_files(scene, targets, folder)
            res = folder / "out.json"
            proc = subprocess.run([python, str(HERE / "blender_bake.py"), str(skel), str(tpath),
                                   str(res)], capture_output=True, text=True, timeout=600)
            if proc.returncode != 0 or not res.exists():
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
                return {"unavailable": " | ".join(tail)}
            out[key] = json.loads(res.read_text())
    out["ratio"] = out["large"]["wall_s"] / out["small"]["wall_s"]
    return out


def run_end_to_end(frames: int, repeats: int) -> dict[str, Any]:
    """``dhik bake`` of ``frames`` arm7 frames in fresh processes (bench/end_to_end.py):
    mean, median and p99 seconds of start-up, imports, the bake, and the bake beyond
    start-up."""
    from end_to_end import stats, timed, write_inputs

    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        skel, tpath = write_inputs(frames, Path(tmp))
        out = Path(tmp) / "animation.json"
        start = timed([py, "-c", "pass"], repeats)
        imports = timed([py, "-c", "import dhik.app.cli"], repeats)
        bake = timed([py, "-m", "dhik", "bake", str(skel), str(tpath), "-o", str(out)], repeats)
    beyond = [b - statistics.fmean(start) for b in bake]
    return {"frames": frames, "repeats": repeats, "rows": {
        "interpreter start-up": stats(start), "imports": stats(imports),
        "dhik bake": stats(bake), "dhik bake beyond start-up": stats(beyond)}}


def random_trajectory_flips(scene: Scene, frames: int, seeds: tuple[int, ...]
                            ) -> list[dict[str, Any]]:  # fmt: skip
    """dhik robust (``path.solve_path``, tight tolerances) on random smooth
    trajectories: converged frames and :func:`jumps` per seed."""
    from methods import DhikRobust

    method = DhikRobust("dhik robust")
    method.setup(scene)
    out = []
    for seed in seeds:
        truth = scene.trajectory_channels(frames, seed)
        targets = [scene.chain.fk(scene.values(x), scene.effector) for x in truth]
        method.start()
        t0 = time.perf_counter()
        solved = method.trajectory(targets)
        wall = time.perf_counter() - t0
        values, _ = method.trajectory_answers(solved)
        checks = [check(scene, v, t) for v, t in zip(values, targets, strict=True)]
        out.append({"seed": seed, "frames": frames, "wall_s": wall,
                    "tight": sum(c["tight"] for c in checks),
                    **jumps(scene, values, truth)})
    return out


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "machine": platform.machine(),
           "cpus": str(os.cpu_count())}
    for pkg in ("numpy", "scipy", "ikpy", "pin", "roboticstoolbox-python", "dhik"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def fmt(v: Any, kind: str) -> str:
    if v is None:
        return "—"
    if kind == "pct":
        return f"{100 * v:.1f}%"
    if kind == "us":
        return f"{v:.0f}"
    if kind == "err":
        return f"{v:.1e}"
    return str(v)


def markdown(result: dict[str, Any]) -> str:
    head = ("| scene | method | workload | n | success 1e-3 m / 0.1 rad | success 1e-5 m / "
            "1e-4 rad | loose, ignoring limits | median µs | mean µs | p99 µs | median µs, "
            "successful solves | median iters | frames/s (C) | median pos err | median rot err |")
    lines = [head, "|" + "---|" * 15]
    for r in result["rows"]:
        if "unavailable" in r:
            lines.append(f"| {r.get('scene', '')} | {r['method']} | — | — | unavailable: "
                         f"{r['unavailable']} | | | | | | | | | | |")
            continue
        n = f"{r['n']}" + (f" ({r['note']})" if r.get("note") else "")
        lines.append(
            f"| {r['scene']} | {r['method']} | {r['workload']} | {n} | "
            f"{fmt(r['success_spec'], 'pct')} | {fmt(r['success_tight'], 'pct')} | "
            f"{fmt(r['loose_ignoring_limits'], 'pct')} | {fmt(r.get('median_us'), 'us')} | "
            f"{fmt(r.get('mean_us'), 'us')} | {fmt(r.get('p99_us'), 'us')} | "
            f"{fmt(r.get('median_us_successful'), 'us')} | "
            f"{fmt(r.get('median_iterations'), '')} | "
            f"{fmt(r.get('frames_per_s'), 'us')} | {fmt(r.get('median_pos_err'), 'err')} | "
            f"{fmt(r.get('median_rot_err'), 'err')} |")
    for lin in result.get("linearity") or []:
        lines.append("")
        runs = len(lin.get("runs_large", [])) or 1
        spread = (f"; the {lin['frames_large']}-frame bakes mean {lin['mean_large']:.2f}, "
                  f"p99 {lin['p99_large']:.2f} s" if "mean_large" in lin else "")
        lines.append(f"Bake cost linear in frames (`dhik bake --method {lin['method']}`, "
                     f"{lin['scene']}, a {lin['frames_small']}-frame loop baked once and "
                     f"{lin['frames_large'] // lin['frames_small']} times over, median of "
                     f"{runs} runs, the methods in turn): "
                     f"{lin['frames_small']} frames {lin['s_small']:.2f} s, "
                     f"{lin['frames_large']} frames {lin['s_large']:.2f} s; time ratio "
                     f"{lin['ratio']:.2f} (per-frame cost ratio {lin['per_frame_ratio']:.2f})"
                     f"{spread}.")
    lins = {lin["method"]: lin for lin in result.get("linearity") or []}
    a, b = lins.get("robust", {}), lins.get("spec", {})
    if "mean_large" in a and "mean_large" in b:
        lines += ["", f"The {a['frames_large']}-frame loop, robust against spec (issue 17's "
                  f"goal: 0.25x): {a['s_large']:.2f} s against {b['s_large']:.2f} s, "
                  f"{a['s_large'] / b['s_large']:.2f}x (medians); "
                  f"{a['mean_large'] / b['mean_large']:.2f}x (means)."]
    if "s_drift" in a and "s_drift" in b:
        lines += ["", f"A {a['frames_large']}-frame clip of the same motion that never "
                  f"repeats (a period of {a['frames_small']} + 1/pi frames: searched whole), "
                  f"robust against spec: {a['s_drift']:.2f} s against {b['s_drift']:.2f} s, "
                  f"{a['s_drift'] / b['s_drift']:.2f}x (medians); "
                  f"{a['mean_drift'] / b['mean_drift']:.2f}x (means)."]
    flips = [(r["scene"], r["method"], r["jumps"]) for r in result["rows"]
             if r.get("jumps") is not None]
    if flips:
        lines += ["", "Flips on B (frames 2..: frames where a joint moves more than twice its own "
                  "largest true per-frame step / more than twice the largest true step of any "
                  "joint; the largest ratios):", ""]
        for scene, method, j in flips:
            lines.append(f"- {scene}, {method}: {j['per_channel']} / {j['overall']} frames; "
                         f"ratio {j['max_ratio']:.1f} / {j['max_overall_ratio']:.1f}")
    if result.get("flips"):
        lines += ["", "dhik robust on ten random smooth arm7 trajectories (seeds "
                  f"{result['flips'][0]['seed']}..{result['flips'][-1]['seed']}, "
                  f"{result['flips'][0]['frames']} frames, 1e-5 m / 1e-4 rad), converged "
                  "frames and flips as above:", ""]
        for f in result["flips"]:
            lines.append(f"- seed {f['seed']}: {f['tight']}/{f['frames']} converged, "
                         f"{f['per_channel']} / {f['overall']} frames, ratio "
                         f"{f['max_ratio']:.1f} / {f['max_overall_ratio']:.1f}, "
                         f"{1e6 * f['wall_s'] / f['frames']:.0f} µs per frame")
    e2e = result.get("end_to_end")
    if e2e:
        lines += ["", f"`dhik bake` end to end (bench/end_to_end.py: arm7, {e2e['frames']} "
                  f"frames, a fresh process each of {e2e['repeats']} repeats; seconds, "
                  "mean / median / p99):", ""]
        for name, (mean, median, p99) in e2e["rows"].items():
            lines.append(f"- {name}: {mean:.3f} / {median:.3f} / {p99:.3f}")
    bb = result.get("blender_bake")
    if bb:
        lines.append("")
        if "unavailable" in bb:
            lines.append(f"Bake inside Blender: unavailable: {bb['unavailable']}")
        else:
            lines.append(
                "Bake inside Blender (bench/blender_bake.py: the add-on's import_skeleton, "
                "import_targets and bake with animation_path set, robust method, the panel's "
                f"tolerances; arm7): {bb['small']['frames']} frames {bb['small']['wall_s']:.2f} s"
                f" wall (imports {bb['small']['import_s']:.2f} s), {bb['large']['frames']} "
                f"frames {bb['large']['wall_s']:.2f} s; ratio {bb['ratio']:.2f}.")
    lines.append("")
    lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poses", type=int, default=1000, help="workload A size")
    parser.add_argument("--frames", type=int, default=2000, help="workload B/C length")
    parser.add_argument("--repeats", type=int, default=3, help="timing runs (median taken)")
    parser.add_argument("--bpy-python", default=str(HERE.parent / ".venv-bpy" / "bin" /
                                                     "python"))
    parser.add_argument("--blender-poses", type=int, default=300)
    parser.add_argument("--scenes", nargs="*", default=None)
    parser.add_argument("--methods", nargs="*", default=None, help="substring filter")
    parser.add_argument("--no-blender", action="store_true")
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--no-side-by-side", action="store_true",
                        help="leave out bench/side_by_side.py's table (arm7 and characters)")
    parser.add_argument("--clips", type=int, default=10, help="clips per character scene")
    args = parser.parse_args(argv)

    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    scenes = [s for s in load_scenes() if args.scenes is None or s.name in args.scenes]
    for scene in scenes:
        a = scene.poses(args.poses, SEED_A)
        truth = scene.trajectory_channels(args.frames, SEED_B)
        b = [scene.chain.fk(scene.values(x), scene.effector) for x in truth]
        for method in METHODS:
            if args.methods and not any(m in method.name for m in args.methods):
                continue
            if method.only is not None and scene.name not in method.only:
                continue
            why = method.available()
            if why is not None:
                rows.append({"scene": scene.name, "method": method.name, "unavailable": why})
                continue
            method.setup(scene)
            for wl, targets, warm in (("A", a, False), ("B", b, True)):
                note = ""
                if not warm and method.cold_limit and method.cold_limit < len(targets):
                    targets = targets[: method.cold_limit]
                    note = f"first {method.cold_limit} poses: slow"
                reps = min(method.repeats or args.repeats, args.repeats)
                if reps < args.repeats:
                    note = "; ".join(x for x in (note, f"{reps} timing run") if x)
                t0 = time.perf_counter()
                res = run_workload(method, scene, targets, warm, reps, truth if warm else None)
                res.update(scene=scene.name, method=method.name, workload=wl, note=note)
                rows.append(res)
                print(f"[{time.perf_counter() - started:6.0f} s] {scene.name} {method.name} "
                      f"{wl}: {100 * res['success_spec']:.1f}% / {100 * res['success_tight']:.1f}%"
                      f" median {res['median_us']:.0f} us ({time.perf_counter() - t0:.0f} s)",
                      flush=True)
        for bake_method in BAKE_METHODS:
            bake = run_bake(scene, b, bake_method)
            bake.update(scene=scene.name, method=f"dhik bake --method {bake_method} (CLI, "
                        "default tolerances)", workload="C", median_iterations=None)
            rows.append(bake)
            print(f"[{time.perf_counter() - started:6.0f} s] {scene.name} bake {bake_method} C: "
                  f"{bake.get('frames_per_s', 0):.0f} frames/s", flush=True)
        if scene.name == "arm7" and not args.no_blender:
            for r in run_blender(scene, a, b, args.bpy_python, args.blender_poses):
                r.setdefault("scene", scene.name)
                rows.append(r)
            print(f"[{time.perf_counter() - started:6.0f} s] blender done", flush=True)

    linearity = []
    arm = next((s for s in scenes if s.name == "arm7"), None)
    if arm is not None:
        # the same 1,000-frame loop baked once and five times over (5,000 frames)
        block = args.frames // 2
        long = arm.trajectory(5 * block, SEED_B, block=block)
        # the same motion a frame, never repeating (a period of block + 1/pi frames): a
        # loop is planned over two cycles and repeated (solver/path/cycles.py), this is not
        drift = arm.trajectory(5 * block, SEED_B, block=block + 1 / math.pi)
        # every method's bakes once per repeat, the methods in turn: one sample each is
        # at the mercy of the machine's moment (single runs of the robust 5,000-frame
        # bake here ranged 0.70-0.99 s within an hour)
        runs: dict[str, tuple[list[float], list[float], list[float]]] = {
            m: ([], [], []) for m in BAKE_METHODS}
        for _ in range(args.repeats):
            for bake_method in BAKE_METHODS:
                small = run_bake(arm, long[:block], bake_method)
                large = run_bake(arm, long, bake_method)
                drifting = run_bake(arm, drift, bake_method)
                if any("unavailable" in r for r in (small, large, drifting)):
                    continue
                runs[bake_method][0].append(small["wall_s"])
                runs[bake_method][1].append(large["wall_s"])
                runs[bake_method][2].append(drifting["wall_s"])
        for bake_method, (smalls, larges, drifts) in runs.items():
            if not smalls:
                continue
            s_small, s_large = float(np.median(smalls)), float(np.median(larges))
            linearity.append({
                "method": bake_method, "scene": "arm7", "frames_small": block,
                "s_small": s_small, "frames_large": len(long), "s_large": s_large,
                "runs_small": smalls, "runs_large": larges, "runs_drift": drifts,
                "s_drift": float(np.median(drifts)), "mean_drift": float(np.mean(drifts)),
                "mean_large": float(np.mean(larges)),
                "p99_large": float(np.percentile(larges, 99)),
                "ratio": s_large / s_small,
                "per_frame_ratio": (s_large / len(long)) / (s_small / block)})
        blender_bake = run_blender_bake(arm, long, block, args.bpy_python)
        flips = random_trajectory_flips(arm, args.frames, FLIP_SEEDS)
    else:
        blender_bake, flips = None, None
    end_to_end = run_end_to_end(5000, max(args.repeats, 5))
    result = {"rows": rows, "linearity": linearity, "versions": versions(),
              "blender_bake": blender_bake, "flips": flips, "end_to_end": end_to_end,
              "settings": {"poses": args.poses, "frames": args.frames,
                           "repeats": args.repeats, "seed_A": SEED_A, "seed_B": SEED_B,
                           "spec_tol": SPEC_TOL, "tight_tol": TIGHT_TOL},
              "wall_s": time.perf_counter() - started}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
    md = markdown(result)
    (out / "latest.md").write_text(md)
    if not args.no_side_by_side:  # the one table: arm7 and the character rigs, in this run
        from side_by_side import side_by_side

        md += "\n## Side by side (bench/side_by_side.py)\n\n" + side_by_side(
            args.bpy_python, args.clips, args.repeats, args.poses, args.frames,
            args.blender_poses, out)
        (out / "latest.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
