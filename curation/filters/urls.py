"""URL parts for the URL filter: the normalized host, domain-list files, datatrove's lists, a compact domain set.

`normalize_host(url)` is the host a domain list is matched on: lowercase, trailing dots, userinfo and
port removed, percent-escapes decoded, a non-ASCII name as IDNA (punycode, Python's `idna` codec),
an IPv6 literal without its brackets. `registered_domain(host)` is its domain under the ICANN public
suffix (`news.bbc.co.uk` -> `bbc.co.uk`, from the Public Suffix List snapshot tldextract ships; None
for an IP or a bare suffix), the unit Common Crawl's index and the opt-out report count sites by.
`DomainSet.match(host)` then tries the host and each parent
domain (`a.b.example.com`, `b.example.com`, `example.com`, `com`), so listing `example.com` blocks
every subdomain; an IP host is matched whole only.

FineWeb's lists are read at run time from the installed datatrove package (`datatrove/assets`),
never copied here. datatrove 0.10.1 ships one merged domain/URL list
(`url_filterblacklistsv0_3_0.tar.gz`: 4,558,939 domains, 19,586 URLs), not UT1's per-category
folders; FineWeb calls it its adult-content blocklist, so it is the one category offered, `adult`
(`UT1_CATEGORIES`). It also lists hosts that are not adult sites, e.g. the news sites
jungefreiheit.de and lacuarta.com of the shared WARCs. Other UT1 categories (gambling, malware,
...) are not in the package: give them as domain files (`url_filter.blocklists`).

Why a hashed set, not a Python set of strings: 4.56 M domains in a `frozenset` take 525 MB per
Python worker and 2.7 s to build (datatrove holds them so: +640 MB measured by bench/curation/url_filter.py);
here each domain is its 64-bit xxh3 hash in a sorted array (8 bytes) plus a one-hash Bloom bitmap
of 32 to 64 bits per domain (a power of two in all: 32 MiB for this list) that answers ~98% of
misses without a binary search: 67 MB, built in ~2 s. A lookup hashes the host and each parent
domain, one probe each. A host that is not listed but whose hash equals a listed one
would be blocked: with 4.6 M entries that is a 2.5e-13 chance per probe.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

import numpy as np
from xxhash import xxh3_64_hexdigest, xxh3_64_intdigest

from core.files import cache_dir

log = logging.getLogger(__name__)

__all__ = [
    "UT1_CATEGORIES",
    "WORD_LISTS",
    "DomainSet",
    "datatrove_asset",
    "load_category",
    "load_word_list",
    "normalize_host",
    "normalize_word",
    "parse_domain_file",
    "parse_domain_line",
    "url_words",
]

UT1_CATEGORIES = {"adult": "url_filterblacklistsv0_3_0.tar.gz"}
"""Category name -> the tarball in datatrove/assets holding its `domains` and `urls` files."""

WORD_LISTS = {
    "banned_words": "banned_words.txt",
    "soft_banned_words": "soft_banned_words.txt",
    "banned_subwords": "banned_subwords.txt",
}
"""FineWeb's word lists in datatrove/assets (one word or phrase per line, `#` lines disabled)."""

# The netloc after `scheme://` (or `//`); a string without them is read as `host/path` (the form of
# UT1's URL lists). A backslash ends the host as it does in browsers.
_NETLOC = re.compile(r"(?:[a-zA-Z][a-zA-Z0-9+.\-]*:)?//([^/?#\\]*)")
_BARE = re.compile(r"[^/?#\\]*")
_DOMAIN = re.compile(r"[a-z0-9_\-]+(?:\.[a-z0-9_\-]+)*")
_HOSTS_FILE_SINKS = ("0.0.0.0", "127.0.0.1", "::", "::1")


def datatrove_asset(name: str):
    """A file of the installed datatrove package's `assets` folder (a Traversable)."""
    return resources.files("datatrove").joinpath("assets", name)


