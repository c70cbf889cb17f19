"""``dhik bake-many`` stopped (issue 19): Ctrl-C, SIGTERM to the process group, the
parent killed with SIGKILL, thousands of jobs on Dask; every test waits for events.

A *gated* job reads its targets from a FIFO: its worker blocks in that read until the
test writes, so the test knows a job is running (its worker has opened the FIFO: the
test's own open for writing returns) without looking at a clock, and a stop that ends
the batch must have stopped that job, since it can never finish by itself.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dhik.app import batch, workers
from dhik.app.batch import Job, run_jobs

ROOT = Path(__file__).resolve().parents[2]
SCENES = ROOT / "sample_scenes"
DHIK = [sys.executable, "-m", "dhik"]
POOL = ["--workers", "1"]
LOCAL = ["--scheduler", "local", "--workers", "1"]


def gated_manifest(tmp: Path, gated: int, quick: int = 1) -> tuple[Path, list[Path]]:
    """``quick`` planar2 jobs first (q0, ...), then ``gated`` jobs (g0, ...) whose targets
    are FIFOs: the manifest and the FIFOs."""
    fifos = []
    jobs = [{"name": f"q{i}", "skeleton": str(SCENES / "planar2/skeleton.json"),
             "targets": str(SCENES / "planar2/targets.json")} for i in range(quick)]
    for i in range(gated):
        fifo = tmp / f"gate{i}.json"
        os.mkfifo(fifo)
        fifos.append(fifo)
        jobs.append({"name": f"g{i}", "skeleton": str(SCENES / "planar2/skeleton.json"),
                     "targets": str(fifo)})
    path = tmp / "jobs.json"
    path.write_text(json.dumps({"jobs": jobs}))
    return path, fifos


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(manifest: Path, out: Path, extra: list[str]) -> subprocess.Popen[str]:
    """The batch in its own session (its own process group, as a shell job is), SIGINT at
    its default (a test run started in the background inherits it ignored)."""
    return subprocess.Popen([*DHIK, "bake-many", str(manifest), "-o", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint, start_new_session=True)


def wait_for_reader(fifo: Path, proc: subprocess.Popen[str]) -> int:
    """Block until a worker has opened ``fifo`` to read (its job is running): the write
    end, held open (the job then waits for data that never comes)."""
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as err:
            if err.errno != errno.ENXIO:
                raise
        if proc.poll() is not None:
            pytest.fail(f"the batch ended before the gated job ran: {ended(proc)}")
        time.sleep(0.02)  # looking again for the event; nothing depends on how long


def ended(proc: subprocess.Popen[str], timeout: float = 300) -> tuple[str, str]:
    """``proc``'s stdout and stderr once every process holding them has exited. A stop that
    never ends fails the test (its whole process group killed first, so no batch or
    worker outlives the test) instead of hanging the test run."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the batch's session: it and its workers
        except ProcessLookupError:
            pass
        proc.communicate()
        pytest.fail(f"the batch or a worker of it still ran {timeout:g} s after the stop")


def leftovers(root: Path) -> list[str]:
    """Temporary files or staging / commit folders anywhere under ``root``."""
    return [str(p) for p in root.rglob("*") if p.name.endswith(".tmp")
            or p.name.startswith((".dhik-staging-", ".dhik-commit-"))]


def whole(folder: Path) -> bool:
    names = sorted(p.name for p in folder.iterdir())
    return names == [".dhik-job.json", "animation.json", "report.json"]


def reference(tmp: Path) -> bytes:
    out = tmp / "ref.json"
    subprocess.run([*DHIK, "bake", str(SCENES / "planar2/skeleton.json"),
                    str(SCENES / "planar2/targets.json"), "-o", str(out)], check=True,
                   capture_output=True)
    return out.read_bytes()


@pytest.mark.parametrize(("extra", "how", "code", "word"), [
    (POOL, "sigint", 130, "interrupted"),
    (POOL, "sigterm-group", 143, "terminated"),
    (POOL, "sigterm", 143, "terminated"),
    (LOCAL, "sigint", 130, "interrupted"),
    (LOCAL, "sigterm-group", 143, "terminated"),
], ids=["pool-ctrl-c", "pool-sigterm-group", "pool-sigterm", "local-ctrl-c",
        "local-sigterm-group"])
