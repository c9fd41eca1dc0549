"""Payment card numbers for the PII scrubber (curation/pii/scrub.py), confirmed by their Luhn check.

13-19 digits, glued or in the printed groups (4-4-4-4(-3), Amex 4-6-5, Diners 4-6-4) with one kind
of separator, passing the ISO/IEC 7812-1 Luhn mod-10 check. Not reported: runs of one digit
(Luhn-valid padding), ISBN-13s (978/979 prefix) and numbers with "ISBN" just before (isbn.py),
decimal amounts, and runs that hit the length cap (tables of numbers).
"""

from __future__ import annotations

import re
from typing import Final

from curation.pii.boundary import digit_before, glued_after
from curation.pii.isbn import CONTEXT_CHARS as _CONTEXT_CHARS
from curation.pii.isbn import ISBN as _ISBN

# ASCII patterns: `\d` must not match Arabic-Indic or full-width digits that no check here
# understands, and `\w` means [A-Za-z0-9_] (curation/pii/scrub.py).
_A = re.ASCII

# A digit, then up to 37 more digits/space/dash (19 digits with 18 separators = 38 characters).
# Not inside a word or decimal/thousands number, and not right after "digit + separator", so an
# attempt starts only at the beginning of a numeric run (rule 3). As in ip.py's `_IPV4`, the lookbehinds
# follow the first digit so that `re` can skip to digits at C speed.
_CARD = re.compile(r"\d(?<![\w.,+\-/]\d)(?<!\d[ \-]\d)[\d \-]{11,37}+", _A)
_CARD_MAX_CHARS: Final = 38


def luhn_valid(digits: str) -> bool:
    """ISO/IEC 7812-1 Luhn mod-10 check over a string of ASCII digits."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def find_cards(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    n = len(text)
    for m in _CARD.finditer(text):
        value = m.group()
        if len(value) == _CARD_MAX_CHARS and m.end() < n and text[m.end()] in "0123456789 -":
            continue  # the run hit the cap: part of a longer table of numbers
        stripped = value.rstrip(" -")
        end = m.start() + len(stripped)
        # Glued to an ASCII word or to digits of another script: not a card. A Han or Thai letter
        # right after is not glue ("卡号4111111111111111谢谢"), see boundary.py.
        if glued_after(text, end) or digit_before(text, m.start()):
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


PATTERNS: Final[dict[str, re.Pattern[str]]] = {"card": _CARD}
