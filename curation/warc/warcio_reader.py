"""The `warcio` engine of `curation.warc.records.iter_records`: a WARC file -> pages, counting every record that is not one.

Kept: HTTP 200 `response` records with an HTML content type (and, optionally, WET `conversion`
records, whose text is already extracted). Everything else is yielded as a `Skip` with a reason.

Robustness, because real crawls are messy (see ../shared/data/warc/quirks):
- gzip-per-record and uncompressed WARCs; WARC/0.17, 0.18, 1.0, 1.1 and ARC (warcio reads them).
- Single-stream gzip (one gzip member for the whole file, as some WET tools write): warcio refuses
  it, so the file is decompressed to a temporary file and read as uncompressed, skipping the
  records already yielded.
- A corrupt or truncated region: the reader skips to the next gzip member (compressed files) or
  the next line starting with `WARC/` (uncompressed files) and goes on, counting the skipped
  bytes as `corrupt_region`. Every good record after the damage is still read.
- Chunked transfer-encoding and gzip/deflate/br content-encoding are undone by warcio's
  `content_stream()`; a payload that fails to decode is a counted skip.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import BinaryIO

from curation.config import ReaderConfig

log = logging.getLogger(__name__)


class _BrotliDecompressor:
    """brotli's Decompressor with the `unused_data` attribute warcio's readers expect.

    warcio 1.8.1 sets `unused_data` on brotli's own Decompressor, which brotli >= 1.1 (a C type)
    refuses with AttributeError, so every `Content-Encoding: br` page would fail to decode.
    """

    def __init__(self) -> None:
        import brotli

        self._d = brotli.Decompressor()
        self.unused_data = None

    def decompress(self, data: bytes) -> bytes:
        return self._d.process(data)


def _register_brotli() -> None:
    try:
        import brotli  # noqa: F401
        from warcio.bufferedreaders import BufferedReader
    except ImportError:
        return
    BufferedReader.DECOMPRESSORS["br"] = _BrotliDecompressor


_register_brotli()

GZIP_MAGIC = b"\x1f\x8b\x08"
_CRAWL_RE = re.compile(rb"CC-MAIN-\d{4}-\d{2}")
_CRAWL_STR_RE = re.compile(r"CC-MAIN-\d{4}-\d{2}")
_SNIFF_HTML_RE = re.compile(rb"<(!doctype\s+html|html|head|body)\b", re.IGNORECASE)
# Bound on resynchronisation attempts per file, so a file of pure garbage cannot spin a task.
MAX_RESYNCS = 10_000


@dataclass(slots=True)
class Page:
    """A record worth extracting: HTML from a response, or plain text from a WET conversion."""

    url: str | None
    offset: int
    record_id: str | None
    fetch_time: datetime | None
    crawl: str | None
    kind: str  # "html" or "text"
    payload: bytes
    content_type: str | None
    optout_headers: tuple[tuple[str, str], ...] = ()
    """The response's opt-out headers (`OPTOUT_HEADERS`), lower-cased names, as sent: the only headers
    kept besides the content type, read by curation/optout/page.py. Empty for WET text."""


OPTOUT_HEADERS = frozenset(("tdm-reservation", "tdm-policy", "x-robots-tag"))
"""HTTP headers that carry a page-level reservation: W3C TDMRep's two, and X-Robots-Tag (`noai`)."""
MAX_OPTOUT_HEADERS = 8
MAX_OPTOUT_HEADER_CHARS = 1024
"""Bounds on what a page keeps of them: a hostile response's thousand X-Robots-Tag lines cost nothing."""


def optout_headers(http) -> tuple[tuple[str, str], ...]:
    """(name, value) of the opt-out headers of a warcio StatusAndHeaders, in order, bounded. One pass
    over the header list (about 15 pairs, a few microseconds), so the reader keeps them for every page."""
    out = []
    for name, value in http.headers:
        key = name.lower()
        if key in OPTOUT_HEADERS:
            out.append((key, value[:MAX_OPTOUT_HEADER_CHARS]))
            if len(out) >= MAX_OPTOUT_HEADERS:
                break
    return tuple(out)


