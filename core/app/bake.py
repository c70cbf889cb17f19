"""Simulate and bake (SPEC 6): solve every target frame, record it, build animation.json.

Targets are world 4x4 matrices (metres). ``method`` picks the solver: ``"spec"`` (SPEC
5.4's algorithm exactly; the library default, so existing callers are unchanged): frames
in order from the T-pose, each warm-started from the previous frame's solution unless
``warm_start`` is False; or ``"robust"`` (the default of the CLI and the add-on): the
whole trajectory as one problem on the batched engine (``solver.tracks.solve_track``,
the path of least joint motion; with ``warm_start`` False every frame alone,
``solver.batched.solve_many``), or, with chain lengths, poles or driven joints, frame by
frame (``robust.trajectory_frames``: adaptive damping, limit-aware steps, null-space
pull, restarts and bridging). Both handle several effectors at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple, overload

import numpy as np
from numpy.typing import NDArray

from ..errors import DhikError
from ..model.batched import BatchedModel
from ..model.compiled import CompiledKinematics
from ..model.methods import METHODS
from ..model.skeleton import Skeleton
from ..rotations import matrix_to_rotvec, quat_normalize, quat_to_euler_xyz
from ..solver.batched import BatchOptions, solve_many
from ..solver.dls_compiled import solve_spec
from ..solver.kinematics import FrameTargets, Kinematics, Pole
from ..solver.robust import RobustOptions, trajectory_frames
from ..solver.settings import SolverSettings
from ..solver.tracks import TrackOptions, solve_track
from .formats import AnimationColumns, ColumnFrames
from .trajectory import TargetTable

Progress = Callable[[int, int], None]
Target = tuple[int, NDArray[np.float64]]



@dataclass(frozen=True)
class EffectorTrack:
    """One effector's targets ``(frame, world 4x4)`` (metres) and its weights (>= 0).

    A weight of 0 ignores that part: ``rot_weight=0`` makes a position-only target.
    """

    name: str
    targets: Sequence[Target]
    pos_weight: float = 1.0
    rot_weight: float = 1.0
    # the bones the solve may move: the last ``chain_length`` joints of the path ending at
    # this effector, as Blender's IK constraint counts (0: up to the root)
    chain_length: int = 0
    # Blender's IK pole: ``(frame, world position (m))`` like the targets (held before the
    # first and after the last), and the angle (rad) about the first-joint-to-target line
    pole: Sequence[tuple[int, Sequence[float]]] | None = None
    pole_angle: float = 0.0


@dataclass
class FrameRecord:
    """One solved frame: errors in metres and radians."""

    frame: int
    converged: bool
    iterations: int
    position_error: float
    orientation_error: float
    # per effector {"position_error": m, "orientation_error": rad}; the fields above are
    # the maxima over the effectors (a part with weight 0 does not count)
    effector_errors: dict[str, dict[str, float]] = field(default_factory=dict)


class RecordTable(Sequence[FrameRecord]):
    """Every frame's record as arrays (frame numbers, converged, iterations, errors in m
    and rad, per effector); item ``i`` is a :class:`FrameRecord` built when asked for."""

    def __init__(self, frames: NDArray[np.int64], converged: NDArray[np.bool_],
                 iterations: NDArray[np.int64], errors: NDArray[np.float64],
                 per_effector: NDArray[np.float64], effectors: Sequence[str]) -> None:
        self.frame_numbers = frames
        self.converged = converged
        self.iterations = iterations
        self.errors = errors  # (F, 2): position (m), orientation (rad), max over effectors
        self.per_effector = per_effector  # (F, E, 2)
        self.effectors = list(effectors)

    def __len__(self) -> int:
        return len(self.frame_numbers)

    def record(self, i: int) -> FrameRecord:
        per = self.per_effector[i].tolist()
        return FrameRecord(
            int(self.frame_numbers[i]), bool(self.converged[i]), int(self.iterations[i]),
            float(self.errors[i, 0]), float(self.errors[i, 1]),
            {name: {"position_error": pe, "orientation_error": oe}
             for name, (pe, oe) in zip(self.effectors, per, strict=True)})

    def as_json(self) -> list[dict[str, Any]]:
        """Every record as ``dataclasses.asdict`` of its FrameRecord gives it (same keys,
        order and values), straight from the arrays."""
        names = self.effectors
        return [
            {"frame": f, "converged": c, "iterations": it, "position_error": pe,
             "orientation_error": oe,
             "effector_errors": {n: {"position_error": a, "orientation_error": b}
                                 for n, (a, b) in zip(names, per, strict=True)}}
            for f, c, it, (pe, oe), per in zip(
                self.frame_numbers.tolist(), self.converged.tolist(),
                self.iterations.tolist(), self.errors.tolist(), self.per_effector.tolist(),
                strict=True)]

    @overload
    def __getitem__(self, i: int) -> FrameRecord: ...
    @overload
    def __getitem__(self, i: slice) -> list[FrameRecord]: ...
    def __getitem__(self, i: int | slice) -> FrameRecord | list[FrameRecord]:
        if isinstance(i, slice):
            return [self.record(k) for k in range(len(self))[i]]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self.record(i % len(self))


@dataclass
class BakeResult:
    """Per-frame records, the animation.json frames, and what ran.

    A bake's ``records`` and ``frames`` are a :class:`RecordTable` and a
    :class:`~.formats.ColumnFrames`: arrays, with each frame's record or dict built when
    asked for (no per-frame objects for a long bake that is only written out)."""

    records: Sequence[FrameRecord]
    frames: Sequence[dict[str, Any]]
    effector: str
    method: str = "spec"
    wall_time: float = 0.0  # seconds
    settings: dict[str, Any] = field(default_factory=dict)
    effectors: list[str] = field(default_factory=list)  # every effector, in track order
    # frames (numbers) whose joints jump from the frame before: no continuous path
    # through the targets was found there (a target path that forces a flip)
    jumps: list[int] = field(default_factory=list)

    @property
    def converged_count(self) -> int:
        if isinstance(self.records, RecordTable):
            return int(self.records.converged.sum())
        return sum(r.converged for r in self.records)

    def report(self) -> dict[str, Any]:
        """The JSON report: summary figures and every frame's record."""
        return {
            "effector": self.effector,
            "effectors": self.effectors or [self.effector],
            "method": self.method,
            "settings": self.settings,
            "frames": len(self.records),
            "converged": self.converged_count,
            "wall_time_s": self.wall_time,
            "jumps": self.jumps,
            "records": (self.records.as_json() if isinstance(self.records, RecordTable)
                        else [asdict(r) for r in self.records]),
        }


