"""Inside Blender (numpy 1.26, whose OpenBLAS threads stall on a busy machine: a 9x9
solve 4-22 ms instead of 9 us, ``bench/blas_load.py``) the bake and the live preview
run numpy on one BLAS thread, and leave it as it was."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import bpy
import pytest
from addon_helpers import build_plain_rig


@pytest.fixture
def blas(addon: Any) -> Iterator[tuple[Any, Any]]:
    """OpenBLAS's get/set on two threads for the test, as it was afterwards."""
    api = addon.core.app.blas_threads.openblas_threads()
    if api is None:
        pytest.skip("numpy without OpenBLAS")
    get, put = api
    was = get()
    put(2)
    if get() != 2:  # OpenBLAS caps it at the cores it found
        put(was)
        pytest.skip("OpenBLAS runs one thread at most here")
    yield get, put
    put(was)


def _leg_with_goal() -> tuple[bpy.types.Object, bpy.types.Object]:
    ob = build_plain_rig()
    target = bpy.data.objects.new("goal", None)
    bpy.context.collection.objects.link(target)
    target.location = (0.0, -0.5, 1.5)
    s = bpy.context.scene.dhik
    s.armature, s.effector, s.target, s.orientation_weight = ob, "toe", target, 0.0
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    return ob, target


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