@dataclass(slots=True)
class Skip:
    """A record (or a region of the file) that yields no page, with the reason it is counted under."""

    reason: str
    offset: int
    nbytes: int
    url: str | None = None
    detail: str = ""


def crawl_from_name(name: str) -> str | None:
    m = _CRAWL_STR_RE.search(name)
    return m.group(0) if m else None


def iter_records_warcio(
    path: str, cfg: ReaderConfig, crawl_hint: str | None, start: int = 0, end: int | None = None
) -> Iterator[Page | Skip]:
    """The records of `path` that start in [start, end) (curation/warc/ranges.py: a range is a unit);
    the whole file by default. Offsets are absolute, so a range yields exactly the items the
    whole file yields for its records."""
    state = _State(crawl=crawl_at(path, start, crawl_hint))
    with open(path, "rb") as f:
        is_gzip = f.read(3) == GZIP_MAGIC
        size = os.fstat(f.fileno()).st_size
        try:
            yield from _resyncing(f, size, is_gzip, cfg, state, start, end)
            return
        except _SingleStreamGzip:
            pass
    # One gzip stream for the whole file (or a truncated last member): read it decompressed,
    # from where this range starts, skipping what was yielded already.
    already = state.records
    marks = (start,) if end is None else (start, end)
    with _decompressed_copy(path, marks) as (plain, truncated_at, plain_at):
        if start not in plain_at:  # the stream broke before this range: nothing here can be read
            yield Skip("truncated_file", start, 0, detail="gzip stream broken before this range")
            return
        state2 = _State(crawl=state.crawl, skip_first=already, switched=True)
        with open(plain, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            yield from _resyncing(f, size, False, cfg, state2, plain_at[start], plain_at.get(end or -1))
        if truncated_at is not None:
            yield Skip("truncated_gzip", truncated_at, 0, detail="gzip stream ends early or is corrupt")


def crawl_at(path: str, start: int, crawl_hint: str | None) -> str | None:
    """The crawl a reader starting at `start` begins with: the file name's, or for a range after
    the first, that of the file's leading warcinfo record (which only the first range reads).
    A warcinfo record in mid-file (concatenated WARCs) is seen only by the range that holds it."""
    if start == 0:
        return crawl_hint
    from warcio.archiveiterator import ArchiveIterator

    state = _State(crawl=crawl_hint)
    with contextlib.suppress(Exception), open(path, "rb") as f:
        rec = next(iter(ArchiveIterator(f, check_digests=False)), None)
        if rec is not None and rec.rec_type == "warcinfo":
            _read_warcinfo(rec, state)
    return state.crawl


class _SingleStreamGzip(Exception):
    pass


@dataclass(slots=True)
class _State:
    crawl: str | None = None
    records: int = 0  # records yielded so far (pages and per-record skips)
    skip_first: int = 0  # records to skip silently (already yielded before a mode switch)
    switched: bool = False  # reading a decompressed copy of a single-stream gzip
    damaged: bool = False  # a corrupt region was skipped (record counts no longer align across modes)


def _resyncing(
    f: BinaryIO,
    size: int,
    is_gzip: bool,
    cfg: ReaderConfig,
    state: _State,
    start: int = 0,
    end: int | None = None,
) -> Iterator[Page | Skip]:
    """Records starting in [start, end), resynchronising after damage. `end` (a range's end) is
    a record's gzip member: damage before it ends at or before it, and a record starting at or
    after it, or damage found there, is the next range's."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    pos = start
    for _ in range(MAX_RESYNCS):
        f.seek(pos)
        it = ArchiveIterator(f, check_digests=False)
        rec_start = pos
        try:
            for rec in it:
                # warcio's offsets are absolute (fh.tell()); `it.offset` is where this record starts.
                # (get_record_offset() would read the record to its end before we read the payload.)
                rec_start = it.offset
                if end is not None and rec_start >= end:
                    return
                item = _to_item(rec, rec_start, cfg, state)
                state.records += 1
                if state.records <= state.skip_first:
                    continue
                yield item
            return  # clean end of file
        except ArchiveLoadFailed as e:
            if is_gzip and "non-chunked gzip" in str(e):
                raise _SingleStreamGzip() from None
            err = e
        except (EOFError, zlib.error, OSError, ValueError, IndexError, AttributeError, TypeError) as e:
            err = e
        # warcio's `offset` is the start of the record being read when the error struck: the
        # current record if reading its payload failed, else the next one (whose header is bad).
        fail_at = min(max(getattr(it, "offset", rec_start), pos), size)
        if end is not None and fail_at >= end:
            return
        nxt = _next_record_start(f, fail_at + 1, is_gzip)
        if nxt is None and is_gzip and not state.switched and not state.damaged:
            # No further gzip member: either a truncated last member, or one gzip stream that
            # does not start at a record (a fragment). Read the stream decompressed instead.
            raise _SingleStreamGzip()
        stop = size if nxt is None else nxt
        if nxt is None:
            reason = "not_a_warc" if state.records == 0 and fail_at == 0 else "truncated_file"
        else:
            reason = "corrupt_region"
        log.warning("%s at offset %d (%s); %d bytes skipped", reason, fail_at, _short(err), stop - fail_at)
        state.damaged = True
        yield Skip(reason, fail_at, stop - fail_at, detail=_short(err))
        if nxt is None or (end is not None and nxt >= end):
            return
        pos = nxt
    last = size if end is None else end
    yield Skip("corrupt_region", pos, last - pos, detail=f"gave up after {MAX_RESYNCS} resyncs")


def _next_record_start(f: BinaryIO, start: int, is_gzip: bool) -> int | None:
    """Offset of the next gzip member (compressed) or `WARC/` line (plain) at or after `start`."""
    needle = GZIP_MAGIC if is_gzip else b"\nWARC/"
    block = 1 << 20
    f.seek(start)
    carry = b""
    base = start
    while True:
        chunk = f.read(block)
        if not chunk:
            return None
        buf = carry + chunk
        i = buf.find(needle)
        if i >= 0:
            hit = base - len(carry) + i
            return hit if is_gzip else hit + 1
        carry = buf[-(len(needle) - 1) :]
        base += len(chunk)


def _to_item(rec, offset: int, cfg: ReaderConfig, state: _State) -> Page | Skip:
    """Classify one warcio record; reads its payload (bounded) so damage surfaces here."""
    rtype = rec.rec_type
    headers = rec.rec_headers
    url = headers.get_header("WARC-Target-URI")
    length = rec.length or 0
    if rtype == "warcinfo":
        _read_warcinfo(rec, state)
        return Skip("record_warcinfo", offset, length)
    if rtype == "revisit":
        return Skip("revisit", offset, length, url)
    if rtype == "conversion" and cfg.keep_wet_conversions:
        if length > cfg.max_record_bytes:
            return Skip("oversize_record", offset, length, url)
        payload = rec.content_stream().read()
        if _ended_early(rec):
            return Skip("truncated_record", offset, length, url)
        return _page(rec, offset, url, "text", payload, headers.get_header("Content-Type"), state)
    if rtype != "response":
        return Skip(f"record_{rtype or 'unknown'}", offset, length, url)
    http = rec.http_headers
    if http is None or rec.content_type is None or "application/http" not in rec.content_type.lower():
        return Skip("non_http", offset, length, url)
    status = http.get_statuscode()
    if status != "200":
        return Skip("non_200", offset, length, url, detail=str(status))
    ctype = http.get_header("Content-Type") or headers.get_header("WARC-Identified-Payload-Type")
    if ctype is not None and "html" not in ctype.lower():
        return Skip("non_html", offset, length, url, detail=ctype[:100])
    if length > cfg.max_record_bytes:
        return Skip("oversize_record", offset, length, url)
    try:
        payload = rec.content_stream().read(cfg.max_record_bytes + 1)
    except Exception as e:  # bad chunking or content-encoding: this record only
        return Skip("payload_error", offset, length, url, detail=_short(e))
    if len(payload) > cfg.max_record_bytes:  # decompressed content-encoding can exceed the record
        return Skip("oversize_record", offset, length, url)
    if _ended_early(rec):
        return Skip("truncated_record", offset, length, url)
    if ctype is None and not _SNIFF_HTML_RE.search(payload[:2048]):
        return Skip("non_html", offset, length, url, detail="no content type, no HTML tag")
    return _page(rec, offset, url, "html", payload, ctype, state, optout_headers(http))


def _ended_early(rec) -> bool:
    """True when the file ended before the record's declared Content-Length."""
    raw = rec.raw_stream
    try:
        return getattr(raw, "limit", 0) > 0 and raw.read(1) == b""
    except Exception:
        return True


def _page(rec, offset, url, kind, payload, ctype, state: _State, headers: tuple = ()) -> Page:
    return Page(
        url=url,
        offset=offset,
        record_id=rec.rec_headers.get_header("WARC-Record-ID"),
        fetch_time=parse_warc_date(rec.rec_headers.get_header("WARC-Date")),
        crawl=state.crawl,
        kind=kind,
        payload=payload,
        content_type=ctype,
        optout_headers=headers,
    )


def _read_warcinfo(rec, state: _State) -> None:
    with contextlib.suppress(Exception):
        body = rec.content_stream().read(64 * 1024)
        m = _CRAWL_RE.search(body)
        if m:
            state.crawl = m.group(0).decode()


def parse_warc_date(value: str | None) -> datetime | None:
    """WARC-Date (ISO 8601, 'Z' suffix; WARC/0.17 used 14-digit dates) as UTC, or None if malformed."""
    if not value:
        return None
    v = value.strip()
    try:
        if len(v) == 14 and v.isdigit():
            return datetime.strptime(v, "%Y%m%d%H%M%S").replace(tzinfo=UTC)
        dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
        return dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)
    except ValueError:
        return None


