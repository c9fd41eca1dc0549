"""Ranged record reads (curation/index/fetch.py) against real servers on 127.0.0.1: rangehttpserver, moto's S3.

The bytes must be the file's own; a 503 every Nth request is retried and counted; a server that
answers 503 forever ends in an error naming the unit, the URL and the attempts, after exactly
`attempts` requests; errors retrying cannot fix (404, a server that ignores Range) are not retried;
the per-host limit bounds the requests the server sees at once. The clock is the only thing
replaced: sleeps are recorded instead of slept, so the backoff's bounds are checked exactly.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from curation.config import FetchConfig
from curation.index.fetch import FetchError, RangeFetcher, RecordRange, check_base, record_url
from testkit.range_server import serving

WARC = "cc-main-2020-34-sample.warc.gz"


def _ranges(warc_dir: Path, base: str, n: int = 6) -> tuple[list[RecordRange], bytes]:
    """n spans of the real file (sizes of real records: a few KB each), and the file's bytes."""
    data = (warc_dir / WARC).read_bytes()
    step = len(data) // n
    spans = [RecordRange(record_url(base, WARC), i * step, 1000 + 97 * i) for i in range(n)]
    return spans, data


def _fetcher(sleeps: list[float], **cfg) -> RangeFetcher:
    return RangeFetcher(FetchConfig(**cfg), "index-00007-test", sleep=sleeps.append, rng=random.Random(0))


def test_ranges_are_the_files_bytes_and_503s_are_retried_and_counted(warc_dir):
    sleeps: list[float] = []
    with serving(warc_dir, fail_every=3) as srv:
        spans, data = _ranges(warc_dir, srv.url)
        fetcher = _fetcher(sleeps, per_host=1)  # one at a time: every 3rd request of the server fails
        got = list(fetcher.fetch_all(spans))
    assert got == [data[r.offset : r.offset + r.length] for r in spans]
    assert srv.failed >= 2 and fetcher.counters["fetch_retries"] == srv.failed
    assert fetcher.counters["fetch_retry:http_503"] == srv.failed
    assert fetcher.counters["fetch_requests"] == srv.requests == len(spans) + srv.failed
    assert fetcher.counters["fetch_bytes"] == sum(r.length for r in spans)
    # the first retry of a record waits up to base * 2^0 (full jitter): 0.5 s by default
    assert len(sleeps) == srv.failed and all(0 <= s <= 0.5 for s in sleeps)
    assert all(r.startswith("bytes=") for r in srv.ranges)  # never a whole-file GET


def test_503_forever_fails_after_the_attempts_naming_unit_and_url(warc_dir):
    sleeps: list[float] = []
    with serving(warc_dir, fail_every=1) as srv:
        spans, _ = _ranges(warc_dir, srv.url, 1)
        fetcher = _fetcher(sleeps, attempts=4, backoff_base_s=1.0, backoff_cap_s=3.0)
        with pytest.raises(FetchError) as err:
            fetcher.fetch(spans[0])
    msg = str(err.value)
    assert "unit index-00007-test" in msg and spans[0].url in msg and "after 4 attempts" in msg
    assert "http_503" in msg
    assert srv.requests == 4 and fetcher.counters["fetch_retries"] == 3
    # exponential with full jitter, capped: attempt n waits within [0, min(3, 1 * 2^(n-1))]
    assert len(sleeps) == 3 and all(0 <= s <= b for s, b in zip(sleeps, (1.0, 2.0, 3.0)))


def test_backoff_is_capped_jittered_and_honours_retry_after():
    f = RangeFetcher(FetchConfig(backoff_base_s=0.5, backoff_cap_s=4.0), rng=random.Random(1))
    waits = [f.backoff(n) for n in range(1, 12) for _ in range(50)]
    assert max(waits) <= 4.0 and min(waits) >= 0.0
    assert len({round(w, 6) for w in waits}) > 400  # jittered: not the same wait for everyone
    first = [f.backoff(1) for _ in range(200)]
    assert max(first) <= 0.5  # the first retry waits at most base
    assert f.backoff(1, hint=2.5) >= 2.5 and f.backoff(1, hint=60) <= 4.0  # Retry-After, capped


def test_errors_retrying_cannot_fix_are_not_retried(warc_dir, tmp_path):
    sleeps: list[float] = []
    with serving(warc_dir) as srv:
        fetcher = _fetcher(sleeps)
        with pytest.raises(FetchError, match="HTTP 404"):
            fetcher.fetch(RecordRange(record_url(srv.url, "no-such.warc.gz"), 0, 100))
        size = (warc_dir / WARC).stat().st_size
        with pytest.raises(FetchError, match="HTTP 416"):
            fetcher.fetch(RecordRange(record_url(srv.url, WARC), size + 10, 100))
        assert srv.requests == 2 and not sleeps
    with serving(warc_dir, honour_range=False) as srv:
        with pytest.raises(FetchError, match="ignored the Range header"):
            _fetcher(sleeps).fetch(RecordRange(record_url(srv.url, WARC), 0, 100))
        assert srv.requests == 1


def test_refused_connections_are_retried_then_reported(warc_dir):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    fetcher = _fetcher(sleeps, attempts=3, timeout_s=2.0)
    with pytest.raises(FetchError, match=r"after 3 attempts \(last: connection"):
        fetcher.fetch(RecordRange(f"http://127.0.0.1:{port}/{WARC}", 0, 10))
    assert fetcher.counters["fetch_retry:connection"] == 2 and len(sleeps) == 2


def test_per_host_limit_bounds_requests_in_flight(warc_dir):
    with serving(warc_dir, delay=0.05) as srv:
        spans, data = _ranges(warc_dir, srv.url, 16)
        got = list(_fetcher([], per_host=3).fetch_all(spans))
    assert got == [data[r.offset : r.offset + r.length] for r in spans]
    # 16 requests held 50 ms each by 3 threads: they overlap, never beyond the limit
    assert 2 <= srv.max_in_flight <= 3


def test_local_folder_base(warc_dir):
    base = check_base(str(warc_dir))
    spans, data = _ranges(warc_dir, base, 3)
    assert list(_fetcher([]).fetch_all(spans)) == [data[r.offset : r.offset + r.length] for r in spans]


@pytest.mark.parametrize(
    "base, why",
    [
        ("ftp://host/x/", "scheme"),
        ("https:///path", "no host"),
        ("https://h/x?y=1", "plain prefix"),
        ("/no/such/folder", "not a URL and not an existing folder"),
    ],
)
def test_bad_bases_are_refused(base, why):
    with pytest.raises(ValueError, match=why):
        check_base(base)


def test_s3_ranged_gets_on_a_real_s3_server(warc_dir, s3_bucket):
    from testkit.s3 import upload_tree

    upload_tree(warc_dir / WARC, f"{s3_bucket}/crawl/{WARC}")
    spans, data = _ranges(warc_dir, f"{s3_bucket}/crawl", 4)
    fetcher = _fetcher([])
    assert list(fetcher.fetch_all(spans)) == [data[r.offset : r.offset + r.length] for r in spans]
    with pytest.raises(FetchError, match="FileNotFoundError"):
        fetcher.fetch(RecordRange(f"{s3_bucket}/crawl/missing.warc.gz", 0, 10))
