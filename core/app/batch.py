"""``dhik bake-many``: bake many clips on all cores or on a Dask cluster.

The jobs come from a folder of clip folders or a manifest (:mod:`.manifest`); each
writes ``OUTDIR/<name>/animation.json`` (byte for byte what ``dhik bake`` writes; or
``.npz`` / ``.csv``), ``report.json`` and the marker ``.dhik-job.json``, replaced as a set
and skipped while up to date (:mod:`.jobdir`). They run through a
:class:`concurrent.futures.Executor` (:mod:`.workers`: a process pool, the default, or a
Dask client's executor); :func:`run_jobs` is the one code path for both. A job's bad
input (DhikError), an exception in it, or its worker process dying is recorded and the
other jobs go on.

Stopping: SIGINT (Ctrl-C) and SIGTERM only set a flag here (no exception lands inside
the executors' locks); the loop sees it within :data:`POLL` seconds, stops the running
jobs (pool workers unwind theirs and exit; Dask tasks are cancelled and a LocalCluster is
closed), keeps the jobs that finished, and exits 130 (interrupted) or 143 (terminated),
as ``dhik bake`` does.

``--report`` is checked before any job runs: not the manifest, an input or anything in a
job's folder, its folder writable, and its space reserved (a full disk is found first).
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from ..errors import DhikError
from .bakejob import ProgressBar
from .filesets import signals_held
from .jobdir import (
    DONE,
    FAILED,
    MARKER,
    NOT_RUN,
    REPORT,
    SKIPPED,
    Digests,
    JobResult,
    bake_job,
    baked_result,
    tidy,
    up_to_date,
)
from .jsonio import check_outputs, dumps_json, json_string, one_line, say
from .manifest import Job, discover
from .workers import (
    LOCAL_CLUSTER_CONFIG,
    ExecutorFactory,
    cores,
    dask_factory,
    pool_factory,
    pooled,
    stop_executor,
)

# the names bench/ and the tests use, from the modules that hold them now
__all__ = ["ANIMATION", "DONE", "FAILED", "LOCAL_CLUSTER_CONFIG", "MARKER", "NOT_RUN",
           "REPORT", "SKIPPED", "BatchResult", "ExecutorFactory", "Job", "JobResult",
           "StopFlag", "bake_job", "bake_many", "dask_factory", "discover", "pool_factory",
           "run_jobs", "settle_interrupted"]

ANIMATION = "animation.json"
ATTEMPTS = 3  # runs of a job whose worker process dies before it is recorded as failed
POLL = 0.2  # seconds between the batch's looks at its stop flag while jobs run
WORKER_DIED = "the worker process died running this job (a crash, or out of memory)"
STOP_CODES = {"interrupted": 130, "terminated": 128 + signal.SIGTERM}


class StopFlag:
    """Why the batch stops ("interrupted": SIGINT, "terminated": SIGTERM), or None. Set by
    :func:`stop_signals`' handlers, which do nothing else (no lock is ever broken)."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def set(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason


@contextmanager
def stop_signals(flag: StopFlag) -> Iterator[None]:
    """SIGINT and SIGTERM set ``flag`` meanwhile (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        signal.SIGINT: signal.signal(signal.SIGINT, lambda *_: flag.set("interrupted")),
        signal.SIGTERM: signal.signal(signal.SIGTERM, lambda *_: flag.set("terminated")),
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@dataclass
class BatchResult:
    """Every job's result in job order, the wall time (s), and what stopped it ("interrupted",
    "terminated") or None."""

    results: list[JobResult]
    wall_time: float
    interrupted: str | None = None
    run: str = ""  # the run's id, in the markers of the jobs it baked

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def frames(self) -> int:
        return sum(r.frames for r in self.results)

    @property
    def converged(self) -> int:
        return sum(r.converged for r in self.results)

    def summary_line(self) -> str:
        """One line: jobs done, skipped, failed; frames baked and converged; wall time."""
        return (f"dhik bake-many: {len(self.results)} jobs: {self.count(DONE)} done, "
                f"{self.count(SKIPPED)} skipped, {self.count(FAILED)} failed; "
                f"{self.frames} frames, {self.converged}/{self.frames} converged; "
                f"{self.wall_time:.2f} s")

    def report(self, outdir: str) -> dict[str, Any]:
        """The summary JSON of ``--report``."""
        return {
            "jobs": len(self.results),
            "done": self.count(DONE),
            "skipped": self.count(SKIPPED),
            "failed": self.count(FAILED),
            "not_run": self.count(NOT_RUN),
            "frames": self.frames,
            "converged": self.converged,
            "wall_time_s": self.wall_time,
            "interrupted": self.interrupted is not None,
            "stopped_by": self.interrupted,
            "outdir": outdir,
            "results": [{
                "name": r.name, "status": r.status, "error": r.error, "frames": r.frames,
                "converged": r.converged, "wall_time_s": r.wall_time,
            } for r in self.results],
        }


def _error_of(err: BaseException) -> str:
    """A job's error line for an exception its future raised (Dask's KilledWorker told
    its task key, worker address and advice: the pool's words instead)."""
    if type(err).__name__ == "KilledWorker":
        return WORKER_DIED
    return f"{type(err).__name__}: {err}"


