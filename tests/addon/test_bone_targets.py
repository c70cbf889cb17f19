"""Bone targets (issue 18, point 4) on real bpy: an effector's target or pole is a bone of
an armature, as the IK constraint's Target + Bone.

Scenes as a rigger sets them up: the sample 7-joint arm (arm7) imported with its
targets; a control armature whose bone is keyed on every frame onto the imported target
(the control armature moved and turned in the world); a mocap armature from Blender's
own BVH importer; a control bone of the baked armature itself. Blender's evaluated
bones are the judge: after the bake the effector bone's head and orientation are those
of the target bone, frame by frame (world space, metres and radians).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import bpy
import numpy as np
import pytest
from addon_helpers import bone_world, write_json
from mathutils import Euler, Matrix

ARM7 = Path(__file__).resolve().parents[2] / "sample_scenes" / "arm7"
FRAMES = 40  # of arm7's 240 target frames


def _np(m) -> np.ndarray:
    return np.array(m, dtype=float)


def _rotation_gap(a: np.ndarray, b: np.ndarray) -> float:
    """Angle (rad) between the rotations of two 4x4 matrices."""
    r = a[:3, :3].T @ b[:3, :3]
    vee = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]]) / 2
    return float(math.atan2(np.linalg.norm(vee), (np.trace(r) - 1) / 2))


def _arm7(tmp_path: Path, frames: int = FRAMES) -> tuple[bpy.types.Object, bpy.types.Object]:
    """arm7 imported, and its first ``frames`` target keyframes (an empty showing the Tool
    bone's orientation); the scene range 0 .. frames - 1."""
    keys = json.loads((ARM7 / "targets.json").read_text())[:frames]
    tgt = write_json(tmp_path / "arm7" / "targets.json", keys)
    assert bpy.ops.dhik.import_skeleton(filepath=str(ARM7 / "skeleton.json")) == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=str(tgt)) == {"FINISHED"}
    s = bpy.context.scene.dhik
    return s.armature, s.target


def _armature(name: str, bones: list[tuple[str, tuple, tuple, str | None]]) -> bpy.types.Object:
    """A hand-made armature (quaternion bones), linked and left in Object Mode."""
    arm = bpy.data.armatures.new(name)
    ob = bpy.data.objects.new(name, arm)
    bpy.context.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    for bone, head, tail, parent in bones:
        eb = arm.edit_bones.new(bone)
        eb.head, eb.tail = head, tail
        if parent:
            eb.parent = arm.edit_bones[parent]
    bpy.ops.object.mode_set(mode="OBJECT")
    for pb in ob.pose.bones:
        pb.rotation_mode = "QUATERNION"
    return ob


def _key_bone_onto(ob: bpy.types.Object, bone: str, follow: bpy.types.Object,
                   frames: range) -> None:
    """Key pose bone ``bone`` of ``ob`` on every frame at ``follow``'s world pose (its
    head at the object's origin, its axes the object's axes)."""
    scene = bpy.context.scene
    pb = ob.pose.bones[bone]
    for f in frames:
        scene.frame_set(f)
        pb.matrix = ob.matrix_world.inverted() @ follow.matrix_world
        bpy.context.view_layer.update()
        pb.keyframe_insert("location", frame=f)
        pb.keyframe_insert("rotation_quaternion", frame=f)


def _control_rig() -> bpy.types.Object:
    """A control armature away from the origin, turned: one root bone ``ctrl``."""
    ob = _armature("controls", [("ctrl", (0.0, 0.0, 0.0), (0.0, 0.1, 0.0), None),
                                ("spare", (0.0, 0.0, 0.0), (0.0, 0.0, 0.1), "ctrl")])
    ob.matrix_world = Matrix.Translation((0.4, -0.3, 0.2)) @ Euler(
        (0.3, -0.5, 1.2)).to_matrix().to_4x4()
    return ob


