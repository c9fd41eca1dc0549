"""core.tables on a real S3 server (moto) with real Spark: what the executors write is what is read back.

The pip wheel of pyspark has no Hadoop S3 connector, so every table here goes the `arrow` way: each
task writes its own part to S3 and the driver writes the manifest last. These tests check the
contract a resuming job relies on: every Spark type dedup uses survives the round trip, an empty
table keeps its columns, a table without its manifest is not finished, and a part that no manifest
lists (a killed attempt's) is never read.
"""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import s3fs

from core.tables import MANIFEST, Tables, read_parquet_files, spark_native_for

pytestmark = pytest.mark.spark


@pytest.fixture()
def spark(spark, s3_server, s3_bucket):
    """The shared session with its Python workers pointed at the test S3 server: its JVM started
    before the server's environment existed, and workers take `sc.environment` (spark.executorEnv.*)."""
    env = spark.sparkContext.environment
    saved = dict(env)
    env.update(s3_server.env)
    yield spark
    env.clear()
    env.update(saved)


def _df(spark):
    rows = [
        (i, f"doc {i}", [i, -i], bytes([i % 256]) * 3, dt.datetime(2024, 1, 1 + i % 28, 12, 0, 0), None)
        for i in range(300)
    ]
    schema = "id long, text string, bands array<long>, sig binary, fetch_time timestamp, note string"
    return spark.createDataFrame(rows, schema).repartition(4)


def test_a_table_written_by_the_executors_reads_back_whole(spark, s3_bucket):
    tables = Tables(f"{s3_bucket}/job", spark)
    assert tables.native is False, "this JVM has no s3 connector: the executors must do the I/O"
    df = _df(spark)
    assert not tables.exists("stages/t")
    tables.write(df, "stages/t")
    assert tables.exists("stages/t")
    back = tables.read("stages/t")
    assert back.schema == df.schema
    assert sorted(back.collect()) == sorted(df.collect())
    manifest = json.loads(s3fs.S3FileSystem().cat_file(f"{s3_bucket}/job/stages/t/{MANIFEST}"))
    assert manifest["rows"] == 300 and len(manifest["parts"]) == 4  # one part per non-empty partition


def test_an_empty_table_keeps_its_columns(spark, s3_bucket):
    tables = Tables(f"{s3_bucket}/job", spark)
    df = _df(spark).where("id < 0")
    tables.write(df, "empty")
    back = tables.read("empty")
    assert back.count() == 0 and back.schema == df.schema


def test_parts_no_manifest_lists_are_never_read(spark, s3_bucket):
    """A killed attempt leaves parts without a manifest (not finished), or a stray part beside a
    finished table (not listed): neither is ever read, and a rewrite deletes the strays."""
    fs = s3fs.S3FileSystem()
    tables = Tables(f"{s3_bucket}/job", spark)
    stray = pa.table({"id": [10**9], "text": ["stray"]})
    with fs.open(f"{s3_bucket}/job/half/part-00007.parquet", "wb") as f:
        pq.write_table(stray, f)
    assert not tables.exists("half")
    with pytest.raises(FileNotFoundError):
        tables.read("half")

    df = _df(spark).select("id", "text")
    tables.write(df, "t")
    with fs.open(f"{s3_bucket}/job/t/part-00099.parquet", "wb") as f:
        pq.write_table(stray, f)
    assert tables.read("t").where("text = 'stray'").count() == 0
    tables.write(df, "t")  # the rewrite starts from an empty prefix
    assert not fs.exists(f"{s3_bucket}/job/t/part-00099.parquet")


def test_input_files_are_read_in_order_with_missing_columns_as_nulls(spark, s3_bucket):
    fs = s3fs.S3FileSystem()
    files = []
    for i, table in enumerate(
        [
            pa.table({"id": ["a", "b"], "text": ["x", "y"], "url": ["u1", "u2"]}),
            pa.table({"id": ["c"], "text": ["z"]}),
        ]
    ):
        uri = f"{s3_bucket}/in/{i}.parquet"
        with fs.open(uri, "wb") as f:
            pq.write_table(table, f)
        files.append(uri)
    df = read_parquet_files(spark, files)
    assert df.columns == ["id", "text", "url"]  # the first file's schema
    assert [tuple(r) for r in df.collect()] == [("a", "x", "u1"), ("b", "y", "u2"), ("c", "z", None)]
    assert df.rdd.getNumPartitions() == 2  # one task per file


def test_spark_native_follows_the_jvm_unless_forced(spark):
    assert spark_native_for(spark, "/local/folder", "false") is True  # a folder is always Spark's
    assert spark_native_for(spark, "s3://b/x", "auto") is False  # no hadoop-aws in the pip wheel
    assert spark_native_for(spark, "s3://b/x", "true") is True
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="--spark-native"):
        spark_native_for(spark, "s3://b/x", "yes")


def test_a_local_table_reads_back_as_spark_infers_it_without_a_job(spark, tmp_path):
    """Read by the Tables that wrote it: the written schema made nullable at every depth, which is what
    Spark's reader infers from the files (asked of a second Tables, which must infer), and no Spark job
    to infer it; the rows are the same either way."""
    from pyspark.sql import functions as F

    df = _df(spark).select(
        F.col("id"), F.lit(1).alias("one"), F.array(F.struct("id", "text")).alias("nested"), "sig", "note"
    )
    assert not df.schema["one"].nullable  # a non-null field the reader will not keep non-null
    tables = Tables(tmp_path / "job", spark)
    tables.write(df, "stages/t")
    tracker = spark.sparkContext.statusTracker()
    jobs = len(tracker.getJobIdsForGroup(None))
    back = tables.read("stages/t")
    assert len(tracker.getJobIdsForGroup(None)) == jobs  # no job: the schema was known
    inferred = Tables(tmp_path / "job", spark).read("stages/t")
    assert back.schema == inferred.schema and back.schema["one"].nullable
    assert sorted(back.collect()) == sorted(inferred.collect()) == sorted(df.collect())
