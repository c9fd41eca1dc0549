"""Our heuristic filters (curation/filters/text.py) at each rule's threshold edge, against datatrove's blocks.

Every rule is tested the same way: a generated text, the rule's statistic computed here from its
definition (datatrove's docstrings and the Gopher/C4/FineWeb papers; words from datatrove's own
split_into_words, the reference), then the threshold set exactly at the statistic (the rule keeps
the text: its comparison is strict) and one step past it (the rule drops it with its reason).
Both implementations must give the expected answer; the other rules are switched off with the
blocks' own arguments so the rule under test decides.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
from collections import Counter

import pytest

from core.errors import ConfigError
from core.stage import Document, Drop, build_stage
from curation.config import ExtractJobConfig, FiltersConfig
from curation.filters.blocks import HeuristicFilters
from curation.filters.text import C4Quality
from curation.filters.words import SPLITTER
from testkit.filter_off import OFF_FINEWEB, OFF_QUALITY, OFF_REPETITION

VOCAB = [
    "the",
    "of",
    "and",
    "to",
    "with",
    "that",
    "have",
    "be",
    "river",
    "stone",
    "market",
    "garden",
    "window",
    "letter",
    "morning",
]


def dt_words(text: str) -> list[str]:
    from datatrove.utils.text import split_into_words

    return split_into_words(text)


def sentence(rng: random.Random, n: int = 10) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n)).capitalize() + "."


def run_both(key: str, kwargs: dict, text: str) -> tuple[str | None, str | None]:
    """(our reason, datatrove's reason); None when kept."""
    out = []
    for spec in (key, f"datatrove_{key}"):
        stage = build_stage("filter", spec, dict(kwargs), f"filters.{key}", name=key)
        r = stage.process(Document(id="t", text=text))
        out.append(r.reason if isinstance(r, Drop) else None)
    return out[0], out[1]


def assert_edge(key: str, kwargs_at, text: str, at, past, reason: str) -> None:
    """Threshold `at`: not dropped for `reason`; threshold `past`: dropped for exactly `reason`."""
    ours, theirs = run_both(key, kwargs_at(at), text)
    assert ours == theirs and ours != reason, (ours, theirs)
    ours, theirs = run_both(key, kwargs_at(past), text)
    assert ours == theirs == reason, (ours, theirs)


def below(x: float) -> float:
    return math.nextafter(x, -math.inf)


def above(x: float) -> float:
    return math.nextafter(x, math.inf)


# -- Gopher quality ------------------------------------------------------------------------------


def _quality(**kw):
    return lambda thr: {**OFF_QUALITY, **{k: (thr if v is None else v) for k, v in kw.items()}}


def test_quality_word_count_edges():
    rng = random.Random(1)
    text = " ".join(sentence(rng) for _ in range(6))  # 60 words and 6 full stops (symbols)
    n = sum(1 for w in dt_words(text) if w != ".")
    assert_edge("gopher_quality", _quality(min_doc_words=None), text, n, n + 1, "gopher_short_doc")
    assert_edge("gopher_quality", _quality(max_doc_words=None), text, n, n - 1, "gopher_long_doc")


def test_quality_average_word_length_edges():
    rng = random.Random(2)
    text = " ".join(sentence(rng) for _ in range(6))
    kept = [w for w in dt_words(text) if w != "."]
    avg = sum(map(len, kept)) / len(kept)
    assert_edge(
        "gopher_quality",
        _quality(min_avg_word_length=None),
        text,
        avg,
        above(avg),
        "gopher_below_avg_threshold",
    )
    assert_edge(
        "gopher_quality",
        _quality(max_avg_word_length=None),
        text,
        avg,
        below(avg),
        "gopher_above_avg_threshold",
    )


@pytest.mark.parametrize(
    ("symbol", "reason"), [("#", "gopher_too_many_hashes"), ("…", "gopher_too_many_ellipsis")]
)
def test_quality_symbol_ratio_edges(symbol, reason):
    rng = random.Random(3)
    text = " ".join(sentence(rng) for _ in range(6)) + (" " + symbol) * 7
    ratio = text.count(symbol) / len(dt_words(text))
    assert_edge("gopher_quality", _quality(max_symbol_word_ratio=None), text, ratio, below(ratio), reason)


@pytest.mark.parametrize(
    ("make_line", "arg", "reason"),
    [
        (lambda s, i: f"  • {s}" if i % 3 else s, "max_bullet_lines_ratio", "gopher_too_many_bullets"),
        (
            lambda s, i: f"{s[:-1]}..." if i % 4 == 0 else s,
            "max_ellipsis_lines_ratio",
            "gopher_too_many_end_ellipsis",
        ),
    ],
)
def test_quality_line_ratio_edges(make_line, arg, reason):
    rng = random.Random(4)
    lines = [make_line(sentence(rng), i) for i in range(13)]
    text = "\n".join(lines)
    marked = [
        ln for ln in text.splitlines() if ln.lstrip().startswith(("•", "-")) or ln.rstrip().endswith("...")
    ]
    ratio = len(marked) / len(text.splitlines())
    assert_edge("gopher_quality", _quality(**{arg: None}), text, ratio, below(ratio), reason)


def test_quality_alpha_and_stop_word_edges():
    rng = random.Random(5)
    text = " ".join(sentence(rng) for _ in range(4)) + " 1999 2024 42 7" + " $ %"
    words = dt_words(text)
    ratio = sum(any(c.isalpha() for c in w) for w in words) / len(words)
    assert_edge(
        "gopher_quality",
        _quality(max_non_alpha_words_ratio=None),
        text,
        ratio,
        above(ratio),
        "gopher_below_alpha_threshold",
    )
    stops = len({"the", "of", "and", "to", "with", "that", "have", "be"} & set(words))
    assert_edge(
        "gopher_quality", _quality(min_stop_words=None), text, stops, stops + 1, "gopher_enough_stop_words"
    )


# -- Gopher repetition ---------------------------------------------------------------------------


def _repetition(**kw):
    return lambda thr: {**OFF_REPETITION, **{k: (thr if v is None else v) for k, v in kw.items()}}


def _dup(items: list[str]) -> tuple[int, int]:
    counts = Counter(items)
    return sum(c - 1 for c in counts.values()), sum(len(x) * (c - 1) for x, c in counts.items())


def test_repetition_paragraph_and_line_edges():
    rng = random.Random(6)
    paras = [sentence(rng) for _ in range(7)]
    paras += paras[:3]  # 3 repeated paragraphs of 10
    text = "\n\n".join(paras) + "\n" + paras[0] + "\n"  # and one more repeated line
    n_para, chars_para = _dup(text.strip().split("\n\n"))
    lines = [ln for ln in text.split("\n") if ln] + [
        ""
    ]  # re.split("\n+") leaves one "" after the final newline
    n_line, chars_line = _dup(lines)
    n = len(text)
    assert_edge(
        "gopher_repetition",
        _repetition(dup_para_frac=None),
        text,
        n_para / 10,
        below(n_para / 10),
        "dup_para_frac",
    )
    assert_edge(
        "gopher_repetition",
        _repetition(dup_para_char_frac=None),
        text,
        chars_para / n,
        below(chars_para / n),
        "dup_para_char_frac",
    )
    frac = n_line / len(lines)
    assert_edge(
        "gopher_repetition", _repetition(dup_line_frac=None), text, frac, below(frac), "dup_line_frac"
    )
    assert_edge(
        "gopher_repetition",
        _repetition(dup_line_char_frac=None),
        text,
        chars_line / n,
        below(chars_line / n),
        "dup_line_char_frac",
    )


def _top_chars(words: list[str], n: int) -> int:
    grams = Counter(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
    best = max(grams.values())
    return len(next(g for g, c in grams.items() if c == best)) * best  # first seen wins a tie


def _dup_chars(words: list[str], n: int) -> int:
    seen, i, chars = set(), 0, 0
    while i < len(words) - n + 1:
        gram = "".join(words[i : i + n])
        if gram in seen:
            chars, i = chars + len(gram), i + n
        else:
            seen.add(gram)
            i += 1
    return chars


@pytest.mark.parametrize("n", [2, 3, 4])
def test_repetition_top_ngram_edges(n):
    rng = random.Random(10 + n)
    # ties between n-grams of different lengths, so the first-seen rule decides the statistic
    text = " ".join(sentence(rng, 6) for _ in range(30))
    frac = _top_chars(dt_words(text), n) / len(text)
    assert_edge(
        "gopher_repetition",
        lambda t: {**OFF_REPETITION, "top_n_grams": ((n, t),)},
        text,
        frac,
        below(frac),
        f"top_{n}_gram",
    )


@pytest.mark.parametrize("n", [5, 7, 10])
def test_repetition_duplicated_ngram_edges(n):
    rng = random.Random(20 + n)
    base = [sentence(rng, 12) for _ in range(8)]
    text = " ".join(base + base[2:4] + ["ab c", "a bc"] * 3)  # "".join merges "ab c" and "a bc"
    frac = _dup_chars(dt_words(text), n) / len(text)
    assert frac > 0
    assert_edge(
        "gopher_repetition",
        lambda t: {**OFF_REPETITION, "dup_n_grams": ((n, t),)},
        text,
        frac,
        below(frac),
        f"duplicated_{n}_n_grams",
    )


# -- C4 ------------------------------------------------------------------------------------------


def test_c4_sentence_count_edge():
    # spaCy's sentencizer, counted by hand: a sentence starts at the first token after one of its
    # punctuation characters ("?!" is two of them: one start); the "..." token is not one of them
    # (a single-character list), so "Fourth" does not start a sentence: 2 + 2 + 2.
    lines = [
        "First one here. Second one follows!",
        "Is this third?! Yes it is...  Fourth starts here",
        "Fifth [1] and last. End",
    ]
    text = "\n".join(lines)
    sents = 6
    assert_edge(
        "c4_quality",
        lambda t: {"filter_no_terminal_punct": False, "min_num_sentences": t},
        text,
        sents,
        sents + 1,
        "too_few_sentences",
    )


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("Lorem ipsum dolor sit amet, consectetur.", "lorem_ipsum"),
        ("The set {a, b} is small here.", "curly_bracket"),
    ],
)
def test_c4_page_rules(line, reason):
    rng = random.Random(30)
    text = "\n".join([sentence(rng) for _ in range(6)] + [line])
    assert run_both("c4_quality", {}, text) == (reason, reason)
    assert run_both("c4_quality", {"filter_lorem_ipsum": False, "filter_curly_bracket": False}, text) == (
        None,
        None,
    )


