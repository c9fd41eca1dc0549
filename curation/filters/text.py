"""Our Gopher repetition, Gopher quality, C4 quality and FineWeb quality filters: datatrove's rules, faster.

Each class takes the keyword arguments of the datatrove block of the same rules (datatrove 0.10.1,
datatrove/pipeline/filters/: GopherRepetitionFilter, GopherQualityFilter, C4QualityFilter,
FineWebQualityFilter), applies them in the same order and returns the same drop reasons, so a
config written for datatrove's block works unchanged and the funnel reads the same. They are the
default entries of the "filter" registry under the keys gopher_repetition, gopher_quality,
c4_quality and fineweb_quality (curation/filters/blocks.py); datatrove's blocks stay selectable as
`datatrove_<key>`.

Where the time goes and what we do instead (measured in bench/curation/filters.py):
- words: datatrove runs spaCy's tokenizer over the whole text; we tokenize each distinct
  whitespace-separated chunk once per process (curation/filters/words.py) and share the words between the
  two Gopher filters;
- repeated n-grams: datatrove joins and hashes every n-gram in Python; we count them in one numba
  kernel (curation/filters/words_kernels.py);
- C4's sentence count: datatrove builds a spaCy document per kept line; we replay the
  sentencizer's rule on the cached tokens, and stop counting once the minimum is reached;
- paragraph and line duplicates: Counter instead of a Python loop.
Parity with datatrove is tested per document on every shared WARC and the extraction eval sets
(tests/curation/test_filters_parity.py).

`language` (issue 43): English (`eng`, datatrove's default, or `eng_Latn`/`en`) keeps the path
above; any other code splits words with curation.filters.segment.segmenter_for(language) (jieba for
`cmn_Hani`, spaCy's class for `rus_Cyrl`, ...), and C4 counts a line's words and sentences with it
(datatrove's C4 counts whitespace runs, which a Chinese or Thai line has one of).

Evidence (issue 46): each rule that compares a measured value with a threshold is judged through
`core.stage.Rules`, so its Drop carries `metric`, `value`, `op`, `threshold` (`gopher_quality`'s
`gopher_enough_stop_words`: `stop_words 1 < 2`), and a rule passed records its value (annotate mode's
`evidence` column). The comparisons are the ones above, unchanged: the same documents are dropped for
the same reasons. The metrics, per block (the reason they can give in brackets):
- gopher_repetition: dup_para_frac, dup_para_char_frac, dup_line_frac, dup_line_char_frac (the reasons
  of the same names), top_<n>_gram_char_frac (top_<n>_gram), dup_<n>_gram_char_frac (duplicated_<n>_n_grams);
- gopher_quality: words (gopher_short_doc, gopher_long_doc), avg_word_length (gopher_below/above_avg_threshold),
  hash_word_ratio, ellipsis_word_ratio, bullet_lines_ratio, end_ellipsis_lines_ratio, alpha_words_ratio,
  stop_words (gopher_enough_stop_words: distinct stop words seen);
- c4_quality: sentences (too_few_sentences; counted up to the minimum, so a kept page records the minimum);
  lorem_ipsum and curly_bracket are matches, not measures: no metric;
- fineweb_quality: line_punct_ratio, short_line_ratio, char_dup_ratio, list_ratio.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections import Counter
from typing import Any

from core.errors import ConfigError
from core.stage import Document, DocumentStage, Drop, Rules, register
from curation.filters.segment import check_language
from curation.filters.words import ENGLISH, SPLITTER, analyse, sentence_count_words

# datatrove's defaults, by argument name (the same in every block that has them)
_GOPHER_TOP = ((2, 0.2), (3, 0.18), (4, 0.16))
_GOPHER_DUP = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))
_STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")

_PARAGRAPH_SPLIT = re.compile(r"\n{2,}")
_LINE_SPLIT = re.compile(r"\n+")


def duplicates(items: list[str]) -> tuple[int, int]:
    """(repeated elements, their characters): every occurrence after an element's first, as the
    Gopher and FineWeb blocks count them (classifiers/signals.py reports the same counts)."""
    counts = Counter(items)
    return len(items) - len(counts), sum(len(x) * (c - 1) for x, c in counts.items() if c > 1)


class _TextRules(DocumentStage, ABC):
    """A block whose rules read the text alone: a document is dropped for the first rule it fails.

    A block with a segmenter (any language but English) first drops a text longer than the
    segmenter's `max_chars` (`segment_input_too_long`, metric `chars`): no rule of the block runs,
    so no library call is made whose time grows past the page's budget (curation/filters/segment.py,
    docs/security-and-limits.md). English keeps datatrove's rules exactly: its cached splitter is
    linear and cheap (~1 us/char), and the reader's and extractor's size caps bound its input.
    """

    segmenter: Any = None

    def process(self, doc: Document) -> Document | Drop:
        drop = self._judge(doc.text, Rules(self))
        return doc if drop is None else drop

    def reason(self, text: str) -> str | None:
        """The drop reason of the first rule `text` fails (datatrove's), None when it passes them all."""
        drop = self._judge(text, Rules())
        return None if drop is None else drop.reason

    def _judge(self, text: str, rules: Rules) -> Drop | None:
        seg = self.segmenter
        if seg is not None and text and len(text) > seg.max_chars:
            # not Rules.check: a pass would add a `chars` value to every document's evidence
            return Drop(
                "segment_input_too_long",
                f"{len(text)} chars > {seg.max_chars} ({seg.name})",
                metric="chars",
                value=len(text),
                op=">",
                threshold=seg.max_chars,
            )
        return self.judge(text, rules)

    @abstractmethod
    def judge(self, text: str, rules: Rules) -> Drop | None:
        """The Drop of the first rule `text` fails, with its evidence; None when it passes them all."""


@register("filter", "gopher_repetition")
class GopherRepetition(_TextRules):
    """Gopher's repetition rules (Rae et al. 2021, table A1): duplicate paragraphs, lines and n-grams."""

    name = "gopher_repetition"

    def __init__(
        self,
        dup_line_frac: float | None = 0.3,
        dup_para_frac: float | None = 0.3,
        dup_line_char_frac: float | None = 0.2,
        dup_para_char_frac: float | None = 0.2,
        top_n_grams: Any = _GOPHER_TOP,
        dup_n_grams: Any = _GOPHER_DUP,
        language: str = ENGLISH,
    ) -> None:
        self.segmenter = check_language(language, "gopher_repetition")
        self.dup_line_frac, self.dup_para_frac = dup_line_frac, dup_para_frac
        self.dup_line_char_frac, self.dup_para_char_frac = dup_line_char_frac, dup_para_char_frac
        self.top_n_grams = tuple((int(n), float(f)) for n, f in top_n_grams)
        self.dup_n_grams = tuple((int(n), float(f)) for n, f in dup_n_grams)

    def judge(self, text: str, rules: Rules) -> Drop | None:
        if not text:
            return Drop("empty")
        n_chars = len(text)
        paragraphs = _PARAGRAPH_SPLIT.split(text.strip())
        dups, dup_chars = duplicates(paragraphs)
        if self.dup_para_frac and (
            drop := rules.check(
                "dup_para_frac", "dup_para_frac", dups / len(paragraphs), ">", self.dup_para_frac
            )
        ):
            return drop
        if self.dup_para_char_frac and (
            drop := rules.check(
                "dup_para_char_frac", "dup_para_char_frac", dup_chars / n_chars, ">", self.dup_para_char_frac
            )
        ):
            return drop
        lines = _LINE_SPLIT.split(text)
        dups, dup_chars = duplicates(lines)
        if self.dup_line_frac and (
            drop := rules.check("dup_line_frac", "dup_line_frac", dups / len(lines), ">", self.dup_line_frac)
        ):
            return drop
        if self.dup_line_char_frac and (
            drop := rules.check(
                "dup_line_char_frac", "dup_line_char_frac", dup_chars / n_chars, ">", self.dup_line_char_frac
            )
        ):
            return drop
        top, dup = analyse(text, self.segmenter).ngram_stats(
            tuple(n for n, _ in self.top_n_grams), tuple(n for n, _ in self.dup_n_grams)
        )
        for (n, frac), chars in zip(self.top_n_grams, top):
            # chars < 0: too few words for an n-gram, no rule to judge (datatrove's)
            if chars >= 0 and (
                drop := rules.check(f"top_{n}_gram", f"top_{n}_gram_char_frac", chars / n_chars, ">", frac)
            ):
                return drop
        for (n, frac), chars in zip(self.dup_n_grams, dup):
            if drop := rules.check(
                f"duplicated_{n}_n_grams", f"dup_{n}_gram_char_frac", chars / n_chars, ">", frac
            ):
                return drop
        return None


@register("filter", "gopher_quality")
class GopherQuality(_TextRules):
    """Gopher's quality rules (Rae et al. 2021): word count and length, symbols, bullets, stop words."""

    name = "gopher_quality"

    def __init__(
        self,
        min_doc_words: int | None = 50,
        max_doc_words: int | None = 100000,
        min_avg_word_length: float | None = 3,  # an average: a fraction is meaningful
        max_avg_word_length: float | None = 10,
        max_symbol_word_ratio: float | None = 0.1,
        max_bullet_lines_ratio: float | None = 0.9,
        max_ellipsis_lines_ratio: float | None = 0.3,
        max_non_alpha_words_ratio: float | None = 0.8,
        min_stop_words: int | None = 2,
        stop_words: list[str] | None = None,
        language: str = ENGLISH,
    ) -> None:
        self.segmenter = check_language(language, "gopher_quality")
        self.min_doc_words, self.max_doc_words = min_doc_words, max_doc_words
        self.min_avg_word_length, self.max_avg_word_length = min_avg_word_length, max_avg_word_length
        self.max_symbol_word_ratio = max_symbol_word_ratio
        self.max_bullet_lines_ratio, self.max_ellipsis_lines_ratio = (
            max_bullet_lines_ratio,
            max_ellipsis_lines_ratio,
        )
        self.max_non_alpha_words_ratio = max_non_alpha_words_ratio  # datatrove's name: a minimum ratio
        self.min_stop_words = min_stop_words
        self.stop_words = frozenset(_STOP_WORDS if stop_words is None else stop_words)

    def _word_rules(self, text: str, rules: Rules) -> tuple[Drop | None, int, int, frozenset[str] | set[str]]:
        """The rules on words alone; also (words, words with a letter, stop words seen) for the rest."""
        words = analyse(text, self.segmenter).words
        n_words = len(words)
        n_kept, kept_chars, n_alpha = SPLITTER.word_stats(words)
        stops = self.stop_words.intersection(words)
        drop = None
        if self.min_doc_words:
            drop = rules.check("gopher_short_doc", "words", n_kept, "<", self.min_doc_words)
        if drop is None and self.max_doc_words:
            drop = rules.check("gopher_long_doc", "words", n_kept, ">", self.max_doc_words)
        if drop is not None:
            return drop, n_words, n_alpha, stops
        avg = kept_chars / n_kept if n_kept else math.nan  # numpy's mean of nothing is nan
        if self.min_avg_word_length:
            drop = rules.check(
                "gopher_below_avg_threshold", "avg_word_length", avg, "<", self.min_avg_word_length
            )
        if drop is None and self.max_avg_word_length:
            drop = rules.check(
                "gopher_above_avg_threshold", "avg_word_length", avg, ">", self.max_avg_word_length
            )
        return drop, n_words, n_alpha, stops

    def judge(self, text: str, rules: Rules) -> Drop | None:
        drop, n_words, n_alpha, stops = self._word_rules(text, rules)
        if drop is not None:
            return drop
        ratio = self.max_symbol_word_ratio
        if ratio and (
            drop := rules.check(
                "gopher_too_many_hashes", "hash_word_ratio", text.count("#") / n_words, ">", ratio
            )
        ):
            return drop
        if ratio and (
            drop := rules.check(
                "gopher_too_many_ellipsis",
                "ellipsis_word_ratio",
                (text.count("...") + text.count("…")) / n_words,
                ">",
                ratio,
            )
        ):
            return drop
        lines = text.splitlines()
        if self.max_bullet_lines_ratio:
            bullets = sum(1 for s in lines if s.lstrip().startswith(("•", "-")))
            if drop := rules.check(
                "gopher_too_many_bullets",
                "bullet_lines_ratio",
                bullets / len(lines),
                ">",
                self.max_bullet_lines_ratio,
            ):
                return drop
        if self.max_ellipsis_lines_ratio:
            ellipses = sum(1 for s in lines if s.rstrip().endswith(("...", "…")))
            if drop := rules.check(
                "gopher_too_many_end_ellipsis",
                "end_ellipsis_lines_ratio",
                ellipses / len(lines),
                ">",
                self.max_ellipsis_lines_ratio,
            ):
                return drop
        if self.max_non_alpha_words_ratio and (
            drop := rules.check(
                "gopher_below_alpha_threshold",
                "alpha_words_ratio",
                n_alpha / n_words,
                "<",
                self.max_non_alpha_words_ratio,
            )
        ):
            return drop
        if self.min_stop_words and (
            drop := rules.check(
                "gopher_enough_stop_words", "stop_words", len(stops), "<", self.min_stop_words
            )
        ):
            return drop
        return None


_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
_END_PUNCTUATION = (".", "?", "!", '"', "'")
_POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")


@register("filter", "c4_quality")
class C4Quality(_TextRules):
    """C4's line and page rules (Raffel et al. 2020, as tensorflow_datasets' c4_utils applies them).

    Lines that fail a line rule are set aside; a page with "lorem ipsum" or a curly bracket in a
    line it keeps, or too few sentences in those lines, is dropped. datatrove's block also
    rewrites the kept document to those lines; this project's pipeline never kept that edit (its
    datatrove adapter, core.stage.DatatroveFilter, hands the block a copy), so docs/ and the
    FineWeb rules after it see the text as extracted. `process` keeps that behaviour (a change
    of docs/ text is a decision of its own); `kept_text` is the edited text datatrove would keep.
    """

    name = "c4_quality"

    def __init__(
        self,
        split_paragraph: bool = True,
        remove_citations: bool = True,
        filter_no_terminal_punct: bool = True,
        min_num_sentences: int = 5,
        min_words_per_line: int = 3,
        max_word_length: int = 1000,
        filter_lorem_ipsum: bool = True,
        filter_javascript: bool = True,
        filter_curly_bracket: bool = True,
        filter_policy: bool = True,
        language: str = ENGLISH,
    ) -> None:
        self.segmenter = check_language(language, "c4_quality")
        if not split_paragraph:
            raise ConfigError(
                "filters.c4_quality: split_paragraph=false (spaCy sentences instead of lines) is datatrove's "
                "block only: use class: datatrove_c4_quality"
            )
        self.remove_citations, self.filter_no_terminal_punct = remove_citations, filter_no_terminal_punct
        self.min_num_sentences, self.min_words_per_line = min_num_sentences, min_words_per_line
        self.max_word_length = max_word_length
        self.filter_lorem_ipsum, self.filter_javascript = filter_lorem_ipsum, filter_javascript
        self.filter_curly_bracket, self.filter_policy = filter_curly_bracket, filter_policy

    def judge(self, text: str, rules: Rules) -> Drop | None:
        return self._kept_lines(text, rules)[1]

    def kept_text(self, text: str) -> str | None:
        """The text datatrove's block leaves in a document it keeps; None when it drops it."""
        kept, why = self.kept_lines(text)
        return "\n".join(kept).strip() if why is None else None

    def _line_kept(self, line: str, words: list[str]) -> bool:
        """The rules that remove one line (and keep the page)."""
        if self.max_word_length != -1 and any(len(w) > self.max_word_length for w in words):
            return False
        if self.filter_no_terminal_punct and (not line.endswith(_END_PUNCTUATION) or line.endswith("...")):
            return False
        return len(words) >= self.min_words_per_line

    def kept_lines(self, text: str) -> tuple[list[str], str | None]:
        """(kept lines, None), or ([], the reason the page is dropped)."""
        kept, drop = self._kept_lines(text, Rules())
        return kept, None if drop is None else drop.reason

    def _kept_lines(self, text: str, rules: Rules) -> tuple[list[str], Drop | None]:
        kept: list[str] = []
        sentences, need = 0, self.min_num_sentences
        for line in text.splitlines():
            line = line.strip()
            # datatrove's words of a line are whitespace runs; another language's are its segmenter's
            # (a Chinese line is one whitespace run, so min_words_per_line would drop every line)
            words = line.split() if self.segmenter is None else self.segmenter.words(line)
            if self.remove_citations and "[" in line:  # the regex needs a bracket; skip it when there is none
                line = _CITATION.sub("", line)
            if not self._line_kept(line, words):
                continue
            lower = line.lower()
            if self.filter_lorem_ipsum and "lorem ipsum" in lower:
                return [], Drop("lorem_ipsum")
            if self.filter_javascript and "javascript" in lower:
                continue
            if self.filter_curly_bracket and "{" in line:
                return [], Drop("curly_bracket")
            if self.filter_policy and any(p in lower for p in _POLICY):
                continue
            if need != -1 and sentences < need:
                if self.segmenter is None:
                    sentences += SPLITTER.sentence_count(line, need - sentences)
                else:
                    sentences += sentence_count_words(self.segmenter.words(line), need - sentences)
            kept.append(line)
        # need == -1: the rule is off (sentences >= 0 > -1 always passed it)
        if need != -1 and (drop := rules.check("too_few_sentences", "sentences", sentences, "<", need)):
            return [], drop
        return kept, None


@register("filter", "fineweb_quality")
class FineWebQuality(_TextRules):
    """FineWeb's own rules (Penedo et al. 2024): terminal punctuation, short lines, duplicates, lists."""

    name = "fineweb_quality"

    def __init__(
        self,
        line_punct_thr: float = 0.12,
        line_punct_exclude_zero: bool = False,
        stop_chars: tuple[str, ...] | None = None,
        short_line_thr: float = 0.67,
        short_line_length: int = 30,
        char_duplicates_ratio: float = 0.01,
        new_line_ratio: float = 0.3,
        language: str = ENGLISH,
    ) -> None:
        from datatrove.utils.text import TERMINAL_PUNCTUATION

        self.segmenter = check_language(language, "fineweb_quality")
        self.line_punct_thr, self.line_punct_exclude_zero = line_punct_thr, line_punct_exclude_zero
        self.stop_chars = tuple(stop_chars) if stop_chars is not None else tuple(TERMINAL_PUNCTUATION)
        self.short_line_thr, self.short_line_length = short_line_thr, short_line_length
        self.char_duplicates_ratio, self.new_line_ratio = char_duplicates_ratio, new_line_ratio

    def judge(self, text: str, rules: Rules) -> Drop | None:
        lines = [line for line in text.split("\n") if line.strip() != ""]
        if not lines:
            return Drop("empty")
        ratio = sum(1 for line in lines if line.endswith(self.stop_chars)) / len(lines)
        exempt = ratio == 0 and self.line_punct_exclude_zero  # no punctuation at all: not judged
        if not exempt and (
            drop := rules.check("line_punct_ratio", "line_punct_ratio", ratio, "<", self.line_punct_thr)
        ):
            return drop
        short = sum(1 for line in lines if len(line) <= self.short_line_length) / len(lines)
        if drop := rules.check("short_line_ratio", "short_line_ratio", short, ">", self.short_line_thr):
            return drop
        dup = duplicates(lines)[1] / (len(text) - text.count("\n"))
        if drop := rules.check("char_dup_ratio", "char_dup_ratio", dup, ">", self.char_duplicates_ratio):
            return drop
        newlines = text.count("\n") / len(analyse(text, self.segmenter).words)
        if drop := rules.check("list_ratio", "list_ratio", newlines, ">", self.new_line_ratio):
            return drop
        return None
