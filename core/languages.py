"""One language code for every stage: ISO 639-3, `_`, ISO 15924 script (`rus_Cyrl`, `cmn_Hani`, `srp_Latn`).

Why one scheme: language-ID models disagree on labels. lid.176 says `zh`, `sh`, `no`, `als`
(Wikipedia's codes: `als` is Alemannic there, Tosk Albanian in ISO 639-3); GlotLID says
`cmn_Hani`, `hbs_Latn`, `nob_Latn`, `gsw_Latn`. datatrove's users compared `fra` with `fr` and a
filter failed silently (datatrove #365, #388). Here every backend's labels go through an explicit
table into one scheme, the one GlotLID and FineWeb-2 use, and every place that compares a
language (a keep-list, a recipe's `select: {lang: ...}`, a scorer's languages) goes through
`LanguageSet`, which also reads the older two-letter codes of outputs written before this scheme.

The script: GlotLID's labels carry it; lid.176's do not, so it comes from the text's letters
(`text_script`: the Unicode script most letters belong to, `Jpan` for Japanese's Han + kana,
`Hang` for Korean). A page lid.176 calls `sr` is `srp_Cyrl` or `srp_Latn` by what it is written in.

Macrolanguages: where lid.176 names a macrolanguage whose web text is overwhelmingly one member,
the member is used, as GlotLID and FineWeb-2 name their subsets (`zh` -> `cmn`, `ar` -> `arb`,
`fa` -> `pes`, `ms` -> `zsm`, `no` -> `nob`, `sq` -> `als`, ...); a user's `zho` or `ara` still
matches them (`MACROLANGUAGE`). Sources: ISO 639-3 code tables and macrolanguage mappings (SIL,
iso639-3.sil.org), lid.176's label list (fasttext.cc/docs/en/language-identification.html),
FineWeb-2's subset names (huggingface/fineweb-2 configs/).
"""

from __future__ import annotations

import bisect
import difflib
import functools
import re
import string
from collections.abc import Iterable

CODE_RE = re.compile(r"[a-z]{3}_[A-Z][a-z]{3}")
"""A canonical code: three lower-case letters, `_`, a capitalised four-letter script. Always used with
`fullmatch`: `$` would also match before a trailing newline (`"eng_Latn\\n"`)."""

UNDETERMINED = "und"
"""ISO 639-3 for 'undetermined': no model label (an empty text)."""

NO_SCRIPT = "Zyyy"
"""ISO 15924 'Common': a text with no letters (digits, symbols)."""

