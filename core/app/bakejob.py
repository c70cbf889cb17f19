"""One bake from files to files: what ``dhik bake`` and ``dhik bake-many`` both run.

:func:`run_bake` reads a skeleton.json and the targets of one or several effectors,
solves every frame (SPEC 6) and writes animation.json (and the per-frame report) each
atomically, so that one clip baked by the batch is byte for byte the clip ``dhik bake``
writes with the same inputs and options. :data:`BAKE_OPTIONS` are the solver options
of ``dhik bake`` (``--method``, ``--max-iterations`` ...); a bake-many manifest names
them by their long name without the dashes.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TextIO

from ..errors import DhikError
from ..model.skeleton import Skeleton
from ..solver.settings import SolverSettings
from .arrays import FORMATS, array_writer, output_format
from .bake import METHODS, BakeResult, EffectorTrack, simulate
from .filesets import bytes_writer, text_writer, write_files
from .formats import animation_writer, load_animation, load_skeleton, load_targets
from .jsonio import check_outputs, dumps_json, parse_decimal
from .trajectory import interpolate_keyframes

#: The most iterations one solve may take (``--max-iterations``): each LM run of a robust
#: trajectory is capped by it, so beyond this a bake of unreachable targets runs for hours.
MAX_ITERATIONS = 10_000
#: The most effectors one bake may drive (``--target``, a manifest's targets): 1,024
#: independent arms bake 11 frames in 7.5 s here; a humanoid retarget uses 5 to 30.
MAX_EFFECTORS = 256


def positive(kind: type, minimum: float, inclusive: bool,
             maximum: float | None = None):  # noqa: ANN201
    """An argparse type: ``kind(text)`` in ASCII decimal digits (:func:`.jsonio.parse_decimal`),
    finite, ``>= minimum`` (or ``>``) and at most ``maximum``."""

    def convert(text: str) -> Any:
        try:
            value = parse_decimal(text, kind)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        ok = math.isfinite(value) and (value >= minimum if inclusive else value > minimum)
        if not ok:
            sign = ">=" if inclusive else ">"
            raise argparse.ArgumentTypeError(f"must be {sign} {minimum}: {text!r}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:,}: {text!r}")
        return value

    return convert


_D = SolverSettings()

#: The solver options of ``dhik bake``: (long option, argparse keywords). Their ``dest``
#: names are the fields of :class:`BakeOptions`.
BAKE_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--method", {"choices": METHODS, "default": "robust",
                  "help": "robust (default: adaptive damping, limit-aware steps, null-space "
                          "pull, restarts) or spec (SPEC 5.4's algorithm unchanged)"}),
    ("--cold-start", {"action": "store_true",
                      "help": "solve every frame alone, from the T-pose (default: the frames "
                              "as one trajectory)"}),
    ("--max-iterations", {"type": positive(int, 1, True, MAX_ITERATIONS),
                          "default": _D.max_iterations,
                          "help": "most iterations of one solve (robust trajectories: of each "
                                  f"LM run, candidates and fills alike); at most "
                                  f"{MAX_ITERATIONS:,}"}),
    ("--position-tolerance", {"type": positive(float, 0, False),
                              "default": _D.position_tolerance, "metavar": "M"}),
    ("--orientation-tolerance", {"type": positive(float, 0, False),
                                 "default": _D.orientation_tolerance, "metavar": "RAD"}),
    ("--damping", {"type": positive(float, 0, True), "default": None, "metavar": "L",
                   "help": f"spec method only (default {_D.damping}; robust adapts its "
                           "damping, and refuses this)"}),
    ("--no-line-search", {"action": "store_true",
                          "help": "spec method only (robust accepts or rejects whole steps, "
                                  "and refuses this)"}),
    ("--chain-length", {"action": "append", "metavar": "[EFFECTOR=]N",
                        "help": "solve only the N joints ending at the effector (as Blender's "
                                "IK counts bones; 0: up to the root, the default); the joints "
                                "above keep their --driven values; repeat per effector"}),
    ("--pole", {"action": "append", "metavar": "[EFFECTOR=]X,Y,Z[@ANGLE]",
                "help": "pole target (world, m): the chain bends toward it, turned by ANGLE "
                        "(rad) about the line from its first joint to the target; robust "
                        "method; needs a chain of 3 joints or more; repeat per effector"}),
    ("--driven", {"metavar": "ANIMATION.json",
                  "help": "values, frame by frame, of the joints the chains do not solve "
                          "(an animation.json; a frame takes its latest earlier entry)"}),
    ("--fps", {"type": positive(float, 0, False), "default": None, "metavar": "FPS",
               "help": "the frame rate (frames per second) written into the output: "
                       "animation.json's \"fps\", the arrays' fps (needed by npz, csv)"}),
    ("--format", {"choices": FORMATS, "default": None,
                  "help": "the output's format: json (animation.json), npz or csv (frames x "
                          "joints arrays with joint names, root pose, fps; quaternions w, x, "
                          "y, z); default: the output's suffix, else json"}),
)

#: Options that act only with ``--method spec`` (BakeOptions field -> flag); the robust
#: method refuses them rather than ignore them.
SPEC_ONLY = {"damping": "--damping", "no_line_search": "--no-line-search"}
def add_bake_options(parser: argparse.ArgumentParser) -> None:
    """Add :data:`BAKE_OPTIONS` to ``parser``."""
    for flag, kwargs in BAKE_OPTIONS:
        parser.add_argument(flag, **kwargs)


@dataclass(frozen=True)
class BakeOptions:
    """The solver options of one bake (the defaults are those of ``dhik bake``)."""

    method: str = "robust"
    cold_start: bool = False
    max_iterations: int = _D.max_iterations
    position_tolerance: float = _D.position_tolerance  # metres
    orientation_tolerance: float = _D.orientation_tolerance  # radians
    damping: float | None = None  # spec only; None: SolverSettings' default
    no_line_search: bool = False
    chain_length: tuple[str, ...] = ()  # "[EFFECTOR=]N" each
    pole: tuple[str, ...] = ()  # "[EFFECTOR=]X,Y,Z[@ANGLE]" each
    driven: str | None = None  # animation.json
    fps: float | None = None  # frames per second, written into the output
    format: str | None = None  # json, npz, csv; None: from the output's suffix

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BakeOptions:
        """The options parsed by a parser that has :func:`add_bake_options`."""
        values = {f.name: getattr(args, f.name) for f in fields(cls)}
        for name in ("chain_length", "pole"):
            values[name] = tuple(values[name] or ())
        return cls(**values)

    def settings(self) -> SolverSettings:
        return SolverSettings(
            max_iterations=self.max_iterations,
            position_tolerance=self.position_tolerance,
            orientation_tolerance=self.orientation_tolerance,
            damping=_D.damping if self.damping is None else self.damping,
            enable_line_search=not self.no_line_search,
        )

    def problem(self, output: str = "") -> tuple[str, str] | None:
        """``(option, problem)`` when these options do not go together, else None: a
        spec-only option with the robust method (refused, not ignored), an array format
        without ``--fps``."""
        if self.method != "spec":
            for name, flag in SPEC_ONLY.items():
                value = getattr(self, name)
                if value is not None and value is not False:
                    return flag, (f"acts only with --method spec; the {self.method} method "
                                  f"(the default) does not use it")
        fmt = output_format(self.format, output)
        if fmt != "json" and self.fps is None:
            return f"--format {fmt}", "needs the frame rate (frames per second): give --fps"
        return None


@dataclass(frozen=True)
class TrackSpec:
    """One effector's targets.json and its position / orientation weights (>= 0)."""

    effector: str
    path: str
    pos_weight: float = 1.0
    rot_weight: float = 1.0


