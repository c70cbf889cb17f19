"""The Blender layer of dhik: converts Blender data to core objects and calls the core.

No IK math lives here. ``register()`` adds the operators (``dhik.*``), the sidebar
panel, the File > Import / Export entries, ``Scene.dhik``, the live preview's
``load_post`` handler and the handler that keeps bone names in step with renames.
"""

from __future__ import annotations

import bpy

from . import bone_refs, preview
from .import_animation import DHIK_OT_import_animation
from .operators_bake import DHIK_OT_bake
from .operators_effectors import DHIK_OT_effector_add, DHIK_OT_effector_remove
from .operators_io import (
    DHIK_OT_export_animation,
    DHIK_OT_export_skeleton,
    DHIK_OT_export_targets,
    DHIK_OT_import_skeleton,
    DHIK_OT_import_targets,
    DHIK_OT_import_urdf,
)
from .panel import (
    DHIK_PT_effectors,
    DHIK_PT_panel,
    DHIK_PT_solver,
    DHIK_UL_effectors,
    menu_export,
    menu_import,
)
from .props import DHIK_PG_effector, DHIK_PG_settings

CLASSES = (
    DHIK_PG_effector,
    DHIK_PG_settings,
    DHIK_OT_import_skeleton,
    DHIK_OT_import_urdf,
    DHIK_OT_export_skeleton,
    DHIK_OT_import_targets,
    DHIK_OT_export_targets,
    DHIK_OT_export_animation,
    DHIK_OT_import_animation,
    DHIK_OT_bake,
    DHIK_OT_effector_add,
    DHIK_OT_effector_remove,
    DHIK_UL_effectors,
    DHIK_PT_panel,
    DHIK_PT_effectors,
    DHIK_PT_solver,
)


def register() -> None:
    """Register the classes, ``Scene.dhik`` and the File menu entries."""
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    # The stubs neither know Scene.dhik nor that bpy.props functions return a definition.
    bpy.types.Scene.dhik = bpy.props.PointerProperty(  # type: ignore[attr-defined, func-returns-value]
        type=DHIK_PG_settings
    )
    bpy.types.TOPBAR_MT_file_import.append(menu_import)
    bpy.types.TOPBAR_MT_file_export.append(menu_export)
    preview.register()
    bone_refs.register()


def unregister() -> None:
    """Undo :func:`register`."""
    bone_refs.unregister()
    preview.unregister()
    bpy.types.TOPBAR_MT_file_export.remove(menu_export)
    bpy.types.TOPBAR_MT_file_import.remove(menu_import)
    del bpy.types.Scene.dhik  # type: ignore[attr-defined]
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
