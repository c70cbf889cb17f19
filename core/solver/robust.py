"""The robust IK method (issue 5): Levenberg-Marquardt on any ``Kinematics`` model.

Frames: world. Units: metres and radians (prismatic columns in metres). One solve drives
one or more effectors at once: their weighted error rows are stacked into one residual
and one Jacobian, so joints shared by several effectors get one update.

Spherical limits (decision by the lead): a spherical joint's limits bound the intrinsic
XYZ angles ``(a, b, c)`` of its rotation relative to rest, ``R = Rx(a) Ry(b) Rz(c)``:
the convention of its virtual chain v1 -> v2 -> v3 (DECISIONS.md). The robust method
enforces these true angles. On a ``CompiledKinematics`` (the bake, the CLI, the add-on)
its coordinates for such a joint are the angles themselves: the Jacobian columns are
those of ``Rx(a) Ry(b) Rz(c)`` (the virtual columns mixed by the current angles), the box
``lo <= angle <= hi`` is kept exactly by the step's clamping, the quaternion is rebuilt
from the angles after every step, and the virtual joints' shifted limits are kept at
``(lo - angle, hi - angle)`` so a ``save()`` says it all. A box beyond ``b = +-pi/2``
keeps its meaning through the rotation's other angle triple. Random restarts draw the
angles inside the box. A spherical joint without any limit keeps the virtual chain's
increments (no gimbal lock). The ``spec`` method keeps SPEC 4.3's shifted-limit
mechanism as written (joints.py, solver.py). On other models (``ObjectKinematics``,
``solver.solve(method="robust")``) the numpy implementation below works on the virtual
columns and their shifted limits, as before.

One solve, per iteration (both implementations):

- damping adapts to the error (Chan): ``W = damping * E + damping_floor`` with
  ``E = |e|^2 / 2`` over the weighted residual; a step that does not lower ``E`` is
  rejected and the damping multiplied by 10, an accepted step halves it again;
- limits as in Blender's Standard solver: a column whose step would cross its limit is
  clamped to the limit and its column removed, and the rest of the step is solved again
  for the error left, so every step stays a damped descent step within the limits;
- with an anchor (trajectories: the previous frame's pose moved toward mid-range) the
  step is damped toward it instead of toward no motion,
  ``min |J dq - e|^2 + W |dq - d|^2`` with ``d`` the way to the anchor: as ``W -> 0``
  this is the pseudo-inverse step plus the projection of ``d`` on the Jacobian's null
  space, so redundant joints stay where they were and drift back from their limits;
- a search that stalls (no acceptable step, or no progress) restarts from a random
  configuration within the limits, drawn from ``numpy.random.default_rng(seed)``.

Position rows are divided by a length scale (the largest distance from a joint axis to
an effector at the start, metres), so damping and weights compare metres with radians on
chains of any size; tolerances stay absolute (m, rad). On a ``CompiledKinematics`` the
whole loop runs on plain floats (hand-written 6x6 Cholesky, the model's float FK,
errors and Jacobian columns): numpy's per-call overhead dominates at a handful of joints.

A trajectory (:func:`solve_trajectory`, :class:`_FastTracker`) starts each frame from a
parabola through the three previous solutions and anchors it at the previous solution
moved ``track_posture`` of the way to mid-range; frame 0 takes, of several solutions,
the one farthest from the limits; a frame that cannot be reached so is solved with
restarts, and a few such flips are then bridged backward from the later frames.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from operator import mul
from time import perf_counter

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..floatmath import (
    Quat,
    dls6,
    intrinsic_xyz,
    quat_mat,
    quat_mul,
    quat_unit,
    solve_spd,
)
from ..model.compiled import PRISMATIC, VIRTUAL, CompiledKinematics  # TODO(layers): protocol
from ..model.objects import ObjectKinematics
from ..rotations import matrix_to_rotvec
from .joints import JointNode
from .kinematics import Kinematics
from .settings import SolveResult, SolverSettings

Array = NDArray[np.float64]
Weight = tuple[float, float]  # (position weight, orientation weight), >= 0
Measure = tuple[Array, list[tuple[float, float]]]  # residual, per-effector (m, rad)

_GROW = 10.0  # damping factor after a rejected step
INTERIOR = 0.2  # a cold solve from the T-pose starts this far from mid-range (of half)
_SHRINK = 0.5  # damping factor after an accepted step
_MAX_MULTIPLIER = 1e8  # beyond this damping multiplier the search has stalled
_STALL_WINDOW = 8  # iterations over which a search must make progress...
_STALL_RATIO = 0.9  # ...by lowering the largest normalised error below this fraction


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
    bridges: int = 10  # trajectories: flips repaired at most (0: none; see _FastTracker)
    bridge_candidates: int = 8  # trajectories: solutions tried per flip repaired


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


class _Problem:
    """The stacked, weighted residual and Jacobian of every effector (world frame)."""

    def __init__(
        self, model: Kinematics, weights: Sequence[Weight] | None, settings: SolverSettings
    ) -> None:
        self.model = model
        self.weights = checked_weights(weights, len(model.effectors))
        self.ptol = settings.position_tolerance
        self.otol = settings.orientation_tolerance
        self.targets: list[Array] = []
        self.scale = 1.0  # metres per radian for the position rows
        self.revolute = np.zeros(model.n, dtype=bool)  # columns that turn something
        self._measure_model()

    def _measure_model(self) -> None:
        """Length scale (m): the largest linear Jacobian column; which columns rotate."""
        longest = 0.0
        for k in range(len(self.model.effectors)):
            jac = self.model.jacobian(k)
            if jac.size:
                longest = max(longest, float(np.max(np.linalg.norm(jac[:3], axis=0))))
                self.revolute |= np.linalg.norm(jac[3:], axis=0) > 0.5
        self.scale = longest if longest > 1e-6 else 1.0

    def set_targets(self, targets: Sequence[ArrayLike]) -> None:
        """World 4x4 targets (metres), one per effector."""
        if len(targets) != len(self.weights):
            raise ValueError(f"need one target per effector ({len(self.weights)})")
        self.targets = [np.asarray(t, dtype=float) for t in targets]
        self._flat = [(tuple(t[:3, :3].ravel().tolist()), tuple(t[:3, 3].tolist()))
                      for t in self.targets]

    def _errors6(self, k: int) -> Sequence[float]:
        """Effector ``k``'s ``(dp (m), dr (rad))``: ``p_t - p``, ``rotvec(R_t R^T)``."""
        pose_error = getattr(self.model, "pose_error", None)
        if pose_error is not None:  # CompiledKinematics: the same on plain floats
            return pose_error(k, *self._flat[k])  # type: ignore[no-any-return]
        t, g = self.targets[k], self.model.effector_transform(k)
        return (*(t[:3, 3] - g[:3, 3]).tolist(),
                *matrix_to_rotvec(t[:3, :3] @ g[:3, :3].T).tolist())

    def measure(self) -> Measure:
        """The weighted residual (counted rows only, position rows divided by the scale)
        and every effector's ``(position error (m), orientation error (rad))``."""
        rows: list[float] = []
        per = []
        for k, (wp, wr) in enumerate(self.weights):
            ex, ey, ez, rx, ry, rz = self._errors6(k)
            per.append((math.sqrt(ex * ex + ey * ey + ez * ez),
                        math.sqrt(rx * rx + ry * ry + rz * rz)))
            if wp > 0.0:
                f = wp / self.scale
                rows += (ex * f, ey * f, ez * f)
            if wr > 0.0:
                rows += (rx * wr, ry * wr, rz * wr)
        return np.array(rows), per

    def jacobian(self) -> Array:
        """The rows of the residual, weighted alike: (rows, n)."""
        parts = []
        for k, (wp, wr) in enumerate(self.weights):
            if wp > 0.0 and wr > 0.0:
                parts.append(self.model.jacobian(k) * self._row_scale(wp, wr))
            elif wp > 0.0:
                parts.append(self.model.jacobian(k)[:3] * (wp / self.scale))
            elif wr > 0.0:
                parts.append(self.model.jacobian(k)[3:] * wr)
        if len(parts) == 1:
            return parts[0]
        return np.vstack(parts) if parts else np.zeros((0, self.model.n))

    def _row_scale(self, wp: float, wr: float) -> Array:
        """Row factors of a full-pose effector: (6, 1)."""
        f = wp / self.scale
        return np.array([[f], [f], [f], [wr], [wr], [wr]])

    def badness(self, per: list[tuple[float, float]]) -> float:
        """Largest counted error over its tolerance: below 1 means converged."""
        worst = 0.0
        for (pe, oe), (wp, wr) in zip(per, self.weights, strict=True):
            if wp > 0.0 and pe / self.ptol > worst:
                worst = pe / self.ptol
            if wr > 0.0 and oe / self.otol > worst:
                worst = oe / self.otol
        return worst

    def result(self, converged: bool, iterations: int, restarts: int) -> RobustResult:
        """The result for the model's current state."""
        per = self.measure()[1]
        pe = max((p for (p, _), (wp, _) in zip(per, self.weights, strict=True) if wp > 0),
                 default=0.0)
        oe = max((o for (_, o), (_, wr) in zip(per, self.weights, strict=True) if wr > 0),
                 default=0.0)
        return RobustResult(converged, iterations, pe, oe, restarts, per)


