"""A bake's keys: planned from the solved frames (no Blender data changed), then written.

:func:`plan_keys` turns the solved joint values into one key plan per solved bone, in
the bone's own rotation mode (key_curves: continuous Euler of any order, quaternions
with sign continuity, axis-angle), every ``frame_step``-th frame plus the last one,
then key-reduced within ``key_reduction`` (joint space, radians or metres). Nothing in
Blender changes until the plan is complete.

Two ways to write it (``scene.dhik.bake_action``):

- ``CURRENT``: into the armature's assigned action and slot (a new action when it has
  none). Only the solved bones' channels are touched, and only inside the frame range:
  their keys in ``[start, end]`` are replaced, keys outside it and every other F-curve
  stay as they were. A solved bone's other transform channels (location of a rotating
  joint, scale, ...) that have F-curves get rest-value keys at ``start`` and ``end`` so
  the bone moves only as solved inside the range; without F-curves they are set to rest.
- ``NEW``: a new action holding only the bake (all pose bones reset to rest first); the
  replaced action gets a fake user unless it is itself an earlier dhik bake.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import bpy
import numpy as np

from ..core.app.formats import ColumnFrames
from ..core.errors import DhikError
from ..core.model.definition import SkeletonDef
from . import key_curves as kc
from . import keying
from .access import pose_of
from .joint_map import JointMap

BAKE_TAG = "dhik_bake"  # custom property marking actions written by a NEW bake
ROTATION_PROPS = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}
REST = {
    "location": (0.0, 0.0, 0.0),
    "rotation_quaternion": (1.0, 0.0, 0.0, 0.0),
    "rotation_euler": (0.0, 0.0, 0.0),
    "rotation_axis_angle": (0.0, 0.0, 1.0, 0.0),
    "scale": (1.0, 1.0, 1.0),
}
def rotation_prop(mode: str) -> str:
    """The pose-bone property that holds the rotation in rotation mode ``mode``."""
    return ROTATION_PROPS.get(mode, "rotation_euler")


def solved_joints(defn: SkeletonDef, effectors: Sequence[str],
                  chain_lengths: Sequence[int] | None = None) -> list[str]:
    """Moving joints between each effector and the root (effector included), or only the
    last ``chain_lengths[k]`` joints of effector k's path (0: up to the root), in
    skeleton order: the joints whose bones a bake keys."""
    parent = {j.name: j.parent for j in defn.joints}
    on_chain: set[str] = set()
    lengths = chain_lengths or [0] * len(effectors)
    for name, n in zip(effectors, lengths, strict=True):
        at: str | None = name
        count = 0
        while at is not None and (n == 0 or count < n):
            on_chain.add(at)
            at = parent[at]
            count += 1
    return [j.name for j in defn.joints if j.name in on_chain and j.type != "fixed"]


def path_joints(defn: SkeletonDef, effectors: Sequence[str]) -> list[str]:
    """Moving joints between the effectors and the root (effectors included)."""
    return solved_joints(defn, effectors)


def check_effector_moves(defn: SkeletonDef, effector: str, source: str, where: str) -> None:
    """DhikError when no movable joint lies between ``effector`` and the root (included)."""
    if not solved_joints(defn, [effector]):
        problem = ("is the fixed root" if effector == defn.root_name
                   else "has no movable joint between it and the root")
        raise DhikError.at(source, where, f"bone {effector!r} {problem}, so it cannot follow "
                           "a target; choose a bone further down a chain")


@dataclass
class BoneKeys:
    """Keys of one solved bone's channel: ``values`` rows at ``frames`` (LINEAR)."""

    bone: str
    prop: str  # pose-bone property: rotation_quaternion / _euler / _axis_angle, location
    kind: str  # key_curves kind: QUATERNION, AXIS_ANGLE, an Euler order or LOCATION
    frames: np.ndarray  # int frames of the keys
    values: np.ndarray  # (len(frames), 3 or 4)
    solved: int  # number of solved frames the keys stand for
    max_error: float  # joint error (rad or m) of the kept curves at the candidate frames


