"""A rigger's whole character (issue 18, points 1 and 2) in real Blender.

- Several root bones (an IK control bone beside the hips) read into one skeleton under a
  fixed ``<origin>`` joint; the other roots and their children keep their animation.
- Translation: a bone whose location channels are free (not connected, not all locked)
  has ``.tx .ty .tz`` prismatic joints along its rest axes; a root bone with free
  location and rotation is a floating base. Outside the chains they follow the bone's
  keys (keyed hips carry the legs); in a chain that reaches the root they are solved
  (whole-body IK: the hips move), the keys landing on the bone's location channels, a
  locked axis kept exactly.

Rigs are built in Blender (tests/addon/rig_builders.py); targets are Blender's own
evaluated bones of a posed rig, and every bake is judged by Blender's evaluated bones
afterwards. Armature space = world; metres and radians.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import bpy
import numpy as np
import pytest
from addon_helpers import export_skeleton
from mathutils import Quaternion
from rig_builders import (
    BIPED,
    bone_curves,
    build_biped,
    build_bones,
    fcurves,
    key_channels,
    misses,
    set_effectors,
    snapped_targets,
    world_to_bone,
    world_turn,
)

FRAMES = list(range(13))
TIGHT = 1e-5  # m and rad: the solver's tolerances in these tests


def _tight() -> None:
    s = bpy.context.scene.dhik
    s.position_tolerance = s.orientation_tolerance = TIGHT


def _leg_pose(ob: bpy.types.Object, f: int) -> dict[str, dict[str, Any]]:
    """A stepping motion of both legs (rotation channels), frame ``f``."""
    t = f / max(FRAMES[-1], 1)
    out = {}
    for side, sign in (("L", 1.0), ("R", -1.0)):
        pb = ob.pose.bones
        out[f"thigh.{side}"] = {"rotation_quaternion": world_turn(
            pb[f"thigh.{side}"], (1, 0, 0), sign * 0.35 * math.sin(2 * t))}
        out[f"shin.{side}"] = {"rotation_quaternion": world_turn(
            pb[f"shin.{side}"], (1, 0, 0), -0.2 - 0.3 * t)}
        out[f"foot.{side}"] = {"rotation_quaternion": world_turn(
            pb[f"foot.{side}"], (0, 0, 1), 0.2 * sign * t)}
    return out


def _hips_keys(ob: bpy.types.Object, f: int) -> dict[str, dict[str, Any]]:
    """The hips bobbing, swaying and turning (location and rotation keys), frame ``f``."""
    t = f / max(FRAMES[-1], 1)
    hips = ob.pose.bones["hips"]
    return {"hips": {
        "location": world_to_bone(hips, (0.04 * math.sin(3 * t), 0.0, -0.06 * t)),
        "rotation_quaternion": world_turn(hips, (0, 0, 1), 0.25 * math.sin(2 * t))}}


# ------------------------------------------------------------------ point 1: several roots


def _biped_with_control() -> bpy.types.Object:
    """The biped and, at the top level, an IK control bone with a child, both keyed."""
    ob = build_bones("biped", [
        *BIPED,
        ("IK_ctrl", (0.3, 0.3, 0.0), (0.3, 0.3, 0.2), None, False),
        ("IK_ctrl.pole", (0.3, 0.3, 0.3), (0.3, 0.3, 0.4), "IK_ctrl", False),
    ])
    for side in "LR":
        ob.pose.bones[f"thigh.{side}"].lock_location = (True, True, True)
    key_channels(ob, (0, 12), lambda f: {
        "IK_ctrl": {"location": (0.1 * f / 12, 0.0, 0.02), "rotation_quaternion":
                    Quaternion((0, 0, 1), 0.3 * f / 12)},
        "IK_ctrl.pole": {"rotation_quaternion": Quaternion((1, 0, 0), -0.2 * f / 12)}})
    return ob


def test_two_root_bones_bake_and_the_other_root_keeps_its_keys():
    """A control bone beside the hips (before: "has 2 root bones (hips, IK_ctrl); dhik
    needs exactly one root"): both feet reach Blender-made targets; IK_ctrl and its child
    keep their F-curves as they were, and no bone outside the legs gets a key."""
    ob = _biped_with_control()
    empties = snapped_targets(ob, ["foot.L", "foot.R"], FRAMES, lambda f: _leg_pose(ob, f))
    before = fcurves(ob)
    set_effectors(ob, empties, 3, FRAMES[0], FRAMES[-1])
    _tight()
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    after = fcurves(ob)
    for bone in ("IK_ctrl", "IK_ctrl.pole", "hips"):
        assert bone_curves(after, bone) == bone_curves(before, bone), bone
    keyed = {k[0].split('"')[1] for k in after if k[0].startswith("pose.bones")}
    assert keyed == {"IK_ctrl", "IK_ctrl.pole", "thigh.L", "shin.L", "foot.L", "thigh.R",
                     "shin.R", "foot.R"}  # (beside them: the error curves of the feet)
    position, orientation = misses(ob, empties, FRAMES)
    assert position < 1e-4 and orientation < 1e-3, (position, orientation)
    assert bpy.context.scene.dhik.result_converged == len(FRAMES)


def test_several_roots_export_under_an_origin_and_import_as_roots(core, tmp_path):
    """Export Skeleton writes one fixed ``<origin>`` root at the armature origin with every
    root bone's joints below it; Import Skeleton of that file builds the root bones again
    (no ``<origin>`` bone), and exporting that armature gives the same file."""
    ob = _biped_with_control()
    bpy.context.scene.dhik.armature = ob
    data = json.loads(Path(export_skeleton(ob)).read_text())
    joints = {j["name"]: j for j in data["joints"]}
    assert data["root_name"] == "<origin>"
    origin = joints["<origin>"]
    assert origin["type"] == "fixed" and origin["offset"] == [0.0, 0.0, 0.0]
    assert {n for n, j in joints.items() if j["parent"] == "<origin>"} == {"hips.tx",
                                                                           "IK_ctrl.tx"}
    path = tmp_path / "two_roots.json"
    path.write_text(json.dumps(data))
    assert bpy.ops.dhik.import_skeleton(filepath=str(path)) == {"FINISHED"}
    built = bpy.context.scene.dhik.armature
    assert built is not ob
    assert sorted(b.name for b in built.data.bones if b.parent is None) == ["IK_ctrl", "hips"]
    assert "<origin>" not in built.data.bones and "hips.tx" not in built.data.bones
    again = json.loads(Path(export_skeleton(built)).read_text())
    assert json.dumps(again, sort_keys=True) == json.dumps(data, sort_keys=True)


def test_metarig_with_a_control_bone_beside_the_spine():
    """The Rigify human metarig with a top-level control bone added (what a rigger adds
    first): the left hand bakes (chain of 3 bones) and the control bone keeps its keys."""
    from addon_helpers import build_metarig

    ob = build_metarig()
    if ob is None:
        pytest.skip("this bpy has no Rigify human metarig")
    bpy.ops.object.mode_set(mode="EDIT")
    eb = ob.data.edit_bones.new("torso_ctrl")
    eb.head, eb.tail = (0.0, 0.5, 0.0), (0.0, 0.5, 0.3)
    bpy.ops.object.mode_set(mode="OBJECT")
    ctrl = ob.pose.bones["torso_ctrl"]
    ctrl.rotation_mode = "QUATERNION"
    key_channels(ob, (0, 8), lambda f: {"torso_ctrl": {"location": (0.0, 0.0, 0.01 * f)}})
    before = fcurves(ob)
    frames = list(range(9))

    def arm(f: int) -> dict[str, dict[str, Any]]:
        pb = ob.pose.bones
        return {"forearm.L": {"rotation_quaternion": world_turn(pb["forearm.L"], (0, 0, 1),
                                                                0.4 + 0.05 * f)},
                "upper_arm.L": {"rotation_quaternion": world_turn(pb["upper_arm.L"],
                                                                  (1, 0, 0), 0.03 * f)}}

    empties = snapped_targets(ob, ["hand.L"], frames, arm)
    set_effectors(ob, empties, 3, 0, 8)
    _tight()
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert bone_curves(fcurves(ob), "torso_ctrl") == bone_curves(before, "torso_ctrl")
    assert max(misses(ob, empties, frames)) < 1e-3


# ----------------------------------------------------------- point 2: translation joints


def test_keyed_hips_carry_the_legs():
    """The hips keyed (location bobbing and swaying, rotation turning), both feet on
    targets with a chain of 3 bones (thigh, shin, foot): the hips' joints, outside the
    chains, follow their keys, so Blender shows both feet on their targets on every
    frame (before: the solve took the hips at rest and Blender showed the feet up to
    0.14 m and 0.25 rad off), and the hips' F-curves are as they were."""
    ob = build_biped()
    key_channels(ob, FRAMES, lambda f: _hips_keys(ob, f))
    empties = snapped_targets(ob, ["foot.L", "foot.R"], FRAMES, lambda f: _leg_pose(ob, f))
    before = bone_curves(fcurves(ob), "hips")
    set_effectors(ob, empties, 3, FRAMES[0], FRAMES[-1])
    _tight()
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert bone_curves(fcurves(ob), "hips") == before
    position, orientation = misses(ob, empties, FRAMES)
    assert position < 1e-4 and orientation < 1e-3, (position, orientation)
    assert bpy.context.scene.dhik.result_converged == len(FRAMES)


def _quadruped() -> bpy.types.Object | None:
    try:
        bpy.ops.preferences.addon_enable(module="rigify")
        bpy.ops.object.armature_basic_quadruped_metarig_add()
    except (RuntimeError, AttributeError):
        return None
    return bpy.context.active_object


QUAD_FEET = ["foot.L", "foot.R", "front_foot.L", "front_foot.R"]


def test_quadruped_metarig_with_a_keyed_root_keeps_four_feet_on_target():
    """Rigify's basic quadruped metarig, its root bone (spine.004) keyed bobbing and
    swaying, four feet on targets of a walk (chains of 3 bones): Blender shows every foot
    on its target on every frame (before: the root was taken at rest and the feet were
    up to 4.9 cm and 0.08 rad off)."""
    ob = _quadruped()
    if ob is None:
        pytest.skip("this bpy has no Rigify quadruped metarig")
    root = ob.pose.bones["spine.004"]
    root.rotation_mode = "QUATERNION"
    frames = list(range(17))

    def body(f: int) -> dict[str, dict[str, Any]]:
        t = f / 16
        return {"spine.004": {
            "location": world_to_bone(root, (0.02 * math.sin(4 * t), 0.03 * t,
                                             0.025 * math.sin(6 * t))),
            "rotation_quaternion": world_turn(root, (0, 1, 0), 0.08 * math.sin(3 * t))}}

    def legs(f: int) -> dict[str, dict[str, Any]]:
        t = f / 16
        out = {}
        for k, foot in enumerate(QUAD_FEET):
            front = "front_" if foot.startswith("front") else ""
            side = foot[-1]
            phase = 0.3 * math.sin(4 * t + k)
            pb = ob.pose.bones
            out[f"{front}thigh.{side}"] = {"rotation_quaternion": world_turn(
                pb[f"{front}thigh.{side}"], (1, 0, 0), phase)}
            out[f"{front}shin.{side}"] = {"rotation_quaternion": world_turn(
                pb[f"{front}shin.{side}"], (1, 0, 0), -0.5 * phase)}
        return out

    key_channels(ob, frames, body)
    empties = snapped_targets(ob, QUAD_FEET, frames, legs)
    set_effectors(ob, empties, 3, frames[0], frames[-1])
    _tight()
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    position, orientation = misses(ob, empties, frames)
    assert position < 1e-4 and orientation < 1e-3, (position, orientation)
    assert bpy.context.scene.dhik.result_converged == len(frames)


def test_whole_body_ik_moves_the_floating_hips_and_keeps_a_locked_axis():
    """Chain length 0 on both feet: the hips (a floating base) are solved with the legs.
    The targets were made with the hips lowered by 12 cm and moved forward, beyond the
    legs' reach from the hips' rest place (before: the hips stayed put and the feet
    missed by 0.12 m). The hips' location X channel is locked (lock_location): the
    bake keys it at exactly 0 while the hips move along the others."""
    ob = build_biped()
    hips = ob.pose.bones["hips"]
    hips.lock_location = (True, False, False)  # bone X = world X: no sideways motion

    def pose(f: int) -> dict[str, dict[str, Any]]:
        t = f / FRAMES[-1]
        out = _leg_pose(ob, f)
        out["hips"] = {"location": world_to_bone(hips, (0.0, -0.05 * t, -0.12 * t)),
                       "rotation_quaternion": world_turn(hips, (0, 0, 1), 0.2 * t)}
        return out

    empties = snapped_targets(ob, ["foot.L", "foot.R"], FRAMES, pose)
    set_effectors(ob, empties, 0, FRAMES[0], FRAMES[-1])
    _tight()
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    position, orientation = misses(ob, empties, FRAMES)
    assert position < 1e-4 and orientation < 1e-3, (position, orientation)
    curves = bone_curves(fcurves(ob), "hips")
    x = curves[('pose.bones["hips"].location', 0)]
    assert {v for _f, v in x} == {0.0}
    moved = [max(abs(v) for _f, v in curves[('pose.bones["hips"].location', i)])
             for i in (1, 2)]
    assert max(moved) > 0.05, moved  # the hips went down (bone Y = world Z)


def test_floating_base_exports_as_three_slides_and_a_ball_and_imports_as_one_bone(tmp_path):
    """Export Skeleton writes the hips as ``hips.tx``, ``.ty``, ``.tz`` (prismatic along
    the hips bone's rest axes, a locked axis limited to [0, 0]) and then ``hips``, an
    unlimited spherical joint; Import Skeleton of that file builds one bone ``hips``
    whose location channels carry them (unlocked where they move), and its export is
    the same file."""
    ob = build_biped()
    ob.pose.bones["hips"].lock_location = (False, False, True)
    bpy.context.scene.dhik.armature = ob
    data = json.loads(Path(export_skeleton(ob)).read_text())
    joints = {j["name"]: j for j in data["joints"]}
    assert data["root_name"] == "hips.tx"
    b = np.array(ob.data.bones["hips"].matrix_local.to_3x3(), dtype=float)
    for k, (name, parent) in enumerate([("hips.tx", None), ("hips.ty", "hips.tx"),
                                        ("hips.tz", "hips.ty")]):
        j = joints[name]
        assert j["type"] == "prismatic" and j["parent"] == parent
        assert np.allclose(j["axis"], b[:, k], atol=1e-6)
        assert j.get("limits") == ([0.0, 0.0] if k == 2 else None)
    assert np.allclose(joints["hips.tx"]["offset"], [0, 0, 1.0], atol=1e-6)
    assert joints["hips"]["type"] == "spherical" and joints["hips"]["parent"] == "hips.tz"
    assert joints["hips"].get("limits") is None and joints["hips"]["offset"] == [0, 0, 0]
    assert joints["thigh.L"]["parent"] == "hips"  # location locked: no slides
    path = tmp_path / "biped.json"
    path.write_text(json.dumps(data))
    assert bpy.ops.dhik.import_skeleton(filepath=str(path)) == {"FINISHED"}
    built = bpy.context.scene.dhik.armature
    assert sorted(b.name for b in built.data.bones) == sorted(
        n for n in joints if not n.startswith("hips.t"))
    pb = built.pose.bones["hips"]
    c = np.array(built.data.bones["hips"].matrix_local.to_3x3(), dtype=float).T
    free = [bool(np.abs(c[i] @ np.array([joints["hips.tx"]["axis"],
                                         joints["hips.ty"]["axis"]]).T).max() > 1e-6)
            for i in range(3)]
    assert list(pb.lock_location) == [not f for f in free]
    again = json.loads(Path(export_skeleton(built)).read_text())
    assert json.dumps(again, sort_keys=True) == json.dumps(data, sort_keys=True)


def test_imported_floating_base_bakes_its_location_keys(tmp_path):
    """The exported biped imported again and baked (chain length 0, hips lowered): the
    hips bone's location channels get the solved slides and Blender shows the feet on
    their targets."""
    src = build_biped()
    bpy.context.scene.dhik.armature = src
    path = tmp_path / "biped.json"
    path.write_text(Path(export_skeleton(src)).read_text())
    bpy.data.objects.remove(src)
    assert bpy.ops.dhik.import_skeleton(filepath=str(path)) == {"FINISHED"}
    ob = bpy.context.scene.dhik.armature
    hips = ob.pose.bones["hips"]

    def pose(f: int) -> dict[str, dict[str, Any]]:
        t = f / 6
        return {"hips": {"location": world_to_bone(hips, (0.0, 0.0, -0.1 * t))}}

    frames = list(range(7))
    empties = snapped_targets(ob, ["foot.L", "foot.R"], frames, pose)
    set_effectors(ob, empties, 0, 0, 6)
    _tight()
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert max(misses(ob, empties, frames)) < 1e-3
    curves = bone_curves(fcurves(ob), "hips")
    assert any(k[0].endswith(".location") for k in curves)
    bpy.context.scene.frame_set(6)
    assert np.array(hips.head)[2] < 1.0 - 0.05  # Blender shows the hips lowered


def test_chain_length_leaves_the_first_bones_location_to_its_keys(addon):
    """On the metarig's arm (upper_arm.L and shoulder.L are not connected, location
    free): a chain of 3 bones (hand, forearm, upper arm) holds no translation joint, so
    the shoulder joint stays where the shoulder puts it; 4 bones (to the shoulder) take
    the upper arm's slides, not the shoulder's; a chain that reaches the root bone takes
    the root's (a floating base)."""
    from addon_helpers import build_metarig

    ob = build_metarig()
    if ob is None:
        pytest.skip("this bpy has no Rigify human metarig")
    read = addon.dhik_addon.armature_read
    defn = read.read_skeleton(ob)
    parent = {j.name: j.parent for j in defn.joints}
    path, at = [], "hand.L"
    while at is not None:
        path.append(at)
        at = parent[at]
    assert path[:7] == ["hand.L", "forearm.L", "upper_arm.L", "upper_arm.L.tz",
                        "upper_arm.L.ty", "upper_arm.L.tx", "shoulder.L"]
    assert path[-4:] == ["spine", "spine.tz", "spine.ty", "spine.tx"]
    assert read.chain_joint_count(ob, defn, "hand.L", 3) == 3
    assert read.chain_joint_count(ob, defn, "hand.L", 4) == 7
    bones = [n for n in path if n in ob.data.bones]
    assert read.chain_joint_count(ob, defn, "hand.L", len(bones)) == len(path)
    assert read.chain_joint_count(ob, defn, "hand.L", len(bones) + 1) == 0


def test_origin_name_never_clashes_with_a_bone(addon):
    """A root bone already named ``<origin>``: the synthesized root takes ``<origin>_1``."""
    ob = build_bones("clash", [("<origin>", (0, 0, 0), (0, 0, 1), None, False),
                               ("other", (1, 0, 0), (1, 0, 1), None, False)])
    data = addon.dhik_addon.armature_read.skeleton_dict(ob)
    assert data["root_name"] == "<origin>_1"
    assert {j["name"] for j in data["joints"] if j["parent"] == "<origin>_1"} == {
        "<origin>.tx", "other.tx"}


def test_export_animation_reads_the_slides_back(core, tmp_path):
    """Export Animation after a whole-body bake gives back the baked ``hips.ty``/``.tz``
    displacements (read from the hips' location channel) and the hips' rotation."""
    ob = build_biped()
    hips = ob.pose.bones["hips"]
    empties = snapped_targets(ob, ["foot.L", "foot.R"], FRAMES, lambda f: {"hips": {
        "location": world_to_bone(hips, (0.0, -0.01 * f, -0.01 * f))}})
    set_effectors(ob, empties, 0, FRAMES[0], FRAMES[-1])
    baked = tmp_path / "baked.json"
    bpy.context.scene.dhik.animation_path = str(baked)
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    out = tmp_path / "exported.json"
    assert bpy.ops.dhik.export_animation(filepath=str(out)) == {"FINISHED"}
    a, b = core.formats.load_animation(baked), core.formats.load_animation(out)
    assert [f["frame"] for f in a] == [f["frame"] for f in b]
    worst = 0.0
    for fa, fb in zip(a, b, strict=True):
        for name in ("hips.tx", "hips.ty", "hips.tz"):
            worst = max(worst, abs(fa["joints"][name]["displacement"]
                                   - fb["joints"][name]["displacement"]))
        qa, qb = np.array(fa["joints"]["hips"]["quaternion"]), np.array(
            fb["joints"]["hips"]["quaternion"])
        worst = max(worst, float(min(np.abs(qa - qb).max(), np.abs(qa + qb).max())))
    assert worst < 1e-6, worst
    assert max(abs(f["joints"]["hips.ty"]["displacement"]) for f in a) > 0.01


def test_floating_hips_turn_through_the_middle_angle_without_a_jump():
    """The hips alone as the effector (chain 0: their three slides and the unlimited
    spherical joint) follow a target that pitches 0 -> 150 deg about world Y, the middle
    axis of the XYZ angles (a chart in those angles has its pole at +-90 deg), rolling and
    yawing a little beside it: every frame converges with no jump, Blender shows the hips
    on target, and the baked rotation never steps more than twice the target's step."""
    ob = build_biped()
    hips = ob.pose.bones["hips"]
    rest = hips.bone.matrix_local.to_quaternion()
    frames = list(range(31))

    def turn(f: int) -> Quaternion:
        t = f / frames[-1]
        world = (Quaternion((0, 0, 1), 0.2 * math.sin(math.pi * t))
                 @ Quaternion((0, 1, 0), math.radians(150) * t)
                 @ Quaternion((1, 0, 0), 0.3 * math.sin(2 * math.pi * t)))
        return rest.inverted() @ world @ rest

    def pose(f: int) -> dict[str, dict[str, Any]]:
        t = f / frames[-1]
        return {"hips": {"location": world_to_bone(hips, (0.1 * t, 0.0, -0.2 * t)),
                         "rotation_quaternion": turn(f)}}

    empties = snapped_targets(ob, ["hips"], frames, pose)
    set_effectors(ob, empties, 0, frames[0], frames[-1])
    _tight()
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    s = bpy.context.scene.dhik
    assert s.result_converged == len(frames) and "jump" not in s.result_summary
    position, orientation = misses(ob, empties, frames)
    assert position < 1e-4 and orientation < 1e-3, (position, orientation)
    baked = []
    for f in frames:
        bpy.context.scene.frame_set(f)
        baked.append(hips.matrix_basis.to_quaternion())
    step = max(turn(f).rotation_difference(turn(f + 1)).angle for f in frames[:-1])
    got = max(a.rotation_difference(b).angle for a, b in zip(baked, baked[1:], strict=False))
    assert got < 2 * step, (got, step)
    assert abs(baked[15].rotation_difference(turn(15)).angle) < 1e-3  # 75 deg: mid-way


def test_import_animation_of_a_whole_body_bake_puts_the_hips_back(tmp_path):
    """A whole-body bake's animation.json (the hips' ``.tx .ty .tz`` slides and their
    spherical joint beside the legs' joints), imported into a new action of the same
    armature after its action was dropped: Blender's evaluated bones, the hips' included,
    are those of the bake on every frame."""
    from addon_helpers import bone_world

    ob = build_biped()
    hips = ob.pose.bones["hips"]

    def pose(f: int) -> dict[str, dict[str, Any]]:
        t = f / FRAMES[-1]
        out = _leg_pose(ob, f)
        out["hips"] = {"location": world_to_bone(hips, (0.02 * t, -0.05 * t, -0.1 * t)),
                       "rotation_quaternion": world_turn(hips, (0, 0, 1), 0.3 * t)}
        return out

    empties = snapped_targets(ob, ["foot.L", "foot.R"], FRAMES, pose)
    set_effectors(ob, empties, 0, FRAMES[0], FRAMES[-1])
    baked = tmp_path / "baked.json"
    bpy.context.scene.dhik.animation_path = str(baked)
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    names = [pb.name for pb in ob.pose.bones]
    poses = {}
    for f in FRAMES:
        bpy.context.scene.frame_set(f)
        poses.update({(f, n): bone_world(ob, n) for n in names})
    assert max(abs(poses[(f, "hips")][2, 3] - 1.0) for f in FRAMES) > 0.05  # hips moved
    ob.animation_data.action = None
    for pb in ob.pose.bones:
        pb.location, pb.rotation_quaternion = (0, 0, 0), (1, 0, 0, 0)
    assert bpy.ops.dhik.import_animation(filepath=str(baked), action="NEW") == {"FINISHED"}
    worst = 0.0
    for f in FRAMES:
        bpy.context.scene.frame_set(f)
        worst = max(worst, *(float(np.abs(bone_world(ob, n) - poses[(f, n)]).max())
                             for n in names))
    assert worst < 1e-5, worst
