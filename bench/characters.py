"""Whole characters baked by Blender's IK and by dhik, timed in one run: run in the bpy venv.

Usage: ``.venv-bpy/bin/python bench/characters.py [--clips N] [--frames F] [--scenes ...]
[--json PATH]``. Scenes (bench/character_scenes.py, built in bpy 5.0.1 from the bundled
Rigify): the basic quadruped's four feet and the human metarig's four limbs (full pose,
Chain Length 3: foot-shin-thigh up to the hip, hand-forearm-upper arm up to the
shoulder), and the human's left arm with a pole (position only). Every clip (a seed) is
a smooth reference motion of the rig's own bones; its evaluated effector bones are the
targets (keyed Empties), so a reference exists for every frame.

Each clip is baked, as a rigger would, both ways (the rig at rest, no action, before each):

- Blender: an IK constraint per limb, at its best settings for convergence: the Legacy
  solver (iTaSC, ``--solver ITASC`` at precision 1e-5 and reiterating always, is as good
  on full poses but puts 1 frame in 160 on target with the pole), ``--iterations``
  (default 500: 10,000 gives the same poses and times here), weight 1, ``orient_weight``
  1, ``use_tail`` on, no stretch, ``use_rotation`` for full poses (the hand or foot
  follows its control's orientation, as a rigger's IK control does); in the arm scene a
  pole target, with the pole angle that puts the elbow on the reference (tuned,
  untimed). Then Bake Action: ``nla.bake(only_selected=True, visual_keying=True,
  bake_types={'POSE'}, channel_types={'ROTATION'})`` on the chain bones (rotation only:
  what the IK changes and what dhik keys; ``--channels ALL``, the operator's default,
  costs Blender about 40 % more), the whole operator timed;
- dhik: the panel's effector rows on the same bones and targets (Chain Length 3 each,
  orientation weight 1, or 0 with the pole), ``--position-tolerance`` and
  ``--orientation-tolerance``, default method (robust) and settings; ``bpy.ops.dhik.bake``
  timed whole (reading the targets, the solve, the keys, its check in Blender); the
  notes give the core's solve time out of it (the bake summary's seconds).

Then, with the constraints muted, every frame is evaluated by Blender: success is every
effector bone's head within the position tolerance of its reference (and its orientation
within the orientation tolerance, for full poses). A flip frame is a frame where a chain
bone's local rotation turns more than twice the largest per-frame turn that bone makes
in the reference (per bone; a bone still in the reference: twice the largest of any
bone), or more than twice the largest reference turn of any bone (overall); the largest
ratio is the largest turn over that bone's reference bound. Writes
bench/results/characters.md (and ``--json``), prints the table. Times depend on the
machine and its load.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import bpy
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from character_scenes import (  # noqa: E402
    SCENES,
    CharacterScene,
    Reference,
    build_rig,
    chain_frames,
    key_empty,
    new_empty,
    reference,
    rest_pose,
)
from preview import _register  # noqa: E402
from turns import angle, flips  # noqa: E402

FRAMES = 160


# ------------------------------------------------------------------ the two methods


class BlenderIK:
    """Blender's IK constraints on the scene's limbs and the Bake Action that keys them."""

    name = "Blender IK + Bake Action"

    def __init__(self, ob: bpy.types.Object, scene: CharacterScene, iterations: int,
                 solver: str = "LEGACY", channels: str = "ROTATION") -> None:  # fmt: skip
        self.ob, self.scene = ob, scene
        self.channels = ({"ROTATION"} if channels == "ROTATION" else
                         {"LOCATION", "ROTATION", "SCALE", "BBONE", "PROPS"})
        ob.pose.ik_solver = solver
        if solver == "ITASC":  # its most precise settings
            p = ob.pose.ik_param
            p.precision, p.iterations, p.reiteration_method = 1e-5, max(iterations, 1000), "ALWAYS"
        self.targets = [new_empty(f"ik_{limb.effector}") for limb in scene.limbs]
        self.pole = new_empty("ik_pole") if scene.pole else None
        self.constraints = []
        for limb, target in zip(scene.limbs, self.targets, strict=True):
            con = ob.pose.bones[limb.owner].constraints.new("IK")
            con.target = target
            con.use_tail, con.chain_count, con.use_stretch = True, limb.chain_count, False
            con.iterations, con.weight, con.orient_weight = iterations, 1.0, 1.0
            con.use_rotation = scene.full_pose
            if self.pole is not None:
                con.pole_target = self.pole
            self.constraints.append(con)
        self.bones = [b for limb in scene.limbs for b in limb.chain]
        self.pole_angles: list[float] = []
        self.mute(True)

    def mute(self, muted: bool) -> None:
        for con in self.constraints:
            con.enabled = not muted

    def prepare(self, ref: Reference) -> None:
        """Key the IK targets (and pole) of clip ``ref``; tune the pole angle (untimed)."""
        for i, target in enumerate(self.targets):
            key_empty(target, matrices=ref.tail[:, i])
        if self.pole is not None and ref.pole is not None:
            key_empty(self.pole, points=ref.pole)
            self.pole_angles.append(self._tune_pole(ref))

    def _tune_pole(self, ref: Reference) -> float:
        """The pole angle (rad) whose IK puts the elbow nearest its reference on eight
        frames: a 5-degree grid, then 0.25-degree steps around the best."""
        con, sc = self.constraints[0], bpy.context.scene
        middle = self.scene.limbs[0].chain[1]
        rest_pose(self.ob)
        self.mute(False)
        frames = np.linspace(0, ref.frames - 1, 8).astype(int)

        def miss(angle: float) -> float:
            con.pole_angle = angle
            total = 0.0
            for f in frames:
                sc.frame_set(int(f))
                head = np.array(self.ob.matrix_world @ self.ob.pose.bones[middle].head)
                total += float(np.linalg.norm(head - ref.elbow[f, 0]))
            return total

        best = min(np.radians(np.arange(-180.0, 180.0, 5.0)), key=miss)
        best = min(best + np.radians(np.arange(-5.0, 5.01, 0.25)), key=miss)
        con.pole_angle = float(best)
        self.mute(True)
        return float(best)

    def bake(self, frames: int) -> float:
        """Bake Action with visual keying of the chain bones (s, the operator timed)."""
        ob = self.ob
        rest_pose(ob)
        self.mute(False)
        bpy.context.view_layer.objects.active = ob
        ob.select_set(True)
        bpy.ops.object.mode_set(mode="POSE")
        for pb in ob.pose.bones:
            pb.select = pb.name in self.bones
        t0 = time.perf_counter()
        done = bpy.ops.nla.bake(frame_start=0, frame_end=frames - 1, only_selected=True,
                                visual_keying=True, clear_constraints=False,
                                use_current_action=False, bake_types={"POSE"},
                                channel_types=self.channels)
        seconds = time.perf_counter() - t0
        bpy.ops.object.mode_set(mode="OBJECT")
        self.mute(True)
        assert done == {"FINISHED"}, done
        return seconds


class DhikBake:
    """The add-on's panel set up on the same limbs and targets, and its Bake."""

    name = "dhik bake"

    def __init__(self, ob: bpy.types.Object, scene: CharacterScene, tolerances: tuple[float, float]
                 ) -> None:  # fmt: skip
        self.ob, self.scene = ob, scene
        self.targets = [new_empty(f"dhik_{limb.effector}") for limb in scene.limbs]
        self.pole = new_empty("dhik_pole") if scene.pole else None
        self.solve_seconds: list[float] = []
        s = bpy.context.scene.dhik
        s.armature = ob
        s.position_tolerance, s.orientation_tolerance = tolerances
        s.effectors.clear()
        for k, (limb, target) in enumerate(zip(scene.limbs, self.targets, strict=True)):
            row = s if k == 0 else s.effectors.add()
            if k == 0:
                s.effector = limb.effector
            else:
                row.bone = limb.effector
            row.target, row.chain_length = target, len(limb.chain)
            row.position_weight, row.orientation_weight = 1.0, 1.0 if scene.full_pose else 0.0
            if k == 0 and self.pole is not None:
                row.pole_target, row.pole_angle = self.pole, 0.0

    def prepare(self, ref: Reference) -> None:
        for i, target in enumerate(self.targets):
            key_empty(target, matrices=ref.effector[:, i])
        if self.pole is not None and ref.pole is not None:
            key_empty(self.pole, points=ref.pole)

    def bake(self, frames: int) -> float:
        rest_pose(self.ob)
        sc = bpy.context.scene
        sc.frame_start, sc.frame_end = 0, frames - 1
        t0 = time.perf_counter()
        done = bpy.ops.dhik.bake()
        seconds = time.perf_counter() - t0
        summary = sc.dhik.result_summary
        assert done == {"FINISHED"}, (done, summary)
        solve = re.search(r"([0-9.]+) s$", summary)  # the core's wall time, last in the line
        if solve is not None:
            self.solve_seconds.append(float(solve.group(1)))
        return seconds