@dataclass
class KeyPlan:
    """Every key a bake writes, and the figures of its reduction.

    ``covered``: per keyed bone, the transform properties its joints carry (solved or
    driven); the bake keys or keeps those and holds its other transform channels at rest.
    """

    start: int
    end: int
    bones: list[BoneKeys] = field(default_factory=list)
    covered: dict[str, set[str]] = field(default_factory=dict)

    @property
    def key_count(self) -> int:
        """Keyframe points the plan writes (one per component per key)."""
        return sum(len(b.frames) * b.values.shape[1] for b in self.bones)

    @property
    def curve_count(self) -> int:
        return sum(b.values.shape[1] for b in self.bones)

    @property
    def max_error(self) -> float:
        return max((b.max_error for b in self.bones), default=0.0)


def channel_rows(
    pb: bpy.types.PoseBone, jm: JointMap, entries: Sequence[dict],
    start: np.ndarray | None = None,
) -> tuple[str, str, np.ndarray]:
    """``(pose-bone property, key_curves kind, rows)``: the channel that carries joint
    ``jm`` on bone ``pb`` for SPEC 3.3 ``entries``, one row each. Prismatic joints give
    their location (m); rotations come in the bone's rotation mode, continuous, the first
    row continuing ``start`` (a channel value of that mode) when given."""
    return channel_rows_of(pb, jm, np.array([jm.channel_value(e) for e in entries],
                                            dtype=float), start)


def channel_rows_of(
    pb: bpy.types.PoseBone, jm: JointMap, raw: np.ndarray, start: np.ndarray | None = None,
) -> tuple[str, str, np.ndarray]:
    """:func:`channel_rows` from the channel values ``raw`` (F, 4) quaternions or (F, 3)
    locations (:meth:`JointMap.channel_values`)."""
    if jm.channel == "location":
        return "location", kc.LOCATION, raw
    mode = pb.rotation_mode
    kind = mode if mode in kc.KINDS else kc.QUATERNION
    return rotation_prop(mode), kind, kc.rotation_channel(kind, raw, start)


def bone_joints(maps: dict[str, JointMap]) -> dict[str, tuple[str | None, list[str]]]:
    """Per bone: the joint on its rotation channel (or None) and the joints that share its
    location channel (its ``.tx``/``.ty``/``.tz``, or its own prismatic joint)."""
    out: dict[str, tuple[str | None, list[str]]] = {}
    for name, jm in maps.items():
        rot, slides = out.get(jm.bone, (None, []))
        if jm.channel == "rotation_quaternion":
            rot = name
        elif jm.channel == "location":
            slides = [*slides, name]
        out[jm.bone] = (rot, slides)
    return out


def plan_keys(
    ob: bpy.types.Object, maps: dict[str, JointMap], frames: Sequence[dict],
    solved: Sequence[str], frame_step: int = 1, key_reduction: float = 0.0,
    before: dict[str, np.ndarray] | None = None,
) -> KeyPlan:
    """Keys of the ``solved`` joints' bones for animation.json-style ``frames``.

    Rotation keys follow each bone's rotation mode; prismatic joints key ``location``
    (a bone's translation joints together: the sum of their channel values, so every one
    of them must have values in ``frames``, as a bake's frames do). Candidate frames are
    every ``frame_step``-th solved frame and the last one; with ``key_reduction > 0``
    only the keys needed to stay within that joint error (rad or m) of the solved values
    at the candidate frames are kept. ``before`` (see :func:`values_before`): the
    rotation channel just before the range, which the new keys continue (same Euler
    turns, quaternion sign).
    """
    if frame_step < 1:
        raise DhikError.at("DHIK", "frame_step", f"must be >= 1, got {frame_step}")
    if not frames:
        raise DhikError.at("DHIK", "frame range", "no frames were solved")
    columns = frames.columns if isinstance(frames, ColumnFrames) else None
    numbers = columns.frames.astype(int) if columns is not None else \
        np.array([fr["frame"] for fr in frames], dtype=int)
    pick = np.array(kc.stepped(len(frames), frame_step))
    plan = KeyPlan(int(numbers[0]), int(numbers[-1]))
    keyed: list[tuple[str, str, str, np.ndarray, np.ndarray, np.ndarray]] = []
    for bone, covered, prop, kind, values in bone_channels(ob, maps, frames, solved, before):
        plan.covered.setdefault(bone, set()).update(covered)
        if prop is None:
            continue
        cand_frames, cand_values = numbers[pick], values[pick]
        rows = np.asarray(kc.reduce_keys(kind, cand_frames, cand_values, key_reduction))
        keyed.append((bone, prop, kind, cand_frames, cand_values, rows))
    errors = kc.max_key_errors([(kind, f, v, kept) for _, _, kind, f, v, kept in keyed])
    for (bone, prop, kind, f, v, kept), error in zip(keyed, errors, strict=True):
        plan.bones.append(BoneKeys(bone, prop, kind, f[kept], v[kept], len(frames), error))
    return plan