def _bake(tmp_path: Path) -> None:
    s = bpy.context.scene.dhik
    s.animation_path = str(tmp_path / "animation.json")
    assert bpy.ops.dhik.bake() == {"FINISHED"}


def _gaps(ob, bone: str, target: bpy.types.Object, target_bone: str,
          frames: range) -> tuple[float, float]:  # fmt: skip
    """Largest position (m) and rotation (rad) gap, over ``frames``, between Blender's
    evaluated effector bone and the evaluated target bone (world)."""
    worst_p = worst_r = 0.0
    for f in frames:
        bpy.context.scene.frame_set(f)
        eff, tgt = bone_world(ob, bone), bone_world(target, target_bone)
        worst_p = max(worst_p, float(np.linalg.norm(eff[:3, 3] - tgt[:3, 3])))
        worst_r = max(worst_r, _rotation_gap(eff, tgt))
    return worst_p, worst_r


def test_a_keyed_bone_of_another_armature_is_followed(tmp_path):
    """The Tool follows a moving bone of a moved, turned control armature on every frame:
    its head on the bone's head, its orientation the bone's."""
    ob, empty = _arm7(tmp_path)
    ob.matrix_world = Matrix.Translation((-0.2, 0.5, 0.1)) @ Euler((0, 0, 0.7)).to_matrix(
        ).to_4x4()  # the imported targets are the armature's children: still reachable
    controls = _control_rig()
    frames = range(FRAMES)
    _key_bone_onto(controls, "ctrl", empty, frames)
    s = bpy.context.scene.dhik
    s.target, s.target_bone = controls, "ctrl"
    s.position_tolerance, s.orientation_tolerance = 1e-6, 1e-5
    _bake(tmp_path)
    assert s.result_converged == FRAMES
    pe, re = _gaps(ob, "Tool", controls, "ctrl", frames)
    assert pe < 1e-5 and re < 1e-4, (pe, re)
    print(f"\nFIGURES bone target: {FRAMES} frames, Tool on the control bone within "
          f"{pe:.2g} m, {re:.2g} rad")


def _bvh(path: Path, hand_positions: np.ndarray) -> Path:
    """A BVH (centimetres, Y up) whose Hand joint's head moves through
    ``hand_positions`` (Blender metres, Z up): the root translates, the joints turn a
    little (the hand's offset from the root is then not constant)."""
    lines = ["HIERARCHY", "ROOT Hips", "{", "\tOFFSET 0 0 0",
             "\tCHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation",
             "\tJOINT Hand", "\t{", "\t\tOFFSET 0 5 0",
             "\t\tCHANNELS 3 Zrotation Xrotation Yrotation",
             "\t\tEnd Site", "\t\t{", "\t\t\tOFFSET 0 5 0", "\t\t}", "\t}", "}",
             "MOTION", f"Frames: {len(hand_positions)}", "Frame Time: 0.041667"]
    for i, (x, y, z) in enumerate(hand_positions):
        # Blender (x, y, z) is BVH (x, z, -y); the Hand sits 5 cm above the root while
        # the root does not turn (its rotation channels stay 0)
        hips = np.array([x, z - 0.05, -y]) * 100.0
        lines.append(" ".join(f"{v:.6f}" for v in (*hips, 0, 0, 0, 3.0 * i, 2.0 * i, 0)))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_bone_of_a_bvh_mocap_armature_is_followed(tmp_path):
    """Blender's BVH importer makes the mocap armature; the Tool, position only, follows
    its Hand bone's head on every frame."""
    ob, empty = _arm7(tmp_path)
    scene = bpy.context.scene
    hands = []
    for f in range(FRAMES):
        scene.frame_set(f)
        hands.append(np.array(empty.matrix_world.translation, dtype=float))
    path = _bvh(tmp_path / "mocap.bvh", np.array(hands))
    assert bpy.ops.import_anim.bvh(filepath=str(path), global_scale=0.01,
                                   frame_start=0) == {"FINISHED"}
    mocap = bpy.context.active_object
    assert mocap.type == "ARMATURE" and set(mocap.data.bones.keys()) == {"Hips", "Hand"}
    ad = mocap.animation_data
    curves = ad.action.layers[0].strips[0].channelbag(ad.action_slot).fcurves
    first = int(min(k.co[0] for fc in curves for k in fc.keyframe_points))  # the file's 1st
    frames = range(first, first + FRAMES)
    s = scene.dhik
    s.target, s.target_bone, s.orientation_weight = mocap, "Hand", 0.0
    s.position_tolerance = 1e-6
    scene.frame_start, scene.frame_end = frames[0], frames[-1]
    _bake(tmp_path)
    assert s.result_converged == FRAMES
    worst = 0.0
    for i, f in enumerate(frames):
        scene.frame_set(f)
        worst = max(worst, float(np.linalg.norm(bone_world(ob, "Tool")[:3, 3]
                                                - bone_world(mocap, "Hand")[:3, 3])))
        assert np.linalg.norm(bone_world(mocap, "Hand")[:3, 3] - hands[i]) < 1e-4  # the file
    assert worst < 1e-5, worst
    print(f"\nFIGURES BVH bone target: {FRAMES} frames, Tool on the mocap Hand within "
          f"{worst:.2g} m")