# lid.176's 176 labels -> ISO 639-3. Two-letter labels are ISO 639-1; the three-letter ones are
# Wikipedia language codes, all valid ISO 639-3 codes of the same language except `als` (Wikipedia:
# Alemannic, gsw) and `eml` (Emilian-Romagnol, split by ISO in 2009: Emilian, egl). `bh` (Bihari, a
# collective) is Bhojpuri as Wikipedia's bh is; `nah` stays the ISO 639-5 collective (no one member).
LID176 = {
    "af": "afr", "als": "gsw", "am": "amh", "an": "arg", "ar": "arb", "arz": "arz", "as": "asm",
    "ast": "ast", "av": "ava", "az": "azj", "azb": "azb", "ba": "bak", "bar": "bar", "bcl": "bcl",
    "be": "bel", "bg": "bul", "bh": "bho", "bn": "ben", "bo": "bod", "bpy": "bpy", "br": "bre",
    "bs": "bos", "bxr": "bxr", "ca": "cat", "cbk": "cbk", "ce": "che", "ceb": "ceb", "ckb": "ckb",
    "co": "cos", "cs": "ces", "cv": "chv", "cy": "cym", "da": "dan", "de": "deu", "diq": "diq",
    "dsb": "dsb", "dty": "dty", "dv": "div", "el": "ell", "eml": "egl", "en": "eng", "eo": "epo",
    "es": "spa", "et": "ekk", "eu": "eus", "fa": "pes", "fi": "fin", "fr": "fra", "frr": "frr",
    "fy": "fry", "ga": "gle", "gd": "gla", "gl": "glg", "gn": "gug", "gom": "gom", "gu": "guj",
    "gv": "glv", "he": "heb", "hi": "hin", "hif": "hif", "hr": "hrv", "hsb": "hsb", "ht": "hat",
    "hu": "hun", "hy": "hye", "ia": "ina", "id": "ind", "ie": "ile", "ilo": "ilo", "io": "ido",
    "is": "isl", "it": "ita", "ja": "jpn", "jbo": "jbo", "jv": "jav", "ka": "kat", "kk": "kaz",
    "km": "khm", "kn": "kan", "ko": "kor", "krc": "krc", "ku": "kmr", "kv": "kpv", "kw": "cor",
    "ky": "kir", "la": "lat", "lb": "ltz", "lez": "lez", "li": "lim", "lmo": "lmo", "lo": "lao",
    "lrc": "lrc", "lt": "lit", "lv": "lvs", "mai": "mai", "mg": "plt", "mhr": "mhr", "min": "min",
    "mk": "mkd", "ml": "mal", "mn": "khk", "mr": "mar", "mrj": "mrj", "ms": "zsm", "mt": "mlt",
    "mwl": "mwl", "my": "mya", "myv": "myv", "mzn": "mzn", "nah": "nah", "nap": "nap", "nds": "nds",
    "ne": "npi", "new": "new", "nl": "nld", "nn": "nno", "no": "nob", "oc": "oci", "or": "ory",
    "os": "oss", "pa": "pan", "pam": "pam", "pfl": "pfl", "pl": "pol", "pms": "pms", "pnb": "pnb",
    "ps": "pbt", "pt": "por", "qu": "que", "rm": "roh", "ro": "ron", "ru": "rus", "rue": "rue",
    "sa": "san", "sah": "sah", "sc": "srd", "scn": "scn", "sco": "sco", "sd": "snd", "sh": "hbs",
    "si": "sin", "sk": "slk", "sl": "slv", "so": "som", "sq": "als", "sr": "srp", "su": "sun",
    "sv": "swe", "sw": "swh", "ta": "tam", "te": "tel", "tg": "tgk", "th": "tha", "tk": "tuk",
    "tl": "tgl", "tr": "tur", "tt": "tat", "tyv": "tyv", "ug": "uig", "uk": "ukr", "ur": "urd",
    "uz": "uzn", "vec": "vec", "vep": "vep", "vi": "vie", "vls": "vls", "vo": "vol", "wa": "wln",
    "war": "war", "wuu": "wuu", "xal": "xal", "xmf": "xmf", "yi": "ydd", "yo": "yor", "yue": "yue",
    "zh": "cmn",
}  # fmt: skip

# The rest of ISO 639-1 (codes lid.176 has no label for) -> ISO 639-3, so a user may write any
# two-letter code (`nb`, `zu`, `sw`): the ISO 639-2 registration authority's list (loc.gov/standards/iso639-2).
# curation/filters/segment.py reads spaCy's two-letter classes through LID176 and this (fo, lg, nb,
# ti, tn are spaCy's that lid.176 has no label for): the project's one table of language codes.
ISO639_1 = {
    "aa": "aar", "ab": "abk", "ae": "ave", "ak": "aka", "ay": "aym", "bi": "bis", "bm": "bam", "ch": "cha",
    "cr": "cre", "cu": "chu", "dz": "dzo", "ee": "ewe", "ff": "ful", "fj": "fij", "fo": "fao", "ha": "hau",
    "ho": "hmo", "hz": "her", "ig": "ibo", "ii": "iii", "ik": "ipk", "iu": "iku", "kg": "kon", "ki": "kik",
    "kj": "kua", "kl": "kal", "kr": "kau", "ks": "kas", "lg": "lug", "ln": "lin", "lu": "lub", "mh": "mah",
    "mi": "mri", "na": "nau", "nb": "nob", "nd": "nde", "ng": "ndo", "nr": "nbl", "nv": "nav", "ny": "nya",
    "oj": "oji", "om": "orm", "pi": "pli", "rn": "run", "rw": "kin", "se": "sme", "sg": "sag", "sm": "smo",
    "sn": "sna", "ss": "ssw", "st": "sot", "ti": "tir", "tn": "tsn", "to": "ton", "ts": "tso", "tw": "twi",
    "ty": "tah", "ve": "ven", "wo": "wol", "xh": "xho", "za": "zha", "zu": "zul",
}  # fmt: skip

