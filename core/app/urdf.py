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

``floating`` and ``planar`` joints become the free translation of DECISIONS
("Translation, free roots"), in the joint frame (after ``X__origin`` when rpy is not
zero): ``floating`` X is three prismatic joints ``X.tx``, ``X.ty``, ``X.tz`` along its
x, y, z axes, then one unlimited spherical joint ``X``; ``planar`` X (motion in the plane
perpendicular to its axis n) is two prismatic joints ``X.tx``, ``X.ty`` along u and v,
then a revolute joint ``X`` about n, where u is the unit vector along the coordinate
axis least aligned with n, made perpendicular to n, and v = n x u (n = z: u = x, v = y,
pinocchio's planar joint). Skeleton joint ``X`` then carries the child link's pose.

A ``mimic`` joint becomes an independent joint of its own type and a warning names
it (skeleton.json cannot couple joints). Several root links, cycles, a link with two
parent joints and joints naming unknown links are errors: one DhikError
``<file>: joint[name=X]: <problem>``, in the URDF's terms (elements and attributes; a
value is shortened in the message). Numbers are XML Schema decimals in ASCII digits
(``1.5``, ``-2e-3``; not ``1_000``, Arabic-Indic or fullwidth digits). Everything else in
the file (visuals, inertia, transmissions, gazebo tags) is ignored.

