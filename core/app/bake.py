"""Simulate and bake (SPEC 6): solve every target frame, record it, build animation.json.

Targets are world 4x4 matrices (metres). ``method`` picks the solver: ``"spec"`` (SPEC
5.4's algorithm exactly; the library default, so existing callers are unchanged): frames
in order from the T-pose, each warm-started from the previous frame's solution unless
``warm_start`` is False; or ``"robust"`` (the default of the CLI and the add-on): the
robust engine, one for every case (chain lengths, driven joints, poles, several
effectors): the whole trajectory as one problem (``solver.path.solve_path``, the path of
least joint motion, a window of frames at a time), or with ``warm_start`` False every
frame alone (``solver.lm.solve_many``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from ..errors import DhikError
from ..model.compiled import CompiledKinematics
from ..model.joint_space import BatchedModel
from ..model.methods import METHODS
from ..model.skeleton import Skeleton
from ..rotations import matrix_to_rotvec
from ..solver.dls_compiled import solve_spec
from ..solver.kinematics import FrameTargets, Kinematics
from ..solver.lm import solve_many
from ..solver.path import cheap_path, solve_path
from ..solver.settings import RobustOptions, SolverSettings
from .blas_threads import on_one_blas_thread
from .formats import AnimationColumns, ColumnFrames
from .inputs import EffectorTrack, Target, check_tracks, frame_extras, merge_tracks
from .parts import held_rows, parts_of
from .results import BakeResult, FrameRecord, RecordTable, align_quaternion_signs, summary_line

Progress = Callable[[int, int], None]

__all__ = ["METHODS", "BakeResult", "EffectorTrack", "FrameRecord", "RecordTable",
           "align_quaternion_signs", "merge_tracks", "simulate", "summary_line"]


@on_one_blas_thread
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
    robust method (every field acts; the spec method takes none). The skeleton is reset
    to the T-pose first and is left in the last frame's pose. ``progress(done, total)``
    (frames) is called often while the robust engine solves (at least after every batch
    of its LM); an exception raised in it stops the bake and comes out of simulate.

    ``driven`` gives joints outside the solved chains (see ``EffectorTrack.chain_length``)
    their values frame by frame, as ``(frame, {joint: SPEC 3.3 entry})`` (an animated
    spine under an arm's IK): a frame takes the latest entry at or before it (the first
    before the first), and the baked frames carry those values. Joints neither solved
    nor driven keep the T-pose.

    ``previous`` gives the pose on the frame before the first, as SPEC 3.3 entries (the
    keys a re-baked part of an animation follows, in Blender): a warm bake starts from
    the first frame's solution nearest to it (robust: reached from it by LM, when it is
    reached; spec: the first frame's warm start). ``following``, the pose on the frame
    after the last: a robust trajectory ends at the last frame's solution reached from
    it. A cold start ignores both.
    """
    settings = settings or SolverSettings()
    if method not in METHODS:
        raise DhikError(f"unknown method {method!r}: choose {' or '.join(METHODS)}")
    if method == "spec" and options is not None:
        raise DhikError("robust options do not apply to the spec method")
    tracks = check_tracks(skeleton, targets, effector)
    names = [t.name for t in tracks]
    numbers, per_frame = merge_tracks(tracks)
    extras = frame_extras(skeleton, tracks, numbers, driven)
    if extras is not None:
        if method == "spec" and any(t.pole for t in tracks):
            raise DhikError("pole targets need --method robust")
        per_frame = [FrameTargets(row, values, poles)
                     for row, (values, poles) in zip(per_frame, extras, strict=True)]
    jumps: list[int] = []  # frame indices
    start = time.perf_counter()
    # the robust engine never reads the joint objects: their FK runs once, at the end
    skeleton.reset(fk=method == "spec")
    fixed = skeleton.tpose_values()  # the T-pose: joints off the paths keep it
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
    if method == "spec":
        if any((t.pos_weight, t.rot_weight) != (1.0, 1.0) for t in tracks):
            raise DhikError("effector weights need --method robust")
        acted = settings.kwargs()
        if previous and warm_start:  # the first frame's warm start
            skeleton.set_joint_values({k: dict(v) for k, v in previous.items()})
        model = CompiledKinematics(skeleton, names, [t.chain_length for t in tracks])
        last = _spec_frames(model, per_frame, settings, warm_start, progress, fixed, kinds,
                            (values_out, converged, iterations, errors, per_effector))
        model.write_back(skeleton)  # the last frame's pose, FK current
        if last:
            skeleton.set_joint_values(dict(last))  # driven joints: the last frame's
    else:
        opts = options or RobustOptions()
        acted = {"position_tolerance": settings.position_tolerance,
                 "orientation_tolerance": settings.orientation_tolerance,
                 "max_iterations": settings.max_iterations, "cold_start": not warm_start,
                 **asdict(opts)}
        weights = [(t.pos_weight, t.rot_weight) for t in tracks]
        layout = _Layout.of(fixed, kinds)
        done = 0
        state: dict[str, Any] | None = None
        try:
            for block in _robust_blocks(skeleton, tracks, per_frame, settings, weights,
                                        warm_start, opts, progress, jumps, previous, following):
                part = slice(done, done + len(block.q))
                converged[part], iterations[part] = block.converged, block.iterations
                errors[part, 0], errors[part, 1] = block.worst_position, block.worst_orientation
                per_effector[part, :, 0] = block.position_error
                per_effector[part, :, 1] = block.orientation_error
                values_out[part] = _value_rows(block.model.value_columns(block.q), layout,
                                               len(block.q))
                if extras is not None:  # driven joints keep the values given, as they are
                    _put_driven(values_out[part], per_frame[part], block.model.solved,
                                layout)
                done = part.stop
                if len(block.q):
                    state = block.model.joint_values(block.q[-1])
                    given = getattr(per_frame[done - 1], "driven", None)
                    if given:
                        state = {**state, **{k: v for k, v in given.items()
                                             if k not in block.model.solved}}
            if done != count:  # the engine gives one result per frame
                raise RuntimeError(f"{done} frames solved of {count}")
        finally:  # the last frame's pose (the T-pose if none), FK current
            skeleton.set_joint_values(state or {})
    frame_numbers = np.array(numbers, dtype=np.int64)
    records = RecordTable(frame_numbers, converged, iterations, errors, per_effector, names)
    anim = AnimationColumns(frame_numbers, list(fixed), kinds, values_out)
    anim.align_quaternion_signs()
    return BakeResult(records, ColumnFrames(anim), ",".join(names), method,
                      time.perf_counter() - start, acted, names,
                      [int(numbers[i]) for i in jumps])


