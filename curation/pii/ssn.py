"""US social security numbers for the PII scrubber (curation/pii/scrub.py).

AAA-GG-SSSS with one separator (dash or space) used twice, minus what the SSA never issues:
area 000, 666 and 900-999, group 00, serial 0000 (excluded inside the regex by lookarounds).
"""

from __future__ import annotations

import re
from typing import Final

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
    return [m.span() for m in _SSN.finditer(text)]


PATTERNS: Final[dict[str, re.Pattern[str]]] = {"ssn": _SSN}
