"""`extract --index INDEX --where COND --warc-base BASE`: extract only the records an index query selects.

This is cc-pyspark's CCIndexWarcSparkJob (query the cc-index table, then fetch each selected
record by a ranged read instead of reading whole 1 GB WARCs), on this project's unit contract:

    driver   check BASE's form, open INDEX (cc-index-table Parquet: a file, a folder, crawl=/subset=
             partitions, local, hdfs://, s3a:// or s3://; or a CDXJ file) and list its files, parse
             COND against its columns (curation/index/where.py) -- every mistake is exit status 2 before
             Spark starts
    select   the rows COND selects, each (file, offset) once, in (file, offset) order, cut into
             tasks of about `fetch.task_bytes` compressed bytes, each task's record list written to
             `plan/<unit>.parquet` in the output folder; on Spark or on the driver (below)
    task     one unit per task (core/runner.py: marker, stats, resume): fetch its records with
             ranged requests (curation/index/fetch.py: retries with backoff and jitter, per-host limit),
             write them, in index order, as a small local WARC (each record stays its own gzip
             member), and run the SAME reader and stages as file extraction over it
             (pipeline.run_unit_stages), with offsets mapped back to the original WARC's

Every `warc_filename` is data: it must resolve under BASE (curation/inputs.resolve_under: no
`..` above it, no absolute path, `file://`, other scheme, host, port or bucket, no symbolic link
out of a local BASE). On the driver path a selected row that does not is exit status 2 naming it,
before Spark starts. On the Spark path the rows are first seen in a Spark task: such a row is
planned without a URL and its task counts it as the `read` drop `location_outside_base` (a sample
in `rejected/`). Tasks resolve each name again, from the base the plan file records, right before
reading: a plan file or a symbolic link changed since planning still cannot lead out of BASE.

So a document has the `warc_file`, `warc_offset` and id that extracting the whole file gives for
that record (tests/curation/test_index_extract.py compares them), and the reader's handling of
damaged records, the funnel, the rejected sample and the commit protocol are the file job's.

Units are named `index-<n>-<hash of their records>`: the same index, condition and task size
give the same names, so a rerun skips finished units; `_config.json` records the index (its files
and sizes), the condition, the base and `task_bytes`, and refuses a rerun with another of them.

Where the selection runs (`fetch.select`, default `auto`: Spark for an index of more than
`fetch.driver_max_rows` rows that Spark can read, else the driver): on Spark (`spark_plan`) for a Parquet
index Spark can read -- a local or shared path, file://, hdfs://, s3a:// and other Hadoop schemes:
`spark.read.parquet`, the condition as a Spark Column built from where.py's parse tree, duplicates
dropped by a window, cumulative bytes from a per-file prefix (a window over one row per WARC file)
plus a per-file running sum, and one Spark task per group of units that hashes and writes their
plan files. The driver only ever holds one (name, rows, bytes) summary per unit, so a broad
condition over a whole crawl (~2.5 billion rows) does not exhaust it. On the driver
(`select_records` + `plan_tasks`, pyarrow: only the named columns, row groups and partitions
pruned) for a CDXJ index and for s3://, which this Spark cannot read (it has no S3 connector;
`fetch.select: spark` forces Spark where one maps s3://, as on EMR). Both give the same units, names
included (tests/curation/test_index_extract.py compares them).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tempfile
from bisect import bisect_right
from functools import partial
from itertools import groupby
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from core.errors import InputError
from core.output import SUBDIRS, OutputDir, check_folder_path
from core.runner import RunResult, run_per_file
from core.spark import DEFAULT_SPARK, SparkOptions, check_master, get_spark
from core.storage import is_object_store
from curation.config import ExtractJobConfig
from curation.index.ccindex import LOCATION_COLUMNS, read_cdxj
from curation.index.fetch import RangeFetcher, RecordRange, check_base, record_url
from curation.index.where import parse_where, spark_where
from curation.inputs import UnsafeLocation
from curation.pipeline import SPARK_CONF, UnitRun, extract_job, run_unit_stages
from curation.warc.warcio_reader import crawl_from_name

log = logging.getLogger(__name__)

__all__ = [
    "open_index",
    "plan_bytes",
    "plan_tasks",
    "process_index_unit",
    "run_index_extract",
    "select_on_spark",
    "select_records",
    "spark_plan",
]

SELECT_SCHEMA = pa.schema(
    [
        ("warc_filename", pa.string()),
        ("warc_record_offset", pa.int64()),
        ("warc_record_length", pa.int64()),
        ("crawl", pa.string()),
    ]
)
# A plan row: the URL the task reads the record from (null: refused), then the selected row.
PLAN_SCHEMA = pa.schema([("url", pa.string()), *SELECT_SCHEMA])
SUMMARY_SCHEMA = pa.schema(
    [
        ("k", pa.int64()),
        ("unit", pa.string()),
        ("rows", pa.int64()),
        ("bytes", pa.int64()),
        ("refused", pa.int64()),
    ]
)
# The drop reason of a row whose warc_filename does not resolve under --warc-base (seen in a task).
REFUSED = "location_outside_base"
# Plan-file metadata key of the base the task resolves warc_filename under (the plan's `url` is
# what the planner saw; the task checks again at the moment it reads).
BASE_KEY = b"refinery_warc_base"
CDXJ_SUFFIXES = (".cdxj", ".cdxj.gz", ".cdx", ".cdx.gz")
# Index locations `fetch.select: auto` reads with Spark: a path (local or a shared mount), and
# the Hadoop filesystems a stock Spark (hdfs) or one with hadoop-aws (s3a) reads. s3:// is read on
# the driver: stock Spark has no filesystem for it.
SPARK_SCHEMES = ("", "file", "hdfs", "s3a")
# Spark tasks that write plan files: a task writes the plans of the units hashed to it (a few
# hundred rows to a few thousand each), so a whole crawl's ~10^6 units need not be 10^6 tasks.
MAX_PLAN_PARTITIONS = 4096


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
    table = table.select(SELECT_SCHEMA.names).cast(SELECT_SCHEMA)
    bad = pc.sum(
        pc.or_kleene(pc.less(table["warc_record_offset"], 0), pc.less_equal(table["warc_record_length"], 0))
    )
    if bad.as_py():
        raise InputError(
            f"the index has {bad.as_py()} selected rows with a negative offset or an empty length"
        )
    # Of duplicates, the shortest (then the smallest crawl, null last) is kept: a rule Spark's
    # window applies too (spark_plan), where "the first in the index" has no meaning.
    table = table.sort_by(
        [
            ("warc_filename", "ascending"),
            ("warc_record_offset", "ascending"),
            ("warc_record_length", "ascending"),
            ("crawl", "ascending"),
        ]
    )
    keys = pc.binary_join_element_wise(
        table["warc_filename"], pc.cast(table["warc_record_offset"], pa.string()), "#"
    )
    unique = pc.index_in(pc.unique(keys), keys)  # first row of each (file, offset)
    if len(unique) < table.num_rows:
        log.warning("the index lists %d records twice: each is read once", table.num_rows - len(unique))
        # the first rows' positions, in order (not sort_indices(unique): positions into `unique`,
        # which took the wrong rows whenever the index had duplicates)
        table = table.take(pc.take(unique, pc.sort_indices(unique)))
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
    out = []
    start = 0
    for k, group in groupby(ids):
        size = len(list(group))
        out.append(_unit(k, table.slice(start, size), base))
        start += size
    return out


def _locations(names: list, base: str) -> dict[Any, str | UnsafeLocation]:
    """Each distinct name's location under `base`, or the UnsafeLocation that refuses it."""
    out: dict[Any, str | UnsafeLocation] = {}
    for name in names:
        if name not in out:  # rows come grouped by file: one resolution per WARC
            try:
                out[name] = record_url(base, name)
            except UnsafeLocation as e:
                out[name] = e
    return out


