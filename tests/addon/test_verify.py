"""The check after a bake (verify.py) against the frame-by-frame comparison, real bpy.

:func:`verify.check_bake` copies the effector bones' evaluated matrices in its frame
loop and compares all frames with their targets at once afterwards; these tests hold it
to the plain loop it replaces (each frame set, each effector with a target there
compared on its own, the largest gaps per frame): the same frames missed, the same
largest gaps, the same sampling and the current frame restored. Metres and radians.
"""

from __future__ import annotations

import dataclasses
import functools
from types import ModuleType, SimpleNamespace
from typing import Any

import bpy
import numpy as np
import pytest
from rig_builders import build_biped, set_effectors, snapped_targets, world_turn

FRAMES = list(range(9))


def _loop(addon: ModuleType, core: SimpleNamespace, job: Any, result: Any) -> dict[str, Any]:
    """What the check finds, the slow way: every sampled frame set, every effector with
    a target there compared on its own (the check before its gaps were batched)."""
    verify, orthonormal = addon.dhik_addon.verify, addon.dhik_addon.targets.orthonormal
    scene = bpy.context.scene
    tol_p = job.settings.position_tolerance + verify.POSITION_SLACK
    tol_r = job.settings.orientation_tolerance + verify.ORIENTATION_SLACK
    converged = {int(r.frame): bool(r.converged) for r in result.records}
    frames, step = verify.sample(sorted(converged))
    bones = job.armature.pose.bones
    out: dict[str, Any] = {"checked": len(frames), "step": step, "missed": [],
                           "missed_converged": [], "max_position": 0.0, "max_orientation": 0.0}
    current = scene.frame_current
    for f in frames:
        scene.frame_set(f)
        worst_p = worst_r = 0.0
        for track in job.tracks:
            target = dict(track.targets).get(f)
            if target is None:
                continue
            jm = job.maps[track.name]
            m = np.array(bones[jm.bone].matrix, dtype=float)
            worst_p = max(worst_p, float(np.linalg.norm(m[:3, 3] - target[:3, 3])))
            if track.rot_weight > 0.0:
                r = orthonormal(m[:3, :3]) @ orthonormal(jm.to_bone)
                gap = core.rotations.matrix_to_rotvec(target[:3, :3] @ r.T)
                worst_r = max(worst_r, float(np.linalg.norm(gap)))
        out["max_position"] = max(out["max_position"], worst_p)
        out["max_orientation"] = max(out["max_orientation"], worst_r)
        if worst_p > tol_p or worst_r > tol_r:
            out["missed"].append(f)
            if converged[f]:
                out["missed_converged"].append(f)
    scene.frame_set(current)
    return out


def _same(check: Any, loop: dict[str, Any]) -> None:
    found = dataclasses.asdict(check)
    for key in ("checked", "step", "missed", "missed_converged"):
        assert found[key] == loop[key], key
    for key in ("max_position", "max_orientation"):  # float rounding only
        assert found[key] == pytest.approx(loop[key], rel=1e-9, abs=1e-15), key


def _bumped(track: Any, k: int) -> Any:
    """``track`` with its target moved 2 mm on some frames and turned 0.2 rad on others
    (twice the default tolerances; different frames per track), and no target at all
    on a third set."""
    out = []
    for f, m in track.targets:
        if (f + k) % 5 == 4:
            continue  # no target on this frame: the track is not compared there
        m = np.array(m, dtype=float)
        if (f + k) % 3 == 0:
            m[:3, 3] += 2e-3
        if (f + 2 * k) % 4 == 1:
            c, s = np.cos(0.2), np.sin(0.2)
            m[:3, :3] = m[:3, :3] @ np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
        out.append((f, m))
    return dataclasses.replace(track, targets=out)


