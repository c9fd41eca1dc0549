"""What a percentile selector (`quality: "top 30%"`) costs on the driver before `tokenize` starts.

`core.selectors.resolve_percentiles` reads only the selectors' columns of a source's Parquet files and
ranks the values (numpy partition). This prints its time against reading the whole files (what it would
cost without column projection), for sources of growing size. There is no large corpus in ../shared: the
documents are the 218 real Common Crawl pages of the DCLM human labels, repeated to each size into
`--files` Parquet files, with their real length `chars` and human `label` as columns (said in the output).

    .venv/bin/python bench/tokens/percentile_resolve.py [--rows 100000 1000000] [--files 8] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa
import pyarrow.parquet as pq

from core.files import doc_parquet_uris
from core.selectors import parse_selectors, resolve_percentiles
from testkit.shared_data import shared_data_dir


def make_source(root: Path, rows: int, files: int) -> int:
    """`files` Parquet files holding `rows` documents (the labelled pages, repeated); returns their bytes."""
    path = shared_data_dir() / "quality" / "dclm_human_labels_dev.jsonl"
    docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    per_file = rows // files
    for i in range(files):
        picked = [docs[(i * per_file + j) % len(docs)] for j in range(per_file)]
        table = pa.table(
            {
                "text": [d["text"] for d in picked],
                "label": pa.array([d["label"] for d in picked], pa.int64()),
                "chars": pa.array([len(d["text"]) for d in picked], pa.int64()),
            }
        )
        pq.write_table(table, root / f"part-{i:03d}.parquet")
    return sum(f.stat().st_size for f in root.glob("*.parquet"))


def best(fn, runs: int, *args) -> tuple[float, object]:
    """(best seconds of `runs` calls of fn(*args), its last result)."""
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times), result


def read_whole(files: list[str]) -> list:
    return [pq.read_table(f) for f in files]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    sels = parse_selectors({"label": 1, "chars": "top 30%"})
    print("documents: the 218 DCLM human-labelled CC pages, repeated; best of", args.runs, "runs")
    print("| documents | files | MB on disk | resolve (s) | docs/s | read whole files (s) | threshold |")
    print("|---|---|---|---|---|---|---|")
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as tmp:
            nbytes = make_source(Path(tmp), rows, args.files)
            files = doc_parquet_uris(tmp)
            resolve, (resolved, _) = best(resolve_percentiles, args.runs, sels, files)
            whole, _ = best(read_whole, args.runs, files)
            print(
                f"| {rows:,} | {args.files} | {nbytes / 1e6:,.0f} | {resolve:.3f} | {rows / resolve:,.0f} "
                f"| {whole:.3f} | {resolved[1].to_spec()} |"
            )


if __name__ == "__main__":
    main()
