"""A language's settings measured on reference text in it (one job: derivation,
`python -m curation derive-language`). `derive_settings` scales FineWeb's English thresholds by how far
the language's `ReferenceStats` are from English's (ENGLISH_BASELINE), lists its stop words and measures
its LID threshold; `derive_from_files` streams the reference files (`Reference`) and takes the LID model
from its caller (`lid`): this package imports neither the LID stage nor the config, so no import circle
runs through it."""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.config import build_config
from core.errors import ConfigError, InputError
from core.safe_json import loads_checked
from curation.languages.files import iter_lines, open_regular
from curation.languages.fineweb2 import FW2_MIN_STOP_WORDS, FW2_SHARED_FINEWEB, FW2_SHARED_REPETITION
from curation.languages.lid_tables import lid_threshold
from curation.languages.schema import (
    ENGLISH_DUP_N_GRAMS,
    ENGLISH_TOP_N_GRAMS,
    LanguageSettings,
    check_language,
    check_segmenter,
    default_segmenter,
)

STOP_WORD_FREQUENCY = 0.008
"""A stop word is above 0.8% of the reference's word tokens (EPFL's method, FineWeb-2's lists)..."""
STOP_WORD_FALLBACK = 0.003
"""... or above 0.3% when 0.8% gives fewer than MIN_STOP_WORDS_LISTED."""
MIN_STOP_WORDS_LISTED = 8


RATIO_CLIP = (0.5, 2.0)
"""How far a language's threshold may move from English's: a freak reference cannot switch a
filter off (x100) or make it drop everything (x0.01)."""


MAX_DOC_CHARS = 4 << 20
"""A plain-text document ends here if no blank line (or --lines-per-doc) ended it before: every
statistic is a rate over lines, so where a long block is cut changes nothing but the count."""
MAX_REFERENCE_LINES = 1_000_000
"""Non-empty lines `derive-language` reads by default (`--max-lines`): Leipzig's 1M-sentence corpora."""
MAX_REFERENCE_CHARS = 512 << 20
"""Characters read at most, whatever the line count: with the line cap, what bounds the run's memory."""


@dataclass(frozen=True, slots=True)
class ReferenceStats:
    """Statistics of a reference text that do not depend on how it is cut into documents: each is a
    rate over all its words, characters or lines, so 1,000 sentences grouped by 20 and 100 Wikipedia
    articles of one language give about the same values."""

    words: int
    """Non-whitespace tokens of the segmenter (punctuation included, as Gopher counts them)."""
    chars_per_word: float
    """Characters of the text (spaces and newlines included) per token."""
    token_length: float
    """Mean characters of a token (punctuation included): what an n-gram of them measures."""
    mean_word_length: float
    """Mean characters of the tokens with a non-punctuation character (Gopher's average's words)."""
    alpha_word_share: float
    """Share of tokens with a letter (Gopher's max_non_alpha_words_ratio's statistic)."""
    line_punct_share: float
    """Share of prose lines (PROSE_LINE_WORDS tokens or more) ending in datatrove's terminal
    punctuation: headings and list items vary with the genre of the reference, not the language."""

    def ngram_inflation(self, n: int) -> float:
        """Characters datatrove counts for an n-gram (its tokens joined by spaces) per character it
        covers in the text. Over 1 where the text has no spaces (jieba's Chinese tokens): there the
        same repetition reads as a larger share of the text, which is why FineWeb-2's Chinese n-gram
        fractions are above English's (cmn_Hani top 2-gram 0.256: 0.2 x this ratio gives 0.26)."""
        return (n * self.token_length + n - 1) / (n * self.chars_per_word)


PROSE_LINE_WORDS = 10

# Measured by `reference_stats` with the eng_Latn segmenter on English Wikipedia (the 105 articles
# of quality/enwiki_sample_articles.jsonl; tests/curation/test_language_settings.py recomputes them):
# English's side of every ratio in `derive_settings`.
ENGLISH_BASELINE = ReferenceStats(
    words=547536,
    chars_per_word=5.4371,
    token_length=4.5636,
    mean_word_length=5.1454,
    alpha_word_share=0.8389,
    line_punct_share=0.7731,
)


def _has_letter(word: str) -> bool:
    return any(unicodedata.category(c).startswith("L") for c in word)


def reference_stats(documents: Iterable[str], words_of) -> ReferenceStats:
    """`words_of(text) -> list[str]` is the language's segmenter; documents are its reference text."""
    from datatrove.utils.text import PUNCTUATION_SET, TERMINAL_PUNCTUATION

    terminal = tuple(TERMINAL_PUNCTUATION)
    n_words = n_alpha = word_chars = n_kept = kept_chars = lines = punct_lines = chars = 0
    for text in documents:
        chars += len(text)
        for line in text.split("\n"):  # a newline ends every token: segmenting by line is the same
            words = [w for w in words_of(line) if w.strip()]
            n_words += len(words)
            word_chars += sum(len(w) for w in words)
            n_alpha += sum(1 for w in words if any(c.isalpha() for c in w))  # Gopher's: str.isalpha
            kept = [w for w in words if any(c not in PUNCTUATION_SET for c in w)]
            n_kept += len(kept)
            kept_chars += sum(len(w) for w in kept)
            if len(words) >= PROSE_LINE_WORDS:
                lines += 1
                punct_lines += line.strip().endswith(terminal)
    if not n_kept:
        raise InputError("the reference has no words")
    if not lines:
        raise InputError(f"the reference has no line of {PROSE_LINE_WORDS} words or more")
    return ReferenceStats(
        words=n_words,
        chars_per_word=chars / n_words,
        token_length=word_chars / n_words,
        mean_word_length=kept_chars / n_kept,
        alpha_word_share=n_alpha / n_words,
        line_punct_share=punct_lines / lines,
    )


