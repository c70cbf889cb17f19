"""Trajectories on the robust engine: predicted warm starts, then repair of flips."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ...floatmath import Quat, quat_mul, quat_unit
from ..kinematics import CoordinateModel
from ..settings import SolverSettings
from .engine import Engine, engine_for
from .options import RobustOptions, RobustResult, Weight

Array = NDArray[np.float64]


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



class Tracker:
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

    def __init__(self, eng: Engine, settings: SolverSettings,
                 targets: Sequence[Sequence[ArrayLike]], rng: np.random.Generator,
                 head: Sequence[FrameSolution] = (), frozen: int = 0,
                 keep_start: bool = False) -> None:  # fmt: skip
        self.eng, self.settings, self.targets, self.rng = eng, settings, targets, rng
        # ``head``: frames of ``targets[:len(head)]`` solved before (the end of the
        # previous window); tracking goes on from them, and repair replaces none of the
        # first ``frozen`` of them (already handed on)
        self.frames: list[FrameSolution] = list(head)
        self.frozen = frozen
        # ``keep_start``: frame 0 is the solution reached from the model's state (the
        # pose before the frames, which a re-baked part of an animation continues), not
        # the branch farthest from the limits, and repair keeps it
        self.keep_start = keep_start
        self.jump = math.inf

    def snapshot(self, result: RobustResult) -> FrameSolution:
        eng = self.eng
        x = eng.coords()
        return FrameSolution(eng.model.save(), result, np.array(x), list(eng.model.quats), x)

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
        mid = [0.5 * a + 0.5 * b if math.isfinite(a) and math.isfinite(b) else 0.0
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
            eng.run(5, (target, list(eng.model.quats)), settle=5)
            if eng.measure()[2] < 1.0:
                sol = self.snapshot(eng.result(True, best.result.iterations, attempt))
                scored.append((eng.margin(eng.coords()), attempt, sol))
        return max(scored, key=lambda t: (t[0], -t[1]))[2] if scored else best

    def run(self, progress: Progress | None) -> list[FrameSolution]:
        """Solve the frames after the head in order, then repair; all frames, head first."""
        total = len(self.targets)
        frames = self.frames
        failing = 0  # frames in a row that the restarts could not reach either
        for index in range(len(frames), total):
            start = perf_counter()
            if index == 0 and self.keep_start:
                sol = self.cold(0, None)
                if sol.result.converged:
                    self.frozen = max(self.frozen, 1)
            elif index == 0:
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
        start, budget = max(1, self.frozen), self.eng.options.bridges
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
            if j - i < 2 or i - 1 < self.frozen:
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
        floor = self.frozen  # the head's frames stay
        for k in range(j - 1, max(floor - 1, j - 1 - self.eng.options.lookback), -1):
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


class _Window(Sequence[Sequence[ArrayLike]]):
    """``targets[start:stop]`` without a copy (targets may be a lazy sequence)."""

    def __init__(self, targets: Sequence[Sequence[ArrayLike]], start: int, stop: int) -> None:
        self.targets, self.start, self.stop = targets, start, stop

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, i: Any) -> Any:  # an int (the Tracker's use)
        if not 0 <= i < self.stop - self.start:
            raise IndexError(i)
        return self.targets[self.start + i]


def tracked_frames(
    eng: Engine,
    settings: SolverSettings,
    targets: Sequence[Sequence[ArrayLike]],
    rng: np.random.Generator,
    progress: Progress | None = None,
    keep_start: bool = False,
) -> Iterator[FrameSolution]:
    """The :class:`Tracker`'s frames in order, ``options.window`` new frames at a time
    (``keep_start``: see :class:`Tracker`).

    A trajectory of at most ``window`` frames is one tracker. A longer one is tracked a
    window at a time, each repaired before the next, so memory holds one window's
    solutions however long the bake: a window goes on from the last ``lookback + 3``
    frames of the one before (repair may still replace all but the first three of them)
    and hands the rest on.
    """
    opts = eng.options
    total = len(targets)
    hold = opts.lookback + 3
    window = max(opts.window, hold, 1)
    head: list[FrameSolution] = []
    frozen = base = 0  # head[:frozen] handed on; head[0] is frame ``base``
    while True:
        stop = min(total, base + len(head) + window)
        local = None if progress is None else (
            lambda done, _n, b=base: progress(b + done, total))
        frames = Tracker(eng, settings, _Window(targets, base, stop), rng, head,
                         frozen, keep_start and not head).run(local)
        if stop == total:
            yield from frames[frozen:]
            return
        keep = min(hold, len(frames))
        yield from frames[frozen:len(frames) - keep + 3]
        head, frozen, base = frames[len(frames) - keep:], 3, base + len(frames) - keep
        del frames


def solve_trajectory(
    model: CoordinateModel,
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
    from the previous frame's solution (package docstring), or, with ``cold_start``,
    every frame from the T-pose with restarts, as :func:`solve_robust` alone would.
    Restarts draw from ``default_rng(options.seed)``: the same call gives the same
    result. Returns one :class:`FrameSolution` per frame; the model is left in the last
    frame's state. :func:`trajectory_frames` gives the same frames one at a time.
    """
    frames = list(trajectory_frames(model, targets, settings, weights=weights,
                                    options=options, cold_start=cold_start,
                                    progress=progress))
    if frames:
        model.restore(frames[-1].state)
        model.update()
    return frames


def trajectory_frames(
    model: CoordinateModel,
    targets: Sequence[Sequence[ArrayLike]],
    settings: SolverSettings | None = None,
    *,
    weights: Sequence[Weight] | None = None,
    options: RobustOptions | None = None,
    cold_start: bool = False,
    progress: Progress | None = None,
    keep_start: bool = False,
) -> Iterator[FrameSolution]:
    """:func:`solve_trajectory`'s frames as a generator: a frame is handed on once its
    window is repaired (:func:`tracked_frames`), so a caller that keeps only what it
    needs of each frame holds one window in memory. The model's state afterwards is
    the solver's: restore the last frame's ``state`` to pose it. ``keep_start``: frame
    0 is the solution reached from the model's state (the pose before the frames), kept
    by repair, instead of the branch farthest from the limits."""
    if not isinstance(model, CoordinateModel):
        raise TypeError("the robust method needs a compiled model (model.compiled)")
    settings = settings or SolverSettings()
    options = options or RobustOptions()
    rng = np.random.default_rng(options.seed)
    eng = engine_for(model, weights, settings, options)
    if not cold_start:
        yield from tracked_frames(eng, settings, targets, rng, progress, keep_start)
        return
    for index, frame_targets in enumerate(targets):
        model.reset()
        eng.set_targets(frame_targets)
        result = eng.solve(settings.max_iterations, options.max_restarts,
                           np.random.default_rng(options.seed))
        yield FrameSolution(model.save(), result, np.array(eng.coords()), list(model.quats))
        if progress is not None:
            progress(index + 1, len(targets))
