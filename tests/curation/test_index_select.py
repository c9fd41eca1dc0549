"""The selection and grouping of index rows on Spark (curation.index.job.spark_plan) equals the driver's.

The index of tests/curation/test_index_extract.py's three real WARCs (39 records, built once per
module by `curation.index.ccindex.build_index`), three ways: as one file; with some languages and
charsets nulled and duplicated rows (a record listed twice with the same and with another length,
so the duplicates rule is exercised); and in Common Crawl's crawl=/subset= folder layout. For conditions with NULLs (content_languages and
content_charset are null on non-HTML records), NOT IN, LIKE with an escape, a timestamp and a
BETWEEN, Spark must produce the driver's units exactly: names (which hash every record's URL,
offset and length), and the rows of each plan file, crawl included.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from core.errors import InputError
from curation.index.ccindex import build_index
from curation.index.job import (
    open_index,
    plan_bytes,
    plan_tasks,
    select_on_spark,
    select_records,
    spark_plan,
)
from curation.index.where import parse_where

WARCS = (
    "cc-main-2020-34-sample.warc.gz",
    "crawl-2024-sample-0000.warc.gz",
    "cc-main-2024-22-whirlwind.warc.gz",
)
CONDITIONS = (
    "content_languages = 'eng' OR url_host_name = 'an.wikipedia.org'",
    "NOT content_languages IN ('eng', 'deu')",  # null languages: neither selected nor dropped by NOT
    "content_charset IS NULL OR content_languages <> 'eng'",
    "url LIKE 'https://%' AND NOT url_path LIKE '%\\_%'",
    "fetch_time >= '2024-01-01' AND warc_record_length BETWEEN 1000 AND 40000",
    # Spark gets the same balanced tree of a long OR chain (no deep recursion in Catalyst either)
    " OR ".join(f"warc_record_offset = {-i - 1}" for i in range(2000)) + " OR warc_record_length > 1000",
)
BASE = "http://127.0.0.1:9/warcs/"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, warc_dir) -> dict[str, str]:
    root = tmp_path_factory.mktemp("indexes")
    single = root / "index.parquet"
    assert not build_index([str(warc_dir / w) for w in WARCS], str(single)).errors
    table = pq.read_table(single)
    # The shared WARCs' pages all have a language and a charset: null some, as non-HTML records are
    # in a real index, so that the NULL semantics of both engines are compared.
    for col, every in (("content_languages", 3), ("content_charset", 4)):
        values = [None if i % every == 0 else v for i, v in enumerate(table[col].to_pylist())]
        table = table.set_column(table.schema.get_field_index(col), col, pa.array(values, pa.string()))
    # every 7th record listed again, and every 11th again with a longer length: the shortest is kept
    again = table.take(list(range(0, table.num_rows, 7)))
    longer = table.take(list(range(0, table.num_rows, 11)))
    longer = longer.set_column(
        longer.schema.get_field_index("warc_record_length"),
        "warc_record_length",
        pc.add(longer["warc_record_length"], pa.scalar(5, longer.schema.field("warc_record_length").type)),
    )
    dups = root / "dups.parquet"
    pq.write_table(pa.concat_tables([longer, table, again]), dups, row_group_size=50)
    layout = root / "table"
    for subset in ("warc", "crawldiagnostics"):
        part = layout / "crawl=CC-MAIN-LOCAL" / f"subset={subset}"
        part.mkdir(parents=True)
        # every 5th record in the other subset: the partition column is a real selector
        other = pa.array([i % 5 == 0 for i in range(table.num_rows)])
        rows = table.filter(other if subset == "crawldiagnostics" else pc.invert(other))
        rows = rows.drop_columns(["crawl", "subset"])
        pq.write_table(rows, part / "part-00000.parquet")
    return {"single": str(single), "dups": str(dups), "layout": str(layout)}


def _driver(index: str, where: str, task_bytes: int) -> list[tuple[str, pa.Table]]:
    dataset, _ = open_index(index)
    return plan_tasks(select_records(dataset, parse_where(where, dataset.schema)[0]), task_bytes, BASE)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "where", "task_bytes"),
    [("dups", w, 60_000) for w in CONDITIONS]
    + [("single", "TRUE", 200_000), ("layout", "subset = 'warc' AND NOT content_languages = 'zho'", 80_000)],
)
def test_spark_plan_equals_driver_plan(spark, indexes, tmp_path, name, where, task_bytes):
    index = indexes[name]
    want = _driver(index, where, task_bytes)
    assert len(want) >= 2  # several units: the cut between them is compared too
    dataset, ident = open_index(index)
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    got = spark_plan(spark, str(ident["uri"]), where, dataset.schema, task_bytes, BASE, str(plan_dir))
    assert [u for u, _, _ in got] == [u for u, _ in want]
    assert [(r, b) for _, r, b in got] == [
        (t.num_rows, pc.sum(t["warc_record_length"]).as_py()) for _, t in want
    ]
    assert sorted(p.name for p in plan_dir.iterdir()) == sorted(f"{u}.parquet" for u, _ in want)
    for unit, rows in want:
        # the very bytes the driver path writes (so a rerun on the other path finds the same plans)
        assert (plan_dir / f"{unit}.parquet").read_bytes() == plan_bytes(rows), unit
    if name == "layout":
        assert set(pq.read_table(plan_dir / f"{want[0][0]}.parquet")["crawl"].to_pylist()) == {
            "CC-MAIN-LOCAL"
        }


@pytest.mark.spark
def test_spark_plan_of_an_empty_selection_is_empty(spark, indexes, tmp_path):
    dataset, ident = open_index(indexes["single"])
    where = "url_host_name = 'nowhere.example'"
    assert spark_plan(spark, ident["uri"], where, dataset.schema, 10**6, BASE, str(tmp_path)) == []


def test_where_the_selection_runs():
    assert select_on_spark("/data/index/", "auto") and select_on_spark("hdfs://nn/cc-index/", "auto")
    assert select_on_spark("s3a://commoncrawl/cc-index/table/", "auto")
    assert not select_on_spark("s3://commoncrawl/cc-index/table/", "auto")  # no S3 connector here
    assert not select_on_spark("index.cdxj", "auto") and not select_on_spark("index.parquet", "driver")
    assert select_on_spark("s3://commoncrawl/cc-index/table/", "spark")
    # auto keeps an index of at most driver_max_rows rows on the driver
    assert not select_on_spark("/data/index/", "auto", rows=1000, driver_max_rows=1000)
    assert select_on_spark("/data/index/", "auto", rows=1001, driver_max_rows=1000)
    assert select_on_spark("/data/index/", "spark", rows=10, driver_max_rows=1000)
    with pytest.raises(InputError, match="CDXJ"):
        select_on_spark("index.cdxj.gz", "spark")
