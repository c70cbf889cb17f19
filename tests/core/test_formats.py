"""Tests of dhik.formats (SPEC 3) and dhik.errors: every fault has its exact message."""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import stat

import numpy as np
import pytest
from dhik.app import formats
from dhik.app.formats import (
    detect_kind,
    load_animation,
    load_skeleton,
    load_targets,
    parse_animation,
    parse_skeleton,
    parse_targets,
    save_animation,
    save_skeleton,
    save_targets,
    skeleton_to_dict,
    targets_to_list,
)
from dhik.app.jsonio import atomic_write_json, load_json
from dhik.errors import DhikError
from dhik.model.definition import JointDef, Keyframe, SkeletonDef
from hypothesis import given, settings
from hypothesis import strategies as st

NAN = float("nan")
INF = float("inf")

# SPEC 3.1 example, in file order Root, Shoulder, Elbow, Piston.
SKELETON = {
    "root_name": "Root",
    "joints": [
        {"name": "Root", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {
            "name": "Shoulder",
            "type": "spherical",
            "offset": [0, 1.5, 0],
            "parent": "Root",
            "limits": [[-3.14, 3.14], None, [-0.5, 0.5]],
        },
        {
            "name": "Elbow",
            "type": "revolute",
            "offset": [0, 0, 2.0],
            "parent": "Shoulder",
            "axis": [1, 0, 0],
            "limits": [0.0, 2.5],
        },
        {
            "name": "Piston",
            "type": "prismatic",
            "offset": [0, 0, 1.0],
            "parent": "Elbow",
            "axis": [0, 0, 1],
            "limits": [0.0, 0.5],
        },
    ],
}

TARGETS = [
    {"frame": 160, "pos": [1.0, -1.0, 1.0], "euler": [-90.0, 45.0, 0.0]},
    {"frame": 80, "pos": [1.0, 1.0, 1.0], "euler": [90.0, 0.0, 45.0]},
    {"frame": 240, "pos": [2.5, 0.0, 1.0], "euler": [0.0, 0.0, 0.0]},
]

ANIMATION = {
    "frames": [
        {
            "frame": 0,
            "joints": {
                "Shoulder": {
                    "type": "spherical",
                    "euler": [0.523, 0.0, 0.785],
                    "quaternion": [0.924, 0.383, 0.0, 0.0],
                },
                "Elbow": {"type": "revolute", "angle": 1.571},
                "Piston": {"type": "prismatic", "displacement": 0.25},
            },
        },
        {
            "frame": 1,
            "joints": {
                "Shoulder": {
                    "type": "spherical",
                    "euler": [0.628, 0.087, 0.890],
                    "quaternion": [0.918, 0.396, 0.0, 0.0],
                },
                "Elbow": {"type": "revolute", "angle": 1.623},
                "Piston": {"type": "prismatic", "displacement": 0.27},
            },
        },
    ]
}


def message(fn, *args) -> str:
    with pytest.raises(DhikError) as info:
        fn(*args)
    return str(info.value)


def mutated(base, change):
    data = copy.deepcopy(base)
    change(data)
    return data


def drop(get, field):
    """A change that deletes ``field`` from the object that ``get`` finds."""

    def change(data):
        del get(data)[field]

    return change


def joint(i):
    return lambda d: d["joints"][i]


# --------------------------------------------------------------------------- errors.py


def test_error_message_with_and_without_path():
    e = DhikError.at("skeleton.json", "joints[3].axis", "must be a non-zero 3-vector")
    assert str(e) == "skeleton.json: joints[3].axis: must be a non-zero 3-vector"
    assert (e.source, e.path, e.problem) == (
        "skeleton.json",
        "joints[3].axis",
        "must be a non-zero 3-vector",
    )
    assert isinstance(e, ValueError)
    assert str(DhikError.at("t.json", "", "must contain at least one keyframe")) == (
        "t.json: must contain at least one keyframe"
    )


def test_error_from_a_single_message_or_without_path():
    e = DhikError("--frame needs --animation")
    assert str(e) == "--frame needs --animation"
    assert (e.source, e.path, e.problem) == ("", "", "--frame needs --animation")
    e = DhikError("a.json", "cannot read")
    assert str(e) == "a.json: cannot read" and (e.path, e.problem) == ("", "cannot read")
    assert str(pickle.loads(pickle.dumps(DhikError("only text")))) == "only text"


def test_error_source_may_be_a_path_object_and_survives_pickling(tmp_path):
    e = DhikError.at(tmp_path / "a.json", "[0].frame", "bad")
    assert str(e) == f"{tmp_path / 'a.json'}: [0].frame: bad"
    back = pickle.loads(pickle.dumps(e))
    assert str(back) == str(e) and back.path == "[0].frame"


# --------------------------------------------------------------------------- skeleton.json


def test_spec_example_parses():
    s = parse_skeleton(SKELETON)
    assert s.root_name == "Root"
    assert [j.name for j in s.joints] == ["Root", "Shoulder", "Elbow", "Piston"]
    root, shoulder, elbow, piston = s.joints
    assert root == JointDef("Root", "fixed", (0.0, 0.0, 0.0), None)
    assert shoulder.limits == ((-3.14, 3.14), None, (-0.5, 0.5))
    assert shoulder.axis is None and shoulder.quaternion is None
    assert elbow.axis == (1.0, 0.0, 0.0) and elbow.limits == (0.0, 2.5)
    assert piston.type == "prismatic" and piston.offset == (0.0, 0.0, 1.0)
    assert all(type(x) is float for j in s.joints for x in j.offset)


SKELETON_FAULTS = [
    # (name, change, expected message without the file name)
    ("not an object", None, 'must be a JSON object with "root_name" and "joints", got array'),
    ("root_name missing", drop(lambda d: d, "root_name"), "root_name: required field is missing"),
    (
        "root_name number",
        lambda d: d.update(root_name=5),
        "root_name: must be a non-empty string, got 5",
    ),
    ("joints missing", drop(lambda d: d, "joints"), "joints: required field is missing"),
    (
        "joints object",
        lambda d: d.update(joints={}),
        "joints: must be an array of joints, got object",
    ),
    ("joints empty", lambda d: d.update(joints=[]), "joints: must contain at least one joint"),
    (
        "joint not object",
        lambda d: d["joints"].__setitem__(2, 3),
        "joints[2]: must be an object, got number",
    ),
    ("name missing", drop(joint(2), "name"), "joints[2].name: required field is missing"),
    (
        "name empty",
        lambda d: joint(2)(d).update(name=""),
        'joints[2].name: must be a non-empty string, got ""',
    ),
    (
        "name null",
        lambda d: joint(2)(d).update(name=None),
        "joints[2].name: must be a non-empty string, got null",
    ),
    ("type missing", drop(joint(2), "type"), "joints[2].type: required field is missing"),
    (
        "type unknown",
        lambda d: joint(2)(d).update(type="ball"),
        'joints[2].type: unknown joint type "ball"; '
        'expected one of "fixed", "revolute", "prismatic", "spherical"',
    ),
    (
        "type not a string",
        lambda d: joint(2)(d).update(type=["revolute"]),
        'joints[2].type: unknown joint type ["revolute"]; '
        'expected one of "fixed", "revolute", "prismatic", "spherical"',
    ),
    (
        "offset too short",
        lambda d: joint(2)(d).update(offset=[0, 1]),
        "joints[2].offset: must be an array of 3 numbers, got [0, 1]",
    ),
    (
        "offset null",
        lambda d: joint(2)(d).update(offset=None),
        "joints[2].offset: must be an array of 3 numbers, got null",
    ),
    (
        "offset string item",
        lambda d: joint(2)(d).update(offset=[0, "1", 0]),
        'joints[2].offset[1]: must be a number, got "1"',
    ),
    (
        "offset boolean",
        lambda d: joint(2)(d).update(offset=[True, 0, 0]),
        "joints[2].offset[0]: must be a number, got true",
    ),
    (
        "offset NaN",
        lambda d: joint(2)(d).update(offset=[0, 0, NAN]),
        "joints[2].offset[2]: must be a finite number, got NaN",
    ),
    (
        "parent number",
        lambda d: joint(2)(d).update(parent=7),
        "joints[2].parent: must be a non-empty string, got 7",
    ),
    ("axis missing", drop(joint(2), "axis"), "joints[2].axis: required for a revolute joint"),
    (
        "prismatic axis missing",
        drop(joint(3), "axis"),
        "joints[3].axis: required for a prismatic joint",
    ),
    (
        "axis zero",
        lambda d: joint(3)(d).update(axis=[0, 0, 0]),
        "joints[3].axis: must be a non-zero 3-vector",
    ),
    (
        "axis null",
        lambda d: joint(3)(d).update(axis=None),
        "joints[3].axis: must be a non-zero 3-vector, got null",
    ),
    (
        "axis short",
        lambda d: joint(2)(d).update(axis=[1, 0]),
        "joints[2].axis: must be a non-zero 3-vector, got [1, 0]",
    ),
    (
        "axis infinite",
        lambda d: joint(2)(d).update(axis=[INF, 0, 0]),
        "joints[2].axis[0]: must be a finite number, got Infinity",
    ),
    (
        "axis boolean",
        lambda d: joint(2)(d).update(axis=[0, False, 1]),
        "joints[2].axis[1]: must be a number, got false",
    ),
    (
        "limits min > max",
        lambda d: joint(2)(d).update(limits=[2.5, 0.0]),
        "joints[2].limits: min 2.5 is greater than max 0.0",
    ),
    (
        "limits one item",
        lambda d: joint(2)(d).update(limits=[1]),
        "joints[2].limits: must be null or [min, max], got [1]",
    ),
    (
        "limits number",
        lambda d: joint(3)(d).update(limits=0.5),
        "joints[3].limits: must be null or [min, max], got 0.5",
    ),
    (
        "limits boolean",
        lambda d: joint(2)(d).update(limits=[False, 1]),
        "joints[2].limits[0]: must be a number, got false",
    ),
    (
        "limits NaN",
        lambda d: joint(3)(d).update(limits=[0, NAN]),
        "joints[3].limits[1]: must be a finite number, got NaN",
    ),
    (
        "spherical limits not 3 items",
        lambda d: joint(1)(d).update(limits=[[0, 1]]),
        "joints[1].limits: must be null or an array of 3 items, "
        "each [min, max] or null, got [[0, 1]]",
    ),
    (
        "spherical limits flat pair",
        lambda d: joint(1)(d).update(limits=[-1, 1]),
        "joints[1].limits: must be null or an array of 3 items, "
        "each [min, max] or null, got [-1, 1]",
    ),
    (
        "spherical limit item number",
        lambda d: joint(1)(d).update(limits=[[0, 1], 5, None]),
        "joints[1].limits[1]: must be null or [min, max], got 5",
    ),
    (
        "spherical limit min > max",
        lambda d: joint(1)(d).update(limits=[[0, 1], None, [0.5, -0.5]]),
        "joints[1].limits[2]: min 0.5 is greater than max -0.5",
    ),
    (
        "quaternion zero",
        lambda d: joint(0)(d).update(quaternion=[0, 0, 0, 0]),
        "joints[0].quaternion: must be a non-zero quaternion [w, x, y, z]",
    ),
    (
        "quaternion 3 items",
        lambda d: joint(0)(d).update(quaternion=[1, 0, 0]),
        "joints[0].quaternion: must be a non-zero quaternion [w, x, y, z], got [1, 0, 0]",
    ),
    (
        "quaternion NaN",
        lambda d: joint(0)(d).update(quaternion=[1, NAN, 0, 0]),
        "joints[0].quaternion[1]: must be a finite number, got NaN",
    ),
    (
        "duplicate name",
        lambda d: joint(3)(d).update(name="Shoulder"),
        'joints[3].name: duplicate name "Shoulder" (also joints[1])',
    ),
    (
        "unknown parent",
        lambda d: joint(2)(d).update(parent="Nowhere"),
        'joints[2].parent: unknown joint "Nowhere"',
    ),
    (
        "no root",
        lambda d: joint(0)(d).update(parent="Piston"),
        'joints: no root: exactly one joint must have "parent": null',
    ),
    (
        "two roots",
        lambda d: joint(3)(d).update(parent=None),
        'joints[3].parent: null or missing, but "Root" is already the root; '
        "exactly one joint may have no parent",
    ),
    (
        "parent missing means root",
        drop(joint(2), "parent"),
        'joints[2].parent: null or missing, but "Root" is already the root; '
        "exactly one joint may have no parent",
    ),
    (
        "root_name unknown",
        lambda d: d.update(root_name="Base"),
        'root_name: "Base" is not the name of a joint',
    ),
    (
        "root_name not the root",
        lambda d: d.update(root_name="Shoulder"),
        'root_name: "Shoulder" is not the root; the joint with no parent is "Root"',
    ),
    (
        "cycle",
        lambda d: joint(1)(d).update(parent="Piston"),
        'joints[1].parent: parent cycle: "Shoulder" -> "Piston" -> "Elbow" -> "Shoulder"',
    ),
    (
        "own parent",
        lambda d: joint(2)(d).update(parent="Elbow"),
        'joints[2].parent: parent cycle: "Elbow" -> "Elbow"',
    ),
    (  # any root type is valid (tests/core/test_root_joint.py); its fields are checked
        "revolute root without axis",
        lambda d: joint(0)(d).update(type="revolute"),
        "joints[0].axis: required for a revolute joint",
    ),
]


@pytest.mark.parametrize(
    "change, expected", [f[1:] for f in SKELETON_FAULTS], ids=[f[0] for f in SKELETON_FAULTS]
)
def test_skeleton_fault(change, expected):
    data = [SKELETON] if change is None else mutated(SKELETON, change)
    assert message(parse_skeleton, data) == f"skeleton.json: {expected}"


def test_skeleton_fault_names_the_file_as_given(tmp_path):
    path = tmp_path / "rig.json"
    path.write_text(json.dumps(mutated(SKELETON, lambda d: joint(3)(d).update(axis=[0, 0, 0]))))
    assert message(load_skeleton, path) == f"{path}: joints[3].axis: must be a non-zero 3-vector"
    assert message(load_skeleton, str(path)).startswith(f"{path}: ")


def test_non_finite_literals_in_the_file_are_rejected(tmp_path):
    path = tmp_path / "s.json"
    text = json.dumps(SKELETON).replace('"offset": [0, 1.5, 0]', '"offset": [0, Infinity, 0]')
    path.write_text(text)
    # NaN and Infinity are not JSON (Python's json reads them): refused where they stand
    assert message(load_skeleton, path) == (
        f"{path}: invalid JSON at line 1, column {text.index('Infinity') + 1}: Infinity is "
        "not a JSON number"
    )
    # 1e400 is a JSON number, too large for a float
    path.write_text(json.dumps(SKELETON).replace('"limits": [0.0, 2.5]', '"limits": [0.0, 1e400]'))
    assert message(load_skeleton, path) == (
        f"{path}: joints[2].limits[1]: must be a finite number, got Infinity"
    )


def test_axis_and_quaternion_are_normalised():
    data = mutated(SKELETON, lambda d: joint(2)(d).update(axis=[3, 4, 0]))
    joint(0)(data)["quaternion"] = [0, 0, 0, 2]
    s = parse_skeleton(data)
    assert s.joints[2].axis == pytest.approx((0.6, 0.8, 0.0), abs=1e-15)
    assert s.joints[0].quaternion == (0.0, 0.0, 0.0, 1.0)
    tiny = parse_skeleton(mutated(SKELETON, lambda d: joint(2)(d).update(axis=[0, 1e-300, 0])))
    assert tiny.joints[2].axis == (0.0, 1.0, 0.0)


def test_fields_that_do_not_apply_are_ignored():
    def change(d):
        joint(0)(d).update(axis=[0, 0, 0], limits=[5, -5], extra="x")
        joint(1)(d).update(axis="garbage", quaternion=[0, 0, 0, 0])
        joint(2)(d).update(quaternion=[1, 2, 3, 4], comment="ignored")

    s = parse_skeleton(mutated(SKELETON, change))
    assert s == parse_skeleton(SKELETON)


def test_defaults_offset_limits_and_equal_bounds():
    data = {
        "root_name": "R",
        "joints": [
            {"name": "R", "type": "fixed"},
            {"name": "A", "type": "revolute", "parent": "R", "axis": [0, 0, 1], "limits": [1, 1]},
            {"name": "B", "type": "spherical", "parent": "A", "limits": None},
            {"name": "C", "type": "prismatic", "parent": "B", "axis": [0, 1, 0], "limits": None},
        ],
    }
    r, a, b, c = parse_skeleton(data).joints
    assert r.offset == (0.0, 0.0, 0.0) and r.parent is None
    assert a.limits == (1.0, 1.0)
    assert b.limits is None and c.limits is None


def test_joints_are_ordered_parents_first_stably():
    def j(name, parent):
        return {"name": name, "type": "fixed", "parent": parent}

    data = {"root_name": "A", "joints": [j("D", "A"), j("C", "B"), j("A", None), j("B", "A")]}
    assert [x.name for x in parse_skeleton(data).joints] == ["A", "D", "B", "C"]
    data = {"root_name": "A", "joints": [j("C", "B"), j("A", None), j("B", "A"), j("D", "A")]}
    assert [x.name for x in parse_skeleton(data).joints] == ["A", "B", "C", "D"]
    reversed_spec = mutated(SKELETON, lambda d: d["joints"].reverse())
    assert parse_skeleton(reversed_spec) == parse_skeleton(SKELETON)


def test_skeleton_to_dict_writes_the_spec_shape():
    data = mutated(SKELETON, lambda d: joint(0)(d).update(quaternion=[1, 0, 0, 0]))
    out = skeleton_to_dict(parse_skeleton(data))
    assert out == {
        "root_name": "Root",
        "joints": [
            {
                "name": "Root",
                "type": "fixed",
                "offset": [0.0, 0.0, 0.0],
                "parent": None,
                "quaternion": [1.0, 0.0, 0.0, 0.0],
            },
            {
                "name": "Shoulder",
                "type": "spherical",
                "offset": [0.0, 1.5, 0.0],
                "parent": "Root",
                "limits": [[-3.14, 3.14], None, [-0.5, 0.5]],
            },
            {
                "name": "Elbow",
                "type": "revolute",
                "offset": [0.0, 0.0, 2.0],
                "parent": "Shoulder",
                "axis": [1.0, 0.0, 0.0],
                "limits": [0.0, 2.5],
            },
            {
                "name": "Piston",
                "type": "prismatic",
                "offset": [0.0, 0.0, 1.0],
                "parent": "Elbow",
                "axis": [0.0, 0.0, 1.0],
                "limits": [0.0, 0.5],
            },
        ],
    }
    no_limits = skeleton_to_dict(
        parse_skeleton({"root_name": "R", "joints": [{"name": "R", "type": "fixed"}]})
    )
    assert no_limits["joints"][0] == {
        "name": "R",
        "type": "fixed",
        "offset": [0.0, 0.0, 0.0],
        "parent": None,
    }


def test_skeleton_to_dict_drops_fields_that_do_not_apply_to_the_type():
    defn = SkeletonDef(
        "R",
        (
            JointDef("R", "fixed", limits=(0.0, 1.0), axis=(1.0, 0.0, 0.0)),
            JointDef("S", "spherical", parent="R", axis=(1.0, 0.0, 0.0), quaternion=(1, 0, 0, 0)),
            JointDef("E", "revolute", parent="S", axis=(0.0, 1.0, 0.0), quaternion=(1, 0, 0, 0)),
        ),
    )
    assert [sorted(j) for j in skeleton_to_dict(defn)["joints"]] == [
        ["name", "offset", "parent", "type"],
        ["name", "offset", "parent", "type"],
        ["axis", "name", "offset", "parent", "type"],
    ]


finite = st.floats(-100, 100, allow_nan=False, allow_infinity=False)
nonzero3 = st.tuples(finite, finite, finite).filter(lambda v: math.hypot(*v) > 1e-6)
nonzero4 = st.tuples(finite, finite, finite, finite).filter(lambda v: math.hypot(*v) > 1e-6)
ranges = st.tuples(finite, finite).map(lambda r: sorted(r))


@st.composite
def skeleton_files(draw):
    n = draw(st.integers(1, 8))
    joints = [
        {
            "name": "J0",
            "type": "fixed",
            "offset": list(draw(st.tuples(finite, finite, finite))),
            "parent": None,
        }
    ]
    if draw(st.booleans()):
        joints[0]["quaternion"] = list(draw(nonzero4))
    for i in range(1, n):
        kind = draw(st.sampled_from(formats.JOINT_TYPES))
        item = {
            "name": f"J{i}",
            "type": kind,
            "offset": list(draw(st.tuples(finite, finite, finite))),
            "parent": f"J{draw(st.integers(0, i - 1))}",
        }
        if kind in ("revolute", "prismatic"):
            item["axis"] = list(draw(nonzero3))
            item["limits"] = draw(st.none() | ranges)
        elif kind == "spherical":
            item["limits"] = draw(st.none() | st.lists(st.none() | ranges, min_size=3, max_size=3))
        elif draw(st.booleans()):
            item["quaternion"] = list(draw(nonzero4))
        joints.append(item)
    topological = list(joints)
    joints = draw(st.permutations(joints))
    return {"root_name": "J0", "joints": joints}, topological


@settings(max_examples=200, deadline=None)
@given(skeleton_files())
def test_skeleton_round_trip_and_order(case):
    data, topological = case
    s = parse_skeleton(data)
    assert parse_skeleton(skeleton_to_dict(s)) == s
    assert parse_skeleton(json.loads(json.dumps(skeleton_to_dict(s)))) == s
    position = {j.name: i for i, j in enumerate(s.joints)}
    assert sorted(position) == sorted(j["name"] for j in data["joints"])
    for j in s.joints:
        assert j.parent is None or position[j.parent] < position[j.name]
        if j.axis is not None:
            assert math.isclose(math.hypot(*j.axis), 1.0, abs_tol=1e-12)
        if j.quaternion is not None:
            assert math.isclose(math.hypot(*j.quaternion), 1.0, abs_tol=1e-12)
    # a file that is already parents-first keeps its order
    ordered = parse_skeleton({"root_name": "J0", "joints": topological})
    assert [j.name for j in ordered.joints] == [j["name"] for j in topological]


def test_save_and_load_skeleton(tmp_path):
    path = tmp_path / "skeleton.json"
    s = parse_skeleton(SKELETON)
    save_skeleton(s, path)
    assert load_skeleton(path) == s
    assert json.loads(path.read_text()) == skeleton_to_dict(s)


def test_save_skeleton_refuses_an_invalid_definition(tmp_path):
    path = tmp_path / "skeleton.json"
    path.write_text("old")
    bad = SkeletonDef(
        "R", (JointDef("R", "fixed"), JointDef("A", "revolute", parent="R", axis=(0, 0, 0)))
    )
    assert (
        message(save_skeleton, bad, path) == f"{path}: joints[1].axis: must be a non-zero 3-vector"
    )
    nan = SkeletonDef("R", (JointDef("R", "fixed", offset=(0.0, NAN, 0.0)),))
    assert message(save_skeleton, nan, path) == (
        f"{path}: joints[0].offset[1]: must be a finite number, got NaN"
    )
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["skeleton.json"]


# --------------------------------------------------------------------------- targets.json


def test_targets_are_sorted_by_frame():
    keys = parse_targets(TARGETS)
    assert [k.frame for k in keys] == [80, 160, 240]
    assert keys[0] == Keyframe(80, (1.0, 1.0, 1.0), (90.0, 0.0, 45.0))
    assert all(type(x) is float for k in keys for x in k.pos + k.euler)


def test_targets_accept_euler_beyond_180_and_frame_zero():
    keys = parse_targets([{"frame": 0, "pos": [0, 0, 0], "euler": [720, -540, 181]}])
    assert keys == [Keyframe(0, (0.0, 0.0, 0.0), (720.0, -540.0, 181.0))]


def key(i):
    return lambda d: d[i]


TARGET_FAULTS = [
    ("not an array", lambda d: {"keys": d}, "must be a JSON array of keyframes, got object"),
    ("empty", lambda d: [], "must contain at least one keyframe"),
    ("item not object", lambda d: d.__setitem__(1, [80]), "[1]: must be an object, got array"),
    ("frame missing", drop(key(1), "frame"), "[1].frame: required field is missing"),
    (
        "frame float",
        lambda d: key(1)(d).update(frame=3.0),
        "[1].frame: must be an integer >= 0, got 3.0",
    ),
    (
        "frame fraction",
        lambda d: key(1)(d).update(frame=2.5),
        "[1].frame: must be an integer >= 0, got 2.5",
    ),
    (
        "frame negative",
        lambda d: key(2)(d).update(frame=-1),
        "[2].frame: must be an integer >= 0, got -1",
    ),
    (
        "frame boolean",
        lambda d: key(0)(d).update(frame=True),
        "[0].frame: must be an integer >= 0, got true",
    ),
    (
        "frame string",
        lambda d: key(0)(d).update(frame="3"),
        '[0].frame: must be an integer >= 0, got "3"',
    ),
    (
        "duplicate frame",
        lambda d: key(2)(d).update(frame=160),
        "[2].frame: duplicate frame 160 (also [0])",
    ),
    ("pos missing", drop(key(0), "pos"), "[0].pos: required field is missing"),
    ("euler missing", drop(key(2), "euler"), "[2].euler: required field is missing"),
    (
        "pos short",
        lambda d: key(0)(d).update(pos=[1, 2]),
        "[0].pos: must be an array of 3 numbers, got [1, 2]",
    ),
    (
        "pos string",
        lambda d: key(0)(d).update(pos="1 2 3"),
        '[0].pos: must be an array of 3 numbers, got "1 2 3"',
    ),
    (
        "pos boolean",
        lambda d: key(1)(d).update(pos=[1, 2, False]),
        "[1].pos[2]: must be a number, got false",
    ),
    (
        "euler NaN",
        lambda d: key(0)(d).update(euler=[0, NAN, 0]),
        "[0].euler[1]: must be a finite number, got NaN",
    ),
    (
        "euler -inf",
        lambda d: key(0)(d).update(euler=[-INF, 0, 0]),
        "[0].euler[0]: must be a finite number, got -Infinity",
    ),
    (
        "euler 4 items",
        lambda d: key(2)(d).update(euler=[0, 0, 0, 0]),
        "[2].euler: must be an array of 3 numbers, got [0, 0, 0, 0]",
    ),
]


def _apply(base, change):
    data = copy.deepcopy(base)
    result = change(data)
    return data if result is None else result


@pytest.mark.parametrize(
    "change, expected", [f[1:] for f in TARGET_FAULTS], ids=[f[0] for f in TARGET_FAULTS]
)
def test_targets_fault(change, expected):
    data = _apply(TARGETS, change)
    assert message(parse_targets, data) == f"targets.json: {expected}"


def test_targets_fault_names_the_file(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text("[]")
    assert message(load_targets, path) == f"{path}: must contain at least one keyframe"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10_000),
            st.tuples(finite, finite, finite),
            st.tuples(finite, finite, finite),
        ),
        min_size=1,
        max_size=20,
        unique_by=lambda t: t[0],
    )
)
def test_targets_round_trip(items):
    keys = [Keyframe(f, p, e) for f, p, e in items]
    parsed = parse_targets(targets_to_list(keys))
    assert parsed == sorted(keys, key=lambda k: k.frame)
    assert parse_targets(json.loads(json.dumps(targets_to_list(parsed)))) == parsed


