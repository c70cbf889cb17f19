"""One frame at a time on the bake's engine: the live preview's solve between plans.

``LiveSolver`` holds the bake's parts (``app.parts``: effectors whose solved joints touch
are solved together) and each part's last coordinates; ``solve`` takes one frame's
targets (world 4x4, metres), driven joint values and pole positions, and solves each
part warm from where it was (``solver.lm.solve_one``: pulled toward the last pose, so a
redundant chain keeps its posture; restarts only when that fails). The first solve
starts from the given joint values (the bones' current pose). Angles rad, lengths m.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..model.skeleton import Skeleton
from ..solver.kinematics import FrameTargets, Pole
from ..solver.lm import solve_one
from ..solver.settings import RobustOptions, SolverSettings
from .blas_threads import on_one_blas_thread
from .inputs import EffectorTrack
from .parts import held_rows, parts_of


@dataclass
class LiveFrame:
    """A solved frame: the solved joints' SPEC 3.3 entries, whether every effector met
    its target, and the largest counted position (m) and orientation (rad) error."""

    values: dict[str, dict[str, Any]]
    converged: bool
    position_error: float
    orientation_error: float


class LiveSolver:
    """Frames solved one at a time, each warm from the last (module docstring).

    ``tracks`` give the effectors, weights, chain lengths and pole angles (their
    targets are not read)."""

    def __init__(self, skeleton: Skeleton, tracks: Sequence[EffectorTrack],
                 settings: SolverSettings, options: RobustOptions | None = None) -> None:
        self.tracks = list(tracks)
        self.settings, self.options = settings, options or RobustOptions()
        self.whole, self.parts = parts_of(skeleton, self.tracks)
        self.last: list[NDArray[np.float64] | None] = [None] * len(self.parts)

    def reset(self, values: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """Start the next solve from ``values`` (SPEC 3.3 entries; None: the T-pose)."""
        self.last = [None if values is None else p.model.coordinates(values)
                     for p in self.parts]

    @on_one_blas_thread
    def solve(self, targets: Sequence[NDArray[np.float64]],
              driven: Mapping[str, Mapping[str, Any]] | None = None,
              poles: Sequence[tuple[float, float, float] | None] | None = None,
              restart: bool = True) -> LiveFrame:
        """One frame: ``targets`` one world 4x4 per effector (m), ``driven`` the joints
        outside the chains (SPEC 3.3 entries), ``poles`` a world position (m) or None per
        effector; ``restart``: random restarts when the warm search fails."""
        frame = FrameTargets(list(targets), driven, None if poles is None else [
            None if p is None else Pole(tuple(p), t.pole_angle)  # type: ignore[arg-type]
            for p, t in zip(poles, self.tracks, strict=True)])
        values: dict[str, dict[str, Any]] = {}
        converged, pe, re = True, 0.0, 0.0
        for k, part in enumerate(self.parts):
            pm, eff = part.model, part.effectors
            held = held_rows(pm, [frame]) if pm.held.any() else None
            start = self.last[k]
            if start is None:
                start = np.zeros(pm.n)
            t = np.array([[targets[e] for e in eff]], dtype=float)
            res = solve_one(pm, t, start, [(self.tracks[e].pos_weight, self.tracks[e].rot_weight)
                                           for e in eff], self.settings, self.options, held,
                            part.poles([frame]), restart)
            self.last[k] = res.q[0]
            converged &= bool(res.converged[0])
            for j, e in enumerate(eff):
                if self.tracks[e].pos_weight > 0:
                    pe = max(pe, float(res.position_error[0, j]))
                if self.tracks[e].rot_weight > 0:
                    re = max(re, float(res.orientation_error[0, j]))
            solved = pm.joint_values(res.q[0])
            values.update({name: v for name, v in solved.items() if name in pm.solved})
        return LiveFrame(values, converged, pe, re)
