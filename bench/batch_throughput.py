"""Throughput of ``dhik bake-many`` (issue 10): jobs per second with 1 and 2 workers.

Usage: ``.venv/bin/python bench/batch_throughput.py [--jobs 20] [--frames 300]
[--repeats 3] [--markdown bench/results/batch_throughput.md]`` (needs the ``cluster``
extra for the LocalCluster rows). Not a test: it prints a table.

Each job is an arm7 clip (sample_scenes/make_scenes.py's skeleton; targets: the FK of a
smooth joint path inside the limits, a different path per job, one keyframe per frame)
baked with dhik bake's defaults into a fresh output folder, end to end as
``dhik bake-many`` runs it (read the JSON, solve, write animation.json, report.json and
the job marker atomically with fsync). The batch goes through ``batch.run_jobs``, the
code path of the command, with ``--force``:

- process pool: a fresh ``ProcessPoolExecutor`` per batch, as the command makes it (its
  start, a fork, is inside the time);
- LocalCluster: Dask distributed, one thread per worker process, started once before the
  timed batches and warmed by one untimed batch (as a long-lived cluster is used).

jobs/s = jobs / wall time of the batch, median of ``--repeats`` batches. The ratio is
2 workers over 1 worker; the goal is >= 1.8 on a 2-core machine.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread per process, before numpy loads

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402

from dhik.app import batch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def make_scenes() -> ModuleType:
    """sample_scenes/make_scenes.py as a module (arm7, smooth paths, FK targets)."""
    spec = importlib.util.spec_from_file_location("make_scenes",
                                                  ROOT / "sample_scenes/make_scenes.py")
    assert spec is not None and spec.loader is not None
    ms = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ms)
    return ms


def make_clips(root: Path, jobs: int, frames: int) -> list[batch.Job]:
    """``jobs`` arm7 clips of ``frames`` frames under ``root``; their Job records."""
    ms = make_scenes()
    names = [j[0] for j in ms._ARM7_JOINTS]
    limits = [j[3] for j in ms._ARM7_JOINTS]
    for k in range(jobs):
        folder = root / f"clip{k:02d}"
        folder.mkdir(parents=True)
        (folder / "skeleton.json").write_text(json.dumps(ms.ARM7))
        q = ms.smooth_trajectory(limits, frames, seed=1000 + k)
        (folder / "targets.json").write_text(
            json.dumps(ms.fk_targets(ms.ARM7, names, q, "Tool")))
    return batch.discover(str(root))


def timed(jobs: list[batch.Job], out: Path, factory: batch.ExecutorFactory,
          repeats: int) -> tuple[float, list[float], int]:
    """Median jobs/s over ``repeats`` forced batches, every run's jobs/s, frames baked."""
    rates, frames = [], 0
    for _ in range(repeats):
        shutil.rmtree(out, ignore_errors=True)
        res = batch.run_jobs(jobs, str(out), factory, force=True)
        bad = [r for r in res.results if r.status != batch.DONE]
        assert not bad, bad
        rates.append(len(jobs) / res.wall_time)
        frames = res.frames
    return statistics.median(rates), rates, frames


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="dhik-batch-bench-"))
    rows: list[tuple[str, int, float, list[float]]] = []
    load_before = load()
    try:
        jobs = make_clips(tmp / "clips", args.jobs, args.frames)
        out = tmp / "out"
        frames = 0
        for workers in (1, 2):
            rate, rates, frames = timed(jobs, out, batch.pool_factory(workers), args.repeats)
            rows.append(("process pool", workers, rate, rates))
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError:
            print("(no LocalCluster rows: pip install 'dhik[cluster]')")
        else:
            for workers in (1, 2):
                with dask.config.set(batch.LOCAL_CLUSTER_CONFIG), \
                        LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                     dashboard_address="127.0.0.1:0",
                                     scheduler_kwargs={"dashboard": False},
                                     silence_logs=logging.ERROR) as cluster, \
                        Client(cluster) as client:
                    def factory(n: int, c: Client = client) -> tuple[object, int]:
                        return c.get_executor(pure=False), n

                    f: Callable = factory
                    timed(jobs, out, f, 1)  # warm-up: the workers import dhik
                    rate, rates, frames = timed(jobs, out, f, args.repeats)
                    rows.append(("Dask LocalCluster", workers, rate, rates))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    cpu = os.cpu_count()
    lines = [
        f"{args.jobs} jobs of {args.frames} arm7 frames ({frames} frames a batch), "
        f"dhik bake defaults (robust), median of {args.repeats} batches; "
        f"{platform.python_implementation()} {platform.python_version()}, {cpu} cores; "
        f"load average before {load_before}, after {load()}",
        "",
        "| scheduler | workers | jobs/s (median) | frames/s | runs (jobs/s) | 2 workers / 1 |",
        "|---|---|---|---|---|---|",
    ]
    base = {name: rate for name, w, rate, _ in rows if w == 1}
    for name, workers, rate, rates in rows:
        ratio = f"{rate / base[name]:.2f}x" if workers == 2 else ""
        runs = ", ".join(f"{r:.1f}" for r in rates)
        lines.append(f"| {name} | {workers} | {rate:.2f} | {rate * args.frames:.0f} | "
                     f"{runs} | {ratio} |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(
            "# dhik bake-many throughput (bench/batch_throughput.py)\n\n" + text + "\n")


if __name__ == "__main__":
    main()