# ISO 639-3 individual language -> its macrolanguage (SIL's macrolanguage mappings), for the
# members named above and their common siblings: a user's `zho`, `ara`, `msa` or `nor` matches them.
MACROLANGUAGE = {
    "cmn": "zho", "yue": "zho", "wuu": "zho", "arb": "ara", "arz": "ara", "pes": "fas", "prs": "fas",
    "zsm": "msa", "ind": "msa", "min": "msa", "nob": "nor", "nno": "nor", "als": "sqi", "aln": "sqi",
    "ekk": "est", "lvs": "lav", "ltg": "lav", "azj": "aze", "azb": "aze", "uzn": "uzb", "khk": "mon",
    "swh": "swa", "swc": "swa", "npi": "nep", "dty": "nep", "ory": "ori", "plt": "mlg", "pbt": "pus",
    "pbu": "pus", "ydd": "yid", "gug": "grn", "kmr": "kur", "ckb": "kur", "sdh": "kur", "kpv": "kom",
    "koi": "kom", "hrv": "hbs", "srp": "hbs", "bos": "hbs", "cnr": "hbs", "mhr": "chm", "mrj": "chm",
    "pnb": "lah", "gom": "kok", "diq": "zza",
}  # fmt: skip

# The scripts each of lid.176's languages is written in (ISO 639-3 -> ISO 15924, as `text_script`
# names them: `Jpan` for Japanese, `Hang` for Korean, `Hani` for Chinese), from Unicode CLDR's
# languageData (supplementalData.xml: each language's primary and secondary scripts) and Wikipedia's
# script list of each language. lid.176 labels a language, not a script, and the script comes from
# the text's letters; a label whose language is never written in them is no reading of the text (a
# joiner-flooded Persian page that lid.176 called `zh` came out `cmn_Arab`), so `possible` refuses it
# and langid takes the model's best label that is possible. A language not listed (a retrained
# model's own label) is not constrained.
_LATN, _CYRL, _ARAB = frozenset({"Latn"}), frozenset({"Cyrl"}), frozenset({"Arab"})
SCRIPTS_OF: dict[str, frozenset[str]] = {
    **{lang: _LATN for lang in (
        "afr", "gsw", "arg", "ast", "bar", "bcl", "bre", "cat", "cbk", "ceb", "ces", "cos", "cym", "dan",
        "deu", "diq", "dsb", "egl", "eng", "epo", "spa", "ekk", "eus", "fin", "fra", "frr", "fry", "gle",
        "gla", "glg", "gug", "glv", "hat", "hrv", "hsb", "hun", "ina", "ind", "ile", "ilo", "ido", "isl",
        "ita", "jav", "jbo", "cor", "lat", "ltz", "lim", "lmo", "lit", "lvs", "plt", "min", "mlt", "mwl",
        "nah", "nap", "nds", "nld", "nno", "nob", "oci", "pam", "pfl", "pol", "pms", "por", "que", "roh",
        "ron", "srd", "scn", "sco", "slk", "slv", "som", "als", "sun", "swe", "swh", "tgl", "tur", "vec",
        "vep", "vie", "vls", "vol", "wln", "war", "yor",
    )},
    **{lang: _CYRL for lang in (
        "ava", "bak", "bel", "bul", "bxr", "che", "chv", "krc", "kpv", "lez", "mhr", "mrj", "mkd", "myv",
        "oss", "rus", "rue", "sah", "tyv", "ukr", "xal",
    )},
    **{lang: _ARAB for lang in ("arb", "arz", "azb", "lrc", "mzn", "pes", "pnb", "pbt", "urd")},
    **{lang: frozenset({"Deva"}) for lang in ("bho", "dty", "hin", "mai", "mar", "new", "npi", "san")},
    "asm": frozenset({"Beng"}), "ben": frozenset({"Beng"}), "bpy": frozenset({"Beng"}),
    "pan": frozenset({"Guru", "Arab"}), "guj": frozenset({"Gujr"}), "ory": frozenset({"Orya"}),
    "tam": frozenset({"Taml"}), "tel": frozenset({"Telu"}), "kan": frozenset({"Knda"}),
    "mal": frozenset({"Mlym"}), "sin": frozenset({"Sinh"}), "tha": frozenset({"Thai"}),
    "lao": frozenset({"Laoo"}), "bod": frozenset({"Tibt"}), "mya": frozenset({"Mymr"}),
    "khm": frozenset({"Khmr"}), "kat": frozenset({"Geor"}), "xmf": frozenset({"Geor"}),
    "hye": frozenset({"Armn"}), "heb": frozenset({"Hebr"}), "ydd": frozenset({"Hebr"}),
    "amh": frozenset({"Ethi"}), "div": frozenset({"Thaa"}), "ell": frozenset({"Grek"}),
    "cmn": frozenset({"Hani"}), "wuu": frozenset({"Hani"}), "yue": frozenset({"Hani"}),
    "jpn": frozenset({"Jpan"}), "kor": frozenset({"Hang"}),
    # written in more than one script (CLDR's secondary scripts, or a script change still under way)
    "azj": frozenset({"Latn", "Cyrl"}), "uzn": frozenset({"Latn", "Cyrl"}), "tuk": frozenset({"Latn", "Cyrl"}),
    "kaz": frozenset({"Cyrl", "Latn", "Arab"}), "kir": frozenset({"Cyrl", "Arab"}),
    "tat": frozenset({"Cyrl", "Latn"}), "tgk": frozenset({"Cyrl", "Arab", "Latn"}),
    "khk": frozenset({"Cyrl", "Mong"}), "srp": frozenset({"Cyrl", "Latn"}), "hbs": frozenset({"Latn", "Cyrl"}),
    "bos": frozenset({"Latn", "Cyrl"}), "kmr": frozenset({"Latn", "Arab", "Cyrl"}),
    "ckb": frozenset({"Arab", "Latn"}), "snd": frozenset({"Arab", "Deva"}),
    "uig": frozenset({"Arab", "Cyrl", "Latn"}), "zsm": frozenset({"Latn", "Arab"}),
    "hif": frozenset({"Latn", "Deva"}), "gom": frozenset({"Deva", "Latn", "Knda"}),
}  # fmt: skip

