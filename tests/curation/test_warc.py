"""WARC reading on the real captures and quirks, plus damaged files made here from real records."""

from __future__ import annotations

import gzip
import io
from collections import Counter
from pathlib import Path

import pytest

from curation.config import ReaderConfig
from curation.warc.records import Page, Skip, iter_records, parse_warc_date

CFG = ReaderConfig()


def _items(path: Path, cfg: ReaderConfig = CFG) -> list[Page | Skip]:
    return list(iter_records(str(path), cfg))


def _reasons(items) -> Counter:
    return Counter(i.reason for i in items if isinstance(i, Skip))


def _pages(items) -> list[Page]:
    return [i for i in items if isinstance(i, Page)]


def test_aeb_pages_all_read(warc_dir):
    items = _items(warc_dir / "pages-aeb-181.warc.gz")
    pages = _pages(items)
    # The file holds the benchmark's 181 pages as HTTP 200 HTML responses (data README).
    assert len(pages) == 181
    assert all(p.kind == "html" and p.payload for p in pages)
    assert len({p.offset for p in pages}) == 181
    assert _reasons(items) == Counter({"record_warcinfo": 1})


def test_common_crawl_sample_metadata(warc_dir):
    pages = _pages(_items(warc_dir / "cc-main-2024-22-whirlwind.warc.gz"))
    assert len(pages) == 1
    p = pages[0]
    assert p.crawl == "CC-MAIN-2024-22"  # from the warcinfo record's isPartOf
    assert p.url.startswith("http")
    assert p.fetch_time is not None and p.fetch_time.year == 2024
    assert p.record_id.startswith("<urn:uuid:")


def test_revisits_and_non_200_are_counted(warc_dir):
    items = _items(warc_dir / "quirks" / "iana-2014-revisits.warc.gz")
    reasons = _reasons(items)
    # 123 revisit records in this capture (data README); every record is accounted for.
    assert reasons["revisit"] == 123
    assert reasons["non_200"] > 0
    assert len(_pages(items)) > 0


def test_chunked_transfer_encoding_is_undone(warc_dir):
    pages = _pages(_items(warc_dir / "quirks" / "chunked-uncompressed.warc"))
    assert len(pages) == 1
    body = pages[0].payload.lstrip()
    # A chunked body starts with a hex chunk size line; de-chunked HTML starts with markup.
    assert body[:1] == b"<"
    assert b"</html>" in body.lower()


def test_old_warc_versions(warc_dir):
    pages = _pages(_items(warc_dir / "quirks" / "clueweb09-ja-warc0.18.warc.gz"))
    assert len(pages) == 29
    pages17 = _pages(_items(warc_dir / "quirks" / "IAH-20080430204825-00000-blackbook-truncated.warc.gz"))
    assert pages17, "WARC/0.17 responses must be read"


@pytest.mark.parametrize(
    "name",
    ["fragment3.wet.gz", "corrupt_two_warcinfo.wet.gz", "filter_test_1.wet.gz"],
)
def test_single_stream_gzip_wet_is_read(warc_dir, name):
    """warcio refuses single-stream gzip; we read it decompressed and keep its conversions."""
    items = _items(warc_dir / "wet-cc-main-2016-50" / name)
    pages = _pages(items)
    assert pages and all(p.kind == "text" for p in pages)
    assert all(p.payload.strip() for p in pages)


def test_truncated_last_record_is_counted_not_kept(warc_dir):
    items = _items(warc_dir / "wet-cc-main-2016-50" / "fragment1_incomplete_last.wet.gz")
    assert _reasons(items)["truncated_record"] == 1
    assert len(_pages(items)) >= 1


def test_not_a_warc(warc_dir):
    items = _items(warc_dir / "wet-cc-main-2016-50" / "11_bytes.txt.gz")
    assert [i.reason for i in items] == ["not_a_warc"]


def test_every_shared_file_reads_without_raising(warc_dir):
    files = [p for p in sorted(warc_dir.rglob("*")) if p.is_file()]
    assert len(files) > 30
    for f in files:
        items = _items(f)
        assert items, f"{f.name}: nothing yielded, not even a skip"


# --- damaged files built here from real records -------------------------------------------------


