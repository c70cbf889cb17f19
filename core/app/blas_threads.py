"""One BLAS thread while dhik works: numpy's OpenBLAS threads stall on a busy machine.

The LM solves small linear systems (``numpy.linalg.solve``, 6x6 to 30x30, one per row
or a few hundred at once), and the rig's and targets' reads invert 3x3 matrices. With
numpy 1.26's OpenBLAS (the numpy bpy 5.0.1 runs with here) each such LU call starts
its threads, and when the machine's cores are busy (a render, another program,
two bakes) it waits for them: a 9x9 solve took 4-22 ms instead of 9 us on this 2-core
machine with two busy processes, and the Rigify arm's bake with a pole 2.3-9.8x
Blender's IK time instead of 0.8x (``bench/blas_load.py``; README, "A busy machine").
One thread does every call dhik makes at full speed. Inside :func:`one_blas_thread`
numpy's OpenBLAS (:func:`numpy_openblas`: not scipy's, which its wheel bundles apart)
runs one thread; afterwards it runs as many as before (the setting is the process's:
other code in Blender keeps its own). Where numpy has no OpenBLAS (another BLAS, or
one this module cannot find) it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import ParamSpec, TypeVar

import numpy as np

# the OpenBLAS builds numpy's wheels load: numpy 1.x "openblas64_" (symbols with a 64_
# suffix), numpy 2.x "scipy_openblas64_" (a scipy_ prefix as well), plain builds none
_PREFIXES = ("", "scipy_")
_SUFFIXES = ("64_", "", "_64")

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_depth = 0  # callers inside one_blas_thread, over all threads
_before = 0  # the thread count to restore when the last one leaves


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """OpenBLAS on one thread inside (nested and from several threads: until the last
    caller leaves), as many as before afterwards."""
    global _depth, _before
    api = openblas_threads()
    if api is None:
        yield
        return
    get, put = api
    with _lock:
        if _depth == 0:
            _before = get()
            if _before != 1:
                put(1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _before not in (0, 1):
                put(_before)


def on_one_blas_thread(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside :func:`one_blas_thread`."""

    @functools.wraps(fn)
    def inner(*args: P.args, **kwargs: P.kwargs) -> R:
        with one_blas_thread():
            return fn(*args, **kwargs)

    return inner


def set_blas_threads(count: int) -> None:
    """OpenBLAS on ``count`` threads from now on (a process of dhik's own: a batch
    worker, where the environment variable came too late for numpy's BLAS)."""
    api = openblas_threads()
    if api is not None:
        api[1](count)


@cache
def openblas_threads() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """numpy's OpenBLAS's ``get_num_threads`` and ``set_num_threads``, or None."""
    path = numpy_openblas()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    for prefix in _PREFIXES:
        for suffix in _SUFFIXES:
            get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
            put = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                return (lambda g=get: int(g())), (lambda n, p=put: p(int(n)))
    return None


@cache
def numpy_openblas() -> str | None:
    """The path of the OpenBLAS numpy loaded: the one its wheel bundles (scipy's wheel
    bundles another, often loaded first, which numpy's solves never use), else any
    loaded OpenBLAS (a numpy built against the system's)."""
    root = os.path.realpath(os.path.dirname(np.__file__))
    bundled = {os.path.realpath(os.path.join(root, d))
               for d in ("../numpy.libs", ".libs", ".dylibs")}
    loaded = _loaded_openblas()
    for path in loaded:
        if os.path.dirname(os.path.realpath(path)) in bundled:
            return path
    for d in sorted(bundled):
        found = sorted(glob.glob(os.path.join(d, "*openblas*")))
        if found:
            return found[0]
    return loaded[0] if loaded else None


def _loaded_openblas() -> list[str]:
    """The OpenBLAS libraries this process has mapped (Linux; elsewhere none known)."""
    found: list[str] = []
    if not sys.platform.startswith("linux"):
        return found
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                if "openblas" in os.path.basename(path).lower() and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found
