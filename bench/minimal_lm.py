"""The smallest batched numpy Levenberg-Marquardt that does an engine row-iteration's work.

A yardstick for bench/floor.py (issue 17, point 5): for a serial chain of hinges (arm7),
one iteration per row is FK, the 6xN world Jacobian, the pose error (position and
rotation vector), a damped 6x6 solve, the limits kept by clamping and removing columns
(as Blender's Standard solver and the engine keep them), and accept/reject with the
damping raised or lowered. Batch first, ``np.matmul`` and ``np.linalg.solve``; no
options, charts, poles, held columns, stall rule or bookkeeping. Frames: world; metres,
radians.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = np.ndarray


class MinimalLM:
    """The hinge chain of a skeleton.json dict's path to ``effector`` (revolute and fixed
    joints only)."""

    def __init__(self, skeleton: dict[str, Any], effector: str) -> None:
        joints = {j["name"]: j for j in skeleton["joints"]}
        path = []
        name: str | None = effector
        while name is not None:
            path.append(joints[name])
            name = joints[name].get("parent")
        self.path = path[::-1]
        hinges = [j for j in self.path if j["type"] == "revolute"]
        self.n = len(hinges)
        self.lo = np.array([j.get("limits", [-np.inf, np.inf])[0] for j in hinges])
        self.hi = np.array([j.get("limits", [-np.inf, np.inf])[1] for j in hinges])

    def fk(self, q: Array) -> tuple[Array, Array, Array, Array]:
        """``q`` (k, n) -> effector rotation (k, 3, 3), position (k, 3), each hinge's
        world axis (k, n, 3) and origin (k, n, 3)."""
        k = len(q)
        rot = np.broadcast_to(np.eye(3), (k, 3, 3))
        pos = np.zeros((k, 3))
        axes, origins = np.empty((k, self.n, 3)), np.empty((k, self.n, 3))
        c = 0
        for j in self.path:
            pos = pos + rot @ np.asarray(j.get("offset", [0, 0, 0]), dtype=float)
            if j["type"] == "revolute":
                a = np.asarray(j["axis"], dtype=float)
                a = a / np.linalg.norm(a)
                axes[:, c], origins[:, c] = rot @ a, pos
                kx = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
                s, co = np.sin(q[:, c])[:, None, None], np.cos(q[:, c])[:, None, None]
                rot = rot @ (np.eye(3) + s * kx + (1 - co) * (kx @ kx))
                c += 1
        return rot, pos, axes, origins

    def error(self, q: Array, t_rot: Array, t_pos: Array, scale: float
              ) -> tuple[Array, Array, Array, Array]:  # fmt: skip
        """The weighted error (k, 6) (position over ``scale``, rotation vector) and
        Jacobian (k, 6, n) at ``q``."""
        rot, pos, axes, origins = self.fk(q)
        d = pos[:, None] - origins
        jac = np.concatenate([np.cross(axes, d).transpose(0, 2, 1) / scale,
                              axes.transpose(0, 2, 1)], axis=1)
        rel = t_rot @ rot.transpose(0, 2, 1)
        cos = np.clip((np.trace(rel, axis1=1, axis2=2) - 1) / 2, -1, 1)
        theta = np.arccos(cos)
        vee = np.stack([rel[:, 2, 1] - rel[:, 1, 2], rel[:, 0, 2] - rel[:, 2, 0],
                        rel[:, 1, 0] - rel[:, 0, 1]], axis=1)
        sn = np.sin(theta)
        f = np.where(sn > 1e-9, theta / (2 * np.maximum(sn, 1e-9)), 0.5)
        err = np.concatenate([(t_pos - pos) / scale, vee * f[:, None]], axis=1)
        return err, jac, pos, rot

    def solve(self, q: Array, t_rot: Array, t_pos: Array, iterations: int,
              scale: float = 1.0) -> Array:  # fmt: skip
        """``iterations`` LM iterations of every row from ``q`` (k, n); the answer."""
        q = np.clip(q, self.lo, self.hi)
        err, jac, _, _ = self.error(q, t_rot, t_pos, scale)
        energy = 0.5 * np.einsum("ki,ki->k", err, err)
        lam = np.ones(len(q))
        eye = np.eye(6)
        for _ in range(iterations):
            w = lam * (0.1 * energy + 1e-9)
            free = np.ones_like(q, dtype=bool)
            fixed = np.zeros_like(q)
            for _ in range(self.n):  # clamp and remove: columns that leave their box
                jf = jac * free[:, None, :]
                rest = err - np.einsum("kin,kn->ki", jac, fixed)
                a = jf @ jf.transpose(0, 2, 1) + w[:, None, None] * eye
                y = np.linalg.solve(a, rest[..., None])[..., 0]
                step = np.where(free, np.einsum("kin,ki->kn", jf, y), fixed)
                new = q + step
                out = free & ((new < self.lo) | (new > self.hi))
                if not out.any():
                    break
                fixed = np.where(out, np.clip(new, self.lo, self.hi) - q, fixed)
                free &= ~out
            trial = np.clip(q + step, self.lo, self.hi)
            e2, j2, _, _ = self.error(trial, t_rot, t_pos, scale)
            en2 = 0.5 * np.einsum("ki,ki->k", e2, e2)
            ok = en2 < energy
            q = np.where(ok[:, None], trial, q)
            err = np.where(ok[:, None], e2, err)
            jac = np.where(ok[:, None, None], j2, jac)
            energy = np.where(ok, en2, energy)
            lam = np.where(ok, np.maximum(lam * 0.5, 1e-6), lam * 10.0)
        return q
