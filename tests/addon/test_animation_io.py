"""Import Animation and the exchange with ``dhik bake`` (issue 18, point 5) on real bpy.

- Import Animation keys an animation.json (as ``dhik bake`` writes it) onto the
  armature with a bake's rules; a file that does not fit the rig is one ERROR and
  nothing changes.
- Export Skeleton + Export Targets, baked by the ``dhik`` command (a subprocess), give
  the joint values the bake in Blender gives, within 1e-6 rad, with the armature at the
  origin or moved and turned, and for a target keyed with Bezier keys in the bone's
  orientation (Blender interpolates its channels, the file its joint frame's).

Scenes: the sample 7-joint arm (arm7) with its imported targets; the arm with a target
empty a rigger keyed by hand. Angles in radians, lengths in metres.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_helpers import bone_world, keyed_root, write_json
from bpy_extras import anim_utils
from mathutils import Euler, Matrix
from test_safety import scene_state

ARM7 = Path(__file__).resolve().parents[2] / "sample_scenes" / "arm7"
FRAMES = 30


def _arm7(tmp_path: Path, frames: int = FRAMES) -> tuple[bpy.types.Object, bpy.types.Object]:
    keys = json.loads((ARM7 / "targets.json").read_text())[:frames]
    tgt = write_json(tmp_path / "arm7" / "targets.json", keys)
    assert bpy.ops.dhik.import_skeleton(filepath=str(ARM7 / "skeleton.json")) == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=str(tgt)) == {"FINISHED"}
    s = bpy.context.scene.dhik
    return s.armature, s.target


def _bake_in_blender(tmp_path: Path, name: str = "blender.json") -> Path:
    path = tmp_path / name
    bpy.context.scene.dhik.animation_path = str(path)
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    return path


def _dhik(*args: str) -> subprocess.CompletedProcess:
    """The ``dhik`` command of this environment (the core installed beside Blender)."""
    return subprocess.run([sys.executable, "-m", "dhik", *args], capture_output=True,
                          text=True, check=False)


def _cli_bake(tmp_path: Path, effector: str = "Tool") -> Path:
    """Export Skeleton + Export Targets, then ``dhik bake`` of the two files."""
    skel, tgt, out = (tmp_path / n for n in ("exported_skeleton.json",
                                             "exported_targets.json", "cli.json"))
    assert bpy.ops.dhik.export_skeleton(filepath=str(skel)) == {"FINISHED"}
    assert bpy.ops.dhik.export_targets(filepath=str(tgt)) == {"FINISHED"}
    run = _dhik("bake", str(skel), str(tgt), "-o", str(out), "--effector", effector)
    assert run.returncode == 0, run.stderr
    return out


def _joint_gap(a: dict, b: dict) -> float:
    """Largest joint difference (rad, m) between two SPEC 3.3 frames."""
    worst = 0.0
    for name, entry in a["joints"].items():
        other = b["joints"][name]
        if entry["type"] == "spherical":
            dot = abs(float(np.dot(entry["quaternion"], other["quaternion"])))
            worst = max(worst, 2.0 * math.acos(min(1.0, dot)))
        else:
            key = "angle" if entry["type"] == "revolute" else "displacement"
            worst = max(worst, abs(entry[key] - other[key]))
    return worst


def _largest_gap(a: Path, b: Path) -> float:
    fa, fb = json.loads(a.read_text())["frames"], json.loads(b.read_text())["frames"]
    assert [f["frame"] for f in fa] == [f["frame"] for f in fb]
    return max(_joint_gap(x, y) for x, y in zip(fa, fb, strict=True))


def _bone_poses(ob: bpy.types.Object, frames: range) -> dict[tuple[int, str], np.ndarray]:
    out = {}
    for f in frames:
        bpy.context.scene.frame_set(f)
        for pb in ob.pose.bones:
            out[(f, pb.name)] = bone_world(ob, pb.name)
    return out


@pytest.mark.parametrize("placement", ["at the origin", "moved and turned"])
def test_cli_bake_of_the_exports_equals_the_bake_in_blender(tmp_path, placement):
    ob, _target = _arm7(tmp_path)
    if placement != "at the origin":  # the imported targets are the armature's children
        ob.matrix_world = Matrix.Translation((0.7, -0.3, 0.2)) @ Euler(
            (0.3, -0.2, 1.1)).to_matrix().to_4x4()
    blender = _bake_in_blender(tmp_path)
    gap = _largest_gap(blender, _cli_bake(tmp_path))
    # the armature's matrices are float32 in Blender: targets moved into its space
    # differ from the exported ones by about 1e-7, and the LM's answers (converged
    # anywhere within the tolerances) with them: 1.1e-6 rad on every frame, moved and
    # turned; a different path would differ by far more than 1e-5
    assert gap < 1e-5, gap
    print(f"\nFIGURES CLI vs Blender, armature {placement}: {gap:.2g} rad")


def test_a_bezier_keyed_target_in_the_bones_orientation_exports_what_blender_plays(
        tmp_path, capfd):
    """A target keyed by hand every 6 frames (Bezier, Blender's default) in the Tool
    bone's orientation, on a turned armature: Blender plays neither a linear motion nor
    one linear in the joint frame, so the export writes the frames in between and says
    so; the CLI bake then equals Blender's."""
    ob, imported = _arm7(tmp_path)
    ob.matrix_world = Euler((0.0, 0.0, 0.9)).to_matrix().to_4x4()
    scene = bpy.context.scene
    goal = bpy.data.objects.new("goal", None)
    bpy.context.collection.objects.link(goal)
    goal.rotation_mode = "XYZ"
    for f in range(0, FRAMES, 6):
        scene.frame_set(f)
        goal.matrix_world = imported.matrix_world
        goal.keyframe_insert("location", frame=f)
        goal.keyframe_insert("rotation_euler", frame=f)
    interpolations = {k.interpolation for fc in anim_utils.action_get_channelbag_for_slot(
        goal.animation_data.action, goal.animation_data.action_slot).fcurves
        for k in fc.keyframe_points}
    assert interpolations == {"BEZIER"}
    scene.frame_start, scene.frame_end = 0, 24
    scene.dhik.target = goal
    blender = _bake_in_blender(tmp_path)
    exported = tmp_path / "exported_targets.json"
    capfd.readouterr()
    assert bpy.ops.dhik.export_targets(filepath=str(exported)) == {"FINISHED"}
    written = [k["frame"] for k in json.loads(exported.read_text())]
    assert set(range(0, 25, 6)) <= set(written) and len(written) > 5
    said = capfd.readouterr().out
    assert f"{len(written) - 5} of them are frames between the target's 5 keys" in said
    assert "armature 'arm7''s space" in said
    gap = _largest_gap(blender, _cli_bake(tmp_path))
    assert gap < 1e-6, gap
    print(f"\nFIGURES Bezier target: {len(written)} keyframes written for 5 keys; CLI vs "
          f"Blender {gap:.2g} rad")


def test_a_bone_target_exports_what_blender_plays(tmp_path):
    """A control armature's bone keyed every 4 frames (Bezier) is the target: Export
    Targets writes that bone's pose, and the CLI bake equals Blender's."""
    ob, imported = _arm7(tmp_path)
    arm = bpy.data.armatures.new("controls")
    controls = bpy.data.objects.new("controls", arm)
    bpy.context.collection.objects.link(controls)
    bpy.context.view_layer.objects.active = controls
    bpy.ops.object.mode_set(mode="EDIT")
    bone = arm.edit_bones.new("ctrl")
    bone.head, bone.tail = (0.0, 0.0, 0.0), (0.0, 0.1, 0.0)
    bpy.ops.object.mode_set(mode="OBJECT")
    controls.location = (0.3, 0.1, -0.2)
    pb = controls.pose.bones["ctrl"]
    pb.rotation_mode = "QUATERNION"
    scene = bpy.context.scene
    for f in range(0, 25, 4):
        scene.frame_set(f)
        pb.matrix = controls.matrix_world.inverted() @ imported.matrix_world
        bpy.context.view_layer.update()
        pb.keyframe_insert("location", frame=f)
        pb.keyframe_insert("rotation_quaternion", frame=f)
    scene.frame_start, scene.frame_end = 0, 24
    scene.dhik.target, scene.dhik.target_bone = controls, "ctrl"
    blender = _bake_in_blender(tmp_path)
    gap = _largest_gap(blender, _cli_bake(tmp_path))
    assert gap < 1e-6, gap
    print(f"\nFIGURES bone target exported: CLI vs Blender {gap:.2g} rad")


def test_linear_imported_targets_export_their_own_keyframes(tmp_path, core):
    """Targets imported from a file (linear in its joint frame) export as that file's
    keyframes only, also with the armature moved (they move with it)."""
    keys = [{"frame": 0, "pos": [0.3, -0.2, 0.6], "euler": [10.0, -20.0, 30.0]},
            {"frame": 9, "pos": [0.35, 0.1, 0.55], "euler": [40.0, -10.0, 200.0]},
            {"frame": 20, "pos": [0.2, 0.2, 0.7], "euler": [-30.0, 5.0, 90.0]}]
    tgt = write_json(tmp_path / "t" / "targets.json", keys)
    assert bpy.ops.dhik.import_skeleton(filepath=str(ARM7 / "skeleton.json")) == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=str(tgt)) == {"FINISHED"}
    ob = bpy.context.scene.dhik.armature
    assert keyed_root(bpy.context.scene.dhik.target).parent is ob
    ob.matrix_world = Matrix.Translation((1.0, 2.0, 0.0)) @ Euler((0, 0.4, 2.0)).to_matrix(
        ).to_4x4()
    out = tmp_path / "out.json"
    assert bpy.ops.dhik.export_targets(filepath=str(out)) == {"FINISHED"}
    got = core.formats.load_targets(out)
    assert [k.frame for k in got] == [0, 9, 20]
    for a, b in zip(got, core.formats.parse_targets(keys), strict=True):
        assert np.allclose(a.pos, b.pos, atol=1e-6) and np.allclose(a.euler, b.euler, atol=1e-4)