def normalize_host(url: str) -> str | None:
    """The host of `url` as domain lists are matched on it, or None when it has none."""
    m = _NETLOC.match(url)
    netloc = m.group(1) if m else _BARE.match(url).group(0)  # type: ignore[union-attr]
    host = netloc.rpartition("@")[2].strip()
    if host.startswith("["):  # IPv6 literal: [::1]:8080
        return _ipv6(host[1 : host.find("]")])
    host = host.partition(":")[0]
    if "%" in host:
        host = unquote(host)
    host = host.rstrip(".").lower()
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    return host or None


_TLD: Any = None


def tld_extractor():
    """tldextract on its bundled Public Suffix List snapshot only: no download, no cache folder
    (private suffixes such as `github.io` included; ask with include_psl_private_domains=False
    for the ICANN ones alone)."""
    global _TLD
    if _TLD is None:
        import tldextract

        _TLD = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True)
    return _TLD


def registered_domain(host: str | None) -> str | None:
    """The registered domain of a host (as normalize_host gives it) under the ICANN suffixes: what
    a registrant owns, so `a.example.co.uk` and `b.example.co.uk` are one. None for an IP or a host
    that is a suffix itself."""
    if not host or is_ip_host(host):
        return None
    return tld_extractor()(host, include_psl_private_domains=False).top_domain_under_public_suffix or None


_IP_HOST = re.compile(r"^[\d.]+$|:")  # an IPv4 (digits and dots) or IPv6 (a colon) host


def is_ip_host(host: str) -> bool:
    """Whether a host (as normalize_host gives it) is an IP address: no suffix, no domain."""
    return _IP_HOST.search(host) is not None


def _ipv6(text: str) -> str | None:
    """The compressed form of an IPv6 address (one spelling per address), None if it is not one."""
    try:
        return ipaddress.IPv6Address(text).compressed
    except ValueError:
        return None


def parse_domain_line(line: str) -> str | None:
    """One line of a domain file -> its normalized domain, None for a blank or comment line.

    Accepted: `example.com`, `*.example.com` or `.example.com` (the same: subdomains always
    match), a hosts-file line `0.0.0.0 example.com`, an IP address, a trailing `# comment`.
    Raises ValueError for anything else (a URL, two names), so a typo is not a silent no-op.
    """
    fields = line.split("#", 1)[0].split()
    if not fields:
        return None
    if len(fields) == 2 and fields[0] in _HOSTS_FILE_SINKS:
        fields = fields[1:]
    if len(fields) != 1:
        raise ValueError(f"{line.strip()!r} is not one domain")
    entry = fields[0]
    if "/" in entry or ("@" in entry) or (entry.count(":") == 1):
        raise ValueError(f"{entry!r} is not a domain (for a URL, list its host)")
    entry = entry.removeprefix("*.").lstrip(".")
    host = normalize_host(f"//[{entry}]" if ":" in entry else f"//{entry}")
    if host is None or not (_DOMAIN.fullmatch(host) or ":" in host):
        raise ValueError(f"{entry!r} is not a domain")
    return host