def stop_words(documents: Iterable[str], words_of) -> tuple[str, ...]:
    """Words above 0.8% of the reference's word tokens, or 0.3% if that gives fewer than 8, most
    frequent first. Whitespace and tokens without a letter (punctuation, symbols, numbers) are not
    words: they are neither counted nor listed. Case is kept: Gopher matches words as they are."""
    counts: Counter[str] = Counter()
    for text in documents:
        for line in text.split("\n"):  # a newline ends every token (reference_stats): one line at a time
            counts.update(w for w in words_of(line) if w.strip() and _has_letter(w))
    total = sum(counts.values())
    if not total:
        return ()
    ranked = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    for share in (STOP_WORD_FREQUENCY, STOP_WORD_FALLBACK):
        words = [w for w in ranked if counts[w] / total > share]
        if len(words) >= MIN_STOP_WORDS_LISTED:
            return tuple(words)
    return tuple(words)


def r3(x: float) -> float:
    return round(x, 3)


def _ratio(value: float, english: float, lo: float = RATIO_CLIP[0]) -> float:
    return min(max(value / english, lo), RATIO_CLIP[1]) if english > 0 else 1.0


def derive_settings(
    code: str,
    documents: Iterable[str],
    lid_scores: Sequence[float],
    segmenter: str,
    words_of,
    source: str,
    baseline: ReferenceStats = ENGLISH_BASELINE,
) -> LanguageSettings:
    """A language's settings from its reference text.

    - lid_threshold: `lid_threshold(lid_scores)`, the scores of the reference lines whose top LID
      code is the language.
    - stop words: `stop_words`; min_stop_words 2 (FineWeb-2), null when fewer than 2 were found.
    - the thresholds: FineWeb's English value scaled by how far the language's statistic is from
      English's (`ReferenceStats`, English's in `baseline`), the ratio clipped to RATIO_CLIP:
      * min/max_avg_word_length: 3 and 10 x mean word length / English's (words of 2x the
        characters: bounds of 2x);
      * max_non_alpha_words_ratio: 0.8 x share of words with a letter / English's (capped at 1);
      * line_punct_thr: 0.12 x share of lines ending in terminal punctuation / English's, with no
        lower clip (Thai, which ends sentences with a space, gets ~0: the rule is off);
      * top_n_grams and dup_n_grams: English's fraction x `ngram_inflation(n)` / English's: the
        fractions are of characters, and datatrove counts an n-gram's characters joined by spaces;
      * new_line_ratio (newlines per word): 0.3 x characters per word / English's: the same layout
        (lines of so many characters) holds fewer words in a language of longer words;
      * dup_line_frac 0.3 (English's: duplicated lines are layout, not language), and FineWeb-2's
        shared settings (FW2_SHARED_*): paragraph rules off, short_line_thr 999, char_duplicates 0.1.
    Why not mean ± k·std of per-document values (the EPFL precursor's): the spread of a per-document
    average depends on how long the reference's documents are (20 sentences or whole articles), so
    the same language would get different bounds from different cuts of the same text; the shares
    above do not, and English's own reference gives FineWeb's English values back.
    """
    if not baseline.words:
        raise ConfigError("the English baseline statistics are not set (ENGLISH_BASELINE)")
    stats = reference_stats(documents, words_of)
    words = stop_words(documents, words_of)
    wl = _ratio(stats.mean_word_length, baseline.mean_word_length)

    def grams(english: tuple[tuple[int, float], ...]) -> list[tuple[int, float]]:
        return [
            (n, r3(f * _ratio(stats.ngram_inflation(n), baseline.ngram_inflation(n)))) for n, f in english
        ]

    return build_config(
        LanguageSettings,
        {
            "language": code,
            "source": source,
            "lid_threshold": lid_threshold(lid_scores),
            "segmenter": segmenter,
            "gopher_repetition": {
                **FW2_SHARED_REPETITION,
                "dup_line_frac": 0.3,
                "top_n_grams": grams(ENGLISH_TOP_N_GRAMS),
                "dup_n_grams": grams(ENGLISH_DUP_N_GRAMS),
            },
            "gopher_quality": {
                "min_avg_word_length": r3(3 * wl),
                "max_avg_word_length": r3(10 * wl),
                "max_non_alpha_words_ratio": r3(
                    min(0.8 * _ratio(stats.alpha_word_share, baseline.alpha_word_share), 1.0)
                ),
                "min_stop_words": FW2_MIN_STOP_WORDS if len(words) >= FW2_MIN_STOP_WORDS else None,
                "stop_words": words,
            },
            "fineweb_quality": {
                **FW2_SHARED_FINEWEB,
                # no lower clip: a script whose lines end without datatrove's punctuation (Thai) turns
                # the rule off, as FineWeb-2 did (tha_Thai: 0.0)
                "line_punct_thr": r3(0.12 * _ratio(stats.line_punct_share, baseline.line_punct_share, 0.0)),
                "new_line_ratio": r3(0.3 * _ratio(stats.chars_per_word, baseline.chars_per_word)),
            },
        },
        source,
    )


