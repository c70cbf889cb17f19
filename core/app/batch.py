"""``dhik bake-many``: bake many clips on all cores or on a Dask cluster.

JOBS is a folder (each sub-folder holding ``skeleton.json`` and ``targets.json``, or
``targets_<EFFECTOR>.json`` files for several effectors, is a job named after the
sub-folder) or a ``jobs.json`` manifest::

    {"jobs": [{"name": "walk", "skeleton": "rig/skeleton.json",
               "targets": "walk/targets.json" | {"EFFECTOR": "path"
                                                 | {"file": "path", "weights": [pos, rot]}},
               "effector": "optional, with a single targets file",
               "options": {"max-iterations": 50, "cold-start": true, ...}}]}

with paths relative to the manifest and the options of ``dhik bake`` by their long name
without the dashes (an option that ``dhik bake`` repeats per effector takes an array;
the file of ``driven`` is an input of the job, like the skeleton and targets). Each
job writes ``OUTDIR/<name>/animation.json`` (byte for byte what ``dhik bake`` writes),
``OUTDIR/<name>/report.json`` (the records of ``dhik bake --report``) and last a small
``.dhik-job.json`` naming the inputs and options it was baked from, every file
atomically. A job whose three files are newer than its inputs
and whose inputs and options are unchanged is skipped unless ``force``.

Jobs run through a :class:`concurrent.futures.Executor`: a process pool (the default) or
a Dask distributed client's executor; :func:`run_jobs` is the one code path for both.
A job's bad input (DhikError), an exception in it, or its worker process dying is
recorded and the other jobs go on. Every path is made absolute: on a cluster the
workers must see the same files at the same paths (a shared file system).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import itertools
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, NoReturn

from .. import __version__
from ..errors import DhikError
from .bakejob import BAKE_OPTIONS, BakeOptions, ProgressBar, TrackSpec, add_bake_options, run_bake
from .jsonio import atomic_write_json, fail, key_path, kind_of, load_json, show

ANIMATION, REPORT, MARKER = "animation.json", "report.json", ".dhik-job.json"
DONE, SKIPPED, FAILED, NOT_RUN = "done", "skipped", "failed", "not run"
CLUSTER_HINT = "pip install 'dhik[cluster]'"
ATTEMPTS = 3  # runs of a job whose worker process dies before it is recorded as failed

# number of jobs -> a fresh executor, and how many jobs to keep submitted to it at once
ExecutorFactory = Callable[[int], tuple[cf.Executor, int]]


@dataclass(frozen=True)
class Job:
    """One clip to bake: absolute input paths, tracks and options.

    ``error`` is a problem found while discovering the job (a folder without targets):
    the job fails with it without running.
    """

    name: str
    skeleton: str
    targets: str | None = None
    effector: str | None = None
    tracks: tuple[TrackSpec, ...] = ()
    options: BakeOptions = field(default_factory=BakeOptions)
    error: str | None = None

    def inputs(self) -> list[str]:
        return [self.skeleton] + ([self.targets] if self.targets else []) + [
            t.path for t in self.tracks] + ([self.options.driven] if self.options.driven else [])

    def fingerprint(self) -> dict[str, Any]:
        """What the outputs were baked from (JSON); a change re-bakes the job."""
        return {
            "dhik": __version__,
            "skeleton": self.skeleton,
            "targets": self.targets,
            "effector": self.effector,
            "tracks": [[t.effector, t.path, t.pos_weight, t.rot_weight] for t in self.tracks],
            "options": asdict(self.options),
        }


@dataclass
class JobResult:
    """What became of one job; ``frames``/``converged`` count the frames it baked."""

    name: str
    status: str
    error: str | None = None
    frames: int = 0
    converged: int = 0
    wall_time: float = 0.0  # seconds, in the worker


# ------------------------------------------------------------------------- discovery


def discover(jobs_path: str) -> list[Job]:
    """The jobs of a folder of clip folders or of a jobs.json manifest (DhikError if bad)."""
    if os.path.isdir(jobs_path):
        return folder_jobs(jobs_path)
    return manifest_jobs(jobs_path)


def folder_jobs(root: str) -> list[Job]:
    """One job per sub-folder that holds skeleton.json or targets files (sorted by name)."""
    base = os.path.abspath(root)
    jobs = []
    for entry in sorted(os.scandir(base), key=lambda e: e.name):
        if not entry.is_dir() or entry.name.startswith("."):
            continue
        names = set(os.listdir(entry.path))
        per_effector = sorted(n for n in names if n.startswith("targets_")
                              and n.endswith(".json") and len(n) > len("targets_.json"))
        single = "targets.json" in names
        if "skeleton.json" not in names and not single and not per_effector:
            continue  # not a clip folder
        where = os.path.join(root, entry.name)
        error = None
        if "skeleton.json" not in names:
            error = f"{where}: no skeleton.json"
        elif single and per_effector:
            error = f"{where}: holds targets.json and targets_<EFFECTOR>.json files: keep one kind"
        elif not single and not per_effector:
            error = f"{where}: no targets.json or targets_<EFFECTOR>.json"
        tracks = tuple(TrackSpec(n[len("targets_"):-len(".json")], os.path.join(entry.path, n))
                       for n in per_effector)
        jobs.append(Job(entry.name, os.path.join(entry.path, "skeleton.json"),
                        os.path.join(entry.path, "targets.json") if single else None,
                        None, () if single else tracks, BakeOptions(), error))
    if not jobs:
        raise DhikError(root, "no jobs: no sub-folder holds skeleton.json and targets.json "
                              "(or targets_<EFFECTOR>.json files)")
    return jobs


_JOB_KEYS = ("name", "skeleton", "targets", "effector", "options")


def manifest_jobs(path: str) -> list[Job]:
    """The jobs of a jobs.json manifest; paths in it are relative to its folder."""
    src = str(path)
    data = load_json(path)
    base = os.path.dirname(os.path.abspath(path))
    if not isinstance(data, Mapping) or "jobs" not in data:
        fail(src, "", 'must be an object with a "jobs" array (or give a folder of clip folders)')
    for key in data:
        if key != "jobs":
            fail(src, key_path("", key), 'unknown key: a manifest holds only "jobs"')
    items = data["jobs"]
    if not isinstance(items, list) or not items:
        fail(src, "jobs", f"must be a non-empty array of jobs, got {show(items)}")
    jobs: list[Job] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        jobs.append(_manifest_job(item, src, f"jobs[{i}]", base, seen))
    return jobs


def _manifest_job(item: Any, src: str, p: str, base: str, seen: set[str]) -> Job:
    if not isinstance(item, Mapping):
        fail(src, p, f"must be an object, got {kind_of(item)}")
    for key in item:
        if key not in _JOB_KEYS:
            fail(src, key_path(p, key), f"unknown key (a job has {', '.join(_JOB_KEYS)})")
    for key in ("name", "skeleton", "targets"):
        if key not in item:
            fail(src, p, f'missing "{key}"')
    name = _string(item["name"], src, f"{p}.name")
    if name in (".", "..") or name.startswith(".") or any(c in name for c in "/\\\0"):
        fail(src, f"{p}.name", f"must be a folder name (no '/', not starting with '.'): "
                               f"{show(name)}")
    if name in seen:
        fail(src, f"{p}.name", f"two jobs are named {show(name)}")
    seen.add(name)
    skeleton = os.path.join(base, _string(item["skeleton"], src, f"{p}.skeleton"))
    effector = None
    if item.get("effector") is not None:
        effector = _string(item["effector"], src, f"{p}.effector")
    raw = item["targets"]
    targets: str | None = None
    tracks: tuple[TrackSpec, ...] = ()
    if isinstance(raw, str):
        targets = os.path.join(base, _string(raw, src, f"{p}.targets"))
    elif isinstance(raw, Mapping) and raw:
        if effector is not None:
            fail(src, f"{p}.effector", "goes with a single targets file; with several, the "
                                       "targets object names the effectors")
        tracks = tuple(_track(k, v, src, key_path(f"{p}.targets", k), base)
                       for k, v in raw.items())
    else:
        fail(src, f"{p}.targets", "must be a path or a non-empty object {EFFECTOR: path "
                                  f'or {{"file": path, "weights": [pos, rot]}}}}, got {show(raw)}')
    options = _options(item.get("options", {}), src, f"{p}.options", base)
    return Job(name, skeleton, targets, effector, tracks, options)


def _string(value: Any, src: str, p: str) -> str:
    if not isinstance(value, str) or not value:
        fail(src, p, f"must be a non-empty string, got {show(value)}")
    return value


def _track(effector: str, value: Any, src: str, p: str, base: str) -> TrackSpec:
    if not effector:
        fail(src, p, "the effector name must not be empty")
    if isinstance(value, str):
        return TrackSpec(effector, os.path.join(base, _string(value, src, p)))
    if not isinstance(value, Mapping):
        fail(src, p, f'must be a path or {{"file": path, "weights": [pos, rot]}}, '
                     f"got {show(value)}")
    for key in value:
        if key not in ("file", "weights"):
            fail(src, key_path(p, key), 'unknown key (an effector has "file" and "weights")')
    if "file" not in value:
        fail(src, p, 'missing "file"')
    path = os.path.join(base, _string(value["file"], src, f"{p}.file"))
    w = value.get("weights", [1.0, 1.0])
    ok = (isinstance(w, list) and len(w) == 2
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in w)
          and all(0 <= x < float("inf") for x in w) and max(w) > 0)
    if not ok:
        fail(src, f"{p}.weights", f"must be [pos, rot], numbers >= 0 and not both 0, "
                                  f"got {show(w)}")
    return TrackSpec(effector, path, float(w[0]), float(w[1]))


class _OptionError(Exception):
    pass


class _OptionParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _OptionError(message)


_FLAGS = {flag[2:] for flag, kw in BAKE_OPTIONS if kw.get("action") == "store_true"}
_REPEATED = {flag[2:] for flag, kw in BAKE_OPTIONS if kw.get("action") == "append"}
_VALUES = {flag[2:] for flag, kw in BAKE_OPTIONS} - _FLAGS
_PATHS = {"driven"}  # options naming a file: relative to the manifest, inputs of the job


def _options(value: Any, src: str, p: str, base: str) -> BakeOptions:
    """A job's options, checked exactly as ``dhik bake`` checks its command line.

    An option that ``dhik bake`` takes once per effector (``chain-length``, ``pole``)
    takes a value or an array of values; file options are relative to ``base``.
    """
    if not isinstance(value, Mapping):
        fail(src, p, f"must be an object of dhik bake options, got {show(value)}")
    parser = _OptionParser(add_help=False)
    add_bake_options(parser)
    argv: list[str] = []
    for key, v in value.items():
        kp = key_path(p, key)
        if key in _FLAGS:
            if not isinstance(v, bool):
                fail(src, kp, f"must be true or false, got {show(v)}")
            one = [f"--{key}"] if v else []
        elif key in _VALUES:
            one = []
            for k, x in enumerate(v if key in _REPEATED and isinstance(v, list) else [v]):
                xp = f"{kp}[{k}]" if isinstance(v, list) else kp
                if isinstance(x, bool) or not isinstance(x, (int, float, str)):
                    fail(src, xp, f"must be a number or a string, got {show(x)}")
                text = x if isinstance(x, str) else json.dumps(x)
                if key in _PATHS:
                    text = os.path.join(base, _string(text, src, xp))
                one += [f"--{key}", text]
        else:
            known = ", ".join(sorted(_FLAGS | _VALUES))
            fail(src, kp, f"unknown option (the options are {known})")
        try:
            parser.parse_args(one)
        except _OptionError as err:
            fail(src, kp, str(err).removeprefix(f"argument --{key}: "))
        argv += one
    return BakeOptions.from_args(parser.parse_args(argv))


# ------------------------------------------------------------------------- one job


def _temp_files(folder: str) -> list[str]:
    """Temporary files that an interrupted atomic write of a job's outputs left."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    prefixes = tuple(f".{n}." for n in (ANIMATION, REPORT, MARKER))
    return [os.path.join(folder, n) for n in names
            if n.startswith(prefixes) and n.endswith(".tmp")]


