"""US social security numbers for the PII scrubber (curation/pii/scrub.py).

AAA-GG-SSSS with one separator (dash or space) used twice, minus what the SSA never issues:
area 000, 666 and 900-999, group 00, serial 0000 (excluded inside the regex by lookarounds).
"""

from __future__ import annotations

import re
from typing import Final

from curation.pii.boundary import digit_before, glued_after

# ASCII patterns: `\d` must not match Arabic-Indic or full-width digits that no check here
# understands, and `\w` means [A-Za-z0-9_] (curation/pii/scrub.py).
_A = re.ASCII

# AAA-GG-SSSS (or with spaces, the same separator twice). SSA never issues area 000, 666 or
# 900-999, group 00 or serial 0000; the lookarounds exclude them inside the regex.
_SSN = re.compile(
    r"\d(?<![\w\-]\d)(?<!\d[ ]\d)\d\d(?<!000)(?<!666)(?<!9\d\d)"
    r"(?P<sep>[\- ])(?!00)\d{2}(?P=sep)(?!0000)\d{4}"
    r"(?![\w\-]|[ ]\d)",
    _A,
)


def find_ssns(text: str) -> list[tuple[int, int]]:
    # The pattern's ASCII lookarounds cannot see digits of other scripts ("٥536-22-8726"): boundary.py.
    return [
        m.span()
        for m in _SSN.finditer(text)
        if not (digit_before(text, m.start()) or glued_after(text, m.end()))
    ]


PATTERNS: Final[dict[str, re.Pattern[str]]] = {"ssn": _SSN}
