"""``dhik bake-many``'s files (issue 19): the report never names a batch's own file, up to
date means the bytes the bake read, a job's files are replaced as a set, inputs inside
OUTDIR and other runs' files are left alone, and odd names and folders are one line.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dhik.app import batch, jobdir
from dhik.app.arrays import load_arrays
from dhik.app.batch import Job, bake_job, pool_factory, run_jobs
from dhik.app.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCENES = ROOT / "sample_scenes"
PLANAR = SCENES / "planar2"
DHIK = [sys.executable, "-m", "dhik"]


def bake_many(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main(["bake-many", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def clips(root: Path, names: list[str]) -> Path:
    for name in names:
        shutil.copytree(PLANAR, root / name)
    return root


def manifest(tmp: Path, jobs: list[dict[str, Any]]) -> Path:
    path = tmp / "jobs.json"
    path.write_text(json.dumps({"jobs": jobs}))
    return path


def planar_job(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "skeleton": str(PLANAR / "skeleton.json"),
            "targets": str(PLANAR / "targets.json"), **extra}


def set_is_whole(folder: Path, job: Job) -> bool:
    """The folder holds the job's three files and its marker describes them."""
    names = sorted(p.name for p in folder.iterdir())
    return names == sorted(jobdir.output_names(job)) and jobdir.up_to_date(
        job, str(folder.parent))


def one_error(code: int, out: str, err: str, says: str) -> None:
    assert code == 2 and out == "", (code, out, err)
    assert len(err.splitlines()) == 1 and err.startswith("dhik: error: "), err
    assert says in err, err


# ------------------------------------------------------------------ --report


def test_report_may_not_name_the_manifest_an_input_or_a_jobs_files(tmp_path: Path,
                                                                   capsys) -> None:
    """`--report jobs.json` replaced the manifest and exited 0; `--report
    out/a/animation.json` replaced job a's animation, which the next run then skipped."""
    jobs = manifest(tmp_path, [planar_job("a"), planar_job("b")])
    out = tmp_path / "out"
    before = jobs.read_bytes()
    for report, says in ((jobs, "it is an input file"),
                         (PLANAR / "targets.json", "it is an input file"),
                         (out / "a" / "animation.json", "in the folder of job \"a\""),
                         (out / "b" / "report.json", "in the folder of job \"b\""),
                         (out / "a", "in the folder of job \"a\"")):
        code, stdout, err = bake_many(capsys, jobs, "-o", out, "--report", report)
        one_error(code, stdout, err, says)
        assert not out.exists()  # refused before any job ran
    assert jobs.read_bytes() == before
    # the same after a first run: job a's files stay as they are
    assert bake_many(capsys, jobs, "-o", out)[0] == 0
    anim = (out / "a/animation.json").read_bytes()
    code, stdout, err = bake_many(capsys, jobs, "-o", out, "--report", out / "a/animation.json")
    one_error(code, stdout, err, "in the folder of job \"a\"")
    assert (out / "a/animation.json").read_bytes() == anim
    code, stdout, _ = bake_many(capsys, jobs, "-o", out, "--report", out / "summary.json")
    assert code == 0 and json.loads((out / "summary.json").read_text())["skipped"] == 2


def test_report_into_a_new_outdir_is_written(tmp_path: Path, capsys) -> None:
    """`-o out --report out/summary.json` on a first run: the report's folder is OUTDIR."""
    jobs = manifest(tmp_path, [planar_job("a")])
    code, _, err = bake_many(capsys, jobs, "-o", tmp_path / "out", "--report",
                             tmp_path / "out" / "summary.json")
    assert code == 0, err
    assert json.loads((tmp_path / "out/summary.json").read_text())["done"] == 1
    code, _, err = bake_many(capsys, jobs, "-o", tmp_path / "o2", "--report",
                             tmp_path / "o2" / "a" / "x.json")
    one_error(code, "", err, 'in the folder of job "a"')
    assert not (tmp_path / "o2").exists()


