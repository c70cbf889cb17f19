"""Candidates per coarse frame: tracks that sample a trajectory's solutions.

On a redundant chain (more solved columns than counted error rows) a few columns are
locked in turn (more where the self-motion has two or three dimensions:
``FREE_SHARE``), each on a grid of values over its range; every cell holds a track in
which the other columns solve the rest. All tracks advance together, one batch per
coarse frame, from their linear extrapolation, pulled toward their previous solution
(least motion; with a self-motion of more than one dimension, toward a point
``MIDDLE_PULL`` of the way from it to the middle of the joints' ranges). Dead cells grow
back from live tracks whose value of the locked column is near (the self-motion manifold
grown along itself, each grid filling in where another folds) and from random restarts
now and then. A quick pass (a first one, with a retry behind it) stops the tracks that
converge slowly (``QUICK_BUDGET``) or stall (``QUICK_STALL``); a wide one (a retry,
``plan.WIDE_RETRIES``) locks every column of a self-motion of one dimension.
Segments of the coarse frames are tracked side by side (lanes) both ways where the
self-motion has one dimension; with more a grid cell is not a point, lanes would meet
where their tracks differ, and the whole clip is one lane. Without redundancy the cells
are the branches found by restarts. Frames: world; coordinates rad and m.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..lm.problem import Index
from ..lm.starts import random_starts
from .search import Search

Array = NDArray[np.float64]

CANDIDATES = 1  # tracks per grid cell
# tracks of a chain without redundancy (no grid): its solutions are points, one per
# branch (a 6-hinge arm's shoulder, elbow and wrist: 8 within +-pi limits), and the path
# is continuous only if a track follows the truth's branch. UR5 with +-pi limits
# (example-robot-data), smooth 1,000-frame clips, seeds 0-9, the CLI's tolerances: with
# 4, seeds 4 and 5 stepped 102x and 200x the truth's largest step (26 frames missed), in
# 0.8-3.3 ms a frame; with 16, none over 1.63x, in 0.16-0.61 ms (fewer retries)
BRANCHES = 16
# ... and of a redundant chain whose grid has no column to lock (no solution found on
# its first frame, one beyond reach)
UNGRIDDED = 4
# segments of the coarse frames tracked side by side, at most: 16 lanes of 128 slots both
# ways make batches of up to 4,096 rows, where an LM row costs least (bench/floor.py; the
# live tracks of B's, 2,000 frames, make about 600 a step); on long clips they are
# shorter, so fewer tracks must live through all of one (arm7,
# 5,000-frame test-generator clips, seeds 1-32, both with the quick first pass: with 8
# lanes 5 flipped, one by 115x, with 16 lanes 2, by 2.03x and 3.46x; a third less time)
LANES = 16
BOTH_WAYS = True  # each segment also tracked backward from its last frame
SEED_ROWS = 4  # random starts per dead track at a lane's first frame
RESEED_EVERY = 16  # coarse frames between random re-seeding of dead tracks
# a lane is not re-seeded this close to its end: the lane tracked the other way starts
# there, seeded as every lane's first frame is
RESEED_TAIL = 8
RESEED_ROWS = 2  # random starts per dead track when re-seeding
RESEED_CAP = 64  # random starts at most per re-seeding, lane and 128 slots
RESEED_ITERATIONS = 20  # LM budget of a random start
LATERAL_SWEEPS = 1  # rounds of growing dead cells from live tracks per frame
LATERAL_ITERATIONS = 8  # LM budget of a lateral start
LATERAL_WAIT = 3  # coarse frames a cell that failed to grow waits
# where the self-motion has more than one dimension, a grid cell is not a point and a
# track pulled toward its last pose alone (least motion) drifts along it into a limit,
# where it dies or pins the path to a stretch that must later jump: there each tracking
# step is pulled this share of the way toward the middle of the joints' ranges instead
# (a posture in the targets' null space; bench/self_motion.py's two arm7s on a solved
# turntable, 30 clips: flip frames 715 -> 70, largest ratio 54 -> 4.0)
MIDDLE_PULL = 0.3
# the share (0..1) of a search's progress the grid tracks take (the ladder's bookkeeping
# and its rounds follow: ladder.py)
GRID_SHARE = 0.55
# a quick pass (the first of a solve with a retry behind it) stops a tracking step after
# this many iterations: most tracks still off target by then die anyway (and their tail
# runs in nearly empty batches); the few that would converge slowly are near a singular
# pose, where a retry tracks with the full budget (bench/run.py's 11 flip-bench paths,
# 2,000 frames: 27.6 -> 24.3 iterations a frame, no flips either way). So on any
# self-motion (bench/self_motion.py, 600 frames: two arm7s on a solved turntable, seeds
# 1-80, 4 clips over twice the truth's largest step, 14 frames, up to 2.13x, in 136.8 s
# -> 2 clips, 4 frames, up to 2.14x, in 109.0 s; position-only arm7, seeds 1-60, none
# either way, 31.7 -> 25.2 s; the humanoid arm, the prismatic chain and two hands on a
# spine the same within noise; before, the first pass was quick on one dimension alone)
QUICK_BUDGET = 6
# ... where a track also dies once its error's energy (its square) has not fallen below
# QUICK_STALL[1] of itself in QUICK_STALL[0] iterations (the options' rule: 0.5 in 4): a
# live track's error falls quadratically (arm7, B: its median pose error 0.035 m, 4e-3,
# 8e-5, 3e-6 over the first steps; after two steps 0.002 of the start's for the tracks
# that converge) while one whose cell the self-motion leaves stalls (0.45), and stops an
# iteration sooner (arm7, same session: the flip bench 86 -> 82 µs a frame, 22.7 -> 20.8
# LM rows; 50 held-out paths 103 -> 98 µs; 1,000 and 2,000-frame test-generator clips,
# seeds 100-147, 13.1 and 12.8 s -> 12.6 and 12.2; no flips, none over twice the truth's
# largest step; 5,000-frame loops, seeds 1-12, the same largest steps, one clip's lower
# after a retry, 21.7 -> 22.9 s. A ratio of 0.04 killed tracks the path needed there:
# largest steps up to 20 % larger)
QUICK_STALL = (3, 0.1)
# ... on steps whose targets move at most this many times ``coarse_motion`` (a longer
# step, between frames farther apart than the coarse frames' rule allows, keeps the full
# budget: its linear prediction is far off)
SHORT_STEP = 1.5
# a self-motion of two or three dimensions (``FEW_DIMENSIONS``) locks at least this
# share of the solved columns (rounded up), where that is more than ``free_count``: there
# a grid cell is a curve or a surface, a track in it settles where its pull leads, and
# the candidates are only as varied as the columns locked (two arm7s on a solved
# turntable, full pose, 15 columns, three dimensions, bench/self_motion.py's clips of
# 600 frames, seeds 1-80: with 4 columns 10 clips over twice the truth's largest step,
# 68 frames, up to 2.52x; with 6, 4 clips, 14 frames, up to 2.13x, in 1.2x the time.
# Through solve_path, seeds 1-40: 8 columns no better than 6 in 1.15x the time; 6
# columns on a grid of 21 values, as many tracks as 4 on 32, 3 clips against 1). With
# more dimensions the pull decides where the tracks go (two hands on a spine, 20
# columns, 8 and 14 dimensions, 20 clips each: 8 columns, the same flips, 0 and 2
# frames, in 1.8x the time)
FREE_SHARE = 0.4
FEW_DIMENSIONS = 3


class GridTracks:
    """One pass of candidate tracks over a search's coarse frames (module docstring)."""

    def __init__(self, search: Search, quick: bool = False, wide: bool = False) -> None:
        """``quick``: a first pass with a retry behind it (``QUICK_BUDGET``); ``wide``:
        on a self-motion of one dimension, every column locked in turn, not the
        ``free_count`` best conditioned on the first frame (a retry:
        ``plan.WIDE_RETRIES``)."""
        self.search = search
        self.opts = search.opts
        self.quick = quick
        self.wide = wide
        self.width = 0  # slots per lane (grid_pass)

    def grid_tracks(self, stride: int, coarse_motion: float, lane_frames: int,
                    start: Array | None = None, end: Array | None = None
                    ) -> tuple[Index, list[Array], list[NDArray[np.bool_]]]:  # fmt: skip
        """Grid tracks through the coarse frames in lanes run side by side (one batch):
        the coarse frames are cut into up to ``lanes`` segments (one segment when the
        self-motion has more than one dimension: see below), each tracked forward
        from its first frame and, with ``both_ways``, backward from its last (parts of
        the self-motion that become reachable only later are followed back in time).
        Every lane's tracks are candidates of the frames it passes; with ``start`` (n,),
        a solution of frame 0, one more track follows it from there (no column locked),
        and with ``end``, a solution of the last frame, one more back from there.
        Returns the coarse frames (C,) and per coarse frame the candidates of the lanes
        that pass it: coordinates (N_i, n) and converged (N_i,)."""
        sr = self.search
        frames = sr.coarse_frames(stride, coarse_motion)
        cycle = sr.period
        if cycle is not None and end is None and sr.frames >= 2 * cycle:
            return self._periodic(frames, cycle, lane_frames, start)
        qs, oks = self.track(frames, lane_frames, start, end)
        return frames, qs, oks

    def track(self, frames: Index, lane_frames: int, start: Array | None = None,
              end: Array | None = None
              ) -> tuple[list[Array], list[NDArray[np.bool_]]]:  # fmt: skip
        """:meth:`grid_tracks` on the coarse frames ``frames`` (C,): per coarse frame
        the candidates of the lanes that pass it."""
        o, sr = self.opts, self.search
        probe = sr.seeds(0, 4)
        wide = self.wide and sr.redundancy() == 1
        count = o.free_count
        if 1 < sr.redundancy() <= FEW_DIMENSIONS:
            count = max(count, math.ceil(FREE_SHARE * np.count_nonzero(sr.solved)))
        frees = sr.free_columns(probe, 0, sr.model.n if wide else count)
        c = len(frames)
        # lanes meet where one lane's tracks reach the points the next one's start from:
        # with a self-motion of one dimension a grid cell is a point (per branch), with
        # more it is not, and the path would jump where lanes meet: one lane then
        parts = max(1, min(LANES, (c - 1) // max(lane_frames, 1)))
        if sr.redundancy() > 1:
            parts = 1
        bounds = np.linspace(0, c - 1, parts + 1).round().astype(int)
        lanes: list[Index] = []
        for p in range(parts):
            seg = np.arange(bounds[p], bounds[p + 1] + 1)
            lanes.append(seg)
            if BOTH_WAYS and len(seg) > 1:
                lanes.append(seg[::-1])
        anchors = [] if start is None else [(0, start)]
        if end is not None and lanes[-1][0] == c - 1:  # a lane that starts at the end
            anchors.append((len(lanes) - 1, end))
        return self.grid_pass(frames, lanes, frees, anchors)

    def _periodic(self, frames: Index, cycle: int, lane_frames: int, start: Array | None
                  ) -> tuple[Index, list[Array], list[NDArray[np.bool_]]]:  # fmt: skip
        """:meth:`grid_tracks` where the search's inputs repeat every ``cycle`` frames
        (``Search.period``): one cycle's coarse frames (``frames`` below ``cycle``, the
        phase of the clip's last frame, and the next cycle's first) are tracked, and
        every later cycle's coarse frames take the candidates of their phase, each with
        its own frame's held values. Its tracks would find the same candidates on the
        same targets (arm7, the 5,000-frame loop planned over two cycles: the grid was
        60 % of the solve)."""
        sr = self.search
        phases = np.union1d(frames[frames < cycle], [(sr.frames - 1) % cycle])
        one = np.r_[phases, cycle]  # a cycle's coarse frames and the next one's first
        qs1, oks1 = self.track(one, lane_frames, start)
        idx = (np.arange(sr.frames // cycle + 1)[:, None] * cycle + phases).ravel()
        idx = idx[idx < sr.frames]
        source = np.searchsorted(one, idx % cycle)
        source[(idx % cycle == 0) & (idx > 0)] = len(one) - 1  # a later cycle's first
        qs = [sr.problem.hold(qs1[s], np.full(len(qs1[s]), f, dtype=np.intp))
              for s, f in zip(source, idx, strict=True)]
        return idx, qs, [oks1[s].copy() for s in source]

    def grid_pass(self, frames: Index, lanes: list[Index], frees: list[int],
                  anchors: Sequence[tuple[int, Array]] = ()
                  ) -> tuple[list[Array], list[NDArray[np.bool_]]]:  # fmt: skip
        """Coarse tracks along each lane (coarse indices into ``frames``, in order), all
        lanes advancing together. On a redundant chain: for each free column in
        ``frees``, one track per value of a grid over its range (that column locked, the
        others solving the rest) and per branch, so that the self-motion is sampled where
        any one column folds; otherwise ``branches`` tracks. Dead tracks grow back from
        live ones of their lane and from random restarts now and then. Each of
        ``anchors``, ``(lane, q)`` with ``q`` a solution of the lane's first coarse
        frame, adds a slot that follows ``q`` along that lane (no column locked, never
        grown back). Returns per coarse frame the slots of the lanes that pass it, in
        slot order: coordinates (N_i, n) and converged (N_i,) (a long clip's lanes pass
        a sixteenth of its coarse frames each: all slots on every frame took 74 MB on
        5,000 frames and 290 MB on 20,000)."""
        o, sr, model = self.opts, self.search, self.search.model
        per = CANDIDATES if frees else BRANCHES if sr.redundancy() < 1 else UNGRIDDED
        if frees:
            g = o.grid
            vals, cols = [], []
            for c in frees:
                lo, hi = sr.grid_lo[c], sr.grid_hi[c]
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
        self.width = width
        slots = len(cell_value)
        self._wait = np.zeros(slots, dtype=int)  # lateral growth: not tried before this
        self.growable = np.ones(slots, dtype=bool)  # dead slots that may grow back
        q = np.zeros((slots, model.n))
        ok = np.zeros(slots, dtype=bool)
        prev = np.zeros_like(q)
        for slot, (_, pose) in zip(extra, anchors, strict=True):
            q[slot], prev[slot], ok[slot] = pose, pose, True
            self.growable[slot] = False
        # each lane's slots (its cells', then its anchors'), and per coarse frame those
        # of the lanes that pass it
        own = [np.r_[np.arange(k * width, (k + 1) * width),
                     [s for s, (lane, _) in zip(extra, anchors, strict=True) if lane == k]
                     ].astype(np.intp) for k in range(nl)]
        passing: list[list[Index]] = [[] for _ in frames]
        for k, lane in enumerate(lanes):
            for c in lane:
                passing[c].append(own[k])
        at_frame = [np.sort(np.concatenate(p)) if p else np.zeros(0, dtype=np.intp)
                    for p in passing]
        qs = [np.zeros((len(a), model.n)) for a in at_frame]
        oks = [np.zeros(len(a), dtype=bool) for a in at_frame]
        lengths = np.array([len(lane) for lane in lanes])
        steps = int(lengths.max())
        middle = MIDDLE_PULL if sr.redundancy() > 1 else 0.0
        quick = self.quick
        travel = np.r_[0.0, np.cumsum(sr.motion())] if quick else None  # targets' motion
        before = np.zeros(nl, dtype=np.intp)
        for i in range(steps):
            sr.report(GRID_SHARE * i / steps)
            running = i < lengths
            at = np.array([lane[min(i, len(lane) - 1)] for lane in lanes])  # coarse index
            budget, stall = None, None  # the full budget and the options' stall rule
            if travel is not None and i > 0:  # quick, on short steps
                moved = np.abs(travel[frames[at]] - travel[frames[before]])[running]
                if moved.max() <= SHORT_STEP * o.coarse_motion:
                    budget, stall = QUICK_BUDGET, QUICK_STALL
            before = at
            slot_frame = frames[at][lane_of]
            active = running[lane_of]
            sweeps = LATERAL_SWEEPS
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
                    pull = np.vstack([sr.toward_middle(q[alive], middle), lat_starts])
                    fz = None if frozen is None else frozen[rows]
                    sol, good, _, _ = sr.lm(slot_frame[rows], start, pull, budget, fz, stall)
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
            if i % RESEED_EVERY == 0:
                fresh = active if i == 0 or not BOTH_WAYS else \
                    active & (lengths - i > RESEED_TAIL)[lane_of]
                self._reseed(i, slot_frame, fresh, q, ok, prev, frozen)
            for lane_i, lane in enumerate(lanes):
                if i < len(lane):
                    mine, c = own[lane_i], lane[i]
                    put = np.searchsorted(at_frame[c], mine)
                    qs[c][put], oks[c][put] = q[mine], ok[mine]
        return qs, oks

    def _reseed(self, i: int, slot_frame: Index, active: NDArray[np.bool_], q: Array,
                ok: NDArray[np.bool_], prev: Array, frozen: NDArray[np.bool_] | None
                ) -> None:  # fmt: skip
        """Random restarts for (a spread-out subset of) the dead active slots."""
        sr = self.search
        _, per, slot_col, cell_value, _ = self.cells
        dead = np.flatnonzero(~ok & active & self.growable)
        if dead.size == 0:
            return
        reps = RESEED_ROWS if i > 0 else SEED_ROWS
        # per lane, and more where a lane has more slots (a wide pass's: its first
        # frame seeds as many of its cells as a first pass's does)
        cap = RESEED_CAP * max(self.width, 128) // 128 * (1 + int(np.max(self.cells[4])))
        if dead.size * reps > cap:
            dead = dead[np.linspace(0, dead.size - 1, cap // reps).astype(int)]
        rows = np.repeat(dead, reps)
        starts = random_starts(sr.model, rows.size, sr.rng, sr.problem.scale)
        if frozen is not None:
            starts[np.arange(rows.size), slot_col[rows]] = cell_value[rows]
        fz = None if frozen is None else frozen[rows]
        sol, good, _, _ = sr.lm(slot_frame[rows], starts, None, RESEED_ITERATIONS, fz)
        self._assign(rows, sol, good, q, ok, prev, per)

    @staticmethod
    def _assign(rows: Index, sol: Array, good: NDArray[np.bool_], q: Array,
                ok: NDArray[np.bool_], prev: Array, per: int) -> bool:  # fmt: skip
        """Give each dead slot in ``rows`` one converged solution of its row, distinct
        (> 0.05) from the other live slots of its cell; True when any slot came alive."""
        if per == 1:  # a cell is its slot: the first converged row of each dead one
            js = np.flatnonzero(good)
            js = js[~ok[rows[js]]]
            take = js[np.unique(rows[js], return_index=True)[1]]
            grown = rows[take]
            q[grown], ok[grown], prev[grown] = sol[take], True, sol[take]
            return bool(take.size)
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
        """Lateral starts: each dead slot (not waiting) from the live slot of its lane
        (of any free column) whose value of its locked column is nearest its cell's
        value (within one and a half cells; the first slot of equally near ones), that
        column moved onto the cell. Returns the dead slots (one per start) and the
        starts."""
        g, _, slot_col, cell_value, lane_of = self.cells
        dead = np.flatnonzero(~ok & active & (self._wait <= i) & self.growable)
        live = np.flatnonzero(ok & active)
        if dead.size == 0 or live.size == 0:
            return np.zeros(0, dtype=np.intp), np.zeros((0, self.search.model.n))
        cols = slot_col[dead]
        width = (self.search.grid_hi[cols] - self.search.grid_lo[cols]) / g
        take = np.zeros(dead.size, dtype=np.intp)  # indices into ``live``
        gap = np.full(dead.size, np.inf)
        for c in np.unique(cols):  # all lanes at once, one locked column at a time
            dm = np.flatnonzero(cols == c)
            take[dm], gap[dm] = nearest_in_lane(lane_of[live], q[live, c],
                                                lane_of[dead[dm]], cell_value[dead[dm]])
        near = gap <= 1.5 * width
        rows = dead[near]
        starts = q[live[take[near]]].copy()
        starts[np.arange(rows.size), slot_col[rows]] = cell_value[rows]
        return rows, starts

    def _lateral_done(self, i: int, rows: Index, sol: Array, good: NDArray[np.bool_],
                      q: Array, ok: NDArray[np.bool_], prev: Array) -> bool:  # fmt: skip
        """Give the lateral solutions to their dead slots; a slot that failed waits
        ``lateral_wait`` coarse frames. True when any slot came alive."""
        grew = self._assign(rows, sol, good, q, ok, prev, self.cells[1])
        tried = np.unique(rows)
        self._wait[tried[~ok[tried]]] = i + LATERAL_WAIT
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
        sol, good, _, _ = self.search.lm(slot_frame[rows], starts, None, LATERAL_ITERATIONS, fz)
        return self._lateral_done(i, rows, sol, good, q, ok, prev)


def nearest_in_lane(lanes: Index, values: Array, lane: Index, value: Array
                    ) -> tuple[Index, Array]:  # fmt: skip
    """For each query (``lane``, ``value``) (D,): the entry of ``lanes``, ``values`` (L,)
    (a column's coordinates, rad or m) in the same lane whose value is nearest (the
    first of equally near ones), as an index into them, and its distance (inf, index 0,
    where the lane has none). By one sort of the entries on (lane, value's rank): the
    nearest is the last below or the first at or above."""
    n = len(values)
    _, rank = np.unique(np.concatenate([values, value]), return_inverse=True)
    span = int(rank.max()) + 1
    key = lanes.astype(np.int64) * span + rank[:n]
    order = np.lexsort((np.arange(n), key))  # by key, then index
    keys = key[order]
    # each sorted position's run of equal keys starts at its first (smallest) index
    head = order[np.maximum.accumulate(np.where(np.r_[True, keys[1:] != keys[:-1]],
                                                np.arange(n), 0))]
    at = np.searchsorted(keys, lane.astype(np.int64) * span + rank[n:], side="left")
    below, above = head[np.maximum(at - 1, 0)], head[np.minimum(at, n - 1)]
    gap_b = np.where((at > 0) & (lanes[below] == lane), np.abs(values[below] - value),
                     np.inf)
    gap_a = np.where((at < n) & (lanes[above] == lane), np.abs(values[above] - value),
                     np.inf)
    first = (gap_b < gap_a) | ((gap_b == gap_a) & (below < above))
    return np.where(first, below, above), np.minimum(gap_b, gap_a)