def test_a_stop_ends_running_jobs_and_keeps_finished_ones(extra: list[str], how: str,
                                                          code: int, word: str,
                                                          tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the batch), SIGTERM to the batch alone, and SIGTERM to the whole
    process group (timeout, systemd, docker stop): a running job that cannot finish is
    stopped (so the batch ends at all), the finished one stays whole, nothing partial or
    temporary is left, and the exit code and word are dhik bake's (130 / 143)."""
    if extra is LOCAL:
        pytest.importorskip("distributed")
    manifest, fifos = gated_manifest(tmp_path, gated=3)
    out = tmp_path / "out"
    proc = start(manifest, out, extra)
    fd = wait_for_reader(fifos[0], proc)  # a gated job runs (the quick one before it)
    try:
        if how == "sigint":
            proc.send_signal(signal.SIGINT)
        elif how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGTERM)
        stdout, stderr = ended(proc)
    finally:
        os.close(fd)
    assert proc.returncode == code, stderr
    assert stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"dhik: {word}: "), stderr
    assert not leftovers(out), leftovers(out)
    kept = sorted(p.name for p in out.iterdir())
    assert "g0" not in kept  # the stopped job left nothing, not even its folder
    for name in kept:
        assert whole(out / name), name
    if extra is POOL:  # one worker, jobs in order: the quick job finished before g0 ran
        assert kept == ["q0"] and lines[0] == f"dhik: {word}: 1 jobs done (their files " \
                                              "kept), 3 not run"
        assert (out / "q0/animation.json").read_bytes() == reference(tmp_path)


@pytest.mark.parametrize("extra", [POOL, LOCAL], ids=["pool", "local"])
def test_no_worker_outlives_a_killed_parent(extra: list[str], tmp_path: Path) -> None:
    """kill -9 of the batch left both pool workers alive for good, holding the caller's
    stdout, so `$(dhik bake-many ...)` never returned: the read below returns (EOF) only
    once every process holding the pipe is gone."""
    if extra is LOCAL:
        pytest.importorskip("distributed")
    manifest, fifos = gated_manifest(tmp_path, gated=2, quick=0)
    out = tmp_path / "out"
    proc = start(manifest, out, extra)
    fd = wait_for_reader(fifos[0], proc)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        ended(proc)  # EOF on both pipes: no worker holds them any more
    finally:
        os.close(fd)
    if extra is POOL:  # the pool worker unwound its job: its staging folder is gone
        assert not leftovers(out) and not (out / "g0").exists()
    else:  # Dask's workers exit at once (os._exit): the next run tidies what they left
        assert all(whole(f) for f in out.iterdir() if not leftovers(f))


@pytest.mark.parametrize(("how", "code", "word"), [
    ("sigint", 130, "interrupted"), ("sigterm-group", 143, "terminated")],
    ids=["ctrl-c", "sigterm-group"])
def test_thousands_of_jobs_on_dask_stop_at_once(how: str, code: int, word: str,
                                                tmp_path: Path) -> None:
    """Ctrl-C of --scheduler local deadlocked in 3 of 3 trials with 1,000-3,000 jobs (all
    handed to Dask at once, every thread on a futex in Future.cancel), and SIGTERM of a
    10,000-job run took 90 s and baked 527 more jobs: jobs now go to Dask a few at a
    time, and the stop cancels those few (none baked after it)."""
    pytest.importorskip("distributed")
    manifest, fifos = gated_manifest(tmp_path, gated=1, quick=0)
    data = json.loads(manifest.read_text())
    data["jobs"] += [{"name": f"q{i}", "skeleton": str(SCENES / "planar2/skeleton.json"),
                      "targets": str(SCENES / "planar2/targets.json")} for i in range(3000)]
    manifest.write_text(json.dumps(data))
    out = tmp_path / "out"
    proc = start(manifest, out, LOCAL)
    fd = wait_for_reader(fifos[0], proc)
    try:
        if how == "sigint":
            proc.send_signal(signal.SIGINT)
        else:
            os.killpg(proc.pid, signal.SIGTERM)
        _, stderr = ended(proc)
    finally:
        os.close(fd)
    assert proc.returncode == code, stderr
    assert stderr.startswith(f"dhik: {word}: 0 jobs done") and stderr.count("\n") == 1
    assert not leftovers(out)
    assert not [p for p in out.iterdir() if p.name.startswith("q")]  # none baked after it


def test_jobs_go_to_the_executor_in_a_bounded_window(tmp_path: Path) -> None:
    """run_jobs never has more than the factory's window submitted; Dask's window is two
    jobs per worker thread, at least DASK_WINDOW, whatever the number of jobs."""
    import concurrent.futures as cf

    def counted(job: Job, outdir: str) -> batch.JobResult:
        return batch.JobResult(job.name, batch.DONE)

    class Counting(cf.ThreadPoolExecutor):
        """Counts the futures not yet done each time one more is submitted."""

        pending: set[cf.Future] = set()
        most = 0

        def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
            fut = super().submit(fn, *args, **kwargs)
            Counting.pending = {f for f in Counting.pending if not f.done()} | {fut}
            Counting.most = max(Counting.most, len(Counting.pending))
            return fut

    jobs = [Job(f"j{i}", "s.json", "t.json") for i in range(500)]
    result = run_jobs(jobs, str(tmp_path), lambda n: (Counting(max_workers=4), 6),
                      job_fn=counted)
    assert result.count(batch.DONE) == 500
    assert 1 < Counting.most <= 6


def test_dask_gets_a_window_not_every_job() -> None:
    pytest.importorskip("distributed")
    with workers.dask_factory("local", 1, 1) as factory:
        _, window = factory(3000)
    assert window == workers.DASK_WINDOW