# ISO 15924 scripts by Unicode block (Blocks.txt / Scripts.txt, Unicode 15): the blocks of the
# world's written languages. A letter outside them counts as `Zzzz` (unknown), never a guess.
_SCRIPT_BLOCKS = (
    (0x0041, 0x024F, "Latn"), (0x0250, 0x02AF, "Latn"), (0x0370, 0x03FF, "Grek"),
    (0x0400, 0x052F, "Cyrl"), (0x0530, 0x058F, "Armn"), (0x0590, 0x05FF, "Hebr"),
    (0x0600, 0x06FF, "Arab"), (0x0700, 0x074F, "Syrc"), (0x0750, 0x077F, "Arab"),
    (0x0780, 0x07BF, "Thaa"), (0x07C0, 0x07FF, "Nkoo"), (0x0860, 0x086F, "Syrc"),
    (0x0870, 0x08FF, "Arab"), (0x0900, 0x097F, "Deva"), (0x0980, 0x09FF, "Beng"),
    (0x0A00, 0x0A7F, "Guru"), (0x0A80, 0x0AFF, "Gujr"), (0x0B00, 0x0B7F, "Orya"),
    (0x0B80, 0x0BFF, "Taml"), (0x0C00, 0x0C7F, "Telu"), (0x0C80, 0x0CFF, "Knda"),
    (0x0D00, 0x0D7F, "Mlym"), (0x0D80, 0x0DFF, "Sinh"), (0x0E00, 0x0E7F, "Thai"),
    (0x0E80, 0x0EFF, "Laoo"), (0x0F00, 0x0FFF, "Tibt"), (0x1000, 0x109F, "Mymr"),
    (0x10A0, 0x10FF, "Geor"), (0x1100, 0x11FF, "Hang"), (0x1200, 0x139F, "Ethi"),
    (0x13A0, 0x13FF, "Cher"), (0x1400, 0x167F, "Cans"), (0x1680, 0x169F, "Ogam"),
    (0x16A0, 0x16FF, "Runr"), (0x1700, 0x171F, "Tglg"), (0x1780, 0x17FF, "Khmr"),
    (0x1800, 0x18AF, "Mong"), (0x18B0, 0x18FF, "Cans"), (0x19E0, 0x19FF, "Khmr"),
    (0x1B00, 0x1B7F, "Bali"), (0x1B80, 0x1BBF, "Sund"), (0x1C50, 0x1C7F, "Olck"),
    (0x1C80, 0x1C8F, "Cyrl"), (0x1C90, 0x1CBF, "Geor"), (0x1E00, 0x1EFF, "Latn"),
    (0x1F00, 0x1FFF, "Grek"), (0x2C00, 0x2C5F, "Glag"), (0x2C60, 0x2C7F, "Latn"),
    (0x2C80, 0x2CFF, "Copt"), (0x2D00, 0x2D2F, "Geor"), (0x2D30, 0x2D7F, "Tfng"),
    (0x2D80, 0x2DDF, "Ethi"), (0x2DE0, 0x2DFF, "Cyrl"), (0x2E80, 0x2FDF, "Hani"),
    (0x3005, 0x3007, "Hani"), (0x3040, 0x309F, "Hira"), (0x30A0, 0x30FF, "Kana"),
    (0x3100, 0x312F, "Bopo"), (0x3130, 0x318F, "Hang"), (0x31A0, 0x31BF, "Bopo"),
    (0x31F0, 0x31FF, "Kana"), (0x3400, 0x4DBF, "Hani"), (0x4E00, 0x9FFF, "Hani"),
    (0xA000, 0xA4CF, "Yiii"), (0xA500, 0xA63F, "Vaii"), (0xA640, 0xA69F, "Cyrl"),
    (0xA720, 0xA7FF, "Latn"), (0xA960, 0xA97F, "Hang"), (0xA980, 0xA9DF, "Java"),
    (0xA9E0, 0xA9FF, "Mymr"), (0xAA60, 0xAA7F, "Mymr"), (0xAB00, 0xAB2F, "Ethi"),
    (0xAB30, 0xAB6F, "Latn"), (0xAB70, 0xABBF, "Cher"), (0xAC00, 0xD7FF, "Hang"),
    (0xF900, 0xFAFF, "Hani"), (0xFB00, 0xFB06, "Latn"), (0xFB13, 0xFB17, "Armn"),
    (0xFB1D, 0xFB4F, "Hebr"), (0xFB50, 0xFDFF, "Arab"), (0xFE70, 0xFEFF, "Arab"),
    (0xFF21, 0xFF5A, "Latn"), (0xFF66, 0xFF9F, "Kana"), (0xFFA0, 0xFFDC, "Hang"),
    (0x1B000, 0x1B16F, "Hira"), (0x1E900, 0x1E95F, "Adlm"), (0x20000, 0x323AF, "Hani"),
)  # fmt: skip
_BLOCK_STARTS = [b[0] for b in _SCRIPT_BLOCKS]