def _submit(executor: cf.Executor, in_pool: bool, futures: dict[cf.Future, Job],
            held: list[Job], job_fn: Callable[[Job, str], JobResult], job: Job,
            outdir: str) -> None:
    """Submit ``job`` (in a pool through :func:`.workers.pooled`); if the pool is broken,
    keep it in ``held`` and re-raise."""
    try:
        if in_pool:
            futures[executor.submit(pooled, job_fn, job, outdir)] = job
        else:
            futures[executor.submit(job_fn, job, outdir)] = job
    except cf.BrokenExecutor:
        held.append(job)
        raise


def run_jobs(
    jobs: Sequence[Job],
    outdir: str,
    make_executor: ExecutorFactory,
    *,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
    job_fn: Callable[[Job, str], JobResult] = bake_job,
    stop: StopFlag | None = None,
) -> BatchResult:
    """Run ``jobs`` through executors from ``make_executor`` (process pool or Dask).

    Up-to-date jobs are skipped unless ``force``. When a worker process dies (the pool
    breaks), the jobs that were in flight run again one at a time in fresh pools, so the
    one that kills its worker :data:`ATTEMPTS` times alone is recorded as failed and the
    others are baked. At most ``window`` jobs (from the factory) are submitted at once.
    When ``stop`` is set (or on KeyboardInterrupt), the running jobs are stopped
    (:func:`.workers.stop_executor`) and the result says why; then, once no worker of
    ours runs, :func:`settle_interrupted`.
    """
    start = time.perf_counter()
    outdir = os.path.abspath(outdir)
    stop = stop or StopFlag()
    run = uuid.uuid4().hex  # in each job's marker: a job re-run in this run was done in it
    results: dict[str, JobResult] = {}
    todo: list[Job] = []
    digests = Digests()
    for job in jobs:
        if job.error:
            results[job.name] = JobResult(job.name, FAILED, job.error)
        elif not force and up_to_date(job, outdir, digests):
            results[job.name] = JobResult(job.name, SKIPPED)
        else:
            todo.append(replace(job, force=force, run=run))

    def tick() -> None:
        if progress is not None:
            progress(len(results), len(jobs))

    tick()
    tries = dict.fromkeys((j.name for j in todo), 0)
    suspects: list[Job] = []  # in flight when a pool broke: run again one at a time
    while (todo or suspects) and stop.reason is None:
        alone = bool(suspects)  # one job in flight: a break is that job's own
        round_jobs = suspects if alone else todo
        executor, window = make_executor(1 if alone else len(round_jobs))
        window = 1 if alone else window
        in_pool = isinstance(executor, cf.ProcessPoolExecutor)
        queue = iter(round_jobs)
        futures: dict[cf.Future, Job] = {}
        held: list[Job] = []  # taken from the queue, but the pool broke on its submit
        broken: list[Job] = []

        try:
            for job in itertools.islice(queue, window):
                _submit(executor, in_pool, futures, held, job_fn, job, outdir)
            while futures and stop.reason is None:
                done, _ = cf.wait(futures, timeout=POLL, return_when=cf.FIRST_COMPLETED)
                if stop.reason is not None:
                    break
                for fut in done:
                    job = futures.pop(fut)
                    try:
                        res = fut.result()
                    except cf.BrokenExecutor:
                        broken.append(job)
                        continue
                    except Exception as err:  # e.g. Dask's KilledWorker
                        res = JobResult(job.name, FAILED, _error_of(err))
                    results[job.name] = res
                    tick()
                    if not broken:  # a broken pool takes no more jobs
                        for nxt in itertools.islice(queue, 1):
                            _submit(executor, in_pool, futures, held, job_fn, nxt, outdir)
        except cf.BrokenExecutor:  # broke while a job was being submitted
            broken.extend(futures.values())
            futures.clear()
        except KeyboardInterrupt:  # a library caller's Ctrl-C
            stop.set("interrupted")
        except BaseException:
            stop_executor(executor)
            raise
        if stop.reason is not None:
            with signals_held():
                stop_executor(executor)
            for fut, job in futures.items():  # the jobs that finished meanwhile
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    results[job.name] = fut.result()
            break
        executor.shutdown(wait=True)
        unsubmitted = held + list(queue)
        if alone:
            for job in broken:
                tries[job.name] += 1
                if tries[job.name] >= ATTEMPTS:
                    results[job.name] = JobResult(job.name, FAILED, WORKER_DIED)
                    tick()
            suspects = [j for j in suspects if j.name not in results]
        else:
            suspects, todo = broken, unsubmitted
    final = [results.get(j.name, JobResult(j.name, NOT_RUN)) for j in jobs]
    if stop.reason is None:  # else settle_interrupted, once no worker of ours runs
        by_name = {j.name: j for j in jobs}
        for r in final:
            if r.status not in (DONE, SKIPPED):
                tidy(os.path.join(outdir, r.name), by_name[r.name].inputs())
    return BatchResult(final, time.perf_counter() - start, stop.reason, run)


