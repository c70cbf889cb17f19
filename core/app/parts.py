"""The bake's effectors as the robust engine solves them: parts of effectors whose solved
joints touch (solved together; the others apart), each with its joint space, its poles
and the values of its held joints per frame. Shared by the bake and the live solve.

Targets are world 4x4 matrices (metres); coordinates rad and m.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..model.joint_space import BatchedModel
from ..model.skeleton import Skeleton
from ..solver.lm import PoleSet, pole_points
from .inputs import EffectorTrack


def held_rows(model: BatchedModel, frames: Sequence[Any]) -> NDArray[np.float64]:
    """The held columns' values (k, n) of ``frames`` (rad, m): each frame's driven values
    (``FrameTargets.driven``), the T-pose where none are given."""
    out = np.zeros((len(frames), model.n))
    cache: dict[int, NDArray[np.float64]] = {}
    for i, frame in enumerate(frames):
        given = getattr(frame, "driven", None)
        if given:
            row = cache.get(id(given))
            if row is None:
                row = cache[id(given)] = model.coordinates(given)
            out[i] = row
    return out


class Part:
    """Effectors solved together: their ``model`` (with the points their poles need),
    their indices among all effectors, the model's columns in the ``whole`` model's,
    the poles' effectors (indices into the part's) and angles, the poses around the
    range as its coordinates, and the last frame solved (where the next window starts)."""

    def __init__(self, skeleton: Skeleton, tracks: Sequence[EffectorTrack],
                 effectors: list[int], whole: BatchedModel,
                 previous: Mapping[str, Mapping[str, Any]] | None,
                 following: Mapping[str, Mapping[str, Any]] | None) -> None:  # fmt: skip
        self._defn = skeleton.defn
        self._names = [tracks[e].name for e in effectors]
        self._lengths = [tracks[e].chain_length for e in effectors]
        self.poled = [k for k, e in enumerate(effectors) if tracks[e].pole]
        self.angles = [tracks[effectors[k]].pole_angle for k in self.poled]
        self.effectors = effectors
        # the part's joints are its effectors' paths, in the whole's (file) order
        on_path = whole.paths[effectors].any(axis=0)
        self.columns = [int(c) for c in np.flatnonzero(on_path)]
        self._solved = int(np.count_nonzero(on_path & ~whole.held))
        self._around = previous, following
        self.last: NDArray[np.float64] | None = None

    @functools.cached_property
    def model(self) -> BatchedModel:
        """The part's joint space, built when the part is solved on its own (not when
        the parts' cheap pass runs together in the whole's)."""
        model = BatchedModel(self._defn, self._names, self._lengths)
        if self.poled:
            model = BatchedModel(self._defn, self._names, self._lengths,
                                 points=pole_points(model.chains, self.poled))
        return model

    @property
    def before(self) -> NDArray[np.float64] | None:
        previous = self._around[0]
        return self.model.coordinates(previous) if previous else None

    @property
    def after(self) -> NDArray[np.float64] | None:
        following = self._around[1]
        return self.model.coordinates(following) if following else None

    def redundancy(self, weights: Sequence[tuple[float, float]]) -> int:
        """Solved columns beyond the counted error rows (3 per position and orientation
        with a weight above 0, one per pole; ``weights`` the part's effectors'): the
        dimension of its self-motion."""
        rows = sum(3 * (wp > 0) + 3 * (wr > 0) for wp, wr in weights) + len(self.poled)
        return self._solved - rows

    def poles(self, frames: Sequence[Any]) -> PoleSet | None:
        """The part's poles on ``frames`` (``FrameTargets.poles``), or None."""
        if not self.poled:
            return None
        pos = np.array([[frame.poles[self.effectors[k]].position for k in self.poled]
                        for frame in frames], dtype=float)
        return PoleSet.build(self.model, self.poled, pos, self.angles)


def coupled(model: BatchedModel) -> list[list[int]]:
    """Groups of effectors (indices) whose paths share a solved (not held) column,
    directly or through others; each group in effector order, groups by first effector."""
    moving = model.paths & ~model.held[None, :]  # (m, n)
    group = list(range(len(model.effectors)))

    def top(e: int) -> int:
        while group[e] != e:
            e = group[e]
        return e

    for c in range(model.n):
        on = np.flatnonzero(moving[:, c])
        for e in on[1:]:
            group[top(int(e))] = top(int(on[0]))
    out: dict[int, list[int]] = {}
    for e in range(len(group)):
        out.setdefault(top(e), []).append(e)
    return list(out.values())


def parts_of(skeleton: Skeleton, tracks: Sequence[EffectorTrack],
             previous: Mapping[str, Mapping[str, Any]] | None = None,
             following: Mapping[str, Mapping[str, Any]] | None = None
             ) -> tuple[BatchedModel, list[Part]]:  # fmt: skip
    """The joint space of all ``tracks``' effectors and its parts (:func:`coupled`)."""
    whole = BatchedModel(skeleton.defn, [t.name for t in tracks],
                         [t.chain_length for t in tracks])
    return whole, [Part(skeleton, tracks, g, whole, previous, following)
                   for g in coupled(whole)]
