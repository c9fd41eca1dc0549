"""`extract --index INDEX --where COND --warc-base BASE`: extract only the records an index query selects.

This is cc-pyspark's CCIndexWarcSparkJob (query the cc-index table, then fetch each selected
record by a ranged read instead of reading whole 1 GB WARCs), on this project's unit contract:

    driver   check BASE's form, open INDEX (cc-index-table Parquet: a file, a folder, crawl=/subset=
             partitions, local or s3://; or a CDXJ file), parse COND against its columns
             (curation/where.py) -- every mistake is exit status 2 before Spark starts -- then read
             the rows COND selects (only the columns needed, row groups pruned by pyarrow), group
             them into tasks of about `fetch.task_bytes` compressed bytes, and write each task's
             record list to `plan/<unit>.parquet` in the output folder
    task     one unit per task (core/runner.py: marker, stats, resume): fetch its records with
             ranged requests (curation/fetch.py: retries with backoff and jitter, per-host limit),
             write them, in index order, as a small local WARC (each record stays its own gzip
             member), and run the SAME reader and stages as file extraction over it
             (pipeline.run_unit_stages), with offsets mapped back to the original WARC's

So a document has the `warc_file`, `warc_offset` and id that extracting the whole file gives for
that record (tests/curation/test_index_extract.py compares them), and the reader's handling of
damaged records, the funnel, the rejected sample and the commit protocol are the file job's.

Units are named `index-<n>-<hash of their records>`: the same index, condition and task size
give the same names, so a rerun skips finished units; `_config.json` records the index (its files
and sizes), the condition, the base and `task_bytes`, and refuses a rerun with another of them.

Why the selection runs on the driver, not in Spark SQL as in cc-pyspark: the condition is checked
before any Spark work starts, this Spark has no S3 connector while pyarrow reads s3:// and
Common Crawl's partitioned layout directly, and a query reads only the columns it names. A
condition over a whole crawl (~2.5 billion rows) still means scanning those columns on one machine;
Athena (Common Crawl's recommendation) or a Spark cluster with hadoop-aws can write the selection as
Parquet, which is then the INDEX given here.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tempfile
from bisect import bisect_right
from itertools import groupby
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from core.errors import InputError
from core.output import SUBDIRS, OutputDir, check_folder_path
from core.runner import PerFileJob, RunResult, run_per_file
from core.storage import is_remote as is_object_store
from curation.ccindex import LOCATION_COLUMNS, read_cdxj
from curation.config import ExtractJobConfig
from curation.fetch import RangeFetcher, RecordRange, check_base, record_url
from curation.pipeline import UnitRun, run_unit_stages, stage_order
from curation.warc_warcio import crawl_from_name
from curation.where import parse_where

log = logging.getLogger(__name__)

__all__ = ["open_index", "plan_tasks", "process_index_unit", "run_index_extract", "select_records"]

PLAN_SCHEMA = pa.schema(
    [
        ("url", pa.string()),
        ("warc_filename", pa.string()),
        ("warc_record_offset", pa.int64()),
        ("warc_record_length", pa.int64()),
        ("crawl", pa.string()),
    ]
)
CDXJ_SUFFIXES = (".cdxj", ".cdxj.gz", ".cdx", ".cdx.gz")


# -- driver --------------------------------------------------------------------------------------


def open_index(index: str) -> tuple[ds.Dataset, dict[str, Any]]:
    """The index as a dataset, and what identifies it (its files and sizes) for the folder guard."""
    if index.endswith(CDXJ_SUFFIXES):
        if is_object_store(index) or "://" in index:
            raise InputError(f"--index {index!r}: a CDXJ index must be a local file (Parquet may be remote)")
        table = read_cdxj(index)
        return ds.dataset(table), {"uri": str(Path(index).resolve()), "files": {"": os.path.getsize(index)}}
    try:
        if "://" in index:
            import fsspec

            fs, _, paths = fsspec.get_fs_token_paths(index)
            root = paths[0].rstrip("/")
            if fs.isdir(root):  # Common Crawl's table: crawl=.../subset=... folders become columns
                files = {p: fs.size(p) for p in fs.find(root) if p.endswith(".parquet")}
                dataset = ds.dataset(root, filesystem=fs, format="parquet", partitioning="hive")
            else:
                files = {root: fs.size(root)}
                dataset = ds.dataset(root, filesystem=fs, format="parquet")
            ident = {"uri": index, "files": {p[len(root) :].lstrip("/"): n for p, n in sorted(files.items())}}
        else:
            path = Path(index).expanduser().resolve()
            if not path.exists():
                raise InputError(f"--index {index!r} not found")
            if path.is_dir():  # partition columns (crawl=/subset=) come from the folder names
                files = sorted(
                    p for p in path.rglob("*.parquet") if p.is_file() and not p.name.startswith((".", "_"))
                )
                dataset = ds.dataset(str(path), format="parquet", partitioning="hive")
                ident = {
                    "uri": str(path),
                    "files": {p.relative_to(path).as_posix(): p.stat().st_size for p in files},
                }
            else:
                dataset = ds.dataset(str(path), format="parquet")
                ident = {"uri": str(path), "files": {"": path.stat().st_size}}
    except InputError:
        raise
    except Exception as e:  # pyarrow/fsspec/botocore: an unreadable index in many forms
        raise InputError(f"cannot read --index {index!r}: {type(e).__name__}: {str(e)[:300]}") from None
    if not ident["files"]:
        raise InputError(f"--index {index!r} holds no Parquet file")
    missing = [c for c in LOCATION_COLUMNS if c not in dataset.schema.names]
    if missing:
        raise InputError(
            f"--index {index!r} has no column {', '.join(missing)}: not a cc-index table "
            f"(columns: {', '.join(dataset.schema.names[:20])})"
        )
    return dataset, ident


def select_records(dataset: ds.Dataset, expr: ds.Expression) -> pa.Table:
    """The selected rows' location columns (and crawl), sorted by file and offset, duplicates dropped."""
    cols = [*LOCATION_COLUMNS, *(["crawl"] if "crawl" in dataset.schema.names else [])]
    try:
        table = dataset.to_table(columns=cols, filter=expr)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"cannot read the selected rows of the index: {e}") from None
    if "crawl" not in table.column_names:
        table = table.append_column("crawl", pa.nulls(table.num_rows, pa.string()))
    table = table.select(["warc_filename", "warc_record_offset", "warc_record_length", "crawl"])
    table = table.cast(
        pa.schema(
            [
                ("warc_filename", pa.string()),
                ("warc_record_offset", pa.int64()),
                ("warc_record_length", pa.int64()),
                ("crawl", pa.string()),
            ]
        )
    )
    bad = pc.sum(
        pc.or_kleene(pc.less(table["warc_record_offset"], 0), pc.less_equal(table["warc_record_length"], 0))
    )
    if bad.as_py():
        raise InputError(
            f"the index has {bad.as_py()} selected rows with a negative offset or an empty length"
        )
    table = table.sort_by([("warc_filename", "ascending"), ("warc_record_offset", "ascending")])
    keys = pc.binary_join_element_wise(
        table["warc_filename"], pc.cast(table["warc_record_offset"], pa.string()), "#"
    )
    unique = pc.index_in(pc.unique(keys), keys)  # first row of each (file, offset)
    if len(unique) < table.num_rows:
        log.warning("the index lists %d records twice: each is read once", table.num_rows - len(unique))
        table = table.take(pc.sort_indices(unique))
    return table


