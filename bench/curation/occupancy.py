"""Cores busy to the end of an `extract` run, for any number and size of inputs (issue 29, item 2).

Three input sets of real pages, each extracted by the real job (`curation.job.run_extract` on a
warm `local[cores]` session, as bench/curation/ranges.py does), once with the range size fixed at
`reader.split_bytes` (`units_per_core: 0`, the behaviour before) and once planned from the inputs
and cores (`units_per_core`, default 3), the two interleaved in each repeat:

  five   the five largest shared WARCs (pages-*: 6-7.7 MB each, ~1,000 pages): fewer units than a
         whole number of rounds on the cores, each under split_bytes;
  many   33 files: the shared WARCs (pages and Common Crawl samples) copied in turn into a temporary
         folder, never into the repo, so sizes range from 0.1 to 7.7 MB;
  big    one file of --big-mb MiB (default 1000: the 1 GB of a Common Crawl WARC) built by
         concatenating the shared WARCs (bench/curation/ranges.py, build_warc).

Per run: units, wall seconds, CPU seconds of the process tree, CPU utilisation = CPU / (cores x
wall) (the issue's >= 90 % target on 2 cores for 5 small files), task occupancy = summed task walls
/ (cores x wall) and the core-seconds idle at the tail, with the documents written (the same in
both runs: how files are cut never changes a document, tests/curation/test_ranges.py).

    .venv/bin/python bench/curation/occupancy.py [--cores 2] [--sets five,many] [--repeat 1]
        [--units-per-core 3] [--big-mb 1000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from bench.curation.ranges import MB, SOURCES, build_warc, run_once, start_spark  # noqa: E402
from curation.config import ReaderConfig  # noqa: E402
from testkit.shared_data import shared_data_dir  # noqa: E402


def input_set(name: str, tmp: Path, big_mb: int) -> list[str]:
    warc = shared_data_dir() / "warc"
    if name == "five":
        return [str(warc / n) for n in SOURCES[:5]]
    if name == "many":
        folder = tmp / "many"
        folder.mkdir(exist_ok=True)
        out = []
        for i, src in zip(range(33), itertools.cycle(SOURCES)):
            dst = folder / f"{i:02d}-{src}"
            shutil.copyfile(warc / src, dst)
            out.append(str(dst))
        return out
    if name == "big":
        path = tmp / "big.warc.gz"
        build_warc(path, big_mb)
        return [str(path)]
    raise SystemExit(f"--sets: unknown set {name!r} (five, many, big)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--sets", default="five,many", help="comma-separated: five, many, big")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--units-per-core", type=int, default=ReaderConfig().units_per_core)
    ap.add_argument("--big-mb", type=int, default=1000)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="refinery-bench-occupancy-"))
    rows = []
    try:
        spark_pids = start_spark(args.cores)
        for name in args.sets.split(","):
            files = input_set(name, tmp, args.big_mb)
            for f in files:
                Path(f).read_bytes()  # page cache warm for every run alike
            size = sum(os.path.getsize(f) for f in files)
            print(f"{name}: {len(files)} files, {size / MB:.1f} MiB; load {os.getloadavg()}", flush=True)
            for rep in range(args.repeat):
                for upc in (0, args.units_per_core):
                    reader = ReaderConfig(units_per_core=upc)
                    out = tmp / f"out-{name}-{rep}-{upc}"
                    r = run_once(files, reader, args.cores, out, spark_pids)
                    r.update(set=name, files=len(files), mib=size / MB, units_per_core=upc)
                    r.pop("rates")
                    print(json.dumps(r), flush=True)
                    rows.append(r)
                    shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nlocal[{args.cores}], split_bytes {ReaderConfig().split_bytes // MB} MiB:\n")
    print("| inputs | units_per_core | units | wall s | CPU s | CPU util | task occupancy | tail idle core-s "
          "| docs | load |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        what = f"{r['set']}: {r['files']} files, {r['mib']:.0f} MiB"
        upc = "0 (split_bytes)" if r["units_per_core"] == 0 else str(r["units_per_core"])
        print(
            f"| {what} | {upc} | {r['units']} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['util']:.0%} "
            f"| {r['occupancy']:.0%} | {r['tail_idle']:.1f} | {r['docs']} | {r['load']:.1f} |"
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
