"""The shared pre-pass of our heuristic filters: words, per-token facts and repeated n-grams.

datatrove's Gopher and FineWeb blocks split a text into words with spaCy's blank English
tokenizer (datatrove.utils.word_tokenizers.SpaCyTokenizer("en")), and its C4 block counts a line's
sentences with spaCy's `sentencizer` on the same tokens. We reproduce both exactly, faster:

* spaCy cuts a text into runs of whitespace and non-whitespace (str.isspace) and tokenizes each
  non-whitespace run ("chunk") on its own: prefixes, suffixes, infixes and special cases never
  look past the run (a special case spanning two runs would contain a space, and spaCy's rule
  lookup by span text then finds nothing). So the words of a text are the concatenation of the
  tokens of its chunks, and the tokens of a chunk can be cached: `WordSplitter` asks spaCy once
  per distinct chunk per process and afterwards costs one dict lookup per chunk. Whitespace tokens
  (runs other than one space) are dropped by datatrove (`strip_strings`), so words never see them.
  A chunk of letters only or digits only is one token unless spaCy has a special case for it
  (checked against spaCy on every chunk of the parity corpus): no spaCy call at all for it.
* Per-token facts the filters need (length, "has a non-punctuation character", "has a letter",
  spaCy's IS_PUNCT, "is a sentencizer punctuation character") are cached per distinct token;
  GopherQuality's sums over a document's words are numpy gathers over token ids.
* The repeated n-gram statistics of GopherRepetition are substring statistics of two strings:
  `" ".join(words)` (top n-grams compare words joined by spaces) and `"".join(words)`
  (duplicated n-grams compare words joined with nothing, so "ab c" and "a bc" are the same
  n-gram there, as in datatrove). Both are computed in one numba kernel: a polynomial hash of
  each n-gram's code points from prefix hashes finds candidates, comparing the code points
  confirms them, so the counts are exact. bench/curation/filters.py measures the kernel against the same
  statistics in plain Python (Counter of word tuples, a set of joined strings).

`analyse(text)` holds the pre-pass of the last two texts: in the extract job the four blocks see
the same text object one after the other, so they split it once.

Other languages (issue 43): `analyse(text, segmenter)` takes the words from a segmenter of
curation/filters/segment.py instead (jieba, Sudachi, ..., or a `WordSplitter(lang)` for a spaCy
language, cached per chunk like English but without English's letters-only shortcut); the n-gram
kernel and the per-token facts read words of any language. English stays on SPLITTER. This module
never imports segment.py (which builds on WordSplitter): the block's choice of segmenter is
segment.check_language, and the import-linter contract in pyproject.toml keeps it one way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import accumulate, chain
from typing import Any

import numpy as np

# datatrove's own language code for English (datatrove.utils.typeshelper.Languages.english);
# its tokenizer for that code is spaCy's blank "en" pipeline, the one reproduced here.
ENGLISH = "eng"
_CACHE_MAX = 1_000_000  # distinct chunks (or tokens) remembered per process before starting over


@dataclass(slots=True)
class TokenFacts:
    length: int
    non_symbol: bool  # a character outside datatrove's PUNCTUATION_SET (GopherQuality's "word")
    has_alpha: bool
    is_punct: bool  # spaCy's IS_PUNCT lexeme flag (the sentencizer's test)
    sent_punct: bool  # one of the sentencizer's punctuation characters


def _import_spacy_without_torch():
    """`import spacy`, without the torch import it drags in through thinc.

    thinc (spaCy's model library) imports torch when it is installed, to offer its PyTorch layers:
    1.5 of the 2.8 s that every Spark Python worker spent importing spaCy, for a blank English
    tokenizer that never touches torch. While spaCy loads, torch is marked absent (`sys.modules`
    entry None makes `import torch` raise ImportError, which thinc handles as "no torch"); the
    mark is removed right after, so torch imports normally for any later code in the process. When
    torch is already imported there is nothing to save and nothing is marked.
    """
    import sys

    mark = "torch" not in sys.modules
    if mark:
        sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        import spacy
    finally:
        if mark and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    return spacy


def _never(_chunk: str) -> None:
    return None


class WordSplitter:
    """spaCy's blank tokenization of a text (English unless `lang` names another spaCy language
    class with the standard rule-based tokenizer), spaCy asked once per distinct chunk."""

    def __init__(self, lang: str = "en") -> None:
        self.lang = lang
        # "letters or digits only is one token" was checked against English's rules only; other
        # languages ask spaCy for every new chunk, inside a memory zone so that the strings of
        # chunks spaCy saw once do not pile up in its vocabulary (our cache is the one that is kept)
        self._english = lang == "en"
        self._nlp = None
        self._is_punct: Any = None
        self._rules: frozenset[str] = frozenset()
        self._affixes: tuple[Any, Any, Any] = (_never, _never, _never)
        self._chunks: dict[str, tuple[str, ...]] = {}
        self._facts: dict[str, TokenFacts] = {}
        self._reset_ids()
        self._sent_chars: frozenset[str] = frozenset()
        self._symbols: frozenset[str] = frozenset()

    def load(self) -> None:
        if self._nlp is not None:
            return
        spacy = _import_spacy_without_torch()
        from datatrove.utils.text import PUNCTUATION_SET
        from spacy.lang.lex_attrs import is_punct  # spaCy's IS_PUNCT (English does not override it)
        from spacy.pipeline import Sentencizer

        self._nlp = spacy.blank(self.lang)
        self._is_punct = is_punct
        tok = self._nlp.tokenizer
        self._rules = frozenset(tok.rules)
        # a language without a pattern of one kind never matches one (spaCy skips it too)
        self._affixes = (
            tok.prefix_search or _never,
            tok.suffix_search or _never,
            tok.infix_finditer or (lambda _c: iter(())),
        )
        self._sent_chars = frozenset(Sentencizer.default_punct_chars)
        self._symbols = frozenset(PUNCTUATION_SET)

    def _add_chunks(self, chunks: set[str]) -> None:
        """Tokenize chunks not seen yet: letters only or digits only is one token unless spaCy has a
        special case for it (checked against spaCy on every chunk of the parity corpus); the rest
        go to spaCy in one call, separated by newlines so that no special case can span two."""
        self.load()
        hard = []
        if not self._english:
            self._add_chunks_other(chunks)
            return
        for c in chunks:
            if (c.isalpha() or c.isdecimal()) and c not in self._rules:
                self._chunks[c] = (c,)
            else:
                hard.append(c)
        if hard:
            self._tokenize_chunks(hard)

    def _tokenize_chunks(self, hard: list[str]) -> None:
        """spaCy over `hard` in one call, chunks joined by newlines (no special case spans two)."""
        ends = list(accumulate(len(c) + 1 for c in hard))  # chunk j ends before ends[j] - 1
        toks: list[list[str]] = [[] for _ in hard]
        j = 0
        for t in self._nlp.tokenizer("\n".join(hard)):
            if t.is_space:
                continue
            while t.idx >= ends[j]:
                j += 1
            toks[j].append(t.text)
        for c, ts in zip(hard, toks):
            self._chunks[c] = tuple(ts)

    def _add_chunks_other(self, chunks: set[str]) -> None:
        """Another language's class. A chunk that no special case names and in which none of the
        language's prefix, suffix and infix patterns matches is one token: that is spaCy's own
        algorithm (Tokenizer._split_affixes finds no affix, _attach_tokens no infix), asked of the
        same compiled patterns, without building a lexeme per new string (most of spaCy's time
        here). Every other chunk goes to spaCy, inside a memory zone so that its string store does
        not grow with each new chunk (the English path keeps its behaviour exactly)."""
        hard = []
        prefix, suffix, infix = self._affixes
        for c in chunks:
            if c in self._rules or prefix(c) or suffix(c) or next(infix(c), None) is not None:
                hard.append(c)
            else:
                self._chunks[c] = (c,)
        if hard:
            with self._nlp.memory_zone():
                self._tokenize_chunks(hard)

    def _make_room(self) -> None:
        if len(self._chunks) >= _CACHE_MAX:
            self._chunks.clear()

    def chunk_tokens(self, chunk: str) -> tuple[str, ...]:
        toks = self._chunks.get(chunk)
        if toks is None:
            self._make_room()
            self._add_chunks({chunk})
            toks = self._chunks[chunk]
        return toks

    def words(self, text: str) -> list[str]:
        """datatrove's split_into_words(text) for English: every non-whitespace token, in order."""
        chunks = text.split()
        try:
            return list(chain.from_iterable(map(self._chunks.__getitem__, chunks)))
        except KeyError:
            self._make_room()  # before listing what is missing: a clear makes every chunk missing
            self._add_chunks({c for c in chunks if c not in self._chunks})
            return list(chain.from_iterable(map(self._chunks.__getitem__, chunks)))

    def _reset_ids(self) -> None:
        # token -> row of three arrays, so a document's word facts are sums over numpy gathers
        self._ids: dict[str, int] = {}
        self._kept = np.zeros(1024, dtype=np.int64)  # 1: a non-symbol word (GopherQuality counts it)
        self._kept_len = np.zeros(1024, dtype=np.int64)  # its length when kept, else 0
        self._alpha = np.zeros(1024, dtype=np.int64)  # 1: has a letter

    def _add_id(self, token: str) -> None:
        i = self._ids[token] = len(self._ids)
        if i >= self._kept.shape[0]:
            for name in ("_kept", "_kept_len", "_alpha"):
                old = getattr(self, name)
                setattr(self, name, np.concatenate([old, np.zeros_like(old)]))
        f = self.facts(token)
        self._kept[i], self._kept_len[i], self._alpha[i] = f.non_symbol, f.length * f.non_symbol, f.has_alpha

    def word_stats(self, words: list[str]) -> tuple[int, int, int]:
        """(non-symbol words, their characters, words with a letter) of a document's words."""
        get = self._ids.__getitem__
        try:
            ids = np.fromiter(map(get, words), dtype=np.int64, count=len(words))
        except KeyError:
            if len(self._ids) >= _CACHE_MAX:
                self._reset_ids()
            for tok in set(words).difference(self._ids):
                self._add_id(tok)
            ids = np.fromiter(map(self._ids.__getitem__, words), dtype=np.int64, count=len(words))
        return int(self._kept[ids].sum()), int(self._kept_len[ids].sum()), int(self._alpha[ids].sum())

    def facts(self, token: str) -> TokenFacts:
        f = self._facts.get(token)
        if f is None:
            self.load()
            if len(self._facts) >= _CACHE_MAX:
                self._facts.clear()
            f = self._facts[token] = TokenFacts(
                length=len(token),
                non_symbol=any(ch not in self._symbols for ch in token),
                has_alpha=any(ch.isalpha() for ch in token),
                is_punct=self._is_punct(token),
                sent_punct=token in self._sent_chars,
            )
        return f

    def sentence_count(self, line: str, stop_at: int) -> int:
        """Sentences spaCy's sentencizer finds in `line` (counting stops once `stop_at` is reached).

        The sentencizer starts a sentence at the first token after a punctuation character
        (`sent_punct`) that is neither IS_PUNCT nor such a character. A whitespace run other than
        one space after a token (or any run at the start) is a token of its own there, neither
        punctuation, so it can start a sentence.
        """
        count, seen_period, pos = 1, False, 0
        for chunk_start, chunk in _chunks_with_gaps(line):
            if chunk_start > pos and seen_period and _gap_is_token(line, pos, chunk_start):
                count, seen_period = count + 1, False
                if count >= stop_at:
                    return count
            pos = chunk_start + len(chunk)
            for tok in self.chunk_tokens(chunk):
                f = self.facts(tok)
                if seen_period and not f.is_punct and not f.sent_punct:
                    count, seen_period = count + 1, False
                    if count >= stop_at:
                        return count
                elif f.sent_punct:
                    seen_period = True
        if pos < len(line) and seen_period and _gap_is_token(line, pos, len(line)):
            count += 1  # trailing whitespace token (a line whose citation was removed at the end)
        return count


