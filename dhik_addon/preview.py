"""Live preview (``scene.dhik.live_preview``): the armature shows what Bake would key, and
nothing is keyed.

The preview plans the frame range exactly as a bake does (:class:`~.bake_job.BakeJob`:
the same targets, driven bones, poles, settings and engine, so each frame's pose is the
one Bake keys there), and while it plans or after the inputs change it shows single-frame
solves:

- **Plan.** Starting, and a moment after the last change of its inputs (a target,
  pole or driven bone moved or re-keyed, a setting changed), the range is read as a
  bake reads it (:class:`~.bake_job.Preparation`: its frames stepped ``READ`` at a
  time, one step per timer tick on the main thread) and solved by the bake's engine in
  a worker thread; the UI stays live. When the plan is ready, every frame of
  the range shows the plan's pose for that frame, whether it is reached by playing,
  scrubbing back or jumping (the panel says "showing the bake's path").
- **Single-frame solves.** While planning, on a frame outside the range, or where the
  inputs of the current frame differ from those the plan read (the user is moving a
  target), the current frame is solved alone, warm from the pose shown last
  (:class:`~..core.app.live.LiveSolver`: the bake's engine on one frame), restarts only
  after a converged frame; the panel says so.
- The rig is read as a bake reads it (:class:`~.bake_job.BakeRig`), and the joint values
  become channels as a bake keys them (:func:`~.bake_keys.channel_rows`).
- Updates the preview causes itself (its own pose writes) change none of the inputs and
  are skipped; a change of the DHIK settings restarts the preview on the new settings.
- Turning it on saves the channels (location, every rotation, scale) of the bones it
  will set into ``scene.dhik.preview_saved`` (JSON, so a saved file and undo keep it);
  turning it off writes them back exactly.
- A handler never raises: a problem (deleted armature or target, a rig the bake would
  refuse) is written once to ``scene.dhik.preview_error`` (shown in the panel) and to
  stderr, and turns the preview off.

Handlers are added when a scene turns the preview on, removed when none has it on and
on unregister; they are ``persistent`` and ``load_post`` re-arms them for a loaded file
whose scene has the preview on. The planner runs on a ``bpy.app.timers`` timer; scripts
and tests without an event loop call :func:`settle`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np

from ..core.app.blas_threads import one_blas_thread
from ..core.app.live import LiveSolver
from ..core.errors import DhikError
from .bake_job import BakeJob, BakeRig, Preparation
from .frames import PAUSED
from .preview_inputs import same_inputs, solve_signature
from .preview_plan import Plan, flat_numbers, job_inputs
from .preview_pose import pose_bones, restore_channels, save_channels
from .props import DHIK_PG_settings, on_live_preview, scene_settings
from .safety import require_in_scene
from .targets import armature_space_poses

SETTLE = 0.25  # s without a change of the inputs before the range is planned again
TICK = 0.05  # s between the planner's timer steps
READ = 16  # frames of the range read per planner step (the rest waits for the next)

PLANNED = "showing the bake's path"
PLANNING = "planning the range: frames show single-frame solves"
OUTSIDE = "frame outside the range: a single-frame solve"
CHANGED = "inputs changed: a single-frame solve until the range is planned again"


@dataclass
class _Live:
    """One scene's preview between updates."""

    signature: tuple[Any, ...]
    rig: BakeRig
    solver: LiveSolver
    generation: int = 0  # counts changes of the inputs
    changed_at: float = 0.0  # perf_counter of the last change
    plan: Plan | None = None
    reading: Preparation | None = None  # the range being read for the next plan
    reading_for: int = -1  # the generation it is read for
    status: str = PLANNING
    converged: bool = True  # whether the last single-frame solve converged
    inputs: list[np.ndarray] = field(default_factory=list)  # what the last update read
    solves: int = 0  # single-frame solves made
    driven: dict[str, dict[str, Any]] = field(default_factory=dict)  # read with inputs
    shown: int | None = None  # the frame whose plan pose is shown, else None


_LIVE: dict[str, _Live] = {}  # by scene name
_BUSY: set[str] = set()  # scenes being updated (re-entrant calls are skipped)


# --------------------------------------------------------------------------- public


def toggled(s: DHIK_PG_settings, _context: bpy.types.Context | None = None) -> None:
    """Update callback of ``scene.dhik.live_preview``: start or stop the scene's preview."""
    scene = s.id_data
    if not isinstance(scene, bpy.types.Scene):
        return
    if s.live_preview:
        _guarded(scene, None, force=True)
    else:
        stop(scene)


