"""The read of a rig is kept between bakes while nothing it looks at changes, and read
again on any change a rigger makes (rig_fingerprint): each change below is compared
with a read that keeps nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import bpy
import pytest
from addon_helpers import build_angled_arm, build_metarig

ARM7 = Path(__file__).resolve().parents[2] / "sample_scenes" / "arm7"


def _reader(addon: Any) -> Any:
    return addon.dhik_addon.armature_read


def _read(addon: Any, ob: bpy.types.Object) -> tuple[Any, list[str], dict[str, Any]]:
    """The skeleton, notes and joint maps of ``ob`` as a bake reads them."""
    reader = _reader(addon)
    defn, notes = reader.read_skeleton_notes(ob)
    return defn, notes, reader.rig_joint_maps(ob, defn)


def _uncached(addon: Any, ob: bpy.types.Object) -> tuple[Any, list[str], dict[str, Any]]:
    """The read with nothing kept."""
    reader = _reader(addon)
    reader._KEPT.clear()
    return _read(addon, ob)


def _same_maps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal joint maps: every field, arrays to the last bit."""
    import numpy as np

    fields = ("name", "type", "bone_name", "axis", "to_bone", "read_axis")
    return a.keys() == b.keys() and all(
        all(np.array_equal(*(np.asarray(getattr(m[k], f), dtype=object) for m in (a, b)))
            for f in fields) for k in a)


def _edit(ob: bpy.types.Object, change: Callable[[Any], None]) -> None:
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    change(ob.data.edit_bones)
    bpy.ops.object.mode_set(mode="OBJECT")


def _free_bone(ob: bpy.types.Object) -> str:
    """A bone of the metarig whose location channels are free (not connected)."""
    return next(b.name for b in ob.data.bones if b.parent is not None and not b.use_connect
                and not all(ob.pose.bones[b.name].lock_location))


def _set(pb: Any, **values: Any) -> None:
    for k, v in values.items():
        setattr(pb, k, v)


# each: what a rigger changes on the metarig (pose bone settings, Edit Mode, bone data)
CHANGES: dict[str, Callable[[bpy.types.Object], None]] = {
    "IK lock": lambda ob: _set(ob.pose.bones["forearm.L"], lock_ik_x=True, lock_ik_z=True),
    "IK limit on": lambda ob: _set(ob.pose.bones["forearm.L"], lock_ik_y=True,
                                   lock_ik_z=True, use_ik_limit_x=True, ik_min_x=-0.5),
    "IK stretch": lambda ob: _set(ob.pose.bones["hand.L"], ik_stretch=0.3),
    "location locked": lambda ob: _set(ob.pose.bones[_free_bone(ob)],
                                       lock_location=(True, True, True)),
    "head moved": lambda ob: _edit(ob, lambda eb: setattr(eb["hand.L"], "head",
                                                          eb["hand.L"].head + _v(0.01))),
    "roll": lambda ob: _edit(ob, lambda eb: setattr(eb["forearm.L"], "roll",
                                                    eb["forearm.L"].roll + 0.4)),
    "disconnected": lambda ob: _edit(ob, lambda eb: setattr(eb["forearm.L"], "use_connect",
                                                            False)),
    "parent": lambda ob: _edit(ob, lambda eb: setattr(eb["hand.L"], "parent",
                                                      eb["upper_arm.L"])),
    "renamed": lambda ob: setattr(ob.data.bones["hand.L"], "name", "palm.L"),
    "local location off": lambda ob: setattr(ob.data.bones[_free_bone(ob)],
                                             "use_local_location", False),
}


def _v(d: float) -> Any:
    from mathutils import Vector

    return Vector((d, -d, d))


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_to_the_rig_is_read_again(addon, change):
    ob = build_metarig()
    if ob is None:
        pytest.skip("rigify is not available")
    before, notes_before, maps_before = _read(addon, ob)
    again = _read(addon, ob)
    assert again[0] is before  # kept: the same read, not a new one, and the same maps
    assert all(again[2][k] is maps_before[k] for k in maps_before)
    CHANGES[change](ob)
    after, notes_after, maps_after = _read(addon, ob)
    fresh, notes_fresh, maps_fresh = _uncached(addon, ob)
    assert after == fresh and notes_after == notes_fresh
    assert _same_maps(maps_after, maps_fresh)
    # the change matters to the read (else this test could not fail)
    assert (before, notes_before) != (fresh, notes_fresh) or not _same_maps(maps_before,
                                                                              maps_fresh)


def test_stored_joint_properties_are_read_again(addon):
    """A joint stored by Import Skeleton lives in custom properties: editing one (an IK
    limit typed into dhik_limits) is read, and a bone moved in Edit Mode after import
    fails the read as it does with nothing kept."""
    assert bpy.ops.dhik.import_skeleton(filepath=str(ARM7 / "skeleton.json")) == {"FINISHED"}
    ob = bpy.context.scene.dhik.armature
    before = _read(addon, ob)[0]
    bone = next(b for b in ob.data.bones if b.get("dhik_type") == "revolute"
                and "dhik_limits" in b.keys())
    bone["dhik_limits"] = [-0.25, 0.5]
    after = _read(addon, ob)[0]
    assert after == _uncached(addon, ob)[0] != before
    assert {j.name: j.limits for j in after.joints}[bone.name] == (-0.25, 0.5)
    _read(addon, ob)  # kept again
    _edit(ob, lambda eb: setattr(eb[bone.name], "head", eb[bone.name].head + _v(0.05)))
    with pytest.raises(addon.core.errors.DhikError, match="away from the joint's rest"):
        _read(addon, ob)


def test_objects_sharing_an_armature_keep_their_own_reads(addon):
    """Pose bones (IK locks) belong to the object: two objects of one armature read apart."""
    a = build_angled_arm()
    b = bpy.data.objects.new("arm_copy", a.data)
    bpy.context.collection.objects.link(b)
    bpy.context.view_layer.update()  # the new object's pose
    b.pose.bones["forearm"].lock_ik_x = b.pose.bones["forearm"].lock_ik_z = True
    read_a, read_b = _read(addon, a)[0], _read(addon, b)[0]
    assert read_a != read_b
    assert _read(addon, a)[0] is read_a and _read(addon, b)[0] is read_b
    types = {j.name: j.type for j in read_b.joints}
    assert types["forearm"] == "revolute"
    assert read_a == _uncached(addon, a)[0] and read_b == _uncached(addon, b)[0]


def test_reads_kept_are_bounded(addon):
    reader = _reader(addon)
    reader._KEPT.clear()
    obs = [build_angled_arm(f"arm{i}") for i in range(reader.KEPT_READS + 2)]
    for ob in obs:
        _read(addon, ob)
    assert len(reader._KEPT) == reader.KEPT_READS
