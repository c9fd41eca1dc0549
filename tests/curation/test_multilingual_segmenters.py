"""The multilingual preset's words, per script (issue 54): filters and dedup split every language the
same way, average word lengths stay those of words, and no segmenter call grows past its bound.

Real text in every script lid.176 names: Leipzig sentences (shared data) where they have the script;
Tatoeba's long sentences (shared data) for Oriya, Kannada, Malayalam, Sinhala, Lao, Myanmar, Khmer,
Yiddish and Traditional Chinese; spaCy's own example sentences (in its wheel) for Tibetan and Amharic;
the Dhivehi and Ge'ez names of the world's countries (pycountry's ISO 3166 translations, a pinned
dependency) for Thaana and for Ethiopic written with its wordspace ፡.
"""

from __future__ import annotations

import gettext
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.languages import text_script
from core.stage import Document, Drop
from curation.filters import words as words_module
from curation.filters.blocks import FilterStep, PerLanguageBlock
from curation.filters.segment import KiwiSegmenter, get_segmenter, segmenter_name_for
from curation.filters.text import GopherRepetition
from curation.filters.words import SPLITTER
from curation.languages.lookup import settings_for
from curation.languages.schema import FOLDER
from dedup.words import segmenter_of
from testkit.shared_data import shared_data_dir

# Found through the one helper: a missing folder fails at collection, never skips the module.
DATA = shared_data_dir() / "langid"
LEIPZIG = DATA / "leipzig" / "sentences"


def leipzig(iso1: str, n: int = 60) -> list[str]:
    return [s for s in (LEIPZIG / f"{iso1}.txt").read_text(encoding="utf-8").splitlines() if s.strip()][:n]