def test_report_into_a_missing_folder_fails_before_any_job(tmp_path: Path, capsys) -> None:
    jobs = manifest(tmp_path, [planar_job("a")])
    code, stdout, err = bake_many(capsys, jobs, "-o", tmp_path / "out", "--report",
                                  tmp_path / "nope" / "r.json")
    one_error(code, stdout, err, "no folder")
    assert not (tmp_path / "out").exists()


def _limit_file_size() -> None:  # a disk that takes 4 KB more, in the child only
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_report_on_a_full_disk_fails_before_any_job(tmp_path: Path) -> None:
    """The report's space is reserved first: a full disk (here a file-size limit, which
    fails the same writes) is one line before any job runs, not after all of them."""
    jobs = manifest(tmp_path, [planar_job(f"j{i}") for i in range(30)])
    done = subprocess.run([*DHIK, "bake-many", str(jobs), "-o", str(tmp_path / "out"),
                           "--report", str(tmp_path / "r.json")], capture_output=True,
                          text=True, check=False, preexec_fn=_limit_file_size)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"dhik: error: {tmp_path / 'r.json'}: cannot write: File too large\n"
    assert not (tmp_path / "out").exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "jobs.json"]


# ------------------------------------------------------------------ up to date


def test_new_content_with_an_older_mtime_is_baked_again(tmp_path: Path, capsys) -> None:
    """`cp -p`, `rsync -t`, `tar x`: new bytes with an mtime older than the outputs."""
    root = clips(tmp_path / "clips", ["a"])
    out = tmp_path / "out"
    assert bake_many(capsys, root, "-o", out)[0] == 0
    first = (out / "a/animation.json").read_bytes()
    targets = root / "a/targets.json"
    keys = json.loads(targets.read_text())
    keys[-1]["pos"][0] += 0.05
    old = targets.stat()
    targets.write_text(json.dumps(keys))
    os.utime(targets, ns=(old.st_atime_ns, old.st_mtime_ns - 10**9))
    code, stdout, _ = bake_many(capsys, root, "-o", out)
    assert code == 0 and " 1 done, 0 skipped" in stdout
    assert (out / "a/animation.json").read_bytes() != first


def test_an_input_saved_while_its_job_solves_is_baked_again(tmp_path: Path,
                                                            monkeypatch) -> None:
    """The marker holds what the bake read: a save after the read, during the solve,
    leaves the outputs newer than the input, and the job stale all the same."""
    from dhik.app import bakejob

    root = clips(tmp_path / "clips", ["a"])
    targets = root / "a/targets.json"
    real = bakejob.simulate

    def save_meanwhile(*args: Any, **kwargs: Any) -> Any:
        keys = json.loads(targets.read_text())  # read already; the user saves now
        keys[0]["pos"][1] += 0.1
        targets.write_text(json.dumps(keys))
        return real(*args, **kwargs)

    monkeypatch.setattr(bakejob, "simulate", save_meanwhile)
    (job,) = batch.discover(str(root))
    assert bake_job(job, str(tmp_path / "out")).status == "done"
    assert (tmp_path / "out/a/animation.json").stat().st_mtime_ns >= targets.stat().st_mtime_ns
    assert not jobdir.up_to_date(job, str(tmp_path / "out"))
    monkeypatch.setattr(bakejob, "simulate", real)
    assert bake_job(job, str(tmp_path / "out")).status == "done"
    assert jobdir.up_to_date(job, str(tmp_path / "out"))


def test_an_output_replaced_by_someone_else_is_not_up_to_date(tmp_path: Path,
                                                              capsys) -> None:
    root = clips(tmp_path / "clips", ["a"])
    out = tmp_path / "out"
    assert bake_many(capsys, root, "-o", out)[0] == 0
    anim = out / "a/animation.json"
    stat = anim.stat()
    other = tmp_path / "other.json"
    other.write_text('{"frames": []}\n')
    os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(other, anim)  # as `--report out/a/animation.json` did, with the old mtime
    assert " 1 done, 0 skipped" in bake_many(capsys, root, "-o", out)[1]
    assert json.loads(anim.read_text())["frames"]


# ------------------------------------------------------------------ a set of files


