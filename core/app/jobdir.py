"""One ``dhik bake-many`` job's folder ``OUTDIR/<name>/``: its files replaced as a set, what
they were baked from, and whether they are up to date.

A job writes ``animation.json`` (or ``animation.npz`` / ``.csv``), ``report.json`` and the
marker ``.dhik-job.json`` into a staging folder ``.dhik-staging-XXXX`` inside the job
folder, then commits: the staging folder is renamed ``.dhik-commit-XXXX`` (the commit
point) and its files are moved over the old ones, the marker last, with SIGINT and
SIGTERM held back. A worker killed after the commit point leaves a ``.dhik-commit-``
folder that the next run (or the batch itself, once its workers are gone) finishes;
one killed before it leaves a staging folder that is removed. So the job's files are
the old set or the new one, never a mixture, and nothing is written beside them.

While it bakes, a job holds an exclusive ``flock`` on its folder: two runs on one OUTDIR
take turns on a job (the second finds it up to date) and only the holder tidies the
folder, so neither removes the other's files. Where the file system has no such locks
(some network file systems), jobs run unlocked and leftover staging folders stay.

The marker records the job's fingerprint (inputs' paths and options), every input file
as the bake read it (size, mtime, SHA-256 of the bytes it parsed:
:func:`.filesets.recording_reads`) and every output (size, mtime, inode). A job is up to
date while each input's content still has that SHA-256 and each output is the file the
job wrote, whatever the mtimes say now (``cp -p``, ``rsync -t`` or an edit during the
solve re-bake it). Inputs of a job are never written or removed: an output path that is
an input (``OUTDIR/<job>/animation.json`` as the ``driven`` file) fails the job.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import DhikError
from .arrays import output_format
from .bakejob import run_bake
from .filesets import file_digest, fsync_folder, recording_reads, signals_held
from .jsonio import check_not_inputs, dumps_json
from .manifest import Job

try:
    import fcntl
except ImportError:  # not POSIX: jobs run unlocked
    fcntl = None  # type: ignore[assignment]

ANIMATIONS = {"json": "animation.json", "npz": "animation.npz", "csv": "animation.csv"}
REPORT, MARKER = "report.json", ".dhik-job.json"
STAGING, COMMIT = ".dhik-staging-", ".dhik-commit-"
MARKER_VERSION = 2
DONE, SKIPPED, FAILED, NOT_RUN = "done", "skipped", "failed", "not run"


@dataclass
class JobResult:
    """What became of one job; ``frames``/``converged`` count the frames it baked."""

    name: str
    status: str
    error: str | None = None
    frames: int = 0
    converged: int = 0
    wall_time: float = 0.0  # seconds, in the worker


def animation_name(job: Job) -> str:
    """``animation.json``, ``.npz`` or ``.csv``: the job's format."""
    return ANIMATIONS[output_format(job.options.format, "")]


def output_names(job: Job) -> list[str]:
    """The job's files in the order a commit moves them (the marker last)."""
    return [animation_name(job), REPORT, MARKER]


@contextmanager
def job_lock(folder: str, blocking: bool = True) -> Iterator[bool | None]:
    """An exclusive flock on ``folder`` meanwhile: yields True (held), False (another
    process holds it; only when not ``blocking``) or None (no locks here)."""
    if fcntl is None:
        yield None
        return
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        except OSError:  # ENOLCK, EBADF on some network file systems
            yield None
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def _inside(path: str, folder: str) -> bool:
    real, base = os.path.realpath(path), os.path.realpath(folder)
    return real == base or real.startswith(base + os.sep)


_ORDER = [*ANIMATIONS.values(), REPORT, MARKER]


def _finish_commit(commit: str, folder: str, protected: Sequence[str]) -> None:
    """Move a commit folder's files into ``folder`` (the animation first, the marker
    last), drop the files of the set before that the new one has not (another format's
    animation), remove it."""
    names = sorted(os.listdir(commit),
                   key=lambda n: _ORDER.index(n) if n in _ORDER else len(_ORDER))
    for name in names:
        os.replace(os.path.join(commit, name), os.path.join(folder, name))
    kept = set(names)
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as f:
            kept |= set(json.load(f).get("outputs", {}))
    except (OSError, ValueError, AttributeError):
        pass
    for name in ANIMATIONS.values():
        old = os.path.join(folder, name)
        if name not in kept and os.path.isfile(old) and not any(
                _inside(p, old) for p in protected):
            os.unlink(old)
    os.rmdir(commit)


