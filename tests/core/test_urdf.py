"""URDF import (core/app/urdf.py): FK of robots nobody here wrote against pinocchio,
URDF's conventions against hand computations, and one clear error per bad input.

pinocchio (PyPI ``pin``) and example-robot-data come with the ``robots`` extra, which
the Makefile installs into .venv only (they need numpy 2, Blender's venv has 1.26): the
tests that use them skip where the extra is absent, the others run everywhere.
"""

from __future__ import annotations

import math
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
import pytest
from dhik.app.bake import simulate, summary_line
from dhik.app.formats import load_skeleton, save_skeleton
from dhik.app.urdf import load_urdf, parse_urdf
from dhik.errors import DhikError
from dhik.model.skeleton import Skeleton
from fixtures import robots_dir

# --------------------------------------------------------------------------- references


def _rx(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=float)


def _ry(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]], dtype=float)


def _rz(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=float)


def _rodrigues(axis: np.ndarray, angle: float) -> np.ndarray:
    k = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx


def _transform(r: np.ndarray, p) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = r
    t[:3, 3] = p
    return t


def _robot(body: str, links: str = "base a b c") -> str:
    link_xml = "".join(f'<link name="{n}"/>' for n in links.split())
    return f'<?xml version="1.0"?>\n<robot name="r">{link_xml}{body}</robot>'


def _joint(name: str, jtype: str, parent: str, child: str, extra: str = "") -> str:
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/>'
            f'<child link="{child}"/>{extra}</joint>')


# --------------------------------------------------------------------------- conventions


def test_rpy_is_fixed_axis_roll_pitch_yaw() -> None:
    """A fixed joint's rpy: R = Rz(yaw) Ry(pitch) Rx(roll), then xyz in the parent frame."""
    r, p, y = 0.3, -0.7, 1.9
    text = _robot(_joint("j", "fixed", "base", "a",
                         f'<origin xyz="0.1 -0.2 0.3" rpy="{r} {p} {y}"/>'), "base a")
    skel, warnings = parse_urdf(text, "r.urdf")
    assert warnings == []
    sk = Skeleton(skel)
    expected = _transform(_rz(y) @ _ry(p) @ _rx(r), [0.1, -0.2, 0.3])
    np.testing.assert_allclose(sk.joints["j"].global_transform, expected, atol=1e-15)
    assert skel.root_name == "base" and [j.name for j in skel.joints] == ["base", "j"]


def test_moving_joint_with_rpy_rotates_about_its_axis_in_the_joint_frame() -> None:
    """child pose = parent @ T(xyz) R(rpy) Rot(axis, q); the prismatic one slides on R(rpy) axis."""
    origin = '<origin xyz="0.5 0 0.25" rpy="0.4 0.2 -1.1"/>'
    body = (_joint("hinge", "revolute", "base", "a",
                   origin + '<axis xyz="0 1 1"/><limit lower="-1" upper="2"/>')
            + _joint("slide", "prismatic", "a", "b",
                     '<origin xyz="0 0 0.1" rpy="0 1.5 0"/><axis xyz="1 0 0"/>'
                     '<limit lower="0" upper="0.2"/>'))
    skel, _ = parse_urdf(_robot(body, "base a b"), "r.urdf")
    by_name = {j.name: j for j in skel.joints}
    assert by_name["hinge"].limits == (-1.0, 2.0) and by_name["hinge"].type == "revolute"
    assert by_name["slide"].type == "prismatic" and by_name["slide"].limits == (0.0, 0.2)
    assert by_name["hinge"].parent == "hinge__origin"  # the documented helper name
    sk = Skeleton(skel)
    q1, q2 = 1.3, 0.15
    sk.joints["hinge"].q, sk.joints["slide"].q = q1, q2
    sk.update()
    hinge = (_transform(_rz(-1.1) @ _ry(0.2) @ _rx(0.4), [0.5, 0, 0.25])
             @ _transform(_rodrigues(np.array([0, 1, 1]), q1), [0, 0, 0]))
    slide = hinge @ _transform(_ry(1.5), [0, 0, 0.1]) @ _transform(np.eye(3), [q2, 0, 0])
    np.testing.assert_allclose(sk.joints["hinge"].global_transform, hinge, atol=1e-14)
    np.testing.assert_allclose(sk.joints["slide"].global_transform, slide, atol=1e-14)


