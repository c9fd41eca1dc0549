"""The ISBN context rule that card and phone detection share (curation/pii/card.py, phone.py).

Book numbers are the commonest Luhn-valid and phone-shaped digit groups in prose (Wikipedia
references cite "ISBN 0-12-185860-X"), so a card or phone candidate with "ISBN" at most
`CONTEXT_CHARS` characters before it is not reported.
"""

from __future__ import annotations

import re
from typing import Final

CONTEXT_CHARS: Final = 40
"""How far before a card or phone candidate "ISBN" (and a phone keyword, phone.py) is looked for."""
ISBN: Final = re.compile(r"(?i)\bISBN", re.ASCII)

PATTERNS: Final[dict[str, re.Pattern[str]]] = {"isbn": ISBN}