def align_quaternion_signs(frames: list[dict[str, Any]]) -> None:
    """Flip spherical quaternions so each has a non-negative dot with the previous frame's."""
    previous: dict[str, NDArray[np.float64]] = {}
    for fr in frames:
        for name, entry in fr["joints"].items():
            if entry.get("type") != "spherical":
                continue
            q = np.asarray(entry["quaternion"], dtype=float)
            prev = previous.get(name)
            if prev is not None and float(q @ prev) < 0.0:
                q = -q
                entry["quaternion"] = [float(c) for c in q]
            previous[name] = q


def simulate(
    skeleton: Skeleton,
    targets: Sequence[Target] | Sequence[EffectorTrack],
    effector: str | None = None,
    settings: SolverSettings | None = None,
    warm_start: bool = True,
    progress: Progress | None = None,
    *,
    method: str = "spec",
    options: RobustOptions | None = None,
    driven: Sequence[tuple[int, Mapping[str, Mapping[str, Any]]]] | None = None,
    previous: Mapping[str, Mapping[str, Any]] | None = None,
    following: Mapping[str, Mapping[str, Any]] | None = None,
) -> BakeResult:
    """Solve ``targets`` in order and collect the bake.

    ``targets`` is either one effector's ``(frame, world 4x4)`` list (the effector named
    by ``effector``, default the single leaf) or a list of :class:`EffectorTrack`, solved
    together. Tracks are merged on the union of their frames; a track holds its first
    target before its first frame and its last after its last. ``options`` tune the
    robust method. The skeleton is reset to the T-pose first and is left in the last
    frame's pose.

    ``driven`` gives joints outside the solved chains (see ``EffectorTrack.chain_length``)
    their values frame by frame, as ``(frame, {joint: SPEC 3.3 entry})`` (an animated
    spine under an arm's IK): a frame takes the latest entry at or before it (the first
    before the first), and the baked frames carry those values. Joints neither solved
    nor driven keep the T-pose.

    ``previous`` gives the pose on the frame before the first, as SPEC 3.3 entries (the
    keys a re-baked part of an animation follows, in Blender): a warm bake starts from
    the first frame's solution nearest to it (robust trajectories: reached from it by
    LM, when it is reached; frame by frame: the first frame's warm start).
    ``following``, the pose on the frame after the last (the keys after that part): a
    robust trajectory on the flip-free engine ends at the last frame's solution reached
    from it. A cold start ignores both.
    """
    settings = settings or SolverSettings()
    if method not in METHODS:
        raise DhikError(f"unknown method {method!r}: choose {' or '.join(METHODS)}")
    tracks = _as_tracks(skeleton, targets, effector)
    names = [t.name for t in tracks]
    numbers, per_frame = merge_tracks(tracks)
    extras = _frame_extras(skeleton, tracks, numbers, driven)
    if extras is not None:
        if method == "spec" and any(t.pole for t in tracks):
            raise DhikError("pole targets need --method robust")
        per_frame = [FrameTargets(row, values, poles)
                     for row, (values, poles) in zip(per_frame, extras, strict=True)]
    kwargs = settings.kwargs()
    jumps: list[int] = []  # frame indices
    start = time.perf_counter()
    skeleton.reset()
    fixed = skeleton.joint_values()  # the T-pose: joints off the paths keep it
    if previous and warm_start:  # frame by frame: the first frame's warm start
        skeleton.set_joint_values({k: dict(v) for k, v in previous.items()})
    model = CompiledKinematics(skeleton, names, [t.chain_length for t in tracks])
    # frame by frame (state, result), or (the batched engine) blocks of frames as arrays
    solved: Iterator[tuple[object, Any]] = iter(())
    blocks: Iterator[_Block] = iter(())
    if method == "spec":
        if any((t.pos_weight, t.rot_weight) != (1.0, 1.0) for t in tracks):
            raise DhikError("effector weights need --method robust")
        solved = _solve_spec_frames(model, per_frame, settings, warm_start, progress)
    elif not any(t.pole for t in tracks):  # poles: the frame-by-frame tracker below
        weights = [(t.pos_weight, t.rot_weight) for t in tracks]
        blocks = _batched_frames(skeleton, names, per_frame, settings, weights, warm_start,
                                 options or RobustOptions(), progress, jumps, previous,
                                 following, [t.chain_length for t in tracks])
    else:
        weights = [(t.pos_weight, t.rot_weight) for t in tracks]
        solved = ((f.state, f.result) for f in trajectory_frames(
            model, per_frame, settings, weights=weights, options=options,
            cold_start=not warm_start, progress=progress, keep_start=bool(previous)))
    kinds = [entry["type"] for entry in fixed.values()]
    count = len(numbers)
    width = sum(AnimationColumns.WIDTH[k] for k in kinds)
    # every frame's joint values (file order), converged, iterations and errors: arrays
    # filled as the frames come (a long bake holds no per-frame objects)
    values_out = np.empty((count, width))
    converged = np.empty(count, dtype=bool)
    iterations = np.empty(count, dtype=np.int64)
    errors = np.empty((count, 2))
    per_effector = np.empty((count, len(names), 2))
    state: object = None
    row: list[float] = []
    add, extend = row.append, row.extend
    done = 0
    for block in blocks:
        part = slice(done, done + len(block.q))
        converged[part], iterations[part] = block.converged, block.iterations
        errors[part, 0], errors[part, 1] = block.worst_position, block.worst_orientation
        per_effector[part, :, 0] = block.position_error
        per_effector[part, :, 1] = block.orientation_error
        values_out[part] = _value_rows(block.model.value_columns(block.q), fixed, kinds,
                                       width, len(block.q))
        if extras is not None:  # driven joints keep the values given, as they are
            _put_driven(values_out[part], per_frame[part], block.model.solved, fixed, kinds)
        done = part.stop
        if len(block.q):
            state = block.model.joint_values(block.q[-1])
            last_given = getattr(per_frame[done - 1], "driven", None)
            if last_given:
                state = {**state, **{k: v for k, v in last_given.items()
                                     if k not in block.model.solved}}
    for i, (state, res) in enumerate(solved):
        frame_targets = per_frame[i]
        per = getattr(res, "effector_errors", None)
        if not per and len(names) == 1:  # one effector: the result's errors are its own
            per = [(res.position_error, res.orientation_error)]
        if not per:
            model.restore(state)
            model.update()
            per = _effector_errors(model, frame_targets)
        converged[i] = res.converged
        iterations[i] = res.iterations
        errors[i] = (res.position_error, res.orientation_error)
        per_effector[i] = per
        values = state if isinstance(state, dict) else model.joint_values(state)
        frame_driven = getattr(frame_targets, "driven", None)
        if frame_driven:
            values = {**frame_driven, **values}
        row.clear()
        for (name, entry), kind in zip(fixed.items(), kinds, strict=True):
            e = values.get(name, entry)
            if kind == "revolute":
                add(e["angle"])
            elif kind == "prismatic":
                add(e["displacement"])
            else:
                extend(e["euler"])
                extend(e["quaternion"])
        values_out[i] = row
        done = i + 1
    if done != count:  # the solvers give one result per frame
        raise RuntimeError(f"{done} frames solved of {count}")
    frame_numbers = np.array(numbers, dtype=np.int64)
    records = RecordTable(frame_numbers, converged, iterations, errors, per_effector, names)
    anim = AnimationColumns(frame_numbers, list(fixed), kinds, values_out)
    if isinstance(state, dict):  # the batched engine's last frame
        skeleton.set_joint_values(state)
    else:
        if state is not None:
            model.restore(state)
            model.update()
        last_driven = getattr(per_frame[-1], "driven", None) if per_frame else None
        if last_driven:
            skeleton.set_joint_values(dict(last_driven))  # driven joints: last frame's
        model.write_back(skeleton)  # the last frame's pose, FK current
    anim.align_quaternion_signs()
    return BakeResult(records, ColumnFrames(anim), ",".join(names), method,
                      time.perf_counter() - start, kwargs, names,
                      [int(numbers[i]) for i in jumps])