# ------------------------------------------------------------------ what Blender shows


def evaluate(ob: bpy.types.Object, scene: CharacterScene, ref: Reference,
             tolerances: tuple[float, float]) -> dict[str, Any]:  # fmt: skip
    """Blender's evaluated pose of every frame of the baked action: success per frame,
    the chain bones' local rotations, the largest errors (m, rad) and elbow offset (m)."""
    sc = bpy.context.scene
    n = len(scene.limbs)
    local = np.empty_like(ref.local)
    pos, rot, elbow = (np.empty((ref.frames, n)) for _ in range(3))
    for f in range(ref.frames):
        sc.frame_set(f)
        ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
        world = ev.matrix_world
        pose = ev.pose.bones
        for k, name in enumerate(ref.bones):
            local[f, k] = np.array(pose[name].matrix_basis.to_quaternion(), dtype=float)
        for i, limb in enumerate(scene.limbs):
            m = np.array(world @ pose[limb.effector].matrix, dtype=float)
            target = ref.effector[f, i]
            pos[f, i] = np.linalg.norm(m[:3, 3] - target[:3, 3])
            rot[f, i] = angle(m[:3, :3] @ target[:3, :3].T)
            head = np.array(world @ pose[limb.chain[1]].head, dtype=float)
            elbow[f, i] = np.linalg.norm(head - ref.elbow[f, i])
    ok = (pos < tolerances[0]).all(axis=1)
    if scene.full_pose:
        ok &= (rot < tolerances[1]).all(axis=1)
    return {"ok": int(ok.sum()), "local": local, "pos": float(pos.max()),
            "rot": float(rot.max()), "elbow": float(elbow.max())}