def bone_channels(
    ob: bpy.types.Object, maps: dict[str, JointMap], frames: Sequence[dict],
    solved: Sequence[str], before: dict[str, np.ndarray] | None = None,
    owners: dict[str, tuple[str | None, list[str]]] | None = None,
) -> list[tuple[str, set[str], str | None, str, np.ndarray]]:
    """Per keyed channel of the ``solved`` joints' bones, in skeleton order: ``(bone,
    the properties the bone's joints carry, property, key_curves kind, rows (F, 3 or 4)
    for ``frames``)`` (:func:`plan_keys` before its choice of keys; the live preview
    sets the rows themselves). A bone whose joints are not solved but carries them
    comes with property None. ``owners``: :func:`bone_joints` of ``maps``, if known."""
    bones = pose_of(ob).bones
    columns = frames.columns if isinstance(frames, ColumnFrames) else None
    owners = owners if owners is not None else bone_joints(maps)

    def raw(name: str) -> np.ndarray:  # the joint's channel values, one row per frame
        jm = maps[name]
        if columns is not None:  # a bake's frames: the joint's column, no dict per frame
            return jm.channel_values(columns.column(name))
        return np.array([jm.channel_value(fr["joints"][name]) for fr in frames], dtype=float)

    out: list[tuple[str, set[str], str | None, str, np.ndarray]] = []
    wanted = [maps[n].bone for n in solved if maps[n].channel is not None]
    for bone in dict.fromkeys(wanted):  # keyed bones, in skeleton order
        rot, slides = owners[bone]
        pb = bones[bone]
        covered = {"location"} if slides else set()
        if rot is not None:
            covered.add(rotation_prop(pb.rotation_mode))
        keyed = False
        if rot is not None and rot in solved:
            start = None if before is None else before.get(rot)
            prop, kind, rows = channel_rows_of(pb, maps[rot], raw(rot), start)
            out.append((bone, covered, prop, kind, rows))
            keyed = True
        if any(n in solved for n in slides):
            out.append((bone, covered, "location", kc.LOCATION,
                        sum((raw(n) for n in slides[1:]), raw(slides[0]))))
            keyed = True
        if not keyed:
            out.append((bone, covered, None, "", np.zeros((0, 3))))
    return out


def values_before(
    ob: bpy.types.Object, solved: Sequence[str], start: int
) -> dict[str, np.ndarray]:
    """Per solved bone, its rotation channel (in its rotation mode) on frame ``start - 1``
    from the current action's F-curves, when all of them have a key before ``start``."""
    cb = keying.assigned_channelbag(ob)
    if cb is None:
        return {}
    bones = pose_of(ob).bones
    out: dict[str, np.ndarray] = {}
    for name in solved:
        pb = bones.get(name)
        if pb is None:
            continue  # a translation joint: its bone's location needs no continuity
        prop = rotation_prop(pb.rotation_mode)
        path = pb.path_from_id(prop)
        curves = [cb.fcurves.find(path, index=i) for i in range(len(REST[prop]))]
        if all(fc is not None and len(fc.keyframe_points)
               and fc.keyframe_points[0].co[0] < start for fc in curves):
            out[name] = np.array([fc.evaluate(start - 1) for fc in curves if fc is not None])
    return out