class Reference:
    """The documents of reference files, read again on every pass and never held whole (a reference
    used to take ~13x its size in memory): a `.jsonl` file's records' `text`; a text file's blocks
    separated by blank lines, or, with `lines_per_doc`, every N non-empty lines (a one-sentence-per-
    line corpus such as Leipzig's). At most `max_lines` non-empty lines and MAX_REFERENCE_CHARS
    characters are read; `cut` says whether the files had more. `documents` and `lines` count a
    whole pass."""

    def __init__(
        self,
        paths: Sequence[str | Path],
        lines_per_doc: int | None = None,
        max_lines: int = MAX_REFERENCE_LINES,
    ) -> None:
        self.paths = [Path(p) for p in paths]
        self.lines_per_doc, self.max_lines = lines_per_doc, max_lines
        self.documents = self.lines = 0
        self.cut = False

    def __iter__(self) -> Iterator[str]:
        lines = chars = docs = 0
        cut = False
        for path in self.paths:
            for doc, n in self._documents(path):
                if lines + n > self.max_lines or chars + len(doc) > MAX_REFERENCE_CHARS:
                    cut = True
                    break
                lines, chars, docs = lines + n, chars + len(doc), docs + 1
                yield doc
            if cut:
                break
        self.documents, self.lines, self.cut = docs, lines, cut
        if not docs:
            raise InputError(f"no text in {', '.join(map(str, self.paths))}")

    def _documents(self, path: Path) -> Iterator[tuple[str, int]]:
        """(document, its non-empty lines) of one file."""
        if path.suffix == ".jsonl":
            for i, line in iter_lines(path):
                if not line.strip():
                    continue
                record = loads_checked(
                    line, f"{path}:{i}"
                )  # outside JSON: bounded, finite, no duplicate keys
                text = record.get("text") if isinstance(record, dict) else None
                if not isinstance(text, str):
                    raise InputError(f"{path}:{i}: a record needs a string `text`")
                if text.strip():
                    yield text, sum(1 for s in text.splitlines() if s.strip())
            return
        block: list[str] = []
        size = 0
        for _, line in iter_lines(path):
            line = line.strip()
            ends = not line if not self.lines_per_doc else False
            if line:
                block.append(line)
                size += len(line) + 1
            if block and (ends or len(block) == self.lines_per_doc or size >= MAX_DOC_CHARS):
                yield "\n".join(block), len(block)
                block, size = [], 0
        if block:
            yield "\n".join(block), len(block)

    def non_empty_lines(self) -> Iterator[str]:
        return (s.strip() for d in self for s in d.splitlines() if s.strip())


def read_reference(
    paths: Sequence[str | Path], lines_per_doc: int | None = None, max_lines: int = MAX_REFERENCE_LINES
) -> list[str]:
    """The documents of `Reference(paths, lines_per_doc, max_lines)` as a list (small references)."""
    return list(Reference(paths, lines_per_doc, max_lines))


def lid_scores(code: str, lines: Iterable[str], lid: Any) -> list[float]:
    """LID probabilities of the `lines` whose top code is `code`; `lid` is curation.filters.langid's
    LanguageIdentifier (the caller builds it: this module, which the config reads, imports neither
    the LID stage nor the config, so no import circle runs through it)."""
    scores = []
    for line in lines:
        top, score = lid.predict(line)
        if top == code:
            scores.append(score)
    return scores


def derive_from_files(
    code: str,
    paths: Sequence[str | Path],
    lines_per_doc: int | None = None,
    segmenter: str | None = None,
    *,
    lid: Any,
    max_lines: int = MAX_REFERENCE_LINES,
) -> LanguageSettings:
    """`derive_settings` on reference files (`Reference`: streamed, at most `max_lines` non-empty
    lines); LID runs on every non-empty line."""
    from curation.filters.segment import get_segmenter

    check_language("--lang", code)
    name = segmenter or default_segmenter(code)
    check_segmenter(name)
    for p in paths:  # a FIFO or device would block the first pass forever: refused before any work
        open_regular(p).close()
    docs = Reference(paths, lines_per_doc, max_lines)
    scores = lid_scores(code, docs.non_empty_lines(), lid)
    how = f", {lines_per_doc} lines a document" if lines_per_doc else ""
    cut = f", the first {docs.lines:,} non-empty lines" if docs.cut else ""
    source = f"derived from {', '.join(Path(p).name for p in paths)} ({docs.documents} documents{how}{cut})"
    return derive_settings(code, docs, scores, name, get_segmenter(name).words, source)
