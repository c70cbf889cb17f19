"""Shared test data and helpers of the add-on tests (imported by name: conftest puts this
directory on sys.path, since pytest runs with --import-mode=importlib)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def _axis_quat(axis: list[float], degrees: float) -> list[float]:
    n = math.sqrt(sum(a * a for a in axis))
    h = math.radians(degrees) / 2
    return [math.cos(h), *(math.sin(h) * a / n for a in axis)]


# All four joint types: a fixed root away from the origin, a spherical joint with limits,
# a revolute hinge, a fixed joint with a quaternion, a prismatic slide and an oblique
# revolute axis, then a fixed tool as the single leaf (the effector).
MIXED_SKELETON: dict[str, Any] = {
    "root_name": "Base",
    "joints": [
        {"name": "Base", "type": "fixed", "offset": [0.1, -0.2, 0.05], "parent": None},
        {"name": "Shoulder", "type": "spherical", "offset": [0, 0, 0.5], "parent": "Base",
         "limits": [[-1.5, 1.5], None, [-1.0, 1.0]]},
        {"name": "Elbow", "type": "revolute", "offset": [0, 0, 0.6], "parent": "Shoulder",
         "axis": [1, 0, 0], "limits": [-0.1, 2.5]},
        {"name": "Wrist", "type": "fixed", "offset": [0, 0, 0.4], "parent": "Elbow",
         "quaternion": _axis_quat([0, 1, 0], 30.0)},
        {"name": "Slide", "type": "prismatic", "offset": [0, 0, 0.1], "parent": "Wrist",
         "axis": [0, 0, 1], "limits": [-0.2, 0.3]},
        {"name": "Twist", "type": "revolute", "offset": [0, 0.05, 0.15], "parent": "Slide",
         "axis": [1, 1, 0]},
        {"name": "Tool", "type": "fixed", "offset": [0, 0, 0.1], "parent": "Twist"},
    ],
}

# Joint values (SPEC 3.3 entries) whose FK gives reachable targets for MIXED_SKELETON.
MIXED_POSES: list[dict[str, dict[str, Any]]] = [
    {"Shoulder": {"quaternion": _axis_quat([1, 0, 0], 20)}, "Elbow": {"angle": 0.6},
     "Slide": {"displacement": 0.05}, "Twist": {"angle": 0.3}},
    {"Shoulder": {"quaternion": _axis_quat([0.3, 1, 0.2], 35)}, "Elbow": {"angle": 1.0},
     "Slide": {"displacement": 0.15}, "Twist": {"angle": -0.4}},
    {"Shoulder": {"quaternion": _axis_quat([0, 0.2, 1], 50)}, "Elbow": {"angle": 0.8},
     "Slide": {"displacement": -0.1}, "Twist": {"angle": 0.2}},
]


def _arm(side: str, y: float) -> list[dict[str, Any]]:
    """Spherical shoulder, revolute elbow, spherical wrist and a fixed hand, pointing up."""
    return [
        {"name": f"{side}Shoulder", "type": "spherical", "offset": [0, y, 0.4],
         "parent": "Torso", "limits": [[-2.0, 2.0], [-1.5, 1.5], [-2.0, 2.0]]},
        {"name": f"{side}Elbow", "type": "revolute", "offset": [0, 0, 0.35],
         "parent": f"{side}Shoulder", "axis": [1, 0, 0], "limits": [-2.5, 0.0]},
        {"name": f"{side}Wrist", "type": "spherical", "offset": [0, 0, 0.3],
         "parent": f"{side}Elbow", "limits": [[-1.2, 1.2], None, [-1.2, 1.2]]},
        {"name": f"{side}Hand", "type": "fixed", "offset": [0, 0, 0.1],
         "parent": f"{side}Wrist"},
    ]


# Two 7-DoF arms on a shared torso twist: two leaves, LHand and RHand.
TWO_ARMS: dict[str, Any] = {
    "root_name": "Root",
    "joints": [
        {"name": "Root", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {"name": "Torso", "type": "revolute", "offset": [0, 0, 1.0], "parent": "Root",
         "axis": [0, 0, 1], "limits": [-1.0, 1.0]},
        *_arm("L", 0.2),
        *_arm("R", -0.2),
    ],
}


def two_arm_poses(count: int) -> list[dict[str, dict[str, Any]]]:
    """``count`` joint poses of TWO_ARMS (SPEC 3.3 entries), moving smoothly within limits."""
    poses = []
    for i in range(count):
        t = i / max(count - 1, 1)
        poses.append({
            "Torso": {"angle": 0.3 * t},
            "LShoulder": {"quaternion": _axis_quat([1, 0.3, 0], 20 + 30 * t)},
            "LElbow": {"angle": -0.4 - 0.6 * t},
            "LWrist": {"quaternion": _axis_quat([0, 0, 1], 25 * t)},
            "RShoulder": {"quaternion": _axis_quat([-1, 0.2, 0.3], 15 + 25 * t)},
            "RElbow": {"angle": -0.8 + 0.5 * t},
            "RWrist": {"quaternion": _axis_quat([1, 0, 0], -20 * t)},
        })
    return poses


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path


def reachable_targets(core: Any, skeleton: dict, poses: list[dict], effector: str,
                      frames: list[int]) -> list[dict[str, Any]]:
    """targets.json keyframes at ``frames``: the effector's FK pose for each joint pose."""
    defn = core.formats.parse_skeleton(skeleton)
    skel = core.Skeleton(defn)
    out = []
    for frame, pose in zip(frames, poses, strict=True):
        skel.reset()
        entries = {}
        for name, value in pose.items():
            kind = defn_type(defn, name)
            entries[name] = {"type": kind, **value}
        skel.set_joint_values(entries)
        m = skel.world_transforms()[effector]
        euler = core.rotations.matrix_to_euler_xyz(m[:3, :3])
        out.append({"frame": frame, "pos": [float(v) for v in m[:3, 3]],
                    "euler": [math.degrees(float(a)) for a in euler]})
    return out