def test_continuous_joint_is_an_unlimited_revolute() -> None:
    body = _joint("wheel", "continuous", "base", "a",
                  '<axis xyz="0 0 2"/><limit effort="1" velocity="1"/>')
    skel, warnings = parse_urdf(_robot(body, "base a"), "r.urdf")
    wheel = {j.name: j for j in skel.joints}["wheel"]
    assert (wheel.type, wheel.limits, wheel.axis) == ("revolute", None, (0.0, 0.0, 1.0))
    assert warnings == []
    sk = Skeleton(skel)
    sk.joints["wheel"].apply_delta(7.0)  # beyond 2 pi: nothing clips it
    sk.update()
    assert sk.joints["wheel"].q == 7.0
    np.testing.assert_allclose(sk.joints["wheel"].global_transform[:3, :3], _rz(7.0),
                               atol=1e-15)


def test_defaults_axis_x_and_zero_origin() -> None:
    body = _joint("j", "revolute", "base", "a", '<limit lower="-1" upper="1"/>')
    skel, _ = parse_urdf(_robot(body, "base a"), "r.urdf")
    j = skel.joints[1]
    assert (j.axis, j.offset, j.parent) == ((1.0, 0.0, 0.0), (0.0, 0.0, 0.0), "base")


def test_mimic_joint_is_independent_and_warned() -> None:
    body = (_joint("f1", "prismatic", "base", "a",
                   '<axis xyz="0 1 0"/><limit lower="0" upper="0.04"/>')
            + _joint("f2", "prismatic", "base", "b",
                     '<axis xyz="0 -1 0"/><limit lower="0" upper="0.04"/>'
                     '<mimic joint="f1" multiplier="1" offset="0"/>'))
    skel, warnings = parse_urdf(_robot(body, "base a b"), "hand.urdf")
    assert len(warnings) == 1
    assert warnings[0].startswith("hand.urdf: joint[name=f2]: mimics joint 'f1'")
    assert "independent prismatic joint" in warnings[0]
    f2 = {j.name: j for j in skel.joints}["f2"]
    assert (f2.type, f2.limits, f2.axis) == ("prismatic", (0.0, 0.04), (0.0, -1.0, 0.0))


def test_locked_joint_is_warned() -> None:
    body = _joint("j", "revolute", "base", "a", '<limit effort="1" velocity="1"/>')
    skel, warnings = parse_urdf(_robot(body, "base a"), "r.urdf")
    assert skel.joints[1].limits == (0.0, 0.0)
    assert warnings == ["r.urdf: joint[name=j]: limits lower = upper = 0.0: the joint is locked"]


def test_names_that_clash_get_a_suffix() -> None:
    """The root is named after its link, the helper after its joint; a clash adds a suffix."""
    body = (_joint("base", "fixed", "base", "a")
            + _joint("j", "revolute", "a", "b",
                     '<origin rpy="0 0 1"/><limit lower="-1" upper="1"/>')
            + _joint("j__origin", "fixed", "b", "c"))
    skel, _ = parse_urdf(_robot(body), "r.urdf")
    names = [j.name for j in skel.joints]
    assert names == ["base__root", "base", "j__origin_2", "j", "j__origin"]
    assert skel.root_name == "base__root"


def test_tree_order_and_file_round_trip(tmp_path: Path) -> None:
    body = (_joint("j2", "fixed", "a", "c", '<origin xyz="0 0 1"/>')
            + _joint("j1", "revolute", "base", "a",
                     '<origin rpy="0.1 0 0"/><limit lower="-1" upper="1"/>')
            + _joint("j3", "continuous", "a", "b", '<origin xyz="1 0 0"/>'))
    skel, _ = parse_urdf(_robot(body), "r.urdf")
    assert [j.name for j in skel.joints] == ["base", "j1__origin", "j1", "j2", "j3"]
    save_skeleton(skel, tmp_path / "s.json")
    assert load_skeleton(tmp_path / "s.json") == skel