def _real_records(warc_dir, n=3) -> list[bytes]:
    """The first n gzip members (one record each) holding the aeb file's first pages."""
    from warcio.archiveiterator import ArchiveIterator

    raw = (warc_dir / "pages-aeb-181.warc.gz").read_bytes()
    members, it = [], ArchiveIterator(io.BytesIO(raw))
    for rec in it:
        rec.content_stream().read()
        off, length = it.get_record_offset(), it.get_record_length()
        members.append(raw[off : off + length])
        if len(members) == n + 1:  # warcinfo + n responses
            break
    return members


def test_corrupt_member_mid_file_keeps_the_rest(tmp_path, warc_dir):
    members = _real_records(warc_dir, 3)
    bad = bytearray(members[2])
    bad[40:400] = b"\x00" * 360  # destroy the deflate stream of the 2nd response
    path = tmp_path / "damaged.warc.gz"
    path.write_bytes(members[0] + members[1] + bytes(bad) + members[3])
    items = _items(path)
    good = {p.payload for p in _pages(_items_from_members(tmp_path, [members[0], members[1], members[3]]))}
    kept = _pages(items)
    assert len(kept) == 2
    assert {p.payload for p in kept} == good
    assert _reasons(items)["corrupt_region"] == 1


def _items_from_members(tmp_path, members) -> list:
    p = tmp_path / "clean.warc.gz"
    p.write_bytes(b"".join(members))
    return _items(p)


def test_garbage_in_uncompressed_warc_resyncs(tmp_path, warc_dir):
    members = _real_records(warc_dir, 2)
    plain = [gzip.decompress(m) for m in members]
    path = tmp_path / "damaged.warc"
    path.write_bytes(plain[0] + plain[1] + b"garbage line\r\nmore garbage\r\n\r\n" + plain[2])
    items = _items(path)
    assert len(_pages(items)) == 2
    assert _reasons(items)["corrupt_region"] == 1


def test_truncated_gzip_file_keeps_complete_records(tmp_path, warc_dir):
    members = _real_records(warc_dir, 3)
    data = b"".join(members)
    path = tmp_path / "cut.warc.gz"
    path.write_bytes(data[: len(data) - len(members[3]) // 2])
    items = _items(path)
    assert len(_pages(items)) == 2
    assert sum(_reasons(items)[r] for r in ("truncated_file", "truncated_record", "corrupt_region")) >= 1


def test_oversize_record_is_skipped(warc_dir):
    items = _items(warc_dir / "pages-aeb-181.warc.gz", ReaderConfig(max_record_bytes=100_000))
    reasons = _reasons(items)
    assert reasons["oversize_record"] > 0
    assert all(len(p.payload) <= 100_000 for p in _pages(items))
    assert len(_pages(items)) + reasons["oversize_record"] == 181


def test_warc_1_1_written_by_warcio(tmp_path):
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    path = tmp_path / "v11.warc.gz"
    with open(path, "wb") as f:
        w = WARCWriter(f, gzip=True, warc_version="1.1")
        html = "<html><head><meta charset='utf-8'><title>t</title></head><body><p>héllo</p></body></html>"
        headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        rec = w.create_warc_record(
            "http://example.org/", "response", payload=io.BytesIO(html.encode()), http_headers=headers
        )
        w.write_record(rec)
    pages = _pages(_items(path))
    assert len(pages) == 1 and pages[0].payload.decode() == html


def test_parse_warc_date():
    assert parse_warc_date("2024-05-18T05:10:51Z").isoformat() == "2024-05-18T05:10:51+00:00"
    assert parse_warc_date("20080430204825").year == 2008
    assert parse_warc_date("not a date") is None
    assert parse_warc_date(None) is None


def test_brotli_content_encoding(tmp_path):
    import brotli
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    html = b"<html><body><p>" + b"brotli-compressed page " * 50 + b"</p></body></html>"
    path = tmp_path / "br.warc.gz"
    with open(path, "wb") as f:
        w = WARCWriter(f, gzip=True)
        headers = StatusAndHeaders(
            "200 OK", [("Content-Type", "text/html"), ("Content-Encoding", "br")], protocol="HTTP/1.1"
        )
        w.write_record(
            w.create_warc_record(
                "http://example.org/",
                "response",
                payload=io.BytesIO(brotli.compress(html)),
                http_headers=headers,
            )
        )
    pages = _pages(_items(path))
    assert [p.payload for p in pages] == [html]