def defn_type(defn: Any, name: str) -> str:
    return next(j.type for j in defn.joints if j.name == name)


def lock_root(pb: Any) -> None:
    """Lock a pose bone as a rigger keeps a body part in place: every IK axis (a fixed
    joint) and the location channels (no translation joints)."""
    pb.lock_ik_x = pb.lock_ik_y = pb.lock_ik_z = True
    pb.lock_location = (True, True, True)


def build_plain_rig():
    """A leg made in Blender without dhik data: a locked root (a fixed joint), spherical
    hip (Y locked, X limited), revolute knee about X, locked toe, each bone connected to
    the one above (as extruding them gives). Bone X = world X, bone Z = -Y."""
    import bpy

    arm = bpy.data.armatures.new("rig")
    ob = bpy.data.objects.new("rig", arm)
    bpy.context.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    for name, head, tail, parent in [
        ("root", (0, 0, 0), (0, 0, 0.2), None),
        ("hip", (0, 0, 0.2), (0, 0, 1.0), "root"),
        ("knee", (0, 0, 1.0), (0, 0, 1.8), "hip"),
        ("toe", (0, 0, 1.8), (0, 0, 2.0), "knee"),
    ]:
        eb = arm.edit_bones.new(name)
        eb.head, eb.tail = head, tail
        eb.align_roll((0, -1, 0))
        if parent:
            eb.parent = arm.edit_bones[parent]
            eb.use_connect = True
    bpy.ops.object.mode_set(mode="OBJECT")
    lock_root(ob.pose.bones["root"])
    knee = ob.pose.bones["knee"]
    knee.lock_ik_y = knee.lock_ik_z = True
    knee.use_ik_limit_x, knee.ik_min_x, knee.ik_max_x = True, -0.5, 2.0
    hip = ob.pose.bones["hip"]
    hip.use_ik_limit_x, hip.ik_min_x, hip.ik_max_x = True, -1.0, 1.0
    hip.lock_ik_y = True
    toe = ob.pose.bones["toe"]
    toe.lock_ik_x = toe.lock_ik_y = toe.lock_ik_z = True
    return ob


def export_skeleton(ob: Any) -> str:
    """Path of ``ob``'s skeleton.json, written by the real dhik.export_skeleton operator."""
    import bpy

    path = Path(bpy.app.tempdir or "/tmp") / f"{ob.name}_exported_skeleton.json"
    assert bpy.ops.dhik.export_skeleton(filepath=str(path)) == {"FINISHED"}
    return str(path)


