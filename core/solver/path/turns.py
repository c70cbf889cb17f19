"""Hinges whose limits span more than a turn (a robot's +-2 pi joints): a path searched
with them free, modulo a turn, then moved back within their limits by whole turns.

Within such limits most angles have two values a turn apart, and for the search each is
a branch of its own: a track that runs into a limit dies there while the same pose a
turn away would go on, and a chain without redundancy has twice the branches per such
hinge (UR5 from example-robot-data, six hinges, five of them +-2 pi: up to 256 where the
same arm with +-pi limits has 8). Searched within those limits, UR5's smooth
1,000-frame clips (seeds 0-9, the CLI's tolerances) all stepped 95-143x the largest step
of the joint path that made their targets, and xarm7's (four hinges of +-2 pi) 12-52x.

Searched free (``BatchedKinematics.with_turns_free``: no limits, values modulo a turn,
as for a hinge without limits), the path is continuous modulo a turn; unwrapped, each
such hinge's path is moved by the whole number of turns that puts it within its limits,
nearest their middle. Where no whole number does (the path winds further than the
limits allow) the path is searched again within the limits, as before. Where the path
must start or end at given poses (``solve_path``'s ``start``, ``before``, ``after``) it
is kept only where it is within the limits unmoved. Angles rad.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from ..kinematics import BatchedKinematics

Array = NDArray[np.float64]

TURN = 2.0 * math.pi
# limits this much wider than a turn are a turn and more (+-pi, a whole turn exactly,
# has one value per angle: there the limits themselves forbid the way across)
SLACK = 1e-6


def wide_hinges(model: BatchedKinematics) -> NDArray[np.bool_]:
    """Per column: a solved revolute joint whose limits span more than a turn."""
    ranged = model.hinges & ~model.held & ~model.wraps  # wraps: already modulo a turn
    span = np.where(ranged, model.hi, 0.0) - np.where(ranged, model.lo, 0.0)
    return ranged & (span > TURN + SLACK)


def within_limits(model: BatchedKinematics, q: Array, cols: NDArray[np.bool_],
                  keep_turns: bool) -> Array | None:  # fmt: skip
    """``q`` (F, n) with each of the columns ``cols`` made continuous (each step the
    nearest way, whole turns added: the same poses) and moved by the whole number of
    turns that puts its path within its limits, nearest their middle (``keep_turns``: by
    none); None where no whole number does (rad)."""
    out = q.copy()
    if len(q) == 0:
        return out
    out[:, cols] = np.unwrap(q[:, cols], axis=0)
    for c in np.flatnonzero(cols):
        low, high = float(out[:, c].min()), float(out[:, c].max())
        first = math.ceil((model.lo[c] - low) / TURN - 1e-9)  # the fewest turns that fit
        last = math.floor((model.hi[c] - high) / TURN + 1e-9)  # ... and the most
        if first > last or (keep_turns and not first <= 0 <= last):
            return None
        middle = 0.5 * (model.lo[c] + model.hi[c]) - 0.5 * (low + high)
        turns = 0 if keep_turns else min(max(round(middle / TURN), first), last)
        out[:, c] = np.clip(out[:, c] + turns * TURN, model.lo[c], model.hi[c])
    return out
