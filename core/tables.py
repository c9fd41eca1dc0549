"""Spark tables a job writes and reads back, on a local folder or an object store, with every byte
moved by the executors: the driver's disk never holds a job's data.

A job that keeps intermediate results (dedup's stages, connected components' rounds) or publishes
a table (dedup's docs/, removed_ids/) asks `Tables(root, spark, native)` to `write(df, name)` and
`read(name)`. There are two ways to reach `root`, one API:

- **native**: Spark's own Parquet reader and writer on `root/name`. Used for a local folder (or one
  every executor mounts), and for a URI when the cluster has a Hadoop connector for its scheme
  (`s3a://` with hadoop-aws, `gs://` on Dataproc, `abfs://`, EMR's `s3://`). On a local folder a
  table is written under a temporary name and renamed into place (POSIX rename is atomic).
- **arrow**: for an object store Spark cannot address (the pip wheel of pyspark has no connector).
  Each task writes its partition as one Parquet object with pyarrow through fsspec, from the
  executor straight to its final key `name/part-NNNNN.parquet` (a retried or speculative attempt
  rewrites the same key whole: S3 shows an object only once it is complete). Reading back is one
  task per object, in the same order. The driver only ever holds the list of objects.

On a URI a table is finished when its manifest `name/_table.json` exists, written by the driver
after every part is in place (the parts, their rows, and the Spark schema, so that a table with no
row reads back with its columns). Readers read the manifest, never a listing, so a part left by a
killed attempt is never read; writing a table first deletes whatever was under its name.

The manifest is data in the store: whoever can write the folder writes it, and its `parts` are joined to
the table's folder. So it is read as untrusted JSON (core/safe_json.py) and each part must be a plain
file name (core/names.py: no `/`, `..`, `%2F`, NUL, absolute or empty name) before any is opened
(CONVENTIONS 14); anything else is a `TableManifestError` naming the manifest and the field.

`--spark-native` (SparkOptions.native_storage): `auto` uses native where
the JVM has a Hadoop FileSystem for the scheme and arrow elsewhere; `true`/`false` force one.
Executors reach the object store with the standard AWS chain (AWS_* environment of the worker or
an instance role), as every other task of the project does (core/storage.py).
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.errors import OutputConflict
from core.files import open_parquet, parquet_schema
from core.names import check_file_name, show
from core.safe_json import JSONFileError, loads_checked
from core.spark import check_spark_native
from core.storage import is_object_store, join, open_store

__all__ = ["TableManifestError", "Tables", "read_parquet_files", "spark_native_for"]

MANIFEST = "_table.json"
# one part per Spark partition, ~250 bytes of manifest each: a million partitions, far past any job here
_MAX_MANIFEST_BYTES = 256 * 2**20
_READ_BATCH_ROWS = 8192  # Arrow batches handed to Spark: bounded executor memory for wide text rows


def spark_native_for(spark, uri: str, choice: str = "auto") -> bool:
    """Whether Spark itself reads and writes `uri` (see the module docstring)."""
    check_spark_native(choice)
    if not is_object_store(uri):
        return True  # a local or mounted folder: Spark's reader is the fast path
    if choice != "auto":
        return choice == "true"
    scheme = uri.split("://", 1)[0]
    jvm = spark.sparkContext._jvm
    try:  # the JVM's own answer: a connector is registered for this scheme
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(
            scheme, spark.sparkContext._jsc.hadoopConfiguration()
        )
        return True
    except Exception:  # py4j wraps Hadoop's UnsupportedFileSystemException: no connector
        return False


def as_read(schema):
    """`schema` as Spark's Parquet reader infers it back from the files: every field nullable, at every
    depth (a file source reads no non-null guarantee), types and field metadata as written."""
    from pyspark.sql import types as T

    def relax(t):
        if isinstance(t, T.StructType):
            return T.StructType(
                [T.StructField(f.name, relax(f.dataType), True, f.metadata) for f in t.fields]
            )
        if isinstance(t, T.ArrayType):
            return T.ArrayType(relax(t.elementType), True)
        if isinstance(t, T.MapType):
            return T.MapType(relax(t.keyType), relax(t.valueType), True)
        return t

    return relax(schema)


class TableManifestError(OutputConflict):
    """A `_table.json` that is not what `Tables.write` writes; names the manifest and the field. The
    folder is damaged (or was written by someone else): a rerun into another output starts over."""


class Tables:
    """The tables of one job under `root` (a local path or a URI)."""

    def __init__(self, root: str | Path, spark, spark_native: str = "auto") -> None:
        self.root = str(root).rstrip("/")
        self.spark = spark
        self.remote = is_object_store(self.root)
        self.spark_native = spark_native
        self.native = spark_native_for(spark, self.root, spark_native)
        self.store = open_store(self.root)
        # The schema of each table this object wrote, which Spark's Parquet reader then need not infer:
        # inferring it is a Spark job of its own (reading a footer), on every read. A dedup run of 60
        # documents read its stage tables 57 times, 58 of its 196 jobs.
        self._schemas: dict[str, Any] = {}

    def path(self, name: str) -> str:
        return join(self.root, name)

    def exists(self, name: str) -> bool:
        """Whether the table `name` was finished."""
        if not self.remote:
            return Path(self.path(name)).exists()  # renamed into place whole
        return self.store.exists(join(self.path(name), MANIFEST))

    def finished(self, folder: str, prefix: str = "") -> list[str]:
        """Names of the finished tables directly under `folder` whose name starts with `prefix`, sorted."""
        names = [n for n in self.store.list_dirs(self.path(folder)) if n.startswith(prefix)]
        return [n for n in names if not n.startswith(".") and self.exists(f"{folder}/{n}")]

    def clean_stale(self, folder: str = "") -> None:
        """Remove temporary folders a killed local write left under `folder` (local only: on a URI a
        table is rewritten whole, its stale parts deleted first)."""
        if not self.remote:
            for stale in Path(self.path(folder)).glob(".*.tmp-*"):
                shutil.rmtree(stale, ignore_errors=True)

    def write(self, df, name: str, compression: str | None = None) -> str:
        """Write `df` as table `name` (replacing any earlier one); returns its path."""
        final = self.path(name)
        self._schemas.pop(name, None)  # until the new table is in place, it is not known
        writer = df.write.option("compression", compression) if compression else df.write
        if not self.remote:
            tmp = Path(final).with_name(f".{Path(final).name}.tmp-{uuid.uuid4().hex[:8]}")
            writer.parquet(str(tmp))
            shutil.rmtree(final, ignore_errors=True)  # left by a crash between rename and marker
            Path(final).parent.mkdir(parents=True, exist_ok=True)
            tmp.rename(final)
            self._schemas[name] = as_read(df.schema)
            return final
        self.store.delete_tree(final)  # a killed attempt's parts, or an older table
        if self.native:
            writer.parquet(final)
            manifest: dict[str, Any] = {"native": True, "schema": df.schema.json()}
        else:
            parts = df.mapInArrow(
                _part_writer(final, compression or "snappy"), "part string, rows long"
            ).collect()
            files = sorted((r["part"], r["rows"]) for r in parts if r["part"])
            manifest = arrow_manifest(df.schema.json(), files)
        self.store.write_bytes(join(final, MANIFEST), json.dumps(manifest).encode())
        self._schemas[name] = as_read(df.schema)
        return final

    def read_files(self, files: list[str]):
        """Input Parquet files (paths or URIs) as one DataFrame: Spark's reader where it reaches every
        file, else the executors' (one task per file, in list order)."""
        schemes = {f.split("://", 1)[0] for f in files if is_object_store(f)}  # one JVM question each
        if all(spark_native_for(self.spark, f"{s}://", self.spark_native) for s in schemes):
            return self.spark.read.parquet(*files)
        return read_parquet_files(self.spark, files)

    def read(self, name: str):
        """The table `name` as a DataFrame (FileNotFoundError when it was never finished)."""
        path = self.path(name)
        known = self._schemas.get(name)
        if not self.remote:
            return (self.spark.read.schema(known) if known else self.spark.read).parquet(path)
        native, schema, parts = read_manifest(self.store, path)
        if native:
            return (self.spark.read.schema(known) if known else self.spark.read).parquet(path)
        return read_parquet_files(self.spark, parts, schema)


