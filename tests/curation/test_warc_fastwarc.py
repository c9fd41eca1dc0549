"""The fastwarc engine yields exactly what the warcio engine yields.

On every WARC in shared data, and on edge cases built here (content and transfer encodings, odd
headers, damaged files), `iter_records_fastwarc` and the warcio reader give identical item
sequences: same reasons, offsets, URLs, payload bytes, crawl, record ids and fetch times. The
tests also pin down which files FastWARC reads itself, so that parity cannot come from quietly
handing every file to warcio.
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
import zlib
from pathlib import Path

import brotli
import pytest

import curation.warc.fastwarc_reader as fw
from curation.config import ReaderConfig
from curation.warc.records import Page, Skip, iter_records
from curation.warc.warcio_reader import iter_records_warcio
from testkit.shared_data import shared_data_dir

FAST = ReaderConfig(engine="fastwarc")

# Shared files that FastWARC does not read (entirely) itself, each for a reason warcio owns:
# no WARC version line (cc_net), single-stream gzip or not a WARC (the 2016-50 WET fragments),
# and a truncated last record (the appended fragment: FastWARC reads 16 records, then hands over).
HANDED_TO_WARCIO = {"quirks/ccnet-wet-no-version-line.warc.txt"} | {
    f"wet-cc-main-2016-50/{name}"
    for name in (
        "11_bytes.txt.gz",
        "6_line_test.txt.gz",
        "appended_zip_fragment_unexpected_eof.wet.gz",
        "corrupt_starts_with_conversion.wet.gz",
        "corrupt_two_warcinfo.wet.gz",
        "corrupt_warcconversion_1.wet.gz",
        "corrupt_warcconversion_2.wet.gz",
        "corrupt_warcinfo_1.wet.gz",
        "file_and_wet_headers_only.wet.gz",
        "file_headers_only.wet.gz",
        "filter_test_1.wet.gz",
        "fragment1_asthma_incomplete_last.wet.gz",
        "fragment1_incomplete_last.wet.gz",
        "fragment2_no_header.wet.gz",
        "fragment3.wet.gz",
    )
}


def _shared_warcs() -> list[str]:
    """Every file under warc/ (top level, quirks/, wet-cc-main-2016-50/), relative to warc/."""
    try:
        root = shared_data_dir() / "warc"
    except FileNotFoundError:
        return ["<shared data missing>"]  # the test then fails with shared_data_dir()'s message
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _rows(items) -> list[tuple]:
    """Every field of every item, with its type: the whole observable output."""
    return [(type(i).__name__, *dataclasses.astuple(i)) for i in items]


def _assert_same(path: Path, cfg: ReaderConfig = FAST) -> list[Page | Skip]:
    want = list(iter_records_warcio(str(path), cfg, None))
    got = list(iter_records(str(path), cfg.replace(engine="fastwarc")))
    for n, (a, b) in enumerate(zip(_rows(want), _rows(got), strict=False)):
        assert a == b, f"{path.name}: item {n} differs:\nwarcio   {_short(a)}\nfastwarc {_short(b)}"
    assert len(got) == len(want), f"{path.name}: {len(got)} items from fastwarc, {len(want)} from warcio"
    return got


def _short(row: tuple) -> list:
    return [v[:100] if isinstance(v, str | bytes) else v for v in row]


@pytest.fixture
def warcio_calls(monkeypatch) -> list[str]:
    """Paths the fastwarc engine handed to the warcio reader (the hand-over still runs)."""
    calls: list[str] = []

    def spy(path, cfg, crawl_hint, *span):  # span: a byte range's start, end (curation/warc/ranges.py)
        calls.append(path)
        return iter_records_warcio(path, cfg, crawl_hint, *span)

    monkeypatch.setattr(fw, "iter_records_warcio", spy)
    return calls


@pytest.mark.parametrize("name", _shared_warcs())
def test_shared_warc_parity(name, warcio_calls):
    path = shared_data_dir() / "warc" / name
    items = _assert_same(path)
    assert items, "every file yields at least one item"
    if name in HANDED_TO_WARCIO:
        assert warcio_calls == [str(path)]
    else:
        assert warcio_calls == [], "FastWARC should read this well-formed file by itself"


def test_shared_warc_parity_small_records(warc_dir, warcio_calls):
    """oversize_record decisions agree too (aeb pages run from a few KB to ~600 KB)."""
    _assert_same(warc_dir / "pages-aeb-181.warc.gz", ReaderConfig(max_record_bytes=100_000))
    _assert_same(warc_dir / "cc-main-2024-22-whirlwind.warc.wet.gz", ReaderConfig(keep_wet_conversions=False))
    assert warcio_calls == []


# --- edge cases built here ----------------------------------------------------------------------

HTML = b"<html><head><title>t</title></head><body><p>" + b"caf\xc3\xa9 " * 400 + b"</p></body></html>"


def _record(wtype: str, block: bytes, uri: str | None = None, extra=(), version: str = "1.0") -> bytes:
    head = [f"WARC/{version}".encode(), b"WARC-Type: " + wtype.encode()]
    head.append(f"WARC-Record-ID: <urn:uuid:{zlib.crc32(block):08x}-{len(block)}>".encode())
    head.append(b"WARC-Date: 2024-05-18T05:10:51Z")
    if uri is not None:
        head.append(b"WARC-Target-URI: " + uri.encode("utf-8"))
    head.extend(extra)
    head.append(f"Content-Length: {len(block)}".encode())
    return b"\r\n".join(head) + b"\r\n\r\n" + block + b"\r\n\r\n"


def _response(http_head: bytes, body: bytes, uri: str = "https://example.org/", **kw) -> bytes:
    extra = [b"Content-Type: application/http; msgtype=response", *kw.pop("extra", ())]
    return _record("response", http_head + b"\r\n\r\n" + body, uri, extra, **kw)


def _chunked(body: bytes, size: int = 1000) -> bytes:
    parts = [
        b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)
    ]
    return b"".join(parts) + b"0\r\n\r\n"


def _deflate(body: bytes, wbits: int) -> bytes:
    c = zlib.compressobj(wbits=wbits)
    return c.compress(body) + c.flush()


OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8"


def _edge_records() -> list[bytes]:
    """Well-formed records whose HTTP side exercises warcio's decoding and parsing quirks."""
    warcinfo = b"software: test\r\nisPartOf: CC-MAIN-2024-22\r\n"
    return [
        _record("warcinfo", warcinfo, extra=[b"Content-Type: application/warc-fields"]),
        _record("request", b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n", "https://example.org/"),
        _response(OK, HTML),
        _response(OK + b"\r\nTransfer-Encoding: chunked", _chunked(HTML)),
        _response(OK + b"\r\nTransfer-Encoding: chunked", HTML),  # says chunked, is not
        _response(OK + b"\r\nTransfer-Encoding: Chunked", _chunked(HTML)),  # warcio: case-sensitive
        _response(OK + b"\r\nContent-Encoding: gzip", gzip.compress(HTML, mtime=0)),
        _response(OK + b"\r\nContent-Encoding: GZIP", gzip.compress(HTML, mtime=0) + b"trailing"),
        _response(OK + b"\r\nContent-Encoding: gzip", HTML),  # says gzip, is not
        _response(OK + b"\r\nContent-Encoding: gzip", gzip.compress(HTML, mtime=0)[:300]),  # cut
        _response(OK + b"\r\nContent-Encoding: deflate", _deflate(HTML, 15)),
        _response(OK + b"\r\nContent-Encoding: deflate", _deflate(HTML, -15)),  # raw deflate
        # Decoded through curation.warc.records's brotli adapter (warcio 1.8.1 alone fails on brotli 1.2).
        _response(OK + b"\r\nContent-Encoding: br", brotli.compress(HTML)),
        _response(OK + b"\r\nContent-Encoding: zstd", HTML),  # unsupported: left as is
        _response(
            OK + b"\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked",
            _chunked(gzip.compress(HTML, mtime=0), 100),
        ),
        _response(b"HTTP/1.1 200\r\ncontent-type: TEXT/HTML", HTML),  # no reason phrase
        _response(b"HTTP/1.0 200 OK\nContent-Type: text/html", HTML),  # LF-only HTTP headers
        _response(b"HTTP/1.1 200 OK\r\nContent-Type: text/html;\r\n charset=latin-1", HTML),  # folded
        _response(b"HTTP/1.1 200 OK\r\nX-Name: caf\xe9\r\nContent-Type: text/html", HTML),  # Latin-1
        _response(b"HTTP/1.1 200 OK", HTML),  # no content type: sniffed
        _response(b"HTTP/1.1 200 OK", b"just text, no markup"),
        _response(b"HTTP/1.1 200 OK", HTML, extra=[b"WARC-Identified-Payload-Type: text/html"]),
        _response(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html", HTML),
        _response(b"HTTP/1.1 301 Moved\r\nLocation: /x", b""),
        _response(b"garbage status line\r\nContent-Type: text/html", HTML),
        _response(b"HTTP/1.1 200 OK\r\nContent-Type: image/png", b"\x89PNG"),
        _response(OK, HTML, uri="<https://example.org/wget>"),  # Wget 1.19's <...>
        _response(OK, HTML, uri="https://example.org/a b"),  # space: warcio writes %20
        _response(OK, HTML, uri="https://example.org/caf\xe9"),  # UTF-8 in the URI
        _response(OK, HTML, uri=None, extra=[b"WARC-Target-URI: https://example.org/caf\xe9"]),  # Latin-1
        _response(OK, HTML, uri="dns:example.org"),
        _response(OK, HTML, version="1.1"),
        _record("response", b"", "https://example.org/empty", [b"Content-Type: application/http"]),
        _record("response", OK + b"\r\n\r\n" + HTML, "https://example.org/", [b"Content-Type: text/html"]),
        _record("response", HTML, "https://example.org/", [b"Content-Type: text/html; caf\xe9"]),
        _record("resource", HTML, "https://example.org/r", [b"Content-Type: text/html"]),
        _record("metadata", b"fetchTimeMs: 12\r\n", "https://example.org/"),
        _record("revisit", b"HTTP/1.1 200 OK\r\n\r\n", "https://example.org/", [b"WARC-Profile: x"]),
        _record("conversion", HTML, "https://example.org/", [b"Content-Type: text/plain"]),
        _record("conversion", HTML, "https://example.org/", [b"Content-Type: text/plain; x=caf\xe9"]),
        _record("Response", OK + b"\r\n\r\n" + HTML, "https://example.org/"),  # warcio keeps the case
        _record("continuation", b"x" * 10, "https://example.org/"),
    ]


def _write(tmp_path: Path, name: str, records: list[bytes], compress: bool) -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(gzip.compress(r, mtime=0) for r in records) if compress else b"".join(records))
    return path


@pytest.mark.parametrize("compress", [True, False], ids=["gzip", "plain"])
def test_edge_cases_parity(tmp_path, compress, warcio_calls):
    path = _write(tmp_path, "edge.warc" + ".gz" * compress, _edge_records(), compress)
    items = _assert_same(path)
    assert warcio_calls == [], "well-formed edge cases are read by FastWARC itself"
    pages = [i for i in items if isinstance(i, Page)]
    assert pages and all(p.crawl == "CC-MAIN-2024-22" for p in pages)
    # The encodings really were undone (not just equally left alone by both engines).
    assert sum(p.payload == HTML for p in pages) >= 8
    # And a smaller limit: oversize decisions after content decoding agree as well.
    _assert_same(path, ReaderConfig(max_record_bytes=len(HTML) - 1))
    _assert_same(path, ReaderConfig(keep_wet_conversions=False))


# --- damaged files: FastWARC hands over to warcio without yielding anything twice ---------------


def _damaged(records: list[bytes]) -> dict[str, bytes]:
    members = [gzip.compress(r, mtime=0) for r in records]
    plain = b"".join(records)
    gz = b"".join(members)
    bad = bytearray(members[3])
    bad[30:60] = b"\x00" * 30
    crc = bytearray(members[3])
    crc[-8] ^= 0xFF
    return {
        "corrupt_member.warc.gz": b"".join(members[:3]) + bytes(bad) + b"".join(members[4:]),
        "bad_crc.warc.gz": b"".join(members[:3]) + bytes(crc) + b"".join(members[4:]),
        "garbage_between_members.warc.gz": b"".join(members[:3]) + b"GARBAGE" * 9 + b"".join(members[3:]),
        "truncated.warc.gz": gz[: len(gz) - len(members[-1]) // 2],
        "trailing_garbage.warc.gz": gz + b"\0" * 64,
        # Several records in one member mid-file: warcio reads the rest from a decompressed copy.
        "multi_record_member.warc.gz": b"".join(members[:3])
        + gzip.compress(b"".join(records[3:6]), mtime=0)
        + b"".join(members[6:]),
        "single_stream.warc.gz": gzip.compress(plain, mtime=0),
        "garbage.warc": b"".join(records[:3]) + b"garbage line\r\nmore\r\n" + b"".join(records[3:]),
        "truncated.warc": plain[:-200],
        "trailing_garbage.warc": plain + b"junk\r\n",
        "lf_only.warc": plain.replace(b"\r\n", b"\n"),
        "wrong_length.warc": b"".join(records[:3]) + _longer(records[3], 20) + b"".join(records[4:]),
        "not_a_warc.warc": b"<html>" + HTML,
        "empty.warc": b"",
        # Framings FastWARC reads without an error but not as warcio does (see _Framing).
        "empty_member_mid_file.warc.gz": b"".join(members[:3]) + _gz(b"") + b"".join(members[3:]),
        "empty_member_at_end.warc.gz": gz + _gz(b""),
        "blank_member.warc.gz": b"".join(members[:3]) + _gz(b"\r\n\r\n") + b"".join(members[3:]),
        "blank_line_before_record.warc.gz": b"".join(members[:3])
        + _gz(b"\r\n" + records[3])
        + b"".join(members[4:]),
        "separator_in_own_member.warc.gz": b"".join(_gz(r[:-4]) + _gz(b"\r\n\r\n") for r in records),
        "no_separator.warc": b"".join(records[:3]) + records[3][:-4] + b"".join(records[4:]),
    }


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _tolerated(records: list[bytes]) -> dict[str, bytes]:
    """Separators other than CRLF CRLF that warcio and FastWARC both read the same way."""
    return {
        "lf_separators.warc.gz": b"".join(_gz(r[:-4] + b"\n\n") for r in records),
        "no_separators.warc.gz": b"".join(_gz(r[:-4]) for r in records),
        "extra_blank_line.warc.gz": b"".join(_gz(r + b"\r\n") for r in records),
        "one_crlf.warc": b"".join(r[:-2] for r in records),
        "blank_lines_between.warc": b"".join(r + b"  \r\n\t\r\n\n" for r in records),
        "no_final_separator.warc": b"".join(records)[:-4],
    }


@pytest.mark.parametrize("name", sorted(_tolerated(_edge_records())))
def test_tolerated_framing_parity(tmp_path, name, warcio_calls):
    path = tmp_path / name
    path.write_bytes(_tolerated(_edge_records())[name])
    _assert_same(path)
    assert warcio_calls == []


def _longer(record: bytes, extra: int) -> bytes:
    """The record with a Content-Length `extra` bytes past its real end."""
    head, sep, rest = record.partition(b"Content-Length: ")
    digits = rest.split(b"\r\n", 1)[0]
    return head + sep + str(int(digits) + extra).encode() + rest[len(digits) :]


@pytest.mark.parametrize("name", sorted(_damaged(_edge_records())))
def test_damaged_files_parity(tmp_path, name, warcio_calls):
    records = _edge_records()
    path = tmp_path / name
    path.write_bytes(_damaged(records)[name])
    _assert_same(path)
    assert warcio_calls == [str(path)]


def test_handover_after_records_yielded(tmp_path, warcio_calls, caplog):
    """Damage late in a file: FastWARC yields the records before it, warcio only the rest."""
    caplog.set_level(logging.INFO, logger=fw.__name__)
    records = _edge_records()
    path = tmp_path / "late.warc.gz"
    path.write_bytes(_damaged(records)["corrupt_member.warc.gz"])
    items = _assert_same(path)
    assert [i.reason for i in items if isinstance(i, Skip)].count("corrupt_region") >= 1
    assert "after 3 records" in caplog.text
    assert "mismatch" not in caplog.text


@pytest.mark.xfail(strict=True, reason="known difference: folded WARC header lines")
def test_folded_warc_header_differs(tmp_path):
    """A WARC header continued on the next line: warcio keeps the continuation's leading blanks
    ("a" + "  b"), FastWARC joins with one space ("a b"). FastWARC does not expose the raw lines,
    so this cannot be reproduced; no WARC writer we know of folds header lines."""
    record = _response(OK, HTML, uri=None, extra=[b"WARC-Target-URI: https://example.org/a\r\n  b"])
    _assert_same(_write(tmp_path, "folded.warc", [record], False))