def test_a_stop_during_the_commit_waits_for_the_whole_set(tmp_path: Path,
                                                          monkeypatch) -> None:
    """SIGTERM arriving between the renames of a job's files is held back until the set
    is whole (then it stops the process): never a new animation with an old report."""
    root = clips(tmp_path / "clips", ["a"])
    out = tmp_path / "out"
    (job,) = batch.discover(str(root))
    assert bake_job(job, str(out)).status == "done"
    old = {p.name: p.read_bytes() for p in (out / "a").iterdir()}
    keys = json.loads((root / "a/targets.json").read_text())
    keys[0]["pos"][0] += 0.1
    (root / "a/targets.json").write_text(json.dumps(keys))
    real_replace = os.replace
    moved: list[str] = []

    def replace_then_term(src: Any, dst: Any) -> None:
        real_replace(src, dst)
        if ".dhik-commit-" in str(src):  # the commit's renames (not the bake's own)
            moved.append(os.path.basename(dst))
            if len(moved) == 1:
                os.kill(os.getpid(), signal.SIGTERM)  # between the first and second

    class Stopped(BaseException):  # as the CLI's and the pool workers' SIGTERM are
        pass

    def stop(*_: Any) -> None:
        raise Stopped

    previous = signal.signal(signal.SIGTERM, stop)
    monkeypatch.setattr(jobdir.os, "replace", replace_then_term)
    try:
        with pytest.raises(Stopped):
            bake_job(job, str(out))
    finally:
        signal.signal(signal.SIGTERM, previous)
    monkeypatch.setattr(jobdir.os, "replace", real_replace)
    assert moved == ["animation.json", "report.json", ".dhik-job.json"]  # all three first
    assert set_is_whole(out / "a", job)
    new = {p.name: p.read_bytes() for p in (out / "a").iterdir()}
    assert all(new[n] != old[n] for n in ("animation.json", ".dhik-job.json"))


def test_a_commit_cut_short_by_sigkill_is_finished_by_the_next_run(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """A worker killed after the commit point (here: the second rename raises as SIGKILL
    would stop it) left the new animation beside the old report; the next run finishes
    the commit from the .dhik-commit- folder before anything else."""
    root = clips(tmp_path / "clips", ["a"])
    out = tmp_path / "out"
    (job,) = batch.discover(str(root))
    assert bake_job(job, str(out)).status == "done"
    keys = json.loads((root / "a/targets.json").read_text())
    keys[0]["pos"][0] += 0.1
    (root / "a/targets.json").write_text(json.dumps(keys))
    real_replace = os.replace
    calls: list[str] = []

    class Killed(BaseException):
        pass

    def die_on_second(src: Any, dst: Any) -> None:
        if ".dhik-commit-" in str(src):  # the commit's renames (not the bake's own)
            calls.append(str(dst))
            if len(calls) == 2:
                raise Killed
        real_replace(src, dst)

    monkeypatch.setattr(jobdir.os, "replace", die_on_second)
    with pytest.raises(Killed):
        bake_job(job, str(out))
    monkeypatch.setattr(jobdir.os, "replace", real_replace)
    assert [p.name for p in (out / "a").iterdir() if p.name.startswith(".dhik-commit-")]
    assert not jobdir.up_to_date(job, str(out))  # a mixture is never taken as baked
    jobdir.recover(str(out / "a"))
    assert set_is_whole(out / "a", job)


def test_job_inputs_inside_outdir_are_never_replaced_or_removed(tmp_path: Path,
                                                                capsys) -> None:
    """A job input at OUTDIR/<job>/.dhik-job.json was deleted before the bake."""
    out = tmp_path / "out"
    (out / "a").mkdir(parents=True)
    inside = out / "a" / ".dhik-job.json"
    shutil.copy(PLANAR / "skeleton.json", inside)
    (out / "b").mkdir()
    driven = out / "b" / "animation.json"
    assert main(["bake", str(PLANAR / "skeleton.json"), str(PLANAR / "targets.json"), "-o",
                 str(driven)]) == 0
    capsys.readouterr()
    before = inside.read_bytes(), driven.read_bytes()
    jobs = manifest(tmp_path, [
        {"name": "a", "skeleton": str(inside), "targets": str(PLANAR / "targets.json")},
        planar_job("b", options={"driven": str(driven)})])
    code, stdout, err = bake_many(capsys, jobs, "-o", out)
    assert code == 1
    lines = err.splitlines()
    assert lines == [
        f"dhik bake-many: job a failed: {inside}: cannot write: it is an input file ({inside})",
        f"dhik bake-many: job b failed: {driven}: cannot write: it is an input file ({driven})"]
    assert (inside.read_bytes(), driven.read_bytes()) == before


def test_another_writers_temporary_files_stay(tmp_path: Path, capsys) -> None:
    """Two runs on one OUTDIR deleted each other's in-flight temporary files (any
    `.animation.json.*.tmp` in a job folder went): only a job's own are removed now."""
    root = clips(tmp_path / "clips", ["a"])
    out = tmp_path / "out"
    (out / "a").mkdir(parents=True)
    theirs = [out / "a" / ".animation.json.x1y2.tmp", out / "a" / ".report.json.abc.tmp"]
    for p in theirs:
        p.write_text("someone's write in progress")
    assert bake_many(capsys, root, "-o", out)[0] == 0
    assert all(p.read_text() == "someone's write in progress" for p in theirs)


def test_two_runs_on_one_outdir_share_the_jobs(tmp_path: Path) -> None:
    """Two bake-many runs at once on one manifest and OUTDIR: every job baked, none
    failed in either run, every folder a whole set, nothing temporary left."""
    jobs = manifest(tmp_path, [planar_job(f"j{i}") for i in range(16)])
    out = tmp_path / "out"
    args = [*DHIK, "bake-many", str(jobs), "-o", str(out), "--workers", "2"]
    runs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    for proc in runs:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0 and stderr == "", stderr
        assert " 0 failed; " in stdout
    for job in batch.discover(str(jobs)):
        assert set_is_whole(out / job.name, job), job.name
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")
                or p.name.startswith(".dhik-")
                and p.name != ".dhik-job.json"]


