"""Blender's IK pole as one more task of the LM: one error row per pole.

A chain with a pole bends toward it: its bend point (the mean of the chain's joints
between the first and the effector) should lie in the half-plane that the line from the
chain's first joint to the target spans with the pole (turned by the pole angle about
that line). The row is the arc that the bend point must still swing about the line,
``|b| phi`` (m; ``b`` the bend point's offset from the line, ``phi`` the swivel angle
still asked for), over the chain's length scale like the position rows; its Jacobian is
the bend point's velocity along its swing direction. Where the chain is straight
(``|b| -> 0``) the row fades out with the angle's meaning. World frame; metres, radians.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..kinematics import BatchedKinematics

Array = NDArray[np.float64]


def pole_points(chains: Sequence[Sequence[str]], effectors: Sequence[int]) -> list[str]:
    """The joints a model must give positions of (its ``points``) for poles on the chains
    of ``effectors`` (indices; ``chains`` root first): each chain's first joint and its
    bend joints, once each."""
    out: list[str] = []
    for k in effectors:
        chain = list(chains[k])
        for name in chain[:1] + chain[1:-1]:
            if name not in out:
                out.append(name)
    return out


@dataclass
class PoleSet:
    """The poles of a batch: per pole the effector index, the pole's world position per
    problem (B, P, 3) (m) and its angle (P,) (rad) about the first-joint-to-target line;
    the model's points (indices into ``model.points``) of each chain's first joint and
    bend joints."""

    effectors: list[int]
    position: Array  # (B, P, 3)
    angle: Array  # (P,)
    first: list[int]
    bends: list[list[int]]

    @classmethod
    def build(cls, model: BatchedKinematics, effectors: Sequence[int], position: Array,
              angle: Sequence[float]) -> PoleSet:  # fmt: skip
        """Poles on ``effectors``' chains of ``model`` (built with
        ``points=pole_points(...)``), ``position`` (B, P, 3) world (m), ``angle`` (P,) rad."""
        index = {name: i for i, name in enumerate(model.points)}
        first, bends = [], []
        for k in effectors:
            chain = model.chains[k]
            if len(chain) < 3:
                raise ValueError(f"a pole needs a chain of 3 joints or more (effector {k})")
            first.append(index[chain[0]])
            bends.append([index[name] for name in chain[1:-1]])
        pos = np.asarray(position, dtype=float).reshape(-1, len(effectors), 3)
        return cls(list(effectors), pos, np.asarray(angle, dtype=float).reshape(-1),
                   first, bends)

    def frames(self, rows: slice | NDArray[np.intp]) -> PoleSet:
        """The same poles for problems ``rows`` only (positions given per problem)."""
        pos = self.position if len(self.position) == 1 else self.position[rows]
        return PoleSet(self.effectors, pos, self.angle, self.first, self.bends)

    def positions(self, count: int) -> Array:
        """The poles' positions batch last (P, 3, B)."""
        pos = np.broadcast_to(self.position, (count, len(self.effectors), 3))
        return np.ascontiguousarray(pos.transpose(1, 2, 0))

    def rows(self, model: BatchedKinematics, target_pos: Array, pole_pos: Array,
             pos: Array, jac: Array | None, scale: float
             ) -> tuple[Array, Array | None, Array]:  # fmt: skip
        """Per pole the residual row (P, k) (arc over ``scale``), its Jacobian (P, c, k)
        (None without ``jac``) and the arc itself (P, k) (m). ``target_pos`` (m, 3, k)
        and ``pole_pos`` (P, 3, k) are the rows' targets and poles, ``pos`` (m + points,
        3, k) and ``jac`` (m + points, 6, c, k) the model's pose and Jacobian (of c
        columns)."""
        m = len(model.effectors)
        k = pos.shape[-1]
        count = len(self.effectors)
        e = np.zeros((count, k))
        arc = np.zeros((count, k))
        pj = None if jac is None else np.zeros((count, jac.shape[2], k))
        for p, (eff, first, bends) in enumerate(zip(self.effectors, self.first, self.bends,
                                                    strict=True)):
            r0 = pos[m + first]
            u = target_pos[eff] - r0
            u /= np.maximum(np.sqrt(np.einsum("ik,ik->k", u, u)), 1e-12)
            bend = np.mean(pos[[m + b for b in bends]], axis=0)
            bp = _perp(bend - r0, u)
            pp = _perp(pole_pos[p] - r0, u)
            nb = np.sqrt(np.einsum("ik,ik->k", bp, bp))
            npp = np.sqrt(np.einsum("ik,ik->k", pp, pp))
            ca, sa = np.cos(self.angle[p]), np.sin(self.angle[p])
            want = ca * pp + sa * _cross(u, pp)
            phi = np.arctan2(np.einsum("ik,ik->k", u, _cross(bp, want)),
                             np.einsum("ik,ik->k", bp, want))
            live = (nb > 1e-9) & (npp > 1e-9)  # a direction to turn to
            phi = np.where(live, phi, 0.0)
            arc[p] = nb * np.abs(phi)
            e[p] = nb * phi / scale
            if pj is not None and jac is not None:
                swing = _cross(u, bp) / np.maximum(nb, 1e-12)  # (3, k)
                jb = np.mean(jac[[m + b for b in bends], :3], axis=0)  # (3, n, k)
                pj[p] = np.einsum("ik,ink->nk", swing, jb) * np.where(live, 1.0 / scale, 0.0)
        return e, pj, arc


def _cross(a: Array, b: Array) -> Array:
    """``a x b`` of (3, k) arrays (numpy's ``cross`` costs ten times more calls)."""
    return np.stack((a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]))


def _perp(v: Array, u: Array) -> Array:
    """``v`` (3, k) without its part along the unit ``u`` (3, k)."""
    return v - np.einsum("ik,ik->k", v, u) * u
