"""Targets read from their own F-curves (dhik_addon/target_curves.py) against Blender's
evaluation frame by frame (``targets.TrackReader`` stepping the scene): the same poses
in the armature's space for every rotation mode, interpolation, modifier and
extrapolation; the frame loop kept wherever anything else can place a target or move the
rig; and a bake through the operator keying the same either way. Metres, radians.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import bpy
import numpy as np
import pytest
from mathutils import Euler, Matrix
from rig_builders import LEG, build_biped, snapped_targets

FRAMES = list(range(-3, 30))  # before the first key and after the last: extrapolation


def _modules(addon: Any) -> tuple[Any, Any]:
    from dhik_blender.dhik_addon import target_curves, targets
    return target_curves, targets


def _keyed_empty(name: str, mode: str, seed: int) -> bpy.types.Object:
    """An Empty in rotation ``mode`` keyed on a few frames (Blender's default BEZIER)
    with wandering location and rotation, one location component left static."""
    rng = np.random.default_rng(seed)
    ob = bpy.data.objects.new(name, None)
    bpy.context.collection.objects.link(ob)
    ob.rotation_mode = mode
    ob.location = (0.3, -0.2, 0.5)
    prop = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(
        mode, "rotation_euler")
    for f in (0, 7, 15, 24):
        ob.location[0], ob.location[2] = rng.normal(0.0, 0.5, 2)
        value = rng.normal(0.0, 1.2, len(getattr(ob, prop)))
        if mode == "QUATERNION":
            value[0] += 1.5  # not unit: Blender normalises it
        setattr(ob, prop, value)
        ob.keyframe_insert("location", index=0, frame=f)
        ob.keyframe_insert("location", index=2, frame=f)
        ob.keyframe_insert(prop, frame=f)
    return ob


def _curves(ob: bpy.types.Object) -> Any:
    """``ob``'s F-curves (its assigned action's channelbag)."""
    from dhik_blender.dhik_addon import keying
    return keying.assigned_channelbag(ob).fcurves


def _read(context: Any, targets: list[bpy.types.Object], armature: bpy.types.Object,
          curves: Any) -> np.ndarray:  # fmt: skip
    """The reader's tracks (T, F, 4, 4), from the frame loop or from ``curves``."""
    _, tg = _modules(None)
    reader = tg.TrackReader(context, targets, armature, FRAMES)
    reader.curves = curves
    reader.read(len(FRAMES))
    return np.array([[m for _, m in track] for track in reader.tracks])


