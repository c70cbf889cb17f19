"""A position-only target (Orientation weight 0, as Blender's IK constraint without
"Rotation") on a 7-DoF arm, real bpy: the bake is flip-free and Blender's own evaluation
puts the tool on every target. Frames: the armature sits at the origin (armature space
= world); metres and radians.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import bpy
import numpy as np
from addon_helpers import write_json
from fixtures import ARM7, smooth_path


def test_a_position_only_target_bakes_without_flips(tmp_path, core) -> None:
    """arm7 following an empty made by FK of a smooth joint path (120 frames, seed 3),
    position only: every frame converged, the evaluated Tool bone on its target on every
    frame (2e-5 m), and no joint turning more between two frames than twice the largest
    per-frame turn of the path that made the targets (before: 13 such frames, up to
    9.5x: the coarse search's lanes met where their candidates did not)."""
    skeleton = json.loads(Path(ARM7).read_text())
    assert bpy.ops.dhik.import_skeleton(
        filepath=str(write_json(tmp_path / "skeleton.json", skeleton))) == {"FINISHED"}
    ob = bpy.context.scene.dhik.armature
    joints = [j for j in skeleton["joints"] if j["type"] == "revolute"]
    limits = np.array([j["limits"] for j in joints])
    frames = list(range(120))
    truth = smooth_path(limits[:, 0], limits[:, 1], len(frames), 3)
    ref = core.Skeleton(core.formats.parse_skeleton(skeleton))
    keys = []
    for f in frames:
        ref.set_joint_values({j["name"]: {"type": "revolute", "angle": float(v)}
                              for j, v in zip(joints, truth[f], strict=True)})
        m = ref.world_transforms()["Tool"]
        keys.append({"frame": f, "pos": [float(v) for v in m[:3, 3]], "euler": [
            math.degrees(float(a)) for a in core.rotations.matrix_to_euler_xyz(m[:3, :3])]})
    assert bpy.ops.dhik.import_targets(filepath=str(write_json(tmp_path / "targets.json",
                                                               keys))) == {"FINISHED"}
    s = bpy.context.scene.dhik
    s.use_scene_range = False
    s.frame_start, s.frame_end = frames[0], frames[-1]
    s.effector = "Tool"
    s.orientation_weight = 0.0
    s.position_tolerance, s.orientation_tolerance = 1e-5, 1e-4
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert s.result_converged == len(frames)
    baked = tmp_path / "baked.json"
    assert bpy.ops.dhik.export_animation(filepath=str(baked)) == {"FINISHED"}
    got = np.array([[fr["joints"][j["name"]]["angle"] for j in joints]
                    for fr in core.formats.load_animation(baked)])
    true_step = np.abs(np.diff(truth, axis=0)).max()
    steps = np.abs(np.diff(got, axis=0)).max(axis=1)
    assert steps.max() < 2.0 * true_step, (steps.max(), true_step)
    for f in frames:
        bpy.context.scene.frame_set(f)
        tool = np.array(ob.matrix_world @ ob.pose.bones["Tool"].head, dtype=float)
        assert np.linalg.norm(tool - keys[f]["pos"]) < 2e-5, f
