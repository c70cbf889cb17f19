"""The smallest grid search: does a plain one do the engine's work in fewer rows?

``.venv/bin/python bench/floor_search.py [--paths 10] [--configs 4x32,4x16,...]``
(about two minutes on the 2-core VM; writes bench/results/floor_search.md). Not a test:
it prints a table.

Issue 17, point 5, asks the robust bake of arm7 (full pose, a self-motion of one
dimension) for 0.5x the compiled spec DLS's time a frame on B and the flip bench's
paths, and 0.25x on the 5,000-frame loop. Before a cost is called a floor, the brief
asks for the smallest program that does the same work, timed beside the engine in one
run. The same work: every frame on target (B's tolerances, 1e-5 m and 1e-4 rad) and no
joint stepping more than twice the largest step of the joint path that made the
targets. This program tries it in the plainest way I know, without the engine's
retries, mending, swings, relaxing or bookkeeping:

1. coarse frames every ``--stride`` frames, in lanes (segments of 12 coarse frames or
   more, at most 16), each tracked forward and backward;
2. candidates on each coarse frame: for ``C`` columns (those that move most along the
   self-motion at frame 0), ``G`` values over each one's range, a track with that column
   locked at that value, the others solving the target: random starts on a lane's first
   coarse frame and every 16th (at most 64 a lane), then followed from coarse frame to
   coarse frame (from its linear extrapolation, pulled toward its last solution); a dead
   track grows back from a live neighbour cell of its column;
3. the path: one candidate per coarse frame, the sum of squared steps least (Viterbi);
4. the frames between: bisection, each frame from the straight line between its solved
   neighbours, pulled toward that start;
5. a lazy search, as the engine's ladder: a segment of the path with a step over
   ``SPIKE`` times the median step of the 65 frames around it (the solver's own test:
   it does not know the truth) or a frame missed is banned and the path chosen again.

The rows (one FK and Jacobian each, counted on the model as bench/floor.py does) run on
the engine's LM (``solver.lm.levenberg_marquardt``), the cheapest batched row this
project has measured (bench/results/floor.md, table 1). Per configuration ``CxG``: flip
frames, frames missed, rows a frame and µs a frame, beside the engine (``solve_path``)
and the compiled spec DLS (warm) on the same clips, in the same run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from dhik.app.formats import parse_skeleton
from dhik.solver.lm import Problem, levenberg_marquardt
from dhik.solver.lm.starts import random_starts
from dhik.solver.path import solve_path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from batched import Engine  # noqa: E402
from floor import Counted  # noqa: E402
from methods import DhikCompiled  # noqa: E402
from report import write_report  # noqa: E402
from run import FLIP_SEEDS, SEED_B  # noqa: E402
from scenes import Scene, load_scenes  # noqa: E402

LANES = 16  # lanes of coarse frames, at most (the engine's)
LANE_FRAMES = 12  # coarse frames a lane, at least
SEEDS, RESEEDS = 4, 2  # random starts per dead track on a lane's first coarse frame, later
CAP = 64  # random starts per lane and re-seeding, at most
RESEED_EVERY = 16  # coarse frames between re-seedings
WAIT = 3  # coarse frames a track that failed to grow back waits
SPIKE = 2.5  # a step over this many times the local median stands out
ROUNDS = 100  # rounds of the lazy search, at most
SEED_BUDGET, TRACK_BUDGET, FILL_BUDGET = 20, 8, 15  # LM iterations


def lm(model: Any, problem: Problem, rows: np.ndarray, start: np.ndarray, budget: int,
       frozen: np.ndarray | None = None, pull: np.ndarray | None = None
       ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The engine's LM on problem rows ``rows`` (frames) from ``start`` (k, n) (rad):
    the answers (k, n) (rad) and whether each converged (k,)."""
    if len(rows) == 0:
        return np.zeros((0, model.n)), np.zeros(0, dtype=bool)
    res = levenberg_marquardt(model, problem, start, budget, rows=rows, pull=pull,
                              frozen=frozen)
    return res.q, res.converged


