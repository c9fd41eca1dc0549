"""The `fastwarc` engine of `curation.warc.records.iter_records`: same output as the warcio reader, read faster.

FastWARC (Rust, 2.x) parses WARC headers and inflates gzip members natively, which is where the
warcio reader spends most of its time. This module drives FastWARC record by record and classifies
each record exactly as `curation.warc.warcio_reader._to_item` does, so both engines yield the same sequence of
`Page`/`Skip` items (reasons, offsets, URLs, payload bytes, crawl, record id, fetch time) on
well-formed files. `tests/curation/test_warc_fastwarc.py` checks that on every WARC in shared data.

Where FastWARC differs from warcio, warcio's behaviour is the reference and is reproduced here:
- HTTP headers are parsed with warcio's own `StatusAndHeadersParser`, and only where warcio would
  parse them: FastWARC's parser (strict mode) reads LF-only header lines, which some servers send,
  as one status line without headers, and joins folded lines with one space where warcio keeps
  the continuation's leading blanks.
- FastWARC can undo chunked transfer-encoding and content-encoding itself (`auto_decode`), but
  not as warcio does: a body that says chunked or gzip and is not raises (a bad gzip body even
  ends the whole iteration), gzip with trailing bytes raises, and `Chunked` is de-chunked where
  warcio leaves it. warcio keeps the raw bytes in all those cases. So decoding is done with
  warcio's own `ChunkedDataReader`/`BufferedReader` over FastWARC's undecoded payload stream, and
  only for records that declare an encoding (Common Crawl stores payloads already decoded).
- WARC header values are taken as bytes and decoded as warcio does (UTF-8, else Latin-1; FastWARC
  puts U+FFFD), and WARC-Target-URI gets warcio's fix-ups (`<...>` stripped, spaces as %20).
  Folded WARC header lines remain a known difference (FastWARC does not expose the raw lines).

Damaged input goes to the warcio reader, which owns all recovery logic (resync after a corrupt
region, single-stream gzip, truncation reasons). The hand-over never yields anything twice:
- Up front, a cheap probe (the first gzip member only) sends to warcio every file that does not
  start like a per-record-gzip or plain WARC file of a version FastWARC reads: single-stream gzip,
  ARC, LF-only headers, text that is not a WARC at all. For those, nothing has been yielded yet.
- While reading, every record is read to its end and checked before its item is yielded: a
  FastWARC error, a short record, a missing or odd Content-Length, several records in one gzip
  member, or a framing that FastWARC reads otherwise than warcio (see `_Framing`; FastWARC even
  stops without an error at an empty gzip member mid-file). On the first problem the warcio
  reader restarts the file and its first N items are dropped, N being the number already
  yielded. That is exact because both engines agree on every clean record (the parity test) and
  warcio yields exactly one item per record until the first damage, which lies at or after the
  record FastWARC stopped at. Buffering the whole file instead would hold gigabytes of HTML per
  Common Crawl WARC in a Spark task's memory; a pre-scan would read every file twice.
"""

from __future__ import annotations

import functools
import logging
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from curation.config import ReaderConfig
from curation.warc.warcio_reader import (
    _CRAWL_RE,
    _SNIFF_HTML_RE,
    GZIP_MAGIC,
    Page,
    Skip,
    _short,
    crawl_at,
    iter_records_warcio,
    optout_headers,
    parse_warc_date,
)

log = logging.getLogger(__name__)

# WARC versions FastWARC reads as warcio does: 1.0 and 1.1, and the 0.17 (Internet Archive) and
# 0.18 (ClueWeb09) files in shared data, which the parity test covers. Anything else (ARC, an
# unknown version, LF-only lines) goes to warcio.
_FAST_VERSIONS = ("WARC/1.0", "WARC/1.1", "WARC/0.17", "WARC/0.18")
_FAST_VERSION_LINES = tuple(v.encode() + b"\r\n" for v in _FAST_VERSIONS)
_HEAD_BYTES = max(len(v) for v in _FAST_VERSION_LINES)
# How much compressed input the probe reads looking for the end of the first gzip member. A
# per-record-gzip WARC starts with a small warcinfo member; a first member this large is almost
# surely one stream for the whole file (which FastWARC reads but warcio, the reference, reads as a
# decompressed copy with other offsets). Files past the bound are merely read by warcio.
PROBE_MAX_BYTES = 8 << 20
# Longest WARC header block FastWARC accepts (its max_header_len default).
_MAX_HEADER = 32 << 10
# Most bytes of blank lines accepted after a record's content (normally 4: CRLF CRLF).
_MAX_SEPARATOR = 1 << 10
_HTTP_SCHEMES = ("http:", "https:")