def plan_tasks(table: pa.Table, task_bytes: int, base: str) -> list[tuple[str, pa.Table]]:
    """Cut the sorted selection into tasks of similar total length: (unit name, its rows).

    n = ceil(total / task_bytes) tasks; a record goes to the task whose 1/n slice of the cumulative
    length it starts in, so every task holds about total/n bytes (give or take one record) and the
    records of one WARC stay together and in order.
    """
    lengths = table["warc_record_length"].to_pylist()
    total = sum(lengths)
    n = max(1, -(-total // task_bytes))
    ids, acc = [], 0
    for length in lengths:
        ids.append(min(n - 1, acc * n // total))
        acc += length
    urls = [record_url(base, f) for f in table["warc_filename"].to_pylist()]
    table = table.append_column("url", pa.array(urls, pa.string())).select(PLAN_SCHEMA.names)
    out = []
    start = 0
    for k, group in groupby(ids):
        size = len(list(group))
        rows = table.slice(start, size)
        start += size
        h = hashlib.sha1()
        for u, o, ln in zip(
            *(rows[c].to_pylist() for c in ("url", "warc_record_offset", "warc_record_length"))
        ):
            h.update(f"{u}\t{o}\t{ln}\n".encode())
        out.append((f"index-{k:05d}-{h.hexdigest()[:12]}", rows))
    return out


def _plan_bytes(rows: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(rows.cast(PLAN_SCHEMA), buf, compression="zstd")
    return buf.getvalue()


def _files_table(done: list[dict[str, Any]]) -> dict[str, Any]:
    return {"files": {s["unit"]: {"input": s["input"], "docs": s["docs_written"]} for s in done}}


def run_index_extract(
    index: str,
    where: str,
    warc_base: str,
    output: str,
    cfg: ExtractJobConfig,
    master: str | None = None,
    spark_conf: dict[str, str] | None = None,
    progress: bool = True,
) -> RunResult:
    """Validate, select, plan, then run the missing tasks on Spark; raises UserError on bad input."""
    try:
        base = check_base(warc_base)
    except ValueError as e:
        raise InputError(str(e)) from None
    dataset, ident = open_index(index)
    expr, _columns = parse_where(where, dataset.schema)
    check_folder_path(output)  # before the selection reads anything large
    table = select_records(dataset, expr)
    if table.num_rows == 0:
        raise InputError(f"--where {where!r} selects no record of {index}")
    tasks = plan_tasks(table, cfg.fetch.task_bytes, base)
    log.warning(
        "%d records (%d bytes) selected from %s: %d tasks",
        table.num_rows,
        pc.sum(table["warc_record_length"]).as_py(),
        index,
        len(tasks),
    )
    job = PerFileJob(
        name="extract",
        config=cfg.to_dict(),
        fingerprint=cfg.fingerprint(),
        process=process_index_unit,
        payload=cfg,
        stage_order=tuple(stage_order(cfg)),
        subdirs=(*SUBDIRS, "plan"),
        guard_extra={"index": ident, "where": where, "warc_base": base, "task_bytes": cfg.fetch.task_bytes},
        guard_inputs=False,  # the index, condition and base above are the inputs
        stats_extra=_files_table,
    )
    out = OutputDir(output, job.subdirs)
    # The guard first (the runner repeats it): plan files go only into a folder of this query.
    created = out.prepare(job.name, job.config, job.fingerprint, job.guard_extra)
    units = []
    try:
        for unit, rows in tasks:
            plan = out.path("plan", f"{unit}.parquet")
            if not out.is_done(unit):
                out.store.write_bytes(plan, _plan_bytes(rows))
            units.append((plan, unit))
        return run_per_file(job, units, output, master=master, spark_conf=spark_conf, progress=progress)
    except BaseException:
        if created and not any(out.is_done(u) for _, u in units):
            out.discard()  # nothing done: leave no folder that claims this query
        raise


# -- task ----------------------------------------------------------------------------------------


def _read_plan(uri: str) -> pa.Table:
    from core.storage import open_store

    return pq.read_table(io.BytesIO(open_store(uri).read_bytes(uri)))


def process_index_unit(plan_uri: str, unit: str, cfg: ExtractJobConfig, out_root: str) -> dict[str, Any]:
    """Fetch the unit's records, run them through the file job's reader and stages, commit the unit.

    Raises FetchError (naming the unit, URL and range) when a record cannot be had: nothing is
    committed and a rerun retries the unit.
    """
    rows = _read_plan(plan_uri).to_pylist()
    fetcher = RangeFetcher(cfg.fetch, unit)

    def read(run: UnitRun) -> None:
        try:
            for (url, crawl), group in groupby(rows, key=lambda r: (r["url"], r["crawl"])):
                records = list(group)
                warc_name = url.rstrip("/").rsplit("/", 1)[-1]  # as process_unit names the file
                hint = crawl if crawl is not None else crawl_from_name(records[0]["warc_filename"])
                ranges = [RecordRange(url, r["warc_record_offset"], r["warc_record_length"]) for r in records]
                _read_fetched(run, fetcher, ranges, warc_name, hint)
        finally:
            run.stats.counters.update(fetcher.counters)

    return run_unit_stages(plan_uri, unit, cfg, out_root, read, {"records": len(rows)})


def _read_fetched(
    run: UnitRun, fetcher: RangeFetcher, ranges: list[RecordRange], warc_name: str, crawl
) -> None:
    """Write the fetched records one after another into a local file (each its own gzip member,
    as in the original), then read that file as any WARC, offsets mapped back."""
    fd, tmp = tempfile.mkstemp(prefix="refinery-records-", suffix=".warc.gz")
    try:
        starts: list[int] = []  # offset of each record in the local file
        with os.fdopen(fd, "wb") as f:
            for data in fetcher.fetch_all(ranges):
                starts.append(f.tell())
                f.write(data)
        origins = [r.offset for r in ranges]

        def original(offset: int) -> int:
            # a record's start maps exactly; a damaged region inside one maps to the same distance
            # into the original record (the reader's skip offsets fall there)
            i = max(0, bisect_right(starts, offset) - 1)
            return origins[i] + (offset - starts[i])

        run.read_file(tmp, warc_name, crawl=crawl, offsets=original)
    finally:
        os.unlink(tmp)