def test_the_bone_pose_is_what_blenders_ik_constraint_reads(addon):
    """Blender's IK constraint with Target + Bone (use_tail, Rotation on) puts its
    owner's tail on the target bone's head (not its tail) and turns the owner to the
    target bone's orientation: the pose dhik reads for a bone target."""
    chain = _armature("chain", [("a", (0, 0, 0), (0, 0, 1), None),
                                ("b", (0, 0, 1), (0, 0, 2), "a"),
                                ("c", (0, 0, 2), (0, 0, 2.3), "b")])
    bones = chain.pose.bones
    for name, angles in (("a", (0.3, 0.1, 0)), ("b", (0.5, -0.2, 0.1)), ("c", (0.2, 0.3, 0.4))):
        bones[name].rotation_quaternion = Euler(angles).to_quaternion()
    bpy.context.view_layer.update()
    reachable = chain.matrix_world @ bones["c"].matrix  # c's pose, its head ...
    tail = chain.matrix_world @ bones["c"].tail  # ... and its tail
    for pb in bones:
        pb.rotation_quaternion = (1, 0, 0, 0)
    goal = _control_rig()
    goal.pose.bones["ctrl"].matrix = goal.matrix_world.inverted() @ (
        Matrix.Translation(tail) @ reachable.to_3x3().to_4x4())
    ik = bones["c"].constraints.new("IK")
    ik.target, ik.subtarget, ik.chain_count = goal, "ctrl", 3
    ik.use_rotation, ik.iterations = True, 5000
    bpy.context.view_layer.update()
    dg = bpy.context.evaluated_depsgraph_get()
    read = _np(addon.dhik_addon.targets.world_pose(dg, goal, "ctrl"))
    owner = _np(chain.matrix_world @ bones["c"].matrix)
    owner_tail = _np(chain.matrix_world @ bones["c"].tail)
    goal_tail = _np(goal.matrix_world @ goal.pose.bones["ctrl"].tail)
    assert np.linalg.norm(owner_tail - read[:3, 3]) < 1e-4  # the head, as dhik reads it
    assert np.linalg.norm(owner_tail - goal_tail) > 0.05  # not the target bone's tail
    assert _rotation_gap(owner, read) < 1e-4