def recover(folder: str, protected: Sequence[str] = ()) -> None:
    """With the job's lock held: finish the commits a killed worker began, remove the
    staging folders of those killed before (never one holding a ``protected`` path)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        if any(_inside(p, entry.path) for p in protected):
            continue
        if entry.name.startswith(COMMIT):
            _finish_commit(entry.path, folder, protected)
        elif entry.name.startswith(STAGING):
            shutil.rmtree(entry.path, ignore_errors=True)


def tidy(folder: str, protected: Sequence[str] = ()) -> None:
    """After a job that did not finish, once no worker of this run can be in it: recover
    (if no other run holds the folder) and remove the folder if it is empty."""
    try:
        with job_lock(folder, blocking=False) as held:
            if held:
                recover(folder, protected)
    except OSError:
        pass
    try:
        os.rmdir(folder)  # only when empty: a fresh folder of a job that failed
    except OSError:
        pass


def _stat_key(path: str) -> dict[str, int]:
    info = os.stat(path)
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "inode": info.st_ino}


class Digests:
    """SHA-256 of input files, each computed once per run while its stat is unchanged (a
    skeleton shared by 10,000 jobs is read once)."""

    def __init__(self) -> None:
        self.known: dict[str, tuple[tuple[int, int, int, int], str | None]] = {}

    def __call__(self, path: str) -> str | None:
        try:
            info = os.stat(path)
        except OSError:
            return None
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        seen = self.known.get(path)
        if seen is None or seen[0] != key:
            seen = (key, file_digest(path))
            self.known[path] = seen
        return seen[1]


def up_to_date(job: Job, outdir: str, digests: Digests | None = None) -> bool:
    """True when the job's files are the set it wrote, baked from this fingerprint, and
    every input still holds the bytes that bake read."""
    folder = os.path.join(outdir, job.name)
    digests = digests or Digests()
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as f:
            marker = json.load(f)
        if not isinstance(marker, dict) or marker.get("version") != MARKER_VERSION:
            return False
        if marker["job"] != json.loads(json.dumps(job.fingerprint())):
            return False
        outputs = marker["outputs"]
        if sorted(outputs) != sorted(output_names(job)[:-1]):
            return False
        for name, key in outputs.items():
            if _stat_key(os.path.join(folder, name)) != key:
                return False
        inputs = marker["inputs"]
        if sorted(inputs) != sorted({os.path.abspath(p) for p in job.inputs()}):
            return False
        return all(digests(path) == read["sha256"] for path, read in inputs.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def baked_result(job: Job, outdir: str, otherwise: str = DONE) -> JobResult:
    """The result of an up-to-date job found in its folder: DONE with its frames when this
    run (``job.run``) baked it (a Dask result lost with its worker, a stopped batch),
    else ``otherwise`` (SKIPPED: another run did)."""
    folder = os.path.join(outdir, job.name)
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as f:
            ours = job.run != "" and json.load(f).get("run") == job.run
        if not ours:
            return JobResult(job.name, otherwise)
        with open(os.path.join(folder, REPORT), encoding="utf-8") as f:
            rep = json.load(f)
        return JobResult(job.name, DONE, None, int(rep["frames"]), int(rep["converged"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return JobResult(job.name, otherwise)


def bake_job(job: Job, outdir: str) -> JobResult:
    """Bake one job into ``outdir/<name>/`` (runs in a worker); never raises for bad input.

    Its files are replaced as a set (see the module docstring); a job found up to date
    once its lock is held (another run baked it meanwhile) is skipped unless forced.
    """
    start = time.perf_counter()
    folder = os.path.join(outdir, job.name)

    def failed(message: str) -> JobResult:
        return JobResult(job.name, FAILED, message, wall_time=time.perf_counter() - start)

    created = False
    try:
        if job.error:
            raise DhikError(job.error)
        names = output_names(job)
        check_not_inputs([os.path.join(folder, n) for n in names], job.inputs())
        created = not os.path.isdir(folder)
        os.makedirs(folder, exist_ok=True)
        with job_lock(folder) as held:
            if held is not None:
                recover(folder, job.inputs())
            if held and not job.force and up_to_date(job, outdir):
                return baked_result(job, outdir, SKIPPED)  # another run baked it meanwhile
            result = _bake_and_commit(job, folder, names)
    except DhikError as err:
        return failed(str(err))
    except OSError as err:
        where = f"{err.filename}: " if err.filename is not None else ""
        return failed(f"{where}{err.strerror or err}")
    except Exception as err:  # a bug in dhik: recorded, and the batch goes on
        return failed(f"internal error: {type(err).__name__}: {err}")
    finally:
        if created:
            try:
                os.rmdir(folder)  # only when nothing was committed into it
            except OSError:
                pass
    return JobResult(job.name, DONE, None, len(result.records), result.converged_count,
                     time.perf_counter() - start)


def _bake_and_commit(job: Job, folder: str, names: list[str]) -> Any:
    """Bake into a staging folder, write the marker there, commit; the bake's result."""
    staging = tempfile.mkdtemp(prefix=STAGING, dir=folder)
    try:
        with recording_reads() as reads:
            result = run_bake(job.skeleton, job.targets, job.effector, job.tracks,
                              job.options, os.path.join(staging, names[0]),
                              os.path.join(staging, REPORT))
        marker = {
            "version": MARKER_VERSION,
            "run": job.run,
            "job": job.fingerprint(),
            "inputs": {r.path: r.as_json() for r in reads},
            "outputs": {n: _stat_key(os.path.join(staging, n)) for n in names[:-1]},
        }
        text = dumps_json(marker, os.path.join(folder, MARKER)) + "\n"
        with open(os.path.join(staging, MARKER), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        fsync_folder(staging)
        commit = os.path.join(folder, COMMIT + os.path.basename(staging)[len(STAGING):])
        with signals_held():
            os.rename(staging, commit)  # the commit point
            _finish_commit(commit, folder, job.inputs())
        fsync_folder(folder)
        return result
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)
