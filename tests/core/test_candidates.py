"""``candidates.nearest_in_lane``, the lateral growth's choice of a source track, against
the rule written plainly: per query, the entries of its lane, the first of the nearest."""

from __future__ import annotations

import numpy as np
import pytest
from dhik.solver.path.candidates import nearest_in_lane


def plain(lanes: np.ndarray, values: np.ndarray, lane: np.ndarray, value: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The first of the smallest distance among the entries of the query's lane."""
    take, gap = np.zeros(len(lane), dtype=np.intp), np.full(len(lane), np.inf)
    for j, (ln, v) in enumerate(zip(lane, value, strict=True)):
        mine = np.flatnonzero(lanes == ln)
        if mine.size:
            d = np.abs(values[mine] - v)
            take[j], gap[j] = mine[int(d.argmin())], d.min()
    return take, gap


@pytest.mark.parametrize("seed", range(30))
def test_the_nearest_entry_of_the_lane_and_the_first_of_ties(seed: int) -> None:
    """Values on a grid (as the grid cells' locked values are), so that ties are common:
    equal values, and a query midway between two; lanes with no entry give inf."""
    rng = np.random.default_rng(seed)
    n, d, lanes_count = int(rng.integers(1, 40)), int(rng.integers(1, 40)), 5
    cell = 0.25 if seed % 2 else 0.37  # 0.25: midway queries tie exactly
    lanes = rng.integers(0, lanes_count, n)
    values = rng.integers(-6, 7, n) * cell
    lane = rng.integers(0, lanes_count + 1, d)  # one lane past the entries' own
    value = rng.integers(-12, 13, d) * (cell / 2) + (0.0 if seed % 3 else rng.normal(0, 0.01, d))
    take, gap = nearest_in_lane(lanes, values, lane, value)
    want_take, want_gap = plain(lanes, values, lane, value)
    np.testing.assert_array_equal(gap, want_gap)
    found = np.isfinite(want_gap)
    np.testing.assert_array_equal(take[found], want_take[found])
    assert found.sum() < d or (np.isin(lane, lanes)).all()
