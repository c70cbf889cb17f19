"""``dhik.effector_add`` / ``dhik.effector_remove``: the extra effector rows of the panel."""

from __future__ import annotations

from typing import TYPE_CHECKING

import bpy

from .props import settings

if TYPE_CHECKING:
    from .access import OperatorResult


class DHIK_OT_effector_add(bpy.types.Operator):
    """Add an extra effector: a bone that follows its own target object"""

    bl_idname = "dhik.effector_add"
    bl_label = "Add Effector"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        if context.scene is None:
            cls.poll_message_set("No scene")
            return False
        return True

    def execute(self, context: bpy.types.Context) -> OperatorResult:
        s = settings(context)
        s.effectors.add()
        s.effector_index = len(s.effectors) - 1
        return {"FINISHED"}


class DHIK_OT_effector_remove(bpy.types.Operator):
    """Remove the active extra effector"""

    bl_idname = "dhik.effector_remove"
    bl_label = "Remove Effector"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        if context.scene is None:
            cls.poll_message_set("No scene")
            return False
        s = settings(context)
        if not 0 <= s.effector_index < len(s.effectors):
            cls.poll_message_set("No extra effector row is selected")
            return False
        return True

    def execute(self, context: bpy.types.Context) -> OperatorResult:
        s = settings(context)
        s.effectors.remove(s.effector_index)
        s.effector_index = max(0, min(s.effector_index, len(s.effectors) - 1))
        return {"FINISHED"}
