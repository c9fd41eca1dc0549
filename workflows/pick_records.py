"""`python -m workflows pick-records`: the first N records a condition selects in a cc-index, as a small index.

    python -m workflows pick-records --index INDEX --where COND --records N --output FILE.parquet

The demo's "N records from Common Crawl" input (`make demo INDEX=... RECORDS=N`): `extract --index`
extracts every record its condition selects, which over a real crawl's index is millions; this step
writes the first N selected rows (in the index's own order) to a local Parquet file with the location
columns, `crawl` and the columns the condition reads, so that `extract --index FILE --where COND`
selects exactly those rows again and fetches each by a ranged read (curation/index/job.py).

INDEX is what `extract --index` opens (a Parquet file or folder, local or s3://, or a CDXJ file:
curation.index.job.open_index), or one http(s):// Parquet file, read with ranged requests (fsspec's
HTTP file system), such as a line of Common Crawl's `cc-index-table.paths.gz` under
https://data.commoncrawl.org/. The scan stops once N rows are found, so only the first row groups
that hold them are read. A condition that selects nothing is exit status 2.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from core.errors import InputError
from core.output import atomic_write_bytes

HTTP = ("http://", "https://")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--index", required=True, help="a cc-index table: Parquet (local, s3://, http(s)://) or CDXJ"
    )
    ap.add_argument("--where", required=True, metavar="SQL", help="SQL condition over the index columns")
    ap.add_argument("--records", required=True, type=int, metavar="N", help="how many records to keep")
    ap.add_argument("--output", required=True, metavar="FILE.parquet", help="the small index to write")


def open_dataset(index: str) -> ds.Dataset:
    """The index as a pyarrow dataset: an http(s) Parquet file by ranged reads, else extract's own opener."""
    if index.startswith(HTTP):
        import fsspec

        # Not open_index: fsspec's HTTP `isdir` downloads the whole (1 GB) file looking for links.
        try:
            return ds.dataset(index, filesystem=fsspec.filesystem("http"), format="parquet")
        except Exception as e:  # fsspec/aiohttp/pyarrow: an unreachable or unreadable URL in many forms
            raise InputError(f"cannot read --index {index!r}: {type(e).__name__}: {str(e)[:300]}") from None
    from curation.index.job import open_index

    return open_index(index)[0]


def pick_records(index: str, where: str, records: int) -> pa.Table:
    """The first `records` rows `where` selects, with the columns `extract --index` needs (docstring)."""
    from curation.index.ccindex import LOCATION_COLUMNS
    from curation.index.where import parse_where

    if records < 1:
        raise InputError(f"--records must be at least 1, got {records}")
    dataset = open_dataset(index)
    expr, used = parse_where(where, dataset.schema)
    names = dataset.schema.names
    wanted = [*LOCATION_COLUMNS, "crawl", *sorted(used)]
    columns = [c for c in dict.fromkeys(wanted) if c in names]
    missing = [c for c in LOCATION_COLUMNS if c not in names]
    if missing:
        raise InputError(f"--index {index!r} has no column {', '.join(missing)}: not a cc-index table")
    # One file and one batch ahead at a time: the scan ends at the N-th row, not after the whole index.
    scanner = dataset.scanner(columns=columns, filter=expr, batch_readahead=1, fragment_readahead=1)
    batches, rows = [], 0
    for batch in scanner.to_batches():
        batches.append(batch)
        rows += batch.num_rows
        if rows >= records:
            break
    table = pa.Table.from_batches(batches, scanner.projected_schema).slice(0, records)
    if table.num_rows == 0:
        raise InputError(f"--where {where!r} selects no record of --index {index!r}")
    return table


def run(args: argparse.Namespace) -> int:
    table = pick_records(args.index, args.where, args.records)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, buf.getvalue())  # written last and whole: the step's completion marker
    print(f"{table.num_rows:,} records of {args.index} -> {out}")
    return 0
