"""What a per-language settings file and a models/ LID-threshold table hold, and the checks a value
must pass (one job: the schema). A `LanguageSettings` is one file of configs/languages/ (`rus_Cyrl.yaml`);
a `ModelThresholds` is one table of its models/ subfolder (`lid176.yaml`). Also the folder's layout
(FOLDER, DEFAULT, MODELS), the English defaults every block starts from, and the language-code and
segmenter-name checks the models apply. Nothing here reads or writes a file."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import model_validator

from core.config import ConfigModel
from core.errors import ConfigError
from core.languages import LanguageCodeError, check_code, is_canonical, split_code

SHIPPED = Path(__file__).resolve().parents[2] / "configs"
"""The project's shipped configs: no command writes under it unless asked to by name (`check_out`)."""
FOLDER = SHIPPED / "languages"
"""The shipped per-language files."""

DEFAULT = "default"
"""The `language` of default.yaml: the settings of every language without a file."""

# datatrove's defaults (datatrove/pipeline/filters/*.py), the FineWeb English values; a test checks
# them against the blocks' signatures.
ENGLISH_TOP_N_GRAMS = ((2, 0.2), (3, 0.18), (4, 0.16))
ENGLISH_DUP_N_GRAMS = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))
ENGLISH_STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")
ENGLISH_LID_THRESHOLD = 0.65
"""FineWeb's English LID threshold (lid.176), as configs/extract.yaml's langid.threshold."""


MODELS = "models"
"""Subfolder of a settings folder: `<scheme>.yaml`, LID thresholds measured with a model of that label
scheme (`lid176`), for the languages whose own file's threshold was set with another model."""


LID_FLOOR, LID_CAP = 0.3, 0.9
"""FineWeb-2's clip of median - std."""


def _check(key: str, value: float | None, lo: float, hi: float = math.inf) -> None:
    if value is not None and not lo <= value <= hi:
        raise ConfigError(f"{key} must be in [{lo}, {hi}], got {value!r}")


def _check_n_grams(key: str, pairs: tuple[tuple[int, float], ...]) -> None:
    ns = [n for n, _ in pairs]
    if len(set(ns)) != len(ns):
        raise ConfigError(f"{key}: each n at most once, got {ns}")
    for i, (n, frac) in enumerate(pairs):
        _check(f"{key}[{i}] n", n, 1, 20)
        _check(f"{key}[{i}] fraction", frac, 0.0)


class _Block(ConfigModel):
    def kwargs(self) -> dict[str, Any]:
        """The block's keyword arguments (curation/filters/text.py and datatrove's take the same)."""
        return self.to_dict()


class GopherRepetitionSettings(_Block):
    """GopherRepetition's arguments. A fraction of 0 switches its rule off; above 1 it cannot fire."""

    dup_line_frac: float | None = 0.3
    dup_para_frac: float | None = 0.3
    dup_line_char_frac: float | None = 0.2
    dup_para_char_frac: float | None = 0.2
    top_n_grams: tuple[tuple[int, float], ...] = ENGLISH_TOP_N_GRAMS
    """(n, largest share of the text's characters the most frequent n-gram may cover)."""
    dup_n_grams: tuple[tuple[int, float], ...] = ENGLISH_DUP_N_GRAMS
    """(n, largest share of the text's characters in repeated n-grams)."""

    @model_validator(mode="after")
    def _valid(self) -> GopherRepetitionSettings:
        for key in ("dup_line_frac", "dup_para_frac", "dup_line_char_frac", "dup_para_char_frac"):
            _check(f"gopher_repetition.{key}", getattr(self, key), 0.0)
        _check_n_grams("gopher_repetition.top_n_grams", self.top_n_grams)
        _check_n_grams("gopher_repetition.dup_n_grams", self.dup_n_grams)
        return self


class GopherQualitySettings(_Block):
    """GopherQuality's arguments; `stop_words` are the language's, always given."""

    min_doc_words: int | None = 50
    """Counted in the language's segmenter's words (jieba's for Chinese), as FineWeb-2 does."""
    max_doc_words: int | None = 100000
    min_avg_word_length: float | None = 3
    max_avg_word_length: float | None = 10
    max_symbol_word_ratio: float | None = 0.1
    max_bullet_lines_ratio: float | None = 0.9
    max_ellipsis_lines_ratio: float | None = 0.3
    max_non_alpha_words_ratio: float | None = 0.8
    """datatrove's name for a minimum: the share of words with a letter must reach it."""
    min_stop_words: int | None = 2
    """null (or 0): no stop-word rule, the setting of a language without a list."""
    stop_words: tuple[str, ...]
    """Required: datatrove reads a missing list as English's, which would drop every document of
    another language; a language without a list says `[]` and min_stop_words null."""

    @model_validator(mode="after")
    def _valid(self) -> GopherQualitySettings:
        k = "gopher_quality."
        _check(k + "min_doc_words", self.min_doc_words, 0)
        _check(k + "max_doc_words", self.max_doc_words, 1)
        _check(k + "min_avg_word_length", self.min_avg_word_length, 0.0)
        _check(k + "max_avg_word_length", self.max_avg_word_length, 0.0)
        lo, hi = self.min_avg_word_length, self.max_avg_word_length
        if lo and hi and lo > hi:
            raise ConfigError(f"{k}min_avg_word_length ({lo}) must not exceed max_avg_word_length ({hi})")
        _check(k + "max_symbol_word_ratio", self.max_symbol_word_ratio, 0.0)
        for key in ("max_bullet_lines_ratio", "max_ellipsis_lines_ratio", "max_non_alpha_words_ratio"):
            _check(k + key, getattr(self, key), 0.0, 1.0)
        _check(k + "min_stop_words", self.min_stop_words, 0)
        for i, w in enumerate(self.stop_words):
            if not w or w != w.strip() or any(c.isspace() for c in w):
                raise ConfigError(f"{k}stop_words[{i}] must be one word without spaces, got {w!r}")
        if len(set(self.stop_words)) != len(self.stop_words):
            raise ConfigError(f"{k}stop_words: a word is listed twice")
        if self.min_stop_words and len(self.stop_words) < self.min_stop_words:
            raise ConfigError(
                f"{k}min_stop_words is {self.min_stop_words} but stop_words has {len(self.stop_words)}: "
                "no document could pass (set min_stop_words: null for a language without a list)"
            )
        return self


