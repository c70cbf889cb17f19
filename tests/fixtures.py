"""Skeletons shared by tests/core and tests/addon (one copy each).

``tests/conftest.py`` puts this folder on ``sys.path``, so a test writes
``from fixtures import SPINE_ARM``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import os
import pty
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np


@functools.cache
def make_scenes() -> Any:
    """sample_scenes/make_scenes.py as a module (arm7, its smooth joint paths and their FK
    targets), loaded once."""
    spec = importlib.util.spec_from_file_location(
        "make_scenes", Path(__file__).resolve().parents[1] / "sample_scenes" / "make_scenes.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The 7-DoF arm of sample_scenes (every joint a limited hinge; effector "Tool").
ARM7 = str(Path(__file__).resolve().parents[1] / "sample_scenes" / "arm7" / "skeleton.json")

# An arm on a spine: a revolute spine (world Z), a ball shoulder, a hinged elbow (world Z,
# limited) and a fixed hand, the effector. Metres, radians. Chain length 3 (hand, elbow,
# shoulder) leaves the spine to its own animation.
SPINE_ARM: dict[str, Any] = {"root_name": "Root", "joints": [
    {"name": "Root", "type": "fixed", "offset": [0, 0, 0], "parent": None},
    {"name": "Spine", "type": "revolute", "offset": [0, 0, 0.5], "parent": "Root",
     "axis": [0, 0, 1]},
    {"name": "Shoulder", "type": "spherical", "offset": [0.2, 0, 0.5], "parent": "Spine"},
    {"name": "Elbow", "type": "revolute", "offset": [0.3, 0, 0], "parent": "Shoulder",
     "axis": [0, 0, 1], "limits": [0.05, 2.5]},
    {"name": "Hand", "type": "fixed", "offset": [0.3, 0, 0], "parent": "Elbow"},
]}

# A planar two-link arm whose root is its shoulder: z axis, 1 m and 0.8 m links.
PLANAR: dict[str, Any] = {"root_name": "Shoulder", "joints": [
    {"name": "Shoulder", "type": "revolute", "parent": None, "offset": [0.1, 0.2, 0.3],
     "axis": [0, 0, 1], "limits": [-2.5, 2.5]},
    {"name": "Elbow", "type": "revolute", "parent": "Shoulder", "offset": [1.0, 0, 0],
     "axis": [0, 0, 1], "limits": [-2.6, 2.6]},
    {"name": "Hand", "type": "fixed", "parent": "Elbow", "offset": [0.8, 0, 0]}]}

# A SCARA: revolute shoulder (root) and elbow about z, a prismatic quill along -z, a
# revolute wrist about z, and a tool 0.1 m below it.
SCARA: dict[str, Any] = {"root_name": "Shoulder", "joints": [
    {"name": "Shoulder", "type": "revolute", "parent": None, "offset": [0, 0, 0.5],
     "axis": [0, 0, 1], "limits": [-2.8, 2.8]},
    {"name": "Elbow", "type": "revolute", "parent": "Shoulder", "offset": [0.4, 0, 0],
     "axis": [0, 0, 1], "limits": [-2.5, 2.5]},
    {"name": "Quill", "type": "prismatic", "parent": "Elbow", "offset": [0.3, 0, 0],
     "axis": [0, 0, -1], "limits": [0.0, 0.3]},
    {"name": "Wrist", "type": "revolute", "parent": "Quill", "offset": [0, 0, 0],
     "axis": [0, 0, 1], "limits": [-3.0, 3.0]},
    {"name": "Tool", "type": "fixed", "parent": "Wrist", "offset": [0, 0, -0.1]}]}


HUMANOID_ARM = {  # clavicle fixed and rotated, limited spherical shoulder and wrist
    "root_name": "Chest",
    "joints": [
        {"name": "Chest", "type": "fixed", "offset": [0, 0, 1.4], "parent": None},
        {"name": "Clavicle", "type": "fixed", "offset": [0.0, 0.18, 0.02], "parent": "Chest",
         "quaternion": [0.9962, 0.0, 0.0, 0.0872]},
        {"name": "Shoulder", "type": "spherical", "offset": [0.0, 0.03, 0.0],
         "parent": "Clavicle", "limits": [[-1.6, 1.6], [-1.3, 1.3], [-0.7, 1.6]]},
        {"name": "Elbow", "type": "revolute", "offset": [0.0, 0.30, 0.0], "parent": "Shoulder",
         "axis": [0, 0, 1], "limits": [-0.05, 2.6]},
        {"name": "Wrist", "type": "spherical", "offset": [0.0, 0.26, 0.0], "parent": "Elbow",
         "limits": [[-1.2, 1.2], [-0.5, 0.5], [-1.0, 1.0]]},
        {"name": "Hand", "type": "fixed", "offset": [0.0, 0.08, 0.01], "parent": "Wrist"},
    ],
}


def arm7_on_a_turntable() -> dict[str, Any]:
    """arm7 (:data:`ARM7`) on a turntable: a hinge about world Z, 0.1 m up, without
    limits, under the arm's base ("Turntable", below a fixed root "World")."""
    import json

    defn = json.loads(Path(ARM7).read_text())
    base = defn["root_name"]
    joints = [{"name": "World", "type": "fixed", "offset": [0, 0, 0], "parent": None},
              {"name": "Turntable", "type": "revolute", "offset": [0, 0, 0.1],
               "parent": "World", "axis": [0, 0, 1]}]
    joints += [{**j, "parent": "Turntable"} if j["name"] == base else j
               for j in defn["joints"]]
    return {"root_name": "World", "joints": joints}