# --------------------------------------------------------------------------- refusals

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<robot name="&lol9;"><link name="base"/></robot>
"""


@pytest.mark.parametrize("text", [
    BILLION_LAUGHS,
    '<?xml version="1.0"?><!DOCTYPE robot SYSTEM "file:///etc/passwd"><robot/>',
    '<!DOCTYPE robot [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    '<robot name="&x;"><link name="a"/></robot>',
    '<!DOCTYPE robot><robot name="r"><link name="a"/></robot>',
], ids=["billion-laughs", "external-dtd", "external-entity", "bare-doctype"])
def test_doctype_and_entities_are_refused(text: str) -> None:
    with pytest.raises(DhikError) as exc:
        parse_urdf(text, "evil.urdf")
    msg = str(exc.value)
    assert msg.startswith("evil.urdf: line ") and "DOCTYPE" in msg and "\n" not in msg


def test_billion_laughs_as_utf16_bytes_is_refused() -> None:
    """The refusal is the parser's, not a text search: another encoding does not slip by."""
    with pytest.raises(DhikError, match="DOCTYPE declarations are not accepted"):
        parse_urdf(BILLION_LAUGHS.replace('"1.0"?>', '"1.0" encoding="UTF-16"?>')
                   .encode("utf-16"), "evil.urdf")


LIMIT = '<limit lower="-1" upper="1"/>'


@pytest.mark.parametrize("body, links, expected", [
    (_joint("j", "screw", "base", "a"), "base a",
     "r.urdf: joint[name=j]: unknown joint type 'screw'; expected revolute, continuous, "
     "prismatic, fixed, floating or planar"),
    (_joint("j", "fixed", "base", "a"), "base a b",
     "r.urdf: robot: several root links (base, b): a skeleton has one root; "
     "connect them with joints"),
    (_joint("j", "fixed", "a", "b") + _joint("k", "fixed", "b", "a"), "a b",
     "r.urdf: joint[name=j]: is on a cycle: every link has a parent joint"),
    (_joint("j", "fixed", "base", "a") + _joint("k", "fixed", "b", "c")
     + _joint("m", "fixed", "c", "b"), "base a b c",
     "r.urdf: joint[name=k]: is on a cycle not connected to the root link 'base'"),
    (_joint("j", "fixed", "a", "a"), "a",
     "r.urdf: joint[name=j]: link 'a' is its own parent (a cycle)"),
    (_joint("j", "fixed", "base", "b") + _joint("k", "fixed", "a", "b"), "base a b",
     "r.urdf: joint[name=k]: link 'b' is already the child of joint 'j' (a link has one "
     "parent)"),
    (_joint("j", "fixed", "base", "hand"), "base",
     "r.urdf: joint[name=j]: child link 'hand' is not a <link> of the robot"),
    (_joint("j", "fixed", "arm", "base"), "base",
     "r.urdf: joint[name=j]: parent link 'arm' is not a <link> of the robot"),
    ('<joint name="j" type="fixed"><child link="a"/></joint>', "base a",
     'r.urdf: joint[name=j]: <parent link="..."/> is missing'),
    ('<joint type="fixed"/>', "base",
     "r.urdf: joint[1]: the name attribute is missing"),
    (_joint("j", "fixed", "base", "a") + _joint("j", "fixed", "a", "b"), "base a b",
     "r.urdf: joint[name=j]: a second joint with this name"),
    ("", "base base", "r.urdf: link[name=base]: a second link with this name"),
    ("", "", "r.urdf: robot: has no <link>"),
    (_joint("j", "revolute", "base", "a"), "base a",
     "r.urdf: joint[name=j]: a revolute joint needs a <limit> element (use type continuous "
     "for an unlimited hinge)"),
    (_joint("j", "prismatic", "base", "a", '<limit lower="1" upper="0"/>'), "base a",
     "r.urdf: joint[name=j].limit: lower 1.0 is greater than upper 0.0"),
    (_joint("j", "revolute", "base", "a", '<limit lower="-1" upper="nan"/>'), "base a",
     "r.urdf: joint[name=j].limit.upper: must be a finite decimal number (ASCII digits), "
     "got 'nan'"),
    (_joint("j", "revolute", "base", "a", '<axis xyz="0 0 0"/>' + LIMIT), "base a",
     "r.urdf: joint[name=j].axis.xyz: must be a non-zero 3-vector"),
    (_joint("j", "fixed", "base", "a", '<origin xyz="1 2"/>'), "base a",
     "r.urdf: joint[name=j].origin.xyz: must be 3 finite decimal numbers (ASCII digits), "
     "got '1 2'"),
    (_joint("j", "fixed", "base", "a", '<origin rpy="0 x 0"/>'), "base a",
     "r.urdf: joint[name=j].origin.rpy: must be 3 finite decimal numbers (ASCII digits), "
     "got '0 x 0'"),
    # issue 19: in URDF terms, not the skeleton.json it becomes (joints[1].offset[0])
    (_joint("j", "fixed", "base", "a", '<origin xyz="2e9 0 0"/>'), "base a",
     "r.urdf: joint[name=j].origin.xyz: must be within +-1e+09 m, got '2e9 0 0'"),
    (_joint("j", "floating", "base", "a", '<origin xyz="0 -5e9 0"/>'), "base a",
     "r.urdf: joint[name=j].origin.xyz: must be within +-1e+09 m, got '0 -5e9 0'"),
])
def test_bad_robot_is_one_clear_error(body: str, links: str, expected: str) -> None:
    with pytest.raises(DhikError) as exc:
        parse_urdf(_robot(body, links), "r.urdf")
    assert str(exc.value) == expected


