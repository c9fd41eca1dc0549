"""Index-driven extraction (curation/index/job.py) against a real Range server on 127.0.0.1.

Three real WARCs of shared data are indexed (`python -m curation index`), served by rangehttpserver
with a 503 injected every Nth request (testkit/range_server.py), and a SQL condition selects a
subset. The documents must be exactly those that extracting the whole files gives for the selected
records (same ids, texts, URLs, warc_file/warc_offset, every column), every injected 503 must show
up as a counted retry, a rerun must skip every unit, and a changed condition must be refused. A
server that answers 503 forever fails the unit with an error naming the unit and the URL, with
nothing committed. Every mistake on the command line is exit status 2 before Spark starts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from core.errors import InputError
from core.output import OutputConflict, OutputDir
from core.runner import run_unit
from core.spark import SparkOptions
from curation.cli import main
from curation.config import ExtractJobConfig, FetchConfig
from curation.index.ccindex import build_index
from curation.index.job import (
    open_index,
    plan_bytes,
    plan_tasks,
    process_index_unit,
    run_index_extract,
    select_records,
)
from curation.index.where import parse_where
from curation.pipeline import process_file
from testkit.range_server import serving

WARCS = (
    "cc-main-2020-34-sample.warc.gz",
    "crawl-2024-sample-0000.warc.gz",
    "cc-main-2024-22-whirlwind.warc.gz",
)
# English pages, and the one page of the whirlwind capture by its host: a language and a host
# condition at once, over all three files.
WHERE = "content_languages = 'eng' OR url_host_name = 'an.wikipedia.org'"
# Retries wait a few milliseconds here (the backoff's bounds are test_fetch.py's business).
# select=spark: the test index is small enough for `auto` to select on the driver; the job test
# runs the Spark selection, the one a crawl-size index gets (test_index_select compares the two)
FAST = FetchConfig(task_bytes=60_000, backoff_base_s=0.01, backoff_cap_s=0.05, select="spark")


@pytest.fixture(scope="module")
def index(tmp_path_factory, warc_dir) -> Path:
    out = tmp_path_factory.mktemp("index") / "index.parquet"
    report = build_index([str(warc_dir / w) for w in WARCS], str(out))
    assert not report.errors
    return out


@pytest.fixture(scope="module")
def whole(tmp_path_factory, warc_dir) -> Path:
    """The reference: the three files extracted whole, without Spark."""
    out = tmp_path_factory.mktemp("whole")
    cfg = ExtractJobConfig()
    OutputDir(out).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    for w in WARCS:
        assert process_file(str(warc_dir / w), cfg, str(out))["status"] == "done"
    return out


def _docs(folder: Path) -> list[dict]:
    return sorted(ds.dataset(str(folder / "docs")).to_table().to_pylist(), key=lambda r: r["id"])


def _selected(index: Path, where: str) -> set[tuple[str, int]]:
    t = pq.read_table(index).to_pylist()
    dataset = ds.dataset(str(index))
    rows = dataset.to_table(filter=parse_where(where, dataset.schema)[0]).to_pylist()
    assert 0 < len(rows) < len(t)  # a real subset
    return {(r["warc_filename"], r["warc_record_offset"]) for r in rows}


@pytest.mark.spark
@pytest.mark.slow
def test_job_equals_whole_file_extraction_of_the_selected_records(spark, index, whole, warc_dir, tmp_path):
    cfg = ExtractJobConfig().replace(fetch=FAST)
    expected = [d for d in _docs(whole) if (d["warc_file"], d["warc_offset"]) in _selected(index, WHERE)]
    assert len(expected) >= 5
    out = tmp_path / "out"
    with serving(warc_dir, fail_every=4) as srv:
        result = run_index_extract(
            str(index), WHERE, srv.url, str(out), cfg, spark=SparkOptions(progress=False)
        )
        assert result.ok and result.processed >= 2  # several units of ~60 KB
        assert _docs(out) == expected  # ids, texts, URLs, warc_file/warc_offset: every column
        stats = json.loads((out / "stats.json").read_text())
        assert srv.failed >= 2
        assert stats["counters"]["fetch_retries"] == stats["counters"]["fetch_retry:http_503"] == srv.failed
        assert stats["counters"]["fetch_requests"] == srv.requests
        assert all(r.startswith("bytes=") for r in srv.ranges)  # no whole-file read
        record = json.loads((out / "_config.json").read_text())
        assert record["where"] == WHERE and record["warc_base"] == srv.url
        assert record["index"]["files"] == {"": index.stat().st_size} and record["task_bytes"] == 60_000
        assert cfg.fingerprint() == ExtractJobConfig().fingerprint()  # fetching is not in it

        srv.reset_counts()
        again = run_index_extract(
            str(index), WHERE, srv.url, str(out), cfg, spark=SparkOptions(progress=False)
        )
        assert again.processed == 0 and again.skipped == result.processed and srv.requests == 0
        marker = sorted((out / "done").glob("index-*.json"))[0]
        marker.unlink()
        resumed = run_index_extract(
            str(index), WHERE, srv.url, str(out), cfg, spark=SparkOptions(progress=False)
        )
        assert resumed.processed == 1 and resumed.ok and (out / "_SUCCESS").exists()
        assert _docs(out) == expected  # nothing lost or duplicated

        with pytest.raises(OutputConflict, match="where"):
            run_index_extract(
                str(index),
                "content_languages = 'deu'",
                srv.url,
                str(out),
                cfg,
                spark=SparkOptions(progress=False),
            )
        with pytest.raises(OutputConflict, match="warc_base"):
            run_index_extract(
                str(index), WHERE, str(warc_dir), str(out), cfg, spark=SparkOptions(progress=False)
            )

    # on the Spark path an empty selection is known after Spark's scan: the same error, no folder
    empty = tmp_path / "empty"
    with pytest.raises(InputError, match="selects no record"):
        run_index_extract(str(index), "url_host_name = 'nowhere.example'", str(warc_dir), str(empty), cfg)
    assert not empty.exists()


def _plan_units(index: Path, where: str, base: str, out: Path, task_bytes: int) -> list[tuple[str, str]]:
    dataset, _ = open_index(str(index))
    tasks = plan_tasks(select_records(dataset, parse_where(where, dataset.schema)[0]), task_bytes, base)
    folder = OutputDir(out, ("docs", "rejected", "stats", "done", "plan"))
    cfg = ExtractJobConfig()
    folder.prepare("extract", cfg.to_dict(), cfg.fingerprint())
    units = []
    for unit, rows in tasks:
        folder.store.write_bytes(folder.path("plan", f"{unit}.parquet"), plan_bytes(rows))
        units.append((folder.path("plan", f"{unit}.parquet"), unit))
    return units


def test_503_forever_fails_the_unit_naming_it_and_commits_nothing(index, warc_dir, tmp_path):
    cfg = ExtractJobConfig().replace(fetch=FAST.replace(attempts=3))
    with serving(warc_dir, fail_every=1) as srv:
        units = _plan_units(index, WHERE, srv.url, tmp_path, 10**9)
        assert len(units) == 1
        result = run_unit(process_index_unit, units[0], cfg, str(tmp_path))
        url = srv.url
    assert result["status"] == "failed"
    assert units[0][1] in result["error"] and url in result["error"] and "after 3 attempts" in result["error"]
    # 3 attempts per record at most, and no record started after the first one failed
    assert srv.requests % 3 == 0 and srv.requests <= 3 * 8
    assert not list((tmp_path / "done").iterdir()) and not list((tmp_path / "docs").iterdir())


def test_units_are_byte_balanced_and_named_by_their_records(index):
    dataset, _ = open_index(str(index))
    table = select_records(dataset, ds.scalar(True))
    tasks = plan_tasks(table, 100_000, "http://h/")
    sizes = [sum(t["warc_record_length"].to_pylist()) for _, t in tasks]
    biggest = max(table["warc_record_length"].to_pylist())
    total = sum(sizes)
    # n = ceil(total / task_bytes) tasks, each within one record of total / n
    assert len(tasks) == -(-total // 100_000)
    assert all(abs(s - total / len(tasks)) <= biggest for s in sizes)
    assert pa.concat_tables([t for _, t in tasks])["warc_record_offset"] == table["warc_record_offset"]
    again = plan_tasks(table, 100_000, "http://h/")
    assert [u for u, _ in again] == [u for u, _ in tasks]  # deterministic: a rerun finds its units
    assert len({u for u, _ in tasks}) == len(tasks)
    assert [u for u, _ in plan_tasks(table, 100_000, "http://other/")] != [u for u, _ in tasks]


def test_a_cdxj_index_selects_the_same_records(index, warc_dir, tmp_path):
    from curation.index.ccindex import write_cdxj

    cdxj = tmp_path / "i.cdxj"
    write_cdxj([str(warc_dir / w) for w in WARCS], str(cdxj), str(warc_dir))
    where = "url_host_tld = 'com' AND fetch_status = 200"
    got = []
    for path in (str(cdxj), str(index)):
        dataset, _ = open_index(path)
        got.append(select_records(dataset, parse_where(where, dataset.schema)[0]).drop_columns("crawl"))
    assert got[0].num_rows > 3 and got[0].equals(got[1])


def test_command_line_mistakes_exit_2_before_spark(index, warc_dir, tmp_path, capsys, monkeypatch):
    import curation.index.job

    def no_spark(*_a, **_k):
        raise AssertionError("Spark was started before the mistake was reported")

    # A local Parquet index is selected on Spark (fetch.select: auto): every mistake must come first.
    monkeypatch.setattr(curation.index.job, "get_spark", no_spark)
    out = tmp_path / "out"
    ok = ["--index", str(index), "--where", WHERE, "--warc-base", str(warc_dir)]
    bad_table = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1]}), bad_table)
    bad_cdxj = tmp_path / "bad.cdxj"
    bad_cdxj.write_text("com,example)/ 20240101000000 {not json\n")
    cases = [
        (["--index", str(tmp_path / "none.parquet"), *ok[2:]], "not found"),
        (["--index", str(bad_table), *ok[2:]], "has no column warc_filename"),
        (["--index", str(bad_cdxj), *ok[2:]], "line 1 is not a CDXJ line"),
        ([*ok[:2], "--where", "content_language = 'eng'", *ok[4:]], "no column 'content_language'"),
        ([*ok[:2], "--where", "fetch_status = 'ok'", *ok[4:]], "not a value of type int16"),
        ([*ok[:2], "--where", "url LIKE 'a\\b'", *ok[4:]], "backslash escapes only"),
        # an empty selection is known only after the scan: on the driver path, before Spark
        (
            [
                *ok[:2],
                "--where",
                "url_host_name = 'nowhere.example'",
                *ok[4:],
                "--set",
                "fetch.select=driver",
            ],
            "selects no record",
        ),
        ([*ok, "--set", "fetch.select=gpu"], "fetch.select: input should be"),
        ([*ok[:4], "--warc-base", "ftp://host/"], "scheme must be"),
        ([*ok[:4], "--warc-base", str(tmp_path / "missing")], "not an existing folder"),
        (ok[:4], "needs --where .* and --warc-base"),
        (["--input", str(warc_dir / WARCS[0]), "--where", WHERE], "go with --index"),
    ]
    for args, message in cases:
        assert main(["extract", *args, "--output", str(out), "--no-progress"]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and __import__("re").search(message, err), (args, err)
        assert not out.exists()  # refused before any folder was made (or Spark started)


def test_index_and_warcs_on_a_real_s3_server(index, whole, warc_dir, s3_bucket, tmp_path):
    """The index read from s3:// (a file, and Common Crawl's crawl=/subset= layout), the records
    fetched by S3 ranged GETs (moto's server on 127.0.0.1): the same selection, the same documents."""
    import pyarrow.compute as pc

    from testkit.s3 import upload_tree

    for w in WARCS:
        upload_tree(warc_dir / w, f"{s3_bucket}/crawl/{w}")
    upload_tree(index, f"{s3_bucket}/index.parquet")
    table = pq.read_table(index)
    for subset in ("warc", "crawldiagnostics"):  # partition values live in the folder names there
        part = tmp_path / f"{subset}.parquet"
        pq.write_table(
            table.filter(pc.equal(table["subset"], subset)).drop_columns(["crawl", "subset"]), part
        )
        upload_tree(part, f"{s3_bucket}/table/crawl=CC-MAIN-LOCAL/subset={subset}/part-00000.parquet")

    where = "subset = 'warc' AND content_languages = 'eng'"
    want = _selected(index, where)
    dataset, ident = open_index(f"{s3_bucket}/table/")
    assert set(ident["files"]) == {
        f"crawl=CC-MAIN-LOCAL/subset={s}/part-00000.parquet" for s in ("warc", "crawldiagnostics")
    }
    got = select_records(dataset, parse_where(where, dataset.schema)[0])
    assert set(zip(got["warc_filename"].to_pylist(), got["warc_record_offset"].to_pylist())) == want
    assert set(got["crawl"].to_pylist()) == {"CC-MAIN-LOCAL"}  # the partition folder's value

    out = tmp_path / "out"
    units = _plan_units(f"{s3_bucket}/index.parquet", WHERE, f"{s3_bucket}/crawl", out, 10**9)
    assert run_unit(process_index_unit, units[0], ExtractJobConfig(), str(out))["status"] == "done"
    expected = [d for d in _docs(whole) if (d["warc_file"], d["warc_offset"]) in _selected(index, WHERE)]
    assert _docs(out) == expected