def _tidy(folder: str) -> None:
    """Remove the temporary files of a killed write, and the folder if it is empty."""
    _tidy_temp(folder)
    try:
        os.rmdir(folder)  # only when empty: a failed job's fresh folder
    except OSError:
        pass


def up_to_date(job: Job, outdir: str) -> bool:
    """True when the job's outputs are newer than its inputs and were baked from them."""
    folder = os.path.join(outdir, job.name)
    try:
        outputs = [os.stat(os.path.join(folder, n)).st_mtime_ns
                   for n in (ANIMATION, REPORT, MARKER)]
        inputs = [os.stat(p).st_mtime_ns for p in job.inputs()]
        with open(os.path.join(folder, MARKER), encoding="utf-8") as f:
            marker = json.load(f)
    except (OSError, ValueError):
        return False
    return marker == json.loads(json.dumps(job.fingerprint())) and min(outputs) > max(inputs)


def bake_job(job: Job, outdir: str) -> JobResult:
    """Bake one job into ``outdir/<name>/`` (runs in a worker); never raises for bad input."""
    start = time.perf_counter()
    folder = os.path.join(outdir, job.name)

    def failed(message: str) -> JobResult:
        return JobResult(job.name, FAILED, message, wall_time=time.perf_counter() - start)

    try:
        if job.error:
            raise DhikError(job.error)
        os.makedirs(folder, exist_ok=True)
        _tidy_temp(folder)
        try:
            os.unlink(os.path.join(folder, MARKER))  # not up to date until baked again
        except FileNotFoundError:
            pass
        result = run_bake(job.skeleton, job.targets, job.effector, job.tracks, job.options,
                          os.path.join(folder, ANIMATION), os.path.join(folder, REPORT))
        atomic_write_json(os.path.join(folder, MARKER), job.fingerprint())
    except DhikError as err:
        return failed(str(err))
    except OSError as err:
        where = f"{err.filename}: " if err.filename is not None else ""
        return failed(f"{where}{err.strerror or err}")
    except Exception as err:  # a bug in dhik: recorded, and the batch goes on
        return failed(f"internal error: {type(err).__name__}: {err}")
    return JobResult(job.name, DONE, None, len(result.records), result.converged_count,
                     time.perf_counter() - start)


