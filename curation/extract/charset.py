"""Decode an HTML payload to text: HTTP header charset, then <meta> charset, then detection.

Decoding never raises. A declared charset that is unknown to Python, or that fails to decode
the bytes strictly, is passed over for the next source; detection (faust-cchardet) comes next;
UTF-8 with replacement characters is the last resort. The chosen source is returned so stats can
count how often each one decided.
"""

from __future__ import annotations

import codecs
import re

_HEADER_CHARSET_RE = re.compile(r"charset\s*=\s*[\"']?\s*([A-Za-z0-9._:\-]+)", re.IGNORECASE)
# <meta charset="x"> and <meta http-equiv="Content-Type" content="text/html; charset=x">
_META_CHARSET_RE = re.compile(rb"<meta[^>]{0,512}?charset\s*=\s*[\"']?\s*([A-Za-z0-9._:\-]+)", re.IGNORECASE)
_META_SCAN_BYTES = 8192
# Labels browsers map to a superset codec (WHATWG encoding spec): decoding as the superset is
# what the page's author saw.
_ALIASES = {
    "iso-8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "iso-8859-9": "cp1254",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-sjis": "shift_jis",
    "shift-jis": "shift_jis",
    "euc-kr": "cp949",
    "ks_c_5601-1987": "cp949",
    "tis-620": "cp874",
    "x-user-defined": "cp1252",
}


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    name = label.strip().strip("\"'").lower()
    name = _ALIASES.get(name, name)
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def header_charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    m = _HEADER_CHARSET_RE.search(content_type)
    return m.group(1) if m else None


def meta_charset(payload: bytes) -> str | None:
    m = _META_CHARSET_RE.search(payload[:_META_SCAN_BYTES])
    return m.group(1).decode("ascii", "replace") if m else None


def _try(payload: bytes, codec: str | None) -> str | None:
    if codec is None:
        return None
    try:
        return payload.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return None


def decode_html(payload: bytes, content_type: str | None = None) -> tuple[str, str, str]:
    """Return (text, codec, source) with source in {'bom', 'http', 'meta', 'detected', 'fallback'}."""
    if payload.startswith(codecs.BOM_UTF8):
        return payload[3:].decode("utf-8", "replace"), "utf-8", "bom"
    for source, label in (("http", header_charset(content_type)), ("meta", meta_charset(payload))):
        codec = _codec(label)
        text = _try(payload, codec)
        if text is not None:
            return text, codec, source
    text = _try(payload, "utf-8")  # most of the web; strict UTF-8 success is a strong signal
    if text is not None:
        return text, "utf-8", "detected"
    try:
        import cchardet

        detected = cchardet.detect(payload[:65536]).get("encoding")
    except Exception:
        detected = None
    codec = _codec(detected)
    if codec is not None:
        return payload.decode(codec, "replace"), codec, "detected"
    return payload.decode("utf-8", "replace"), "utf-8", "fallback"
