"""Loops over frames that read evaluated data, and the live preview kept out of them.

A bake, Export Animation and Export Targets step ``scene.frame_set`` through a range to
read the animation as it plays. The live preview (preview.py) re-poses the armature on
every frame change; inside such a loop it must not, or the loop would read the preview's
pose instead of the keyed one. :func:`frame_loop` marks the scene for the loop's length,
and afterwards lets the preview catch up on the current frame once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import bpy

PAUSED: set[str] = set()  # scenes (name_full) inside a frame loop: no preview updates


@contextmanager
def frame_loop(scene: bpy.types.Scene) -> Iterator[None]:
    """The scene's frame changes inside are the caller's own: the preview waits."""
    key = scene.name_full
    if key in PAUSED:  # nested loops: the outer one catches up
        yield
        return
    PAUSED.add(key)
    try:
        yield
    finally:
        PAUSED.discard(key)
        if getattr(getattr(scene, "dhik", None), "live_preview", False):
            scene.frame_set(scene.frame_current)  # the preview poses the current frame
