"""Word segmentation per language: the words our filters count and dedup shingles, for any language.

What: a `Segmenter` turns a text into its words (`words(text) -> list[str]`): no whitespace tokens,
punctuation split off as separate tokens as spaCy does. Segmenters are registered by name
(`get_segmenter(name)`), and `segmenter_for(code)` picks one for a language code (canonical
`cmn_Hani`, or any form core.languages.split_code reads: `cmn`, `zh`, `eng`):

| name               | languages                       | library (data shipped in the wheel/sdist)        |
|--------------------|---------------------------------|--------------------------------------------------|
| `spacy:<code>`     | the 70-odd with a spaCy class   | spaCy's rule-based tokenizer, `spacy.blank(code)` |
| `jieba`            | Chinese (cmn, yue, wuu, zho; Hani) | jieba, HMM on, its packaged dictionary        |
| `sudachi`          | Japanese (jpn; Jpan)            | SudachiPy + SudachiDict-core, split mode A        |
| `kiwi`             | Korean (kor; Hang)              | kiwipiepy + kiwipiepy-model                       |
| `pythainlp`        | Thai (tha; Thai)                | PyThaiNLP `newmm-safe`, packaged Thai word list   |
| `pyvi`             | Vietnamese (vie)                | pyvi through spaCy's `vi` tokenizer               |
| `clusters`         | Khmer, Lao, Myanmar, Tibetan    | none: orthographic clusters / syllables (below)   |
| `whitespace`       | everything else                 | spaCy's multi-language `xx` rules                 |

Why: Gopher's and FineWeb's rules count words, average word length, stop words and repeated word
n-grams; with whitespace-split "words" a Chinese or Thai page is a handful of giant words and every
rule misfires. FineWeb-2 (Penedo et al. 2025) assigns a tokenizer per language in datatrove
(datatrove/utils/word_tokenizers.py, assets/tokenizer_assignment.csv); we follow its choices where
the library and its data install offline from PyPI (research: ../shared/research/
multilingual-2026.md 1.4, 3.3): spaCy blank classes, jieba (datatrove: spaCy `zh` with jieba),
SudachiPy mode A (spaCy `ja`, chunked at 40,000 UTF-8 bytes as datatrove does: Sudachi refuses
inputs over ~49 KB), kiwipiepy, PyThaiNLP `newmm-safe` (datatrove's ThaiTokenizer), pyvi (spaCy
`vi`). Stanza, botok, khmer-nltk/laonlp and pyidaungsu are not used: Stanza and botok download
models at run time, and the other two add a dependency each for a small share of the web.

Scripts written without spaces that have no segmenter here (Khmer, Lao, Myanmar, Tibetan) get
`clusters`: Tibetan splits into syllables at the tsheg (the script's own syllable mark, which
botok's tokens also start from); Khmer, Lao and Myanmar into orthographic clusters (a base letter
with its marks and any consonant stacked under it by a coeng/virama; a Myanmar consonant killed by
asat joins the syllable before it, a Lao leading vowel the consonant after it). A cluster is about
a syllable, and words in these languages run one to three syllables: counts are then a few times
the word count, not a few hundredths of it as with one "word" per whitespace run, and per-language
thresholds (FineWeb-2 derives them per language anyway) absorb the constant.

Text preservation: every segmenter returns substrings of the text in order, so the words joined
equal the text with its whitespace (and the word separators below) removed; a pyvi compound keeps the text between its syllables
("Hà Nội", as spaCy's `vi` gives it), never the `_` pyvi's own `tokenize` joins them with.

Word separators that are not whitespace (Ethiopic's wordspace ፡, U+2E31, the zero-width space)
are word boundaries for every segmenter, as a space is (`separate_words`): the words joined equal
the text without its whitespace and those separators. Each segmenter bounds its input
(`Segmenter.max_call_chars`, `max_chars`): one library call stays in the range where its time per
character is flat, and a filter block drops a document longer than the segmenter's `max_chars`
(`segment_input_too_long`) instead of holding its task for minutes.

Nothing is downloaded at run time: dictionaries come from the installed packages (PyThaiNLP is put
in read-only, offline mode before its import; jieba builds its prefix dictionary in memory instead
of writing its cache file to the temp folder). Segmenters load lazily and are cached per process;
a missing package fails at `get_segmenter` with the exact `pip install` line (CONVENTIONS 9).
"""

