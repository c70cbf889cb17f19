"""One side-by-side table, in one run: dhik, roboticstoolbox's ik_LM and Blender's IK on
arm7 (A, B, ten random paths) and on the ball-joint character rigs.

Usage: ``bench/.venv/bin/python bench/side_by_side.py [--clips N] [--repeats N]``; bench/run.py
calls it last, so ``bench/run.sh`` prints it. Writes bench/results/side_by_side.md (and
.json). One after another in this run:

- arm7 (bench/scenes.py, bench/run.py's workloads): A, 1,000 random reachable poses, each
  solved cold (Blender: the first 300, as in run.py); B, run.py's 2,000-frame smooth path;
  R, run.py's ten random smooth paths (seeds 100..109, 2,000 frames each). Methods:
  dhik's bake engine as ``dhik bake`` runs it (``dhik.app.bake.simulate``, method robust,
  1e-5 m / 1e-4 rad, 100 iterations; A with ``warm_start=False``: every pose alone),
  each workload one call; rtb ``ik_LM`` as bench/methods.py's ``Rtb`` (warm from the
  previous answer on B and R); Blender's IK constraint (bench/blender_ik.py: a bone per
  hinge, three solver configurations, warm on B and R).
- the character rigs (bench/characters.py in the bpy venv: Blender's IK constraint +
  Bake Action against dhik's bake operator, both timed whole in Blender), and rtb on the
  same chains and targets (bench/character_rtb.py: its solves alone, no Blender).

Success: the effector within 1e-4 m and 1e-3 rad of its target (orientation on full
poses only), judged by bench/refk.py's FK and within the joint limits (arm7) or by
Blender's evaluation after the bake (characters; rtb there: its own FK). Flip frames: on
arm7 run.py's ``jumps`` against the joint path that made the targets (frames 2.., a
joint moving more than twice its own largest true step / more than twice the largest
true step of any joint); on the characters bench/turns.py against the reference motion
(per bone / overall). Times are microseconds per frame: per solve for methods that solve
frame by frame (mean, median, p99 over the solves); per frame of a whole call for dhik
(over the runs of A and B, over the ten paths of R) and of a whole bake for the
characters (over the clips). "x Blender": the mean over Blender's (Legacy) mean on the
same rows (not for rtb on the characters: its solves alone against Blender's whole bake).
Times vary with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from methods import Rtb  # noqa: E402
from run import FLIP_SEEDS, SEED_A, SEED_B, check, jumps  # noqa: E402
from scenes import Scene, load_scenes  # noqa: E402

TOL = (1e-4, 1e-3)  # m, rad: success, every row
DHIK = "dhik (bake engine, robust)"
BLENDER = "Blender IK"  # row names start so; the first config is the reference of "x Blender"
RTB = (("rtb ik_LM (default restarts)", 30, 100), ("rtb ik_LM (1 search)", 100, 1))


def _row(scene: str, workload: str, method: str, answers: list[dict[str, Any]] | None,
         targets: list[np.ndarray], arm: Scene, us: list[float], over: str,
         truth: np.ndarray | None = None, note: str = "") -> dict[str, Any]:  # fmt: skip
    """A table row from joint values (refk format) and per-frame times (µs)."""
    row: dict[str, Any] = {"scene": scene, "workload": workload, "method": method,
                           "frames": len(targets), "timed_over": over, "note": note,
                           "mean_us": statistics.fmean(us), "median_us": statistics.median(us),
                           "p99_us": float(np.percentile(us, 99))}
    if answers is not None:
        ok = 0
        for values, target in zip(answers, targets, strict=True):
            c = check(arm, values, target)
            ok += bool(c["limits"] and c["pe"] < TOL[0] and c["oe"] < TOL[1])
        row["success"] = ok / len(targets)
    if truth is not None and answers is not None:
        j = jumps(arm, answers, truth)
        row.update(flips_per=j["per_channel"], flips_over=j["overall"], max_ratio=j["max_ratio"])
    return row


def _merge(rows: list[dict[str, Any]], workload: str) -> dict[str, Any]:
    """The ten R rows of one method as one: frames, successes and flips summed, times
    pooled (per solve) or one per path (per whole call)."""
    n = sum(r["frames"] for r in rows)
    us = [u for r in rows for u in r.pop("us")]
    out = {**rows[0], "workload": workload, "frames": n,
           "success": sum(r["success"] * r["frames"] for r in rows) / n,
           "flips_per": sum(r["flips_per"] for r in rows),
           "flips_over": sum(r["flips_over"] for r in rows),
           "max_ratio": max(r["max_ratio"] for r in rows),
           "mean_us": statistics.fmean(us), "median_us": statistics.median(us),
           "p99_us": float(np.percentile(us, 99))}
    return out


def _joint_values(frame: dict[str, Any]) -> dict[str, Any]:
    return {name: v.get("angle", v.get("displacement", v.get("quaternion")))
            for name, v in frame["joints"].items()}


def dhik_rows(arm: Scene, work: dict[str, Any], repeats: int) -> list[dict[str, Any]]:
    """dhik's bake engine on A (cold), B and every R path (warm): one call each."""
    from dhik.app.bake import simulate
    from dhik.app.formats import parse_skeleton
    from dhik.model.skeleton import Skeleton
    from dhik.solver.settings import SolverSettings

    skeleton = Skeleton(parse_skeleton(arm.skeleton))
    settings = SolverSettings(max_iterations=100, position_tolerance=1e-5,
                              orientation_tolerance=1e-4)

    def bake(targets: list[np.ndarray], warm: bool) -> tuple[list[dict[str, Any]], float]:
        t0 = time.perf_counter()
        result = simulate(skeleton, list(enumerate(targets)), arm.effector, settings,
                          warm_start=warm, method="robust")
        per_frame = (time.perf_counter() - t0) / len(targets) * 1e6
        return [_joint_values(f) for f in result.frames], per_frame

    bake(work["B"][:50], True)  # untimed: the first call's one-off costs
    rows = []
    for wl, warm in (("A", False), ("B", True)):
        runs = [bake(work[wl], warm) for _ in range(repeats)]
        rows.append(_row("arm7", wl, DHIK, runs[0][0], work[wl], arm, [u for _, u in runs],
                         f"{repeats} runs", work["truth"] if warm else None))
    paths = []
    for seed, (truth, targets) in work["R"].items():
        answers, us = bake(targets, True)
        paths.append({**_row("arm7", f"R{seed}", DHIK, answers, targets, arm, [us],
                             "paths", truth), "us": [us]})
    rows.append(_merge(paths, f"R ({len(paths)} paths)"))
    return rows


