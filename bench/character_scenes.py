"""The character scenes of bench/characters.py, built in bpy from the bundled Rigify.

Each scene is a Rigify metarig with limbs to bake (:class:`Limb`), and each clip (a seed)
a smooth reference motion of the rig's own bones: every chain bone turned by sinusoids
of modest amplitude (a rotation vector in the bone's rest axes, so the pose is always
within the rig's reach), the body still. The reference is evaluated by Blender and gives
the targets as keyed Empties:

- dhik's target of a limb: the effector bone's world matrix (its head, its orientation),
  what an Empty snapped to the bone shows (dhik_addon/targets.py);
- Blender's IK target: the same matrix moved to the chain tip's tail, since the IK
  constraint aims the tip's tail (``use_tail`` on: the owner bone is the chain's tip);
  the tip is rigid, so head-with-orientation and tail-with-orientation are the same pose;
- the pole (the arm scene): an Empty 0.3 m from the reference elbow, straight out from
  the shoulder-wrist line, so the reference elbow lies in the pole's half-plane (dhik's
  pole, angle 0); Blender's pole angle is tuned to the same elbow (characters.py).

Frames 0 .. N-1; world = armature space (the metarigs sit at the origin, unscaled);
metres and radians; quaternions [w, x, y, z].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np
from bpy_extras import anim_utils
from mathutils import Matrix, Quaternion, Vector

POLE_DISTANCE = 0.3  # m, pole Empty from the reference elbow


@dataclass(frozen=True)
class Limb:
    """One effector: ``chain`` its bones from the effector up (dhik's Chain Length is
    ``len(chain)``); Blender's IK constraint sits on ``owner`` (``use_tail`` on) with
    ``chain_count`` bones."""

    effector: str
    chain: tuple[str, ...]
    owner: str
    chain_count: int


@dataclass(frozen=True)
class CharacterScene:
    """A metarig, its limbs, and whether the targets are full poses (else position only,
    with a pole on the first limb)."""

    name: str
    title: str
    metarig: str  # bpy.ops.object.<metarig>()
    limbs: tuple[Limb, ...]
    full_pose: bool = True
    pole: bool = False


def _leg(side: str, prefix: str = "") -> Limb:
    chain = (f"{prefix}foot.{side}", f"{prefix}shin.{side}", f"{prefix}thigh.{side}")
    return Limb(chain[0], chain, chain[0], 3)


def _arm(side: str) -> Limb:
    chain = (f"hand.{side}", f"forearm.{side}", f"upper_arm.{side}")
    return Limb(chain[0], chain, chain[0], 3)


SCENES = (
    CharacterScene("quadruped", "Rigify basic quadruped, four feet (full pose)",
                   "armature_basic_quadruped_metarig_add",
                   (_leg("L"), _leg("R"), _leg("L", "front_"), _leg("R", "front_"))),
    CharacterScene("human_limbs", "Rigify human, both hands and both feet (full pose)",
                   "armature_human_metarig_add", (_arm("L"), _arm("R"), _leg("L"), _leg("R"))),
    # position only with a pole: Blender's IK on the forearm (tail = the wrist, 2 bones),
    # dhik's effector the hand (its head = the wrist; Chain Length 3, the hand turning
    # freely, as the pole needs two bones above the effector)
    CharacterScene("human_arm_pole", "Rigify human, left arm with a pole (position only)",
                   "armature_human_metarig_add",
                   (Limb("hand.L", ("hand.L", "forearm.L", "upper_arm.L"), "forearm.L", 2),),
                   full_pose=False, pole=True),
)


@dataclass
class Reference:
    """A clip's reference motion as Blender evaluated it (numpy, double from float32)."""

    frames: int
    bones: list[str]  # the chain bones, every limb's, in limb order
    local: np.ndarray  # (frames, bones, 4): each bone's local rotation (matrix_basis)
    effector: np.ndarray  # (frames, limbs, 4, 4): each effector bone's world matrix
    tail: np.ndarray  # (frames, limbs, 4, 4): the same at its Blender IK tip's tail
    elbow: np.ndarray  # (frames, limbs, 3): the head of each chain's middle bone
    pole: np.ndarray | None = None  # (frames, 3): the pole Empty of the first limb
    extras: dict[str, Any] = field(default_factory=dict)


