"""Everything Blender evaluates is modelled or named (issue 18, point 3), real bpy.

Each scene is set up as a rigger would (ANGLED_ARM, the biped, NLA strips made with the
NLA API, constraints and drivers added to pose bones), its targets are Blender's own
evaluated bones of a posed rig, and each bake is judged by what Blender then shows.
What the model cannot follow is one ERROR naming the bone (or strip) and the setting,
with nothing changed; after every bake the add-on evaluates the effectors frame by frame
and reports the frames Blender shows off target (verify.py). Armature space = world
unless a test moves the armature; metres and radians.
"""

from __future__ import annotations

import math
from typing import Any

import bpy
import numpy as np
import pytest
from addon_helpers import build_angled_arm
from mathutils import Quaternion
from rig_builders import (
    bone_curves,
    build_biped,
    fcurves,
    key_channels,
    misses,
    set_effectors,
    snapped_targets,
    world_to_bone,
    world_turn,
)

FRAMES = list(range(9))


def _arm_pose(ob: bpy.types.Object, f: int) -> dict[str, dict[str, Any]]:
    """A reach of ANGLED_ARM within its locks and limits, frame ``f``."""
    t = f / FRAMES[-1]
    pb = ob.pose.bones
    hinge = pb["forearm"].bone.matrix_local.to_3x3().col[0]  # its free IK axis, world
    return {"upper_arm": {"rotation_quaternion": world_turn(pb["upper_arm"], (0, 1, 0),
                                                            0.2 + 0.3 * t)},
            "forearm": {"rotation_quaternion": world_turn(pb["forearm"], hinge, 0.5 + 0.6 * t)},
            "hand": {"rotation_quaternion": world_turn(pb["hand"], (0, 0, 1), 0.3 * t)}}


def _arm_scene(chain: int = 0) -> tuple[bpy.types.Object, dict[str, bpy.types.Object]]:
    """ANGLED_ARM and an Empty snapped to its hand on every frame of a reach (the main
    effector, ``chain`` bones)."""
    ob = build_angled_arm()
    empties = snapped_targets(ob, ["hand"], FRAMES, lambda f: _arm_pose(ob, f))
    set_effectors(ob, empties, chain, FRAMES[0], FRAMES[-1])
    return ob, empties


def _refused(ob: bpy.types.Object, *patterns: str) -> None:
    """The bake is one ERROR matching every pattern, and nothing changed."""
    before = fcurves(ob)
    markers = len(bpy.context.scene.timeline_markers)
    with pytest.raises(RuntimeError) as err:
        bpy.ops.dhik.bake()
    for pattern in patterns:
        assert pattern in str(err.value), (pattern, str(err.value))
    assert fcurves(ob) == before and not bpy.context.scene.dhik.has_result
    assert len(bpy.context.scene.timeline_markers) == markers


def _on_target(ob: bpy.types.Object, empties: dict[str, bpy.types.Object],
               frames: list[int] = FRAMES) -> None:  # fmt: skip
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    position, orientation = misses(ob, empties, frames)
    assert position < 2e-3 and orientation < 2e-3, (position, orientation)


# ------------------------------------------------------------------- inherit flags


def test_inherit_rotation_off_is_refused():
    """Inherit Rotation off on the hand (before: 'all converged' and Blender showed the
    hand 0.87 rad off)."""
    ob, _ = _arm_scene()
    ob.data.bones["hand"].use_inherit_rotation = False
    _refused(ob, "bones['hand']", "Inherit Rotation off")


def test_scaled_bone_above_the_chain_is_refused_with_any_inherit_scale():
    """The upper arm scaled 1.2 (static) above a chain of 2 bones, the forearm with
    Inherit Scale None below it (before: the bake ran, 0/9 converged, and Blender showed
    the hand 0.15 m off)."""
    ob, _ = _arm_scene(chain=2)
    ob.pose.bones["upper_arm"].scale = (1.2, 1.2, 1.2)
    ob.data.bones["forearm"].inherit_scale = "NONE"
    _refused(ob, "bones['upper_arm']", "is scaled at frame 0")


