"""Where an ASCII-digit match may begin and end in text of any script (card, phone, ip, ssn, iban).

The detectors' patterns are ASCII (`re.ASCII`): cards, phones, IPs, SSNs and IBANs are written in
ASCII digits in practice, and their checks (Luhn, mod-97, `ipaddress`, the phone shape rules) are
defined on them. Around a match the text may be in any script, and the neighbouring character decides:
- an ASCII letter, digit or '_' glues the match into a token (an id, a word): not reported;
- a decimal digit of any other script (Arabic-Indic '٣', Persian '۳', Devanagari '३', fullwidth '３')
  continues the number in that script: the ASCII digits are not the whole number, so not reported
  ("٥536-22-8726" was scrubbed to "٥<SSN>");
- any other letter (Han, kana, Thai, Arabic, Cyrillic ...) does not: scripts written without spaces put
  words right against numbers ("電話03-1234-5678まで", "卡号4111111111111111谢谢", Thai "โทร.0...").
  Before this module, a phone or card followed by such a letter was missed (`str.isalnum` is true for
  them), while the same number preceded by one was found.
Numbers written wholly in another script's digits are never matched at all (the patterns are ASCII):
see docs/extract.md, "PII in other scripts".
"""

from __future__ import annotations

import string
from typing import Final

_ASCII_WORD: Final = frozenset(string.ascii_letters + string.digits + "_")


def digit_before(text: str, start: int) -> bool:
    """Whether a decimal digit of any script is right before `start` (the patterns' ASCII
    lookbehinds already refuse ASCII letters and digits there)."""
    return start > 0 and text[start - 1].isdecimal()


def glued_after(text: str, end: int) -> bool:
    """Whether the character at `end` glues a match into a longer token: an ASCII letter, digit or
    '_', or a decimal digit of any script. `str.isdecimal`, not `isdigit`: a footnote's superscript
    ("8.8.8.8²") does not continue a number."""
    if end >= len(text):
        return False
    ch = text[end]
    return ch in _ASCII_WORD or ch.isdecimal()
