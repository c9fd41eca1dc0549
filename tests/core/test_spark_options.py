"""core.spark.SparkOptions: built once from the command line, passed to every job whole; and what the
session core.spark.get_spark makes writes."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime

import pytest

from core.cli import add_spark_args
from core.errors import ConfigError
from core.spark import SparkOptions, planned_cores


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_spark_args(p)
    return p.parse_args(argv)


def test_from_args_reads_the_three_spark_arguments():
    args = _parse(["--master", "local[2]", "--spark-conf", "a.b=1", "--spark-conf", "c=x=y", "--no-progress"])
    assert SparkOptions.from_args(args) == SparkOptions("local[2]", {"a.b": "1", "c": "x=y"}, progress=False)
    assert SparkOptions.from_args(_parse([])) == SparkOptions()
    with pytest.raises(ConfigError, match="--spark-conf expects KEY=VALUE"):
        SparkOptions.from_args(_parse(["--spark-conf", "novalue"]))


def test_options_are_frozen_down_to_the_conf():
    conf = {"k": "v"}
    opts = SparkOptions(conf=conf)
    conf["k"] = "changed"  # the caller's dict is copied
    assert opts.conf == {"k": "v"}
    with pytest.raises(TypeError):
        opts.conf["k"] = "w"
    with pytest.raises(AttributeError):
        opts.master = "local"


@pytest.mark.spark
def test_timestamps_spark_writes_survive_a_pyarrow_rewrite(spark, tmp_path):
    """Spark job -> a pyarrow filter -> Spark job, as make ablate's kept/ does: with Spark's default
    INT96 timestamps pyarrow wrote them back as nanoseconds and the second job could not read them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # WARC-Dates of shared WARCs, the first at the millisecond of a BL crawl's file name
    times = [
        datetime(2014, 3, 25, 12, 12, 25, 68000, tzinfo=UTC),
        datetime(2024, 4, 12, 8, 30, 1, tzinfo=UTC),
    ]
    ts = pa.array(times, pa.timestamp("us", tz="UTC"))
    pq.write_table(pa.table({"id": ["a", "b"], "fetch_time": ts}), tmp_path / "in.parquet")
    spark.read.parquet(str(tmp_path / "in.parquet")).write.parquet(str(tmp_path / "job1"))
    pq.write_table(pq.read_table(tmp_path / "job1"), tmp_path / "filtered.parquet")  # pyarrow's defaults
    spark.read.parquet(str(tmp_path / "filtered.parquet")).write.parquet(str(tmp_path / "job2"))
    out = pq.read_table(tmp_path / "job2").sort_by("id")
    assert out.column("fetch_time").to_pylist() == times


@pytest.mark.parametrize(
    ("master", "conf", "want"),
    [
        ("local", {}, 1),
        ("local[3]", {}, 3),
        ("local[4,2]", {}, 4),  # N threads, F failures: the slots are N
        ("local[*]", {}, os.cpu_count()),
        ("spark://h:7077", {}, None),  # executors unknown before they register
        ("yarn", {"spark.default.parallelism": "12"}, 12),
        ("local[3]", {"spark.default.parallelism": "5"}, 5),  # the user's setting wins
        ("yarn", {"spark.default.parallelism": "many"}, None),
    ],
)
def test_planned_cores_before_the_session_starts(master, conf, want, monkeypatch):
    """What `extract` plans its units for (curation/warc/ranges.py, plan_unit_bytes), with no session."""
    from pyspark import SparkContext

    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    assert planned_cores(SparkOptions(master, conf)) == want