def columns(model: Any, problem: Problem, count: int, rng: np.random.Generator) -> list[int]:
    """The ``count`` columns that move most along the self-motion at a solution of
    frame 0 (their share of the Jacobian's null vector, in units of their range)."""
    q, ok = lm(model, problem, np.zeros(32, dtype=int), random_starts(model, 32, rng), 60)
    q0 = q[np.flatnonzero(ok)[0]]
    lin = problem.linearise(np.ascontiguousarray(q0[:, None]), problem.rows.take([0]))
    null = np.linalg.svd(lin.jac[..., 0])[2][-1]  # (6, n) error rows by columns
    order = np.argsort(-np.abs(null) * (model.hi - model.lo))
    return [int(c) for c in order[:count]]


def candidates(model: Any, problem: Problem, coarse: np.ndarray, cols: list[int], grid: int,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Grid tracks over the coarse frames (step 2): coordinates (C, S, n) (rad),
    converged (C, S)."""
    c = len(coarse)
    parts = max(1, min(LANES, (c - 1) // LANE_FRAMES))
    bounds = np.linspace(0, c - 1, parts + 1).round().astype(int)
    lanes = []
    for p in range(parts):
        seg = np.arange(bounds[p], bounds[p + 1] + 1)
        lanes += [seg, seg[::-1]]
    values = np.concatenate([model.lo[k] + (np.arange(grid) + 0.5) / grid
                             * (model.hi[k] - model.lo[k]) for k in cols])
    col_of = np.repeat(cols, grid)
    width = len(values)
    slots = width * len(lanes)
    slot_val, slot_col = np.tile(values, len(lanes)), np.tile(col_of, len(lanes))
    lane_of = np.repeat(np.arange(len(lanes)), width)
    frozen = np.zeros((slots, model.n), dtype=bool)
    frozen[np.arange(slots), slot_col] = True
    q, prev = np.zeros((slots, model.n)), np.zeros((slots, model.n))
    ok = np.zeros(slots, dtype=bool)
    wait = np.zeros(slots, dtype=int)
    qs = np.zeros((c, slots, model.n))
    oks = np.zeros((c, slots), dtype=bool)
    lengths = np.array([len(lane) for lane in lanes])
    for i in range(int(lengths.max())):
        at = np.array([lane[min(i, len(lane) - 1)] for lane in lanes])
        frame = coarse[at][lane_of]
        active = (i < lengths)[lane_of]
        if i % RESEED_EVERY == 0:  # random starts for (a spread of) the dead tracks
            dead = np.flatnonzero(~ok & active)
            reps = SEEDS if i == 0 else RESEEDS
            cap = CAP * len(lanes)
            if dead.size * reps > cap:
                dead = dead[np.linspace(0, dead.size - 1, cap // reps).astype(int)]
            rows = np.repeat(dead, reps)
            start = random_starts(model, rows.size, rng)
            start[np.arange(rows.size), slot_col[rows]] = slot_val[rows]
            sol, good = lm(model, problem, frame[rows], start, SEED_BUDGET, frozen[rows])
            first = np.flatnonzero(good)
            first = first[np.unique(rows[first], return_index=True)[1]]
            q[rows[first]], ok[rows[first]] = sol[first], True
            prev[rows[first]] = sol[first]
        if i > 0:
            alive = np.flatnonzero(ok & active)
            # a dead track from a live neighbour in its lane and column (one cell over;
            # one that fails waits WAIT coarse frames)
            dead = np.flatnonzero(~ok & active & (wait <= i))
            pos = dead % grid  # slots run lane by lane, column by column, value by value
            left = np.where((pos > 0) & ok[np.maximum(dead - 1, 0)], dead - 1, -1)
            right = np.where((pos < grid - 1) & ok[np.minimum(dead + 1, slots - 1)], dead + 1, -1)
            src = np.where(left >= 0, left, right)
            dead, src = dead[src >= 0], src[src >= 0]
            grown = q[src].copy()
            grown[np.arange(dead.size), slot_col[dead]] = slot_val[dead]
            pred = np.clip(2 * q[alive] - prev[alive], model.lo, model.hi)
            rows = np.concatenate([alive, dead])
            start = np.vstack([pred, grown])
            pull = np.vstack([q[alive], grown])
            sol, good = lm(model, problem, frame[rows], start, TRACK_BUDGET, frozen[rows], pull)
            prev[alive] = q[alive]
            prev[dead] = grown
            q[rows], ok[rows] = sol, good
            wait[dead[~good[alive.size:]]] = i + WAIT
        for li, lane in enumerate(lanes):
            if i < len(lane):
                mine = slice(li * width, (li + 1) * width)
                qs[lane[i], mine], oks[lane[i], mine] = q[mine], ok[mine] & active[mine]
    return qs, oks


def viterbi(dist: list[np.ndarray], banned: set[tuple[int, int, int]]) -> list[int] | None:
    """One candidate per coarse frame, the sum of squared steps least (step 3): ``dist[j]``
    (candidates of coarse frame ``j + 1`` by those of ``j``) the squared steps (rad^2), no edge
    ``(j, a, b)`` (candidate ``a`` of coarse frame ``j`` to ``b`` of ``j + 1``) in
    ``banned``. Candidate indices per coarse frame, or None where no path is left."""
    by_frame: dict[int, list[tuple[int, int]]] = {}
    for j, a, b in banned:
        by_frame.setdefault(j, []).append((b, a))
    cost = np.zeros(dist[0].shape[1])
    back = []
    for j, dj in enumerate(dist):
        d = dj + cost[None]
        if j in by_frame:
            d[tuple(np.array(by_frame[j]).T)] = np.inf
        arg = np.argmin(d, axis=1)
        back.append(arg)
        cost = d[np.arange(len(arg)), arg]
    if not np.isfinite(cost.min()):
        return None
    pick = [int(np.argmin(cost))]
    for arg in reversed(back):
        pick.append(int(arg[pick[-1]]))
    return pick[::-1]


def fill(model: Any, problem: Problem, pairs: np.ndarray, ends: np.ndarray
         ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The frames between coarse frames (step 4): for each segment ``j`` (from frame
    ``pairs[j, 0]`` with answer ``ends[j, 0]`` to ``pairs[j, 1]`` with ``ends[j, 1]``),
    the midpoints of the gaps left (bisection), each from the straight line between its
    solved neighbours and pulled toward that start. Returns per segment the frames'
    coordinates (J, L + 1, n) and converged (J, L + 1), L the longest segment (frames
    past a segment's end repeat its end)."""
    length = pairs[:, 1] - pairs[:, 0]
    span = int(length.max())
    segs = len(ends)
    q = np.zeros((segs, span + 1, model.n))
    ok = np.zeros((segs, span + 1), dtype=bool)
    known = np.zeros((segs, span + 1), dtype=bool)
    q[:, 0], ok[:, 0], known[:, 0] = ends[:, 0], True, True
    q[np.arange(segs), length], ok[np.arange(segs), length] = ends[:, 1], True
    known[np.arange(segs), length] = True
    known |= np.arange(span + 1)[None] > length[:, None]
    while not known.all():  # bisection
        seg_rows, starts, frames, at = [], [], [], []
        for j in np.flatnonzero(~known.all(axis=1)):
            idx = np.flatnonzero(known[j, : length[j] + 1])
            gaps = np.flatnonzero(np.diff(idx) > 1)
            a, b = idx[gaps], idx[gaps + 1]
            mid = (a + b) // 2
            t = ((mid - a) / (b - a))[:, None]
            starts.append((1 - t) * q[j, a] + t * q[j, b])
            frames.append(pairs[j, 0] + mid)
            seg_rows.append(np.full(mid.size, j))
            at.append(mid)
        rows, js, mids = np.concatenate(frames), np.concatenate(seg_rows), np.concatenate(at)
        start = np.vstack(starts)
        q[js, mids], ok[js, mids] = lm(model, problem, rows, start, FILL_BUDGET, pull=start)
        known[js, mids] = True
    for j in range(segs):  # past the end: the end
        q[j, length[j]:] = q[j, length[j]]
    return q, ok


def minimal_path(model: Any, problem: Problem, stride: int, cols: list[int], grid: int,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """Steps 1-5: coordinates (F, n) and converged (F,), or None (no path left). Step 5
    (a lazy search, as the engine's ladder): the path's segments are filled, a segment
    with a step that stands out (over ``SPIKE`` times the median step of the 65 frames
    around it: the solver's own test, it does not know the truth) or a frame missed is
    banned, and the path is chosen again, up to ``ROUNDS`` times; segments already
    filled are not filled again."""
    rng = np.random.default_rng(seed)
    coarse = np.unique(np.r_[np.arange(0, problem.count, stride), problem.count - 1])
    qs, oks = candidates(model, problem, coarse, cols, grid, rng)
    cand = [qs[j][oks[j]] for j in range(len(qs))]
    if any(len(x) == 0 for x in cand):
        return None
    dist = [((cand[j + 1][:, None] - cand[j][None]) ** 2).sum(axis=2)
            for j in range(len(cand) - 1)]
    banned: set[tuple[int, int, int]] = set()
    filled: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]] = {}
    length = np.diff(coarse)
    for _ in range(ROUNDS):
        pick = viterbi(dist, banned)
        if pick is None:
            return None
        edges = [(j, pick[j], pick[j + 1]) for j in range(len(coarse) - 1)]
        new = [e for e in edges if e not in filled]
        if new:
            ends = np.array([[cand[j][a], cand[j + 1][b]] for j, a, b in new])
            pairs = np.array([[coarse[j], coarse[j + 1]] for j, _, _ in new])
            got_q, got_ok = fill(model, problem, pairs, ends)
            for e, fq, fo in zip(new, got_q, got_ok, strict=True):
                filled[e] = (fq, fo)
        q = np.vstack([filled[e][0][: length[e[0]]] for e in edges] + [cand[-1][pick[-1]][None]])
        ok = np.concatenate([filled[e][1][: length[e[0]]] for e in edges] + [[True]])
        steps = np.abs(np.diff(q, axis=0)).max(axis=1)
        pad = np.pad(steps, 32, mode="edge")
        local = np.median(np.lib.stride_tricks.sliding_window_view(pad, 65), axis=1)
        bad = (steps > SPIKE * np.maximum(local, 1e-9)) | ~ok[1:]
        seg_of = np.searchsorted(coarse, np.arange(1, len(q)), side="left") - 1
        worse = {edges[j] for j in np.unique(seg_of[bad])}
        if not worse:
            return q, ok
        banned |= worse
    return q, ok