def test_save_and_load_targets(tmp_path):
    path = tmp_path / "targets.json"
    keys = parse_targets(TARGETS)
    save_targets(keys, path)
    assert load_targets(path) == keys
    assert '"pos": [1.0, 1.0, 1.0]' in path.read_text()


def test_save_targets_refuses_infinity(tmp_path):
    path = tmp_path / "targets.json"
    save_targets(parse_targets(TARGETS), path)
    before = path.read_text()
    bad = [Keyframe(0, (0.0, INF, 0.0), (0.0, 0.0, 0.0))]
    assert (
        message(save_targets, bad, path)
        == f"{path}: [0].pos[1]: must be a finite number, got Infinity"
    )
    assert path.read_text() == before
    assert os.listdir(tmp_path) == ["targets.json"]


# --------------------------------------------------------------------------- animation.json


def frame(i):
    return lambda d: d["frames"][i]


def entry(i, name):
    return lambda d: d["frames"][i]["joints"][name]


ANIMATION_FAULTS = [
    ("not an object", lambda d: d["frames"], 'must be a JSON object with "frames", got array'),
    ("frames missing", lambda d: {"frame": []}, "frames: required field is missing"),
    ("frames object", lambda d: {"frames": {}}, "frames: must be an array of frames, got object"),
    (
        "frame not object",
        lambda d: d["frames"].__setitem__(1, None),
        "frames[1]: must be an object, got null",
    ),
    ("frame missing", drop(frame(1), "frame"), "frames[1].frame: required field is missing"),
    (
        "frame float",
        lambda d: frame(1)(d).update(frame=1.0),
        "frames[1].frame: must be an integer >= 0, got 1.0",
    ),
    (
        "frame negative",
        lambda d: frame(0)(d).update(frame=-2),
        "frames[0].frame: must be an integer >= 0, got -2",
    ),
    (
        "frame repeated",
        lambda d: frame(1)(d).update(frame=0),
        "frames[1].frame: 0 does not follow the previous frame 0; "
        "frames must be strictly increasing",
    ),
    (
        "frame decreasing",
        lambda d: frame(0)(d).update(frame=5),
        "frames[1].frame: 1 does not follow the previous frame 5; "
        "frames must be strictly increasing",
    ),
    ("joints missing", drop(frame(0), "joints"), "frames[0].joints: required field is missing"),
    (
        "joints array",
        lambda d: frame(0)(d).update(joints=[]),
        "frames[0].joints: must be an object mapping joint names to values, got array",
    ),
    (
        "entry not object",
        lambda d: frame(0)(d)["joints"].update(Elbow=1.5),
        "frames[0].joints.Elbow: must be an object, got number",
    ),
    (
        "type missing",
        drop(entry(0, "Elbow"), "type"),
        "frames[0].joints.Elbow.type: required field is missing",
    ),
    (
        "type fixed",
        lambda d: entry(1, "Elbow")(d).update(type="fixed"),
        'frames[1].joints.Elbow.type: unknown joint type "fixed"; '
        'expected one of "revolute", "prismatic", "spherical"',
    ),
    (
        "angle missing",
        drop(entry(0, "Elbow"), "angle"),
        "frames[0].joints.Elbow.angle: required field is missing",
    ),
    (
        "angle string",
        lambda d: entry(0, "Elbow")(d).update(angle="1"),
        'frames[0].joints.Elbow.angle: must be a number, got "1"',
    ),
    (
        "displacement boolean",
        lambda d: entry(1, "Piston")(d).update(displacement=True),
        "frames[1].joints.Piston.displacement: must be a number, got true",
    ),
    (
        "displacement missing",
        drop(entry(1, "Piston"), "displacement"),
        "frames[1].joints.Piston.displacement: required field is missing",
    ),
    (
        "euler short",
        lambda d: entry(0, "Shoulder")(d).update(euler=[0, 0]),
        "frames[0].joints.Shoulder.euler: must be an array of 3 numbers, got [0, 0]",
    ),
    (
        "quaternion missing",
        drop(entry(0, "Shoulder"), "quaternion"),
        "frames[0].joints.Shoulder.quaternion: required field is missing",
    ),
    (
        "quaternion zero",
        lambda d: entry(1, "Shoulder")(d).update(quaternion=[0, 0, 0, 0]),
        "frames[1].joints.Shoulder.quaternion: must be a non-zero quaternion [w, x, y, z]",
    ),
    (
        "quaternion 3 items",
        lambda d: entry(1, "Shoulder")(d).update(quaternion=[1, 0, 0]),
        "frames[1].joints.Shoulder.quaternion: "
        "must be a non-zero quaternion [w, x, y, z], got [1, 0, 0]",
    ),
    (
        "quaternion NaN",
        lambda d: entry(1, "Shoulder")(d).update(quaternion=[NAN, 0, 0, 1]),
        "frames[1].joints.Shoulder.quaternion[0]: must be a finite number, got NaN",
    ),
    (
        "name needing quotes",
        lambda d: frame(0)(d)["joints"].update({"Bone.001": {"type": "revolute", "angle": None}}),
        'frames[0].joints["Bone.001"].angle: must be a number, got null',
    ),
]


