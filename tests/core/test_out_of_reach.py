"""Targets out of reach: the closest approach judged as the LM weighs it
(``Problem.shortfall``, ``Problem.nearer``), not by the largest error over its tolerance.

arm7 (seven hinges, full pose) from tests/fixtures.py. Frames: world; metres, radians.
"""

from __future__ import annotations

import numpy as np
from dhik.solver.lm import Problem
from dhik.solver.path import solve_path
from fixtures import arm7_path, arm7_ramped_out


def test_an_approach_is_judged_by_the_energy_the_lm_minimises() -> None:
    """Two answers that both miss a target (position 0.80 m off and orientation 0.08 rad,
    against 0.72 m and 2.3 rad): the first is nearer as the LM weighs them (its
    ``shortfall``, by hand: (0.80 / scale)^2 + 0.08^2 against (0.72 / scale)^2 + 2.3^2),
    though its position error over the tolerance is the larger (``badness``). Where one
    of them meets the target, it is the nearer one."""
    model, _, targets = arm7_path(2, 0)
    pr = Problem(model, targets, None)
    far_pe, far_re = np.array([[0.80], [0.72]]), np.array([[0.08], [2.3]])
    hand = (far_pe[:, 0] / pr.scale) ** 2 + far_re[:, 0] ** 2
    np.testing.assert_allclose(pr.shortfall(far_pe, far_re), hand, rtol=1e-12)
    assert pr.badness(far_pe[:1], far_re[:1]) > pr.badness(far_pe[1:], far_re[1:])
    a, b = (far_pe[:1], far_re[:1], None), (far_pe[1:], far_re[1:], None)
    assert pr.nearer(a, b).tolist() == [True] and pr.nearer(b, a).tolist() == [False]
    tol_p, tol_r = pr.settings.position_tolerance, pr.settings.orientation_tolerance
    met = (np.array([[0.1 * tol_p]]), np.array([[0.1 * tol_r]]), None)
    assert pr.nearer(met, a).tolist() == [True] and pr.nearer(a, met).tolist() == [False]
    # an answer on target beats one nearer in energy that is not (twice the position
    # tolerance off, its orientation exact)
    off = (np.array([[2.0 * tol_p]]), np.array([[0.0]]), None)
    on = (np.array([[0.9 * tol_p]]), np.array([[0.9 * tol_r]]), None)
    assert pr.shortfall(off[0], off[1]) < pr.shortfall(on[0], on[1])
    assert pr.nearer(on, off).tolist() == [True]


def test_a_target_moved_out_of_reach_is_followed_without_thrown_frames() -> None:
    """arm7, 1,200 frames (seed 3), the targets of frames 590-669 moved out to 3x their
    distance from the base over ten frames, held there 60 and back over ten: the frames
    beyond reach are approached as one continuous motion. Before, the closest approach
    kept, on single coarse frames, a pose reaching a little further with its orientation
    2.4 rad off (all zeros: a slot that never lived): steps of 1.1-3.2 rad in and out
    again every ten frames or so."""
    model, targets = arm7_ramped_out(1200, 3, 590)
    far = Problem(model, targets, None).out_of_reach()
    inside = np.flatnonzero(far)
    assert inside.size > 60 and np.all(np.diff(inside) == 1)  # one stretch beyond reach
    res = solve_path(model, targets)
    steps = np.abs(model.difference(res.q[:-1], res.q[1:])).max(axis=1)
    within = steps[inside[0]:inside[-1]]  # the steps between frames beyond reach
    # no frame thrown out and back: no two steps in a row over 0.5 rad, none over 1
    assert within.max() < 1.0 and not np.any((within[1:] > 0.5) & (within[:-1] > 0.5))