def test_c4_line_rules_give_the_same_text():
    rng = random.Random(31)
    keep = [sentence(rng) for _ in range(6)]
    removed = [
        "Two words.",  # fewer than min_words_per_line
        "Please enable JavaScript in your browser now.",
        "Read our privacy policy before you go.",
        "A line without terminal punctuation here",
        "A line that trails off like this...",
        "Long " + "x" * 1001 + " word here.",
    ]
    text = "\n".join(keep[:3] + removed + ["See the note [12][edit] here [citation needed]."] + keep[3:])
    for kwargs in (
        {},
        {"filter_no_terminal_punct": False},
        {"max_word_length": 1001, "min_words_per_line": 2},
    ):
        ours = C4Quality(**kwargs).kept_text(text)
        assert ours == dt_c4_text(kwargs, text)
        assert "See the note  here ." in ours and "JavaScript" not in ours and "privacy" not in ours
        # the pipeline keeps the text as extracted, with either implementation (see C4Quality)
        for spec in ("c4_quality", "datatrove_c4_quality"):
            stage = build_stage("filter", spec, dict(kwargs), "filters.c4_quality")
            assert stage.process(Document(id="t", text=text)).text == text


def dt_c4_text(kwargs: dict, text: str) -> str:
    from datatrove.data import Document as DtDocument
    from datatrove.pipeline.filters import C4QualityFilter

    doc = DtDocument(text=text, id="t")
    assert C4QualityFilter(**kwargs).filter(doc) is True
    return doc.text


