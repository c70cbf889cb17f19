"""FK of a few rows of coordinates, batch first: one ``matmul`` per step.

``BatchedModel._forward`` (joint_space) runs batch-last on many rows, where fewer passes
over smaller arrays win; on a few rows (a chained coarse frame, a preview's drag)
numpy's cost per call dominates, and here every step of the chain is one ``matmul`` of
small tables (:class:`RowsPlan`, built once per model). Both give the same FK and axes
(tests/core/test_joint_space.py). Frames: world; units: metres, radians.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..solver.kinematics import PRISMATIC, REVOLUTE
from .charts import rotvec_matrices

if TYPE_CHECKING:
    from collections.abc import Sequence

Array = NDArray[np.float64]

AXES = np.eye(3)
FEW_ROWS = 32  # a chain's FK runs batch first up to this many rows (RowsPlan.few_rows)
WIDTH = {"revolute": 1, "prismatic": 1, "spherical": 3}  # columns per joint type


def rodrigues_parts(axis: Array) -> tuple[Array, Array, Array]:
    """``(E0, EC, ES)`` with ``R(q) = E0 + cos(q) EC + sin(q) ES`` about the unit ``axis``."""
    k = np.cross(AXES, axis)  # [axis]x: row i is e_i x axis
    k2 = k @ k
    return np.eye(3) + k2, -k2, k


class RowsPlan:
    """The tables of :func:`forward_rows`: a slot per step (a boxed spherical
    joint's angles: three hinge slots), each a local transform ``[L t; 0 1]`` on its parent
    slot kept transposed, with its columns' axes ``A`` (parent's frame) as three more
    rows, ``[L^T 0; t^T 1; A^T 0]`` (7, 4), at zero coordinates.

    Folded (``prefix`` given): the steps of the held prefix (``prefix`` per step) get no
    slot; the ``anchors`` (prefix steps the rest hangs from, or an output) take their world
    frames from outside (``forward_rows``' ``base``), and the prefix's columns get zero
    axes. The world table holds the slots, then the anchors, a zero slot and the world."""

    def __init__(self, steps: Sequence[Any], n: int, effector_steps: Sequence[int],
                 kinds: NDArray[np.int_], rotvec_starts: NDArray[np.int_],
                 wraps: NDArray[np.bool_], prefix: Sequence[bool] | None = None,
                 anchors: Sequence[int] = ()) -> None:  # fmt: skip
        """From a model's FK steps (``fk_columns.Step``), its ``n`` columns, the steps of
        its effectors (and points), its columns' kinds, its rotation vectors' first
        columns and its wrapping hinge columns; folded: per step whether it is in the
        held prefix, and the prefix steps given from outside (class docstring)."""
        folded = [False] * len(steps) if prefix is None else list(prefix)
        n_slots = sum(3 if st.kind == "spherical" and not st.rotvec else 1
                      for st, out in zip(steps, folded, strict=True) if not out)
        anchor_slot = {a: n_slots + j for j, a in enumerate(anchors)}
        self.anchors = len(anchors)
        self.zero_slot = n_slots + len(anchors)  # zero axes and origins (folded columns)
        self.parents: list[int] = []  # per slot
        tables: list[Array] = []  # per slot
        step_slot: list[int] = []  # per step: its last slot (an anchor's; -1: none)
        self.col_slot = np.full(n, self.zero_slot)  # per column: its slot
        for st in steps:
            if folded[st.i]:
                step_slot.append(anchor_slot.get(st.i, -1))
                continue
            parent = -1 if st.parent < 0 else step_slot[st.parent]
            boxed = st.kind == "spherical" and not st.rotvec
            for j in range(3 if boxed else 1):
                table = np.eye(7, 4)  # a boxed joint's offset on its first slot
                table[3, :3] = st.offset if j == 0 else 0.0
                table[:3, :3] = st.rot.T if st.rot is not None else np.eye(3)
                axis = AXES[j] if boxed else st.axis
                table[4, :3] = axis if axis is not None else 0.0
                if st.col >= 0:
                    cols = slice(st.col + j, st.col + (j + 1 if boxed else WIDTH[st.kind]))
                    self.col_slot[cols] = len(tables)
                self.parents.append(parent)
                parent = len(tables)
                tables.append(table)
            step_slot.append(parent)
        # slots by depth (a stable sort): a level's slots are contiguous, and a level of
        # several limbs is one matmul (levels: (first, end, parents))
        depth: list[int] = []
        for p in self.parents:
            depth.append(0 if p < 0 or p >= n_slots else depth[p] + 1)
        order = sorted(range(n_slots), key=depth.__getitem__)
        new_of = {old: new for new, old in enumerate(order)}

        def moved(slot: int) -> int:  # anchors, the zero slot and the world (-1) stay
            return new_of.get(slot, slot)

        self.parents = [moved(self.parents[old]) for old in order]
        tables = [tables[old] for old in order]
        self.col_slot = np.array([moved(int(c)) for c in self.col_slot], dtype=int)
        step_slot = [moved(slot) for slot in step_slot]
        self.levels: list[tuple[int, int, NDArray[np.int_]]] = []
        for d in sorted(set(depth)):
            at = [i for i, old in enumerate(order) if depth[old] == d]
            self.levels.append((at[0], at[-1] + 1, np.array(self.parents[at[0]:at[-1] + 1])))
        self.template = np.array(tables).reshape(-1, 7, 4)  # (S, 7, 4)
        # the rows up to which this layout beats the batch-last one: 32 for a chain
        # (one slot a level), more where a level holds several limbs, by breadth^1.5
        # (measured: the quadruped's and the human's four limbs, breadth 4, 0.6-0.8x the
        # batch-last time at 148 rows, 1.1-1.3x at 400)
        breadth = max(1.0, n_slots / max(len(self.levels), 1))
        self.few_rows = int(FEW_ROWS * breadth ** 1.5)
        self.anchor_slots = np.array([step_slot[a] for a in anchors], dtype=int)
        self.eff_slots = np.array(step_slot, dtype=int)[list(effector_steps)]
        slotted = self.col_slot != self.zero_slot
        # hinges (a boxed joint's angles too), sliders, rotation vectors: columns, slots
        self.hinge_cols = np.flatnonzero((kinds == REVOLUTE) & slotted)
        self.hinge_slots = self.col_slot[self.hinge_cols]
        self.hinge_parts = np.array([[m.T for m in rodrigues_parts(a)] for a in
                                     self.template[self.hinge_slots, 4, :3]]).reshape(-1, 3, 9)
        self.slide_cols = np.flatnonzero((kinds == PRISMATIC) & slotted)
        self.slide_slots = self.col_slot[self.slide_cols]
        starts = rotvec_starts[slotted[rotvec_starts]]
        self.rotvec_cols = starts + np.arange(3)[:, None]  # (3, J)
        self.rotvec_slots = self.col_slot[starts]
        self.col_row = np.full(n, 4)  # per column: its axis' row in its slot's table
        self.col_row[self.rotvec_cols] = np.arange(4, 7)[:, None]
        self.wrap_cols = np.flatnonzero(wraps)


def forward_rows(plan: RowsPlan, q: Array, columns: bool, base: Array | None = None
             ) -> tuple[Array, Array, Array | None, Array | None]:  # fmt: skip
    """``BatchedModel._forward`` batch-first, for few rows ``q`` (n, k): per slot
    (:class:`RowsPlan`) its local table (k, 7, 4) times its parent's world
    ``[R^T; p^T]`` (k, 4, 3), one ``matmul`` a slot, gives the slot's ``[R^T; p^T]``
    and its columns' world axes (``R_parent A``) as rows (k, 7, 3). ``base`` (A, 3, 4, k):
    a folded plan's anchors' world ``[R p]`` (m)."""
    k = q.shape[1]
    local = np.empty((len(plan.parents), k, 7, 4))
    local[:] = plan.template[:, None]
    if plan.hinge_slots.size:  # L = E0 + cos EC + sin ES
        ang = q[plan.hinge_cols]
        trig = np.stack((np.ones_like(ang), np.cos(ang), np.sin(ang)), axis=-1)
        local[plan.hinge_slots, :, :3, :3] = (trig @ plan.hinge_parts).reshape(*ang.shape, 3, 3)
    if plan.slide_slots.size:  # the offset, then the slide along the axis
        local[plan.slide_slots, :, 3, :3] += \
            plan.template[plan.slide_slots, None, 4, :3] * q[plan.slide_cols][:, :, None]
    if plan.rotvec_slots.size:  # the rotation, and its left Jacobian's columns as axes
        rot, left = rotvec_matrices(q[plan.rotvec_cols], columns)  # (3, 3, J, k)
        local[plan.rotvec_slots, :, :3, :3] = rot.transpose(2, 3, 1, 0)
        if left is not None:
            local[plan.rotvec_slots, :, 4:, :3] = left.transpose(2, 3, 1, 0)
    world = np.empty((plan.zero_slot + 2, k, 7, 3))
    world[-1, :, :4] = np.eye(4, 3)  # slot -1: the world frame
    if plan.anchors:
        assert base is not None
        world[plan.anchor_slots, :, :4] = base.transpose(0, 3, 2, 1)
        if columns:
            world[plan.zero_slot] = 0.0
    for a, b, parents in plan.levels:  # a level's slots at once (several limbs)
        if b - a == 1:
            np.matmul(local[a], world[parents[0], :, :4], out=world[a])
        else:
            np.matmul(local[a:b], world[parents, :, :4], out=world[a:b])
    eff = world[plan.eff_slots].transpose(0, 3, 2, 1).copy()  # (m, 3, 7, k): [R p A]
    rot, pos = eff[:, :, :3], eff[:, :, 3]
    if not columns:
        return rot, pos, None, None
    axes = world[plan.col_slot, :, plan.col_row].transpose(0, 2, 1).copy()
    return rot, pos, axes, world[plan.col_slot, :, 3].transpose(0, 2, 1).copy()