def test_import_animation_of_a_cli_bake_gives_the_pose_of_the_bake_in_blender(tmp_path):
    """``dhik bake`` of the exports, imported back (New Action): Blender's evaluated bones
    equal those of the bake in Blender on every frame; bones keep their rotation modes."""
    ob, _target = _arm7(tmp_path)
    modes = {"J2": "ZXY", "J4": "AXIS_ANGLE", "J6": "XYZ"}
    for bone, mode in modes.items():
        ob.pose.bones[bone].rotation_mode = mode
    _bake_in_blender(tmp_path)
    frames = range(FRAMES)
    baked = _bone_poses(ob, frames)
    cli = _cli_bake(tmp_path)
    bpy.context.scene.dhik.bake_action = "NEW"
    assert bpy.ops.dhik.import_animation(filepath=str(cli), action="NEW") == {"FINISHED"}
    imported = _bone_poses(ob, frames)
    worst = max(float(np.abs(imported[k] - baked[k]).max()) for k in baked)
    assert worst < 1e-5, worst
    cb = anim_utils.action_get_channelbag_for_slot(ob.animation_data.action,
                                                   ob.animation_data.action_slot)
    props = {fc.data_path for fc in cb.fcurves}
    for bone, mode in modes.items():
        prop = "rotation_axis_angle" if mode == "AXIS_ANGLE" else "rotation_euler"
        assert f'pose.bones["{bone}"].{prop}' in props
        assert ob.pose.bones[bone].rotation_mode == mode
    assert {k.interpolation for fc in cb.fcurves for k in fc.keyframe_points} == {"LINEAR"}
    print(f"\nFIGURES Import Animation of the CLI bake: bones within {worst:.2g} of the "
          "bake in Blender")