@pytest.mark.parametrize("text, expected", [
    ('<robot name="r"><link name="a"/>', "r.urdf: not well-formed XML: no element found"),
    ('<sdf><link name="a"/></sdf>', "r.urdf: the root element is <sdf>, expected <robot>"),
])
def test_not_a_urdf(text: str, expected: str) -> None:
    with pytest.raises(DhikError) as exc:
        parse_urdf(text, "r.urdf")
    assert str(exc.value).startswith(expected)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DhikError, match=r"nope\.urdf: No such file or directory"):
        load_urdf(tmp_path / "nope.urdf")


# --------------------------------------------------------------------------- real robots


ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",  # rpy on every joint, mimic fingers
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "kinova": "kinova_description/robots/kinova.urdf",  # continuous joints
    "talos_left_arm": "talos_data/robots/talos_left_arm.urdf",
    "tiago": "tiago_description/robots/tiago.urdf",  # a tree of 77 joints, several arms
}


def robot_fk_errors(path: Path, configurations: int, seed: int) -> tuple[float, float]:
    """Max |position| (m) and |rotation matrix entry| differences, dhik vs pinocchio.

    For every URDF joint X: the world transform of skeleton joint X against pinocchio's
    oMf of X's child link (and oMi of X for a moving joint), on random configurations
    uniform within the limits (continuous joints over [-2 pi, 2 pi]).
    """
    pin = pytest.importorskip("pinocchio")
    skel, _ = load_urdf(path)
    model = pin.buildModelFromUrdf(str(path))  # mimic=False: mimic joints independent too
    data = model.createData()
    urdf = ET.parse(path).getroot()
    child = {j.get("name"): j.find("child").get("link") for j in urdf.findall("joint")}
    root_link = skel.root_name
    sk = Skeleton(skel)
    rng = np.random.default_rng(seed)
    pos_err = rot_err = 0.0
    moving = list(range(1, model.njoints))
    assert {model.names[i] for i in moving} == {
        j.name for j in skel.joints if j.type in ("revolute", "prismatic")}
    for _ in range(configurations):
        q = pin.neutral(model)
        for i in moving:
            jm, joint = model.joints[i], sk.joints[model.names[i]]
            lo, hi = joint.limits if joint.limits is not None else (-2 * math.pi, 2 * math.pi)
            value = float(rng.uniform(lo, hi))
            joint.q = value
            if jm.nq == 2:  # pinocchio's continuous joint: (cos, sin)
                q[jm.idx_q:jm.idx_q + 2] = [math.cos(value), math.sin(value)]
            else:
                q[jm.idx_q] = value
        sk.update()
        pin.framesForwardKinematics(model, data, q)
        pairs = [(root_link, data.oMf[model.getFrameId(root_link, pin.BODY)])]
        pairs += [(name, data.oMf[model.getFrameId(link, pin.BODY)])
                  for name, link in child.items()]
        pairs += [(model.names[i], data.oMi[i]) for i in moving]
        for name, placement in pairs:
            t = sk.joints[name].global_transform
            pos_err = max(pos_err, float(np.abs(t[:3, 3] - placement.translation).max()))
            rot_err = max(rot_err, float(np.abs(t[:3, :3] - placement.rotation).max()))
    return pos_err, rot_err


@pytest.mark.parametrize("robot", list(ROBOTS))
def test_fk_matches_pinocchio(robot: str) -> None:
    pos_err, rot_err = robot_fk_errors(robots_dir() / ROBOTS[robot], 200, seed=10)
    assert pos_err <= 1e-9 and rot_err <= 1e-9, (pos_err, rot_err)


