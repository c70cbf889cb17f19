"""Long bakes in Blender (issue 18, point 6) on real bpy: progress, Esc, markers and the
per-frame error curves.

The interactive bake is a :class:`~dhik_addon.bake_run.BakeSession` that the modal
operator steps on timer events (background Blender runs ``execute`` instead, so the
tests step the session as the operator does). Scenes: the sample 7-joint arm (arm7)
with its imported targets, two armatures side by side for the markers. Timing is never
measured: a test waits for the worker's progress reports (events), and counts frames.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import bpy
import numpy as np
import pytest
from addon_helpers import bone_world, write_json
from mathutils import Matrix
from test_safety import scene_state

ARM7 = Path(__file__).resolve().parents[2] / "sample_scenes" / "arm7"


def _arm7(tmp_path: Path, frames: int = 240, name: str = "arm7"
          ) -> tuple[bpy.types.Object, bpy.types.Object]:  # fmt: skip
    """arm7 and its first ``frames`` target keys (the scene range 0 .. frames - 1)."""
    keys = json.loads((ARM7 / "targets.json").read_text())[:frames]
    tgt = write_json(tmp_path / name / "targets.json", keys)
    skel = tmp_path / name / "skeleton.json"
    skel.write_text((ARM7 / "skeleton.json").read_text())
    assert bpy.ops.dhik.import_skeleton(filepath=str(skel)) == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=str(tgt)) == {"FINISHED"}
    s = bpy.context.scene.dhik
    return s.armature, s.target


def _long_arm7(tmp_path: Path, frames: int) -> bpy.types.Object:
    """arm7 following its 240 target keys spread over ``frames`` frames."""
    keys = json.loads((ARM7 / "targets.json").read_text())
    step = (frames - 1) / (len(keys) - 1)
    for i, key in enumerate(keys):
        key["frame"] = round(i * step)
    tgt = write_json(tmp_path / "long" / "targets.json", keys)
    assert bpy.ops.dhik.import_skeleton(filepath=str(ARM7 / "skeleton.json")) == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=str(tgt)) == {"FINISHED"}
    return bpy.context.scene.dhik.armature


def _run(addon):
    return addon.dhik_addon.bake_run


def _a_scripts_frame_handler(scene: bpy.types.Scene, depsgraph: object = None) -> None:
    """A script's frame-change handler (it might pose the rig): the bake steps the scene
    through the frames to read the targets (``target_curves`` is not used)."""


@pytest.mark.parametrize("stepped", [True, False])
def test_reading_the_targets_shows_progress_in_steps(tmp_path, addon, stepped):
    """Stepping the scene through the frames (a script's frame handler is registered),
    the preparation reads the targets a chunk of frames per step (here with no time to
    spare: one chunk), the progress grows with each step, and the current frame is the
    user's after every step. Where the targets' F-curves give them (nothing else moves
    the rig or the targets), every frame is read in the first step."""
    _arm7(tmp_path)
    scene = bpy.context.scene
    scene.frame_set(17)
    run = _run(addon)
    handlers = bpy.app.handlers.frame_change_post
    if stepped:
        handlers.append(_a_scripts_frame_handler)
    try:
        session = run.BakeSession(bpy.context, step_seconds=0.0)
        total, seen, fractions = session.total, [0], [session.fraction()]
        while session.stage == "prepare":
            session.step(bpy.context)
            assert scene.frame_current == 17
            if session.stage == "prepare":
                seen.append(session.frames_done)
                fractions.append(session.fraction())
    finally:
        if stepped:
            handlers.remove(_a_scripts_frame_handler)
    assert total == 240
    if stepped:
        assert set(np.diff(seen)) == {run.READ_CHUNK}
        assert len(seen) == math.ceil(total / run.READ_CHUNK)
    else:  # one step read them all and went on
        assert seen == [0] and session.stage != "prepare"
    assert fractions == sorted(fractions) and fractions[-1] < 0.05 + 1e-12
    session.worker.wait()
    while not session.step(bpy.context):
        pass
    assert scene.dhik.result_frames == total


def _reports(addon, session) -> list[int]:
    """Every progress report of ``session``'s solve (frames done), once it is done."""
    seen: list[int] = []
    session.observer = lambda done, _total: seen.append(done)
    while session.stage == "prepare":
        session.step(bpy.context)
    session.worker.wait()
    assert session.worker.error is None and session.worker.result is not None
    return seen


def test_the_frame_by_frame_solve_reports_every_frame(tmp_path, addon):
    """The spec method (and a bake with a pole) solves frame by frame and reports each."""
    _arm7(tmp_path)
    bpy.context.scene.dhik.method = "spec"
    session = _run(addon).BakeSession(bpy.context)
    seen = _reports(addon, session)
    assert seen == list(range(1, 241))


def test_the_robust_solve_reports_progress_during_the_solve(tmp_path, addon):
    """The default (robust, flip-free) bake of 4,000 frames reports before its end."""
    _long_arm7(tmp_path, 4000)
    session = _run(addon).BakeSession(bpy.context)
    seen = _reports(addon, session)
    assert seen == sorted(seen) and seen[-1] == 4000
    assert any(0 < done < 4000 for done in seen), seen


def test_esc_during_the_solve_stops_it_at_once_and_changes_nothing(tmp_path, addon):
    """Esc while the worker solves: the operator's cancel returns even while the worker is
    held inside the solve (the UI never waits for the solve), the solve stops at its next
    progress report, and nothing is written."""
    ob, _target = _arm7(tmp_path)
    ob.pose.bones["J3"].keyframe_insert("rotation_quaternion", frame=5)
    scene = bpy.context.scene
    scene.dhik.method = "spec"  # reports every frame
    scene.frame_set(7)
    before = scene_state()
    reached, go = threading.Event(), threading.Event()

    def hold(done: int, _total: int) -> None:
        if done == 1:
            reached.set()
            assert go.wait(60)

    session = _run(addon).BakeSession(bpy.context, observer=hold)
    while session.stage == "prepare":
        session.step(bpy.context)
    assert reached.wait(60)
    session.cancel()  # Esc: returns after at most CANCEL_WAIT with the worker held
    assert not session.worker.finished()
    go.set()
    assert session.worker.wait(60)
    assert session.worker.done == 1 and session.worker.result is None
    assert session.worker.error is None
    assert not session.step(bpy.context) and session.stage == "cancelled"
    assert scene_state() == before and scene.frame_current == 7
    assert not scene.dhik.has_result


@pytest.mark.parametrize("stage", ["prepare", "solved", "plan"])
def test_esc_before_the_keys_are_written_changes_nothing(tmp_path, addon, stage):
    """Esc while the targets are read, after the solve has finished (its result is
    dropped), or after the keys were planned: nothing is applied."""
    ob, _target = _arm7(tmp_path, 60)
    ob.pose.bones["J3"].keyframe_insert("rotation_quaternion", frame=5)
    scene = bpy.context.scene
    scene.frame_set(3)
    before = scene_state()
    session = _run(addon).BakeSession(bpy.context)
    session.step(bpy.context)
    if stage != "prepare":
        while session.stage == "prepare":
            session.step(bpy.context)
        session.worker.wait()
        assert session.worker.result is not None
    if stage == "plan":
        session.step(bpy.context)
        session.step(bpy.context)
        assert session.stage == "write" and session.planned is not None
    session.cancel()
    assert session.worker is None or session.worker.result is None
    for _ in range(3):
        assert not session.step(bpy.context)
    assert scene_state() == before and scene.frame_current == 3
    assert not scene.dhik.has_result


def _marked(scene) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for m in scene.timeline_markers:
        out.setdefault(m.name, []).append(m.frame)
    return {k: sorted(v) for k, v in out.items()}


def test_markers_belong_to_their_armature(tmp_path):
    """Two armatures, each baked with frames it cannot reach: each gets its own markers;
    baking one again (or after a rename) replaces only its own."""
    scene = bpy.context.scene
    first, _ = _arm7(tmp_path, 20, "left")
    second, target = _arm7(tmp_path, 20, "right")
    second.location.x += 3.0  # its targets (its children) go with it
    s = scene.dhik
    s.method, s.max_iterations = "spec", 1  # one iteration: most frames miss
    s.armature, s.target = first, bpy.data.objects["left_target"]
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    left = _marked(scene)["dhik: not converged (left)"]
    assert len(left) == s.result_frames - s.result_converged > 0
    s.armature, s.target = second, target
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    marked = _marked(scene)
    assert marked["dhik: not converged (left)"] == left
    assert len(marked["dhik: not converged (right)"]) == s.result_frames - s.result_converged
    first.name = "hero"
    s.armature, s.target = first, bpy.data.objects["left_target"]
    s.method, s.max_iterations = "robust", 100
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    marked = _marked(scene)
    assert "dhik: not converged (left)" not in marked  # the renamed armature's old markers
    assert len(marked.get("dhik: not converged (hero)", [])) == \
        s.result_frames - s.result_converged
    assert marked["dhik: not converged (right)"]  # untouched


def _error_curve(ob, name: str):
    ad = ob.animation_data
    cb = ad.action.layers[0].strips[0].channelbag(ad.action_slot)
    return cb.fcurves.find(f'["{name}"]', index=0)


def test_per_frame_errors_are_keyed_on_the_armature(tmp_path):
    """Each effector's position and orientation errors are F-curves of two custom
    properties of the armature object, one key per baked frame, and equal the gap Blender
    shows between the evaluated effector bone and its target; a partial re-bake replaces
    only its own range."""
    ob, target = _arm7(tmp_path, 30)
    scene = bpy.context.scene
    far = bpy.data.objects.new("far", None)  # the second effector's target: out of reach
    bpy.context.collection.objects.link(far)
    far.location = (0.0, 0.0, 3.0)
    s = scene.dhik
    s.effector = "Tool"
    bpy.ops.dhik.effector_add()
    s.effectors[0].bone, s.effectors[0].target = "J4", far
    s.effectors[0].orientation_weight = 0.0
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    pos, rot = _error_curve(ob, "dhik pos: Tool"), _error_curve(ob, "dhik rot: Tool")
    far_pos = _error_curve(ob, "dhik pos: J4")
    assert pos is not None and rot is not None and far_pos is not None
    assert [k.co[0] for k in pos.keyframe_points] == list(range(30))
    assert pos.group.name == "DHIK errors" and "Tool" in ob.id_properties_ui(
        "dhik pos: Tool").as_dict()["description"]
    for f in range(30):  # (rotation gaps: the same between bone or joint frames, both @ N)
        scene.frame_set(f)
        eff, goal = bone_world(ob, "Tool"), np.array(target.matrix_world, dtype=float)
        gap = float(np.linalg.norm(eff[:3, 3] - goal[:3, 3]))
        assert abs(ob["dhik pos: Tool"] - gap) < 1e-6, f  # the property plays the curve
        r = eff[:3, :3].T @ goal[:3, :3]
        angle = math.atan2(np.linalg.norm([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0],
                                           r[1, 0] - r[0, 1]]) / 2, (np.trace(r) - 1) / 2)
        assert abs(ob["dhik rot: Tool"] - angle) < 2e-5, f
        miss = float(np.linalg.norm(bone_world(ob, "J4")[:3, 3] - np.array(far.location)))
        assert abs(ob["dhik pos: J4"] - miss) < 1e-5 and miss > 1.0, f
    s.use_scene_range, s.frame_start, s.frame_end = False, 10, 14
    far.location = (0.0, 0.0, 2.0)
    before = [tuple(k.co) for k in far_pos.keyframe_points]
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    after = [tuple(k.co) for k in _error_curve(ob, "dhik pos: J4").keyframe_points]
    assert [k for k in after if not 10 <= k[0] <= 14] == [
        k for k in before if not 10 <= k[0] <= 14]
    assert all(a[1] < b[1] - 0.5 for a, b in zip(after[10:15], before[10:15], strict=True))


def test_the_error_curves_sit_in_a_new_action_too(tmp_path):
    ob, _target = _arm7(tmp_path, 10)
    scene = bpy.context.scene
    scene.dhik.bake_action = "NEW"
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    curve = _error_curve(ob, "dhik rot: Tool")
    assert curve is not None and len(curve.keyframe_points) == 10
    assert ob.animation_data.action.name.endswith("_dhik_bake")
    assert isinstance(ob.matrix_world, Matrix)