def test_keyed_squash_and_stretch_above_the_chain_is_refused():
    """Scale keys on the upper arm (1 at frame 0, stretched at 8) above a chain of 2
    bones: refused, naming the first frame where it is scaled."""
    ob, _ = _arm_scene(chain=2)
    key_channels(ob, (0, 8), lambda f: {"upper_arm": {"scale": (1.0, 1.0 + 0.03 * f, 1.0)}})
    _refused(ob, "bones['upper_arm']", "is scaled at frame 1")


def test_scale_on_a_solved_bone_is_held_at_one_and_named(capfd):
    """The same static scale on a bone the chain solves (chain 0): the bake holds its
    scale at 1, so Blender shows the hand on target (modelled), and a WARNING names the
    bone and the channel it changed."""
    ob, empties = _arm_scene()
    ob.pose.bones["upper_arm"].scale = (1.2, 1.2, 1.2)
    ob.data.bones["forearm"].inherit_scale = "NONE"
    capfd.readouterr()
    _on_target(ob, empties)
    out = capfd.readouterr().out
    assert tuple(ob.pose.bones["upper_arm"].scale) == (1.0, 1.0, 1.0)
    assert "bones['upper_arm'].scale: not at rest" in out and "frames 0-8" in out, out
    assert "bones['forearm']" not in out


def test_keyed_scale_on_a_solved_bone_is_named_not_lost_silently(capfd):
    """Squash-and-stretch keys on a solved bone (before: overwritten by 1 without a
    word): the bake holds the scale at 1 on the range (the solve takes it so, and Blender
    shows the hand on target) and a WARNING names the bone and the channel."""
    ob, empties = _arm_scene()
    key_channels(ob, (0, 4, 8, 12),
                 lambda f: {"forearm": {"scale": (1.0, 1.0 + 0.03 * f, 1.0)}})
    capfd.readouterr()
    _on_target(ob, empties)
    out = capfd.readouterr().out
    assert "bones['forearm'].scale: not at rest" in out, out
    bpy.context.scene.frame_set(4)
    assert tuple(ob.pose.bones["forearm"].scale) == pytest.approx((1.0, 1.0, 1.0))


@pytest.mark.parametrize("keys, frame, named", [
    ({0: 1.0, 8: 1.0, 20: 1.5}, 20, False),  # off rest only after the range
    ({-5: 1.5, 20: 1.0}, 25, True),  # off rest inside the range, keys only outside it
])
def test_held_scale_is_named_by_its_values_in_the_range(capfd, keys, frame, named):
    """The WARNING judges the held channel over the bake's range (keys inside it and the
    curve's values at its ends), not at the current frame."""
    ob, empties = _arm_scene()
    for f, y in keys.items():
        ob.pose.bones["forearm"].scale = (1.0, y, 1.0)
        ob.pose.bones["forearm"].keyframe_insert("scale", frame=f)
    bpy.context.scene.frame_set(frame)
    capfd.readouterr()
    _on_target(ob, empties)
    said = "bones['forearm'].scale: not at rest" in capfd.readouterr().out
    assert said == named


def test_a_static_scale_under_a_muted_curve_is_held_and_named(capfd):
    """A muted scale curve leaves the value set in charge: the bake sets it to rest (not
    only keys into the muted curve), Blender shows the hand on target, and the WARNING
    names it."""
    ob, empties = _arm_scene()
    pb = ob.pose.bones["forearm"]
    pb.keyframe_insert("scale", frame=0)
    for fc in _scale_curves(ob):
        fc.mute = True
    pb.scale = (1.0, 1.3, 1.0)
    capfd.readouterr()
    _on_target(ob, empties)
    assert "bones['forearm'].scale: not at rest" in capfd.readouterr().out
    assert tuple(pb.scale) == pytest.approx((1.0, 1.0, 1.0))


