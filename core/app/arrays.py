"""Robot-learning output: an animation as frames x joints arrays (``.npz`` or ``.csv``).

What GMR, holosoma, BeyondMimic or Unitree's retargeted data read: a frame rate, the root
pose and the joint positions per frame, in a stated joint order. Both files carry:

- ``fps`` (frames per second, > 0) and ``frame`` (F,) (the frame numbers), ``time`` (F,)
  = frame / fps (s);
- ``root_joint``, ``root_pos`` (F, 3) (world, m) and ``root_quat`` (F, 4): the world pose
  of the *root joint*: the skeleton's root, or, when the skeleton starts with a free root
  (DECISIONS: prismatic ``X.tx``, ``X.ty``, ``X.tz`` then the spherical ``X``), the joint
  ``X``; its four joints are then in the root pose only, not in the joint arrays;
- ``dof_names`` (D,), ``dof_types`` (``revolute`` / ``prismatic``) and ``dof_pos`` (F, D):
  the other 1-DoF joints in skeleton.json order (parents before children), angles in
  radians, displacements in metres;
- ``ball_names`` (S,) and ``ball_quat`` (F, S, 4): the spherical joints in skeleton.json
  order, each its rotation relative to its parent frame (animation.json's quaternion);
- ``quaternion_order`` = ``"w, x, y, z"`` for every quaternion, and ``format``.

The npz holds numpy arrays (strings as unicode arrays, no pickles: ``np.load(path)`` reads
it). The csv has ``#`` lines first (the format, the fps, the quaternion order, the root
joint and the joints as JSON, exact whatever the names), then a header row and one row
per frame: ``frame, time, root.px .. root.pz, root.qw .. root.qz``, one column per 1-DoF
joint, four (``<name>.qw`` .. ``.qz``) per spherical joint. :func:`load_arrays` reads
either back.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
from numpy.typing import NDArray

from ..errors import DhikError
from ..model.definition import SkeletonDef
from .filesets import Writer
from .formats import AnimationColumns, ColumnFrames, parse_animation
from .jsonio import json_string, one_line

FORMATS = ("json", "npz", "csv")
FORMAT_TAG = "dhik animation arrays 1"
QUATERNION_ORDER = "w, x, y, z"
FREE_AXES = (".tx", ".ty", ".tz")


def output_format(given: str | None, path: str) -> str:
    """``given``, or the format ``path``'s suffix names (``.npz``, ``.csv``; else json)."""
    if given is not None:
        if given not in FORMATS:
            raise DhikError(f"--format {given!r}: choose {', '.join(FORMATS)}")
        return given
    suffix = os.path.splitext(str(path))[1].lower()
    return suffix[1:] if suffix in (".npz", ".csv") else "json"


@dataclass
class AnimationArrays:
    """The arrays of one animation (see the module docstring; metres, radians, w x y z)."""

    fps: float
    frame: NDArray[np.int64]
    root_joint: str
    root_pos: NDArray[np.float64]
    root_quat: NDArray[np.float64]
    dof_names: list[str]
    dof_types: list[str]
    dof_pos: NDArray[np.float64]
    ball_names: list[str]
    ball_quat: NDArray[np.float64]

    @property
    def time(self) -> NDArray[np.float64]:
        """Seconds since frame 0: frame / fps."""
        return self.frame / self.fps


def root_joint(defn: SkeletonDef) -> tuple[str, list[str]]:
    """The joint whose world pose is the root pose, and the joints that pose stands for
    (a free root's ``X.tx``, ``X.ty``, ``X.tz``, ``X``; else none)."""
    children: dict[str, list[str]] = {}
    for j in defn.joints:
        if j.parent is not None:
            children.setdefault(j.parent, []).append(j.name)
    by_name = {j.name: j for j in defn.joints}
    node, path = by_name[defn.root_name], [defn.root_name]
    while node.type in ("fixed", "prismatic") and len(children.get(node.name, ())) == 1:
        node = by_name[children[node.name][0]]
        path.append(node.name)
        if node.type == "spherical":
            prismatic = sorted(n for n in path if by_name[n].type == "prismatic")
            if prismatic == sorted(node.name + axis for axis in FREE_AXES):
                return node.name, [*prismatic, node.name]
            break
    return defn.root_name, []