def rtb_rows(arm: Scene, work: dict[str, Any]) -> list[dict[str, Any]]:
    """rtb ik_LM frame by frame (cold on A, warm on B and R), each solve timed."""
    rows = []
    for name, ilimit, slimit in RTB:
        method = Rtb(name, ilimit=ilimit, slimit=slimit)
        if method.available() is not None:
            rows.append({"scene": "arm7", "workload": "—", "method": name,
                         "unavailable": method.available()})
            continue
        method.setup(arm)

        def solve(targets: list[np.ndarray], warm: bool, m: Rtb = method
                  ) -> tuple[list[dict[str, Any]], list[float]]:  # fmt: skip
            m.start()
            answers, us = [], []
            for i, target in enumerate(targets):
                if not warm:
                    m.start()
                t0 = time.perf_counter()
                m.solve(target, warm and i > 0)
                us.append((time.perf_counter() - t0) * 1e6)
                answers.append(m.values())
            return answers, us

        for wl, warm in (("A", False), ("B", True)):
            answers, us = solve(work[wl], warm)
            rows.append(_row("arm7", wl, name, answers, work[wl], arm, us, "solves",
                             work["truth"] if warm else None))
        paths = []
        for seed, (truth, targets) in work["R"].items():
            answers, us = solve(targets, True)
            paths.append({**_row("arm7", f"R{seed}", name, answers, targets, arm, us,
                                 "solves", truth), "us": us})
        rows.append(_merge(paths, f"R ({len(paths)} paths)"))
    return rows