def build_rig(scene: CharacterScene) -> bpy.types.Object:
    """A fresh factory file with the scene's metarig (Rigify enabled), chain bones in
    quaternion mode with their location locked: Blender's IK only turns bones, and a
    free location on an unconnected bone (thigh, upper arm) would be a joint to dhik."""
    bpy.ops.wm.read_homefile(use_empty=True, use_factory_startup=True)
    bpy.ops.preferences.addon_enable(module="rigify")
    getattr(bpy.ops.object, scene.metarig)()
    ob = bpy.context.active_object
    assert ob is not None and ob.type == "ARMATURE", scene.metarig
    for limb in scene.limbs:
        for name in limb.chain:
            pb = ob.pose.bones[name]
            pb.rotation_mode = "QUATERNION"
            pb.lock_location = (True, True, True)
    return ob


def rest_pose(ob: bpy.types.Object) -> None:
    """No action on the armature and every bone at rest."""
    if ob.animation_data is not None:
        ob.animation_data.action = None
    for pb in ob.pose.bones:
        pb.location = (0.0, 0.0, 0.0)
        pb.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
        pb.rotation_euler = (0.0, 0.0, 0.0)
        pb.scale = (1.0, 1.0, 1.0)
    bpy.context.view_layer.update()


def _bend_sign(ob: bpy.types.Object, middle: str) -> float:
    """+1 or -1: the sense of a turn about the middle bone's X axis that bends the limb
    further than at rest (the angle between it and its parent grows)."""
    pb = ob.pose.bones[middle]

    def angle(turn: float) -> float:
        pb.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), turn)
        bpy.context.view_layer.update()
        up = pb.parent.matrix.to_3x3().col[1]
        return float(up.angle(pb.matrix.to_3x3().col[1]))

    sign = 1.0 if angle(0.1) > angle(-0.1) else -1.0
    pb.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    return sign


def _rotvecs(rng: np.random.Generator, frames: int, amp: np.ndarray,
             bias: np.ndarray) -> np.ndarray:  # fmt: skip
    """(frames, 3): ``bias + amp * sin(2 pi f t + phase)`` per axis, 0.5-1.5 periods."""
    t = np.arange(frames) / max(frames - 1, 1)
    freq = rng.uniform(0.5, 1.5, 3)
    phase = rng.uniform(0.0, 2 * np.pi, 3)
    out: np.ndarray = bias + amp * np.sin(2 * np.pi * freq * t[:, None] + phase)
    return out


