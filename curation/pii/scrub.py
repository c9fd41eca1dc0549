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
check its issuer defines, so that random digit strings are left alone. One module per detector,
each with its own patterns (`PATTERNS`) and finder, holds the details:
- payment cards (card.py): Luhn mod-10 check (ISO/IEC 7812-1), 13-19 digits;
- IBAN (iban.py): ISO 13616 country code + per-country length + ISO 7064 mod-97-10 check digits;
- SSN (ssn.py): the ranges the SSA never issues (area 000, 666, 900-999; group 00; serial 0000);
- IP (ip.py): only `ipaddress` `is_global`, non-multicast addresses (RFC 6890 special-purpose ranges,
  i.e. private, loopback, link-local, documentation, CGNAT ... are not personal data);
- e-mail (email.py): RFC 5321 length limits (local part <= 64, domain <= 253), dotted domain, alphabetic TLD;
- phone (phone.py): E.164 (at most 15 digits; "+", "00" or the NANP's "011" before the country code) plus
  shape rules that drop dates, year ranges, ZIP+4, SSN shapes, version/IP-like dotted numbers
  and bare digit runs (order ids); the national layouts of ITU-T E.123 and the national plans
  (area code in parentheses, after a one-digit prefix "1 (800)" / "8 (495)", DIN 5008 "030/1234567");
- secrets (secret.py): PEM private key blocks (RFC 7468 labels), bearer tokens (RFC 6750 b64token syntax;
  only the token is replaced), AWS access key ids (IAM user guide: "AKIA" long-term, "ASIA"
  temporary, 20 characters).
- address (address.py): the grammar of USPS Pub 28, Royal Mail and Canada Post addresses (house number,
  street name, street type from their lists, units, city/state/ZIP or postcode), and street
  lines written number-last as most of Europe does (address_eu.py), see the modules.
Cards and phones share the ISBN context rule (isbn.py); the ASCII-digit detectors share where a match
may begin and end next to text of other scripts (boundary.py, docs/extract.md "PII in other scripts"). This module owns what is common to all:
the configuration, the overlap resolution, the stage, and `PATTERNS`, every detector's together.
Names and other free-text PII need NER, not regexes, and are out of scope.

Linear time. Python's `re` is a backtracking engine, so a careless pattern is quadratic (a run
re-scanned from every start position) or exponential (nested quantifiers) on hostile input; see
Russ Cox, "Regular Expression Matching Can Be Simple And Fast" (2007) and OWASP's ReDoS page.
Every pattern of every detector obeys three rules; `tests/curation/test_pii.py` checks rules 1-2 on the parsed
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

import ipaddress  # noqa: F401  (tests patch ipaddress.ip_address through `scrub.ipaddress`)
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Final, Literal, NamedTuple, get_args

from core.errors import ConfigError
from core.stage import Document, DocumentStage, Drop
from curation.pii import address, card, email, iban, ip, isbn, phone, secret, ssn
from curation.pii.card import luhn_valid
from curation.pii.iban import IBAN_LENGTHS, iban_valid
from curation.schema import PII_COUNT_FIELDS

__all__ = [
    "IBAN_LENGTHS",
    "PATTERNS",
    "PII_TIME_BUDGET_S",
    "PII_TYPES",
    "PiiConfig",
    "PiiPlaceholders",
    "PiiScrubber",
    "PiiSpan",
    "PiiStage",
    "PiiType",
    "find_pii",
    "iban_valid",
    "luhn_valid",
    "scrub",
]

PiiType = Literal["secret", "card", "iban", "ssn", "email", "ip", "phone", "address"]
# Order matters: it is the tie-break priority when two types claim exactly the same characters.
PII_TYPES: Final[tuple[PiiType, ...]] = get_args(PiiType)
_PRIORITY: Final[dict[str, int]] = {t: i for i, t in enumerate(PII_TYPES)}


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


_FINDERS: Final[dict[PiiType, Finder]] = {
    "secret": secret.find_secrets,
    "card": card.find_cards,
    "iban": iban.find_ibans,
    "ssn": ssn.find_ssns,
    "email": email.find_emails,
    "ip": ip.find_ips,
    "phone": phone.find_phones,
    "address": address.find_addresses,
}
# Every compiled pattern of the detectors, for the structural linear-time test (each module lists
# its own; tests/curation/test_pii_modules.py checks that none is missing).
PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    **email.PATTERNS,
    **ip.PATTERNS,
    **card.PATTERNS,
    **ssn.PATTERNS,
    **iban.PATTERNS,
    **phone.PATTERNS,
    **secret.PATTERNS,
    **isbn.PATTERNS,
    **address.PATTERNS,
}

# Detector internals that tests reach as `scrub._...` since the detectors lived in this module: the
# same objects (clearing `_ip_cache` here clears the IP finder's memo).
_IPV4_STARTS = ip._IPV4_STARTS
_is_public_ipv4 = ip._is_public_ipv4
_ip_cache = ip._ip_cache
_PHONE_MIN_DIGITS = phone._PHONE_MIN_DIGITS
_phone_shape = phone._phone_shape

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
