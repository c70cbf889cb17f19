"""dhik.import_targets / dhik.export_targets on real bpy."""

from __future__ import annotations

import json
import math

import bpy
import numpy as np
import pytest
from addon_helpers import write_json

KEYS = [
    {"frame": 10, "pos": [1.0, -1.0, 1.0], "euler": [-90.0, 45.0, 0.0]},
    {"frame": 4, "pos": [1.0, 1.0, 1.0], "euler": [90.0, 0.0, 45.0]},
    {"frame": 16, "pos": [2.5, 0.0, 1.0], "euler": [0.0, 0.0, 200.0]},
]


def _import(tmp_path, keys=KEYS) -> bpy.types.Object:
    path = write_json(tmp_path / "scene" / "targets.json", keys)
    assert bpy.ops.dhik.import_targets(filepath=str(path)) == {"FINISHED"}
    return bpy.context.scene.dhik.target


def test_import_keys_an_empty_linearly(tmp_path, core):
    ob = _import(tmp_path)
    assert ob.name == "scene_target" and ob.type == "EMPTY" and ob.rotation_mode == "XYZ"
    scene = bpy.context.scene
    assert (scene.frame_start, scene.frame_end) == (0, 16)
    keyframes = core.formats.parse_targets(KEYS)
    expected = dict(core.trajectory.interpolate_keyframes(keyframes))
    for f in range(0, 17):
        scene.frame_set(f)
        m = np.array(ob.matrix_world, dtype=float)
        assert np.allclose(m, expected[f], atol=1e-6), f


def test_targets_round_trip(tmp_path, core):
    _import(tmp_path)
    out = tmp_path / "out.json"
    assert bpy.ops.dhik.export_targets(filepath=str(out)) == {"FINISHED"}
    got = core.formats.load_targets(out)
    want = core.formats.parse_targets(KEYS)
    assert [k.frame for k in got] == [4, 10, 16]
    for a, b in zip(got, want, strict=True):
        assert np.allclose(a.pos, b.pos, atol=1e-6)
        assert np.allclose(a.euler, b.euler, atol=1e-4)  # the same numbers, 200 deg included


def test_export_every_frame_from_a_parented_object(tmp_path, core):
    """World pose, not local channels: a parent's transform is included."""
    ob = _import(tmp_path)
    parent = bpy.data.objects.new("carrier", None)
    bpy.context.collection.objects.link(parent)
    parent.location = (0.0, 0.0, 2.0)
    parent.rotation_euler = (0.0, 0.0, math.pi / 2)
    ob.parent = parent
    out = tmp_path / "every.json"
    assert bpy.ops.dhik.export_targets(filepath=str(out), every_frame=True) == {"FINISHED"}
    got = core.formats.load_targets(out)
    assert [k.frame for k in got] == list(range(0, 17))
    bpy.context.scene.frame_set(4)
    assert np.allclose(got[4].pos, [-1.0, 1.0, 3.0], atol=1e-6)  # (1,1,1) turned 90 deg, lifted
    r = core.rotations.euler_xyz_to_matrix(np.radians(got[4].euler))
    assert np.allclose(r, np.array(ob.matrix_world.to_3x3()), atol=1e-6)


def test_export_of_unkeyed_object_reports(tmp_path):
    ob = bpy.data.objects.new("still", None)
    bpy.context.collection.objects.link(ob)
    bpy.context.scene.dhik.target = ob
    with pytest.raises(RuntimeError, match="no keyframes"):
        bpy.ops.dhik.export_targets(filepath=str(tmp_path / "x.json"))
    assert not (tmp_path / "x.json").exists()


def test_invalid_targets_report_and_change_nothing(tmp_path):
    path = write_json(tmp_path / "bad.json", [{"frame": 1, "pos": [0, 0], "euler": [0, 0, 0]}])
    before = len(bpy.data.objects), len(bpy.data.actions)
    scene = bpy.context.scene
    frame_range = scene.frame_start, scene.frame_end
    with pytest.raises(RuntimeError, match=r"bad\.json: \[0\]\.pos"):
        bpy.ops.dhik.import_targets(filepath=str(path))
    assert (len(bpy.data.objects), len(bpy.data.actions)) == before
    assert (scene.frame_start, scene.frame_end) == frame_range


def test_import_keeps_scene_range_when_asked(tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 3, 7
    path = write_json(tmp_path / "t.json", KEYS)
    bpy.ops.dhik.import_targets(filepath=str(path), set_frame_range=False)
    assert (scene.frame_start, scene.frame_end) == (3, 7)
    assert json.loads(path.read_text()) == KEYS
