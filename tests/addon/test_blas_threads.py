"""Inside Blender (numpy 1.26, whose OpenBLAS threads stall on a busy machine: a 9x9
solve 4-22 ms instead of 9 us, ``bench/blas_load.py``) the bake and the live preview
run numpy on one BLAS thread, and leave it as it was."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import bpy
import pytest
from addon_helpers import leg_with_goal
from fixtures import two_blas_threads


@pytest.fixture
def blas(addon: Any) -> Iterator[tuple[Any, Any]]:
    """OpenBLAS's get/set on two threads for the test, as it was afterwards."""
    with two_blas_threads(addon.core.app.blas_threads.openblas_threads()) as api:
        yield api


def _leg_with_goal() -> tuple[bpy.types.Object, bpy.types.Object]:
    out = leg_with_goal()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    return out


def test_a_bake_reads_checks_and_solves_on_one_thread(addon, blas, monkeypatch):
    get, _ = blas
    job = addon.dhik_addon.bake_job
    seen: dict[str, int] = {}
    check, solve = job.report_blender_check, job.BakeJob.solve

    def checked(*args: Any, **kwargs: Any) -> Any:  # the main thread, after the keys
        seen["check"] = get()
        return check(*args, **kwargs)

    def solved(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen["solve"] = get()
        return solve(self, *args, **kwargs)

    monkeypatch.setattr(job, "report_blender_check", checked)
    monkeypatch.setattr(job.BakeJob, "solve", solved)
    _leg_with_goal()
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    assert seen == {"check": 1, "solve": 1}
    assert get() == 2


def test_the_preview_solves_on_one_thread(addon, blas, monkeypatch):
    get, _ = blas
    preview = addon.dhik_addon.preview
    seen: list[int] = []
    update = preview._update

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(get())
        return update(*args, **kwargs)

    monkeypatch.setattr(preview, "_update", watched)
    _, target = _leg_with_goal()
    s = bpy.context.scene.dhik
    s.live_preview = True
    target.location.x += 0.05
    bpy.context.view_layer.update()
    s.live_preview = False
    assert seen and set(seen) == {1}
    assert get() == 2
