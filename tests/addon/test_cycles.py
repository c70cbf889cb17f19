"""A cycle baked over and over, as a rigger sets it up: the target keyed over one cycle,
its F-curves repeated by a Cycles modifier, the bake's range three cycles and more.
Every cycle must then pose alike in Blender (the bake plans two cycles and repeats
one: ``core/solver/path/cycles.py``), on target on every frame. Armature space = world;
metres and radians."""

from __future__ import annotations

import math
from pathlib import Path

import bpy
import numpy as np
from mathutils import Quaternion
from rig_builders import (
    build_biped,
    key_channels,
    misses,
    set_effectors,
    snapped_targets,
    world_to_bone,
    world_turn,
)

SAMPLES = Path(__file__).resolve().parents[2] / "sample_scenes"
CYCLE = 40  # frames
END = 3 * CYCLE + 10  # the bake's range: 0..END


def cyclic_arm7() -> tuple[bpy.types.Object, bpy.types.Object]:
    """The arm7 sample rig and an Empty keyed on frames 0..CYCLE-1 at the Tool bone's
    evaluated pose while the seven hinges turn through one or two whole periods a
    cycle, its frame CYCLE keyed as its frame 0, each F-curve cycled."""
    assert bpy.ops.dhik.import_skeleton(
        filepath=str(SAMPLES / "arm7" / "skeleton.json")) == {"FINISHED"}
    ob = bpy.context.scene.dhik.armature
    bones = ob.pose.bones
    hinges = [f"J{k}" for k in range(1, 8)]
    axes = {}
    for name in hinges:  # each hinge's free bone axis (its only unlocked IK axis)
        axis = [0.0, 0.0, 0.0]
        axis["xyz".index(next(a for a in "xyz"
                              if not getattr(bones[name], f"lock_ik_{a}")))] = 1.0
        axes[name] = axis
    rng = np.random.default_rng(4)
    periods = rng.integers(1, 3, len(hinges))
    phases = rng.uniform(0.0, 2 * math.pi, len(hinges))

    def pose(f: int) -> dict[str, dict[str, Quaternion]]:
        out = {}
        for k, name in enumerate(hinges):
            a = "xyz"[axes[name].index(1.0)]
            lo, hi = getattr(bones[name], f"ik_min_{a}"), getattr(bones[name], f"ik_max_{a}")
            angle = (lo + hi) / 2 + 0.6 * (hi - lo) / 2 * math.sin(
                2 * math.pi * periods[k] * f / CYCLE + phases[k])
            out[name] = {"rotation_quaternion": Quaternion(axes[name], angle)}
        return out

    goal = snapped_targets(ob, ["Tool"], list(range(CYCLE)), pose)["Tool"]
    cycled(goal, CYCLE)
    return ob, goal


def cycled(empty: bpy.types.Object, cycle: int) -> None:
    """Key frame ``cycle`` of each of ``empty``'s F-curves as its frame 0 and cycle them
    (a Cycles modifier): its animation repeats every ``cycle`` frames."""
    for fc in _curves(empty):
        fc.keyframe_points.insert(cycle, fc.keyframe_points[0].co[1])
        fc.modifiers.new("CYCLES")


def cycled_with_offset(ob: bpy.types.Object) -> None:
    """Each of ``ob``'s F-curves cycled with its offset (Blender's Repeat with Offset:
    each cycle moved on by its last key's value less its first's)."""
    for fc in _curves(ob):
        mod = fc.modifiers.new("CYCLES")
        mod.mode_before = mod.mode_after = "REPEAT_OFFSET"


def bone_matrices(ob: bpy.types.Object, frames: range, local: bool = False) -> np.ndarray:
    """Every pose bone's evaluated matrix (armature space; ``local``: its own channels',
    ``matrix_basis``) on each of ``frames``."""
    out = []
    for f in frames:
        bpy.context.scene.frame_set(f)
        out.append([np.array(pb.matrix_basis if local else pb.matrix, dtype=float)
                    for pb in ob.pose.bones])
    return np.array(out)


