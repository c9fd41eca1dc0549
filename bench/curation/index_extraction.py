"""Index-selected records by ranged reads vs whole WARCs, through a local Range server.

The shared WARCs (the per-record-gzip ones at the top of shared data's warc/) are indexed with
`curation.index.ccindex.build_index` and served by rangehttpserver on 127.0.0.1
(testkit/range_server.py, which counts the body bytes it sends). A condition selects about
10 % of the records: `content_digest` (a SHA-1 in base32, so its first character is uniform over
32 symbols) starting with one of 3 characters, a pseudo-random 3/32 = 9.4 % sample of the records
that have a digest. Then, for each path:

    whole files   every WARC fetched whole over HTTP (what `extract --input http://...` does:
                  curation/inputs.py downloads, then reads), then extracted whole
    index         the selected records only, one Range request each (curation/index/fetch.py), then
                  extracted by the index job's task (curation/index/job.py: same reader, same stages)

Reported per path: records read, bytes the server sent, requests, transfer seconds (the fetch
alone), extraction wall and CPU seconds (the whole per-unit task, fetch included, in this process,
without Spark: the CPU figure includes the server thread's), documents written. The documents of
the index path must be exactly the whole path's documents of the selected records (checked).
Load is printed: on a shared 2-core machine wall times are noisy; bytes are not.

    .venv/bin/python -m bench.curation.index_extraction [--skip-extract] [--warcs a.warc.gz,b.warc.gz]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import pyarrow.dataset as ds
import urllib3

from core.output import OutputDir, unit_name
from core.runner import run_unit
from curation.config import ExtractJobConfig
from curation.index.ccindex import build_index
from curation.index.fetch import RangeFetcher, RecordRange
from curation.index.job import open_index, plan_bytes, plan_tasks, process_index_unit, select_records
from curation.index.where import parse_where
from curation.pipeline import process_unit
from testkit.range_server import serving
from testkit.shared_data import shared_data_dir

WHERE = "content_digest LIKE 'A%' OR content_digest LIKE 'B%' OR content_digest LIKE 'C%'"


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def docs_of(folder: Path) -> list[tuple]:
    t = ds.dataset(str(folder / "docs")).to_table(columns=["id", "text", "warc_file", "warc_offset"])
    return sorted(zip(*(t[c].to_pylist() for c in t.column_names)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--warcs", default=None, help="comma-separated file names (default: every top-level .warc.gz)"
    )
    ap.add_argument("--skip-extract", action="store_true", help="measure the transfers only")
    args = ap.parse_args()
    warc_dir = shared_data_dir() / "warc"
    names = args.warcs.split(",") if args.warcs else sorted(p.name for p in warc_dir.glob("*.warc.gz"))
    tmp = Path(tempfile.mkdtemp(prefix="bench-index-"))
    cfg = ExtractJobConfig()

    t0 = time.perf_counter()
    report = build_index([str(warc_dir / n) for n in names], str(tmp / "index.parquet"))
    index_s = time.perf_counter() - t0
    dataset, _ = open_index(str(tmp / "index.parquet"))
    selected = select_records(dataset, parse_where(WHERE, dataset.schema)[0])
    total_bytes = sum((warc_dir / n).stat().st_size for n in names)
    print(
        f"{len(names)} WARCs, {total_bytes / 2**20:.1f} MiB, {report.rows} records indexed in {index_s:.1f} s; "
        f"selected {selected.num_rows} ({selected.num_rows / report.rows:.1%}) by: {WHERE}"
    )
    rows: dict[str, dict] = {}
    with serving(warc_dir) as srv:
        # -- transfers alone
        http = urllib3.PoolManager()
        srv.reset_counts()
        t0 = time.perf_counter()
        for n in names:
            with http.request("GET", srv.url + n, preload_content=False) as r:
                for _chunk in r.stream(1 << 20):
                    pass
        rows["whole files"] = {"records": report.rows, "bytes": srv.bytes_sent, "requests": srv.requests}
        rows["whole files"]["transfer_s"] = time.perf_counter() - t0
        srv.reset_counts()
        ranges = [
            RecordRange(srv.url + f, o, ln)
            for f, o, ln in zip(
                *(
                    selected[c].to_pylist()
                    for c in ("warc_filename", "warc_record_offset", "warc_record_length")
                )
            )
        ]
        t0 = time.perf_counter()
        fetched = sum(len(b) for b in RangeFetcher(cfg.fetch).fetch_all(ranges))
        rows["index (ranged)"] = {"records": len(ranges), "bytes": srv.bytes_sent, "requests": srv.requests}
        rows["index (ranged)"]["transfer_s"] = time.perf_counter() - t0
        assert fetched == srv.bytes_sent == sum(r.length for r in ranges)
        print(f"transfers done ({load()})")

        if not args.skip_extract:
            # -- whole extraction: every file downloaded over HTTP and read whole
            whole = OutputDir(tmp / "whole")
            whole.prepare("extract", cfg.to_dict(), cfg.fingerprint())
            srv.reset_counts()
            t0, c0 = time.perf_counter(), cpu()
            for n in names:
                uri = srv.url + n
                assert run_unit(process_unit, (uri, unit_name(uri)), cfg, str(whole.root))["status"] == "done"
            rows["whole files"].update(extract_s=time.perf_counter() - t0, cpu_s=cpu() - c0)
            rows["whole files"]["docs"] = len(docs_of(tmp / "whole"))
            print(f"whole extraction done ({load()})")
            # -- index extraction: the job's units, run here one after another
            out = OutputDir(tmp / "index", ("docs", "rejected", "stats", "done", "plan"))
            out.prepare("extract", cfg.to_dict(), cfg.fingerprint())
            srv.reset_counts()
            t0, c0 = time.perf_counter(), cpu()
            for unit, table in plan_tasks(selected, cfg.fetch.task_bytes, srv.url):
                plan = out.path("plan", f"{unit}.parquet")
                out.store.write_bytes(plan, plan_bytes(table))
                assert run_unit(process_index_unit, (plan, unit), cfg, str(out.root))["status"] == "done"
            rows["index (ranged)"].update(extract_s=time.perf_counter() - t0, cpu_s=cpu() - c0)
            index_docs = docs_of(tmp / "index")
            rows["index (ranged)"]["docs"] = len(index_docs)
            keys = set(zip(*(selected[c].to_pylist() for c in ("warc_filename", "warc_record_offset"))))
            expected = [d for d in docs_of(tmp / "whole") if (d[2], d[3]) in keys]
            rows["index (ranged)"]["same_docs_as_whole"] = index_docs == expected
            print(f"index extraction done ({load()})")

    print(f"\n{'path':<16} {'records':>8} {'MiB sent':>9} {'requests':>9} {'transfer s':>11} "
          f"{'extract s':>10} {'CPU s':>7} {'docs':>6}")  # fmt: skip
    for name, r in rows.items():
        ext = (
            f"{r['extract_s']:>10.1f} {r['cpu_s']:>7.1f} {r['docs']:>6}"
            if "extract_s" in r
            else f"{'-':>10} {'-':>7} {'-':>6}"
        )
        print(
            f"{name:<16} {r['records']:>8} {r['bytes'] / 2**20:>9.2f} {r['requests']:>9} "
            f"{r['transfer_s']:>11.2f} {ext}"
        )
    w, i = rows["whole files"], rows["index (ranged)"]
    print(f"\nindex path sends {i['bytes'] / w['bytes']:.1%} of the bytes ({load()})")
    if "same_docs_as_whole" in i:
        print(f"index documents == whole-file documents of the selected records: {i['same_docs_as_whole']}")
    print(json.dumps({"where": WHERE, "warcs": len(names), "load": os.getloadavg(), **rows}, default=str))


if __name__ == "__main__":
    main()
