"""Targets read from their own F-curves, when nothing else can move them or the rig.

A bake reads each target's pose on every frame of its range (``targets.TrackReader``):
Blender steps the scene through the frames and the evaluated matrices are read. Where a
target object's world matrix is its own keyed transform and nothing else (no constraint,
driver, NLA track, delta transform or keyed scale; a parent only if it is the armature or
such an object itself, as Import Targets makes them), and the armature does not move
either (:func:`rig_still`), the same poses follow from evaluating the F-curves at the
frames, without stepping the scene: :class:`TargetCurves`. Anything else (a bone as
target, a constraint, a script's frame handler ...) keeps the frame loop.

Frames and units as :class:`targets.TrackReader`: per target its world pose in the
armature's space (metres of armature space; rotation relative to the armature object's,
scale removed). The two reads agree to float32 rounding (tests/addon/test_target_curves.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import bpy
import numpy as np
from numpy.typing import NDArray

from . import keying
from .access import pose_of
from .key_curves import AXIS_ANGLE, EULER_ORDERS, QUATERNION, channel_matrices

Array = NDArray[np.float64]

ROTATIONS = {"QUATERNION": ("rotation_quaternion", QUATERNION),
             "AXIS_ANGLE": ("rotation_axis_angle", AXIS_ANGLE),
             **{order: ("rotation_euler", order) for order in EULER_ORDERS}}
SIMILARITY = 1e-6  # the armature's 3x3 over its scale: this close to a rotation
MAX_PARENTS = 8  # parents above a target followed, at most


def _muted(constraints: bpy.types.bpy_prop_collection) -> bool:
    """Every constraint of ``constraints`` muted (none evaluated)."""
    return all(c.mute for c in constraints)


def _own_keys(ob: bpy.types.Object) -> bool:
    """Whether ``ob``'s animation is its assigned action alone, at full influence:
    no drivers, NLA tracks or tweak mode, no layer mixing less than all of it."""
    ad = ob.animation_data
    if ad is None:
        return True
    if len(ad.drivers) or len(ad.nla_tracks) or ad.use_tweak_mode:
        return False
    if ad.action is None:
        return True
    if ad.action_blend_type != "REPLACE" or ad.action_influence != 1.0:
        return False
    return all(getattr(layer, "influence", 1.0) == 1.0
               and getattr(layer, "mix_mode", "REPLACE") == "REPLACE"
               for layer in ad.action.layers)


def rig_still(armature: bpy.types.Object) -> bool:
    """Whether the armature's evaluated world matrix and pose are the same on every
    frame, given no script poses it (``bake_rig.channels_still``): no parent, no
    unmuted constraint on the object or a bone, no animation on its Armature data."""
    data = armature.data
    anim = getattr(data, "animation_data", None)
    return (armature.parent is None and _muted(armature.constraints)
            and all(_muted(pb.constraints) for pb in pose_of(armature).bones)
            and (anim is None or (anim.action is None and not len(anim.drivers)
                                  and not len(anim.nla_tracks))))


class _Target:
    """One object's transform channels (per channel and component an F-curve or the
    object's own static value) and what it hangs from: nothing, the (still) armature, or
    another such object, through its parent inverse matrix."""

    def __init__(self, ob: bpy.types.Object, prop: str, kind: str,
                 curves: dict[tuple[str, int], bpy.types.FCurve],
                 parent: _Target | NDArray[np.float64] | None) -> None:  # fmt: skip
        self.kind = kind
        self.location = [curves.get(("location", i), float(ob.location[i])) for i in range(3)]
        values = getattr(ob, prop)
        self.rotation = [curves.get((prop, i), float(values[i])) for i in range(len(values))]
        self.scale = np.array(ob.scale, dtype=float)
        self.parent = parent
        self.parent_inverse = np.array(ob.matrix_parent_inverse, dtype=float)

    @staticmethod
    def values(channel: list[bpy.types.FCurve | float], frames: Sequence[int]) -> Array:
        """(F, len(channel)): each component at ``frames`` (location m, Euler and
        axis-angle rad, quaternion parts; the object's local channels)."""
        at = np.asarray(frames, dtype=float)
        return np.array([curve_values(c, at) if isinstance(c, bpy.types.FCurve)
                         else np.full(len(at), c) for c in channel], dtype=float).T

    def world(self, frames: Sequence[int]) -> Array:
        """World matrices (F, 4, 4) at ``frames`` (m; scale included)."""
        out = np.zeros((len(frames), 4, 4))
        out[:, :3, :3] = channel_matrices(self.kind, self.values(self.rotation, frames)) \
            * self.scale
        out[:, :3, 3] = self.values(self.location, frames)
        out[:, 3, 3] = 1.0
        if self.parent is None:
            return out
        above = self.parent if isinstance(self.parent, np.ndarray) else \
            self.parent.world(frames)
        return above @ self.parent_inverse @ out


def curve_values(fc: bpy.types.FCurve, frames: Array) -> Array:
    """``fc`` evaluated at ``frames`` (F,): a key's own value on the frames it keys (what
    Blender's evaluation returns there, whatever the interpolation), ``evaluate``
    elsewhere, and throughout on a curve with modifiers or keys out of order."""
    out = np.empty(len(frames))
    hit = np.zeros(len(frames), dtype=bool)
    n = len(fc.keyframe_points)
    if n and not len(fc.modifiers):
        co = np.empty(2 * n, dtype=np.float32)
        fc.keyframe_points.foreach_get("co", co)
        x, y = co[0::2].astype(float), co[1::2].astype(float)
        if np.all(np.diff(x) > 0.0):  # else (two keys on a frame): Blender's own search
            at = np.minimum(np.searchsorted(x, frames), n - 1)
            hit = x[at] == frames
            out[hit] = y[at[hit]]
    miss = np.flatnonzero(~hit)
    out[miss] = [fc.evaluate(f) for f in frames[miss].tolist()]
    return out


class TargetCurves:
    """The targets' poses in the armature's space from their F-curves (module
    docstring): :meth:`of` gives one where that is exact, else None."""

    def __init__(self, targets: list[_Target], to_armature: Array) -> None:
        self.targets = targets
        self.to_armature = to_armature  # (4, 4): the armature's world matrix, inverted

    @classmethod
    def of(cls, scene: bpy.types.Scene, targets: Sequence[bpy.types.Object],
           bones: Sequence[str], armature: bpy.types.Object) -> TargetCurves | None:
        """The curves of ``targets`` (objects; ``bones`` all ""), or None where a target
        is a bone, or anything but its own keys places it (module docstring), or the
        armature's world matrix is not a rotation with a uniform scale, or the scene
        maps its frames to other times (Time Remapping)."""
        render = scene.render
        if render.frame_map_old != render.frame_map_new or any(bones):
            return None
        m = np.array(armature.matrix_world, dtype=float)
        scale = float(np.cbrt(np.linalg.det(m[:3, :3])))
        if not scale > 0.0 or np.abs(m[:3, :3].T @ m[:3, :3] / scale**2 - np.eye(3)).max() \
                > SIMILARITY:
            return None
        out: list[_Target] = []
        for ob in targets:
            target = _curves_of(ob, armature, m)
            if target is None:
                return None
            out.append(target)
        return cls(out, np.linalg.inv(m))

    def poses(self, frames: Sequence[int]) -> Array:
        """Per frame and target its pose in the armature's space (F, T, 4, 4) (m), the
        scale removed as Blender's ``decompose`` removes it (each column normalised)."""
        out = np.zeros((len(frames), len(self.targets), 4, 4))
        for t, target in enumerate(self.targets):
            out[:, t] = self.to_armature @ target.world(frames)
        out[..., :3, :3] /= np.linalg.norm(out[..., :3, :3], axis=-2, keepdims=True)
        return out


def _curves_of(ob: bpy.types.Object, armature: bpy.types.Object, at: Array,
               depth: int = 0) -> _Target | None:  # fmt: skip
    """``ob``'s transform channels, or None where anything else places it: a parent
    but the (still) armature ``armature`` (world matrix ``at``) or another such object
    (by the object, not a bone or vertex), a constraint, a rigid body, drivers or NLA
    (:func:`_own_keys`), a delta transform, a scale that is keyed or not positive (or
    uneven, on a parent), a keyed channel outside location and rotation, a muted curve
    or group, or a rotation mode without a matrix here."""
    if not _muted(ob.constraints) or ob.rigid_body is not None or not _own_keys(ob) \
            or ob.rotation_mode not in ROTATIONS or depth > MAX_PARENTS:
        return None
    scale = ob.scale[:]
    if any(ob.delta_location[:]) or any(ob.delta_rotation_euler[:]) \
            or ob.delta_rotation_quaternion[:] != (1.0, 0.0, 0.0, 0.0) \
            or ob.delta_scale[:] != (1.0, 1.0, 1.0) or min(scale) <= 0.0 \
            or (depth and max(scale) != min(scale)):
        return None
    parent: _Target | Array | None = None
    if ob.parent is not None:
        if ob.parent_type != "OBJECT":
            return None
        parent = at if ob.parent == armature else _curves_of(ob.parent, armature, at,
                                                              depth + 1)
        if parent is None:
            return None
    prop, kind = ROTATIONS[ob.rotation_mode]
    curves: dict[tuple[str, int], bpy.types.FCurve] = {}
    bag = keying.assigned_channelbag(ob)
    for fc in [] if bag is None else bag.fcurves:
        if fc.data_path not in ("location", prop) or fc.mute or not fc.is_valid \
                or (fc.group is not None and fc.group.mute):
            return None
        curves[(fc.data_path, fc.array_index)] = fc
    return _Target(ob, prop, kind, curves, parent)
