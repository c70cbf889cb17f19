"""``scene.dhik``: the panel's settings, the solver parameters and the last bake's result.

Besides the main effector and target, ``scene.dhik.effectors`` holds extra effector rows
(bone, target object, position / orientation weights) that the bake solves together with
the main one (weights other than 1 need the robust method).

A target or pole may be an object or a bone of an armature (``target`` + ``target_bone``,
``pole_target`` + ``pole_bone``, as the IK constraint's Target + Bone). Every bone name
keeps a hidden ``<name>_tag`` beside it, so it follows renames (bone_refs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from ..core.solver.settings import SolverSettings
from . import bone_refs
from .access import scene_of

_D = SolverSettings()

METHOD_ITEMS = [
    ("robust", "Robust", "Adaptive damping, limit-aware steps, restarts; several effectors with "
     "weights (the default)"),
    ("spec", "Spec", "The specification's damped-least-squares algorithm, unchanged"),
]
METHOD_LABELS = {identifier: label for identifier, label, _ in METHOD_ITEMS}

BAKE_ACTION_ITEMS = [
    ("CURRENT", "Current Action", "Key the solved bones into the armature's current action, "
     "inside the frame range only: other bones, other channels and keys outside the range "
     "stay as they are (a new action if the armature has none)"),
    ("NEW", "New Action", "Put the bake in a new action; the armature's current action is kept "
     "(with a fake user) but no longer plays"),
]


# what runs when ``live_preview`` is toggled: the preview adds its handler on register
# (props sits below the preview and imports nothing of it)
on_live_preview: list[Callable[[DHIK_PG_settings, bpy.types.Context], None]] = []


def _live_preview_changed(self: DHIK_PG_settings, context: bpy.types.Context) -> None:
    for callback in list(on_live_preview):
        callback(self, context)


def _is_armature(_self: DHIK_PG_settings, ob: bpy.types.Object) -> bool:
    return ob.type == "ARMATURE"


def _row_armature(row: DHIK_PG_effector) -> bpy.types.Object | None:
    """The armature of the scene whose extra row ``row`` is (its effector's armature)."""
    scene = row.id_data
    return scene_settings(scene).armature if isinstance(scene, bpy.types.Scene) else None


# Update callbacks: each bone name stores the tag of the bone it names (bone_refs).
def _armature_changed(self: DHIK_PG_settings, _context: bpy.types.Context) -> None:
    bone_refs.remember(self, "effector", self.armature)
    for row in self.effectors:
        bone_refs.remember(row, "bone", self.armature)


def _effector_changed(self: DHIK_PG_settings, _context: bpy.types.Context) -> None:
    bone_refs.remember(self, "effector", self.armature)


def _target_changed(self: Any, _context: bpy.types.Context) -> None:
    bone_refs.remember(self, "target_bone", self.target)


def _pole_changed(self: Any, _context: bpy.types.Context) -> None:
    bone_refs.remember(self, "pole_bone", self.pole_target)


def _row_bone_changed(self: DHIK_PG_effector, _context: bpy.types.Context) -> None:
    bone_refs.remember(self, "bone", _row_armature(self))


# chain length and pole, for the main effector and each extra row alike
CHAIN_LENGTH: dict[str, Any] = dict(
    name="Chain Length", default=0, min=0, soft_max=20,
    description="How many bones, ending at the effector, the IK may move (0: all up to the "
    "root, as Blender's IK constraint counts). Bones above keep their own animation and "
    "carry the chain",
)
POLE_TARGET: dict[str, Any] = dict(
    name="Pole Target", type=bpy.types.Object, update=_pole_changed,
    description="Object (or an armature, with a bone below) the chain bends toward, like "
    "the pole of Blender's IK constraint; needs a chain of 2 bones or more and the Robust "
    "method",
)
POLE_BONE: dict[str, Any] = dict(
    name="Bone", update=_pole_changed,
    description="Bone of the pole armature whose head the chain bends toward (empty: the "
    "armature object's origin)",
)
TARGET: dict[str, Any] = dict(
    name="Target", type=bpy.types.Object, update=_target_changed,
    description="Object whose world position and rotation the effector follows; an "
    "armature with a bone below: that bone's head and orientation, as the IK constraint's "
    "Target + Bone",
)
TARGET_BONE: dict[str, Any] = dict(
    name="Bone", update=_target_changed,
    description="Bone of the target armature (a mocap or control bone) whose head and "
    "orientation the effector follows, every frame as Blender evaluates it (empty: the "
    "armature object itself)",
)
TAG: dict[str, Any] = dict(default="", options={"HIDDEN"})  # bone_refs: the bone's tag
POLE_ANGLE: dict[str, Any] = dict(
    name="Pole Angle", default=0.0, subtype="ANGLE", unit="ROTATION",
    soft_min=-math.pi, soft_max=math.pi,
    description="Turns the chain's bend about the line from its first bone to the target",
)


class DHIK_PG_effector(bpy.types.PropertyGroup):
    """An extra effector: a bone that follows a target object, with weights (>= 0).

    The target's world position and rotation are used; a weight of 0 drops that part of
    the error (orientation weight 0: position only).
    """

    if TYPE_CHECKING:
        bone: str
        bone_tag: str
        target: bpy.types.Object | None
        target_bone: str
        target_bone_tag: str
        position_weight: float
        orientation_weight: float
        chain_length: int
        pole_target: bpy.types.Object | None
        pole_bone: str
        pole_bone_tag: str
        pole_angle: float
    else:
        bone: StringProperty(name="Effector", description="Bone whose joint follows the target",
                             update=_row_bone_changed)
        bone_tag: StringProperty(**TAG)
        target: PointerProperty(**TARGET)
        target_bone: StringProperty(**TARGET_BONE)
        target_bone_tag: StringProperty(**TAG)
        position_weight: FloatProperty(
            name="Position Weight", default=1.0, min=0.0, soft_max=10.0,
            description="Weight of the position error (0: ignore the position)",
        )
        orientation_weight: FloatProperty(
            name="Orientation Weight", default=1.0, min=0.0, soft_max=10.0,
            description="Weight of the orientation error (0: position only)",
        )
        chain_length: IntProperty(**CHAIN_LENGTH)
        pole_target: PointerProperty(**POLE_TARGET)
        pole_bone: StringProperty(**POLE_BONE)
        pole_bone_tag: StringProperty(**TAG)
        pole_angle: FloatProperty(**POLE_ANGLE)


class DHIK_PG_settings(bpy.types.PropertyGroup):
    """Bake settings (SPEC 5.4 defaults) and the result of the last bake."""

    if TYPE_CHECKING:
        # What the properties below hold, for mypy: the stubs declare bpy.props functions
        # as returning None, so their annotations cannot be types. Kept equal to the
        # real list by tests/addon/test_ui.py::test_typed_settings_match_the_properties.
        armature: bpy.types.Object | None
        effector: str
        effector_tag: str
        target: bpy.types.Object | None
        target_bone: str
        target_bone_tag: str
        position_weight: float
        orientation_weight: float
        chain_length: int
        pole_target: bpy.types.Object | None
        pole_bone: str
        pole_bone_tag: str
        pole_angle: float
        method: str
        cold_start: bool
        effectors: bpy.types.bpy_prop_collection_idprop[DHIK_PG_effector]
        effector_index: int
        use_scene_range: bool
        frame_start: int
        frame_end: int
        max_iterations: int
        position_tolerance: float
        orientation_tolerance: float
        damping: float
        enable_line_search: bool
        line_search_alpha: float
        line_search_alpha_min: float
        animation_path: str
        bake_action: str
        frame_step: int
        key_reduction: float
        live_preview: bool
        preview_saved: str
        preview_error: str
        has_result: bool
        result_frames: int
        result_converged: int
        result_max_position_error: float
        result_max_orientation_error: float
        result_summary: str
        result_method: str
        result_keys: int
        result_key_error: float
    else:
        armature: PointerProperty(
            name="Armature", type=bpy.types.Object, poll=_is_armature,
            update=_armature_changed, description="Armature to bake (one bone per joint)",
        )
        effector: StringProperty(
            name="Effector", update=_effector_changed,
            description="Bone whose joint follows the target (empty: the single leaf)",
        )
        effector_tag: StringProperty(**TAG)
        target: PointerProperty(**TARGET)
        target_bone: StringProperty(**TARGET_BONE)
        target_bone_tag: StringProperty(**TAG)
        position_weight: FloatProperty(
            name="Position Weight", default=1.0, min=0.0, soft_max=10.0,
            description="Weight of the effector's position error (0: ignore the position; "
            "other than 1 needs the Robust method)",
        )
        orientation_weight: FloatProperty(
            name="Orientation Weight", default=1.0, min=0.0, soft_max=10.0,
            description="Weight of the effector's orientation error (0: position only, like "
            "Blender's IK constraint without Rotation; other than 1 needs the Robust method)",
        )
        chain_length: IntProperty(**CHAIN_LENGTH)
        pole_target: PointerProperty(**POLE_TARGET)
        pole_bone: StringProperty(**POLE_BONE)
        pole_bone_tag: StringProperty(**TAG)
        pole_angle: FloatProperty(**POLE_ANGLE)
        method: EnumProperty(
            name="Method", items=METHOD_ITEMS, default="robust",
            description="The solver of every frame",
        )
        cold_start: BoolProperty(
            name="Cold Start", default=False,
            description="Solve every frame alone, from the T-pose, instead of the frame "
                        "range as one trajectory",
        )
        effectors: CollectionProperty(type=DHIK_PG_effector, name="Extra Effectors")
        effector_index: IntProperty(name="Active Extra Effector", default=0, min=0)
        use_scene_range: BoolProperty(
            name="Scene Range", default=True, description="Bake the scene's frame range",
        )
        frame_start: IntProperty(name="Start", default=0, min=0)
        frame_end: IntProperty(name="End", default=250, min=0)
        max_iterations: IntProperty(
            name="Max Iterations", default=_D.max_iterations, min=1,
        )
        position_tolerance: FloatProperty(
            name="Position Tolerance", default=_D.position_tolerance, min=1e-9, precision=6,
            unit="LENGTH", description="Converged when the effector is this close (m)",
        )
        orientation_tolerance: FloatProperty(
            name="Orientation Tolerance", default=_D.orientation_tolerance, min=1e-9, precision=4,
            description="Converged when the rotation error is below this (radians)",
        )
        damping: FloatProperty(
            name="Damping", default=_D.damping, min=0.0, precision=6,
            description="DLS damping lambda",
        )
        enable_line_search: BoolProperty(
            name="Line Search", default=_D.enable_line_search,
        )
        line_search_alpha: FloatProperty(
            name="Initial Step", default=_D.line_search_alpha, min=1e-6, max=1.0,
        )
        line_search_alpha_min: FloatProperty(
            name="Minimum Step", default=_D.line_search_alpha_min, min=1e-9, max=1.0, precision=4,
        )
        animation_path: StringProperty(
            name="animation.json", subtype="FILE_PATH",
            description="Where the bake writes animation.json (empty: not written)",
        )
        bake_action: EnumProperty(
            name="Bake Into", items=BAKE_ACTION_ITEMS, default="CURRENT",
            description="Which action receives the keys",
        )
        frame_step: IntProperty(
            name="Key Every", default=1, min=1, soft_max=10,
            description="Key every n-th frame of the range (the last frame is always keyed); "
            "every frame is still solved",
        )
        key_reduction: FloatProperty(
            name="Key Reduction", default=0.0, min=0.0, soft_max=0.01, precision=5, step=0.01,
            description="0: keep every key. Otherwise drop keys as long as no solved joint "
            "moves more than this (radians for rotations, metres for slides) from its solved "
            "value when Blender interpolates between the kept keys",
        )
        live_preview: BoolProperty(
            name="Live Preview", default=False, update=_live_preview_changed,
            description="Pose the armature on its targets at the current frame, again on "
            "every frame change and whenever a target moves. Nothing is keyed; turning it "
            "off puts the bones back as they were",
        )
        # The channels of the bones the preview poses, as before it was turned on (JSON).
        preview_saved: StringProperty(default="", options={"HIDDEN"})
        preview_error: StringProperty(default="")  # why the preview last stopped
        # Result of the last bake (read-only in the panel).
        has_result: BoolProperty(default=False)
        result_frames: IntProperty(default=0)
        result_converged: IntProperty(default=0)
        result_max_position_error: FloatProperty(default=0.0, unit="LENGTH")
        result_max_orientation_error: FloatProperty(default=0.0)
        result_summary: StringProperty(default="")
        result_method: StringProperty(default="")  # the method identifier that ran
        result_keys: IntProperty(default=0)  # keyframe points written (all components)
        result_key_error: FloatProperty(default=0.0)  # rad or m, largest joint error of the keys

    def solver_settings(self) -> SolverSettings:
        """The core's solver settings from these properties."""
        return SolverSettings(
            max_iterations=self.max_iterations,
            position_tolerance=self.position_tolerance,
            orientation_tolerance=self.orientation_tolerance,
            damping=self.damping,
            enable_line_search=self.enable_line_search,
            line_search_alpha=self.line_search_alpha,
            line_search_alpha_min=self.line_search_alpha_min,
        )

    def frame_range(self, scene: bpy.types.Scene) -> tuple[int, int]:
        """Inclusive ``(start, end)`` frames to bake or export."""
        if self.use_scene_range:
            return scene.frame_start, scene.frame_end
        return self.frame_start, self.frame_end


def scene_settings(scene: bpy.types.Scene) -> DHIK_PG_settings:
    """``scene.dhik``: the add-on's settings of ``scene``."""
    # Scene.dhik is added by register(); the stubs cannot know it.
    found: DHIK_PG_settings = scene.dhik  # type: ignore[attr-defined]
    return found


def settings(context: bpy.types.Context) -> DHIK_PG_settings:
    """``context.scene.dhik``: the add-on's settings of the context's scene."""
    return scene_settings(scene_of(context))


def active_armature(context: bpy.types.Context) -> bpy.types.Object | None:
    """``scene.dhik.armature``, else the active object when it is an armature."""
    if context.scene is None:  # poll() may run without a scene
        return None
    ob = settings(context).armature
    if ob is None and context.active_object is not None:
        if context.active_object.type == "ARMATURE":
            ob = context.active_object
    return ob


def active_target(context: bpy.types.Context) -> bpy.types.Object | None:
    """``scene.dhik.target``, else the active object when it is not an armature."""
    if context.scene is None:
        return None
    ob = settings(context).target
    if ob is None and context.active_object is not None:
        if context.active_object.type != "ARMATURE":
            ob = context.active_object
    return ob
