"""Blender's own IK constraint on a serial hinge chain, driven through bpy (bpy venv).

Usage: ``.venv-bpy/bin/python bench/blender_ik.py in.json out.json``; ``in.json`` holds
``skeleton`` (skeleton.json dict), ``effector`` and the target lists ``A`` and ``B``
(world 4x4, metres). Mapping (shared/notes/blender-extension.md §5): one bone per
revolute joint, head at the joint, Y axis along the joint axis, ``lock_ik_x/z`` set and
the joint limits as ``ik_min_y``/``ik_max_y`` (Blender caps them at +-pi); the tip
bone's tail is the effector point; the IK constraint on the tip (chain = every hinge,
``use_rotation``) targets an Empty placed at ``[R_target R_eff_rest^-1 B_tip | p]``.

A: channels at rest before every target (a cold solve from the T-pose). B, and any other
list of targets in ``in.json`` (e.g. the random paths of bench/side_by_side.py): channels
set to the previous frame's answer before each frame (warm; frame 0 from rest). Timed:
``empty.matrix_world = M; view_layer.update()`` per target, the depsgraph update
included; the same loop with the constraint muted is reported as ``muted_us``. Angles
are read back from the evaluated bones (``pose_bone.matrix``) relative to their rest.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

import bpy
from mathutils import Matrix, Quaternion, Vector

CONFIGS = [
    {"name": "IK Legacy (defaults, 500 it)", "solver": "LEGACY"},
    {"name": "IK iTaSC (defaults)", "solver": "ITASC"},
    {"name": "IK iTaSC precise (1e-4, 1000 it, reiterate always)", "solver": "ITASC",
     "precision": 1e-4, "iterations": 1000, "reiteration": "ALWAYS"},
]


def rest_frames(skeleton: dict[str, Any], effector: str) -> list[tuple[dict, Matrix]]:
    """The path root -> effector with each joint's world rest matrix (q = 0)."""
    joints = {j["name"]: j for j in skeleton["joints"]}
    path = []
    name = effector
    while name is not None:
        path.append(joints[name])
        name = joints[name].get("parent")
    path.reverse()
    out = []
    world = Matrix.Identity(4)
    for j in path:
        local = Matrix.Translation(Vector(j.get("offset", [0, 0, 0])))
        if j["type"] == "fixed" and j.get("quaternion") is not None:
            local = local @ Quaternion(j["quaternion"]).normalized().to_matrix().to_4x4()
        world = world @ local
        out.append((j, world.copy()))
    return out


def build(skeleton: dict[str, Any], effector: str) -> tuple[Any, Any, list, Matrix, Any]:
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    frames = rest_frames(skeleton, effector)
    eff_rest = frames[-1][1]
    hinges = [(j, m) for j, m in frames if j["type"] == "revolute"]
    arm = bpy.data.armatures.new("Arm")
    ob = bpy.data.objects.new("Arm", arm)
    scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    previous = None
    for k, (j, m) in enumerate(hinges):
        eb = arm.edit_bones.new(j["name"])
        head = m.to_translation()
        axis = (m.to_3x3() @ Vector(j["axis"])).normalized()
        length = 0.05
        if k == len(hinges) - 1:  # the tip's tail is the effector point (on the axis)
            length = (eff_rest.to_translation() - head).dot(axis)
        eb.head = head
        eb.tail = head + axis * length
        eb.roll = 0.0
        eb.parent = previous
        eb.use_connect = False
        previous = eb
    bpy.ops.object.mode_set(mode="OBJECT")
    for j, _ in hinges:
        pb = ob.pose.bones[j["name"]]
        pb.rotation_mode = "QUATERNION"
        pb.lock_ik_x = pb.lock_ik_z = True
        lim = j.get("limits")
        if lim is not None:
            pb.use_ik_limit_y = True
            pb.ik_min_y = max(lim[0], -math.pi)
            pb.ik_max_y = min(lim[1], math.pi)
    empty = bpy.data.objects.new("Target", None)
    scene.collection.objects.link(empty)
    tip = ob.pose.bones[hinges[-1][0]["name"]]
    con = tip.constraints.new("IK")
    con.target = empty
    con.use_rotation = True
    con.use_tail = True
    con.chain_count = len(hinges)
    # target matrix = R_target R_eff_rest^-1 B_tip, at the target point
    to_bone = eff_rest.to_3x3().inverted() @ ob.data.bones[tip.name].matrix_local.to_3x3()
    return ob, empty, [j["name"] for j, _ in hinges], to_bone, con


def angles(ob: Any, names: list[str]) -> list[float]:
    """Each bone's rotation about its own Y axis relative to rest (rad)."""
    out = []
    for name in names:
        pb = ob.pose.bones[name]
        rest = pb.bone.matrix_local
        if pb.parent is None:
            base = rest
        else:
            base = pb.parent.matrix @ pb.parent.bone.matrix_local.inverted() @ rest
        d = base.inverted() @ pb.matrix
        out.append(math.atan2(d[0][2], d[0][0]))
    return out


def set_channels(ob: Any, names: list[str], values: list[float] | None) -> None:
    for k, name in enumerate(names):
        pb = ob.pose.bones[name]
        a = 0.0 if values is None else values[k]
        pb.rotation_quaternion = Quaternion((0.0, 1.0, 0.0), a)


def run(config: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    ob, empty, names, to_bone, con = build(data["skeleton"], data["effector"])
    ob.pose.ik_solver = config["solver"]
    if config["solver"] == "ITASC":
        p = ob.pose.ik_param
        if "precision" in config:
            p.precision = config["precision"]
            p.iterations = config["iterations"]
            p.reiteration_method = config["reiteration"]
    layer = bpy.context.view_layer

    def place(t: list[list[float]]) -> Matrix:
        m = Matrix(t)
        r = (m.to_3x3() @ to_bone).to_4x4()
        r.translation = m.to_translation()
        return r

    out: dict[str, Any] = {"name": config["name"]}
    for wl in [k for k in data if k not in ("skeleton", "effector")]:
        targets = [place(t) for t in data[wl]]
        warm = wl != "A"
        values, times = [], []
        previous = None
        for t in targets:
            set_channels(ob, names, previous if warm else None)
            layer.update()
            t0 = time.perf_counter()
            empty.matrix_world = t
            layer.update()
            times.append((time.perf_counter() - t0) * 1e6)
            a = angles(ob, names)
            values.append(dict(zip(names, a, strict=True)))
            previous = a if warm else None
        out[wl] = {"values": values, "times_us": times}
    con.mute = True  # the cost of the same update without the IK
    muted = []
    for t in data["B"][:300]:
        t0 = time.perf_counter()
        empty.matrix_world = place(t)
        layer.update()
        muted.append((time.perf_counter() - t0) * 1e6)
    muted.sort()
    out["muted_us"] = muted[len(muted) // 2]
    out["note"] = f"depsgraph update incl.; muted-IK update {out['muted_us']:.0f} µs"
    return out


def main() -> int:
    data = json.loads(open(sys.argv[1]).read())
    result = {"blender": bpy.app.version_string, "configs": [run(c, data) for c in CONFIGS]}
    with open(sys.argv[2], "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