The XML is read with the standard library's expat parser, in the encodings it reads:
UTF-8 (URDF's), UTF-16, US-ASCII and the single-byte ones (ISO-8859-1 ...); any other
(UTF-7, UTF-32, an unknown name) is one error. A document type declaration (and with it
any entity declaration, e.g. "billion laughs") is refused before anything in it is
expanded.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, NamedTuple
from xml.etree import ElementTree as ET
from xml.parsers import expat

from ..errors import DhikError
from ..model.definition import SkeletonDef
from ..rotations import euler_xyz_to_quat
from .formats import MAX_JOINTS, MAX_LENGTH, parse_skeleton
from .jsonio import parse_decimal

MOVING_TYPES = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic"}
FREE_TYPES = ("floating", "planar")  # imported as free translation (DECISIONS)
ORIGIN_SUFFIX = "__origin"
ROOT_SUFFIX = "__root"
FREE_SUFFIXES = (".tx", ".ty", ".tz")
SHOWN = 40  # characters of a bad value a message shows


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


def _clip(text: str) -> str:
    """``text`` quoted for a message, its first :data:`SHOWN` characters when longer."""
    if len(text) <= SHOWN:
        return repr(text)
    return f"{text[:SHOWN]!r}... ({len(text):,} characters)"


def _short(name: str) -> str:
    """A name as an element path shows it: whole, or its first :data:`SHOWN` characters."""
    return name if len(name) <= SHOWN else f"{name[:SHOWN]}...({len(name):,} characters)"


_DECLARED = re.compile(rb"""^<\?xml[^>]*?encoding\s*=\s*["']([^"']*)["']""")


def _declared_encoding(data: str | bytes) -> str | None:
    """The encoding named by a byte document's XML declaration (UTF-8 bytes)."""
    if isinstance(data, str):
        return None
    head = data[:200].removeprefix(b"\xef\xbb\xbf")
    match = _DECLARED.match(head)
    return match[1].decode("ascii", "replace") if match else None


def parse_xml(data: str | bytes, source: str) -> ET.Element:
    """The document's root element; DhikError on bad XML, an encoding expat cannot read,
    or any DOCTYPE / entity declaration.

    expat reports the document type declaration before reading the declarations inside it,
    so nothing is ever expanded.
    """
    if isinstance(data, bytes) and data[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):
        raise DhikError(source, "cannot read: UTF-32 text (URDF files are UTF-8)")
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
    except (ValueError, LookupError):  # pyexpat: a multi-byte or an unknown encoding
        name = _declared_encoding(data)
        shown = _clip(name) if name is not None else "its"
        raise DhikError(source, f"cannot read: encoding {shown} is not supported (URDF "
                                "files are UTF-8; UTF-16 and single-byte encodings are "
                                "read too)") from None
    return builder.close()


# --------------------------------------------------------------------------- attributes


def _numbers(text: str | None, n: int, default: tuple[float, ...], source: str, where: str,
             ) -> tuple[float, ...]:
    """``n`` finite XML Schema decimals (ASCII digits) separated by XML white space;
    ``default`` when the attribute is absent."""
    if text is None:
        return default
    parts = text.split(None) if text.isascii() else text.split(" ")
    try:
        values = tuple(float(parse_decimal(p)) for p in parts)
    except ValueError:
        values = ()
    if len(values) != n or not all(math.isfinite(v) for v in values):
        shape = "a finite decimal number" if n == 1 else f"{n} finite decimal numbers"
        raise DhikError(source, where, f"must be {shape} (ASCII digits), got {_clip(text)}")
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
    where = f"joint[name={_short(name)}]"
    jtype = el.get("type")
    if jtype != "fixed" and jtype not in MOVING_TYPES and jtype not in FREE_TYPES:
        raise DhikError(source, where, f"unknown joint type {_clip(str(jtype))}; expected "
                                       "revolute, continuous, prismatic, fixed, floating or "
                                       "planar")
    parent = _link_attr(el, "parent", source, where)
    child = _link_attr(el, "child", source, where)
    for role, link in (("parent", parent), ("child", child)):
        if link not in links:
            raise DhikError(source, where, f"{role} link {_clip(link)} is not a <link> of the "
                                           "robot")
    if parent == child:
        raise DhikError(source, where, f"link {_clip(child)} is its own parent (a cycle)")
    origin = el.find("origin")
    xyz: tuple[float, ...] = (0.0, 0.0, 0.0)
    rpy: tuple[float, ...] = (0.0, 0.0, 0.0)
    if origin is not None:
        xyz = _numbers(origin.get("xyz"), 3, xyz, source, f"{where}.origin.xyz")
        rpy = _numbers(origin.get("rpy"), 3, rpy, source, f"{where}.origin.rpy")
        if max(map(abs, xyz)) > MAX_LENGTH:
            raise DhikError(source, f"{where}.origin.xyz", f"must be within +-{MAX_LENGTH:g} m, "
                                                           f"got {_clip(origin.get('xyz', ''))}")
    axis: tuple[float, ...] = (1.0, 0.0, 0.0)
    limits: tuple[float, float] | None = None
    if jtype == "floating":
        return _Joint(name, jtype, parent, child, xyz, rpy, axis, None)
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
                f"{source}: {where}: mimics joint {_clip(mimic.get('joint', ''))} (multiplier "
                f"{_clip(mimic.get('multiplier', '1'))[1:-1]}, offset "
                f"{_clip(mimic.get('offset', '0'))[1:-1]}); imported as an independent "
                f"{jtype} joint (skeleton.json cannot couple joints)")
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
            raise DhikError(source, f"link[name={_short(name)}]", "a second link with this name")
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
            raise DhikError(source, f"joint[name={_short(j.name)}]",
                            "a second joint with this name")
        names.add(j.name)
        if j.child in parent_joint:
            raise DhikError(source, f"joint[name={_short(j.name)}]",
                            f"link {_clip(j.child)} is already the child of joint "
                            f"{_clip(parent_joint[j.child].name)} (a link has one parent)")
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
        if len(out) > MAX_JOINTS:
            raise DhikError(source, "robot", f"more than {MAX_JOINTS:,} skeleton joints: a "
                                             f"skeleton holds at most {MAX_JOINTS:,}")
    unreached = [j for j in joints if j.child not in skeleton_joint]
    if unreached:
        raise DhikError(source, f"joint[name={unreached[0].name}]",
                        f"is on a cycle not connected to the root link {root_link!r}")
    try:
        defn = parse_skeleton({"root_name": root_name, "joints": out}, source)
    except DhikError as err:  # a check the URDF's own did not make: said in URDF terms
        problem = err.problem
        index = err.path.split("]")[0].removeprefix("joints[")
        if index.isdigit() and int(index) < len(out):
            skeleton_name = out[int(index)]["name"]
            urdf_name = next((j.name for j in joints if skeleton_name in (
                j.name, j.name + ORIGIN_SUFFIX, *(j.name + s for s in FREE_SUFFIXES))),
                skeleton_name)
            raise DhikError(source, f"joint[name={urdf_name}]", problem) from None
        raise DhikError(source, "robot", problem) from None
    return UrdfSkeleton(defn, warnings)


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
    if j.type in FREE_TYPES:
        axes = _free_axes(j)
        for suffix, axis in zip(FREE_SUFFIXES, axes[:-1], strict=False):
            name = _unique(j.name + suffix, taken)
            entries.append({"name": name, "type": "prismatic", "parent": parent,
                            "offset": offset, "axis": axis, "limits": None})
            parent, offset = name, [0.0, 0.0, 0.0]
        last = ({"type": "spherical", "limits": None} if j.type == "floating" else
                {"type": "revolute", "axis": axes[-1], "limits": None})
        entries.append({"name": j.name, "parent": parent, "offset": offset, **last})
        return entries
    entries.append({"name": j.name, "type": MOVING_TYPES[j.type], "parent": parent,
                    "offset": offset, "axis": list(j.axis), "limits":
                    None if j.limits is None else list(j.limits)})
    return entries


def _free_axes(j: _Joint) -> list[list[float]]:
    """The prismatic axes of a free joint, in its joint frame, and last the axis of its
    rotation (planar; unused for floating): x, y, z and z, or u, v and n (planar)."""
    if j.type == "floating":
        return [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    norm = math.hypot(*j.axis)
    n = [a / norm for a in j.axis]
    k = min(range(3), key=lambda i: abs(n[i]))  # the coordinate axis least like n
    e = [1.0 if i == k else 0.0 for i in range(3)]
    dot = sum(a * b for a, b in zip(e, n, strict=True))
    u = [a - dot * b for a, b in zip(e, n, strict=True)]
    length = math.hypot(*u)
    u = [a / length for a in u]
    v = [n[1] * u[2] - n[2] * u[1], n[2] * u[0] - n[0] * u[2], n[0] * u[1] - n[1] * u[0]]
    return [u, v, n]


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