@contextlib.contextmanager
def _decompressed_copy(path: str, marks: tuple[int, ...] = ()) -> Iterator[tuple[str, int | None, dict]]:
    """Decompress every gzip member of `path` into a temp file, stopping cleanly at damage.

    Yields (temp path, compressed offset where the stream broke or None, {mark: offset in the
    copy} for each of `marks` (compressed offsets) where a gzip member starts before the break).
    A range's reader uses them to read its own records of the copy, at the offsets the whole
    file's reader gives them.
    """
    fd, tmp = tempfile.mkstemp(prefix="refinery-gunzip-", suffix=".warc")
    truncated_at: int | None = None
    plain_at: dict[int, int] = {}
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            d: zlib._Decompress | None = None  # None between gzip members
            consumed = 0
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    if d is not None and not d.eof:
                        truncated_at = consumed
                        with contextlib.suppress(zlib.error):
                            out.write(d.flush())
                    break
                data = chunk
                try:
                    while data:
                        if d is None:
                            d = zlib.decompressobj(wbits=31)
                            if (at := consumed + len(chunk) - len(data)) in marks:
                                plain_at[at] = out.tell()
                        out.write(d.decompress(data))
                        data = b""
                        if d.eof:  # member done; the rest of the chunk starts the next one
                            data, d = d.unused_data, None
                except zlib.error:
                    truncated_at = consumed
                    break
                consumed += len(chunk)
        yield tmp, truncated_at, plain_at
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _short(e: BaseException) -> str:
    msg = " ".join(str(e).split())
    return f"{type(e).__name__}: {msg[:200]}"