def stop(scene: bpy.types.Scene) -> None:
    """Drop the scene's preview and write back the saved channels (never raises)."""
    live = _LIVE.pop(scene.name_full, None)
    if live is not None and live.plan is not None:
        live.plan.cancel.set()
    try:
        restore_channels(scene)
    except Exception as err:  # a handler must not raise; the pose stays as it is
        print(f"dhik: live preview: could not restore the pose: {err}", file=sys.stderr)
    _sync_handlers()


def solve_count(scene: bpy.types.Scene) -> int:
    """Single-frame solves the scene's running preview has made (0 when off)."""
    live = _LIVE.get(scene.name_full)
    return 0 if live is None else live.solves


def status(scene: bpy.types.Scene) -> str:
    """What the scene's preview shows now (empty when off), for the panel."""
    live = _LIVE.get(scene.name_full)
    return "" if live is None else live.status


def planned(scene: bpy.types.Scene) -> bool:
    """Whether the scene's preview has a plan of the range for its current inputs."""
    live = _LIVE.get(scene.name_full)
    return live is not None and _ready(live)


def settle(scene: bpy.types.Scene, timeout: float = 120.0) -> bool:
    """Run the planner until the range is planned for the current inputs (scripts and
    tests: no timer runs without an event loop); True when it is."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        live = _LIVE.get(scene.name_full)
        if live is None:
            return False
        live.changed_at = min(live.changed_at, time.perf_counter() - SETTLE)
        if live.plan is not None and live.plan.thread is not None:
            live.plan.thread.join(max(deadline - time.perf_counter(), 0.0))
        _step(scene)
        if planned(scene):
            return True
    return False


def register() -> None:
    """Arm ``load_post``, ``undo_post`` and ``redo_post`` (the frame and depsgraph handlers
    follow the scenes' setting) and the settings' toggle."""
    on_live_preview.append(toggled)
    for handlers in _RELOAD:
        if _on_load not in handlers:
            handlers.append(_on_load)


def unregister() -> None:
    """Remove every handler of the preview and forget its state (the pose stays)."""
    for handlers, fn in _HANDLERS:
        while fn in handlers:
            handlers.remove(fn)
    for handlers in _RELOAD:
        while _on_load in handlers:
            handlers.remove(_on_load)
    while toggled in on_live_preview:
        on_live_preview.remove(toggled)
    if bpy.app.timers.is_registered(_tick):
        bpy.app.timers.unregister(_tick)
    for live in _LIVE.values():
        if live.plan is not None:
            live.plan.cancel.set()
    _LIVE.clear()


# --------------------------------------------------------------------------- handlers


@bpy.app.handlers.persistent
def _on_frame(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph | None = None) -> None:
    _guarded(scene, depsgraph, force=True)


@bpy.app.handlers.persistent
def _on_depsgraph(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph | None = None) -> None:
    _guarded(scene, depsgraph, force=False)


@bpy.app.handlers.persistent
def _on_load(_path: object = None, _more: object = None) -> None:
    """A loaded file or an undo step: Blender data may be new, read the rigs again."""
    for live in _LIVE.values():
        if live.plan is not None:
            live.plan.cancel.set()
    _LIVE.clear()
    _BUSY.clear()
    _sync_handlers()


_HANDLERS = ((bpy.app.handlers.frame_change_post, _on_frame),
             (bpy.app.handlers.depsgraph_update_post, _on_depsgraph))
_RELOAD = (bpy.app.handlers.load_post, bpy.app.handlers.undo_post, bpy.app.handlers.redo_post)


def _previewing() -> bool:
    """Whether any scene has the preview on."""
    scenes = getattr(bpy.data, "scenes", None)
    if scenes is None:  # bpy.data restricted while the add-on registers
        return False
    return any(getattr(getattr(sc, "dhik", None), "live_preview", False) for sc in scenes)


def _sync_handlers() -> None:
    """Frame and depsgraph handlers and the planner's timer present exactly while some
    scene previews."""
    on = _previewing()
    for handlers, fn in _HANDLERS:
        if on and fn not in handlers:
            handlers.append(fn)
        elif not on:
            while fn in handlers:
                handlers.remove(fn)
    if on and not bpy.app.timers.is_registered(_tick):
        bpy.app.timers.register(_tick, first_interval=TICK, persistent=True)
    elif not on and bpy.app.timers.is_registered(_tick):
        bpy.app.timers.unregister(_tick)


def _guarded(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph | None,
             force: bool) -> None:
    """:func:`_update`, never raising: a problem turns the scene's preview off."""
    key = scene.name_full
    if key in _BUSY or key in PAUSED:  # our own update, or a bake's or export's frame loop
        return
    s = getattr(scene, "dhik", None)
    if s is None:
        return
    if not s.live_preview:
        _LIVE.pop(key, None)  # turned off without the callback (undo, a loaded file)
        return
    _BUSY.add(key)
    try:
        with one_blas_thread():  # numpy's OpenBLAS threads stall on a busy machine
            try:
                _update(scene, s, depsgraph, force)
            except ReferenceError:  # data the cache held was freed (an undo): read again
                _LIVE.pop(key, None)
                _update(scene, s, depsgraph, force)
    except DhikError as err:
        _fault(scene, s, str(err))
    except Exception as err:  # not a DhikError: still one line, and the preview stops
        _fault(scene, s, f"DHIK: live preview: {type(err).__name__}: {err}")
    finally:
        _BUSY.discard(key)


def _fault(scene: bpy.types.Scene, s: DHIK_PG_settings, message: str) -> None:
    """Report ``message`` once (panel and stderr) and turn the preview off."""
    try:
        print(f"dhik: live preview stopped: {message}", file=sys.stderr)
        s.preview_error = message
        s.live_preview = False  # its update callback restores the pose (stop)
        if scene.name_full in _LIVE:  # set while the callback was skipped
            stop(scene)
    except Exception as err:  # never out of a handler
        print(f"dhik: live preview: {err}", file=sys.stderr)


# --------------------------------------------------------------------------- one update


def _frame_inputs(live: _Live, depsgraph: bpy.types.Depsgraph) -> list[np.ndarray]:
    """What a solve of the current frame reads, as the core takes it: each effector's
    target (its joint frame's pose in armature space, 4x4, m), each pole's position (m),
    then the driven joints' values (as numbers)."""
    rig = live.rig
    poses = armature_space_poses(depsgraph, rig.objects, rig.armature, rig.bones)
    tracks = rig.tracks([[(0, m)] for m in poses])
    out = [t.targets[0][1] for t in tracks]
    out += [np.array(t.pole[0][1], dtype=float) for t in tracks if t.pole is not None]
    driven = rig.driven_values()
    live.driven = driven  # the solve of this frame reads them too
    return out + [np.array(flat_numbers(driven[name]), dtype=float) for name in rig.driven_names]


def _update(scene: bpy.types.Scene, s: DHIK_PG_settings,
            depsgraph: bpy.types.Depsgraph | None, force: bool) -> None:
    """Show the current frame: the plan's pose where the plan holds, else a single-frame
    solve when anything it reads changed (always when ``force``)."""
    key = scene.name_full
    live = _LIVE.get(key)
    signature = solve_signature(s)
    if live is None or live.signature != signature:
        if live is not None:  # other settings: back to the saved pose, then start anew
            stop(scene)
        live = _start(scene, signature)
        force = True
    rig = live.rig
    require_in_scene(scene, rig.armature, "armature")
    for i, ob in enumerate(rig.objects):
        require_in_scene(scene, ob, rig.roles[i])
    if rig.armature.mode == "EDIT":
        return  # bones being edited: nothing to pose
    if depsgraph is None:
        depsgraph = bpy.context.evaluated_depsgraph_get()
    inputs = _frame_inputs(live, depsgraph)
    frame = scene.frame_current
    if not force and same_inputs(inputs, live.inputs):
        return  # an update the preview caused, or one that changes nothing it reads
    live.inputs = inputs
    plan = live.plan
    if plan is not None and plan.generation == live.generation and frame in plan.inputs \
            and not same_inputs(inputs, plan.inputs[frame]):
        _changed(live)  # the user moved something the plan read: plan again later
    if _ready(live) and frame in plan.inputs:  # type: ignore[union-attr]
        assert plan is not None and plan.values is not None
        pose_bones(rig, plan.values[frame])
        live.solver.reset(plan.values[frame])  # single-frame solves go on from here
        live.shown, live.status = frame, PLANNED
        return
    _solve_frame(live, scene, inputs)


def _solve_frame(live: _Live, scene: bpy.types.Scene, inputs: list[np.ndarray]) -> None:
    """One single-frame solve of the current frame (``inputs``: :func:`_frame_inputs`),
    warm from the pose shown last."""
    rig = live.rig
    m = len(rig.names)
    poled = [i for i, p in enumerate(rig.poles) if p is not None]
    poles: list[tuple[float, float, float] | None] = [None] * m
    for k, i in enumerate(poled):
        poles[i] = _xyz(inputs[m + k])
    driven = live.driven
    res = live.solver.solve(inputs[:m], driven or None, poles if poled else None,
                            restart=not live.converged or live.solves == 0)
    live.converged = res.converged
    live.solves += 1
    live.shown = None
    start, end = scene_settings(scene).frame_range(scene)
    plan = live.plan
    if not start <= scene.frame_current <= end:
        live.status = OUTSIDE
    elif plan is None or plan.generation == live.generation:
        live.status = PLANNING
    else:
        live.status = CHANGED
    pose_bones(rig, {**driven, **res.values})


def _changed(live: _Live) -> None:
    """The inputs changed: a new generation; the plan in the works is no longer wanted."""
    live.generation += 1
    live.changed_at = time.perf_counter()
    if live.plan is not None:
        live.plan.cancel.set()


def _ready(live: _Live) -> bool:
    plan = live.plan
    return plan is not None and plan.generation == live.generation and plan.values is not None


def _xyz(v: Any) -> tuple[float, float, float]:
    return float(v[0]), float(v[1]), float(v[2])


def _start(scene: bpy.types.Scene, signature: tuple[Any, ...]) -> _Live:
    """Read the rig, save the channels of the bones the preview sets, and set up the
    single-frame solver (started from the bones' current pose); planning starts on the
    next planner step."""
    rig = BakeRig.read(scene)
    s = scene_settings(scene)
    s.preview_error = ""
    save_channels(scene, rig)
    current = rig.pose_values([n for n in rig.solved if rig.maps[n].channel is not None])
    tracks = rig.tracks([[(0, np.eye(4))] for _ in rig.objects])
    solver = LiveSolver(rig.skeleton, tracks, rig.settings)
    solver.reset(current)
    live = _Live(signature, rig, solver, changed_at=time.perf_counter() - SETTLE)
    _LIVE[scene.name_full] = live
    _sync_handlers()
    return live


# --------------------------------------------------------------------------- the planner


def _tick() -> float | None:
    """The planner's timer: one step for every previewing scene."""
    for scene in list(bpy.data.scenes):
        if scene.name_full in _LIVE:
            try:
                _step(scene)
            except Exception as err:  # a timer must not raise: the preview stops
                s = getattr(scene, "dhik", None)
                if s is not None:
                    _fault(scene, s, f"DHIK: live preview: {type(err).__name__}: {err}")
    return TICK if _LIVE else None


def _step(scene: bpy.types.Scene) -> None:
    """Read the range a few frames at a time once the inputs have settled, solve it in a
    worker thread, take a finished plan and show it."""
    live = _LIVE.get(scene.name_full)
    if live is None or scene.name_full in PAUSED:
        return
    plan = live.plan
    if plan is not None and plan.generation == live.generation:
        if plan.values is None and plan.thread is not None and not plan.thread.is_alive():
            _finish(scene, live, plan)
        return
    if time.perf_counter() - live.changed_at < SETTLE:
        return  # still changing: plan when it rests
    if plan is not None and plan.thread is not None and plan.thread.is_alive():
        return  # the superseded plan is stopping
    _BUSY.add(scene.name_full)
    try:
        with bpy.context.temp_override(scene=scene):
            if live.reading is None or live.reading_for != live.generation:
                live.reading, live.reading_for = Preparation(bpy.context), live.generation
            reading = live.reading
            reading.read(READ)  # frames stepped on this thread, the current one restored
            if not reading.finished:
                return
            job = reading.finish(bpy.context)
            live.reading = None
    finally:
        _BUSY.discard(scene.name_full)
    _begin(scene, live, job)
    _guarded(scene, None, force=True)  # reading stepped the frames: pose the current one


def _begin(scene: bpy.types.Scene, live: _Live, job: BakeJob) -> None:
    """Solve the range ``job`` read in a worker thread."""
    live.plan = Plan.start(live.generation, job, job_inputs(job, live.rig))
    live.status = PLANNING


def _finish(scene: bpy.types.Scene, live: _Live, plan: Plan) -> None:
    """A worker is done: keep its frames' joint values and show the current frame."""
    if plan.error is not None:
        raise plan.error
    if plan.result is None:  # cancelled
        live.plan = None
        return
    plan.values = {int(fr["frame"]): dict(fr["joints"]) for fr in plan.result.frames}
    frame = scene.frame_current
    if frame in plan.values:
        _BUSY.add(scene.name_full)
        try:
            inputs = _frame_inputs(live, bpy.context.evaluated_depsgraph_get())
            if same_inputs(inputs, plan.inputs[frame]):
                pose_bones(live.rig, plan.values[frame])
                live.solver.reset(plan.values[frame])
                live.shown, live.status = frame, PLANNED
            else:
                _changed(live)
        finally:
            _BUSY.discard(scene.name_full)
    else:
        live.status = OUTSIDE