class _Damage(Exception):
    """Something the warcio reader must handle: raised before the affected record is yielded."""


@dataclass(slots=True)
class _State:
    crawl: str | None


def iter_records_fastwarc(
    path: str, cfg: ReaderConfig, crawl_hint: str | None, start: int = 0, end: int | None = None
) -> Iterator[Page | Skip]:
    """Yield the same items as `curation.warc.warcio_reader.iter_records_warcio(path, ...)`, using FastWARC where it can.

    A range [start, end) is read the same way: the probe looks at the file's start, FastWARC reads
    from `start`, and the warcio hand-over reads the same range."""
    why = _probe(path)
    if why is not None:
        log.info("fastwarc: reading %s with warcio (%s)", path, why)
        yield from iter_records_warcio(path, cfg, crawl_hint, start, end)
        return

    fast = _iter_fast(path, cfg, crawl_hint, start, end)
    done = 0  # items yielded so far
    last: tuple[str, int] | None = None  # the last one's (reason or kind, offset)
    while True:
        # next() outside the `yield`, so that only FastWARC's own failures are caught here, never
        # an exception the consumer throws into this generator.
        try:
            item = next(fast)
        except StopIteration:
            return
        except (_Damage, OSError) as e:  # OSError: FastWARC's error for anything it cannot read
            log.info("fastwarc: %s: %s after %d records; warcio reads the file", path, _short(e), done)
            break
        except Exception as e:  # not foreseen: still never raise on bad data, but say so
            log.warning(
                "fastwarc: %s: unexpected %s after %d records; warcio reads the file", path, _short(e), done
            )
            break
        yield item
        done += 1
        last = _key(item)
    fast.close()

    # warcio's first `done` items are the records already yielded (see the module docstring).
    # The last of them must be the last item yielded: a cheap check that the two line up.
    n = 0
    for item in iter_records_warcio(path, cfg, crawl_hint, start, end):
        n += 1
        if n < done:
            continue
        if n == done:
            if _key(item) != last:
                log.warning(
                    "fastwarc: %s: hand-over mismatch: yielded %s, warcio has %s", path, last, _key(item)
                )
            continue
        yield item


def _key(item: Page | Skip) -> tuple[str, int]:
    return (item.kind if isinstance(item, Page) else item.reason), item.offset