def clips(scene: Scene, paths: int, loop: bool) -> list[tuple[str, np.ndarray]]:
    """(name, truth (F, 7)): B, the flip bench's paths, the 5,000-frame loop."""
    out = [("B", scene.trajectory_channels(2000, SEED_B))]
    out += [(f"path {s}", scene.trajectory_channels(2000, s)) for s in FLIP_SEEDS[:paths]]
    if loop:
        out.append(("loop", scene.trajectory_channels(5000, SEED_B, block=1000)))
    return out


def judge(model: Any, q: np.ndarray, ok: np.ndarray, truth: np.ndarray
          ) -> tuple[int, int, float]:  # fmt: skip
    """Of a path ``q`` (F, n) (rad) and its converged frames ``ok`` (F,) against the
    joint path that made the targets ``truth`` (F, n) (rad): flip frames (a joint's step
    over twice the truth's largest), frames missed, and the largest step over the
    truth's (steps as ``model.difference`` takes them, as bench/held_out.py does)."""
    true_step = np.abs(np.diff(truth, axis=0)).max()
    steps = np.abs(model.difference(q[:-1], q[1:])).max(axis=1)
    return int((steps > 2 * true_step).sum()), int((~ok).sum()), float(steps.max() / true_step)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", type=int, default=10)
    parser.add_argument("--no-loop", action="store_true")
    parser.add_argument("--stride", type=int, default=16)
    parser.add_argument("--configs", default="4x32,4x16,2x32,7x32",
                        help="columns x grid values, comma-separated")
    parser.add_argument("--out", default=str(HERE / "results" / "floor_search.md"),
                        help="markdown file to write ('' for none)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    scene = load_scenes()[0]
    eng = Engine(scene)
    spec = DhikCompiled("dhik compiled")
    spec.setup(scene)
    model = Counted(parse_skeleton(scene.skeleton), [scene.effector])
    configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",")]
    rows_out: dict[str, list[tuple[float, float, int, int, float]]] = {}
    work = clips(scene, args.paths, not args.no_loop)
    warm = scene.trajectory_channels(200, SEED_B)
    warm_t = np.array([scene.chain.fk(scene.values(x), scene.effector) for x in warm])
    solve_path(eng.model, warm_t[:, None], settings=eng.s)  # first calls untimed
    for name, truth in work:
        targets = np.array([scene.chain.fk(scene.values(x), scene.effector) for x in truth])
        frames = len(truth)
        problem = Problem(model, targets[:, None], None, eng.s)
        spec.start()
        t0 = time.perf_counter()
        for target in targets:
            spec.solve(target, True)
        spec_us = (time.perf_counter() - t0) / frames * 1e6
        model.rows = 0
        t0 = time.perf_counter()
        res = solve_path(model, targets[:, None], settings=eng.s)
        us = (time.perf_counter() - t0) / frames * 1e6
        flips, miss, ratio = judge(model, res.q, res.converged, truth)
        rows_out.setdefault("engine (solve_path)", []).append(
            (us, model.rows / frames, flips, miss, ratio))
        rows_out.setdefault("compiled spec DLS, warm", []).append((spec_us, 0.0, 0, 0, 0.0))
        for cfg in configs:
            count, grid = cfg
            model.rows = 0
            t0 = time.perf_counter()
            cols = columns(model, problem, count, np.random.default_rng(1))
            got = minimal_path(model, problem, args.stride, cols, grid)
            us = (time.perf_counter() - t0) / frames * 1e6
            if got is None:
                flips, miss, ratio = -1, frames, float("inf")
            else:
                flips, miss, ratio = judge(model, got[0], got[1], truth)
            rows_out.setdefault(f"minimal {count}x{grid}", []).append(
                (us, model.rows / frames, flips, miss, ratio))
        print(f"{name}: " + ", ".join(f"{k} {v[-1][0]:.0f} µs {v[-1][2]} flips {v[-1][3]} missed"
                                      for k, v in rows_out.items()), flush=True)
    names = [n for n, _ in work]
    lines = [f"Clips: {', '.join(names)}; arm7, full pose, 1e-5 m and 1e-4 rad; coarse "
             f"frames every {args.stride}. A flip frame: a joint's step over twice the "
             "largest step of the joint path that made the targets. The minimal search's "
             "rows run on the engine's LM; its time includes its lazy search in Python.",
             "",
             "| solver | µs a frame, mean over clips | rows a frame | clips with flips | "
             "flip frames | frames missed | largest ratio |",
             "|---|---|---|---|---|---|---|"]
    for key, vals in rows_out.items():
        fl = [v[2] for v in vals]
        lines.append(f"| {key} | {np.mean([v[0] for v in vals]):.0f} | "
                     f"{np.mean([v[1] for v in vals]):.1f} | "
                     f"{sum(1 for f in fl if f != 0)} | {sum(max(f, 0) for f in fl)} | "
                     f"{sum(v[3] for v in vals)} | {max(v[4] for v in vals):.2f} |")
    lines += ["", "A clip with no candidate left on some coarse frame counts every frame "
              "missed and an infinite ratio."]
    write_report("floor_search.py", started, lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
