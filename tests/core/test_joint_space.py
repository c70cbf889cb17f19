"""The robust engine's joint space (``model.joint_space.BatchedModel``) against
independent references: FK against the joint objects (``Skeleton``), Jacobians against
the joint objects' own columns and central finite differences, the rotation-vector chart
of an unlimited spherical joint against scipy. Fixed seeds throughout.
Frames: world; metres, radians.
"""

from __future__ import annotations

import math

import fixtures
import numpy as np
import pytest
from dhik.app.formats import load_skeleton, parse_skeleton
from dhik.model.charts import RECENTRE
from dhik.model.compiled import CompiledKinematics
from dhik.model.joint_space import BatchedModel
from dhik.model.skeleton import Skeleton
from dhik.rotations import intrinsic_xyz_to_quat, matrix_to_rotvec
from dhik.solver.joints import PrismaticJoint, RevoluteJoint
from dhik.solver.kinematics import PRISMATIC, REVOLUTE, ROTVEC
from fixtures import ARM7, random_tree, sample_coordinates
from scipy.spatial.transform import Rotation


def pose_objects(sk: Skeleton, model: BatchedModel, q: np.ndarray) -> None:
    """Pose the joint objects from one coordinate row (``model.joint_values``)."""
    sk.reset()
    sk.set_joint_values(model.joint_values(q))


