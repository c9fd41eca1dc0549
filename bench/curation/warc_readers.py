"""Benchmark the two WARC engines on the real WARCs in shared data: warcio vs FastWARC.

Four readers, each over every file, N passes each (best of N reported; page cache warmed first):
  (a) warcio-raw      warcio's ArchiveIterator, every record's payload read (`content_stream()`,
                      so chunking and content-encoding undone)
  (b) fastwarc-raw    FastWARC's ArchiveIterator, every record's payload read (`auto_decode="all"`)
  (c) iter_records    our reader `curation.warc.records.iter_records`, engine=warcio
  (d) iter_records    the same, engine=fastwarc (curation/warc/fastwarc_reader.py)

records/s counts WARC records (items, for our reader: one per record on these clean files);
MB/s is compressed input bytes read per second (1 MB = 10^6 bytes). The ratio lines give the
FastWARC rate over the warcio rate, raw and end to end through our reader.

Default input: pages-*.warc.gz (1,171 real HTML pages repackaged as per-record-gzip WARCs) and the
Common Crawl samples cc-main-*.warc.gz. There is no full-size Common Crawl WARC in shared data.

    .venv/bin/python -m bench.curation.warc_readers [--repeat 3] [--files PATH ...]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

from curation.config import ReaderConfig
from curation.warc.records import iter_records
from testkit.shared_data import shared_data_dir

DEFAULT_GLOBS = ("pages-*.warc.gz", "cc-main-*.warc.gz")


def warcio_raw(path: str) -> tuple[int, int]:
    from warcio.archiveiterator import ArchiveIterator

    records = nbytes = 0
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f):
            nbytes += len(rec.content_stream().read())
            records += 1
    return records, nbytes


def fastwarc_raw(path: str) -> tuple[int, int]:
    from fastwarc import ArchiveIterator

    records = nbytes = 0
    for rec in ArchiveIterator(path, auto_decode="all", fsspec_args=False):
        nbytes += len(rec.reader.read())
        records += 1
    return records, nbytes


def our_reader(engine: str) -> Callable[[str], tuple[int, int]]:
    cfg = ReaderConfig(engine=engine)

    def run(path: str) -> tuple[int, int]:
        records = nbytes = 0
        for item in iter_records(path, cfg):
            records += 1
            nbytes += len(getattr(item, "payload", b""))
        return records, nbytes

    return run


READERS: dict[str, Callable[[str], tuple[int, int]]] = {
    "warcio-raw": warcio_raw,
    "fastwarc-raw": fastwarc_raw,
    "iter_records[warcio]": our_reader("warcio"),
    "iter_records[fastwarc]": our_reader("fastwarc"),
}


def best_of(
    readers: dict[str, Callable[[str], tuple[int, int]]], files: list[str], repeat: int
) -> dict[str, tuple[float, int, int]]:
    """Per reader: best wall time of a pass over all files, and the records and payload bytes seen.

    Passes go round-robin over the readers, so that a burst of load from elsewhere on the machine
    slows one pass of each rather than every pass of one reader.
    """
    best: dict[str, tuple[float, int, int]] = {}
    for _ in range(repeat):
        for name, fn in readers.items():
            t0 = time.perf_counter()
            counts = [fn(f) for f in files]
            secs = time.perf_counter() - t0
            if name not in best or secs < best[name][0]:
                best[name] = (secs, sum(c[0] for c in counts), sum(c[1] for c in counts))
    return best


def default_files() -> list[Path]:
    root = shared_data_dir() / "warc"
    return sorted({p for g in DEFAULT_GLOBS for p in root.glob(g)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--repeat", type=int, default=3, help="passes per reader; the best is reported")
    ap.add_argument(
        "--files", nargs="+", type=Path, help=f"WARCs to read (default: {', '.join(DEFAULT_GLOBS)})"
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # warcio's and our damage warnings are not timed output

    files = [str(p) for p in (args.files or default_files())]
    if not files:
        ap.error("no WARC files found")
    size = sum(Path(f).stat().st_size for f in files)
    for f in files:  # warm the page cache: time parsing, not the disk
        Path(f).read_bytes()
    print(f"{len(files)} files, {size / 1e6:.1f} MB compressed, best of {args.repeat}")
    for f in files:
        print(f"  {Path(f).name}")

    results = best_of(READERS, files, args.repeat)

    header = f"{'reader':<24} {'records':>8} {'payload MB':>11} {'best s':>8} {'records/s':>10} {'MB/s':>7}"
    print()
    print(header)
    print("-" * len(header))
    for name, (secs, records, nbytes) in results.items():
        print(
            f"{name:<24} {records:>8} {nbytes / 1e6:>11.1f} {secs:>8.3f} {records / secs:>10.0f} "
            f"{size / 1e6 / secs:>7.1f}"
        )
    print()
    for label, fast, slow in (
        ("raw ArchiveIterator", "fastwarc-raw", "warcio-raw"),
        ("our iter_records", "iter_records[fastwarc]", "iter_records[warcio]"),
    ):
        print(f"fastwarc/warcio throughput, {label}: {results[slow][0] / results[fast][0]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
