"""Ranged reads of WARC records (one gzip member each) over HTTP(S), S3 or a local folder.

`extract --index` (curation/index/job.py) reads only the records its condition selects: for each,
one request for bytes [warc_record_offset, offset + warc_record_length) of the WARC at
`--warc-base` + `warc_filename` (which must resolve under the base: `record_url`). Common Crawl's
bucket answers those from `https://data.commoncrawl.org/` (HTTP `Range`) and `s3://commoncrawl/`
(S3 ranged GetObject).

What a request meets at scale, and what is done about it:
- 503 Slow Down (S3's and CloudFront's answer to too many requests), 429, other 5xx, connection
  resets, timeouts and short bodies are retried, at most `fetch.attempts` requests per record, with
  exponential backoff and full jitter (sleep uniform(0, min(cap, base * 2^(n-1))) before attempt
  n+1, the AWS Architecture Blog's "Exponential Backoff And Jitter"): clients that failed together
  do not all come back together. A Retry-After the server sends is honoured up to the cap. When
  the attempts are spent the error names the unit, the URL and the byte range (`FetchError`): the
  unit fails, nothing of it is committed, a rerun retries it.
- A 4xx other than 429 (404: the index names a file the base does not have; 403; 416: a range
  past the end) is not retried: it will not change, and the message says which.
- A server that ignores `Range` (200 with the whole file) is an error, not a slow success: reading
  whole 1 GB WARCs is what the index is there to avoid.
- At most `fetch.per_host` requests are in flight to one host from one worker process (a bounded
  semaphore per host, shared by the task's fetch threads), so a cluster puts at most
  executors x cores x per_host requests on a host.
Every request, retry (by reason) and byte is counted; the task adds them to its stats
(`fetch_requests`, `fetch_retries`, `fetch_retry:<reason>`, `fetch_bytes`).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from curation.config import FetchConfig
from curation.inputs import resolve_under

__all__ = ["FetchError", "RangeFetcher", "RecordRange", "check_base", "record_url"]

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
# S3 error codes that mean "try again later" (botocore's own retryable set, less the auth ones).
_S3_RETRY_CODES = ("SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "503", "500")
_CONTENT_RANGE_RE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


class FetchError(OSError):
    """A record could not be fetched: retries spent, or an answer that retrying cannot change."""


@dataclass(frozen=True, slots=True)
class RecordRange:
    url: str
    offset: int
    length: int


class _Retry(Exception):
    """One attempt failed in a way worth retrying; `reason` is counted, `wait` a server's hint."""

    def __init__(self, reason: str, detail: str, wait: float | None = None) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.wait = reason, detail, wait


def record_url(base: str, warc_filename: str) -> str:
    """Where a record's WARC is: `warc_filename` under `base`, by curation/inputs.resolve_under.

    The index is data: a `..`, an absolute path, `file://`, another host, port, scheme or bucket
    would let a row choose what the job reads (a local secret, a metadata endpoint), so each is
    refused with `UnsafeLocation` (an InputError) instead of being fetched.
    """
    return resolve_under(base, warc_filename)


def check_base(base: str) -> str:
    """`base` if it is an http(s):// or s3:// prefix with a host/bucket, or an existing local folder.

    Raises ValueError with what is wrong (the job turns it into exit status 2). Nothing is fetched.
    """
    if "://" in base:
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https", "s3", "s3a"):
            raise ValueError(f"--warc-base {base!r}: scheme must be https://, http:// or s3://")
        if not parts.netloc:
            raise ValueError(f"--warc-base {base!r} names no host (or bucket)")
        if parts.query or parts.fragment:
            raise ValueError(f"--warc-base {base!r} must be a plain prefix (no ?query or #fragment)")
        return base
    if not Path(base).expanduser().is_dir():
        raise ValueError(f"--warc-base {base!r} is not a URL and not an existing folder")
    return str(Path(base).expanduser().resolve())


_HOST_LIMITS: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_HOST_LOCK = threading.Lock()
_POOLS: dict[tuple[int, float], object] = {}


def _host_slot(host: str, limit: int) -> threading.BoundedSemaphore:
    with _HOST_LOCK:
        sem = _HOST_LIMITS.get((host, limit))
        if sem is None:
            sem = _HOST_LIMITS[(host, limit)] = threading.BoundedSemaphore(limit)
        return sem


def _http_pool(per_host: int, timeout: float):
    """One urllib3 pool manager per worker process and setting: connections are kept alive."""
    import urllib3

    key = (per_host, timeout)
    with _HOST_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = urllib3.PoolManager(
                num_pools=64, maxsize=per_host, retries=False, timeout=urllib3.Timeout(timeout)
            )
        return pool


