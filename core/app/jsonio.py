"""JSON files: strict reading (one DhikError per fault) and atomic writing."""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import stat
import tempfile
from collections.abc import Mapping
from typing import Any, NoReturn

import numpy as np

from ..errors import DhikError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def fail(source: str, path: str, problem: str) -> NoReturn:
    raise DhikError.at(source, path, problem)


def show(value: Any) -> str:
    """The value as JSON text (``NaN``, ``true``, ``"abc"``), shortened for messages."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def kind_of(value: Any) -> str:
    """The JSON type name of a parsed value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, numbers.Number):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def key_path(path: str, key: str) -> str:
    """JSON path of ``key`` inside the object at ``path``: ``a.b`` or ``a["b.001"]``."""
    if _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    result: dict = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def load_json(path: str | os.PathLike) -> Any:
    """Read a UTF-8 JSON file (a BOM is allowed); DhikError if unreadable or invalid."""
    source = str(path)
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read()
    except OSError as exc:
        fail(source, "", f"cannot read: {_reason(exc)}")
    except UnicodeDecodeError:
        fail(source, "", "cannot read: not UTF-8 text")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        fail(source, "", f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}")
    except _DuplicateKey as exc:
        fail(source, "", f"invalid JSON: duplicate key {show(exc.args[0])} in one object")
    except (ValueError, RecursionError) as exc:
        fail(source, "", f"invalid JSON: {exc}")


def _dumps(value: Any, source: str, path: str, level: int) -> str:
    """JSON text, 2-space indent, arrays of scalars on one line; DhikError on NaN/inf."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    pad, inner = "  " * level, "  " * (level + 1)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, got {key!r}")
            text = _dumps(item, source, key_path(path, key), level + 1)
            items.append(f"{inner}{json.dumps(key, ensure_ascii=False)}: {text}")
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, (list, tuple)):
        parts = [_dumps(v, source, f"{path}[{i}]", level + 1) for i, v in enumerate(value)]
        if all(not isinstance(v, (Mapping, list, tuple, np.ndarray)) for v in value):
            return "[" + ", ".join(parts) + "]"
        return "[\n" + ",\n".join(inner + p for p in parts) + "\n" + pad + "]"
    if isinstance(value, float) and not math.isfinite(value):
        fail(source, path, f"cannot save a non-finite number ({show(value)})")
    if value is None or isinstance(value, (bool, int, float, str)):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"{source}: {path}: cannot save a {type(value).__name__} as JSON")


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_json(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically.

    The text is built first (NaN/inf raise DhikError naming the JSON path, and
    nothing is written), then written to a temporary file in the same
    directory, fsync'ed and renamed over ``path``: a crash or error never leaves
    a half file, and never a temporary file. numpy scalars and arrays are accepted.
    """
    source = str(path)
    text = _dumps(data, source, "", 0) + "\n"
    target = os.path.abspath(path)
    directory = os.path.dirname(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = _new_file_mode()
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory
        )
    except OSError as exc:
        fail(source, "", f"cannot write: {_reason(exc)}")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            fail(source, "", f"cannot write: {_reason(exc)}")
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX)
        try:
            dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        except OSError:
            pass
        finally:
            os.close(dfd)


# --------------------------------------------------------------------------- skeleton.json


