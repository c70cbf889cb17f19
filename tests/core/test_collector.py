"""``app.collector.collector_paused`` and the CLI's bake inside it: no cyclic collection
runs while a bake builds and drops its objects, and the collector is as it was after."""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path

import pytest
from dhik.app.cli import main
from dhik.app.collector import collector_paused

ARM7 = Path(__file__).resolve().parents[2] / "sample_scenes" / "arm7"


def test_the_collector_is_off_inside_and_as_it_was_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # nested
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # off before: off after
    finally:
        gc.enable()


def test_a_bake_runs_no_collection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dhik bake`` of the arm7 sample (its keyframes parsed, every frame solved and
    written): no collection while the bake runs; the same bake with the collector on
    collects."""
    from dhik.app import cli

    inside: list[bool] = [False]
    runs: list[int] = []  # generations collected while the bake ran

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and inside[0]:
            runs.append(info["generation"])

    bake = cli.run_bake

    def watched(*args: object, **kwargs: object) -> object:
        inside[0] = True
        try:
            return bake(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            inside[0] = False

    monkeypatch.setattr(cli, "run_bake", watched)
    out = tmp_path / "animation.json"
    argv = ["bake", str(ARM7 / "skeleton.json"), str(ARM7 / "targets.json"), "-o", str(out),
            "-q"]
    gc.callbacks.append(seen)
    try:
        assert main(argv) == 0
        assert runs == [] and gc.isenabled()
        monkeypatch.setattr(cli, "collector_paused", contextlib.nullcontext)
        assert main(argv) == 0
        assert runs  # the bake allocates enough to set the collector off
    finally:
        gc.callbacks.remove(seen)
