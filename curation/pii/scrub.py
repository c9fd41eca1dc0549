"""Scrub personal data and secrets from document text with checksum-validated, linear-time regexes.

What: `scrub(text, config)` finds e-mail addresses, public IPv4/IPv6 addresses, phone numbers,
payment card numbers, US social security numbers, IBANs, secrets (AWS access key ids, PEM
private key blocks, HTTP bearer tokens) and street addresses (curation/pii/address.py: US, UK,
Canadian, and number-last European ones), replaces each with a typed placeholder (`<EMAIL>`, ...)
and returns the new text plus one `PiiSpan` per replacement, with offsets into the ORIGINAL text.
`PiiScrubber(config)` wraps it as a per-document stage returning per-type counts, for use inside
Spark partitions (this module imports no Spark; its only state is a bounded memo of IP answers).

Why: web text carries contact details and leaked credentials that a language model can memorise
and regurgitate. Regexes are the usual first line (datatrove's `PIIFormatter`, which FineWeb ran,
replaces e-mails and public IPs); we add the other structured identifiers, each confirmed by the
check its issuer defines, so that random digit strings are left alone:
- payment cards: Luhn mod-10 check (ISO/IEC 7812-1), 13-19 digits;
- IBAN: ISO 13616 country code + per-country length + ISO 7064 mod-97-10 check digits;
- SSN: the ranges the SSA never issues (area 000, 666, 900-999; group 00; serial 0000);
- IP: only `ipaddress` `is_global`, non-multicast addresses (RFC 6890 special-purpose ranges,
  i.e. private, loopback, link-local, documentation, CGNAT ... are not personal data);
- e-mail: RFC 5321 length limits (local part <= 64, domain <= 253), dotted domain, alphabetic TLD;
- phone: E.164 (at most 15 digits; "+", "00" or the NANP's "011" before the country code) plus
  shape rules that drop dates, year ranges, ZIP+4, SSN shapes, version/IP-like dotted numbers
  and bare digit runs (order ids); the national layouts of ITU-T E.123 and the national plans
  (area code in parentheses, after a one-digit prefix "1 (800)" / "8 (495)", DIN 5008 "030/1234567");
- secrets: PEM private key blocks (RFC 7468 labels), bearer tokens (RFC 6750 b64token syntax;
  only the token is replaced), AWS access key ids (IAM user guide: "AKIA" long-term, "ASIA"
  temporary, 20 characters).
- address: the grammar of USPS Pub 28, Royal Mail and Canada Post addresses (house number,
  street name, street type from their lists, units, city/state/ZIP or postcode), and street
  lines written number-last as most of Europe does (curation/pii/address_eu.py), see the modules.
Names and other free-text PII need NER, not regexes, and are out of scope.

Linear time. Python's `re` is a backtracking engine, so a careless pattern is quadratic (a run
re-scanned from every start position) or exponential (nested quantifiers) on hostile input; see
Russ Cox, "Regular Expression Matching Can Be Simple And Fast" (2007) and OWASP's ReDoS page.
Every pattern here obeys three rules; `tests/curation/test_pii.py` checks rules 1-2 on the parsed
patterns (`PATTERNS`) and the results on 1 MB adversarial strings, and `bench/curation/pii_speed.py` times
every type and the whole scrubber on them (budget: 1 s per MB):
1. No nested quantifiers: a repeat with a maximum above 1 (`*`, `+`, `{m,n}`) only ever applies to
   a single character or character class, never to a group; groups are at most optional (`?`),
   and repeated shapes (IPv4 octets, IBAN groups) are spelled out instead.
2. Every unbounded repeat is possessive (`*+`, `++`, Python >= 3.11): the engine never gives back
   what it consumed. Bounded repeats may backtrack, but only within their constant bound, so one
   match attempt costs O(bound).
3. An attempt can only begin where a token begins: a negative lookbehind placed right after the
   first character (not before it, so that `re` can still skip to that character at C speed)
   rejects every position inside a run of digits/letters in O(1). Successive attempts therefore
   scan disjoint stretches and a whole pass is O(n).
Where the first character is common (letters), the scan is driven by a rarer anchor instead:
e-mails from each '@', IPv6 from each ':' followed by hex, IBANs from two digits after two letters;
the full pattern is then matched at a start at most a constant distance away, and the scan resumes
after the run it examined. Checks that regexes cannot express (Luhn, mod-97, `ipaddress`, phone
shapes, context words) run in Python on the bounded candidate only, and are kept to a few
microseconds each, since hostile text can hold 100,000+ candidates per MB: IPv4 is classified
from its integer, other IP answers are memoised, phone candidates with too few digits are skipped
before the shape rules. The one multi-step search, PEM blocks, remembers the next END marker so
that many BEGIN markers without an END do not each rescan the rest of the text.

Overlaps between types are resolved deterministically: the leftmost span wins, then the longest,
then the type listed first in `PII_TYPES` (most specific / checksummed first), so a secret beats a
phone number inside it and a card beats a phone reading of the same digits.
"""

from __future__ import annotations

import ipaddress
import re
import string
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Final, Literal, NamedTuple, get_args

from core.errors import ConfigError
from core.stage import Document, DocumentStage, Drop
from curation.pii.address import PATTERNS as ADDRESS_PATTERNS
from curation.pii.address import find_addresses
from curation.schema import PII_COUNT_FIELDS

PiiType = Literal["secret", "card", "iban", "ssn", "email", "ip", "phone", "address"]
# Order matters: it is the tie-break priority when two types claim exactly the same characters.
PII_TYPES: Final[tuple[PiiType, ...]] = get_args(PiiType)
_PRIORITY: Final[dict[str, int]] = {t: i for i, t in enumerate(PII_TYPES)}