def test_limits_match_pinocchio() -> None:
    pin = pytest.importorskip("pinocchio")
    path = robots_dir() / ROBOTS["panda"]
    skel, warnings = load_urdf(path)
    assert [w.split(": ", 1)[1] for w in warnings] == [
        "joint[name=panda_finger_joint2]: mimics joint 'panda_finger_joint1' (multiplier 1, "
        "offset 0); imported as an independent prismatic joint (skeleton.json cannot couple "
        "joints)"]
    model = pin.buildModelFromUrdf(str(path))
    by_name = {j.name: j for j in skel.joints}
    for i in range(1, model.njoints):
        j = by_name[model.names[i]]
        iq = model.joints[i].idx_q
        assert j.limits == (model.lowerPositionLimit[iq], model.upperPositionLimit[iq])


def test_bake_on_panda_converges_to_pinocchio_targets(capsys) -> None:
    """Targets from pinocchio's FK along a smooth joint path: every frame converges."""
    pin = pytest.importorskip("pinocchio")
    path = robots_dir() / ROBOTS["panda"]
    skel, _ = load_urdf(path)
    model = pin.buildModelFromUrdf(str(path))
    data = model.createData()
    tcp = model.getFrameId("panda_hand_tcp", pin.BODY)
    lo, hi = model.lowerPositionLimit, model.upperPositionLimit
    mid, amp = (lo + hi) / 2, (hi - lo) / 2
    phase = np.linspace(0.3, 2.0, model.nq)
    targets = []
    for frame in range(120):  # each joint swings over 70 % of its range, smoothly
        q = mid + 0.7 * amp * np.sin(2 * math.pi * frame / 120 + phase)
        pin.framesForwardKinematics(model, data, q)
        targets.append((frame, np.array(data.oMf[tcp].homogeneous)))
    result = simulate(Skeleton(skel), targets, effector="panda_hand_tcp_joint",
                      method="robust")
    line = summary_line(result)
    with capsys.disabled():
        print("\nPanda bake to pinocchio targets:", line)
    assert result.converged_count == len(targets) == 120, line


# --------------------------------------------------------------------------- the command


def test_cli_import_urdf_writes_the_skeleton_and_warns(tmp_path: Path, capsys) -> None:
    from dhik.app.cli import main

    body = (_joint("arm", "revolute", "base", "a",
                   '<origin xyz="0 0 0.5" rpy="0 0.3 0"/><axis xyz="0 0 1"/>' + LIMIT)
            + _joint("finger", "prismatic", "a", "b",
                     '<limit lower="0" upper="0.1"/><mimic joint="arm"/>'))
    (tmp_path / "r.urdf").write_text(_robot(body, "base a b"))
    out = tmp_path / "skeleton.json"
    code = main(["import-urdf", str(tmp_path / "r.urdf"), "-o", str(out)])
    stdout, stderr = capsys.readouterr()
    assert code == 0
    assert stderr == (f"dhik: warning: {tmp_path / 'r.urdf'}: joint[name=finger]: mimics joint "
                      "'arm' (multiplier 1, offset 0); imported as an independent prismatic "
                      "joint (skeleton.json cannot couple joints)\n")
    assert stdout == (f"dhik import-urdf: {out}: 4 joints (2 moving), root base, 1 warning\n")
    assert load_skeleton(out) == load_urdf(tmp_path / "r.urdf").skeleton


def test_cli_import_urdf_bad_input_leaves_the_old_file(tmp_path: Path, capsys) -> None:
    from dhik.app.cli import main

    out = tmp_path / "skeleton.json"
    out.write_text("old")
    (tmp_path / "r.urdf").write_text(_robot(_joint("j", "screw", "base", "a"), "base a"))
    code = main(["import-urdf", str(tmp_path / "r.urdf"), "-o", str(out)])
    stdout, stderr = capsys.readouterr()
    assert (code, stdout) == (2, "")
    assert stderr == (f"dhik: error: {tmp_path / 'r.urdf'}: joint[name=j]: unknown joint type "
                      "'screw'; expected revolute, continuous, prismatic, fixed, floating or "
                      "planar\n")
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == [
        "r.urdf", "skeleton.json"]
    code = main(["import-urdf", str(tmp_path / "missing.urdf"), "-o", str(out)])
    assert code == 2 and capsys.readouterr().err.count("\n") == 1


