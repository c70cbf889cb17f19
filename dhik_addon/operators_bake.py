"""``dhik.bake``: solve every frame of the range with the core and key the armature.

Scripts and background mode run ``execute`` (synchronous). In the UI, ``invoke`` runs
the solve in a worker thread (it touches no Blender data) and a modal timer shows
progress; Esc stops it and the armature stays as it was, because nothing is keyed
before the solve has finished. Either way the bake is one undo step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import bpy

from ..core.app.bake import BakeResult
from ..core.errors import DhikError
from .access import window_manager
from .armature_read import skeleton_notes
from .bake_job import BakeJob, BakeThread
from .props import settings
from .safety import bake_unavailable, posed_fixed_bones

if TYPE_CHECKING:
    from .access import OperatorResult

TIMER_STEP = 0.1  # seconds between progress updates of an interactive bake


class DHIK_OT_bake(bpy.types.Operator):
    """Solve IK for every frame of the range and key the armature's bones"""

    bl_idname = "dhik.bake"
    bl_label = "Bake IK"
    bl_options = {"REGISTER", "UNDO"}

    _worker: BakeThread | None = None
    _timer: bpy.types.Timer | None = None

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        problem = bake_unavailable(context)
        if problem is not None:
            cls.poll_message_set(problem)
        return problem is None

    def _finish(
        self, context: bpy.types.Context, job: BakeJob, result: BakeResult
    ) -> OperatorResult:
        posed: list[str] = []
        if job.bake_action == "CURRENT":  # (a new action starts every bone at rest)
            posed = posed_fixed_bones(job.armature, job.skeleton.defn,
                                      [t.name for t in job.tracks])
        try:
            job.apply(context, result)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        if posed:
            self.report({"WARNING"}, f"Bones {', '.join(map(repr, posed))} are fixed joints "
                        "on the chain but posed or animated: the bake took them at rest, so "
                        "where they move the effectors miss their targets")
        check = job.blender_check  # verify.py: Blender's evaluated effectors after the keys
        level: Literal["INFO", "WARNING"] = (
            "INFO" if result.converged_count == len(result.records)
            and not (check and check.missed) else "WARNING"
        )
        for note in skeleton_notes(job.armature):  # Blender IK settings kept approximately
            self.report({"WARNING"}, f"Approximate: {note}")
        s = settings(context)
        self.report({level}, f"{s.result_summary}; {s.result_keys} keys on "
                    f"{len(job.solved)} bones (largest key error {s.result_key_error:.3g})")
        return {"FINISHED"}

    def execute(self, context: bpy.types.Context) -> OperatorResult:
        wm = window_manager(context)
        try:
            job = BakeJob.prepare(context)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        wm.progress_begin(0, job.frame_count)
        try:
            result = job.solve(lambda done, _total: wm.progress_update(done))
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
            job = BakeJob.prepare(context)
        except DhikError as err:
            self.report({"ERROR"}, str(err))
            return {"CANCELLED"}
        wm = window_manager(context)
        self._worker = BakeThread(job)
        self._worker.start()
        wm.progress_begin(0, job.frame_count)
        self._timer = wm.event_timer_add(TIMER_STEP, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def _stop(self, context: bpy.types.Context) -> None:
        wm = window_manager(context)
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> OperatorResult:
        worker = self._worker
        assert worker is not None
        if event.type == "ESC":
            worker.cancel()
            self._stop(context)
            self.report({"WARNING"}, f"Bake cancelled at frame {worker.done}/{worker.total}; "
                        "nothing was changed")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        window_manager(context).progress_update(worker.done)
        if not worker.finished():
            return {"RUNNING_MODAL"}
        self._stop(context)
        if worker.error is not None:
            self.report({"ERROR"}, str(worker.error))
            return {"CANCELLED"}
        assert worker.result is not None
        return self._finish(context, worker.job, worker.result)