def _motion(ob: bpy.types.Object, scene: CharacterScene, frames: int, seed: int
            ) -> dict[str, np.ndarray]:  # fmt: skip
    """Per chain bone, (frames, 3) rotation vectors in its rest axes (radians).

    Full-pose scenes: every axis of every bone, amplitudes 0.15-0.3 rad (twist about the
    bone's Y 0.1 rad), the middle bone bent 0.4 rad further than at rest (the knee or
    elbow stays bent). The pole scene: the upper arm swings without twist (X and Z), the
    forearm bends about its X only, the hand keeps still, so the elbow's bend plane is
    the upper arm's (what a pole sets, in Blender and in dhik alike)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for limb in scene.limbs:
        tip, middle, top = limb.chain
        bend = np.array([0.4 * _bend_sign(ob, middle), 0.0, 0.0])
        if scene.pole:
            out[top] = _rotvecs(rng, frames, np.array([0.3, 0.0, 0.3]), np.zeros(3))
            out[middle] = _rotvecs(rng, frames, np.array([0.3, 0.0, 0.0]), bend)
            out[tip] = np.zeros((frames, 3))
            continue
        for name in limb.chain:
            amp = rng.uniform(0.15, 0.3, 3)
            amp[1] = 0.1
            out[name] = _rotvecs(rng, frames, amp, bend if name == middle else np.zeros(3))
    return out


def _quat(rv: np.ndarray) -> Quaternion:
    v = Vector(rv.tolist())
    return Quaternion(v.normalized(), v.length) if v.length > 0 else Quaternion()


def reference(ob: bpy.types.Object, scene: CharacterScene, frames: int, seed: int) -> Reference:
    """The clip ``seed``: pose every frame of the motion, read Blender's evaluated bones;
    the rig is left at rest."""
    rest_pose(ob)
    motion = _motion(ob, scene, frames, seed)
    bones = [b for limb in scene.limbs for b in limb.chain]
    n = len(scene.limbs)
    local = np.empty((frames, len(bones), 4))
    eff, tail = np.empty((frames, n, 4, 4)), np.empty((frames, n, 4, 4))
    elbow = np.empty((frames, n, 3))
    pose = ob.pose.bones
    world = ob.matrix_world
    for f in range(frames):
        for name in bones:
            pose[name].rotation_quaternion = _quat(motion[name][f])
        bpy.context.view_layer.update()
        for k, name in enumerate(bones):
            local[f, k] = np.array(pose[name].matrix_basis.to_quaternion(), dtype=float)
        for i, limb in enumerate(scene.limbs):
            m = world @ pose[limb.effector].matrix
            eff[f, i] = np.array(m, dtype=float)
            owner = pose[limb.owner]
            t = world @ owner.matrix
            t.translation = world @ owner.tail
            tail[f, i] = np.array(t, dtype=float)
            if limb.owner != limb.effector:  # the IK tip is the effector's parent
                tail[f, i][:3, :3] = eff[f, i][:3, :3]
            elbow[f, i] = np.array(world @ pose[limb.chain[1]].head, dtype=float)
    ref = Reference(frames, bones, local, eff, tail, elbow)
    if scene.pole:
        shoulder = np.array([world @ pose[scene.limbs[0].chain[2]].head], dtype=float)
        wrist = eff[:, 0, :3, 3]
        u = wrist - shoulder
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        d = elbow[:, 0] - shoulder
        d -= np.sum(d * u, axis=1, keepdims=True) * u
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        ref.pole = elbow[:, 0] + POLE_DISTANCE * d
    rest_pose(ob)
    return ref


def chain_frames(ob: bpy.types.Object, limb: Limb) -> np.ndarray:
    """(3, 4, 4): the limb's rest transforms, top bone first: the top bone's rest frame in
    world (its parent at rest: the body is still), then each bone's in its parent's. The
    effector's world pose is ``T0 R0 T1 R1 T2 R2``, ``R_k`` the bone's local rotation
    (matrix_basis), what a peer solver outside Blender needs of the rig."""
    bones = [ob.data.bones[name] for name in reversed(limb.chain)]
    out = [np.array(ob.matrix_world @ bones[0].matrix_local, dtype=float)]
    for parent, bone in zip(bones, bones[1:], strict=False):
        out.append(np.array(parent.matrix_local.inverted() @ bone.matrix_local, dtype=float))
    return np.array(out)


def new_empty(name: str) -> bpy.types.Object:
    """A plain-axes Empty in the scene collection, rotation mode quaternion."""
    ob = bpy.data.objects.new(name, None)
    ob.rotation_mode = "QUATERNION"
    bpy.context.scene.collection.objects.link(ob)
    return ob


def key_empty(ob: bpy.types.Object, matrices: np.ndarray | None = None,
              points: np.ndarray | None = None) -> None:  # fmt: skip
    """Replace ``ob``'s keys by one LINEAR key per frame 0..N-1: location and rotation
    from ``matrices`` (N, 4, 4), or the location alone from ``points`` (N, 3)."""
    ad = ob.animation_data or ob.animation_data_create()
    if ad.action is not None:
        bpy.data.actions.remove(ad.action)
    act = bpy.data.actions.new(f"{ob.name}_keys")
    slot = act.slots.new(id_type="OBJECT", name=ob.name)
    ad.action, ad.action_slot = act, slot
    cb = anim_utils.action_ensure_channelbag_for_slot(act, slot)
    channels: list[tuple[str, np.ndarray]] = []
    if matrices is not None:
        quats = np.array([_mat_quat(m) for m in matrices])
        for k in range(1, len(quats)):  # one sign: no long way round between keys
            if np.dot(quats[k], quats[k - 1]) < 0:
                quats[k] = -quats[k]
        channels = [("location", matrices[:, :3, 3]), ("rotation_quaternion", quats)]
    else:
        assert points is not None
        channels = [("location", points)]
    linear = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value
    for path, values in channels:
        n = len(values)
        for i in range(values.shape[1]):
            fc = cb.fcurves.new(path, index=i)
            fc.keyframe_points.add(n)
            co = np.column_stack([np.arange(n, dtype=float), values[:, i]]).ravel()
            fc.keyframe_points.foreach_set("co", co.astype(np.float32))
            fc.keyframe_points.foreach_set("interpolation", [linear] * n)
            fc.update()


def _mat_quat(m: np.ndarray) -> np.ndarray:
    """[w, x, y, z] of a 4x4's rotation."""
    return np.array(Matrix(np.asarray(m[:3, :3]).tolist()).to_quaternion(), dtype=float)
