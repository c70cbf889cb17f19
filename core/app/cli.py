"""The ``dhik`` command: bake, fk, validate.

Bad input or arguments print one ``dhik: error: ...`` line and exit with status 2;
no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .. import __version__
from ..errors import DhikError
from ..model.skeleton import Skeleton
from ..solver.settings import SolverSettings
from .bake import METHODS, BakeResult, EffectorTrack, simulate, summary_line
from .formats import (
    atomic_write_json,
    detect_kind,
    load_animation,
    load_json,
    load_skeleton,
    load_targets,
    parse_animation,
    parse_skeleton,
    parse_targets,
    save_animation,
)
from .trajectory import interpolate_keyframes


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise DhikError(message)


def _positive(kind: type, minimum: float, inclusive: bool):  # noqa: ANN202
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        ok = math.isfinite(value) and (value >= minimum if inclusive else value > minimum)
        if not ok:
            sign = ">=" if inclusive else ">"
            raise argparse.ArgumentTypeError(f"must be {sign} {minimum}: {text!r}")
        return value

    return convert


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dhik", description="Damped-least-squares IK bake (SPEC 5-6).")
    parser.add_argument("--version", action="version", version=f"dhik {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    bake = sub.add_parser(
        "bake", help="solve every target frame and write animation.json",
        usage="dhik bake SKELETON (TARGETS | --target EFFECTOR=TARGETS.json[:POS,ROT] ...) "
              "-o OUTPUT [options]")
    bake.add_argument("skeleton", help="skeleton.json")
    bake.add_argument("targets", nargs="?",
                      help="targets.json (keyframes of the effector); omit with --target")
    bake.add_argument("-o", "--output", required=True, help="animation.json to write")
    bake.add_argument("--effector", help="effector joint (default: the single leaf)")
    bake.add_argument("--target", action="append", type=_track_spec, default=[],
                      metavar="EFFECTOR=TARGETS.json[:POS,ROT]",
                      help="an effector's keyframes and its position / orientation weights "
                           "(default 1,1; 0 ignores that part); repeat for several effectors")
    bake.add_argument("--method", choices=METHODS, default="robust",
                      help="robust (default: adaptive damping, limit-aware steps, null-space "
                           "pull, restarts) or spec (SPEC 5.4's algorithm unchanged)")
    bake.add_argument("--cold-start", action="store_true",
                      help="solve every frame from the T-pose (default: from the previous "
                           "frame)")
    d = SolverSettings()
    bake.add_argument("--max-iterations", type=_positive(int, 1, True), default=d.max_iterations)
    bake.add_argument("--position-tolerance", type=_positive(float, 0, False),
                      default=d.position_tolerance, metavar="M")
    bake.add_argument("--orientation-tolerance", type=_positive(float, 0, False),
                      default=d.orientation_tolerance, metavar="RAD")
    bake.add_argument("--damping", type=_positive(float, 0, True), default=d.damping,
                      metavar="L", help="spec method only (robust adapts its damping)")
    bake.add_argument("--no-line-search", action="store_true",
                      help="spec method only (robust accepts or rejects whole steps)")
    bake.add_argument("--report", metavar="REPORT.json", help="write per-frame records")

    fk = sub.add_parser("fk", help="world transform of every joint as JSON")
    fk.add_argument("skeleton")
    fk.add_argument("--animation", help="animation.json to pose the skeleton from")
    fk.add_argument("--frame", type=int, help="frame of --animation")

    val = sub.add_parser("validate", help="check skeleton/targets/animation files")
    val.add_argument("files", nargs="+")
    return parser


_WEIGHTS = re.compile(r"^(?P<path>.+):(?P<pos>[^:,]+),(?P<rot>[^:,]+)$")


def _track_spec(text: str) -> tuple[str, str, float, float]:
    """``EFFECTOR=targets.json[:pos_weight,rot_weight]`` -> (effector, path, pos, rot)."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise argparse.ArgumentTypeError(f"expected EFFECTOR=targets.json[:POS,ROT], got {text!r}")
    path, weights = rest, (1.0, 1.0)
    match = _WEIGHTS.match(rest)
    if match:
        try:
            weights = (float(match["pos"]), float(match["rot"]))
        except ValueError:
            raise argparse.ArgumentTypeError(f"weights must be numbers: {text!r}") from None
        path = match["path"]
        if not all(math.isfinite(w) and w >= 0 for w in weights) or max(weights) == 0:
            raise argparse.ArgumentTypeError(
                f"weights must be >= 0 and not both 0: {text!r}")
    return name, path, weights[0], weights[1]


