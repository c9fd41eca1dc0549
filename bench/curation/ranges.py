"""One large WARC through `extract` on Spark: one unit (one task) vs byte ranges (curation/warc/ranges.py).

The shared data has no large WARC, so one is built in a temporary folder (never in the repo) by
concatenating the shared per-record-gzip WARCs (real pages) until it reaches --size-mb: gzip
members concatenate into a valid multi-member file. It is then extracted by the real job,
`curation.job.run_extract(..., spark=<local[cores]>)`, once per `reader.split_bytes` setting,
the settings interleaved in each repeat, on one warm SparkSession (started first, with a trivial
job that starts Spark's Python workers, as bench/curation/throughput.py does).

Per run: wall seconds; CPU seconds of the whole process tree (driver, JVM, Python workers) from
/proc (bench/harness.py's `Clock`); CPU utilisation = CPU / (cores x wall),
the measure of the issue's target (>= 90 % of the cores given); task occupancy = summed task walls
/ (cores x wall) (from stats/<unit>.json: cores that had a task, whatever the machine's load gave
them); tail idle = core-seconds idle after each core's last task, until the last task ends. The
load average is printed with every run: on a shared machine, other jobs take CPU that the
utilisation then lacks.

The 1 GB estimate replays the measured ranges' seconds per byte over the units a 1 GB file gives
at each split, scheduled greedily in unit order on N cores as Spark hands tasks to free cores
(a model, printed as such; a per-task overhead measured from the runs is added to each unit).

    .venv/bin/python -m bench.curation.ranges [--cores 2] [--size-mb 100] [--splits none,32,8]
        [--repeat 1] [--keep]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path

from bench.curation.sides import our_tasks, start_spark
from bench.harness import Clock
from curation.config import ExtractJobConfig, ReaderConfig
from testkit.shared_data import shared_data_dir

SOURCES = (
    "pages-trafilatura-eval-part0.warc.gz",
    "pages-trafilatura-eval-part1.warc.gz",
    "pages-trafilatura-eval-part2.warc.gz",
    "pages-trafilatura-eval-part3.warc.gz",
    "pages-aeb-181.warc.gz",
    "cc-main-2020-34-sample.warc.gz",
    "crawl-2024-sample-0000.warc.gz",
    "crawl-2024-sample-0001.warc.gz",
)
MB = 2**20


def build_warc(path: Path, size_mb: int) -> int:
    """Concatenate the shared WARCs (whole files, so every member stays intact) up to size_mb."""
    warc = shared_data_dir() / "warc"
    with open(path, "wb") as out:
        for name in itertools.cycle(SOURCES):
            out.write((warc / name).read_bytes())
            if out.tell() >= size_mb * MB:
                break
        return out.tell()


def run_once(warcs: list[str], reader: ReaderConfig, cores: int, out: Path, spark_pids: set[int]) -> dict:
    """One `extract` run of the files with this reader section, measured (see the module doc)."""
    from core.spark import SparkOptions
    from curation.job import run_extract

    cfg = ExtractJobConfig().replace(reader=reader)
    load = os.getloadavg()[0]
    with Clock(roots={os.getpid(), *spark_pids}) as clock:
        res = run_extract(warcs, str(out), cfg, spark=SparkOptions(f"local[{cores}]", progress=False))
    wall, cpu = clock.wall, clock.cpu
    tasks = our_tasks(out, clock.t0)
    ends = sorted(e for _, e in tasks)
    units = [json.loads(p.read_text()) for p in (out / "stats").glob("*.json")]
    return {
        "split": reader.split_bytes,
        "units": len(tasks),
        "wall": wall,
        "cpu": cpu,
        "util": cpu / (cores * wall),
        "occupancy": sum(e - s for s, e in tasks) / (cores * wall),
        "tail_idle": sum(ends[-1] - e for e in ends[-cores:]),
        "docs": json.loads((out / "stats.json").read_text())["docs_written"],
        "failed": len(res.failed),
        "load": (load + os.getloadavg()[0]) / 2,
        # seconds per byte of each range task (for the 1 GB model)
        "rates": [
            (u["seconds"], (u["range"][1] - u["range"][0]) if "range" in u else os.path.getsize(warcs[0]))
            for u in units
        ],
    }


def model_1gb(rates: list[tuple[float, int]], overhead: float, split: int, cores: int) -> float:
    """Utilisation of one 1 GB WARC cut at `split`, the measured per-byte speeds replayed in turn."""
    size = 1000 * MB
    n = max(1, -(-size // split))
    per_byte = [s / b for s, b in rates if b]
    durations = [min(split, size - i * split) * per_byte[i % len(per_byte)] + overhead for i in range(n)]
    free = [0.0] * cores
    for d in durations:  # Spark hands the next unit to the first free core
        i = free.index(min(free))
        free[i] += d
    return sum(durations) / (cores * max(free))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--splits", default="none,32,8", help="MiB per range, comma-separated; none = one unit")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (the big WARC)")
    ap.add_argument("--save", metavar="JSON", help="also write the runs (with per-range timings) here")
    args = ap.parse_args()
    splits = [None if s == "none" else int(s) * MB for s in args.splits.split(",")]

    tmp = Path(tempfile.mkdtemp(prefix="refinery-bench-ranges-"))
    try:
        warc = tmp / "big.warc.gz"
        size = build_warc(warc, args.size_mb)
        warc.read_bytes()  # page cache warm for every run alike
        print(f"{warc}: {size / MB:.1f} MiB; cores {args.cores}; load {os.getloadavg()}", flush=True)
        *_, spark_pids = start_spark(args.cores)  # the session extract starts, its Python workers up
        runs = []
        for rep in range(args.repeat):
            for split in splits:
                out = tmp / f"out-{rep}-{split}"
                # units_per_core 0: each setting's own range size, not one planned from the cores
                reader = ReaderConfig(split_bytes=split, units_per_core=0)
                r = run_once([str(warc)], reader, args.cores, out, spark_pids)
                print(json.dumps({k: v for k, v in r.items() if k != "rates"}), flush=True)
                runs.append(r)
                shutil.rmtree(out, ignore_errors=True)
        if args.save:
            Path(args.save).write_text(json.dumps({"cores": args.cores, "size": size, "runs": runs}))
        report(runs, args.cores, size)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def report(runs: list[dict], cores: int, size: int) -> None:
    print(f"\n{size / MB:.0f} MiB WARC, local[{cores}]:\n")
    print(
        "| split_bytes | units | wall s | CPU s | CPU util | task occupancy | tail idle core-s | docs | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        name = "one unit" if r["split"] is None else f"{r['split'] // MB} MiB"
        print(
            f"| {name} | {r['units']} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['util']:.0%} "
            f"| {r['occupancy']:.0%} | {r['tail_idle']:.1f} | {r['docs']} | {r['load']:.1f} |"
        )
    ranged = [r for r in runs if r["split"] is not None and r["units"] > 1]
    if not ranged:
        return
    rates = [x for r in ranged for x in r["rates"]]
    # Per-task overhead outside the task's own timer: the run's core-seconds not in tasks and not
    # idle at the tail, per task (Spark scheduling, pickling, the result's way back).
    overhead = max(
        0.0,
        min((r["wall"] * cores * (1 - r["occupancy"]) - r["tail_idle"]) / r["units"] for r in ranged),
    )
    print(f"\nModel, one 1 GB WARC (measured s/byte of {len(rates)} ranges, +{overhead:.2f} s per task):\n")
    print("| split_bytes | units | " + " | ".join(f"{n} cores" for n in (2, 4, 8, 16, 32)) + " |")
    print("|---|---|" + "---|" * 5)
    for split in (None, 64 * MB, 32 * MB, 16 * MB, 8 * MB):
        s = 1000 * MB if split is None else split
        cells = " | ".join(f"{model_1gb(rates, overhead, s, n):.0%}" for n in (2, 4, 8, 16, 32))
        name = "one unit" if split is None else f"{split // MB} MiB"
        print(f"| {name} | {-(-1000 * MB // s)} | {cells} |")


if __name__ == "__main__":
    main()
