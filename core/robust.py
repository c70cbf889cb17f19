"""The robust IK method (issue 5): Levenberg-Marquardt on any ``Kinematics`` model.

Frames: world. Units: metres and radians (prismatic columns in metres). One solve drives
one or more effectors at once: their weighted error rows are stacked into one residual
and one Jacobian, so joints shared by several effectors get one update.

One solve (:func:`solve_robust`), per iteration:

- damping adapts to the error (Chan): ``W = damping * E + damping_floor`` with
  ``E = |e|^2 / 2`` over the weighted residual; a step that does not lower ``E`` is
  rejected and the damping multiplied by 10, an accepted step halves it again;
- limits as in Blender's Standard solver: a column whose step would cross its limit is
  clamped to the limit and its column removed, and the rest of the step is solved again
  for the error left, so every step stays a damped descent step within the limits;
- with a ``previous`` pose (trajectories) the step is damped toward that pose instead of
  toward no motion, ``min |J dq - e|^2 + W |dq - d|^2`` with ``d`` the way back to
  ``previous``: as ``W -> 0`` this is the pseudo-inverse step plus the projection of
  ``d`` on the Jacobian's null space, so redundant joints stay where they were. The
  first step also moves, within the null space, the limited joints toward mid-range
  (``posture``), at most ``rate`` times as far as the step itself: redundant chains do
  not creep into their limits, and never move faster than the target makes them;
- a search that stalls (no acceptable step, or no progress) restarts from a random
  configuration within the limits, drawn from ``numpy.random.default_rng(seed)``.

Position rows are divided by a length scale (the largest distance from a joint axis to
an effector at the start, metres), so damping and weights compare metres with radians on
chains of any size; tolerances stay absolute (m, rad).

A trajectory (:func:`solve_trajectory`) is solved frame by frame, each frame from the
previous one. When a frame cannot be reached from there (the chain followed a family of
solutions that ends), random restarts find solutions of that frame, each is tracked
backward, pulled toward the frames already solved, and the one that joins them (or
reaches frame 0) replaces the frames in between: the animation does not flip.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .joints import JointNode
from .kinematics import Kinematics, ObjectKinematics
from .rotations import matrix_to_rotvec
from .solver import SolveResult, SolverSettings

Array = NDArray[np.float64]
Weight = tuple[float, float]  # (position weight, orientation weight), >= 0
Measure = tuple[Array, list[tuple[float, float]]]  # residual, per-effector (m, rad)

_GROW = 10.0  # damping factor after a rejected step
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
    rate: float = 0.5  # that pull's largest move relative to the step's largest
    seed: int = 0  # of numpy.random.default_rng when no rng is passed
    candidates: int = 16  # trajectories: restarts tried to bridge a lost frame
    probe_restarts: int = 20  # trajectories: restarts deciding a frame is unreachable
    lookahead: int = 60  # trajectories: frames a bridging candidate must survive


@dataclass
class RobustResult(SolveResult):
    """A :class:`SolveResult` with the restarts used and each effector's errors (m, rad).

    ``position_error`` / ``orientation_error`` are the maxima over the effectors whose
    position / orientation counts (weight > 0); ``effector_errors`` holds every
    effector's actual ``(position_error, orientation_error)``, ignored parts included.
    """

    restarts: int = 0
    effector_errors: list[tuple[float, float]] = field(default_factory=list)


class _Problem:
    """The stacked, weighted residual and Jacobian of every effector (world frame)."""

    def __init__(
        self, model: Kinematics, weights: Sequence[Weight] | None, settings: SolverSettings
    ) -> None:
        count = len(model.effectors)
        self.model = model
        self.weights = [(1.0, 1.0)] * count if weights is None else [
            (float(wp), float(wr)) for wp, wr in weights
        ]
        if len(self.weights) != count:
            raise ValueError(f"need one weight pair per effector ({count})")
        if any(not (w >= 0.0 and math.isfinite(w)) for pair in self.weights for w in pair):
            raise ValueError("weights must be finite and >= 0")
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
    restarts. Without it, a stalled solve restarts from random configurations within
    the limits (``options.max_restarts``) drawn from ``rng`` (default
    ``default_rng(options.seed)``). The model is left in the best state found, FK
    current.
    """
    settings = settings or SolverSettings()
    options = options or RobustOptions()
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
    model.update()
    problem = _Problem(model, weights, settings)
    rng = np.random.default_rng(options.seed)
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
