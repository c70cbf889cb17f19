"""Any root joint (DECISIONS; issue 9, point 4): a revolute, prismatic or spherical root
hangs below the fixed world frame (SPEC 5.4's FixedJoint root).

FK is checked against products written out by hand, the compiled model against the joint
objects, and planar and SCARA skeletons with a revolute root bake through the CLI with
both methods, every frame's pose re-checked by FK.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dhik.app.cli import main
from dhik.app.formats import load_animation, parse_skeleton, skeleton_to_dict
from dhik.model.compiled import CompiledKinematics
from dhik.model.objects import ObjectKinematics
from dhik.model.skeleton import Skeleton
from fixtures import PLANAR, SCARA


def rz(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def planar_fk(a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """PLANAR's hand by hand: position (m) and rotation."""
    pos = np.array([0.1 + math.cos(a) + 0.8 * math.cos(a + b),
                    0.2 + math.sin(a) + 0.8 * math.sin(a + b), 0.3])
    return pos, rz(a + b)


def scara_fk(a: float, b: float, d: float, w: float) -> tuple[np.ndarray, np.ndarray]:
    """SCARA's tool by hand."""
    pos = np.array([0.4 * math.cos(a) + 0.3 * math.cos(a + b),
                    0.4 * math.sin(a) + 0.3 * math.sin(a + b), 0.5 - d - 0.1])
    return pos, rz(a + b + w)


def test_any_root_type_is_valid_and_round_trips() -> None:
    for kind in ("revolute", "prismatic", "spherical", "fixed"):
        data = copy.deepcopy(PLANAR)
        data["joints"][0]["type"] = kind
        if kind in ("spherical", "fixed"):
            del data["joints"][0]["axis"]
            data["joints"][0]["limits"] = None
        defn = parse_skeleton(data)
        assert defn.joints[0].type == kind and defn.joints[0].parent is None
        assert parse_skeleton(skeleton_to_dict(defn)) == defn


@pytest.mark.parametrize("values", [(0.3, 0.5), (-2.0, 1.2), (2.5, -2.6)])
def test_planar_fk_with_a_revolute_root_is_the_hand_product(values) -> None:
    sk = Skeleton(parse_skeleton(PLANAR))
    a, b = values
    sk.set_joint_values({"Shoulder": {"type": "revolute", "angle": a},
                         "Elbow": {"type": "revolute", "angle": b}})
    pos, rot = planar_fk(a, b)
    hand = sk.world_transforms()["Hand"]
    np.testing.assert_allclose(hand[:3, 3], pos, atol=1e-15)
    np.testing.assert_allclose(hand[:3, :3], rot, atol=1e-15)
    shoulder = sk.world_transforms()["Shoulder"]  # the root turns about its own origin
    np.testing.assert_allclose(shoulder[:3, 3], [0.1, 0.2, 0.3], atol=0)
    np.testing.assert_allclose(shoulder[:3, :3], rz(a), atol=1e-15)


def test_scara_fk_is_the_hand_product() -> None:
    sk = Skeleton(parse_skeleton(SCARA))
    a, b, d, w = 0.7, -1.1, 0.12, 0.4
    sk.set_joint_values({"Shoulder": {"type": "revolute", "angle": a},
                         "Elbow": {"type": "revolute", "angle": b},
                         "Quill": {"type": "prismatic", "displacement": d},
                         "Wrist": {"type": "revolute", "angle": w}})
    pos, rot = scara_fk(a, b, d, w)
    tool = sk.world_transforms()["Tool"]
    np.testing.assert_allclose(tool[:3, 3], pos, atol=1e-15)
    np.testing.assert_allclose(tool[:3, :3], rot, atol=1e-15)