def test_a_control_bone_of_the_baked_armature(tmp_path):
    """A keyed control bone of the arm's own armature, outside the chain, is the target;
    a bone the solve moves, the armature without a bone, a missing bone and a New Action
    bake (which would drop the control's keys) are refused, changing nothing."""
    ob, empty = _arm7(tmp_path)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    ctrl = ob.data.edit_bones.new("ctrl")
    ctrl.head, ctrl.tail = (0.6, 0.0, 0.0), (0.6, 0.1, 0.0)
    ctrl.parent = ob.data.edit_bones["Base"]
    bpy.ops.object.mode_set(mode="OBJECT")
    ob.pose.bones["ctrl"].rotation_mode = "QUATERNION"
    frames = range(FRAMES)
    _key_bone_onto(ob, "ctrl", empty, frames)
    s = bpy.context.scene.dhik
    s.effector = "Tool"
    s.position_tolerance, s.orientation_tolerance = 1e-6, 1e-5
    s.target = ob
    keys_before = len(ob.animation_data.action.layers[0].strips[0].channelbags[0].fcurves)
    for bone, message in (("", "the target cannot be the armature itself"),
                          ("J4", "bone 'J4' moves with the chain it is the target of"),
                          ("Tool", "bone 'Tool' moves with the chain it is the target of "
                                   r"\(it is below 'J7'\)"),
                          ("nothing", "target_bone: armature 'arm7' has no bone 'nothing'")):
        s.target_bone = bone
        with pytest.raises(RuntimeError, match=message):
            bpy.ops.dhik.bake()
    s.target_bone = "ctrl"
    s.bake_action = "NEW"
    with pytest.raises(RuntimeError, match="target_bone: bone 'ctrl' of the baked armature is "
                       "a target: a New Action bake would drop its animation"):
        bpy.ops.dhik.bake()
    cb = ob.animation_data.action.layers[0].strips[0].channelbags[0]
    assert len(cb.fcurves) == keys_before  # nothing was keyed
    s.bake_action = "CURRENT"
    _bake(tmp_path)
    assert s.result_converged == FRAMES
    pe, re = _gaps(ob, "Tool", ob, "ctrl", frames)
    assert pe < 1e-5 and re < 1e-4, (pe, re)


def test_a_pole_bone_is_its_head(tmp_path):
    """A pole that is a bone bakes exactly as a pole empty at the bone's head."""
    ob, _empty = _arm7(tmp_path, 12)
    controls = _control_rig()
    pb = controls.pose.bones["ctrl"]
    scene = bpy.context.scene
    for f, x in ((0, 0.3), (11, -0.3)):
        pb.location = (x, 0.2, 0.1)
        pb.keyframe_insert("location", frame=f)
    s = scene.dhik
    s.chain_length = 4
    s.pole_target, s.pole_bone = controls, "ctrl"
    _bake(tmp_path)
    with_bone = json.loads((tmp_path / "animation.json").read_text())
    empty = bpy.data.objects.new("pole", None)
    bpy.context.collection.objects.link(empty)
    for f in range(12):
        scene.frame_set(f)
        empty.location = bone_world(controls, "ctrl")[:3, 3]
        empty.keyframe_insert("location", frame=f)
    s.pole_target = empty
    _bake(tmp_path)
    with_empty = json.loads((tmp_path / "animation.json").read_text())
    worst = 0.0
    for a, b in zip(with_bone["frames"], with_empty["frames"], strict=True):
        for name, entry in a["joints"].items():
            worst = max(worst, abs(entry["angle"] - b["joints"][name]["angle"]))
    assert worst < 1e-6, worst