def _quat_mul(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """Hamilton products of (..., 4) quaternions [w, x, y, z], row by row."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def _rotate(q: NDArray[np.float64], v: NDArray[np.float64]) -> NDArray[np.float64]:
    """The (F, 3) vectors ``v`` turned by the unit quaternions ``q`` (F, 4)."""
    w, u = q[:, :1], q[:, 1:]
    t = 2 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def _columns(frames: Sequence[dict[str, Any]], source: str) -> AnimationColumns:
    if isinstance(frames, ColumnFrames):
        return frames.columns
    columns = AnimationColumns.from_frames(frames)
    if columns is None or columns.problem():
        parse_animation({"frames": list(frames)}, source)  # names the problem
        raise DhikError(source, "frames: every frame must name the same joints")
    return columns


def animation_arrays(defn: SkeletonDef, frames: Sequence[dict[str, Any]], fps: float,
                     source: str) -> AnimationArrays:
    """The arrays of animation ``frames`` (SPEC 3.3 dicts, or a bake's ColumnFrames) of
    skeleton ``defn`` at ``fps``; DhikError naming ``source`` when they do not fit."""
    if not (isinstance(fps, (int, float)) and fps > 0 and np.isfinite(fps)):
        raise DhikError(source, f"the frame rate must be a number > 0, got {fps!r}")
    if not len(frames):
        raise DhikError(source, "no frames to write")
    cols = _columns(frames, source)
    n = len(cols.frames)
    kinds = {d.name: d.type for d in defn.joints}
    where: dict[str, int] = {}
    col = 0
    for name, kind in zip(cols.names, cols.kinds, strict=True):
        if kinds.get(name) != kind:
            raise DhikError(source, f"joint {json_string(name)} ({kind}) is not a {kind} "
                                    "joint of the skeleton")
        where[name] = col
        col += AnimationColumns.WIDTH[kind]

    def values(name: str) -> NDArray[np.float64]:
        if name not in where:  # a joint the frames leave out keeps the T-pose
            return np.zeros(n) if kinds[name] != "spherical" else np.tile([1.0, 0, 0, 0], (n, 1))
        c = where[name]
        return cols.values[:, c + 3:c + 7] if kinds[name] == "spherical" else cols.values[:, c]

    base, carried = root_joint(defn)
    by_name = {j.name: j for j in defn.joints}
    path = [base]
    while by_name[path[-1]].parent is not None:
        path.append(by_name[path[-1]].parent)  # type: ignore[arg-type]
    pos, quat = np.zeros((n, 3)), np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    for name in reversed(path):  # world = parent's world @ local, from the root down
        j = by_name[name]
        offset = np.broadcast_to(np.asarray(j.offset, dtype=float), (n, 3))
        if j.type == "prismatic":
            offset = offset + values(name)[:, None] * np.asarray(j.axis, dtype=float)
        if j.type == "revolute":
            half = values(name)[:, None] / 2
            local = np.concatenate([np.cos(half), np.sin(half) * np.asarray(j.axis)], axis=1)
        elif j.type == "spherical":
            q = values(name)
            local = q / np.linalg.norm(q, axis=1, keepdims=True)
        elif j.type == "fixed" and j.quaternion is not None:
            local = np.tile(np.asarray(j.quaternion, dtype=float), (n, 1))
        else:
            local = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
        pos = pos + _rotate(quat, offset)
        quat = _quat_mul(quat, local)
    quat = _continuous(quat)
    dofs = [j for j in defn.joints if j.type in ("revolute", "prismatic") and j.name not in carried]
    balls = [j for j in defn.joints if j.type == "spherical" and j.name not in carried]
    return AnimationArrays(
        float(fps), cols.frames.copy(), base, pos, quat,
        [j.name for j in dofs], [j.type for j in dofs],
        np.stack([values(j.name) for j in dofs], axis=1) if dofs else np.zeros((n, 0)),
        [j.name for j in balls],
        np.stack([values(j.name) for j in balls], axis=1) if balls else np.zeros((n, 0, 4)))


def _continuous(q: NDArray[np.float64]) -> NDArray[np.float64]:
    """Quaternions (F, 4) with each frame's sign taken so that it has a non-negative dot
    product with the frame before (q and -q are one rotation; the first has w >= 0)."""
    q = np.array(q, dtype=float)
    if q[0, 0] < 0:
        q[0] = -q[0]
    if len(q) > 1:
        dot = np.einsum("ij,ij->i", q[1:], q[:-1])
        flips = np.cumsum(dot < 0) % 2 == 1
        q[1:][flips] *= -1
    return q


# --------------------------------------------------------------------------- writing


def _npz_payload(a: AnimationArrays) -> dict[str, NDArray[Any]]:
    return {
        "format": np.array(FORMAT_TAG), "fps": np.array(a.fps), "frame": a.frame,
        "time": a.time, "quaternion_order": np.array(QUATERNION_ORDER),
        "root_joint": np.array(a.root_joint), "root_pos": a.root_pos, "root_quat": a.root_quat,
        "dof_names": np.array(a.dof_names, dtype=str), "dof_types": np.array(a.dof_types,
                                                                             dtype=str),
        "dof_pos": a.dof_pos, "ball_names": np.array(a.ball_names, dtype=str),
        "ball_quat": a.ball_quat,
    }


def npz_writer(arrays: AnimationArrays) -> Writer:
    """Writes ``arrays`` as an uncompressed ``.npz`` (no pickled objects)."""
    payload = _npz_payload(arrays)
    return lambda f: np.savez(f, **payload)  # type: ignore[arg-type]


def csv_writer(arrays: AnimationArrays) -> Writer:
    """Writes ``arrays`` as UTF-8 CSV (see the module docstring); names that a header cell
    cannot hold (line breaks, lone surrogates) are escaped there, exact in the JSON line."""
    a = arrays
    joints = [[n, t] for n, t in zip(a.dof_names, a.dof_types, strict=True)]
    joints += [[n, "spherical"] for n in a.ball_names]
    meta = [f"# format: {FORMAT_TAG}", f"# fps: {json.dumps(a.fps)}",
            f"# quaternion order: {QUATERNION_ORDER}",
            "# time = frame / fps (s); root = the world pose of the root joint (m)",
            f"# root joint: {json.dumps(a.root_joint)}",
            f"# joints (skeleton.json order, rad / m / quaternion): {json.dumps(joints)}"]
    header = ["frame", "time", *(f"root.p{c}" for c in "xyz"), *(f"root.q{c}" for c in "wxyz"),
              *(one_line(n) for n in a.dof_names),
              *(f"{one_line(n)}.q{c}" for n in a.ball_names for c in "wxyz")]
    table = np.concatenate([a.time[:, None], a.root_pos, a.root_quat, a.dof_pos,
                            a.ball_quat.reshape(len(a.frame), -1)], axis=1)
    row = "%d," + ",".join(["%r"] * table.shape[1]) + "\n"

    def write(f: BinaryIO) -> None:
        text = io.TextIOWrapper(f, encoding="utf-8", newline="")
        try:
            text.write("\n".join(meta) + "\n")
            csv.writer(text, lineterminator="\n").writerow(header)
            for start in range(0, len(a.frame), 4096):
                block = table[start:start + 4096].tolist()
                text.write("".join(row % (fr, *vals) for fr, vals in
                                   zip(a.frame[start:start + 4096].tolist(), block,
                                       strict=True)))
            text.flush()
        finally:
            text.detach()

    return write


def array_writer(fmt: str, defn: SkeletonDef, frames: Sequence[dict[str, Any]], fps: float,
                 source: str) -> Writer:
    """The writer of ``frames`` as ``fmt`` ("npz" or "csv"); DhikError before anything is
    written when they do not fit (see :func:`animation_arrays`)."""
    arrays = animation_arrays(defn, frames, fps, source)
    return npz_writer(arrays) if fmt == "npz" else csv_writer(arrays)


# --------------------------------------------------------------------------- reading


def load_arrays(path: str | os.PathLike) -> AnimationArrays:
    """Read an ``.npz`` or ``.csv`` this module wrote (by its suffix)."""
    if str(path).lower().endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            return AnimationArrays(
                float(z["fps"]), z["frame"], str(z["root_joint"]), z["root_pos"],
                z["root_quat"], [str(n) for n in z["dof_names"]],
                [str(t) for t in z["dof_types"]], z["dof_pos"],
                [str(n) for n in z["ball_names"]], z["ball_quat"])
    with open(path, encoding="utf-8", newline="") as f:
        meta: dict[str, str] = {}
        line = f.readline()
        while line.startswith("# "):
            key, _, value = line[2:].rstrip("\n").partition(": ")
            meta[key.split(" (")[0]] = value
            line = f.readline()  # the last one read is the header row
        table = np.loadtxt(f, delimiter=",", ndmin=2)
    joints = json.loads(meta["joints"])
    dofs = [(n, t) for n, t in joints if t != "spherical"]
    balls = [n for n, t in joints if t == "spherical"]
    d = len(dofs)
    return AnimationArrays(
        float(meta["fps"]), table[:, 0].astype(np.int64), json.loads(meta["root joint"]),
        table[:, 2:5], table[:, 5:9], [n for n, _ in dofs], [t for _, t in dofs],
        table[:, 9:9 + d], balls, table[:, 9 + d:].reshape(len(table), len(balls), 4))
