"""A bake's parts (app/parts.py): effectors whose solved joints touch are solved
together, the others apart; a part's columns in the whole joint space and the dimension
of its self-motion are read off the whole model, and its own model (built only when the
part is solved on its own) agrees with them."""

from __future__ import annotations

import numpy as np
import pytest
from dhik.app.formats import parse_skeleton
from dhik.app.inputs import EffectorTrack
from dhik.app.parts import parts_of
from dhik.model.skeleton import Skeleton
from fixtures import TWO_LEGS, random_tree


@pytest.mark.parametrize("lengths", [(3, 3), (0, 3), (2, 0), (1, 1), (4, 2)])
@pytest.mark.parametrize("tree", ["two_legs", "random"])
def test_a_parts_columns_and_redundancy_agree_with_its_own_model(
        tree: str, lengths: tuple[int, int]) -> None:  # fmt: skip
    """Two effectors at chain lengths that couple them (a whole path solved, or chains
    meeting) or not (two legs under a held body): every part's columns are where its own
    model's joints sit in the whole's, its redundancy is its own model's solved columns
    beyond its counted rows, and the parts cover each effector once."""
    if tree == "two_legs":
        defn, effectors = parse_skeleton(TWO_LEGS), ["toeL", "toeR"]
    else:
        defn, effectors = random_tree(np.random.default_rng(sum(lengths)))
    tracks = [EffectorTrack(e, [(0, np.eye(4))], 1.0, w, n)
              for e, w, n in zip(effectors, (1.0, 0.0), lengths, strict=True)]
    whole, parts = parts_of(Skeleton(defn), tracks)
    assert sorted(e for p in parts for e in p.effectors) == [0, 1]
    for part in parts:
        model = part.model
        assert part.columns == [whole.names.index(name) for name in model.names]
        weights = [(1.0, (1.0, 0.0)[e]) for e in part.effectors]
        rows = sum(3 + 3 * (wr > 0) for _, wr in weights)
        assert part.redundancy(weights) == int(np.count_nonzero(~model.held)) - rows
