"""``dhik bake-many`` (issue 10): jobs from folders and manifests, byte identity with
``dhik bake`` (run as a separate process), skipping, failures, and a real Dask
LocalCluster of 2 worker processes. Stopping a batch: test_batch_stop.py; its files
(up to date, sets, the report, odd names): test_batch_files.py.

Scenes are small (planar2, 40-frame arm7 clips made by the FK of a joint path, the
3-keyframe spec_example for a slow job); frames and units as in the files (metres,
degrees in targets.json).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from dhik.app import batch
from dhik.app.batch import Job, JobResult, bake_job, pool_factory, run_jobs
from dhik.app.cli import main
from fixtures import make_scenes, run_on_terminal

ROOT = Path(__file__).resolve().parents[2]
SCENES = ROOT / "sample_scenes"
DHIK = [sys.executable, "-m", "dhik"]


MS = make_scenes()
ARM_NAMES = [j[0] for j in MS._ARM7_JOINTS]


def arm7_clip(folder: Path, seed: int, frames: int = 40, effectors: tuple[str, ...] = ()) -> None:
    """skeleton.json and the FK targets of a smooth joint path: targets.json (Tool) or
    one targets_<EFFECTOR>.json per effector."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "skeleton.json").write_text(json.dumps(MS.ARM7))
    q = MS.smooth_trajectory([j[3] for j in MS._ARM7_JOINTS], frames, seed=seed)
    for eff in effectors or ("Tool",):
        name = f"targets_{eff}.json" if effectors else "targets.json"
        (folder / name).write_text(json.dumps(MS.fk_targets(MS.ARM7, ARM_NAMES, q, eff)))


