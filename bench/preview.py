"""The add-on's live preview, timed: run in the bpy venv.

Usage: ``.venv-bpy/bin/python bench/preview.py [skeleton.json targets.json] [--frames N]
[--moves M] [--metarig CHAIN_LENGTH]`` (default: ``sample_scenes/arm7``, all of its 240
frames). In a fresh factory scene the skeleton and targets come in through the add-on
(``dhik.import_skeleton``, ``dhik.import_targets``). Timed, in one run:

- a target dragged ``M`` times (its location moved by up to 2 cm, then
  ``view_layer.update()``: the depsgraph handler), preview off and on: the preview's
  update is the difference (reading the targets, a single-frame solve on the bake's
  engine, the pose written);
- the range planned (``preview.settle``: read as a bake reads it, solved by the bake's
  engine), and planned again after the drags;
- ``scene.frame_set(f)`` for every frame in order, preview off and on (the plan's poses).

The effector is checked on every drag and planned frame (Blender's evaluated matrices
against the target). Prints a table (mean, median, p99 in milliseconds); times vary with
the machine and its load.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _register():  # noqa: ANN202 - the extension module
    spec = importlib.util.spec_from_file_location(
        "dhik_blender", ROOT / "__init__.py", submodule_search_locations=[str(ROOT)])
    assert spec is not None and spec.loader is not None
    addon = importlib.util.module_from_spec(spec)
    sys.modules["dhik_blender"] = addon
    spec.loader.exec_module(addon)
    addon.register()
    return addon


def _times(frames: list[int], check=None) -> list[float]:  # noqa: ANN001
    import bpy

    scene = bpy.context.scene
    out = []
    for f in frames:
        t0 = time.perf_counter()
        scene.frame_set(f)
        out.append(time.perf_counter() - t0)
        if check is not None:
            check(f)
    return out


def _row(name: str, ts: list[float]) -> str:
    ms = sorted(t * 1e3 for t in ts)
    p99 = ms[min(len(ms) - 1, math.ceil(0.99 * len(ms)) - 1)]
    return (f"| {name} | {len(ms)} | {statistics.fmean(ms):.3f} | {statistics.median(ms):.3f} "
            f"| {p99:.3f} |")


def _metarig_scene(chain_length: int):  # noqa: ANN202
    """The Rigify human metarig (bundled with bpy), its left hand following an Empty that
    circles 5 cm around a point 8 cm in from the hand's rest position, toward the shoulder,
    over 120 frames (position only: within reach of the arm alone)."""
    import bpy

    bpy.ops.preferences.addon_enable(module="rigify")
    bpy.ops.object.armature_human_metarig_add()
    ob = bpy.context.active_object
    hand = ob.matrix_world @ ob.pose.bones["hand.L"].head
    shoulder = ob.matrix_world @ ob.pose.bones["upper_arm.L"].head
    hand = hand - 0.08 * (hand - shoulder).normalized()
    empty = bpy.data.objects.new("hand_target", None)
    bpy.context.collection.objects.link(empty)
    for f in range(0, 120, 10):
        a = 2 * math.pi * f / 120
        empty.location = (hand.x, hand.y + 0.05 * math.cos(a), hand.z + 0.05 * math.sin(a))
        empty.keyframe_insert("location", frame=f)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 0, 119
    s = scene.dhik
    s.armature, s.effector, s.target = ob, "hand.L", empty
    s.orientation_weight, s.chain_length = 0.0, chain_length
    return ob, empty


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=[str(ROOT / "sample_scenes/arm7/skeleton.json"),
                                                    str(ROOT / "sample_scenes/arm7/targets.json")])
    parser.add_argument("--frames", type=int, default=0, help="first N frames (0: all)")
    parser.add_argument("--moves", type=int, default=200, help="target drags timed")
    parser.add_argument("--metarig", type=int, metavar="CHAIN_LENGTH", default=None,
                        help="the Rigify human metarig's left hand instead of the files: an "
                             "Empty circling near the hand (position only), this chain length")
    args = parser.parse_args(argv)
    import bpy
    import numpy as np

    addon = _register()
    try:
        bpy.ops.wm.read_homefile(use_empty=True, use_factory_startup=True)
        if args.metarig is not None:
            ob, target = _metarig_scene(args.metarig)
        else:
            assert bpy.ops.dhik.import_skeleton(filepath=args.files[0]) == {"FINISHED"}
            assert bpy.ops.dhik.import_targets(filepath=args.files[1]) == {"FINISHED"}
        scene = bpy.context.scene
        s = scene.dhik
        ob, target = s.armature, s.target
        frames = list(range(scene.frame_start, scene.frame_end + 1))
        if args.frames:
            frames = frames[:args.frames]
        leaves = [b.name for b in ob.data.bones if not b.children]
        effector = s.effector or leaves[0]
        worst = [0.0, 0.0]
        within = [0]

        def check(_f: int) -> None:
            dg = bpy.context.evaluated_depsgraph_get()
            ev = ob.evaluated_get(dg)
            m = np.array(ev.matrix_world @ ev.pose.bones[effector].matrix, dtype=float)
            t = np.array(target.evaluated_get(dg).matrix_world, dtype=float)
            worst[0] = max(worst[0], float(np.linalg.norm(m[:3, 3] - t[:3, 3])))
            r = m[:3, :3] @ t[:3, :3].T
            angle = math.acos(max(-1.0, min(1.0, (np.trace(r) - 1) / 2)))
            worst[1] = max(worst[1], angle)
            pe = float(np.linalg.norm(m[:3, 3] - t[:3, 3]))
            within[0] += pe < s.position_tolerance and (
                angle < s.orientation_tolerance or s.orientation_weight == 0.0)

        pv = addon.dhik_addon.preview
        scene.frame_set(frames[len(frames) // 2])
        mover = target.parent if target.parent is not None else target
        moves = [mover.location.copy()]
        for k in range(1, args.moves + 1):  # small drags of the target, there and back
            a = 2 * math.pi * k / args.moves
            moves.append(moves[0] + type(moves[0])((0.02 * math.sin(a), 0.02 * math.sin(2 * a),
                                                    0.01 * math.cos(a) - 0.01)))

        def drag() -> list[float]:
            out = []
            for loc in moves[1:]:
                mover.location = loc
                t0 = time.perf_counter()
                bpy.context.view_layer.update()  # the depsgraph handler: one update
                out.append(time.perf_counter() - t0)
                check(scene.frame_current)
            mover.location = moves[0]
            bpy.context.view_layer.update()
            return out

        off_drag = drag()
        worst[:] = [0.0, 0.0]  # only what the preview shows is checked
        s.live_preview = True
        t0 = time.perf_counter()
        assert pv.settle(scene)
        plan_s = time.perf_counter() - t0
        solves = pv.solve_count(scene)
        on_drag = drag()
        solves = pv.solve_count(scene) - solves
        t0 = time.perf_counter()
        assert pv.settle(scene)  # the range planned again after the drags
        replan_s = time.perf_counter() - t0
        scene.frame_set(frames[-1])
        s.live_preview = False
        off = _times(frames, lambda _f: bpy.context.evaluated_depsgraph_get())
        s.live_preview = True
        assert pv.settle(scene)
        within[0] = 0
        on = _times(frames, check)
        s.live_preview = False
        extra = [a - b for a, b in zip(on_drag, off_drag, strict=True)]
        where = (f"the metarig (chain length {args.metarig})" if args.metarig is not None
                 else Path(args.files[0]).parent.name)
        print(f"live preview on {where}: {len(frames)} frames, effector {effector!r}; "
              f"range planned in {plan_s:.3f} s (again after the drags: {replan_s:.3f} s); "
              f"{args.moves} target drags, {solves} single-frame solves; effector on target "
              f"after {within[0]} of {len(frames)} planned frames and every drag; worst error "
              f"{worst[0]:.3g} m, {worst[1]:.3g} rad (tolerances {s.position_tolerance:.3g} m, "
              f"{s.orientation_tolerance:.3g} rad)")
        print()
        print("| what is timed | count | mean ms | median ms | p99 ms |")
        print("|---|---|---|---|---|")
        print(_row("a target drag, preview off (Blender's update)", off_drag))
        print(_row("a target drag, preview on", on_drag))
        print(_row("the preview's update (on - off)", extra))
        print(_row("scene.frame_set, preview off", off))
        print(_row("scene.frame_set, preview on (the plan's poses)", on))
    finally:
        addon.unregister()  # bpy as a module hangs at exit with callables registered
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
