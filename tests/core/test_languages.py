"""The one language code (core/languages.py), checked against references it does not share code with:
ISO 639 through the `iso639-lang` package, ISO 15924 through `pycountry`, Unicode's own character names
for scripts, and the real lid.176 model's label list."""

from __future__ import annotations

import unicodedata

import pycountry
import pytest
from iso639 import Lang

from core.languages import (
    _SCRIPT_BLOCKS,
    CODE_RE,
    LID176,
    MACROLANGUAGE,
    LanguageCodeError,
    LanguageSet,
    from_lid176,
    letter_script,
    split_code,
    text_script,
)
from curation.filters.langid import default_model_path, load_model

LID176_LABELS = sorted(lab.removeprefix("__label__") for lab in load_model(default_model_path()).get_labels())

# Wikipedia's codes that lid.176 uses and ISO 639-3 gives another language or retired (Wikipedia's
# language list: als = Alemannic, ISO's gsw; eml = Emilian-Romagnol, ISO retired it for egl and rgn in
# 2009; bh = Bihari, a collective whose Wikipedia is Bhojpuri; sh = Serbo-Croatian, ISO's hbs).
WIKIPEDIA_CODES = {"als": "gsw", "eml": "egl", "bh": "bho", "sh": "hbs"}


def test_table_covers_exactly_the_models_labels():
    assert len(LID176_LABELS) == 176
    assert sorted(LID176) == LID176_LABELS


@pytest.mark.parametrize("label", LID176_LABELS)
def test_each_lid176_label_maps_to_its_iso639_3_language(label):
    """Label by label: the code is a real ISO 639 code, and it is the label's own language, or an
    individual member of the macrolanguage the label names (`zh` -> `cmn`, a member of `zho`)."""
    code = LID176[label]
    target = Lang(code)  # raises for a code ISO 639 does not have
    if label in WIKIPEDIA_CODES:
        assert code == WIKIPEDIA_CODES[label]
        return
    ref = Lang(label)
    ref3 = ref.pt3 or ref.pt5  # `nah`: an ISO 639-5 collective
    if code != ref3:
        macro = target.macro()
        assert macro is not None and macro.pt3 == ref3, (label, code, ref.name, target.name)


def test_every_iso639_1_code_is_read():
    """A user may write any ISO 639-1 code: lid.176's labels and the rest of the standard."""
    from iso639 import iter_langs

    for lang in iter_langs():
        if lang.pt1:
            code = split_code(lang.pt1)[0]
            assert code == lang.pt3 or Lang(code).macro().pt3 == lang.pt3, (lang.pt1, code)


@pytest.mark.parametrize("member", sorted(MACROLANGUAGE))
def test_macrolanguage_table_agrees_with_iso639_3(member):
    assert Lang(member).macro().pt3 == MACROLANGUAGE[member]


def test_script_codes_are_iso15924():
    codes = {s for _, _, s in _SCRIPT_BLOCKS} | {"Jpan", "Zyyy", "Zzzz"}
    for code in codes:
        assert pycountry.scripts.get(alpha_4=code) is not None, code


def _unicode_script_words() -> dict[str, str]:
    """First word of a Unicode character name -> ISO 15924 code, from pycountry's script names."""
    out: dict[str, str] = {}
    # plain names before variants ("Latin" before "Latin (Fraktur variant)")
    for s in sorted(pycountry.scripts, key=lambda s: ("variant" in s.name, len(s.name))):
        word = s.name.split(" ")[0].split("(")[0].upper()
        out.setdefault(word, s.alpha_4)
    # Unicode's names for these differ from ISO 15924's English names.
    out.update({"CJK": "Hani", "HANGUL": "Hang", "HIRAGANA": "Hira", "KATAKANA": "Kana", "FULLWIDTH": "Latn"})
    out.update({"MYANMAR": "Mymr", "ORIYA": "Orya", "SINHALA": "Sinh", "GEORGIAN": "Geor", "TAMIL": "Taml"})
    return out