@pytest.mark.parametrize(
    "change, expected", [f[1:] for f in ANIMATION_FAULTS], ids=[f[0] for f in ANIMATION_FAULTS]
)
def test_animation_fault(change, expected):
    data = _apply(ANIMATION, change)
    assert message(parse_animation, data) == f"animation.json: {expected}"


def test_animation_fault_deep_in_the_file(tmp_path):
    frames = [
        {"frame": i, "joints": {"Elbow": {"type": "revolute", "angle": 0.1 * i}}} for i in range(8)
    ]
    frames[5]["joints"]["Elbow"]["angle"] = 1e400
    path = tmp_path / "anim.json"
    path.write_text(json.dumps({"frames": frames}).replace("Infinity", "1e400"))
    assert message(load_animation, path) == (
        f"{path}: frames[5].joints.Elbow.angle: must be a finite number, got Infinity"
    )
    text = json.dumps({"frames": frames}).replace("Infinity", "NaN")
    path.write_text(text)
    assert message(load_animation, path) == (
        f"{path}: invalid JSON at line 1, column {text.index('NaN') + 1}: NaN is not a JSON "
        "number"
    )


def test_animation_parses_to_plain_floats_and_keeps_quaternions():
    frames = parse_animation(ANIMATION)
    assert frames == ANIMATION["frames"]
    assert frames[0]["joints"]["Shoulder"]["quaternion"] == [
        0.924,
        0.383,
        0.0,
        0.0,
    ]  # not renormalised
    assert type(frames[0]["joints"]["Elbow"]["angle"]) is float
    assert parse_animation({"frames": []}) == []


