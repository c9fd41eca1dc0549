"""The `robots` snapshot (curation/optout/snapshot.py) on robots.txt WARCs built here with warcio from the
real files of the shared data: 2xx, 4xx, 5xx, redirect chains (resolved, too long, dangling) and two
crawls a year apart, combined as of a date."""

from __future__ import annotations

import gzip
import hashlib
import io
import itertools
import json
from datetime import UTC, datetime

import pytest

from curation.optout.capture import RobotsConfig
from curation.optout.robots import RobotsTxt, parse
from curation.optout.snapshot import (
    SnapshotConfig,
    capture_rows,
    decide_host,
    host_key,
    latest_captures,
    run_robots_snapshot,
)
from testkit.shared_data import shared_data_dir


def real(host: str) -> bytes:
    path = shared_data_dir() / "robots" / "robots-top-websites.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["host"] == host:
                return row["robots_txt"].encode(row["encoding"])
    raise KeyError(host)


def write_warc(path, captures, when: str) -> None:
    """captures: (url, status line, body, location or None) -> response records (warcio)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with open(path, "wb") as f:
        w = WARCWriter(f, gzip=True)
        for url, status, body, location in captures:
            headers = [("Content-Type", "text/plain")] + ([("Location", location)] if location else [])
            http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
            rec = w.create_warc_record(
                url,
                "response",
                payload=io.BytesIO(body),
                http_headers=http,
                warc_headers_dict={"WARC-Date": when},
            )
            w.write_record(rec)


def loop_chain(hops: int) -> list[tuple]:
    urls = ["https://loop.example/robots.txt"] + [
        f"https://loop.example/r{i}/robots.txt" for i in range(1, hops + 1)
    ]
    return [(urls[i], "301 Moved", b"", urls[i + 1]) for i in range(hops)] + [
        (urls[-1], "200 OK", b"User-agent: *\nDisallow: /\n", None)
    ]


@pytest.fixture(scope="module")
def warcs(tmp_path_factory):
    d = tmp_path_factory.mktemp("robotstxt")
    old = d / "CC-MAIN-2024-10-robotstxt-00000.warc.gz"
    new = d / "CC-MAIN-2025-26-robotstxt-00000.warc.gz"
    write_warc(
        old,
        [
            ("https://github.com/robots.txt", "200 OK", real("github.com"), None),
            ("https://www.gutenberg.org/robots.txt", "200 OK", real("www.gutenberg.org"), None),
            ("https://a404.example/robots.txt", "404 Not Found", b"<html>no</html>", None),
            ("https://a403.example/robots.txt", "403 Forbidden", b"", None),
            ("https://a503.example/robots.txt", "503 Service Unavailable", b"", None),
            (
                "http://google.com/robots.txt",
                "301 Moved Permanently",
                b"",
                "https://www.google.com/robots.txt",
            ),
            ("https://www.google.com/robots.txt", "200 OK", real("www.google.com"), None),
            ("https://dangle.example/robots.txt", "302 Found", b"", "/elsewhere/robots.txt"),
            *loop_chain(6),
        ],
        "2024-03-01T10:00:00Z",
    )
    write_warc(
        new,
        [
            ("https://github.com/robots.txt", "200 OK", b"User-agent: GPTBot\nDisallow: /\n", None),
            ("https://www.gutenberg.org/robots.txt", "503 Service Unavailable", b"", None),
        ],
        "2025-06-20T10:00:00Z",
    )
    return old, new


def test_host_key_is_scheme_host_and_port():
    assert host_key("https://WWW.Example.com./robots.txt") == "https://www.example.com"
    assert host_key("http://example.com:80/robots.txt") == "http://example.com"
    assert host_key("https://example.com:8443/robots.txt") == "https://example.com:8443"
    assert host_key("ftp://example.com/robots.txt") is None


def test_capture_rows_keep_status_location_and_where_the_record_is(warcs):
    old, _ = warcs
    rows = list(capture_rows(str(old), old.name, 512_000))
    assert len(rows) == 15
    by = {r["url"]: r for r in rows}
    gh = by["https://github.com/robots.txt"]
    assert gh["status"] == 200 and gh["body"] == real("github.com") and gh["crawl"] == "CC-MAIN-2024-10"
    assert gh["body_sha256"] == hashlib.sha256(real("github.com")).hexdigest()
    assert (
        by["https://dangle.example/robots.txt"]["location"] == "https://dangle.example/elsewhere/robots.txt"
    )
    # The offset and length name the record: reading there gives the same response back.
    from warcio.archiveiterator import ArchiveIterator

    with open(old, "rb") as f:
        f.seek(gh["warc_offset"])
        rec = next(iter(ArchiveIterator(io.BytesIO(f.read(gh["warc_length"])))))
        assert rec.rec_headers.get_header("WARC-Target-URI") == "https://github.com/robots.txt"
    assert all(r["warc_offset"] < s["warc_offset"] for r, s in itertools.pairwise(rows))


def test_decide_host_without_spark():
    chain = [
        {"url": "http://a.org/robots.txt", "status": 301, "location": "https://a.org/robots.txt"},
        {"url": "https://a.org/robots.txt", "status": 200, "location": None},
    ]
    row = {"host": "http://a.org", "first_url": chain[0]["url"], "first_fetch_time": None, "first_status": 301,
           "redirect_target": chain[1]["url"], "chain": chain, "body": b"User-agent: *\nDisallow: /x\n",
           "body_sha256": "s", "warc_file": "f", "warc_offset": 0, "warc_length": 1, "crawl": None,
           "replaced_status": None, "replaced_fetch_time": None}  # fmt: skip
    out = decide_host(row, RobotsConfig())
    assert (out["reason"], out["redirects"], out["final_url"]) == ("rules", 1, "https://a.org/robots.txt")
    v = RobotsTxt.from_json(out["groups"]).check("/x/y", "GPTBot")
    assert not v.allowed and v.rule.text == "Disallow: /x"


def test_groups_json_round_trips_every_real_verdict():
    body = real("github.com")
    a, b = parse(body), RobotsTxt.from_json(parse(body).to_json())
    for agent in ("CCBot", "GPTBot", "Googlebot"):
        for url in ("/", "/a/b/tree/master", "/a/b/tree/dev", "/search?q=x"):
            assert a.check(url, agent) == b.check(url, agent)
    assert a.counts == b.counts


# slow: ~30 s on a loaded 2-core box, the redirect hops' six joins (curation/optout/snapshot.py: to be cut).
@pytest.mark.spark
@pytest.mark.slow
def test_snapshot_on_spark_as_of_a_date(spark, warcs, tmp_path):
    old, new = warcs
    inputs = [str(old), str(new)]
    as_2024 = SnapshotConfig(as_of=datetime(2024, 12, 31, tzinfo=UTC))
    stats = run_robots_snapshot(inputs, str(tmp_path / "s2024"), as_2024, spark=spark)
    rows = {r["host"]: r for r in spark.read.parquet(str(tmp_path / "s2024" / "hosts")).collect()}
    assert (
        stats["hosts"] == len(rows) == 1 + 1 + 3 + 2 + 1 + 1
    )  # github, gutenberg, 4xx/5xx, google x2, dangle, loop
    assert stats["reasons"]["rules"] == 4
    reasons = {h: r["reason"] for h, r in rows.items()}
    assert reasons["https://a404.example"] == "http_4xx"
    assert reasons["https://a403.example"] == "http_401_403"
    assert reasons["https://a503.example"] == "http_5xx"
    assert reasons["https://dangle.example"] == "redirect_unresolved"
    assert reasons["https://loop.example"] == "redirect_limit"  # 6 redirects: more than RFC 9309's 5
    g = rows["http://google.com"]
    assert (g["status"], g["final_url"], g["redirects"], g["reason"]) == (
        301,
        "https://www.google.com/robots.txt",
        1,
        "rules",
    )
    assert RobotsTxt.from_json(g["groups"]).check("/search?q=a", "GPTBot").rule.text == "Disallow: /search"
    gh = rows["https://github.com"]
    assert gh["crawl"] == "CC-MAIN-2024-10" and gh["warc_file"] == str(old)
    assert gh["body_sha256"] == hashlib.sha256(real("github.com")).hexdigest()
    assert RobotsTxt.from_json(gh["groups"]).check("/x", "GPTBot").agent == "*"
    assert json.loads((tmp_path / "s2024" / "stats.json").read_text())["as_of"].startswith("2024-12-31")
    assert all(r["replaced_status"] is None for r in rows.values())  # no 2xx before a503's 503
    # With no date, the newest capture of every URL: github's 2025 file; gutenberg's 2025 capture is a
    # 503, so its 2024 file stands in for it (RFC 9309's cached copy), naming the 503 it replaced, and
    # with `on_unreachable: disallow` the 503 decides. (The selection step alone: a second whole run
    # would double the test's Spark time.)
    newest = {r["url"]: r for r in latest_captures(spark, inputs, SnapshotConfig()).collect()}
    gh = newest["https://github.com/robots.txt"]
    assert (gh["crawl"], parse(gh["body"]).check("/x", "GPTBot").rule.text) == (
        "CC-MAIN-2025-26",
        "Disallow: /",
    )
    assert gh["replaced_status"] is None
    gb = newest["https://www.gutenberg.org/robots.txt"]
    assert (gb["status"], gb["crawl"], gb["body"]) == (200, "CC-MAIN-2024-10", real("www.gutenberg.org"))
    assert gb["replaced_status"] == 503 and gb["replaced_fetch_time"].year == 2025
    assert newest["https://a503.example/robots.txt"]["status"] == 503  # nothing earlier to fall back on
    strict = latest_captures(spark, inputs, SnapshotConfig(on_unreachable="disallow")).collect()
    gb = next(r for r in strict if r["url"] == "https://www.gutenberg.org/robots.txt")
    assert (gb["status"], gb["replaced_status"]) == (503, None)