@pytest.mark.parametrize("kind", ["revolute", "prismatic", "spherical"])
def test_compiled_model_equals_the_objects_with_a_moving_root(kind) -> None:
    """FK and Jacobian of the compiled model and of the joint objects, root column first."""
    data = copy.deepcopy(PLANAR)
    data["joints"][0]["type"] = kind
    data["joints"][0]["axis"] = [0.3, -0.5, 0.8]
    if kind == "spherical":
        del data["joints"][0]["axis"]
        data["joints"][0]["limits"] = None
    obj = ObjectKinematics(Skeleton(parse_skeleton(data)), ["Hand"])
    comp = CompiledKinematics(Skeleton(parse_skeleton(data)), ["Hand"])
    assert comp.names == obj.names and obj.names[0].startswith("Shoulder")
    rng = np.random.default_rng(4)
    for _ in range(5):
        dq = rng.normal(size=obj.n) * 0.4
        obj.apply_delta(dq)
        comp.apply_delta(dq)
        obj.update()
        comp.update()
        np.testing.assert_allclose(comp.effector_transform(0), obj.effector_transform(0),
                                   atol=1e-12)
        np.testing.assert_allclose(comp.jacobian(0), obj.jacobian(0), atol=1e-12)
        assert np.abs(obj.jacobian(0)[:, 0]).max() > 0.1  # the root moves the hand


def keyframes(fk: Any, poses: list[tuple[float, ...]], every: int) -> list[dict]:
    """A keyframe on every frame: FK of the joint path through ``poses`` (one every
    ``every`` frames, linear in joint space between them), so every target is reachable."""
    out = []
    for f in range(every * (len(poses) - 1) + 1):
        k = min(f // every, len(poses) - 2)
        t = (f - k * every) / every
        values = [a + t * (b - a) for a, b in zip(poses[k], poses[k + 1], strict=True)]
        pos, rot = fk(*values)
        yaw = math.degrees(math.atan2(rot[1, 0], rot[0, 0]))
        out.append({"frame": f, "pos": [float(v) for v in pos], "euler": [0.0, 0.0, yaw]})
    return out


CASES = {
    "planar": (PLANAR, planar_fk, [(0.3, 0.5), (1.2, -0.4), (2.0, 0.9), (-1.0, 1.5)]),
    "scara": (SCARA, scara_fk, [(0.2, 0.5, 0.05, 0.0), (1.0, -0.3, 0.2, 0.8),
                                (-0.8, 1.4, 0.1, -1.2), (-2.0, 0.6, 0.25, 2.0)]),
}


@pytest.mark.parametrize("method", ["robust", "spec"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_revolute_root_skeletons_bake_in_the_cli(case, method, tmp_path: Path, capsys):
    skeleton, fk, poses = CASES[case]
    skel = tmp_path / "skeleton.json"
    skel.write_text(json.dumps(skeleton))
    targets = tmp_path / "targets.json"
    keys = keyframes(fk, poses, 20)
    targets.write_text(json.dumps(keys))
    out, report = tmp_path / "animation.json", tmp_path / "report.json"
    code = main(["bake", str(skel), str(targets), "-o", str(out), "--report", str(report),
                 "--method", method, "--position-tolerance", "1e-5",
                 "--orientation-tolerance", "1e-4"])
    stdout, err = capsys.readouterr()
    assert code == 0 and err == "", err
    rep = json.loads(report.read_text())
    assert rep["converged"] == rep["frames"] == 61, rep["records"][:3]
    # every frame's joint values, put into the hand-written FK, reach that frame's target
    frames = load_animation(out)
    names = [j["name"] for j in skeleton["joints"] if j["type"] != "fixed"]
    assert len(frames) == len(keys) == 61
    for fr, key in zip(frames, keys, strict=True):
        values = [fr["joints"][n].get("angle", fr["joints"][n].get("displacement"))
                  for n in names]
        pos, rot = fk(*values)
        np.testing.assert_allclose(pos, key["pos"], atol=1e-5)
        np.testing.assert_allclose(rot, rz(math.radians(key["euler"][2])), atol=2e-4)
        for j in skeleton["joints"]:
            if "limits" in j:
                v = fr["joints"][j["name"]]
                x = v.get("angle", v.get("displacement"))
                assert j["limits"][0] - 1e-12 <= x <= j["limits"][1] + 1e-12
