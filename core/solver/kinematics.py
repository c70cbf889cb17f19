"""The kinematics protocol (docs/architecture.md) and its reference implementation.

A ``Kinematics`` model is what the fast spec solver and the robust solver iterate on:
columns are the 1-DoF solver nodes of the effectors' IK chains (spherical joints as
their three virtual hinges), the state is every column value, spherical quaternion and
shifted virtual limit. Frames: world. Units: metres and radians (prismatic columns in
metres, the rest in radians).

``ObjectKinematics`` implements the protocol directly on the joint objects of a
``Skeleton``: slow, obviously right, and the reference the compiled model is tested
against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]

# column and joint kinds of a compiled model (``CoordinateModel.column_kinds``) and of
# the robust engine's joint space (``BatchedKinematics.kinds``: REVOLUTE, PRISMATIC, or
# ROTVEC, a coordinate of an unlimited spherical joint's rotation vector)
FIXED, REVOLUTE, PRISMATIC, SPHERICAL, VIRTUAL, ROTVEC = 0, 1, 2, 3, 4, 5


@runtime_checkable
class Kinematics(Protocol):
    """What a solver needs from a model (world frame; metres, radians)."""

    names: list[str]  # one per column, union of the effectors' chains, root first
    effectors: list[str]
    n: int

    def reset(self) -> None:
        """T-pose (as ``Skeleton.reset``), FK current."""

    def update(self) -> None:
        """FK; folds spherical increments as ``SphericalJoint.update_global_transform``."""

    def effector_transform(self, k: int) -> Array:
        """(4,4) world transform of effector ``k`` (metres)."""
        ...

    def jacobian(self, k: int) -> Array:
        """(6, n) world Jacobian of effector ``k``: rows linear (m/unit), angular (rad/unit)."""
        ...

    def apply_delta(self, dq: Array) -> None:
        """Per column: ``q += d``, clipped to the current limits."""

    def limits(self) -> tuple[Array, Array]:
        """Current (shifted) lower and upper limits per column; -inf/+inf when none."""
        ...

    def increments(self) -> Array:
        """Current column values (virtual columns are increments since the last fold)."""
        ...

    def save(self) -> object:
        """Snapshot of every q, spherical quaternion and shifted limit."""
        ...

    def restore(self, state: object) -> None:
        """Put back a ``save()`` (call ``update()`` afterwards)."""

    def write_back(self, skeleton: Any) -> None:
        """Copy the state into the joint objects of ``skeleton`` and run its FK."""

    def read_from(self, skeleton: Any) -> None:
        """Take the state from the joint objects of ``skeleton``."""


@runtime_checkable
class FloatKinematics(Kinematics, Protocol):
    """A model that also runs on plain floats (the compiled model): no numpy per step."""

    def pose_error(self, k: int, target_r: Any, target_p: Any) -> tuple[float, ...]:
        """Effector ``k``'s error ``(dp, dr)`` (world; m, rad) against a row-major target
        rotation and position."""
        ...

    def jacobian_columns(self, k: int) -> list[tuple[float, ...]]:
        """Effector ``k``'s Jacobian as one 6-tuple per column (world)."""
        ...

    def apply_scaled(self, dq: Any, alpha: float) -> None:
        """``q += alpha * dq`` per column, clipped to the current limits."""

    def clip(self) -> None:
        """Clip every column into its current limits."""


