"""The live preview's plan of the range: the bake's own solve of the frames it read, run
in a worker thread, and each frame's inputs as that bake read them (to tell whether a
frame still shows what Bake would key)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.app.bake import BakeResult
from .bake_job import BakeCancelled, BakeJob, BakeRig


@dataclass
class Plan:
    """A bake of the range for one generation of the inputs: its frames' inputs as the
    bake read them, and, when the worker is done, each frame's solved joint values."""

    generation: int
    job: BakeJob
    inputs: dict[int, list[np.ndarray]]
    thread: threading.Thread | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    result: BakeResult | None = None
    error: BaseException | None = None
    values: dict[int, dict[str, Any]] | None = None  # frame -> solved joints' entries

    @classmethod
    def start(cls, generation: int, job: BakeJob, inputs: dict[int, list[np.ndarray]]
              ) -> Plan:
        """Solve the range ``job`` read in a daemon worker thread (``cancel`` stops it at
        the next progress call); the main thread takes ``result`` or ``error`` up."""
        plan = cls(generation, job, inputs)

        def run() -> None:
            def progress(_done: int, _total: int) -> None:
                if plan.cancel.is_set():
                    raise BakeCancelled

            try:
                plan.result = job.solve(progress)
            except BakeCancelled:
                pass
            except BaseException as err:  # taken up on the main thread
                plan.error = err

        plan.thread = threading.Thread(target=run, name="dhik-preview-plan", daemon=True)
        plan.thread.start()
        return plan


def flat_numbers(entry: dict[str, Any]) -> list[float]:
    """The numbers of a SPEC 3.3 entry (for comparing driven values)."""
    out: list[float] = []
    for k in ("angle", "displacement", "quaternion"):
        v = entry.get(k)
        if v is not None:
            out.extend(np.ravel(np.asarray(v, dtype=float)).tolist())
    return out


def job_inputs(job: BakeJob, rig: BakeRig) -> dict[int, list[np.ndarray]]:
    """Per frame of the job, what the preview reads of a frame, as the job read it: each
    target's 4x4 pose and each pole's position in the armature's space (m), then each
    driven joint's values (rad, m, or a ``(w, x, y, z)`` quaternion)."""
    out: dict[int, list[np.ndarray]] = {}
    driven = dict(job.driven) if job.driven else {}
    for k, (frame, _) in enumerate(job.tracks[0].targets):
        row = [t.targets[k][1] for t in job.tracks]
        row += [np.array(t.pole[k][1], dtype=float) for t in job.tracks if t.pole is not None]
        given = driven.get(frame, {})
        row += [np.array(flat_numbers(given[name]), dtype=float) for name in rig.driven_names]
        out[int(frame)] = row
    return out
