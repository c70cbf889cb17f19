"""The compiled kinematics model: FK, errors and Jacobians on plain Python floats.

``CompiledKinematics`` flattens the joints on the effectors' paths into a list of plain
tuples once; FK, errors and Jacobians then run on Python floats (numpy's per-call
overhead dominates at a handful of joints). Frames: world. Units: metres, radians.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from ..floatmath import (
    INF,
    ZERO,
    Mat3,
    Quat,
    Vec3,
    axis_angle_mat,
    euler_xyz_of,
    intrinsic_xyz,
    quat_mat,
    quat_mul,
    quat_unit,
    rotvec_of,
)
from ..solver.chain import path_to_root
from ..solver.joints import SYNC_THRESHOLD, JointNode, PrismaticJoint, RevoluteJoint
from ..solver.kinematics import FIXED, PRISMATIC, REVOLUTE, SPHERICAL, VIRTUAL
from .fkgen import (
    DRIVEN,
    Frames,
    Op,
    Step,
    driven_op,
    fixed_op,
    prismatic_op,
    revolute_op,
    spherical_op,
    straight_line_fk,
)
from .objects import union_chain
from .skeleton import Skeleton
from .spherical import SphericalJoint

Array = NDArray[np.float64]
# a save(): per column q and current limits, per spherical joint its quaternion
State = tuple[list[float], list[float], list[float], list[Quat]]


class CompiledKinematics:
    """The kinematics protocol on flat lists, for the joints on the effectors' paths.

    Compiled once from a ``Skeleton``: one closure per path joint (constants bound, the
    joints with only fixed ancestors evaluated once). State: one float per column
    (radians, metres, or a spherical increment in radians), the current limits per
    column (shifted for virtual columns; +-inf when none) and one ``(w, x, y, z)``
    quaternion per spherical joint. ``update()`` is skipped while nothing changed since
    the last FK.

    The state lists: ``q`` (per column: rad, m, or a spherical increment in rad),
    ``lo``/``hi`` (current limits, shifted for virtual columns), ``lo0``/``hi0`` (the
    skeleton's limits), ``quats`` (per spherical joint, ``(w, x, y, z)``, rotation
    relative to its parent's frame), with ``column_joint`` (per column the owning joint's
    name and its virtual index, -1 for a real joint), ``spherical_names`` and
    ``spherical_columns``. ``driven_names``: the joints on the paths that no chain solves
    (set by ``drive``). The spec twin (``solver.dls_compiled``) and the spec bake use it;
    the robust engine has its own joint space (``model.joint_space``).
    """

    q: list[float]
    lo: list[float]
    hi: list[float]
    lo0: list[float]
    hi0: list[float]
    quats: list[Quat]

    def __init__(self, skeleton: Skeleton, effectors: list[str],
                 chain_lengths: Sequence[int] | None = None) -> None:
        self.effectors = list(effectors)
        paths = [path_to_root(skeleton.root, skeleton.joint(e)) for e in self.effectors]
        lengths = [0] * len(paths) if chain_lengths is None else list(chain_lengths)
        if len(lengths) != len(paths) or any(n < 0 for n in lengths):
            raise ValueError("need one chain length >= 0 per effector")
        # the joints each effector's solve may move: the last n of its path (n = 0: all),
        # counted as Blender's IK constraint counts bones; the others on the paths are
        # driven (their values come from outside, frame by frame: ``drive``)
        chains = [[j.name for j in (path[-n:] if n else path)]
                  for path, n in zip(paths, lengths, strict=True)]
        solved = {name for chain in chains for name in chain}
        self.names = [node.name for node in union_chain(skeleton, self.effectors)
                      if _owner(node) in solved]
        self.n = len(self.names)
        col = {name: i for i, name in enumerate(self.names)}
        on_path = {j.name for path in paths for j in path}
        order = [name for name in skeleton.joints if name in on_path]  # parents first
        index = {name: i for i, name in enumerate(order)}
        self._eff = [index[e] for e in self.effectors]
        self.q = [0.0] * self.n
        self.lo0 = [-INF] * self.n
        self.hi0 = [INF] * self.n
        self.lo = list(self.lo0)
        self.hi = list(self.hi0)
        self.quats: list[Quat] = []
        self.spherical_names: list[str] = []
        self.spherical_columns: list[tuple[int, int, int]] = []
        # per column: (kind, path joint, coordinate axis or -1, unit axis); owner joint
        self._col_info: list[tuple[int, int, int, Vec3]] = [(REVOLUTE, 0, -1, ZERO)] * self.n
        self.column_joint: list[tuple[str, int]] = [("", -1)] * self.n
        self._frames = f = Frames(len(order), self.n)
        static: list[Op] = []
        steps: list[Step] = []
        moving: set[int] = set()
        step: Step
        self.driven_names: list[str] = []
        self._driven: dict[str, tuple[int, JointNode]] = {}
        self._driven_local: list[tuple[Mat3 | None, Vec3]] = [(None, ZERO)] * len(order)
        for i, name in enumerate(order):
            j = skeleton.joints[name]
            parent = -1 if j.parent is None else index[j.parent.name]
            off: Vec3 = tuple(float(v) for v in j.local_offset)  # type: ignore[assignment]
            if name not in solved and j.get_dof() > 0:
                self.driven_names.append(name)
                self._driven[name] = (i, j)
                self._driven_local[i] = (None, off)
                op = driven_op(f, i, parent, self._driven_local)
                step = (i, DRIVEN, parent, off, -1, -1, None, op)
                moving.add(i)
            elif isinstance(j, RevoluteJoint | PrismaticJoint):
                c = col[name]
                axis: Vec3 = tuple(float(v) for v in j.axis)  # type: ignore[assignment]
                ax = axis.index(1.0) if sorted(axis) == [0.0, 0.0, 1.0] else -1
                if isinstance(j, RevoluteJoint):
                    kind, op = REVOLUTE, revolute_op(f, i, parent, off, self.q, c, ax, axis)
                else:
                    kind, op = PRISMATIC, prismatic_op(f, i, parent, off, self.q, c, axis)
                self._col_info[c] = (kind, i, ax, axis)
                step = (i, kind, parent, off, c, ax, None, op)
                self.column_joint[c] = (name, -1)
                if j.limits is not None:
                    self.lo0[c], self.hi0[c] = j.limits
                moving.add(i)
            elif isinstance(j, SphericalJoint):
                cs = tuple(col[v.name] for v in j.virtual_chain)
                op = spherical_op(f, i, parent, off, self, cs, len(self.spherical_names))
                step = (i, SPHERICAL, parent, off, -1, -1, None, op)
                self.spherical_names.append(name)
                self.spherical_columns.append(cs)  # type: ignore[arg-type]
                self.quats.append((1.0, 0.0, 0.0, 0.0))
                for k, (c, lim) in enumerate(zip(cs, j.limits, strict=True)):
                    self._col_info[c] = (VIRTUAL, i, k, ZERO)
                    self.column_joint[c] = (name, k)
                    if lim is not None:
                        self.lo0[c], self.hi0[c] = lim
                moving.add(i)
            else:
                quat = tuple(float(v) for v in j.quaternion)  # type: ignore[attr-defined]
                rot = None if quat == (1.0, 0.0, 0.0, 0.0) else quat_mat(quat)
                op = fixed_op(f, i, parent, off, rot)
                step = (i, FIXED, parent, off, -1, -1, rot, op)
                if parent in moving:
                    moving.add(i)
            if i in moving:
                steps.append(step)
            else:
                static.append(op)
        self._ops = [st[7] for st in steps]  # the closures: the reference for the FK below
        self._fk = straight_line_fk(steps, f, self.q)
        self._eff_cols = [
            [col[node.name] for j in path for node in _solver_nodes(j) if node.name in col]
            for path in paths
        ]
        for op in static:
            op()
        self._fresh = self._clipped = False
        self.read_from(skeleton)
        self.update()

    # -- driven joints (on the paths, outside the solved chains) ------------------------
    def drive(self, values: Mapping[str, Mapping[str, Any]]) -> None:
        """Set driven joints from SPEC 3.3 entries (``angle`` rad, ``displacement`` m,
        ``quaternion`` ``[w, x, y, z]``); joints not named keep their value. FK at the
        next ``update()``."""
        for name, entry in values.items():
            found = self._driven.get(name)
            if found is None:
                continue
            i, j = found
            off: Vec3 = tuple(float(v) for v in j.local_offset)  # type: ignore[assignment]
            if isinstance(j, RevoluteJoint):
                rot = axis_angle_mat(tuple(float(v) for v in j.axis),  # type: ignore[arg-type]
                                     float(entry["angle"]))
                self._driven_local[i] = (rot, off)
            elif isinstance(j, PrismaticJoint):
                d = float(entry["displacement"])
                ax, ay, az = (float(v) for v in j.axis)
                self._driven_local[i] = (None, (off[0] + d * ax, off[1] + d * ay,
                                                off[2] + d * az))
            else:
                w, x, y, z = (float(v) for v in entry["quaternion"])
                self._driven_local[i] = (quat_mat(quat_unit((w, x, y, z))), off)
        self._fresh = False

    # -- FK ---------------------------------------------------------------------------
    def touch(self) -> None:
        """The state lists were written in place: the next ``update()`` runs FK."""
        self._fresh = False

    def update(self) -> None:
        """FK of the path joints, folding spherical increments first (SPEC 4.3)."""
        if self._fresh:
            return
        self._fk()
        self._fresh = True

    # -- plain-float solver interface --------------------------------------------------
    def pose_error(self, k: int, target_r: Sequence[float], target_p: Sequence[float]
                   ) -> tuple[float, float, float, float, float, float]:  # fmt: skip
        """``(dp, dr)`` of effector ``k`` as 6 floats: ``p_t - p`` (m), ``rotvec(R_t R^T)``
        (rad), world frame; ``target_r`` row-major 3x3, ``target_p`` in metres."""
        e = self._eff[k]
        r0, r1, r2, r3, r4, r5, r6, r7, r8 = self._frames.R[e]
        p = self._frames.P[e]
        t0, t1, t2, t3, t4, t5, t6, t7, t8 = target_r
        drx, dry, drz = rotvec_of((
            t0 * r0 + t1 * r1 + t2 * r2, t0 * r3 + t1 * r4 + t2 * r5, t0 * r6 + t1 * r7 + t2 * r8,
            t3 * r0 + t4 * r1 + t5 * r2, t3 * r3 + t4 * r4 + t5 * r5, t3 * r6 + t4 * r7 + t5 * r8,
            t6 * r0 + t7 * r1 + t8 * r2, t6 * r3 + t7 * r4 + t8 * r5, t6 * r6 + t7 * r7 + t8 * r8,
        ))  # fmt: skip
        return (target_p[0] - p[0], target_p[1] - p[1], target_p[2] - p[2], drx, dry, drz)

    def jacobian_columns(self, k: int) -> list[tuple[float, ...]]:
        """Per model column its 6-vector ``[linear (m/unit); angular (rad/unit)]`` for
        effector ``k``, world frame; zeros for columns off its path."""
        f = self._frames
        R, P, V = f.R, f.P, f.V
        px, py, pz = P[self._eff[k]]
        cols: list[tuple[float, ...]] = [(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)] * self.n
        for c in self._eff_cols[k]:
            kind, i, ax, axis = self._col_info[c]
            r = V[c] if kind == VIRTUAL else R[i]
            if ax >= 0:
                zx, zy, zz = r[ax], r[3 + ax], r[6 + ax]
            else:
                a0, a1, a2 = axis
                zx = r[0] * a0 + r[1] * a1 + r[2] * a2
                zy = r[3] * a0 + r[4] * a1 + r[5] * a2
                zz = r[6] * a0 + r[7] * a1 + r[8] * a2
            if kind == PRISMATIC:
                cols[c] = (zx, zy, zz, 0.0, 0.0, 0.0)
            else:
                jx, jy, jz = P[i]
                dx, dy, dz = px - jx, py - jy, pz - jz
                cols[c] = (zy * dz - zz * dy, zz * dx - zx * dz, zx * dy - zy * dx, zx, zy, zz)
        return cols

    def apply_scaled(self, dq: Sequence[float], alpha: float) -> None:
        """``q += alpha * dq`` per column, clipped to the current limits."""
        q, lo, hi = self.q, self.lo, self.hi
        for c in range(self.n):
            v = q[c] + alpha * dq[c]
            if v < lo[c]:
                v = lo[c]
            elif v > hi[c]:
                v = hi[c]
            q[c] = v
        self.touch()
        self._clipped = True

    def clip(self) -> None:
        """Clip every column into its current limits (a no-op when nothing changed)."""
        if not self._clipped:
            self.apply_scaled([0.0] * self.n, 0.0)

    # -- the protocol (numpy at the boundary) ------------------------------------------
    def reset(self) -> None:
        """T-pose: q = 0, identity quaternions, the skeleton's limits; FK."""
        self.q[:] = [0.0] * self.n
        self.lo[:] = self.lo0
        self.hi[:] = self.hi0
        self.quats[:] = [(1.0, 0.0, 0.0, 0.0)] * len(self.quats)
        self._fresh = self._clipped = False
        self.update()

    def effector_transform(self, k: int) -> Array:
        e = self._eff[k]
        r0, r1, r2, r3, r4, r5, r6, r7, r8 = self._frames.R[e]
        p0, p1, p2 = self._frames.P[e]
        return np.array([[r0, r1, r2, p0], [r3, r4, r5, p1], [r6, r7, r8, p2],
                         [0.0, 0.0, 0.0, 1.0]])  # fmt: skip

    def jacobian(self, k: int) -> Array:
        return np.array(self.jacobian_columns(k), dtype=float).reshape(self.n, 6).T

    def apply_delta(self, dq: Array) -> None:
        self.apply_scaled(np.asarray(dq, dtype=float).tolist(), 1.0)

    def limits(self) -> tuple[Array, Array]:
        return np.array(self.lo, dtype=float), np.array(self.hi, dtype=float)

    def increments(self) -> Array:
        return np.array(self.q, dtype=float)

    def save(self) -> object:
        return (self.q[:], self.lo[:], self.hi[:], self.quats[:])

    def restore(self, state: object) -> None:
        q, lo, hi, quats = cast(State, state)
        self.q[:] = q
        self.lo[:] = lo
        self.hi[:] = hi
        self.quats[:] = quats
        self._fresh = self._clipped = False

    def _node(self, skeleton: Skeleton, c: int) -> Any:
        name, k = self.column_joint[c]
        joint = skeleton.joints[name]
        return joint if k < 0 else joint.virtual_chain[k]  # type: ignore[attr-defined]

    def write_back(self, skeleton: Skeleton, fk: bool = True) -> None:
        """Copy q, quaternions and virtual limits into the joint objects, then FK (skipped
        when ``fk`` is False: joint values do not need it)."""
        for c in range(self.n):
            node = self._node(skeleton, c)
            node.q = self.q[c]
            if self._col_info[c][0] == VIRTUAL:
                lo, hi = self.lo[c], self.hi[c]
                node.limits = None if lo == -INF and hi == INF else (lo, hi)
        for s, name in enumerate(self.spherical_names):
            sp = skeleton.joints[name]
            sp.quaternion = np.array(self.quats[s], dtype=float)  # type: ignore[attr-defined]
            sp.virtual_fix.quaternion = sp.quaternion.copy()  # type: ignore[attr-defined]
        if fk:
            skeleton.update()

    def joint_values(self, state: object) -> dict[str, dict[str, Any]]:
        """SPEC 3.3 entries (radians, metres, ``[w, x, y, z]``) of the model's joints in a
        ``save()`` state, without FK: what ``write_back`` + ``Skeleton.joint_values`` give
        (increments at or above the sync threshold folded in). Joints off the effectors'
        paths are not included."""
        q, _, _, quats = cast(State, state)
        out: dict[str, dict[str, Any]] = {}
        for c, (name, k) in enumerate(self.column_joint):
            if k < 0:
                if self._col_info[c][0] == PRISMATIC:
                    out[name] = {"type": "prismatic", "displacement": q[c]}
                else:
                    out[name] = {"type": "revolute", "angle": q[c]}
        for s, name in enumerate(self.spherical_names):
            c1, c2, c3 = self.spherical_columns[s]
            a, b, g = q[c1], q[c2], q[c3]
            quat = quat_unit(quats[s])
            if max(abs(a), abs(b), abs(g)) >= SYNC_THRESHOLD:
                quat = quat_unit(quat_mul(quat, intrinsic_xyz(a, b, g)))
            out[name] = {"type": "spherical", "euler": list(euler_xyz_of(quat_mat(quat))),
                         "quaternion": list(quat)}
        return out

    def read_from(self, skeleton: Skeleton) -> None:
        """Take the state from the joint objects of ``skeleton`` (driven joints too)."""
        if self.driven_names:
            values = skeleton.joint_values()
            self.drive({name: values[name] for name in self.driven_names})
        for c in range(self.n):
            node = self._node(skeleton, c)
            self.q[c] = float(node.q)
            lim = node.limits
            self.lo[c], self.hi[c] = (-INF, INF) if lim is None else (float(lim[0]),
                                                                      float(lim[1]))
        for s, name in enumerate(self.spherical_names):
            quat = skeleton.joints[name].quaternion  # type: ignore[attr-defined]
            self.quats[s] = (float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3]))
        self._fresh = self._clipped = False


def _owner(node: JointNode) -> str:
    """The real joint a solver node belongs to (a virtual hinge's spherical joint)."""
    sp = node.spherical_parent
    return node.name if sp is None else sp.name


def _solver_nodes(joint: JointNode) -> list[JointNode]:
    """The 1-DoF solver nodes a joint adds to an IK chain (``append_to_ik_chain``)."""
    nodes: list[JointNode] = []
    joint.append_to_ik_chain(nodes)
    return nodes