# -- FineWeb -------------------------------------------------------------------------------------


def _fineweb(key):
    return lambda thr: {**OFF_FINEWEB, key: thr}


def test_fineweb_edges():
    rng = random.Random(40)
    lines = [sentence(rng) for _ in range(6)] + ["short line", "another short one", sentence(rng)[:-1]] * 2
    lines += [lines[0], "", "  "]
    text = "\n".join(lines)
    nonblank = [ln for ln in text.split("\n") if ln.strip()]
    punct = sum(ln.endswith((".", "!", "?")) for ln in nonblank) / len(nonblank)
    short = sum(len(ln) <= 30 for ln in nonblank) / len(nonblank)
    dup = _dup(nonblank)[1] / len(text.replace("\n", ""))
    lists = text.count("\n") / len(dt_words(text))
    assert_edge("fineweb_quality", _fineweb("line_punct_thr"), text, punct, above(punct), "line_punct_ratio")
    assert_edge("fineweb_quality", _fineweb("short_line_thr"), text, short, below(short), "short_line_ratio")
    assert_edge("fineweb_quality", _fineweb("char_duplicates_ratio"), text, dup, below(dup), "char_dup_ratio")
    assert_edge("fineweb_quality", _fineweb("new_line_ratio"), text, lists, below(lists), "list_ratio")


