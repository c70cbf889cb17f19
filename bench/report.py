"""A bench script's markdown report: a line naming the script and the machine, then its
tables; printed, and written to ``out`` unless that is empty."""

from __future__ import annotations

import platform
import time
from pathlib import Path

import numpy as np


def write_report(script: str, started: float, lines: list[str], out: str) -> None:
    """Print and write (to ``out``, '' for nowhere) ``lines`` under a header naming
    ``script``, the machine, Python, numpy and the seconds since ``started``
    (``time.perf_counter``)."""
    head = (f"bench/{script} on {platform.machine()}, 2 cores, Python "
            f"{platform.python_version()}, numpy {np.__version__}; "
            f"{time.perf_counter() - started:.0f} s in all.")
    text = "\n".join([head, "", *lines]) + "\n"
    print(text)
    if out:
        Path(out).write_text(text)
