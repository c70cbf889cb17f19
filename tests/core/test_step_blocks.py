"""The LM step block by block (solver/lm/blocks.py) against the whole problem's step."""

from __future__ import annotations

import numpy as np
import pytest
from dhik.app.formats import parse_skeleton
from dhik.model.joint_space import BatchedModel
from dhik.solver.lm import Problem, levenberg_marquardt
from dhik.solver.lm.blocks import StepBlocks
from dhik.solver.lm.step import bounded_step
from dhik.solver.settings import SolverSettings


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("pull", [False, True])
def test_blocks_step_equals_the_whole_step(seed: int, pull: bool) -> None:
    """Three blocks of different sizes (rows 6, 3, 6 by columns 9, 4, 7), two held
    columns, rows of k = 40 with bounds that clamp: the same step to 1e-10."""
    rng = np.random.default_rng(seed)
    sizes = [(6, 9), (3, 4), (6, 7)]
    r, n, k = sum(a for a, _ in sizes), sum(b for _, b in sizes) + 2, 40
    perm = rng.permutation(n)  # blocks' columns interleaved, two held
    held = perm[-2:]
    jac = np.zeros((r, n, k))
    supports = []
    at_r, at_c = 0, 0
    for rows, cols in sizes:
        c = perm[at_c:at_c + cols]
        jac[at_r:at_r + rows, c] = rng.normal(size=(rows, cols, k))
        jac[at_r:at_r + rows, held] = rng.normal(size=(rows, 2, k))  # held: ignored
        mask = np.zeros(n, dtype=bool)
        mask[c] = True
        mask[held] = True
        supports += [mask] * rows
        at_r, at_c = at_r + rows, at_c + cols
    free = np.ones(n, dtype=bool)
    free[held] = False
    blocks = StepBlocks.of(supports, free)
    assert blocks is not None and len(blocks.rix) == 3
    e = rng.normal(size=(r, k))
    x = rng.uniform(-0.5, 0.5, size=(n, k))
    lo, hi = np.full(n, -0.6), np.full(n, 0.6)
    lo[rng.integers(n)] = -np.inf
    w = rng.uniform(1e-3, 1e-1, size=k)
    d = rng.normal(scale=0.1, size=(n, k)) if pull else None
    whole_jac = jac.copy()
    whole_jac[:, held] = 0.0  # what the loop gives a held (frozen) column
    if d is not None:
        d[held] = 0.0
    want = bounded_step(whole_jac, e, x, lo, hi, w, d)
    got = blocks.step(bounded_step, jac, e, x, lo, hi, w, d)
    assert np.all(got[held] == 0.0)
    assert np.abs(got - want).max() < 1e-10
    clamped = (x + want <= lo[:, None] + 1e-12) | (x + want >= hi[:, None] - 1e-12)
    assert clamped.any()  # the limits acted


def test_one_block_without_held_columns_is_not_split() -> None:
    full = [np.ones(4, dtype=bool)] * 3
    assert StepBlocks.of(full, np.ones(4, dtype=bool)) is None
    assert StepBlocks.of(full, np.array([True, True, True, False])) is not None


TWO_LEGS = {
    "root_name": "body",
    "joints": [
        {"name": "body", "type": "spherical", "parent": None, "offset": [0, 0, 1]},
        {"name": "hipL", "type": "spherical", "parent": "body", "offset": [0.2, 0, 0]},
        {"name": "kneeL", "type": "spherical", "parent": "hipL", "offset": [0, 0, -0.4],
         "limits": [[-2, 2], [-0.3, 0.3], [-1, 1]]},
        {"name": "footL", "type": "spherical", "parent": "kneeL", "offset": [0, 0, -0.4]},
        {"name": "toeL", "type": "fixed", "parent": "footL", "offset": [0, 0.1, 0]},
        {"name": "hipR", "type": "spherical", "parent": "body", "offset": [-0.2, 0, 0]},
        {"name": "kneeR", "type": "revolute", "parent": "hipR", "offset": [0, 0, -0.4],
         "axis": [1, 0, 0], "limits": [0, 2.5]},
        {"name": "footR", "type": "spherical", "parent": "kneeR", "offset": [0, 0, -0.4]},
        {"name": "toeR", "type": "fixed", "parent": "footR", "offset": [0, 0.1, 0]},
    ],
}


def test_two_legs_under_a_held_body_solve_as_without_blocks(monkeypatch) -> None:
    """Two chains of three joints under a held, turned body: the LM with its step split
    in two blocks takes the same iterations to the same poses as with the whole step."""
    defn = parse_skeleton(TWO_LEGS)
    model = BatchedModel(defn, ["toeL", "toeR"], [3, 3])
    assert model.held.any()
    rng = np.random.default_rng(3)
    k = 30
    q = rng.uniform(-0.6, 0.6, size=(k, model.n))
    q = np.clip(q, model.lo, model.hi)
    targets = model.transforms(q)
    held = np.where(model.held, q, 0.0)
    start = np.where(model.held, 0.0, np.clip(q + rng.normal(scale=0.3, size=q.shape),
                                              model.lo, model.hi))
    settings = SolverSettings(position_tolerance=1e-6, orientation_tolerance=1e-5)

    def run() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        problem = Problem(model, targets, None, settings, held=held)
        res = levenberg_marquardt(model, problem, start, 100, pull=start)
        return res.q, res.iterations, res.converged

    problem = Problem(model, targets, None, settings, held=held)
    assert problem.step_blocks(12) is not None
    split = run()
    monkeypatch.setattr(Problem, "step_blocks", lambda self, r: None)
    whole = run()
    assert split[2].all() and whole[2].all()
    assert np.array_equal(split[1], whole[1])
    assert np.abs(split[0] - whole[0]).max() < 1e-8
