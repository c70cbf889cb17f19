"""An interactive bake, step by step: read the targets, solve in a worker thread, apply.

The modal ``dhik.bake`` drives a :class:`BakeSession` from timer events; Esc calls
:meth:`BakeSession.cancel`. Stages:

1. ``prepare``: the scene was validated when the session was made (an error is reported
   at once); each step reads the targets :data:`READ_CHUNK` frames at a time for about
   :data:`STEP_SECONDS` (at least one chunk), so progress shows and Esc is seen in
   between, and a short bake is read in one step.
2. ``solve``: :class:`BakeThread` runs the core in a worker thread (it touches no
   Blender data). The core calls the progress callback during the solve; the callback
   raises :class:`~.bake_job.BakeCancelled` once a cancel was asked for, which stops
   the core there.
3. ``plan``: every key is planned (nothing changes yet; Esc may still arrive).
4. ``write``: animation.json, keys, error curves, markers: the only stage that changes
   the scene, in one step.

A cancel at any stage before ``write`` leaves the scene as it was (the current frame
included), also when the solve had already finished: its result is dropped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import bpy

from ..core.app.bake import BakeResult
from .bake_job import BakeCancelled, BakeJob, Preparation
from .bake_keys import KeyPlan

STEP_SECONDS = 0.1  # target reading in one step of an interactive bake (s, about)
READ_CHUNK = 16  # frames read between two looks at the clock
CANCEL_WAIT = 1.0  # s: how long a cancel waits for the worker thread to stop
PREPARE_SHARE = 0.05  # of the progress bar: reading the targets (the rest: the solve)


class BakeThread:
    """The solve step in a worker thread, with progress and cancellation (modal bakes).

    ``observer(done, total)`` (frames), when given, is called in the worker thread at
    every progress report of the core, before the cancel check (tests use it to act at
    a known point of the solve)."""

    def __init__(self, job: BakeJob,
                 observer: Callable[[int, int], None] | None = None) -> None:  # fmt: skip
        self.job = job
        self.done = 0
        self.total = job.frame_count
        self.reports = 0  # progress reports of the core so far
        self.result: BakeResult | None = None
        self.error: BaseException | None = None
        self.observer = observer
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dhik-bake", daemon=True)

    def _progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        self.reports += 1
        if self.observer is not None:
            self.observer(done, total)
        if self._cancel.is_set():
            raise BakeCancelled

    def _run(self) -> None:
        try:
            result = self.job.solve(self._progress)
        except BakeCancelled:
            return
        except BaseException as err:  # reported by the operator in the main thread
            self.error = err
            return
        if not self._cancel.is_set():  # a cancel after the last report drops the result
            self.result = result

    def start(self) -> None:
        self._thread.start()

    def finished(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread (up to ``timeout`` seconds); whether it has stopped."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self, wait: float = CANCEL_WAIT) -> bool:
        """Ask the solve to stop at the core's next progress report, wait up to ``wait``
        seconds for it (never longer: the UI stays responsive); whether the thread has
        stopped. Its result is never kept."""
        self._cancel.set()
        self.result = None
        return self.wait(wait)


class BakeSession:
    """One interactive bake, advanced by :meth:`step` (see the module docstring).

    Making it validates the scene (DhikError, nothing changed). ``observer`` goes to
    the :class:`BakeThread`."""

    def __init__(self, context: bpy.types.Context,
                 observer: Callable[[int, int], None] | None = None,
                 step_seconds: float = STEP_SECONDS) -> None:  # fmt: skip
        self.observer = observer
        self.step_seconds = step_seconds
        self.prep: Preparation | None = Preparation(context)
        self.total = self.prep.total
        self.stage = "prepare"  # prepare, solve, plan, write, done, cancelled
        self.job: BakeJob | None = None
        self.worker: BakeThread | None = None
        self.planned: KeyPlan | None = None
        self.result: BakeResult | None = None

    def step(self, context: bpy.types.Context) -> bool:
        """Advance one stage's worth of work; True once the bake is written. DhikError
        (or the solve's exception) when it fails: nothing is written then."""
        if self.stage == "prepare":
            self._prepare(context)
        elif self.stage == "solve":
            worker = self.worker
            assert worker is not None
            if worker.finished():
                if worker.error is not None:
                    self.stage = "cancelled"
                    raise worker.error
                assert worker.result is not None
                self.result = worker.result
                self.stage = "plan"
        elif self.stage == "plan":
            assert self.job is not None and self.result is not None
            self.planned = self.job.plan(context, self.result)
            self.stage = "write"
        elif self.stage == "write":
            assert self.job is not None and self.result is not None
            assert self.planned is not None
            self.stage = "done"
            self.job.write(context, self.result, self.planned)
        return self.stage == "done"

    def _prepare(self, context: bpy.types.Context) -> None:
        prep = self.prep
        assert prep is not None
        until = time.perf_counter() + self.step_seconds
        prep.read(READ_CHUNK)
        while not prep.finished and time.perf_counter() < until:
            prep.read(READ_CHUNK)
        if prep.finished:
            self.job = prep.finish(context)
            self.prep = None
            self.worker = BakeThread(self.job, self.observer)
            self.worker.start()
            self.stage = "solve"

    def cancel(self) -> None:
        """Stop here: nothing is written from now on (the solve, if running, stops at
        the core's next progress report)."""
        if self.stage == "done":
            return
        self.stage = "cancelled"
        self.result = self.planned = None
        if self.worker is not None:
            self.worker.cancel()

    @property
    def frames_done(self) -> int:
        """Frames of the current stage done (read, or solved)."""
        if self.prep is not None:
            return self.prep.done
        return self.worker.done if self.worker is not None else 0

    def fraction(self) -> float:
        """The whole bake's progress, 0..1 (reading the targets is its first
        :data:`PREPARE_SHARE`)."""
        total = max(self.total, 1)
        if self.stage == "prepare":
            return PREPARE_SHARE * self.frames_done / total
        if self.stage == "solve":
            return PREPARE_SHARE + (1 - PREPARE_SHARE) * self.frames_done / total
        return 1.0

    def status(self) -> str:
        """One line for the status bar."""
        if self.stage == "prepare":
            what = f"reading targets, frame {self.frames_done}/{self.total}"
        elif self.stage == "solve":
            what = f"solving, {self.frames_done}/{self.total} frames"
        else:
            what = "keying"
        return f"DHIK bake: {what} (Esc cancels)"
