"""The ``dhik`` command: bake, bake-many, fk, validate, import-urdf.

Bad input or arguments print one ``dhik: error: ...`` line on stderr and exit with status
2; no traceback reaches the user. stdout carries each command's result (the summary line,
fk's JSON, validate's verdicts); progress bars, warnings and errors go to stderr, and
``--quiet`` keeps only the errors (and fk's JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

from .. import __version__
from ..errors import DhikError
from ..model.skeleton import Skeleton
from .arrays import FORMATS
from .bake import summary_line
from .bakejob import BakeOptions, ProgressBar, TrackSpec, add_bake_options, positive, run_bake
from .blas_threads import one_blas_thread
from .collector import collector_paused
from .formats import (
    EULER_TOLERANCE,
    detect_kind,
    euler_quaternion_mismatches,
    load_animation,
    load_json,
    load_skeleton,
    parse_animation,
    parse_skeleton,
    parse_targets,
    save_skeleton,
)
from .jsonio import check_outputs, one_line, parse_decimal, say

#: The most worker processes ``dhik bake-many --workers`` starts.
MAX_WORKERS = 1024


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise DhikError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dhik", description="Damped-least-squares IK bake (SPEC 5-6).")
    parser.add_argument("--version", action="version", version=f"dhik {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    common = _Parser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true",
                        help="print errors only: no progress bar, summary, verdict or warning")

    bake = sub.add_parser(
        "bake", help="solve every target frame and write animation.json", parents=[common],
        usage="dhik bake SKELETON (TARGETS | --target EFFECTOR=TARGETS.json[:POS,ROT] ...) "
              "-o OUTPUT [options]")
    bake.add_argument("skeleton", help="skeleton.json")
    bake.add_argument("targets", nargs="?",
                      help="targets.json (keyframes of the effector); omit with --target")
    bake.add_argument("-o", "--output", required=True,
                      help="animation.json to write (or .npz / .csv arrays, see --format)")
    bake.add_argument("--effector", help="effector joint (default: the single leaf)")
    bake.add_argument("--target", action="append", type=_track_spec, default=[],
                      metavar="EFFECTOR=TARGETS.json[:POS,ROT]",
                      help="an effector's keyframes and its position / orientation weights "
                           "(default 1,1; 0 ignores that part); repeat for several effectors")
    add_bake_options(bake)
    bake.add_argument("--report", metavar="REPORT.json", help="write per-frame records")

    many = sub.add_parser(
        "bake-many", help="bake many clips on all cores or on a Dask cluster", parents=[common],
        usage="dhik bake-many JOBS -o OUTDIR [--workers N] [--scheduler ADDRESS|local] "
              "[--force] [--report REPORT.json] [--format json|npz|csv] [--fps FPS]")
    many.add_argument("jobs", help="a folder of clip folders (skeleton.json + targets.json or "
                                   "targets_<EFFECTOR>.json files) or a jobs.json manifest")
    many.add_argument("-o", "--output", required=True, metavar="OUTDIR",
                      help="writes OUTDIR/<job>/animation.json and report.json")
    many.add_argument("--workers", type=positive(int, 1, True, MAX_WORKERS), metavar="N",
                      help=f"worker processes (default: one per core; at most {MAX_WORKERS})")
    many.add_argument("--scheduler", metavar="ADDRESS",
                      help="a Dask scheduler (tcp://HOST:PORT) or 'local' for a LocalCluster "
                           "(needs pip install 'dhik[cluster]')")
    many.add_argument("--force", action="store_true", help="bake up-to-date jobs again")
    many.add_argument("--report", metavar="REPORT.json",
                      help="write every job's status and error")
    many.add_argument("--format", choices=FORMATS, default=None,
                      help="every job's animation format (a manifest job's own format wins): "
                           "OUTDIR/<job>/animation.json, .npz or .csv")
    many.add_argument("--fps", type=positive(float, 0, False), default=None, metavar="FPS",
                      help="every job's frame rate (a manifest job's own fps wins)")

    fk = sub.add_parser("fk", help="world transform of every joint as JSON", parents=[common])
    fk.add_argument("skeleton")
    fk.add_argument("--animation", help="animation.json to pose the skeleton from")
    fk.add_argument("--frame", type=int, help="frame of --animation")

    val = sub.add_parser("validate", help="check skeleton/targets/animation files",
                         parents=[common])
    val.add_argument("files", nargs="+")

    urdf = sub.add_parser("import-urdf", help="convert a URDF robot to skeleton.json",
                          usage="dhik import-urdf ROBOT.urdf -o SKELETON.json", parents=[common])
    urdf.add_argument("urdf", help="the robot's .urdf file")
    urdf.add_argument("-o", "--output", required=True, help="skeleton.json to write")
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
            weights = (parse_decimal(match["pos"]), parse_decimal(match["rot"]))
        except ValueError:
            raise argparse.ArgumentTypeError(f"weights must be numbers: {text!r}") from None
        path = match["path"]
        if not all(math.isfinite(w) and w >= 0 for w in weights) or max(weights) == 0:
            raise argparse.ArgumentTypeError(
                f"weights must be >= 0 and not both 0: {text!r}")
    return name, path, weights[0], weights[1]


def cmd_bake(args: argparse.Namespace) -> int:
    if sys.stdout is None or sys.stdout.closed:  # checked before solving, like the files
        raise DhikError("stdout is closed: nowhere to print the summary")
    if args.effector == "":
        raise DhikError("--effector: must be a joint name, got ''")
    tracks = [TrackSpec(*t) for t in args.target]
    with collector_paused():
        result = run_bake(args.skeleton, args.targets, args.effector, tracks,
                          BakeOptions.from_args(args), args.output, args.report,
                          ProgressBar(quiet=args.quiet))
    if not args.quiet:
        say(one_line(summary_line(result)))
    return 0


def cmd_bake_many(args: argparse.Namespace) -> int:
    from .batch import bake_many  # here: `dhik bake` need not import the batch machinery

    return bake_many(args.jobs, args.output, workers=args.workers, scheduler=args.scheduler,
                     force=args.force, report=args.report, quiet=args.quiet,
                     fmt=args.format, fps=args.fps)


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
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
            skeleton.set_joint_values(match[0]["joints"])
    elif args.frame is not None:
        raise DhikError("--frame needs --animation")
    out = {
        name: {"position": [float(v) for v in m[:3, 3]],
               "rotation": [[float(v) for v in row] for row in m[:3, :3]]}
        for name, m in skeleton.world_transforms().items()
    }
    try:  # JSON has no NaN or Infinity: an FK that overflows is refused, never printed
        text = json.dumps(out, indent=2, allow_nan=False)
    except ValueError:
        source = args.animation if args.animation is not None else args.skeleton
        raise DhikError(f"{source}: forward kinematics overflows (a non-finite position "
                        "or rotation)") from None
    say(text)
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
    """Each file's verdict on stdout; its error (exit 2) or warning on stderr."""
    status = 0
    for path in args.files:
        try:
            data = load_json(path)
            kind = detect_kind(data, path)
            warning = None
            if kind == "skeleton":
                n = len(parse_skeleton(data, path).joints)
                detail = f"{n} joints"
            elif kind == "targets":
                keys = parse_targets(data, path)
                detail = f"{len(keys)} keyframes, frames 0..{keys[-1].frame}"
            else:
                frames = parse_animation(data, path)
                detail = f"{len(frames)} frames"
                count, where, angle = euler_quaternion_mismatches(frames)
                if count:
                    warning = (f"{path}: {where}: euler is {angle:.3g} rad from the quaternion "
                               f"({count} spherical entr{'ies' if count > 1 else 'y'} beyond "
                               f"{EULER_TOLERANCE:g} rad); the quaternion is the joint's "
                               "rotation, the euler only informs")
            if not args.quiet:
                say(one_line(f"{path}: ok ({kind}, {detail})"))
                if warning:
                    print(one_line(f"dhik: warning: {warning}"), file=sys.stderr)
        except DhikError as err:
            if err.source == "stdout":
                raise
            print(one_line(f"dhik: error: {err}"), file=sys.stderr)
            status = 2
    return status