@runtime_checkable
class CoordinateModel(FloatKinematics, Protocol):
    """A float model whose coordinate chart is public: what the robust engine works on.

    Per column: ``q`` (rad, m, or a spherical increment in rad), current limits ``lo`` /
    ``hi`` (shifted for VIRTUAL columns), the skeleton's limits ``lo0`` / ``hi0`` (+-inf
    when none), ``column_kinds`` (REVOLUTE, PRISMATIC or VIRTUAL) and ``column_joint``
    (owning joint name, virtual index or -1). Per spherical joint: ``quats``
    ``(w, x, y, z)`` relative to its parent's frame and its ``spherical_names``. Lists are
    written in place, then ``touch()`` and ``update()`` run FK.
    """

    q: list[float]
    lo: list[float]
    hi: list[float]
    lo0: list[float]
    hi0: list[float]
    quats: list[tuple[float, float, float, float]]
    column_kinds: list[int]
    column_joint: list[tuple[str, int]]
    spherical_names: list[str]

    chains: list[list[str]]  # per effector: the joints its solve moves, root first

    def touch(self) -> None:
        """The state lists were written in place: the next ``update()`` runs FK."""

    def drive(self, values: Mapping[str, Mapping[str, Any]]) -> None:
        """Set the joints on the paths that no chain solves (SPEC 3.3 entries)."""

    def joint_position(self, name: str) -> tuple[float, float, float]:
        """World position (m) of a joint on the effectors' paths."""
        ...

    def point_columns(self, name: str) -> list[tuple[float, float, float]]:
        """Per column the world velocity (m per rad or m) of that joint's position."""
        ...


@dataclass(frozen=True)
class Pole:
    """Blender's IK pole for one effector's chain: the chain bends toward ``position``
    (world, m), turned by ``angle`` (rad) about the line from the chain's first joint to
    the target. A lower-priority objective: it moves the chain only in the null space of
    the targets."""

    position: tuple[float, float, float]
    angle: float = 0.0


class FrameTargets(list[Any]):
    """One frame's world 4x4 targets, one per effector (a list), with what else the frame
    sets: ``driven`` joint values (SPEC 3.3 entries by joint name: joints on the paths
    outside the solved chains, e.g. an animated spine) and ``poles`` (a :class:`Pole` or
    None per effector)."""

    def __init__(self, targets: Iterable[Any],
                 driven: Mapping[str, Mapping[str, Any]] | None = None,
                 poles: Sequence[Pole | None] | None = None) -> None:
        super().__init__(targets)
        self.driven = driven
        self.poles = poles


class BatchedKinematics(Protocol):
    """What the robust engine needs from a model (``model.joint_space.BatchedModel``):
    FK and Jacobians of many coordinate rows at once, batch last, and the configuration
    space's operations. World frame; metres, radians."""

    n: int  # columns
    effectors: list[str]
    points: list[str]  # joints whose positions follow the effectors' in pose_t
    chains: list[list[str]]  # per effector: the joints its solve moves, root first
    kinds: NDArray[np.int_]  # REVOLUTE, PRISMATIC or ROTVEC per column
    lo: Array  # limits per column (rad or m), +-inf when none
    hi: Array
    held: NDArray[np.bool_]  # columns whose values come from outside (per problem)
    wraps: NDArray[np.bool_]  # hinge angles without limits (their value modulo a turn)
    rotvec_starts: NDArray[np.int_]  # first column of each rotation vector (ROTVEC triple)

    def pose_t(self, q: Array) -> tuple[Array, Array]:
        """``q`` (n, k) -> effector (then point) world rotations (m, 3, 3, k) and
        positions (m, 3, k) (m)."""
        ...

    def pose_jacobian_t(self, q: Array) -> tuple[Array, Array, Array]:
        """``pose_t(q)`` and the world Jacobian (m, 6, n, k), rows ``[linear (m/unit);
        angular (rad/unit)]``."""
        ...

    def reach_t(self, q: Array) -> tuple[Array, Array]:
        """Per effector the centre (m, 3, k) (world) and radius (m,) of a ball it cannot
        leave whatever the solved columns do (held columns from ``q`` (n, k))."""
        ...

    def recentre(self, q: Array) -> Array:
        """``q`` (n, k) with every chart kept away from its singularity (same poses)."""
        ...

    def nearest(self, ref: Array, q: Array) -> Array:
        """Rows ``q`` (k, n) as the same poses' coordinates nearest ``ref``."""
        ...

    def difference(self, a: Array, b: Array) -> Array:
        """Per column the motion from rows ``a`` to rows ``b`` (k, n), the nearest way."""
        ...