# frames the batched engine solves at a time: a long bake holds one window's arrays
BATCH_WINDOW = 20_000


class _Block(NamedTuple):
    """Consecutive frames solved by the batched engine: coordinates (k, n) of ``model``
    (rad, m), converged and iterations (k,), the largest counted position (m) and
    orientation (rad) error per frame (k,), and every effector's (k, m)."""

    model: BatchedModel
    q: NDArray[np.float64]
    converged: NDArray[np.bool_]
    iterations: NDArray[np.int64]
    worst_position: NDArray[np.float64]
    worst_orientation: NDArray[np.float64]
    position_error: NDArray[np.float64]
    orientation_error: NDArray[np.float64]


def _value_rows(columns: Mapping[str, tuple[str, NDArray[np.float64]]],
                fixed: Mapping[str, Mapping[str, Any]], kinds: Sequence[str], width: int,
                k: int) -> NDArray[np.float64]:  # fmt: skip
    """Rows (k, width) of animation columns (file order: ``fixed``'s joints) from the
    solved joints' value ``columns`` (:meth:`BatchedModel.value_columns`) of k frames;
    the other joints keep their ``fixed`` (T-pose) entry."""
    out = np.empty((k, width))
    col = 0
    for (name, entry), kind in zip(fixed.items(), kinds, strict=True):
        w = AnimationColumns.WIDTH[kind]
        got = columns.get(name)
        out[:, col:col + w] = got[1].reshape(k, w) if got is not None else \
            _entry_values(kind, entry)
        col += w
    return out