def test_empty_and_blank_texts_agree():
    for text in ("", "\n\n", "   ", "#", "...", "\u2029x"):
        for key, kwargs in (("gopher_repetition", {}), ("c4_quality", {}), ("fineweb_quality", {})):
            ours, theirs = run_both(key, kwargs, text)
            assert ours == theirs, (key, repr(text), ours, theirs)


# -- words ---------------------------------------------------------------------------------------


def test_words_equal_spacy_on_hard_chunks():
    text = (
        "Don't can't won't gonna cannot U.S.A. e.g. 10km $5.00 (see: http://x.org/a?b=1) "
        "well-known 3-4 'quoted' «guillemets» :) <3 Mr. Smith's co-op, ... … --- #tag @user\tTab\u00a0nbsp "
        "中文句子。 Привет, мир! 1,000,000 A. IT. john."
    )
    assert SPLITTER.words(text) == dt_words(text)


def test_spacy_loads_without_torch_and_torch_still_imports_after():
    """A fresh worker's WordSplitter imports spaCy without torch (thinc would import it), tokenizes
    as spaCy with torch does (the dt_words parity above runs in a process where torch is loaded),
    and leaves torch importable for any later code."""
    code = (
        "import sys\n"
        "from curation.filters.words import WordSplitter\n"
        'w = WordSplitter(); words = w.words("Don\'t stop, U.S.A. e-mail 3.5km!")\n'
        "import thinc.compat\n"
        "print('torch' in sys.modules, thinc.compat.has_torch)\n"
        "import torch; torch.zeros(1)\n"
        "print(words)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    first, words = out.splitlines()
    assert first == "False False"
    assert words == str(dt_words("Don't stop, U.S.A. e-mail 3.5km!"))


def test_word_cache_starts_over_when_full(monkeypatch):
    from curation.filters import words

    rng = random.Random(50)
    text = " ".join(sentence(rng) for _ in range(20)) + " Don't stop, U.S.A."
    expected = dt_words(text)
    monkeypatch.setattr(words, "_CACHE_MAX", 5)  # smaller than the text's distinct chunks
    splitter = words.WordSplitter()
    assert splitter.words(text) == expected and splitter.words(text + " again.") == dt_words(text + " again.")


# -- configuration -------------------------------------------------------------------------------


def test_datatrove_blocks_stay_selectable():
    cfg = FiltersConfig(gopher_quality={"class": "datatrove_gopher_quality", "min_doc_words": 5})
    f = HeuristicFilters(cfg)
    assert type(f.steps[1].inner).__name__ == "GopherQualityFilter"
    assert type(f.steps[0].inner).__name__ == "GopherRepetition"
    with pytest.raises(ConfigError, match=r"filters\.gopher_quality\.min_doc_wordz is not an argument"):
        FiltersConfig(gopher_quality={"class": "datatrove_gopher_quality", "min_doc_wordz": 5})


def test_our_blocks_refuse_what_they_do_not_implement_before_spark():
    # any language code is taken (its segmenter splits the words); one that is no code is refused on load
    FiltersConfig(gopher_quality={"language": "fra"})
    with pytest.raises(
        ConfigError, match=r"filters\.gopher_quality: language: unknown language code 'french'"
    ):
        FiltersConfig(gopher_quality={"language": "french"})
    with pytest.raises(ConfigError, match="split_paragraph=false"):
        FiltersConfig(c4_quality={"split_paragraph": False})
    FiltersConfig(c4_quality={"class": "datatrove_c4_quality", "split_paragraph": False})


def test_fingerprint_names_the_implementation():
    ours = ExtractJobConfig.from_dict({})
    theirs = ExtractJobConfig.from_dict(
        {"filters": {"gopher_quality": {"class": "datatrove_gopher_quality"}}}
    )
    explicit = ExtractJobConfig.from_dict({"filters": {"gopher_quality": {"class": "gopher_quality"}}})
    assert ours.fingerprint() != theirs.fingerprint()
    assert ours.fingerprint() == explicit.fingerprint()