def _curves(ob: bpy.types.Object) -> list[bpy.types.FCurve]:
    """The F-curves of ``ob``'s action (Blender 5's layered actions: its channelbag's)."""
    from bpy_extras import anim_utils

    ad = ob.animation_data
    return list(anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot).fcurves)


def on_goal(ob: bpy.types.Object, goal: bpy.types.Object) -> None:
    """The panel set as a rigger would for the cycled arm7: its Tool bone on ``goal``
    over frames 0..END, tolerances 1e-5 m and rad."""
    s = bpy.context.scene.dhik
    s.armature, s.effector, s.target = ob, "Tool", goal
    s.use_scene_range = False
    s.frame_start, s.frame_end = 0, END
    s.position_tolerance = s.orientation_tolerance = 1e-5


def baked_alike(ob: bpy.types.Object, goal: bpy.types.Object) -> None:
    """Bake through the panel's operator; then on every frame each bone's evaluated pose
    equals its pose one cycle later, the arm moves, and the Tool bone is on ``goal`` as
    Blender evaluates both."""
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    poses = bone_matrices(ob, range(END + 1))
    assert np.abs(poses[CYCLE:] - poses[:-CYCLE]).max() < 1e-6
    assert np.abs(poses[1:] - poses[:-1]).max() > 1e-3  # the arm moves
    position, orientation = misses(ob, {"Tool": goal}, range(END + 1))
    assert position < 1e-4 and orientation < 1e-3


def test_a_cycled_target_bakes_every_cycle_alike() -> None:
    """Baked through the panel's operator over 0..130: on every frame each bone's
    evaluated pose equals its pose one cycle later, and the Tool bone is on the Empty
    as Blender evaluates both."""
    ob, goal = cyclic_arm7()
    on_goal(ob, goal)
    baked_alike(ob, goal)


def stepping(ob: bpy.types.Object, cycle: int):
    """Both legs stepping through one ``cycle`` (rotation channels), as a function of
    the frame: a whole period a cycle."""
    bones = ob.pose.bones

    def step(f: int) -> dict[str, dict[str, Quaternion]]:
        t = 2 * math.pi * f / cycle
        out = {}
        for side, sign in (("L", 1.0), ("R", -1.0)):
            out[f"thigh.{side}"] = {"rotation_quaternion": world_turn(
                bones[f"thigh.{side}"], (1, 0, 0), sign * 0.35 * math.sin(t))}
            out[f"shin.{side}"] = {"rotation_quaternion": world_turn(
                bones[f"shin.{side}"], (1, 0, 0), -0.35 - 0.25 * math.cos(t))}
            out[f"foot.{side}"] = {"rotation_quaternion": world_turn(
                bones[f"foot.{side}"], (0, 0, 1), 0.15 * sign * math.sin(t))}
        return out

    return step


def bake_legs(ob: bpy.types.Object, empties: dict[str, bpy.types.Object], end: int) -> None:
    """Both feet on their Empties, Chain Length 3, frames 0..``end``, 1e-5 m and rad."""
    set_effectors(ob, empties, 3, 0, end)
    s = bpy.context.scene.dhik
    s.position_tolerance = s.orientation_tolerance = 1e-5
    assert bpy.ops.dhik.bake() == {"FINISHED"}


def test_a_cycled_walk_bakes_both_legs_alike_every_cycle() -> None:
    """A biped's two legs (thigh, shin and foot: ball joints, Chain Length 3, full pose:
    limbs that share no solved joint, taken through the cheap pass together) stepping
    through a 24-frame cycle, their feet's targets cycled, baked over three cycles and
    more: every bone poses as it did one cycle before, and both feet are on target."""
    cycle, end = 24, 3 * 24 + 5
    ob = build_biped()
    empties = snapped_targets(ob, ["foot.L", "foot.R"], list(range(cycle)),
                              stepping(ob, cycle))
    for empty in empties.values():
        cycled(empty, cycle)
    bake_legs(ob, empties, end)
    poses = bone_matrices(ob, range(end + 1))
    assert np.abs(poses[cycle:] - poses[:-cycle]).max() < 1e-6
    assert np.abs(poses[1:] - poses[:-1]).max() > 1e-3  # the legs move
    position, orientation = misses(ob, empties, range(end + 1))
    assert position < 1e-4 and orientation < 1e-3