def arrow_manifest(schema_json: str, parts: list[tuple[str, int]]) -> dict[str, Any]:
    """The `_table.json` of a table the executors wrote: its Spark schema (JSON) and (part, rows) pairs."""
    return {
        "native": False,
        "schema": schema_json,
        "parts": [p for p, _ in parts],
        "rows": sum(n for _, n in parts),
    }


def read_manifest(store, path: str):
    """(native, Spark schema, part URIs) of the table at `path` from its `_table.json`, every field
    checked before it is used (the module docstring): the parts are plain file names in `path`.
    FileNotFoundError when there is no manifest (the table was never finished); TableManifestError
    naming the manifest and the field when it is not one `Tables.write` writes."""
    where = join(path, MANIFEST)
    try:
        m = loads_checked(store.read_bytes(where), where, max_bytes=_MAX_MANIFEST_BYTES)
    except JSONFileError as e:  # names `where` already
        raise TableManifestError(str(e)) from None
    if not isinstance(m, dict):
        raise TableManifestError(f"{where}: not a table manifest (a JSON object with native and schema)")
    native = m.get("native")
    if not isinstance(native, bool):
        raise TableManifestError(f"{where}: native must be true or false, got {show(native)}")
    if native:
        return True, None, []
    from pyspark.sql.types import StructType

    text = m.get("schema")
    if not isinstance(text, str):
        raise TableManifestError(f"{where}: schema must be a Spark schema as JSON text, got {show(text)}")
    try:  # the same bounds as the manifest: a schema nested 10,000 deep is no RecursionError here
        schema = StructType.fromJson(loads_checked(text, f"{where}: schema"))
    except JSONFileError as e:
        raise TableManifestError(str(e)) from None
    except Exception as e:  # fromJson raises KeyError, TypeError, ValueError... on a shape it does not know
        why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise TableManifestError(f"{where}: schema must be a Spark schema as JSON text ({why})") from None
    parts = m.get("parts")
    if not isinstance(parts, list):
        raise TableManifestError(f"{where}: parts must be a list of file names, got {show(parts)}")
    seen: set[str] = set()
    for i, p in enumerate(parts):
        try:
            check_file_name(p, ".parquet", "the table's folder")
        except ValueError as e:
            raise TableManifestError(f"{where}: parts[{i}] {e}") from None
        if p in seen:  # read twice, its rows would count twice
            raise TableManifestError(f"{where}: parts[{i}] lists {p!r} a second time")
        seen.add(p)
    return False, schema, [join(path, p) for p in parts]