def test_save_and_load_animation_with_numpy_values(tmp_path):
    path = tmp_path / "animation.json"
    frames = [
        {
            "frame": np.int64(3),
            "joints": {
                "S": {
                    "type": "spherical",
                    "euler": np.array([0.1, 0.2, 0.3]),
                    "quaternion": np.array([1.0, 0.0, 0.0, 0.0]),
                },
                "E": {"type": "revolute", "angle": np.float64(0.5)},
                "P": {"type": "prismatic", "displacement": np.float32(0.25)},
            },
        }
    ]
    save_animation(frames, path)
    loaded = load_animation(path)
    assert loaded == [
        {
            "frame": 3,
            "joints": {
                "S": {
                    "type": "spherical",
                    "euler": [0.1, 0.2, 0.3],
                    "quaternion": [1.0, 0.0, 0.0, 0.0],
                },
                "E": {"type": "revolute", "angle": 0.5},
                "P": {"type": "prismatic", "displacement": 0.25},
            },
        }
    ]
    save_animation(loaded, path)
    assert load_animation(path) == loaded


def test_save_animation_with_nan_keeps_the_old_file(tmp_path):
    path = tmp_path / "animation.json"
    save_animation(ANIMATION["frames"], path)
    before = path.read_bytes()
    bad = mutated(ANIMATION, lambda d: entry(1, "Elbow")(d).update(angle=NAN))["frames"]
    assert message(save_animation, bad, path) == (
        f"{path}: frames[1].joints.Elbow.angle: must be a finite number, got NaN"
    )
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["animation.json"]