# Every pattern is ASCII: `\d` must not match Arabic-Indic or full-width digits that no checksum
# below understands, and `\w` then means [A-Za-z0-9_].
_A = re.ASCII


# ---------------------------------------------------------------------------------------------
# Configuration and results
# ---------------------------------------------------------------------------------------------


@dataclass(kw_only=True, frozen=True, slots=True)
class PiiPlaceholders:
    """The text that replaces each type of match (any string, including the empty one)."""

    secret: str = "<SECRET>"
    card: str = "<CARD>"
    iban: str = "<IBAN>"
    ssn: str = "<SSN>"
    email: str = "<EMAIL>"
    ip: str = "<IP>"
    phone: str = "<PHONE>"
    address: str = "<ADDRESS>"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, str):
                raise ConfigError(f"pii.placeholders.{f.name} must be a string, got {value!r}")


@dataclass(kw_only=True, frozen=True, slots=True)
class PiiConfig:
    """Which PII types `scrub` replaces, and with what.

    `enabled` accepts any iterable of type names and is normalised to a tuple in `PII_TYPES`
    order; `placeholders` also accepts a mapping of type name -> placeholder (unnamed types keep
    their defaults).
    """

    enabled: tuple[PiiType, ...] = PII_TYPES
    """Types to find and replace; the others are left untouched."""
    placeholders: PiiPlaceholders = field(default_factory=PiiPlaceholders)
    """Replacement text per type."""

    def __post_init__(self) -> None:
        allowed = ", ".join(PII_TYPES)
        enabled = self.enabled
        if isinstance(enabled, str) or not isinstance(enabled, Iterable):
            raise ConfigError(f"pii.enabled must be a list of PII types ({allowed}), got {enabled!r}")
        enabled = list(enabled)
        for name in enabled:
            if name not in _PRIORITY:
                raise ConfigError(f"pii.enabled: unknown PII type {name!r}; allowed: {allowed}")
        # Frozen dataclass: normalise through object.__setattr__ (dedup, canonical order).
        object.__setattr__(self, "enabled", tuple(t for t in PII_TYPES if t in enabled))

        placeholders = self.placeholders
        if isinstance(placeholders, Mapping):
            for name in placeholders:
                if name not in _PRIORITY:
                    raise ConfigError(f"pii.placeholders: unknown PII type {name!r}; allowed: {allowed}")
            placeholders = PiiPlaceholders(**placeholders)
        if not isinstance(placeholders, PiiPlaceholders):
            raise ConfigError(
                f"pii.placeholders must be a PiiPlaceholders or a mapping of PII type -> string "
                f"(types: {allowed}), got {placeholders!r}"
            )
        object.__setattr__(self, "placeholders", placeholders)

    def placeholder(self, pii_type: PiiType) -> str:
        return getattr(self.placeholders, pii_type)


_new_tuple = tuple.__new__


class PiiSpan(NamedTuple):
    """One replaced match: `text[start:end]` of the ORIGINAL text was replaced by `placeholder`.

    The matched value itself is deliberately not stored, so spans can be logged or counted
    without copying the personal data they point at. A named tuple (immutable, picklable) rather
    than a frozen dataclass: `find_pii` builds it with `tuple.__new__`, ~3x faster than the
    dataclass (measured 0.48 vs 1.35 us on a loaded machine), which matters on text dense with
    matches (1 MB of short e-mails: 140,000 spans).
    """

    start: int
    end: int
    type: PiiType
    placeholder: str


# A finder returns the validated (start, end) candidates of one type. Lists, not generators: most
# documents have few candidates, and per-call overhead dominates on short texts.
Finder = Callable[[str], list[tuple[int, int]]]

# Card numbers and phone numbers are rejected when "ISBN" occurs this close before them: book
# numbers are the commonest Luhn-valid / phone-shaped digit groups in prose (Wikipedia references).
_CONTEXT_CHARS: Final = 40
_ISBN = re.compile(r"(?i)\bISBN", _A)


# ---------------------------------------------------------------------------------------------
# E-mail
# ---------------------------------------------------------------------------------------------

# E-mails are found from their '@': `_EMAIL_AT` starts with a literal, which `re` finds at memchr
# speed; a lookbehind demands a local-part character before it and the domain is matched right
# after it: a first label, a literal dot, then labels ending in a 2+ letter TLD (RFC 5321 caps:
# label 63, domain 253). The domain's middle run is bounded (186), so its backtracking to find the
# TLD is too; a trailing '.' is sentence punctuation unless more domain follows. The local part is
# then walked back from the '@' over at most 65 characters, never past the previous match or '@'
# (not a local-part character): all walks together touch each character at most once.
_EMAIL_AT = re.compile(
    r"@(?<=[A-Za-z0-9._%+\-]@)"
    r"(?P<domain>[A-Za-z0-9\-]{1,63}+\.[A-Za-z0-9.\-]{0,186}[A-Za-z]{2})"
    r"(?![A-Za-z0-9\-]|\.[A-Za-z0-9])",
    _A,
)
_EMAIL_LOCAL_CHARS: Final = frozenset(string.ascii_letters + string.digits + "._%+-")
_EMAIL_LOCAL_MAX: Final = 64


