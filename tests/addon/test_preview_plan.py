"""The live preview shows what Bake keys (issue 17, point 2), in real bpy.

With the preview on and the targets left alone, the range is planned as a bake plans it;
every frame reached by playing, scrubbing back or jumping then poses the bones as Bake
keys them on that frame (Blender's evaluated bones, compared after a real bake). Moving
a target shows single-frame solves until the range is planned again, then the new
plan's poses. Frames: world; metres, radians.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from unittest import mock

import bpy
import numpy as np
from addon_helpers import build_metarig, keyed_root

ROOT_ARM7 = "sample_scenes/arm7"
ORDER = [*range(0, 41), *range(40, -1, -3), 33, 2, 40, 17, 17, 9]  # play, scrub back, jump


def _preview(addon):
    return addon.dhik_addon.preview


def _bones(ob: bpy.types.Object) -> dict[str, np.ndarray]:
    """Every pose bone's evaluated world 4x4."""
    bpy.context.view_layer.update()
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return {pb.name: np.array(ev.matrix_world @ pb.matrix, dtype=float) for pb in ev.pose.bones}


def _gap(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> tuple[float, float]:
    """Largest rotation angle (rad) and head distance (m) between two bone sets."""
    rot = pos = 0.0
    for name, m in a.items():
        ra = m[:3, :3] / np.linalg.norm(m[:3, :3], axis=0)
        rb = b[name][:3, :3] / np.linalg.norm(b[name][:3, :3], axis=0)
        c = (np.trace(ra @ rb.T) - 1.0) / 2.0
        rot = max(rot, math.acos(max(-1.0, min(1.0, c))))
        pos = max(pos, float(np.linalg.norm(m[:3, 3] - b[name][:3, 3])))
    return rot, pos


def _visit(ob: bpy.types.Object, frames: list[int]) -> dict[int, dict[str, np.ndarray]]:
    """The evaluated bones on ``frames`` in that order; a frame seen twice must look the
    same both times (scrubbing back gives the poses playing gave)."""
    seen: dict[int, dict[str, np.ndarray]] = {}
    for f in frames:
        bpy.context.scene.frame_set(f)
        now = _bones(ob)
        if f in seen:
            assert max(_gap(now, seen[f])) < 1e-6, f
        seen[f] = now
    return seen


def _baked(ob: bpy.types.Object, frames: list[int]) -> dict[int, dict[str, np.ndarray]]:
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    out = {}
    for f in frames:
        bpy.context.scene.frame_set(f)
        out[f] = _bones(ob)
    return out


def _arm7(addon, core) -> tuple[bpy.types.Object, bpy.types.Object]:
    assert bpy.ops.dhik.import_skeleton(filepath=f"{ROOT_ARM7}/skeleton.json") == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=f"{ROOT_ARM7}/targets.json") == {"FINISHED"}
    s = bpy.context.scene.dhik
    s.use_scene_range = False
    s.frame_start, s.frame_end = 0, 40
    s.position_tolerance, s.orientation_tolerance = 1e-5, 1e-4
    return s.armature, s.target


def test_every_frame_poses_what_bake_keys_however_it_is_reached(addon, core) -> None:
    ob, _target = _arm7(addon, core)
    scene, s, pv = bpy.context.scene, bpy.context.scene.dhik, _preview(addon)
    s.live_preview = True
    assert pv.status(scene) == pv.PLANNING  # until the plan is there: single-frame solves
    assert pv.settle(scene) and pv.status(scene) == pv.PLANNED
    solves = pv.solve_count(scene)
    shown = _visit(ob, ORDER)
    assert pv.solve_count(scene) == solves  # every frame came from the plan
    s.live_preview = False
    baked = _baked(ob, sorted(shown))
    for f in shown:
        rot, pos = _gap(shown[f], baked[f])
        assert rot < 1e-4 and pos < 1e-5, (f, rot, pos)


