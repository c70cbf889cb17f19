"""Export Animation's formats (issue 19): animation.json with the scene's frame rate, and
the frames x joints arrays (.npz, .csv) read back and compared with the exported
animation.json and with Blender's own evaluated bones."""

from __future__ import annotations

import json
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_helpers import bone_world

SCENES = Path(__file__).resolve().parents[2] / "sample_scenes"


def _setup_and_bake(scene: str, tmp_path: Path) -> bpy.types.Object:
    s = SCENES / scene
    assert bpy.ops.dhik.import_skeleton(filepath=str(s / "skeleton.json")) == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=str(s / "targets.json")) == {"FINISHED"}
    settings = bpy.context.scene.dhik
    settings.animation_path = str(tmp_path / "baked.json")
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    return settings.armature


def test_animation_json_carries_the_scenes_frame_rate(addon, tmp_path):
    _setup_and_bake("planar2", tmp_path)
    render = bpy.context.scene.render
    render.fps, render.fps_base = 30000, 1001  # NTSC 29.97
    out = tmp_path / "a.json"
    assert bpy.ops.dhik.export_animation(filepath=str(out)) == {"FINISHED"}
    data = json.loads(out.read_text())
    assert data["fps"] == pytest.approx(30000 / 1001, abs=1e-12)
    assert len(data["frames"]) == 120


def test_bake_iks_own_animation_json_carries_the_frame_rate(addon, tmp_path):
    bpy.context.scene.render.fps, bpy.context.scene.render.fps_base = 25, 1
    _setup_and_bake("planar2", tmp_path)
    data = json.loads((tmp_path / "baked.json").read_text())
    assert data["fps"] == 25.0 and len(data["frames"]) == 120


@pytest.mark.parametrize("fmt", ["NPZ", "CSV", "AUTO"])
def test_arrays_match_the_exported_animation_and_blenders_bones(fmt, addon, core, tmp_path):
    ob = _setup_and_bake("spec_example", tmp_path)
    render = bpy.context.scene.render
    render.fps, render.fps_base = 50, 2  # 25 fps
    anim = tmp_path / "a.json"
    assert bpy.ops.dhik.export_animation(filepath=str(anim)) == {"FINISHED"}
    path = tmp_path / ("a.npz" if fmt != "CSV" else "a.csv")
    assert bpy.ops.dhik.export_animation(filepath=str(path), file_format=fmt) == {"FINISHED"}
    arrays = addon.core.app.arrays.load_arrays(path)
    frames = json.loads(anim.read_text())["frames"]
    assert arrays.fps == 25.0 and arrays.frame.tolist() == [f["frame"] for f in frames]
    assert arrays.dof_names == ["Elbow", "Piston"] and arrays.ball_names == ["Shoulder"]
    for i, fr in enumerate(frames):
        assert arrays.dof_pos[i].tolist() == [fr["joints"]["Elbow"]["angle"],
                                              fr["joints"]["Piston"]["displacement"]]
        assert arrays.ball_quat[i, 0].tolist() == fr["joints"]["Shoulder"]["quaternion"]
    # the root pose: where Blender shows the root bone's head, the joint's FK rotation
    assert arrays.root_joint == "Root"
    skel = core.Skeleton(core.formats.load_skeleton(SCENES / "spec_example/skeleton.json"))
    for f in (0, 100, 240):
        bpy.context.scene.frame_set(f)
        np.testing.assert_allclose(arrays.root_pos[f], bone_world(ob, "Root")[:3, 3],
                                   atol=1e-6)
        skel.set_joint_values(frames[f]["joints"])
        world = skel.world_transforms()["Root"]
        w, x, y, z = arrays.root_quat[f]
        rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
        np.testing.assert_allclose(rot, world[:3, :3], atol=1e-12)


def test_a_format_without_room_for_the_rig_is_one_error(addon, tmp_path):
    """An arrays file into a folder that does not exist: one ERROR, nothing written."""
    _setup_and_bake("planar2", tmp_path)
    with pytest.raises(RuntimeError, match="cannot write") as exc:
        bpy.ops.dhik.export_animation(filepath=str(tmp_path / "no" / "a.npz"))
    assert "Traceback" not in str(exc.value)
    assert not (tmp_path / "no").exists()