def _spec_frames(model: CompiledKinematics, per_frame: Sequence[Sequence[NDArray[np.float64]]],
                 settings: SolverSettings, warm_start: bool, progress: Progress | None,
                 fixed: Mapping[str, Mapping[str, Any]], kinds: Sequence[str],
                 out: tuple[NDArray[Any], ...]) -> Mapping[str, Any] | None:  # fmt: skip
    """SPEC 5.4 on every frame (stacked errors for several effectors), written into
    ``out`` (values, converged, iterations, errors, per effector); the last frame's
    driven values (or None)."""
    values_out, converged, iterations, errors, per_effector = out
    n_eff = len(model.effectors)
    row: list[float] = []
    add, extend = row.append, row.extend
    for i, frame_targets in enumerate(per_frame):
        if not warm_start:
            model.reset()
        frame_driven = getattr(frame_targets, "driven", None)
        if frame_driven:
            model.drive(frame_driven)
        target = frame_targets[0] if len(frame_targets) == 1 else list(frame_targets)
        res = solve_spec(model, target, settings)
        state = model.save()
        if n_eff == 1:  # one effector: the result's errors are its own
            per = [(res.position_error, res.orientation_error)]
        else:
            model.update()
            per = _effector_errors(model, list(frame_targets))
        converged[i], iterations[i] = res.converged, res.iterations
        errors[i] = (res.position_error, res.orientation_error)
        per_effector[i] = per
        values = model.joint_values(state)
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
        if progress is not None:
            progress(i + 1, len(per_frame))
    return getattr(per_frame[-1], "driven", None) if len(per_frame) else None


