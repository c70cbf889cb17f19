"""Every Jacobian column against central finite differences on random skeletons."""

from __future__ import annotations

from typing import Any

import numpy as np
from dhik.app.formats import parse_skeleton
from dhik.model.skeleton import Skeleton
from dhik.model.spherical import SphericalJoint
from dhik.rotations import matrix_to_rotvec
from dhik.solver.chain import build_ik_chain, chain_sphericals, compute_jacobian, path_to_root
from dhik.solver.dls import restore_chain_state, save_chain_state
from dhik.solver.joints import PrismaticJoint, RevoluteJoint
from hypothesis import given, settings
from hypothesis import strategies as st

TYPES = ("fixed", "revolute", "prismatic", "spherical")


def random_skeleton_dict(rng: np.random.Generator, n: int) -> dict[str, Any]:
    """A random tree of ``n`` joints below a fixed root, all four joint types."""
    joints: list[dict[str, Any]] = [
        {"name": "J0", "type": "fixed", "offset": rng.uniform(-1, 1, 3).tolist(), "parent": None,
         "quaternion": rng.normal(size=4).tolist()}
    ]
    for i in range(1, n):
        kind = TYPES[int(rng.integers(4))]
        j: dict[str, Any] = {"name": f"J{i}", "type": kind, "parent": f"J{int(rng.integers(i))}",
                             "offset": rng.uniform(-1, 1, 3).tolist()}
        if kind in ("revolute", "prismatic"):
            j["axis"] = rng.normal(size=3).tolist()
            if rng.random() < 0.5:
                lo = float(rng.uniform(-2, 0))
                j["limits"] = [lo, lo + float(rng.uniform(0.1, 3))]
        elif kind == "spherical" and rng.random() < 0.5:
            j["limits"] = [None if rng.random() < 0.3 else [-1.5, 1.2] for _ in range(3)]
        elif kind == "fixed" and rng.random() < 0.5:
            j["quaternion"] = rng.normal(size=4).tolist()
        joints.append(j)
    return {"root_name": "J0", "joints": joints}


def random_pose(sk: Skeleton, rng: np.random.Generator) -> None:
    for j in sk.joints.values():
        if isinstance(j, RevoluteJoint | PrismaticJoint):
            j.q = float(rng.uniform(-2, 2))
        elif isinstance(j, SphericalJoint):
            q = rng.normal(size=4)
            j.quaternion = q / np.linalg.norm(q)
            j.virtual_fix.quaternion = j.quaternion.copy()
    sk.update()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 9))
def test_jacobian_matches_central_differences(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    sk = Skeleton(parse_skeleton(random_skeleton_dict(rng, n)))
    random_pose(sk, rng)
    effector = sk.joints[f"J{int(rng.integers(n))}"]
    chain = build_ik_chain(sk.root, effector)
    sph = chain_sphericals(chain)
    jac = compute_jacobian(chain, effector.global_transform[:3, 3])
    assert jac.shape == (6, len(chain))
    h = 1e-6
    state = save_chain_state(chain, sph)
    for i, node in enumerate(chain):
        poses = []
        for step in (h, -h):
            restore_chain_state(chain, sph, state)
            node.q += step  # unclipped: the derivative, not the limit
            sk.update()
            poses.append(effector.global_transform.copy())
        restore_chain_state(chain, sph, state)
        sk.update()
        lin = (poses[0][:3, 3] - poses[1][:3, 3]) / (2 * h)
        ang = matrix_to_rotvec(poses[0][:3, :3] @ poses[1][:3, :3].T) / (2 * h)
        np.testing.assert_allclose(jac[:3, i], lin, atol=2e-7, err_msg=f"{node} linear")
        np.testing.assert_allclose(jac[3:, i], ang, atol=2e-7, err_msg=f"{node} angular")


def test_chain_flattening_follows_the_spec_example() -> None:
    """SPEC 5.2: Root -> Hip (spherical) -> Knee gives [Hip_v1, Hip_v2, Hip_v3, Knee]."""
    sk = Skeleton(parse_skeleton({"root_name": "Root", "joints": [
        {"name": "Root", "type": "fixed", "offset": [0, 0, 0], "parent": None},
        {"name": "Hip", "type": "spherical", "offset": [0, 0, 1], "parent": "Root"},
        {"name": "Knee", "type": "revolute", "offset": [0, 0, -0.5], "parent": "Hip",
         "axis": [1, 0, 0]},
        {"name": "Foot", "type": "fixed", "offset": [0, 0, -0.5], "parent": "Knee"},
        {"name": "Other", "type": "revolute", "offset": [1, 0, 0], "parent": "Root",
         "axis": [0, 0, 1]},
    ]}))
    chain = build_ik_chain(sk.root, sk.joints["Foot"])
    assert [n.name for n in chain] == ["Hip.v1", "Hip.v2", "Hip.v3", "Knee"]
    assert all(n.get_dof() == 1 for n in chain)
    assert [n.name for n in path_to_root(sk.root, sk.joints["Foot"])] == [
        "Root", "Hip", "Knee", "Foot"]
    jac = compute_jacobian(chain, sk.joints["Foot"].global_transform[:3, 3])
    assert jac.shape == (6, 4)
    # at rest the hip's virtual axes are world X, Y, Z and the foot is 1 m below the hip
    np.testing.assert_allclose(jac[3:, :3], np.eye(3))
    np.testing.assert_allclose(jac[:3, 0], np.cross([1, 0, 0], [0, 0, -1]))
