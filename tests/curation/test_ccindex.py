"""The cc-index table of local WARCs (curation/index/ccindex.py) and SQL conditions over it (curation/index/where.py).

On real WARCs of shared data: every row's offset/length is exactly one gzip member holding that
record (so one Range request returns one record), the rows agree with cdxj-indexer's CDXJ of the
same files (and `read_cdxj` reads that CDXJ back into the same columns), the columns carry the
published cc-index-table names and types, and content_languages is lid.176's answer in ISO 639-3.
Conditions select exactly what a Python predicate over the same rows selects (SQL's NULL rules
included), and every malformed one is refused with the position or the column it trips on.
"""

from __future__ import annotations

import json
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from core.errors import InputError
from curation.cli import main
from curation.index.ccindex import INDEX_SCHEMA, read_cdxj, url_columns
from curation.index.where import parse_where

WARCS = (
    "cc-main-2020-34-sample.warc.gz",
    "crawl-2024-sample-0000.warc.gz",
    "cc-main-2024-22-whirlwind.warc.gz",
)


@pytest.fixture(scope="module")
def index(tmp_path_factory, warc_dir) -> tuple[Path, Path]:
    """The index (with languages) and CDXJ of three small real WARCs, by the command line."""
    out = tmp_path_factory.mktemp("ccindex")
    argv = ["index", *(str(warc_dir / w) for w in WARCS), "--output", str(out / "i.parquet")]
    assert main([*argv, "--cdxj", str(out / "i.cdxj")]) == 0
    return out / "i.parquet", out / "i.cdxj"


def test_each_row_is_one_gzip_member_holding_its_record(index, warc_dir):
    rows = pq.read_table(index[0]).to_pylist()
    assert {r["warc_filename"] for r in rows} == set(WARCS)
    for r in rows:
        blob = (warc_dir / r["warc_filename"]).read_bytes()
        member = blob[r["warc_record_offset"] : r["warc_record_offset"] + r["warc_record_length"]]
        d = zlib.decompressobj(wbits=31)
        text = d.decompress(member)
        assert d.eof and not d.unused_data  # one whole member, nothing of the next one
        end = r["warc_record_offset"] + r["warc_record_length"]
        assert end == len(blob) or blob[end : end + 2] == b"\x1f\x8b"  # the next member starts there
        head = text[:4000].decode("utf-8", "replace")
        assert head.startswith("WARC/") and "WARC-Type: response" in head
        assert f"WARC-Target-URI: {r['url']}" in head or f"WARC-Target-URI: <{r['url']}>" in head


def test_rows_agree_with_cdxj_indexer(index):
    rows = pq.read_table(index[0]).to_pylist()
    lines = [ln.split(" ", 2) for ln in index[1].read_text().splitlines()]
    cdx = {
        (j["filename"], int(j["offset"])): (key, j) for key, _ts, blob in lines for j in [json.loads(blob)]
    }
    assert len(cdx) == len(rows)
    for r in rows:
        key, j = cdx[(r["warc_filename"], r["warc_record_offset"])]
        assert int(j["length"]) == r["warc_record_length"] and j["url"] == r["url"]
        assert key == r["url_surtkey"]
        assert r["fetch_status"] == (int(j["status"]) if j.get("status") else None)
    # and the CDXJ reads back into the same location columns
    back = read_cdxj(str(index[1])).select(
        ["warc_filename", "warc_record_offset", "warc_record_length", "url"]
    )
    ours = pq.read_table(index[0]).select(back.column_names)
    assert sorted(back.to_pylist(), key=str) == sorted(ours.to_pylist(), key=str)


def test_published_names_and_types(index):
    schema = pq.read_schema(index[0])
    published = {  # cc-index-table's cc-index-create-table-flat.sql, as Arrow types
        "url": pa.string(),
        "url_host_name": pa.string(),
        "url_host_registered_domain": pa.string(),
        "url_port": pa.int32(),
        "fetch_status": pa.int16(),
        "content_languages": pa.string(),
        "warc_filename": pa.string(),
        "warc_record_offset": pa.int32(),
        "warc_record_length": pa.int32(),
        "warc_segment": pa.string(),
    }
    for name, typ in published.items():
        assert schema.field(name).type == typ, name
    assert pa.types.is_timestamp(schema.field("fetch_time").type)
    assert schema.remove_metadata() == INDEX_SCHEMA


def test_columns_of_known_records(index):
    rows = pq.read_table(index[0]).to_pylist()
    whirl = next(r for r in rows if r["warc_filename"].startswith("cc-main-2024-22"))
    assert whirl["crawl"] == "CC-MAIN-2024-22"  # from the warcinfo record, as the reader sees it
    assert whirl["subset"] == "warc" and whirl["fetch_status"] == 200
    assert whirl["content_mime_type"] == "text/html" and whirl["content_charset"] == "utf-8"
    # an.wikipedia.org (Aragonese): lid.176 knows `an` but reads this page as Spanish, in ISO 639-3
    assert whirl["url_host_name"] == "an.wikipedia.org" and whirl["content_languages"] == "spa"
    assert whirl["fetch_time"] > datetime(2024, 5, 1, tzinfo=UTC)
    html = [r for r in rows if r["fetch_status"] == 200 and (r["content_mime_type"] or "").endswith("html")]
    assert sum(r["content_languages"] is not None for r in html) >= 0.9 * len(html)
    assert all(len(r["content_languages"]) == 3 for r in html if r["content_languages"])
    assert all(r["subset"] == "crawldiagnostics" for r in rows if r["fetch_status"] != 200)