def _entry_values(kind: str, entry: Mapping[str, Any]) -> list[float]:
    """A SPEC 3.3 entry's animation columns: the angle (rad), the displacement (m), or a
    spherical joint's file ``euler`` XYZ (rad) then ``quaternion`` ``[w, x, y, z]``."""
    if kind == "revolute":
        return [float(entry["angle"])]
    if kind == "prismatic":
        return [float(entry["displacement"])]
    return [*map(float, entry["euler"]), *map(float, entry["quaternion"])]


def _put_driven(rows: NDArray[np.float64], frames: Sequence[Any], solved: frozenset[str],
                fixed: Mapping[str, Mapping[str, Any]], kinds: Sequence[str]) -> None:
    """Write each frame's driven values (``FrameTargets.driven``, SPEC 3.3 entries) of
    joints outside the solved chains into its animation row (file order: ``fixed``'s
    joints), in place."""
    offset: dict[str, tuple[str, int]] = {}
    col = 0
    for name, kind in zip(fixed, kinds, strict=True):
        offset[name] = (kind, col)
        col += AnimationColumns.WIDTH[kind]
    cache: dict[int, list[tuple[int, list[float]]]] = {}  # frames share their mapping
    for row, frame in zip(rows, frames, strict=True):
        given = getattr(frame, "driven", None)
        if not given:
            continue
        put = cache.get(id(given))
        if put is None:
            put = []
            for name, entry in given.items():
                if name in solved or name not in offset:
                    continue
                kind, at = offset[name]
                put.append((at, _entry_values(kind, entry)))
            cache[id(given)] = put
        for at, vals in put:
            row[at:at + len(vals)] = vals


