"""dhik.import_skeleton / dhik.export_skeleton on real bpy."""

from __future__ import annotations

import json
import math
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_helpers import MIXED_SKELETON, build_plain_rig, write_json


def _import(path: Path) -> bpy.types.Object:
    assert bpy.ops.dhik.import_skeleton(filepath=str(path)) == {"FINISHED"}
    return bpy.context.scene.dhik.armature


def _np(m) -> np.ndarray:
    return np.array(m, dtype=float)


def test_import_builds_one_bone_per_joint(mixed_files, core):
    ob = _import(mixed_files[0])
    assert ob.name == "mixed" and ob.type == "ARMATURE"
    defn = core.formats.parse_skeleton(MIXED_SKELETON)
    bones = ob.data.bones
    assert sorted(b.name for b in bones) == sorted(j.name for j in defn.joints)
    for j in defn.joints:
        b = bones[j.name]
        assert (b.parent.name if b.parent else None) == j.parent
        assert b.length > 1e-4
        assert b["dhik_type"] == j.type
    # A prismatic bone and its children are never connected.
    assert not bones["Slide"].use_connect and not bones["Twist"].use_connect
    assert bpy.context.scene.dhik.effector == "Tool"


def test_rest_pose_equals_core_fk(mixed_files, core):
    """At rest each bone head is its joint, and bone rotation @ B^-1 @ C is C (identity map)."""
    ob = _import(mixed_files[0])
    skel = core.Skeleton(core.formats.parse_skeleton(MIXED_SKELETON))
    bpy.context.view_layer.update()
    for name, w in skel.world_transforms().items():
        pb = ob.pose.bones[name]
        assert np.allclose(_np(pb.head), w[:3, 3], atol=1e-6)
        assert np.allclose(_np(pb.matrix), _np(pb.bone.matrix_local), atol=1e-7)


def test_blender_ik_settings_match_degrees_of_freedom(mixed_files):
    ob = _import(mixed_files[0])
    pose = ob.pose.bones

    def free(name: str) -> list[bool]:
        return [not getattr(pose[name], f"lock_ik_{a}") for a in "xyz"]

    assert free("Base") == [False, False, False]
    assert free("Wrist") == [False, False, False]
    assert free("Slide") == [False, False, False]  # Blender's IK cannot slide a bone
    assert free("Shoulder") == [True, True, True]
    # Elbow: axis X is across the bone (which points up +Z), so it is the bone's local Z.
    elbow = pose["Elbow"]
    assert free("Elbow") == [False, False, True]
    bone_z = _np(elbow.bone.matrix_local.to_3x3())[:, 2]
    assert np.allclose(bone_z, [1, 0, 0], atol=1e-6)
    assert elbow.use_ik_limit_z
    assert elbow.ik_min_z == pytest.approx(-0.1) and elbow.ik_max_z == pytest.approx(2.5)
    # The shoulder bone points along world Z: its X limit maps onto a bone axis.
    sh = pose["Shoulder"]
    limited = [getattr(sh, f"use_ik_limit_{a}") for a in "xyz"]
    assert sum(limited) == 2


