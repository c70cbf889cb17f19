"""The checks every dhik file's fields go through: one ``DhikError`` per fault, naming
the file and the JSON path (``skeleton.json: joints[3].axis: ...``), and the bounds
they keep (frames, lengths, joints). Metres and radians; quaternions ``[w, x, y, z]``."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..model.definition import Range, Vec3
from .jsonio import fail, key_path, kind_of, show

PLAIN_NUMBERS = {float, int, np.float64}

UNIT_TOLERANCE = 1e-12
#: The last frame a targets.json or animation.json may name: Blender's last frame
#: (MAXFRAME). Every frame from 0 to the last keyframe is baked, so this also bounds a bake.
MAX_FRAME = 1_048_574
#: The largest offset component (skeleton.json) and target position component
#: (targets.json), metres: beyond it, squared lengths in the solvers and FK overflow.
MAX_LENGTH = 1e9
#: The most joints a skeleton.json may hold. A chain of 8,000 revolute joints takes about
#: 30 s to bake 3 frames on a 2-core machine (0.6 GB), 16,000 a minute (1.1 GB); far
#: beyond any rig or robot (a Blender face rig has a few hundred bones).
MAX_JOINTS = 10_000




def is_array(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, (list, tuple))


def required(obj: Mapping, key: str, source: str, path: str) -> Any:
    if key not in obj:
        fail(source, key_path(path, key), "required field is missing")
    return obj[key]


def object(value: Any, source: str, path: str, what: str = "an object") -> Mapping:
    if not isinstance(value, Mapping):
        fail(source, path, f"must be {what}, got {kind_of(value)}")
    return value


def number(value: Any, source: str, path: str) -> float:
    """A finite JSON number (booleans are not numbers) as a float."""
    if type(value) is float and math.isfinite(value):  # most of them: at once
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        fail(source, path, f"must be a number, got {show(value)}")
    try:
        x = float(value)
    except OverflowError:
        x = math.inf
    if not math.isfinite(x):
        fail(source, path, f"must be a finite number, got {show(value)}")
    return x


def frame_number(value: Any, source: str, path: str) -> int:
    """A frame: an integer from 0 to MAX_FRAME (3.0 and true are not integers)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 0:
        fail(source, path, f"must be an integer >= 0, got {show(value)}")
    if int(value) > MAX_FRAME:
        fail(source, path, f"must be at most {MAX_FRAME} (Blender's last frame), got {value}")
    return int(value)


def name(value: Any, source: str, path: str) -> str:
    """A joint name: a non-empty string without NUL (C strings, Blender's bone names and
    numpy's string arrays end at NUL: two names would silently become one)."""
    if not isinstance(value, str) or not value:
        fail(source, path, f"must be a non-empty string, got {show(value)}")
    if "\0" in value:
        fail(source, path, f"must not hold a NUL character, got {show(value)}")
    return value


def joint_type(value: Any, allowed: tuple[str, ...], source: str, path: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        expected = ", ".join(f'"{t}"' for t in allowed)
        problem = f"unknown joint type {show(value)}; expected one of {expected}"
        fail(source, f"{path}.type", problem)
    return value


def number_list(value: Any, n: int, source: str, path: str, shape: str) -> tuple[float, ...]:
    """``n`` finite numbers; ``shape`` describes the expected value in messages."""
    if not is_array(value) or len(value) != n:
        fail(source, path, f"must be {shape}, got {show(value)}")
    return tuple(x if type(x) is float and math.isfinite(x)  # most: no message built
                 else number(x, source, f"{path}[{i}]") for i, x in enumerate(value))


def vec3(value: Any, source: str, path: str) -> Vec3:
    return number_list(value, 3, source, path, "an array of 3 numbers")  # type: ignore[return-value]


def length3(value: Any, source: str, path: str) -> Vec3:
    """A 3-vector of lengths (m), each within +-MAX_LENGTH."""
    v = vec3(value, source, path)
    for i, x in enumerate(v):
        if abs(x) > MAX_LENGTH:
            fail(source, f"{path}[{i}]", f"must be within +-{MAX_LENGTH:g} m, got {show(x)}")
    return v


def normalised(v: tuple[float, ...]) -> tuple[float, ...] | None:
    """``v`` scaled to unit length (kept if already unit), None if zero."""
    norm = math.hypot(*v)
    if norm == 0.0 or not math.isfinite(norm):
        return None
    if abs(norm - 1.0) <= UNIT_TOLERANCE:
        return v
    return tuple(x / norm for x in v)


def axis(value: Any, source: str, path: str) -> Vec3:
    shape = "a non-zero 3-vector"
    unit = normalised(number_list(value, 3, source, path, shape))
    if unit is None:
        fail(source, path, f"must be {shape}")
    return unit  # type: ignore[return-value]


def quaternion(value: Any, source: str, path: str, normalise: bool) -> tuple[float, ...]:
    shape = "a non-zero quaternion [w, x, y, z]"
    q = number_list(value, 4, source, path, shape)
    unit = normalised(q)
    if unit is None:
        fail(source, path, f"must be {shape}")
    return unit if normalise else q


def range(value: Any, source: str, path: str) -> Range:
    """``[min, max]`` with min <= max (equal bounds lock the joint)."""
    lo, hi = number_list(value, 2, source, path, "null or [min, max]")
    if lo > hi:
        fail(source, path, f"min {show(value[0])} is greater than max {show(value[1])}")
    return (lo + 0.0, hi + 0.0)  # -0.0 as 0.0: [0.0, -0.0] is the locked range [0, 0]


def limits(value: Any, joint_type: str, source: str, path: str):
    if value is None or joint_type == "fixed":
        return None
    if joint_type != "spherical":
        return range(value, source, path)
    if not is_array(value) or len(value) != 3:
        fail(
            source,
            path,
            f"must be null or an array of 3 items, each [min, max] or null, got {show(value)}",
        )
    return tuple(
        None if v is None else range(v, source, f"{path}[{i}]") for i, v in enumerate(value)
    )


# --------------------------------------------------------------------------- JSON files
