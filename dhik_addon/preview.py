"""Live preview (``scene.dhik.live_preview``): the armature follows its targets at the
current frame, and nothing is keyed.

While it is on, a frame change (``frame_change_post``: the timeline, playback and
scripts' ``scene.frame_set``) and a change of the inputs (``depsgraph_update_post``: a
target, pole or the armature object moved, a bone outside the solved chains posed) solve
the current frame with the core's robust method and set the solved bones' channels.

- The rig is read as a bake reads it (:class:`~.bake_job.BakeRig`: bones, effectors,
  weights, extra rows, chain lengths, poles, the driven bones' own pose), and the joint
  values become channels as a bake keys them (:func:`~.bake_keys.channel_rows`: each
  bone's rotation mode, Euler angles continued from the bone's current ones; the other
  transform channels of a solved bone at rest).
- The compiled model and the last solved state are kept between updates: each solve is
  warm-started from the last one (``solve_robust(previous=...)``), with restarts only
  when that fails. The first solve starts from the bones' current pose.
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
whose scene has the preview on.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np

from ..core.errors import DhikError
from ..core.model.compiled import CompiledKinematics
from ..core.solver.kinematics import FrameTargets, Pole
from ..core.solver.robust import solve_robust
from .access import pose_of
from .animation import channel_quaternion
from .bake_job import BakeRig
from .bake_keys import REST, channel_rows, rotation_prop
from .frames import PAUSED
from .props import DHIK_PG_settings, scene_settings
from .safety import require_in_scene
from .targets import armature_space_poses

CHANNELS = ("location", "rotation_quaternion", "rotation_euler", "rotation_axis_angle",
            "scale")  # what is saved and restored per bone
# scene.dhik properties that do not change what the preview solves (the others, when
# changed, restart it), besides the last bake's results (``result_*``)
NOT_SOLVED = {"live_preview", "preview_saved", "preview_error", "animation_path",
              "bake_action", "frame_step", "key_reduction", "use_scene_range",
              "frame_start", "frame_end", "effector_index", "cold_start", "has_result"}


@dataclass
class _Live:
    """One scene's preview between updates."""

    signature: tuple[Any, ...]
    rig: BakeRig
    model: CompiledKinematics
    weights: list[tuple[float, float]]
    state: object | None = None  # the model's save() after the last solve
    converged: bool = True  # whether the last solve converged
    inputs: list[np.ndarray] = field(default_factory=list)  # what the last solve read
    solves: int = 0


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
    _LIVE.pop(scene.name_full, None)
    try:
        _restore(scene)
    except Exception as err:  # a handler must not raise; the pose stays as it is
        print(f"dhik: live preview: could not restore the pose: {err}", file=sys.stderr)
    _sync_handlers()


def solve_count(scene: bpy.types.Scene) -> int:
    """Solves the scene's running preview has made (0 when off); for tests and benches."""
    live = _LIVE.get(scene.name_full)
    return 0 if live is None else live.solves


def register() -> None:
    """Arm ``load_post``, ``undo_post`` and ``redo_post`` (the frame and depsgraph handlers
    follow the scenes' setting)."""
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
    """Frame and depsgraph handlers present exactly while some scene previews."""
    on = _previewing()
    for handlers, fn in _HANDLERS:
        if on and fn not in handlers:
            handlers.append(fn)
        elif not on:
            while fn in handlers:
                handlers.remove(fn)


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
        try:
            _update(scene, s, depsgraph, force)
        except ReferenceError:  # data the cache held was freed (an undo): read it again
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


_IK_PROPS = [f"{kind}_{a}" for kind in ("lock_ik", "use_ik_limit", "ik_min", "ik_max")
             for a in "xyz"]


def _rig_signature(ob: bpy.types.Object | None) -> bytes:
    """The armature's bones as the rig reads them: names, parents, rest matrices, IK
    locks and limits (a change, e.g. after Edit Mode, reads the rig again)."""
    if ob is None or not isinstance(ob.data, bpy.types.Armature) or ob.pose is None:
        return b""
    bones = ob.data.bones
    parts = ["|".join(f"{b.name}>{b.parent.name if b.parent else ''}" for b in bones).encode()]
    rest = np.empty(len(bones) * 16, dtype=np.float32)
    bones.foreach_get("matrix_local", rest)
    parts.append(rest.tobytes())
    for prop in _IK_PROPS:
        arr = np.empty(len(ob.pose.bones), dtype=np.float32)
        ob.pose.bones.foreach_get(prop, arr)
        parts.append(arr.tobytes())
    return b"".join(parts)


def _signature(s: DHIK_PG_settings) -> tuple[Any, ...]:
    """Every setting the solve depends on (objects by identity), rows included, and the
    armature's bones."""

    def values(group: Any) -> tuple[Any, ...]:
        out: list[Any] = []
        for prop in group.bl_rna.properties:
            name = prop.identifier
            if name == "rna_type" or name in NOT_SOLVED or name.startswith("result_"):
                continue
            value = getattr(group, name)
            if prop.type == "POINTER" and isinstance(value, bpy.types.ID):
                value = value.as_pointer()
            elif prop.type == "COLLECTION":
                value = tuple(values(item) for item in value)
            elif prop.type in ("FLOAT", "INT", "BOOLEAN") and getattr(prop, "is_array", False):
                value = tuple(value)
            out.append((name, value))
        return tuple(out)

    return values(s), _rig_signature(s.armature)


