"""``Search.spread``: what a joint distance over a stretch of frames is expected to cost in
the path's sum of steps^p, with the steps shared out as the targets move. arm7; world
metres, radians; p = 8."""

from __future__ import annotations

import numpy as np
from dhik.solver.path.search import Search
from dhik.solver.settings import RobustOptions
from fixtures import arm7_path

P = 8.0


def floored(search: Search) -> np.ndarray:
    """The targets' motion per step with ``spread``'s floor (a twentieth of the mean)."""
    move = search.motion()
    return move + 0.05 * move.mean() + 1e-12


def test_a_stretch_costs_its_steps_shared_as_the_targets_move() -> None:
    """Smooth targets: a single step's spread is 1; a stretch's is sum_j (m_j / sum m)^p,
    computed here from the targets' motion directly, and at least L^(1-p) (steady
    motion's, the least any sharing costs)."""
    model, _, targets = arm7_path(300, 4)
    search = Search(model, targets, None, None, RobustOptions(power=P))
    m = floored(search)
    np.testing.assert_allclose(search.spread(np.arange(299), np.arange(1, 300)), 1.0,
                               rtol=1e-9)
    for a, b in ((0, 32), (40, 41), (100, 190), (250, 299)):
        w = m[a:b] / m[a:b].sum()
        np.testing.assert_allclose(search.spread(a, b), np.sum(w ** P), rtol=1e-9)
        assert search.spread(a, b) >= (b - a) ** (1 - P) * (1 - 1e-9)


def test_a_step_where_the_targets_jump_counts_at_their_usual_rate() -> None:
    """The tool's targets turn 1 rad about the base's axis at once on frame 100 (a cut):
    that step's motion is capped at 2.5 (``flip_factor``) times the median of the ten
    steps on each side, so a joint distance forced there costs (cap / m)^p of d^p, far
    below a whole step's; a stretch across it shares out the other steps and that capped
    one; steps away from the jump are unchanged."""
    model, _, targets = arm7_path(300, 4)
    turn = np.eye(4)
    c, s = np.cos(1.0), np.sin(1.0)
    turn[:2, :2] = [[c, -s], [s, c]]
    targets = targets.copy()
    targets[100:] = turn @ targets[100:]
    search = Search(model, targets, None, None, RobustOptions(power=P))
    m = floored(search)
    near = np.r_[m[89:99], m[100:110]]
    cap = 2.5 * np.median(near)
    assert m[99] > 3 * cap  # the jump: into frame 100
    np.testing.assert_allclose(search.spread(99, 100), (cap / m[99]) ** P, rtol=1e-6)
    assert search.spread(99, 100) < 1e-3
    capped = np.r_[m[80:99], cap, m[100:120]]
    np.testing.assert_allclose(search.spread(80, 120),
                               np.sum(capped ** P) / m[80:120].sum() ** P, rtol=1e-6)
    np.testing.assert_allclose(search.spread(np.arange(150, 299), np.arange(151, 300)), 1.0,
                               rtol=1e-9)