def _tidy_temp(folder: str) -> None:
    """Remove the temporary files that a killed atomic write left in ``folder``."""
    for path in _temp_files(folder):
        try:
            os.unlink(path)
        except OSError:
            pass


# ------------------------------------------------------------------------- executors


def _worker_init() -> None:
    """Pool workers: Ctrl-C is the parent's to handle; one BLAS/OpenMP thread for any
    library a job loads later (numpy's BLAS, loaded before the fork, keeps its setting)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


def cores() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def pool_factory(workers: int) -> ExecutorFactory:
    """Fresh process pools of at most ``workers`` processes (fewer for fewer jobs)."""

    def make(jobs: int) -> tuple[cf.Executor, int]:
        n = max(1, min(workers, jobs))
        # a pool starts what it is given (it cannot cancel a job once queued to a worker),
        # so it is given one job per worker: after Ctrl-C only the running jobs finish
        return cf.ProcessPoolExecutor(max_workers=n, initializer=_worker_init), n

    return make


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored meanwhile (main thread only): processes started now inherit that.

    A terminal's Ctrl-C goes to every process of the foreground group; Python keeps an
    inherited SIG_IGN, so those workers leave the stopping to the batch.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# Our own LocalCluster runs its scheduler and client in this process, on the cores the
# workers use: no sampling profiler (there is no dashboard to show it), no work stealing
# (the scheduler queues the tasks and hands each to an idle worker), slower monitors.
# On 2 cores this gives the workers back about 5 % (bench/batch_throughput.py).
LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.scheduler.work-stealing": False,
    "distributed.admin.tick.interval": "200ms",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "2s",
}


@contextmanager
def dask_factory(scheduler: str, workers: int | None,
                 jobs: int | None = None) -> Iterator[ExecutorFactory]:
    """Executors of a Dask client: a LocalCluster (``"local"``: ``workers`` processes, one
    per core by default, no more than ``jobs``) or the cluster at an address."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise DhikError(f"--scheduler needs Dask distributed: {CLUSTER_HINT}") from None
    # the batch reports each job's failure itself; the cluster's own log records (a
    # cancelled task's, a connection closed at shutdown) would only break its one line
    with _quiet_logs("distributed", "tornado"):
        cluster = None
        if scheduler == "local":
            with _sigint_ignored():  # the worker processes inherit it: Ctrl-C is ours
                # no dashboard; the scheduler's HTTP routes on a free port (not 8787,
                # which another cluster may hold)
                n = max(1, min(workers or cores(), jobs or cores()))
                with dask.config.set(LOCAL_CLUSTER_CONFIG):
                    cluster = LocalCluster(n_workers=n, threads_per_worker=1,
                                           processes=True, dashboard_address="127.0.0.1:0",
                                           scheduler_kwargs={"dashboard": False},
                                           silence_logs=logging.CRITICAL)
            client = Client(cluster)
        else:
            if workers is not None:
                raise DhikError("--workers goes with the process pool or --scheduler "
                                "local; a cluster's size is the cluster's")
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, ValueError, TypeError) as err:
                raise DhikError(f"--scheduler {scheduler}: cannot connect: {err}") from None
        try:
            # every job at once: Dask cancels queued tasks, and an adaptive cluster
            # scales to the queue
            yield lambda jobs: (client.get_executor(pure=False), jobs)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