class RangeFetcher:
    """Fetches record ranges with retries, backoff and a per-host limit; counts what it did.

    `sleep` and `rng` are the clock and the jitter (tests pass a seeded Random and record sleeps).
    """

    def __init__(
        self,
        cfg: FetchConfig,
        unit: str = "",
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.cfg, self.unit, self.sleep = cfg, unit, sleep
        self.rng = rng or random.Random()
        self.counters: Counter = Counter()
        self._lock = threading.Lock()

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.counters[key] += n

    def backoff(self, attempt: int, hint: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based): full jitter, capped."""
        cfg = self.cfg
        delay = self.rng.uniform(0, min(cfg.backoff_cap_s, cfg.backoff_base_s * 2 ** (attempt - 1)))
        if hint is not None:
            delay = max(delay, min(hint, cfg.backoff_cap_s))
        return delay

    def fetch(self, rr: RecordRange) -> bytes:
        """The bytes of one record; FetchError when the attempts are spent or retrying cannot help."""
        where = f"unit {self.unit}: {rr.url} bytes {rr.offset}-{rr.offset + rr.length - 1}"
        host = urlsplit(rr.url).netloc or "local"
        last = ""
        for attempt in range(1, self.cfg.attempts + 1):
            self._count("fetch_requests")
            try:
                with _host_slot(host, self.cfg.per_host):
                    data = self._get(rr)
                self._count("fetch_bytes", len(data))
                return data
            except _Retry as e:
                last = f"{e.reason}: {e.detail}"
                if attempt == self.cfg.attempts:
                    break
                self._count("fetch_retries")
                self._count(f"fetch_retry:{e.reason}")
                self.sleep(self.backoff(attempt, e.wait))
            except FetchError as e:
                raise FetchError(f"{where}: {e}") from None
        raise FetchError(f"{where}: gave up after {self.cfg.attempts} attempts (last: {last})")

    def fetch_all(self, ranges: list[RecordRange]) -> Iterator[bytes]:
        """The records' bytes in the order given, fetched `per_host` at a time."""
        if len(ranges) <= 1:
            yield from (self.fetch(r) for r in ranges)
            return
        pool = ThreadPoolExecutor(max_workers=self.cfg.per_host)
        try:
            # submitted in bounded windows so a task never holds more than 2 x per_host records
            window = 2 * self.cfg.per_host
            futures = [pool.submit(self.fetch, r) for r in ranges[:window]]
            for i in range(len(ranges)):
                data = futures[i].result()
                futures[i] = None  # type: ignore[call-overload]  # let the bytes go
                if i + window < len(ranges):
                    futures.append(pool.submit(self.fetch, ranges[i + window]))
                yield data
        finally:
            # a failed record ends the unit: records not started yet are not fetched in vain
            pool.shutdown(wait=True, cancel_futures=True)

    # -- one attempt per scheme
    def _get(self, rr: RecordRange) -> bytes:
        scheme = rr.url.split("://", 1)[0] if "://" in rr.url else "file"
        if scheme in ("http", "https"):
            return self._get_http(rr)
        if scheme in ("s3", "s3a"):
            return self._get_s3(rr)
        return self._get_local(rr)

    def _get_http(self, rr: RecordRange) -> bytes:
        import urllib3

        last = rr.offset + rr.length - 1
        try:
            resp = _http_pool(self.cfg.per_host, self.cfg.timeout_s).request(
                "GET", rr.url, headers={"Range": f"bytes={rr.offset}-{last}"}, preload_content=True
            )
        except urllib3.exceptions.HTTPError as e:  # resets, timeouts, refused connections
            raise _Retry("connection", f"{type(e).__name__}: {e}") from None
        status, data = resp.status, resp.data
        if status in RETRY_STATUS:
            raise _Retry(f"http_{status}", f"HTTP {status}", _retry_after(resp.headers.get("Retry-After")))
        if status == 200:
            raise FetchError(f"the server ignored the Range header (HTTP 200, {len(data)} bytes)")
        if status != 206:
            raise FetchError(f"HTTP {status}")
        m = _CONTENT_RANGE_RE.fullmatch(resp.headers.get("Content-Range", "").strip())
        if m is None or int(m.group(1)) != rr.offset or int(m.group(2)) != last:
            raise FetchError(f"answer for another range: Content-Range {resp.headers.get('Content-Range')!r}")
        if len(data) != rr.length:
            raise _Retry("short_read", f"{len(data)} of {rr.length} bytes")
        return data

    def _get_s3(self, rr: RecordRange) -> bytes:
        import fsspec

        fs = fsspec.filesystem("s3")
        key = rr.url.split("://", 1)[1]
        try:
            data = fs.cat_file(key, start=rr.offset, end=rr.offset + rr.length)
        except (FileNotFoundError, PermissionError) as e:
            raise FetchError(f"{type(e).__name__}: {e}") from None
        except Exception as e:  # botocore/aiohttp: many types; the code says whether to retry
            text = f"{type(e).__name__}: {e}"
            if any(code in text for code in _S3_RETRY_CODES) or isinstance(e, (OSError, TimeoutError)):
                raise _Retry("s3_slowdown" if "SlowDown" in text else "s3_error", text[:300]) from None
            raise FetchError(text[:300]) from None
        if len(data) != rr.length:
            raise _Retry("short_read", f"{len(data)} of {rr.length} bytes")
        return data

    def _get_local(self, rr: RecordRange) -> bytes:
        path = rr.url.removeprefix("file://")
        try:
            with open(path, "rb") as f:
                f.seek(rr.offset)
                data = f.read(rr.length)
        except OSError as e:
            raise FetchError(f"{type(e).__name__}: {e}") from None
        if len(data) != rr.length:
            raise FetchError(f"file ends early: {len(data)} of {rr.length} bytes")
        return data


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:  # an HTTP date: the jittered backoff is used instead
        return None