def _held_rows(model: BatchedModel, frames: Sequence[Any]) -> NDArray[np.float64]:
    """The held columns' values (k, n) of ``frames`` (rad, m): each frame's driven values
    (``FrameTargets.driven``), the T-pose where none are given."""
    out = np.zeros((len(frames), model.n))
    cache: dict[int, NDArray[np.float64]] = {}
    for i, frame in enumerate(frames):
        given = getattr(frame, "driven", None)
        if given:
            row = cache.get(id(given))
            if row is None:
                row = cache[id(given)] = model.coordinates(given)
            out[i] = row
    return out


def _batched_frames(
    skeleton: Skeleton,
    names: list[str],
    per_frame: Sequence[Sequence[NDArray[np.float64]]],
    settings: SolverSettings,
    weights: list[tuple[float, float]],
    warm_start: bool,
    options: RobustOptions,
    progress: Progress | None,
    jumps: list[int],
    previous: Mapping[str, Mapping[str, Any]] | None = None,
    following: Mapping[str, Mapping[str, Any]] | None = None,
    chain_lengths: list[int] | None = None,
) -> Iterator[_Block]:
    """The robust method on the batched engine, a :class:`_Block` of frames at a time
    (targets world 4x4, metres).

    Warm (a trajectory): ``solve_track``, the whole path as one problem, a window of
    :data:`BATCH_WINDOW` frames at a time, each window starting from the last frame of
    the one before (the first from the frame ``previous`` to it, the last to the frame
    ``following``, when given); frames where no continuous path was found are added
    to ``jumps``. Cold: ``solve_many``, every frame alone, a window at a time. With
    ``chain_lengths``, the joints on the paths outside the chains are held at each
    frame's driven values (``FrameTargets.driven``), else at the T-pose.
    """
    model = BatchedModel(skeleton.defn, names, chain_lengths)
    lengths = chain_lengths or [0] * len(names)
    # effectors whose solved joints do not touch are solved apart (two arms under a
    # driven spine): each part's path finds its own branch
    groups = _coupled(model)
    parts = [_Part(model, list(range(len(names))), previous, following)] \
        if len(groups) == 1 else [
        _Part(BatchedModel(skeleton.defn, [names[e] for e in g], [lengths[e] for e in g]), g,
              previous, following, model) for g in groups]
    total = len(per_frame)
    count_p = np.array([w[0] > 0 for w in weights])[None]
    count_r = np.array([w[1] > 0 for w in weights])[None]
    topts = TrackOptions(position_tolerance=settings.position_tolerance,
                         orientation_tolerance=settings.orientation_tolerance,
                         max_iterations=settings.max_iterations, seed=options.seed)
    bopts = BatchOptions(position_tolerance=settings.position_tolerance,
                         orientation_tolerance=settings.orientation_tolerance,
                         max_iterations=settings.max_iterations, seed=options.seed)
    a, first = 0, True
    while a < total:
        # a trajectory window overlaps the one before by its first frame (``last``)
        lo = a if first or not warm_start else a - 1
        b = min(total, lo + BATCH_WINDOW)
        targets = np.array([list(per_frame[i]) for i in range(lo, b)], dtype=float)
        k, m = b - lo, len(names)
        q, conv = np.zeros((k, model.n)), np.ones(k, dtype=bool)
        pe, re = np.zeros((k, m)), np.zeros((k, m))
        iters = np.zeros(k, dtype=np.int64)
        found: set[int] = set()
        for part in parts:
            pm, eff = part.model, part.effectors
            held = _held_rows(pm, per_frame[lo:b]) if pm.held.any() else None
            w = [weights[e] for e in eff]
            if warm_start:
                res = solve_track(pm, targets[:, eff], w, topts, start=part.last,
                                  before=part.before if first else None,
                                  after=part.after if b == total else None, held=held)
                pq, pc, pp, pr, pi = res.q, res.converged, res.position_error, \
                    res.orientation_error, res.iterations
                found.update(lo + j for j in res.jumps if lo + j >= a)
                part.last = pq[-1]
            else:
                many = solve_many(pm, targets[:, eff], w, bopts, held=held)
                pq, pc, pp, pr, pi = many.q, many.converged, many.position_error, \
                    many.orientation_error, many.iterations
            q[:, part.columns] = pq
            conv &= pc
            pe[:, eff], re[:, eff] = pp, pr
            iters += pi
        jumps.extend(sorted(found))
        first = False
        # the frame's errors: the largest over the effectors whose part counts
        worst_p = np.where(count_p, pe, 0.0).max(axis=1, initial=0.0)
        worst_r = np.where(count_r, re, 0.0).max(axis=1, initial=0.0)
        new = slice(a - lo, len(q))  # the window's first frame may be the last one's
        yield _Block(model, q[new], conv[new], iters[new], worst_p[new], worst_r[new],
                     pe[new], re[new])
        a = b
        if progress is not None:
            progress(a, total)


