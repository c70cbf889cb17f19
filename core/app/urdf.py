"""URDF robots as skeletons: read a ``.urdf`` file and convert it to a SkeletonDef.

What maps to what (URDF joint ``X`` with ``<origin xyz rpy>``, ``<axis>``, child link ``L``):

- The root link (the one link that is no joint's child) becomes a fixed root joint
  named after the link (``<link>__root`` if a URDF joint already has that name).
- ``fixed``: one fixed joint ``X`` with ``offset = xyz`` and ``quaternion = R(rpy)``
  (omitted when rpy is zero).
- ``revolute`` / ``prismatic``: joint ``X`` of the same type, limits ``[lower, upper]``
  (radians / metres), axis = the URDF axis (unit, in the joint frame). ``continuous``:
  a revolute joint without limits.
- A moving joint whose rpy is not zero is preceded by a fixed joint ``X__origin``
  carrying ``xyz`` and ``R(rpy)``; ``X`` then has a zero offset. A dhik revolute or
  prismatic joint cannot rotate its own frame at rest, so the rotation goes on a
  fixed joint before it, and the moving joint keeps the URDF name.

So the variable of skeleton joint ``X`` is URDF joint ``X``'s position (animation.json
values are the robot's joint commands) and the world transform of skeleton joint ``X``
is the pose of ``L`` (position and rotation, metres) for every configuration.
URDF ``rpy`` is fixed-axis roll, pitch, yaw: ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``,
the same convention as dhik's XYZ Euler angles.

A ``mimic`` joint becomes an independent joint of its own type and a warning names
it (skeleton.json cannot couple joints). ``floating`` and ``planar`` joints, several
root links, cycles, a link with two parent joints and joints naming unknown links are
errors: one DhikError ``<file>: joint[name=X]: <problem>``. Everything else in the
file (visuals, inertia, transmissions, gazebo tags) is ignored.

The XML is read with the standard library's expat parser; a document type
declaration (and with it any entity declaration, e.g. "billion laughs") is refused
before anything in it is expanded.
"""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple
from xml.etree import ElementTree as ET
from xml.parsers import expat

from ..errors import DhikError
from ..model.definition import SkeletonDef
from ..rotations import euler_xyz_to_quat
from .formats import parse_skeleton

MOVING_TYPES = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic"}
UNSUPPORTED_TYPES = {
    "floating": "a floating joint (6 DoF) cannot be expressed in skeleton.json",
    "planar": "a planar joint (3 DoF) cannot be expressed in skeleton.json",
}
ORIGIN_SUFFIX = "__origin"
ROOT_SUFFIX = "__root"


class UrdfSkeleton(NamedTuple):
    """The converted skeleton and the warnings met on the way (one line each)."""

    skeleton: SkeletonDef
    warnings: list[str]


class _Refused(Exception):
    """Raised inside expat's handlers to stop at a DOCTYPE or entity declaration."""


def _refuse_doctype(*_args: Any) -> None:
    raise _Refused("DOCTYPE declarations are not accepted")


def _refuse_entity(*_args: Any) -> None:
    raise _Refused("entity declarations are not accepted")


def parse_xml(data: str | bytes, source: str) -> ET.Element:
    """The document's root element; DhikError on bad XML or any DOCTYPE / entity declaration.

    expat reports the document type declaration before reading the declarations inside it,
    so nothing is ever expanded.
    """
    parser = expat.ParserCreate()
    builder = ET.TreeBuilder()
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_entity
    parser.UnparsedEntityDeclHandler = _refuse_entity
    parser.ExternalEntityRefHandler = _refuse_entity  # type: ignore[assignment]
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(data, True)
    except _Refused as exc:
        problem = (f"line {parser.CurrentLineNumber}: {exc} (entity expansion attacks such "
                   "as 'billion laughs'); remove the <!DOCTYPE>")
        raise DhikError(source, problem) from None
    except expat.ExpatError as exc:
        raise DhikError(source, f"not well-formed XML: {exc}") from None
    return builder.close()


# --------------------------------------------------------------------------- attributes


def _numbers(text: str | None, n: int, default: tuple[float, ...], source: str, where: str,
             ) -> tuple[float, ...]:
    """``n`` finite numbers separated by white space; ``default`` when the attribute is absent."""
    if text is None:
        return default
    parts = text.split()
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != n or not all(math.isfinite(v) for v in values):
        shape = "a finite number" if n == 1 else f"{n} finite numbers"
        raise DhikError(source, where, f"must be {shape}, got {text!r}")
    return values


