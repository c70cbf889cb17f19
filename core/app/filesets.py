"""Files read and written as a whole: what a bake read, and its outputs replaced as a set.

- :func:`read_file` reads a whole file and, inside :func:`recording_reads`, records what it
  read (absolute path, size, mtime, SHA-256 of the very bytes): ``dhik bake-many`` keeps
  that in a job's marker, so a job is up to date only while its inputs still hold those
  bytes (an edit during the solve, or new content with an older mtime, re-bakes it).
- :func:`write_files` writes several outputs so that none is replaced unless every one
  was written: each regular file goes to a temporary file beside it (fsync'ed), an output
  that is not a regular file (``/dev/null``, ``/dev/full``, a FIFO) is written into, and
  only then are the temporary files renamed over their targets, with SIGINT and SIGTERM
  held back meanwhile. A failure anywhere (``--report /dev/full``) replaces nothing and
  leaves no temporary file.
"""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, BinaryIO, TextIO

from ..errors import DhikError

#: Writes one output's bytes to the open file it is given.
Writer = Callable[[BinaryIO], object]


@dataclass(frozen=True)
class FileRead:
    """One file as a reader saw it: absolute path, size (bytes), mtime (ns), SHA-256."""

    path: str
    size: int
    mtime_ns: int
    sha256: str

    def as_json(self) -> dict[str, object]:
        return {"size": self.size, "mtime_ns": self.mtime_ns, "sha256": self.sha256}


_READS: ContextVar[list[FileRead] | None] = ContextVar("dhik_reads", default=None)


@contextmanager
def recording_reads() -> Iterator[list[FileRead]]:
    """Every :func:`read_file` of this thread meanwhile is appended to the list yielded."""
    reads: list[FileRead] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def read_file(path: str | os.PathLike) -> bytes:
    """The whole file's bytes (OSError as ``open`` raises it); recorded when recording."""
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        data = f.read()
    reads = _READS.get()
    if reads is not None:
        reads.append(FileRead(os.path.abspath(path), len(data), info.st_mtime_ns,
                              hashlib.sha256(data).hexdigest()))
    return data


def file_digest(path: str | os.PathLike) -> str | None:
    """SHA-256 of a regular file's content now; None if it is missing, unreadable or not a
    regular file (a FIFO cannot be read twice: never up to date)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # before open: a FIFO's open blocks
            return None
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            digest = hashlib.sha256()
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back meanwhile, then handled as they would have been: a
    few renames that belong together are not cut in two. Python-level: the handlers are
    swapped for ones that only note the signal (whichever thread the kernel delivered it
    to), and the noted signals are raised again afterwards. A no-op off the main thread
    (Python runs handlers on the main thread, so the caller's thread is not interrupted)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    previous: dict[signal.Signals, Any] = {}
    for held in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(held) is not None:  # None: not set from Python, left alone
            previous[held] = signal.signal(held, lambda n, _f: noted.append(n))
    try:
        yield
    finally:
        for held, handler in previous.items():
            signal.signal(held, handler)
        for number in dict.fromkeys(noted):
            signal.raise_signal(number)


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _cannot(source: str, exc: OSError) -> DhikError:
    return DhikError(source, f"cannot write: {exc.strerror or exc}")


def fsync_folder(directory: str) -> None:
    """Make renames in ``directory`` durable (POSIX); quietly nothing where it cannot."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def write_files(items: Sequence[tuple[str | os.PathLike, Writer]]) -> None:
    """Write every ``(path, writer)`` so that the regular files are replaced together or
    not at all (see the module docstring). DhikError naming the path on an OSError; an
    existing folder is refused. KeyboardInterrupt (the CLI's SIGTERM too) leaves nothing.
    """
    staged: list[tuple[str, str]] = []  # (temporary file, target)
    direct: list[tuple[str, str, Writer]] = []
    source = ""
    try:
        for path, write in items:
            source, target = str(path), os.path.abspath(path)
            try:
                info: os.stat_result | None = os.stat(target)
            except OSError:
                info = None
            if info is not None and stat.S_ISDIR(info.st_mode):
                raise DhikError(source, "cannot write: is a folder")
            if info is not None and not stat.S_ISREG(info.st_mode):
                direct.append((source, target, write))
                continue
            mode = stat.S_IMODE(info.st_mode) if info is not None else _new_file_mode()
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp",
                                       dir=os.path.dirname(target))
            staged.append((tmp, target))
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
        for item in direct:  # devices and FIFOs: written into, in order
            source, target = item[0], item[1]
            with open(target, "wb") as f:
                item[2](f)
        with signals_held():
            while staged:
                tmp, target = staged[0]
                source = target
                os.replace(tmp, target)
                staged.pop(0)
    except BaseException as exc:
        for tmp, _ in staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, OSError):
            raise _cannot(source, exc) from None
        raise
    for directory in {os.path.dirname(os.path.abspath(p)) for p, _ in items}:
        fsync_folder(directory)


def text_writer(write: Callable[[TextIO], object]) -> Writer:
    """A :data:`Writer` from a function that writes UTF-8 text (``"\\n"`` line ends) to a
    text file object."""
    import io

    def binary(f: BinaryIO) -> None:
        text = io.TextIOWrapper(f, encoding="utf-8", newline="\n")
        try:
            write(text)
            text.flush()
        finally:
            text.detach()

    return binary


def bytes_writer(data: bytes) -> Writer:
    """A :data:`Writer` of fixed bytes."""
    return lambda f: f.write(data)