def _find_emails(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    last_end = 0
    local_chars = _EMAIL_LOCAL_CHARS
    # finditer resumes at the end of each hit, as a search from the '@' + 1 would: a hit is '@'
    # plus domain characters, so no other '@' lies inside it. The loop body is kept lean: on
    # 1 MB of "a@b.cc " it runs 140,000 times.
    for hit in _EMAIL_AT.finditer(text):
        at, end = hit.span()
        start = at
        floor = at - _EMAIL_LOCAL_MAX - 1
        if floor < last_end:
            floor = last_end
        while start > floor and text[start - 1] in local_chars:
            start -= 1
        if "." in text[start:at]:  # most local parts have no dot: skip both checks
            dots = text.rfind("..", start, at)
            if dots >= 0:
                start = dots + 2  # "see...jane@x.org": a run of dots is punctuation, not address
            while start < at and text[start] == ".":
                start += 1  # "...john@x.org": leading dots are punctuation
            if start < at and text[at - 1] == ".":
                continue
        if not 0 < at - start <= _EMAIL_LOCAL_MAX:
            continue
        domain = hit[1]
        if ".." in domain:
            continue  # an empty label ("a@a..bb", 125,000 per MB of it)
        # Fast path: without '-' and within 63 characters, every label is valid.
        if ("-" in domain or len(domain) > 63) and not all(
            len(lb) <= 63 and lb[0] != "-" and lb[-1] != "-" for lb in domain.split(".")
        ):
            continue
        last_end = end
        found.append((start, end))
    return found


# ---------------------------------------------------------------------------------------------
# IP addresses
# ---------------------------------------------------------------------------------------------

# Dotted quad, not glued to a word, another dot-number (versions, OIDs) or a preceding digit.
# The quantifiers are spelled out four times rather than repeating a group (rule 1).
# The lookbehind sits after the first digit so the pattern starts with a character class, which
# `re` scans for at C speed instead of trying every position (4x faster on prose).
_IPV4 = re.compile(
    r"\d(?<![\w.]\d)\d{0,2}+\.\d{1,3}+\.\d{1,3}+\.\d{1,3}+(?!\w|\.\d)",
    _A,
)
# IPv6 text forms (RFC 4291 2.2, RFC 5952) are at most 45 characters of hex, ':' and '.'
# (embedded IPv4). They are found from a ':' followed by hex or ':' (`_IPV6_HINT`, a literal-first
# scan that also takes the run of hex, ":" and "." after it); the start is at most 4 hex digits
# before the colon. The lookahead demands a colon within the first 5 characters so words of hex
# letters ("decade") fail at once; `_is_public` parses.
_IPV6_HINT = re.compile(r":(?=[0-9A-Fa-f:])[0-9A-Fa-f:.]*+", _A)
_HEX_CHARS: Final = frozenset(string.hexdigits)
_IPV6 = re.compile(
    r"(?<![\w:.])(?=[0-9A-Fa-f]{0,4}+:)[0-9A-Fa-f:.]{2,45}+(?![\w:])",
    _A,
)


# Deciding "public" is the costly part of IP matching: `ipaddress.ip_address(s).is_global` takes
# 3-8 us to parse and ~12 us to test an address it has not seen (it walks its list of
# special-purpose networks), so 1 MB of "10.0.0.1 " or "::1 " took 1-4.6 s (issue 17). Both checks
# below give exactly the stdlib's answer, cheaply:
# - IPv4: the octets are parsed here (the regex guarantees 4 groups of 1-3 ASCII digits) and the
#   32-bit integer is looked up in an interval table whose answers come from `ipaddress` itself.
# - IPv6 (and anything else): the stdlib, memoised per candidate string in a bounded dict, since
#   hostile or repetitive text repeats the same few candidates.

# Every special-purpose IPv4 block that a Python 3.11 release lists (IANA IPv4 Special-Purpose
# Address Registry, RFC 6890 and updates; the 192.0.0.0/24 entries changed in a 3.11 patch
# release, CVE-2024-4032), plus multicast. Only their boundaries are taken from here: the answer
# on each interval between consecutive boundaries is asked of `ipaddress` once, at import. A
# stdlib whose networks all start and end on these boundaries is reproduced exactly (tests
# compare on every boundary +-3, on all of 192.0.0.0/24 and on random addresses).
_IPV4_SPECIAL_BLOCKS: Final = (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.0.0/29", "192.0.0.8/32", "192.0.0.9/32", "192.0.0.10/32",
    "192.0.0.170/31", "192.0.0.171/32", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24",
    "192.88.99.0/24", "192.88.99.2/32", "192.168.0.0/16", "192.175.48.0/24", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
)  # fmt: skip


def _stdlib_is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    # is_global excludes RFC 6890 special-purpose ranges (private, loopback, link-local,
    # documentation, CGNAT, ...). Multicast groups identify no host, so they are kept too.
    return ip.is_global and not ip.is_multicast


def _ipv4_intervals() -> tuple[list[int], list[bool]]:
    """(interval starts, whether the addresses of each interval are public), from `ipaddress`."""
    bounds = {0}
    for block in _IPV4_SPECIAL_BLOCKS:
        net = ipaddress.IPv4Network(block)
        bounds.add(int(net.network_address))
        bounds.add(int(net.broadcast_address) + 1)
    starts = sorted(b for b in bounds if b < 2**32)
    return starts, [_stdlib_is_public(ipaddress.IPv4Address(b)) for b in starts]


_IPV4_STARTS, _IPV4_PUBLIC = _ipv4_intervals()
_IP_CACHE_MAX: Final = 4096
_ip_cache: dict[str, bool] = {}


def _is_public_ipv4(octets: list[str]) -> bool:
    """Public per `ipaddress` for four 1-3 digit groups; like the stdlib, refuses leading zeros."""
    value = 0
    for octet in octets:
        if len(octet) > 1 and octet[0] == "0":
            return False  # "01.02.03.04": ipaddress raises (ambiguous octal), so not an address
        n = int(octet)
        if n > 255:
            return False
        value = value << 8 | n
    return _IPV4_PUBLIC[bisect_right(_IPV4_STARTS, value) - 1]


def _is_public(address: str) -> bool:
    """Whether an IPv4 candidate of `_IPV4` or an IPv6 candidate is a public address."""
    known = _ip_cache.get(address)
    if known is not None:
        return known
    if ":" not in address:
        public = _is_public_ipv4(address.split("."))
    else:
        try:
            public = _stdlib_is_public(ipaddress.ip_address(address))
        except ValueError:
            public = False
    if len(_ip_cache) >= _IP_CACHE_MAX:
        _ip_cache.clear()  # bounded memory; the next repeats refill it at once
    _ip_cache[address] = public
    return public


def _find_ips(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    if "." in text:
        found.extend(m.span() for m in _IPV4.finditer(text) if _is_public(m.group()))
    # One C call per run: the hint ':' and the whole run of hex/':'/'.' after it. No address can
    # start inside that run (the lookbehind refuses), so finditer resuming after the run, whatever
    # the outcome, misses none: each run is scanned once.
    for run in _IPV6_HINT.finditer(text):
        colon = start = run.start()
        while start > colon - 4 and start > 0 and text[start - 1] in _HEX_CHARS:
            start -= 1
        m = _IPV6.match(text, start)
        if m is not None:
            stripped = m.group().rstrip(".")  # "... from 2001:4860::8888." ends a sentence
            if stripped.count(":") >= 2 and _is_public(stripped):
                found.append((start, start + len(stripped)))
    # The families interleave and may even overlap (NAT64 "64:ff9b::8.8.8.8" holds a public
    # IPv4 address); `find_pii` resolves that like any other overlap.
    found.sort()
    return found


# ---------------------------------------------------------------------------------------------
# Payment cards
# ---------------------------------------------------------------------------------------------

# A digit, then up to 37 more digits/space/dash (19 digits with 18 separators = 38 characters).
# Not inside a word or decimal/thousands number, and not right after "digit + separator", so an
# attempt starts only at the beginning of a numeric run (rule 3). As in `_IPV4`, the lookbehinds
# follow the first digit so that `re` can skip to digits at C speed.
_CARD = re.compile(r"\d(?<![\w.,+\-/]\d)(?<!\d[ \-]\d)[\d \-]{11,37}+", _A)
_CARD_MAX_CHARS: Final = 38
_DIGIT_GROUPS = re.compile(r"(\d++)", _A)


def luhn_valid(digits: str) -> bool:
    """ISO/IEC 7812-1 Luhn mod-10 check over a string of ASCII digits."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _find_cards(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    n = len(text)
    for m in _CARD.finditer(text):
        value = m.group()
        if len(value) == _CARD_MAX_CHARS and m.end() < n and text[m.end()] in "0123456789 -":
            continue  # the run hit the cap: part of a longer table of numbers
        stripped = value.rstrip(" -")
        end = m.start() + len(stripped)
        if end < n and (text[end].isalnum() or text[end] == "_"):
            continue
        if end + 1 < n and text[end] in ".," and text[end + 1].isdigit():
            continue  # a decimal amount, not a card
        digits = stripped.replace(" ", "").replace("-", "")
        if not 13 <= len(digits) <= 19:
            continue
        seps = {c for c in stripped if not c.isdigit()}
        if len(seps) > 1:
            continue  # mixed separators: columns of numbers, not one card
        if seps:
            # Printed cards group as 4-4-4-4(-3), 4-6-5 (Amex) or 4-6-4 (Diners): the first group
            # has 4 digits and none fewer than 3 (ISBNs "978-1-55164-311-3" have 1-digit groups).
            groups = stripped.split(seps.pop())
            if len(groups[0]) != 4 or any(len(g) < 3 for g in groups):
                continue
        if digits.count(digits[0]) == len(digits):
            continue  # 0000 0000 0000 0000 is Luhn-valid but is padding, not a card
        if len(digits) == 13 and digits[:3] in ("978", "979"):
            continue  # ISBN-13 (EAN "Bookland" prefix)
        if _ISBN.search(text, max(0, m.start() - _CONTEXT_CHARS), m.start()):
            continue
        if luhn_valid(digits):
            found.append((m.start(), end))
    return found


# ---------------------------------------------------------------------------------------------
# US social security numbers
# ---------------------------------------------------------------------------------------------

# AAA-GG-SSSS (or with spaces, the same separator twice). SSA never issues area 000, 666 or
# 900-999, group 00 or serial 0000; the lookarounds exclude them inside the regex.
_SSN = re.compile(
    r"\d(?<![\w\-]\d)(?<!\d[ ]\d)\d\d(?<!000)(?<!666)(?<!9\d\d)"
    r"(?P<sep>[\- ])(?!00)\d{2}(?P=sep)(?!0000)\d{4}"
    r"(?![\w\-]|[ ]\d)",
    _A,
)


def _find_ssns(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _SSN.finditer(text)]


# ---------------------------------------------------------------------------------------------
# IBAN
# ---------------------------------------------------------------------------------------------

# ISO 13616 lengths per country (SWIFT IBAN registry). A candidate must have exactly its
# country's length, which removes most chance matches before the mod-97 check.
IBAN_LENGTHS: Final[dict[str, int]] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
    "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23,
    "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip

# Country + check digits, then either the BBAN glued on (11-30 alphanumerics, possessive) or in
# printed groups of four. The groups are spelled out (rule 1): three required, four optional,
# then an optional short last group; they are bounded, so their backtracking is too.
_IBAN_GROUP = r"[ ][A-Za-z0-9]{4}"
_IBAN = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}"
    r"(?:[A-Za-z0-9]{11,30}+"
    rf"|{_IBAN_GROUP}{_IBAN_GROUP}{_IBAN_GROUP}"
    rf"(?:{_IBAN_GROUP})?(?:{_IBAN_GROUP})?(?:{_IBAN_GROUP})?(?:{_IBAN_GROUP})?"
    r"(?:[ ][A-Za-z0-9]{1,3})?)"
    r"(?![A-Za-z0-9])",
    _A,
)


# Where to try `_IBAN`: two check digits right after two letters that start a word. Digit-first
# (C-speed skip to digits); the match starts 2 characters before the hint.
_IBAN_HINT = re.compile(r"\d(?<=[A-Za-z]{2}\d)(?<![A-Za-z0-9][A-Za-z]{2}\d)\d", _A)


def iban_valid(iban: str) -> bool:
    """ISO 7064 mod-97-10 over an IBAN without spaces: letters count as 10..35."""
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _find_ibans(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    hint = _IBAN_HINT.search(text)
    while hint is not None:
        m = _IBAN.match(text, hint.start() - 2)
        # A failed or rejected candidate cannot hide another start before its end (the next one
        # needs a non-alphanumeric before its letters), so the hint scan resumes after it.
        hint = _IBAN_HINT.search(text, m.end() if m is not None else hint.end())
        if m is None:
            continue
        value = m.group()
        country = value[:2].upper()
        length = IBAN_LENGTHS.get(country)
        if length is None:
            continue
        # Walk the printed form until `length` alphanumerics are collected: a grouped IBAN may be
        # followed by a 4-letter word the group pattern also took ("... 7034 from").
        count = 0
        cut = 0
        for i, ch in enumerate(value):
            if ch != " ":
                count += 1
                if count == length:
                    cut = i + 1
                    break
        if not cut or (cut < len(value) and value[cut] != " "):
            continue  # too short, or the country length ends inside a group
        compact = value[:cut].replace(" ", "")
        if not (compact.isupper() or compact.islower()):
            continue  # "Gb82West..." mixed case: a word, not an identifier
        if iban_valid(compact.upper()):
            found.append((m.start(), m.start() + cut))
    return found


# ---------------------------------------------------------------------------------------------
# Phone numbers
# ---------------------------------------------------------------------------------------------

# Candidate: a '+', '(' (or "(+") or digit, then 5-30 more digits, spaces, dots, dashes,
# parentheses or slashes (possessive, capped), then an optional extension "x123" / "ext. 123" / "extension 12".
# Not inside a word, number, path or time, and not right after "digit + separator" (rule 3;
# lookbehinds after the first character, as in `_IPV4`). Which of these runs are phone numbers is
# decided in `_phone_shape` and, for the weakest shape, by nearby keywords.
_PHONE = re.compile(
    r"(?P<body>[+(\d](?<![\w+.\-/][+(\d])(?<!\d[ ,:][+(\d])(?:(?<=\()\+)?[\d .()\-/]{5,30}+)"
    r"(?P<ext>(?:[xX]|[Ee]xt(?:ension)?\.?[ ]?)\d{1,6}+)?",
    _A,
)
# A phone keyword shortly before (or a line label right after) the number. Only the weakest shape,
# two digit groups ("467 3395"), needs one: without it, house numbers, ZIP codes, ISBN parts and
# ranges look the same. The words are the usual labels of contact details (Presidio's phone
# recognizer uses a similar list), not tuned to any data set. Not "number": it also labels
# document and catalogue numbers ("report number OTS 60-51085" in the Wikipedia sample).
_PHONE_CONTEXT_BEFORE = re.compile(
    r"(?i)\b(?:phone|telephone|tel|mobile|cell|cellphone|fax|call|contact|dial|whatsapp|sms|hotline"
    r"|ring)\b",
    _A,
)
_PHONE_CONTEXT_AFTER = re.compile(r"(?i)[ ]?[(\-]?(?:phone|tel|mobile|cell|fax|office|home|work)\b", _A)
# "(555) 123-4567" opens with an area code; "(555-123-4567)" or "((555) 123-4567)" is a number in
# the sentence's own parentheses, which the span must not take.
_AREA_CODE_PARENS = re.compile(r"\(\+?\d{1,5}\)", _A)
_YEAR_MIN, _YEAR_MAX = 1000, 2099
# The fewest digits `_phone_shape` accepts (national numbers: 7; international: 8). Candidates with
# fewer ("10.0.0.1 " in IPv6-like text, 60,000 per MB) are skipped before its ~10 us of work.
_PHONE_MIN_DIGITS: Final = 7
_NON_DIGITS: Final = str.maketrans("", "", " .()-+/")
# International numbers written with the call prefix instead of '+' (ITU-T E.164 "00", used by
# most countries; "011" from the NANP) need this many digits after "011", so that a national
# number with area code 011 (Johannesburg "011 123 4567", Delhi "011 2345 6789") stays national.
_NANP_EXIT_MIN_DIGITS: Final = 10


def _is_year(group: str) -> bool:
    return len(group) == 4 and _YEAR_MIN <= int(group) <= _YEAR_MAX


def _is_date(a: str, b: str, c: str) -> bool:
    """Y-M-D or D-M-Y / M-D-Y in three consecutive digit groups."""
    if _is_year(a) and len(b) <= 2 and len(c) <= 2:
        return 1 <= int(b) <= 12 and 1 <= int(c) <= 31
    if _is_year(c) and len(a) <= 2 and len(b) <= 2:
        x, y = int(a), int(b)
        return 1 <= x <= 31 and 1 <= y <= 31 and (x <= 12 or y <= 12)
    return False


def _phone_core(s: str) -> tuple[str, bool]:
    """(the number after any international prefix, whether it is international): "+44 20 ...",
    "(+44) 20 ...", "0044 20 ..." and "011 44 20 ..." all give ("44 20 ...", True)."""
    if s.startswith("+"):
        return s[1:], True
    if s.startswith("(+"):
        close = s.find(")")
        if 3 <= close <= 5 and s[2:close].isdigit():
            return s[2:close] + s[close + 1 :], True  # the country code in parentheses
        return s, False
    if s.startswith("00"):
        rest = s[2:].lstrip(" .-")
        if rest[:1].isdigit() and rest[0] != "0":
            return rest, True
    elif (
        s.startswith("011")
        and s[3:4] in (" ", "-", ".")
        and len(s.translate(_NON_DIGITS)) - 3 >= _NANP_EXIT_MIN_DIGITS
    ):
        return s[4:].lstrip(" .-"), True
    return s, False


def _phone_parens(core: str, intl: bool) -> tuple[bool, bool] | None:
    """(has parentheses, has the "(0)" trunk) if `core`'s parentheses are a phone's, else None.

    At most one pair, holding 1-5 digits: a national area code at the start or after a one-digit
    long-distance prefix ("1 (800) ...", Russia's "8 (495) ..."), or after an international
    country code either an area code or the "(0)" trunk prefix.
    """
    if "(" not in core and ")" not in core:
        return False, False
    open_, close = core.find("("), core.find(")")
    if core.count("(") != 1 or core.count(")") != 1 or close < open_:
        return None
    inner = core[open_ + 1 : close]
    if not (1 <= len(inner) <= 5 and inner.isdigit()):
        return None
    head = core[:open_].rstrip(" ")
    if intl:
        if not (1 <= len(head) <= 3 and head.isdigit()):
            return None
        return True, inner == "0"  # "+44 (0)20 ...": the 0 is dialled nationally only
    if head and not (len(head) == 1 and head.isdigit()):
        return None
    return True, False


def _phone_slash(core: str) -> str | None:
    """`core` with its slash made a plain separator, or None if the slash is not a phone's.

    One slash, right after a trunk-prefixed area code of 2-5 digits: the German DIN 5008 form
    "030/1234567" (older but common), Belgian and Austrian "02/123 45 67". Anything else with a
    slash is a date, a fraction or a path.
    """
    slash = core.find("/")
    if core.count("/") != 1 or not (2 <= slash <= 5 and core[0] == "0" and core[:slash].isdigit()):
        return None
    return core.replace("/", " ")


def _phone_shape(body: str) -> tuple[int, bool]:
    """(length of the phone number at the start of candidate `body` or 0, whether it needs context)."""
    if body[0] in "+(" and not (body[1].isdigit() or body[:2] == "(+"):
        return 0, False
    s = body.rstrip(" .-(/")
    if s.count(")") > s.count("(") and s.endswith(")"):
        s = s[:-1].rstrip(" .-(/")  # "(call 555-123-4567)": the ')' closes the sentence's '('
    length = len(s)
    core, intl = _phone_core(s)
    if "/" in core and (intl or (core := _phone_slash(core)) is None):
        return 0, False
    paren_info = _phone_parens(core, intl)
    if paren_info is None:
        return 0, False
    parens, trunk = paren_info

    parts = _DIGIT_GROUPS.split(core)  # [sep, digits, sep, digits, ..., sep]
    groups = parts[1::2]
    # Separators between digit groups, parentheses removed: at most one character each
    # ("555  1234" or "12 - 34" are columns or ranges, not a number).
    seps = parts[2:-1:2]
    if parens:
        seps = [sep.replace("(", "").replace(")", "") for sep in seps]
    if any(len(sep) > 1 for sep in seps):
        return 0, False
    n_digits = sum(map(len, groups)) - (1 if trunk else 0)

    if intl:
        # E.164: at most 15 digits including the country code; country codes never start with 0.
        return (length if 8 <= n_digits <= 15 and core[0] != "0" else 0), False

    if len(groups) == 1 or not 7 <= n_digits <= 13:
        return 0, False  # a bare digit run is an order id, a count, a timestamp ... as often
    if any(len(g) == 1 for g in groups[1:]):
        return 0, False  # ISBNs, lists, scores: phone groups after the first have 2+ digits
    return _national_shape(groups, seps, n_digits, parens, length)


def _national_shape(
    groups: list[str], seps: list[str], n_digits: int, parens: bool, length: int
) -> tuple[int, bool]:
    """The shape rules for a national number (no country code); `_phone_shape`'s result."""
    real_seps = {sep for sep in seps if sep}
    shape = [len(g) for g in groups]
    # Dotted numbers are mostly versions, IPs, decimals and dates; keep the two common dotted
    # phone layouts only: NNN.NNN.NNNN (US) and NN.NN.NN.NN.NN (France).
    if real_seps == {"."} and shape not in ([3, 3, 4], [2, 2, 2, 2, 2]):
        return 0, False
    if shape == [3, 2, 4] and len(real_seps) == 1:
        return 0, False  # the SSN shape is the SSN finder's (an invalid SSN is no phone either)
    if shape[0] == 3 and groups[0] in ("978", "979") and n_digits == 13:
        return 0, False  # ISBN-13
    if all(_is_year(g) for g in groups):
        return 0, False  # "1990-2000", "1914 1918"
    if any(_is_date(*groups[i : i + 3]) for i in range(len(groups) - 2)):
        return 0, False  # "2000-04-16 11", "16.04.2000", "4 12 1999"
    if len(groups) >= 3 and all(n == 3 for n in shape[1:]) and (shape[0] == 1 or groups[-1] == "000"):
        return 0, False  # SI thousands grouping: "4 148 000", "19 082 000"
    # Two groups with neither an area code in parentheses nor a national trunk 0 ("0961-7596216")
    # are the weak shape: accepted only with a phone keyword nearby.
    weak = len(groups) == 2 and not parens and not (groups[0][0] == "0" and len(groups[0]) >= 2)
    return length, weak


def _find_phones(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    n = len(text)
    for m in _PHONE.finditer(text):
        body = m["body"]
        if len(body.translate(_NON_DIGITS)) < _PHONE_MIN_DIGITS:
            continue  # cheap exact pre-check: `_phone_shape` accepts no fewer digits
        start = m.start()
        if body[0] == "(" and not _AREA_CODE_PARENS.match(body):
            body = body[1:]  # "(555-123-4567)": the sentence's parenthesis, not an area code
            start += 1
            if not (body[:1].isdigit() or body[:1] == "+" or _AREA_CODE_PARENS.match(body)):
                continue
        length, weak = _phone_shape(body)
        if not length:
            continue
        end = start + length
        if m["ext"] is not None and end >= m.end("body") - 1:
            end = m.end()  # "555-123-4567x89" / "555-123-4567 ext. 89"
        # Right boundary: not glued to a word ("555-1234abc") or continued as a decimal/time.
        if end < n and (text[end].isalnum() or text[end] == "_"):
            continue
        if end + 1 < n and text[end] in ",:/" and text[end + 1].isdigit():
            continue
        before = max(0, start - _CONTEXT_CHARS)
        if _ISBN.search(text, before, start):
            continue  # "ISBN 0-12-185860-X"
        if weak and not (
            _PHONE_CONTEXT_BEFORE.search(text, before, start)
            or _PHONE_CONTEXT_AFTER.match(text, end, end + 12)
        ):
            continue
        found.append((start, end))
    return found


# ---------------------------------------------------------------------------------------------
# Secrets
# ---------------------------------------------------------------------------------------------

# AWS access key ids: "AKIA" (long-term) or "ASIA" (STS temporary) + 16 upper-case alphanumerics.
_AWS_KEY = re.compile(r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])", _A)
# RFC 6750 bearer credentials: the scheme is case-insensitive; the token is b64token characters.
# Only the token is replaced ("Authorization: Bearer <SECRET>" stays readable). 16+ characters
# and, checked below, a digit and a letter: "bearer of this letter" is prose, not a credential.
_BEARER = re.compile(
    r"[Bb](?<![A-Za-z0-9._~+/=\-][Bb])(?i:earer)[ \t]{1,8}+(?P<token>[A-Za-z0-9._~+/=\-]{16,8192}+)",
    _A,
)
# RFC 7468 labels: "PRIVATE KEY", "RSA PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "OPENSSH PRIVATE
# KEY", "PGP PRIVATE KEY BLOCK" ... The label repeat is bounded (40), so it backtracks at most 40
# steps per literal "-----BEGIN " occurrence.
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", _A)
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", _A)
# Base64 lines of a block whose END marker is missing (truncated page): replace what is there,
# up to the first blank line and without a last line that prose cut short ("\nNext paragraph").
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\r\n]{0,65536}+", _A)
PEM_MAX_CHARS: Final = 65536
"""A BEGIN marker pairs with the next END marker at most this far away (16k-bit RSA: ~13k chars)."""


def _find_pem_blocks(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    if "PRIVATE KEY" not in text:
        return found
    next_end: re.Match[str] | None = None
    end_searched_from = -1
    covered = 0
    for begin in _PEM_BEGIN.finditer(text):
        if begin.start() < covered:
            continue  # inside the previous block
        # Memoised END search: recompute only once we are past the END found last time, so N
        # BEGIN markers without an END cost one scan of the text, not N (quadratic) scans.
        if end_searched_from < 0 or (next_end is not None and next_end.start() < begin.end()):
            next_end = _PEM_END.search(text, begin.end())
            end_searched_from = begin.end()
        if next_end is not None and next_end.start() - begin.end() <= PEM_MAX_CHARS:
            covered = next_end.end()
        else:
            body = _PEM_BODY.match(text, begin.end()).group()  # always matches (min 0)
            blanks = [i for i in (body.find("\n\n"), body.find("\n\r\n")) if i >= 0]
            if blanks:
                body = body[: min(blanks)]
            elif begin.end() + len(body) < len(text) and not body.endswith("\n"):
                body = body[: body.rfind("\n") + 1]  # the run stopped inside a non-base64 line
            covered = begin.end() + len(body.rstrip())
        found.append((begin.start(), covered))
    return found


def _find_secrets(text: str) -> list[tuple[int, int]]:
    found = _find_pem_blocks(text)
    if "AKIA" in text or "ASIA" in text:
        found.extend(m.span() for m in _AWS_KEY.finditer(text))
    for m in _BEARER.finditer(text):
        token = m["token"].rstrip(".")  # "... Bearer abc123def456ghi789." ends a sentence
        if len(token) >= 16 and any(c.isdigit() for c in token) and any(c.isalpha() for c in token):
            found.append((m.start("token"), m.start("token") + len(token)))
    # Secrets of different kinds may overlap (a bearer token pasted inside a PEM block); the
    # generic resolution in `scrub` keeps the outermost, leftmost one.
    found.sort()
    return found


_FINDERS: Final[dict[PiiType, Finder]] = {
    "secret": _find_secrets,
    "card": _find_cards,
    "iban": _find_ibans,
    "ssn": _find_ssns,
    "email": _find_emails,
    "ip": _find_ips,
    "phone": _find_phones,
    "address": find_addresses,
}
# Every compiled pattern, for the structural linear-time test.
PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    "email_at": _EMAIL_AT,
    "ipv4": _IPV4,
    "ipv6_hint": _IPV6_HINT,
    "ipv6": _IPV6,
    "card": _CARD,
    "ssn": _SSN,
    "iban_hint": _IBAN_HINT,
    "iban": _IBAN,
    "phone": _PHONE,
    "area_code_parens": _AREA_CODE_PARENS,
    "aws_key": _AWS_KEY,
    "bearer": _BEARER,
    "pem_begin": _PEM_BEGIN,
    "pem_end": _PEM_END,
    "pem_body": _PEM_BODY,
    "digit_groups": _DIGIT_GROUPS,
    "phone_context_before": _PHONE_CONTEXT_BEFORE,
    "phone_context_after": _PHONE_CONTEXT_AFTER,
    "isbn": _ISBN,
    **ADDRESS_PATTERNS,
}

_DEFAULT_CONFIG: Final = PiiConfig()


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------


def find_pii(text: str, config: PiiConfig | None = None) -> list[PiiSpan]:
    """The non-overlapping PII spans of `text` for the enabled types, sorted by start."""
    config = config or _DEFAULT_CONFIG
    candidates: list[tuple[int, int, int, PiiType]] = []
    for pii_type in config.enabled:
        rank = _PRIORITY[pii_type]
        candidates += [(start, start - end, rank, pii_type) for start, end in _FINDERS[pii_type](text)]
    # Leftmost wins; at the same start the longest; at the same extent the higher-priority type.
    # One sort and one sweep: O(k log k) for k candidates, deterministic. The loop is lean (one
    # placeholder lookup per type, not per span): dense text has 100,000+ candidates per MB.
    candidates.sort()
    placeholders = {t: config.placeholder(t) for t in config.enabled}
    last_end = 0
    spans: list[PiiSpan] = []
    append = spans.append
    for start, neg_len, _, pii_type in candidates:
        if start >= last_end:
            last_end = start - neg_len
            # tuple.__new__ is PiiSpan(...) without the Python-level __new__ frame (2-3x faster)
            append(_new_tuple(PiiSpan, (start, last_end, pii_type, placeholders[pii_type])))
    return spans


def scrub(text: str, config: PiiConfig | None = None) -> tuple[str, list[PiiSpan]]:
    """Replace the PII in `text`; return the new text and the spans (offsets into `text`)."""
    spans = find_pii(text, config)
    if not spans:
        return text, spans
    # Same result as applying the replacements right to left (each keeps the offsets to its left
    # valid), built in one O(n) join instead of one O(n) string copy per replacement.
    pieces: list[str] = []
    pos = 0
    for span in spans:
        pieces.append(text[pos : span.start])
        pieces.append(span.placeholder)
        pos = span.end
    pieces.append(text[pos:])
    return "".join(pieces), spans


class PiiScrubber:
    """Per-document stage: `scrubber(text) -> (scrubbed_text, {type: count})`.

    Counts cover every enabled type (zeros included) so that rows aggregate into a fixed schema.
    Holds only the frozen config, so it pickles into Spark tasks; patterns are module globals,
    compiled once per executor process. Typical use inside a partition function:

        scrubber = PiiScrubber(PiiConfig(enabled=("email", "ip")))
        rdd.mapPartitions(lambda rows: (scrubber(row.text) for row in rows))
    """

    __slots__ = ("config",)

    def __init__(self, config: PiiConfig | None = None) -> None:
        self.config = config or _DEFAULT_CONFIG

    def __call__(self, text: str) -> tuple[str, dict[str, int]]:
        scrubbed, spans = scrub(text, self.config)
        counts = dict.fromkeys(self.config.enabled, 0)
        for span in spans:
            counts[span.type] += 1
        return scrubbed, counts

    def __repr__(self) -> str:
        return f"PiiScrubber({self.config!r})"


PII_TIME_BUDGET_S: Final = 30.0
"""Default seconds per document for the PII stage. Scrubbing is linear, measured under 1 s per MB
on adversarial text (bench/curation/pii_speed.py), and `extract` reads records of at most 10 MiB
(reader.max_record_bytes), so a legitimate document needs well under this even on a loaded
machine; one over it means a case the bench does not cover, and is dropped and counted."""


class PiiStage(DocumentStage):
    """The `pii` funnel row of `extract`: scrubs kept documents, fills `pii_counts`, counts per type.

    Never drops for what it finds; a document whose scrubbing raises is dropped (`pii_error`), and
    so is one whose scrubbing takes over `time_budget_s` (`pii_time_budget`, enforced by
    `core.stage.run_stages`): it is never written unscrubbed, and its text is not shown in the
    rejected sample either.
    """

    name = "pii"
    snippet_on_error = False

    def __init__(
        self, config: PiiConfig | None = None, time_budget_s: float | None = PII_TIME_BUDGET_S
    ) -> None:
        self.scrubber = PiiScrubber(config)
        self.time_budget_s = time_budget_s

    def process(self, doc: Document) -> Document | Drop:
        scrubbed, counts = self.scrubber(doc.text or "")
        # fields of types not scanned stay null
        doc.metadata["pii_counts"] = {t: counts.get(t) for t in PII_COUNT_FIELDS}
        found = 0
        for t, n in counts.items():
            if n:
                self.count(f"pii_{t}", n)
                self.count(f"pii_docs_{t}")
                found += n
        if found:
            self.count("pii_docs")
        doc.text = scrubbed
        return doc