# ------------------------------------------------------------------------ one step


def damped_step(
    jac: Array, r: Array, w: float, d: Array, push: Array
) -> tuple[Array, Array]:
    """The damped step toward ``d`` and the null-space part of ``push`` (column units).

    Returns ``(step, null)``: ``step`` minimises ``|jac dq - r|^2 + w |dq - d|^2``
    (``w > 0``), which as ``w -> 0`` is the pseudo-inverse step plus the null-space
    projection of ``d``; ``null`` is ``push`` less its row-space part (the same damped
    projector), so adding it changes the residual's first-order decrease by ~nothing.
    """
    m, n = jac.shape
    if n == 0:
        return np.zeros(0), np.zeros(0)
    if m <= n:
        a = jac @ jac.T
        a.flat[:: m + 1] += w
        sol = np.linalg.solve(a, np.array((r - jac @ d, jac @ push)).T)
        back = jac.T @ sol
        return d + back[:, 0], push - back[:, 1]
    a = jac.T @ jac
    a.flat[:: n + 1] += w
    sol = np.linalg.solve(a, np.array((jac.T @ r + w * d, w * push)).T)
    return sol[:, 0], sol[:, 1]


def limited_step(
    jac: Array, r: Array, q: Array, lo: Array, hi: Array, w: float, d: Array,
    push: Array | None = None, rate: float = 0.0,
) -> tuple[Array, float]:
    """Damped step that keeps ``lo <= q + dq <= hi`` by clamping and removing columns.

    A column whose step would cross its limit moves to the limit and leaves the problem;
    the others are solved again for the residual left (Blender's Standard solver).
    ``push`` adds its null-space part, scaled down so that its largest component is at
    most ``rate`` times the largest component of the step without it. Returns the step
    (column units) and the scale applied to ``push``.
    """
    n = q.shape[0]
    push = np.zeros(n) if push is None else push
    dq = np.zeros(n)
    idx = np.arange(n)  # the free columns
    sub, rest = jac, r
    while True:
        step, null = damped_step(sub, rest, w, d[idx], push[idx])
        scale = 0.0
        if rate > 0.0 and null.size:
            largest = float(np.abs(null).max())
            cap = rate * float(np.abs(step).max())
            scale = 1.0 if largest <= cap else cap / largest
            step = step + scale * null
        trial = q[idx] + step
        over = (trial > hi[idx]) | (trial < lo[idx])
        if not over.any():
            dq[idx] = step
            return dq, scale
        hit = idx[over]
        dq[hit] = np.clip(trial[over], lo[hit], hi[hit]) - q[hit]
        rest = rest - jac[:, hit] @ dq[hit]
        idx = idx[~over]
        sub = jac[:, idx]


def posture_push(q: Array, lo: Array, hi: Array, gain: float) -> Array:
    """``gain`` times the way to mid-range for columns with two finite limits (rad, m)."""
    limited = np.isfinite(lo) & np.isfinite(hi)
    if gain == 0.0 or not limited.any():
        return np.zeros_like(q)
    with np.errstate(invalid="ignore"):  # -inf + inf where there is no limit: masked
        mid = (lo + hi) / 2
    return np.where(limited, gain * (mid - q), 0.0)


# ---------------------------------------------------------------------- one search


@dataclass
class _Search:
    """LM iterations from the model's current state (see the module docstring).

    ``anchor``: pull target as column offsets from the start (None: no pull);
    ``toward``: extra secondary target, column offsets from the start (None: none).
    ``motion`` is the column motion from the start to the state reached (rad, m).
    """

    problem: _Problem
    options: RobustOptions
    anchor: Array | None = None
    toward: Array | None = None
    iterations: int = 0
    motion: Array = field(default_factory=lambda: np.zeros(0))

    def run(self, budget: int) -> bool:
        """Iterate until converged (True), stalled or out of budget; the state is the best."""
        problem, model, opts = self.problem, self.problem.model, self.options
        e, per = problem.measure()
        cost = 0.5 * float(e @ e)
        history = [problem.badness(per)]
        self.motion = np.zeros(model.n)
        anchor = None if self.anchor is None else self.anchor.copy()
        multiplier = 1.0
        while history[-1] >= 1.0:
            if self.iterations >= budget or _stalled(history):
                return False
            self.iterations += 1
            jac = problem.jacobian()
            q = model.increments()
            lo, hi = model.limits()
            d = push = np.zeros(model.n)
            if anchor is not None and len(history) == 1:  # the solve's one secondary move
                push = posture_push(q, lo, hi, opts.posture)
                if self.toward is not None:
                    push = push + self.toward
            while True:  # until a step lowers the cost
                if anchor is not None:
                    d = anchor - self.motion
                w = multiplier * opts.damping * cost + opts.damping_floor
                taken = self._try(jac, e, q, lo, hi, w, d, push, cost)
                if taken is not None:
                    break
                multiplier *= _GROW
                push = push * 0.5
                if multiplier > _MAX_MULTIPLIER:
                    return False
            applied, scale, per, e, cost = taken
            if anchor is not None:
                anchor += scale * push  # later iterations keep the secondary move
            self.motion += applied
            multiplier = max(multiplier * _SHRINK, 1.0)
            history.append(problem.badness(per))
        return True

    def _try(
        self, jac: Array, e: Array, q: Array, lo: Array, hi: Array, w: float, d: Array,
        push: Array, cost: float,
    ) -> tuple[Array, float, list[tuple[float, float]], Array, float] | None:
        """Apply one limited step if it lowers the cost, else leave no trace (None)."""
        model = self.problem.model
        try:
            dq, scale = limited_step(jac, e, q, lo, hi, w, d, push, self.options.rate)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(dq)):
            return None
        before = model.save()
        model.apply_delta(dq)
        applied = model.increments() - q
        model.update()
        e_new, per = self.problem.measure()
        cost_new = 0.5 * float(e_new @ e_new)
        if cost_new < cost:
            return applied, scale, per, e_new, cost_new
        model.restore(before)
        model.update()
        return None


def _stalled(history: list[float]) -> bool:
    """No real progress over the last ``_STALL_WINDOW`` iterations."""
    if len(history) <= _STALL_WINDOW:
        return False
    return history[-1] > _STALL_RATIO * history[-1 - _STALL_WINDOW]


def random_configuration(
    model: Kinematics, rng: np.random.Generator, revolute: Array, scale: float
) -> Array:
    """Move every column to a uniform random value within its current limits; FK.

    A column without a limit draws within +-pi (``revolute``) or +-``scale`` metres
    (prismatic) of its value. Returns the column motion (rad, m).
    """
    q = model.increments()
    lo, hi = model.limits()
    span = np.where(revolute, math.pi, scale)
    a = np.where(np.isfinite(lo), lo, np.minimum(q, hi) - span)
    b = np.where(np.isfinite(hi), hi, np.maximum(q, lo) + span)
    model.apply_delta(rng.uniform(a, b) - q)
    moved = model.increments() - q
    model.update()
    return moved


# ----------------------------------------------------------------------- one solve


def _solve(
    problem: _Problem,
    options: RobustOptions,
    budget: int,
    rng: np.random.Generator | None,
    restarts: int,
    anchor: Array | None = None,
    toward: Array | None = None,
) -> tuple[RobustResult, Array]:
    """One solve of the problem's targets from the model's state: ``(result, motion)``.

    ``restarts`` random restarts follow a stalled first search; with an ``anchor`` a
    restart is only kept if it converges, else the best state reached is kept.
    """
    model = problem.model
    before = model.increments()
    model.apply_delta(np.zeros(model.n))  # a start outside the limits is clipped into them
    clipped = model.increments() - before
    model.update()
    search = _Search(problem, options, anchor, toward)
    converged = search.run(budget)
    iterations, used, motion = search.iterations, 0, clipped + search.motion
    if converged or restarts <= 0 or model.n == 0:
        return problem.result(converged, iterations, 0), motion
    rng = np.random.default_rng(options.seed) if rng is None else rng
    best = (problem.badness(problem.measure()[1]), model.save(), motion)
    while used < restarts and not converged:
        used += 1
        model.restore(best[1])
        jump = random_configuration(model, rng, problem.revolute, problem.scale)
        search = _Search(problem, options)
        converged = search.run(options.restart_iterations)
        iterations += search.iterations
        moved = best[2] + jump + search.motion
        bad = problem.badness(problem.measure()[1])
        if converged or (anchor is None and bad < best[0]):
            best = (bad, model.save(), moved)
    model.restore(best[1])
    model.update()
    return problem.result(converged, iterations, used), best[2]