def two_arm7s_on_a_turntable() -> dict[str, Any]:
    """Two arm7s (:data:`ARM7`, joints prefixed "L" and "R", bases 0.4 m left and right)
    on one turntable (as in :func:`arm7_on_a_turntable`); effectors "LTool", "RTool"."""
    import json

    defn = json.loads(Path(ARM7).read_text())
    joints = [{"name": "World", "type": "fixed", "offset": [0, 0, 0], "parent": None},
              {"name": "Turntable", "type": "revolute", "offset": [0, 0, 0.1],
               "parent": "World", "axis": [0, 0, 1]}]
    for side, y in (("L", 0.4), ("R", -0.4)):
        for j in defn["joints"]:
            if j["parent"] is None:
                joints.append({**j, "name": side + j["name"], "parent": "Turntable",
                               "offset": [0, y, 0]})
            else:
                joints.append({**j, "name": side + j["name"], "parent": side + j["parent"]})
    return {"root_name": "World", "joints": joints}


def two_hands_on_a_spine() -> dict[str, Any]:
    """A character's upper body: two spherical spine joints (Hips at 1 m, fixed root) and
    two arms, each a clavicle (fixed), a ball shoulder, a hinged elbow and a ball wrist,
    all limited (offsets in metres, limits in radians, intrinsic XYZ for the balls);
    effectors "LHand" and "RHand". The arms share the spine: one problem
    with a self-motion of eight dimensions (full pose) or fourteen (position only)."""
    joints: list[dict[str, Any]] = [
        {"name": "Hips", "type": "fixed", "offset": [0, 0, 1.0], "parent": None},
        {"name": "Spine", "type": "spherical", "offset": [0, 0, 0.1], "parent": "Hips",
         "limits": [[-0.4, 0.4], [-0.3, 0.3], [-0.4, 0.4]]},
        {"name": "Chest", "type": "spherical", "offset": [0, 0, 0.3], "parent": "Spine",
         "limits": [[-0.3, 0.3], [-0.2, 0.2], [-0.3, 0.3]]}]
    for side, s in (("L", 1), ("R", -1)):
        joints += [
            {"name": side + "Clavicle", "type": "fixed", "offset": [0.0, s * 0.18, 0.2],
             "parent": "Chest"},
            {"name": side + "Shoulder", "type": "spherical", "offset": [0.0, s * 0.03, 0.0],
             "parent": side + "Clavicle", "limits": [[-1.6, 1.6], [-1.3, 1.3], [-0.7, 1.6]]},
            {"name": side + "Elbow", "type": "revolute", "offset": [0.0, s * 0.30, 0.0],
             "parent": side + "Shoulder", "axis": [0, 0, s], "limits": [-0.05, 2.6]},
            {"name": side + "Wrist", "type": "spherical", "offset": [0.0, s * 0.26, 0.0],
             "parent": side + "Elbow", "limits": [[-1.2, 1.2], [-0.5, 0.5], [-1.0, 1.0]]},
            {"name": side + "Hand", "type": "fixed", "offset": [0.0, s * 0.08, 0.01],
             "parent": side + "Wrist"}]
    return {"root_name": "Hips", "joints": joints}


def run_on_terminal(args: list[str], stream: str) -> tuple[subprocess.CompletedProcess, str]:
    """Run ``args`` with ``stream`` ("stdout" or "stderr") on a pseudo-terminal and the
    other one piped (text); the finished process and what the terminal showed."""
    master, slave = pty.openpty()
    other = "stderr" if stream == "stdout" else "stdout"
    proc = subprocess.run(args, **{stream: slave, other: subprocess.PIPE}, text=True,
                          check=False)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc, b"".join(chunks).decode()


def smooth_path(lo: np.ndarray, hi: np.ndarray, frames: int, seed: int) -> np.ndarray:
    """A smooth joint path (frames, n) within the limits ``lo``..``hi`` (rad, m):
    sinusoids of 1-3 periods at 60 % of each half-range around mid-range."""
    rng = np.random.default_rng(seed)
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    periods, phase = rng.uniform(1.0, 3.0, len(lo)), rng.uniform(0, 2 * math.pi, len(lo))
    t = np.arange(frames)[:, None] / frames
    return mid + 0.6 * half * np.sin(2 * math.pi * periods * t + phase)