def test_cli_panda_import_then_bake(tmp_path: Path, capsys) -> None:
    """The user's path: import-urdf, targets.json from pinocchio's FK, dhik bake."""
    import json

    from dhik.app.cli import main
    from scipy.spatial.transform import Rotation

    pin = pytest.importorskip("pinocchio")
    path = robots_dir() / ROBOTS["panda"]
    skeleton = tmp_path / "skeleton.json"
    assert main(["import-urdf", str(path), "-o", str(skeleton)]) == 0
    model = pin.buildModelFromUrdf(str(path))
    data = model.createData()
    tcp = model.getFrameId("panda_hand_tcp", pin.BODY)
    lo, hi = model.lowerPositionLimit, model.upperPositionLimit
    keys = []
    for frame in range(0, 61, 3):  # keyframes every 3rd frame, linear in between
        q = lo + (hi - lo) * (0.5 + 0.3 * np.sin(2 * math.pi * frame / 60
                                                 + np.arange(model.nq)))
        pin.framesForwardKinematics(model, data, q)
        m = data.oMf[tcp]
        keys.append({"frame": frame, "pos": m.translation.tolist(),
                     "euler": Rotation.from_matrix(m.rotation).as_euler("xyz", degrees=True)})
    # unwrapped, so that the linear interpolation between keys takes the short way
    eulers = np.unwrap([k["euler"] for k in keys], period=360.0, axis=0)
    for k, e in zip(keys, eulers, strict=True):
        k["euler"] = e.tolist()
    (tmp_path / "targets.json").write_text(json.dumps(keys))
    capsys.readouterr()
    code = main(["bake", str(skeleton), str(tmp_path / "targets.json"), "-o",
                 str(tmp_path / "animation.json"), "--effector", "panda_hand_tcp_joint",
                 "--report", str(tmp_path / "report.json")])
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "report.json").read_text())
    assert code == 0 and report["frames"] == 61
    assert report["converged"] == 61 and "61/61 converged" in out, out


# --------------------------------------------------------------------------- issue 19


@pytest.mark.parametrize("encoding", ["UTF-7", "UTF-32", "utf-32-le", "shift_jis",
                                      "no-such-encoding"])
def test_encodings_expat_cannot_read_are_one_error(encoding: str) -> None:
    """pyexpat raised ValueError ("multi-byte encodings are not supported") or LookupError:
    a traceback from dhik import-urdf and from Blender's import."""
    text = _robot("", "base").replace('version="1.0"?>', f'version="1.0" encoding="{encoding}"?>')
    with pytest.raises(DhikError) as exc:
        parse_urdf(text.encode("ascii"), "r.urdf")
    assert str(exc.value) == (f"r.urdf: cannot read: encoding {encoding!r} is not supported "
                              "(URDF files are UTF-8; UTF-16 and single-byte encodings are "
                              "read too)")


def test_utf32_bytes_are_one_error_and_readable_encodings_read() -> None:
    with pytest.raises(DhikError, match="r.urdf: cannot read: UTF-32 text"):
        parse_urdf(_robot("", "base").encode("utf-32"), "r.urdf")
    body = _joint("gelenk\u00e4", "fixed", "base", "a")
    for encoding in ("UTF-8", "UTF-16", "ISO-8859-1", "windows-1252"):
        text = _robot(body, "base a").replace('version="1.0"?>',
                                              f'version="1.0" encoding="{encoding}"?>')
        skel, _ = parse_urdf(text.encode(encoding), "r.urdf")
        assert [j.name for j in skel.joints] == ["base", "gelenk\u00e4"], encoding


@pytest.mark.parametrize("number", ["1_000", "\u0661", "\uff11", "0x10", "1.5.", "inf",
                                    "+-1", "\u00b9"])
def test_numbers_are_ascii_xml_schema_decimals(number: str) -> None:
    """float() reads '1_000', Arabic-Indic and fullwidth digits; URDF (XML Schema double)
    does not."""
    body = _joint("j", "fixed", "base", "a", f'<origin xyz="{number} 0 0"/>')
    with pytest.raises(DhikError, match="origin.xyz: must be 3 finite decimal numbers"):
        parse_urdf(_robot(body, "base a"), "r.urdf")
    limit = _joint("k", "revolute", "base", "a", f'<limit lower="-1" upper="{number}"/>')
    with pytest.raises(DhikError, match=r"limit.upper: must be a finite decimal number"):
        parse_urdf(_robot(limit, "base a"), "r.urdf")


@pytest.mark.parametrize("number, value", [("1", 1.0), ("-2.5e-3", -2.5e-3), (".5", 0.5),
                                           ("3.", 3.0), ("+1E2", 100.0)])
