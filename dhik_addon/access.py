"""Typed access to Blender data that the API (and its stubs) declares optional.

``Context.scene``, ``Context.window_manager``, ``Object.pose`` and friends are ``X | None``
in general; in an operator's ``execute`` or a panel's ``draw`` they are set. These
helpers say so once (an assertion, or a DhikError for user data) instead of at every use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import bpy

from ..core.errors import DhikError

if TYPE_CHECKING:
    # Only in fake-bpy-module's stubs: the literals an operator's execute/invoke/modal return.
    from bpy.stub_internal.rna_enums import OperatorReturnItems

    OperatorResult = set[OperatorReturnItems]


def scene_of(context: bpy.types.Context) -> bpy.types.Scene:
    """``context.scene``, which operators and panels always have."""
    scene = context.scene
    assert scene is not None, "no scene in this context"
    return scene


def window_manager(context: bpy.types.Context) -> bpy.types.WindowManager:
    """``context.window_manager`` (always set, background mode included)."""
    wm = context.window_manager
    assert wm is not None, "no window manager in this context"
    return wm


def collection_of(context: bpy.types.Context) -> bpy.types.Collection:
    """``context.collection``: where new objects are linked."""
    coll = context.collection
    assert coll is not None, "no active collection in this context"
    return coll


def view_layer_of(context: bpy.types.Context) -> bpy.types.ViewLayer:
    """``context.view_layer``."""
    layer = context.view_layer
    assert layer is not None, "no view layer in this context"
    return layer


def layout_of(ui: bpy.types.Panel | bpy.types.Menu) -> bpy.types.UILayout:
    """``ui.layout``, set while Blender draws a panel or menu."""
    layout = ui.layout
    assert layout is not None, "drawn outside Blender's draw call"
    return layout


def armature_data(ob: bpy.types.Object) -> bpy.types.Armature:
    """``ob.data`` of an armature object; DhikError for any other object."""
    arm = ob.data
    if not isinstance(arm, bpy.types.Armature):
        raise DhikError.at(f"object {ob.name!r}", "", "is not an armature")
    return arm


def pose_of(ob: bpy.types.Object) -> bpy.types.Pose:
    """``ob.pose`` of an armature object; DhikError when it has none."""
    pose = ob.pose
    if pose is None:
        raise DhikError.at(f"object {ob.name!r}", "", "has no pose (not an armature)")
    return pose


def scene_fps(scene: bpy.types.Scene) -> float:
    """The scene's frame rate (frames per second): render fps / fps_base."""
    return float(scene.render.fps) / float(scene.render.fps_base)