def test_import_animation_into_the_current_action_keeps_the_rest(tmp_path):
    """Current Action: keys of the file's range are replaced, keys outside it and other
    curves (a custom property) stay."""
    ob, _target = _arm7(tmp_path, 12)
    ob["speed"] = 1.0
    ob.keyframe_insert('["speed"]', frame=40)
    j1 = ob.pose.bones["J1"]
    j1.rotation_quaternion = (0.9, 0.0, 0.0, 0.43589)
    j1.keyframe_insert("rotation_quaternion", frame=50)
    path = _bake_in_blender(tmp_path)
    ob.animation_data.action = None
    ob["speed"] = 1.0
    ob.keyframe_insert('["speed"]', frame=40)
    j1.keyframe_insert("rotation_quaternion", frame=50)
    assert bpy.ops.dhik.import_animation(filepath=str(path)) == {"FINISHED"}
    cb = anim_utils.action_get_channelbag_for_slot(ob.animation_data.action,
                                                   ob.animation_data.action_slot)
    speed = cb.fcurves.find('["speed"]')
    assert [tuple(k.co) for k in speed.keyframe_points] == [(40.0, 1.0)]
    w = cb.fcurves.find('pose.bones["J1"].rotation_quaternion', index=0)
    assert [k.co[0] for k in w.keyframe_points] == [*range(12), 50.0]
    frames = json.loads(path.read_text())["frames"]
    bpy.context.scene.frame_set(5)
    angle = frames[5]["joints"]["J1"]["angle"]
    q = ob.pose.bones["J1"].rotation_quaternion
    assert abs(2 * math.atan2(math.copysign(math.sqrt(q[1] ** 2 + q[2] ** 2 + q[3] ** 2),
                                            q[3]), q[0]) - angle) < 1e-5