@pytest.fixture
def scene_targets(addon: Any) -> tuple[bpy.types.Object, list[bpy.types.Object]]:
    """The biped turned, moved and evenly scaled at the object level, and Empties in
    every rotation mode; one keyed LINEAR, one with a Cycles modifier, one parented to the
    armature (scaled) with another under it (a parent inverse), one not keyed."""
    armature = build_biped()
    armature.location = (0.4, -1.0, 0.2)
    armature.rotation_euler = (0.3, -0.5, 1.1)
    armature.scale = (1.5, 1.5, 1.5)
    modes = ["QUATERNION", "AXIS_ANGLE", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"]
    targets = [_keyed_empty(f"t_{mode}", mode, seed) for seed, mode in enumerate(modes)]
    for fc in _curves(targets[2]):
        for kp in fc.keyframe_points:
            kp.interpolation = "LINEAR"
    _curves(targets[3])[0].modifiers.new("CYCLES")
    on_rig = _keyed_empty("on_rig", "XYZ", 11)  # Import Targets' layout: a keyed carrier
    on_rig.parent = armature  # on the armature, the target under it, turned
    on_rig.scale = (0.5, 0.5, 0.5)
    child = _keyed_empty("child", "ZXY", 12)
    child.parent = on_rig
    child.matrix_parent_inverse = Matrix.LocRotScale((0.1, -0.3, 0.2),
                                                     Euler((0.4, 0.1, -0.7)), None)
    targets += [on_rig, child]
    still = bpy.data.objects.new("still", None)
    bpy.context.collection.objects.link(still)
    still.location, still.rotation_euler, still.scale = (1, 2, 3), (0.2, 0.4, -0.6), (2, 1, 3)
    targets.append(still)
    bpy.context.view_layer.update()
    return armature, targets


def test_curves_give_the_poses_blender_evaluates(addon, scene_targets):
    """Every rotation mode, BEZIER and LINEAR keys, a Cycles modifier, frames before and
    after the keys, parents (the armature, a keyed Empty, a parent inverse), a static
    Empty with an uneven scale, the armature turned, moved and scaled: the curves' poses
    are the frame loop's to float32 rounding."""
    tc, _ = _modules(addon)
    armature, targets = scene_targets
    scene = bpy.context.scene
    curves = tc.TargetCurves.of(scene, targets, [""] * len(targets), armature)
    assert curves is not None and tc.rig_still(armature)
    want = _read(bpy.context, targets, armature, None)
    got = _read(bpy.context, targets, armature, curves)
    assert got.shape == want.shape == (len(targets), len(FRAMES), 4, 4)
    np.testing.assert_allclose(got[..., :3, 3], want[..., :3, 3], rtol=0, atol=2e-6)
    np.testing.assert_allclose(got[..., :3, :3], want[..., :3, :3], rtol=0, atol=2e-6)
    spread = np.ptp(want[:, :, :3, 3], axis=1).max(axis=1)
    assert (spread[:-1] > 0.1).all() and spread[-1] == 0.0  # the keyed ones move


def test_a_keys_own_value_is_what_blender_evaluates_on_its_frame(addon):
    """``curve_values`` takes a key's value on the frames it keys: exactly
    ``FCurve.evaluate`` there, for every interpolation, before, between and after the
    keys, and with a modifier (evaluated throughout)."""
    tc, _ = _modules(addon)
    ob = bpy.data.objects.new("keyed", None)
    bpy.context.collection.objects.link(ob)
    rng = np.random.default_rng(5)
    for f in (0, 1, 2, 5, 9, 10, 11, 20):
        ob.location = rng.normal(0.0, 1.0, 3)
        ob.keyframe_insert("location", frame=f)
    curves = list(_curves(ob))
    for fc, mode in zip(curves, ["BEZIER", "LINEAR", "CONSTANT"], strict=True):
        for kp in fc.keyframe_points:
            kp.interpolation = mode
        fc.update()
    frames = np.arange(-4.0, 26.0)
    for fc in curves:
        want = np.array([fc.evaluate(f) for f in frames.tolist()])
        np.testing.assert_array_equal(tc.curve_values(fc, frames), want)
    curves[0].modifiers.new("NOISE")
    want = np.array([curves[0].evaluate(f) for f in frames.tolist()])
    np.testing.assert_array_equal(tc.curve_values(curves[0], frames), want)


CHANGES: dict[str, Callable[[list[bpy.types.Object], bpy.types.Object], Any]] = {
    "a parent scaled unevenly": lambda t, a: setattr(t[0], "parent", t[-1]),
    "a parent with a constraint": lambda t, a: t[-3].constraints.new("COPY_ROTATION"),
    "a bone as parent": lambda t, a: (setattr(t[1], "parent", a),
                                      setattr(t[1], "parent_type", "BONE"),
                                      setattr(t[1], "parent_bone", "hips")),
    "a constraint": lambda t, a: t[1].constraints.new("COPY_LOCATION"),
    "a driver": lambda t, a: t[2].driver_add("location", 1),
    "an NLA track": lambda t, a: t[3].animation_data.nla_tracks.new(),
    "half the action": lambda t, a: setattr(t[4].animation_data, "action_influence", 0.5),
    "a delta location": lambda t, a: setattr(t[5], "delta_location", (0.0, 0.1, 0.0)),
    "a keyed scale": lambda t, a: t[6].keyframe_insert("scale", frame=3),
    "a mirroring scale": lambda t, a: setattr(t[-1], "scale", (-1.0, 1.0, 1.0)),
    "a muted curve": lambda t, a: setattr(_curves(t[0])[0], "mute", True),
    "a muted group": lambda t, a: setattr(_curves(t[1])[0].group, "mute", True),
    "keys of another rotation mode": lambda t, a: t[0].keyframe_insert("rotation_euler",
                                                                         frame=2),
    "time remapping": lambda t, a: setattr(bpy.context.scene.render, "frame_map_new", 200),
    "an uneven armature scale": lambda t, a: setattr(a, "scale", (1.0, 2.0, 1.0)),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_anything_else_that_places_a_target_keeps_the_frame_loop(addon, scene_targets,
                                                                  change):  # fmt: skip
    tc, _ = _modules(addon)
    armature, targets = scene_targets
    scene = bpy.context.scene
    assert tc.TargetCurves.of(scene, targets, [""] * len(targets), armature) is not None
    CHANGES[change](targets, armature)
    bpy.context.view_layer.update()
    assert tc.TargetCurves.of(scene, targets, [""] * len(targets), armature) is None


def test_a_bone_target_or_a_rig_that_moves_keeps_the_frame_loop(addon, scene_targets):
    tc, _ = _modules(addon)
    armature, targets = scene_targets
    scene = bpy.context.scene
    bones = [""] * len(targets)
    assert tc.TargetCurves.of(scene, targets, [*bones[:-1], "hips"], armature) is None
    assert tc.rig_still(armature)
    constraint = armature.pose.bones["shin.L"].constraints.new("COPY_ROTATION")
    assert not tc.rig_still(armature)
    constraint.mute = True  # Blender evaluates it no more
    assert tc.rig_still(armature)
    armature.constraints.new("CHILD_OF")
    assert not tc.rig_still(armature)
    armature.constraints.clear()
    armature.parent = targets[0]
    assert not tc.rig_still(armature)


def _baked_curves(armature: bpy.types.Object) -> dict[tuple[str, int], np.ndarray]:
    out = {}
    for fc in _curves(armature):
        co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
        fc.keyframe_points.foreach_get("co", co)
        out[(fc.data_path, fc.array_index)] = co.reshape(-1, 2).astype(float)
    return out


def test_a_bake_keys_the_same_with_the_curves_as_with_the_frame_loop(addon, monkeypatch):
    """The biped's feet baked onto a still rig (the targets read from their curves) and
    again with a frame-change handler registered (a script might pose the rig: the frame
    loop): the same keys to the solver's tolerance, and the curves were used once."""
    from dhik_blender.dhik_addon import target_curves

    armature = build_biped()
    frames = list(range(0, 13))

    def pose(f: int) -> dict[str, dict[str, Any]]:  # turns the chains can make
        return {f"{LEG[0]}.L": {"rotation_quaternion": (1.0, 0.2 * math.sin(f / 4), 0.0, 0.1)},
                f"{LEG[1]}.L": {"rotation_quaternion": (1.0, 0.3 * f / 12, 0.05, 0.0)},
                f"{LEG[1]}.R": {"rotation_quaternion": (1.0, -0.2 * f / 12, 0.0, 0.1)}}

    empties = snapped_targets(armature, ["foot.L", "foot.R"], frames, pose)
    s = bpy.context.scene.dhik
    s.armature, s.effector, s.target, s.chain_length = armature, "foot.L", empties["foot.L"], 3
    assert bpy.ops.dhik.effector_add() == {"FINISHED"}
    row = s.effectors[s.effector_index]
    row.bone, row.target, row.chain_length = "foot.R", empties["foot.R"], 2
    s.use_scene_range, s.frame_start, s.frame_end = False, frames[0], frames[-1]
    used: list[int] = []
    poses = target_curves.TargetCurves.poses
    monkeypatch.setattr(target_curves.TargetCurves, "poses",
                        lambda self, fr: used.append(len(fr)) or poses(self, fr))
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert sum(used) == len(frames)
    fast = _baked_curves(armature)
    armature.animation_data.action = None

    def handler(scene: Any, depsgraph: Any = None) -> None:  # a script's: nothing to do
        return None

    bpy.app.handlers.frame_change_post.append(handler)
    try:
        assert bpy.ops.dhik.bake() == {"FINISHED"}
    finally:
        bpy.app.handlers.frame_change_post.remove(handler)
    assert sum(used) == len(frames)  # the frame loop this time
    slow = _baked_curves(armature)
    assert fast.keys() == slow.keys() and fast
    for key in fast:
        np.testing.assert_allclose(fast[key], slow[key], rtol=0, atol=2e-5, err_msg=str(key))
    assert "off target" not in s.result_summary and s.result_converged == len(frames)
