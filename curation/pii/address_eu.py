"""Street lines written number-last (continental Europe, Latin America), for curation/pii/address.py.

What: `find_lines(text)` returns candidate street lines `(start, end, needs_more)` in the order
most of Europe and Latin America write them, the house number LAST; curation/pii/address.py then
extends each over its units and locality and accepts it as it accepts US/UK/Canadian lines (a
line with `needs_more` only when a unit or a postal code vouches for it). Three forms, each
anchored on a street-type word, since a capitalised word and a number alone ("Chapter 3",
"Windows 10", "Ajax 2") are no address (a fourth, without a type, is described below):
- compound: one word ending in a street type, as Germanic and Finnic languages write them
  (`Lindenstraße 12`, `Keizersgracht 123`, `Nørregade 10`, `Drottninggatan 53`,
  `Mannerheimintie 10`, `Hafnarstræti 5`), `_COMPOUND_SUFFIXES`;
- type after the name, as a separate word (`Berliner Straße 5`, `Karl Johans gate 22`,
  `Andrássy út 22.`, `Kossuth Lajos u. 3.`, `Pärnu mnt 10`), `_TYPES_AFTER`, with 1-3 name words;
- type before the name (`Via Garibaldi 12`, `Calle de Alcalá, 45`, `Rua Augusta 100`,
  `ul. Marszałkowska 10/4`, `Rue de la Loi 16`, `Λεωφόρος Συγγρού 119`), `_TYPES_BEFORE`, with 1-4
  name words (capitalised, or connectors such as "de la", "dei", "do").
A house number is 1-5 digits with an optional letter ("12a"), range ("3-5"), Polish/Czech
building/flat ("24/4") or the Hungarian ordinal period ("19."), not followed by more of a
number ("3.5", "12:30", "12.03.2020").

Precision, as in curation/pii/address.py: a line is strong (accepted alone) when its name is
capitalised and its type unambiguous. It needs a unit or a postal code after it when the text is
lower case ("hersnapvej 18", also the case of much hand-typed text), when the type word is also an
English word or word ending (`_WEAK`: "gate", "ring" as in "Spring 2020", "gade" as in
"Brigade 2", lower-case "via" as in "via Frankfurt 2", "Largo", "Plaza"; a Romance connector
after the type lifts it: "Plaza de Cervantes 2"), or when the line is a name and number with no
type at all ("Národní 12", "Allika 46": one or two capitalised words and a number), accepted only
when a unit or a postal code follows (a postal code that reads as a year does not count: "Windows
10, 2020 Edition"), or right after words that announce an address ("address:", "lives at",
"resides at"); never when the name is a month ("March 3, 2014"), a unit word ("Apt 1") or a code
of capitals ("APO AE 12345"), or the number a year (unless a unit follows).

`is_street_type` also serves pii_address's intersections ("the corner of Oak Street and
Hauptstraße").

Linear time, under the rules of curation/pii/scrub.py (no repeated groups, possessive unbounded
repeats, attempts only where a token starts). The compound and type-after forms are anchored on
the house number (digits are far rarer than word starts): a letter and a space before its first
digit, then the word's end tested against fixed-width lookbehinds, one per type length, each a
trie; the word and the name words before a type are read in Python from at most 60 characters
before it. The type-before form is anchored on the type word (a trie) and reads 1-4 name words
through nested lazy optional groups, as pii_address's `_STREET` does. The typeless form starts at
a capital; its lookahead (a postal code, a unit, or a town then a postal-like run of digits
within 40 characters) lets few candidates reach Python. The cues start with literals.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Final

# Street types written as the end of one word (lower case), by language. Ambiguous ones (also the
# end of English words) are in `_WEAK` below.
_COMPOUND_SUFFIXES: Final = (
    # German (Deutsche Post, Swiss and Austrian usage)
    "straße", "strasse", "str.", "weg", "gasse", "platz", "allee", "ring", "damm", "ufer", "steig",
    "graben", "chaussee", "pfad", "gässli", "gäßchen",
    # Dutch and Frisian (PostNL, bpost)
    "straat", "laan", "plein", "gracht", "kade", "singel", "dijk", "dreef", "steeg", "pad",
    # Danish, Swedish, Norwegian, Icelandic
    "gade", "vej", "vænget", "stræde", "allé", "plads", "torv", "gatan", "vägen", "väg", "gränd",
    "torget", "stigen", "backen", "gata", "gate", "veien", "vegen", "vei", "veg", "stien",
    "bakken", "plassen", "stræti", "straeti", "braut", "vegur", "stígur",
    # Finnish, Estonian
    "katu", "tie", "kuja", "polku", "tori", "kaari", "raitti", "väylä", "rinne", "tänav",
)  # fmt: skip
# Street types written as a word of their own after the name (lower case; matched in lower case
# and capitalised).
_TYPES_AFTER: Final = (
    "straße", "strasse", "str.", "weg", "platz", "allee", "gasse", "ufer", "damm", "chaussee",
    "straat", "laan", "plein", "kade", "gracht", "gate", "gata", "gatan", "vei", "veien", "vej",
    "gade", "allé", "plads", "vägen", "väg", "torg", "torget", "terrasse",
    "utca", "u.", "út", "útja", "tér", "körút", "krt.", "rakpart", "rkp.", "köz", "sor", "fasor",
    "sétány", "tänav", "mnt", "mnt.", "pst", "pst.", "maantee", "puiestee", "tee", "põik", "iela",
    "gatvė", "g.", "ulica", "sokak", "sok.", "cadde", "cad.", "caddesi", "sokağı",
)  # fmt: skip
# Street types written before the name (matched in lower case and capitalised).
_TYPES_BEFORE: Final = (
    "via", "viale", "piazza", "piazzale", "piazzetta", "corso", "vicolo", "largo", "strada",
    "calle", "c/", "avenida", "avda.", "av.", "paseo", "plaza", "camino", "carrera", "carretera",
    "ronda", "travesía", "rambla", "glorieta", "rua", "rúa", "travessa", "praça", "estrada",
    "alameda", "rue", "avenue", "boulevard", "bd", "place", "chemin", "allée", "impasse", "quai",
    "chaussée", "ul.", "ulica", "al.", "aleja", "pl.", "plac", "os.", "osiedle", "náměstí", "nám.",
    "třída", "trg", "bulevardul", "calea", "str.", "strada", "οδός", "λεωφόρος", "λ.", "πλατεία",
)  # fmt: skip
# Also English words or word ends: such a line needs a unit or postal code ("via Frankfurt 2",
# "Brigade 2", "golf tee 3", "Spring 2020", "Largo 3", "Plaza Hotel 5", "Gate 14").
_WEAK: Final = frozenset(
    ("gate", "ring", "gade", "pad", "sor", "via", "largo", "plaza", "place", "av.", "al.", "pl.", "os.",
     "g.", "str.", "bd", "steeg", "tori", "väg", "vei", "veg", "calea")
)  # fmt: skip
# Types written in lower case before a capitalised name (Polish, Czech, Slovene, French): strong
# in lower case too ("ul. Długa 5", "třída Míru 18", "rue du Midi 12").
_LOWER_CASE_TYPES: Final = frozenset(
    ("ul.", "ulica", "aleja", "plac", "osiedle", "náměstí", "nám.", "třída", "trg", "c/", "rue", "avenue",
     "boulevard", "chemin", "allée", "impasse", "quai", "chaussée", "rua", "rúa", "travessa", "calle")
)  # fmt: skip
# Romance connectors after a type: "Plaza de Cervantes 2", "via del Corso 12" are streets.
_ROMANCE_CONNECTORS: Final = frozenset(
    ["de", "del", "della", "delle", "dei", "degli", "di", "da", "do", "dos", "das", "du", "des"]
)
# A weak line with no street type at all needs more than a postal code when it reads as a date
# ("March 3, 2014 Agassi") or its number as a year ("Schlesinger 1962, 1982 Murray").
_MONTHS: Final = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    ]
)
# Lower-case words allowed inside a capitalised name ("Calle de la Constitución", "Via dei Mille").
_CONNECTORS: Final = frozenset(
    [
        "de",
        "del",
        "della",
        "delle",
        "dei",
        "degli",
        "di",
        "da",
        "do",
        "dos",
        "das",
        "du",
        "des",
        "la",
        "le",
        "les",
        "los",
        "las",
        "lo",
        "y",
        "e",
        "et",
        "i",
        "van",
        "von",
        "der",
        "den",
        "am",
        "an",
        "auf",
        "im",
        "zum",
        "zur",
    ]
)


def _cased(words: Iterable[str]) -> list[str]:
    return sorted({v for w in words for v in (w, w[0].upper() + w[1:], w.upper())})


def regex_trie(words: Iterable[str]) -> str:
    """A case-sensitive regex alternation of `words` shaped as a trie: each attempt reads each
    character once.

    A flat alternation of 400 words tries them one after the other at every house number; the
    trie fails on the first character no word continues with. Only optional groups, no repeats.
    """
    root: dict = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        end = "" in node
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if end else body

    return build(root)


def _before_digit(words: Iterable[str]) -> str:
    """Whether one of `words`, a space and the digit at this position end here: one lookbehind
    per word length (`re` needs a fixed width), each a trie that fails on the first character no
    word continues with (equal-length words make a fixed-width trie)."""
    by_len: dict[int, set[str]] = defaultdict(set)
    for w in words:
        by_len[len(w)].add(w)
    return "(?:" + "|".join(f"(?<={regex_trie(ws)}[ ][0-9])" for _, ws in sorted(by_len.items())) + ")"


# A house number (see the docstring); the lookbehind after the first digit rejects a position
# inside a number. Not followed by more of a number: a decimal, a time, a date, a score.
_NUMBER_HEAD = r"[0-9](?<![\w.,/\-][0-9])"
_NUMBER_TAIL = r"[0-9]{0,4}+(?:[A-Za-z](?!\w))?(?:[\-/][0-9]{1,4}+[A-Za-z]?)?\.?(?![\w\-/:]|[.,][0-9])"
NUMBER = _NUMBER_HEAD + _NUMBER_TAIL
_SP = r"[ ]{1,2}+"
_BEFORE_NUMBER = rf",?{_SP}(?P<num>{NUMBER})"
# A word of a name: a letter first (any script), then letters, digits, apostrophes, hyphens.
_WORD = r"[^\W\d_][\w'’\-]{0,30}+\.?"

_SUFFIX_WORDS: Final = sorted({*_cased(_COMPOUND_SUFFIXES), *_cased(_TYPES_AFTER)})
# Compound or type-after, anchored on the house number (digits are far rarer than word starts):
# a letter (or "u.", "str.") and one space before it, then the word's end a street type, tested
# by fixed-width lookbehinds. The word itself is read in Python (`_word_before`).
_TYPE_LAST = re.compile(
    rf"(?P<num>{_NUMBER_HEAD}(?:(?<=[^\W\d_][ ][0-9])|(?<=[^\W\d_]\.[ ][0-9]))"
    rf"{_before_digit(_SUFFIX_WORDS)}{_NUMBER_TAIL})"
)
# Type-before: the type (a trie), 1-4 name words (nested lazy groups), the number.
_TYPE_FIRST = re.compile(
    # (The lookbehind comes first here, against rule 3's habit: after the first character it
    # measured 2x slower, 0.18 vs 0.09 s on 3 MB of Wikipedia, as the trie's root then branches.)
    # (A class of the types' first letters then rejects most token starts in one test: 0.13 ->
    # 0.10 s on 3 MB of Wikipedia, 0.08 -> 0.03 on 1 MB of spaces.)
    rf"(?<![\w'’\-/])(?=[{''.join(sorted({re.escape(w[0]) for w in _cased(_TYPES_BEFORE)}))}])"
    rf"(?P<type>{regex_trie(_cased(_TYPES_BEFORE))})(?!\w)[ ]{{1,2}}+"
    rf"(?P<name>{_WORD}(?:{_SP}{_WORD}(?:{_SP}{_WORD}(?:{_SP}{_WORD})??)??)??)"
    rf"{_BEFORE_NUMBER}"
)
# A name without a type before a postal code and town or a unit: up to two capitalised words and
# a number. The lookahead (the start of a postcode then a capitalised town, or a unit word) is
# what lets the line through; pii_address's tail match then confirms it.
_POSTCODE_START = (
    r"(?:[A-Z]{1,2}-)?(?:[0-9]{4,5}+|[0-9]{3}[ ][0-9]{2}|[0-9]{2}-[0-9]{3}|[0-9]{4,5}-[0-9]{3}"
    r"|[0-9]{4}[ ]?[A-Z]{2})[ ]{1,2}[^\W\d_a-z]"
)
_UNIT_START = r"(?:Apt|APT|apt|Suite|SUITE|suite|Unit|Flat|Apartment|apto|Apto|lgh)\b"
# A capital (Latin-1, Latin Extended-A, whose capitals are interleaved with small letters, Greek).
_CAPITAL = "A-ZÀ-ÖØ-ÞĀ-ſΆ-ΏΑ-Ω"
# (Not two ASCII capitals: codes such as "PO", "APO", "AE" name no street, and refusing them
# here spares the rest of the pattern on hostile "PO Box 1 PO Box 1 ...".)
_NAME_WORD = rf"[{_CAPITAL}](?<![\w'’\-.][{_CAPITAL}])(?![A-Z])[\w'’\-]{{1,30}}+"
# (Unit words as names, "Apt 1 Apt 2", are refused in Python, `_date_or_year`: a negative
# lookahead for them at every capital tripled this pattern's time on Wikipedia, 0.03 -> 0.11 s.)
_WEAK_LINE = re.compile(
    rf"(?P<name>{_NAME_WORD}(?:[ ]{_NAME_WORD})?){_BEFORE_NUMBER}"
    # A town may follow after a comma or a line break, not a space ("123 Main 123 Main" would make
    # every number a candidate: 1.5 s per MB of that), and only when the next run of digits within
    # 40 characters can be a postal code ("Aa 1, Aa 1, ..." is no address).
    rf"(?=(?:,[ ]{{0,2}}+|[ ]{{1,2}}+|[ \t]{{0,2}}+\r?\n[ \t>]{{0,4}}+)(?:{_POSTCODE_START}|(?P<unit>{_UNIT_START}))"
    rf"|(?:,[ ]{{0,2}}+|[ \t]{{0,2}}+\r?\n[ \t>]{{0,4}}+)[{_CAPITAL}][^0-9]{{0,40}}+[0-9]{{2}}[0-9]?[ \-]?[0-9]{{2}})"
)

# A name and number right after words that announce an address ("Address: Husova 2", "lives at
# Národní 12"), optionally after a bare number (see pii_address._number_before).
# Each cue pattern starts with a literal, which `re` finds at C speed; the lookbehinds then check
# the cue's first letters and that it starts a word.
_AFTER_CUE = (
    rf"[ \t]{{1,8}}+(?:\r?\n[ \t>]{{0,4}}+)?(?:[0-9]{{1,6}}+[ ])?"
    rf"(?P<line>(?P<name>{_NAME_WORD}(?:[ ]{_NAME_WORD})?){_BEFORE_NUMBER})"
)
_CUE_ADDRESS = re.compile(rf"ddress(?<=[Aa]ddress)(?<!\w[Aa]ddress)(?:[ ]is)?:?{_AFTER_CUE}")
_CUE_AT = re.compile(
    r"[ ]at(?:(?<=[Ll]ives at)(?<!\w[Ll]ives at)|(?<=[Ll]iving at)(?<!\w[Ll]iving at)"
    rf"|(?<=[Rr]esides at)(?<!\w[Rr]esides at)|(?<=[Rr]esiding at)(?<!\w[Rr]esiding at)){_AFTER_CUE}"
)
_DIGIT = re.compile(r"[0-9]")
PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    "address_eu_digit": _DIGIT,
    "address_eu_cue_address": _CUE_ADDRESS,
    "address_eu_cue_at": _CUE_AT,
    "address_eu_type_last": _TYPE_LAST,
    "address_eu_type_first": _TYPE_FIRST,
    "address_eu_weak_line": _WEAK_LINE,
}

_AFTER_SET: Final = frozenset(_TYPES_AFTER)
# Letters before a compound suffix: "during", "spring", "string" end in "ring" after two.
_MIN_STEM: Final = 3


def is_street_type(word: str) -> bool:
    """Whether `word` is or ends in a street type of this module (for intersections)."""
    lw = word.lower()
    if lw in _AFTER_SET:
        return True
    # (`endswith` with the whole tuple first: one C call rejects most words.)
    return lw.endswith(_COMPOUND_SUFFIXES) and _compound_suffix(lw) is not None


def _proper(words: list[str]) -> bool:
    """Capitalised words (connectors and their elisions aside: "d'Ouchy"), at least one."""
    named = False
    for w in words:
        if w.lower() in _CONNECTORS:
            continue
        if w[1:2] in ("'", "’") and w[0] in "dlDL":
            w = w[2:] or w
        if not w[0].isupper():
            return False
        named = True
    return named


def _names_before(text: str, pos: int, most: int) -> list[tuple[int, str]]:
    """Up to `most` (start, word) of the words right before `pos`, nearest first, each after one
    or two spaces (a comma or a line break ends the name): the name of a type-after street."""
    chunk_start = max(0, pos - 60)
    chunk = text[chunk_start:pos]
    words: list[tuple[int, str]] = []
    end = len(chunk)
    while len(words) < most:
        stripped = chunk[:end].rstrip(" ")
        if not 1 <= end - len(stripped) <= 2 or not stripped:
            break
        start = max(stripped.rfind(" "), stripped.rfind("\n"), stripped.rfind("\t"), stripped.rfind(",")) + 1
        word = stripped[start:]
        if not word or not word[0].isalpha():
            break
        words.append((chunk_start + start, word))
        end = start
    return words


# Hungarian writes the house number as an ordinal ("Andrássy út 22."): the period is the
# number's; after other lines it ends the sentence ("I live at Via Roma 3.").
_HUNGARIAN: Final = frozenset(
    ("utca", "u.", "út", "útja", "tér", "körút", "krt.", "rakpart", "rkp.", "köz", "sor")
)


def _line_end(m: re.Match[str], ordinal: bool) -> int:
    return m.end() - (m.group().endswith(".") and not ordinal)


def _compound_suffix(lw: str) -> str | None:
    """The street type that ends the lower-case word `lw` after a stem of `_MIN_STEM` letters."""
    return next((s for s in _COMPOUND_SUFFIXES if lw.endswith(s) and len(lw) >= len(s) + _MIN_STEM), None)


def _word_before(text: str, pos: int) -> tuple[int, str]:
    """(start, word) of the word ending at `pos`: back to the previous space or line break (two
    C calls; a per-character loop cost 1.5 us per street line), then past opening punctuation."""
    low = max(0, pos - _MAX_WORD)
    start = max(text.rfind(" ", low, pos), text.rfind("\n", low, pos), low - 1) + 1
    while start < pos and not text[start].isalnum():
        start += 1  # "(Lindenstraße 5", "„Hauptstraße 1"
    return start, text[start:pos]


_MAX_WORD: Final = 41


def _type_last(text: str, m: re.Match[str]) -> tuple[int, int, bool] | None:
    start, word = _word_before(text, m.start() - 1)
    if not word[:1].isalpha():
        return None
    lw = word.lower()
    if lw in _AFTER_SET:
        if start < 2 or not (text[start - 2].isalpha() or text[start - 2] == "."):
            return None  # no name word ends right before the type ("1 Straße 1")
        # A type on its own: 1-3 name words before it, the first one capitalised (Hungarian names
        # hold common nouns: "Árpád fejedelem útja"), or lower case throughout (then doubtful).
        names = []
        for s, w in _names_before(text, start, 3):
            if w.lower() in _CONNECTORS or w[0].isupper() or (not names and w.islower()):
                names.append((s, w))
                continue
            break
        while names and names[-1][1].lower() in _CONNECTORS:
            names.pop()
        if not names:
            return None
        start = names[-1][0]
        words = [w for _, w in reversed(names)]
        needs_more = lw in _WEAK or not (_proper(words[:1]) and (word[0].isupper() or word.islower()))
        return start, _line_end(m, lw in _HUNGARIAN), needs_more
    suffix = _compound_suffix(lw)
    if suffix is None:
        return None
    return start, _line_end(m, False), suffix in _WEAK or not word[0].isupper()


def _type_first(m: re.Match[str]) -> tuple[int, int, bool] | None:
    words = m["name"].split()
    kind = m["type"].lower()
    if words[0].lower() in _CONNECTORS and len(words) == 1:
        return None
    proper = _proper(words)
    if not proper and not (m["type"].islower() and all(w.islower() for w in words)):
        return None  # "via the 2": a capitalised type needs a name
    # "Via Roma 3" is Italian, "Av. Paulista 9" Portuguese; "via Frankfurt 2" is English unless a postal code follows; after
    # any weak type a Romance connector makes it a street ("Plaza de Cervantes 2").
    weak = kind in _WEAK and not (
        (kind in ("via", "av.") and m["type"][0].isupper()) or words[0].lower() in _ROMANCE_CONNECTORS
    )
    strong = proper and not weak and (m["type"][0].isupper() or kind in _LOWER_CASE_TYPES)
    return m.start(), _line_end(m, False), not strong


# A unit or box and its number ("Apt 1 Apt 2", "Box 12") are no street line.
_NOT_STREET_NAMES: Final = frozenset(
    ["apt", "apartment", "suite", "ste", "unit", "flat", "room", "floor", "building", "bldg", "lot", "box"]
)


def is_year(number: str) -> bool:
    """A 4-digit number from 1000 to 2099."""
    return len(number) == 4 and number.isdigit() and 1000 <= int(number) <= 2099


def _date_or_year(name: str, num: str, unit_follows: bool) -> bool:
    """A weak line that reads as a date ("March 3"), a unit ("Apt 1 Apt 2"), a code or whose number reads
    as a year ("Yerevan IFF 2006, Rotterdam IFF 2007"); a unit after a year-like number vouches
    for it."""
    if not unit_follows and is_year(num.rstrip(".")):
        return True
    last = name[name.rfind(" ") + 1 :]
    if last.isupper() and len(last) <= 3:
        return True  # a code, not a name: "APO AE 12345", "Yerevan IFF 2006"
    return last.lower() in _MONTHS or last.lower() in _NOT_STREET_NAMES


def find_lines(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, needs a unit or postal code) of each number-last street line, sorted."""
    found: list[tuple[int, int, bool]] = []
    if _DIGIT.search(text) is None:
        return found  # every form ends in a house number: six pattern passes saved on prose
    for m in _TYPE_LAST.finditer(text):
        line = _type_last(text, m)
        if line is not None:
            found.append(line)
    for m in _TYPE_FIRST.finditer(text):
        line = _type_first(m)
        if line is not None:
            found.append(line)
    found += [
        (m.start(), _line_end(m, False), True)
        for m in _WEAK_LINE.finditer(text)
        if not _date_or_year(m["name"], m["num"], m["unit"] is not None)
    ]
    for cue in (_CUE_ADDRESS, _CUE_AT):
        found += [
            (m.start("line"), _line_end(m, False), False)
            for m in cue.finditer(text)
            if not _date_or_year(m["name"], m["num"], False)
        ]
    # One entry per extent: a weak reading of a line another form accepts alone is dropped.
    best: dict[tuple[int, int], bool] = {}
    for start, end, needs_more in found:
        best[start, end] = best.get((start, end), True) and needs_more
    return sorted((s, e, n) for (s, e), n in best.items())
