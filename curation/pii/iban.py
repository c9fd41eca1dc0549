"""IBANs for the PII scrubber (curation/pii/scrub.py), confirmed by their check digits.

An ISO 13616 country code, exactly that country's length (SWIFT IBAN registry), glued or printed in
groups of four, one case throughout, and the ISO 7064 mod-97-10 check. Candidates are tried only
where two digits follow two letters that start a word (`_IBAN_HINT`), so the scan skips prose at C speed.
"""

from __future__ import annotations

import re
from typing import Final

from curation.pii.boundary import glued_after

# ASCII patterns: `\d` must not match Arabic-Indic or full-width digits that no check here
# understands, and `\w` means [A-Za-z0-9_] (curation/pii/scrub.py).
_A = re.ASCII

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


def find_ibans(text: str) -> list[tuple[int, int]]:
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
        if glued_after(text, m.start() + cut):
            continue  # "...7654 32٣": digits of another script continue it (boundary.py)
        if iban_valid(compact.upper()):
            found.append((m.start(), m.start() + cut))
    return found


PATTERNS: Final[dict[str, re.Pattern[str]]] = {"iban_hint": _IBAN_HINT, "iban": _IBAN}