class _Part:
    """Effectors solved together on the batched engine: their ``model``, their indices
    among all effectors, the model's columns in the ``whole`` model's, the poses around
    the range as its coordinates, and the last frame solved (where the next window
    starts)."""

    def __init__(self, model: BatchedModel, effectors: list[int],
                 previous: Mapping[str, Mapping[str, Any]] | None,
                 following: Mapping[str, Mapping[str, Any]] | None,
                 whole: BatchedModel | None = None) -> None:  # fmt: skip
        self.model, self.effectors = model, effectors
        index = {name: i for i, name in enumerate((whole or model).names)}
        self.columns = [index[name] for name in model.names]
        self.before = model.coordinates(previous) if previous else None
        self.after = model.coordinates(following) if following else None
        self.last: NDArray[np.float64] | None = None


def _coupled(model: BatchedModel) -> list[list[int]]:
    """Groups of effectors (indices) whose paths share a solved (not held) column,
    directly or through others; each group in effector order, groups by first effector."""
    moving = model.paths & ~model.held[None, :]  # (m, n)
    group = list(range(len(model.effectors)))

    def top(e: int) -> int:
        while group[e] != e:
            e = group[e]
        return e

    for c in range(model.n):
        on = np.flatnonzero(moving[:, c])
        for e in on[1:]:
            group[top(int(e))] = top(int(on[0]))
    out: dict[int, list[int]] = {}
    for e in range(len(group)):
        out.setdefault(top(e), []).append(e)
    return list(out.values())


def _solve_spec_frames(
    model: CompiledKinematics,
    per_frame: Sequence[Sequence[NDArray[np.float64]]],
    settings: SolverSettings,
    warm_start: bool,
    progress: Progress | None,
) -> Iterator[tuple[object, Any]]:
    """SPEC 5.4 on every frame (stacked errors for several effectors): (state, result),
    one frame at a time."""
    for i, frame_targets in enumerate(per_frame):
        if not warm_start:
            model.reset()
        if getattr(frame_targets, "driven", None):
            model.drive(frame_targets.driven)  # type: ignore[attr-defined]
        target = frame_targets[0] if len(frame_targets) == 1 else list(frame_targets)
        res = solve_spec(model, target, settings)
        yield model.save(), res
        if progress is not None:
            progress(i + 1, len(per_frame))