@pytest.fixture
def baked(addon: ModuleType, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """The biped's feet baked to Empties that follow a knee bend, hips moving; the
    check's (job, result) of that bake."""
    ob = build_biped()
    empties = snapped_targets(ob, ["foot.L", "foot.R"], FRAMES, lambda f: {
        f"shin.{s}": {"rotation_quaternion": world_turn(ob.pose.bones[f"shin.{s}"], (1, 0, 0),
                                                         -0.04 * f)} for s in "LR"})
    set_effectors(ob, empties, 3, FRAMES[0], FRAMES[-1])
    verify = addon.dhik_addon.verify
    seen: list[tuple[Any, Any]] = []
    check_bake = verify.check_bake

    def keep(context: bpy.types.Context, job: Any, result: Any) -> Any:
        seen.append((job, result))
        return check_bake(context, job, result)

    monkeypatch.setattr(verify, "check_bake", keep)
    assert bpy.ops.dhik.bake() == {"FINISHED"}
    monkeypatch.setattr(verify, "check_bake", check_bake)
    assert len(seen) == 1 and len(seen[0][0].tracks) == 2
    return seen[0]


def test_check_equals_the_frame_by_frame_loop(addon: ModuleType, core: SimpleNamespace,
                                              baked: tuple[Any, Any]) -> None:  # fmt: skip
    """As baked, and with targets moved and turned off what Blender shows, missing on
    some frames, one effector position-only: the same frames missed (converged or not),
    the same largest gaps; the current frame is restored."""
    verify = addon.dhik_addon.verify
    job, result = baked
    scene = bpy.context.scene
    scene.frame_set(5)
    moved = dataclasses.replace(job, tracks=[_bumped(t, k) for k, t in enumerate(job.tracks)])
    one_oriented = dataclasses.replace(moved, tracks=[
        moved.tracks[0], dataclasses.replace(moved.tracks[1], rot_weight=0.0)])
    for case in (job, moved, one_oriented):
        check = verify.check_bake(bpy.context, case, result)
        assert scene.frame_current == 5
        _same(check, _loop(addon, core, case, result))
    check = verify.check_bake(bpy.context, moved, result)
    assert check.missed == [0, 1, 2, 3, 5, 6, 7]  # the frames moved or turned
    assert check.max_position > 1.5e-3 and check.max_orientation > 0.15


def test_sampled_check_equals_the_loop_on_the_same_frames(
        addon: ModuleType, core: SimpleNamespace, baked: tuple[Any, Any],
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Every k-th frame and the last: the same frames as the loop over the sample."""
    verify = addon.dhik_addon.verify
    monkeypatch.setattr(verify, "sample", functools.partial(verify.sample, limit=4))
    job, result = baked
    moved = dataclasses.replace(job, tracks=[_bumped(t, k) for k, t in enumerate(job.tracks)])
    check = verify.check_bake(bpy.context, moved, result)
    assert (check.checked, check.step) == (4, 3)  # frames 0, 3, 6 and the last, 8
    assert check.missed == [0, 3, 6]
    _same(check, _loop(addon, core, moved, result))


def test_no_targets_on_the_checked_frames_finds_nothing(addon: ModuleType,
                                                        baked: tuple[Any, Any]) -> None:
    verify = addon.dhik_addon.verify
    job, result = baked
    bare = dataclasses.replace(job, tracks=[dataclasses.replace(t, targets=[])
                                            for t in job.tracks])
    check = verify.check_bake(bpy.context, bare, result)
    assert (check.checked, check.missed, check.max_position, check.max_orientation) == (
        len(FRAMES), [], 0.0, 0.0)


def test_gaps_equal_the_one_matrix_conversions(addon: ModuleType, core: SimpleNamespace
                                               ) -> None:  # fmt: skip
    """:func:`verify.gaps` row by row against the scalar conversions; no orientation
    gap where not oriented; a non-finite rotation where oriented raises ValueError as
    the scalar conversions do, and is left alone where not."""
    verify, rot = addon.dhik_addon.verify, core.rotations
    orthonormal = addon.dhik_addon.targets.orthonormal
    rng = np.random.default_rng(3)
    k = 40
    turns = [rot.rotvec_to_matrix(v) for v in rng.normal(size=(k, 3))]
    m = np.tile(np.eye(4), (k, 1, 1))
    t = np.tile(np.eye(4), (k, 1, 1))
    m[:, :3, :3] = np.array(turns, dtype=np.float32)  # float32 like Blender's matrices
    m[:, :3, 3] = rng.normal(size=(k, 3))
    t[:, :3, :3] = [r @ rot.rotvec_to_matrix(v) for r, v in
                    zip(turns, rng.normal(scale=1e-3, size=(k, 3)), strict=True)]
    t[:, :3, 3] = m[:, :3, 3] + rng.normal(scale=1e-4, size=(k, 3))
    n = np.array([orthonormal(rot.rotvec_to_matrix(v)) for v in rng.normal(size=(k, 3))])
    oriented = np.arange(k) % 3 > 0
    position, orientation = verify.gaps(m, t, n, oriented)
    for i in range(k):
        assert position[i] == pytest.approx(np.linalg.norm(m[i, :3, 3] - t[i, :3, 3]),
                                            rel=1e-12)
        if not oriented[i]:
            assert orientation[i] == 0.0
            continue
        r = orthonormal(m[i, :3, :3]) @ n[i]
        one = np.linalg.norm(rot.matrix_to_rotvec(t[i, :3, :3] @ r.T))
        assert orientation[i] == pytest.approx(one, rel=1e-9, abs=1e-15)
    m[0, 0, 0] = np.nan  # row 0 is position-only
    verify.gaps(m, t, n, oriented)
    m[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"), np.errstate(invalid="ignore"):
        verify.gaps(m, t, n, oriented)
