"""Where robust solves start: the T-pose, the cold start, and random restarts drawn
from a counter-based stream keyed by each problem's targets (deterministic, and
independent of the rest of the batch). Coordinates in rad and m."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from ..kinematics import PRISMATIC, REVOLUTE, BatchedKinematics
from .problem import search_limits

Array = NDArray[np.float64]


def random_starts(model: BatchedKinematics, count: int, rng: np.random.Generator | None,
                  scale: float = 1.0, u: Array | None = None) -> Array:  # fmt: skip
    """``count`` random configurations (count, n) within the limits: uniform in a finite
    box, else within +-pi (rad) or +-scale (m) of zero, clipped. ``u``: the uniform
    draws in [0, 1) (count, n) to use instead of ``rng``'s."""
    lo, hi = search_limits(model)
    prism = model.kinds == PRISMATIC
    half = np.where(prism, scale, math.pi)
    a = np.where(np.isfinite(lo), lo, np.where(np.isfinite(hi), np.minimum(hi, 0.0) - half, -half))
    b = np.where(np.isfinite(hi), hi, np.where(np.isfinite(lo), np.maximum(lo, 0.0) + half, half))
    span = np.minimum(b - a, 4.0 * half)  # huge boxes: a window, not the whole range
    a = np.where(b - a > span, np.clip(0.0, a, b) - span / 2, a)
    a = np.maximum(a, lo)
    b = np.minimum(a + span, hi)
    if u is None:
        assert rng is not None
        u = rng.random((count, model.n))
    q = np.clip(a + u * (b - a), model.lo, model.hi)
    return np.ascontiguousarray(model.recentre(q.T).T)  # rotation vectors: within 1.25 pi


def _mix64(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's finaliser, elementwise (uint64 arithmetic wraps)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def problem_keys(targets: Array, seed: int) -> NDArray[np.uint64]:
    """A 64-bit key per problem (B,) from its targets' bits (B, w) and ``seed``."""
    words = np.ascontiguousarray(targets, dtype=np.float64).view(np.uint64)
    key = np.full(len(words), np.uint64(seed & 0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            key = _mix64(key ^ words[:, j])
    return key


def uniform_draws(keys: NDArray[np.uint64], draw: NDArray[np.int_], n: int) -> Array:
    """Uniform numbers in [0, 1) (k, n): row ``i`` is draw number ``draw[i]`` of the
    stream ``keys[i]`` (a counter-based generator: each row depends on its key and
    counter only)."""
    with np.errstate(over="ignore"):
        base = _mix64(keys ^ _mix64(np.asarray(draw, dtype=np.uint64)))
        z = _mix64(base[:, None] + np.arange(1, n + 1, dtype=np.uint64)[None])
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def t_pose(model: BatchedKinematics) -> Array:
    """The T-pose's coordinates (n,), all zero (rad, m), clipped into the limits."""
    return np.clip(np.zeros(model.n), model.lo, model.hi)


def cold_start(model: BatchedKinematics) -> Array:
    """Where a cold solve starts (n,): the T-pose clipped into the limits, with hinges of
    finite range moved 20 % of the way from mid-range to the upper limit (the T-pose is
    singular for many chains; sliders stay at the T-pose: a wide slider range says
    nothing about where the target is)."""
    zero = t_pose(model)
    lo, hi = search_limits(model)
    finite = np.isfinite(lo) & np.isfinite(hi) & (model.kinds == REVOLUTE)
    lo_f, hi_f = np.where(finite, lo, 0.0), np.where(finite, hi, 0.0)
    mid = 0.5 * (lo_f + hi_f)
    return np.where(finite, mid + 0.2 * (hi_f - mid), zero)