def test_the_metarig_hand_with_a_chain_length_poses_what_bake_keys(addon, core) -> None:
    """The Rigify metarig's left hand, Chain Length 3, position only (Blender's IK
    default): the preview gave other poses than Bake on every frame before (3.14 rad)."""
    ob = build_metarig()
    if ob is None:
        return
    scene, s, pv = bpy.context.scene, bpy.context.scene.dhik, _preview(addon)
    hand = ob.pose.bones["hand.L"]
    start = np.array(ob.matrix_world @ hand.head, dtype=float)
    empty = bpy.data.objects.new("hand_target", None)
    bpy.context.collection.objects.link(empty)
    for f in range(0, 31, 5):  # a circle within reach, in front of the shoulder
        a = 2 * math.pi * f / 30
        empty.location = start + np.array([0.08 * math.cos(a) - 0.08, -0.1,
                                           0.08 * math.sin(a)])
        empty.keyframe_insert("location", frame=f)
    s.armature, s.effector, s.target = ob, "hand.L", empty
    s.chain_length, s.orientation_weight = 3, 0.0
    s.use_scene_range = False
    s.frame_start, s.frame_end = 0, 30
    s.position_tolerance = 1e-5
    s.live_preview = True
    assert pv.settle(scene) and pv.status(scene) == pv.PLANNED
    shown = _visit(ob, [*range(0, 31), *range(30, -1, -4), 21, 3])
    s.live_preview = False
    baked = _baked(ob, sorted(shown))
    for f in shown:
        rot, pos = _gap(shown[f], baked[f])
        assert rot < 1e-4 and pos < 1e-5, (f, rot, pos)


def test_moving_a_target_solves_frames_alone_until_the_range_is_planned_again(
        addon, core) -> None:
    ob, target = _arm7(addon, core)
    scene, s, pv = bpy.context.scene, bpy.context.scene.dhik, _preview(addon)
    scene.frame_set(20)
    s.live_preview = True
    assert pv.settle(scene)
    solves = pv.solve_count(scene)
    keyed_root(target).location.x += 0.03  # the user drags the target's keyed parent
    bpy.context.view_layer.update()
    assert pv.solve_count(scene) == solves + 1  # the current frame, solved alone
    assert pv.status(scene) == pv.CHANGED and not pv.planned(scene)
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    tool = np.array(ev.matrix_world @ ev.pose.bones["Tool"].head, dtype=float)
    want = np.array(target.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world,
                    dtype=float)[:3, 3]
    assert np.linalg.norm(tool - want) < 1e-5  # on the moved target at once
    assert pv.settle(scene) and pv.status(scene) == pv.PLANNED  # planned again
    shown = _visit(ob, [20, 21, 35, 4])
    s.live_preview = False
    baked = _baked(ob, sorted(shown))  # the moved target, baked
    for f in shown:
        rot, pos = _gap(shown[f], baked[f])
        assert rot < 1e-4 and pos < 1e-5, (f, rot, pos)


def test_the_panel_says_what_the_preview_shows(addon, core) -> None:
    _arm7(addon, core)
    scene, s, pv = bpy.context.scene, bpy.context.scene.dhik, _preview(addon)
    panel = addon.dhik_addon.panel.DHIK_PT_panel

    def labels() -> list[str]:
        layout = mock.MagicMock()
        panel.draw(SimpleNamespace(layout=layout), bpy.context)
        return [c.kwargs["text"] for c in layout.mock_calls if c[0].endswith("label")
                and c.kwargs.get("text", "").startswith("Preview:")]

    assert labels() == []
    s.live_preview = True
    assert labels() == [f"Preview: {pv.PLANNING}"]
    assert pv.settle(scene)
    assert labels() == [f"Preview: {pv.PLANNED}"]
    scene.frame_set(s.frame_end + 5)
    assert labels() == [f"Preview: {pv.OUTSIDE}"]
    s.live_preview = False
    assert labels() == []