def _scale_curves(ob: bpy.types.Object) -> list[bpy.types.FCurve]:
    action = ob.animation_data.action
    curves = action.fcurves if hasattr(action, "fcurves") and action.fcurves else [
        fc for layer in action.layers for strip in layer.strips
        for bag in strip.channelbags for fc in bag.fcurves]
    return [fc for fc in curves if fc.data_path == 'pose.bones["forearm"].scale']


def test_a_bake_with_every_held_channel_at_rest_names_none(capfd):
    ob, empties = _arm_scene()
    capfd.readouterr()
    _on_target(ob, empties)
    assert "not at rest" not in capfd.readouterr().out


# ----------------------------------------------------------------- armature space


def _sheared(ob: bpy.types.Object) -> None:
    """The armature, turned 30 degrees about Z, inside an Empty scaled (1, 2, 1)."""
    parent = bpy.data.objects.new("stretch", None)
    bpy.context.collection.objects.link(parent)
    parent.scale = (1.0, 2.0, 1.0)
    ob.parent = parent
    ob.rotation_euler = (0.0, 0.0, math.radians(30))
    bpy.context.view_layer.update()


def test_orientation_target_in_a_sheared_armature_space_is_refused():
    """Before: the bake ran and Blender showed the hand 0.28 rad off its target."""
    ob, _ = _arm_scene()
    _sheared(ob)
    _refused(ob, "armature 'arm'", "sheared or scaled unevenly", "parent 'stretch'")


def test_position_target_in_a_sheared_armature_space_is_exact():
    """Positions map through any affine armature space exactly: with Orientation 0 the
    bake runs and Blender shows the hand's head on the target's position."""
    ob = build_angled_arm()
    _sheared(ob)
    empties = snapped_targets(ob, ["hand"], FRAMES, lambda f: _arm_pose(ob, f))
    set_effectors(ob, empties, 0, FRAMES[0], FRAMES[-1])
    s = bpy.context.scene.dhik
    s.orientation_weight, s.position_tolerance = 0.0, 1e-5
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert s.result_converged == len(FRAMES) and "Blender" not in s.result_summary
    for f in FRAMES:
        bpy.context.scene.frame_set(f)
        head = np.array(ob.matrix_world @ ob.pose.bones["hand"].head, dtype=float)
        goal = np.array(empties["hand"].matrix_world.translation, dtype=float)
        assert np.linalg.norm(head - goal) < 1e-4, f


# -------------------------------------------------------------- constraints, drivers


@pytest.mark.parametrize("kind", ["IK", "LIMIT_ROTATION"])
def test_constraint_on_a_solved_bone_is_refused_and_a_muted_one_is_not(kind):
    """An IK constraint left on the hand or a Limit Rotation on the forearm (before:
    'all converged' and Blender showed the hand 0.32 m off in both): refused, naming bone
    and constraint; muted, the bake runs and Blender shows the hand on target."""
    ob, empties = _arm_scene()
    bone = "hand" if kind == "IK" else "forearm"
    con = ob.pose.bones[bone].constraints.new(kind)
    if kind == "IK":
        con.target = bpy.data.objects.new("ik_goal", None)
        bpy.context.collection.objects.link(con.target)
        con.chain_count = 2
    else:
        con.use_limit_x = con.use_limit_y = con.use_limit_z = True
        con.owner_space = "LOCAL"
    _refused(ob, f"bones['{bone}']", f"({kind})")
    con.mute = True
    _on_target(ob, empties)


def test_constraint_at_influence_zero_bakes_unless_its_influence_is_animated():
    """Influence 0 changes nothing: the bake runs. Keyed influence may be more on some
    frame: refused."""
    ob, empties = _arm_scene()
    con = ob.pose.bones["forearm"].constraints.new("COPY_ROTATION")
    con.target, con.influence = empties["hand"], 0.0
    _on_target(ob, empties)
    con.keyframe_insert("influence", frame=0)
    con.influence = 1.0
    con.keyframe_insert("influence", frame=8)
    bpy.context.scene.dhik.has_result = False  # (the first bake's)
    _refused(ob, "bones['forearm']", "COPY_ROTATION")


