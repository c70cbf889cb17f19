"""Flip-free trajectories on the batched LM: the self-motion sampled by grid tracks, a
least-motion path through them found lazily, and every frame filled in by bisection.

Frames: world; units: metres, radians. The bake knows every target in advance, so the
trajectory is solved as one problem (``solve_track``):

1. coarse frames: at most ``stride`` frames apart, closer where the targets move fast;
2. candidates per coarse frame (``coarse="grid"``, the default): on a redundant chain
   (more columns than counted error rows) a few columns are locked in turn, each on a
   grid of values over its range; every cell holds up to ``candidates`` tracks (one per
   branch found) in which the other columns solve the rest. All tracks advance together,
   one batch per coarse frame, from their linear extrapolation, pulled toward their
   previous solution (least motion). Dead cells grow back from live tracks whose value
   of the locked column is near (the self-motion manifold grown along itself, each grid
   filling in where another folds) and from random restarts now and then. The pass runs
   forward and backward, so parts of the self-motion that are reachable only later are
   followed back. Segments of the coarse frames run side by side (lanes) where the
   self-motion has one dimension; with more (a position-only target on a 7-DoF arm,
   two arms on one solved joint) a grid cell is not a point, lanes would meet where
   their tracks differ, and the whole clip is one lane. Without redundancy the cells
   are the branches found by restarts;
3. the path: dynamic programming over this ladder graph (as ROS-Industrial's Descartes
   planner does over IK solutions) for the least sum of the ``power``-th power of the
   largest column step per frame (nearly least-max). An edge's first cost is a lower
   bound from its ends; every edge of the path chosen is then taken one bisection level
   further (all in one batch: the midpoints first, then every frame left; each frame
   from the straight line between its known neighbours, pulled toward it in the null
   space), and the lower bound its known frames now give replaces its cost (exact once
   it is filled); the path is chosen again until every edge of it has been filled: a
   branch switch hidden between two coarse frames shows in its fill and is avoided, and
   an edge the search leaves behind has cost a midpoint, not every frame;
4. frames whose step from the previous frame is still a jump (more than ``flip_factor``
   times the median step of the ten frames on each side) are reported: no continuous
   path was found there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .batched import (
    REVOLUTE,
    BatchedKinematics,
    BatchOptions,
    Index,
    Problem,
    cold_start,
    levenberg_marquardt,
    on_target,
    random_starts,
    rotvec,
    search_limits,
    t_pose,
)

Array = NDArray[np.float64]

# LM runs that may converge slowly (a closest approach, a continuation from a nearby
# pose) stop only when their error has not halved in this many iterations
SLOW_STALL_WINDOW = 10


@dataclass(frozen=True)
class TrackOptions:
    """Knobs of :func:`solve_track` (tolerances in m and rad)."""

    position_tolerance: float = 1e-5
    orientation_tolerance: float = 1e-4
    stride: int = 32  # most frames between coarse frames
    coarse_motion: float = 0.6  # most target motion between coarse frames (see above)
    retries: int = 1  # passes with coarse frames twice as dense, after jumps
    grid: int = 32  # redundant chains: values on the grid of each locked column
    free: tuple[int, ...] = ()  # the columns locked in turn (empty: chosen)
    free_count: int = 4  # how many columns are locked in turn when chosen
    candidates: int = 1  # tracks per grid cell
    branches: int = 4  # tracks of a chain without redundancy (no grid)
    both_ways: bool = True  # also track each segment backward from its last frame
    lanes: int = 8  # segments of the coarse frames tracked side by side
    lane_frames: int = 12  # fewest coarse frames per segment
    iterations: int = 15  # LM budget of a tracking step or a fill level
    restart_rows: int = 4  # random starts per dead track at a lane's first frame
    reseed_every: int = 16  # coarse frames between random re-seeding of dead tracks
    reseed_rows: int = 2  # random starts per dead track when re-seeding
    reseed_cap: int = 64  # random starts at most per re-seeding (after frame 0)
    reseed_iterations: int = 20  # LM budget of a random start
    lateral_sweeps: int = 1  # rounds of growing dead cells from live tracks per frame
    lateral_sources: int = 1  # live tracks each dead cell is tried from
    lateral_iterations: int = 8  # LM budget of a lateral start
    lateral_wait: int = 3  # coarse frames a cell that failed to grow waits
    fill_levels: int = 1  # bisection levels of a fill before the rest at once
    power: float = 8.0  # path cost: sum of the largest column step to this power
    path_rounds: int = 100  # lazy path search: rounds of filling the chosen edges
    flip_factor: float = 2.5  # reported jump: this many times its neighbours' median step
    max_iterations: int = 100  # most iterations of any one LM run (caps the budgets above)
    # an LM row that has not halved its error over this many iterations stops (a track
    # running into a fold of its cell dies early instead of using the whole budget)
    stall_window: int = 4
    seed: int = 0


@dataclass
class TrackResult:
    """Per frame: coordinates (F, n), converged (F,), each effector's errors (F, m) (m,
    rad); ``jumps``: frames whose step from the previous frame is a jump that no
    continuous path avoided (the target path forces it, as far as the search tells);
    ``iterations`` (F,): the LM iterations spent on the frame over every pass (its
    candidates, fills and retries), the work the frame cost."""

    q: Array
    converged: NDArray[np.bool_]
    position_error: Array
    orientation_error: Array
    jumps: list[int] = field(default_factory=list)
    iterations: NDArray[np.int64] = field(
        default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass
class _Fill:
    """An edge's frames, filled by bisection: coordinates (L + 1, n) from its first frame
    ``first``, converged, errors (L + 1, m) (m, rad), which frames are known yet, and
    the bisection levels done."""

    first: int
    q: Array
    conv: NDArray[np.bool_]
    pe: Array
    re: Array
    have: NDArray[np.bool_]
    level: int = 0

    @property
    def done(self) -> bool:
        return bool(self.have.all())


class _Ladder:
    """Dynamic programming over the ladder graph: per coarse frame the candidate of the
    path of least summed edge cost (``edges`` from :meth:`_Track.edge_costs`, entry i
    (to, from) into coarse frame i, measured costs written over the estimates) and node
    ``penalty`` (per coarse frame and node: 1e6 for an unconverged one, else 0). The
    forward pass is kept between rounds: after :meth:`touch` (i) it is redone from
    coarse frame i on only."""

    def __init__(self, edges: list[Array], nodes: list[Index], penalty: list[Array]) -> None:
        self.edges, self.nodes, self.penalty = edges, nodes, penalty
        self.cost: list[Array] = [penalty[0]] * len(nodes)  # least cost into each node
        self.back: list[Index] = [np.zeros(0, dtype=np.intp)] * len(nodes)
        self.dirty = 1  # the first coarse frame whose forward pass is out of date
        self.rows = [np.arange(len(nd)) for nd in nodes]

    def touch(self, i: int) -> None:
        """The costs of edges into coarse frame ``i`` have changed."""
        self.dirty = min(self.dirty, i)

    def path(self) -> Index:
        """Per coarse frame the chosen candidate (C,)."""
        c = len(self.nodes)
        for i in range(self.dirty, c):
            total = self.edges[i] + self.cost[i - 1]  # (to, from)
            best = total.argmin(axis=1)
            self.back[i] = best
            self.cost[i] = total[self.rows[i], best] + self.penalty[i]
        self.dirty = c
        pos = int(np.argmin(self.cost[-1]))
        path = np.zeros(c, dtype=int)
        for i in range(c - 1, -1, -1):
            path[i] = self.nodes[i][pos]
            if i > 0:
                pos = int(self.back[i][pos])
        return path


class _Track:
    def __init__(self, model: BatchedKinematics, targets: ArrayLike,
                 weights: Sequence[tuple[float, float]] | None, options: TrackOptions,
                 held: ArrayLike | None = None) -> None:  # fmt: skip
        self.model = model
        self.opts = options
        self.batch = BatchOptions(position_tolerance=options.position_tolerance,
                                  orientation_tolerance=options.orientation_tolerance,
                                  stall_window=options.stall_window, seed=options.seed)
        self.problem = Problem(model, targets, weights, self.batch, held)
        self.solved = ~model.held  # the columns the path's motion is measured on
        self.frames = self.problem.count
        self.work = np.zeros(self.frames, dtype=np.int64)  # LM iterations per frame
        self.rng = np.random.default_rng(options.seed)
        lo, hi = search_limits(model)
        finite = np.isfinite(lo) & np.isfinite(hi)
        self.mid = 0.5 * (np.where(finite, lo, 0.0) + np.where(finite, hi, 0.0))
        self.finite = finite
        # the range a locked column is gridded over: its limits, or a turn for a hinge
        # without limits (sliders without limits are never locked)
        turn = model.kinds == REVOLUTE
        self.grid_lo = np.where(finite, np.where(finite, lo, 0.0), np.where(turn, -np.pi, 0.0))
        self.grid_hi = np.where(finite, np.where(finite, hi, 0.0), np.where(turn, np.pi, 0.0))
        self.grid_ok = (finite | turn) & ~model.held
        # hinges without limits (held columns keep the values they are given)
        self.wrap = turn & ~np.isfinite(lo) & ~np.isfinite(hi) & ~model.held

    def lm(self, rows: Index, start: Array, pull: Array | None, budget: int | None = None,
           frozen: NDArray[np.bool_] | None = None
           ) -> tuple[Array, NDArray[np.bool_], Array, Array]:  # fmt: skip
        o = self.opts
        res = levenberg_marquardt(self.model, self.problem, start,
                                  min(budget or o.iterations, o.max_iterations), rows=rows,
                                  pull=pull, frozen=frozen)
        np.add.at(self.work, rows, res.iterations)
        return res.q, res.converged, res.position_error, res.orientation_error

    # -- 1'. the self-motion sampled: tracks with one joint locked on a grid -------------
    def seeds(self, frame: int, count: int, keep: Array | None = None) -> Array:
        """Up to ``count`` distinct converged solutions of ``frame`` from restarts (far
        from ``keep``'s rows first); may be fewer (none when none converged)."""
        starts = random_starts(self.model, 16, self.rng, self.problem.scale)
        if keep is None:
            starts = np.vstack([cold_start(self.model)[None], starts])
        rows = np.full(len(starts), frame)
        q, ok, _, _ = self.lm(rows, starts, None, 60)
        sols = q[ok]
        chosen: list[Array] = [] if keep is None else list(keep)
        base = len(chosen)
        if keep is None and len(sols):  # first: the one farthest from the limits
            chosen.append(sols[int(np.argmax(self.margin(sols)))])
        while len(chosen) - base < count and len(sols):
            dist = np.min([np.max(np.abs(sols - c), axis=1) for c in chosen], axis=0) \
                if chosen else np.full(len(sols), np.inf)
            j = int(np.argmax(dist))
            if dist[j] < 1e-3:
                break
            chosen.append(sols[j])
        return np.array(chosen[base:]) if len(chosen) > base else np.zeros((0, self.model.n))

    def margin(self, q: Array) -> Array:
        """Per row: the smallest distance to a limit relative to the half-range (columns
        without a range, or locked, do not count)."""
        ranged = self.finite & (self.model.hi > self.model.lo)
        half = np.where(ranged, 0.5 * (np.where(ranged, self.model.hi, 1.0)
                                       - np.where(ranged, self.model.lo, -1.0)), np.inf)
        return np.min(1.0 - np.abs(q - self.mid) / half, axis=1)

    def coarse_frames(self, stride: int) -> Index:
        """Coarse frames: at most ``stride`` apart, closer where the targets move fast
        (at most ``coarse_motion`` of target motion apart: position over the chain's
        length scale plus rotation angle, the largest over the effectors)."""
        pr = self.problem
        dp = np.linalg.norm(np.diff(pr.t_pos, axis=-1), axis=1) / pr.scale  # (m, F-1)
        rel = np.einsum("milk,mjlk->ijmk", pr.t_rot[..., 1:], pr.t_rot[..., :-1])
        da = np.linalg.norm(rotvec(rel), axis=0)  # (m, F-1)
        move = np.max(dp + da, axis=0) if dp.size else np.zeros(0)
        frames, acc, last = [0], 0.0, 0
        for f in range(1, self.frames):
            acc += move[f - 1]
            if f - last >= stride or acc >= self.opts.coarse_motion or f == self.frames - 1:
                frames.append(f)
                acc, last = 0.0, f
        return np.array(frames)

    def redundancy(self) -> int:
        """Solved columns beyond the counted error rows (3 per position, 3 per orientation
        with a weight above 0): the dimension of the self-motion, where it is regular."""
        rows = int(3 * self.problem.count_p.sum() + 3 * self.problem.count_r.sum())
        return int(np.count_nonzero(self.solved)) - rows

    def free_columns(self, sols: Array, count: int) -> list[int]:
        """Up to ``count`` columns to lock on a redundant chain (more columns than counted
        error rows), judged at the solutions ``sols`` (k, n): those whose removal leaves
        the best conditioned rest (largest smallest singular value, median over the
        samples). Empty for a chain without redundancy. Sliders without limits are
        never locked."""
        solved = np.flatnonzero(self.solved)  # held columns never move
        if self.redundancy() < 1 or len(sols) == 0:
            return []
        _, _, jac = self.model.pose_jacobian_t(np.ascontiguousarray(sols.T))
        counted = self.problem.row_w > 0  # a weight of 0 leaves its rows out
        jw = (jac.reshape(len(self.problem.row_w), self.model.n, -1)
              * self.problem.row_w[:, None, None]
              * self.problem.col_scale[None, :, None])[counted][:, solved]
        score = np.full(self.model.n, -1.0)
        for k, c in enumerate(solved):
            rest = np.delete(jw, k, axis=1)
            score[c] = float(np.median([np.linalg.svd(rest[:, :, j], compute_uv=False)[-1]
                                        for j in range(jw.shape[-1])]))
        score[~self.grid_ok] = -1.0
        order = [int(c) for c in np.argsort(-score, kind="stable") if score[c] > 0]
        return order[:count]

    def grid_tracks(self, stride: int, start: Array | None = None, end: Array | None = None
                    ) -> tuple[Index, Array, NDArray[np.bool_]]:  # fmt: skip
        """Grid tracks through the coarse frames in lanes run side by side (one batch):
        the coarse frames are cut into up to ``lanes`` segments (one segment when the
        self-motion has more than one dimension: see below), each tracked forward
        from its first frame and, with ``both_ways``, backward from its last (parts of
        the self-motion that become reachable only later are followed back in time).
        Every lane's tracks are candidates of the frames it passes; with ``start`` (n,),
        a solution of frame 0, one more track follows it from there (no column locked),
        and with ``end``, a solution of the last frame, one more back from there.
        Returns the coarse frames (C,), coordinates (C, N, n) and converged (C, N)."""
        o = self.opts
        frames = self.coarse_frames(stride)
        probe = self.seeds(0, 4)
        frees = list(o.free) if o.free else self.free_columns(probe, o.free_count)
        c = len(frames)
        # lanes meet where one lane's tracks reach the points the next one's start from:
        # with a self-motion of one dimension a grid cell is a point (per branch), with
        # more it is not, and the path would jump where lanes meet: one lane then
        parts = max(1, min(o.lanes, (c - 1) // max(o.lane_frames, 1)))
        if self.redundancy() > 1:
            parts = 1
        bounds = np.linspace(0, c - 1, parts + 1).round().astype(int)
        lanes: list[Index] = []
        for p in range(parts):
            seg = np.arange(bounds[p], bounds[p + 1] + 1)
            lanes.append(seg)
            if o.both_ways and len(seg) > 1:
                lanes.append(seg[::-1])
        anchors = [] if start is None else [(0, start)]
        if end is not None and lanes[-1][0] == c - 1:  # a lane that starts at the end
            anchors.append((len(lanes) - 1, end))
        qs, oks = self.grid_pass(frames, lanes, frees, anchors)
        return frames, qs, oks

    def grid_pass(self, frames: Index, lanes: list[Index], frees: list[int],
                  anchors: Sequence[tuple[int, Array]] = ()
                  ) -> tuple[Array, NDArray[np.bool_]]:  # fmt: skip
        """Coarse tracks along each lane (coarse indices into ``frames``, in order), all
        lanes advancing together. On a redundant chain: for each free column in
        ``frees``, one track per value of a grid over its range (that column locked, the
        others solving the rest) and per branch, so that the self-motion is sampled where
        any one column folds; otherwise ``branches`` tracks. Dead tracks grow back from
        live ones of their lane and from random restarts now and then. Each of
        ``anchors``, ``(lane, q)`` with ``q`` a solution of the lane's first coarse
        frame, adds a slot that follows ``q`` along that lane (no column locked, never
        grown back). Returns coordinates (C, N, n) and converged (C, N) (False where a
        lane does not pass)."""
        o, model = self.opts, self.model
        per = o.candidates if frees else o.branches
        if frees:
            g = o.grid
            vals, cols = [], []
            for c in frees:
                lo, hi = self.grid_lo[c], self.grid_hi[c]
                vals.append(lo + (np.arange(g) + 0.5) / g * (hi - lo))
                cols.append(np.full(g, c))
            value0 = np.repeat(np.concatenate(vals), per)
            col0 = np.repeat(np.concatenate(cols), per)
        else:
            g = 1
            value0 = np.zeros(per)
            col0 = np.full(per, -1)
        width = len(value0)  # slots per lane
        nl = len(lanes)
        cell_value, slot_col = np.tile(value0, nl), np.tile(col0, nl)
        lane_of = np.repeat(np.arange(nl), width)
        frozen = None
        if frees:
            frozen = np.zeros((len(slot_col), model.n), dtype=bool)
            frozen[np.arange(len(slot_col)), slot_col] = True
        extra = len(cell_value) + np.arange(len(anchors))  # the anchors' slots
        if anchors:
            count = len(anchors)
            cell_value = np.append(cell_value, np.zeros(count))
            slot_col = np.append(slot_col, np.full(count, -1))
            lane_of = np.append(lane_of, [lane for lane, _ in anchors])
            if frozen is not None:
                frozen = np.vstack([frozen, np.zeros((count, model.n), dtype=bool)])
        self.cells = (g, per, slot_col, cell_value, lane_of)
        slots = len(cell_value)
        self._wait = np.zeros(slots, dtype=int)  # lateral growth: not tried before this
        self.growable = np.ones(slots, dtype=bool)  # dead slots that may grow back
        q = np.zeros((slots, model.n))
        ok = np.zeros(slots, dtype=bool)
        prev = np.zeros_like(q)
        for slot, (_, pose) in zip(extra, anchors, strict=True):
            q[slot], prev[slot], ok[slot] = pose, pose, True
            self.growable[slot] = False
        qs = np.zeros((len(frames), slots, model.n))
        oks = np.zeros((len(frames), slots), dtype=bool)
        lengths = np.array([len(lane) for lane in lanes])
        for i in range(int(lengths.max())):
            running = i < lengths
            at = np.array([lane[min(i, len(lane) - 1)] for lane in lanes])  # coarse index
            slot_frame = frames[at][lane_of]
            active = running[lane_of]
            sweeps = o.lateral_sweeps
            if i > 0:
                # one batch: the live tracks from their extrapolation, and (grid) the
                # first lateral sweep from the live tracks' previous solutions
                alive = np.flatnonzero(ok & active)
                lat, lat_starts = (self._lateral_rows(active, i, q, ok) if frees and sweeps
                                   else (np.zeros(0, dtype=np.intp), np.zeros((0, model.n))))
                if alive.size or lat.size:
                    back = q[alive] - prev[alive] if i > 1 else 0.0
                    pred = np.clip(q[alive] + back, model.lo, model.hi)
                    rows = np.concatenate([alive, lat])
                    start = np.vstack([pred, lat_starts])
                    pull = np.vstack([q[alive], lat_starts])
                    fz = None if frozen is None else frozen[rows]
                    sol, good, _, _ = self.lm(slot_frame[rows], start, pull, None, fz)
                    prev[alive] = q[alive]
                    q[alive], ok[alive] = sol[: alive.size], good[: alive.size]
                    if lat.size:
                        self._lateral_done(i, lat, sol[alive.size:], good[alive.size:],
                                           q, ok, prev)
                        sweeps -= 1
            if frees:  # grow the alive cells into their dead neighbours
                for _ in range(sweeps):
                    if not self._lateral(slot_frame, active, i, q, ok, prev, frozen):
                        break
            if i % o.reseed_every == 0:
                self._reseed(i, slot_frame, active, q, ok, prev, frozen)
            for lane_i, lane in enumerate(lanes):
                if i < len(lane):
                    mine = slice(lane_i * width, (lane_i + 1) * width)
                    qs[lane[i], mine], oks[lane[i], mine] = q[mine], ok[mine]
            for slot, (lane_i, _) in zip(extra, anchors, strict=True):
                if i < len(lanes[lane_i]):
                    qs[lanes[lane_i][i], slot], oks[lanes[lane_i][i], slot] = q[slot], ok[slot]
        return qs, oks

    def _reseed(self, i: int, slot_frame: Index, active: NDArray[np.bool_], q: Array,
                ok: NDArray[np.bool_], prev: Array, frozen: NDArray[np.bool_] | None
                ) -> None:  # fmt: skip
        """Random restarts for (a spread-out subset of) the dead active slots."""
        o = self.opts
        _, per, slot_col, cell_value, _ = self.cells
        dead = np.flatnonzero(~ok & active & self.growable)
        if dead.size == 0:
            return
        reps = o.reseed_rows if i > 0 else o.restart_rows
        cap = o.reseed_cap * (1 + int(np.max(self.cells[4])))  # per lane
        if dead.size * reps > cap:
            dead = dead[np.linspace(0, dead.size - 1, cap // reps).astype(int)]
        rows = np.repeat(dead, reps)
        starts = random_starts(self.model, rows.size, self.rng, self.problem.scale)
        if frozen is not None:
            starts[np.arange(rows.size), slot_col[rows]] = cell_value[rows]
        fz = None if frozen is None else frozen[rows]
        sol, good, _, _ = self.lm(slot_frame[rows], starts, None, o.reseed_iterations, fz)
        self._assign(rows, sol, good, q, ok, prev, per)

    @staticmethod
    def _assign(rows: Index, sol: Array, good: NDArray[np.bool_], q: Array,
                ok: NDArray[np.bool_], prev: Array, per: int) -> bool:  # fmt: skip
        """Give each dead slot in ``rows`` one converged solution of its row, distinct
        (> 0.05) from the other live slots of its cell; True when any slot came alive."""
        grew = False
        for j in np.flatnonzero(good):
            d = int(rows[j])
            if ok[d]:
                continue
            cell = range(d - d % per, d - d % per + per)
            if all(not ok[t] or np.max(np.abs(sol[j] - q[t])) > 0.05 for t in cell):
                q[d], ok[d], prev[d] = sol[j], True, sol[j]
                grew = True
        return grew

    def _lateral_rows(self, active: NDArray[np.bool_], i: int, q: Array,
                      ok: NDArray[np.bool_]) -> tuple[Index, Array]:  # fmt: skip
        """Lateral starts: each dead slot (not waiting) from the live slots of its lane
        (of any free column) whose value of its locked column is nearest its cell's
        value (within one and a half cells), that column moved onto the cell. Returns
        the dead slots (one per start) and the starts."""
        g, per, slot_col, cell_value, lane_of = self.cells
        dead = np.flatnonzero(~ok & active & (self._wait <= i) & self.growable)
        live = np.flatnonzero(ok & active)
        if dead.size == 0 or live.size == 0:
            return np.zeros(0, dtype=np.intp), np.zeros((0, self.model.n))
        lo, hi = self.grid_lo[slot_col[dead]], self.grid_hi[slot_col[dead]]
        width = (hi - lo) / g
        sources = self.opts.lateral_sources
        take = np.zeros((dead.size, sources), dtype=np.intp)  # indices into ``live``
        near = np.zeros((dead.size, sources), dtype=bool)
        dead_lane, live_lane = lane_of[dead], lane_of[live]
        for lane in np.unique(dead_lane):  # sources from the same lane only
            dm, lm = dead_lane == lane, np.flatnonzero(live_lane == lane)
            if lm.size == 0:
                continue
            d = dead[dm]
            gap = np.abs(q[live[lm]][:, slot_col[d]].T - cell_value[d][:, None])  # (D, L)
            if sources == 1:  # the nearest: the first of the smallest
                t = gap.argmin(axis=1)[:, None]
            else:
                t = np.argsort(gap, axis=1, kind="stable")[:, :sources]
            take[dm, :t.shape[1]] = lm[t]
            near[dm, :t.shape[1]] = np.take_along_axis(gap, t, axis=1) <= \
                1.5 * width[dm][:, None]
        rows = np.repeat(dead, take.shape[1])[near.ravel()]
        starts = q[live[take.ravel()[near.ravel()]]].copy()
        starts[np.arange(rows.size), slot_col[rows]] = cell_value[rows]
        return rows, starts

    def _lateral_done(self, i: int, rows: Index, sol: Array, good: NDArray[np.bool_],
                      q: Array, ok: NDArray[np.bool_], prev: Array) -> bool:  # fmt: skip
        """Give the lateral solutions to their dead slots; a slot that failed waits
        ``lateral_wait`` coarse frames. True when any slot came alive."""
        grew = self._assign(rows, sol, good, q, ok, prev, self.cells[1])
        tried = np.unique(rows)
        self._wait[tried[~ok[tried]]] = i + self.opts.lateral_wait
        return grew

    def _lateral(self, slot_frame: Index, active: NDArray[np.bool_], i: int, q: Array,
                 ok: NDArray[np.bool_], prev: Array, frozen: NDArray[np.bool_] | None
                 ) -> bool:  # fmt: skip
        """One sweep of lateral growth (:meth:`_lateral_rows`) at the current frame: the
        self-motion manifold grown along itself, each grid filling in where another
        folds. True when any slot came alive."""
        rows, starts = self._lateral_rows(active, i, q, ok)
        if rows.size == 0:
            return False
        fz = None if frozen is None else frozen[rows]
        budget = self.opts.lateral_iterations
        sol, good, _, _ = self.lm(slot_frame[rows], starts, None, budget, fz)
        return self._lateral_done(i, rows, sol, good, q, ok, prev)

    # -- 2. least motion path ------------------------------------------------------------
    @staticmethod
    def live_nodes(qs: Array, oks: NDArray[np.bool_]) -> list[Index]:
        """Per coarse frame the candidates kept in the graph: converged ones, one of each
        group equal to 1e-4 (both passes and neighbouring cells often agree); every
        candidate where none converged (the frame is then unreachable)."""
        out = []
        for q, ok in zip(qs, oks, strict=True):
            live = np.flatnonzero(ok)
            if live.size == 0:
                out.append(np.arange(len(ok)))
                continue
            _, first = np.unique(np.round(q[live] * 1e4), axis=0, return_index=True)
            out.append(live[np.sort(first)])
        return out

    def edge_costs(self, qs: Array, idx: Index, nodes: list[Index], power: float
                   ) -> list[Array]:  # fmt: skip
        """Per transition into coarse frame i (i >= 1) the estimated cost of every edge
        between its ``nodes`` (to, from): ``L (d / L)^power`` from the ends' largest
        column distance ``d`` over its ``L`` frames, a lower bound of what filling the
        edge can measure (entry 0 is unused)."""
        out = [np.zeros((0, 0))]
        for i in range(1, len(idx)):
            span = float(max(idx[i] - idx[i - 1], 1))
            a, b = qs[i][nodes[i]], qs[i - 1][nodes[i - 1]]
            step = np.zeros((len(a), len(b)))
            for c in np.flatnonzero(self.solved):
                d = a[:, None, c] - b[None, :, c]
                if self.wrap[c]:  # a hinge without limits: the nearest turn
                    d = (d + np.pi) % (2 * np.pi) - np.pi
                np.maximum(step, np.abs(d), out=step)
            out.append((span * (step / span) ** power).astype(np.float32))  # half the memory
        return out

    # -- 3. fill -------------------------------------------------------------------------
    def start_fill(self, a: int, b: int, qa: Array, qb: Array) -> _Fill:
        """The fill of an edge from frame ``a`` at ``qa`` to frame ``b`` at ``qb`` (n,)
        (rad, m): its ends known, nothing between yet."""
        n, m = self.model.n, len(self.model.effectors)
        q = np.zeros((b - a + 1, n))
        # hinges without limits end on the turn nearest the start
        q[0], q[-1] = qa, np.where(self.wrap, qa + (qb - qa + np.pi) % (2 * np.pi) - np.pi, qb)
        have = np.zeros(b - a + 1, dtype=bool)
        have[0] = have[-1] = True
        return _Fill(a, q, np.ones(b - a + 1, dtype=bool), np.zeros((b - a + 1, m)),
                     np.zeros((b - a + 1, m)), have)

    def advance(self, fills: list[_Fill]) -> None:
        """One bisection level of every unfinished fill, all in one batched LM call: the
        midpoint of each gap for the first ``fill_levels`` levels, then every frame left
        at once. Each frame starts from the straight line between its known neighbours
        and is pulled toward it in the null space."""
        rows, inits, where = [], [], []
        for fl in fills:
            ks = np.flatnonzero(fl.have)
            gaps = np.flatnonzero(np.diff(ks) > 1)
            level, fl.level = fl.level, fl.level + 1
            if gaps.size == 0:
                continue
            if level < self.opts.fill_levels:  # the midpoint of each gap
                lft, rgt = ks[gaps], ks[gaps + 1]
                mids = (lft + rgt) // 2
            else:  # every frame left, each between its known neighbours
                mids = np.flatnonzero(~fl.have)
                nxt = np.searchsorted(ks, mids)
                lft, rgt = ks[nxt - 1], ks[nxt]
            t = ((mids - lft) / (rgt - lft))[:, None]
            rows.append(fl.first + mids)
            inits.append(fl.q[lft] + t * (fl.q[rgt] - fl.q[lft]))
            where.append((fl, mids))
        if not rows:
            return
        init = np.concatenate(inits)
        sol, ok, p, r = self.lm(np.concatenate(rows), init, init)
        at = 0
        for fl, mids in where:
            part = slice(at, at + len(mids))
            fl.q[mids], fl.conv[mids], fl.pe[mids], fl.re[mids] = sol[part], ok[part], \
                p[part], r[part]
            fl.have[mids] = True
            at += len(mids)

    def fill_cost(self, fl: _Fill) -> float:
        """The edge's cost as far as its fill knows it: over each stretch between known
        frames, ``L (d / L)^power`` (``d`` the largest column distance, ``L`` the frames
        between), and 1e6 per known unconverged frame inside. A lower bound of the cost
        of the finished fill (a sum of the largest column step per frame to the
        ``power``; Jensen), and that cost itself once every frame is known."""
        ks = np.flatnonzero(fl.have)
        span = np.diff(ks).astype(float)
        d = np.max(np.abs(np.diff(fl.q[ks][:, self.solved], axis=0)), axis=1, initial=0.0)
        return float(np.sum(span * (d / span) ** self.opts.power)
                     + 1e6 * np.count_nonzero(~fl.conv[ks[1:-1]]))

    def closest(self, q: Array, conv: NDArray[np.bool_], pe: Array, re: Array,
                keep_first: bool) -> None:  # fmt: skip
        """Frames left unconverged (out of reach, or missed): each stretch of them solved
        again in order, every frame from the one before (the first from its own value),
        for the closest approach; an answer replaces the frame's where its error is
        smaller. All stretches advance together; ``q`` (F, n) coordinates (rad, m),
        ``conv``, ``pe`` (m) and ``re`` (rad) (F, m) in place. ``keep_first``: frame 0 is
        given (a start) and stays."""
        bad = np.flatnonzero(~conv)
        if keep_first:
            bad = bad[bad > 0]
        if bad.size == 0:
            return
        cut = np.flatnonzero(np.diff(bad) > 1)
        first = bad[np.r_[0, cut + 1]]
        length = bad[np.r_[cut, bad.size - 1]] - first + 1
        badness = self.problem.badness
        for j in range(int(length.max())):
            rows = first[length > j] + j
            init = q[np.maximum(rows - 1, 0)].copy()
            init[rows == 0] = q[0]
            res = levenberg_marquardt(self.model, self.problem, init,
                                      self.opts.max_iterations, rows=rows,
                                      stall_window=SLOW_STALL_WINDOW)
            np.add.at(self.work, rows, res.iterations)
            better = badness(res.position_error, res.orientation_error) < \
                badness(pe[rows], re[rows])
            take = rows[better]
            q[take], conv[take] = res.q[better], res.converged[better]
            pe[take], re[take] = res.position_error[better], res.orientation_error[better]


def solve_track(model: BatchedKinematics, targets: ArrayLike,
                weights: Sequence[tuple[float, float]] | None = None,
                options: TrackOptions | None = None,
                start: ArrayLike | None = None, before: ArrayLike | None = None,
                after: ArrayLike | None = None, held: ArrayLike | None = None
                ) -> TrackResult:  # fmt: skip
    """Solve a trajectory: ``targets`` (F, m, 4, 4) world transforms (metres), one per
    frame and effector; ``held`` (F, n): the values of the model's held columns per
    frame (rad, m; None: the T-pose), which the path keeps and its motion leaves out.
    Returns per-frame coordinates, convergence, errors, and the
    frames where no continuous path was found (module docstring). When a solve leaves
    jumps or unconverged frames, it is done again with coarse frames twice as dense
    (``retries`` times) and the better answer kept. Deterministic for a given
    ``options.seed``.

    Where the path starts, coordinates (n,) (rad, m): ``start``, a solution of the first
    frame (the last frame of the part of a trajectory solved before); else, with
    ``before``, the pose on the frame before the first (the keys a re-baked part of an
    animation follows), the first frame's solution LM reaches from it, pulled toward it,
    when it reaches one; else the T-pose if that is already on the first target. Where
    it ends: with ``after``, the pose on the frame after the last (the keys that follow
    a re-baked part), the last frame's solution LM reaches from it, when it reaches one;
    else where the least motion leads."""
    opts = options or TrackOptions()
    targets = np.asarray(targets, dtype=float)
    frames = len(targets)
    held = None if held is None else np.asarray(held, dtype=float).reshape(frames, model.n)
    first = None if start is None else np.asarray(start, dtype=float).reshape(model.n)
    if first is None and before is not None and frames:
        first = _continued(model, targets, weights, opts, before, 0, held)
    last = None
    if after is not None and frames > 1:
        last = _continued(model, targets, weights, opts, after, frames - 1, held)
    best = _solve_track(model, targets, weights, opts, first, last, held)
    work = best.iterations
    for _ in range(opts.retries):
        if not best.jumps and best.converged.all():
            break
        opts = replace(opts, stride=max(opts.stride // 2, 1),
                       coarse_motion=opts.coarse_motion / 2,
                       lane_frames=2 * opts.lane_frames)
        again = _solve_track(model, targets, weights, opts, first, last, held)
        work = work + again.iterations  # the pass not kept was work too
        if _score(again, ~model.held) < _score(best, ~model.held):
            best = again
    best.iterations = work
    return best


def _continued(model: BatchedKinematics, targets: ArrayLike,
               weights: Sequence[tuple[float, float]] | None, opts: TrackOptions,
               pose: ArrayLike, frame: int, held: Array | None) -> Array | None:  # fmt: skip
    """Frame ``frame``'s solution LM reaches from ``pose`` (n,) (rad, m), pulled toward
    it (least motion), or None when it does not converge."""
    first = np.asarray(targets)[frame:frame + 1]
    problem = Problem(model, first, weights, BatchOptions(
        position_tolerance=opts.position_tolerance,
        orientation_tolerance=opts.orientation_tolerance, stall_window=SLOW_STALL_WINDOW),
        None if held is None else held[frame:frame + 1])
    near = problem.hold(np.clip(np.asarray(pose, dtype=float).reshape(1, model.n), model.lo,
                                model.hi), np.zeros(1, dtype=np.intp))
    res = levenberg_marquardt(model, problem, near, opts.max_iterations, pull=near)
    return res.q[0] if res.converged[0] else None


def _score(res: TrackResult, solved: NDArray[np.bool_]) -> tuple[int, int, float]:
    """Worse answers score higher: unconverged frames, then jumps, then the largest step
    of a ``solved`` column."""
    steps = np.max(np.abs(np.diff(res.q[:, solved], axis=0)), axis=1, initial=0.0) \
        if len(res.q) > 1 else [0.0]
    return (int(np.count_nonzero(~res.converged)), len(res.jumps), float(np.max(steps)))


def _solve_track(model: BatchedKinematics, targets: ArrayLike,
                 weights: Sequence[tuple[float, float]] | None, opts: TrackOptions,
                 start: Array | None = None, end: Array | None = None,
                 held: Array | None = None) -> TrackResult:  # fmt: skip
    """One :func:`solve_track` pass with ``opts``: the path from ``start`` (else from
    the T-pose when it is on the first target) and to ``end`` when given."""
    tr = _Track(model, targets, weights, opts, held)
    f = tr.frames
    if f == 0:
        m = len(model.effectors)
        return TrackResult(np.zeros((0, model.n)), np.zeros(0, dtype=bool),
                           np.zeros((0, m)), np.zeros((0, m)), [],
                           np.zeros(0, dtype=np.int64))
    if not tr.solved.any():  # every column held: nothing to search, only errors to take
        every = np.arange(f)
        q = tr.problem.hold(np.zeros((f, model.n)), every)
        res = levenberg_marquardt(model, tr.problem, q, 0, rows=every)
        return TrackResult(q, res.converged, res.position_error, res.orientation_error, [],
                           tr.work)
    if start is None:  # a T-pose already on the first target is where the path starts
        tpose = t_pose(model)
        if on_target(model, tr.problem, tpose[None], np.zeros(1, dtype=np.intp))[0]:
            start = tpose
    if start is not None:  # the ends given carry their frames' held values
        start = tr.problem.hold(start[None], np.zeros(1, dtype=np.intp))[0]
    if end is not None:
        end = tr.problem.hold(end[None], np.array([f - 1]))[0]
    idx, qs, oks = tr.grid_tracks(max(opts.stride, 1), start, end)
    # lazy least-motion path: choose the path on the costs known, take every edge of it
    # one bisection level further (one batched call), put the costs they now show (lower
    # bounds, exact once filled) in the graph, choose again, until the path chosen is
    # filled throughout. An edge left behind has cost a midpoint, not every frame.
    nodes = tr.live_nodes(qs, oks)
    if start is not None:  # the path leaves frame 0 from ``start`` only
        qs[0, 0], oks[0, 0] = start, True
        nodes[0] = np.zeros(1, dtype=np.intp)
    if end is not None and len(idx) > 1:  # and reaches the last frame at ``end`` only
        qs[-1, 0], oks[-1, 0] = end, True
        nodes[-1] = np.zeros(1, dtype=np.intp)
    where = [{int(k): j for j, k in enumerate(nd)} for nd in nodes]
    costs = tr.edge_costs(qs, idx, nodes, opts.power)
    ladder = _Ladder(costs, nodes,
                     [np.where(ok[nd], 0.0, 1e6) for ok, nd in zip(oks, nodes, strict=True)])
    fills: dict[tuple[int, int, int], _Fill] = {}
    edges: list[tuple[int, int, int]] = []
    for _ in range(opts.path_rounds):
        path = ladder.path()
        edges = [(i, int(path[i - 1]), int(path[i])) for i in range(1, len(idx))]
        for i, a, b in edges:
            if (i, a, b) not in fills:
                fills[(i, a, b)] = tr.start_fill(int(idx[i - 1]), int(idx[i]), qs[i - 1, a],
                                                 qs[i, b])
        todo = [e for e in edges if not fills[e].done]
        if not todo:
            break
        tr.advance([fills[e] for e in todo])
        for e in todo:
            i, frm, to = e
            costs[i][where[i][to], where[i - 1][frm]] = tr.fill_cost(fills[e])
            ladder.touch(i)
    left = [fills[e] for e in edges if not fills[e].done]
    while left:  # out of rounds: finish the path chosen last
        tr.advance(left)
        left = [fl for fl in left if not fl.done]
    n, m = model.n, len(model.effectors)
    q, conv = np.zeros((f, n)), np.zeros(f, dtype=bool)
    pe, re = np.zeros((f, m)), np.zeros((f, m))
    for e in edges:
        fl = fills[e]
        lo_f, hi_f = fl.first, fl.first + len(fl.q) - 1
        q[lo_f:hi_f + 1], conv[lo_f:hi_f + 1] = fl.q, fl.conv
        pe[lo_f:hi_f + 1], re[lo_f:hi_f + 1] = fl.pe, fl.re
    if len(idx) == 1:
        q[0] = qs[0, int(np.argmax(oks[0]))]
    if tr.wrap.any():  # segments may end a whole turn apart: join them
        q[:, tr.wrap] = np.unwrap(q[:, tr.wrap], axis=0)
    # the coarse frames' own errors and convergence; a coarse frame no candidate reached
    # may hold a slot that never lived: every frame within the limits, its held values in
    cidx = idx
    q[cidx] = tr.problem.hold(np.clip(q[cidx], model.lo, model.hi), cidx)
    final = levenberg_marquardt(model, tr.problem, q[cidx], 0, rows=cidx)
    conv[cidx], pe[cidx] = final.converged, final.position_error
    re[cidx] = final.orientation_error
    if not conv.all():
        tr.closest(q, conv, pe, re, start is not None)
    jumps = [int(j) for j in _jump_frames(q[:, tr.solved], opts.flip_factor)]
    return TrackResult(q, conv, pe, re, jumps, tr.work)


def _jump_frames(q: Array, factor: float, window: int = 10) -> Index:
    """Frames whose largest column step exceeds ``factor`` times the median step of the
    ``window`` steps on each side (and 1e-4, rad or m: smaller steps never show): a step
    out of line with its neighbours, not a fast stretch of the path."""
    f = len(q)
    if f < 2:
        return np.zeros(0, dtype=np.intp)
    steps = np.max(np.abs(np.diff(q, axis=0)), axis=1, initial=0.0)  # into frame i + 1
    padded = np.pad(steps, window, mode="edge")
    near = np.lib.stride_tricks.sliding_window_view(padded, 2 * window + 1)
    others = np.delete(near, window, axis=1)  # each step's neighbours, itself left out
    local = np.median(others, axis=1)
    return np.flatnonzero(steps > np.maximum(factor * local, 1e-4)) + 1