def state_offsets(model: Kinematics, state: object) -> Array:
    """Column offsets (rad, m) from the model's current state to ``state`` (a save()).

    Real columns compare values; virtual (spherical) columns compare their limit shifts,
    which record the increments folded so far. A virtual column without limits keeps
    no such record: its offset is 0. The model is left as it was, FK current.
    """
    now = model.save()
    q_now = model.increments()
    lo_now, hi_now = model.limits()
    model.restore(state)
    q_prev = model.increments()
    lo_prev, hi_prev = model.limits()
    model.restore(now)
    model.update()
    with np.errstate(invalid="ignore"):
        shift = np.where(np.isfinite(lo_now), lo_now - lo_prev, hi_now - hi_prev)
    return q_prev - q_now + np.where(np.isfinite(shift), shift, 0.0)


def solve_robust(
    model: Kinematics,
    targets: Sequence[ArrayLike],
    settings: SolverSettings | None = None,
    *,
    weights: Sequence[Weight] | None = None,
    rng: np.random.Generator | None = None,
    previous: object | None = None,
    options: RobustOptions | None = None,
) -> RobustResult:
    """Solve every effector of ``model`` toward its world 4x4 target (metres) at once.

    ``targets[k]`` belongs to ``model.effectors[k]``; ``weights[k]`` is its
    ``(position, orientation)`` weight (default ``(1, 1)``; 0 ignores that part, in the
    step and in convergence). Converged: every effector within
    ``settings.position_tolerance`` (m) and ``orientation_tolerance`` (rad). The solve
    starts from the model's current state (at most ``settings.max_iterations``).

    ``previous`` (a ``model.save()``, normally the previous frame's pose) makes it a
    trajectory step: pulled toward ``previous`` and mid-range in the null space, no
    restarts. On a ``CompiledKinematics``, a cold solve from the T-pose (which says
    nothing about the target and is singular for many chains) starts inside the limits,
    ``INTERIOR`` of the half-range above mid-range. Without ``previous``, a stalled solve
    restarts from random configurations within the limits (``options.max_restarts``)
    drawn from ``rng`` (default ``default_rng(options.seed)``). The model is left in the
    best state found, FK current.
    """
    settings = settings or SolverSettings()
    options = options or RobustOptions()
    if isinstance(model, CompiledKinematics):
        eng = _engine(model, weights, settings, options)
        anchor = None
        if previous is not None:
            now = model.save()
            model.restore(previous)
            eng.canonical()
            anchor = eng.anchor_of()
            model.restore(now)
        eng.set_targets(targets)
        return eng.solve(settings.max_iterations, 0 if previous else options.max_restarts,
                         rng, anchor)
    model.update()
    problem = _Problem(model, weights, settings)
    problem.set_targets(targets)
    if previous is None:
        result, _ = _solve(problem, options, settings.max_iterations, rng,
                           options.max_restarts)
    else:
        anchor = state_offsets(model, previous)
        result, _ = _solve(problem, options, settings.max_iterations, rng, 0, anchor)
    return result


# ---------------------------------------------------------------------- trajectories

Progress = Callable[[int, int], None]


@dataclass
class FrameSolution:
    """One solved frame: the model's ``save()``, its result and column coordinates.

    ``coords`` are the columns' values relative to the state the trajectory started
    from (rad, m; a virtual column accumulates its folded increments).
    """

    state: object
    result: RobustResult
    coords: Array
    quats: list[Quat] = field(default_factory=list)  # spherical quaternions (w, x, y, z)
    x: list[float] = field(default_factory=list)  # ``coords`` as floats (float engine)
    seconds: float = 0.0  # wall time of this frame's forward solve (float engine)


class _Tracker:
    """Frame-by-frame tracking with bridging of lost frames (module docstring)."""

    def __init__(
        self, problem: _Problem, settings: SolverSettings, options: RobustOptions,
        targets: Sequence[Sequence[ArrayLike]], rng: np.random.Generator,
    ) -> None:
        self.problem, self.settings, self.options = problem, settings, options
        self.targets = targets
        self.rng = rng
        self.model = problem.model
        self.frames: list[FrameSolution] = []
        self.failing_run = 0  # consecutive unconverged frames
        self.joining = replace(options, rate=2.0 * options.rate)  # backward joins

    def step_from(
        self, sol: FrameSolution, index: int, toward: Array | None = None
    ) -> FrameSolution:
        """Frame ``index`` solved from ``sol``'s state, pulled toward it (no restarts)."""
        self.model.restore(sol.state)
        self.model.update()
        self.problem.set_targets(self.targets[index])
        offsets = None if toward is None else toward - sol.coords
        opts = self.options if toward is None else self.joining
        result, motion = _solve(self.problem, opts, self.settings.max_iterations,
                                None, 0, np.zeros(self.model.n), offsets)
        return FrameSolution(self.model.save(), result, sol.coords + motion)

    def cold(self, base: FrameSolution, index: int, restarts: int,
             random_start: bool) -> FrameSolution:
        """Frame ``index`` solved from ``base`` (or a random configuration), restarting."""
        self.model.restore(base.state)
        self.model.update()
        jump = np.zeros(self.model.n)
        if random_start:
            jump = random_configuration(self.model, self.rng, self.problem.revolute,
                                        self.problem.scale)
        self.problem.set_targets(self.targets[index])
        result, motion = _solve(self.problem, self.options, self.settings.max_iterations,
                                self.rng, restarts)
        return FrameSolution(self.model.save(), result, base.coords + jump + motion)

    def run(self, progress: Progress | None) -> list[FrameSolution]:
        """Solve every frame in order; bridge the frames that the tracking loses."""
        start = FrameSolution(self.model.save(), RobustResult(False, 0, 0.0, 0.0),
                              np.zeros(self.model.n))
        total = len(self.targets)
        for index in range(total):
            if index == 0:
                sol = self.cold(start, 0, self.options.max_restarts, False)
            else:
                sol = self.step_from(self.frames[-1], index)
                if not sol.result.converged:
                    sol = self.bridge(index, sol)
            self.failing_run = 0 if sol.result.converged else self.failing_run + 1
            self.frames.append(sol)
            if progress is not None:
                progress(index + 1, total)
        return self.frames

    def bridge(self, index: int, lost: FrameSolution) -> FrameSolution:
        """A solution of frame ``index`` joined to the earlier frames, or ``lost``.

        Candidates come from random restarts. Each is tracked backward, pulled toward
        the frames solved, until it joins them within their own per-frame motion (or
        reaches frame 0), then checked ``lookahead`` frames forward. The best
        candidate's backward frames replace the earlier ones from the joint on.
        """
        opts = self.options
        if self.failing_run % 10 != 0:  # in a run of unreachable frames: probe now and then
            return lost
        best: tuple[float, int, list[FrameSolution]] | None = None
        for attempt in range(opts.candidates):
            restarts = opts.probe_restarts if attempt == 0 else 2
            cand = self.cold(lost, index, restarts, True)
            if not cand.result.converged:
                if attempt == 0:
                    return lost  # unreachable, as far as restarts can tell
                continue
            gap, first, chain = self.backward(index, cand)
            if best is not None and gap >= best[0]:
                continue
            if not self.survives(cand, index):
                gap += 1e3  # leads into a dead end: only as a last resort
            if best is None or gap < best[0]:
                best = (gap, first, chain)
            if best[0] <= 0.0:
                break
        if best is None:
            return lost
        _, first, chain = best
        self.frames[first:index] = chain[:-1]
        return chain[-1]

    def backward(self, index: int, cand: FrameSolution) -> tuple[float, int, list]:
        """Track ``cand`` back toward the solved frames: ``(gap, first, solutions)``.

        Frame ``k``'s backward solution joins the solved frame ``k - 1`` with a jump;
        ``gap`` is how far the smallest such jump exceeds the solved frames' own motion
        around there (0: an ordinary step; also 0 when frame 0 is reached). The
        solutions are those of frames ``first .. index`` to put in.
        """
        chain = [cand]  # chain[i] solves frame index - i
        best = (math.inf, index, 1)  # (gap, first frame replaced, solutions used)
        for k in range(index - 1, -1, -1):
            sol = self.step_from(chain[-1], k, self.frames[k].coords)
            if not sol.result.converged:
                break
            chain.append(sol)
            if k == 0:
                return 0.0, 0, chain[::-1]
            jump = float(np.max(np.abs(sol.coords - self.frames[k - 1].coords)))
            gap = max(jump - self._own_motion(k - 1), 0.0)
            if gap < best[0]:
                best = (gap, k, len(chain))
            if gap <= 0.0:
                break
        gap, first, used = best
        return gap, first, chain[:used][::-1]

    def _own_motion(self, k: int) -> float:
        """The largest column motion of the solved frames into and out of frame ``k``."""
        moves = [0.0]
        for a, b in ((k - 1, k), (k, k + 1)):
            if 0 <= a and b < len(self.frames):
                moves.append(float(np.max(np.abs(self.frames[b].coords -
                                                 self.frames[a].coords))))
        return max(moves)

    def survives(self, cand: FrameSolution, index: int) -> bool:
        """Whether tracking from ``cand`` reaches the next ``lookahead`` frames."""
        sol = cand
        for k in range(index + 1, min(index + 1 + self.options.lookahead, len(self.targets))):
            sol = self.step_from(sol, k)
            if not sol.result.converged:
                return False
        return True