def tatoeba(cld2: str) -> list[str]:
    rows = [r.split("\t") for r in (DATA / "tatoeba_long.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    return [r[3] for r in rows if r[0] == cld2]


def spacy_examples(code: str) -> list[str]:
    return list(importlib.import_module(f"spacy.lang.{code}.examples").sentences)


def country_names(locale: str) -> list[str]:
    """The country names of pycountry's ISO 3166-1 translation into `locale`, ten to a line."""
    import pycountry

    cat = gettext.translation("iso3166-1", pycountry.LOCALES_DIR, languages=[locale])._catalog
    names = [v for k, v in cat.items() if k and v != k]
    return [", ".join(names[i : i + 10]) for i in range(0, len(names), 10)]


# (code the preset judges the text as, ISO 15924 script of the text, where the text comes from).
# One lid.176 language per script at least; the languages issue 54 found split on whitespace (Cantonese,
# Wu, Khmer, Lao, Myanmar, Tibetan, Amharic with ፡) all appear.
TEXTS = {
    "eng_Latn": ("Latn", lambda: leipzig("en")),
    "vie_Latn": ("Latn", lambda: leipzig("vi")),
    "swh_Latn": ("Latn", lambda: leipzig("sw")),
    "rus_Cyrl": ("Cyrl", lambda: leipzig("ru")),
    "kaz_Cyrl": ("Cyrl", lambda: leipzig("kk")),
    "arb_Arab": ("Arab", lambda: leipzig("ar")),
    "pes_Arab": ("Arab", lambda: leipzig("fa")),
    "heb_Hebr": ("Hebr", lambda: leipzig("he")),
    "ydd_Hebr": ("Hebr", lambda: tatoeba("yi")),
    "ell_Grek": ("Grek", lambda: leipzig("el")),
    "hye_Armn": ("Armn", lambda: leipzig("hy")),
    "kat_Geor": ("Geor", lambda: leipzig("ka")),
    "hin_Deva": ("Deva", lambda: leipzig("hi")),
    "ben_Beng": ("Beng", lambda: leipzig("bn")),
    "pan_Guru": ("Guru", lambda: leipzig("pa")),
    "guj_Gujr": ("Gujr", lambda: leipzig("gu")),
    "ory_Orya": ("Orya", lambda: tatoeba("or")),
    "tam_Taml": ("Taml", lambda: leipzig("ta")),
    "tel_Telu": ("Telu", lambda: leipzig("te")),
    "kan_Knda": ("Knda", lambda: tatoeba("kn")),
    "mal_Mlym": ("Mlym", lambda: tatoeba("ml")),
    "sin_Sinh": ("Sinh", lambda: tatoeba("si")),
    "div_Thaa": ("Thaa", lambda: country_names("dv")),
    "tha_Thai": ("Thai", lambda: leipzig("th")),
    "lao_Laoo": ("Laoo", lambda: tatoeba("lo")),
    "bod_Tibt": ("Tibt", lambda: spacy_examples("bo")),
    "mya_Mymr": ("Mymr", lambda: tatoeba("my")),
    "khm_Khmr": ("Khmr", lambda: tatoeba("km")),
    "amh_Ethi": ("Ethi", lambda: spacy_examples("am")),
    # Amharic is also written with the wordspace ፡ between words and no space (the sentences above in
    # that spelling), and Ge'ez is (pycountry's names, real ፡ between words): judged as Amharic, the
    # lid.176 language of the script
    "amh_Ethi/wordspace": ("Ethi", lambda: [s.replace(" ", "\u1361") for s in spacy_examples("am")]),
    "amh_Ethi/geez": ("Ethi", lambda: country_names("gez")),
    "cmn_Hani": ("Hani", lambda: leipzig("zh")),
    "yue_Hani": ("Hani", lambda: tatoeba("zh-Hant")),
    "wuu_Hani": ("Hani", lambda: tatoeba("zh-Hant")),
    "jpn_Jpan": ("Jpan", lambda: leipzig("ja")),
    "kor_Hang": ("Hang", lambda: leipzig("ko")),
}

# Measured with the segmenters here on the texts above: 1.6 (Korean morphemes, Japanese) to 10.1
# (Malayalam, agglutinative) characters per word. Whitespace runs of the unspaced scripts were 12-106
# (Thai 12, Khmer 14, Lao 26, Ge'ez 27 with ፡, Chinese 46, Tibetan 68), the failure of issue 54. A word
# has at least one character; 12 leaves Malayalam room while catching every whitespace-run failure
# but Myanmar's and Thai's 12 (their segmenters' means are 3.0 and 4.7, far from the bound).
MIN_AVG, MAX_AVG = 1.0, 12.0


@pytest.mark.parametrize("key", list(TEXTS))
def test_every_lid176_script_is_split_into_words_as_dedup_splits_it(key):
    code = key.split("/")[0]
    script, load = TEXTS[key]
    doc = "\n".join(load())
    assert text_script(doc) == script, key  # the text is in the script it stands for

    block = PerLanguageBlock("gopher_quality", {}, FOLDER).block_for(code)
    seg = block.segmenter  # None: English's own splitter (datatrove's words exactly)
    name = segmenter_name_for(code)
    assert (seg.name if seg is not None else "spacy:en") == name, key
    # dedup's `minhash.words: language` splits the scripts without spaces with its own segmenter:
    # the very object the filters use
    shingler = segmenter_of(code)
    if shingler is not None:
        assert shingler is seg, key

    words = SPLITTER.words(doc) if seg is None else seg.words(doc)
    n_kept, kept_chars, _ = SPLITTER.word_stats(words)  # Gopher's average: words that are not symbols
    avg = kept_chars / n_kept
    assert MIN_AVG <= avg <= MAX_AVG, (key, avg, words[:20])
    assert block.reason(doc) not in ("gopher_above_avg_threshold", "gopher_below_avg_threshold"), key


def test_every_shipped_language_file_names_its_languages_segmenter(tmp_path):
    """A shipped file's thresholds were measured in the words of the segmenter the preset splits with;
    a language's own file naming another one is refused when its block is built."""
    for path in sorted(FOLDER.glob("*_*.yaml")):
        s = settings_for(path.stem)
        assert s.segmenter == segmenter_name_for(path.stem), path.name
    folder = tmp_path / "settings"
    folder.mkdir()
    default = (FOLDER / "default.yaml").read_text(encoding="utf-8")
    (folder / "default.yaml").write_text(default, encoding="utf-8")
    # a Khmer file derived with whitespace words: its word-length bounds mean nothing in clusters
    (folder / "khm_Khmr.yaml").write_text(default.replace("language: default", "language: khm_Khmr"))
    block = PerLanguageBlock("gopher_quality", {}, folder)
    with pytest.raises(ConfigError, match=r"khm_Khmr\.yaml: segmenter: 'whitespace'.*'clusters'"):
        block.block_for("khm_Khmr")
    assert block.block_for("lao_Laoo").segmenter.name == "clusters"  # default.yaml's field not applied


def test_segmenters_without_spacy_name_the_pip_line(tmp_path):
    """Without spaCy installed (an environment whose site-packages lacks it, in a subprocess), every
    segmenter built on spaCy fails with the exact `pip install` line, not a KeyError."""
    import spacy

    site = Path(spacy.__file__).parents[1]
    farm = tmp_path / "site"
    farm.mkdir()
    for entry in site.iterdir():
        if entry.name.split("-")[0].split(".")[0].lower() != "spacy":
            (farm / entry.name).symlink_to(entry)
    script = textwrap.dedent(
        """
        import importlib.util
        assert importlib.util.find_spec("spacy") is None
        from curation.filters.segment import get_segmenter
        for name in ("whitespace", "clusters", "spacy:ru", "pyvi"):
            try:
                get_segmenter(name)
            except ImportError as e:
                print(name, "|", e)
        """
    )
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{farm}{os.pathsep}{repo}"}
    r = subprocess.run(
        [sys.executable, "-S", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(" | ") for line in r.stdout.strip().splitlines())
    assert set(lines) == {"whitespace", "clusters", "spacy:ru", "pyvi"}, r.stdout
    for name, message in lines.items():
        assert message == f"word segmenter {name!r} needs spacy: pip install spacy==3.8.18", message


# --- input bounds (issue 54 defect 3) ---------------------------------------------------------------


def long_page(iso1: str, chars: int) -> str:
    """A real page of at least `chars` characters without repeated lines: each line two Leipzig
    sentences of the language, paired differently every round (a repeated line would be dropped by
    the line rules before any word is split, hiding the cost)."""
    sents = leipzig(iso1, 10_000)
    lines, size, k = [], 0, 0
    while size < chars:
        line = sents[k % len(sents)] + " " + sents[(k * 7 + k // len(sents) + 3) % len(sents)]
        lines.append(line)
        size, k = size + len(line) + 1, k + 1
    return "\n".join(lines)


class CountingKiwi(KiwiSegmenter):
    """kiwi itself, recording how many characters each library call is given (the work done)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def _words(self, text: str) -> list[str]:
        self.calls.append(len(text))
        return super()._words(text)


def test_kiwi_is_called_on_pieces_where_its_cost_is_linear():
    """A 60,000-character real Korean page reaches kiwi in pieces of at most `max_call_chars`, cut at
    a line break or space, covering the text once: kiwi's time per character grew 2.7x from 20,000 to
    400,000 characters in one call, and is flat over pieces (segment.py's measurements)."""
    seg = CountingKiwi()
    page = long_page("ko", 60_000)
    words = seg.words(page)
    assert len(seg.calls) >= 6 and max(seg.calls) <= seg.max_call_chars
    assert sum(seg.calls) == len(page)  # every character once (the cuts fall on whitespace it keeps)
    # no character lost or doubled at a cut (a kiwi word may hold its text's space: "힐러리 스웽크")
    assert "".join("".join(words).split()) == "".join(page.split())
    # a piece's words are the words of the same lines in one call: the cuts are at line breaks
    first = page[: page.rfind("\n", 0, seg.max_call_chars) + 1]
    assert words[: len(seg.words(first))] == get_segmenter("kiwi").words(first)


# every segmenter the preset can choose, the language of its real text, and that text
SLOW_PATHS = {
    "kiwi": ("kor_Hang", "ko"),
    "pyvi": ("vie_Latn", "vi"),
    "jieba": ("cmn_Hani", "zh"),
    "sudachi": ("jpn_Jpan", "ja"),
    "pythainlp": ("tha_Thai", "th"),
    "spacy:ru": ("rus_Cyrl", "ru"),
    "whitespace": ("swh_Latn", "sw"),
}


@pytest.mark.parametrize("name", list(SLOW_PATHS))
def test_a_page_longer_than_its_segmenters_bound_is_a_counted_drop(name):
    """A real 2M-character page (the size that held a task 110 s in Korean, 21 s in Vietnamese) is
    dropped by every block that splits words, reason `segment_input_too_long`, before its segmenter
    is given a character; so is a page one character over the bound. The assertion is the work done,
    not seconds (CI machines are loaded)."""
    code, iso1 = SLOW_PATHS[name]
    seg = get_segmenter(name)
    assert segmenter_name_for(code) == name
    page = long_page(iso1, 2_000_000)
    over = page[: seg.max_chars + 1]
    for key in ("gopher_repetition", "gopher_quality", "fineweb_quality"):
        step = FilterStep(key, PerLanguageBlock(key, {}, FOLDER))
        for text in (page, over):
            words_module.forget_recent()
            result = step.process(Document(id="long", text=text, metadata={"lang": code}))
            assert isinstance(result, Drop), (key, name)
            assert result.reason == f"{key}:segment_input_too_long", (key, result.reason)
            assert (result.metric, result.value, result.op, result.threshold) == (
                "chars",
                len(text),
                ">",
                seg.max_chars,
            )
            assert not words_module._RECENT  # no words were split for it


def test_the_korean_page_at_the_bound_is_judged_on_bounded_calls():
    """At the bound a real Korean page is judged by its rules (not dropped for its length), with
    kiwi given at most `max_call_chars` per call and every character once."""
    seg = CountingKiwi()
    page = long_page("ko", seg.max_chars)[: seg.max_chars]
    rep = GopherRepetition(language="kor_Hang", **settings_for("kor_Hang").gopher_repetition.kwargs())
    rep.segmenter = seg
    words_module.forget_recent()
    assert rep.reason(page) != "segment_input_too_long"
    assert seg.calls and max(seg.calls) <= seg.max_call_chars and sum(seg.calls) == len(page)
