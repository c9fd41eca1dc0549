"""Per-document text statistics as quality signals: length, and what the curation filters measure.

The Gopher, C4 and FineWeb filters (curation/filters/text.py) compute these numbers and compare
each with one threshold to drop a document; a data team also asks how well each *ranks* documents
the way people do (`classifiers evaluate --signal statistics`, bench/classifiers/quality_signals.py).
So the same statistics are exposed here, one float per document, computed with the filters' own
parts (`curation.filters.words`: spaCy's word split as datatrove does it, the repeated n-gram kernel;
`C4Quality.kept_lines`; FineWeb's terminal punctuation) and the filters' definitions: same
splits, numerators and denominators, so `stat > threshold` is exactly the filter's rule
(tests/classifiers/test_evaluate_signals.py checks each statistic that one rule thresholds against
that rule on real documents; n-gram sizes 2, 4, 5 and 10 stand for the others).

Each statistic says, a priori, which way is better: the way its filter's rule points (a filter
that drops documents *above* a threshold makes lower better). Two are bands in the filter
(Gopher's word count 50-100,000 and mean word length 3-10): here the side that web junk falls on
more often is called better (more words; longer words, against runs of numbers and symbols). The
direction is never chosen from the labels, which would bias every AUC upwards; a statistic whose
AUC comes out under 0.5 points the other way on that labelled set.

A statistic that has no value for a document (a ratio over zero words) is NaN, and `evaluate`
leaves that document out of that signal's AUC (its `n` says how many were used).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from functools import cache

import numpy as np

from curation.filters.text import duplicates

# Gopher's n-gram sizes and stop words as datatrove's GopherRepetitionFilter / GopherQualityFilter
# default them (the same tuples as curation/filters/text.py's defaults).
TOP_NS = (2, 3, 4)
DUP_NS = (5, 6, 7, 8, 9, 10)
STOP_WORDS = frozenset(("the", "be", "to", "of", "and", "that", "have", "with"))

_PARAGRAPH_SPLIT = re.compile(r"\n{2,}")  # GopherRepetition's paragraphs
_LINE_SPLIT = re.compile(r"\n+")  # GopherRepetition's lines


@dataclass(frozen=True)
class Statistic:
    name: str
    higher_is_better: bool
    help: str


def _stats() -> dict[str, Statistic]:
    rows = [
        ("length_chars", True, "characters of the text"),
        ("gopher_dup_para_frac", False, "repeated paragraphs / paragraphs (GopherRepetition dup_para_frac)"),
        ("gopher_dup_para_char_frac", False, "characters in repeated paragraphs / characters"),
        ("gopher_dup_line_frac", False, "repeated lines / lines (dup_line_frac)"),
        ("gopher_dup_line_char_frac", False, "characters in repeated lines / characters"),
        *(
            (f"gopher_top_{n}_gram_frac", False, f"characters of the top {n}-gram / characters")
            for n in TOP_NS
        ),
        *(
            (f"gopher_dup_{n}_gram_frac", False, f"characters in repeated {n}-grams / characters")
            for n in DUP_NS
        ),
        ("gopher_words", True, "words that are not only symbols (GopherQuality min/max_doc_words)"),
        ("gopher_mean_word_length", True, "their mean length (min/max_avg_word_length)"),
        ("gopher_hash_ratio", False, "'#' per word (max_symbol_word_ratio)"),
        ("gopher_ellipsis_ratio", False, "'...' and '…' per word (max_symbol_word_ratio)"),
        ("gopher_bullet_lines_frac", False, "lines starting with a bullet (max_bullet_lines_ratio)"),
        ("gopher_ellipsis_lines_frac", False, "lines ending in an ellipsis (max_ellipsis_lines_ratio)"),
        ("gopher_alpha_words_frac", True, "words with a letter / words (max_non_alpha_words_ratio)"),
        ("gopher_stop_words", True, "distinct stop words present (min_stop_words)"),
        ("c4_kept_lines_frac", True, "lines C4's line rules keep / non-empty lines"),
        ("c4_sentences", True, "sentences in those lines (min_num_sentences)"),
        ("fineweb_line_punct_ratio", True, "lines ending in terminal punctuation (line_punct_thr)"),
        ("fineweb_short_line_ratio", False, "lines of <= 30 characters (short_line_thr)"),
        ("fineweb_char_dup_ratio", False, "characters in repeated lines / non-newline characters"),
        ("fineweb_list_ratio", False, "newlines per word (new_line_ratio)"),
    ]
    return {name: Statistic(name, better, help) for name, better, help in rows}


STATISTICS: dict[str, Statistic] = _stats()
"""Every statistic by name, in the order tables list them."""


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


@cache
def _c4_lines():
    """C4's line rules alone: the page-level drops (lorem ipsum, curly bracket, too few sentences) off,
    so `kept_lines` returns the lines the filter would keep on any page."""
    from curation.filters.text import C4Quality

    return C4Quality(filter_lorem_ipsum=False, filter_curly_bracket=False, min_num_sentences=-1)


@cache
def _fineweb_stop_chars() -> tuple[str, ...]:
    from curation.filters.text import FineWebQuality

    return FineWebQuality().stop_chars


def _repetition(text: str, words: list[str]) -> dict[str, float]:
    from curation.filters.words_kernels import ngram_chars

    n_chars = len(text)
    paragraphs = _PARAGRAPH_SPLIT.split(text.strip())
    para_dups, para_chars = duplicates(paragraphs)
    lines = _LINE_SPLIT.split(text)
    line_dups, line_chars = duplicates(lines)
    out = {
        "gopher_dup_para_frac": para_dups / len(paragraphs),
        "gopher_dup_para_char_frac": para_chars / n_chars,
        "gopher_dup_line_frac": line_dups / len(lines),
        "gopher_dup_line_char_frac": line_chars / n_chars,
    }
    top, dup = ngram_chars(words, TOP_NS, DUP_NS)
    # A text shorter than n words has no n-gram (the kernel's -1): nothing of it is repeated.
    out.update({f"gopher_top_{n}_gram_frac": max(int(c), 0) / n_chars for n, c in zip(TOP_NS, top)})
    out.update({f"gopher_dup_{n}_gram_frac": int(c) / n_chars for n, c in zip(DUP_NS, dup)})
    return out


def _gopher_quality(text: str, words: list[str]) -> dict[str, float]:
    from curation.filters.words import SPLITTER

    n_words = len(words)
    n_kept, kept_chars, n_alpha = SPLITTER.word_stats(words)
    lines = text.splitlines()
    return {
        "gopher_words": float(n_kept),
        "gopher_mean_word_length": _ratio(kept_chars, n_kept),
        "gopher_hash_ratio": _ratio(text.count("#"), n_words),
        "gopher_ellipsis_ratio": _ratio(text.count("...") + text.count("…"), n_words),
        "gopher_bullet_lines_frac": _ratio(sum(s.lstrip().startswith(("•", "-")) for s in lines), len(lines)),
        "gopher_ellipsis_lines_frac": _ratio(
            sum(s.rstrip().endswith(("...", "…")) for s in lines), len(lines)
        ),
        "gopher_alpha_words_frac": _ratio(n_alpha, n_words),
        "gopher_stop_words": float(len(STOP_WORDS.intersection(words))),
    }


def _c4(text: str) -> dict[str, float]:
    from curation.filters.words import SPLITTER

    kept, _ = _c4_lines().kept_lines(text)
    non_empty = sum(1 for line in text.splitlines() if line.strip())
    return {
        "c4_kept_lines_frac": _ratio(len(kept), non_empty),
        "c4_sentences": float(sum(SPLITTER.sentence_count(line, sys.maxsize) for line in kept)),
    }


def _fineweb(text: str, words: list[str]) -> dict[str, float]:
    lines = [line for line in text.split("\n") if line.strip() != ""]
    stop_chars = _fineweb_stop_chars()
    return {
        "fineweb_line_punct_ratio": _ratio(sum(line.endswith(stop_chars) for line in lines), len(lines)),
        "fineweb_short_line_ratio": _ratio(sum(len(line) <= 30 for line in lines), len(lines)),
        "fineweb_char_dup_ratio": _ratio(duplicates(lines)[1], len(text) - text.count("\n")),
        "fineweb_list_ratio": _ratio(text.count("\n"), len(words)),
    }


def text_statistics(text: str) -> dict[str, float]:
    """Every statistic of STATISTICS for one text (NaN where one is undefined, e.g. no words)."""
    if not text or not text.strip():
        return dict.fromkeys(STATISTICS, math.nan) | {"length_chars": float(len(text or ""))}
    from curation.filters.words import SPLITTER

    words = SPLITTER.words(text)
    return {
        "length_chars": float(len(text)),
        **_repetition(text, words),
        **_gopher_quality(text, words),
        **_c4(text),
        **_fineweb(text, words),
    }


def statistic_columns(texts: list[str], names: list[str]) -> dict[str, np.ndarray]:
    """{name: float64 array over `texts`} for the statistics named (all computed once per text)."""
    out = {name: np.empty(len(texts), dtype=np.float64) for name in names}
    for i, text in enumerate(texts):
        stats = text_statistics(text)
        for name in names:
            out[name][i] = stats[name]
    return out