# ------------------------------------------------------------- load_json / atomic_write_json


def test_load_json_faults(tmp_path):
    missing = tmp_path / "nope.json"
    assert message(load_json, missing) == f"{missing}: cannot read: No such file or directory"
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "a": 1\n  "b": 2\n}')
    assert (
        message(load_json, bad)
        == f"{bad}: invalid JSON at line 3, column 3: Expecting ',' delimiter"
    )
    bad.write_text("")
    assert message(load_json, bad) == f"{bad}: invalid JSON at line 1, column 1: Expecting value"
    bad.write_text('{"axis": [1, 0, 0], "axis": [0, 0, 0]}')
    assert message(load_json, bad) == f'{bad}: invalid JSON: duplicate key "axis" in one object'
    bad.write_bytes(b'{"name": "\xff"}')
    assert message(load_json, bad) == f"{bad}: cannot read: not UTF-8 text"
    assert message(load_json, tmp_path).startswith(f"{tmp_path}: cannot read: ")


def test_load_json_accepts_a_byte_order_mark(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(TARGETS).encode())
    assert load_json(path) == TARGETS


def test_atomic_write_refuses_nan_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "out.json"
    atomic_write_json(path, {"a": [1, 2]})
    before = path.read_bytes()
    assert message(atomic_write_json, path, {"a": [1, NAN]}) == (
        f"{path}: a[1]: cannot save a non-finite number (NaN)"
    )
    assert message(atomic_write_json, path, {"x y": {"b": np.array([0.0, -np.inf])}}) == (
        f'{path}: ["x y"].b[1]: cannot save a non-finite number (-Infinity)'
    )
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["out.json"]