@contextmanager
def _quiet_logs(*names: str) -> Iterator[None]:
    """Only critical records from these loggers meanwhile."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


# ------------------------------------------------------------------------- the batch


@dataclass
class BatchResult:
    """Every job's result in job order, the wall time (s), and whether Ctrl-C stopped it."""

    results: list[JobResult]
    wall_time: float
    interrupted: bool = False

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
            "interrupted": self.interrupted,
            "outdir": outdir,
            "results": [{
                "name": r.name, "status": r.status, "error": r.error, "frames": r.frames,
                "converged": r.converged, "wall_time_s": r.wall_time,
            } for r in self.results],
        }


def _submit(executor: cf.Executor, futures: dict[cf.Future, Job], held: list[Job],
            job_fn: Callable[[Job, str], JobResult], job: Job, outdir: str) -> None:
    """Submit ``job``; if the pool is broken, keep it in ``held`` and re-raise."""
    try:
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
) -> BatchResult:
    """Run ``jobs`` through executors from ``make_executor`` (process pool or Dask).

    Up-to-date jobs are skipped unless ``force``. When a worker process dies (the pool
    breaks), the jobs that were in flight run again one at a time in fresh pools, so the
    one that kills its worker :data:`ATTEMPTS` times alone is recorded as failed and the
    others are baked. At most ``window`` jobs (from the factory) are submitted at once.
    Ctrl-C cancels every job not finished (a pool cannot cancel its running jobs: they
    finish, whole files) and returns with ``interrupted`` set; then, once no worker of
    ours runs, :func:`settle_interrupted`.
    """
    start = time.perf_counter()
    outdir = os.path.abspath(outdir)
    results: dict[str, JobResult] = {}
    todo: list[Job] = []
    for job in jobs:
        if job.error:
            results[job.name] = JobResult(job.name, FAILED, job.error)
        elif not force and up_to_date(job, outdir):
            results[job.name] = JobResult(job.name, SKIPPED)
        else:
            todo.append(job)

    def tick() -> None:
        if progress is not None:
            progress(len(results), len(jobs))

    tick()
    tries = dict.fromkeys((j.name for j in todo), 0)
    suspects: list[Job] = []  # in flight when a pool broke: run again one at a time
    interrupted = False
    while (todo or suspects) and not interrupted:
        alone = bool(suspects)  # one job in flight: a break is that job's own
        round_jobs = suspects if alone else todo
        broken: list[Job] = []
        queue = iter(round_jobs)
        futures: dict[cf.Future, Job] = {}
        held: list[Job] = []  # taken from the queue, but the pool broke on its submit
        executor, window = make_executor(1 if alone else len(round_jobs))
        window = 1 if alone else window

        with executor:
            try:
                for job in itertools.islice(queue, window):
                    _submit(executor, futures, held, job_fn, job, outdir)
                while futures:
                    done, _ = cf.wait(futures, return_when=cf.FIRST_COMPLETED)
                    for fut in done:
                        job = futures.pop(fut)
                        try:
                            res = fut.result()
                        except cf.BrokenExecutor:
                            broken.append(job)
                            continue
                        except Exception as err:  # e.g. Dask's KilledWorker
                            res = JobResult(job.name, FAILED, f"{type(err).__name__}: {err}")
                        results[job.name] = res
                        tick()
                        if not broken:  # a broken pool takes no more jobs
                            for nxt in itertools.islice(queue, 1):
                                _submit(executor, futures, held, job_fn, nxt, outdir)
            except cf.BrokenExecutor:  # broke while a job was being submitted
                broken.extend(futures.values())
                futures.clear()
            except KeyboardInterrupt:
                interrupted = True
                for fut in futures:
                    fut.cancel()  # a pool's running jobs go on to the end: whole files
        if interrupted:  # the executor has shut down: keep what the running jobs did
            for fut, job in futures.items():
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    results[job.name] = fut.result()
            break
        unsubmitted = held + list(queue)
        if alone:
            for job in broken:
                tries[job.name] += 1
                if tries[job.name] >= ATTEMPTS:
                    results[job.name] = JobResult(job.name, FAILED, "the worker process died "
                                                  "running this job (a crash, or out of memory)")
                    tick()
            suspects = [j for j in suspects if j.name not in results]
        else:
            suspects, todo = broken, unsubmitted
    final = [results.get(j.name, JobResult(j.name, NOT_RUN)) for j in jobs]
    if not interrupted:  # else settle_interrupted, once no worker of ours runs
        for r in final:
            if r.status not in (DONE, SKIPPED):
                _tidy(os.path.join(outdir, r.name))
    return BatchResult(final, time.perf_counter() - start, interrupted)