def solve_trajectory(
    model: Kinematics,
    targets: Sequence[Sequence[ArrayLike]],
    settings: SolverSettings | None = None,
    *,
    weights: Sequence[Weight] | None = None,
    options: RobustOptions | None = None,
    cold_start: bool = False,
    progress: Progress | None = None,
) -> list[FrameSolution]:
    """Solve frames in order; ``targets[i][k]`` is effector ``k``'s world 4x4 in frame i.

    Frame 0 is solved from the model's current state with restarts, every later frame
    from the previous frame's solution (module docstring), or, with ``cold_start``,
    every frame from the T-pose with restarts, as :func:`solve_robust` alone would.
    Restarts draw from ``default_rng(options.seed)``: the same call gives the same
    result. Returns one
    :class:`FrameSolution` per frame; the model is left in the last frame's state.
    """
    settings = settings or SolverSettings()
    options = options or RobustOptions()
    rng = np.random.default_rng(options.seed)
    if isinstance(model, CompiledKinematics):
        eng = _engine(model, weights, settings, options)
        if cold_start:
            frames = []
            for index, frame_targets in enumerate(targets):
                model.reset()
                eng.set_targets(frame_targets)
                result = eng.solve(settings.max_iterations, options.max_restarts,
                                   np.random.default_rng(options.seed))
                frames.append(FrameSolution(model.save(), result, np.array(eng.coords()),
                                            list(model._quats)))
                if progress is not None:
                    progress(index + 1, len(targets))
        else:
            frames = _FastTracker(eng, settings, targets, rng).run(progress)
        if frames:
            model.restore(frames[-1].state)
            model.update()
        return frames
    model.update()
    problem = _Problem(model, weights, settings)
    if not cold_start:
        frames = _Tracker(problem, settings, options, targets, rng).run(progress)
    else:
        frames = []
        for index, frame_targets in enumerate(targets):
            model.reset()  # each frame alone: its own T-pose start and its own draws
            problem.set_targets(frame_targets)
            result, motion = _solve(problem, options, settings.max_iterations,
                                    np.random.default_rng(options.seed), options.max_restarts)
            frames.append(FrameSolution(model.save(), result, motion))
            if progress is not None:
                progress(index + 1, len(targets))
    if frames:
        model.restore(frames[-1].state)
        model.update()
    return frames


# ---------------------------------------------------------- solver.solve(method="robust")


class _NodeTree:
    """The joints below ``root`` seen as a skeleton, for :class:`ObjectKinematics`."""

    def __init__(self, root: JointNode) -> None:
        self.root = root
        self.joints: dict[str, JointNode] = {}
        stack = [root]
        while stack:
            node = stack.pop()
            self.joints[node.name] = node
            stack.extend(reversed(node.children))

    def joint(self, name: str) -> JointNode:
        return self.joints[name]

    def update(self) -> None:
        self.root.update_global_transform()


def solve_on_nodes(
    root: JointNode,
    effector: JointNode,
    target_transform: ArrayLike,
    ik_chain: list[JointNode] | None,
    method: str,
    settings: SolverSettings,
) -> RobustResult:
    """``solver.solve(..., method="robust")``: one robust solve on the joint objects.

    The joints are left in the result's state, FK current. ``ik_chain`` must be None or
    the chain ``build_ik_chain`` gives (the robust method builds its own).
    """
    if method != "robust":
        raise ValueError(f"unknown IK method {method!r}: use 'spec' or 'robust'")
    model = ObjectKinematics(_NodeTree(root), [effector.name])  # type: ignore[arg-type]
    if ik_chain is not None and [node.name for node in ik_chain] != model.names:
        raise ValueError("method='robust' builds its own IK chain: pass ik_chain=None")
    return solve_robust(model, [target_transform], settings)


# ===================================================== the plain-float engine (compiled)
#
# On a ``CompiledKinematics`` the robust method runs on plain floats: numpy's per-call
# overhead dominates at a handful of joints. Its coordinates ``x`` (one per column):
# a hinge's angle (rad) or a slider's displacement (m), and for a spherical joint with
# limits its intrinsic XYZ angles ``(a, b, c)``, ``R = Rx(a) Ry(b) Rz(c)`` relative to
# rest, which its limits bound exactly (the box). A spherical joint without any limit
# keeps the virtual chain's increments (no gimbal lock), folded after every step. The
# model is kept in a canonical state: virtual increments 0, quaternion = the angles'
# rotation, virtual limits ``(lo - theta, hi - theta)`` (so a ``save()`` says it all).

Coords = list[float]


def intrinsic_angles(quat: Sequence[float]) -> tuple[float, float, float]:
    """``(a, b, c)`` (rad) with ``R(quat) = Rx(a) Ry(b) Rz(c)``, ``b`` in [-pi/2, pi/2]."""
    m0, m1, m2, _, _, m5, _, _, m8 = quat_mat(quat)
    b = math.asin(max(-1.0, min(1.0, m2)))
    return math.atan2(-m5, m8), b, math.atan2(-m1, m0)


def _box_angles(theta: Sequence[float], lo: Sequence[float], hi: Sequence[float]
                ) -> list[float]:  # fmt: skip
    """``theta`` clamped into ``[lo, hi]`` per axis (rad)."""
    return [min(max(t, a), b) for t, a, b in zip(theta, lo, hi, strict=True)]


def angles_in_box(quat: Sequence[float], lo: Sequence[float], hi: Sequence[float]
                  ) -> list[float]:  # fmt: skip
    """Intrinsic XYZ angles of ``quat`` (rad) nearest to the box ``[lo, hi]``, clamped
    into it. Of the two angle triples of a rotation, ``(a, b, c)`` and
    ``(a + pi, pi - b, c + pi)``, each angle shifted by whole turns toward its range,
    the one nearest the box is taken: a box beyond ``b = +-pi/2`` keeps its meaning."""
    a, b, c = intrinsic_angles(quat)
    best: tuple[float, list[float]] | None = None
    for triple in ((a, b, c), (a + math.pi, math.pi - b, c + math.pi)):
        moved = []
        for t, x, y in zip(triple, lo, hi, strict=True):
            mid = 0.5 * (x + y) if math.isfinite(x) and math.isfinite(y) else (
                x if math.isfinite(x) else y if math.isfinite(y) else t)
            moved.append(t + 2.0 * math.pi * round((mid - t) / (2.0 * math.pi)))
        outside = sum(max(x - t, 0.0) + max(t - y, 0.0)
                      for t, x, y in zip(moved, lo, hi, strict=True))
        if best is None or outside < best[0] - 1e-12:
            best = (outside, moved)
    assert best is not None
    return _box_angles(best[1], lo, hi)


