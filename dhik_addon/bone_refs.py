"""Bone names in ``scene.dhik`` that follow the bone when it is renamed.

Blender renames a bone's F-curve paths, vertex groups and constraint subtargets, but not
an add-on's string properties. So every bone a setting names (the effector, a target's
or a pole's bone, in the main row and the extra rows) gets a custom property
:data:`TAG` on the armature's ``Bone`` (a random id; a rename, Edit Mode and saving keep
it), and the setting keeps that id beside the name (``<name property>_tag``).

- :func:`current` is the bone a setting means now: the bone carrying its tag, else the
  bone of its name. Everything that reads a setting (bake, preview, export) goes
  through it, so a rename is followed even before the names are rewritten.
- :func:`sync` rewrites the names of every scene's settings to their bones' current
  names (and tags bones named before their armature was set). It runs from a
  ``depsgraph_update_post`` handler (a rename updates the armature), skipped while a
  bake or an export steps through frames.
- A bone duplicated in Edit Mode (Shift+D) copies the tag; the copy (the bone not named
  by the setting, or named as Blender names copies, ``<name>.001``) loses it on the next
  :func:`sync`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import bpy

from .frames import PAUSED

TAG = "dhik_tag"  # custom property on a Bone: the id settings refer to it by
TAG_SUFFIX = "_tag"


def _armature(ob: bpy.types.Object | None) -> bpy.types.Armature | None:
    """``ob``'s armature data, or None for anything else."""
    if ob is None or ob.type != "ARMATURE" or not isinstance(ob.data, bpy.types.Armature):
        return None
    return ob.data


def _bones(ob: bpy.types.Object | None) -> Any:
    """``ob``'s armature bones (``Armature.bones``), or None for anything else."""
    arm = _armature(ob)
    return None if arm is None else arm.bones


def current(ob: bpy.types.Object | None, name: str, tag: str) -> str:
    """The name of the bone of armature ``ob`` that a setting holding ``name`` and
    ``tag`` means: the one bone tagged ``tag``, else ``name`` itself (also when ``ob``
    is no armature or nothing is tagged)."""
    bones = _bones(ob)
    if bones is None or not tag:
        return name
    bone = bones.get(name) if name else None
    if bone is not None and bone.get(TAG) == tag:
        return name
    found = [b.name for b in bones if b.get(TAG) == tag]
    if len(found) > 1:  # renamed and duplicated in one Edit Mode session: not the copies
        found = [c for c in found if not any(_copy_of(c, d) for d in found)]
    return found[0] if len(found) == 1 else name


def _copy_of(name: str, other: str) -> bool:
    """Whether ``name`` is how Blender names a copy of bone ``other`` (``other.001``)."""
    base, dot, number = name.rpartition(".")
    return bool(dot) and base == other and number.isdigit()


def remember(group: Any, prop: str, ob: bpy.types.Object | None) -> None:
    """Store the tag of the bone that ``group.<prop>`` names (tagging the bone first if
    it has no tag of its own, or shares it with a copy); an empty tag when it names no
    bone of ``ob``."""
    arm = _armature(ob)
    name = getattr(group, prop)
    bone = arm.bones.get(name) if arm is not None and name else None
    tag = ""
    if arm is not None and bone is not None:
        tag = str(bone.get(TAG) or "")
        if not tag or any(b.get(TAG) == tag for b in arm.bones if b.name != bone.name):
            tag = secrets.token_hex(6)
            _tag_bone(arm, bone, tag)
    if getattr(group, prop + TAG_SUFFIX) != tag:
        setattr(group, prop + TAG_SUFFIX, tag)


def _tag_bone(arm: bpy.types.Armature, bone: bpy.types.Bone, tag: str) -> None:
    """Put ``tag`` on ``bone`` of ``arm`` (and on its edit bone in Edit Mode, which
    Blender copies back over the bone when Edit Mode ends)."""
    try:
        bone[TAG] = tag
        if arm.is_editmode:
            edit = arm.edit_bones.get(bone.name)
            if edit is not None:
                edit[TAG] = tag
    except (AttributeError, TypeError, RuntimeError):  # linked data: names only
        pass


def references(s: Any) -> Iterator[tuple[Any, str, bpy.types.Object | None]]:
    """``(property group, name property, armature object)`` of every bone setting of
    ``scene.dhik`` ``s``: effector, target bone and pole bone of the main row and of
    each extra row."""
    yield s, "effector", s.armature
    yield s, "target_bone", s.target
    yield s, "pole_bone", s.pole_target
    for row in s.effectors:
        yield row, "bone", s.armature
        yield row, "target_bone", row.target
        yield row, "pole_bone", row.pole_target


def sync_settings(s: Any) -> None:
    """Rename the bone settings of ``s`` to their bones' current names; tag the bones of
    settings that have no tag yet (or the tag of another armature's bone); when bones
    were added, drop the tag from copies of a named bone (Edit Mode duplicates) first."""
    found: list[tuple[Any, str, bpy.types.Object, str]] = []
    for group, prop, ob in references(s):
        arm = _armature(ob)
        if ob is None or arm is None or arm.is_editmode:
            continue  # bones being edited: Blender writes them back when Edit Mode ends
        name, tag = getattr(group, prop), getattr(group, prop + TAG_SUFFIX)
        if name:
            found.append((group, prop, ob, current(ob, name, tag)))
    for group, prop, ob, now in found:  # copies lose the tag of the bone they copy
        arm = _armature(ob)
        tag = getattr(group, prop + TAG_SUFFIX)
        if arm is not None and tag and _BONE_COUNTS.get(arm.as_pointer()) != len(arm.bones):
            for bone in arm.bones:
                if bone.name != now and bone.get(TAG) == tag and arm.library is None:
                    del bone[TAG]
    for group, prop, ob, now in found:
        if now != getattr(group, prop):
            setattr(group, prop, now)  # its update callback stores the tag again
        else:
            bone = _bones(ob).get(now)
            if bone is not None and bone.get(TAG) != getattr(group, prop + TAG_SUFFIX):
                remember(group, prop, ob)
    for _group, _prop, ob, _now in found:
        arm = _armature(ob)
        if arm is not None:
            _BONE_COUNTS[arm.as_pointer()] = len(arm.bones)


_BONE_COUNTS: dict[int, int] = {}  # armature data -> its bone count at the last sync


def sync() -> None:
    """:func:`sync_settings` for every scene with DHIK settings (not while a scene steps
    through frames for a bake or an export)."""
    scenes = getattr(bpy.data, "scenes", None)
    if scenes is None:  # bpy.data restricted while the add-on registers
        return
    for scene in scenes:
        s = getattr(scene, "dhik", None)
        if s is None or scene.name_full in PAUSED:
            continue
        sync_settings(s)


@bpy.app.handlers.persistent
def _on_depsgraph(_scene: object = None, _depsgraph: object = None) -> None:
    try:
        sync()
    except Exception as err:  # a handler never raises; names are synced next time
        import sys

        print(f"dhik: bone names not synced: {err}", file=sys.stderr)


def register() -> None:
    """Follow renames from now on (``depsgraph_update_post``)."""
    handlers = bpy.app.handlers.depsgraph_update_post
    if _on_depsgraph not in handlers:
        handlers.append(_on_depsgraph)


def unregister() -> None:
    handlers = bpy.app.handlers.depsgraph_update_post
    while _on_depsgraph in handlers:
        handlers.remove(_on_depsgraph)
