"""The bulk paths of the app layer (issue 9, point 3) equal the item-by-item ones they
replace: same bytes, same matrices, same errors.

- JSON text: the C encoder plus the scalar-array layout == a recursive encoder written
  here (the writer dhik had before, 2-space indent, arrays of scalars on one line);
- animation.json from columns (AnimationColumns) == the generic writer on the dicts;
- keyframe interpolation for all frames at once == the frame loop, bit for bit;
- quaternion sign alignment on arrays == on the frame dicts;
- targets.json checked in bulk == checked item by item (keyframes, or the same error).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from dhik.app import formats
from dhik.app.bake import align_quaternion_signs
from dhik.app.formats import AnimationColumns, parse_animation, parse_targets, save_animation
from dhik.app.jsonio import atomic_write_json, dumps_json
from dhik.app.trajectory import interpolate_keyframes, target_matrix
from dhik.errors import DhikError
from dhik.model.definition import Keyframe
from hypothesis import given, settings
from hypothesis import strategies as st


def reference_dumps(value: Any, level: int = 0) -> str:
    """The layout, item by item: 2-space indent, arrays of scalars on one line."""
    pad, inner = "  " * level, "  " * (level + 1)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {reference_dumps(v, level + 1)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        parts = [reference_dumps(v, level + 1) for v in value]
        if all(not isinstance(v, (Mapping, list)) for v in value):
            return "[" + ", ".join(parts) + "]"
        return "[\n" + ",\n".join(inner + p for p in parts) + "\n" + pad + "]"
    return json.dumps(value, ensure_ascii=False)


TRICKY = st.sampled_from(["[", "]", "{", "}", '"', ",\n", 'a\\"b', ", ", "[\n  1", "é"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=False, allow_infinity=False), TRICKY,
                    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_json_text_is_the_item_by_item_layout(data: Any) -> None:
    assert dumps_json(data, "x.json") == reference_dumps(data)


def test_non_finite_numbers_are_named_by_their_path(tmp_path: Path) -> None:
    data = {"a": [1.0, {"b c": [2.0, math.nan]}]}
    path = tmp_path / "x.json"
    try:
        atomic_write_json(path, data)
    except DhikError as err:
        assert str(err) == f'{path}: a[1]["b c"][1]: cannot save a non-finite number (NaN)'
    else:
        raise AssertionError("NaN was written")
    assert not list(tmp_path.iterdir())


NUMBER = st.floats(-1e6, 1e6) | st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 1e300, 1, 2])


@st.composite
def animations(draw: st.DrawFn) -> list[dict[str, Any]]:
    kinds = draw(st.dictionaries(st.text(min_size=1, max_size=5),
                                 st.sampled_from(["revolute", "prismatic", "spherical"]),
                                 max_size=4))
    frames, frame = [], draw(st.integers(0, 10))
    for _ in range(draw(st.integers(0, 5))):
        joints: dict[str, Any] = {}
        for name, kind in kinds.items():
            if kind == "revolute":
                joints[name] = {"type": kind, "angle": draw(NUMBER)}
            elif kind == "prismatic":
                joints[name] = {"type": kind, "displacement": draw(NUMBER)}
            else:
                joints[name] = {"type": kind, "euler": [draw(NUMBER) for _ in range(3)],
                                "quaternion": [draw(NUMBER) for _ in range(3)] + [1.0]}
        frames.append({"frame": frame, "joints": joints})
        frame += draw(st.integers(1, 3))
    return frames


@settings(max_examples=300, deadline=None)
@given(animations())
def test_animation_from_columns_is_the_generic_writers_bytes(frames) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        fast, slow = Path(tmp) / "fast.json", Path(tmp) / "slow.json"
        save_animation(frames, fast)
        clean = parse_animation({"frames": frames})
        slow.write_text(reference_dumps({"frames": clean}) + "\n", encoding="utf-8")
        assert fast.read_bytes() == slow.read_bytes()


QUATS = st.sampled_from([[1, 0, 0, 0], [-1, 0, 0, 0], [0, 1, 0, 0], [0, -1, 0, 0],
                         [0.6, 0.8, 0, 0], [-0.6, 0.8, 0, 0], [0.5, 0.5, 0.5, 0.5]])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(QUATS, st.floats(-1, 1), QUATS), min_size=1, max_size=12))
def test_quaternion_signs_aligned_on_arrays_as_on_dicts(rows) -> None:
    """Including dot products of exactly 0 (no flip, whatever came before); two
    spherical joints on either side of a hinge, aligned each on its own."""
    def ball(q):
        return {"type": "spherical", "euler": [0.0, 0.0, 0.0], "quaternion": [float(x) for x in q]}

    frames = [{"frame": i, "joints": {"S": ball(q), "R": {"type": "revolute", "angle": a},
                                      "T": ball(t)}}
              for i, (q, a, t) in enumerate(rows)]
    columns = AnimationColumns.from_frames(copy.deepcopy(frames))
    assert columns is not None
    align_quaternion_signs(frames)
    columns.align_quaternion_signs()
    assert [columns.frame(i) for i in range(len(frames))] == frames


def frame_loop(keyframes: list[Keyframe]) -> list[tuple[int, np.ndarray]]:
    """Interpolation frame by frame, as dhik did it before."""
    out, last, k = [], keyframes[-1].frame, 0
    for frame in range(last + 1):
        while k + 1 < len(keyframes) and keyframes[k + 1].frame <= frame:
            k += 1
        a = keyframes[k]
        if frame <= a.frame or k + 1 == len(keyframes):
            out.append((frame, target_matrix(a.pos, a.euler)))
            continue
        b = keyframes[k + 1]
        t = (frame - a.frame) / (b.frame - a.frame)
        pos = np.add(a.pos, t * np.subtract(b.pos, a.pos))
        eul = np.add(a.euler, t * np.subtract(b.euler, a.euler))
        out.append((frame, target_matrix(pos, eul)))
    return out


COORD = st.floats(-1e3, 1e3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.tuples(COORD, COORD, COORD),
                          st.tuples(COORD, COORD, COORD)),
                min_size=1, max_size=6, unique_by=lambda k: k[0]))
def test_interpolation_in_bulk_is_the_frame_loop_bit_for_bit(keys) -> None:
    keyframes = sorted((Keyframe(f, p, e) for f, p, e in keys), key=lambda k: k.frame)
    got = list(interpolate_keyframes(keyframes))
    want = frame_loop(keyframes)
    assert [f for f, _ in got] == [f for f, _ in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert np.array_equal(a, b)


ODD = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**70, 2**70),
                st.booleans(), st.none(), st.text(max_size=2))
VECTOR = st.one_of(st.lists(ODD, min_size=2, max_size=4), ODD)
ITEMS = st.one_of(
    st.fixed_dictionaries({"frame": st.one_of(st.integers(-2, 1_048_580), ODD),
                           "pos": VECTOR, "euler": VECTOR}, optional={"x": ODD}),
    st.integers(), st.lists(ODD, max_size=1))
GOOD = st.fixed_dictionaries({"frame": st.integers(0, 20),
                              "pos": st.lists(st.floats(-10, 10), min_size=3, max_size=3),
                              "euler": st.lists(st.floats(-400, 400) | st.integers(-5, 5),
                                                min_size=3, max_size=3)})


def _outcome(data: Any) -> tuple[str, Any]:
    try:
        return "ok", parse_targets(copy.deepcopy(data))
    except DhikError as err:
        return "error", str(err)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.lists(ITEMS, max_size=5), st.lists(GOOD, min_size=1, max_size=6)))
def test_targets_checked_in_bulk_as_item_by_item(data) -> None:
    bulk = _outcome(data)
    real = formats._targets_fast
    formats._targets_fast = lambda d: None  # item by item only
    try:
        one_by_one = _outcome(data)
    finally:
        formats._targets_fast = real
    assert bulk == one_by_one
