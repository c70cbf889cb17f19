"""The LM's damped step (solver/lm/step.py): block by block (``blocks.py``) against the
whole problem's step, and a pull taken exactly in the rows' null space against the
damped one; a pole polish with each on a real character limb."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from dhik.app.formats import parse_skeleton
from dhik.model.joint_space import BatchedModel
from dhik.solver.lm import PoleSet, Problem, levenberg_marquardt, pole_points
from dhik.solver.lm.blocks import StepBlocks
from dhik.solver.lm.step import bounded_step, damped
from dhik.solver.settings import SolverSettings
from fixtures import TWO_LEGS


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




def test_two_legs_under_a_held_body_solve_as_without_blocks(monkeypatch) -> None:
    """Two chains of three joints under a held, turned body: the LM with its step split
    in two blocks (its Jacobian computed in them alone, ``Problem.effector_blocks``)
    takes the same iterations to the same poses as with the whole step (to
    1e-5 rad, the orientation tolerance: a leg of six columns for its six rows is solved
    as ``J J^T`` in its block and inside ``J^T J`` in the whole, whose roundings part by
    1e-7 once the damping has shrunk near the end, and by up to 1.04e-6 rad in the poses
    on an AMD EPYC host; the tolerances are 1e-6 m and 1e-5 rad)."""
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
    blocks, effs, cols = problem.effector_blocks()  # one block per leg: Jacobian blocks
    assert list(effs) == [0, 1] and not blocks.cmask.all()  # legs of 6 and 4: padded
    for b in range(2):  # each leg's free columns
        assert set(cols[b][blocks.cmask[b]]) == set(np.flatnonzero(model.paths[b] & ~model.held))
    split = run()
    monkeypatch.setattr(Problem, "step_blocks", lambda self, r: None)
    monkeypatch.setattr(Problem, "effector_blocks", lambda self: None)
    whole = run()
    assert split[2].all() and whole[2].all()
    assert np.array_equal(split[1], whole[1])
    assert np.abs(split[0] - whole[0]).max() < 1e-5


@pytest.mark.parametrize("seed", range(4))
def test_an_exact_pull_moves_no_row(seed: int) -> None:
    """Four rows (three heavy, one light: a thousandth, as a pole's) by nine columns, a
    damping above the light row's scale: the pull ``d`` taken exactly changes ``J s`` by
    nothing (1e-7 of ``J d``) and adds its null-space part whole; the damped pull leaks
    into the light row (its share of ``J d`` comes back on it)."""
    rng = np.random.default_rng(seed)
    r, n, k = 4, 9, 16
    jac = rng.normal(size=(r, n, k))
    jac[3] *= 1e-3
    e = rng.normal(size=(r, k)) * np.array([1.0, 1.0, 1.0, 1e-3])[:, None]
    d = rng.normal(size=(n, k))
    w = np.full(k, 1e-7)
    jd = np.einsum("rnk,nk->rk", jac, d)
    exact = damped(jac, e, w, d, exact=True) - damped(jac, e, w, None, exact=True)
    leaky = damped(jac, e, w, d) - damped(jac, e, w, None)
    moved = np.einsum("rnk,nk->rk", jac, exact)
    assert np.abs(moved[3]).max() < 1e-7 * np.abs(jd[3]).max()
    assert np.abs(moved[:3]).max() < 1e-9 * np.abs(jd[:3]).max()
    for i in range(k):  # the null-space part of d, whole
        null = d[:, i] - np.linalg.pinv(jac[..., i]) @ (jac[..., i] @ d[:, i])
        assert np.allclose(exact[:, i], null, atol=1e-9)
    leak = np.abs(np.einsum("rnk,nk->rk", jac, leaky)[3]).max()
    assert leak > 1e-3 * np.abs(jd[3]).max()  # about w over the light row's scale


DATA = Path(__file__).parent / "data"


def test_a_pole_polish_with_the_exact_pull_takes_few_iterations() -> None:
    """bench/characters.py's metarig arm (three ball joints, position only: the pole
    leaves a 5-dimensional self-motion), its 160-frame clip planned without the pole,
    then swung onto a pole behind the elbow: with the exact pull every frame meets the
    pole (1e-7 m) within 12 iterations, where the damped pull needs 18 or more; both
    end within 1e-2 rad of each other, the exact one no farther from the plan (in the
    columns' scales, the distance the pull shortens)."""
    from dhik.solver.path import cheap
    from dhik.solver.path.fill import SLOW_STALL_WINDOW
    from dhik.solver.settings import RobustOptions

    defn = parse_skeleton(json.loads((DATA / "metarig_arm.json").read_text()))
    plain = BatchedModel(defn, ["hand.L"], [3])
    model = BatchedModel(defn, ["hand.L"], [3], points=pole_points(plain.chains, [0]))
    data = np.load(DATA / "metarig_arm_clip.npz")
    targets, held = data["targets"], data["held"]
    tol = SolverSettings(position_tolerance=1e-4, orientation_tolerance=1e-3)
    path = cheap.cheap_path(model, targets, [(1.0, 0.0)], tol, RobustOptions(), held=held)
    assert path is not None
    pole = np.broadcast_to(np.array([0.3, 0.4, 1.2]), (len(targets), 1, 3))
    poles = PoleSet.build(model, [0], pole, [0.0])
    pull = Problem(model, targets, [(1.0, 0.0)], tol, held=held, poles=poles).as_pole_pull()
    exact = levenberg_marquardt(model, pull, path.q, 200, pull=path.q, exact_pull=True)
    leaky = levenberg_marquardt(model, pull, path.q, 200, pull=path.q,
                                stall_window=SLOW_STALL_WINDOW)
    for res in (exact, leaky):
        assert res.converged.all() and (res.pole_error < 1e-7).all()
    assert exact.iterations.max() <= 12 < 18 <= leaky.iterations.min()
    free = ~model.held
    assert np.abs(model.difference(exact.q, leaky.q)[:, free]).max() < 1e-2
    far = [np.linalg.norm((model.difference(path.q, r.q) / pull.col_scale)[:, free], axis=1)
           for r in (exact, leaky)]  # in the step's units, the columns' scales
    assert (far[0] <= far[1] * (1 + 1e-3)).all()


def test_a_held_spine_folded_plans_the_same_path(monkeypatch) -> None:
    """The metarig arm's clip (its spine held: 21 of 30 columns, placed once per problem
    by ``prefix_t``) planned with the fold and without it: the same iterations on every
    frame and the same poses to rounding."""
    from dhik.solver.path import cheap, plan
    from dhik.solver.settings import RobustOptions

    defn = parse_skeleton(json.loads((DATA / "metarig_arm.json").read_text()))
    model = BatchedModel(defn, ["hand.L"], [3])
    assert model.anchors and model.prefix_cols.size == 21
    data = np.load(DATA / "metarig_arm_clip.npz")
    tol = SolverSettings(position_tolerance=1e-4, orientation_tolerance=1e-3)

    def planned() -> plan.PathResult:
        path = cheap.cheap_path(model, data["targets"], [(1.0, 0.0)], tol, RobustOptions(),
                               held=data["held"])
        assert path is not None and path.converged.all()
        return path

    folded = planned()
    monkeypatch.setattr(model, "prefix_t", lambda q: None)
    whole = planned()
    np.testing.assert_array_equal(folded.iterations, whole.iterations)
    np.testing.assert_allclose(folded.q, whole.q, rtol=0, atol=1e-9)


@pytest.mark.parametrize("r", [3, 6, 12])
def test_both_batched_solves_solve_spd_systems(r: int) -> None:
    """LAPACK's solve and the vectorised Cholesky (batch last) give the solution
    ``np.linalg.solve`` gives matrix by matrix, on batches either side of the size where
    ``spd_solve`` turns from one to the other (numpy 2: 200 + r^2, numpy 1.26: 30 + r^2/2
    rows, bench/spd_solve.py)."""
    from dhik.solver.lm.step import cholesky_solve, lapack_solve, solve_rows, spd_solve

    rng = np.random.default_rng(r)
    for k in (1, solve_rows(r) - 1, solve_rows(r), solve_rows(r) + 7):
        m = rng.normal(size=(k, r, r))
        a = m @ m.transpose(0, 2, 1) + 0.1 * np.eye(r)
        b = rng.normal(size=(k, r))
        want = np.array([np.linalg.solve(a[i], b[i]) for i in range(k)])
        batch_last = np.ascontiguousarray(a.transpose(1, 2, 0))
        for solve in (lapack_solve, cholesky_solve, spd_solve):
            np.testing.assert_allclose(solve(batch_last, b.T).T, want, rtol=1e-8, atol=1e-10,
                                       err_msg=f"{solve.__name__}, k = {k}")
    assert solve_rows(6) == (48 if np.lib.NumpyVersion(np.__version__) < "2.0.0" else 236)


@pytest.mark.parametrize("k", [1, 300])
def test_no_rows_left_solve_to_nothing(k: int) -> None:
    """0 x 0 systems (a skeleton without moving joints): an empty answer either way."""
    from dhik.solver.lm.step import cholesky_solve, spd_solve

    for solve in (cholesky_solve, spd_solve):
        assert solve(np.zeros((0, 0, k)), np.zeros((0, k))).shape == (0, k)


def test_a_singular_matrix_in_a_small_batch_is_solved_by_the_factorisation() -> None:
    """A zero matrix among SPD ones: LAPACK refuses the batch, ``spd_solve`` falls back
    to the Cholesky, whose tiny pivot keeps every row finite and the others exact."""
    from dhik.solver.lm.step import lapack_solve, spd_solve

    rng = np.random.default_rng(1)
    m = rng.normal(size=(5, 6, 6))
    a = m @ m.transpose(0, 2, 1) + np.eye(6)
    a[2] = 0.0
    b = rng.normal(size=(5, 6))
    batch_last = np.ascontiguousarray(a.transpose(1, 2, 0))
    with pytest.raises(np.linalg.LinAlgError):
        lapack_solve(batch_last, b.T)
    x = spd_solve(batch_last, b.T).T
    assert np.isfinite(x[[0, 1, 3, 4]]).all()
    for i in (0, 1, 3, 4):
        np.testing.assert_allclose(x[i], np.linalg.solve(a[i], b[i]), rtol=1e-9)