def test_a_walk_that_travels_bakes_its_steps_alike_every_cycle() -> None:
    """The same steps with the hips keyed travelling 0.3 m a cycle and bobbing, hips and
    feet cycled with their offset (Repeat with Offset): no input repeats in world
    space, but seen from the hips they do. Every leg bone's own channels repeat every
    cycle, the hips keep their keys, and both feet are on target."""
    cycle, end = 24, 3 * 24 + 5
    ob = build_biped()
    hips = ob.pose.bones["hips"]
    key_channels(ob, range(cycle + 1), lambda f: {"hips": {"location": world_to_bone(
        hips, (0.0, -0.3 * f / cycle, 0.02 * math.sin(2 * math.pi * f / cycle)))}})
    cycled_with_offset(ob)
    empties = snapped_targets(ob, ["foot.L", "foot.R"], list(range(cycle + 1)),
                              stepping(ob, cycle))
    for empty in empties.values():
        cycled_with_offset(empty)
    bake_legs(ob, empties, end)
    local = bone_matrices(ob, range(end + 1), local=True)
    legs = [k for k, pb in enumerate(ob.pose.bones) if pb.name != "hips"]
    assert np.abs(local[cycle:, legs] - local[:-cycle, legs]).max() < 1e-6
    assert np.abs(local[1:, legs] - local[:-1, legs]).max() > 1e-3  # the legs move
    bpy.context.scene.frame_set(2 * cycle + 5)  # the hips on their keys, cycled on
    moved = (ob.matrix_world @ hips.matrix).translation - hips.bone.head_local
    assert abs(moved.y + 0.3 * (2 + 5 / cycle)) < 1e-5
    position, orientation = misses(ob, empties, range(end + 1))
    assert position < 1e-4 and orientation < 1e-3


def test_the_preview_of_a_cycled_target_shows_what_bake_keys(addon) -> None:
    """Live Preview on the cycled target: once the range is planned (as Bake plans it,
    over two cycles and one repeated), every frame reached by playing, scrubbing back or
    jumping shows the pose Bake then keys there, each bone within 1e-6 of Blender's
    evaluated matrix, and the preview's poses repeat every cycle."""
    preview = addon.dhik_addon.preview
    ob, goal = cyclic_arm7()
    scene, s = bpy.context.scene, bpy.context.scene.dhik
    on_goal(ob, goal)
    s.live_preview = True
    assert preview.settle(scene) and preview.status(scene) == preview.PLANNED
    order = [*range(END + 1), *range(END, -1, -7), 3 * CYCLE, 5, 2 * CYCLE + 1]
    shown: dict[int, np.ndarray] = {}
    for f in order:
        now = bone_matrices(ob, range(f, f + 1))[0]
        if f in shown:
            assert np.abs(now - shown[f]).max() < 1e-9, f
        shown[f] = now
    s.live_preview = False
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    baked = bone_matrices(ob, range(END + 1))
    planned = np.array([shown[f] for f in range(END + 1)])
    assert np.abs(planned[1:] - planned[:-1]).max() > 1e-3  # the preview moves the arm
    assert np.abs(planned - baked).max() < 1e-6
    assert np.abs(planned[CYCLE:] - planned[:-CYCLE]).max() < 1e-6


def test_a_cycled_target_with_a_pole_bakes_every_cycle_alike() -> None:
    """The cycled target with a pole target (an Empty beside the arm): baked through the
    panel's operator, every bone's evaluated pose equals its pose one cycle later (the
    swing toward the pole once differed near the range's ends), the Tool on the Empty."""
    ob, goal = cyclic_arm7()
    on_goal(ob, goal)
    pole = bpy.data.objects.new("pole", None)
    bpy.context.collection.objects.link(pole)
    pole.location = (-0.4, 0.3, 0.8)
    bpy.context.scene.dhik.pole_target = pole
    baked_alike(ob, goal)