def _as_tracks(
    skeleton: Skeleton, targets: Sequence[Target] | Sequence[EffectorTrack], effector: str | None
) -> list[EffectorTrack]:
    """The effector tracks of a simulate call, checked (DhikError on bad input)."""
    tracks: list[EffectorTrack]
    if targets and isinstance(targets[0], EffectorTrack):
        tracks = list(targets)  # type: ignore[arg-type]
        if effector is not None:
            raise DhikError("name the effectors in their tracks, not with effector=")
    else:
        name = effector or skeleton.default_effector()
        tracks = [EffectorTrack(name, targets)]  # type: ignore[arg-type]
    seen: set[str] = set()
    for t in tracks:
        skeleton.joint(t.name)
        if t.name in seen:
            raise DhikError(f"effector {t.name!r} has two target tracks")
        seen.add(t.name)
        weights = (t.pos_weight, t.rot_weight)
        if not all(math.isfinite(w) and w >= 0 for w in weights) or max(weights) == 0:
            raise DhikError(f"effector {t.name!r}: weights must be >= 0 and not both 0")
        if not t.targets:
            raise DhikError(f"effector {t.name!r} has no targets")
        if not isinstance(t.chain_length, int) or t.chain_length < 0:
            raise DhikError(f"effector {t.name!r}: chain length must be an integer >= 0")
    return tracks


def _xyz(v: Sequence[float]) -> tuple[float, float, float]:
    return float(v[0]), float(v[1]), float(v[2])