def _number(el: ET.Element, attr: str, default: float, source: str, where: str) -> float:
    return _numbers(el.get(attr), 1, (default,), source, f"{where}.{attr}")[0]


def _link_attr(joint: ET.Element, tag: str, source: str, where: str) -> str:
    el = joint.find(tag)
    name = None if el is None else el.get("link")
    if not name:
        raise DhikError(source, where, f'<{tag} link="..."/> is missing')
    return name


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3`` ... if it is taken; the result is added to ``taken``."""
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    taken.add(candidate)
    return candidate


# --------------------------------------------------------------------------- conversion


class _Joint(NamedTuple):
    name: str
    type: str
    parent: str
    child: str
    xyz: tuple[float, ...]
    rpy: tuple[float, ...]
    axis: tuple[float, ...]
    limits: tuple[float, float] | None


def _read_joint(el: ET.Element, index: int, links: set[str], source: str,
                warnings: list[str]) -> _Joint:
    name = el.get("name")
    if not name:
        raise DhikError(source, f"joint[{index}]", 'the name attribute is missing')
    where = f"joint[name={name}]"
    jtype = el.get("type")
    if jtype in UNSUPPORTED_TYPES:
        raise DhikError(source, where, UNSUPPORTED_TYPES[jtype])
    if jtype != "fixed" and jtype not in MOVING_TYPES:
        raise DhikError(source, where, f"unknown joint type {jtype!r}; expected revolute, "
                                       "continuous, prismatic or fixed")
    parent = _link_attr(el, "parent", source, where)
    child = _link_attr(el, "child", source, where)
    for role, link in (("parent", parent), ("child", child)):
        if link not in links:
            raise DhikError(source, where, f"{role} link {link!r} is not a <link> of the robot")
    if parent == child:
        raise DhikError(source, where, f"link {child!r} is its own parent (a cycle)")
    origin = el.find("origin")
    xyz: tuple[float, ...] = (0.0, 0.0, 0.0)
    rpy: tuple[float, ...] = (0.0, 0.0, 0.0)
    if origin is not None:
        xyz = _numbers(origin.get("xyz"), 3, xyz, source, f"{where}.origin.xyz")
        rpy = _numbers(origin.get("rpy"), 3, rpy, source, f"{where}.origin.rpy")
    axis: tuple[float, ...] = (1.0, 0.0, 0.0)
    limits: tuple[float, float] | None = None
    if jtype != "fixed":
        axis_el = el.find("axis")
        if axis_el is not None:
            axis = _numbers(axis_el.get("xyz"), 3, axis, source, f"{where}.axis.xyz")
        if math.hypot(*axis) == 0.0:
            raise DhikError(source, f"{where}.axis.xyz", "must be a non-zero 3-vector")
        if jtype in ("revolute", "prismatic"):
            limit = el.find("limit")
            if limit is None:
                raise DhikError(source, where, f"a {jtype} joint needs a <limit> element "
                                               "(use type continuous for an unlimited hinge)")
            lo = _number(limit, "lower", 0.0, source, f"{where}.limit")
            hi = _number(limit, "upper", 0.0, source, f"{where}.limit")
            if lo > hi:
                raise DhikError(source, f"{where}.limit", f"lower {lo} is greater than upper {hi}")
            if lo == hi:
                warnings.append(f"{source}: {where}: limits lower = upper = {lo}: the joint "
                                "is locked")
            limits = (lo, hi)
        mimic = el.find("mimic")
        if mimic is not None:
            warnings.append(
                f"{source}: {where}: mimics joint {mimic.get('joint')!r} (multiplier "
                f"{mimic.get('multiplier', '1')}, offset {mimic.get('offset', '0')}); imported "
                f"as an independent {jtype} joint (skeleton.json cannot couple joints)")
    return _Joint(name, jtype, parent, child, xyz, rpy, axis, limits)


def urdf_to_skeleton(robot: ET.Element, source: str = "robot.urdf") -> UrdfSkeleton:
    """Convert a parsed ``<robot>`` element (see the module docstring for the mapping)."""
    if robot.tag != "robot":
        raise DhikError(source, f"the root element is <{robot.tag}>, expected <robot>")
    links: set[str] = set()
    for i, el in enumerate(robot.findall("link"), start=1):
        name = el.get("name")
        if not name:
            raise DhikError(source, f"link[{i}]", "the name attribute is missing")
        if name in links:
            raise DhikError(source, f"link[name={name}]", "a second link with this name")
        links.add(name)
    if not links:
        raise DhikError(source, "robot", "has no <link>")

    warnings: list[str] = []
    joints: list[_Joint] = []
    parent_joint: dict[str, _Joint] = {}  # child link -> the joint above it
    names: set[str] = set()
    for i, el in enumerate(robot.findall("joint"), start=1):
        j = _read_joint(el, i, links, source, warnings)
        if j.name in names:
            raise DhikError(source, f"joint[name={j.name}]", "a second joint with this name")
        names.add(j.name)
        if j.child in parent_joint:
            raise DhikError(source, f"joint[name={j.name}]",
                            f"link {j.child!r} is already the child of joint "
                            f"{parent_joint[j.child].name!r} (a link has one parent)")
        parent_joint[j.child] = j
        joints.append(j)

    roots = [el.get("name", "") for el in robot.findall("link")]
    roots = [link for link in roots if link not in parent_joint]
    if len(roots) > 1:
        raise DhikError(source, "robot", f"several root links ({', '.join(roots)}): a skeleton "
                                         "has one root; connect them with joints")
    if not roots:
        raise DhikError(source, f"joint[name={joints[0].name}]",
                        "is on a cycle: every link has a parent joint")
    root_link = roots[0]

    children: dict[str, list[_Joint]] = {}
    for j in joints:
        children.setdefault(j.parent, []).append(j)
    taken = set(names)
    root_name = _unique(root_link if root_link not in names else root_link + ROOT_SUFFIX, taken)
    out: list[dict[str, Any]] = [{"name": root_name, "type": "fixed", "parent": None}]
    skeleton_joint = {root_link: root_name}  # link -> the skeleton joint carrying its pose
    stack = list(reversed(children.get(root_link, [])))
    while stack:  # depth first, children in file order
        j = stack.pop()
        out.extend(_skeleton_joints(j, skeleton_joint[j.parent], taken))
        skeleton_joint[j.child] = j.name
        stack.extend(reversed(children.get(j.child, [])))
    unreached = [j for j in joints if j.child not in skeleton_joint]
    if unreached:
        raise DhikError(source, f"joint[name={unreached[0].name}]",
                        f"is on a cycle not connected to the root link {root_link!r}")
    return UrdfSkeleton(parse_skeleton({"root_name": root_name, "joints": out}, source), warnings)


def _skeleton_joints(j: _Joint, parent: str, taken: set[str]) -> list[dict[str, Any]]:
    """The skeleton.json joint entries of URDF joint ``j`` below skeleton joint ``parent``."""
    rotated = any(a != 0.0 for a in j.rpy)
    quaternion = [float(c) for c in euler_xyz_to_quat(j.rpy)] if rotated else None
    if j.type == "fixed":
        entry: dict[str, Any] = {"name": j.name, "type": "fixed", "parent": parent,
                                 "offset": list(j.xyz)}
        if quaternion is not None:
            entry["quaternion"] = quaternion
        return [entry]
    entries: list[dict[str, Any]] = []
    offset = list(j.xyz)
    if quaternion is not None:
        helper = _unique(j.name + ORIGIN_SUFFIX, taken)
        entries.append({"name": helper, "type": "fixed", "parent": parent, "offset": offset,
                        "quaternion": quaternion})
        parent, offset = helper, [0.0, 0.0, 0.0]
    entries.append({"name": j.name, "type": MOVING_TYPES[j.type], "parent": parent,
                    "offset": offset, "axis": list(j.axis), "limits":
                    None if j.limits is None else list(j.limits)})
    return entries


def parse_urdf(data: str | bytes, source: str = "robot.urdf") -> UrdfSkeleton:
    """The skeleton of URDF text ``data`` (``source`` names it in messages)."""
    return urdf_to_skeleton(parse_xml(data, source), source)


def load_urdf(path: str | os.PathLike) -> UrdfSkeleton:
    """The skeleton of the URDF file at ``path``; DhikError when it cannot be read or used."""
    source = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise DhikError(source, exc.strerror or str(exc)) from None
    return parse_urdf(data, source)
