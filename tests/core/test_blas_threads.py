"""``app.blas_threads``: numpy's OpenBLAS runs one thread while dhik solves (its
threads stall on a busy machine, ``bench/blas_load.py``), as many as before afterwards,
also when solves overlap from several threads; batch workers keep one."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from dhik.app import blas_threads
from dhik.app.blas_threads import one_blas_thread, openblas_threads, set_blas_threads
from fixtures import two_blas_threads

ARM7 = Path(__file__).resolve().parents[2] / "sample_scenes" / "arm7"


def _uses_openblas() -> bool:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]  # type: ignore[index]
    except Exception:  # an old numpy without the dicts: try anyway
        return True
    return "openblas" in str(blas.get("name", "")).lower()


pytestmark = pytest.mark.skipif(not _uses_openblas(), reason="numpy without OpenBLAS")


@pytest.fixture
def two_threads() -> Iterator[tuple[object, object]]:
    """OpenBLAS on two threads for the test, as it was afterwards."""
    with two_blas_threads(openblas_threads()) as api:
        yield api


def test_one_thread_inside_as_many_as_before_after(two_threads) -> None:
    get, _ = two_threads
    with one_blas_thread():
        assert get() == 1
        with one_blas_thread():  # nested
            assert get() == 1
        assert get() == 1
    assert get() == 2
    with pytest.raises(RuntimeError), one_blas_thread():
        raise RuntimeError
    assert get() == 2


def test_overlapping_callers_in_two_threads(two_threads) -> None:
    """A preview's plan in a worker thread and a solve on the main thread: one thread
    until the last of them leaves."""
    get, _ = two_threads
    entered, leave = threading.Event(), threading.Event()
    seen: list[int] = []

    def worker() -> None:
        with one_blas_thread():
            entered.set()
            leave.wait(10)
            seen.append(get())

    t = threading.Thread(target=worker)
    with one_blas_thread():
        t.start()
        assert entered.wait(10)
    assert get() == 1  # the worker is still inside
    leave.set()
    t.join(10)
    assert seen == [1] and get() == 2


def test_a_solve_runs_on_one_thread(two_threads) -> None:
    """``simulate`` (every bake, the preview's plan) solves on one thread: seen from
    inside its progress callback."""
    from dhik.app.bake import simulate
    from dhik.app.formats import load_skeleton, load_targets
    from dhik.app.trajectory import interpolate_keyframes
    from dhik.model.skeleton import Skeleton

    get, _ = two_threads
    skeleton = Skeleton(load_skeleton(ARM7 / "skeleton.json"))
    targets = interpolate_keyframes(load_targets(ARM7 / "targets.json"))[:20]
    seen: set[int] = set()
    result = simulate(skeleton, targets, "Tool", method="robust",
                      progress=lambda _d, _t: seen.add(get()))
    assert seen == {1} and result.records
    assert get() == 2


def test_batch_workers_keep_one_thread() -> None:
    """A pool worker's numpy was loaded before its environment said so: set directly."""
    code = ("from dhik.app.blas_threads import openblas_threads, set_blas_threads\n"
            "from dhik.app.workers import worker_init\n"
            "set_blas_threads(2)\n"
            "worker_init()\n"
            "print(openblas_threads()[0]())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.split() == ["1"]


SOLVE = """
import hashlib, sys
import numpy as np
try:
    import scipy.linalg  # noqa: F401 - its wheel's own OpenBLAS, mapped beside numpy's
except ImportError:
    pass
from dhik.app.blas_threads import one_blas_thread, openblas_threads
r = np.random.default_rng(5)
a = r.random((3, 9, 9))
a = a @ a.transpose(0, 2, 1) + np.eye(9)
def digest():
    return hashlib.md5(np.linalg.solve(a, np.ones((3, 9, 1))).tobytes()).hexdigest()
if sys.argv[1] == "inside":
    openblas_threads()[1](2)
    with one_blas_thread():
        print(digest())
else:
    print(digest())
"""


def test_it_is_numpys_openblas_that_runs_one_thread() -> None:
    """With scipy loaded (its OpenBLAS mapped first), numpy's solves inside
    ``one_blas_thread`` are those of a process started with one OpenBLAS thread (numpy
    1.26's LU rounds differently on two threads)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    inside = subprocess.run([sys.executable, "-c", SOLVE, "inside"], capture_output=True,
                            text=True, timeout=60, check=True, env=env).stdout
    one = subprocess.run([sys.executable, "-c", SOLVE, "plain"], capture_output=True,
                         text=True, timeout=60, check=True,
                         env={**env, "OPENBLAS_NUM_THREADS": "1"}).stdout
    assert inside.strip() and inside == one


def test_without_openblas_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas_threads, "openblas_threads", lambda: None)
    with one_blas_thread():
        pass
    set_blas_threads(1)  # no library: nothing to set, no error
