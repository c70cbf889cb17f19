"""FK of many rows of coordinates, batch last: a rotation kept as its three columns.

``BatchedModel._forward`` (joint_space) runs this on many rows, where fewer passes over
smaller arrays win (``fk_rows`` on a few). A rotation is three columns (3, k each): a
turn about a coordinate axis rewrites two of them and shares the third. Frames: world;
units: metres, radians.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .charts import rotvec_matrices
from .fk_rows import AXES

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Step:
    """One FK step: path joint ``i`` below ``parent`` (-1: world), of ``kind``."""

    i: int
    parent: int
    kind: str  # "fixed", "revolute", "prismatic", "spherical"
    offset: Array
    col: int  # first coordinate column, -1 for fixed joints
    axis: Array | None  # unit axis (revolute, prismatic)
    rot: Array | None  # fixed rotation (fixed joints), None for identity
    rotvec: bool = False  # a spherical joint without limits: a rotation-vector chart


def forward_columns(model: Any, q: Array, columns: bool, base: Array | None,
                    outputs: list[int]) -> tuple[Array, Array, Array | None, Array | None]:
    """``BatchedModel._forward`` batch last (``model``: the ``BatchedModel``, whose FK
    tables it reads): ``q`` (n, k) -> the rotations (o, 3, 3, k)
    and positions (o, 3, k) of steps ``outputs``, and (``columns``) each column's world
    axis and origin (n, 3, k). ``base`` (A, 3, 4, k): the model's anchors' frames, the
    held prefix folded (its columns' axes and origins zero), or None."""
    k = q.shape[1]
    fold = base is not None
    rots: list[Cols] = []
    poss: list[Array] = []
    axes = np.empty((model.n, 3, k)) if columns else None
    origins = np.empty((model.n, 3, k)) if columns else None
    if fold and columns and model.prefix_cols.size:
        axes[model.prefix_cols] = 0.0  # type: ignore[index]
        origins[model.prefix_cols] = 0.0  # type: ignore[index]
    ident: Cols = (AXES[:, 0, None], AXES[:, 1, None], AXES[:, 2, None])
    zero = np.zeros((3, 1))
    # every rotation vector's matrix (and left Jacobian) at once: (3, 3, J, k)
    starts = model._moving_rotvecs if fold else model.rotvec_starts
    rv_index = {int(c): j for j, c in enumerate(starts)}
    rv_local = rv_left = None
    if rv_index:
        rv_local, rv_left = rotvec_matrices(q[starts + np.arange(3)[:, None]], columns)
    # every hinge's cosine and sine in two calls (other rows unused)
    if model._any_trig:
        ang = q if model._angle_rows.all() else np.where(model._angle_rows[:, None], q, 0.0)
        cq, sq = np.cos(ang), np.sin(ang)
    for st in model._steps:
        if fold and model._prefix[st.i]:  # the anchors' frames given, the rest unused
            a = model._anchor_of.get(st.i)
            b = ident, zero
            if a is not None:
                assert base is not None
                b = (base[a, :, 0], base[a, :, 1], base[a, :, 2]), base[a, :, 3]
            rots.append(b[0])
            poss.append(b[1])
            continue
        rp = ident if st.parent < 0 else rots[st.parent]
        p = zero if st.parent < 0 else poss[st.parent]
        for j in range(3):
            if st.offset[j] != 0.0:
                p = p + rp[j] * st.offset[j]
        if st.kind == "fixed":
            r = rp if st.rot is None else mix(rp, st.rot)
        elif st.kind == "revolute":
            c = st.col
            if columns:
                axes[c] = combine(rp, st.axis)  # type: ignore[index]
                origins[c] = p  # type: ignore[index]
            r = _turn(model, rp, st, cq[c], sq[c])
        elif st.kind == "prismatic":
            r = rp
            w = combine(rp, st.axis)  # the axis in the world
            p = p + w * q[st.col]
            if columns:
                axes[st.col] = w  # type: ignore[index]
                origins[st.col] = p  # type: ignore[index]
        elif st.rotvec:  # R = exp([v]x), v the joint's three coordinates
            j = rv_index[st.col]
            assert rv_local is not None
            stacked = np.stack(np.broadcast_arrays(*rp))  # (3 columns, 3, k)
            r = tuple(np.einsum("ick,ijk->jck", stacked, rv_local[:, :, j]))
            if columns:
                assert rv_left is not None
                axes[st.col:st.col + 3] = np.einsum("ick,ijk->jck", stacked, rv_left[:, :, j])  # type: ignore[index]
                origins[st.col:st.col + 3] = p  # type: ignore[index]
        else:  # spherical in a box: Rx(a) Ry(b) Rz(c)
            r = rp
            for j in range(3):
                c = st.col + j
                if columns:
                    axes[c] = r[j]  # type: ignore[index]
                    origins[c] = p  # type: ignore[index]
                r = coordinate_turn(r, j, cq[c], sq[c])
        rots.append(r)
        poss.append(p)
    rot = np.empty((len(outputs), 3, 3, k))
    pos = np.empty((len(outputs), 3, k))
    for e, i in enumerate(outputs):
        for j in range(3):
            rot[e, :, j] = rots[i][j]
        pos[e] = poss[i]
    return rot, pos, axes, origins



def _turn(model: Any, rp: Cols, st: Step, c: Array, s: Array) -> Cols:
    """``rp @ R_axis(v)`` for a revolute step, as columns, from ``c = cos v`` and
    ``s = sin v`` (k,)."""
    j = model._coord_axis.get(st.i, -1)
    if j >= 0:
        assert st.axis is not None
        return coordinate_turn(rp, j, c, s if st.axis[j] > 0 else -s)
    e0, ec, es = model._parts[st.i]
    local = e0[:, :, None] + ec[:, :, None] * c + es[:, :, None] * s
    return mix(rp, local)


_MIX = {0: (1, 2), 1: (2, 0), 2: (0, 1)}  # columns a turn about X, Y, Z mixes


Cols = tuple[Array, Array, Array]  # a rotation's three columns, (3, k) or (3, 1) each


def coordinate_turn(rp: Cols, axis: int, c: Array, s: Array) -> Cols:
    """``rp @ R_axis(v)`` for a coordinate axis (0, 1, 2), as columns (batch last), from
    ``c = cos v`` and ``s = sin v`` (k,)."""
    a, b = _MIX[axis]
    ca, cb = rp[a], rp[b]
    out = list(rp)
    out[a] = ca * c + cb * s
    out[b] = cb * c - ca * s
    return out[0], out[1], out[2]


def combine(rp: Cols, v: Array | None) -> Array:
    """``rp @ v`` (3, k) for a constant (3,) (zero terms skipped) or per-row (3, k) ``v``."""
    assert v is not None
    acc = None
    for i in range(3):
        if v.ndim == 1 and v[i] == 0.0:
            continue
        term = rp[i] if v.ndim == 1 and v[i] == 1.0 else rp[i] * v[i]
        acc = term if acc is None else acc + term
    return np.zeros((3, 1)) if acc is None else acc


def mix(rp: Cols, m: Array) -> Cols:
    """``rp @ m`` as columns, for a constant (3, 3) or per-row (3, 3, k) ``m``."""
    return combine(rp, m[:, 0]), combine(rp, m[:, 1]), combine(rp, m[:, 2])