def cmd_import_urdf(args: argparse.Namespace) -> int:
    """Write the URDF's skeleton; mimic joints and locked joints are warned on stderr."""
    from .urdf import load_urdf  # here: the other commands need not import XML parsing

    check_outputs([args.output], [args.urdf])  # never over the URDF, only where writable
    skeleton, warnings = load_urdf(args.urdf)
    if not args.quiet:
        for warning in warnings:
            print(one_line(f"dhik: warning: {warning}"), file=sys.stderr)
    save_skeleton(skeleton, args.output)  # atomic: a temporary file, then a rename
    moving = sum(j.type != "fixed" for j in skeleton.joints)
    if not args.quiet:
        say(one_line(f"dhik import-urdf: {args.output}: {len(skeleton.joints)} joints "
                     f"({moving} moving), root {skeleton.root_name}, {len(warnings)} "
                     f"warning{'s' * (len(warnings) != 1)}"))
    return 0


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process was: cleaned up like Ctrl-C (no temporary file)."""


def _install_sigterm() -> Any:
    """Turn SIGTERM into :class:`_Terminated` in this process (not in workers it forks,
    which get the default action back); the previous handler, or None off the main thread."""
    pid = os.getpid()

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != pid:  # a forked worker: die as SIGTERM says
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise _Terminated

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        return None


def main(argv: Sequence[str] | None = None) -> int:
    previous = _install_sigterm()
    try:
        with one_blas_thread():
            return _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        handler = {"bake": cmd_bake, "bake-many": cmd_bake_many, "fk": cmd_fk,
                   "validate": cmd_validate, "import-urdf": cmd_import_urdf}[args.command]
        return handler(args)
    except DhikError as err:
        print(one_line(f"dhik: error: {err}"), file=sys.stderr)
        return 2
    except OSError as err:
        where = f"{err.filename}: " if err.filename is not None else ""
        print(one_line(f"dhik: error: {where}{err.strerror or err}"), file=sys.stderr)
        return 2
    except _Terminated:
        print("dhik: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("dhik: interrupted", file=sys.stderr)
        return 130
