"""A skeleton whose root joint moves (issue 9, point 4) in real Blender: a planar two-link
arm and a SCARA, each with a revolute root, are imported, baked by the add-on, exported
unchanged, and Blender's evaluated bone matrices equal the core's FK on every frame."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import bpy
import numpy as np
import pytest
from addon_helpers import blender_joint_worlds, export_skeleton, write_json
from fixtures import PLANAR, SCARA

# joint values along each skeleton's path (one pose every 6 frames, linear between them)
PATHS = {
    "planar": (PLANAR, "Hand", [{"Shoulder": 0.3, "Elbow": 0.5}, {"Shoulder": 1.2, "Elbow": -0.4},
                                {"Shoulder": 2.0, "Elbow": 0.9}]),
    "scara": (SCARA, "Tool", [{"Shoulder": 0.2, "Elbow": 0.5, "Quill": 0.05, "Wrist": 0.0},
                              {"Shoulder": 1.0, "Elbow": -0.3, "Quill": 0.2, "Wrist": 0.8},
                              {"Shoulder": -0.8, "Elbow": 1.4, "Quill": 0.1, "Wrist": -1.2}]),
}
EVERY = 6


def targets_along(core: Any, skeleton: dict, effector: str, poses: list[dict]) -> list[dict]:
    """A keyframe on every frame: the core's FK of the joint path (reachable targets)."""
    defn = core.formats.parse_skeleton(skeleton)
    kinds = {j.name: j.type for j in defn.joints}
    sk = core.Skeleton(defn)
    out = []
    for f in range(EVERY * (len(poses) - 1) + 1):
        k = min(f // EVERY, len(poses) - 2)
        t = (f - k * EVERY) / EVERY
        entries = {}
        for name, a in poses[k].items():
            v = a + t * (poses[k + 1][name] - a)
            key = "angle" if kinds[name] == "revolute" else "displacement"
            entries[name] = {"type": kinds[name], key: v}
        sk.reset()
        sk.set_joint_values(entries)
        m = sk.world_transforms()[effector]
        euler = core.rotations.matrix_to_euler_xyz(m[:3, :3])
        out.append({"frame": f, "pos": [float(v) for v in m[:3, 3]],
                    "euler": [math.degrees(float(a)) for a in euler]})
    return out


@pytest.mark.parametrize("case", sorted(PATHS))
def test_revolute_root_imports_bakes_and_matches_core_fk(case, core, tmp_path: Path):
    skeleton, effector, poses = PATHS[case]
    skel = write_json(tmp_path / "skeleton.json", skeleton)
    tgt = write_json(tmp_path / "targets.json", targets_along(core, skeleton, effector, poses))
    assert bpy.ops.dhik.import_skeleton(filepath=str(skel)) == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=str(tgt)) == {"FINISHED"}
    s = bpy.context.scene.dhik
    ob = s.armature
    # the armature keeps the root's joint: exported, it is the same skeleton
    exported = core.formats.load_skeleton(export_skeleton(ob))
    assert exported == core.formats.parse_skeleton(skeleton)
    anim = tmp_path / "animation.json"
    s.animation_path = str(anim)
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    frames = core.formats.load_animation(anim)
    assert len(frames) == EVERY * (len(poses) - 1) + 1
    assert len({round(fr["joints"]["Shoulder"]["angle"], 6) for fr in frames}) > 5  # it turns
    sk = core.Skeleton(exported)
    rest = {n: w[:3, :3] for n, w in sk.world_transforms().items()}
    obj = np.array(ob.matrix_world, dtype=float)
    worst = 0.0
    for fr in frames:
        bpy.context.scene.frame_set(fr["frame"])
        sk.reset()
        sk.set_joint_values(fr["joints"])
        expected = {n: obj @ w for n, w in sk.world_transforms().items()}
        for name, got in blender_joint_worlds(ob, rest).items():
            worst = max(worst, float(np.abs(got - expected[name]).max()))
    assert worst < 1e-6, worst
    assert s.result_frames == s.result_converged == len(frames)