# re's \s on str is Py_UNICODE_ISSPACE, the test spaCy and str.split() use to cut runs
_NON_SPACE = re.compile(r"\S+")


def _chunks_with_gaps(line: str):
    """(start, chunk) for each non-whitespace run of `line`."""
    for m in _NON_SPACE.finditer(line):
        yield m.start(), m.group()


def _gap_is_token(line: str, start: int, end: int) -> bool:
    """spaCy keeps a whitespace run as a token unless it is one space after a token."""
    return start == 0 or not (end - start == 1 and line[start] == " ")


SPLITTER = WordSplitter()


def sentence_count_words(words: list[str], stop_at: int) -> int:
    """Sentences the sentencizer's rule finds in a line's words from another segmenter than
    English's (WordSplitter.sentence_count without its whitespace tokens: those segmenters drop them)."""
    count, seen_period = 1, False
    for tok in words:
        f = SPLITTER.facts(tok)
        if seen_period and not f.is_punct and not f.sent_punct:
            count, seen_period = count + 1, False
            if count >= stop_at:
                return count
        elif f.sent_punct:
            seen_period = True
    return count


@dataclass(slots=True)
class Analysis:
    """One text's words and the repetition statistics, computed on first use."""

    text: str
    segmenter: Any = None  # a curation.filters.segment.Segmenter; None: English (SPLITTER)
    _words: list[str] | None = None
    _ngrams: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def words(self) -> list[str]:
        if self._words is None:
            seg = self.segmenter
            self._words = SPLITTER.words(self.text) if seg is None else seg.words(self.text)
        return self._words

    def ngram_stats(self, top_ns: tuple[int, ...], dup_ns: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(top n-gram chars per n of top_ns, duplicated n-gram chars per n of dup_ns), as datatrove counts."""
        key = f"{top_ns}/{dup_ns}"
        if key not in self._ngrams:
            from curation.filters.words_kernels import ngram_chars

            self._ngrams[key] = ngram_chars(self.words, top_ns, dup_ns)
        return self._ngrams[key]


_RECENT: list[Analysis] = []


def analyse(text: str, segmenter: Any = None) -> Analysis:
    """The pre-pass of `text`, shared by the filters that run on the same string object with the
    same segmenter (None: English, spaCy's blank "en" through SPLITTER; else a Segmenter's words)."""
    for a in _RECENT:
        if a.text is text and a.segmenter is segmenter:
            return a
    a = Analysis(text, segmenter)
    _RECENT.insert(0, a)
    del _RECENT[2:]
    return a


def forget_recent() -> None:
    """Drop the memo of recent texts (benchmarks: each timed run pays for its own pre-pass)."""
    _RECENT.clear()