def check_locations(table: pa.Table, base: str, index: str) -> None:
    """InputError naming the first selected row whose warc_filename does not resolve under `base`
    (the driver's check, before Spark starts)."""
    names = table["warc_filename"]
    for name, where in _locations(pc.unique(names).to_pylist(), base).items():
        if isinstance(where, UnsafeLocation):
            row = pc.index(names, name).as_py() if name is not None else None
            offset = table["warc_record_offset"][row].as_py() if row is not None and row >= 0 else None
            refused = pc.sum(pc.equal(names, name)).as_py() if name is not None else None
            raise InputError(
                f"--index {index!r}: the selected row warc_filename={name!r} "
                f"(warc_record_offset {offset}; {refused or 'some'} selected rows name it) is "
                f"refused: {where.reason} (--warc-base {base})"
            )


def _unit(k: int, rows: pa.Table, base: str) -> tuple[str, pa.Table]:
    """Task k's name `index-<k>-<sha1 of its records>` and plan rows (PLAN_SCHEMA), from its
    (warc_filename, warc_record_offset, warc_record_length, crawl) rows in order.

    A row whose warc_filename does not resolve under `base` gets a null url (its task counts it).
    """
    names = rows["warc_filename"].to_pylist()
    where = _locations(names, base)
    urls = [u if isinstance(u := where[f], str) else None for f in names]
    rows = rows.append_column("url", pa.array(urls, pa.string())).select(PLAN_SCHEMA.names)
    rows = rows.replace_schema_metadata({BASE_KEY: base.encode()})
    h = hashlib.sha1()
    for u, f, o, ln in zip(
        urls, names, *(rows[c].to_pylist() for c in ("warc_record_offset", "warc_record_length"))
    ):
        h.update(f"{u if u is not None else f'refused:{f}'}\t{o}\t{ln}\n".encode())
    return f"index-{k:05d}-{h.hexdigest()[:12]}", rows