def read_parquet_files(spark, files: list[str], schema=None):
    """A DataFrame of Parquet `files` (paths or URIs the executors open themselves), one task per
    file in list order. `schema` (Spark's): the columns read, in order, a file without one giving
    nulls; None: the first file's (read from its footer here, the only byte the driver reads)."""
    if schema is None:
        if not files:
            raise ValueError("read_parquet_files: no file and no schema")
        from pyspark.sql.pandas.types import from_arrow_schema
        from pyspark.sql.types import StructField, StructType

        found = from_arrow_schema(parquet_schema(files[0]))
        # every column nullable, as Spark's own reader makes them: another file may lack a column
        schema = StructType([StructField(c.name, c.dataType, True) for c in found.fields])
    if not files:
        return spark.createDataFrame([], schema)
    names = spark.sparkContext.parallelize([(f,) for f in files], len(files))
    return spark.createDataFrame(names, "path string").mapInArrow(
        _part_reader(schema, spark.conf.get("spark.sql.session.timeZone")), schema
    )


def _part_writer(folder: str, compression: str):
    """mapInArrow function: this task's rows to `folder/part-<partition>.parquet`; yields (part, rows)."""

    def run(batches: Iterator) -> Iterator:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        name = f"part-{TaskContext.get().partitionId():05d}.parquet"
        store = open_store(folder)
        f = writer = None
        rows = 0
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                if writer is None:
                    f = store.open(join(folder, name), "wb")
                    writer = pq.ParquetWriter(f, batch.schema, compression=compression)
                writer.write_batch(batch)
                rows += batch.num_rows
            if writer is not None:
                writer.close()
                f.close()  # the object appears here, whole
        except BaseException:
            if f is not None:
                store.discard(f)  # a failed attempt leaves no object (its retry writes the key again)
            raise
        yield pa.RecordBatch.from_pydict(
            {"part": pa.array([name if rows else None], pa.string()), "rows": pa.array([rows], pa.int64())}
        )

    return run


def _part_reader(schema, timezone: str):
    """mapInArrow function over (path) rows: each file's batches as `schema` (Spark's) says, its
    timestamps in the session's time zone (the Arrow type Spark hands to and expects from Python)."""

    def run(batches: Iterator) -> Iterator:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        target = to_arrow_schema(schema, timezone=timezone)
        for batch in batches:
            for uri in batch.column("path").to_pylist():
                with open_parquet(uri) as pf:
                    present = [c for c in target.names if c in pf.schema_arrow.names]
                    for b in pf.iter_batches(batch_size=_READ_BATCH_ROWS, columns=present):
                        cols = [
                            b.column(c) if c in present else pa.nulls(b.num_rows, target.field(c).type)
                            for c in target.names
                        ]
                        yield pa.RecordBatch.from_arrays(cols, names=target.names).cast(target)

    return run
