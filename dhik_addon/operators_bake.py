"""``dhik.bake``: solve every frame of the range with the core and key the armature.

Scripts and background mode run ``execute`` (synchronous, with progress). In the UI,
``invoke`` starts a :class:`~.bake_run.BakeSession` and a modal timer steps it: the
targets are read a chunk of frames at a time, the solve runs in a worker thread, the
keys are planned and then written; the status bar and the cursor show the progress.
Esc at any point before the write stops it and the armature stays as it was. Either
way the bake is one undo step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import bpy

from ..core.app.bake import BakeResult
from ..core.app.blas_threads import one_blas_thread
from ..core.app.collector import collector_paused
from ..core.errors import DhikError
from .access import window_manager
from .bake_job import BakeJob, Preparation
from .bake_run import BakeSession
from .props import settings
from .safety import bake_unavailable, posed_fixed_bones

if TYPE_CHECKING:
    from .access import OperatorResult

TIMER_STEP = 0.1  # seconds between progress updates while the worker solves
READ_STEP = 0.01  # seconds between the steps that read the targets
PROGRESS_UNITS = 10_000  # the cursor's progress scale
# frames read at a time by a blocking bake (the current frame is set again after each
# chunk: chunks of a frame or two would double the frames stepped)
EXECUTE_CHUNK = 64


def _status(context: bpy.types.Context, text: str | None) -> None:
    """Show ``text`` in the status bar (None: clear it), where there is one."""
    workspace = context.workspace
    if workspace is not None:
        workspace.status_text_set(text)


class DHIK_OT_bake(bpy.types.Operator):
    """Solve IK for every frame of the range and key the armature's bones"""

    bl_idname = "dhik.bake"
    bl_label = "Bake IK"
    bl_options = {"REGISTER", "UNDO"}

    _session: BakeSession | None = None
    _timer: bpy.types.Timer | None = None
    _interval = 0.0
    _posed: list[str] = []

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        problem = bake_unavailable(context)
        if problem is not None:
            cls.poll_message_set(problem)
        return problem is None

    def _finish(
        self, context: bpy.types.Context, job: BakeJob, result: BakeResult
    ) -> OperatorResult:
        posed = _posed(job)
        try:
            job.apply(context, result)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        return self._report(context, job, result, posed)

    def _report(self, context: bpy.types.Context, job: BakeJob, result: BakeResult,
                posed: list[str]) -> OperatorResult:  # fmt: skip
        if posed:
            self.report({"WARNING"}, f"Bones {', '.join(map(repr, posed))} are fixed joints "
                        "on the chain but posed or animated: the bake took them at rest, so "
                        "where they move the effectors miss their targets")
        if job.held:
            named = ", ".join(f"bones[{b!r}].{prop}" for b, prop in job.held)
            first, last = job.held_frames
            self.report({"WARNING"}, f"{named}: not at rest, and no joint of the bone "
                        f"carries it: the bake holds it at rest on frames {first}-{last} (the "
                        "solve takes it so); key it again after the bake, or move it to a "
                        "bone outside the chain")
        check = job.blender_check  # verify.py: Blender's evaluated effectors after the keys
        level: Literal["INFO", "WARNING"] = (
            "INFO" if result.converged_count == len(result.records)
            and not (check and check.missed) else "WARNING"
        )
        for note in job.notes:  # Blender IK settings kept approximately (skeleton_notes)
            self.report({"WARNING"}, f"Approximate: {note}")
        s = settings(context)
        self.report({level}, f"{s.result_summary}; {s.result_keys} keys on "
                    f"{len(job.solved)} bones (largest key error {s.result_key_error:.3g})")
        return {"FINISHED"}

    def execute(self, context: bpy.types.Context) -> OperatorResult:
        # a full collection walks all of Blender's objects; OpenBLAS threads stall
        with collector_paused(), one_blas_thread():
            return self._execute(context)

    def _execute(self, context: bpy.types.Context) -> OperatorResult:
        wm = window_manager(context)
        try:
            prep = Preparation(context)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        frames = max(prep.total, 1)
        wm.progress_begin(0, PROGRESS_UNITS)
        try:
            while not prep.finished:  # reading the targets: the first 5 %
                prep.read(max(EXECUTE_CHUNK, frames // 100))
                wm.progress_update(PROGRESS_UNITS * 0.05 * prep.done / frames)
            job = prep.finish(context)
            result = job.solve(lambda done, _total: wm.progress_update(
                PROGRESS_UNITS * (0.05 + 0.95 * done / frames)))
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        finally:
            wm.progress_end()
        return self._finish(context, job, result)

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> OperatorResult:
        if context.window is None:
            return self.execute(context)
        try:
            self._session = BakeSession(context)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        wm = window_manager(context)
        wm.progress_begin(0, PROGRESS_UNITS)
        self._set_timer(context, READ_STEP)
        wm.modal_handler_add(self)
        _status(context, self._session.status())
        return {"RUNNING_MODAL"}

    def _set_timer(self, context: bpy.types.Context, interval: float) -> None:
        """A timer event every ``interval`` seconds (the one before removed)."""
        wm = window_manager(context)
        if self._timer is not None:
            if self._interval == interval:
                return
            wm.event_timer_remove(self._timer)
        self._timer = wm.event_timer_add(interval, window=context.window)
        self._interval = interval

    def _stop(self, context: bpy.types.Context) -> None:
        wm = window_manager(context)
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        _status(context, None)

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> OperatorResult:
        session = self._session
        assert session is not None
        if event.type == "ESC":
            stage, done = session.stage, session.frames_done
            session.cancel()
            self._stop(context)
            where = (f"while reading the targets (frame {done}/{session.total})"
                     if stage == "prepare" else f"at frame {done}/{session.total}"
                     if stage == "solve" else "after the solve")
            self.report({"WARNING"}, f"Bake cancelled {where}; nothing was changed")
            return {"CANCELLED"}
        if event.type != "TIMER":
            # the user may work while the worker solves; reading the targets steps the
            # scene's frames, so input waits until that is done
            return {"PASS_THROUGH"} if session.stage == "solve" else {"RUNNING_MODAL"}
        try:
            if session.stage == "write":  # (read before the keys change the pose)
                assert session.job is not None
                self._posed = _posed(session.job)
            with one_blas_thread():
                written = session.step(context)
        except DhikError as err:
            self._stop(context)
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        except Exception as err:  # the solve's own failure: one line, nothing written
            self._stop(context)
            self.report({"ERROR"}, f"DHIK: bake failed: {type(err).__name__}: {err}")
            return {"CANCELLED"}
        window_manager(context).progress_update(PROGRESS_UNITS * session.fraction())
        _status(context, session.status())
        if not written:
            self._set_timer(context, READ_STEP if session.stage == "prepare" else TIMER_STEP)
            return {"RUNNING_MODAL"}
        self._stop(context)
        assert session.job is not None and session.result is not None
        return self._report(context, session.job, session.result, self._posed)


def _posed(job: BakeJob) -> list[str]:
    """Fixed-joint bones on the chains that are posed or animated (a Current Action bake
    keeps them, but the solve took them at rest)."""
    if job.bake_action != "CURRENT":  # a new action starts every bone at rest
        return []
    return posed_fixed_bones(job.armature, job.skeleton.defn, [t.name for t in job.tracks])