# ------------------------------------------------------------------ the run


def run_scene(scene: CharacterScene, clips: int, frames: int, args: argparse.Namespace
              ) -> list[dict[str, Any]]:  # fmt: skip
    """Both methods on ``clips`` clips of ``scene`` (a warm-up bake of each first)."""
    tol = (args.position_tolerance, args.orientation_tolerance)
    ob = build_rig(scene)
    methods = [BlenderIK(ob, scene, args.iterations, args.solver, args.channels),
               DhikBake(ob, scene, tol)]
    stats: dict[str, dict[str, Any]] = {
        m.name: {"seconds": [], "ok": 0, "per": 0, "over": 0, "ratio": 0.0, "pos": 0.0,
                 "rot": 0.0, "elbow": 0.0} for m in methods}
    peer = {"frames": np.array([chain_frames(ob, limb) for limb in scene.limbs]),
            "effector": [], "local": []}
    for clip in range(-1, clips):
        ref = reference(ob, scene, frames, args.seed + max(clip, 0))
        if clip >= 0:
            peer["effector"].append(ref.effector)
            peer["local"].append(ref.local)
        for m in methods:
            m.prepare(ref)
            seconds = m.bake(frames)
            if clip < 0:  # warm-up
                continue
            out = evaluate(ob, scene, ref, tol)
            ad = ob.animation_data
            if ad is not None and ad.action is not None:
                bpy.data.actions.remove(ad.action)
            per, over, ratio = flips(out["local"], ref.local)
            st = stats[m.name]
            st["seconds"].append(seconds)
            st["ok"] += out["ok"]
            st["per"] += per
            st["over"] += over
            for key, value in (("ratio", ratio), ("pos", out["pos"]), ("rot", out["rot"]),
                               ("elbow", out["elbow"])):
                st[key] = max(st[key], value)
        if clip >= 0:
            print(f"  {scene.name} clip {clip}: " + ", ".join(
                f"{name} {st['seconds'][-1]:.3f} s" for name, st in stats.items()), flush=True)
    rows = []
    for m in methods:
        st = stats[m.name]
        secs = st.pop("seconds")
        rows.append({"scene": scene.name, "title": scene.title, "method": m.name,
                     "frames": frames, "clips": clips, "limbs": len(scene.limbs),
                     "success": st["ok"] / (frames * clips), "flips_per_bone": st["per"],
                     "flips_overall": st["over"], "max_ratio": st["ratio"],
                     "mean_s": statistics.fmean(secs), "median_s": statistics.median(secs),
                     "p99_s": float(np.percentile(secs, 99)), "seconds": secs,
                     "max_pos_err": st["pos"], "max_rot_err": st["rot"],
                     "max_elbow_off": st["elbow"], "full_pose": scene.full_pose,
                     "pole_angles": getattr(m, "pole_angles", []),
                     "solve_s": getattr(m, "solve_seconds", [])[1:]})  # after the warm-up
    blender, dhik = rows
    dhik["vs_blender"] = dhik["mean_s"] / blender["mean_s"]
    if args.peer_data:
        PEER_DATA[scene.name] = {k: np.asarray(v) for k, v in peer.items()}
    return rows


# per scene: the chains' rest transforms and every clip's reference, for --peer-data
PEER_DATA: dict[str, dict[str, np.ndarray]] = {}


