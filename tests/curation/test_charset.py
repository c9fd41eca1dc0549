"""Charset decoding: HTTP header, then <meta>, then detection; never raises."""

from __future__ import annotations

from curation.config import ReaderConfig
from curation.extract.charset import decode_html
from curation.warc.records import Page, iter_records

RUSSIAN = "<html><body><p>Съешь же ещё этих мягких французских булок, да выпей чаю.</p></body></html>"


def test_http_header_charset_wins():
    text, codec, source = decode_html(RUSSIAN.encode("koi8-r"), "text/html; charset=KOI8-R")
    assert text == RUSSIAN and source == "http" and codec == "koi8-r"


def test_meta_charset_used_without_header():
    html = '<html><head><meta charset="windows-1251"></head>' + RUSSIAN[6:]
    text, _, source = decode_html(html.encode("cp1251"), "text/html")
    assert text == html and source == "meta"


def test_http_equiv_meta():
    html = '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-7"><p>Καλημέρα κόσμε</p>'
    text, _, source = decode_html(html.encode("iso-8859-7"), None)
    assert text == html and source == "meta"


def test_wrong_declaration_falls_through_to_detection():
    # Declared UTF-8 but the bytes are cp1251 (a common server misconfiguration).
    payload = (RUSSIAN * 5).encode("cp1251")
    text, codec, source = decode_html(payload, "text/html; charset=utf-8")
    assert source == "detected"
    assert "французских" in text, codec


def test_unknown_label_and_garbage_never_raise():
    text, _, source = decode_html(b"\xff\xfe\x00garbage\x80\x81", "text/html; charset=no-such-codec")
    assert isinstance(text, str) and source in ("detected", "fallback")


def test_utf8_bom():
    text, _codec, source = decode_html("\ufeff<p>é</p>".encode(), None)
    assert text == "<p>é</p>" and source == "bom"


def test_japanese_clueweb_pages_decode_to_japanese(warc_dir):
    """ClueWeb09-ja pages (Shift_JIS / EUC-JP): most decoded characters must be Japanese script."""
    pages = [
        p for p in iter_records(str(warc_dir / "quirks" / "clueweb09-ja-warc0.18.warc.gz"), ReaderConfig())
    ]
    pages = [p for p in pages if isinstance(p, Page)]
    good = 0
    for p in pages:
        text, _, _ = decode_html(p.payload, p.content_type)
        jp = sum(1 for ch in text if "\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff")
        bad = text.count("\ufffd")
        good += jp > 50 and bad < jp / 50
    # A mis-decoded page is mojibake (Latin-1 letters or U+FFFD), not kana/kanji. Allow a few
    # pages that are genuinely mostly markup.
    assert good >= 0.8 * len(pages), f"{good}/{len(pages)}"
