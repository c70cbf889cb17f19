"""``dhik bake-many``'s jobs: from a folder of clip folders or a ``jobs.json`` manifest.

JOBS is a folder (each sub-folder holding ``skeleton.json`` and ``targets.json``, or
``targets_<EFFECTOR>.json`` files for several effectors, is a job named after the
sub-folder) or a ``jobs.json`` manifest::

    {"jobs": [{"name": "walk", "skeleton": "rig/skeleton.json",
               "targets": "walk/targets.json" | {"EFFECTOR": "path"
                                                 | {"file": "path", "weights": [pos, rot]}},
               "effector": "optional, with a single targets file",
               "options": {"max-iterations": 50, "cold-start": true, ...}}]}

with paths relative to the manifest and the options of ``dhik bake`` by their long name
without the dashes (an option that ``dhik bake`` repeats per effector takes an array;
the file of ``driven`` is an input of the job, like the skeleton and targets). Options
are checked as ``dhik bake`` checks them, together too (a spec-only option with the
robust method is refused). Every path is made absolute: on a cluster the workers must
see the same files at the same paths (a shared file system).

A sub-folder that cannot be read (a symlink loop, no permission) is a job that fails with
that error; the other jobs go on. A job name must be a folder name this file system can
hold (a lone surrogate cannot be).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NoReturn

from .. import __version__
from ..errors import DhikError
from .bakejob import BAKE_OPTIONS, BakeOptions, TrackSpec, add_bake_options
from .jsonio import fail, key_path, kind_of, load_json, show

CLIP_FILES = ("skeleton.json", "targets.json")


@dataclass(frozen=True)
class Job:
    """One clip to bake: absolute input paths, tracks and options.

    ``error`` is a problem found while discovering the job (a folder without targets):
    the job fails with it without running. ``force`` bakes it even when it is up to
    date; ``run`` names the run baking it (neither is part of what it was baked from).
    """

    name: str
    skeleton: str
    targets: str | None = None
    effector: str | None = None
    tracks: tuple[TrackSpec, ...] = ()
    options: BakeOptions = field(default_factory=BakeOptions)
    error: str | None = None
    force: bool = False
    run: str = ""  # the bake-many run that handed it out (its marker says so)

    def inputs(self) -> list[str]:
        return [self.skeleton] + ([self.targets] if self.targets else []) + [
            t.path for t in self.tracks] + ([self.options.driven] if self.options.driven else [])

    def fingerprint(self) -> dict[str, Any]:
        """What the outputs were baked from (JSON); a change re-bakes the job."""
        return {
            "dhik": __version__,
            "skeleton": self.skeleton,
            "targets": self.targets,
            "effector": self.effector,
            "tracks": [[t.effector, t.path, t.pos_weight, t.rot_weight] for t in self.tracks],
            "options": asdict(self.options),
        }


def discover(jobs_path: str, fmt: str | None = None, fps: float | None = None) -> list[Job]:
    """The jobs of a folder of clip folders or of a jobs.json manifest (DhikError if bad).

    ``fmt`` and ``fps`` (``bake-many --format``, ``--fps``) are every job's unless a
    manifest job gives its own."""
    if os.path.isdir(jobs_path):
        jobs = folder_jobs(jobs_path, BakeOptions(fps=fps, format=fmt))
        clash = jobs[0].options.problem()
        if clash is not None:
            raise DhikError(f"{clash[0]}: {clash[1]}")
        return jobs
    return manifest_jobs(jobs_path, fmt, fps)


def folder_jobs(root: str, options: BakeOptions | None = None) -> list[Job]:
    """One job per sub-folder that holds skeleton.json or targets files (sorted by name)."""
    base = os.path.abspath(root)
    options = options or BakeOptions()
    jobs = []
    for entry in sorted(os.scandir(base), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        where = os.path.join(root, entry.name)
        try:
            if not entry.is_dir():
                continue
            names = set(os.listdir(entry.path))
        except OSError as err:  # a symlink loop, a folder we may not read
            jobs.append(Job(entry.name, os.path.join(entry.path, "skeleton.json"),
                            options=options, error=f"{where}: cannot read: "
                                                   f"{err.strerror or err}"))
            continue
        per_effector = sorted(n for n in names if n.startswith("targets_")
                              and n.endswith(".json") and len(n) > len("targets_.json"))
        single = "targets.json" in names
        if "skeleton.json" not in names and not single and not per_effector:
            continue  # not a clip folder
        error = None
        if "skeleton.json" not in names:
            error = f"{where}: no skeleton.json"
        elif single and per_effector:
            error = f"{where}: holds targets.json and targets_<EFFECTOR>.json files: keep one kind"
        elif not single and not per_effector:
            error = f"{where}: no targets.json or targets_<EFFECTOR>.json"
        tracks = tuple(TrackSpec(n[len("targets_"):-len(".json")], os.path.join(entry.path, n))
                       for n in per_effector)
        jobs.append(Job(entry.name, os.path.join(entry.path, "skeleton.json"),
                        os.path.join(entry.path, "targets.json") if single else None,
                        None, () if single else tracks, options, error))
    if not jobs:
        raise DhikError(root, "no jobs: no sub-folder holds skeleton.json and targets.json "
                              "(or targets_<EFFECTOR>.json files)")
    return jobs


_JOB_KEYS = ("name", "skeleton", "targets", "effector", "options")


def manifest_jobs(path: str, fmt: str | None = None, fps: float | None = None) -> list[Job]:
    """The jobs of a jobs.json manifest; paths in it are relative to its folder."""
    src = str(path)
    data = load_json(path)
    base = os.path.dirname(os.path.abspath(path))
    if not isinstance(data, Mapping) or "jobs" not in data:
        fail(src, "", 'must be an object with a "jobs" array (or give a folder of clip folders)')
    for key in data:
        if key != "jobs":
            fail(src, key_path("", key), 'unknown key: a manifest holds only "jobs"')
    items = data["jobs"]
    if not isinstance(items, list) or not items:
        fail(src, "jobs", f"must be a non-empty array of jobs, got {show(items)}")
    jobs: list[Job] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        jobs.append(_manifest_job(item, src, f"jobs[{i}]", base, seen, fmt, fps))
    return jobs


def _folder_name(name: str, src: str, p: str) -> None:
    """DhikError unless ``name`` is one folder name this file system can hold."""
    if name in (".", "..") or name.startswith(".") or any(c in name for c in "/\\\0"):
        fail(src, p, f"must be a folder name (no '/', not starting with '.'): {show(name)}")
    try:
        os.fsencode(name)
    except UnicodeError:
        shown = json.dumps(name)
        fail(src, p, f"{shown} cannot be a folder name on this file system (a lone surrogate)")


def _manifest_job(item: Any, src: str, p: str, base: str, seen: set[str],
                  fmt: str | None, fps: float | None) -> Job:
    if not isinstance(item, Mapping):
        fail(src, p, f"must be an object, got {kind_of(item)}")
    for key in item:
        if key not in _JOB_KEYS:
            fail(src, key_path(p, key), f"unknown key (a job has {', '.join(_JOB_KEYS)})")
    for key in ("name", "skeleton", "targets"):
        if key not in item:
            fail(src, p, f'missing "{key}"')
    name = _string(item["name"], src, f"{p}.name")
    _folder_name(name, src, f"{p}.name")
    if name in seen:
        fail(src, f"{p}.name", f"two jobs are named {show(name)}")
    seen.add(name)
    skeleton = os.path.join(base, _string(item["skeleton"], src, f"{p}.skeleton"))
    effector = None
    if item.get("effector") is not None:
        effector = _string(item["effector"], src, f"{p}.effector")
    raw = item["targets"]
    targets: str | None = None
    tracks: tuple[TrackSpec, ...] = ()
    if isinstance(raw, str):
        targets = os.path.join(base, _string(raw, src, f"{p}.targets"))
    elif isinstance(raw, Mapping) and raw:
        if effector is not None:
            fail(src, f"{p}.effector", "goes with a single targets file; with several, the "
                                       "targets object names the effectors")
        tracks = tuple(_track(k, v, src, key_path(f"{p}.targets", k), base)
                       for k, v in raw.items())
    else:
        fail(src, f"{p}.targets", "must be a path or a non-empty object {EFFECTOR: path "
                                  f'or {{"file": path, "weights": [pos, rot]}}}}, got {show(raw)}')
    options = _options(item.get("options", {}), src, f"{p}.options", base)
    options = replace(options, format=options.format if options.format is not None else fmt,
                      fps=options.fps if options.fps is not None else fps)
    clash = options.problem()
    if clash is not None:
        fail(src, key_path(f"{p}.options", clash[0].split()[0][2:]), clash[1])
    return Job(name, skeleton, targets, effector, tracks, options)


def _string(value: Any, src: str, p: str) -> str:
    if not isinstance(value, str) or not value:
        fail(src, p, f"must be a non-empty string, got {show(value)}")
    return value


def _track(effector: str, value: Any, src: str, p: str, base: str) -> TrackSpec:
    if not effector:
        fail(src, p, "the effector name must not be empty")
    if isinstance(value, str):
        return TrackSpec(effector, os.path.join(base, _string(value, src, p)))
    if not isinstance(value, Mapping):
        fail(src, p, f'must be a path or {{"file": path, "weights": [pos, rot]}}, '
                     f"got {show(value)}")
    for key in value:
        if key not in ("file", "weights"):
            fail(src, key_path(p, key), 'unknown key (an effector has "file" and "weights")')
    if "file" not in value:
        fail(src, p, 'missing "file"')
    path = os.path.join(base, _string(value["file"], src, f"{p}.file"))
    w = value.get("weights", [1.0, 1.0])
    ok = (isinstance(w, list) and len(w) == 2
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in w)
          and all(0 <= x < float("inf") for x in w) and max(w) > 0)
    if not ok:
        fail(src, f"{p}.weights", f"must be [pos, rot], numbers >= 0 and not both 0, "
                                  f"got {show(w)}")
    return TrackSpec(effector, path, float(w[0]), float(w[1]))


class _OptionError(Exception):
    pass


class _OptionParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _OptionError(message)


_FLAGS = {flag[2:] for flag, kw in BAKE_OPTIONS if kw.get("action") == "store_true"}
_REPEATED = {flag[2:] for flag, kw in BAKE_OPTIONS if kw.get("action") == "append"}
_VALUES = {flag[2:] for flag, kw in BAKE_OPTIONS} - _FLAGS
_PATHS = {"driven"}  # options naming a file: relative to the manifest, inputs of the job


def _options(value: Any, src: str, p: str, base: str) -> BakeOptions:
    """A job's options, checked exactly as ``dhik bake`` checks its command line.

    An option that ``dhik bake`` takes once per effector (``chain-length``, ``pole``)
    takes a value or an array of values; file options are relative to ``base``.
    """
    if not isinstance(value, Mapping):
        fail(src, p, f"must be an object of dhik bake options, got {show(value)}")
    parser = _OptionParser(add_help=False)
    add_bake_options(parser)
    argv: list[str] = []
    for key, v in value.items():
        kp = key_path(p, key)
        if key in _FLAGS:
            if not isinstance(v, bool):
                fail(src, kp, f"must be true or false, got {show(v)}")
            one = [f"--{key}"] if v else []
        elif key in _VALUES:
            one = []
            for k, x in enumerate(v if key in _REPEATED and isinstance(v, list) else [v]):
                xp = f"{kp}[{k}]" if isinstance(v, list) else kp
                if isinstance(x, bool) or not isinstance(x, (int, float, str)):
                    fail(src, xp, f"must be a number or a string, got {show(x)}")
                text = x if isinstance(x, str) else json.dumps(x)
                if key in _PATHS:
                    text = os.path.join(base, _string(text, src, xp))
                one += [f"--{key}", text]
        else:
            known = ", ".join(sorted(_FLAGS | _VALUES))
            fail(src, kp, f"unknown option (the options are {known})")
        try:
            parser.parse_args(one)
        except _OptionError as err:
            fail(src, kp, str(err).removeprefix(f"argument --{key}: "))
        argv += one
    return BakeOptions.from_args(parser.parse_args(argv))
