"""roboticstoolbox's ik_LM on the character scenes of bench/characters.py (bench venv).

Input: the .npz that ``characters.py --peer-data`` writes (the chains' rest transforms
and every clip's targets and reference). A Blender bone turns freely, so each bone is a
ball joint, here three hinges ``Rx Ry Rz`` in its rest axes, and each limb the ETS
``SE3(T0) Rx Ry Rz SE3(T1) Rx Ry Rz SE3(T2) Rx Ry Rz`` (9 DoF, the effector at the tip
bone's head). Every frame is solved limb by limb (the chains share no bone and the body
is still), warm-started from the previous frame's answer (frame 0 from rest), as in
bench/methods.py's ``Rtb``: ``ik_LM`` (C++), Chan damping, ``ilimit`` 30, ``slimit`` 100,
``tol`` 5e-11, no joint limits (the bones have none); full pose, or position only
(``mask`` [1, 1, 1, 0, 0, 0]) in the arm scene, whose pole rtb cannot take (the elbow is
left to the solver). Success: every limb's FK within the tolerances of its target (the
orientation on full poses only); flips: bench/turns.py against the reference. Times: the
``ik_LM`` calls of a clip, summed (s).
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import numpy as np
from turns import angle, flips

NAME = "rtb ik_LM (ball joints as Rx Ry Rz)"


def _quat_x(a: np.ndarray, axis: int) -> np.ndarray:
    """(..., 4): quaternions of turns by ``a`` (rad) about coordinate axis ``axis``."""
    out = np.zeros((*np.shape(a), 4))
    out[..., 0] = np.cos(a / 2)
    out[..., 1 + axis] = np.sin(a / 2)
    return out


def _qmul(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    w = p[..., :1] * q[..., :1] - np.sum(p[..., 1:] * q[..., 1:], axis=-1, keepdims=True)
    v = p[..., :1] * q[..., 1:] + q[..., :1] * p[..., 1:] + np.cross(p[..., 1:], q[..., 1:])
    return np.concatenate([w, v], axis=-1)


def euler_quats(q: np.ndarray) -> np.ndarray:
    """(..., 3) angles of ``Rx(a) Ry(b) Rz(c)`` -> (..., 4) quaternions [w, x, y, z]."""
    return _qmul(_qmul(_quat_x(q[..., 0], 0), _quat_x(q[..., 1], 1)), _quat_x(q[..., 2], 2))


def _quat_matrix(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def chain_fk(frames: np.ndarray, local: np.ndarray) -> np.ndarray:
    """World 4x4 of the effector: ``T0 R0 T1 R1 T2 R2`` (``local``: (3, 4) quaternions,
    top bone first)."""
    m = np.eye(4)
    for t, q in zip(frames, local, strict=True):
        r = np.eye(4)
        r[:3, :3] = _quat_matrix(q)
        m = m @ t @ r
    return m


def limb_ets(frames: np.ndarray) -> Any:
    """The rtb ETS of a limb from its rest transforms (3, 4, 4)."""
    import roboticstoolbox as rtb

    et = rtb.ET
    ets = None
    for t in frames:
        for part in (et.SE3(np.asarray(t, dtype=float)), et.Rx(), et.Ry(), et.Rz()):
            ets = part if ets is None else ets * part
    return ets


def run_scene(name: str, info: dict[str, Any], data: dict[str, np.ndarray],
              tolerances: tuple[float, float]) -> dict[str, Any]:  # fmt: skip
    """Every clip of one scene: a table row like characters.py's."""
    frames, effector, reference = data["frames"], data["effector"], data["local"]
    limbs = len(info["limbs"])
    # the reference's own FK must give its targets: the transforms are read right
    worst = 0.0
    for i in range(limbs):
        for f in (0, effector.shape[1] - 1):
            loc = reference[0, f, 3 * i:3 * i + 3][::-1]  # chain order: top bone first
            worst = max(worst, float(np.abs(chain_fk(frames[i], loc) - effector[0, f, i]).max()))
    if worst > 1e-5:
        raise RuntimeError(f"{name}: the chains' FK misses the reference by {worst:.3g}")
    mask = np.ones(6) if info["full_pose"] else np.array([1.0, 1, 1, 0, 0, 0])
    ets = [limb_ets(frames[i]) for i in range(limbs)]
    seconds, ok, per, over, ratio, pos_max, rot_max = [], 0, 0, 0, 0.0, 0.0, 0.0
    for clip in range(effector.shape[0]):
        n = effector.shape[1]
        solved = np.empty_like(reference[clip])
        good = np.ones(n, dtype=bool)
        spent = 0.0
        for i, e in enumerate(ets):
            q = np.zeros(9)
            for f in range(n):
                target = effector[clip, f, i]
                t0 = time.perf_counter()
                sol = e.ik_LM(target, q0=q, ilimit=30, slimit=100, tol=5e-11, mask=mask,
                              joint_limits=False, method="chan")
                spent += time.perf_counter() - t0
                q = np.asarray(sol.q, dtype=float)
                m = e.fkine(q).A
                pe = float(np.linalg.norm(m[:3, 3] - target[:3, 3]))
                oe = angle(m[:3, :3] @ target[:3, :3].T)
                pos_max, rot_max = max(pos_max, pe), max(rot_max, oe)
                good[f] &= pe < tolerances[0] and (oe < tolerances[1] or not info["full_pose"])
                solved[f, 3 * i:3 * i + 3] = euler_quats(q.reshape(3, 3))[::-1]
        seconds.append(spent)
        ok += int(good.sum())
        p, o, r = flips(solved, reference[clip])
        per, over, ratio = per + p, over + o, max(ratio, r)
    clips, n = effector.shape[:2]
    return {"scene": name, "title": info["title"], "method": NAME, "frames": n,
            "clips": clips, "limbs": limbs, "success": ok / (n * clips),
            "flips_per_bone": per, "flips_overall": over, "max_ratio": ratio,
            "mean_s": statistics.fmean(seconds), "median_s": statistics.median(seconds),
            "p99_s": float(np.percentile(seconds, 99)), "seconds": seconds,
            "max_pos_err": pos_max, "max_rot_err": rot_max, "full_pose": info["full_pose"],
            "note": "" if not info["pole"] else "no pole (rtb has none)"}


def run(path: str) -> list[dict[str, Any]]:
    """A row per scene of the .npz at ``path``."""
    with np.load(path) as npz:
        meta = json.loads(str(npz["meta"]))
        arrays = {k: npz[k] for k in npz.files if k != "meta"}
    tol = tuple(meta["tolerances"])
    rows = []
    for name, info in meta["scenes"].items():
        data = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith(name + "/")}
        rows.append(run_scene(name, info, data, (float(tol[0]), float(tol[1]))))
    return rows


if __name__ == "__main__":
    import sys

    for row in run(sys.argv[1]):
        print({k: v for k, v in row.items() if k != "seconds"})