def test_constraint_off_the_path_is_not_checked():
    """A Copy Rotation on a bone the effector does not need (another root) bakes."""
    ob = build_biped()
    bpy.ops.object.mode_set(mode="EDIT")
    eb = ob.data.edit_bones.new("prop")
    eb.head, eb.tail = (0.5, 0.0, 0.0), (0.5, 0.0, 0.3)
    bpy.ops.object.mode_set(mode="OBJECT")
    ob.pose.bones["prop"].constraints.new("COPY_ROTATION").target = ob
    empties = snapped_targets(ob, ["foot.L"], FRAMES, lambda f: {"shin.L": {
        "rotation_quaternion": world_turn(ob.pose.bones["shin.L"], (1, 0, 0), -0.05 * f)}})
    set_effectors(ob, empties, 3, FRAMES[0], FRAMES[-1])
    _on_target(ob, empties)


def test_driver_on_a_solved_channel_is_refused():
    """A driver on the forearm's rotation (before: it replaced the baked keys, 'all
    converged' and Blender showed the hand 0.13 m off)."""
    ob, _ = _arm_scene()
    fc = ob.pose.bones["forearm"].driver_add("rotation_quaternion", 1)
    fc.driver.expression = "0.3"
    _refused(ob, 'pose.bones["forearm"].rotation_quaternion[1]', "has a driver")


def test_modifier_on_a_solved_curve_is_refused():
    """A Noise modifier on a solved channel's F-curve would shake the baked keys."""
    ob, _ = _arm_scene()
    key_channels(ob, (0,), lambda f: {"forearm": {"rotation_quaternion": (1, 0, 0, 0)}})
    curve = next(fc for fc in _channelbag(ob).fcurves if "forearm" in fc.data_path)
    curve.modifiers.new("NOISE")
    _refused(ob, "forearm", "F-curve modifier NOISE")


def test_rest_position_is_refused():
    ob, _ = _arm_scene()
    ob.data.pose_position = "REST"
    _refused(ob, "Rest Position")


# ------------------------------------------------------------ bones above the chains


def test_location_on_a_locked_bone_above_the_chain_is_refused():
    """The upper arm's location is locked (no translation joints) but keyed: Blender
    moves it anyway (a lock only stops the mouse). Above a chain of 2 bones: refused."""
    ob, _ = _arm_scene(chain=2)
    key_channels(ob, (3, 6), lambda f: {"upper_arm": {"location": (0.0, 0.01 * f, 0.0)}})
    _refused(ob, "bones['upper_arm']", "location", "all locked")


def test_hinge_turned_off_its_axis_above_the_chain_is_refused():
    """The forearm is a hinge (one free IK axis) above a chain of 1 bone, keyed about
    another axis: its joint cannot hold that turn."""
    ob, _ = _arm_scene(chain=1)
    key_channels(ob, (0,), lambda f: {"forearm": {
        "rotation_quaternion": Quaternion((0, 1, 0), 0.2)}})
    _refused(ob, "bones['forearm']", "off its hinge axis")


def test_local_location_off_is_modelled():
    """The biped's hips with Local Location off (their location channels move along the
    armature's axes, not the hips bone's) and keyed: with chains of 3 bones the legs
    follow the keyed hips and Blender shows the feet on target."""
    ob = build_biped()
    ob.data.bones["hips"].use_local_location = False
    key_channels(ob, FRAMES, lambda f: {"hips": {"location": (0.02 * f, -0.01 * f, -0.01 * f)}})
    empties = snapped_targets(ob, ["foot.L", "foot.R"], FRAMES, lambda f: {
        f"shin.{s}": {"rotation_quaternion": world_turn(ob.pose.bones[f"shin.{s}"], (1, 0, 0),
                                                         -0.04 * f)} for s in "LR"})
    set_effectors(ob, empties, 3, FRAMES[0], FRAMES[-1])
    _on_target(ob, empties)