def test_a_floating_base_previews_what_bake_keys(addon) -> None:
    """Whole-body IK (chain length 0 on both feet of a biped whose hips translate): the
    hips' translation joints ride on their location channel, as Bake keys them (the
    preview stopped with a KeyError on ``hips.tx`` before)."""
    from rig_builders import build_biped, set_effectors, snapped_targets, world_to_bone

    ob = build_biped()
    hips = ob.pose.bones["hips"]
    frames = list(range(0, 13))

    def pose(f: int) -> dict:
        return {"hips": {"location": world_to_bone(hips, (0.0, -0.03 * f / 12, -0.1 * f / 12))}}

    empties = snapped_targets(ob, ["foot.L", "foot.R"], frames, pose)
    set_effectors(ob, empties, 0, frames[0], frames[-1])
    scene, s, pv = bpy.context.scene, bpy.context.scene.dhik, _preview(addon)
    s.position_tolerance, s.orientation_tolerance = 1e-5, 1e-4
    s.live_preview = True
    assert not s.preview_error, s.preview_error
    assert pv.settle(scene) and pv.status(scene) == pv.PLANNED
    shown = _visit(ob, [*frames, 6, 0, 12])
    assert np.abs(np.array(ob.pose.bones["hips"].location)).max() > 0.05  # the hips moved
    s.live_preview = False
    baked = _baked(ob, sorted(shown))
    for f in shown:
        rot, pos = _gap(shown[f], baked[f])
        assert rot < 1e-4 and pos < 1e-5, (f, rot, pos)


def test_a_bone_target_of_another_armature_previews_what_bake_keys(addon, core) -> None:
    """The target is a keyed bone of a moved, turned control armature (Target + Bone):
    the preview reads the bone, not the control armature's origin, in its plan and in
    its single-frame solves."""
    from mathutils import Euler, Matrix

    ob, empty = _arm7(addon, core)
    scene, s, pv = bpy.context.scene, bpy.context.scene.dhik, _preview(addon)
    arm = bpy.data.armatures.new("controls")
    controls = bpy.data.objects.new("controls", arm)
    bpy.context.collection.objects.link(controls)
    bpy.context.view_layer.objects.active = controls
    bpy.ops.object.mode_set(mode="EDIT")
    eb = arm.edit_bones.new("ctrl")
    eb.head, eb.tail = (0.0, 0.0, 0.0), (0.0, 0.1, 0.0)
    bpy.ops.object.mode_set(mode="OBJECT")
    controls.matrix_world = Matrix.Translation((0.4, -0.3, 0.2)) @ Euler(
        (0.3, -0.5, 1.2)).to_matrix().to_4x4()
    pb = controls.pose.bones["ctrl"]
    pb.rotation_mode = "QUATERNION"
    for f in range(0, 41):  # the control bone keyed onto the sample's target
        scene.frame_set(f)
        pb.matrix = controls.matrix_world.inverted() @ empty.matrix_world
        bpy.context.view_layer.update()
        pb.keyframe_insert("location", frame=f)
        pb.keyframe_insert("rotation_quaternion", frame=f)
    s.target, s.target_bone = controls, "ctrl"
    scene.frame_set(7)
    s.live_preview = True
    assert not s.preview_error, s.preview_error
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    tool = np.array(ev.matrix_world @ ev.pose.bones["Tool"].head, dtype=float)
    goal = np.array(controls.matrix_world @ controls.pose.bones["ctrl"].head, dtype=float)
    assert np.linalg.norm(tool - goal) < 1e-4  # the single-frame solve aims at the bone
    assert pv.settle(scene) and pv.status(scene) == pv.PLANNED
    shown = _visit(ob, [7, 8, 30, 2])
    s.live_preview = False
    baked = _baked(ob, sorted(shown))
    for f in shown:
        rot, pos = _gap(shown[f], baked[f])
        assert rot < 1e-4 and pos < 1e-5, (f, rot, pos)
