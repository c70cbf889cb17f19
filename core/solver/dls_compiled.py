"""SPEC 5.4's iterates on any ``Kinematics`` model (the compiled twin of ``dls.solve``).

``solve_spec`` is ``dls.solve`` on a model: the same loop, the same decisions, the same
iterates (within rounding), on one effector or several (stacked errors). Frames: world.
Units: metres, radians.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import mul
from typing import TypeGuard

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..floatmath import (
    dls6,
    solve_spd,
)
from ..rotations import matrix_to_rotvec
from .kinematics import FloatKinematics, Kinematics
from .settings import SolveResult, SolverSettings

Array = NDArray[np.float64]

# --------------------------------------------------------------------- the spec solver


_ON_FLOATS: dict[type, bool] = {}


def _runs_on_floats(model: Kinematics) -> TypeGuard[FloatKinematics]:
    """``isinstance(model, FloatKinematics)``, decided once per model type: the runtime
    protocol check costs about 20 µs, a seventh of a warm frame of the spec bake."""
    kind = type(model)
    known = _ON_FLOATS.get(kind)
    if known is None:
        known = _ON_FLOATS[kind] = isinstance(model, FloatKinematics)
    return known


def _targets(target: ArrayLike | Sequence[ArrayLike], m: int) -> list[Array]:
    if m == 1 and isinstance(target, np.ndarray) and target.shape == (4, 4):
        return [target]
    arr = np.asarray(target, dtype=float)
    ts = [arr] if arr.ndim == 2 else list(arr)
    if len(ts) != m or any(t.shape != (4, 4) for t in ts):
        raise ValueError(f"expected {m} target 4x4 matrices, one per effector")
    return ts


class _FloatStepper:
    """The loop's operations on a CompiledKinematics, in plain floats."""

    def __init__(self, model: FloatKinematics, targets: list[Array], damping: float) -> None:
        self.model = model
        self.targets = []
        for t in targets:
            (r0, r1, r2, p0), (r3, r4, r5, p1), (r6, r7, r8, p2), _ = t.tolist()
            self.targets.append(((r0, r1, r2, r3, r4, r5, r6, r7, r8), (p0, p1, p2)))
        self.damping = damping

    def measure(self) -> tuple[list[float], list[tuple[float, float]]]:
        dx: list[float] = []
        errs = []
        for k, (tr, tp) in enumerate(self.targets):
            e = self.model.pose_error(k, tr, tp)
            dx.extend(e)
            errs.append((math.sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]),
                         math.sqrt(e[3] * e[3] + e[4] * e[4] + e[5] * e[5])))
        return dx, errs

    def norm(self, dx: list[float]) -> float:
        return math.sqrt(sum(map(mul, dx, dx)))

    def step(self, dx: list[float]) -> list[float] | None:
        """``J^T (J J^T + damping I)^-1 dx``; None when the system cannot be solved."""
        model = self.model
        cols = model.jacobian_columns(0)
        if len(self.targets) == 1:
            dq = dls6(cols, self.damping, dx)
            if dq is not None:
                return dq
        for k in range(1, len(self.targets)):
            cols = [a + b for a, b in zip(cols, model.jacobian_columns(k), strict=True)]
        rows = list(zip(*cols, strict=True))
        a = [[sum(map(mul, ri, rj)) for rj in rows] for ri in rows]
        for i in range(len(rows)):
            a[i][i] += self.damping
        beta = solve_spd(a, dx)
        if beta is None:  # not numerically positive definite (damping 0): LU, as solve does
            try:
                beta = [float(v) for v in np.linalg.solve(np.array(a), np.array(dx))]
            except np.linalg.LinAlgError:
                return None
        return [sum(map(mul, col, beta)) for col in cols]

    def apply(self, dq: list[float], alpha: float) -> None:
        self.model.apply_scaled(dq, alpha)

    def clip(self) -> None:
        self.model.clip()