class FineWebQualitySettings(_Block):
    """FineWebQuality's arguments. `line_punct_thr` <= 0 switches the punctuation rule off."""

    line_punct_thr: float = 0.12
    line_punct_exclude_zero: bool = False
    stop_chars: tuple[str, ...] | None = None
    """Characters that end a line as punctuation; null: datatrove's TERMINAL_PUNCTUATION."""
    short_line_thr: float = 0.67
    """999 (FineWeb-2): off, no share can exceed it."""
    short_line_length: int = 30
    char_duplicates_ratio: float = 0.01
    new_line_ratio: float = 0.3

    @model_validator(mode="after")
    def _valid(self) -> FineWebQualitySettings:
        k = "fineweb_quality."
        _check(k + "line_punct_thr", self.line_punct_thr, -1.0, 1.0)
        _check(k + "short_line_thr", self.short_line_thr, 0.0)
        _check(k + "short_line_length", self.short_line_length, 0)
        _check(k + "char_duplicates_ratio", self.char_duplicates_ratio, 0.0, 1.0)
        _check(k + "new_line_ratio", self.new_line_ratio, 0.0)
        return self


class LanguageSettings(ConfigModel):
    """One file of configs/languages/: everything curation sets per language."""

    language: str
    """`xxx_Scrp` (ISO 639-3 + ISO 15924), or `default`; the file's name without .yaml."""
    source: str
    """Where the values come from (repository, commit and file, or the reference text measured)."""
    lid_threshold: float
    """Minimum top-label LID probability of a document in this language."""
    segmenter: str
    """Word segmenter (curation/filters/segment.py's names: `spacy:ru`, `jieba`, `whitespace`...)."""
    gopher_repetition: GopherRepetitionSettings = GopherRepetitionSettings()
    gopher_quality: GopherQualitySettings
    fineweb_quality: FineWebQualitySettings = FineWebQualitySettings()
    c4_quality: bool = False
    """Run C4's block: English only (its rules are English's: 'javascript', policy phrases, sentences)."""

    @model_validator(mode="after")
    def _valid(self) -> LanguageSettings:
        if self.language != DEFAULT:
            check_language("language", self.language)
        _check("lid_threshold", self.lid_threshold, 0.0, 1.0)
        if self.c4_quality and split_code(self.language)[0] != "eng":
            raise ConfigError("c4_quality can be true for English only (FineWeb-2 runs no C4 block)")
        if not self.source.strip():
            raise ConfigError("source must say where the values come from")
        check_segmenter(self.segmenter)
        return self

    @property
    def stop_words(self) -> tuple[str, ...]:
        return self.gopher_quality.stop_words


class ModelThresholds(ConfigModel):
    """A table of `models/`: per language code (`slv_Latn`), the threshold measured with the model."""

    model: str
    """The label scheme the thresholds were measured in (`lid176`); the file's name without .yaml."""
    source: str
    """The reference text and the command that measured them."""
    thresholds: dict[str, float]

    @model_validator(mode="after")
    def _valid(self) -> ModelThresholds:
        if not self.source.strip():
            raise ConfigError("source must say where the values come from")
        if not self.thresholds:
            # an empty table measures nothing; `thresholds:` with no entries is how a failed
            # calibration left the shipped one (and the preset refused every run after it)
            raise ConfigError("thresholds: no language (a table must measure at least one)")
        for code, t in self.thresholds.items():
            check_language("thresholds", code)
            _check(f"thresholds.{code}", t, LID_FLOOR, 1.0)
        return self


def check_language(key: str, code: str) -> None:
    """ConfigError naming `key` unless `code` is canonical and in the ISO tables (a file or table entry
    for `eng_Latm` would be reached by no document)."""
    if not is_canonical(code):
        raise ConfigError(f"{key}: language code must be xxx_Scrp (e.g. rus_Cyrl), got {code!r}")
    try:
        check_code(code)
    except LanguageCodeError as e:
        raise ConfigError(f"{key}: {e}") from None


def check_segmenter(name: str) -> None:
    """ConfigError unless `name` is in curation/filters/segment.py's registry. Its library is not
    loaded, and a name whose package is missing here passes: a file is valid on every machine, the
    pipeline that runs it fails with the `pip install` line."""
    from curation.filters.segment import get_segmenter

    try:
        get_segmenter(name)
    except KeyError as e:
        raise ConfigError(f"segmenter: {e.args[0] if e.args else e}") from None
    except ImportError:
        pass


def default_segmenter(code: str) -> str:
    """The registry's segmenter name for `code` (curation/filters/segment.py decides)."""
    from curation.filters.segment import segmenter_name_for

    return segmenter_name_for(code)