def _frames(joints: dict) -> dict:
    return {"frames": [{"frame": 0, "joints": joints}, {"frame": 1, "joints": joints}]}


def _arm7_joints() -> dict:
    skel = json.loads((ARM7 / "skeleton.json").read_text())
    return {j["name"]: {"type": "revolute", "angle": 0.1} for j in skel["joints"]
            if j["type"] != "fixed"}


@pytest.mark.parametrize("case", ["missing", "extra", "type", "fixed", "targets", "number"])
def test_a_file_that_does_not_fit_the_rig_is_one_error_and_changes_nothing(tmp_path, case):
    _arm7(tmp_path, 3)
    joints = _arm7_joints()
    if case == "missing":
        del joints["J5"]
        data, match = _frames(joints), (r"frames\[0\]\.joints: joint\(s\) 'J5' of armature "
                                        "'arm7' missing")
    elif case == "extra":
        joints["Elbow"] = {"type": "revolute", "angle": 0.0}
        data, match = _frames(joints), (r"frames\[0\]\.joints\['Elbow'\]: armature 'arm7' "
                                        "has no joint 'Elbow'")
    elif case == "type":
        joints["J3"] = {"type": "prismatic", "displacement": 0.1}
        data, match = _frames(joints), (r"frames\[0\]\.joints\['J3'\]\.type: is 'prismatic', "
                                        "but 'J3' is a revolute joint of armature 'arm7'")
    elif case == "fixed":
        joints["Tool"] = {"type": "revolute", "angle": 0.0}
        data, match = _frames(joints), r"'Tool' is a fixed joint of armature 'arm7'"
    elif case == "number":
        joints["J3"] = {"type": "revolute", "angle": 1e39}
        data, match = _frames(joints), r"frames\[0\]\.joints\['J3'\]\.angle: 1e\+39 is beyond"
    else:
        data, match = [{"frame": 0, "pos": [0, 0, 0], "euler": [0, 0, 0]}], (
            "this is a targets file, not an animation file; use Import Targets")
    path = write_json(tmp_path / "bad.json", data)
    ob = bpy.context.scene.dhik.armature
    ob.pose.bones["J2"].keyframe_insert("rotation_quaternion", frame=4)
    before = scene_state()
    with pytest.raises(RuntimeError, match=match):
        bpy.ops.dhik.import_animation(filepath=str(path))
    assert scene_state() == before


def test_import_animation_needs_an_armature(tmp_path):
    assert not bpy.ops.dhik.import_animation.poll()
    _arm7(tmp_path, 2)
    assert bpy.ops.dhik.import_animation.poll()
