"""Python's cyclic garbage collector paused over one bulk job.

A bake or an import builds and drops hundreds of thousands of objects (JSON keyframes,
per-frame records, animation.json's rows). Each of those allocations counts toward the
collector's thresholds, and now and then a full collection walks every object in the
process: 20-30 ms inside Blender, where that is everything Blender keeps alive. Nothing
such a job makes lives in a reference cycle that needs collecting before it ends, so the
collector waits until then (reference counting still frees everything at once).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off inside, as it was before afterwards (nested: a no-op)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
