"""The robust method's options, results and effector weights (dimensionless unless noted)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..settings import SolveResult

Weight = tuple[float, float]  # (position weight, orientation weight), >= 0

GROW = 10.0  # damping factor after a rejected step
SHRINK = 0.5  # damping factor after an accepted step
MAX_MULTIPLIER = 1e8  # beyond this damping multiplier the search has stalled
STALL_WINDOW = 8  # iterations over which a search must make progress...
STALL_RATIO = 0.9  # ...by lowering the largest normalised error below this fraction
INTERIOR = 0.2  # a cold solve's first restart starts this far from mid-range (of half)
# random restarts draw within +-RESTART_WINDOW * (pi rad, or the chain's reach in m) of the
# coordinate when its box is wider than that (limits of +-1e100 m are no place to look)
RESTART_WINDOW = 4.0


@dataclass(frozen=True)
class RobustOptions:
    """Knobs of the robust method beyond :class:`SolverSettings` (dimensionless)."""

    damping: float = 0.1  # Chan: W = damping * E + damping_floor
    damping_floor: float = 1e-10
    max_restarts: int = 100  # random restarts of a cold solve after its first search
    restart_iterations: int = 30  # iteration budget of each restart
    posture: float = 0.3  # with ``previous``: gain of the null-space pull to mid-range
    track_posture: float = 0.1  # trajectories: fraction of the way to mid-range per frame
    rate: float = 0.5  # that pull's largest move relative to the step's largest
    seed: int = 0  # of numpy.random.default_rng when no rng is passed
    candidates: int = 16  # trajectories: restarts tried to bridge a lost frame
    probe_restarts: int = 20  # trajectories: restarts deciding a frame is unreachable
    lookahead: int = 60  # trajectories: frames a bridging candidate must survive
    lookback: int = 300  # trajectories: frames a bridging candidate is tracked each way
    bridges: int = 10  # trajectories: flips repaired at most (0: none; see Tracker)
    bridge_candidates: int = 8  # trajectories: solutions tried per flip repaired
    # trajectories: frames tracked and repaired at a time (``bridges`` flips each); a
    # longer bake is handed on window by window, so memory does not grow with its length
    window: int = 20_000


@dataclass
class RobustResult(SolveResult):
    """A :class:`SolveResult` with the restarts used and each effector's errors (m, rad).

    ``position_error`` / ``orientation_error`` are the maxima over the effectors whose
    position / orientation counts (weight > 0); ``effector_errors`` holds every
    effector's actual ``(position_error, orientation_error)``, ignored parts included.
    """

    restarts: int = 0
    effector_errors: list[tuple[float, float]] = field(default_factory=list)


def checked_weights(weights: Sequence[Weight] | None, count: int) -> list[tuple[float, float]]:
    """One ``(position, orientation)`` weight pair per effector (default 1, 1); ValueError
    unless there are ``count`` pairs of finite weights >= 0."""
    out = [(1.0, 1.0)] * count if weights is None else [
        (float(wp), float(wr)) for wp, wr in weights]
    if len(out) != count:
        raise ValueError(f"need one weight pair per effector ({count})")
    if any(not (w >= 0.0 and math.isfinite(w)) for pair in out for w in pair):
        raise ValueError("weights must be finite and >= 0")
    return out