def test_letter_script_agrees_with_unicode_names_on_real_text(data_dir):
    """Every letter of the Leipzig sentences (75 languages, ~20 scripts) gets the script Unicode's
    character name says (`CYRILLIC SMALL LETTER A` -> Cyrl). Names that carry no script (`MODIFIER
    LETTER ...`, the kana prolonged sound mark shared by both kana) are left out."""
    words = _unicode_script_words()
    seen: dict[str, int] = {}
    wrong = []
    for f in sorted((data_dir / "langid" / "leipzig" / "sentences").glob("*.txt")):
        for ch in set(f.read_text(encoding="utf-8")):
            if not ch.isalpha():
                continue
            name = unicodedata.name(ch, "")
            first = name.split(" ")[0]
            if not name or first in ("MODIFIER", "KATAKANA-HIRAGANA") or first not in words:
                continue
            if first == "FULLWIDTH" and "LATIN" not in name:
                continue  # fullwidth forms of other scripts: not in the Leipzig files
            expected = words[first]
            seen[expected] = seen.get(expected, 0) + 1
            if letter_script(ch) != expected:
                wrong.append((ch, name, letter_script(ch), expected))
    assert not wrong, wrong[:20]
    assert len(seen) >= 18, seen  # the file set spans this many scripts


def test_text_script_of_real_sentences(data_dir):
    """Whole sentences: the composite scripts come out where they should (Japanese `Jpan` though
    its letters are Han and kana; Korean `Hang`), and Chinese stays `Hani`."""
    d = data_dir / "langid" / "leipzig" / "sentences"

    def scripts(stem: str, lang: str | None = None) -> set[str]:
        lines = [ln for ln in (d / f"{stem}.txt").read_text(encoding="utf-8").splitlines() if ln.strip()]
        return {text_script(ln, lang) for ln in lines[:100]}

    assert scripts("ja", "jpn") == {"Jpan"}
    assert scripts("ko", "kor") == {"Hang"}
    # Chinese sentences: Han; none has enough kana to read as Japanese.
    assert scripts("zh", "cmn") == {"Hani"}
    assert scripts("ru") == {"Cyrl"} and scripts("ar") == {"Arab"} and scripts("th") == {"Thai"}
    assert text_script("12345 !!!") == "Zyyy"


@pytest.mark.parametrize(
    ("text", "label", "expected"),
    [
        ("Добар дан, ово је реченица на српском језику.", "sr", "srp_Cyrl"),
        ("Dobar dan, ovo je rečenica na srpskom jeziku.", "sr", "srp_Latn"),
        ("東京は日本の首都です。", "ja", "jpn_Jpan"),
        ("東京都", "ja", "jpn_Jpan"),  # all kanji, still Japanese
        ("这是一个中文句子。", "zh", "cmn_Hani"),
        ("This is English.", "en", "eng_Latn"),
        ("Schwiizerdütsch isch schön.", "als", "gsw_Latn"),
    ],
)
def test_from_lid176_takes_the_script_from_the_text(text, label, expected):
    assert from_lid176(label, text) == expected


def test_split_code_forms_and_refusals():
    assert split_code("rus_Cyrl") == ("rus", "Cyrl")
    assert split_code("rus") == ("rus", None)
    assert split_code("ru") == ("rus", None)
    assert split_code("zh") == ("cmn", None)
    assert split_code("nb") == ("nob", None) and split_code("zu") == ("zul", None)
    for bad in ("", "english", "EN", "rus_cyrl", "ru_Cyrl", "r", "xx", "qq", "rus-Cyrl", 7, None):
        with pytest.raises(LanguageCodeError):
            split_code(bad)  # type: ignore[arg-type]


def test_language_set_matching():
    en = LanguageSet(["en"])
    assert "eng_Latn" in en and "en" in en and "eng_Cyrl" in en  # no script named: any script
    assert "deu_Latn" not in en and None not in en and "garbage" not in en
    zh = LanguageSet(["zho"])  # a macrolanguage matches its members
    assert "cmn_Hani" in zh and "yue_Hani" in zh and "zh" in zh and "jpn_Jpan" not in zh
    sr = LanguageSet(["srp_Latn"])
    assert "srp_Latn" in sr and "srp_Cyrl" not in sr and "hrv_Latn" not in sr
    hbs = LanguageSet(["hbs"])
    assert {"srp_Cyrl", "hrv_Latn", "bos_Latn"} <= set(hbs.matching(["srp_Cyrl", "hrv_Latn", "bos_Latn"]))
    assert LanguageSet([]).everything and "anything" in LanguageSet([])


def test_canonical_codes_have_the_documented_shape():
    for label in LID176_LABELS:
        code = from_lid176(label, "text")
        assert CODE_RE.match(code), code


# --- The class of "language codes" (issue 54): a code is read whole, is a real ISO code, and names a
# script its language is written in.


