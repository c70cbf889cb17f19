"""The solver's settings (SPEC 5.4 defaults) and the outcome of one solve."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class SolveResult:
    """Outcome of one solve: steps applied and the final errors (m, rad)."""

    converged: bool
    iterations: int
    position_error: float
    orientation_error: float



@dataclass(frozen=True)
class SolverSettings:
    """The tunable arguments of :func:`solve_ik`, with SPEC 5.4's defaults."""

    max_iterations: int = 100
    position_tolerance: float = 1e-3  # metres
    orientation_tolerance: float = 1e-1  # radians
    damping: float = 0.0001
    enable_line_search: bool = True
    line_search_alpha: float = 1.0
    line_search_alpha_min: float = 1e-2

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`solve` / :func:`solve_ik`."""
        return asdict(self)


@dataclass(frozen=True)
class RobustOptions:
    """The robust method's knobs beyond :class:`SolverSettings` (whose tolerances and
    ``max_iterations`` it shares; its ``damping`` and line search are the spec method's).
    Every field acts on some robust solve: the LM fields on all of them, the others on
    trajectories (bakes and the preview's plan). Dimensionless unless noted."""

    # the LM (solver/lm): Chan damping W = mult * (lm_damping * E + lm_damping_floor), its
    # own (SolverSettings.damping is SPEC 5.4's, which the spec method alone reads)
    lm_damping: float = 0.1
    lm_damping_floor: float = 1e-9
    # a search whose error has not fallen below stall_ratio of itself in stall_window
    # iterations has stalled (a cold solve restarts it, a track lets it die)
    stall_window: int = 4
    stall_ratio: float = 0.5
    restarts: int = 8  # rounds of random restarts of the unconverged problems
    restart_rows: int = 8  # random starts per unconverged problem and round
    restart_iterations: int = 40  # budget of each restart
    seed: int = 0  # of every random draw (restarts, seeds of tracks)
    scaled_columns: bool = True  # steps in units of each column's half range
    # trajectories (solver/path)
    # most frames between coarse frames (more on a clip whose targets move slower than
    # coarse_motion per stride on average: path/search.py's slow_stride)
    stride: int = 32
    coarse_motion: float = 0.6  # most target motion between coarse frames (m/scale + rad)
    grid: int = 32  # redundant chains: values on the grid of each locked column
    # columns locked in turn on that grid (a retry on a self-motion of one dimension
    # locks every column: path/plan.py's WIDE_RETRIES; one of two or three dimensions
    # locks at least path/candidates.py's FREE_SHARE of the solved columns)
    free_count: int = 4
    power: float = 8.0  # path cost: sum over frames of the largest column step^power
    path_rounds: int = 100  # lazy path search: rounds of filling the chosen edges
    flip_factor: float = 2.5  # a step this many times its neighbours' median: a jump
    # passes, each with coarse frames twice as dense as the one before, while jumps,
    # steps that stand out or reachable frames missed remain (path/plan.py)
    retries: int = 2
    window: int = 20_000  # frames planned at a time (memory stays bounded)
