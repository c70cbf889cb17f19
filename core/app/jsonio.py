"""JSON files: strict reading (one DhikError per fault) and atomic writing; `say`, the
one writer of a command's result on stdout."""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TextIO

import numpy as np

from ..errors import DhikError
from .filesets import fsync_folder, read_file

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def fail(source: str, path: str, problem: str) -> NoReturn:
    raise DhikError.at(source, path, problem)


_DECIMAL = {int: re.compile(r"[+-]?[0-9]+"),
            float: re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")}


def parse_decimal(text: str, kind: type = float) -> Any:
    """``text`` as an int or float written in ASCII decimal digits only (``1.5e-3``, ``-2``;
    as URDF and XML Schema write numbers): ValueError for anything else, although Python
    reads them: ``1_000``, Arabic-Indic or fullwidth digits, ``inf``, ``nan``, spaces."""
    if not isinstance(text, str) or not _DECIMAL[kind].fullmatch(text):
        raise ValueError(f"not a decimal number: {text!r}")
    return kind(text)


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def one_line(text: str) -> str:
    """``text`` as one printable line: line breaks and other control characters (an ESC
    sequence too), and lone surrogates (which no encoding can print), as backslash
    escapes."""
    return _UNPRINTABLE.sub(lambda m: m[0].encode("unicode_escape", "backslashreplace")
                            .decode("ascii"), text)


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


class _NotJson(ValueError):
    """NaN, Infinity or -Infinity: Python's json module reads them, JSON has none."""


# the first NaN/Infinity outside a string (strings are matched whole and skipped)
_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def _not_json(name: str) -> Any:
    raise _NotJson(name)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def load_json(path: str | os.PathLike) -> Any:
    """Read a UTF-8 JSON file (a BOM is allowed); DhikError if unreadable or invalid.

    The file is read whole by :func:`.filesets.read_file`, so a bake that records its
    reads knows the bytes it parsed."""
    source = str(path)
    try:
        text = read_file(path).decode("utf-8-sig")
    except OSError as exc:
        fail(source, "", f"cannot read: {_reason(exc)}")
    except UnicodeDecodeError:
        fail(source, "", "cannot read: not UTF-8 text")
    if "\r" in text:  # as text mode read it: universal newlines
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys,
                          parse_constant=_not_json)
    except _NotJson as exc:
        at = next((m.start(1) for m in _CONSTANT.finditer(text) if m[1]), 0)
        line = text.count("\n", 0, at) + 1
        column = at - text.rfind("\n", 0, at)
        fail(source, "", f"invalid JSON at line {line}, column {column}: {exc.args[0]} is not "
                         "a JSON number")
    except json.JSONDecodeError as exc:
        fail(source, "", f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}")
    except _DuplicateKey as exc:
        fail(source, "", f"invalid JSON: duplicate key {show(exc.args[0])} in one object")
    except (ValueError, RecursionError) as exc:
        fail(source, "", f"invalid JSON: {exc}")


_SURROGATE = re.compile("[\ud800-\udfff]")
# an array of scalars as json.dumps(indent=2) lays it out: one item per line. JSON strings
# never hold a raw newline, so "[\n" cannot start inside one.
_SCALAR = r'(?:"(?:[^"\\\n]|\\.)*"|[-+.\w]+)'
_SCALAR_ARRAY = re.compile(r"\[\n[ ]*(" + _SCALAR + r"(?:,\n[ ]*" + _SCALAR + r")*)\n[ ]*\]")
_ITEM_BREAK = re.compile(r",\n[ ]*")


def json_string(text: str) -> str:
    """``text`` as a JSON string literal: UTF-8 as is, but a lone surrogate (which UTF-8
    cannot hold) escaped as ``\\udXXX`` (json.loads reads it back as the same string)."""
    return json.dumps(text, ensure_ascii=_SURROGATE.search(text) is not None)


def _plain(value: Any) -> Any:
    """json.dumps' ``default``: numpy arrays and scalars as Python lists and numbers."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot save a {type(value).__name__} as JSON")


def _first_non_finite(value: Any, path: str) -> tuple[str, Any] | None:
    """The JSON path and value of the first NaN or infinity in ``value`` (a slow walk, run
    only to name the culprit once the fast encoder refused); iterative, any depth."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, (np.ndarray, np.generic)):
            item = _plain(item)
        if isinstance(item, Mapping):
            stack.extend(reversed([(key_path(where, str(k)), v) for k, v in item.items()]))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed([(f"{where}[{i}]", v) for i, v in enumerate(item)]))
        elif isinstance(item, float) and not math.isfinite(item):
            return where, item
    return None