from __future__ import annotations

import importlib.util
import os
import threading
import unicodedata
from abc import ABC, abstractmethod
from functools import cache
from itertools import groupby
from typing import Any

from core.errors import ConfigError
from core.languages import ISO639_1, LID176, MACROLANGUAGE, split_code
from curation.filters.words import ENGLISH, SPLITTER, WordSplitter, _import_spacy_without_torch

# What `make install` pins (pyproject.toml); the hint a missing package fails with.
PIP = {
    "spacy": "spacy==3.8.18",
    "jieba": "jieba==0.42.1",
    "sudachipy": "sudachipy==0.7.0 sudachidict-core==20261015",
    "sudachidict_core": "sudachidict-core==20261015",
    "kiwipiepy": "kiwipiepy==0.24.1 kiwipiepy-model==0.24.0",
    "kiwipiepy_model": "kiwipiepy-model==0.24.0",
    "pythainlp": "pythainlp==5.4.0",
    "pyvi": "pyvi==0.1.1",
}

SUDACHI_CHUNK_BYTES = 40_000
"""datatrove's chunk size for Japanese: Sudachi raises on an input over 49,149 bytes."""

# Word separators that are not whitespace to str.split() or spaCy (issue 54): Ethiopic text is often
# written with the wordspace ፡ (U+1361) between words and no space at all, and the invisible ZERO WIDTH
# SPACE (U+200B) separates words in Khmer, Lao, Myanmar and on pages that mark line-break points. Left
# alone, a whole Amharic line is one "word" of 30-60 characters and Gopher drops the page
# (gopher_above_avg_threshold). Each is a space written as a sign, so each becomes a space: a
# boundary, not a token (a ፡ token after every word would count as half the words and fail Gopher's
# share of words with a letter instead). U+2E31 WORD SEPARATOR MIDDLE DOT likewise.
_SEPARATORS = str.maketrans(dict.fromkeys("\u1361\u2e31\u200b", " "))
_SEPARATOR_CHARS = ("\u1361", "\u2e31", "\u200b")


def separate_words(text: str) -> str:
    """`text` with the word separators above turned into whitespace boundaries (a copy only when it
    has one)."""
    if any(c in text for c in _SEPARATOR_CHARS):
        return text.translate(_SEPARATORS)
    return text


def check_language(language: str, block: str) -> Any:
    """The word segmenter of a filter block's `language` (a code in any form
    core.languages.split_code reads, datatrove's `eng` included): None for English, which keeps
    words.py's cached spaCy-en splitter (datatrove's words exactly), else `segmenter_for(language)`.

    Here, not in words.py: words.py is the pre-pass every segmenter builds on (WordSplitter), so it
    never imports this module back (pyproject's import-linter contract)."""
    if language == ENGLISH:
        return None
    from core.languages import LanguageCodeError

    try:
        seg = segmenter_for(language)
    except LanguageCodeError as e:
        raise ConfigError(f"filters.{block}: language: {e}") from None
    return None if seg.name == "spacy:en" else seg


def _require(segmenter: str, *modules: str) -> None:
    """Fail now, without importing anything heavy, when a module a segmenter needs is missing."""
    for m in modules:
        if importlib.util.find_spec(m) is None:
            raise ImportError(f"word segmenter {segmenter!r} needs {m}: pip install {PIP[m]}")


def _strip_tokens(tokens) -> list[str]:
    """datatrove's strip_strings: tokens stripped of whitespace, whitespace-only tokens dropped."""
    out = []
    for t in tokens:
        t = t.strip()
        if t:
            out.append(t)
    return out