def blender_rows(arm: Scene, work: dict[str, Any], python: str, limit_a: int
                 ) -> list[dict[str, Any]]:  # fmt: skip
    """Blender's IK constraint (bench/blender_ik.py in the bpy venv), every config."""
    if not Path(python).exists():
        return [{"scene": "arm7", "workload": "—", "method": BLENDER,
                 "unavailable": f"no bpy venv at {python}"}]
    inputs = {"A": work["A"][:limit_a], "B": work["B"],
              **{f"R{seed}": targets for seed, (_, targets) in work["R"].items()}}
    with tempfile.TemporaryDirectory() as tmp:
        inp, outp = Path(tmp) / "in.json", Path(tmp) / "out.json"
        inp.write_text(json.dumps({"skeleton": arm.skeleton, "effector": arm.effector,
                                   **{k: [t.tolist() for t in v] for k, v in inputs.items()}}))
        proc = subprocess.run([python, str(HERE / "blender_ik.py"), str(inp), str(outp)],
                              capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0 or not outp.exists():
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
            return [{"scene": "arm7", "workload": "—", "method": BLENDER, "unavailable": tail}]
        data = json.loads(outp.read_text())
    rows = []
    for cfg in data["configs"]:
        name = f"Blender {cfg['name']}"  # "Blender IK Legacy (defaults, 500 it)", ...
        for wl in ("A", "B"):
            res = cfg[wl]
            note = f"first {limit_a} poses" if wl == "A" and limit_a < len(work["A"]) else ""
            rows.append(_row("arm7", wl, name, res["values"], inputs[wl], arm, res["times_us"],
                             "solves", work["truth"] if wl == "B" else None, note))
        paths = []
        for seed, (truth, targets) in work["R"].items():
            res = cfg[f"R{seed}"]
            paths.append({**_row("arm7", f"R{seed}", name, res["values"], targets, arm,
                                 res["times_us"], "solves", truth), "us": res["times_us"]})
        rows.append(_merge(paths, f"R ({len(paths)} paths)"))
    return rows


def character_rows(python: str, clips: int, out: Path) -> tuple[list[dict[str, Any]], str]:
    """bench/characters.py in the bpy venv, then rtb on its scenes; and its markdown."""
    if not Path(python).exists():
        return [{"scene": "characters", "workload": "—", "method": "all",
                 "unavailable": f"no bpy venv at {python}"}], ""
    from character_rtb import run as rtb_run

    with tempfile.TemporaryDirectory() as tmp:
        js, npz = Path(tmp) / "characters.json", Path(tmp) / "peers.npz"
        proc = subprocess.run([python, str(HERE / "characters.py"), "--clips", str(clips),
                               "--json", str(js), "--peer-data", str(npz), "--out", str(out)],
                              capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0 or not js.exists():
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
            return [{"scene": "characters", "workload": "—", "method": "all",
                     "unavailable": tail}], ""
        rows = json.loads(js.read_text())["rows"]
        try:
            rows += rtb_run(str(npz))
        except ImportError as exc:
            rows.append({"scene": "characters", "workload": "—", "method": "rtb",
                         "unavailable": str(exc)})
    md = (out / "characters.md").read_text() if (out / "characters.md").exists() else ""
    table = []
    for r in rows:
        if "unavailable" in r:
            table.append(r)
            continue
        us = [s / r["frames"] * 1e6 for s in r["seconds"]]
        method = r["method"] if r["method"] != "dhik bake" else "dhik (bake operator)"
        if r["method"].startswith("Blender"):
            method = f"{BLENDER} Legacy + Bake Action"
        table.append({"scene": r["scene"], "workload": f"{r['clips']} clips",
                      "method": method, "frames": r["frames"] * r["clips"],
                      "timed_over": "clips (whole bake)" if "rtb" not in r["method"]
                      else "clips (its solves)", "note": r.get("note", ""),
                      "success": r["success"], "flips_per": r["flips_per_bone"],
                      "flips_over": r["flips_overall"], "max_ratio": r["max_ratio"],
                      "mean_us": statistics.fmean(us), "median_us": statistics.median(us),
                      "p99_us": float(np.percentile(us, 99))})
    return table, md


def arm7_work(poses: int, frames: int) -> tuple[Scene, dict[str, Any]]:
    """run.py's arm7 workloads: A, B (with its joint path) and the R paths."""
    arm = next(s for s in load_scenes() if s.name == "arm7")
    truth = arm.trajectory_channels(frames, SEED_B)
    work: dict[str, Any] = {"A": arm.poses(poses, SEED_A), "truth": truth,
                            "B": [arm.chain.fk(arm.values(x), arm.effector) for x in truth]}
    work["R"] = {}
    for seed in FLIP_SEEDS:
        t = arm.trajectory_channels(frames, seed)
        work["R"][seed] = (t, [arm.chain.fk(arm.values(x), arm.effector) for x in t])
    return arm, work


def markdown(rows: list[dict[str, Any]], wall: float, load: str) -> str:
    head = ("| scene | workload | method | frames | success | flip frames (per joint / "
            "overall) | largest ratio | µs per frame: mean / median / p99 | timed over | "
            "x Blender |")
    lines = [head, "|" + "---|" * 10]
    base: dict[tuple[str, str], float] = {}  # the first Blender row of each workload
    for r in rows:
        if r["method"].startswith(BLENDER) and "mean_us" in r:
            base.setdefault((r["scene"], r["workload"]), r["mean_us"])
    for r in rows:
        if "unavailable" in r:
            lines.append(f"| {r['scene']} | {r['workload']} | {r['method']} | — | unavailable: "
                         f"{r['unavailable']} | | | | | |")
            continue
        flips = (f"{r['flips_per']} / {r['flips_over']}" if "flips_per" in r else "—")
        ratio = f"{r['max_ratio']:.1f}" if "max_ratio" in r else "—"
        ref = base.get((r["scene"], r["workload"]))
        vs = ""  # against Blender's time where both are timed alike
        if ref and not r["method"].startswith(BLENDER) and "its solves" not in r["timed_over"]:
            vs = f"{r['mean_us'] / ref:.2f}x"
        frames = f"{r['frames']}" + (f" ({r['note']})" if r.get("note") else "")
        lines.append(f"| {r['scene']} | {r['workload']} | {r['method']} | {frames} | "
                     f"{100 * r['success']:.1f}% | {flips} | {ratio} | {r['mean_us']:.0f} / "
                     f"{r['median_us']:.0f} / {r['p99_us']:.0f} | {r['timed_over']} | {vs} |")
    lines += ["", f"Success within {TOL[0]:g} m and {TOL[1]:g} rad. Whole run {wall:.0f} s on "
              f"{os.cpu_count()} cpus, load average {load} at the start (a shared machine: "
              "times vary with its load). What each row times: bench/side_by_side.py."]
    return "\n".join(lines) + "\n"


def side_by_side(python: str, clips: int = 10, repeats: int = 3, poses: int = 1000,
                 frames: int = 2000, blender_poses: int = 300, out: Path = HERE / "results"
                 ) -> str:  # fmt: skip
    """Every row, in this order, in one run; the table (markdown), also written to
    ``out``/side_by_side.md and .json."""
    started = time.perf_counter()
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    arm, work = arm7_work(poses, frames)
    rows: list[dict[str, Any]] = []
    for part, run_part in (("dhik", lambda: dhik_rows(arm, work, repeats)),
                           ("rtb", lambda: rtb_rows(arm, work)),
                           ("Blender", lambda: blender_rows(arm, work, python, blender_poses))):
        t0 = time.perf_counter()
        rows += run_part()
        print(f"[side by side] arm7, {part}: {time.perf_counter() - t0:.0f} s", flush=True)
    t0 = time.perf_counter()
    chars, _ = character_rows(python, clips, out)
    rows += chars
    print(f"[side by side] characters: {time.perf_counter() - t0:.0f} s", flush=True)
    md = markdown(rows, time.perf_counter() - started, load)
    out.mkdir(parents=True, exist_ok=True)
    (out / "side_by_side.md").write_text(md)
    (out / "side_by_side.json").write_text(json.dumps(rows, indent=1, default=float) + "\n")
    return md


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bpy-python", default=str(HERE.parent / ".venv-bpy" / "bin" /
                                                     "python"))
    parser.add_argument("--clips", type=int, default=10, help="clips per character scene")
    parser.add_argument("--repeats", type=int, default=3, help="dhik's runs of A and B")
    parser.add_argument("--poses", type=int, default=1000, help="arm7 A")
    parser.add_argument("--frames", type=int, default=2000, help="arm7 B and each R path")
    parser.add_argument("--blender-poses", type=int, default=300, help="Blender's share of A")
    parser.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args(argv)
    print(side_by_side(args.bpy_python, args.clips, args.repeats, args.poses, args.frames,
                       args.blender_poses, Path(args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