def arm7_path(frames: int, seed: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """A smooth arm7 joint path (``smooth_path``), the batched model (effector "Tool")
    and its targets (frames, 1, 4, 4), world metres."""
    from dhik.app.formats import load_skeleton
    from dhik.model.joint_space import BatchedModel

    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    truth = smooth_path(model.lo, model.hi, frames, seed)
    return model, truth, model.transforms(truth)


def arm7_ramped(frames: int, seed: int, first: int
                ) -> tuple[Any, np.ndarray, np.ndarray]:  # fmt: skip
    """``arm7_path(frames, seed)``'s model, truth (the joint path, which does not follow
    the ramp) and targets (frames, 1, 4, 4) with the targets of frames ``first + 10`` to
    ``first + 69`` moved out to 3x their distance from the base (out of reach), the ten
    frames before and after on the way (a ramp out of reach and back, no cut)."""
    model, truth, targets = arm7_path(frames, seed)
    scale = np.ones(frames)
    scale[first:first + 80] = np.r_[np.linspace(1.0, 3.0, 11)[1:], np.full(60, 3.0),
                                    np.linspace(3.0, 1.0, 11)[:-1]]
    targets = targets.copy()
    targets[:, :, :3, 3] *= scale[:, None, None]
    return model, truth, targets


def arm7_ramped_out(frames: int, seed: int, first: int) -> tuple[Any, np.ndarray]:
    """:func:`arm7_ramped`'s model and targets."""
    model, _, targets = arm7_ramped(frames, seed, first)
    return model, targets


def largest_step(model: Any, q: np.ndarray) -> float:
    """The largest per-frame motion of any column of ``q`` (F, n), the nearest way
    (``model.difference``: a rotation vector's other vector is no motion) (rad, m)."""
    return float(np.abs(model.difference(q[:-1], q[1:])).max())


def planned_passes(monkeypatch: Any) -> list[int]:
    """A list that every pass of ``solve_path``'s planner (``plan.ladder_path``) appends
    its frame count to."""
    import dhik.solver.path.plan as plan

    planned: list[int] = []
    inner = plan.ladder_path

    def counting(search: Any, *args: Any, **kwargs: Any) -> Any:
        planned.append(search.frames)
        return inner(search, *args, **kwargs)

    monkeypatch.setattr(plan, "ladder_path", counting)
    return planned


def relaxed_passes(monkeypatch: Any) -> list[Any]:
    """A list that every pass of ``solve_path``'s planner appends its path to, its peaks
    relaxed (``plan.relax_peaks``), in order: the first is the first pass's."""
    import dhik.solver.path.plan as plan

    passes: list[Any] = []
    relax = plan.relax_peaks

    def kept(*args: Any, **kwargs: Any) -> Any:
        passes.append(relax(*args, **kwargs))
        return passes[-1]

    monkeypatch.setattr(plan, "relax_peaks", kept)
    return passes


def random_tree(rng: np.random.Generator, count: int = 9) -> tuple[Any, list[str]]:
    """A random ``SkeletonDef`` of every joint type and its two leaves (the effectors):
    hinges and sliders on random or coordinate axes (some limited), a spherical joint with
    a partial box of limits (``J2``: intrinsic XYZ angles) and one without limits (``J6``:
    the rotation-vector chart), fixed joints with random rotations, one branch. Offsets in
    metres, limits in radians or metres."""
    from dhik.model.definition import JointDef, SkeletonDef
    from scipy.spatial.transform import Rotation

    joints = [JointDef("Root", "fixed", (0.0, 0.0, 0.1), None, None, None,
                       tuple(Rotation.random(random_state=1).as_quat(scalar_first=True)))]
    kinds = ["revolute", "prismatic", "spherical", "fixed"]
    for i in range(1, count):
        kind = kinds[i % 4] if i > 1 else "revolute"
        parent = joints[-1].name if i != count - 3 else joints[2].name  # one branch
        off = tuple(float(v) for v in rng.uniform(-0.3, 0.3, 3))
        axis = lim = quat = None
        if kind in ("revolute", "prismatic"):
            a = rng.normal(size=3) if i % 3 else np.eye(3)[i % 3] * (-1) ** i
            axis = tuple(float(v) for v in a / np.linalg.norm(a))
            lim = (-2.0, 2.0) if i % 2 else None
        elif kind == "spherical":
            lim = ((-1.0, 1.2), None, (-0.5, 0.5)) if i == 2 else None
        else:
            quat = tuple(float(v) for v in Rotation.random(random_state=i).as_quat(
                scalar_first=True))
        joints.append(JointDef(f"J{i}", kind, off, parent, axis, lim, quat))  # type: ignore[arg-type]
    defn = SkeletonDef("Root", tuple(joints))
    children = {j.parent for j in joints}
    leaves = [j.name for j in joints if j.name not in children]
    return defn, leaves


def sample_coordinates(model: Any, rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` coordinate rows (count, n) of a ``BatchedModel``: uniform within each
    column's limits, within +-pi (rad) or +-pi m where a column has none (a rotation
    vector then reaches beyond pi)."""
    lo = np.where(np.isfinite(model.lo), model.lo, -math.pi)
    hi = np.where(np.isfinite(model.hi), model.hi, math.pi)
    return rng.uniform(lo, hi, (count, model.n))


def check_answers(defn: Any, model: Any, q: np.ndarray, targets: np.ndarray, ptol: float,
                  otol: float) -> None:
    """Every coordinate row of ``q`` (k, n) keeps ``model``'s limits and, posed on fresh
    joint objects (``Skeleton``), puts every effector within ``ptol`` (m) and ``otol``
    (rad) of its target (``targets`` (k, m, 4, 4), world)."""
    from dhik.model.skeleton import Skeleton
    from dhik.rotations import matrix_to_rotvec

    sk = Skeleton(defn)
    assert np.all(q >= model.lo) and np.all(q <= model.hi)
    for row, target in zip(q, targets, strict=True):
        sk.reset()
        sk.set_joint_values(model.joint_values(row))
        for k, e in enumerate(model.effectors):
            g = sk.joints[e].global_transform
            assert np.linalg.norm(g[:3, 3] - target[k][:3, 3]) < ptol
            assert np.linalg.norm(matrix_to_rotvec(target[k][:3, :3] @ g[:3, :3].T)) < otol


def swivel(world: dict[str, np.ndarray], pole: np.ndarray, target: np.ndarray,
           angle: float = 0.0) -> float:
    """Signed angle (rad) from the elbow's direction to the pole's (turned by ``angle``)
    about the shoulder-to-target line: ``world`` holds the world 4x4 of "Shoulder" and
    "Elbow" (:data:`SPINE_ARM`'s joints), ``pole`` and ``target`` are world (m)."""
    r0 = world["Shoulder"][:3, 3]
    u = target[:3, 3] - r0
    u /= np.linalg.norm(u)
    b = world["Elbow"][:3, 3] - r0
    b -= (b @ u) * u
    p = pole - r0
    p -= (p @ u) * u
    p = p * math.cos(angle) + np.cross(u, p) * math.sin(angle)
    return math.atan2(u @ np.cross(b, p), b @ p)


def boxed_angles(quat: np.ndarray, box: list[Any]) -> bool:
    """Whether a rotation has intrinsic XYZ angles (``Rx Ry Rz``, scipy ``'XYZ'``)
    within ``box`` (per axis ``[lo, hi]`` or None), 1e-9 rad: either of its two angle
    triples, each angle up to whole turns."""
    from scipy.spatial.transform import Rotation

    w, x, y, z = quat
    a, b, c = Rotation.from_quat([x, y, z, w]).as_euler("XYZ")
    for triple in ((a, b, c), (a + math.pi, math.pi - b, c + math.pi)):
        ok = True
        for t, lim in zip(triple, box, strict=True):
            if lim is None:
                continue
            k = math.floor((lim[1] + 1e-9 - t) / (2 * math.pi))  # the largest t + 2 pi k <= hi
            ok = ok and t + 2 * math.pi * k >= lim[0] - 1e-9
        if ok:
            return True
    return False


# two legs of three joints under a body (a ball, the legs' balls, a limited ball and a
# limited hinge as knees): chain length 3 holds the body above two independent limbs
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


@contextlib.contextmanager
def two_blas_threads(api: Any) -> Iterator[Any]:
    """OpenBLAS's ``(get, set)`` (``blas_threads.openblas_threads()``) on two threads
    inside, as it was afterwards; the test skips without OpenBLAS, or where OpenBLAS
    caps it at one (the cores it found: nothing to change then)."""
    import pytest

    if api is None:
        pytest.skip("numpy without OpenBLAS")
    get, put = api
    was = get()
    put(2)
    try:
        if get() != 2:
            pytest.skip("OpenBLAS runs one thread at most here")
        yield api
    finally:
        put(was)


def robots_dir() -> Path:
    """example-robot-data's robots folder (the wheel puts it under cmeel.prefix/share);
    the test is skipped where the package is not installed (the ``robots`` extra)."""
    import importlib.metadata

    import pytest

    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed (pip install -e '.[robots]')")
    path = Path(str(dist.locate_file("cmeel.prefix/share/example-robot-data/robots")))
    assert path.is_dir(), path
    return path