class _Block(NamedTuple):
    """Consecutive frames solved by the robust engine: coordinates (k, n) of ``model``
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


class _Layout(NamedTuple):
    """Per joint where its animation columns start and its type (file order: the
    T-pose's joints), and the T-pose's row of them all (width,) (rad, m, quaternions)."""

    offsets: dict[str, tuple[int, str]]
    tpose: NDArray[np.float64]

    @classmethod
    def of(cls, fixed: Mapping[str, Mapping[str, Any]], kinds: Sequence[str]) -> _Layout:
        offsets: dict[str, tuple[int, str]] = {}
        row: list[float] = []
        for (name, entry), kind in zip(fixed.items(), kinds, strict=True):
            offsets[name] = (len(row), kind)
            row += _entry_values(kind, entry)
        return cls(offsets, np.array(row, dtype=float))


def _value_rows(columns: Mapping[str, tuple[str, NDArray[np.float64]]], layout: _Layout,
                k: int) -> NDArray[np.float64]:  # fmt: skip
    """Rows (k, width) of animation columns from the solved joints' value ``columns``
    (:meth:`BatchedModel.value_columns`) of k frames; the other joints keep their
    T-pose entry (a rig of hundreds of bones solves a few: those alone are written)."""
    out = np.tile(layout.tpose, (k, 1))
    for name, (_, values) in columns.items():
        col, kind = layout.offsets[name]
        w = AnimationColumns.WIDTH[kind]
        out[:, col:col + w] = values.reshape(k, w)
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
                layout: _Layout) -> None:
    """Write each frame's driven values (``FrameTargets.driven``, SPEC 3.3 entries) of
    joints outside the solved chains into its animation row (``layout``'s columns), in
    place."""
    offset = layout.offsets
    # frames share their mapping (a still body: one for all): each mapping's rows at once
    groups: dict[int, tuple[Mapping[str, Any], list[int]]] = {}
    for i, frame in enumerate(frames):
        given = getattr(frame, "driven", None)
        if given:
            groups.setdefault(id(given), (given, []))[1].append(i)
    for given, at_rows in groups.values():
        sel = np.array(at_rows)
        for name, entry in given.items():
            if name in solved or name not in offset:
                continue
            at, kind = offset[name]
            vals = _entry_values(kind, entry)
            rows[sel, at:at + len(vals)] = vals


def _robust_blocks(
    skeleton: Skeleton,
    tracks: Sequence[EffectorTrack],
    per_frame: Sequence[Sequence[NDArray[np.float64]]],
    settings: SolverSettings,
    weights: list[tuple[float, float]],
    warm_start: bool,
    options: RobustOptions,
    progress: Progress | None,
    jumps: list[int],
    previous: Mapping[str, Mapping[str, Any]] | None = None,
    following: Mapping[str, Mapping[str, Any]] | None = None,
) -> Iterator[_Block]:
    """The robust engine, a :class:`_Block` of frames at a time (targets world 4x4, m).

    Warm (a trajectory): ``solve_path``, the whole path as one problem, a window of
    ``options.window`` frames at a time, each window starting from the last frame of the
    one before (the first from the frame ``previous`` to it, the last to the frame
    ``following``, when given); frames where no continuous path was found are added
    to ``jumps``. Cold: ``solve_many``, every frame alone, a window at a time. Joints on
    the paths outside the chains are held at each frame's driven values
    (``FrameTargets.driven``), else at the T-pose. Effectors whose solved joints do not
    touch are solved apart (two arms under a driven spine): each part's path finds its
    own branch.
    """
    names = [t.name for t in tracks]
    whole, parts = parts_of(skeleton, tracks, previous, following)
    # parts that may take the cheap pass take it together, in one batch (four legs:
    # one LM call per coarse frame instead of four); where it is not the answer for
    # all of them, each part is solved on its own
    together = warm_start and len(parts) > 1 and all(
        not p.poled and p.redundancy([weights[e] for e in p.effectors]) != 1 for p in parts)
    whole_before = whole.coordinates(previous) if previous and together else None
    whole_after = whole.coordinates(following) if following and together else None
    whole_last: NDArray[np.float64] | None = None
    total = len(per_frame)
    count_p = np.array([w[0] > 0 for w in weights])[None]
    count_r = np.array([w[1] > 0 for w in weights])[None]
    window = max(int(options.window), 2)
    a, first = 0, True
    while a < total:
        # a trajectory window overlaps the one before by its first frame (``last``)
        lo = a if first or not warm_start else a - 1
        b = min(total, lo + window)
        targets = np.array([list(per_frame[i]) for i in range(lo, b)], dtype=float)
        k, m = b - lo, len(names)
        q, conv = np.zeros((k, whole.n)), np.ones(k, dtype=bool)
        pe, re = np.zeros((k, m)), np.zeros((k, m))
        iters = np.zeros(k, dtype=np.int64)
        found: set[int] = set()
        cheap = None
        if together:
            held = held_rows(whole, per_frame[lo:b]) if whole.held.any() else None
            cheap = cheap_path(whole, targets, weights, settings, options, start=whole_last,
                               before=whole_before if first else None,
                               after=whole_after if b == total else None, held=held)
        if cheap is not None:
            q, conv, pe, re, iters = cheap.q, cheap.converged, cheap.position_error, \
                cheap.orientation_error, cheap.iterations
            found.update(lo + j for j in cheap.jumps if lo + j >= a)
            for part in parts:
                part.last = q[-1, part.columns]
        for p, part in enumerate(parts if cheap is None else ()):
            pm, eff = part.model, part.effectors
            held = held_rows(pm, per_frame[lo:b]) if pm.held.any() else None
            poles = part.poles(per_frame[lo:b])
            w = [weights[e] for e in eff]
            tick = None if progress is None else _ticker(progress, a, b, total, p, len(parts))
            if warm_start:
                res = solve_path(pm, targets[:, eff], w, settings, options, start=part.last,
                                 before=part.before if first else None,
                                 after=part.after if b == total else None, held=held,
                                 poles=poles, progress=tick)
                pq, pc, pp, pr, pi = res.q, res.converged, res.position_error, \
                    res.orientation_error, res.iterations
                found.update(lo + j for j in res.jumps if lo + j >= a)
                part.last = pq[-1]
            else:
                many = solve_many(pm, targets[:, eff], w, settings, options, held=held,
                                  poles=poles)
                pq, pc, pp, pr, pi = many.q, many.converged, many.position_error, \
                    many.orientation_error, many.iterations
            q[:, part.columns] = pq
            conv &= pc
            pe[:, eff], re[:, eff] = pp, pr
            iters += pi
        jumps.extend(sorted(found))
        first = False
        whole_last = q[-1].copy()
        # the frame's errors: the largest over the effectors whose part counts
        worst_p = np.where(count_p, pe, 0.0).max(axis=1, initial=0.0)
        worst_r = np.where(count_r, re, 0.0).max(axis=1, initial=0.0)
        new = slice(a - lo, len(q))  # the window's first frame may be the last one's
        yield _Block(whole, q[new], conv[new], iters[new], worst_p[new], worst_r[new],
                     pe[new], re[new])
        a = b
        if progress is not None:
            progress(a, total)


def _ticker(progress: Progress, a: int, b: int, total: int, part: int, parts: int
            ) -> Callable[[float], None]:  # fmt: skip
    """The engine's progress (a fraction of one part's solve of frames ``a..b``) as the
    bake's ``progress(done, total)`` in frames."""

    def tick(fraction: float) -> None:
        done = (part + min(max(fraction, 0.0), 1.0)) / parts
        progress(a + int(done * (b - a)), total)

    return tick


def _effector_errors(
    model: Kinematics, targets: list[NDArray[np.float64]]
) -> list[tuple[float, float]]:
    """Each effector's position (m) and orientation (rad) error in the model's state."""
    out = []
    for k, t in enumerate(targets):
        g = model.effector_transform(k)
        dp = t[:3, 3] - g[:3, 3]
        dr = matrix_to_rotvec(t[:3, :3] @ g[:3, :3].T)
        out.append((float(np.sqrt(dp @ dp)), float(np.sqrt(dr @ dr))))
    return out
