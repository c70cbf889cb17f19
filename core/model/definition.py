"""The plain data a skeleton and its targets are made of (SPEC 3.1/3.2), validated by app.formats.

Units: metres and radians; keyframe Euler angles in degrees (world frame).
"""

from __future__ import annotations

from dataclasses import dataclass

JOINT_TYPES = ("fixed", "revolute", "prismatic", "spherical")
ANIMATED_TYPES = ("revolute", "prismatic", "spherical")
DOF = {"fixed": 0, "revolute": 1, "prismatic": 1, "spherical": 3}  # per joint type

Vec3 = tuple[float, float, float]
Range = tuple[float, float]
SphericalLimits = tuple[Range | None, Range | None, Range | None]


@dataclass(frozen=True)
class JointDef:
    """One joint of skeleton.json, validated.

    ``offset`` (metres) is relative to the parent. ``axis`` is a unit vector
    (revolute/prismatic only, else None). ``limits`` is None, ``(min, max)``
    (radians or metres) or, for spherical joints, a 3-tuple of ``(min, max)``
    or None per XYZ Euler angle (radians). ``quaternion`` ``(w, x, y, z)``,
    unit, is the fixed rotation of a fixed joint (None = identity).
    """

    name: str
    type: str
    offset: Vec3 = (0.0, 0.0, 0.0)
    parent: str | None = None
    axis: Vec3 | None = None
    limits: Range | SphericalLimits | None = None
    quaternion: tuple[float, float, float, float] | None = None


@dataclass(frozen=True)
class SkeletonDef:
    """A validated skeleton: ``joints`` ordered parents before children (root first)."""

    root_name: str
    joints: tuple[JointDef, ...]


@dataclass(frozen=True)
class Keyframe:
    """One target keyframe: ``pos`` in metres (world), ``euler`` XYZ in degrees (world)."""

    frame: int
    pos: Vec3
    euler: Vec3