def _probe(path: str) -> str | None:
    """Why FastWARC should not read this file (None: it can); reads at most the first gzip member."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
            if not head.startswith(GZIP_MAGIC):
                return None if head.startswith(_FAST_VERSION_LINES) else f"not a WARC file: {head!r}"
            f.seek(0)
            d = zlib.decompressobj(wbits=31)
            start = b""
            consumed = 0
            while not d.eof:
                chunk = f.read(1 << 16)
                if not chunk:
                    return "first gzip member truncated"
                consumed += len(chunk)
                if consumed > PROBE_MAX_BYTES:
                    return f"first gzip member longer than {PROBE_MAX_BYTES} bytes (single-stream gzip?)"
                # Keep only the first bytes of the inflated data: enough for the version line.
                out = d.decompress(chunk)
                if len(start) < _HEAD_BYTES:
                    start += out[: _HEAD_BYTES - len(start)]
            # One member for the whole file: single-stream gzip, which warcio reads in its own way.
            if not d.unused_data and not f.read(1):
                return "one gzip member for the whole file"
            if not start.startswith(_FAST_VERSION_LINES):
                return f"gzip, not a WARC file: {start!r}"
            return None
    except (OSError, zlib.error) as e:
        return _short(e)


def _iter_fast(
    path: str, cfg: ReaderConfig, crawl_hint: str | None, start: int, end: int | None
) -> Iterator[Page | Skip]:
    from fastwarc import ArchiveIterator

    state = _State(crawl=crawl_at(path, start, crawl_hint))
    with open(path, "rb") as f:
        frames = _Framing(f, start)
        # parse_http=False: HTTP headers are parsed below as warcio does. fsspec_args=False: a
        # local path, opened natively. quirks_mode stays off: lenient parsing would accept what
        # warcio parses differently (LF-only headers come back as one odd header, caught below).
        # A range: FastWARC reads our file object from `start` (its stream_pos stays absolute).
        f.seek(start)
        source = path if start == 0 else f
        for rec in ArchiveIterator(source, parse_http=False, fsspec_args=False):
            pos = rec.stream_pos
            if end is not None and pos >= end:
                frames.end(pos)  # the last record's framing, checked as the whole file checks it
                return
            frames.next_record(pos)
            if rec.headers.status_line not in _FAST_VERSIONS:
                raise _Damage(f"version line {rec.headers.status_line!r}")
            item = _to_item(rec, pos, cfg, state)
            # A record shorter than its Content-Length (truncated file): warcio has the reasons.
            reader = rec.reader
            reader.consume()
            if reader.tell() != rec.content_length:
                raise _Damage(f"record at {pos} ends after {reader.tell()} of {rec.content_length} bytes")
            frames.record_read(rec.content_length)
            yield item
        frames.end()


class _Framing:
    """Checks that records lie in the file exactly as warcio will walk them, record by record.

    FastWARC tolerates a few framings that warcio reads otherwise, and one it does not report:
    it stops without an error at an empty gzip member mid-file (dropping the rest of the file),
    skips blank gzip members and blank lines before a record (warcio turns them into an empty
    `record_unknown` and loses the record behind), and finds a record right after the previous
    one's content in a plain file without the blank-line separator (warcio takes its version line
    for the separator and counts a `corrupt_region`). So each record's position is checked against
    where the previous one ended; both are found with a few small reads of the file:
    - gzip: the record's member must start with the WARC version line, and the member before the
      next record (or before the end of the file) must be this record's, with only its separator
      after the content. Its inflated size (ISIZE, the member's last 4 bytes) tells: header
      length + Content-Length + a few bytes.
    - plain: the bytes between one record's content and the next record (or the end of the
      file) must be blank lines, and there must be some (the end of the file excepted).
    """

    __slots__ = ("_fd", "_gzip", "_header_len", "_length", "_pos", "_size", "_start")

    def __init__(self, f: BinaryIO, start: int = 0) -> None:
        self._start = start  # where the first record must be (a range's start)
        self._fd = f.fileno()
        self._size = os.fstat(self._fd).st_size
        self._gzip = os.pread(self._fd, len(GZIP_MAGIC), 0) == GZIP_MAGIC
        self._pos = -1  # current record: start (offset of its gzip member), header length, length
        self._header_len = 0
        self._length = 0

    def next_record(self, pos: int) -> None:
        # For gzip, stream_pos is the member holding the record: two records with one position
        # share a member, one past the end means FastWARC went on inflating a single stream.
        if pos <= self._pos or pos >= self._size or (self._pos < 0 and pos != self._start):
            raise _Damage(f"record at stream position {pos} after {self._pos} (file size {self._size})")
        if self._pos >= 0:
            self._check_gap(pos)
        self._pos = pos
        self._header_len = self._gzip_header_len(pos) if self._gzip else self._plain_header_len(pos)

    def record_read(self, length: int) -> None:
        self._length = length

    def end(self, at: int | None = None) -> None:
        """At the end of the file, or of a range at `at` (the next range's first record)."""
        if self._pos >= 0:
            self._check_gap(self._size if at is None else at)
        elif self._size:
            raise _Damage("no record read")

    def _check_gap(self, nxt: int) -> None:
        """Between the current record and `nxt` (the next record's position, or the file's end)."""
        if self._gzip:
            isize = int.from_bytes(os.pread(self._fd, 4, nxt - 4), "little")
            trailer = isize - self._header_len - self._length
            if not 0 <= trailer <= _MAX_SEPARATOR:
                raise _Damage(f"gzip member before {nxt} is not the record at {self._pos} alone")
            return
        content_end = self._pos + self._header_len + self._length
        gap = nxt - content_end
        if gap > _MAX_SEPARATOR:
            raise _Damage(f"{gap} bytes between the record at {self._pos} and {nxt}")
        between = os.pread(self._fd, gap, content_end) if gap > 0 else b""
        at_end = nxt == self._size
        if between.strip() or not (between.endswith(b"\n") or (at_end and not between)):
            raise _Damage(f"no blank-line separator after the record at {self._pos}: {between[:20]!r}")

    def _gzip_header_len(self, pos: int) -> int:
        # Inflate only as far as the header's end: 2 KB steps, from 1 KB reads of the member.
        d = zlib.decompressobj(wbits=31)
        head = pending = b""
        at = pos
        while len(head) <= _MAX_HEADER and b"\r\n\r\n" not in head and not d.eof:
            if not pending:
                pending = os.pread(self._fd, 1 << 10, at)
                at += len(pending)
                if not pending:
                    break
            head += d.decompress(pending, 1 << 11)
            pending = d.unconsumed_tail
        return self._header_end(head, pos)

    def _plain_header_len(self, pos: int) -> int:
        head = b""
        while len(head) <= _MAX_HEADER:
            chunk = os.pread(self._fd, 1 << 12, pos + len(head))
            head += chunk
            if b"\r\n\r\n" in head or not chunk:
                break
        return self._header_end(head, pos)

    @staticmethod
    def _header_end(head: bytes, pos: int) -> int:
        end = head.find(b"\r\n\r\n")
        if end < 0 or not head.startswith(_FAST_VERSION_LINES):
            raise _Damage(f"record at {pos} does not start with a WARC header block: {head[:20]!r}")
        return end + 4


def _to_item(rec, offset: int, cfg: ReaderConfig, state: _State) -> Page | Skip:
    """`curation.warc.warcio_reader._to_item` for a FastWARC record; raises _Damage where warcio would fail."""
    headers = rec.headers
    rtype = _header(headers, b"WARC-Type")
    url = _target_uri(_header(headers, b"WARC-Target-URI"))
    length = _content_length(rec)
    if rtype == "warcinfo":
        _read_warcinfo(rec, state)
        return Skip("record_warcinfo", offset, length)
    if rtype == "revisit":
        return Skip("revisit", offset, length, url)
    if rtype == "conversion" and cfg.keep_wet_conversions:
        if length > cfg.max_record_bytes:
            return Skip("oversize_record", offset, length, url)
        payload = _Raw(rec.reader).read()
        if len(payload) != length:
            raise _Damage(f"truncated record at {offset}")
        return _page(rec, offset, url, "text", payload, _header(headers, b"Content-Type"), state)
    if rtype != "response":
        return Skip(f"record_{rtype or 'unknown'}", offset, length, url)

    # warcio parses HTTP headers of a response when its length is not 0 and its URI is http(s),
    # whatever its Content-Type; a response without a URI makes warcio fail (AttributeError).
    if length != 0 and url is None:
        raise _Damage(f"response without WARC-Target-URI at {offset}")
    wctype = _header(headers, b"Content-Type")
    if length == 0 or not url.startswith(_HTTP_SCHEMES) or wctype is None:
        return Skip("non_http", offset, length, url)
    if "application/http" not in wctype.lower():
        return Skip("non_http", offset, length, url)
    http = _parse_http(rec)
    status = http.get_statuscode()
    if status != "200":
        return Skip("non_200", offset, length, url, detail=str(status))
    ctype = http.get_header("Content-Type") or _header(headers, b"WARC-Identified-Payload-Type")
    if ctype is not None and "html" not in ctype.lower():
        return Skip("non_html", offset, length, url, detail=ctype[:100])
    if length > cfg.max_record_bytes:
        return Skip("oversize_record", offset, length, url)
    try:
        payload = _content_stream(rec, http).read(cfg.max_record_bytes + 1)
    except _Damage:
        raise
    except Exception as e:  # bad chunking or content-encoding: this record only
        return Skip("payload_error", offset, length, url, detail=_short(e))
    if len(payload) > cfg.max_record_bytes:  # decompressed content-encoding can exceed the record
        return Skip("oversize_record", offset, length, url)
    # (warcio's truncated_record: the caller checks the record was read to its Content-Length.)
    if ctype is None and not _SNIFF_HTML_RE.search(payload[:2048]):
        return Skip("non_html", offset, length, url, detail="no content type, no HTML tag")
    return _page(rec, offset, url, "html", payload, ctype, state, optout_headers(http))


def _header(headers, name: bytes) -> str | None:
    """First value of a WARC header, decoded as warcio decodes header lines (UTF-8, else Latin-1)."""
    value = headers.get_bytes(name)
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("iso-8859-1")


def _target_uri(uri: str | None) -> str | None:
    """warcio's `_ensure_target_uri_format`: Wget's `<uri>` unwrapped, spaces percent-encoded."""
    if uri is not None and uri.startswith("<") and uri.endswith(">"):
        uri = uri[1:-1]
    if uri is not None and " " in uri:
        uri = uri.replace(" ", "%20")
    return uri


def _content_length(rec) -> int:
    """The record length warcio uses (`int(Content-Length)`); odd values go to warcio."""
    raw = _header(rec.headers, b"Content-Length")
    try:
        length = int(raw) if raw is not None else None
    except ValueError:
        length = None
    # Missing (LF-only headers parse as one header in FastWARC's strict mode), negative, or read
    # differently by FastWARC (int() accepts '+5', ' 5', '5_0'): warcio's results differ there.
    if length is None or length < 0 or length != rec.content_length:
        raise _Damage(f"Content-Length {raw!r}, FastWARC read {rec.content_length}")
    return length


def _read_warcinfo(rec, state: _State) -> None:
    try:
        body = _Raw(rec.reader).read(64 * 1024)
    except _Damage:
        raise
    except Exception:  # warcio's reader ignores any failure here too
        return
    m = _CRAWL_RE.search(body)
    if m:
        state.crawl = m.group(0).decode()


@functools.cache
def _http_parser():
    from warcio.recordloader import ArcWarcRecordLoader
    from warcio.statusandheaders import StatusAndHeadersParser

    # warcio's ArchiveIterator parses with verify_http=False: any first line is a status line.
    return StatusAndHeadersParser(ArcWarcRecordLoader.HTTP_TYPES, verify=False)


def _parse_http(rec):
    """HTTP status line and headers, parsed by warcio's own parser from FastWARC's payload stream."""
    try:
        return _http_parser().parse(_Raw(rec.reader))
    except EOFError as e:  # empty payload (truncated record); warcio fails the same way
        raise _Damage(f"no HTTP headers: {_short(e)}") from e


def _content_stream(rec, http):
    """warcio's `ArcWarcRecord.content_stream()` over FastWARC's payload stream."""
    raw = _Raw(rec.reader)
    encoding = http.get_header("content-encoding")
    chunked = http.get_header("transfer-encoding") == "chunked"
    if not encoding and not chunked:
        return raw  # the common case (Common Crawl stores decoded payloads): no Python in between
    from warcio.bufferedreaders import BufferedReader, ChunkedDataReader

    if encoding:
        encoding = encoding.lower()
        if encoding not in BufferedReader.get_supported_decompressors():
            encoding = None
    if chunked:
        return ChunkedDataReader(raw, decomp_type=encoding)
    if encoding:
        return BufferedReader(raw, decomp_type=encoding)
    return raw


class _Raw:
    """FastWARC's payload reader with warcio's `LimitReader` semantics.

    Reads return the full count unless the record ends, lines have no length cap unless asked
    for, and a FastWARC failure (damage in the file) becomes _Damage, which warcio's decoders do
    not swallow, so that it is not mistaken for a bad content-encoding of this one record.
    """

    __slots__ = ("_r",)

    def __init__(self, reader) -> None:
        self._r = reader

    def read(self, size: int | None = -1) -> bytes:
        try:
            if size is None or size < 0:
                return self._r.read()
            return _read_on(
                self._r.read(size), lambda got: self._r.read(size - len(got)), lambda got: len(got) >= size
            )
        except OSError as e:
            raise _Damage(_short(e)) from e

    def readline(self, size: int | None = None) -> bytes:
        try:
            if size is not None and size >= 0:
                return self._r.readline(size)
            return _read_on(
                self._r.readline(), lambda _: self._r.readline(), lambda got: not got or got.endswith(b"\n")
            )
        except OSError as e:
            raise _Damage(_short(e)) from e


def _read_on(data: bytes, more: Callable[[bytes], bytes], done: Callable[[bytes], bool]) -> bytes:
    """`data`, extended by `more(data)` until `done(data)` or the record ends (`more` returns b""):
    a FastWARC read or readline may return less than warcio's would, so _Raw reads on."""
    while not done(data):
        chunk = more(data)
        if not chunk:
            break
        data += chunk
    return data


def _page(
    rec, offset: int, url, kind: str, payload: bytes, ctype, state: _State, headers: tuple = ()
) -> Page:
    return Page(
        url=url,
        offset=offset,
        record_id=_header(rec.headers, b"WARC-Record-ID"),
        fetch_time=parse_warc_date(_header(rec.headers, b"WARC-Date")),
        crawl=state.crawl,
        kind=kind,
        payload=payload,
        content_type=ctype,
        optout_headers=headers,
    )
