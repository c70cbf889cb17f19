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