def dhik_bake(tmp: Path, *args: Any) -> tuple[bytes, dict[str, Any]]:
    """``dhik bake ARGS -o .. --report ..`` in its own process: animation bytes, report."""
    tmp.mkdir(parents=True, exist_ok=True)
    out, rep = tmp / "animation.json", tmp / "report.json"
    done = subprocess.run([*DHIK, "bake", *map(str, args), "-o", str(out), "--report", str(rep)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return out.read_bytes(), json.loads(rep.read_text())


def same_report(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Reports equal but for the wall time."""
    return ({k: v for k, v in a.items() if k != "wall_time_s"}
            == {k: v for k, v in b.items() if k != "wall_time_s"})


def bake_many(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main(["bake-many", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def no_temp_files(root: Path) -> bool:
    return not [p for p in root.rglob("*") if p.name.endswith(".tmp")]


@pytest.fixture
def clips(tmp_path: Path) -> Path:
    """A folder of clip folders: planar2, an arm7 clip, a two-effector arm7 clip, and
    folders that are not clips."""
    root = tmp_path / "clips"
    shutil.copytree(SCENES / "planar2", root / "planar")
    arm7_clip(root / "arm", seed=1)
    arm7_clip(root / "two", seed=2, effectors=("Tool", "J4"))
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not a clip")
    shutil.copytree(SCENES / "planar2", root / ".hidden")
    return root


def test_folder_jobs_found_and_baked_as_dhik_bake_does(clips: Path, tmp_path: Path,
                                                       capsys) -> None:
    jobs = batch.discover(str(clips))
    assert [j.name for j in jobs] == ["arm", "planar", "two"]
    two = jobs[2]
    assert two.targets is None and [t.effector for t in two.tracks] == ["J4", "Tool"]
    out = tmp_path / "out"
    code, stdout, err = bake_many(capsys, clips, "-o", out, "--workers", "2")
    assert code == 0 and err == ""
    assert stdout.startswith("dhik bake-many: 3 jobs: 3 done, 0 skipped, 0 failed; ")
    assert sorted(p.name for p in out.iterdir()) == ["arm", "planar", "two"]
    refs = {
        "arm": dhik_bake(tmp_path / "ref_arm", clips / "arm/skeleton.json",
                         clips / "arm/targets.json"),
        "planar": dhik_bake(tmp_path / "ref_planar", clips / "planar/skeleton.json",
                            clips / "planar/targets.json"),
        "two": dhik_bake(tmp_path / "ref_two", clips / "two/skeleton.json",
                         "--target", f"J4={clips / 'two/targets_J4.json'}",
                         "--target", f"Tool={clips / 'two/targets_Tool.json'}"),
    }
    frames = converged = 0
    for name, (anim, rep) in refs.items():
        assert (out / name / "animation.json").read_bytes() == anim
        assert same_report(json.loads((out / name / "report.json").read_text()), rep)
        frames, converged = frames + rep["frames"], converged + rep["converged"]
    assert f"; {frames} frames, {converged}/{frames} converged; " in stdout
    assert refs["two"][1]["effectors"] == ["J4", "Tool"]
    assert no_temp_files(out)


def write_manifest(tmp_path: Path) -> Path:
    """A manifest in its own folder, paths relative to it: weights, options, effector."""
    data = tmp_path / "data"
    arm7_clip(data / "a", seed=3)
    arm7_clip(data / "b", seed=4, effectors=("Tool", "J4"))
    shutil.copytree(SCENES / "planar2", data / "p")
    dhik_bake(tmp_path / "drv", data / "a/skeleton.json", data / "a/targets.json")
    shutil.copy(tmp_path / "drv/animation.json", data / "a/driven.json")
    manifest = {"jobs": [
        {"name": "plain", "skeleton": "data/a/skeleton.json", "targets": "data/a/targets.json"},
        {"name": "weighted", "skeleton": "data/b/skeleton.json",
         "targets": {"Tool": {"file": "data/b/targets_Tool.json", "weights": [1, 0.5]},
                     "J4": {"file": "data/b/targets_J4.json", "weights": [2, 0]}},
         "options": {"max-iterations": 40, "position-tolerance": 0.0005}},
        {"name": "spec-cold", "skeleton": "data/p/skeleton.json",
         "targets": "data/p/targets.json", "effector": "Hand",
         "options": {"method": "spec", "cold-start": True, "damping": 0.001,
                     "no-line-search": True, "orientation-tolerance": 0.05}},
        {"name": "chained", "skeleton": "data/a/skeleton.json", "targets": "data/a/targets.json",
         "options": {"chain-length": 5, "pole": ["Tool=0.5,0.3,0.6"],
                     "driven": "data/a/driven.json"}},
    ]}
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(manifest))
    return path


def manifest_refs(tmp_path: Path) -> dict[str, tuple[bytes, dict[str, Any]]]:
    """``dhik bake`` of each job of :func:`write_manifest`, with the same options."""
    d = tmp_path / "data"
    return {
        "plain": dhik_bake(tmp_path / "ref1", d / "a/skeleton.json", d / "a/targets.json"),
        "weighted": dhik_bake(tmp_path / "ref2", d / "b/skeleton.json",
                              "--target", f"Tool={d / 'b/targets_Tool.json'}:1,0.5",
                              "--target", f"J4={d / 'b/targets_J4.json'}:2,0",
                              "--max-iterations", "40", "--position-tolerance", "0.0005"),
        "spec-cold": dhik_bake(tmp_path / "ref3", d / "p/skeleton.json", d / "p/targets.json",
                               "--effector", "Hand", "--method", "spec", "--cold-start",
                               "--damping", "0.001", "--no-line-search",
                               "--orientation-tolerance", "0.05"),
        "chained": dhik_bake(tmp_path / "ref5", d / "a/skeleton.json", d / "a/targets.json",
                             "--chain-length", "5", "--pole", "Tool=0.5,0.3,0.6",
                             "--driven", d / "a/driven.json"),
    }


def check_outputs(out: Path, refs: dict[str, tuple[bytes, dict[str, Any]]]) -> None:
    for name, (anim, rep) in refs.items():
        assert (out / name / "animation.json").read_bytes() == anim, name
        assert same_report(json.loads((out / name / "report.json").read_text()), rep), name
    assert no_temp_files(out)


def test_manifest_jobs_match_dhik_bake_with_the_same_options(tmp_path: Path, capsys) -> None:
    manifest = write_manifest(tmp_path)
    jobs = batch.discover(str(manifest))
    assert jobs[1].options.max_iterations == 40 and jobs[2].options.cold_start
    assert [(t.effector, t.pos_weight, t.rot_weight) for t in jobs[1].tracks] == [
        ("Tool", 1.0, 0.5), ("J4", 2.0, 0.0)]
    refs = manifest_refs(tmp_path)
    # the options matter: the spec job differs from a default bake of the same clip
    default, _ = dhik_bake(tmp_path / "ref4", tmp_path / "data/p/skeleton.json",
                           tmp_path / "data/p/targets.json")
    assert default != refs["spec-cold"][0]
    report = tmp_path / "summary.json"
    code, stdout, _ = bake_many(capsys, manifest, "-o", tmp_path / "out", "--report", report)
    assert code == 0
    check_outputs(tmp_path / "out", refs)
    summary = json.loads(report.read_text())
    assert [(r["name"], r["status"], r["error"]) for r in summary["results"]] == [
        ("plain", "done", None), ("weighted", "done", None), ("spec-cold", "done", None),
        ("chained", "done", None)]
    assert jobs[3].options.chain_length == ("5",) and jobs[3].options.pole == (
        "Tool=0.5,0.3,0.6",)
    assert jobs[3].options.driven == str(tmp_path / "data/a/driven.json")
    assert refs["chained"][0] != refs["plain"][0]
    assert summary["frames"] == sum(rep["frames"] for _, rep in refs.values())
    assert summary["converged"] == sum(rep["converged"] for _, rep in refs.values())


def test_skip_when_up_to_date_and_force(tmp_path: Path, capsys) -> None:
    manifest = write_manifest(tmp_path)
    out = tmp_path / "out"
    assert bake_many(capsys, manifest, "-o", out, "--workers", "1")[0] == 0
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*.json")}
    code, stdout, _ = bake_many(capsys, manifest, "-o", out)
    assert code == 0 and " 0 done, 4 skipped, 0 failed; 0 frames" in stdout
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.json")} == stamps
    # an input whose content changed: the jobs that read it (plain and chained), although
    # the outputs are newer than it (issue 19: what the bake read decides, not mtimes)
    now = time.time()
    targets = tmp_path / "data/a/targets.json"
    targets.write_text(json.dumps(json.loads(targets.read_text()), indent=1))
    os.utime(targets, (now - 1000, now - 1000))
    code, stdout, _ = bake_many(capsys, manifest, "-o", out)
    assert " 2 done, 2 skipped, 0 failed; " in stdout
    assert (out / "weighted/animation.json").stat().st_mtime_ns == stamps[
        out / "weighted/animation.json"]
    # an input only touched (same bytes, newer mtime): still up to date
    os.utime(targets)
    assert " 0 done, 4 skipped, 0 failed; " in bake_many(capsys, manifest, "-o", out)[1]
    # changed options: that job is baked again, although its files are newer
    data = json.loads(manifest.read_text())
    data["jobs"][1]["options"]["max-iterations"] = 41
    manifest.write_text(json.dumps(data))
    assert " 1 done, 3 skipped, 0 failed; " in bake_many(capsys, manifest, "-o", out)[1]
    # new content in the driven animation: the job that reads it
    driven = tmp_path / "data/a/driven.json"
    driven.write_text(driven.read_text() + "\n")
    assert " 1 done, 3 skipped, 0 failed; " in bake_many(capsys, manifest, "-o", out)[1]
    # a missing output: baked again
    (out / "spec-cold/report.json").unlink()
    assert " 1 done, 3 skipped, 0 failed; " in bake_many(capsys, manifest, "-o", out)[1]
    code, stdout, _ = bake_many(capsys, manifest, "-o", out, "--force")
    assert code == 0 and " 4 done, 0 skipped, 0 failed; " in stdout


def test_one_bad_job_among_good_ones(clips: Path, tmp_path: Path, capsys) -> None:
    bad = clips / "broken"
    shutil.copytree(SCENES / "planar2", bad)
    (bad / "targets.json").write_text('[{"frame": 0, "pos": [1, 2], "euler": [0, 0, 0]}]')
    lonely = clips / "lonely"
    lonely.mkdir()
    shutil.copy(SCENES / "planar2/skeleton.json", lonely)  # no targets
    out, report = tmp_path / "out", tmp_path / "summary.json"
    code, stdout, err = bake_many(capsys, clips, "-o", out, "--report", report)
    assert code == 1
    assert stdout.startswith("dhik bake-many: 5 jobs: 3 done, 0 skipped, 2 failed; ")
    assert len(stdout.splitlines()) == 1
    summary = json.loads(report.read_text())
    status = {r["name"]: (r["status"], r["error"]) for r in summary["results"]}
    bad_error = f"{bad / 'targets.json'}: [0].pos: must be an array of 3 numbers, got [1, 2]"
    assert status["broken"] == ("failed", bad_error)
    assert status["lonely"] == ("failed", f"{lonely}: no targets.json or "
                                          "targets_<EFFECTOR>.json")
    assert all(status[n] == ("done", None) for n in ("arm", "planar", "two"))
    assert err.splitlines() == [f"dhik bake-many: job broken failed: {bad_error}",
                                f"dhik bake-many: job lonely failed: {status['lonely'][1]}"]
    # the good jobs are whole, the bad ones left nothing
    for name in ("arm", "planar", "two"):
        assert json.loads((out / name / "animation.json").read_text())["frames"]
    assert not (out / "broken").exists() and not (out / "lonely").exists()


BAD_MANIFESTS = [
    ([1, 2], "", 'must be an object with a "jobs" array'),
    ({"jobs": []}, "jobs", "must be a non-empty array"),
    ({"jobs": [], "extra": 1}, "extra", "unknown key"),
    ({"jobs": ["x"]}, "jobs[0]", "must be an object, got string"),
    ({"jobs": [{"name": "a", "skeleton": "s.json"}]}, "jobs[0]", 'missing "targets"'),
    ({"jobs": [{"name": "a/b", "skeleton": "s", "targets": "t"}]}, "jobs[0].name",
     "must be a folder name"),
    ({"jobs": [{"name": "a", "skeleton": "s", "targets": "t"},
               {"name": "a", "skeleton": "s", "targets": "t"}]}, "jobs[1].name",
     'two jobs are named "a"'),
    ({"jobs": [{"name": "a", "skeleton": "s", "targets": "t", "colour": 1}]},
     "jobs[0].colour", "unknown key"),
    ({"jobs": [{"name": "a", "skeleton": "s", "targets": {"E": {"file": "t",
                                                                "weights": [0, 0]}}}]},
     "jobs[0].targets.E.weights", "not both 0"),
    ({"jobs": [{"name": "a", "skeleton": "s", "targets": {"E": "t"}, "effector": "E"}]},
     "jobs[0].effector", "goes with a single targets file"),
    ({"jobs": [{"name": "a", "skeleton": "s", "targets": "t",
                "options": {"max-iterations": 0}}]},
     'jobs[0].options["max-iterations"]', "must be >= 1"),
    ({"jobs": [{"name": "a", "skeleton": "s", "targets": "t",
                "options": {"method": "fast"}}]}, "jobs[0].options.method", "invalid choice"),
    ({"jobs": [{"name": "a", "skeleton": "s", "targets": "t",
                "options": {"cold-start": 1}}]}, 'jobs[0].options["cold-start"]',
     "must be true or false"),
    ({"jobs": [{"name": "a", "skeleton": "s", "targets": "t",
                "options": {"max_iterations": 5}}]}, "jobs[0].options.max_iterations",
     "unknown option"),
    ({"jobs": [{"name": "a", "skeleton": "s", "targets": "t",
                "options": {"pole": ["E=1,2,3", True]}}]}, "jobs[0].options.pole[1]",
     "must be a number or a string"),
    ({"jobs": [{"name": "a", "skeleton": "s", "targets": "t",
                "options": {"driven": ""}}]}, "jobs[0].options.driven",
     "must be a non-empty string"),
]


@pytest.mark.parametrize(("data", "path", "problem"), BAD_MANIFESTS)
def test_bad_manifest_is_one_line_and_exit_2(data: Any, path: str, problem: str,
                                             tmp_path: Path, capsys) -> None:
    manifest = tmp_path / "jobs.json"
    manifest.write_text(json.dumps(data))
    code, stdout, err = bake_many(capsys, manifest, "-o", tmp_path / "out")
    assert code == 2 and stdout == ""
    lines = err.splitlines()
    assert len(lines) == 1
    prefix = f"dhik: error: {manifest}: {path}: " if path else f"dhik: error: {manifest}: "
    assert lines[0].startswith(prefix) and problem in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_bad_arguments_exit_2(tmp_path: Path, capsys) -> None:
    code, _, err = bake_many(capsys, tmp_path / "nothing", "-o", tmp_path / "out")
    assert code == 2 and err.startswith(f"dhik: error: {tmp_path / 'nothing'}: ")
    (tmp_path / "empty").mkdir()
    code, _, err = bake_many(capsys, tmp_path / "empty", "-o", tmp_path / "out")
    assert code == 2 and "no jobs" in err and len(err.splitlines()) == 1
    code, _, err = bake_many(capsys, tmp_path / "empty", "-o", tmp_path / "out",
                             "--workers", "0")
    assert code == 2 and "--workers" in err and len(err.splitlines()) == 1


def test_without_dask_the_scheduler_says_how_to_install_it(clips: Path, tmp_path: Path,
                                                           capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    code, stdout, err = bake_many(capsys, clips, "-o", tmp_path / "out", "--scheduler", "local")
    assert code == 2 and stdout == ""
    assert err.splitlines() == [
        "dhik: error: --scheduler needs Dask distributed: pip install 'dhik[cluster]'"]


def crash_on_bad(job: Job, outdir: str) -> JobResult:
    """A job function whose worker process dies on the job named "bad"."""
    if job.name == "bad":
        os._exit(3)
    return bake_job(job, outdir)


def raise_on_bad(job: Job, outdir: str) -> JobResult:
    if job.name == "bad":
        raise RuntimeError("boom")
    return bake_job(job, outdir)


@pytest.mark.parametrize("job_fn", [crash_on_bad, raise_on_bad])
def test_a_crashing_job_is_recorded_and_the_others_go_on(job_fn, tmp_path: Path) -> None:
    good = [Job(f"g{i}", str(SCENES / "planar2/skeleton.json"),
                str(SCENES / "planar2/targets.json")) for i in range(4)]
    jobs = [good[0], Job("bad", good[0].skeleton, good[0].targets), *good[1:]]
    result = run_jobs(jobs, str(tmp_path), pool_factory(2), job_fn=job_fn)
    status = {r.name: (r.status, r.error) for r in result.results}
    assert all(status[j.name] == ("done", None) for j in good)
    assert status["bad"][0] == "failed"
    if job_fn is crash_on_bad:
        assert "worker process died" in status["bad"][1]
    else:
        assert status["bad"][1] == "RuntimeError: boom"
    ref = (tmp_path / "g0/animation.json").read_bytes()
    assert all((tmp_path / j.name / "animation.json").read_bytes() == ref for j in good)
    assert not (tmp_path / "bad").exists()


@pytest.fixture(scope="module")
def cluster():
    """A real Dask LocalCluster: 2 worker processes, one thread each."""
    distributed = pytest.importorskip("distributed")
    import logging

    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None, silence_logs=logging.ERROR) as c:
        yield c


def test_dask_cluster_writes_what_dhik_bake_writes(cluster, tmp_path: Path, capsys) -> None:
    manifest = write_manifest(tmp_path)
    refs = manifest_refs(tmp_path)
    out, report = tmp_path / "out", tmp_path / "summary.json"
    code, stdout, err = bake_many(capsys, manifest, "-o", out, "--scheduler",
                                  cluster.scheduler_address, "--report", report)
    assert code == 0, err
    assert stdout.startswith("dhik bake-many: 4 jobs: 4 done, 0 skipped, 0 failed; ")
    check_outputs(out, refs)
    # the workers are other processes than this one
    pids = cluster.scheduler_info["workers"]
    assert len(pids) == 2
    # the same skipping as the pool
    code, stdout, _ = bake_many(capsys, manifest, "-o", out, "--scheduler",
                                cluster.scheduler_address)
    assert code == 0 and " 0 done, 4 skipped, 0 failed; " in stdout


def test_dask_cluster_one_bad_job(cluster, clips: Path, tmp_path: Path, capsys) -> None:
    bad = clips / "broken"
    shutil.copytree(SCENES / "planar2", bad)
    (bad / "skeleton.json").write_text('{"joints": []}')
    out = tmp_path / "out"
    code, stdout, err = bake_many(capsys, clips, "-o", out, "--scheduler",
                                  cluster.scheduler_address)
    assert code == 1
    assert stdout.startswith("dhik bake-many: 4 jobs: 3 done, 0 skipped, 1 failed; ")
    assert err.startswith(f"dhik bake-many: job broken failed: {bad / 'skeleton.json'}: ")
    assert sorted(p.name for p in out.iterdir()) == ["arm", "planar", "two"]


def test_scheduler_local_starts_a_local_cluster(tmp_path: Path, capsys) -> None:
    pytest.importorskip("distributed")
    manifest = write_manifest(tmp_path)
    refs = manifest_refs(tmp_path)
    code, stdout, err = bake_many(capsys, manifest, "-o", tmp_path / "out", "--scheduler",
                                  "local", "--workers", "2")
    assert code == 0, err
    check_outputs(tmp_path / "out", refs)
    code, _, err = bake_many(capsys, manifest, "-o", tmp_path / "o2", "--scheduler",
                             "tcp://127.0.0.1:9", "--workers", "2")
    assert code == 2 and "--workers" in err and len(err.splitlines()) == 1


def test_scheduler_local_runs_its_workers_with_the_light_configuration() -> None:
    """Our LocalCluster's workers have no sampling profiler and slow monitors: CPU the
    jobs get on a machine whose cores the workers and the scheduler share."""
    pytest.importorskip("distributed")
    import dask

    keys = list(batch.LOCAL_CLUSTER_CONFIG)
    assert dask.config.get("distributed.worker.profile.enabled") is True  # the default
    with batch.dask_factory("local", 1, 1) as factory:
        executor, window = factory(3)
        seen = [executor.submit(dask.config.get, key).result(timeout=60) for key in keys]
    assert window == 8  # two jobs a worker thread, at least 8 (test_batch_stop.py)
    assert seen == [batch.LOCAL_CLUSTER_CONFIG[k] for k in keys]
    assert dask.config.get("distributed.worker.profile.enabled") is True  # left as it was


def test_progress_bar_over_jobs_on_a_terminal_only(clips: Path, tmp_path: Path) -> None:
    args = [*DHIK, "bake-many", str(clips), "-o", str(tmp_path / "out"), "--workers", "2"]
    proc, shown = run_on_terminal(args, "stderr")
    assert proc.returncode == 0
    assert "100% job 3/3" in shown and "\r" in shown  # the bar, on the terminal (stderr)
    assert proc.stdout.startswith("dhik bake-many: 3 jobs: 3 done")
    assert "\r" not in proc.stdout
    # not a terminal: no bar
    done = subprocess.run([*args, "--force"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stderr == ""
