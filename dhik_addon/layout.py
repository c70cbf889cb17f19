"""Where the bones of an imported skeleton go: heads, tails, roll references (no bpy).

All vectors are in armature space (= the core's world frame), in metres. The rest
frames come from the core's FK at the T-pose, so a fixed joint's quaternion turns its
descendants exactly as the core does.

Rules (README, "What import builds"):
- one bone per joint, its head at the joint;
- the bone points to the first descendant (breadth first, file order) that is not at
  the same place, so bones are never zero length; a joint with no such descendant
  continues its parent bone's direction at half its length (a lone root: +Y, 0.1 m);
- the bone's roll puts a revolute or prismatic axis on the bone's local Z axis when the
  axis is not along the bone (on local Y when it is); otherwise the joint-frame axis
  most perpendicular to the bone becomes local Z, so bone axes follow joint axes
  whenever the bone itself lies along one of them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..core.model.definition import SkeletonDef
from ..core.model.skeleton import Skeleton

Vec3 = NDArray[np.float64]
Mat3 = NDArray[np.float64]

MIN_DISTANCE = 1e-6  # m: closer than this a descendant does not give a direction
LONE_ROOT_LENGTH = 0.1  # m


@dataclass(frozen=True)
class BoneSpec:
    """Rest placement of one bone, armature space (m)."""

    name: str
    parent: str | None
    head: Vec3
    tail: Vec3
    roll_reference: Vec3  # align_roll() target: the bone's local Z follows it
    connect: bool


@dataclass(frozen=True)
class RestFrame:
    """A joint's T-pose frame from the core's FK: position (m) and rotation C (3x3)."""

    position: Vec3
    rotation: Mat3


def rest_frames(defn: SkeletonDef) -> dict[str, RestFrame]:
    """T-pose world frame of every joint, from the core's FK (parents first)."""
    return {
        name: RestFrame(m[:3, 3].copy(), m[:3, :3].copy())
        for name, m in Skeleton(defn).rest_transforms().items()
    }


def _children(defn: SkeletonDef) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {j.name: [] for j in defn.joints}
    for j in defn.joints:
        if j.parent is not None:
            kids[j.parent].append(j.name)
    return kids


def _aim_point(name: str, kids: dict[str, list[str]], frames: dict[str, RestFrame]) -> Vec3 | None:
    """First descendant position (breadth first) away from ``name``'s head, or None."""
    head = frames[name].position
    queue = deque(kids[name])
    while queue:
        d = queue.popleft()
        if np.linalg.norm(frames[d].position - head) > MIN_DISTANCE:
            return frames[d].position
        queue.extend(kids[d])
    return None


def _most_perpendicular(rotation: Mat3, direction: Vec3) -> Vec3:
    """The column of ``rotation`` (a joint-frame axis) least aligned with ``direction``."""
    dots = np.abs(rotation.T @ direction)
    return rotation[:, int(np.argmin(dots))].copy()


def roll_reference(joint_type: str, axis: Vec3 | None, rest: Mat3, direction: Vec3) -> Vec3:
    """Vector whose part normal to ``direction`` becomes the bone's local Z (armature space)."""
    if joint_type in ("revolute", "prismatic") and axis is not None:
        world_axis = rest @ axis
        if np.linalg.norm(np.cross(world_axis, direction)) > 1e-6:
            return world_axis
    return _most_perpendicular(rest, direction)


def bone_layout(defn: SkeletonDef) -> list[BoneSpec]:
    """Bone heads, tails, roll references and connections, parents first (armature space)."""
    frames = rest_frames(defn)
    kids = _children(defn)
    types = {j.name: j.type for j in defn.joints}
    specs: dict[str, BoneSpec] = {}
    for j in defn.joints:
        head = frames[j.name].position
        aim = _aim_point(j.name, kids, frames)
        if aim is not None:
            tail = aim
        elif j.parent is not None:
            ph, pt = specs[j.parent].head, specs[j.parent].tail
            tail = head + 0.5 * (pt - ph)
        else:
            tail = head + np.array([0.0, LONE_ROOT_LENGTH, 0.0])
        direction = (tail - head) / np.linalg.norm(tail - head)
        axis = None if j.axis is None else np.asarray(j.axis, dtype=float)
        parent = specs[j.parent] if j.parent is not None else None
        connect = (
            parent is not None
            and j.type != "prismatic"
            and types[parent.name] != "prismatic"
            and bool(np.linalg.norm(parent.tail - head) <= MIN_DISTANCE)
        )
        specs[j.name] = BoneSpec(
            j.name, j.parent, head.copy(), tail.copy(),
            roll_reference(j.type, axis, frames[j.name].rotation, direction), connect,
        )
    return list(specs.values())