def test_url_columns():
    c = url_columns("https://Foo.bar.news.co.uk:8443/a/b.html?x=1")
    assert c["url_host_name"] == "foo.bar.news.co.uk" and c["url_port"] == 8443
    assert c["url_host_registry_suffix"] == "co.uk" and c["url_host_registered_domain"] == "news.co.uk"
    assert c["url_host_private_domain"] == "news.co.uk"  # no private suffix above co.uk here
    assert c["url_host_tld"] == "uk" and c["url_host_3rd_last_part"] == "news"
    assert c["url_host_5th_last_part"] == "foo" and c["url_host_name_reversed"] == "uk.co.news.bar.foo"
    assert c["url_path"] == "/a/b.html" and c["url_query"] == "x=1" and c["url_protocol"] == "https"
    blog = url_columns("http://myblog.blogspot.com/")  # the schema's own example of a private suffix
    assert blog["url_host_registered_domain"] == "blogspot.com"
    assert (
        blog["url_host_private_suffix"] == "blogspot.com"
        and blog["url_host_private_domain"] == "myblog.blogspot.com"
    )
    ip = url_columns("http://10.1.2.3/")
    assert ip["url_host_name"] == "10.1.2.3" and ip.get("url_host_registered_domain") is None
    assert url_columns("http://[::1/")["url"] == "http://[::1/"  # unparsable: the string alone


# -- conditions --------------------------------------------------------------------------------

# Matches no record 1,999 times, then what the BETWEEN matches.
LONG_OR = " OR ".join(f"warc_record_offset = {-i - 1}" for i in range(1999)) + (
    " OR warc_record_length BETWEEN 2000 AND 9000"
)

CONDITIONS = {
    "content_languages = 'eng'": lambda r: r["content_languages"] == "eng",
    "content_languages <> 'eng'": lambda r: r["content_languages"] not in (None, "eng"),
    "content_languages NOT IN ('eng', 'deu')": lambda r: r["content_languages"] not in (None, "eng", "deu"),
    "url_host_tld in ('com', 'org') AND fetch_status = 200": lambda r: (
        r["url_host_tld"] in ("com", "org") and r["fetch_status"] == 200
    ),
    "NOT (fetch_status = 200) OR url LIKE '%.ru/%'": lambda r: (
        (r["fetch_status"] is not None and (r["fetch_status"] != 200 or ".ru/" in r["url"]))
        or ".ru/" in r["url"]
    ),
    "warc_record_length BETWEEN 2000 AND 9000": lambda r: 2000 <= r["warc_record_length"] <= 9000,
    "content_languages IS NULL": lambda r: r["content_languages"] is None,
    "fetch_time >= '2024-01-01'": lambda r: r["fetch_time"] >= datetime(2024, 1, 1, tzinfo=UTC),
    "\"url_host_name\" = 'www.iana.org'": lambda r: r["url_host_name"] == "www.iana.org",
    # 2,000 ORs (a RecursionError before chains became balanced trees) and 62 nested levels
    LONG_OR: lambda r: 2000 <= r["warc_record_length"] <= 9000,
    "(" * 20 + "NOT (" * 21 + "fetch_status = 200" + ")" * 41: lambda r: (
        r["fetch_status"] is not None and r["fetch_status"] != 200
    ),
}


@pytest.mark.parametrize("cond", list(CONDITIONS))
def test_conditions_select_what_sql_selects(index, cond):
    dataset = ds.dataset(str(index[0]))
    expr, _cols = parse_where(cond, dataset.schema)
    got = dataset.to_table(filter=expr).to_pylist()
    want = [r for r in dataset.to_table().to_pylist() if CONDITIONS[cond](r)]
    key = lambda r: (r["warc_filename"], r["warc_record_offset"])  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want))


@pytest.mark.parametrize(
    "cond, message",
    [
        ("", "empty"),
        ("content_language = 'eng'", "no column 'content_language'.*did you mean content_languages"),
        ("content_languages = ", "character 21"),
        ("lower(url) = 'x'", "functions"),
        ("fetch_status = 'abc'", "not a value of type int16"),
        ("url = NULL", "IS NULL"),
        ("url_host_name", "not a condition"),
        ("warc_record_offset LIKE '1%'", "LIKE needs a string column"),
        ("url = 'x", "cannot read"),
        ("content_languages = 'eng' garbage", "expected AND, OR"),
        ("1 = 1", "two literals"),
        ("fetch_status = 200 AND", "character 23"),
        # limits, each named in the refusal (a RecursionError or an exhausted driver before)
        ("(" * 5000 + "fetch_status = 200" + ")" * 5000, "nested more than 64 levels.*character 65"),
        ("NOT " * 65 + "fetch_status = 200", "nested more than 64 levels"),
        ("NOT (" * 33 + "fetch_status = 200" + ")" * 33, "nested more than 64 levels"),
        (" OR ".join(["fetch_status = 200"] * 10_001), "more than 10,000 predicates"),
        (" AND ".join(["(fetch_status = 200 OR url = 'x')"] * 5_001), "more than 10,000 predicates"),
        ("url = '" + "x" * 1_000_000 + "'", "the limit is 1,000,000"),
    ],
)
def test_bad_conditions_are_refused(index, cond, message):
    with pytest.raises(InputError, match=message):
        parse_where(cond, ds.dataset(str(index[0])).schema)