def keyed_outside(ob: bpy.types.Object, solved: Sequence[str], start: int, end: int
                  ) -> tuple[bool, bool]:  # fmt: skip
    """Whether the current action keys every rotation channel of every solved bone
    before ``start`` and after ``end`` (the keys a re-bake of ``start..end`` sits
    between)."""
    cb = keying.assigned_channelbag(ob)
    if cb is None or not solved:
        return False, False
    bones = pose_of(ob).bones
    before = after = True
    for name in solved:
        pb = bones.get(name)
        if pb is None:
            continue  # a translation joint (no bone of its own)
        prop = rotation_prop(pb.rotation_mode)
        path = pb.path_from_id(prop)
        for i in range(len(REST[prop])):
            fc = cb.fcurves.find(path, index=i)
            keys = [] if fc is None else fc.keyframe_points
            before = before and len(keys) > 0 and keys[0].co[0] < start
            after = after and len(keys) > 0 and keys[-1].co[0] > end
    return before, after


# --------------------------------------------------------------------------- writing


def _curve(cb: bpy.types.ActionChannelbag, path: str, index: int,
           group: str) -> bpy.types.FCurve:
    """``cb``'s F-curve ``(path, index)``, made (in bone group ``group``) if missing."""
    fc = cb.fcurves.find(path, index=index)
    if fc is None:
        fc = cb.fcurves.new(path, index=index)
        fc.group = cb.groups.get(group) or cb.groups.new(group)
    return fc


def held_props(pb: bpy.types.PoseBone, covered: set[str]) -> list[str]:
    """A keyed bone's transform properties that no joint of it carries: the solve assumes
    them at rest."""
    rotation = rotation_prop(pb.rotation_mode)
    return [p for p in ("location", rotation, "scale") if p not in covered]


def current_channelbag(ob: bpy.types.Object) -> bpy.types.ActionChannelbag:
    """The channelbag of ``ob``'s assigned action and slot, made where missing (a new
    action when ``ob`` has none; DhikError for an action linked from a library)."""
    ad = ob.animation_data
    action = ad.action if ad is not None else None
    if action is None:
        return keying.new_action(ob, f"{ob.name}Action")[1]
    assert ad is not None
    if action.library is not None:
        raise DhikError.at(f"armature {ob.name!r}", "action", f"{action.name!r} is linked from "
                           "a library and cannot be edited; bake into a new action")
    if ad.action_slot is None:
        ad.action_slot = action.slots.new(id_type="OBJECT", name=ob.name)
    assert ad.action_slot is not None
    return keying.ensure_channelbag(action, ad.action_slot)


def check_current_action(ob: bpy.types.Object) -> None:
    """DhikError, before anything is solved, when the current action cannot take keys."""
    ad = ob.animation_data
    if ad is not None and ad.action is not None and ad.action.library is not None:
        raise DhikError.at(f"armature {ob.name!r}", "action", f"{ad.action.name!r} is linked "
                           "from a library and cannot be edited; bake into a new action")


