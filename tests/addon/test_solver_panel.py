"""The Solver box offers the fields the chosen method reads (issue 17, point 1): damping
and line search are the spec method's, so the robust method (the default) does not show
them; a bake with the robust method reports only the settings that acted."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import bpy

SPEC_ONLY = {"damping", "enable_line_search", "line_search_alpha", "line_search_alpha_min"}


def _drawn(addon) -> set[str]:
    layout = mock.MagicMock()
    addon.dhik_addon.panel.DHIK_PT_solver.draw(SimpleNamespace(layout=layout), bpy.context)
    return {c.args[1] for c in layout.mock_calls if c[0].split(".")[-1] == "prop"}


def test_the_solver_box_shows_what_the_method_reads(addon) -> None:
    s = bpy.context.scene.dhik
    assert s.method == "robust"  # the default
    robust = _drawn(addon)
    assert {"max_iterations", "position_tolerance", "orientation_tolerance"} <= robust
    assert not robust & SPEC_ONLY
    s.method = "spec"
    assert SPEC_ONLY <= _drawn(addon)


def test_a_robust_bake_reports_the_settings_that_acted(addon, core, mixed_files) -> None:
    skel, tgt = mixed_files
    assert bpy.ops.dhik.import_skeleton(filepath=str(skel)) == {"FINISHED"}
    assert bpy.ops.dhik.import_targets(filepath=str(tgt)) == {"FINISHED"}
    s = bpy.context.scene.dhik
    s.damping = 0.5  # set for the spec method, not read by the robust one
    job = addon.dhik_addon.bake_job.BakeJob.prepare(bpy.context)
    result = job.solve()
    assert not SPEC_ONLY & set(result.settings)
    assert result.settings["position_tolerance"] == s.position_tolerance
    assert "seed" in result.settings and result.settings["cold_start"] is False