def dumps_json(data: Any, source: str) -> str:
    """``data`` as JSON text: 2-space indent, arrays of scalars on one line, UTF-8 (a lone
    surrogate escaped); the standard library's C encoder does the work.

    DhikError naming the JSON path on NaN or infinity (JSON has neither): nothing written.
    numpy scalars and arrays are accepted. The layout is the one this module always wrote.
    """
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False, default=_plain)
    except ValueError:
        found = _first_non_finite(data, "")
        if found is None:
            raise
        fail(source, found[0], f"cannot save a non-finite number ({show(found[1])})")
    except RecursionError:
        fail(source, "", "cannot save: nested too deeply")
    if _SURROGATE.search(text):
        text = json.dumps(data, indent=2, ensure_ascii=True, allow_nan=False, default=_plain)
    return _SCALAR_ARRAY.sub(lambda m: "[" + _ITEM_BREAK.sub(", ", m[1]) + "]", text)


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def check_writable(path: str | os.PathLike) -> None:
    """DhikError unless ``path`` can be written: its folder exists and is writable, and it
    is not a folder (an existing non-regular file such as /dev/null is written into).

    Run before a long computation, so that a bad output fails before anything is written.
    """
    source = str(path)
    target = os.path.abspath(path)
    if os.path.isdir(target):
        fail(source, "", "cannot write: is a folder")
    if os.path.exists(target) and not os.path.isfile(target):
        if not os.access(target, os.W_OK):
            fail(source, "", "cannot write: permission denied")
        return
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        fail(source, "", f"cannot write: no folder {directory}")
    if not os.access(directory, os.W_OK | os.X_OK):
        fail(source, "", f"cannot write: the folder {directory} is not writable")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist (yet): compare where the paths lead
        return os.path.realpath(a) == os.path.realpath(b)


def check_not_inputs(outputs: Sequence[str | os.PathLike | None],
                     inputs: Sequence[str | os.PathLike | None]) -> None:
    """DhikError when an output (None: not asked for) is one of the input files (the
    same file by any path, a symlink too): writing it would replace an input."""
    sources = [str(i) for i in inputs if i is not None]
    for out in (str(o) for o in outputs if o is not None):
        for src in sources:
            if _same_file(out, src):
                fail(out, "", f"cannot write: it is an input file ({src})")


def check_outputs(outputs: Sequence[str | os.PathLike | None],
                  inputs: Sequence[str | os.PathLike | None]) -> None:
    """DhikError unless every output (None: not asked for) can be written
    (:func:`check_writable`), is none of the input files and differs from the others.

    Run before reading or solving anything: a bad output then costs nothing and never
    replaces an input (``-o skeleton.json``).
    """
    given = [str(o) for o in outputs if o is not None]
    check_not_inputs(given, inputs)
    for k, out in enumerate(given):
        for other in given[:k]:
            if _same_file(out, other):
                fail(out, "", f"cannot write: {other} is written to the same file")
        check_writable(out)


def atomic_write_text(path: str | os.PathLike, write: Callable[[TextIO], object]) -> None:
    """Let ``write`` write UTF-8 text to ``path``, atomically.

    The text goes to a temporary file in the same folder, is fsync'ed and renamed over
    ``path``: an error, KeyboardInterrupt (the CLI turns SIGTERM into one) or crash never
    leaves a half file, nor a temporary file. An existing ``path`` that is not a regular
    file (a device such as /dev/null, a FIFO) is written into, never replaced.
    """
    source = str(path)
    target = os.path.abspath(path)
    try:
        info = os.stat(target)
    except OSError:
        info = None
    if info is not None and stat.S_ISDIR(info.st_mode):
        fail(source, "", "cannot write: is a folder")
    if info is not None and not stat.S_ISREG(info.st_mode):
        try:
            with open(target, "w", encoding="utf-8", newline="\n") as f:
                write(f)
        except OSError as exc:
            fail(source, "", f"cannot write: {_reason(exc)}")
        return
    directory = os.path.dirname(target)
    mode = stat.S_IMODE(info.st_mode) if info is not None else _new_file_mode()
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory
        )
    except OSError as exc:
        fail(source, "", f"cannot write: {_reason(exc)}")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            write(f)
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
    fsync_folder(directory)  # make the rename itself durable (POSIX)


def atomic_write_json(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as JSON (:func:`dumps_json`) to ``path`` atomically.

    The text is built first (NaN/inf raise DhikError naming the JSON path, and nothing is
    written), then written by :func:`atomic_write_text`.
    """
    text = dumps_json(data, str(path)) + "\n"
    atomic_write_text(path, lambda f: f.write(text))


# --------------------------------------------------------------------------- skeleton.json


def say(text: str) -> None:
    """One line of the command's result on stdout, printable (:func:`.jsonio.one_line`);
    DhikError naming stdout when it cannot be written (``> /dev/full``, a closed pipe)."""
    try:
        if sys.stdout is None:
            raise OSError("stdout is closed")
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except (OSError, ValueError) as err:  # ValueError: a closed file object
        _drop_stdout()
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise DhikError("stdout", f"cannot write: {reason}") from None


def _drop_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so that the interpreter's last flush of what
    could not be written does not fail again at exit."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.close(fd)
    except OSError:
        pass
