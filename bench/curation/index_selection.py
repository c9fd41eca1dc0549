"""Selecting and grouping index rows on the driver (pyarrow) vs on Spark (curation.index.job.spark_plan).

A synthetic cc-index-like table of N rows (default 4 M; 2,000 WARC files, increasing offsets,
lengths 1-50 KB, `content_languages` one of eng/deu/zho or null) is written once as Parquet;
`content_languages = 'eng'` selects ~30 % of it. Each path runs in its own Python process so its
peak resident memory (ru_maxrss) is its own:

    driver   select_records + plan_tasks + the plan files, as `fetch.select: driver` does
    spark    spark_plan on local[2] (`fetch.select: spark`): the Python driver receives one
             summary per unit; Spark's JVM (driver and executors in one process in local mode, so
             not separable here) and its Python workers are reported apart

Reported: wall seconds, the Python driver's peak RSS, units, and whether both paths give the same
unit names (they must). The point is the driver column: the driver path grows with the selection
(~100 bytes a row plus Arrow's sort), the Spark path's Python driver does not. Load is printed:
on a shared 2-core machine the seconds are noisy.

    .venv/bin/python bench/curation/index_selection.py [--rows 4000000] [--task-mib 64]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

WHERE = "content_languages = 'eng'"
BASE = "https://data.commoncrawl.org/"


def make_index(path: Path, rows: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    files = rng.integers(0, 2000, rows)
    lengths = rng.integers(1000, 50_000, rows)
    offsets = rng.integers(0, 2**30, rows)  # random positions: duplicates are rare, as in a real index
    langs = pa.array(rng.choice(np.array(["eng", "deu", "zho", ""], dtype=object), rows)).cast(pa.string())
    langs = pa.compute.if_else(pa.compute.equal(langs, ""), pa.scalar(None, pa.string()), langs)
    names = pa.array(
        [f"crawl-data/CC-MAIN-2024-22/segments/x/warc/CC-MAIN-{f:05d}.warc.gz" for f in range(2000)]
    )
    table = pa.table(
        {
            "warc_filename": names.take(pa.array(files)),
            "warc_record_offset": pa.array(offsets, pa.int64()),
            "warc_record_length": pa.array(lengths, pa.int32()),
            "content_languages": langs,
        }
    )
    pq.write_table(table, path, row_group_size=1_000_000)


def run_path(which: str, index: str, task_bytes: int, out: str) -> dict:
    from curation.index.job import open_index, plan_bytes, plan_tasks, select_records, spark_plan
    from curation.index.where import parse_where

    dataset, _ = open_index(index)
    expr = parse_where(WHERE, dataset.schema)[0]
    jvm_peak = 0.0
    start = time.perf_counter()
    if which == "driver":
        tasks = plan_tasks(select_records(dataset, expr), task_bytes, BASE)
        for unit, rows in tasks:
            Path(out, f"{unit}.parquet").write_bytes(plan_bytes(rows))
        units = [u for u, _ in tasks]
        rows = sum(t.num_rows for _, t in tasks)
    else:
        from core.spark import get_spark

        spark = get_spark("local[2]", "bench-selection", {"spark.ui.enabled": "false"})
        start = time.perf_counter()  # the JVM's start is not the selection's cost
        planned = spark_plan(spark, Path(index).as_uri(), WHERE, dataset.schema, task_bytes, BASE, out)
        units = [u for u, _, _ in planned]
        rows = sum(r for _, r, _ in planned)
        jvm_peak = _children_peak_mib()
    wall = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux -> MiB
    return {
        "path": which,
        "wall_s": wall,
        "driver_peak_mib": rss,
        "child_peak_mib": jvm_peak,
        "rows": rows,
        "units": units,
    }


def _children_peak_mib() -> float:
    """Peak RSS (VmHWM) of this process's live descendants: Spark's JVM and its Python workers."""
    todo, total = [os.getpid()], 0.0
    while todo:
        pid = todo.pop()
        for task in Path(f"/proc/{pid}/task").glob("*/children"):
            for child in task.read_text().split():
                todo.append(int(child))
                status = Path(f"/proc/{child}/status")
                if status.exists():
                    hwm = [ln for ln in status.read_text().splitlines() if ln.startswith("VmHWM:")]
                    total += int(hwm[0].split()[1]) / 1024 if hwm else 0
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--task-mib", type=int, default=64)
    ap.add_argument("--child", nargs=3, metavar=("PATH", "INDEX", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    task_bytes = args.task_mib * 2**20
    if args.child:
        print(json.dumps(run_path(args.child[0], args.child[1], task_bytes, args.child[2])))
        return
    with tempfile.TemporaryDirectory(prefix="bench-selection-") as tmp:
        index = Path(tmp, "index.parquet")
        make_index(index, args.rows)
        print(f"index: {args.rows:,} rows, {index.stat().st_size / 2**20:.1f} MiB; where {WHERE!r}")
        results = []
        for which in ("driver", "spark"):
            out = Path(tmp, which)
            out.mkdir()
            cmd = [sys.executable, __file__, "--rows", str(args.rows), "--task-mib", str(args.task_mib)]
            proc = subprocess.run(
                [*cmd, "--child", which, str(index), str(out)], capture_output=True, text=True
            )
            if proc.returncode:
                sys.exit(f"{which} failed:\n{proc.stderr[-3000:]}")
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"{which} done (load {' '.join(f'{x:.2f}' for x in os.getloadavg())})", flush=True)
    print(
        f"\n{'path':8} {'rows':>11} {'units':>6} {'wall s':>7} {'python driver peak MiB':>23} {'JVM+workers peak MiB':>21}"
    )
    for r in results:
        print(
            f"{r['path']:8} {r['rows']:>11,} {len(r['units']):>6} {r['wall_s']:>7.1f} "
            f"{r['driver_peak_mib']:>23.0f} {r['child_peak_mib']:>21.0f}"
        )
    same = results[0]["units"] == results[1]["units"]
    print(f"same unit names: {same}; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