SCRIPT_SAMPLE_CHARS = 4000
"""Characters of a text `text_script` reads: the script of a page is settled long before its end,
and reading every character of a 100 KB page would cost more than the LID model's prediction."""

_KANA = frozenset({"Hira", "Kana"})
_CJK = frozenset({"Hani", "Hira", "Kana"})
# Languages written in Han, kana or Hangul: (their letters' scripts, the code's script), as FineWeb-2
# names its subsets (jpn_Jpan, kor_Hang, cmn_Hani).
_NATIVE = {
    "jpn": (_CJK, "Jpan"),
    "kor": (frozenset({"Hang", "Hani"}), "Hang"),
    **{lang: (frozenset({"Hani"}), "Hani") for lang in ("cmn", "yue", "wuu", "zho", "lzh", "nan", "hak")},
}


class LanguageCodeError(ValueError):
    """A language given by a user that no table knows (the message names it and the forms accepted)."""


def letter_script(ch: str) -> str:
    """ISO 15924 script of one letter (`Zzzz` outside the known blocks)."""
    cp = ord(ch)
    i = bisect.bisect_right(_BLOCK_STARTS, cp) - 1
    if i >= 0 and cp <= _SCRIPT_BLOCKS[i][1]:
        return _SCRIPT_BLOCKS[i][2]
    return "Zzzz"


_ASCII_LETTERS = string.ascii_letters.encode()