@pytest.mark.parametrize("tail", ["\n", "\r\n", " ", "\t", "\x00", "_", "\u2028"])
def test_a_code_with_anything_after_it_is_no_code(tail):
    """`$` matches before a trailing newline: `eng_Latn\\n` was a canonical code."""
    from core.languages import check_codes, is_canonical

    for code in ("eng_Latn", "rus", "ru"):
        assert not is_canonical(code + tail)
        with pytest.raises(LanguageCodeError):
            split_code(code + tail)
        with pytest.raises(LanguageCodeError, match=r"langid\.languages"):
            check_codes([code + tail], "langid.languages")


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("eng_Latm", r"'Latm' is no ISO 15924 script code \(did you mean Latn"),
        ("eng_Cyrx", "'Cyrx' is no ISO 15924 script code"),
        ("rsu_Cyrl", "'rsu' is no ISO 639-3 code"),
        ("qqq", "'qqq' is no ISO 639-3 code"),
        ("xyz", "'xyz' is no ISO 639-3 code"),
    ],
)
def test_a_well_formed_code_that_iso_does_not_have_is_refused_naming_the_key(code, message):
    """A keep-list typo `eng_Latm` matched nothing and dropped every document with exit 0."""
    from core.languages import check_codes

    with pytest.raises(LanguageCodeError, match=message) as e:
        check_codes(["deu_Latn", code], "langid.languages")
    assert str(e.value).startswith("langid.languages: ")
    with pytest.raises(LanguageCodeError, match=message):
        LanguageSet([code])  # every user list (recipes' `lang` selects, scorers' languages) is checked


def test_every_code_the_tables_know_is_iso():
    """The other side: every ISO 639-3 code (pycountry's and iso639-lang's tables agree), every
    lid.176 code and every ISO 15924 script is accepted."""
    from iso639 import iter_langs

    from core.languages import check_code

    for lang in iter_langs():
        if lang.pt3:
            check_code(lang.pt3)
    for label in LID176_LABELS:
        check_code(from_lid176(label, "text"))
    for script in pycountry.scripts:
        check_code(f"eng_{script.alpha_4}")


def test_the_script_table_covers_lid176_and_only_iso_scripts():
    from core.languages import SCRIPTS_OF

    assert set(SCRIPTS_OF) == set(LID176.values())
    for lang, scripts in SCRIPTS_OF.items():
        for s in scripts:
            assert s in {"Jpan", "Hang", "Hani"} or pycountry.scripts.get(alpha_4=s) is not None, (lang, s)


def _joiner_flooded(text: str) -> list[str]:
    return [j.join(text) for j in ("\u200c", "\u200d", "\u200c\u200d")] + [
        "\u200c" * 5 + "\u200c".join(text.split())
    ]


def test_no_impossible_language_script_pair_is_emitted(data_dir):
    """The class: whatever the text, langid's codes (the top one, the top-k of the pre-check, the
    lang_scores column) name a language in a script it is written in. Real sentences of every
    Leipzig language, and each flooded with joiners as a hostile page is (a Persian page came out
    `cmn_Arab`, lid.176's `zh` with the script of the Arabic letters)."""
    from core.languages import possible
    from curation.config import LangIdConfig
    from curation.filters.langid import TOP_SCORES_K, LanguageIdentifier

    lid = LanguageIdentifier(LangIdConfig(languages=()))
    texts = []
    for f in sorted((data_dir / "langid" / "leipzig" / "sentences").glob("*.txt")):
        lines = [ln for ln in f.read_text("utf-8").splitlines() if ln.strip()][:40]
        texts += lines[:20] + [t for ln in lines[20:40] for t in _joiner_flooded(ln)]
    seen = set()
    for t in texts:
        codes = [lid.predict(t)[0], *(c for c, _ in lid.top_labels(t, TOP_SCORES_K))]
        for code in codes:
            assert possible(code), (code, t[:60])
        seen.add(codes[0])
    assert {"pes_Arab", "cmn_Hani", "srp_Cyrl", "jpn_Jpan", "kor_Hang", "eng_Latn"} <= seen


def test_the_flooded_persian_page_is_persian_or_undetermined_in_its_script(data_dir):
    from curation.config import LangIdConfig
    from curation.filters.langid import LanguageIdentifier

    lid = LanguageIdentifier(LangIdConfig(languages=()))
    fa = [
        ln
        for ln in (data_dir / "langid/leipzig/sentences/fa.txt").read_text("utf-8").splitlines()
        if ln.strip()
    ]
    page = "\u200c".join(fa[11])  # lid.176 says zh for it
    assert lid.predict_raw(page)[0] == "zh"
    code, _ = lid.predict(page)
    assert code.endswith("_Arab") and code[:3] in {"pes", "arb", "urd", "pnb", "azb", "ckb", "mzn", "und"}, (
        code
    )