def _damped(cols: list[Sequence[float]], r: list[float], w: float,
            d: list[float]) -> list[float] | None:  # fmt: skip
    """``argmin |J s - r|^2 + w |s - d|^2`` for ``J`` given by its columns (floats).

    ``s = d + J^T (J J^T + w I)^-1 (r - J d)``, or the normal equations when ``J`` has
    fewer columns than rows; None when the system is not numerically solvable.
    """
    m, k = len(r), len(cols)
    if m == 6 and k >= 6:
        r0, r1, r2, r3, r4, r5 = r
        for (c0, c1, c2, c3, c4, c5), dj in zip(cols, d, strict=True):
            if dj:
                r0 -= c0 * dj
                r1 -= c1 * dj
                r2 -= c2 * dj
                r3 -= c3 * dj
                r4 -= c4 * dj
                r5 -= c5 * dj
        s = dls6(cols, w, (r0, r1, r2, r3, r4, r5))
        return None if s is None else [sj + dj for sj, dj in zip(s, d, strict=True)]
    if any(d):
        r = r[:]
        for col, dj in zip(cols, d, strict=True):
            if dj:
                for i in range(m):
                    r[i] -= col[i] * dj
    if m <= k:
        rows = list(zip(*cols, strict=True))
        a = [[sum(map(mul, ri, rj)) for rj in rows] for ri in rows]
        for i in range(m):
            a[i][i] += w
        beta = solve_spd(a, r)
        s = None if beta is None else [sum(map(mul, col, beta)) for col in cols]
    else:
        a = [[sum(map(mul, ci, cj)) for cj in cols] for ci in cols]
        for i in range(k):
            a[i][i] += w
        s = solve_spd(a, [sum(map(mul, col, r)) for col in cols])
    if s is None:
        return None
    return [sj + dj for sj, dj in zip(s, d, strict=True)]


def _factor6(cols: Sequence[Sequence[float]], w: float) -> tuple[float, ...] | None:
    """Cholesky factor (21 floats, row-major lower triangle) of ``J J^T + w I`` for a
    6-row ``J`` given by its columns; None when not numerically positive definite."""
    a = [0.0] * 21  # lower triangle of J J^T, row-major: (0,0), (1,0), (1,1), (2,0), ...
    for col in cols:
        k = 0
        for i in range(6):
            ci = col[i]
            for j in range(i + 1):
                a[k] += ci * col[j]
                k += 1
    low = [0.0] * 21
    for i in range(6):
        ri = i * (i + 1) // 2
        for j in range(i + 1):
            rj = j * (j + 1) // 2
            acc = a[ri + j] - sum(low[ri + t] * low[rj + t] for t in range(j))
            if i == j:
                acc += w
                if not acc > 0.0:
                    return None
                low[ri + i] = math.sqrt(acc)
            else:
                low[ri + j] = acc / low[rj + j]
    return tuple(low)