def settle_interrupted(batch: BatchResult, jobs: Sequence[Job], outdir: str) -> None:
    """After Ctrl-C and the executor's shutdown: a job whose files a worker finished
    (its result not yet received) is done; temporary files of killed writes go."""
    by_name = {j.name: j for j in jobs}
    for k, r in enumerate(batch.results):
        folder = os.path.join(outdir, r.name)
        if r.status == NOT_RUN and up_to_date(by_name[r.name], outdir):
            try:
                with open(os.path.join(folder, REPORT), encoding="utf-8") as f:
                    rep = json.load(f)
                batch.results[k] = JobResult(r.name, DONE, None, int(rep["frames"]),
                                             int(rep["converged"]))
            except (OSError, ValueError, KeyError, TypeError):
                pass
        if batch.results[k].status not in (DONE, SKIPPED):
            _tidy(folder)


def bake_many(
    jobs_path: str,
    outdir: str,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    force: bool = False,
    report: str | None = None,
) -> int:
    """``dhik bake-many``: the exit status (0 all ran, 1 some failed, 130 Ctrl-C).

    DhikError (bad arguments or manifest) goes to the caller.
    """
    if workers is not None and workers < 1:
        raise DhikError(f"--workers must be >= 1: {workers}")
    if scheduler is not None and not scheduler.strip():
        raise DhikError("--scheduler: give a Dask scheduler's address (tcp://HOST:PORT) "
                        "or local")
    jobs = discover(jobs_path)
    outdir = os.path.abspath(outdir)
    if os.path.exists(outdir) and not os.path.isdir(outdir):
        raise DhikError(f"{outdir}: exists and is not a folder")
    os.makedirs(outdir, exist_ok=True)
    bar = ProgressBar(sys.stderr, "job")
    if scheduler is None:
        batch = run_jobs(jobs, outdir, pool_factory(workers or cores()), force=force,
                         progress=bar)
    else:
        with dask_factory(scheduler, workers, len(jobs)) as factory:
            batch = run_jobs(jobs, outdir, factory, force=force, progress=bar)
    if batch.interrupted:
        settle_interrupted(batch, jobs, outdir)
    if report:
        atomic_write_json(report, batch.report(outdir))
    if batch.interrupted:
        print(f"dhik: interrupted: {batch.count(DONE)} jobs done (their files kept), "
              f"{batch.count(NOT_RUN)} not run", file=sys.stderr)
        return 130
    for r in batch.results:
        if r.status == FAILED:
            print(f"dhik bake-many: job {r.name} failed: {r.error}", file=sys.stderr)
    print(batch.summary_line())
    return 1 if batch.count(FAILED) else 0