def char_chunks(text: str, max_chars: int) -> list[str]:
    """`text` in consecutive pieces of at most `max_chars` characters, each cut after the last line
    break or space of its second half when it has one (byte_chunks' rule, in characters)."""
    if len(text) <= max_chars:
        return [text]
    out, start = [], 0
    while len(text) - start > max_chars:
        end = start + max_chars
        cut = max(text.rfind("\n", start + max_chars // 2, end), text.rfind(" ", start + max_chars // 2, end))
        end = cut + 1 if cut != -1 else end
        out.append(text[start:end])
        start = end
    out.append(text[start:])
    return out


class Segmenter(ABC):
    """Splits a text into words; `load` (heavy imports, dictionaries) runs once, on first use.

    Two input bounds (issue 54: a 2 MB Korean page held its task 110 s in gopher_repetition):
    - `max_call_chars`: the longest text one library call gets; a longer one goes through in pieces
      cut at a line break or space (`char_chunks`), for a library whose time per character grows with
      the input (kiwi), so that the whole text costs what its pieces cost: linear.
    - `max_chars`: the longest text a filter block has segmented per document (the blocks of
      curation/filters/text.py drop a longer one, reason `segment_input_too_long`, before any call).
      Set per segmenter from its measured cost so that one document's words take at most ~2.5 s of
      one core (docs/security-and-limits.md states the page's whole budget). The costs in each
      class's comment are CPU seconds over real Leipzig text on this project's 2-core machine while
      other jobs ran, so the bound is conservative on a quiet one. A bound in characters, not seconds:
      the same page is kept or dropped on every machine.
    """

    name: str
    requires: tuple[str, ...] = ()
    max_call_chars: int | None = None
    max_chars: int = 600_000
    """Default: spaCy's rules and the cluster rules, <= 4 us/char on text never seen (the chunk cache
    makes repeated text cheaper): 600,000 chars ~2.4 s."""

    def __init__(self) -> None:
        _require(self.name, *self.requires)
        self._lock = threading.Lock()
        self._loaded = False

    def _ensure(self) -> None:
        if not self._loaded:
            with self._lock:  # a Python UDF may call from threads; load the dictionary once
                if not self._loaded:
                    self.load()
                    self._loaded = True

    def load(self) -> None:  # noqa: B027 (optional hook: not every segmenter has state to load)
        """Import the library and load its dictionary."""

    def words(self, text: str) -> list[str]:
        """The words of `text`: no whitespace, punctuation as separate tokens. Word separators that
        are not whitespace (`separate_words`) are boundaries for every segmenter."""
        self._ensure()
        if not text:
            return []
        text = separate_words(text)
        if self.max_call_chars is None or len(text) <= self.max_call_chars:
            return self._words(text)
        out: list[str] = []
        for piece in char_chunks(text, self.max_call_chars):
            out.extend(self._words(piece))
        return out

    @abstractmethod
    def _words(self, text: str) -> list[str]: ...

    def __repr__(self) -> str:
        return f"<Segmenter {self.name}>"


class SpacySegmenter(Segmenter):
    """spaCy's rule-based tokenizer of one language (`spacy.blank(code)`; no model, no download),
    asked once per distinct whitespace-separated chunk (words.WordSplitter: spaCy's rules never look
    past a chunk, so the words are the same, tests/curation/test_segment.py checks it per sentence)."""

    requires = ("spacy",)

    def __init__(self, code: str, name: str | None = None) -> None:
        self.code = code
        self.name = name or f"spacy:{code}"
        # the package before its classes: without spaCy there are no classes, and "no language class
        # 'xx'" would hide the one fix (the pip line) behind a KeyError
        _require(self.name, *self.requires)
        if code not in spacy_codes():
            raise KeyError(f"spaCy has no language class {code!r}; it has {sorted(spacy_codes())}")
        if code in _SPACY_SPECIAL:
            # their tokenizers read across whitespace (and ko's needs mecab-ko): not chunk-cacheable
            raise KeyError(f"use the segmenter {_SPACY_SPECIAL[code]!r} for {code!r}, not spacy:{code}")
        super().__init__()
        # English shares the filters' splitter: one cache, and its words are datatrove's exactly
        self.splitter = SPLITTER if code == "en" else WordSplitter(code)

    def load(self) -> None:
        self.splitter.load()

    def _words(self, text: str) -> list[str]:
        return self.splitter.words(text)


class WhitespaceSegmenter(SpacySegmenter):
    """The fallback: whitespace runs, with punctuation split off by spaCy's multi-language `xx` rules
    (datatrove's WhitespaceTokenizer uses the same)."""

    def __init__(self, name: str = "whitespace") -> None:
        super().__init__("xx", name)


class JiebaSegmenter(Segmenter):
    """Chinese: jieba's precise mode with its HMM for words outside the dictionary (jieba.lcut's
    defaults, and spaCy `zh`'s jieba segmenter that datatrove uses)."""

    name = "jieba"
    requires = ("jieba",)
    max_chars = 350_000  # 6.6 us/char at 20,000 and 6.8 at 200,000 chars (linear): ~2.4 s

    def load(self) -> None:
        import logging

        import jieba

        jieba.setLogLevel(logging.WARNING)  # its "Building prefix dict" lines on every worker
        tok = jieba.Tokenizer()
        # jieba.initialize() caches the parsed dictionary as a file in the temp folder, shared by every
        # process of the machine; building it in memory (~1 s) writes nothing and races with no one
        with tok.lock:
            tok.FREQ, tok.total = tok.gen_pfdict(tok.get_dict_file())
            tok.initialized = True
        self._tok = tok

    def _words(self, text: str) -> list[str]:
        return _strip_tokens(self._tok.cut(text, cut_all=False, HMM=True))


def byte_chunks(text: str, max_bytes: int) -> list[str]:
    """`text` in consecutive pieces of at most `max_bytes` UTF-8 bytes (as datatrove's
    chunk_text_on_bytes), each cut after the last line break or space of its second half when it
    has one, so that a word is cut only in a text with no break for 20,000 bytes."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return [text]
    out, start = [], 0
    while len(data) - start > max_bytes:
        end = start + max_bytes
        while data[end] & 0xC0 == 0x80:  # never inside a character: back up to its first byte
            end -= 1
        cut = max(
            data.rfind(b"\n", start + max_bytes // 2, end), data.rfind(b" ", start + max_bytes // 2, end)
        )
        end = cut + 1 if cut != -1 else end
        out.append(data[start:end].decode("utf-8"))
        start = end
    out.append(data[start:].decode("utf-8"))
    return out


class SudachiSegmenter(Segmenter):
    """Japanese: SudachiPy with SudachiDict-core in split mode A (the shortest units; spaCy `ja`'s
    default, which datatrove uses), texts cut into 40,000-byte chunks."""

    name = "sudachi"
    requires = ("sudachipy", "sudachidict_core")
    max_chars = 400_000  # 6.0 us/char at 20,000, 3.8 at 200,000 (its 40,000-byte chunks): ~2.4 s

    def load(self) -> None:
        from sudachipy import Dictionary, SplitMode

        self._tok = Dictionary(dict="core").tokenizer(mode=SplitMode.A)

    def _words(self, text: str) -> list[str]:
        out: list[str] = []
        for chunk in byte_chunks(text, SUDACHI_CHUNK_BYTES):
            out.extend(_strip_tokens(m.surface() for m in self._tok.tokenize(chunk)))
        return out


class KiwiSegmenter(Segmenter):
    """Korean: kiwipiepy's morphemes, as datatrove's KiwiTokenizer takes them (the text's span of
    each token, so contracted morphemes keep their written form)."""

    name = "kiwi"
    requires = ("kiwipiepy", "kiwipiepy_model")
    # kiwi's time per character grows with the input: 24-26 us/char up to 20,000 chars, then 32 at
    # 100,000, 44 at 200,000, 67 at 400,000 (0.25/0.5/1 MB took 3/9/27 s in issue 54); in pieces of
    # 10,000 it stays at the flat rate, and 100,000 chars cost ~2.5 s
    max_call_chars = 10_000
    max_chars = 100_000

    def load(self) -> None:
        import re

        from kiwipiepy import Kiwi

        self._kiwi = Kiwi()
        # datatrove drops runs of 20+ digits and commas before Kiwi, which "seems to have issue with
        # very large numbers"; we keep that, and slice the text Kiwi saw (datatrove slices the original)
        self._long_numbers = re.compile("[0-9,]{20,}")

    def _words(self, text: str) -> list[str]:
        text = self._long_numbers.sub("", text)
        out, end = [], 0
        for t in self._kiwi.tokenize(text):
            # a token inside the previous one's span (a contraction split in two morphemes) would
            # repeat characters: the written form counts once
            if t.start >= end:
                out.append(text[t.start : t.start + t.len])
                end = t.start + t.len
            elif t.start + t.len > end:
                out.append(text[end : t.start + t.len])
                end = t.start + t.len
        return _strip_tokens(out)


class ThaiSegmenter(Segmenter):
    """Thai: PyThaiNLP's `newmm-safe` (maximal matching on its packaged word list, bounded on
    long unbreakable input; datatrove's ThaiTokenizer)."""

    name = "pythainlp"
    requires = ("pythainlp",)
    max_chars = 600_000  # 3.8 us/char at 20,000 and 4.0 at 200,000 chars: ~2.4 s

    def load(self) -> None:
        # PyThaiNLP creates ~/pythainlp-data and may fetch corpora on demand; newmm needs only the
        # word list inside the wheel, so it runs read-only and offline (set before its import)
        os.environ.setdefault("PYTHAINLP_READ_ONLY", "1")
        os.environ.setdefault("PYTHAINLP_OFFLINE", "1")
        from pythainlp.tokenize import word_tokenize

        self._tokenize = word_tokenize

    def _words(self, text: str) -> list[str]:
        return _strip_tokens(self._tokenize(text, engine="newmm-safe", keep_whitespace=False))


class VietnameseSegmenter(Segmenter):
    """Vietnamese: spaCy's `vi` tokenizer, which runs pyvi's CRF to join syllables into words
    (datatrove's choice); a compound is its syllables with the space between them, not pyvi's `_`.
    The CRF reads neighbouring syllables, so the whole text goes through it (no chunk cache)."""

    name = "pyvi"
    requires = ("spacy", "pyvi")
    max_chars = 300_000  # 8.0 us/char at 20,000 and 7.5 at 200,000 chars (a 2 MB page took 21 s): ~2.4 s

    def load(self) -> None:
        self._nlp = _import_spacy_without_torch().blank("vi")

    def _words(self, text: str) -> list[str]:
        # the memory zone frees the strings this text added to spaCy's vocabulary (datatrove does the same)
        with self._nlp.memory_zone():
            return _strip_tokens(t.text for t in self._nlp.tokenizer(text))


# Signs the cluster rules look at (Unicode charts of the four blocks)
_ASAT = "\u103a"  # Myanmar: the consonant before it has no vowel, it closes the syllable
_STACKERS = frozenset("\u17d2\u1039")  # Khmer coeng, Myanmar virama: the next consonant stacks under
_LEADING = frozenset("\u0ec0\u0ec1\u0ec2\u0ec3\u0ec4")  # Lao vowels written before their consonant
_LAO_VOWEL_LETTERS = frozenset("\u0eb0\u0eb2\u0eb3\u0ebd")  # Lao vowels that are letters (Lo), not marks
_BANTOC = "\u17cb"  # Khmer: shortens the vowel before; written on a final consonant
_TSHEG = frozenset("\u0f0b\u0f0c")  # Tibetan syllable mark
CLUSTER_SCRIPTS = ("Khmr", "Laoo", "Mymr", "Tibt")


def _cluster_char(ch: str) -> bool:
    """A letter or mark of the Khmer, Lao, Myanmar or Tibetan blocks (their punctuation is not)."""
    cp = ord(ch)
    if not (
        0x0E80 <= cp <= 0x0EFF or 0x0F00 <= cp <= 0x0FFF or 0x1000 <= cp <= 0x109F or 0x1780 <= cp <= 0x17FF
    ):
        return False
    return unicodedata.category(ch)[0] in "LM" or ch in _TSHEG


def _has_vowel(cluster: str) -> bool:
    """A Khmer or Lao cluster that carries a written vowel (so a bare consonant after it is its final)."""
    return any(
        ch in _LAO_VOWEL_LETTERS
        or ch in _LEADING
        or (unicodedata.category(ch) in ("Mn", "Mc") and ch != _BANTOC)
        for ch in cluster
        if ch not in _STACKERS
        and not 0x0EC8 <= ord(ch) <= 0x0ECC  # Lao tone marks (and cancellation) are no vowel
    )


def _clusters(run: str) -> list[str]:
    """Syllables (Tibetan) or orthographic clusters (Khmer, Lao, Myanmar) of a run of their letters.

    A cluster is a base letter with its marks and any consonant stacked under it. Finals, which
    these scripts write as plain consonants, are joined back to their syllable where the script
    shows them: Myanmar's asat; in Khmer and Lao a cluster with no vowel of its own right after
    one with a written vowel (Khmer's inherent-vowel syllables have no sign, so a bare consonant
    after a bare one stays a syllable), and Khmer's bantoc.
    """
    if 0x0F00 <= ord(run[0]) <= 0x0FFF:
        out, cur = [], ""
        for ch in run:
            cur += ch
            if ch in _TSHEG:  # the tsheg ends a Tibetan syllable
                out.append(cur)
                cur = ""
        return [*out, cur] if cur else out
    units: list[str] = []
    for ch in run:
        joins = units and (
            unicodedata.category(ch)[0] == "M"
            or ch in _LAO_VOWEL_LETTERS
            or units[-1][-1] in _STACKERS
            or units[-1][-1] in _LEADING
        )
        if joins:
            units[-1] += ch
        else:
            units.append(ch)
    out = []
    for u in units:
        if out and (
            (_ASAT in u[1:] and u[u.index(_ASAT) - 1] not in _STACKERS)
            or (
                0x1780 <= ord(u[0]) <= 0x17FF
                and (_BANTOC in u or (not _has_vowel(u) and _has_vowel(out[-1])))
            )
            or (
                0x0E80 <= ord(u[0]) <= 0x0EFF
                and u[0] not in _LEADING
                and not _has_vowel(u)
                and _has_vowel(out[-1])
            )
        ):
            out[-1] += u
        else:
            out.append(u)
    return out


class ClusterSegmenter(WhitespaceSegmenter):
    """Khmer, Lao, Myanmar, Tibetan: the fallback's tokens, each run of those scripts' letters cut
    into syllables/clusters (module docstring)."""

    def __init__(self) -> None:
        super().__init__("clusters")

    def _words(self, text: str) -> list[str]:
        out: list[str] = []
        for tok in super()._words(text):
            if not any(_cluster_char(c) for c in tok):
                out.append(tok)
                continue
            for kind, group in groupby(tok, _kind):
                if kind == "cluster":
                    out.extend(_clusters("".join(group)))
                elif kind == "punct":
                    out.extend(group)  # the scripts' own punctuation (Khmer ។, Tibetan །) one sign a token
                else:
                    out.append("".join(group))
        return out


def _kind(ch: str) -> str:
    if _cluster_char(ch):
        return "cluster"
    return "punct" if unicodedata.category(ch)[0] in "PS" else "other"


_NAMED = {
    "jieba": JiebaSegmenter,
    "sudachi": SudachiSegmenter,
    "kiwi": KiwiSegmenter,
    "pythainlp": ThaiSegmenter,
    "pyvi": VietnameseSegmenter,
    "whitespace": WhitespaceSegmenter,
    "clusters": ClusterSegmenter,
}

# spaCy classes that need a library of their own: ja/zh/th/vi are reached through the named
# segmenters above, ko's spaCy class needs mecab-ko (not on PyPI as a wheel): kiwi instead
_SPACY_SPECIAL = {"ja": "sudachi", "ko": "kiwi", "th": "pythainlp", "vi": "pyvi", "zh": "jieba"}


@cache
def spacy_codes() -> frozenset[str]:
    """The language classes in the installed spaCy (its `spacy/lang/` packages), without importing it."""
    spec = importlib.util.find_spec("spacy")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    root = os.path.join(next(iter(spec.submodule_search_locations)), "lang")
    return frozenset(
        d
        for d in os.listdir(root)
        if os.path.isfile(os.path.join(root, d, "__init__.py")) and not d.startswith("_")
    )


def get_segmenter(name: str) -> Segmenter:
    """The segmenter registered as `name` (`spacy:<code>`, `jieba`, `sudachi`, `kiwi`, `pythainlp`,
    `pyvi`, `clusters`, `whitespace`), one instance per process."""
    if not isinstance(name, str):
        raise KeyError(f"a segmenter name must be a string, got {name!r}")
    return _get(name)


@cache
def _get(name: str) -> Segmenter:
    if name.startswith("spacy:"):
        return SpacySegmenter(name.removeprefix("spacy:"))
    cls = _NAMED.get(name)
    if cls is None:
        raise KeyError(
            f"unknown word segmenter {name!r}: one of {sorted(_NAMED)} or spacy:<code> ({sorted(spacy_codes())})"
        )
    return cls()


@cache
def spacy_language_map() -> dict[str, str]:
    """ISO 639-3 -> spaCy language class, built from the installed spaCy's classes.

    A two-letter spaCy code is read through lid.176's table (which names the member a macrolanguage
    label stands for: ar -> arb, fa -> pes, ms -> zsm, et -> ekk) or the rest of ISO 639-1
    (core/languages.py's ISO639_1: nb -> nob, fo -> fao);
    a three-letter one (grc, kmr, dsb) is ISO 639-3 already. The member's macrolanguage maps too
    when exactly one class claims it (ara -> ar, fas -> fa, msa -> ms; hbs is claimed by hr and sr,
    so it is left to the fallback), and `nor` is nb (lid.176 reads `no` as Bokmål).
    """
    out: dict[str, str] = {}
    for code in sorted(spacy_codes() - set(_SPACY_SPECIAL) - {"xx"}):
        iso3 = code if len(code) == 3 else LID176.get(code) or ISO639_1.get(code)
        if iso3 is not None:
            out[iso3] = code
    macro: dict[str, set[str]] = {}
    for iso3, code in out.items():
        if iso3 in MACROLANGUAGE:
            macro.setdefault(MACROLANGUAGE[iso3], set()).add(code)
    for m, codes in macro.items():
        if len(codes) == 1 and m not in out:
            out[m] = codes.pop()
    # Norwegian: nb and nn both claim `nor`; lid.176's `no` is Bokmål (nob), as most of the web
    if "nb" in out.values():
        out.setdefault("nor", "nb")
    return out


# Languages whose own segmenter beats spaCy's class (or stands in for a missing one), with the
# scripts it is for: `cmn_Latn` (pinyin) or `vie_Hani` (chữ Nôm) go by their script instead
_HAN = frozenset({"Hani", "Hans", "Hant"})
_BY_LANGUAGE = {
    **dict.fromkeys(("cmn", "yue", "wuu", "zho"), ("jieba", _HAN)),
    "jpn": ("sudachi", _HAN | {"Jpan", "Hira", "Kana"}),
    "kor": ("kiwi", frozenset({"Hang", "Kore"})),
    "tha": ("pythainlp", frozenset({"Thai"})),
    "vie": ("pyvi", frozenset({"Latn"})),
}
# A script that settles it whatever the language (text in it needs its segmenter): lzh_Hani, nan_Hani
_BY_SCRIPT = {
    **dict.fromkeys(_HAN, "jieba"),
    "Jpan": "sudachi",
    "Hira": "sudachi",
    "Kana": "sudachi",
    "Hang": "kiwi",
    "Kore": "kiwi",
    "Thai": "pythainlp",
    **dict.fromkeys(CLUSTER_SCRIPTS, "clusters"),
}
# The usual script of languages written in a cluster script, for codes given without one (`bod`)
_DEFAULT_SCRIPT = {
    **dict.fromkeys(("bod", "dzo"), "Tibt"),
    "khm": "Khmr",
    "lao": "Laoo",
    **dict.fromkeys(("mya", "shn"), "Mymr"),
}


def segmenter_name_for(code: str) -> str:
    """The segmenter name `segmenter_for(code)` picks: the language's own segmenter (for its scripts),
    else the script's, else its spaCy class, else `whitespace`. A code no form of split_code matches
    is a LanguageCodeError; a well-formed code of a language no table knows gets `whitespace`."""
    lang, script = split_code(code)
    own = _BY_LANGUAGE.get(lang)
    if own is not None and (script is None or script in own[1]):
        return own[0]
    script = script or _DEFAULT_SCRIPT.get(lang)
    if script in _BY_SCRIPT:
        return _BY_SCRIPT[script]
    spacy_code = spacy_language_map().get(lang)
    return f"spacy:{spacy_code}" if spacy_code else "whitespace"


def segmenter_for(code: str) -> Segmenter:
    """The segmenter of a language code (module docstring's table)."""
    return get_segmenter(segmenter_name_for(code))