def script_counts(text: str, limit: int = SCRIPT_SAMPLE_CHARS) -> dict[str, int]:
    """Letters per script in the first `limit` characters (letters: `str.isalpha`, so digits,
    punctuation and combining marks count for no script)."""
    head = text[:limit]
    if head.isascii():  # most of the web: counted in C (an ASCII letter is isalpha exactly when [A-Za-z])
        n = len(head) - len(head.encode("ascii").translate(None, _ASCII_LETTERS))
        return {"Latn": n} if n else {}
    counts: dict[str, int] = {}
    for c in head:
        if c.isalpha():
            s = "Latn" if c < "\u0250" else letter_script(c)
            counts[s] = counts.get(s, 0) + 1
    return counts


def text_script(text: str, lang: str | None = None, counts: dict[str, int] | None = None) -> str:
    """The text's script: the one most of its letters belong to, with the composite scripts of
    Japanese (`Jpan`: Han and kana together) and Korean (`Hang`, Hangul with any Hanja).

    `lang` (ISO 639-3) settles what letters alone cannot: a Japanese page written mostly in kanji is
    still `Jpan`, a Korean one with Hanja or Latin acronyms `Hang`. Without letters: `Zyyy`.
    `counts`: the text's `script_counts`, when a caller judges one text for several languages.
    """
    if counts is None:
        counts = script_counts(text)
    if not counts:
        return NO_SCRIPT
    native = _NATIVE.get(lang or "")
    # A Han character or a Hangul syllable carries what two or three Latin letters do, so a Korean
    # sentence with one Latin acronym can count more Latin letters than Hangul: for the languages
    # written in those scripts, a fifth of the letters in them settles it.
    if native is not None and sum(counts.get(s, 0) for s in native[0]) * 5 >= sum(counts.values()):
        return native[1]
    top = max(counts, key=lambda s: (counts[s], s))
    if top in _KANA or (top == "Hani" and sum(counts.get(s, 0) for s in _KANA) * 10 >= counts["Hani"]):
        # kana are Japanese only: a tenth of the Han count in kana is a Japanese text (kanji-heavy news
        # runs ~30% kana; Chinese text has none)
        return "Jpan"
    return top


def split_code(code: str) -> tuple[str, str | None]:
    """(ISO 639-3, script or None) of a code in any form this project reads:

    - canonical `rus_Cyrl`;
    - ISO 639-3 alone, `rus` (any script);
    - ISO 639-1 / lid.176's two-letter labels, `ru` (written by outputs before this scheme);
    - lid.176's three-letter Wikipedia labels are ISO 639-3 codes already, except `als` and `eml`,
      which a user writes as `gsw` and `egl` (`als` here is ISO 639-3's Tosk Albanian).
    """
    if not isinstance(code, str):
        raise LanguageCodeError(f"a language code must be a string, got {code!r}")
    if CODE_RE.fullmatch(code):
        return code[:3], code[4:]
    if re.fullmatch(r"[a-z]{3}", code):
        return code, None
    if re.fullmatch(r"[a-z]{2}", code) and (code in LID176 or code in ISO639_1):
        return LID176.get(code) or ISO639_1[code], None
    raise LanguageCodeError(
        f"unknown language code {code!r}: give ISO 639-3 with its ISO 15924 script (`rus_Cyrl`), "
        "ISO 639-3 alone (`rus`, any script) or an ISO 639-1 code (`ru`)"
    )


def possible(code: str) -> bool:
    """Whether canonical `code` names its language in a script it is written in (`SCRIPTS_OF`); a
    text without letters (`Zyyy`) or in unknown letters (`Zzzz`), or a language not in the table, is
    not judged."""
    lang, script = code[:3], code[4:]
    scripts = SCRIPTS_OF.get(lang)
    return scripts is None or script in scripts or script in (NO_SCRIPT, "Zzzz")


@functools.cache
def iso_tables() -> tuple[frozenset[str], frozenset[str]]:
    """(ISO 639-3 codes with ISO 639-5's collectives, ISO 15924 codes), from pycountry's copies of the
    registration authorities' tables (SIL's iso-639-3.tab, ISO 639-5, Unicode's iso15924.txt).
    Collectives count: lid.176's `nah` (Nahuatl) is one."""
    import pycountry

    langs = {lang.alpha_3 for lang in pycountry.languages} | {f.alpha_3 for f in pycountry.language_families}
    return frozenset(langs), frozenset(s.alpha_4 for s in pycountry.scripts)


