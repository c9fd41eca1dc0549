"""E-mail addresses for the PII scrubber (curation/pii/scrub.py), found from their '@' in linear time.

Accepted: RFC 5321 length limits (local part <= 64, domain <= 253, labels <= 63), a dotted domain
ending in an alphabetic TLD of 2+ letters, no empty label, no label that starts or ends with '-'.
Dots that are punctuation around the address ("see...jane@x.org", "...john@x.org") are not part of it.
"""

from __future__ import annotations

import re
import string
from typing import Final

# ASCII patterns: `\d` must not match Arabic-Indic or full-width digits that no check here
# understands, and `\w` means [A-Za-z0-9_] (curation/pii/scrub.py).
_A = re.ASCII

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


def find_emails(text: str) -> list[tuple[int, int]]:
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


PATTERNS: Final[dict[str, re.Pattern[str]]] = {"email_at": _EMAIL_AT}