def select_on_spark(index: str, mode: str, rows: int | None = None, driver_max_rows: int = 0) -> bool:
    """Whether `fetch.select` = `mode` selects `index`'s rows on Spark (see the module docstring).

    `auto` also keeps an index of at most `driver_max_rows` rows (`rows`, from the Parquet footers)
    on the driver: its selection fits there whatever the condition, and Spark's shuffles would
    cost more than the selection itself.
    """
    cdxj = index.endswith(CDXJ_SUFFIXES)
    if mode == "spark" and cdxj:
        raise InputError(
            f"--index {index!r}: fetch.select=spark reads Parquet; a CDXJ index is read on the driver"
        )
    if mode != "auto":
        return mode == "spark"
    scheme = index.split("://", 1)[0].lower() if "://" in index else ""
    small = rows is not None and rows <= driver_max_rows
    return not cdxj and scheme in SPARK_SCHEMES and not small


def _spark_uri(index: str, ident: dict[str, Any]) -> str:
    # a local path as file:// so a cluster whose default filesystem is HDFS reads the shared path
    return Path(ident["uri"]).as_uri() if "://" not in index else index


def _selected_on_spark(spark, index_uri: str, where: str, schema: pa.Schema):
    """The selected rows' locations, one row per (file, offset) (the shortest copy, `_copies` counted),
    partitioned by file and persisted: spark_plan reads them twice."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.read.parquet(index_uri).filter(spark_where(where, schema))
    crawl = F.col("crawl") if "crawl" in df.columns else F.lit(None)
    sel = df.select(
        F.col("warc_filename").cast("string").alias("warc_filename"),
        F.col("warc_record_offset").cast("long").alias("warc_record_offset"),
        F.col("warc_record_length").cast("long").alias("warc_record_length"),
        crawl.cast("string").alias("crawl"),
    )
    key = Window.partitionBy("warc_filename", "warc_record_offset")
    shortest = key.orderBy(F.col("warc_record_length").asc(), F.col("crawl").asc_nulls_last())
    sel = (
        sel.repartition("warc_filename")  # the windows below (by file, by file and offset) reuse it
        .withColumn("_copies", F.count(F.lit(1)).over(key))
        .withColumn("_rank", F.row_number().over(shortest))
        .filter("_rank = 1")
        .drop("_rank")
        .persist(StorageLevel.MEMORY_AND_DISK)  # read twice: the totals, then the plan
    )
    return sel


def spark_plan(
    spark, index_uri: str, where: str, schema: pa.Schema, task_bytes: int, base: str, plan_dir: str
) -> list[tuple[str, int, int]]:
    """select_records + plan_tasks + the plan files, in Spark: (unit, rows, bytes) of each unit, in order.

    The same rows, duplicates rule, order and cut as the driver path (so the same unit names); the
    driver receives one summary per unit, never the rows. `where` must have passed parse_where.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    sel = _selected_on_spark(spark, index_uri, where, schema)
    try:
        bad = (F.col("warc_record_offset") < 0) | (F.col("warc_record_length") <= 0)
        totals = sel.agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum("warc_record_length").alias("bytes"),
            F.sum(F.col("_copies") - 1).alias("copies"),
            F.sum(bad.cast("long")).alias("bad"),
        ).first()
        if totals["bad"]:
            raise InputError(
                f"the index has {totals['bad']} selected rows with a negative offset or an empty length"
            )
        if not totals["rows"]:
            return []
        if totals["copies"]:
            log.warning("the index lists %d records twice: each is read once", totals["copies"])
        total = int(totals["bytes"])
        n = max(1, -(-total // task_bytes))
        # A record's cumulative start = the bytes of all files before its own (a running sum over
        # one row per WARC file: ~100,000 for a whole crawl, in one partition) + the bytes before
        # it in its file. Its task is acc * n // total (plan_tasks' rule), in exact decimals: acc * n
        # overflows a long on a whole crawl.
        files = sel.groupBy("warc_filename").agg(F.sum("warc_record_length").alias("_fbytes"))
        before = Window.orderBy("warc_filename").rowsBetween(Window.unboundedPreceding, -1)
        files = files.select(
            "warc_filename", F.coalesce(F.sum("_fbytes").over(before), F.lit(0)).alias("_fstart")
        )
        within = (
            Window.partitionBy("warc_filename")
            .orderBy("warc_record_offset")
            .rowsBetween(Window.unboundedPreceding, -1)
        )
        acc = F.col("_fstart") + F.coalesce(F.sum("warc_record_length").over(within), F.lit(0))
        task = F.expr(
            f"least({n - 1}, (CAST(_acc AS DECIMAL(20,0)) * CAST({n} AS DECIMAL(20,0))) "
            f"div CAST({total} AS DECIMAL(20,0)))"
        )
        rows = sel.join(F.broadcast(files), "warc_filename").withColumn("_acc", acc)
        planned = (
            rows.select(task.cast("long").alias("_task"), *SELECT_SCHEMA.names)
            .repartition(min(n, MAX_PLAN_PARTITIONS), "_task")
            .sortWithinPartitions("_task", "warc_filename", "warc_record_offset")
            .mapInArrow(
                partial(_write_plans, base=base, plan_dir=plan_dir),
                "k long, unit string, rows long, bytes long, refused long",
            )
            .collect()
        )
    finally:
        sel.unpersist()
    refused = sum(r["refused"] for r in planned)
    if refused:
        log.warning(
            "%d selected rows name a WARC outside --warc-base %s: not read, counted as %r",
            refused,
            base,
            REFUSED,
        )
    return [(r["unit"], r["rows"], r["bytes"]) for r in sorted(planned, key=lambda r: r["k"])]


def _write_plans(batches, base: str, plan_dir: str):
    """Spark task of spark_plan: its rows, sorted by task then (file, offset) -> each task's plan
    file, and one summary row per task."""
    from core.storage import join, open_store

    batches = list(batches)
    table = pa.Table.from_batches(batches) if batches else None
    if table is None or table.num_rows == 0:
        return
    store = open_store(plan_dir)
    start = 0
    for k, group in groupby(table["_task"].to_pylist()):
        size = len(list(group))
        rows = table.slice(start, size).select(SELECT_SCHEMA.names).cast(SELECT_SCHEMA)
        start += size
        unit, plan = _unit(k, rows, base)
        store.write_bytes(join(plan_dir, f"{unit}.parquet"), plan_bytes(plan))
        summary = {
            "k": [k],
            "unit": [unit],
            "rows": [size],
            "bytes": [pc.sum(rows["warc_record_length"]).as_py()],
            "refused": [plan["url"].null_count],
        }
        yield pa.RecordBatch.from_pydict(summary, schema=SUMMARY_SCHEMA)


def plan_bytes(rows: pa.Table) -> bytes:
    buf = io.BytesIO()
    # cast() drops the schema metadata: the base the task resolves against is put back
    pq.write_table(
        rows.cast(PLAN_SCHEMA).replace_schema_metadata(rows.schema.metadata), buf, compression="zstd"
    )
    return buf.getvalue()


def run_index_extract(
    index: str,
    where: str,
    warc_base: str,
    output: str,
    cfg: ExtractJobConfig,
    *,
    spark: SparkOptions = DEFAULT_SPARK,
) -> RunResult:
    """Validate, select, plan, then run the missing tasks on Spark; raises UserError on bad input."""
    try:
        base = check_base(warc_base)
    except ValueError as e:
        raise InputError(str(e)) from None
    dataset, ident = open_index(index)
    expr, _columns = parse_where(where, dataset.schema)
    check_folder_path(output)  # before the selection reads anything large
    check_master(spark.master)
    rows_in_index = dataset.count_rows() if cfg.fetch.select == "auto" else None  # footers only
    on_spark = select_on_spark(index, cfg.fetch.select, rows_in_index, cfg.fetch.driver_max_rows)
    tasks: list[tuple[str, pa.Table]] = []
    if not on_spark:
        table = select_records(dataset, expr)
        if table.num_rows == 0:
            raise InputError(f"--where {where!r} selects no record of {index}")
        check_locations(table, base, index)
        tasks = plan_tasks(table, cfg.fetch.task_bytes, base)
    job = extract_job(
        cfg,
        process_index_unit,
        subdirs=(*SUBDIRS, "plan"),
        guard_extra={"index": ident, "where": where, "warc_base": base, "task_bytes": cfg.fetch.task_bytes},
        guard_inputs=False,  # the index, condition and base above are the inputs
        inputs_guarded=True,  # the units are the plan files below, written into the output folder
    )
    out = OutputDir(output, job.subdirs)
    # The guard first (the runner repeats it): plan files go only into a folder of this query.
    created = out.prepare(job.name, job.config, job.fingerprint, job.guard_extra)
    units: list[tuple[str, str]] = []
    try:
        if on_spark:  # Spark writes the plan files; the driver gets (unit, rows, bytes) per unit
            session = get_spark(spark.master, "refinery-extract", {**SPARK_CONF, **spark.conf})
            planned = spark_plan(
                session,
                _spark_uri(index, ident),
                where,
                dataset.schema,
                cfg.fetch.task_bytes,
                base,
                out.path("plan"),
            )
            if not planned:
                raise InputError(f"--where {where!r} selects no record of {index}")
            units = [(out.path("plan", f"{unit}.parquet"), unit) for unit, _, _ in planned]
            rows, nbytes = sum(r for _, r, _ in planned), sum(b for _, _, b in planned)
        else:
            for unit, plan_rows in tasks:
                plan = out.path("plan", f"{unit}.parquet")
                if not out.is_done(unit):
                    out.store.write_bytes(plan, plan_bytes(plan_rows))
                units.append((plan, unit))
            rows = sum(t.num_rows for _, t in tasks)
            nbytes = sum(pc.sum(t["warc_record_length"]).as_py() for _, t in tasks)
        log.warning(
            "%d records (%d bytes) selected from %s on %s: %d tasks",
            rows,
            nbytes,
            index,
            "Spark" if on_spark else "the driver",
            len(units),
        )
        return run_per_file(job, units, output, spark)
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
    committed and a rerun retries the unit. A row whose warc_filename does not resolve under the
    base the plan records is not read: a `read` drop `location_outside_base`.
    """
    plan = _read_plan(plan_uri)
    base = (plan.schema.metadata or {}).get(BASE_KEY)
    if base is None:  # without it no name can be checked: nothing is read
        raise ValueError(f"plan file {plan_uri} records no --warc-base: plan it again (rerun the job)")
    rows = plan.to_pylist()
    where = _locations([r["warc_filename"] for r in rows], base.decode())
    fetcher = RangeFetcher(cfg.fetch, unit)

    def read(run: UnitRun) -> None:
        try:
            for r in rows:
                r["url"] = where[r["warc_filename"]]  # this task's own resolution, not the plan's
                if isinstance(r["url"], UnsafeLocation):
                    run.stats.enter("read", 0)
                    run.stats.drop("read", REFUSED, 0)
                    run.rejected.add(
                        "read",
                        REFUSED,
                        url=None,
                        warc_file=r["warc_filename"],
                        warc_offset=r["warc_record_offset"],
                        detail=str(r["url"])[:300],
                    )
            readable = [r for r in rows if isinstance(r["url"], str)]
            for (url, crawl), group in groupby(readable, key=lambda r: (r["url"], r["crawl"])):
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