def test_renamed_bones_are_followed(tmp_path):
    """Renaming the effector, a row's bone, the target bone and the pole bone (in the
    Outliner or in Edit Mode): the settings show the new names and the bake follows; a
    bone duplicated in Edit Mode does not take the setting over."""
    ob, empty = _arm7(tmp_path, 12)
    controls = _control_rig()
    _key_bone_onto(controls, "ctrl", empty, range(12))
    s = bpy.context.scene.dhik
    s.effector = "Tool"
    s.target, s.target_bone = controls, "ctrl"
    s.pole_target, s.pole_bone = controls, "spare"
    assert bpy.ops.dhik.effector_add() == {"FINISHED"}
    row = s.effectors[0]
    row.bone, row.target, row.target_bone = "J3", controls, "spare"
    row.pole_target, row.pole_bone = controls, "ctrl"

    ob.data.bones["Tool"].name = "Tool.L"  # as the Outliner or the Properties rename
    controls.data.bones["ctrl"].name = "hand_ctrl"
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    ob.data.edit_bones["J3"].name = "elbow"
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.context.view_layer.objects.active = controls
    bpy.ops.object.mode_set(mode="EDIT")
    controls.data.edit_bones["spare"].name = "pole"
    for eb in controls.data.edit_bones:
        eb.select = eb.select_head = eb.select_tail = eb.name == "pole"
    bpy.ops.armature.duplicate()  # a copy "pole.001" carries the same tag
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.context.view_layer.update()
    assert "pole.001" in controls.data.bones
    assert (s.effector, s.target_bone, s.pole_bone) == ("Tool.L", "hand_ctrl", "pole")
    assert (row.bone, row.target_bone, row.pole_bone) == ("elbow", "pole", "hand_ctrl")
    controls.data.bones["pole"].name = "knee_pole"  # the original again, the copy stays
    bpy.context.view_layer.update()
    assert (s.pole_bone, row.target_bone) == ("knee_pole", "knee_pole")
    s.effectors.remove(0)
    s.position_tolerance, s.orientation_tolerance = 1e-6, 1e-5
    _bake(tmp_path)
    pe, re = _gaps(ob, "Tool.L", controls, "hand_ctrl", range(12))
    assert pe < 1e-5 and re < 1e-4, (pe, re)


def test_a_rename_is_followed_before_the_names_are_rewritten(tmp_path, addon):
    """The bake reads a renamed bone through its tag even before the handler ran."""
    ob, empty = _arm7(tmp_path, 6)
    controls = _control_rig()
    _key_bone_onto(controls, "ctrl", empty, range(6))
    s = bpy.context.scene.dhik
    s.target, s.target_bone = controls, "ctrl"
    handlers = bpy.app.handlers.depsgraph_update_post
    sync = addon.dhik_addon.bone_refs._on_depsgraph
    handlers.remove(sync)
    try:
        controls.data.bones["ctrl"].name = "renamed"
        bpy.context.view_layer.update()
        assert s.target_bone == "ctrl"  # a plain string property: Blender leaves it
        rig = addon.dhik_addon.bake_job.BakeRig.read(bpy.context.scene)
        assert rig.target_bones == ["renamed"]
    finally:
        handlers.append(sync)
    controls.update_tag()  # the next change of the scene: the names are rewritten
    bpy.context.view_layer.update()
    assert s.target_bone == "renamed"


def test_panel_shows_bone_pickers_for_armature_targets(addon, tmp_path):
    ui = addon.dhik_addon.panel
    ob, _empty = _arm7(tmp_path, 3)
    controls = _control_rig()
    s = bpy.context.scene.dhik

    def searches(panel_cls) -> list[tuple]:
        layout = mock.MagicMock()
        panel_cls.draw(SimpleNamespace(layout=layout), bpy.context)
        return [c.args[:4] for c in layout.mock_calls if c[0].endswith("prop_search")]

    assert (s, "target_bone", controls.data, "bones") not in searches(ui.DHIK_PT_panel)
    s.target, s.pole_target = controls, controls
    found = searches(ui.DHIK_PT_panel)
    assert (s, "target_bone", controls.data, "bones") in found
    assert (s, "pole_bone", controls.data, "bones") in found
    bpy.ops.dhik.effector_add()
    row = s.effectors[0]
    row.target = row.pole_target = controls
    found = searches(ui.DHIK_PT_effectors)
    assert (row, "target_bone", controls.data, "bones") in found
    assert (row, "pole_bone", controls.data, "bones") in found
    layout = mock.MagicMock()
    ui.DHIK_UL_effectors.draw_item(None, bpy.context, layout, s, row, 0, s, "effector_index", 0)
    assert (row, "target_bone", controls.data, "bones") in [
        c.args[:4] for c in layout.mock_calls if c[0].endswith("prop_search")]
    assert ob.name == "arm7"