def write_peer_data(path: str, args: argparse.Namespace) -> None:
    """An .npz of the scenes for solvers outside Blender (bench/character_rtb.py): per
    scene ``<scene>/frames`` (limbs, 3, 4, 4: :func:`chain_frames`), ``<scene>/effector``
    (clips, frames, limbs, 4, 4: the targets, world) and ``<scene>/local`` (clips, frames,
    bones, 4: the reference's local rotations, [w, x, y, z]); ``meta``: JSON of each
    scene's limbs and target kind, and the tolerances."""
    meta = {"tolerances": [args.position_tolerance, args.orientation_tolerance], "scenes": {
        sc.name: {"title": sc.title, "full_pose": sc.full_pose, "pole": sc.pole,
                  "limbs": [list(limb.chain) for limb in sc.limbs]}
        for sc in SCENES if sc.name in PEER_DATA}}
    arrays = {f"{name}/{key}": value for name, data in PEER_DATA.items()
              for key, value in data.items()}
    np.savez_compressed(path, meta=np.array(json.dumps(meta)), **arrays)


def markdown(result: dict[str, Any]) -> str:
    """The table and the run's settings as markdown."""
    lines = ["| scene | method | frames | success | flip frames (per bone / overall) | "
             "largest ratio | s per clip: mean / median / p99 | dhik / Blender (mean) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        ratio = f"{r['vs_blender']:.2f}x" if "vs_blender" in r else ""
        lines.append(
            f"| {r['title']} | {r['method']} | {r['frames']} x {r['clips']} clips | "
            f"{100 * r['success']:.1f}% | {r['flips_per_bone']} / {r['flips_overall']} | "
            f"{r['max_ratio']:.2f} | {r['mean_s']:.3f} / {r['median_s']:.3f} / "
            f"{r['p99_s']:.3f} | {ratio} |")
    s = result["settings"]
    last_seed = s["seed"] + s["clips"] - 1
    lines += ["", f"Tolerances {s['position_tolerance']:g} m, {s['orientation_tolerance']:g} "
              f"rad (orientation on full poses only); seeds {s['seed']}..{last_seed}"
              f"; Blender's IK: {s['solver'].title()} solver, {s['iterations']} iterations, "
              "weight 1, orient_weight 1, use_tail, no stretch; Bake Action of the chain bones "
              f"with visual keying, channels {s['channels'].lower()}. Largest errors seen by "
              "Blender (position m / orientation rad; the elbow from its reference m):", ""]
    for r in result["rows"]:
        pole = ""
        if r["pole_angles"]:
            pole = f"; pole angle {math.degrees(statistics.median(r['pole_angles'])):.2f} deg"
        solve = ""
        if r["solve_s"]:
            solve = f"; the core's solve {statistics.fmean(r['solve_s']):.3f} s per clip (mean)"
        lines.append(f"- {r['scene']}, {r['method']}: {r['max_pos_err']:.3g} / "
                     f"{r['max_rot_err']:.2g}; elbow {r['max_elbow_off']:.2g}{pole}{solve}")
    lines += ["", f"Whole run {result['wall_s']:.0f} s; Blender {result['blender']}, "
              f"python {platform.python_version()}, {os.cpu_count()} cpus, load average "
              f"{result['load']} at the start (a shared machine: times vary with its load)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=10, help="clips (seeds) per scene")
    parser.add_argument("--frames", type=int, default=FRAMES)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scenes", nargs="*", default=None, help="by name (default: all)")
    parser.add_argument("--iterations", type=int, default=500, help="Blender's IK iterations")
    parser.add_argument("--solver", choices=("LEGACY", "ITASC"), default="LEGACY",
                        help="Blender's IK solver (ITASC: precision 1e-5, reiterate always)")
    parser.add_argument("--channels", choices=("ROTATION", "ALL"), default="ROTATION",
                        help="Bake Action's channels (ALL: its defaults)")
    parser.add_argument("--position-tolerance", type=float, default=1e-4)
    parser.add_argument("--orientation-tolerance", type=float, default=1e-3)
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument("--peer-data", default=None,
                        help="also write the scenes for solvers outside Blender (.npz)")
    parser.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    addon = _register()
    rows: list[dict[str, Any]] = []
    try:
        for scene in SCENES:
            if args.scenes and scene.name not in args.scenes:
                continue
            print(f"[{time.perf_counter() - started:5.0f} s] {scene.title}", flush=True)
            rows += run_scene(scene, args.clips, args.frames, args)
    finally:
        addon.unregister()  # bpy as a module hangs at exit with callables registered
    result = {"rows": rows, "settings": {**vars(args)}, "wall_s": time.perf_counter() - started,
              "blender": bpy.app.version_string, "load": load}
    md = markdown(result)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "characters.md").write_text(md)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    if args.peer_data:
        write_peer_data(args.peer_data, args)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