def held_in_use(ob: bpy.types.Object, plan: KeyPlan) -> list[tuple[str, str]]:
    """``(bone, property)`` of the keyed bones' held channels (:func:`held_props`: those
    no joint carries, which the bake holds at rest on the range) that are off rest
    somewhere in the range: per component, an unmuted F-curve of ``ob``'s current action
    by its keys inside the range and its values at the range's ends, else the value set.
    The bake replaces them there (a Current Action bake) or leaves them in the previous
    action (a New Action bake): either way Blender no longer shows them, so the operator
    names them in a WARNING."""
    cb = keying.assigned_channelbag(ob)
    bones = pose_of(ob).bones
    out: list[tuple[str, str]] = []
    for bone, covered in plan.covered.items():
        pb = bones.get(bone)
        if pb is None:
            continue
        for prop in held_props(pb, covered):
            path = pb.path_from_id(prop)
            value_set = np.array(getattr(pb, prop), dtype=float)
            for i, rest in enumerate(REST[prop]):
                fc = None if cb is None else cb.fcurves.find(path, index=i)
                if fc is not None and not fc.mute and len(fc.keyframe_points):
                    keys = np.zeros(2 * len(fc.keyframe_points))
                    fc.keyframe_points.foreach_get("co", keys)
                    inside = (keys[0::2] >= plan.start) & (keys[0::2] <= plan.end)
                    values = np.r_[keys[1::2][inside], fc.evaluate(plan.start),
                                   fc.evaluate(plan.end)]
                else:
                    values = value_set[i:i + 1]
                if np.any(np.abs(values - rest) > 1e-9):
                    out.append((bone, prop))
                    break
    return out


def _hold(cb: bpy.types.ActionChannelbag, pb: bpy.types.PoseBone, covered: set[str],
          start: int, end: int, by_keys: bool) -> None:  # fmt: skip
    """Hold a keyed bone's other transform channels at rest inside ``[start, end]``: keys
    at the range ends where they have F-curves (or always, ``by_keys``), and the value."""
    for prop in held_props(pb, covered):
        held = pb.path_from_id(prop)
        rest = REST[prop]
        curves = [cb.fcurves.find(held, index=i) for i in range(len(rest))]
        if by_keys or any(fc is not None for fc in curves):
            ends = np.array([start, end], dtype=float)
            for i, value in enumerate(rest):
                keying.replace_range(_curve(cb, held, i, pb.name), start, end, ends,
                                     np.full(2, value))
        setattr(pb, prop, rest)  # also where a muted curve leaves the value in charge


def write_current(ob: bpy.types.Object, plan: KeyPlan, hold_by_keys: bool = False) -> None:
    """Key ``plan`` into ``ob``'s current action (see module docstring, CURRENT).

    ``hold_by_keys``: key the held channels at rest on the range ends even where the
    action has no F-curve for them (NLA strips below may animate them)."""
    cb = current_channelbag(ob)
    bones = pose_of(ob).bones
    for bk in plan.bones:
        path = bones[bk.bone].path_from_id(bk.prop)
        for i in range(bk.values.shape[1]):
            keying.replace_range(_curve(cb, path, i, bk.bone), plan.start, plan.end,
                                 bk.frames, bk.values[:, i])
    for bone, covered in plan.covered.items():
        _hold(cb, bones[bone], covered, plan.start, plan.end, hold_by_keys)


def write_new(ob: bpy.types.Object, plan: KeyPlan, hold_by_keys: bool = False
              ) -> bpy.types.Action:  # fmt: skip
    """Key ``plan`` into a new action (see module docstring, NEW); the new action.
    ``hold_by_keys``: also key the keyed bones' other channels at rest on the range ends
    (NLA strips below may animate them)."""
    previous = ob.animation_data.action if ob.animation_data else None
    if previous is not None and not previous.get(BAKE_TAG):
        previous.use_fake_user = True
    for pb in pose_of(ob).bones:
        for prop, rest in REST.items():
            setattr(pb, prop, rest)
    action, cb = keying.new_action(ob, f"{ob.name}_dhik_bake")
    action[BAKE_TAG] = True
    bones = pose_of(ob).bones
    for bk in plan.bones:
        path = bones[bk.bone].path_from_id(bk.prop)
        keying.write_vector(cb, path, bk.frames.tolist(), bk.values, bk.bone)
    if hold_by_keys:
        for bone, covered in plan.covered.items():
            _hold(cb, bones[bone], covered, plan.start, plan.end, True)
    return action