def test_atomic_write_failure_during_rename_leaves_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "out.json"
    atomic_write_json(path, [1])

    def broken_replace(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(formats.os, "replace", broken_replace)
    assert message(atomic_write_json, path, [2]) == f"{path}: cannot write: Permission denied"
    monkeypatch.undo()
    assert json.loads(path.read_text()) == [1]
    assert os.listdir(tmp_path) == ["out.json"]


def test_atomic_write_unserialisable_value_writes_nothing(tmp_path):
    path = tmp_path / "out.json"
    with pytest.raises(TypeError):
        atomic_write_json(path, {"a": object()})
    assert os.listdir(tmp_path) == []


def test_atomic_write_into_a_missing_directory(tmp_path):
    path = tmp_path / "no" / "out.json"
    assert (
        message(atomic_write_json, path, []) == f"{path}: cannot write: No such file or directory"
    )


def test_atomic_write_format_and_modes(tmp_path):
    path = tmp_path / "out.json"
    old = os.umask(0o022)
    try:
        atomic_write_json(path, {"pos": (1.0, 2, np.float64(3.5)), "n": None, "ok": True, "s": "é"})
    finally:
        os.umask(old)
    text = path.read_text(encoding="utf-8")
    assert text == '{\n  "pos": [1.0, 2, 3.5],\n  "n": null,\n  "ok": true,\n  "s": "é"\n}\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    path.chmod(0o600)
    atomic_write_json(path, [])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == "[]\n"


# --------------------------------------------------------------------------- detect_kind


def test_detect_kind():
    assert detect_kind(SKELETON) == "skeleton"
    assert detect_kind(ANIMATION) == "animation"
    assert detect_kind(TARGETS) == "targets"
    assert detect_kind([]) == "targets"
    assert detect_kind({"frames": []}) == "animation"


@pytest.mark.parametrize("data", [{}, {"joints": {}}, "skeleton", 3, None])
def test_detect_kind_rejects_other_data(data):
    assert message(detect_kind, data) == (
        'input: not a dhik file: expected a skeleton (object with a "joints" array), '
        'targets (array of keyframes) or an animation (object with "frames")'
    )
    assert message(detect_kind, data, "x.json").startswith("x.json: not a dhik file")