# -------------------------------------------------------------------------------- NLA


def _channelbag(ob: bpy.types.Object) -> Any:
    from bpy_extras import anim_utils

    return anim_utils.action_get_channelbag_for_slot(ob.animation_data.action,
                                                     ob.animation_data.action_slot)


def _strip_below(ob: bpy.types.Object, start: int = 0) -> bpy.types.NlaStrip:
    """An NLA strip (from frame ``start``) whose action keys the upper arm's location and
    rotation, pushed down below an empty active action."""
    key_channels(ob, (0, 8), lambda f: {"upper_arm": {
        "location": (0.0, 0.0, 0.01 * f),
        "rotation_quaternion": world_turn(ob.pose.bones["upper_arm"], (1, 0, 0), 0.05 * f)}})
    ad = ob.animation_data
    base = ad.action
    track = ad.nla_tracks.new()
    strip = track.strips.new("walk", start, base)
    ad.action = None
    return strip


@pytest.mark.parametrize("blend", ["ADD", "COMBINE"])
def test_active_action_blending_over_nla_strips_is_refused(blend):
    """An active action blending ADD or COMBINE over an NLA strip (before: 'all
    converged' and Blender showed the hand 0.096 m and 0.19 m off): refused, naming the
    blending and the track."""
    ob, _ = _arm_scene()
    _strip_below(ob)
    ad = ob.animation_data
    ad.action = bpy.data.actions.new("layer")
    ad.action_blend_type = blend
    _refused(ob, "action_blend_type", repr(blend), "NLA track")


def test_active_action_at_partial_influence_over_nla_strips_is_refused():
    ob, _ = _arm_scene()
    _strip_below(ob)
    ad = ob.animation_data
    ad.action = bpy.data.actions.new("layer")
    ad.action_influence = 0.5
    _refused(ob, "action_influence", "0.5", "NLA track")


def _legs_on_moving_hips(ob: bpy.types.Object) -> dict[str, bpy.types.Object]:
    """Targets for both feet while the hips move as they are animated (chains of 3)."""
    empties = snapped_targets(ob, ["foot.L", "foot.R"], FRAMES, lambda f: {
        f"shin.{s}": {"rotation_quaternion": world_turn(ob.pose.bones[f"shin.{s}"], (1, 0, 0),
                                                         -0.04 * f)} for s in "LR"})
    set_effectors(ob, empties, 3, FRAMES[0], FRAMES[-1])
    return empties


def test_hips_played_by_an_nla_strip_carry_the_legs():
    """The hips animated by an NLA strip only (no active action): their evaluated
    channels carry the chains, and Blender shows the feet on target."""
    ob = build_biped()
    hips = ob.pose.bones["hips"]
    key_channels(ob, (0, 8), lambda f: {"hips": {
        "location": world_to_bone(hips, (0.01 * f, 0.0, -0.01 * f)),
        "rotation_quaternion": world_turn(hips, (0, 0, 1), 0.04 * f)}})
    ad = ob.animation_data
    ad.nla_tracks.new().strips.new("walk", 0, ad.action)
    ad.action = None
    _on_target(ob, _legs_on_moving_hips(ob))


def test_driven_hips_carry_the_legs():
    """A driver on the hips' location (the frame number): read every frame as Blender
    evaluates it, so Blender shows the feet on target."""
    ob = build_biped()
    fc = ob.pose.bones["hips"].driver_add("location", 1)
    fc.driver.expression = "-0.01 * frame"
    _on_target(ob, _legs_on_moving_hips(ob))


def test_hips_posed_by_a_frame_change_handler_carry_the_legs():
    """A script's frame-change handler moves the hips (no action, NLA track or driver
    on the rig): the driven bones are read every frame, not once for a rig nothing
    animates, so Blender shows the feet on target."""
    ob = build_biped()
    hips = ob.pose.bones["hips"]
    rest = hips.location.copy()

    def move_hips(scene: bpy.types.Scene, _depsgraph: object = None) -> None:
        hips.location = rest + world_to_bone(hips, (0.01 * scene.frame_current, 0.0,
                                                    -0.01 * scene.frame_current))

    bpy.app.handlers.frame_change_pre.append(move_hips)
    try:
        _on_target(ob, _legs_on_moving_hips(ob))
    finally:
        bpy.app.handlers.frame_change_pre.remove(move_hips)