def parse_domain_file(path: str) -> list[str]:
    """The domains of a file, one per line; ValueError naming the line of the first bad one."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                d = parse_domain_line(line)
            except ValueError as e:
                raise ValueError(f"line {n}: {e}") from None
            if d is not None:
                out.append(d)
    return out


class DomainSet:
    """Domains matched on a host and its parent domains; 12 to 16 bytes per domain (module docstring)."""

    def __init__(self, hashes: np.ndarray) -> None:
        h = np.sort(hashes.astype(np.uint64, copy=False))
        self._sorted = (
            h[np.concatenate(([True], h[1:] != h[:-1]))] if len(h) else h
        )  # np.unique: 8 s, this 0.3 s
        n = len(self._sorted)
        # 32 to 64 bitmap bits per domain: a miss finds its bit unset with probability >= 1 - 1/32.
        bits = max(12, int(np.log2(max(n, 1) * 64)))
        self._shift = 64 - bits
        idx = self._sorted >> np.uint64(self._shift)
        bitmap = np.zeros(1 << (bits - 3), dtype=np.uint8)
        np.bitwise_or.at(bitmap, idx >> np.uint64(3), np.left_shift(1, idx & np.uint64(7)).astype(np.uint8))
        self._bitmap = bitmap.tobytes()  # bytes indexing is ~4x faster than a numpy scalar's
        self._n = n

    def arrays(self) -> dict[str, np.ndarray]:
        """The set as arrays (`from_arrays` rebuilds it without sorting or hashing again)."""
        return {
            "sorted": self._sorted,
            "bitmap": np.frombuffer(self._bitmap, dtype=np.uint8),
            "shift": np.array([self._shift], dtype=np.int64),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> DomainSet:
        self = cls.__new__(cls)
        self._sorted = np.asarray(arrays["sorted"], dtype=np.uint64)
        self._bitmap = np.asarray(arrays["bitmap"], dtype=np.uint8).tobytes()
        self._shift = int(arrays["shift"][0])
        self._n = len(self._sorted)
        return self

    @classmethod
    def from_domains(cls, domains: Iterable[str | bytes]) -> DomainSet:
        """From normalized domains (see `normalize_host`); a str and its UTF-8 bytes hash alike."""
        return cls(np.fromiter(map(xxh3_64_intdigest, domains), dtype=np.uint64))

    def __len__(self) -> int:
        return self._n

    def _has(self, h: int) -> bool:
        """Whether hash `h` is in the sorted array (called only when its bitmap bit is set)."""
        i = int(self._sorted.searchsorted(np.uint64(h)))
        return i < self._n and int(self._sorted[i]) == h

    def match(self, host: str) -> str | None:
        """The listed domain that `host` is or is under (the most specific), or None."""
        if not host:
            return None
        bitmap, shift = self._bitmap, self._shift
        # An IP address has no parent domains. IPv4 as the WHATWG URL standard tells it: the last
        # label is a number (no TLD is); IPv6 has colons.
        if (host[-1].isdigit() and host[host.rfind(".") + 1 :].isdigit()) or ":" in host:
            x = xxh3_64_intdigest(host)
            b = x >> shift
            return host if (bitmap[b >> 3] >> (b & 7)) & 1 and self._has(x) else None
        start = 0
        while True:
            x = xxh3_64_intdigest(host[start:])
            b = x >> shift
            if (bitmap[b >> 3] >> (b & 7)) & 1 and self._has(x):
                return host[start:]
            start = host.find(".", start) + 1
            if not start:
                return None


def _lines(f: IO[bytes], chunk: int = 1 << 24) -> Iterator[list[bytes]]:
    """The stripped non-empty, non-comment lines of a binary file, a list per chunk read."""
    tail = b""
    while block := f.read(chunk):
        block = tail + block
        cut = block.rfind(b"\n") + 1
        block, tail = block[:cut], block[cut:]
        yield _clean(block)
    yield _clean(tail)


def _clean(block: bytes) -> list[bytes]:
    lines = block.split(b"\n")
    if b"#" in block or b" " in block or b"\t" in block or b"\r" in block:
        lines = [s for s in map(bytes.strip, lines) if not s.startswith(b"#")]
    return [s for s in lines if s]


def _hash_lines(f: IO[bytes]) -> np.ndarray:
    """xxh3 hashes of the lines of `f` (4.6 M lines in ~1 s: hashing a list per chunk, in C)."""
    return np.concatenate(
        [np.fromiter(map(xxh3_64_intdigest, part), dtype=np.uint64, count=len(part)) for part in _lines(f)]
    )


@cache
def load_category(name: str) -> tuple[DomainSet, frozenset[str]]:
    """(domains, URLs) of a UT1 category from datatrove's package, loaded once per process.

    The entries are used as they are: the shipped list is already normalized (lowercase ASCII,
    punycode, no trailing dot; tests/curation/test_urls.py checks it), so normalizing 4.6 M
    lines again would only cost time.

    Building the set takes ~3 CPU-seconds (gunzip 124 MB, hash 4.6 M lines, sort), paid by every
    Spark Python worker at start-up; the built arrays are kept in the per-user cache folder
    (`core.files.cache_dir`, 71 MB for the shipped list) and read back by the next process
    (~0.1 CPU-second). The cache key is the
    tarball's name, size and mtime and `_CACHE_FORMAT`; a cache that cannot be read or written is
    logged and the set built in memory as before.
    """
    asset = datatrove_asset(UT1_CATEGORIES[name])
    cached = _cache_path(name, asset)
    if cached is not None and cached.exists():
        try:
            return _read_cached(cached)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            log.warning("UT1 cache %s unreadable (%s): rebuilding it", cached, e)
    with asset.open("rb") as raw, tarfile.open(fileobj=raw, mode="r:gz") as tar:
        domains = DomainSet(_hash_lines(tar.extractfile("domains")))  # type: ignore[arg-type]
        urls = frozenset(s.decode("utf-8") for part in _lines(tar.extractfile("urls")) for s in part)  # type: ignore[arg-type]
    if cached is not None:
        _write_cached(cached, domains, urls)
    return domains, urls


_CACHE_FORMAT = 1  # bump when DomainSet's arrays or the hashing change


def _cache_path(name: str, asset) -> Path | None:
    try:
        st = os.stat(str(asset))
    except OSError:  # not a plain file (a zipped install): no cache
        return None
    key = xxh3_64_hexdigest(f"{_CACHE_FORMAT}|{asset}|{st.st_size}|{st.st_mtime_ns}")
    return cache_dir() / "url_filter" / f"ut1-{name}-{key}.npz"


def _read_cached(path: Path) -> tuple[DomainSet, frozenset[str]]:
    with np.load(path) as z:
        domains = DomainSet.from_arrays({k: z[k] for k in ("sorted", "bitmap", "shift")})
        urls = frozenset(bytes(z["urls"]).decode("utf-8").split("\n")) - {""}
    return domains, urls


def _write_cached(path: Path, domains: DomainSet, urls: frozenset[str]) -> None:
    """Written whole under a temporary name, then renamed: a reader sees the old state or the new."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        joined = np.frombuffer("\n".join(sorted(urls)).encode("utf-8"), dtype=np.uint8)
        with open(tmp, "wb") as f:
            np.savez(f, urls=joined, **domains.arrays())
        os.replace(tmp, path)
    except OSError as e:
        log.warning("UT1 cache %s not written (%s): the next process builds the set again", path, e)
        tmp.unlink(missing_ok=True)