def test_xml_schema_decimals_read(number: str, value: float) -> None:
    body = _joint("j", "fixed", "base", "a", f'<origin xyz="{number} 0\t0"/>')
    skel, _ = parse_urdf(_robot(body, "base a"), "r.urdf")
    assert skel.joints[1].offset == (value, 0.0, 0.0)


def test_a_huge_attribute_is_not_echoed_whole() -> None:
    huge = "1 " * 2_500_000  # 5 MB
    body = _joint("j", "fixed", "base", "a", f'<origin xyz="{huge}"/>')
    with pytest.raises(DhikError) as exc:
        parse_urdf(_robot(body, "base a"), "r.urdf")
    message = str(exc.value)
    assert len(message) < 300 and "(5,000,000 characters)" in message, message
    name = "n" * 1_000_000
    with pytest.raises(DhikError) as exc:
        parse_urdf(_robot(_joint(name, "screw", "base", "a"), "base a"), "r.urdf")
    assert len(str(exc.value)) < 400 and "1,000,000 characters" in str(exc.value)


# --------------------------------------------------------------------------- free joints


def _free_robot(origin: str, planar_axis: str = "0 0 1") -> str:
    """base -floating-> pelvis -revolute-> thigh -planar-> foot -fixed-> toe."""
    body = (_joint("root", "floating", "base", "pelvis", origin)
            + _joint("hip", "revolute", "pelvis", "thigh",
                     '<origin xyz="0 0.1 -0.1" rpy="0.2 0 0"/><axis xyz="0 1 0"/>'
                     '<limit lower="-1" upper="1" effort="1" velocity="1"/>')
            + _joint("slide", "planar", "thigh", "foot",
                     f'<origin xyz="0 0 -0.4" rpy="0 0.3 0.1"/><axis xyz="{planar_axis}"/>')
            + _joint("toe_j", "fixed", "foot", "toe", '<origin xyz="0.1 0 0"/>'))
    return _robot(body, "base pelvis thigh foot toe")


def test_floating_and_planar_joints_import_as_free_translation() -> None:
    """DECISIONS "Translation, free roots": floating X is X.tx, X.ty, X.tz (prismatic
    along the joint frame's x, y, z) then the unlimited spherical X; planar X is X.tx,
    X.ty in its plane then a revolute X about its axis."""
    skel, warnings = parse_urdf(_free_robot('<origin xyz="0.3 0 1"/>'), "r.urdf")
    assert warnings == []
    by_name = {j.name: j for j in skel.joints}
    assert [j.name for j in skel.joints] == [
        "base", "root.tx", "root.ty", "root.tz", "root", "hip__origin", "hip",
        "slide__origin", "slide.tx", "slide.ty", "slide", "toe_j"]
    assert [(by_name[n].type, by_name[n].axis, by_name[n].limits) for n in
            ("root.tx", "root.ty", "root.tz")] == [
        ("prismatic", (1.0, 0.0, 0.0), None), ("prismatic", (0.0, 1.0, 0.0), None),
        ("prismatic", (0.0, 0.0, 1.0), None)]
    assert by_name["root.tx"].offset == (0.3, 0.0, 1.0) and by_name["root"].offset == (0, 0, 0)
    assert (by_name["root"].type, by_name["root"].limits) == ("spherical", None)
    assert [by_name[n].axis for n in ("slide.tx", "slide.ty", "slide")] == [
        (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)]
    assert by_name["slide"].type == "revolute" and by_name["slide"].limits is None