def settle_interrupted(batch: BatchResult, jobs: Sequence[Job], outdir: str,
                       ours: bool = True) -> None:
    """After a stop and the executor's shutdown: a job whose files a worker committed
    (its result not yet received) is done; the folders of the others are tidied when
    ``ours`` (our own workers are gone: a pool or a LocalCluster, not a remote cluster,
    whose running tasks still commit whole sets later)."""
    by_name = {j.name: j for j in jobs}
    for k, r in enumerate(batch.results):
        folder = os.path.join(outdir, r.name)
        if r.status == NOT_RUN and up_to_date(by_name[r.name], outdir):
            batch.results[k] = baked_result(replace(by_name[r.name], run=batch.run), outdir)
        if ours and batch.results[k].status not in (DONE, SKIPPED):
            tidy(folder, by_name[r.name].inputs())


# ------------------------------------------------------------------------- the report


class ReportFile:
    """``--report``, checked and its space reserved before any job runs.

    A regular file (or a new one) gets a temporary file beside it now, allocated to the
    size a report of these jobs needs (a full disk or quota fails here, before any job);
    :meth:`write` overwrites it in place and renames it over the target. A device or
    FIFO is written into at the end.
    """

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self.fd: int | None = None
        self.tmp: str | None = None
        target = os.path.abspath(path)
        if os.path.exists(target) and not os.path.isfile(target):
            return
        import tempfile

        try:
            self.fd, self.tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.",
                                                 suffix=".tmp", dir=os.path.dirname(target))
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(self.fd, 0, size)
            else:
                os.write(self.fd, b" " * size)
        except OSError as err:
            self.discard()
            raise DhikError(path, f"cannot write: {err.strerror or err}") from None

    def write(self, data: bytes) -> None:
        """Write ``data`` as the report (DhikError naming it when it cannot)."""
        try:
            if self.fd is None:
                with open(self.path, "wb") as f:
                    f.write(data)
                return
            os.lseek(self.fd, 0, os.SEEK_SET)
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
            os.ftruncate(self.fd, len(data))
            os.fsync(self.fd)
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(self.fd, (os.stat(self.path).st_mode & 0o7777) if os.path.isfile(
                self.path) else 0o666 & ~umask)
            os.close(self.fd)
            self.fd = None
            assert self.tmp is not None
            os.replace(self.tmp, self.path)
            self.tmp = None
        except OSError as err:
            self.discard()
            raise DhikError(self.path, f"cannot write: {err.strerror or err}") from None

    def discard(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            self.tmp = None


def check_report(report: str, jobs_path: str, jobs: Sequence[Job], outdir: str) -> ReportFile:
    """DhikError unless ``--report`` can be written and is none of the batch's files: the
    manifest, an input, a job's folder or anything in it. Its space is reserved."""
    manifest = [] if os.path.isdir(jobs_path) else [jobs_path]
    target = os.path.realpath(report)
    for job in jobs:
        folder = os.path.realpath(os.path.join(outdir, job.name))
        if target == folder or target.startswith(folder + os.sep):
            raise DhikError(report, f"cannot write: it is in the folder of job "
                                    f"{json_string(job.name)}, "
                                    f"{os.path.join(outdir, job.name)} (the job's files)")
    check_outputs([report], [*manifest, *(p for j in jobs for p in j.inputs())])
    estimate = BatchResult([JobResult(j.name, NOT_RUN, "x" * 200) for j in jobs], 0.0,
                           "interrupted")
    size = len(dumps_json(estimate.report(outdir), report).encode("utf-8"))
    return ReportFile(report, 2 * size + 4096)


def bake_many(
    jobs_path: str,
    outdir: str,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    force: bool = False,
    report: str | None = None,
    quiet: bool = False,
    fmt: str | None = None,
    fps: float | None = None,
) -> int:
    """``dhik bake-many``: the exit status (0 all ran, 1 some failed, 130 Ctrl-C, 143
    SIGTERM). DhikError (bad arguments, manifest or report) goes to the caller."""
    if workers is not None and workers < 1:
        raise DhikError(f"--workers must be >= 1: {workers}")
    if scheduler is not None and not scheduler.strip():
        raise DhikError("--scheduler: give a Dask scheduler's address (tcp://HOST:PORT) "
                        "or local")
    jobs = discover(jobs_path, fmt, fps)
    outdir = os.path.abspath(outdir)
    if os.path.exists(outdir) and not os.path.isdir(outdir):
        raise DhikError(f"{outdir}: exists and is not a folder")
    reserved = None
    if report:
        fresh = not os.path.exists(outdir)
        if fresh and os.path.realpath(report).startswith(os.path.realpath(outdir) + os.sep):
            os.makedirs(outdir)  # OUTDIR/summary.json: its folder is the run's own
        try:
            reserved = check_report(report, jobs_path, jobs, outdir)
        except DhikError:
            if fresh and os.path.isdir(outdir):
                os.rmdir(outdir)
            raise
    try:
        os.makedirs(outdir, exist_ok=True)
        bar = ProgressBar(sys.stderr, "job", quiet=quiet)
        flag = StopFlag()
        with stop_signals(flag):
            if scheduler is None:
                batch = run_jobs(jobs, outdir, pool_factory(workers or cores()), force=force,
                                 progress=bar, stop=flag)
            else:
                with dask_factory(scheduler, workers, len(jobs)) as factory:
                    batch = run_jobs(jobs, outdir, factory, force=force, progress=bar,
                                     stop=flag)
            if batch.interrupted:
                settle_interrupted(batch, jobs, outdir, ours=scheduler in (None, "local"))
        if reserved is not None:
            reserved.write((dumps_json(batch.report(outdir), report or "") + "\n")
                           .encode("utf-8"))
    finally:
        if reserved is not None:
            reserved.discard()
    if batch.interrupted:
        print(f"dhik: {batch.interrupted}: {batch.count(DONE)} jobs done (their files kept), "
              f"{batch.count(NOT_RUN)} not run", file=sys.stderr)
        return STOP_CODES[batch.interrupted]
    for r in batch.results:
        if r.status == FAILED:
            print(one_line(f"dhik bake-many: job {r.name} failed: {r.error}"), file=sys.stderr)
    if not quiet:
        say(batch.summary_line())  # the one writer of stdout, which names it when it fails
    return 1 if batch.count(FAILED) else 0

