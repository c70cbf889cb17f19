"""DHIK Blender extension root: damped-least-squares IK baking for armatures.

The repository root is the extension package (``bl_ext.<repo>.dhik`` once installed).
Nothing here imports ``bpy`` at module level, so tools such as pytest can import the
package on plain Python; Blender calls :func:`register` and :func:`unregister`.
"""

from __future__ import annotations


def register() -> None:
    """Register the add-on's classes, menus and ``Scene.dhik`` (imports bpy)."""
    from . import dhik_addon

    dhik_addon.register()


def unregister() -> None:
    """Undo :func:`register`."""
    from . import dhik_addon

    dhik_addon.unregister()
