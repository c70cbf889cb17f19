"""A batched model's coordinate rows as SPEC 3.3 joint values and back (the
animation.json entries of ``joint_space.BatchedModel``): revolute angles (rad),
prismatic displacements (m), spherical joints' file ``euler`` XYZ (rad) and
``quaternion`` ``[w, x, y, z]`` from their charts (``charts``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..rotations import (
    euler_xyz_to_quat,
    quat_to_euler_xyz,
    quat_to_euler_xyz_rows,
    quat_to_rotvec,
)
from ..solver.kinematics import PRISMATIC
from .charts import angles_in_box, chart_quats

Array = NDArray[np.float64]


class JointValues:
    """Coordinates <-> joint values, for a model with these columns: ``n`` of them,
    limits ``lo``/``hi`` (n,), one-DoF joints ``(name, column, kind)`` and spherical
    joints ``(name, first column, chart is a rotation vector)``."""

    n: int
    lo: Array
    hi: Array
    _one_dof: list[tuple[str, int, int]]
    _spherical: list[tuple[str, int, bool]]

    def joint_values(self, q: Array) -> dict[str, dict[str, Any]]:
        """SPEC 3.3 entries (radians, metres, ``[w, x, y, z]``) of the model's joints for
        one coordinate row ``q`` (n,)."""
        q = np.asarray(q, dtype=float)
        out: dict[str, dict[str, Any]] = {}
        for name, c, kind in self._one_dof:
            if kind == PRISMATIC:
                out[name] = {"type": "prismatic", "displacement": float(q[c])}
            else:
                out[name] = {"type": "revolute", "angle": float(q[c])}
        for name, c, rv in self._spherical:
            quat = chart_quats(q[None, c:c + 3], rv)[0]
            out[name] = {"type": "spherical",
                         "euler": [float(v) for v in quat_to_euler_xyz(quat)],
                         "quaternion": [float(v) for v in quat]}
        return out

    def value_columns(self, q: Array) -> dict[str, tuple[str, Array]]:
        """:meth:`joint_values` of many rows ``q`` (k, n) at once, as arrays: per joint
        ``(type, values)``, values (k,) (rad or m) for a revolute or prismatic joint and
        (k, 7) for a spherical one (its file ``euler`` XYZ, rad, then ``quaternion``
        ``[w, x, y, z]``)."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        out: dict[str, tuple[str, Array]] = {}
        for name, c, kind in self._one_dof:
            out[name] = ("prismatic" if kind == PRISMATIC else "revolute", q[:, c])
        if not self._spherical:
            return out
        k = len(q)
        quats = np.empty((len(self._spherical), k, 4))
        for rv in (True, False):  # every joint of a chart at once
            at = [j for j, (_, _, r) in enumerate(self._spherical) if r == rv]
            if at:
                cols = np.array([self._spherical[j][1] for j in at])[:, None] + np.arange(3)
                # joint-major rows (J k, 3), contiguous: the numbers of one row at a time
                v = np.ascontiguousarray(q[:, cols].transpose(1, 0, 2)).reshape(-1, 3)
                quats[at] = chart_quats(v, rv).reshape(len(at), k, 4)
        flat = quats.reshape(-1, 4)
        rows = np.concatenate((quat_to_euler_xyz_rows(flat), flat), axis=1).reshape(-1, k, 7)
        for j, (name, _, _) in enumerate(self._spherical):
            out[name] = ("spherical", rows[j])
        return out

    def coordinates(self, values: Mapping[str, Mapping[str, Any]]) -> Array:
        """The coordinate row (n,) of SPEC 3.3 joint values (radians, metres, ``[w, x,
        y, z]``), the inverse of :meth:`joint_values`: a boxed spherical joint's intrinsic
        XYZ angles nearest its box (clamped into it), an unlimited one's rotation vector
        (angle at most pi); a joint not in ``values`` at the T-pose."""
        q = np.zeros(self.n)
        for name, c, kind in self._one_dof:
            entry = values.get(name)
            if entry is not None:
                q[c] = float(entry["displacement" if kind == PRISMATIC else "angle"])
        for name, c, rv in self._spherical:
            entry = values.get(name)
            if entry is not None:
                quat = entry["quaternion"] if "quaternion" in entry else \
                    euler_xyz_to_quat(entry["euler"])
                if rv:
                    q[c:c + 3] = quat_to_rotvec(np.asarray(quat, dtype=float))
                else:
                    q[c:c + 3] = angles_in_box([float(v) for v in quat],
                                               self.lo[c:c + 3].tolist(),
                                               self.hi[c:c + 3].tolist())
        return q