def test_replace_over_an_nla_strip_holds_the_channels_the_strip_animates():
    """The active action replaces an NLA strip that moves the upper arm's (locked)
    location: the bake keys the solved bones' other channels at rest, so the strip
    cannot move them under the keys, and Blender shows the hand on target (before: the
    strip's location stayed in force and Blender showed the hand 0.08 m off)."""
    ob, empties = _arm_scene()
    _strip_below(ob)
    _on_target(ob, empties)
    loc = [k for k in bone_curves(fcurves(ob), "upper_arm") if k[0].endswith(".location")]
    assert len(loc) == 3


def test_tweak_mode_is_refused_and_the_strip_keeps_its_range():
    """Tweak mode on a strip that starts at frame 10 (before: keys at the wrong action
    frames, the strip's frame range changed and Blender showed the hand 0.069 m off):
    refused, naming the strip."""
    ob, _ = _arm_scene()
    strip = _strip_below(ob, start=10)
    span = (strip.frame_start, strip.frame_end)
    ad = ob.animation_data
    ad.use_tweak_mode = True
    _refused(ob, "tweak mode", "'walk'")
    ad.use_tweak_mode = False
    assert (strip.frame_start, strip.frame_end) == span


# --------------------------------------------------------- what Blender shows, after


def test_misses_that_blender_shows_are_reported_and_marked():
    """Key Every 4 frames on a fast reach: the frames between the keys interpolate, and
    Blender shows the hand off target there. The bake says so (a WARNING, markers named
    after the armature, the panel's converged count without them) instead of "all
    converged" (before: "all converged" and no word)."""
    ob, empties = _arm_scene()
    s = bpy.context.scene.dhik
    s.frame_step = 4
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert "all converged" not in s.result_summary
    assert "Blender shows" in s.result_summary
    marked = sorted(m.frame for m in bpy.context.scene.timeline_markers
                    if m.name == "dhik: off target in Blender (arm)")
    assert marked and all(f % 4 for f in marked)  # between the keys, never on one
    assert s.result_converged == len(FRAMES) - len(marked)
    worst = max(misses(ob, empties, [f])[0] for f in marked)
    assert s.result_max_position_error >= worst - 1e-6


def test_a_clean_bake_says_all_converged_and_marks_nothing():
    ob, empties = _arm_scene()
    s = bpy.context.scene.dhik
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert "(all converged)" in s.result_summary and "Blender" not in s.result_summary
    assert not [m for m in bpy.context.scene.timeline_markers if "Blender" in m.name]


def test_long_bakes_are_sampled(addon):
    """At most 500 frames are evaluated: every k-th frame and the last."""
    sample = addon.dhik_addon.verify.sample
    picked, step = sample(list(range(1201)))
    assert step == 3 and picked[:3] == [0, 3, 6] and picked[-1] == 1200
    assert len(picked) <= 501
    assert sample(list(range(10))) == (list(range(10)), 1)


def test_sheared_parent_animated_later_is_named_with_its_frame():
    """The armature's parent turns uneven at frame 5 (keyed scale): the pass over the
    frames names that frame."""
    ob, _ = _arm_scene()
    parent = bpy.data.objects.new("stretch", None)
    bpy.context.collection.objects.link(parent)
    ob.parent = parent
    ob.rotation_euler = (0.0, 0.0, math.radians(30))
    for f, sy in ((4, 1.0), (5, 1.5)):
        parent.scale = (1.0, sy, 1.0)
        parent.keyframe_insert("scale", frame=f)
    bpy.context.scene.frame_set(0)
    _refused(ob, "sheared or scaled unevenly at frame 5")