@cache
def load_word_list(name: str) -> frozenset[bytes]:
    """A FineWeb word list, each entry as datatrove normalizes it: ASCII letters and digits, lowercase.

    `#` lines are disabled entries, as in datatrove; an entry that normalizes to "" is left out
    (datatrove would keep "", which matches the empty word a URL ending in `/` splits into; the
    shipped lists have no such line).
    """
    text = datatrove_asset(WORD_LISTS[name]).read_text(encoding="utf-8")
    words = (normalize_word(line.encode()) for line in text.splitlines() if line and line[0] != "#")
    return frozenset(w for w in words if w)


# datatrove splits and squeezes URLs with the regex [^a-zA-Z0-9]+ on str; the same on the UTF-8
# bytes with bytes.translate is 2x (split) and 4.5x (squeeze) faster and gives the same words: a
# non-ASCII character is a separator either way (its UTF-8 bytes are all >= 0x80, never alphanumeric).
_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_TO_SPACE = bytes(b if b in _ALNUM else 0x20 for b in range(256))
_NOT_ALNUM = bytes(b for b in range(256) if b not in _ALNUM)


def normalize_word(text: bytes) -> bytes:
    """datatrove's `normalize`: ASCII letters and digits only, lowercase (b"2 girls 1 cup" -> b"2girls1cup")."""
    return text.translate(None, _NOT_ALNUM).lower()


def url_words(url: bytes) -> set[bytes]:
    """The URL's words as FineWeb's filter splits them: runs of ASCII letters/digits, case kept."""
    return set(url.translate(_TO_SPACE).split())