def _bake_tracks(args: argparse.Namespace, skeleton: Skeleton) -> list[EffectorTrack]:
    """The effector tracks of ``dhik bake``: TARGETS (one effector) or the --target list."""
    if args.target and args.targets is not None:
        raise DhikError("give TARGETS or --target EFFECTOR=targets.json, not both")
    if args.target and args.effector is not None:
        raise DhikError("--effector goes with TARGETS; with --target name it as EFFECTOR=...")
    if not args.target:
        if args.targets is None:
            raise DhikError("bake needs TARGETS or at least one --target EFFECTOR=targets.json")
        effector = args.effector or skeleton.default_effector()
        skeleton.joint(effector)
        return [EffectorTrack(effector, interpolate_keyframes(load_targets(args.targets)))]
    tracks = []
    for name, path, pos, rot in args.target:
        skeleton.joint(name)
        tracks.append(EffectorTrack(name, interpolate_keyframes(load_targets(path)), pos, rot))
    return tracks


class _ProgressBar:
    """A one-line bar on a terminal; silent when stdout is not a TTY."""

    def __init__(self) -> None:
        self.enabled = sys.stdout.isatty()
        self.shown = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        pct = 100 * done // max(total, 1)
        if pct == self.shown and done != total:
            return
        self.shown = pct
        bar = "#" * (pct // 4)
        sys.stdout.write(f"\r[{bar:<25}] {pct:3d}% frame {done}/{total}")
        if done == total:
            sys.stdout.write("\r" + " " * 60 + "\r")
        sys.stdout.flush()


def cmd_bake(args: argparse.Namespace) -> int:
    skeleton = Skeleton(load_skeleton(args.skeleton))
    tracks = _bake_tracks(args, skeleton)
    settings = SolverSettings(
        max_iterations=args.max_iterations,
        position_tolerance=args.position_tolerance,
        orientation_tolerance=args.orientation_tolerance,
        damping=args.damping,
        enable_line_search=not args.no_line_search,
    )
    result: BakeResult = simulate(
        skeleton, tracks, None, settings, not args.cold_start, _ProgressBar(),
        method=args.method,
    )
    save_animation(result.frames, args.output)
    if args.report:
        atomic_write_json(args.report, result.report())
    print(summary_line(result))
    return 0


def cmd_fk(args: argparse.Namespace) -> int:
    skeleton = Skeleton(load_skeleton(args.skeleton))
    if args.animation is not None:
        frames = load_animation(args.animation)
        if args.frame is None:
            raise DhikError("--animation needs --frame N")
        match = [f for f in frames if f["frame"] == args.frame]
        if not match:
            raise DhikError(f"{args.animation}: frames: no frame {args.frame}")
        check_animation_joints(skeleton, match[0], args.animation)
        skeleton.set_joint_values(match[0]["joints"])
    elif args.frame is not None:
        raise DhikError("--frame needs --animation")
    out = {
        name: {"position": [float(v) for v in m[:3, 3]],
               "rotation": [[float(v) for v in row] for row in m[:3, :3]]}
        for name, m in skeleton.world_transforms().items()
    }
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def check_animation_joints(skeleton: Skeleton, frame: dict[str, Any], source: str) -> None:
    """DhikError when an animation frame names a joint the skeleton lacks or mistypes."""
    kinds = {d.name: d.type for d in skeleton.defn.joints}
    for name, entry in frame["joints"].items():
        if name not in kinds:
            raise DhikError(f"{source}: joints.{name}: no such joint in the skeleton")
        if kinds[name] != entry["type"]:
            raise DhikError(
                f"{source}: joints.{name}.type: is {entry['type']!r}, the skeleton says "
                f"{kinds[name]!r}"
            )


def cmd_validate(args: argparse.Namespace) -> int:
    status = 0
    for path in args.files:
        try:
            data = load_json(path)
            kind = detect_kind(data, path)
            if kind == "skeleton":
                n = len(parse_skeleton(data, path).joints)
                detail = f"{n} joints"
            elif kind == "targets":
                keys = parse_targets(data, path)
                detail = f"{len(keys)} keyframes, frames 0..{keys[-1].frame}"
            else:
                detail = f"{len(parse_animation(data, path))} frames"
            print(f"{path}: ok ({kind}, {detail})")
        except DhikError as err:
            print(f"dhik: error: {err}")
            status = 2
    return status


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        handler = {"bake": cmd_bake, "fk": cmd_fk, "validate": cmd_validate}[args.command]
        return handler(args)
    except DhikError as err:
        print(f"dhik: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        name = err.filename if err.filename is not None else ""
        print(f"dhik: error: {name}: {err.strerror or err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dhik: interrupted", file=sys.stderr)
        return 130