# ------------------------------------------------------------------ names and folders


@pytest.mark.parametrize("name", ["two\nlines", "esc\x1b[31mred", "tab\tbed"])
def test_failure_lines_are_escaped(name: str, tmp_path: Path, capsys) -> None:
    root = clips(tmp_path / "clips", [name, "good"])
    (root / name / "targets.json").write_text("[]")
    code, stdout, err = bake_many(capsys, root, "-o", tmp_path / "out")
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == 1 and "\x1b" not in err and "\t" not in err, err
    escaped = name.encode("unicode_escape").decode("ascii")
    assert lines[0].startswith(f"dhik bake-many: job {escaped} failed: ")


def test_a_lone_surrogate_in_a_job_name_is_one_line(tmp_path: Path, capsys) -> None:
    """A manifest name "\\ud800" (valid JSON) gave a traceback at os.makedirs."""
    jobs = tmp_path / "jobs.json"
    jobs.write_text('{"jobs": [{"name": "bad\\ud800", "skeleton": "s.json", '
                    '"targets": "t.json"}]}')
    code, stdout, err = bake_many(capsys, jobs, "-o", tmp_path / "out")
    one_error(code, stdout, err, 'jobs[0].name: "bad\\ud800" cannot be a folder name')


def test_a_folder_name_that_is_not_utf8_bakes(tmp_path: Path, capsys) -> None:
    root = tmp_path / "clips"
    shutil.copytree(PLANAR, os.fsdecode(bytes(root) + b"/caf\xe9"))
    code, stdout, err = bake_many(capsys, root, "-o", tmp_path / "out", "--report",
                                  tmp_path / "r.json")
    assert code == 0 and err == "", err
    (result,) = json.loads((tmp_path / "r.json").read_text())["results"]
    assert result["name"] == "caf\udce9" and result["status"] == "done"