def _free_fk_errors(text: str, configurations: int, seed: int) -> tuple[float, float]:
    """dhik vs pinocchio on a robot with a floating and a planar joint (axis z: pinocchio's
    planar joint always moves in its joint frame's XY plane, whatever the URDF axis)."""
    import tempfile

    pin = pytest.importorskip("pinocchio")
    with tempfile.NamedTemporaryFile("w", suffix=".urdf", delete=False) as f:
        f.write(text)
    model = pin.buildModelFromUrdf(f.name)
    Path(f.name).unlink()
    data = model.createData()
    skel, _ = parse_urdf(text, "r.urdf")
    sk = Skeleton(skel)
    rng = np.random.default_rng(seed)
    pos_err = rot_err = 0.0
    for _ in range(configurations):
        p, x, y, theta, hip = rng.uniform(-1, 1, 3), *rng.uniform(-2, 2, 2), \
            rng.uniform(-math.pi, math.pi), rng.uniform(-1, 1)
        quat = rng.normal(size=4)
        quat /= np.linalg.norm(quat)  # w, x, y, z
        q = pin.neutral(model)
        for name, values in (("root", [*p, *quat[1:], quat[0]]), ("hip", [hip]),
                             ("slide", [x, y, math.cos(theta), math.sin(theta)])):
            jm = model.joints[model.getJointId(name)]
            q[jm.idx_q:jm.idx_q + jm.nq] = values
        sk.set_joint_values({
            "root.tx": {"type": "prismatic", "displacement": p[0]},
            "root.ty": {"type": "prismatic", "displacement": p[1]},
            "root.tz": {"type": "prismatic", "displacement": p[2]},
            "root": {"type": "spherical", "euler": [0, 0, 0], "quaternion": quat.tolist()},
            "hip": {"type": "revolute", "angle": hip},
            "slide.tx": {"type": "prismatic", "displacement": x},
            "slide.ty": {"type": "prismatic", "displacement": y},
            "slide": {"type": "revolute", "angle": theta}})
        pin.framesForwardKinematics(model, data, q)
        for joint, link in (("root", "pelvis"), ("hip", "thigh"), ("slide", "foot"),
                            ("toe_j", "toe")):
            placement = data.oMf[model.getFrameId(link, pin.BODY)]
            t = sk.joints[joint].global_transform
            pos_err = max(pos_err, float(np.abs(t[:3, 3] - placement.translation).max()))
            rot_err = max(rot_err, float(np.abs(t[:3, :3] - placement.rotation).max()))
    return pos_err, rot_err


@pytest.mark.parametrize("origin", ['<origin xyz="0.3 -0.2 1"/>',
                                    '<origin xyz="0.3 -0.2 1" rpy="0.4 -0.3 1.2"/>'])
def test_floating_and_planar_fk_match_pinocchio(origin: str) -> None:
    """The free-flyer's and the planar joint's child links where pinocchio puts them (its
    free-flyer translates along the joint frame's axes, then rotates; its planar joint
    translates in the XY plane, then turns about Z), on random configurations."""
    pos_err, rot_err = _free_fk_errors(_free_robot(origin), 100, seed=3)
    assert pos_err <= 1e-12 and rot_err <= 1e-12, (pos_err, rot_err)


@pytest.mark.parametrize("axis", ["1 0 0", "0 2 2", "0.3 -0.5 0.8"])
def test_planar_joint_moves_in_the_plane_across_its_axis(axis: str) -> None:
    """Any axis n (pinocchio ignores it): the foot's frame = the joint frame moved by
    x u + y v, then turned about n; u, v, n right-handed and orthonormal, u and v in the
    plane perpendicular to n (by hand, not by the importer's own helper)."""
    skel, _ = parse_urdf(_free_robot('<origin xyz="0 0 1"/>', axis), "r.urdf")
    by_name = {j.name: j for j in skel.joints}
    u, v, n = (np.array(by_name[k].axis) for k in ("slide.tx", "slide.ty", "slide"))
    n_urdf = np.array([float(c) for c in axis.split()])
    np.testing.assert_allclose(n, n_urdf / np.linalg.norm(n_urdf), atol=1e-15)
    np.testing.assert_allclose(np.stack([u, v, n]) @ np.stack([u, v, n]).T, np.eye(3),
                               atol=1e-15)
    assert np.linalg.det(np.stack([u, v, n])) == pytest.approx(1.0)
    sk = Skeleton(skel)
    before = sk.joints["slide"].global_transform.copy()
    x, y, theta = 0.7, -0.4, 1.1
    sk.set_joint_values({"slide.tx": {"type": "prismatic", "displacement": x},
                         "slide.ty": {"type": "prismatic", "displacement": y},
                         "slide": {"type": "revolute", "angle": theta}})
    after = sk.joints["slide"].global_transform
    frame = before[:3, :3]  # the joint frame (nothing above moved)
    np.testing.assert_allclose(after[:3, 3], before[:3, 3] + frame @ (x * u + y * v),
                               atol=1e-14)
    np.testing.assert_allclose(after[:3, :3], frame @ _rodrigues(n, theta), atol=1e-14)
    # the motion stays in the plane: no component along n
    assert abs(float(np.linalg.inv(frame) @ (after[:3, 3] - before[:3, 3]) @ n)) < 1e-14
