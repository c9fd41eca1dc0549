"""Street addresses for the PII scrubber (curation/pii/scrub.py): US, UK, Canadian and European, by grammar, in linear time.

What: `find_addresses(text)` returns the (start, end) spans of postal addresses written the way
the three countries' postal services define them:
- a street line: house number (`221B`, `12-14`), optional pre-direction, 1-4 street-name words
  and a street suffix from USPS Publication 28 appendix C1 (US), the Royal Mail / Canada Post
  street types (`Close`, `Crescent`, `Mews`, ...), optional post-direction (`NW`, `Ouest`); or
  Canada's French order, type first (`1234, rue Sainte-Catherine Ouest`); or a numbered route
  (`12345 State Route 9`);
- optional secondary units (USPS appendix C2: `Apt`, `Suite`, `Unit`, `#`, ...; UK `Flat`), after
  the street line or before it ("Flat 3, 12 High Street");
- an optional locality: "City, ST 12345(-6789)" / "City, ON K1A 0B1" / "City (Québec) H3G 1P1",
  "City, ST", or a UK postcode ("London SW1A 2AA");
- the non-street forms of USPS Pub 28: `PO Box 123` and military addresses (`PSC 1234, Box 5678`
  / `Unit 1234 Box 5678` / `USS Ship` followed by `APO|FPO|DPO AA|AE|AP 12345`);
- street lines written number-last ("Lindenstraße 12", "Via Roma 3", "Andrássy út 22."), found by
  curation/pii/address_eu.py, with European floors after them ("2. tv.", "3º B") and European
  localities: a postal code of the continent's formats ("10115", "1015 CJ", "111 21", "00-590",
  "1100-053", optionally "D-") then the town after a comma or line break ("10115 Berlin"), the
  town then the code ("Budapest, 1061"), "Town, REG 1234" (a region abbreviation), and the country
  (English or its own name), which a postal code may also follow;
- intersections, "the corner of A and B" where B ends in a street type within 4 words (the span
  is "A and B");
- a bare number of 1-6 digits right before a street line ("28245 Puruntie 82": a customer, box
  or building number on a label) is part of the address; a unit may precede it.
The span covers all of it, so the city and postal code are replaced with the street line.

Precision. A house number followed by a capitalised name and a word such as "Street" is an
address in most prose, but the USPS list also holds common nouns ("Park", "Point", "Union",
"View") and capitalised runs of them occur in titles. So each street line is graded:
- strong: a suffix whose ordinary meaning is a street type (`_STRONG_SUFFIXES`), every word
  capitalised (or an ordinal "5th", or a connector "of", "de"), no function word in the name
  ("1925 Along the Road"), a house number that is not a year after "in"/"since"/... ("in 1990
  Main Street was..."), not after an article ("the 8 Mile Road") and not a day before a month
  ("On 12 March Street parties..."): accepted alone;
- otherwise (a generic suffix, lower-case text, a doubtful number): accepted only when a unit or a
  locality with a state, province or postal code follows (or a unit precedes).
A European postal code vouches only for a European line (after "1925 Along the Road" the next
line "1926 Essays New" of a bibliography would), and not when it reads as a year (1000-2099).
UK addresses without a house number and street names without a number ("Marina Fort") are not
matched: they have no marker this grammar could rely on without NER.

Linear time, under the rules of curation/pii/scrub.py (no repeated groups, possessive unbounded
repeats, attempts only where a token starts). Street lines are found by one pattern anchored on
a house number that starts a token; its 1-4 name words are nested lazy optional groups (at most
4 suffix tries per number, each a trie-shaped alternation that fails within a few characters), so
an attempt costs O(1) and attempts start only at numbers. Units and localities are then matched
at the line's end, and the words before a number by one match on the text reversed (once per
document), bounded to 30 characters (60 for a military address's unit line), only for candidates
that already matched a street suffix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Final

from curation.pii.address_eu import PATTERNS as EU_PATTERNS
from curation.pii.address_eu import find_lines as find_number_last_lines
from curation.pii.address_eu import is_street_type as is_eu_street_type
from curation.pii.address_eu import is_year
from curation.pii.address_eu import regex_trie as _trie


def _words(text: str) -> list[str]:
    """The whitespace-separated words of `text`: long word lists read better as one string."""
    return text.split()


# ---------------------------------------------------------------------------------------------
# Word lists (lower case)
# ---------------------------------------------------------------------------------------------

# Street types whose ordinary meaning is a street: USPS Pub 28 C1 primary names and standard
# abbreviations, Royal Mail thoroughfare types and Canada Post street types in English. Spelled-out
# words that also name other things after a capitalised word ("Supreme Court", "First Place",
# "Death Row", "Hit Parade", "Arctic Circle", "Times Square") are weak; their abbreviations are not.
_STRONG_SUFFIXES: Final = frozenset(
    _words(
        "street st str strt avenue ave av aven avenu avn avnue road rd boulevard blvd boul boulv "
        "drive dr driv drv lane ln ct crt pl terrace ter terr cir circ crcl crcle "
        "parkway pkwy pky parkwy highway hwy expressway expy expwy freeway fwy turnpike tpke "
        "alley aly allee crescent cres cresc crsnt close mews way wy bypass byp causeway cswy "
        "plaza plz sq trail trl pike grove grv gardens gdns pde esplanade "
        "embankment quay wynd drove broadway boardwalk lanes streets roads drives avenues"
    )
)
# The rest of USPS C1 and the Royal Mail / Canada Post lists: also ordinary nouns ("Park Avenue"
# is a street, "Hyde Park" is not), so a street line ending in one needs a unit or a locality.
_WEAK_SUFFIXES: Final = (
    frozenset(
        _words(
            "anex anx arcade arc bayou byu beach bch bend bnd bluff blf bluffs blfs bottom btm branch br "
            "bridge brg brook brk brooks brks burg bg burgs bgs camp cp canyon cyn cape cpe center ctr "
            "centre centers ctrs circles cirs cliff clf cliffs clfs club clb common cmn commons cmns "
            "corner cor corners cors course crse cove cv coves cvs creek crk crest crst crossing xing "
            "crossroad xrd crossroads xrds curve curv dale dl dam dm divide dv drives drs estate est "
            "estates ests extension ext extensions exts fall falls fls ferry fry field fld fields flds "
            "flat flt flats flts ford frd fords frds forest frst forge frg forges frgs fork frk forks frks "
            "fort ft garden gdn gateway gtwy glen gln glens glns green grn greens grns groves grvs harbor "
            "hbr harbour harbors hbrs haven hvn heights hts hill hl hills hls hollow holw inlet inlt "
            "island is islands iss isle junction jct junctions jcts key ky keys kys knoll knl knolls knls "
            "lake lk lakes lks land landing lndg light lgt lights lgts loaf lf lock lck locks lcks lodge "
            "ldg loop mall manor mnr manors mnrs meadow mdw meadows mdws mill ml mills mls mission msn "
            "motorway mtwy mount mt mountain mtn mountains mtns neck nck orchard orch oval overpass opas "
            "park parks passage psge pass path pine pne pines pnes plain pln plains plns point pt points "
            "pts port prt ports prts prairie pr radial radl ramp ranch rnch rapid rpd rapids rpds rest "
            "rst ridge rdg ridges rdgs river riv route rte run shoal shl shoals shls shore shr shores shrs "
            "skyway skwy spring spg springs spgs spur spurs squares sqs station sta stravenue stra stream "
            "strm summit smt throughway trwy trace trce track trak trafficway trfy tunnel tunl "
            "underpass upas union un unions uns valley vly valleys vlys viaduct via view vw views vws "
            "village vlg villages vlgs ville vl vista vis walk walks wall ways well wl wells wls "
            "court courts place row parade circle square "
            "approach chase circus gate rise vale wharf yard acres bay circuit "
            "dell downs end glade grounds heath highlands line link lookout maze moor pathway "
            "private promenade range subdivision terraces thicket towers townline turnabout villas wood"
        )
    )
    - _STRONG_SUFFIXES
)
_SUFFIXES: Final = _STRONG_SUFFIXES | _WEAK_SUFFIXES

# Canada Post street types written before the name (French order), e.g. "1234, rue Sainte-Catherine".
_STRONG_PREFIX_TYPES: Final = frozenset(
    _words("rue avenue av boulevard boul blvd chemin ch allée montée côte impasse ruelle rang croissant quai")
)
_WEAK_PREFIX_TYPES: Final = frozenset(
    _words("route rte place carré carrefour cours promenade sentier terrasse voie")
)
_PREFIX_TYPES: Final = _STRONG_PREFIX_TYPES | _WEAK_PREFIX_TYPES

_DIRECTIONS: Final = frozenset(
    _words(
        "n s e w ne nw se sw north south east west northeast northwest southeast southwest "
        "nord sud est ouest o no so"
    )
)
# Lower-case words allowed inside a capitalised street name ("Avenue of the Americas").
_CONNECTORS: Final = frozenset(_words("of the de du des la le les del della di da van von y"))

# USPS state and territory codes, Canada Post province codes, and their names.
_REGION_CODES: Final = _words(
    "AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ "
    "NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY AS GU MP PR VI "
    "AB BC MB NB NL NS NT NU ON PE QC SK YT"
)
_REGION_NAMES: Final = (
    "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut", "Delaware",
    "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa", "Kansas", "Kentucky",
    "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan", "Minnesota", "Mississippi",
    "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire", "New Jersey", "New Mexico",
    "New York", "North Carolina", "North Dakota", "Ohio", "Oklahoma", "Oregon", "Pennsylvania",
    "Rhode Island", "South Carolina", "South Dakota", "Tennessee", "Texas", "Utah", "Vermont",
    "Virginia", "Washington", "West Virginia", "Wisconsin", "Wyoming", "Puerto Rico",
    "District of Columbia", "Alberta", "British Columbia", "Manitoba", "New Brunswick",
    "Newfoundland and Labrador", "Nova Scotia", "Northwest Territories", "Nunavut", "Ontario",
    "Prince Edward Island", "Québec", "Quebec", "Saskatchewan", "Yukon",
)  # fmt: skip
_COUNTRIES: Final = (
    "USA|U\\.S\\.A\\.|US|U\\.S\\.|United States|United States of America|Canada|UK|U\\.K\\.|"
    "United Kingdom|England|Scotland|Wales|Northern Ireland|"
    # Countries whose street lines curation/pii/address_eu.py reads, in English and their own
    # languages, and a few more written the same way.
    "Germany|Deutschland|Austria|Österreich|Switzerland|Schweiz|Suisse|Svizzera|Netherlands|"
    "The Netherlands|Nederland|Belgium|België|Belgique|Luxembourg|France|Spain|España|Italy|Italia|"
    "Portugal|Brazil|Brasil|Argentina|Uruguay|Chile|Mexico|México|Colombia|Peru|Perú|Denmark|Danmark|"
    "Sweden|Sverige|Norway|Norge|Finland|Suomi|Iceland|Ísland|Estonia|Eesti|Latvia|Lithuania|"
    "Poland|Polska|Czech Republic|Czechia|Česko|Slovakia|Slovensko|Hungary|Magyarország|Slovenia|"
    "Slovenija|Croatia|Hrvatska|Serbia|Romania|România|Bulgaria|Greece|Cyprus|Turkey|Türkiye|"
    "Ireland|Australia|New Zealand|South Africa|Greenland|Tunisia|Morocco"
)
# USPS Pub 28 C2 secondary unit designators that take a number, plus UK "Flat" and long forms.
_UNIT_WORDS: Final = frozenset(
    _words(
        "apartment apt suite ste unit flat room rm floor fl building bldg department dept lot "
        "trailer trlr space spc hangar hngr pier slip penthouse ph apto dpto lgh"
    )
)
# Words after which a 4-digit number is a year, not a house number ("in 1990 Main Street was").
# Not "to", "of", "at": "moved to", "the corner of", "lives at" precede house numbers too.
_TEMPORAL_WORDS: Final = frozenset(
    _words(
        "in since by until till during before after from between circa around through than year "
        "years early late mid spring summer autumn fall winter"
    )
)
# Function words that begin no street name: "1925 Along the Road" is a book in a bibliography.
_NOT_NAMES: Final = frozenset(
    _words(
        "along on in at to for from with by of and or but into onto over under across through is was "
        "are were has have had my our your his her their its this that these those"
    )
)
_ARTICLES: Final = frozenset(("the", "a", "an"))
# A day number then a month is a date ("On 12 March Street parties were held"), not a house number.
_MONTHS: Final = frozenset(
    _words(
        "january february march april may june july august september october november december "
        "jan feb mar apr jun jul aug sep sept oct nov dec"
    )
)
# Street types and directions of 4 letters or fewer that are spelled out, not abbreviated: a
# period after them ends the sentence ("at 15 Maiden Lane."), after "St." or "Blvd." it belongs
# to the address. After a name ("rue de la Gare.") it ends the sentence too.
_SHORT_WORDS: Final = frozenset(
    _words(
        "lane road way row pike mews quay wynd loop mall walk park pass path run rest port fork ford "
        "glen hill isle key keys lake land lock mill neck oval pine ramp spur vale view wall well bay "
        "bend camp cape club cove dale dam end fall flat gate line link moor rise wood yard via burg "
        "rue cour quai voie rang "
        "north south east west nord sud est"
    )
)


# ---------------------------------------------------------------------------------------------
# Patterns
# ---------------------------------------------------------------------------------------------


def _cased(words: Iterable[str]) -> list[str]:
    """Each word as written in lower case, capitalised and in capitals ("st", "St", "ST"): the
    tries are case-sensitive, about twice as fast as `(?i:...)` on text dense with numbers."""
    return sorted({v for w in words for v in (w, w.capitalize(), w.upper())})


def _reversed(words: Iterable[str]) -> list[str]:
    return [w[::-1] for w in words]


# A house number: 1-6 digits starting a token (the lookbehind after the first digit rejects a
# position inside a number, a decimal, a path, a time or a phone number), an optional letter
# ("221B") and an optional range ("12-14", Queens "104-20").
_NUM = (
    r"[0-9](?<![\w.,/\-#:+][0-9])[0-9]{0,5}+(?:[A-Za-z](?!\w))?(?:-[0-9]{1,5}+[A-Za-z]?(?!\w))?"
    r"(?:[ ](?:bis|ter)(?!\w))?"  # French "12 bis rue ...": the second house at number 12
)
# A word of a street or city name: letters first (any script's letters: "Côte-des-Neiges"), or an
# ordinal ("5th"); a trailing period for abbreviations ("St. John").
_ORDINAL = r"[0-9]{1,4}+(?:st|nd|rd|th|ST|ND|RD|TH)(?!\w)"
_WORD = rf"(?:[^\W\d_][\w'’\-]{{0,30}}+|{_ORDINAL})\.?"
_SP = r"[ ]{1,2}+"
# Form B is tried first: "41 allée des Paix last spring" would otherwise end at the USPS type
# "spring" as a doubtful form-A line and never be read as "allée des Paix".
# Form A: number, 1-4 name words (nested lazy groups: the first suffix after one word, then after
# two, ...), suffix. Form B: number, optional comma, a French-order street type, a name word.
# Form C: number, an optional word ("State", "County", "US"), a numbered route. The lookahead
# after the number rejects at once the numbers not followed by a word (most of them).
_STREET = re.compile(
    rf"(?P<num>{_NUM})(?=,?[ ]{{1,2}}+(?:[^\W\d_]|{_ORDINAL}))"
    rf"(?:,?{_SP}(?P<ptype>{_trie(_cased(_PREFIX_TYPES))})(?!\w)\.?{_SP}(?P<pname>{_WORD})"
    rf"|{_SP}(?P<name>{_WORD}(?:{_SP}{_WORD}(?:{_SP}{_WORD}(?:{_SP}{_WORD})??)??)??){_SP}"
    rf"(?P<suffix>{_trie(_cased(_SUFFIXES))})(?!\w)\.?"
    rf"|{_SP}(?:{_WORD}{_SP})??(?P<route>{_trie(_cased(('highway', 'hwy', 'route', 'rte')))})\.?"
    rf"{_SP}[0-9]{{1,4}}+[A-Za-z]?(?!\w))"
)
# Up to three more words of a French-order name ("rue de la Gare").
_MORE_WORDS = re.compile(rf"(?:{_SP}{_WORD})?(?:{_SP}{_WORD})?(?:{_SP}{_WORD})?")
_NON_SPACE = re.compile(r"\S++")
# The word after a street line: a street type ("Lake Shore Drive") or a post-direction ("St W").
_NEXT_WORD = re.compile(rf"{_SP}(?P<word>{_WORD})(?!\w)")

# Separator between the parts of an address: comma, line break (with e-mail quoting '>'), spaces.
_SEP = r"[ \t]{0,2}+(?:\r?\n[ \t>]{0,4}+)?,?[ \t]{0,2}+(?:\r?\n[ \t>]{0,4}+)?"
# A secondary unit: designator and an id holding a digit ("Apt 4B", "Suite 200", "# 12") or one
# letter ("Suite A"); "unit and", "Suite Dreams" are words.
_UNIT_ID = r"(?:(?=[A-Za-z\-]{0,9}[0-9])[A-Za-z0-9]{1,5}+(?:-[A-Za-z0-9]{1,4}+)?|[A-Za-z])(?!\w)"
# European floor and door designations: Danish "2. tv." / "st. th.", Iberian "3º B" / "2º Esq".
_FLOOR = (
    r"(?:[0-9]{1,2}\.|st\.|kl\.)[ ]?(?:tv|th|mf)\.?(?!\w)"
    r"|[0-9]{1,2}[ºª°](?:[ ]?(?:[A-Z]|Esq|Dto|Dir|Izq|Izda|Dcha)\.?)?(?!\w)"
)
_UNIT = (
    rf"(?:[ ]{{0,2}}+,[ ]{{0,2}}+|[ ]{{1,2}}+|[ ]{{0,2}}+\r?\n[ \t>]{{0,4}}+)"
    rf"(?:(?:{_trie(_cased(_UNIT_WORDS))}(?:\.|(?!\w))[ ]{{0,2}}+(?:(?:No|no|NO)\.?[ ]?|#[ ]?)?|#[ ]?)"
    rf"{_UNIT_ID}|{_FLOOR})"
)
# A capital: Latin-1, Latin Extended-A (both cases: its capitals are interleaved), Greek, Cyrillic.
_CITY_WORD = r"[A-ZÀ-ÖØ-ÞĀ-ſΑ-ΩЀ-Я][\w'’.\-]{0,24}+"
# Lower-case words inside a town's name: "Soto del Barco", "Ostrov nad Ohří", "Frankfurt am Main".
_CITY_LINK = r"(?:(?=[a-z])(?:de|del|la|le|nad|pod|am|an|der|upon|on|sur|en|di|u|im|bei|ob)[ ])?"
_CITY = (
    rf"{_CITY_WORD}(?:[ ]{_CITY_LINK}{_CITY_WORD})?(?:[ ]{_CITY_LINK}{_CITY_WORD})?"
    rf"(?:[ ]{_CITY_LINK}{_CITY_WORD})?"
)
_REGION = _trie([*_REGION_CODES, *_REGION_NAMES])
_ZIP = r"[0-9]{5}(?:-[0-9]{4})?(?![\w\-])"
# Canada Post: letter-digit-letter digit-letter-digit; D, F, I, O, Q, U never occur, W and Z not first.
_CA_POSTAL = r"[ABCEGHJ-NPRSTVXY][0-9][ABCEGHJ-NPRSTV-Z][ ]?[0-9][ABCEGHJ-NPRSTV-Z][0-9](?!\w)"
# Royal Mail: outward code (area letters, district) and inward code (sector digit, unit letters).
_UK_POSTCODE = r"(?:[A-PR-UWYZ][A-HK-Y]?[0-9][A-Z0-9]?|GIR)[ ]{0,2}+[0-9][ABD-HJLNP-UW-Z]{2}(?!\w)"
# European and Latin American postal codes: optional country prefix ("D-", "CH-"), then the
# Dutch "1015 CJ", Brazilian "01310-200", Portuguese "1100-053", Swedish/Czech/Greek "111 21",
# Polish "00-590", or 4-5 digits.
_EU_POSTCODE = (
    r"(?:[A-Z]{1,2}-)?(?:[0-9]{4}[ ]?[A-Z]{2}(?!\w)|[0-9]{4,5}-[0-9]{3}|[0-9]{3}[ ][0-9]{2}"
    r"|[0-9]{2}-[0-9]{3}|[0-9]{4,5})(?![\w\-])"
)
# "City, ST 12345", "City, ON K1A 0B1", "City (Québec) H3G 1P1", "City, ST", "City SW1A 2AA",
# "SW1A 2AA"; Europe's "10115 Berlin" and "Budapest, 1061"; "City, REG 1234" (a region
# abbreviation, as in Australia's "Sydney NSW 2000"); then optionally the country, and a postal
# code may follow the country too. The city is matched once for all forms.
_LOCALITY = (
    rf"(?:{_SEP}(?:{_CITY}{_SEP}"
    rf"(?:\(?(?:{_REGION})\)?(?:(?:[ ]{{1,2}}+|{_SEP})(?P<postal>{_ZIP}|{_CA_POSTAL}))?(?![\w\-])"
    rf"|(?P<postcode>{_UK_POSTCODE})"
    # "Budapest, 1061": after a comma or line break ("April 1962" is a date)
    rf"|(?:(?<=[,\n>])|(?<=[,\n>][ \t])|(?<=[,\n>][ \t][ \t]))(?P<eu_postal2>{_EU_POSTCODE})"
    rf"|[A-Z]{{2,3}}(?![\w\-])(?:(?:[ ]{{1,2}}+|{_SEP})(?P<eu_postal3>{_EU_POSTCODE}))?"
    rf"|(?=(?:{_COUNTRIES})(?!\w)))"
    rf"|(?P<postcode2>{_UK_POSTCODE}))"
    # A postal code first only after a comma or a line break: "1 Lake Park 2020 Olympics" is prose.
    rf"|[ \t]{{0,2}}+(?:,|\r?\n)[ \t>]{{0,4}}+(?P<eu_postal>{_EU_POSTCODE})[ ]{{1,2}}+{_CITY})"
    rf"(?:{_SEP}(?<=[\s,>])(?:{_COUNTRIES})(?!\w)(?:[ ]{{1,2}}+(?P<eu_postal4>{_EU_POSTCODE}))?)?"
)
_POSTAL_GROUPS: Final = ("postal", "postcode", "postcode2")
_EU_POSTAL_GROUPS: Final = ("eu_postal", "eu_postal2", "eu_postal3", "eu_postal4")
# What may follow a street line, PO box: up to two units ("Suite 967 Apt. 267"), then a locality.
# Every part is optional, so one match call answers (an empty match: nothing follows).
_TAIL = re.compile(rf"(?P<unit>{_UNIT})?(?:{_UNIT})?(?:{_LOCALITY})?")
_TAIL_STARTS: Final = frozenset(" \t,\r\n")  # the characters a non-empty tail can start with

# Before a house number, read backwards (on the reversed 30 characters before it, so one match
# at position 0 replaces a search over every start): a unit ("Flat 3, 12 High Street") or the
# previous word (is the number a year after "in", or after an article?).
_BEFORE_REVERSED = re.compile(
    rf"[ ]{{0,2}}+[,/]?[ ]{{0,2}}+[A-Za-z0-9]{{1,5}}+(?=[#. ])#?[ ]{{0,2}}+\.?"
    rf"{_trie(_reversed(_cased(_UNIT_WORDS)))}(?!\w)"
    r"|[ ,]{1,3}+(?P<word>[A-Za-z]{1,12}+)(?![A-Za-z])"
)
_LOOKBACK: Final = 30
_BEFORE_ENDS: Final = frozenset(" ,/")  # the characters `_BEFORE_REVERSED` can start with

_PO_BOX = re.compile(
    r"[Pp](?<![\w][Pp])(?:\.?[ ]?[Oo]\.?[ ]?|(?:ost|OST)[ ](?:[Oo]ffice|OFFICE)[ ])(?:Box|BOX|box)"
    r"[ ]{1,2}+#?[0-9]{1,6}+(?!\w)"
)
# USPS military addresses: the locality line "APO AE 09012" (case-insensitive: forms are often
# typed in lower case), and before it a unit/box line or a ship's name, read backwards as above.
_MILITARY = re.compile(
    r"[AaFfDd](?<![\w][AaFfDd])(?i:po)[ ](?i:aa|ae|ap)[ ]{1,2}+[0-9]{5}(?:-[0-9]{4})?(?!\w)"
)
_MILITARY_LINE_REVERSED = re.compile(
    r"(?:[ ]{0,2}+,|[ \t>]{0,4}+\n\r?)?[ \t]{0,2}+"
    r"(?i:[0-9]{1,5}+[ ]xob[ ],?[0-9]{1,5}+[ ](?:csp|rmc|tinu)"
    r"|[\w'’\-]{1,25}+(?:[ ][\w'’\-]{1,25}+)?[ ](?:ssu|snsu|vnsu|cgcsu))(?!\w)"
)
_MILITARY_LOOKBACK: Final = 60
# An intersection: "corner of" starting a token, then two street names (checked in Python).
_CORNER = re.compile(r"[Cc](?<![\w][Cc])orner[ ]of[ ]")
_CORNER_WINDOW: Final = 120  # characters after "corner of " that may hold both streets
_PUNCTUATION = re.compile(r"[,;:!?()]")  # ends the first street of an intersection

PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    "address_street": _STREET,
    "address_more_words": _MORE_WORDS,
    "address_non_space": _NON_SPACE,
    "address_next_word": _NEXT_WORD,
    "address_tail": _TAIL,
    "address_before_reversed": _BEFORE_REVERSED,
    "address_po_box": _PO_BOX,
    "address_military": _MILITARY,
    "address_military_line_reversed": _MILITARY_LINE_REVERSED,
    "address_corner": _CORNER,
    "address_punctuation": _PUNCTUATION,
    **EU_PATTERNS,
}


# ---------------------------------------------------------------------------------------------
# Finder
# ---------------------------------------------------------------------------------------------


def _capitalised(word: str) -> bool:
    """A word of a proper street name: capitalised, an ordinal or number, or a connector."""
    return word[0].isupper() or word[0].isdigit() or word.lower() in _CONNECTORS


def _norm(word: str) -> str:
    return word.rstrip(".").lower()


def _is_date(number: str, name: str) -> bool:
    """Whether the number and the first name word read as a day and month ("12 March")."""
    return len(number) <= 2 and number.isdigit() and name.split(None, 1)[0].rstrip(".").lower() in _MONTHS


def _suffix_line(text: str, m: re.Match[str]) -> tuple[int, bool, list[str]]:
    """English order: (end, whether the street type is strong, words of the name and type)."""
    end = m.end()
    suffix = m["suffix"]
    words = [*m["name"].split(), suffix]
    strong = _norm(suffix) in _STRONG_SUFFIXES
    # The first suffix may be part of the name ("Lake Shore Drive": "Lake" and "Shore" are USPS
    # suffixes too): extend over up to two more capitalised suffix words to a street type (not
    # "Glyn St street": a lower-case "street" after the name is the sentence's).
    pos, more = end, []
    for _ in range(2):
        # (The test before each match call: most street lines end at a comma or a line break.)
        nxt = _NEXT_WORD.match(text, pos) if text[pos : pos + 1] == " " else None
        if nxt is None:
            break
        word = nxt["word"]
        if _norm(word) not in _SUFFIXES or not word[0].isupper():
            break
        pos = nxt.end()
        more.append(word)
        if _norm(word) in _STRONG_SUFFIXES:
            words += more
            end, strong, more = pos, True, []
    return end, strong, words


def _prefix_line(text: str, m: re.Match[str]) -> tuple[int, bool, list[str]] | None:
    """French order ("rue de la Gare"): (end, strong type, words of the name), or None."""
    end = m.end()
    words = [(m["pname"], end)]  # (word, where it ends)
    for w in _NON_SPACE.finditer(_MORE_WORDS.match(text, end).group()):
        word = w.group()
        if not _capitalised(word) or _norm(word) in _UNIT_WORDS or _norm(word) in _DIRECTIONS:
            break
        words.append((word, end + w.end()))
    while words and words[-1][0].lower() in _CONNECTORS:
        words.pop()  # "rue de la" + a lower-case word: the connectors are not the name
    if not words:
        return None
    return words[-1][1], _norm(m["ptype"]) in _STRONG_PREFIX_TYPES, [w for w, _ in words]


def _street_line(text: str, m: re.Match[str]) -> tuple[int, bool] | None:
    """(end of the street line, whether it needs a unit or locality to be accepted), or None."""
    if m["route"] is not None:
        return m.end(), True
    line = _suffix_line(text, m) if m["suffix"] is not None else _prefix_line(text, m)
    if line is None:
        return None
    end, strong, words = line
    nxt = _NEXT_WORD.match(text, end) if text[end : end + 1] == " " else None
    if nxt is not None and _norm(nxt["word"]) in _DIRECTIONS:
        end = nxt.end()  # "Queen St W"
    if text[end - 1] == "." and _sentence_period(text[text.rfind(" ", 0, end) + 1 : end]):
        end -= 1  # "Hollywood Boulevard.", "rue de la Gare.": the sentence's period
    return end, not strong or _doubtful_name(words, english=m["suffix"] is not None)


def _sentence_period(word: str) -> bool:
    """Whether the period ending `word` ends the sentence rather than an abbreviation ("St.")."""
    last = word[:-1].lower()
    return len(last) > 4 or last in _SHORT_WORDS or (last not in _SUFFIXES and last not in _DIRECTIONS)


def _doubtful_name(words: list[str], english: bool) -> bool:
    """Whether `words` may be other than a proper street name: it needs capitalised words
    (connectors aside, and in English order not first: "522 and CL 522" is a catalogue number)
    and no function word before the type ("1925 Along the Road" is a book). One loop: this runs
    for every street line, 60,000 times on a megabyte of addresses."""
    if english and words[0].lower() in _CONNECTORS:
        return True
    proper = False
    last = len(words) - 1
    for i, w in enumerate(words):
        lw = w.lower()
        if lw in _CONNECTORS:
            continue
        if not (w[0].isupper() or w[0].isdigit()) or (i < last and lw.rstrip(".") in _NOT_NAMES):
            return True
        proper = True
    return not proper


def _tail(text: str, pos: int, european: bool) -> tuple[int, bool]:
    """(end of the units and locality after `pos`, whether they vouch for the address).

    "City, ST" alone extends the span but does not vouch for a doubtful street line ("Highway 63
    north of Fort McMurray, Alberta" is prose); a unit or a postal code does. A European postal
    code vouches only for a European (number-last) line: after "1925 Along the Road" the next
    line "1926 Essays New" of a bibliography would read as one.
    """
    # A unit or locality starts, after separators, with a letter or '#': a cheap test first, since
    # most street lines end a sentence or are followed by more prose or numbers.
    after = text[pos : pos + 20]  # the longest separator, `_SEP`, is 17 characters
    # (A digit can start a European tail only: "2. tv.", "10115 Berlin"; after an English line the
    # test spares the tail match on "1 Lake Park 1 Lake Park ...".)
    first = after.lstrip(" \t,\r\n>")[:1]
    if after[:1] not in _TAIL_STARTS or (
        not (first.isalnum() if european else first.isalpha()) and "#" not in after
    ):
        return pos, False
    tail = _TAIL.match(text, pos)  # always matches, possibly empty
    vouched = tail["unit"] is not None or tail.group(*_POSTAL_GROUPS) != (None, None, None)
    if european and not vouched:
        # A 4-digit code that reads as a year vouches for nothing: "Philologie, 171, Meisenheim, 1985".
        vouched = any(code is not None and not is_year(code) for code in tail.group(*_EU_POSTAL_GROUPS))
    end = tail.end()
    if end > pos and text[end - 1] == "." and _sentence_period(text[text.rfind(" ", pos, end) + 1 : end]):
        end -= 1  # "..., 00184 Roma.": the sentence's period, not an abbreviation's
    return end, vouched


def _english_lines(text: str) -> Iterator[tuple[int, int, bool, str | None]]:
    """(start, end, needs a unit or locality, house number or None) of each US/UK/Canadian
    street line; None for the French order ("12 rue ..."), which a European postal code vouches."""
    for m in _STREET.finditer(text):
        line = _street_line(text, m)
        if line is None:
            continue
        end, needs_more = line
        if m["name"] is not None and _is_date(m["num"], m["name"]):
            needs_more = True
        yield m.start(), end, needs_more, m["num"] if m["ptype"] is None else None


def _number_before(text: str, start: int, last_end: int) -> int:
    """Where a bare number of 1-6 digits right before `start` ("28245 Puruntie 82": a customer,
    box or building number on a label) begins, or `start` if there is none (or it would reach
    into the previous address, `last_end`: "Apt 4 123 Main St")."""
    j = start - 1
    if j < 1 or text[j] != " " or not text[j - 1].isdigit():
        return start
    k = j - 1
    while k >= 0 and j - k <= 6 and text[k].isdigit():
        k -= 1
    if (k >= 0 and (text[k].isalnum() or text[k] in _NUMBER_JOINERS)) or k + 1 < last_end:
        return start  # part of a longer number, a decimal, a date, a phone number
    return k + 1


_NUMBER_JOINERS: Final = frozenset(".,/-:+#()")


class _Reversed:
    """The text reversed, made the first time a line has a unit or word before it to read."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.backwards = ""

    def __call__(self) -> str:
        self.backwards = self.backwards or self.text[::-1]
        return self.backwards


def _read_before(text: str, start: int, last_end: int, reverse: _Reversed) -> re.Match[str] | None:
    """A unit or the previous word before `start`, matched on the reversed text: index
    n - start of it is the character before `start`; the match runs back neither past the
    previous address nor further than _LOOKBACK."""
    if not start or text[start - 1] not in _BEFORE_ENDS:  # "\n1234 Main St": nothing to read back
        return None
    n = len(text)
    return _BEFORE_REVERSED.match(reverse(), n - start, n - max(last_end, start - _LOOKBACK))


def _find_streets(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    last_end = 0
    n = len(text)
    reverse = _Reversed(text)
    lines = list(_english_lines(text))  # in text order
    eu = find_number_last_lines(text)
    if eu:
        lines = sorted(lines + [(s, e, more, None) for s, e, more in eu])
    for start, end, needs_more, num in lines:
        end, vouched = _tail(text, end, european=num is None)
        before = _read_before(text, start, last_end, reverse)
        # No unit before the line; a bare number may be ("28245 Puruntie 82"), and a unit before
        # it. (The digit test first: this runs for every line, 90,000 per MB of hostile text.)
        if (before is None or before["word"] is not None) and text[start - 2 : start - 1].isdigit():
            numbered = _number_before(text, start, last_end)
            if numbered < start:
                start = numbered
                before = _read_before(text, start, last_end, reverse)
        if before is not None and before["word"] is None:
            start = n - before.end()  # a unit before the number ("Flat 3, 12 High Street")
            vouched = True
        elif before is not None and num is not None:
            # A house number may be something else: a year after "in", "since", ... or any
            # number after an article ("the 8 Mile Road").
            word = before["word"][::-1].lower()
            if word in _ARTICLES or (word in _TEMPORAL_WORDS and is_year(num)):
                needs_more = True
        if needs_more and not vouched:
            continue
        found.append((start, end))
        last_end = end
    return found


def _find_intersections(text: str) -> list[tuple[int, int]]:
    """ "corner of A and B": from A to the street type that ends B (see address_eu)."""
    found: list[tuple[int, int]] = []
    if "orner of " not in text:
        return found
    for m in _CORNER.finditer(text):
        window = text[m.end() : m.end() + _CORNER_WINDOW].split("\n", 1)[0]
        i = window.find(" and ")
        left = window[:i]
        if i <= 0 or left.count(" ") > 5 or _PUNCTUATION.search(left):
            continue
        pos = i + 5
        for word in window[pos:].split(" ")[:4]:
            core = word.rstrip(",;:!?)")
            if not core:
                break
            # A street type after a name, or a street that is one word ("Broadway", "Hauptstraße").
            alone = _norm(core) == "broadway" or is_eu_street_type(core.rstrip("."))
            if alone or (pos > i + 5 and _norm(core) in _SUFFIXES):
                end = m.end() + pos + len(core)
                found.append((m.end(), end - (core.endswith(".") and _sentence_period(core))))
                break
            if core != word:
                break  # punctuation ends the second name
            pos += len(word) + 1
    return found


def _find_boxes(text: str) -> list[tuple[int, int]]:
    """PO boxes (with their locality) and military addresses."""
    found: list[tuple[int, int]] = []
    if "box" in text or "Box" in text or "BOX" in text:
        found += [(m.start(), _TAIL.match(text, m.end()).end()) for m in _PO_BOX.finditer(text)]
    if "PO " not in text and "po " not in text and "Po " not in text and "pO " not in text:
        return found  # substring tests run at memchr speed; the pattern tries every a, d and f
    for m in _MILITARY.finditer(text):
        start = m.start()
        line = _MILITARY_LINE_REVERSED.match(text[max(0, start - _MILITARY_LOOKBACK) : start][::-1])
        found.append((start - (line.end() if line is not None else 0), m.end()))
    return found


def find_addresses(text: str) -> list[tuple[int, int]]:
    """(start, end) of each street address, PO box or military address in `text`, sorted.

    Spans of different forms may overlap ("PO Box 12" inside a longer match); `curation.pii.scrub`
    resolves overlaps for all types alike.
    """
    found = _find_streets(text)
    found += _find_boxes(text)
    found += _find_intersections(text)
    found.sort()
    return found