def test_a_symlink_loop_among_clip_folders_is_one_failed_job(tmp_path: Path, capsys) -> None:
    """A looping symlink aborted the whole run (`Too many levels of symbolic links`)."""
    root = clips(tmp_path / "clips", ["a", "b"])
    (root / "loop").symlink_to(root / "loop2")
    (root / "loop2").symlink_to(root / "loop")
    code, stdout, err = bake_many(capsys, root, "-o", tmp_path / "out")
    assert code == 1 and stdout.startswith("dhik bake-many: 4 jobs: 2 done, 0 skipped, "
                                           "2 failed")
    assert err.splitlines() == [
        f"dhik bake-many: job loop failed: {root / 'loop'}: cannot read: Too many levels of "
        "symbolic links",
        f"dhik bake-many: job loop2 failed: {root / 'loop2'}: cannot read: Too many levels of "
        "symbolic links"]


def crash_on_bad(job: Job, outdir: str) -> batch.JobResult:
    """A job function whose worker process dies on the job named "bad"."""
    if job.name == "bad":
        os._exit(3)
    return bake_job(job, outdir)


def test_a_worker_dying_on_dask_says_what_the_pool_says(tmp_path: Path) -> None:
    """Dask's KilledWorker message leaked its task key, worker address and advice."""
    pytest.importorskip("distributed")
    jobs = [Job("bad", str(PLANAR / "skeleton.json"), str(PLANAR / "targets.json")),
            Job("good", str(PLANAR / "skeleton.json"), str(PLANAR / "targets.json"))]
    with batch.dask_factory("local", 1, 2) as factory:
        dask_run = run_jobs(jobs, str(tmp_path / "dask"), factory, job_fn=crash_on_bad)
    pool_run = run_jobs(jobs, str(tmp_path / "pool"), pool_factory(1), job_fn=crash_on_bad)
    errors = [(r.name, r.status, r.error) for r in dask_run.results]
    assert errors == [(r.name, r.status, r.error) for r in pool_run.results]
    assert errors[0] == ("bad", "failed", batch.WORKER_DIED) and errors[1][1] == "done"


# ------------------------------------------------------------------ options


def test_spec_only_options_are_refused_in_a_manifest_with_the_robust_method(
        tmp_path: Path, capsys) -> None:
    for options, key in (({"damping": 0.01}, "damping"),
                         ({"no-line-search": True, "method": "robust"}, '["no-line-search"]')):
        jobs = manifest(tmp_path, [planar_job("a", options=options)])
        code, stdout, err = bake_many(capsys, jobs, "-o", tmp_path / "out")
        path = f"jobs[0].options.{key}" if not key.startswith("[") else f"jobs[0].options{key}"
        one_error(code, stdout, err, f"{jobs}: {path}: acts only with --method spec")
    jobs = manifest(tmp_path, [planar_job("a", options={"damping": 0.01, "method": "spec"})])
    assert bake_many(capsys, jobs, "-o", tmp_path / "out")[0] == 0
    report = json.loads((tmp_path / "out/a/report.json").read_text())
    assert report["settings"]["damping"] == 0.01


def test_bake_many_writes_arrays_with_the_frame_rate(tmp_path: Path, capsys) -> None:
    root = clips(tmp_path / "clips", ["a"])
    code, _, err = bake_many(capsys, root, "-o", tmp_path / "out", "--format", "npz")
    one_error(code, "", err, "--format npz: needs the frame rate")
    code, _, err = bake_many(capsys, root, "-o", tmp_path / "out", "--format", "npz",
                             "--fps", "24")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out/a").iterdir()) == [
        ".dhik-job.json", "animation.npz", "report.json"]
    arrays = load_arrays(tmp_path / "out/a/animation.npz")
    assert arrays.fps == 24.0 and len(arrays.frame) == 120
    # another format later replaces the set: the npz goes, animation.json comes
    code, _, err = bake_many(capsys, root, "-o", tmp_path / "out", "--fps", "24")
    assert code == 0 and sorted(p.name for p in (tmp_path / "out/a").iterdir()) == [
        ".dhik-job.json", "animation.json", "report.json"]
    assert json.loads((tmp_path / "out/a/animation.json").read_text())["fps"] == 24.0