def _unknown(kind: str, value: str, table: frozenset[str]) -> str:
    near = difflib.get_close_matches(value, sorted(table), n=3, cutoff=0.7)
    return f"{value!r} is no {kind} code" + (f" (did you mean {' or '.join(near)}?)" if near else "")


def check_code(code: str) -> tuple[str, str | None]:
    """`split_code`, and the language checked against ISO 639-3 and the script against ISO 15924: a
    well-formed typo (`eng_Latm`, `rsu`) is refused instead of matching nothing (a keep-list of it
    dropped every document with exit 0). A LanguageCodeError naming the code otherwise."""
    lang, script = split_code(code)
    langs, scripts = iso_tables()
    if lang not in langs:
        raise LanguageCodeError(f"unknown language code {code!r}: {_unknown('ISO 639-3', lang, langs)}")
    if script is not None and script not in scripts:
        raise LanguageCodeError(
            f"unknown language code {code!r}: {_unknown('ISO 15924 script', script, scripts)}"
        )
    return lang, script


def is_known(code: str) -> bool:
    """A canonical code whose language is in ISO 639-3 and script in ISO 15924."""
    if not is_canonical(code):
        return False
    try:
        check_code(code)
    except LanguageCodeError:
        return False
    return True


def from_lid176(label: str, text: str, counts: dict[str, int] | None = None) -> str:
    """A lid.176 label (without `__label__`) as a canonical code; the script from `text` (or from its
    `script_counts`, counted once for all the labels of one text)."""
    lang = LID176.get(label)
    if lang is None:  # a label outside the 176 (a retrained model in lid.176's format): kept if ISO-shaped
        lang = label if re.fullmatch(r"[a-z]{3}", label) else UNDETERMINED
    return f"{lang}_{text_script(text, lang, counts)}"


def is_canonical(code: str) -> bool:
    return isinstance(code, str) and CODE_RE.fullmatch(code) is not None


class LanguageSet:
    """Languages a user named (a keep-list, a recipe's `lang` selector, a scorer's languages), and
    whether a document's `lang` is one of them.

    An entry with a script (`srp_Latn`) matches that script only; one without (`srp`, `sr`) matches
    any. An entry that is a macrolanguage (`zho`) matches its members (`cmn_Hani`, `yue_Hani`). A
    document code is read in any form `split_code` reads, so outputs written with lid.176's labels
    (`en`) still match. An empty set matches every language (`everything`).
    """

    def __init__(self, entries: Iterable[str]) -> None:
        self.entries = tuple(entries)
        # the user's entries are checked against the ISO tables (a typo would match nothing); the
        # documents' codes below only need to be read
        self._parsed = frozenset(check_code(e) for e in self.entries)
        self._cache: dict[str, bool] = {}

    @property
    def everything(self) -> bool:
        return not self._parsed

    def __contains__(self, code: object) -> bool:
        if self.everything:
            return True
        if not isinstance(code, str):
            return False
        hit = self._cache.get(code)
        if hit is None:
            try:
                lang, script = split_code(code)
            except LanguageCodeError:
                hit = False
            else:
                langs = {lang, MACROLANGUAGE.get(lang, lang)}
                hit = any(e in langs and (s is None or s == script) for e, s in self._parsed)
            if len(self._cache) < 65536:  # documents' codes are few; a hostile column cannot grow it
                self._cache[code] = hit
        return hit

    def matching(self, codes: Iterable[str | None]) -> list[str]:
        """The given codes (e.g. a column's distinct values) that this set matches."""
        return [c for c in codes if c is not None and c in self]

    def __repr__(self) -> str:
        return f"LanguageSet({list(self.entries)!r})"


def check_codes(codes: Iterable[str], key: str) -> tuple[str, ...]:
    """Validate user-given codes for config key `key` against the ISO tables (`check_code`; a
    LanguageCodeError naming the key and the entry)."""
    out = []
    for c in codes:
        try:
            check_code(c)
        except LanguageCodeError as e:
            raise LanguageCodeError(f"{key}: {e}") from None
        out.append(c)
    return tuple(out)