class _ArrayStepper:
    """The loop's operations on any Kinematics, through the protocol (numpy)."""

    def __init__(self, model: Kinematics, targets: list[Array], damping: float) -> None:
        self.model = model
        self.targets = targets
        self.eye = damping * np.eye(6 * len(targets))

    def measure(self) -> tuple[Array, list[tuple[float, float]]]:
        parts = []
        errs = []
        for k, t in enumerate(self.targets):
            g = self.model.effector_transform(k)
            dp = t[:3, 3] - g[:3, 3]
            dr = matrix_to_rotvec(t[:3, :3] @ g[:3, :3].T)
            parts += [dp, dr]
            errs.append((math.sqrt(dp @ dp), math.sqrt(dr @ dr)))
        return np.concatenate(parts), errs

    def norm(self, dx: Array) -> float:
        return float(np.linalg.norm(dx))

    def step(self, dx: Array) -> Array | None:
        jac = np.vstack([self.model.jacobian(k) for k in range(len(self.targets))])
        try:
            beta = np.linalg.solve(jac @ jac.T + self.eye, dx)
        except np.linalg.LinAlgError:
            return None
        return jac.T @ beta

    def apply(self, dq: Array | list[float], alpha: float) -> None:
        self.model.apply_delta(alpha * np.asarray(dq, dtype=float))

    def clip(self) -> None:
        self.model.apply_delta(np.zeros(self.model.n))


def solve_spec(
    model: Kinematics,
    target: ArrayLike | Sequence[ArrayLike],
    settings: SolverSettings | None = None,
) -> SolveResult:
    """SPEC 5.4 DLS on ``model``: the iterates of ``solver.solve``, one decision at a time.

    ``target`` is one world 4x4 (metres) or one per effector; several effectors stack
    their 6-vector errors and Jacobians, and converge when every effector is within the
    tolerances. The model is left in the final state, FK current. The result's errors
    are the largest over the effectors (m, rad).
    """
    s = settings or SolverSettings()
    targets = _targets(target, len(model.effectors))
    stepper: _FloatStepper | _ArrayStepper
    if _runs_on_floats(model):
        stepper = _FloatStepper(model, targets, s.damping)
    else:
        stepper = _ArrayStepper(model, targets, s.damping)
    ptol, otol = s.position_tolerance, s.orientation_tolerance
    iterations = 0
    best: tuple[float, object] | None = None

    def result(converged: bool, errs: list[tuple[float, float]]) -> SolveResult:
        return SolveResult(converged, iterations, max(e[0] for e in errs),
                           max(e[1] for e in errs))

    stepper.clip()  # a start outside the limits is clipped into them, as solve does
    model.update()
    dx, errs = stepper.measure()
    while True:
        if all(pe < ptol and oe < otol for pe, oe in errs):
            return result(True, errs)
        if iterations >= s.max_iterations or model.n == 0:
            break
        err = stepper.norm(dx)  # type: ignore[arg-type]
        dq = stepper.step(dx)  # type: ignore[arg-type]
        if dq is None or not all(math.isfinite(d) for d in dq):
            break
        if s.enable_line_search:
            before = model.save()
            alpha = s.line_search_alpha
            while alpha >= s.line_search_alpha_min:
                stepper.apply(dq, alpha)  # type: ignore[arg-type]
                model.update()
                dx, errs = stepper.measure()
                if stepper.norm(dx) < err:  # type: ignore[arg-type]
                    break
                model.restore(before)
                alpha *= 0.5
            else:  # no step size improves the error: stop (SPEC 5.4)
                model.update()
                return result(False, stepper.measure()[1])
        else:
            if best is None or err < best[0]:
                best = (err, model.save())
            stepper.apply(dq, 1.0)  # type: ignore[arg-type]
            model.update()
            dx, errs = stepper.measure()
        iterations += 1
    if best is not None and best[0] < stepper.norm(dx):  # type: ignore[arg-type]
        model.restore(best[1])
        model.update()
        errs = stepper.measure()[1]
    return result(False, errs)