def bake_tracks(
    skeleton: Skeleton,
    targets: str | None,
    effector: str | None,
    tracks: Sequence[TrackSpec],
) -> list[EffectorTrack]:
    """The effector tracks of a bake: ``targets`` (one effector) or ``tracks``."""
    if tracks and targets is not None:
        raise DhikError("give TARGETS or --target EFFECTOR=targets.json, not both")
    if tracks and effector is not None:
        raise DhikError("--effector goes with TARGETS; with --target name it as EFFECTOR=...")
    if len(tracks) > MAX_EFFECTORS:
        raise DhikError(f"{len(tracks):,} effectors: a bake drives at most {MAX_EFFECTORS}")
    if not tracks:
        if targets is None:
            raise DhikError("bake needs TARGETS or at least one --target EFFECTOR=targets.json")
        name = effector or skeleton.default_effector()
        skeleton.joint(name)
        return [EffectorTrack(name, interpolate_keyframes(load_targets(targets)))]
    out = []
    for t in tracks:
        skeleton.joint(t.effector)
        out.append(EffectorTrack(t.effector, interpolate_keyframes(load_targets(t.path)),
                                 t.pos_weight, t.rot_weight))
    return out


def _per_effector(specs: Sequence[str], names: list[str], option: str) -> dict[str, str]:
    """``[EFFECTOR=]VALUE`` specs by effector; without a name, the single effector's."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.rpartition("=")
        if not sep:
            if len(names) != 1:
                raise DhikError(f"{option} {spec!r}: name the effector (EFFECTOR=...)")
            name = names[0]
        if name not in names:
            raise DhikError(f"{option} {spec!r}: {name!r} is not a baked effector")
        if name in out:
            raise DhikError(f"{option}: effector {name!r} given twice")
        out[name] = value
    return out


def with_chains(tracks: list[EffectorTrack], options: BakeOptions) -> list[EffectorTrack]:
    """The tracks with ``--chain-length`` and ``--pole`` applied (DhikError if malformed)."""
    names = [t.name for t in tracks]
    lengths = _per_effector(options.chain_length, names, "--chain-length")
    poles = _per_effector(options.pole, names, "--pole")
    out = []
    for t in tracks:
        n, pole, angle = 0, None, 0.0
        if t.name in lengths:
            text = lengths[t.name]
            if not (text.isascii() and text.isdigit()):
                raise DhikError(f"--chain-length {text!r}: must be an integer >= 0")
            n = int(text)
        if t.name in poles:
            text = poles[t.name]
            xyz, at, ang = text.partition("@")
            try:
                pos = tuple(parse_decimal(v) for v in xyz.split(","))
                angle = parse_decimal(ang) if at else 0.0
            except ValueError:
                pos = ()
            if len(pos) != 3 or not all(map(math.isfinite, (*pos, angle))):
                raise DhikError(f"--pole {text!r}: expected X,Y,Z[@ANGLE] (finite m, rad)")
            pole = [(0, pos)]
        out.append(replace(t, chain_length=n, pole=pole, pole_angle=angle))
    return out


def run_bake(
    skeleton_path: str,
    targets: str | None,
    effector: str | None,
    tracks: Sequence[TrackSpec],
    options: BakeOptions,
    output: str,
    report: str | None = None,
    progress: ProgressBar | None = None,
) -> BakeResult:
    """Bake one clip: read the files, solve, write ``output`` and ``report`` as a set.

    DhikError on bad input (nothing written); the result's records are the report's.
    The options and outputs are checked before anything is read or solved; both files'
    contents are made before either is written, and neither replaces its old file unless
    both were written (:func:`.filesets.write_files`: ``--report /dev/full`` leaves the
    old animation.json). ``output`` is animation.json, or npz / csv arrays
    (``options.format``, else its suffix) at ``options.fps``.
    """
    clash = options.problem(output)
    if clash is not None:
        raise DhikError(f"{clash[0]}: {clash[1]}")
    fmt = output_format(options.format, output)
    check_outputs([output, report],
                  [skeleton_path, targets, options.driven, *(t.path for t in tracks)])
    skeleton = Skeleton(load_skeleton(skeleton_path))
    effector_tracks = with_chains(bake_tracks(skeleton, targets, effector, tracks), options)
    driven = None
    if options.driven is not None:
        driven = [(f["frame"], f["joints"]) for f in load_animation(options.driven)]
    result = simulate(
        skeleton, effector_tracks, None, options.settings(), not options.cold_start, progress,
        method=options.method, driven=driven,
    )
    if fmt == "json":
        writer = text_writer(animation_writer(result.frames, output, options.fps))
    else:
        assert options.fps is not None  # options.problem()
        writer = array_writer(fmt, skeleton.defn, result.frames, options.fps, output)
    items = [(output, writer)]
    if report:
        items.append((report, bytes_writer(
            (dumps_json(result.report(), report) + "\n").encode("utf-8"))))
    write_files(items)
    return result


class ProgressBar:
    """A one-line bar on a terminal (``done/total`` of some ``unit``), on stderr by
    default (stdout keeps the command's result); silent off a TTY or when ``quiet``."""

    def __init__(self, stream: TextIO | None = None, unit: str = "frame",
                 quiet: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.unit = unit
        self.enabled = not quiet and self.stream is not None and self.stream.isatty()
        self.shown = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        pct = 100 * done // max(total, 1)
        if pct == self.shown and done != total:
            return
        self.shown = pct
        bar = "#" * (pct // 4)
        self.stream.write(f"\r[{bar:<25}] {pct:3d}% {self.unit} {done}/{total}")
        if done == total:
            self.stream.write("\r" + " " * 60 + "\r")
        self.stream.flush()