def finite_difference(model: BatchedModel, q: np.ndarray, h: float = 1e-6
                      ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Central differences of ``model.pose`` at rows ``q`` (B, n): the linear (B, m, 3, n)
    and angular (B, m, 3, n) velocity of every effector and point per unit of a column
    (the angular one from ``rotvec(R(q + h) R(q - h)^T) / 2h``, world)."""
    count = len(model.effectors) + len(model.points)
    lin = np.zeros((len(q), count, 3, model.n))
    ang = np.zeros((len(q), count, 3, model.n))
    for c in range(model.n):
        up, down = q.copy(), q.copy()
        up[:, c] += h
        down[:, c] -= h
        r1, p1 = model.pose_t(np.ascontiguousarray(up.T))
        r0, p0 = model.pose_t(np.ascontiguousarray(down.T))
        lin[:, :, :, c] = ((p1 - p0) / (2 * h)).transpose(2, 0, 1)
        for b in range(len(q)):
            for k in range(count):
                ang[b, k, :, c] = matrix_to_rotvec(r1[k, :, :, b] @ r0[k, :, :, b].T) / (2 * h)
    return lin, ang


# ----------------------------------------------------------------- FK and Jacobians


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fk_equals_the_joint_objects(seed: int) -> None:
    rng = np.random.default_rng(seed)
    defn, effs = random_tree(rng)
    model = BatchedModel(defn, effs)
    sk = Skeleton(defn)
    qs = sample_coordinates(model, rng, 6)
    got = model.transforms(qs)
    assert got.shape == (6, len(effs), 4, 4)
    for b, q in enumerate(qs):
        pose_objects(sk, model, q)
        for k, e in enumerate(effs):
            np.testing.assert_allclose(got[b, k], sk.joints[e].global_transform, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jacobian_matches_finite_differences_and_the_joint_objects(seed: int) -> None:
    rng = np.random.default_rng(seed)
    defn, effs = random_tree(rng)
    model = BatchedModel(defn, effs)
    sk = Skeleton(defn)
    q = sample_coordinates(model, rng, 3)
    _, _, jac = model.pose_jacobian(q)
    lin, ang = finite_difference(model, q)
    np.testing.assert_allclose(jac[:, :, :3], lin, atol=1e-6)
    np.testing.assert_allclose(jac[:, :, 3:], ang, atol=1e-6)
    for b in range(len(q)):  # 1-DoF columns: the joint objects' own Jacobian columns
        pose_objects(sk, model, q[b])
        for k, e in enumerate(effs):
            p_eff = sk.joints[e].global_transform[:3, 3]
            for c, name in enumerate(model.names):
                joint = sk.joints.get(name)
                if isinstance(joint, RevoluteJoint | PrismaticJoint):
                    want = joint.compute_jacobian_column(p_eff) if model.paths[k, c] else 0.0
                    np.testing.assert_allclose(jac[b, k, :, c], want, atol=1e-12)


def test_point_jacobians_are_the_joint_position_derivatives() -> None:
    """``points``: joints whose world positions and Jacobians follow the effectors' (a
    pole's bend points): positions as the joint objects put them, Jacobian rows as central
    finite differences."""
    defn = parse_skeleton(fixtures.SPINE_ARM)
    model = BatchedModel(defn, ["Hand"], points=["Shoulder", "Elbow"])
    q = sample_coordinates(model, np.random.default_rng(3), 4)
    _, pos, jac = model.pose_jacobian(q)
    assert pos.shape == (4, 3, 3) and jac.shape == (4, 3, 6, model.n)
    sk = Skeleton(defn)
    for b in range(len(q)):
        pose_objects(sk, model, q[b])
        world = sk.world_transforms()
        for k, name in enumerate(["Hand", "Shoulder", "Elbow"]):
            np.testing.assert_allclose(pos[b, k], world[name][:3, 3], atol=1e-12)
    lin, _ = finite_difference(model, q)
    np.testing.assert_allclose(jac[:, :, :3], lin, atol=1e-6)
    assert np.abs(jac[:, 2, :3]).max() > 0.1  # the elbow's position moves
    with pytest.raises(ValueError, match="not on an effector's path"):
        BatchedModel(defn, ["Elbow"], points=["Hand"])


@pytest.mark.parametrize("seed", [0, 1])
def test_a_model_without_its_points_gives_its_effectors_alone(seed: int) -> None:
    """``without_points`` (a path planned before its pole swing): the effectors'
    rotations, positions and Jacobians of the model with points, bit for bit, on a few
    rows and on many, with a held prefix folded (``base``) too; the model itself keeps
    its points."""
    rng = np.random.default_rng(seed)
    defn, effs = random_tree(rng)
    points = BatchedModel(defn, effs).joint_names[2:4]
    model = BatchedModel(defn, effs, [3] * len(effs), points=points)
    bare = model.without_points()
    m = len(effs)
    assert bare.points == [] and model.points == points and bare.n == model.n
    assert model.without_points() is not model and bare.without_points() is bare
    for rows in (3, model.few_rows + 9):
        q = np.ascontiguousarray(sample_coordinates(model, rng, rows).T)
        base = model.prefix_t(q)
        for got, want in zip(bare.pose_jacobian_t(q, base), model.pose_jacobian_t(q, base),
                             strict=True):
            assert got.shape[0] == m and want.shape[0] == m + len(points)
            np.testing.assert_array_equal(got, want[:m])


@pytest.mark.parametrize("seed", [0, 1])
def test_few_rows_and_many_rows_agree(seed: int) -> None:
    """FK runs batch-first for a few rows and batch-last for many (``few_rows``): the
    same rotations, positions and Jacobians (effectors and points) and reach balls either
    way, to rounding, on a tree of every joint type."""
    rng = np.random.default_rng(seed)
    defn, effs = random_tree(rng)
    model = BatchedModel(defn, effs, points=BatchedModel(defn, effs).joint_names[2:4])
    many = model.few_rows + 9
    q = np.ascontiguousarray(sample_coordinates(model, rng, many).T)
    whole = [*model.pose_jacobian_t(q), *model.pose_t(q), model.reach_t(q)[0]]
    for b in range(0, many, 4):
        part = q[:, b:b + 4]
        for got, want in zip([*model.pose_jacobian_t(part), *model.pose_t(part),
                              model.reach_t(part)[0]], whole, strict=True):
            np.testing.assert_allclose(got, want[..., b:b + 4], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(model.reach_t(q[:, :4])[1], model.reach_t(q)[1])


# ------------------------------------------------- the rotation-vector chart (ROTVEC)


def free_ball_arm() -> tuple[BatchedModel, int]:
    """SPINE_ARM (its shoulder a spherical joint without limits), every joint solved, and
    the shoulder's first column."""
    model = BatchedModel(parse_skeleton(fixtures.SPINE_ARM), ["Hand"])
    return model, model.names.index("Shoulder.x")


# rotation-vector lengths (rad) at and around the chart's special places: zero, the
# series' switch at 1e-4, a half turn, the re-centring length, and near a whole turn
LENGTHS = [0.0, 1e-9, 9e-5, 1.1e-4, 0.7, math.pi - 1e-6, math.pi, math.pi + 1e-6, 1.2 * math.pi,
           RECENTRE + 0.05, 1.9 * math.pi]


def rotvec_rows(model: BatchedModel, col: int, seed: int) -> np.ndarray:
    """Coordinate rows whose shoulder rotation vectors have :data:`LENGTHS`, on random
    axes; the other columns random within their limits."""
    rng = np.random.default_rng(seed)
    q = sample_coordinates(model, rng, len(LENGTHS))
    axes = rng.normal(size=(len(LENGTHS), 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    q[:, col:col + 3] = axes * np.array(LENGTHS)[:, None]
    return q


def test_an_unlimited_spherical_joint_is_a_rotation_vector() -> None:
    """Its three columns are ROTVEC without limits; a boxed one's are REVOLUTE (its
    intrinsic XYZ angles), limits as in the file; hinges REVOLUTE, sliders PRISMATIC."""
    model, col = free_ball_arm()
    assert model.kinds[col:col + 3].tolist() == [ROTVEC] * 3
    assert np.all(np.isinf(model.lo[col:col + 3])) and np.all(np.isinf(model.hi[col:col + 3]))
    defn, effs = random_tree(np.random.default_rng(0))
    tree = BatchedModel(defn, effs)
    kinds = dict(zip(tree.names, tree.kinds.tolist(), strict=True))
    assert [kinds[f"J2.{a}"] for a in "xyz"] == [REVOLUTE] * 3
    assert [kinds[f"J6.{a}"] for a in "xyz"] == [ROTVEC] * 3
    assert kinds["J1"] == REVOLUTE and kinds["J5"] == PRISMATIC
    j2 = tree.names.index("J2.x")
    assert tree.lo[j2:j2 + 3].tolist() == [-1.0, -math.inf, -0.5]
    assert tree.hi[j2:j2 + 3].tolist() == [1.2, math.inf, 0.5]


def test_rotation_vector_fk_equals_the_joint_objects() -> None:
    """FK at rotation vectors of every length in :data:`LENGTHS` equals the joint objects
    posed with scipy's quaternion of the same vector (``Rotation.from_rotvec``)."""
    model, col = free_ball_arm()
    q = rotvec_rows(model, col, 4)
    got = model.transforms(q)
    sk = Skeleton(parse_skeleton(fixtures.SPINE_ARM))
    for b, row in enumerate(q):
        x, y, z, w = Rotation.from_rotvec(row[col:col + 3]).as_quat()
        values = model.joint_values(row)
        values["Shoulder"] = {"type": "spherical", "quaternion": [w, x, y, z]}
        sk.reset()
        sk.set_joint_values(values)
        np.testing.assert_allclose(got[b, 0], sk.joints["Hand"].global_transform, atol=1e-12)


@pytest.mark.parametrize("seed", [5, 6])
def test_rotation_vector_jacobian_matches_finite_differences(seed: int) -> None:
    """The ROTVEC columns (the rotation's left Jacobian) against central differences, at
    every length in :data:`LENGTHS`: near zero (the series), at and beyond a half turn,
    beyond the re-centring length and near a whole turn."""
    model, col = free_ball_arm()
    q = rotvec_rows(model, col, seed)
    _, _, jac = model.pose_jacobian(q)
    lin, ang = finite_difference(model, q, 1e-7)
    np.testing.assert_allclose(jac[:, :, :3], lin, atol=2e-6)
    np.testing.assert_allclose(jac[:, :, 3:], ang, atol=2e-6)
    assert np.abs(jac[:, 0, 3:, col:col + 3]).max() > 0.5  # the columns turn the hand


def test_recentre_leaves_every_pose_unchanged() -> None:
    """``recentre`` swaps a rotation vector longer than ``charts.RECENTRE`` for its
    rotation's shorter one: the same poses (FK), every vector then at most RECENTRE long
    (one past a whole turn too), shorter vectors and the other columns bit for bit."""
    model, col = free_ball_arm()
    q = rotvec_rows(model, col, 7)
    q = np.vstack([q, q[-1:] * (3.1 * math.pi / np.linalg.norm(q[-1, col:col + 3]))])
    q[-1, :col] = q[0, :col]
    q[-1, col + 3:] = q[0, col + 3:]
    out = model.recentre(np.ascontiguousarray(q.T)).T
    np.testing.assert_allclose(model.transforms(out), model.transforms(q), atol=1e-12)
    lengths = np.linalg.norm(q[:, col:col + 3], axis=1)
    new = np.linalg.norm(out[:, col:col + 3], axis=1)
    assert np.all(new <= RECENTRE + 1e-12)
    short = lengths <= RECENTRE
    assert short.sum() >= 8 and (~short).sum() >= 2
    np.testing.assert_array_equal(out[short], q[short])
    others = np.r_[0:col, col + 3:model.n]
    np.testing.assert_array_equal(out[:, others], q[:, others])
    arm = BatchedModel(load_skeleton(ARM7), ["Tool"])  # no rotation vector: nothing to do
    rows = sample_coordinates(arm, np.random.default_rng(1), 3).T
    assert arm.recentre(rows) is rows


def test_nearest_and_difference_pick_the_equivalent_vector() -> None:
    """Near a half turn a rotation has two short vectors, ``r`` and ``r (1 - 2 pi /
    |r|)``: ``nearest`` writes each row as the one nearer a reference (the same pose), and
    ``difference`` measures the motion the short way. A hinge without limits is moved by
    whole turns; a limited one is left as it is."""
    model, col = free_ball_arm()
    rng = np.random.default_rng(8)
    ref = sample_coordinates(model, rng, 6)
    axes = rng.normal(size=(6, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    ref[:, col:col + 3] = axes * (math.pi - 0.01)  # just short of a half turn
    step = rng.normal(scale=0.01, size=ref.shape)
    moved = ref + step  # a small motion, some vectors now past a half turn
    far = moved.copy()  # the same poses, written as the rotations' other vectors
    t = np.linalg.norm(far[:, col:col + 3], axis=1, keepdims=True)
    far[:, col:col + 3] *= 1.0 - 2.0 * math.pi / t
    spine = model.names.index("Spine")  # a hinge without limits
    far[:, spine] += 2 * math.pi * rng.integers(-2, 3, 6)
    np.testing.assert_allclose(model.transforms(far), model.transforms(moved), atol=1e-12)
    assert np.abs(far - ref).max() > 6.0  # far away as written
    near = model.nearest(ref, far)
    np.testing.assert_allclose(near, moved, atol=1e-12)
    np.testing.assert_allclose(model.difference(ref, far), step, atol=1e-12)
    np.testing.assert_allclose(model.difference(ref, moved), step, atol=1e-12)
    elbow = model.names.index("Elbow")  # limited: its value is its own
    shifted = moved.copy()
    shifted[:, elbow] += 2 * math.pi
    assert np.allclose(model.nearest(ref, shifted)[:, elbow], shifted[:, elbow])


@pytest.mark.parametrize("seed", [0, 1])
def test_coordinates_invert_joint_values(seed: int) -> None:
    """``coordinates`` is the inverse of ``joint_values``: the same FK (a boxed spherical
    joint may come back as its rotation's other angle triple, a rotation vector as its
    rotation's vector of at most pi), within the limits, and for arm7's hinges and for
    rotation vectors shorter than pi the same numbers."""
    defn, leaves = random_tree(np.random.default_rng(seed))
    model = BatchedModel(defn, leaves)
    q = np.clip(sample_coordinates(model, np.random.default_rng(seed + 10), 20), model.lo,
                model.hi)
    back = np.array([model.coordinates(model.joint_values(row)) for row in q])
    np.testing.assert_allclose(model.transforms(back), model.transforms(q), atol=1e-12)
    assert np.all(back >= model.lo) and np.all(back <= model.hi)
    free, col = free_ball_arm()
    rows = rotvec_rows(free, col, seed)
    again = np.array([free.coordinates(free.joint_values(row)) for row in rows])
    np.testing.assert_allclose(free.transforms(again), free.transforms(rows), atol=1e-12)
    lengths = np.linalg.norm(rows[:, col:col + 3], axis=1)
    assert np.all(np.linalg.norm(again[:, col:col + 3], axis=1) <= math.pi + 1e-12)
    short = lengths < math.pi - 1e-3
    np.testing.assert_allclose(again[short], rows[short], atol=1e-12)
    arm = BatchedModel(load_skeleton(ARM7), ["Tool"])
    row = fixtures.smooth_path(arm.lo, arm.hi, 10, seed)[3]
    np.testing.assert_array_equal(arm.coordinates(arm.joint_values(row)), row)
    assert np.all(arm.coordinates({}) == 0.0)  # joints not given: the T-pose


@pytest.mark.parametrize("seed", [0, 1])
def test_value_columns_are_joint_values_row_by_row(seed: int) -> None:
    """A bake writes its animation columns from ``value_columns`` (all rows at once): the
    numbers ``joint_values`` gives row by row (spherical quaternions exactly, their XYZ
    Euler angles to rounding), gimbal-locked rows and rotation vectors included."""
    defn, leaves = random_tree(np.random.default_rng(seed))
    model = BatchedModel(defn, leaves)
    q = sample_coordinates(model, np.random.default_rng(seed + 20), 30)
    middle = model.names.index("J2.y")
    q[:3, middle - 1:middle + 2] = [0.0, math.pi / 2, 0.0]  # Ry(pi/2): the file's gimbal lock
    cols = model.value_columns(q)
    for k, row in enumerate(q):
        for name, entry in model.joint_values(row).items():
            kind, values = cols[name]
            assert kind == entry["type"]
            if kind == "spherical":
                np.testing.assert_array_equal(values[k, 3:], entry["quaternion"])
                got = Rotation.from_euler("xyz", values[k, :3]).as_matrix()
                want = Rotation.from_euler("xyz", entry["euler"]).as_matrix()
                np.testing.assert_allclose(got, want, atol=1e-12)
            else:
                assert values[k] == entry["angle" if kind == "revolute" else "displacement"]


def test_a_boxed_spherical_joint_reads_its_limits_as_intrinsic_angles() -> None:
    """A boxed ball's three columns are ``(a, b, c)`` with ``R = Rx(a) Ry(b) Rz(c)``
    (scipy's intrinsic ``'XYZ'``), as its limits read them."""
    defn = parse_skeleton({"root_name": "R", "joints": [
        {"name": "R", "type": "fixed", "parent": None},
        {"name": "Ball", "type": "spherical", "offset": [0, 0, 1], "parent": "R",
         "limits": [[-2, 2], [-1, 1], [-3, 3]]},
        {"name": "Tip", "type": "fixed", "offset": [0.3, 0.1, 0.2], "parent": "Ball"}]})
    model = BatchedModel(defn, ["Tip"])
    angles = np.array([0.7, -0.4, 2.1])
    rot = model.transforms(angles[None])[0, 0, :3, :3]
    np.testing.assert_allclose(rot, Rotation.from_euler("XYZ", angles).as_matrix(), atol=1e-12)
    quat = model.joint_values(angles)["Ball"]["quaternion"]
    np.testing.assert_allclose(np.abs(quat), np.abs(intrinsic_xyz_to_quat(*angles)), atol=1e-12)


# --------------------------------------------------------------------- chain lengths


@pytest.mark.parametrize("length", [1, 2, 3, 4, 0])
def test_chain_lengths_hold_the_joints_the_compiled_model_drives(length: int) -> None:
    """``BatchedModel(..., chain_lengths)`` holds the columns of the joints that the spec
    method's ``CompiledKinematics`` drives for the same chain length (Blender's count),
    with limits +-inf, and its FK does not change."""
    defn = parse_skeleton(fixtures.SPINE_ARM)
    model = BatchedModel(defn, ["Hand"], [length])
    whole = BatchedModel(defn, ["Hand"])
    driven = set(CompiledKinematics(Skeleton(defn), ["Hand"], [length]).driven_names)
    held = {name.split(".")[0] for name, h in zip(model.names, model.held, strict=True) if h}
    assert held == driven
    assert np.all(np.isinf(model.lo[model.held])) and np.all(np.isinf(model.hi[model.held]))
    path = ["Root", "Spine", "Shoulder", "Elbow", "Hand"]
    assert model.chains == [path[-length:] if length else path]
    q = sample_coordinates(whole, np.random.default_rng(length), 5)
    np.testing.assert_array_equal(model.transforms(q), whole.transforms(q))


@pytest.mark.parametrize("lengths", [(1, 1), (2, 3), (3, 1), (0, 2), (4, 2)])
def test_the_held_prefix_folded_gives_the_same_poses_and_jacobians(
        lengths: tuple[int, int]) -> None:  # fmt: skip
    """A problem computes the frames its held columns alone place once (``prefix_t``)
    and every FK starts there (``base``): the same rotations, positions, Jacobians (zero
    in the prefix's columns, which no solve moves) and reach balls on a few rows and on many, on
    trees of every joint type whose chain lengths hold a spine above the chains (and a
    point, ``J2``, inside it where it is held; (4, 2) holds ``J6`` below the solved
    ``J2``, outside the prefix)."""
    rng = np.random.default_rng(sum(lengths))
    defn, effs = random_tree(rng)
    model = BatchedModel(defn, effs, list(lengths), points=["J2", "J4"])
    parent = {d.name: d.parent for d in defn.joints}
    moving = {name.split(".")[0] for name, h in zip(model.names, model.held, strict=True)
              if not h}

    def in_prefix(joint: str | None) -> bool:  # no solved column at or above it
        return joint is None or (joint not in moving and in_prefix(parent[joint]))

    prefix = [c for c, name in enumerate(model.names) if in_prefix(name.split(".")[0])]
    assert list(model.prefix_cols) == prefix
    if not prefix:  # a whole path solved
        assert 0 in lengths and model.prefix_t(np.zeros((model.n, 1))) is None
        return
    assert model.anchors and set(prefix) <= set(np.flatnonzero(model.held))
    if lengths == (4, 2):
        assert model.held[model.names.index("J6.x")] and "J6" not in {
            model.names[c].split(".")[0] for c in prefix}
    for rows in (3, max(model.few_rows, model._folded_plan.few_rows) + 9):
        q = np.ascontiguousarray(sample_coordinates(model, rng, rows).T)
        base = model.prefix_t(q)
        rot, pos, jac = model.pose_jacobian_t(q)
        jac[:, :, prefix] = 0.0
        for got, want in zip([*model.pose_jacobian_t(q, base), *model.pose_t(q, base),
                              *model.reach_t(q, base)],
                             [rot, pos, jac, rot, pos, *model.reach_t(q)], strict=True):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_jacobian_blocks_are_the_dense_jacobians_entries(seed: int) -> None:
    """``pose_jacobian_blocks_t`` (the Jacobian of limbs apart, in the step's blocks):
    per block an effector's six rows at columns on its path (hinges, sliders, rotation
    vectors; a held prefix folded into ``base``), zero where padded: the dense
    Jacobian's entries float for float, on a few rows and on many."""
    rng = np.random.default_rng(seed)
    defn, effs = random_tree(rng)
    model = BatchedModel(defn, effs, [2] * len(effs) if seed % 2 else None)
    count = 3
    eff_b = rng.integers(0, len(effs), count)
    cols_b = np.array([rng.choice(np.flatnonzero(model.paths[e]), 5) for e in eff_b])
    mask = rng.random((count, 5)) < 0.7
    mask[:, 0] = True
    for rows in (4, max(model.few_rows, model._folded_plan.few_rows) + 5):
        q = np.ascontiguousarray(sample_coordinates(model, rng, rows).T)
        base = model.prefix_t(q)
        rot, pos, dense = model.pose_jacobian_t(q, base)
        got_rot, got_pos, blocks = model.pose_jacobian_blocks_t(q, base, eff_b, cols_b, mask)
        assert blocks.shape == (count, 6, 5, rows)
        np.testing.assert_array_equal(got_rot, rot)
        np.testing.assert_array_equal(got_pos, pos)
        want = dense[eff_b[:, None], :, cols_b].transpose(0, 2, 1, 3) \
            * mask[:, None, :, None]
        np.testing.assert_allclose(blocks, want, rtol=0, atol=1e-15)
        assert (blocks[~np.broadcast_to(mask[:, None, :, None], blocks.shape)] == 0).all()