def _update(scene: bpy.types.Scene, s: DHIK_PG_settings,
            depsgraph: bpy.types.Depsgraph | None, force: bool) -> None:
    """Solve the current frame if anything it reads changed (always when ``force``)."""
    key = scene.name_full
    live = _LIVE.get(key)
    signature = _signature(s)
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
    poses = armature_space_poses(depsgraph, rig.objects, rig.armature)
    driven = rig.driven_values()
    inputs = [*poses, *(np.array(_flat(v), dtype=float) for v in driven.values())]
    if not force and len(inputs) == len(live.inputs) and all(
            np.array_equal(a, b) for a, b in zip(inputs, live.inputs, strict=True)):
        return  # an update the preview caused, or one that changes nothing it reads
    live.inputs = inputs
    frame = scene.frame_current
    tracks = rig.tracks([[(frame, m)] for m in poses])
    poles = [None if t.pole is None else Pole(_xyz(t.pole[0][1]), t.pole_angle)
             for t in tracks]
    targets = FrameTargets([t.targets[0][1] for t in tracks], driven or None,
                           poles if any(p is not None for p in poles) else None)
    settings = rig.settings
    model = live.model
    if live.state is None:  # the first solve: from the bones' current pose, restarts on
        result = solve_robust(model, targets, settings, weights=live.weights)
    else:
        model.restore(live.state)
        model.update()
        result = solve_robust(model, targets, settings, weights=live.weights,
                              previous=live.state)
        if not result.converged and live.converged:  # lost: once with restarts
            model.restore(live.state)
            model.update()
            result = solve_robust(model, targets, settings, weights=live.weights)
    live.state = model.save()
    live.converged = bool(result.converged)
    live.solves += 1
    _pose(rig, model.joint_values(live.state))


def _xyz(v: Any) -> tuple[float, float, float]:
    return float(v[0]), float(v[1]), float(v[2])


def _flat(entry: dict[str, Any]) -> list[float]:
    """The numbers of a SPEC 3.3 entry (for comparing driven values)."""
    out: list[float] = []
    for k in ("angle", "displacement", "quaternion"):
        v = entry.get(k)
        if v is not None:
            out.extend(np.ravel(np.asarray(v, dtype=float)).tolist())
    return out


def _start(scene: bpy.types.Scene, signature: tuple[Any, ...]) -> _Live:
    """Read the rig, save the channels of the bones the preview sets, compile the model
    (started from the bones' current pose)."""
    rig = BakeRig.read(scene)
    s = scene_settings(scene)
    s.preview_error = ""
    _save(scene, rig)
    skeleton = rig.skeleton
    skeleton.reset()
    bones = pose_of(rig.armature).bones
    current = {name: rig.maps[name].entry(channel_quaternion(bones[name]),
                                          np.array(bones[name].location))
               for name in rig.solved if rig.maps[name].channel is not None}
    skeleton.set_joint_values(current)
    model = CompiledKinematics(skeleton, rig.names, rig.lengths)
    skeleton.reset()
    live = _Live(signature, rig, model, rig.weights)
    _LIVE[scene.name_full] = live
    _sync_handlers()
    return live


def _pose(rig: BakeRig, values: dict[str, dict[str, Any]]) -> None:
    """Set the solved bones' channels to ``values`` as a bake keys them
    (:func:`~.bake_keys.channel_rows`: each bone's rotation mode, Euler angles continued
    from the current ones); their other transform channels at rest, as a bake holds them."""
    bones = pose_of(rig.armature).bones
    for name in rig.solved:
        jm, entry = rig.maps[name], values.get(name)
        if jm.channel is None or entry is None:
            continue
        pb = bones[name]
        rotation = rotation_prop(pb.rotation_mode)
        now = None if jm.channel == "location" else np.array(getattr(pb, rotation), dtype=float)
        prop, _kind, rows = channel_rows(pb, jm, [entry], now)
        setattr(pb, prop, rows[0].tolist())
        for held in ("location", rotation, "scale"):
            if held != prop:
                setattr(pb, held, REST[held])


# --------------------------------------------------------------------------- saved pose


def _save(scene: bpy.types.Scene, rig: BakeRig) -> None:
    """Keep the channels of the bones the preview sets in ``scene.dhik.preview_saved``.

    Channels already saved for the same armature are kept: a file saved while previewing
    (or an undo step) still restores the pose from before the preview."""
    s = scene_settings(scene)
    bones = pose_of(rig.armature).bones
    saved = {name: {prop: [float(v) for v in getattr(bones[name], prop)] for prop in CHANNELS}
             for name in rig.solved if name in bones}
    if s.preview_saved:
        earlier = json.loads(s.preview_saved)
        if earlier.get("armature") == rig.armature.name:
            saved.update(earlier["bones"])
    s.preview_saved = json.dumps({"armature": rig.armature.name, "bones": saved})


def _restore(scene: bpy.types.Scene) -> None:
    """Write the saved channels back (bones and armature that still exist) and forget them."""
    s = getattr(scene, "dhik", None)
    if s is None or not s.preview_saved:
        return
    data = json.loads(s.preview_saved)
    s.preview_saved = ""
    ob = bpy.data.objects.get(data["armature"])
    if ob is None or ob.type != "ARMATURE" or ob.pose is None:
        return
    bones = ob.pose.bones
    for name, channels in data["bones"].items():
        pb = bones.get(name)
        if pb is not None:
            for prop, value in channels.items():
                setattr(pb, prop, value)
