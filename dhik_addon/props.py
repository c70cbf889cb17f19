"""``scene.dhik``: the panel's settings, the solver parameters and the last bake's result."""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty, FloatProperty, IntProperty, PointerProperty, StringProperty

from ..core.solver import SolverSettings

_D = SolverSettings()


def _is_armature(_self: DHIK_PG_settings, ob: bpy.types.Object) -> bool:
    return ob.type == "ARMATURE"


def _not_armature(self: DHIK_PG_settings, ob: bpy.types.Object) -> bool:
    return ob is not self.armature


class DHIK_PG_settings(bpy.types.PropertyGroup):
    """Bake settings (SPEC 5.4 defaults) and the result of the last bake."""

    armature: PointerProperty(  # type: ignore[valid-type]
        name="Armature", type=bpy.types.Object, poll=_is_armature,
        description="Armature to bake (one bone per joint)",
    )
    effector: StringProperty(  # type: ignore[valid-type]
        name="Effector", description="Bone whose joint follows the target (empty: the single leaf)",
    )
    target: PointerProperty(  # type: ignore[valid-type]
        name="Target", type=bpy.types.Object, poll=_not_armature,
        description="Object whose world position and rotation the effector follows",
    )
    use_scene_range: BoolProperty(  # type: ignore[valid-type]
        name="Scene Range", default=True, description="Bake the scene's frame range",
    )
    frame_start: IntProperty(name="Start", default=0, min=0)  # type: ignore[valid-type]
    frame_end: IntProperty(name="End", default=250, min=0)  # type: ignore[valid-type]
    max_iterations: IntProperty(  # type: ignore[valid-type]
        name="Max Iterations", default=_D.max_iterations, min=1,
    )
    position_tolerance: FloatProperty(  # type: ignore[valid-type]
        name="Position Tolerance", default=_D.position_tolerance, min=1e-9, precision=6,
        unit="LENGTH", description="Converged when the effector is this close (m)",
    )
    orientation_tolerance: FloatProperty(  # type: ignore[valid-type]
        name="Orientation Tolerance", default=_D.orientation_tolerance, min=1e-9, precision=4,
        description="Converged when the rotation error is below this (radians)",
    )
    damping: FloatProperty(  # type: ignore[valid-type]
        name="Damping", default=_D.damping, min=0.0, precision=6,
        description="DLS damping lambda",
    )
    enable_line_search: BoolProperty(  # type: ignore[valid-type]
        name="Line Search", default=_D.enable_line_search,
    )
    line_search_alpha: FloatProperty(  # type: ignore[valid-type]
        name="Initial Step", default=_D.line_search_alpha, min=1e-6, max=1.0,
    )
    line_search_alpha_min: FloatProperty(  # type: ignore[valid-type]
        name="Minimum Step", default=_D.line_search_alpha_min, min=1e-9, max=1.0, precision=4,
    )
    animation_path: StringProperty(  # type: ignore[valid-type]
        name="animation.json", subtype="FILE_PATH",
        description="Where the bake writes animation.json (empty: not written)",
    )
    # Result of the last bake (read-only in the panel).
    has_result: BoolProperty(default=False)  # type: ignore[valid-type]
    result_frames: IntProperty(default=0)  # type: ignore[valid-type]
    result_converged: IntProperty(default=0)  # type: ignore[valid-type]
    result_max_position_error: FloatProperty(default=0.0, unit="LENGTH")  # type: ignore[valid-type]
    result_max_orientation_error: FloatProperty(default=0.0)  # type: ignore[valid-type]
    result_summary: StringProperty(default="")  # type: ignore[valid-type]

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


def active_armature(context: bpy.types.Context) -> bpy.types.Object | None:
    """``scene.dhik.armature``, else the active object when it is an armature."""
    ob = context.scene.dhik.armature
    if ob is None and context.active_object is not None:
        if context.active_object.type == "ARMATURE":
            ob = context.active_object
    return ob


def active_target(context: bpy.types.Context) -> bpy.types.Object | None:
    """``scene.dhik.target``, else the active object when it is not an armature."""
    ob = context.scene.dhik.target
    if ob is None and context.active_object is not None:
        if context.active_object.type != "ARMATURE":
            ob = context.active_object
    return ob
