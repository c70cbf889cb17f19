"""Where ``dhik bake-many``'s jobs run: a process pool or a Dask cluster, and how they stop.

Both are :class:`concurrent.futures.Executor`; a factory gives a fresh one for a number of
jobs and how many jobs to keep submitted to it at once (the pool: one per worker, since
it cannot cancel a job once queued; Dask: two per worker thread, at least
:data:`DASK_WINDOW`, so that stopping cancels a few tasks, never thousands).

Pool workers (:func:`worker_init`) leave Ctrl-C to the batch (SIGINT ignored), turn
SIGTERM into :class:`WorkerStopped` inside a job, so that the job's staging folder and
temporary files are removed on the way out, and exit; they watch their parent and stop
the same way when it dies (``kill -9`` of the batch leaves no worker holding its stdout).
:func:`stop_executor` stops a pool's running jobs (SIGTERM to each worker, SIGKILL after
:data:`STOP_GRACE` seconds) or cancels a Dask client's tasks.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import DhikError
from .blas_threads import set_blas_threads

CLUSTER_HINT = "pip install 'dhik[cluster]'"
STOP_GRACE = 10.0  # seconds a pool worker has to clean up after SIGTERM before SIGKILL
WATCH_INTERVAL = 0.2  # seconds between a pool worker's looks at its parent
DASK_WINDOW = 8  # fewest jobs handed to a Dask cluster at once

# number of jobs -> a fresh executor, and how many jobs to keep submitted to it at once
ExecutorFactory = Callable[[int], tuple[cf.Executor, int]]


class WorkerStopped(BaseException):
    """SIGTERM in a pool worker, raised where its job was (like KeyboardInterrupt: no
    ``except Exception`` catches it, every ``finally`` and temporary-file cleanup runs)."""


_in_job = False  # in a pool worker: whether a job runs (SIGTERM then unwinds it)


def _on_sigterm(signum: int, frame: Any) -> None:
    if _in_job:
        raise WorkerStopped
    os._exit(128 + signal.SIGTERM)  # idle: nothing to clean up


def _watch_parent(parent: int) -> None:
    """A pool worker's thread: SIGTERM to itself once its parent is gone (reparented)."""
    stopped = threading.Event()
    while not stopped.wait(WATCH_INTERVAL):
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)
            return


def worker_init() -> None:
    """Pool workers: Ctrl-C is the batch's; SIGTERM stops the job (:class:`WorkerStopped`);
    the parent watched; one BLAS/OpenMP thread: numpy's OpenBLAS, loaded before the
    fork, set directly (``blas_threads``), any library a job loads later by the
    environment."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True,
                     name="dhik-watch-parent").start()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    set_blas_threads(1)


def pooled(job_fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``job_fn(*args)`` in a pool worker; a SIGTERM meanwhile unwinds the job (its
    cleanup runs), then the worker exits with 143."""
    global _in_job
    _in_job = True
    try:
        return job_fn(*args)
    except WorkerStopped:
        os._exit(128 + signal.SIGTERM)
    finally:
        _in_job = False


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
        # so it is given one job per worker
        return cf.ProcessPoolExecutor(max_workers=n, initializer=worker_init), n

    return make


def stop_executor(executor: cf.Executor) -> None:
    """Stop what ``executor`` runs: a pool's workers get SIGTERM (their jobs unwind and
    clean up; SIGKILL after :data:`STOP_GRACE` s) and it is shut down; anything else is
    shut down without waiting, which cancels its tasks (Dask: one call for all)."""
    if not isinstance(executor, cf.ProcessPoolExecutor):
        executor.shutdown(wait=False)  # Dask's ClientExecutor: cancels its tasks
        return
    if hasattr(executor, "terminate_workers"):  # Python 3.14
        processes = list((getattr(executor, "_processes", None) or {}).values())
        executor.terminate_workers()
    else:
        processes = list((getattr(executor, "_processes", None) or {}).values())
        for p in processes:
            try:
                p.terminate()
            except (OSError, ValueError, AttributeError):
                pass
    for p in processes:
        p.join(STOP_GRACE)
        if p.is_alive():
            p.kill()
            p.join()
    executor.shutdown(wait=True, cancel_futures=True)


@contextmanager
def sigint_ignored() -> Iterator[None]:
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
# On 2 cores this gives the workers back about 5 % (bench/batch_throughput.py). A task
# goes to a worker only when it has a free thread (saturation 1.0, Dask's default 1.1
# lets a one-thread worker hold two), so a job that crashes its worker takes no other
# job down with it.
LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.scheduler.work-stealing": False,
    "distributed.scheduler.worker-saturation": 1.0,
    "distributed.admin.tick.interval": "200ms",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "2s",
}


@contextmanager
def dask_factory(scheduler: str, workers: int | None,
                 jobs: int | None = None) -> Iterator[ExecutorFactory]:
    """Executors of a Dask client: a LocalCluster (``"local"``: ``workers`` processes, one
    per core by default, no more than ``jobs``) or the cluster at an address. Each is
    given two jobs per worker thread at a time, at least :data:`DASK_WINDOW`."""
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
            with sigint_ignored():  # the worker processes inherit it: Ctrl-C is ours
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

        def make(jobs: int) -> tuple[cf.Executor, int]:
            threads = sum(client.nthreads().values())
            return client.get_executor(pure=False), max(DASK_WINDOW, 2 * threads)

        try:
            yield make
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
