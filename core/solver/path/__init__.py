"""Flip-free trajectories on the robust LM: ``search`` (what a trajectory's search
shares), ``candidates`` (grid tracks over the self-motion), ``ladder`` (the lazy
least-motion path), ``fill`` (every frame of it), ``relax`` (its peaks relaxed),
``swing`` (a path swung toward its poles), ``stretches`` (target cuts, and stretches
out of reach, followed), ``judge`` (how a path is judged), ``ends`` (where a path
starts and ends), ``cycles`` (clips that repeat), ``plan`` (a clip planned, pass by pass),
``solve`` (``solve_path``: turns, poles, the whole answer)."""

from .cheap import cheap_path
from .search import PathResult
from .solve import solve_path

__all__ = ["PathResult", "cheap_path", "solve_path"]
