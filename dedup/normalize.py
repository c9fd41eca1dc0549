"""Text and URL normalization shared by every dedup stage, and the 64-bit hash they use.

Text: NFKC, lower case, every digit -> "0", punctuation and symbols -> space, whitespace collapsed to
single spaces. Characters of scripts written without spaces between words (Han, kana, Thai, Lao,
Khmer, Myanmar) become tokens of their own (a letter with the combining marks that follow it), so
such text still yields word-like shingles. The same
function feeds the exact-text hash, the MinHash shingles and the line hashes, so "duplicate" means
the same thing in every stage.

URL: lower-case scheme and host, no default port, no fragment, no tracking parameters, sorted query,
no trailing slash: two captures of one page compare equal.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import xxhash

# Scripts without spaces between words: one character = one token.
_NO_SPACE_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x31F0, 0x31FF),  # Katakana extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x2FFFF),  # CJK extensions B-F
)
# Codepoints up to here get a translate-table entry; above it only the CJK supplementary planes matter.
_TABLE_LIMIT = 0x30000


@functools.cache
def _table() -> list[str]:
    """str.translate table: punctuation/symbols -> space, digits -> 0, no-space letters -> ' c'.

    Only a space before such a letter: the combining marks (vowel signs, tones) that follow it stay
    attached, so a token is a letter cluster, not a lone mark.

    A list indexed by codepoint, not a dict: str.translate looks a list up twice as fast, and a
    codepoint past its end (IndexError, a LookupError) maps to itself.
    """
    table: dict[int, str] = {}
    for cp in range(_TABLE_LIMIT):
        cat = unicodedata.category(chr(cp))
        if cat[0] in "PS":
            table[cp] = " "
        elif cat == "Nd":
            table[cp] = "0"
    for lo, hi in _NO_SPACE_RANGES:
        for cp in range(lo, min(hi, _TABLE_LIMIT - 1) + 1):
            if unicodedata.category(chr(cp))[0] == "L":
                table[cp] = f" {chr(cp)}"
    return [table.get(cp, chr(cp)) for cp in range(_TABLE_LIMIT)]


@functools.cache
def _split_tables() -> tuple[dict[int, str], bytes]:
    """The same mapping split in two: non-ASCII codepoints (a dict, used only on non-ASCII runs)
    and a 256-byte table for ASCII, applied to UTF-8 bytes by bytes.translate at C speed.

    Whitespace maps to a space in both, so bytes.split() (ASCII whitespace only) splits exactly
    where str.split() would.
    """
    table = _table()
    non_ascii = {}
    for cp in range(128, len(table)):
        c = chr(cp)
        if table[cp] != c:
            non_ascii[cp] = table[cp]
        elif c.isspace():
            non_ascii[cp] = " "
    ascii_bytes = bytearray(range(256))
    for cp in range(128):
        c = chr(cp)
        if table[cp] != c:
            ascii_bytes[cp] = ord(table[cp])
        if c.isspace():
            ascii_bytes[cp] = 32
    return non_ascii, bytes(ascii_bytes)


_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")


def normalize_bytes(text: str) -> bytes:
    """UTF-8 bytes of `normalize_text(text)`, computed without a per-character Python step for ASCII."""
    non_ascii, ascii_bytes = _split_tables()
    if text.isascii():  # O(1) flag check; NFKC and the non-ASCII table do nothing to ASCII
        return b" ".join(text.lower().encode("ascii").translate(ascii_bytes).split())
    s = unicodedata.normalize("NFKC", text).lower()
    if not s.isascii():
        s = _NON_ASCII_RUN.sub(lambda m: m.group().translate(non_ascii), s)
    return b" ".join(s.encode("utf-8", "surrogatepass").translate(ascii_bytes).split())


def normalize_text(text: str) -> str:
    """Normalized form used for hashing and shingling (see the module docstring)."""
    return normalize_bytes(text).decode("utf-8", "surrogatepass")


def normalize_text_reference(text: str) -> str:
    """The same normalization, written plainly (one translate over every character); for tests."""
    s = unicodedata.normalize("NFKC", text).lower().translate(_table())
    return " ".join(s.split())


def hash64(data: str | bytes) -> int:
    """xxh64 as a signed int64 (Spark's LongType), seed 0."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    v = xxhash.xxh64_intdigest(data)
    return v - (1 << 64) if v >= 1 << 63 else v


def text_hash(text: str) -> int:
    """Hash of the normalized text: the exact-dedup key."""
    return hash64(normalize_text(text))


_TRACKING_PREFIXES = ("utm_",)
_TRACKING_KEYS = frozenset({"fbclid", "gclid", "dclid", "msclkid", "mc_cid", "mc_eid", "_ga", "yclid"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalize_url(url: str | None) -> str | None:
    """Canonical form of a URL for URL dedup, or None when there is nothing to compare."""
    if not url or not url.strip():
        return None
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port
    except ValueError:  # e.g. a port that is not a number: compare the raw string
        return url.strip()
    if not host:
        return url.strip()
    if host.startswith("www."):
        host = host[4:]
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    query = sorted(
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if k.lower() not in _TRACKING_KEYS and not k.lower().startswith(_TRACKING_PREFIXES)
    )
    path = parts.path or "/"
    if len(path) > 1:
        path = path.rstrip("/") or "/"
    # http and https captures of one page are the same page.
    if scheme in ("http", "https"):
        scheme = "http"
    return urlunsplit((scheme, netloc, path, urlencode(query), ""))


def line_hashes(text: str) -> list[int | None]:
    """One hash per line of `text` (split on newlines); None for lines empty after normalization."""
    out: list[int | None] = []
    for line in text.split("\n"):
        norm = normalize_bytes(line)
        out.append(hash64(norm) if norm else None)
    return out
