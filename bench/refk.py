"""The benchmark's own forward kinematics: plain numpy, from skeleton.json dicts.

Independent of dhik (no dhik import): every answer of every solver is re-checked with
it. Frames: world; units: metres, radians. Joint values: revolute angle (rad), prismatic
displacement (m), spherical quaternion ``[w, x, y, z]``; fixed joints have none.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
Values = dict[str, Any]


def quat_matrix(q: Any) -> Array:
    """Rotation matrix of a quaternion ``[w, x, y, z]`` (normalised here)."""
    w, x, y, z = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def rodrigues(axis: Any, angle: float) -> Array:
    """Rotation by ``angle`` about ``axis`` (normalised here): I + sin K + (1 - cos) K^2."""
    k = np.asarray(axis, dtype=float)
    k = k / np.linalg.norm(k)
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx


def rot_xyz_intrinsic(a: float, b: float, c: float) -> Array:
    """``Rx(a) Ry(b) Rz(c)``."""
    return rodrigues([1, 0, 0], a) @ rodrigues([0, 1, 0], b) @ rodrigues([0, 0, 1], c)


def intrinsic_angles(r: Array) -> tuple[float, float, float]:
    """``(a, b, c)`` with ``r = Rx(a) Ry(b) Rz(c)``, b in [-pi/2, pi/2]."""
    b = math.asin(max(-1.0, min(1.0, r[0, 2])))
    return math.atan2(-r[1, 2], r[2, 2]), b, math.atan2(-r[0, 1], r[0, 0])


def matrix_quat(r: Array) -> list[float]:
    """Quaternion ``[w, x, y, z]`` of a rotation matrix (w >= 0)."""
    w = math.sqrt(max(0.0, 1 + r[0, 0] + r[1, 1] + r[2, 2])) / 2
    x = math.copysign(math.sqrt(max(0.0, 1 + r[0, 0] - r[1, 1] - r[2, 2])) / 2, r[2, 1] - r[1, 2])
    y = math.copysign(math.sqrt(max(0.0, 1 - r[0, 0] + r[1, 1] - r[2, 2])) / 2, r[0, 2] - r[2, 0])
    z = math.copysign(math.sqrt(max(0.0, 1 - r[0, 0] - r[1, 1] + r[2, 2])) / 2, r[1, 0] - r[0, 1])
    q = np.array([w, x, y, z])
    return list(q / np.linalg.norm(q))


def rotvec(r: Array) -> Array:
    """Rotation vector (rad) of a rotation matrix, via the angle and the skew part."""
    c = max(-1.0, min(1.0, (np.trace(r) - 1) / 2))
    angle = math.acos(c)
    v = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    if angle < 1e-6:
        return v / 2
    if angle > math.pi - 1e-6:  # near pi: axis from the symmetric part
        m = (r + np.eye(3)) / 2
        axis = m[int(np.argmax(np.diag(m)))]
        axis = axis / np.linalg.norm(axis)
        return axis * angle
    return v * angle / (2 * math.sin(angle))


class Chain:
    """One skeleton.json dict, ready for FK of joint values."""

    def __init__(self, skeleton: dict[str, Any]) -> None:
        self.joints = {j["name"]: j for j in skeleton["joints"]}
        self.root = skeleton["root_name"]
        order: list[str] = []
        pending = [self.root]
        while pending:  # parents first
            name = pending.pop(0)
            order.append(name)
            pending += [j["name"] for j in skeleton["joints"] if j.get("parent") == name]
        self.order = order

    def local(self, joint: dict[str, Any], value: Any) -> Array:
        m = np.eye(4)
        off = np.asarray(joint.get("offset", [0, 0, 0]), dtype=float)
        kind = joint["type"]
        if kind == "revolute":
            m[:3, :3] = rodrigues(joint["axis"], float(value))
            m[:3, 3] = off
        elif kind == "prismatic":
            axis = np.asarray(joint["axis"], dtype=float)
            m[:3, 3] = off + float(value) * axis / np.linalg.norm(axis)
        elif kind == "spherical":
            m[:3, :3] = quat_matrix(value)
            m[:3, 3] = off
        else:
            if joint.get("quaternion") is not None:
                m[:3, :3] = quat_matrix(joint["quaternion"])
            m[:3, 3] = off
        return m

    def world(self, values: Values) -> dict[str, Array]:
        """World 4x4 of every joint; joints missing from ``values`` are at rest."""
        out: dict[str, Array] = {}
        for name in self.order:
            j = self.joints[name]
            rest = [1.0, 0.0, 0.0, 0.0] if j["type"] == "spherical" else 0.0
            local = self.local(j, values.get(name, rest))
            parent = j.get("parent")
            out[name] = local if parent is None else out[parent] @ local
        return out

    def fk(self, values: Values, effector: str) -> Array:
        return self.world(values)[effector]

    def within_limits(self, values: Values, slack: float = 1e-9) -> bool:
        """Revolute/prismatic values within their limits; spherical: the intrinsic XYZ
        angles of the quaternion (``Rx Ry Rz``, the virtual chain's order) within theirs."""
        for name, v in values.items():
            j = self.joints[name]
            lim = j.get("limits")
            if lim is None:
                continue
            if j["type"] == "spherical":
                angles = intrinsic_angles(quat_matrix(v))
                for a, ax in zip(angles, lim, strict=True):
                    if ax is not None and not ax[0] - 1e-6 <= a <= ax[1] + 1e-6:
                        return False
            elif not lim[0] - slack <= float(v) <= lim[1] + slack:
                return False
        return True


def pose_errors(target: Array, reached: Array) -> tuple[float, float]:
    """``(|p_t - p|, |rotvec(R_t R^T)|)`` in metres and radians."""
    dp = float(np.linalg.norm(target[:3, 3] - reached[:3, 3]))
    dr = float(np.linalg.norm(rotvec(target[:3, :3] @ reached[:3, :3].T)))
    return dp, dr