def _full_entry(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A driven joint's SPEC 3.3 entry with every field: a spherical joint's unit
    quaternion ``[w, x, y, z]`` and its XYZ Euler angles (rad) from it (DhikError when a
    value is missing or not finite)."""
    field_name = {"revolute": "angle", "prismatic": "displacement"}.get(entry["type"])
    if field_name is not None:
        value = entry.get(field_name)
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise DhikError(f"{where}: needs a finite {field_name!r}")
        return dict(entry)
    q = np.asarray(entry.get("quaternion", ()), dtype=float)
    if q.shape != (4,) or not np.all(np.isfinite(q)) or not 1e-12 < float(q @ q) < 1e300:
        raise DhikError(f"{where}: needs a non-zero finite 'quaternion' [w, x, y, z]")
    q = quat_normalize(q)
    return {"type": "spherical", "euler": [float(v) for v in quat_to_euler_xyz(q)],
            "quaternion": [float(v) for v in q]}


def _held(track: Sequence[tuple[int, Any]], numbers: list[int]) -> list[Any]:
    """Per frame of ``numbers`` the value of ``track`` (``(frame, value)`` pairs) at the
    latest frame at or before it; the first value before the first frame."""
    by_frame = dict(track)
    keys = sorted(by_frame)
    out, k = [], 0
    for frame in numbers:
        while k + 1 < len(keys) and keys[k + 1] <= frame:
            k += 1
        out.append(by_frame[keys[k]])
    return out


def _frame_extras(
    skeleton: Skeleton,
    tracks: Sequence[EffectorTrack],
    numbers: list[int],
    driven: Sequence[tuple[int, Mapping[str, Mapping[str, Any]]]] | None,
) -> list[tuple[Mapping[str, Any] | None, list[Pole | None] | None]] | None:
    """Per frame the driven joint values and the poles (None when no track has either)."""
    if not driven and not any(t.pole for t in tracks):
        return None
    for t in tracks:
        if t.pole is not None:
            path = [t.name]
            node = skeleton.joint(t.name).parent
            while node is not None:
                path.append(node.name)
                node = node.parent
            if len(path[: t.chain_length or None]) < 3:
                raise DhikError(f"effector {t.name!r}: a pole needs a chain of 3 joints or "
                                "more (2 bones and the effector)")
            for frame, pos in t.pole:
                if len(pos) != 3 or not all(math.isfinite(float(v)) for v in pos):
                    raise DhikError(f"effector {t.name!r}: pole at frame {frame}: "
                                    "need 3 finite numbers (m)")
            if not math.isfinite(t.pole_angle):
                raise DhikError(f"effector {t.name!r}: pole angle must be finite (rad)")
    kinds = {name: j.get_dof() for name, j in skeleton.joints.items()}
    for frame, entries in driven or ():
        for name, entry in entries.items():
            if name not in kinds:
                raise DhikError(f"driven values, frame {frame}: no joint {name!r}")
            want = {1: ("revolute", "prismatic"), 3: ("spherical",)}.get(kinds[name], ())
            if entry.get("type") not in want:
                raise DhikError(f"driven values, frame {frame}: joint {name!r} is not "
                                f"{entry.get('type')!r}")
    if driven:  # whole SPEC 3.3 entries: a spherical value may come as a quaternion alone
        driven = [(frame, {name: _full_entry(e, f"driven values, frame {frame}: joint "
                                                f"{name!r}") for name, e in entries.items()})
                  for frame, entries in driven]
    values = _held(driven, numbers) if driven else [None] * len(numbers)
    poles = [
        None if t.pole is None else [Pole(_xyz(pos), t.pole_angle)
                                     for pos in _held(t.pole, numbers)]
        for t in tracks
    ]
    rows: list[list[Pole | None] | None] = [
        None if all(p is None for p in poles) else
        [None if p is None else p[i] for p in poles] for i in range(len(numbers))
    ]
    return list(zip(values, rows, strict=True))


class _OneTrack(Sequence[list[NDArray[np.float64]]]):
    """Each frame's targets when one track's :class:`TargetTable` gives them all: a
    one-item list built when asked for (no per-frame objects held for a long bake)."""

    def __init__(self, matrices: NDArray[np.float64]) -> None:
        self.matrices = matrices

    def __len__(self) -> int:
        return len(self.matrices)

    @overload
    def __getitem__(self, i: int) -> list[NDArray[np.float64]]: ...
    @overload
    def __getitem__(self, i: slice) -> list[list[NDArray[np.float64]]]: ...
    def __getitem__(self, i: int | slice
                    ) -> list[NDArray[np.float64]] | list[list[NDArray[np.float64]]]:
        if isinstance(i, slice):
            return [[m] for m in self.matrices[i]]
        return [self.matrices[i]]


def merge_tracks(tracks: Sequence[EffectorTrack]) -> tuple[list[int], Sequence[list[Any]]]:
    """Frame numbers (the union of the tracks') and each frame's targets, track order.

    A track holds its first target before its first frame and its last after its last.
    """
    if len(tracks) == 1 and isinstance(tracks[0].targets, TargetTable):
        table = tracks[0].targets  # frames 0 .. last, every one
        return table.frame_numbers.tolist(), _OneTrack(table.matrices)
    numbers = sorted({frame for t in tracks for frame, _ in t.targets})
    per_track = []
    for t in tracks:
        by_frame = dict(t.targets)
        keys = sorted(by_frame)
        column, k = [], 0
        for frame in numbers:
            while k + 1 < len(keys) and keys[k + 1] <= frame:
                k += 1
            column.append(by_frame[keys[k]])
        per_track.append(column)
    return numbers, [list(row) for row in zip(*per_track, strict=True)]


def _effector_errors(
    model: Kinematics, targets: list[NDArray[np.float64]]
) -> list[tuple[float, float]]:
    """Each effector's position (m) and orientation (rad) error in the model's state."""
    out = []
    for k, t in enumerate(targets):
        g = model.effector_transform(k)
        dp = t[:3, 3] - g[:3, 3]
        dr = matrix_to_rotvec(t[:3, :3] @ g[:3, :3].T)
        out.append((math.sqrt(float(dp @ dp)), math.sqrt(float(dr @ dr))))
    return out


def summary_line(result: BakeResult) -> str:
    """One line: frames, converged, max/median errors (m, rad), wall time, method."""
    recs = result.records
    n = len(recs)
    if n == 0:
        return "dhik bake: 0 frames"
    if isinstance(recs, RecordTable):  # arrays: no list of a million floats
        pe, oe = recs.errors[:, 0], recs.errors[:, 1]
    else:
        pe = np.array([r.position_error for r in recs], dtype=float)
        oe = np.array([r.orientation_error for r in recs], dtype=float)
    unconverged = n - result.converged_count
    verdict = "all converged" if unconverged == 0 else f"{unconverged} NOT converged"
    if result.jumps:
        shown = ", ".join(map(str, result.jumps[:5])) + (", ..." if len(result.jumps) > 5
                                                         else "")
        verdict += f"; {len(result.jumps)} jumps with no continuous path (frames {shown})"
    return (
        f"dhik bake: {n} frames, {result.converged_count}/{n} converged ({verdict}), "
        f"position error max {pe.max():.3g} m median {float(np.median(pe)):.3g} m, "
        f"orientation error max {oe.max():.3g} rad median {float(np.median(oe)):.3g} rad, "
        f"{'effectors' if len(result.effectors) > 1 else 'effector'} {result.effector}, "
        f"method {result.method}, {result.wall_time:.2f} s"
    )