def test_export_is_lossless(mixed_files, core, tmp_path):
    _import(mixed_files[0])
    out = tmp_path / "out.json"
    assert bpy.ops.dhik.export_skeleton(filepath=str(out)) == {"FINISHED"}
    before = core.formats.parse_skeleton(MIXED_SKELETON)
    after = core.formats.load_skeleton(out)
    assert after == before
    a = core.formats.skeleton_to_dict(after)
    b = core.formats.skeleton_to_dict(before)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_export_infers_joints_of_a_plain_rig(tmp_path, core):
    """A rig made in Blender: locks and limits become joint types and limits.

    The hip (Y locked, X limited) is a spherical joint in its bone's axes: a fixed
    ``hip.rest`` joint carries the bone's rest rotation (bone X = world X, bone Y =
    world Z, bone Z = -world Y: +90 degrees about X), so the knee below sees that frame.
    """
    ob = build_plain_rig()
    bpy.context.scene.dhik.armature = ob
    out = tmp_path / "rig.json"
    assert bpy.ops.dhik.export_skeleton(filepath=str(out)) == {"FINISHED"}
    data = json.loads(out.read_text())
    names = [j["name"] for j in data["joints"]]
    assert names == ["root", "hip.rest", "hip", "knee", "toe"]
    joints = {j["name"]: j for j in data["joints"]}
    assert joints["root"]["type"] == "fixed" and joints["toe"]["type"] == "fixed"
    rest = joints["hip.rest"]
    assert rest["type"] == "fixed" and rest["parent"] == "root"
    assert np.allclose(rest["offset"], [0, 0, 0.2], atol=1e-6)
    h = math.sqrt(0.5)
    assert np.allclose(rest["quaternion"], [h, h, 0, 0], atol=1e-6)
    hip = joints["hip"]
    assert hip["type"] == "spherical" and hip["parent"] == "hip.rest"
    assert np.allclose(hip["offset"], [0, 0, 0], atol=1e-12)
    # limits per bone axis: X limited, Y locked, Z free
    assert hip["limits"][0] == pytest.approx([-1.0, 1.0])
    assert hip["limits"][1] == [0.0, 0.0] and hip["limits"][2] is None
    knee = joints["knee"]
    assert knee["type"] == "revolute"
    assert np.allclose(knee["axis"], [1, 0, 0], atol=1e-6)
    assert knee["limits"] == pytest.approx([-0.5, 2.0])
    assert np.allclose(knee["offset"], [0, 0.8, 0], atol=1e-6)  # the hip bone's Y is world Z
    # FK of the exported skeleton puts every joint on its bone's head.
    skel = core.Skeleton(core.formats.load_skeleton(out))
    worlds = skel.world_transforms()
    for bone in ob.data.bones:
        assert np.allclose(worlds[bone.name][:3, 3], np.array(bone.head_local), atol=1e-6)


def test_invalid_skeleton_reports_and_changes_nothing(tmp_path):
    bad = dict(MIXED_SKELETON)
    bad["joints"] = [dict(j) for j in MIXED_SKELETON["joints"]]
    bad["joints"][2]["axis"] = [0, 0, 0]
    path = write_json(tmp_path / "bad" / "skeleton.json", bad)
    before = (len(bpy.data.objects), len(bpy.data.armatures))
    with pytest.raises(RuntimeError, match=r"joints\[2\]\.axis"):
        bpy.ops.dhik.import_skeleton(filepath=str(path))
    assert (len(bpy.data.objects), len(bpy.data.armatures)) == before
    assert bpy.context.scene.dhik.armature is None


def test_long_joint_name_is_rejected_before_anything_is_created(tmp_path):
    data = {"root_name": "r" * 70, "joints": [{"name": "r" * 70, "type": "fixed"}]}
    path = write_json(tmp_path / "long.json", data)
    with pytest.raises(RuntimeError, match="63-byte"):
        bpy.ops.dhik.import_skeleton(filepath=str(path))
    assert len(bpy.data.objects) == 0


@pytest.mark.parametrize("name, says", [
    ("a\0b", "NUL"),  # Blender cut the name at the NUL: another rig, silently
    ("bad\ud800", "lone surrogate"),  # a traceback inside the ERROR report
])
def test_names_a_bone_cannot_hold_are_one_error(name, says, tmp_path):
    data = {"root_name": "root", "joints": [{"name": "root", "type": "fixed"},
                                           {"name": name, "type": "revolute", "parent": "root",
                                            "axis": [0, 0, 1], "offset": [0, 0, 1]}]}
    path = write_json(tmp_path / "odd.json", data)
    with pytest.raises(RuntimeError, match=says) as exc:
        bpy.ops.dhik.import_skeleton(filepath=str(path))
    assert "Traceback" not in str(exc.value) and str(exc.value).count("\n") <= 1
    assert "joints[1].name" in str(exc.value)
    assert len(bpy.data.objects) == 0 and len(bpy.data.armatures) == 0


def test_unreadable_file_reports(tmp_path):
    with pytest.raises(RuntimeError, match="missing.json"):
        bpy.ops.dhik.import_skeleton(filepath=str(tmp_path / "missing.json"))

