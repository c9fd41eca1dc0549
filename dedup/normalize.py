"""Text and URL normalization shared by every dedup stage, and the 64-bit hash they use.

Text: NFKC, lower case, every digit -> "0", punctuation and symbols -> space, whitespace collapsed to
single spaces. Characters of scripts written without spaces between words (Han, kana, Thai, Lao,
Khmer, Myanmar) become tokens of their own (a letter with the combining marks that follow it), so
such text still yields word-like shingles. The same
function feeds the exact-text hash, the MinHash shingles and the line hashes, so "duplicate" means
the same thing in every stage. The exact-dedup key is `hash64(normalize_bytes(text))`, null for a
text with no word (dedup/stages/exact.py, from the batch's shared norms); there is no second key
function here, so none can disagree with it. `normalize_bytes` is the fast form (byte tables for ASCII, and a
per-character cache for the few non-ASCII characters of most web text; see its docstring);
`normalize_text_reference` is the plain one it must equal.

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
_ASCII = bytes(range(128))
# After the ASCII byte table, space is the only byte bytes.split() splits on (see _split_tables), so
# collapsing runs of spaces and stripping the ends gives `b" ".join(b.split())`, about a fifth faster
# (no list of words is built).
_SPACE_RUN = re.compile(rb"  +")
# Per document, the UTF-8 length minus the length in characters (at least the number of non-ASCII
# characters, at most three times it) says in O(1) how much non-ASCII text there is. The fast path
# (_char_bytes) pays ~45 ns per non-ASCII character to find the distinct ones, and more when it then
# has to give up, so it is tried only up to 1/_FAST_MAX_SHARE of the length.
_FAST_MAX_SHARE = 8
# It does one bytes.replace over the whole document per distinct character that changes: past this
# many (Han or kana text, every character its own token) the general path is cheaper.
_MAX_REPLACED = 24
# The general path translates each non-ASCII run (a regex scan of every character, then ~0.4 us per
# run) or the whole string (~22 ns per character): the runs win up to one run per this many
# characters. bench/dedup/normalize.py (at 9347e0d; docs/benchmarks.md) measured all three thresholds.
_CHARS_PER_RUN = 64
# Bytes -> b"a" (ASCII) or b"\x80" (the rest): a non-ASCII run starts at each b"a\x80" of the result.
_RUN_MARKS = bytes(0x61 if i < 0x80 else 0x80 for i in range(256))
_KEEP = b""  # _char_bytes: the character stays as it is


@functools.cache
def _lower_ascii_table() -> bytes:
    """The ASCII byte table with A-Z lowered first: str.lower of ASCII and the table in one pass."""
    table = bytearray(_split_tables()[1])
    for cp in range(ord("A"), ord("Z") + 1):
        table[cp] = table[cp + 32]
    return bytes(table)


@functools.cache
def _non_ascii_list() -> list[str]:
    """The non-ASCII dict of _split_tables as a list (identity on ASCII), for translating a whole
    string: str.translate looks a list up faster than a dict."""
    non_ascii = _split_tables()[0]
    return [chr(cp) if cp < 128 else non_ascii.get(cp, c) for cp, c in enumerate(_table())]


@functools.cache
def _composes_backward() -> frozenset[str]:
    """Every character that canonical composition may join onto the character before it (a
    superset of NFC_QC=Maybe): the second half of each two-character canonical decomposition
    (composition exclusions kept, to be safe) and the Hangul medial vowels and final consonants
    that join L+V and LV+T. No character at or past U+30000 has a decomposition.
    """
    out = {chr(cp) for cp in (*range(0x1161, 0x1176), *range(0x11A8, 0x11C3))}
    for cp in range(_TABLE_LIMIT):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<") and len(parts := d.split()) == 2:
            out.add(chr(int(parts[1], 16)))
    return frozenset(out)


def _mapped(s: str) -> str:
    """What the general path makes of the string `s`, before the ASCII byte table."""
    return unicodedata.normalize("NFKC", s).lower().translate(_split_tables()[0])


_char_cache: dict[str, bytes | None] = {}
# Real text uses a few thousand distinct characters; a stream of odd ones must not grow it forever.
_CHAR_CACHE_MAX = 1 << 16


def _char_bytes(c: str) -> bytes | None:
    """UTF-8 of what the general path makes of the non-ASCII character `c` wherever it stands
    (before the ASCII byte table); _KEEP when that is `c` itself; None when it may depend on the
    neighbours or cannot be swapped in with bytes.replace. Cached.

    NFKC of a string is the concatenation of NFKC of its characters when each one's NFKD starts with
    a starter (canonical combining class 0) that composes with nothing before it: canonical
    reordering never crosses a starter, and composition never reaches back past one. Every ASCII
    character qualifies, so checking a document's non-ASCII characters is enough; e + U+0301 and
    Hangul L + V fail here and take the general path. str.lower maps each character on its own
    except U+03A3 (final or not depends on the neighbours), which no NFKC result here may contain.
    Last, the result may contain no other non-ASCII character that changes: the replacements run one
    after another, and a later one would rewrite it.
    """
    out = _char_cache.get(c, False)
    if out is not False:
        return out
    out = None
    first = unicodedata.normalize("NFKD", c)[0]
    if not unicodedata.combining(first) and first not in _composes_backward():
        mapped = _mapped(c)
        if "\u03a3" not in unicodedata.normalize("NFKC", c) and all(
            d == c or d.isascii() or _mapped(d) == d for d in mapped
        ):
            out = _KEEP if mapped == c else mapped.encode("utf-8", "surrogatepass")
    if len(_char_cache) >= _CHAR_CACHE_MAX:
        _char_cache.clear()
    _char_cache[c] = out
    return out


def _normalize_bytes_general(text: str, encoded: bytes) -> bytes:
    """Any text (`encoded` is its UTF-8): NFKC and lower over the whole string, the non-ASCII table
    over each non-ASCII run or the whole string, whichever is cheaper, the ASCII byte table, and
    the collapse."""
    s = unicodedata.normalize("NFKC", text).lower()
    if not s.isascii():
        # Runs of the input (an estimate for s) <= its non-ASCII characters <= its extra bytes: with
        # few extra bytes, no need to count.
        many = (len(encoded) - len(text)) * _CHARS_PER_RUN > len(text)
        if many:
            marks = encoded.translate(_RUN_MARKS)
            many = (marks.count(b"a\x80") + (marks[0] == 0x80)) * _CHARS_PER_RUN > len(text)
        if many:
            s = s.translate(_non_ascii_list())
        else:
            non_ascii = _split_tables()[0]
            s = _NON_ASCII_RUN.sub(lambda m: m.group().translate(non_ascii), s)
    b = s.encode("utf-8", "surrogatepass").translate(_split_tables()[1])
    return _SPACE_RUN.sub(b" ", b).strip(b" ")


def normalize_bytes(text: str) -> bytes:
    """UTF-8 bytes of `normalize_text(text)`, computed without a per-character Python step for ASCII.

    ASCII text needs only the byte tables. So does text with a little non-ASCII whose characters
    each normalize the same wherever they stand (_char_bytes) -- in English web text the curly
    quotes, dashes, no-break spaces and accented letters: each one's bytes are replaced by its
    cached result, and NFKC, lower and the regex scan over every character are skipped. Any other
    text takes the general path.
    """
    if text.isascii():  # O(1) flag check; NFKC and the non-ASCII table do nothing to ASCII
        b = text.encode("ascii")
    else:
        b = text.encode("utf-8", "surrogatepass")
        if (len(b) - len(text)) * _FAST_MAX_SHARE > len(text):
            return _normalize_bytes_general(text, b)
        swaps = []
        # The distinct non-ASCII characters, found at C speed: drop every ASCII byte and decode.
        for c in set(b.translate(None, _ASCII).decode("utf-8", "surrogatepass")):
            out = _char_cache.get(c, False)  # inline: a call per character costs more than the lookup
            if out is False:
                out = _char_bytes(c)
            if out is None:
                return _normalize_bytes_general(text, b)
            if out:  # not _KEEP
                swaps.append((c, out))
                if len(swaps) > _MAX_REPLACED:
                    return _normalize_bytes_general(text, b)
        for c, out in swaps:
            # UTF-8 is self-synchronising: c's bytes match only where c stands.
            b = b.replace(c.encode("utf-8", "surrogatepass"), out)
    return _SPACE_RUN.sub(b" ", b.translate(_lower_ascii_table())).strip(b" ")


def _normalize_bytes_slow(text: str) -> bytes:
    """normalize_bytes as it was before the fast path, kept verbatim: the oracle that
    tests/dedup/test_normalize.py and the removed bench/dedup/normalize.py (docs/benchmarks.md) compared it with, byte for byte."""
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