def _solve6(low: tuple[float, ...], cols: Sequence[Sequence[float]],
            r: Sequence[float]) -> list[float]:  # fmt: skip
    """``J^T (J J^T + w I)^-1 r`` from :func:`_factor6`'s factor of the same ``J``."""
    y = [0.0] * 6
    for i in range(6):
        ri = i * (i + 1) // 2
        acc = r[i]
        for t in range(i):
            acc -= low[ri + t] * y[t]
        y[i] = acc / low[ri + i]
    beta = [0.0] * 6
    for i in range(5, -1, -1):
        acc = y[i]
        for t in range(i + 1, 6):
            acc -= low[t * (t + 1) // 2 + i] * beta[t]
        beta[i] = acc / low[i * (i + 1) // 2 + i]
    b0, b1, b2, b3, b4, b5 = beta
    return [b0 * c0 + b1 * c1 + b2 * c2 + b3 * c3 + b4 * c4 + b5 * c5
            for c0, c1, c2, c3, c4, c5 in cols]


def _bounded_step(cols: list[Sequence[float]], e: list[float], x: Coords, lo: Coords,
                  hi: Coords, w: float, d: list[float]) -> list[float] | None:  # fmt: skip
    """Damped step that keeps ``lo <= x + dx <= hi`` by clamping and removing columns.

    A column whose step would cross its limit moves to the limit and leaves the problem;
    the others are solved again for the residual left (Blender's Standard solver).
    """
    n = len(cols)
    step = _damped(cols, e, w, d)  # first with every column: most steps stop here
    if step is None:
        return None
    if all(a <= v + s <= b for v, s, a, b in zip(x, step, lo, hi, strict=True)):
        return step
    dx = [0.0] * n
    free = list(range(n))
    rest = e
    while free:
        step = _damped([cols[c] for c in free], rest, w, [d[c] for c in free])
        if step is None:
            return None
        keep = []
        for c, s in zip(free, step, strict=True):
            v = x[c] + s
            if lo[c] <= v <= hi[c]:
                keep.append((c, s))
                continue
            if not math.isfinite(v):
                return None
            dx[c] = t = (hi[c] if v > hi[c] else lo[c]) - x[c]
            rest = [ri - t * ci for ri, ci in zip(rest, cols[c], strict=True)]
        if len(keep) == len(free):
            for c, s in keep:
                dx[c] = s
            return dx
        free = [c for c, _ in keep]
    return dx


class _Fast:
    """The robust method's iterations on a ``CompiledKinematics`` (world; m, rad)."""

    def __init__(self, model: CompiledKinematics, weights: Sequence[Weight] | None,
                 settings: SolverSettings, options: RobustOptions) -> None:  # fmt: skip
        self.model = model
        self.options = options
        n = self.n = model.n
        count = len(model.effectors)
        self.weights = checked_weights(weights, count)
        self.ptol = settings.position_tolerance
        self.otol = settings.orientation_tolerance
        self.lo: Coords = list(model._lo0)  # the boxes: limits and spherical angle limits
        self.hi: Coords = list(model._hi0)
        self.prismatic = [info[0] == PRISMATIC for info in model._col_info]
        self.real = [c for c in range(n) if model._col_info[c][0] != VIRTUAL]
        self.mid = [0.5 * (a + b) if math.isfinite(a) and math.isfinite(b) else None
                    for a, b in zip(self.lo, self.hi, strict=True)]  # None: no limits
        # where a cold solve from the T-pose starts: inside the limits, off mid-range (the
        # T-pose says nothing about the target and is singular for many chains)
        self.interior = [0.0 if m is None else m + INTERIOR * (b - m)
                         for m, b in zip(self.mid, self.hi, strict=True)]
        cols_of: dict[str, list[int]] = {}
        for c in range(n):
            name, k = model._col_joint[c]
            if model._col_info[c][0] == VIRTUAL:
                cols_of.setdefault(name, [0, 0, 0])[k] = c
        # per spherical joint: its three columns and whether its angles are boxed
        self.sph: list[tuple[int, tuple[int, int, int], bool]] = []
        for s, name in enumerate(model._sph_names):
            cs = cols_of[name]
            boxed = any(math.isfinite(self.lo[c]) or math.isfinite(self.hi[c]) for c in cs)
            self.sph.append((s, (cs[0], cs[1], cs[2]), boxed))
        self.free_sph = [c for _, cs, boxed in self.sph if not boxed for c in cs]
        self.theta: list[list[float]] = [[0.0, 0.0, 0.0] for _ in self.sph]
        self.scale = 1.0
        self.targets: list[tuple[tuple[float, ...], tuple[float, ...]]] = []
        self.iterations = 0
        self._chord: tuple[list[Sequence[float]], tuple[float, ...]] | None = None
        self.canonical()
        longest = 0.0
        for k in range(count):
            for col in model.jacobian_columns(k):
                longest = max(longest, math.sqrt(col[0] ** 2 + col[1] ** 2 + col[2] ** 2))
        self.scale = longest if longest > 1e-6 else 1.0
        self.single = count == 1 and self.weights[0][0] > 0 and self.weights[0][1] > 0

    # -- state ---------------------------------------------------------------------------
    def canonical(self) -> None:
        """Fold pending increments, clip into the boxes, re-derive angles and limits; FK."""
        m = self.model
        q, lo0, hi0 = m._q, m._lo0, m._hi0
        changed = False
        for c in self.real:
            v = q[c]
            if not lo0[c] <= v <= hi0[c]:
                q[c] = min(max(v, lo0[c]), hi0[c])
                changed = True
        for s, cs, boxed in self.sph:
            changed = True
            quat = m._quats[s]
            a, b, g = (q[c] for c in cs)
            if a or b or g:
                quat = quat_unit(quat_mul(quat, intrinsic_xyz(a, b, g)))
            if boxed:
                lo, hi = [lo0[c] for c in cs], [hi0[c] for c in cs]
                if _same_rotation(quat, intrinsic_xyz(*self.theta[s])):
                    theta = _box_angles(self.theta[s], lo, hi)  # keep the angles we had
                else:
                    theta = angles_in_box(quat, lo, hi)
                self._set_sph(s, cs, theta)
            else:
                m._quats[s] = quat
                for c in cs:
                    q[c] = 0.0
        if changed:
            m._fresh = False
        m.update()

    def _set_sph(self, s: int, cs: tuple[int, int, int], theta: list[float]) -> None:
        m = self.model
        self.theta[s] = theta
        m._quats[s] = intrinsic_xyz(*theta)
        for c, t in zip(cs, theta, strict=True):
            m._q[c] = 0.0
            m._lo[c] = m._lo0[c] - t
            m._hi[c] = m._hi0[c] - t

    def coords(self) -> Coords:
        """``x``: per column its value (rad, m), a boxed spherical column its angle, a free
        spherical column 0 (its increment)."""
        x = list(self.model._q)
        for s, cs, boxed in self.sph:
            if boxed:
                x[cs[0]], x[cs[1]], x[cs[2]] = self.theta[s]
        return x

    def save(self) -> tuple[object, list[list[float]]]:
        return self.model.save(), [t[:] for t in self.theta]

    def restore(self, snap: tuple[object, list[list[float]]]) -> None:
        self.model.restore(snap[0])
        self.theta = [t[:] for t in snap[1]]
        self.model.update()

    def apply(self, dx: Sequence[float]) -> None:
        """``x += dx`` (inside the boxes); free spherical increments folded; FK."""
        m = self.model
        q, lo0, hi0 = m._q, m._lo0, m._hi0
        for c in self.real:
            v = q[c] + dx[c]
            q[c] = lo0[c] if v < lo0[c] else hi0[c] if v > hi0[c] else v
        for s, cs, boxed in self.sph:
            if boxed:
                theta = [t + dx[c] for t, c in zip(self.theta[s], cs, strict=True)]
                self._set_sph(s, cs, _box_angles(theta, [lo0[c] for c in cs],
                                                 [hi0[c] for c in cs]))
            else:
                m._quats[s] = quat_unit(quat_mul(m._quats[s], intrinsic_xyz(
                    dx[cs[0]], dx[cs[1]], dx[cs[2]])))
        m._fresh = False
        m.update()

    def set_state(self, x: Coords, quats: Sequence[Quat]) -> None:
        """Put coordinates ``x`` (free spherical joints: ``quats``) into the model; FK."""
        m = self.model
        for c in self.real:
            m._q[c] = min(max(x[c], m._lo0[c]), m._hi0[c])
        for s, cs, boxed in self.sph:
            if boxed:
                self._set_sph(s, cs, _box_angles([x[c] for c in cs], [m._lo0[c] for c in cs],
                                                 [m._hi0[c] for c in cs]))
            else:
                m._quats[s] = quats[s]
                for c in cs:
                    m._q[c] = 0.0
        m._fresh = False
        m.update()

    def offsets(self, x: Coords, anchor: tuple[Coords, Sequence[Quat]]) -> list[float]:
        """Column motion from the state (``x``) to ``anchor`` (first order for free
        spherical joints: the rotation vector in the joint's frame)."""
        ax, aq = anchor
        d = [a - b for a, b in zip(ax, x, strict=True)]
        for s, cs, boxed in self.sph:
            if not boxed:
                cur = self.model._quats[s]
                rel = quat_mul((cur[0], -cur[1], -cur[2], -cur[3]), aq[s])
                d[cs[0]], d[cs[1]], d[cs[2]] = _quat_rotvec(rel)
        return d

    def anchor_of(self) -> tuple[Coords, list[Quat]]:
        """The current state as an anchor (coordinates, quaternions)."""
        return self.coords(), list(self.model._quats)

    # -- residual and Jacobian --------------------------------------------------------
    def set_targets(self, targets: Sequence[ArrayLike]) -> None:
        """World 4x4 targets (metres), one per effector."""
        if len(targets) != len(self.weights):
            raise ValueError(f"need one target per effector ({len(self.weights)})")
        self.targets = []
        for t in targets:
            (r0, r1, r2, p0), (r3, r4, r5, p1), (r6, r7, r8, p2) = np.asarray(
                t, dtype=float)[:3].tolist()
            self.targets.append(((r0, r1, r2, r3, r4, r5, r6, r7, r8), (p0, p1, p2)))

    def measure(self) -> tuple[list[float], list[tuple[float, float]], float]:
        """Weighted residual (position rows over the scale), per-effector ``(m, rad)``
        errors, and the largest counted error over its tolerance (< 1: converged)."""
        rows: list[float] = []
        per = []
        bad = 0.0
        for k, (wp, wr) in enumerate(self.weights):
            ex, ey, ez, rx, ry, rz = self.model.pose_error(k, *self.targets[k])
            pe = math.sqrt(ex * ex + ey * ey + ez * ez)
            oe = math.sqrt(rx * rx + ry * ry + rz * rz)
            per.append((pe, oe))
            if wp > 0.0:
                f = wp / self.scale
                rows += (ex * f, ey * f, ez * f)
                bad = max(bad, pe / self.ptol)
            if wr > 0.0:
                rows += (rx * wr, ry * wr, rz * wr)
                bad = max(bad, oe / self.otol)
        return rows, per, bad

    def columns(self) -> list[Sequence[float]]:
        """The weighted Jacobian by columns, in the coordinates ``x`` (world frame)."""
        model = self.model
        parts = [model.jacobian_columns(k) for k in range(len(self.weights))]
        for jac in parts:
            for s, (c1, c2, c3), boxed in self.sph:
                if boxed:  # d/d(a, b, c) of Rx(a) Ry(b) Rz(c): mix the local-axis columns
                    _, b, g = self.theta[s]
                    cb, sb, cg, sg = math.cos(b), math.sin(b), math.cos(g), math.sin(g)
                    j1, j2, j3 = jac[c1], jac[c2], jac[c3]
                    jac[c1] = tuple(cg * cb * u - sg * cb * v + sb * t
                                    for u, v, t in zip(j1, j2, j3, strict=True))
                    jac[c2] = tuple(sg * u + cg * v for u, v in zip(j1, j2, strict=True))
        f0 = self.weights[0][0] / self.scale
        if self.single:
            wr = self.weights[0][1]
            if wr == 1.0:
                return [(a * f0, b * f0, c * f0, d, e, g) for a, b, c, d, e, g in parts[0]]
            return [(a * f0, b * f0, c * f0, d * wr, e * wr, g * wr)
                    for a, b, c, d, e, g in parts[0]]
        out: list[list[float]] = [[] for _ in range(self.n)]
        for jac, (wp, wr) in zip(parts, self.weights, strict=True):
            f = wp / self.scale
            for c, col in enumerate(jac):
                if wp > 0.0:
                    out[c] += (col[0] * f, col[1] * f, col[2] * f)
                if wr > 0.0:
                    out[c] += (col[3] * wr, col[4] * wr, col[5] * wr)
        return out  # type: ignore[return-value]

    # -- one search ---------------------------------------------------------------------
    def run(self, budget: int, anchor: tuple[Coords, Sequence[Quat]] | None = None,
            settle: int = 0, chord: bool = False) -> bool:  # fmt: skip
        """LM iterations until converged (True), stalled or ``budget`` spent (best kept).

        With an ``anchor`` each step is damped toward it instead of toward no motion;
        ``settle`` more iterations then move toward it within the converged poses;
        ``chord`` tries the last Jacobian computed (by a ``chord`` run) first.
        """
        opts = self.options
        e, per, bad = self.measure()
        cost = 0.5 * sum(map(mul, e, e))
        history = [bad]
        multiplier = 1.0
        used = 0
        self.last_per = per
        while bad >= 1.0 or settle > 0:
            if bad < 1.0:
                settle -= 1
            elif used >= budget or _stalled(history):
                return False
            used += 1
            self.iterations += 1
            x = self.coords()
            d = [0.0] * self.n if anchor is None else self.offsets(x, anchor)
            if used == 1 and chord and self._chord is not None:
                # a chord step: the previous solve's last Jacobian and factor (a warm
                # frame moves little); kept only if it stays in the box and helps
                cols, low = self._chord
                r = list(e)
                for col, dj in zip(cols, d, strict=True):
                    if dj:
                        for i in range(6):
                            r[i] -= col[i] * dj
                dx = [a + b for a, b in zip(_solve6(low, cols, r), d, strict=True)]
                if all(a <= v + t <= b for v, t, a, b in zip(x, dx, self.lo, self.hi,
                                                             strict=True)):
                    before = self.save()
                    self.apply(dx)
                    e_new, per_new, bad_new = self.measure()
                    cost_new = 0.5 * sum(map(mul, e_new, e_new))
                    if cost_new < cost:
                        e, per, bad, cost = e_new, per_new, bad_new, cost_new
                        self.last_per = per
                        history.append(bad)
                        continue
                    self.restore(before)
            cols = self.columns()
            if chord and len(e) == 6 and self.n >= 6:
                low6 = _factor6(cols, opts.damping * cost + opts.damping_floor)
                self._chord = None if low6 is None else (cols, low6)
            while True:  # until a step lowers the cost
                w = multiplier * opts.damping * cost + opts.damping_floor
                dx = _bounded_step(cols, e, x, self.lo, self.hi, w, d)
                if dx is not None:
                    before = self.save()
                    self.apply(dx)
                    e_new, per_new, bad_new = self.measure()
                    cost_new = 0.5 * sum(map(mul, e_new, e_new))
                    if cost_new < cost or (bad < 1.0 and bad_new < 1.0):
                        break
                    self.model.restore(before[0])  # FK at the next apply (or below)
                    self.theta = before[1]
                multiplier *= _GROW
                if multiplier > _MAX_MULTIPLIER:
                    self.model.update()
                    return bad < 1.0
            e, per, bad, cost = e_new, per_new, bad_new, cost_new
            self.last_per = per
            multiplier = max(multiplier * _SHRINK, 1.0)
            history.append(bad)
        return True

    def at_rest(self) -> bool:
        """Whether the model is in the T-pose (every coordinate 0, identity rotations)."""
        return not any(self.coords()) and all(
            q == (1.0, 0.0, 0.0, 0.0) for q in self.model._quats)

    def margin(self, x: Coords) -> float:
        """Smallest distance to a limit over the limited coordinates, as a fraction of
        their range (0.5: all at mid-range; 1 when nothing is limited)."""
        out = 1.0
        for v, a, b in zip(x, self.lo, self.hi, strict=True):
            if math.isfinite(a) and math.isfinite(b) and b > a:
                out = min(out, (v - a) / (b - a), (b - v) / (b - a))
        return out

    def posture(self, x: Coords, gain: float) -> Coords:
        """``x`` moved ``gain`` of the way to mid-range (coordinates with two limits)."""
        return [v + gain * (m - v) if m is not None else v
                for v, m in zip(x, self.mid, strict=True)]

    def randomize(self, rng: np.random.Generator) -> None:
        """Every coordinate uniform within its box (unbounded: +-pi or +-scale m around
        it); free spherical joints a uniform random rotation; FK."""
        x = self.coords()
        lo, hi = self.lo, self.hi
        new = []
        for c in range(self.n):
            span = self.scale if self.prismatic[c] else math.pi
            a = lo[c] if math.isfinite(lo[c]) else min(x[c], hi[c]) - span
            b = hi[c] if math.isfinite(hi[c]) else max(x[c], lo[c]) + span
            new.append(float(rng.uniform(a, b)))
        quats = list(self.model._quats)
        for s, _, boxed in self.sph:
            if not boxed:
                quats[s] = quat_unit(tuple(float(v) for v in rng.normal(size=4)))
        self.set_state(new, quats)

    def result(self, converged: bool, iterations: int, restarts: int,
               per: list[tuple[float, float]] | None = None) -> RobustResult:  # fmt: skip
        """The result for the current state (``per``: its errors, if measured)."""
        per = self.measure()[1] if per is None else per
        pe = max((p for (p, _), (wp, _) in zip(per, self.weights, strict=True) if wp > 0),
                 default=0.0)
        oe = max((o for (_, o), (_, wr) in zip(per, self.weights, strict=True) if wr > 0),
                 default=0.0)
        return RobustResult(converged, iterations, pe, oe, restarts, per)

    def solve(self, budget: int, restarts: int, rng: np.random.Generator | None,
              anchor: tuple[Coords, Sequence[Quat]] | None = None, chord: bool = False
              ) -> RobustResult:  # fmt: skip
        """One solve from the model's state; a stalled search restarts ``restarts`` times
        from random states (the best state reached is kept)."""
        self.canonical()
        if restarts > 0 and anchor is None and self.at_rest():
            self.set_state(self.interior, [(1.0, 0.0, 0.0, 0.0)] * len(self.sph))
        self.iterations = 0
        converged = self.run(budget, anchor, chord=chord)
        if converged or restarts <= 0 or self.n == 0:
            return self.result(converged, self.iterations, 0, self.last_per)
        rng = np.random.default_rng(self.options.seed) if rng is None else rng
        best = (self.measure()[2], self.save())
        used = 0
        while used < restarts and not converged:
            used += 1
            self.randomize(rng)
            converged = self.run(self.options.restart_iterations)
            bad = self.measure()[2]
            if converged or bad < best[0]:
                best = (bad, self.save())
        self.restore(best[1])
        return self.result(converged, self.iterations, used)


def _same_rotation(p: Sequence[float], q: Sequence[float]) -> bool:
    """Whether two unit quaternions are the same rotation (to rounding)."""
    return abs(sum(map(mul, p, q))) > 1.0 - 1e-14


def _quat_rotvec(q: Sequence[float]) -> tuple[float, float, float]:
    """Rotation vector (rad) of a unit quaternion, the short way round."""
    w, x, y, z = q
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    s = math.sqrt(x * x + y * y + z * z)
    k = 2.0 if s < 1e-12 else 2.0 * math.atan2(s, w) / s
    return (x * k, y * k, z * k)


def _engine(model: CompiledKinematics, weights: Sequence[Weight] | None,
            settings: SolverSettings, options: RobustOptions) -> _Fast:  # fmt: skip
    """The model's float engine for these settings (kept on the model between calls)."""
    key = (None if weights is None else tuple(map(tuple, weights)),
           settings.position_tolerance, settings.orientation_tolerance, options)
    cached = getattr(model, "_robust_engine", None)
    if cached is not None and cached[0] == key:
        eng: _Fast = cached[1]
        return eng
    eng = _Fast(model, weights, settings, options)
    model._robust_engine = (key, eng)  # type: ignore[attr-defined]
    return eng


class _FastTracker:
    """A trajectory on the float engine: predicted warm starts, then repair of flips.

    Frame ``i`` starts from the parabola through ``x[i-3], x[i-2], x[i-1]`` and is damped
    toward ``x[i-1]`` moved ``track_posture`` of the way to mid-range (small null-space
    motion that drifts away from the limits); a frame that cannot be reached so is
    solved with restarts. Then at most ``options.bridges`` frames that failed or whose
    step is far above the steps around them (a flip to another family of solutions) are
    repaired: of ``bridge_candidates`` solutions of that frame, each tracked backward
    until it joins the earlier frames (or reaches frame 0) and forward until it joins
    the later ones, the smoothest replaces the frames in between. A tracked step above
    ten times the median step is a flip of the candidate itself and ends its tracking
    like a lost frame; a candidate whose forward tracking ends after ``lookahead`` frames
    is kept with that end as a later suspect; joins compare with the frames' own motion
    without the suspect steps. Frames: world; coordinates rad / m.
    """

    def __init__(self, eng: _Fast, settings: SolverSettings,
                 targets: Sequence[Sequence[ArrayLike]], rng: np.random.Generator) -> None:
        self.eng, self.settings, self.targets, self.rng = eng, settings, targets, rng
        self.frames: list[FrameSolution] = []
        self.jump = math.inf

    def snapshot(self, result: RobustResult) -> FrameSolution:
        eng = self.eng
        x = eng.coords()
        return FrameSolution(eng.model.save(), result, np.array(x), list(eng.model._quats), x)

    def load(self, sol: FrameSolution) -> None:
        """Put a frame's state back into the model (engine angles included); FK."""
        self.eng.set_state(sol.x, sol.quats)

    def step(self, index: int, prev: FrameSolution, prev2: FrameSolution | None,
             prev3: FrameSolution | None = None) -> FrameSolution:  # fmt: skip
        """Frame ``index`` warm from ``prev`` (predicted with ``prev2`` and ``prev3``: a
        line or a parabola through them), no restarts; its ``seconds`` the time taken."""
        start = perf_counter()
        sol = self._step(index, prev, prev2, prev3)
        sol.seconds = perf_counter() - start
        return sol

    def _step(self, index: int, prev: FrameSolution, prev2: FrameSolution | None,
              prev3: FrameSolution | None) -> FrameSolution:  # fmt: skip
        eng = self.eng
        px = eng.posture(prev.x, eng.options.track_posture)
        anchor = (px, prev.quats)
        budget = self.settings.max_iterations
        eng.set_targets(self.targets[index])
        if prev2 is not None:
            if prev3 is None:
                x = [2.0 * a - b for a, b in zip(prev.x, prev2.x, strict=True)]
            else:
                x = [3.0 * (a - b) + c for a, b, c in zip(prev.x, prev2.x, prev3.x, strict=True)]
            quats = [quat_unit(quat_mul(q1, quat_mul((q0[0], -q0[1], -q0[2], -q0[3]), q1)))
                     for q0, q1 in zip(prev2.quats, prev.quats, strict=True)]
            eng.set_state(x, quats)
            result = eng.solve(budget, 0, None, anchor, chord=True)
            if result.converged:
                return self.snapshot(result)
        self.load(prev)
        return self.snapshot(eng.solve(budget, 0, None, anchor))

    def cold(self, index: int, start: FrameSolution | None, random_start: bool = False,
             restarts: int | None = None) -> FrameSolution:  # fmt: skip
        """Frame ``index`` with restarts, from ``start`` (None: the model's state) or from
        a random state."""
        eng = self.eng
        if start is not None:
            self.load(start)
        if random_start:
            eng.randomize(self.rng)
        eng.set_targets(self.targets[index])
        restarts = eng.options.max_restarts if restarts is None else restarts
        budget = eng.options.restart_iterations if random_start else self.settings.max_iterations
        return self.snapshot(eng.solve(budget, restarts, self.rng))

    def first(self) -> FrameSolution:
        """Frame 0: of several solutions (the cold solve's and random restarts'), each
        moved toward mid-range within the solutions, the one farthest from the limits:
        the branch most likely to follow the whole trajectory."""
        eng = self.eng
        best = self.cold(0, None)
        if not best.result.converged or len(self.targets) == 1:  # one frame: no branch to follow
            return best
        mid = [0.5 * (a + b) if math.isfinite(a) and math.isfinite(b) else 0.0
               for a, b in zip(eng.lo, eng.hi, strict=True)]
        scored = []
        for attempt in range(eng.options.candidates + 1):
            if attempt:
                eng.randomize(self.rng)
                if not eng.run(eng.options.restart_iterations):
                    continue
            else:
                self.load(best)
            target = [m if math.isfinite(a) else v
                      for m, a, v in zip(mid, eng.lo, eng.coords(), strict=True)]
            eng.run(5, (target, list(eng.model._quats)), settle=5)
            if eng.measure()[2] < 1.0:
                sol = self.snapshot(eng.result(True, best.result.iterations, attempt))
                scored.append((eng.margin(eng.coords()), attempt, sol))
        return max(scored, key=lambda t: (t[0], -t[1]))[2] if scored else best

    def run(self, progress: Progress | None) -> list[FrameSolution]:
        total = len(self.targets)
        frames = self.frames
        failing = 0  # frames in a row that the restarts could not reach either
        for index in range(total):
            start = perf_counter()
            if index == 0:
                sol = self.first()
            else:
                sol = self.step(index, frames[-1], frames[-2] if index > 1 else None,
                                frames[-3] if index > 2 else None)
                # restarts on the first lost frame, then on every 10th of a run of
                # unreachable ones (a target out of reach costs ~1,000 iterations a probe)
                if not sol.result.converged and failing % 10 == 0:
                    retry = self.cold(index, frames[-1],
                                      restarts=self.eng.options.probe_restarts)
                    if retry.result.converged or not failing:
                        sol = retry
                failing = 0 if sol.result.converged else failing + 1
            sol.seconds = perf_counter() - start
            frames.append(sol)
            if progress is not None:
                progress(index + 1, total)
        self.repair()
        return frames

    # -- repair -------------------------------------------------------------------------
    def steps(self, frames: Sequence[FrameSolution] | None = None) -> list[float]:
        """Largest coordinate change into each frame (rad, m; the first: 0)."""
        frames = self.frames if frames is None else frames
        out = [0.0]
        for a, b in zip(frames, frames[1:], strict=False):
            out.append(_gap(a, b))
        return out

    def suspect(self, steps: list[float], start: int) -> int | None:
        """The first frame from ``start`` that failed or whose step is far above the
        steps around it (a flip to another family of solutions)."""
        frames = self.frames
        for i in range(max(start, 1), len(frames)):
            if not frames[i].result.converged:
                return i
            around = sorted(steps[max(1, i - 8):i] + steps[i + 1:i + 9])
            usual = around[len(around) // 2] if around else 0.0
            if steps[i] > 10.0 * usual + 0.05:
                return i
        return None

    def repair(self) -> None:
        """Bridge suspect frames (class docstring), at most ``options.bridges`` of them."""
        start, budget = 1, self.eng.options.bridges
        steps = self.steps()
        usual = sorted(steps[1:])[len(steps) // 2] if len(steps) > 2 else 0.0
        self.jump = 10.0 * usual + 0.05  # a tracked step above this is a flip
        while budget > 0:
            i = self.suspect(steps, start)
            if i is None:
                return
            budget -= 1
            if self.bridge(i, steps):
                steps = self.steps()
            start = i + 1

    def bridge(self, i: int, steps: list[float]) -> bool:
        """Replace the frames around suspect ``i`` by the smoothest of several solutions
        of frame ``j`` (``i`` or the first converged frame after it), each tracked
        backward until it joins the earlier frames (or reaches frame 0) and forward until
        it joins the later ones. True when something was replaced."""
        frames, opts = self.frames, self.eng.options
        j = i
        while j < len(frames) and not frames[j].result.converged:
            j += 1
        old_worst = max(steps[max(1, i - 1):j + 2], default=0.0)
        if j == len(frames):
            if j - i < 2:
                return False
            j, old_worst = i - 1, math.inf  # a failing tail: track it again from before
        steps = list(steps)  # the frames' own motion, without the suspect steps
        steps[i:j + 2] = [0.0] * len(steps[i:j + 2])
        cands = [frames[j]]
        for _ in range(opts.bridge_candidates):
            cand = self.cold(j, frames[j - 1] if j else None, random_start=True, restarts=2)
            if cand.result.converged:
                cands.append(cand)
        best: tuple[float, int, list[FrameSolution], int] | None = None
        for cand in cands:
            back_worst, first, back = self.backward(j, cand, steps)
            fwd_worst, fwd = self.forward(j, cand, steps)
            worst = max(back_worst, fwd_worst)
            if best is None or worst < best[0]:
                best = (worst, first, back + fwd, j + 1 + len(fwd))
        if best is None or not best[0] < old_worst:
            return False
        _, first, chain, end = best
        frames[first:end] = chain
        return True

    def backward(self, j: int, cand: FrameSolution, steps: list[float]
                 ) -> tuple[float, int, list[FrameSolution]]:  # fmt: skip
        """Track ``cand`` (frame ``j``) backward until it joins the solved frames:
        ``(largest step of the joined path there, first frame replaced, solutions of
        frames first .. j)``."""
        frames = self.frames
        chain = [cand]  # chain[t] solves frame j - t
        worst = 0.0
        for k in range(j - 1, max(-1, j - 1 - self.eng.options.lookback), -1):
            sol = self.step(k, chain[-1], chain[-2] if len(chain) > 1 else None)
            if not sol.result.converged or _gap(sol, chain[-1]) > self.jump:
                break
            worst = max(worst, _gap(sol, chain[-1]))
            chain.append(sol)
            if k == 0:
                return worst, 0, chain[::-1]
            join = _gap(frames[k - 1], sol)
            if frames[k - 1].result.converged and join <= _own(steps, k - 1):
                return max(worst, join), k, chain[::-1]
        k = j - len(chain) + 1  # the earliest frame solved: joins frame k - 1 as it can
        join = _gap(frames[k - 1], chain[-1]) if k > 0 else 0.0
        return max(worst, join), k, chain[::-1]

    def forward(self, j: int, cand: FrameSolution, steps: list[float]
                ) -> tuple[float, list[FrameSolution]]:  # fmt: skip
        """Track ``cand`` (frame ``j``) forward until it joins the solved frames:
        ``(largest step there, solutions of frames j + 1 ..)``."""
        frames, opts = self.frames, self.eng.options
        if cand is frames[j]:
            return (_gap(cand, frames[j + 1]) if j + 1 < len(frames) else 0.0), []
        chain = [cand]
        worst = 0.0
        for k in range(j + 1, min(len(frames), j + 1 + opts.lookback)):
            sol = self.step(k, chain[-1], chain[-2] if len(chain) > 1 else None)
            if not sol.result.converged or _gap(sol, chain[-1]) > self.jump:
                # this branch ends: a later suspect if kept
                return (worst if k - j - 1 >= opts.lookahead else math.inf), chain[1:]
            worst = max(worst, _gap(chain[-1], sol))
            chain.append(sol)
            if frames[k].result.converged and _gap(sol, frames[k]) <= _own(steps, k):
                return worst, chain[1:]
        end = j + len(chain)
        join = _gap(chain[-1], frames[end]) if end < len(frames) else 0.0
        return max(worst, join), chain[1:]


def _gap(a: FrameSolution, b: FrameSolution) -> float:
    """Largest coordinate difference between two frames (rad, m)."""
    return max(map(abs, map(float.__sub__, a.x, b.x)), default=0.0)


def _own(steps: list[float], k: int) -> float:
    """The solved frames' own motion around frame ``k``: the largest step nearby."""
    return max(steps[max(1, k - 2):k + 3], default=0.0)