def blender_joint_worlds(ob: Any, rest: dict[str, Any]) -> dict[str, Any]:
    """World 4x4 (numpy, metres) of each joint read from Blender's evaluated pose.

    Joint position = bone head; joint rotation = (bone world rotation) @ B_rest^-1 @ C_rest,
    with ``rest[name]`` = C_rest, the joint's T-pose world rotation from the core. Joints
    without a bone (the fixed ``<bone>.rest`` joints of an inferred skeleton) are left out.
    """
    import numpy as np

    out = {}
    for name, c in rest.items():
        pb = ob.pose.bones.get(name)
        if pb is None:
            continue
        m = np.array(ob.matrix_world @ pb.matrix, dtype=float)
        b = np.array(pb.bone.matrix_local.to_3x3(), dtype=float)
        w = np.eye(4)
        w[:3, :3] = m[:3, :3] @ b.T @ c
        w[:3, 3] = m[:3, 3]
        out[name] = w
    return out


def bone_world(ob: Any, bone: str) -> Any:
    """World 4x4 (numpy) of pose bone ``bone``: what an Empty snapped to it shows."""
    import numpy as np

    return np.array(ob.matrix_world @ ob.pose.bones[bone].matrix, dtype=float)


def keyed_root(target: Any) -> Any:
    """The object that carries ``target``'s keys: its ``_keys`` parent for a target that
    Import Targets turned to a bone's orientation, else the target itself."""
    parent = target.parent
    return parent if parent is not None and parent.name.endswith("_keys") else target


# A hand-made arm with angled, rolled bones (armature space, metres; roll in radians):
# a locked root (fixed), upper arm (all axes free, IK limit on X; not connected, its
# location locked to keep it on the body), forearm (hinge about its X, limited), hand
# (lock_ik_y: X and Z free). The hand is the single leaf, the effector.
ANGLED_ARM = [
    ("root", (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 0.0, None),
    ("upper_arm", (0.2, 0.0, 1.4), (0.45, 0.08, 1.15), 0.7, "root"),
    ("forearm", (0.45, 0.08, 1.15), (0.62, -0.05, 0.93), 1.1, "upper_arm"),
    ("hand", (0.62, -0.05, 0.93), (0.70, -0.14, 0.86), -0.5, "forearm"),
]
UPPER_ARM_X = (-0.6, 0.9)  # rad, IK limit on the upper arm's X axis
FOREARM_X = (0.0, 2.3)  # rad, IK limit of the forearm hinge


def build_angled_arm(name: str = "arm"):
    """The ANGLED_ARM armature (quaternion rotation mode), linked and active."""
    import bpy

    arm = bpy.data.armatures.new(name)
    ob = bpy.data.objects.new(name, arm)
    bpy.context.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    for bone, head, tail, roll, parent in ANGLED_ARM:
        eb = arm.edit_bones.new(bone)
        eb.head, eb.tail, eb.roll = head, tail, roll
        if parent:
            eb.parent = arm.edit_bones[parent]
            eb.use_connect = parent != "root"
    bpy.ops.object.mode_set(mode="OBJECT")
    pose = ob.pose.bones
    lock_root(pose["root"])
    upper = pose["upper_arm"]
    upper.lock_location = (True, True, True)
    upper.use_ik_limit_x = True
    upper.ik_min_x, upper.ik_max_x = UPPER_ARM_X
    fore = pose["forearm"]
    fore.lock_ik_y = fore.lock_ik_z = True
    fore.use_ik_limit_x = True
    fore.ik_min_x, fore.ik_max_x = FOREARM_X
    pose["hand"].lock_ik_y = True
    for pb in pose:
        pb.rotation_mode = "QUATERNION"
    return ob


def leg_with_goal(effector_on_panel: bool = True):
    """:func:`build_plain_rig` and an Empty "goal" within the toe's reach; with
    ``effector_on_panel`` the panel bakes the toe to it, position only. ``(ob, goal)``."""
    import bpy

    ob = build_plain_rig()
    target = bpy.data.objects.new("goal", None)
    bpy.context.collection.objects.link(target)
    target.location = (0.0, -0.5, 1.5)
    if effector_on_panel:
        s = bpy.context.scene.dhik
        s.armature, s.effector, s.target, s.orientation_weight = ob, "toe", target, 0.0
    return ob, target


def build_metarig():
    """The Rigify human metarig (rigify is bundled with the bpy module), or None."""
    import bpy

    try:
        bpy.ops.preferences.addon_enable(module="rigify")
        bpy.ops.object.armature_human_metarig_add()
    except (RuntimeError, AttributeError):
        return None
    ob = bpy.context.active_object
    return ob if ob is not None and ob.type == "ARMATURE" else None
