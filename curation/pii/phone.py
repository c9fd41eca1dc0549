"""Phone numbers for the PII scrubber (curation/pii/scrub.py): E.164 and national layouts, by shape.

International: "+", "00" or the NANP's "011" before the country code, at most 15 digits (E.164).
National: the layouts of ITU-T E.123 and the national plans (area code in parentheses, after a
one-digit prefix "1 (800)" / "8 (495)", DIN 5008 "030/1234567"). Shape rules drop what only looks
like a number: dates, year ranges, ZIP+4, SSN shapes (ssn.py's), version and IP-like dotted numbers,
SI thousands groups, bare digit runs (order ids), and numbers with "ISBN" just before (isbn.py). The
weakest shape, two digit groups, needs a phone keyword nearby.
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

# Splits a candidate into [separator, digits, separator, digits, ..., separator].
_DIGIT_GROUPS = re.compile(r"(\d++)", _A)
# Candidate: a '+', '(' (or "(+") or digit, then 5-30 more digits, spaces, dots, dashes,
# parentheses or slashes (possessive, capped), then an optional extension "x123" / "ext. 123" / "extension 12".
# Not inside a word, number, path or time, and not right after "digit + separator" (rule 3;
# lookbehinds after the first character, as in ip.py's `_IPV4`). Which of these runs are phone numbers is
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
# Thai dates count years in the Buddhist Era (CE + 543: 2558 is 2015), in ASCII digits as often as
# Thai ones: "2558 15-01-59" in the Leipzig Thai sentences is a year then a date, not a phone.
_BE_YEAR_MIN, _BE_YEAR_MAX = 2400, 2699
# No national plan has an area code (the first group of a national number) this long (ITU-T E.164
# national destination codes; with the trunk 0): "โทร 0875975877 25 มี.ค." is a bare mobile number
# then the day of a date, which the group rules would otherwise join into one number.
_AREA_CODE_MAX_DIGITS: Final = 6
# DIN 5008 "030/1234567", Vienna "01/1234567", Belgium "050/12 34 56": the subscriber number after
# the slash has 5+ digits; "ศธ 04002/1257" (a Thai ministry's document number) has 4.
_SLASH_SUBSCRIBER_MIN_DIGITS: Final = 5
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


def _is_time(hours: str, minutes: str) -> bool:
    """H.MM / HH.MM, how German, Thai and many other texts write the time of day."""
    return len(hours) <= 2 and int(hours) <= 24 and len(minutes) == 2 and int(minutes) <= 59


def _ends_in_range(groups: list[str], seps: list[str]) -> bool:
    """Space-separated numbers, then two 2-digit numbers joined by a dash, the second larger: a range
    ("65-68") after columns of numbers (a Chinese odds table in the 2020-34 sample). Phone layouts that
    end "NN-NN" put a dash before them too (Russia's "123-45-67"), and so stay phones."""
    if len(groups) < 3 or seps[-1] != "-" or seps[-2] != " ":
        return False
    low, high = groups[-2], groups[-1]
    return len(low) == len(high) == 2 and int(low) < int(high)


def _is_year_then_date(groups: list[str], seps: list[str]) -> bool:
    """A year (CE or Buddhist Era), a space, then a D-M-YY or M-D-YY date with one separator."""
    if len(groups) != 4 or seps[0] != " " or seps[1] != seps[2] or seps[1] not in ("-", "/", "."):
        return False
    year = int(groups[0]) if len(groups[0]) == 4 else 0
    if not (_YEAR_MIN <= year <= _YEAR_MAX or _BE_YEAR_MIN <= year <= _BE_YEAR_MAX):
        return False
    if any(len(g) != 2 for g in groups[1:]):
        return False
    x, y = int(groups[1]), int(groups[2])
    return 1 <= x <= 31 and 1 <= y <= 31 and (x <= 12 or y <= 12)


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
    if len(core[slash + 1 :].translate(_NON_DIGITS)) < _SLASH_SUBSCRIBER_MIN_DIGITS:
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
    if len(real_seps) > 1 and any(
        sep == "." and _is_time(groups[i], groups[i + 1]) for i, sep in enumerate(seps)
    ):
        return 0, False  # a time among other separators: "13.00-16.00", "Mo-Fr 8.30-12.30", "2008 01.51"
    if _ends_in_range(groups, seps):
        return 0, False  # "300 215 65-68", "赚105 50-52": columns of a table ending in a range
    if shape[0] > _AREA_CODE_MAX_DIGITS:
        return 0, False  # a bare digit run with more numbers after it, see _AREA_CODE_MAX_DIGITS
    if shape == [3, 2, 4] and len(real_seps) == 1:
        return 0, False  # the SSN shape is the SSN finder's (an invalid SSN is no phone either)
    if shape[0] == 3 and groups[0] in ("978", "979") and n_digits == 13:
        return 0, False  # ISBN-13
    if all(_is_year(g) for g in groups):
        return 0, False  # "1990-2000", "1914 1918"
    if any(_is_date(*groups[i : i + 3]) for i in range(len(groups) - 2)):
        return 0, False  # "2000-04-16 11", "16.04.2000", "4 12 1999"
    if _is_year_then_date(groups, seps):
        return 0, False  # Thai "2558 15-01-59": a Buddhist-Era year, then D-M-YY
    if len(groups) >= 3 and all(n == 3 for n in shape[1:]) and (shape[0] == 1 or groups[-1] == "000"):
        return 0, False  # SI thousands grouping: "4 148 000", "19 082 000"
    # Two groups with neither an area code in parentheses nor a national trunk 0 ("0961-7596216")
    # are the weak shape: accepted only with a phone keyword nearby.
    weak = len(groups) == 2 and not parens and not (groups[0][0] == "0" and len(groups[0]) >= 2)
    return length, weak


def find_phones(text: str) -> list[tuple[int, int]]:
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
        # Right boundary: not glued to a word ("555-1234abc") or continued as a decimal/time. A Han,
        # kana, Thai or Arabic letter is not glue ("電話03-1234-5678まで"); other scripts' digits are
        # (boundary.py).
        if glued_after(text, end) or digit_before(text, start):
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


PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    "phone": _PHONE,
    "area_code_parens": _AREA_CODE_PARENS,
    "digit_groups": _DIGIT_GROUPS,
    "phone_context_before": _PHONE_CONTEXT_BEFORE,
    "phone_context_after": _PHONE_CONTEXT_AFTER,
}
