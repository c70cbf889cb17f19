"""The core's layers (SPEC 2): imports point down only, and no module imports another's
private names. solver/ <- model/ <- app/; errors, rotations and floatmath sit below all.
Function-level imports count; imports under ``if TYPE_CHECKING`` count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "core"
RANK = {"errors": 0, "rotations": 0, "floatmath": 0, "solver": 1, "model": 2, "app": 3}
FORBIDDEN = {"bpy", "mathutils", "scipy", "dhik_addon"}


def _layer(parts: tuple[str, ...]) -> str:
    return parts[0] if parts else ""


def _imports(path: Path) -> list[tuple[tuple[str, ...], list[str], int]]:
    """(imported module as parts below core/, imported names, line) per import."""
    rel = path.relative_to(CORE).with_suffix("").parts
    package = rel[:-1] if rel[-1] != "__init__" else rel[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.append((("<abs>", *(node.module or "").split(".")), [], node.lineno))
                continue
            base = package[: len(package) - node.level + 1]
            mod = (*base, *(node.module.split(".") if node.module else ()))
            out.append((mod, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            for a in node.names:
                out.append((("<abs>", *a.name.split(".")), [], node.lineno))
    return out


MODULES = sorted(p for p in CORE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(CORE)))
def test_imports_point_down_only(path: Path) -> None:
    here = path.relative_to(CORE).parts
    rank = RANK.get(_layer(here[:-1]) if len(here) > 1 else here[0].removesuffix(".py"), 4)
    for mod, names, line in _imports(path):
        if not mod:
            continue  # ``from .. import __version__``: the package itself
        if mod[0] == "<abs>":
            assert mod[1] not in FORBIDDEN, f"{path.name}:{line} imports {mod[1]}"
            continue
        target = _layer(mod)
        assert RANK.get(target, 0) <= rank, f"{'/'.join(here)}:{line} imports up into {target}/"
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        assert not private, f"{'/'.join(here)}:{line} imports private {private}"


def test_no_import_cycle_between_modules() -> None:
    """No module reaches itself through imports, function-level ones included (``from
    .cli import say`` in batch.py closed cli -> batch -> cli): one-way layers within a
    layer too. A package's ``__init__`` counts as the modules it names."""
    def key(parts: tuple[str, ...]) -> tuple[str, ...]:
        return parts[:-1] if parts and parts[-1] == "__init__" else parts

    known = {key(p.relative_to(CORE).with_suffix("").parts): p for p in MODULES}
    edges: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in known}
    for mod, path in known.items():
        for target, names, _ in _imports(path):
            if not target or target[0] == "<abs>":
                continue
            for t in (target, *((*target, n) for n in names)):
                if t in known and t != mod:
                    edges[mod].add(t)
    state: dict[tuple[str, ...], int] = {}  # 1: on the walk, 2: done

    def walk(mod: tuple[str, ...], trail: list[tuple[str, ...]]) -> None:
        state[mod] = 1
        for t in sorted(edges[mod]):
            if state.get(t) == 1:
                cycle = [*trail[trail.index(t):], t] if t in trail else [mod, t]
                raise AssertionError(" -> ".join(".".join(m) for m in cycle))
            if t not in state:
                walk(t, [*trail, t])
        state[mod] = 2

    for mod in sorted(known):
        if mod not in state:
            walk(mod, [mod])


def test_the_walker_resolves_relative_imports() -> None:
    """``from .settings`` in solver/ is solver.settings, ``from ..rotations`` is rotations,
    and in model/ ``from ..solver.joints`` is solver.joints: the check sees real targets."""
    dls = [m for m, _, _ in _imports(CORE / "solver" / "dls.py")]
    assert ("solver", "settings") in dls and ("rotations",) in dls
    sk = [m for m, _, _ in _imports(CORE / "model" / "skeleton.py")]
    assert ("solver", "joints") in sk and ("model", "definition") in sk


def test_every_package_folder_is_found_for_the_wheel(monkeypatch) -> None:
    """setup.py lists every folder of core/ that holds an ``__init__.py`` (a package left
    out is missing from a ``pip install .``, not from an editable install;
    tests/install/test_install.py builds the wheel itself). setup.py is run here with
    ``setuptools.setup`` caught, from the repository root as pip runs it."""
    import runpy

    import setuptools

    given: dict = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kw: given.update(kw))
    monkeypatch.chdir(CORE.parent)
    runpy.run_path(str(CORE.parent / "setup.py"))
    found = set(given["packages"])
    folders = {".".join(("dhik", *p.parent.relative_to(CORE).parts))
               for p in CORE.rglob("__init__.py")}
    assert folders == found and {"dhik.solver.lm", "dhik.solver.path"} <= found
