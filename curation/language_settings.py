"""Per-language curation settings (issue 43 item 2): one YAML file per language in configs/languages/.

Each file (`rus_Cyrl.yaml`) holds what FineWeb-2 sets per language: the LID threshold, the word
segmenter, and the keyword arguments of our Gopher repetition, Gopher quality and FineWeb quality
blocks (curation/filters/text.py, datatrove's argument names, stop words included as GopherQuality's
`stop_words`), plus whether C4's block runs (English only, as in FineWeb-2). `settings_for(code)` is
the one reader:

    s = settings_for("rus_Cyrl")
    GopherQuality(**s.gopher_quality.kwargs()); s.lid_threshold; s.segmenter   # "spacy:ru"

Which file: `xxx_Scrp.yaml` if there is one; else the file of the code's macrolanguage in the same
script (lid.176's `fa` is `pes_Arab`, FineWeb-2 names Persian `fas_Arab`); else `default.yaml`.
Another script of the same language is never used: the thresholds and stop words of `srp_Cyrl`
say nothing about text in `srp_Latn`.

Where the values come from:
- the 50 largest FineWeb-2 subsets by words: FineWeb-2's own configs (huggingface/fineweb-2,
  configs/<code>.yml), converted by `from_fineweb2` the way fineweb-2-pipeline.py passes each key to
  datatrove's blocks, with its shared settings (dup_para_frac=0, dup_para_char_frac=0,
  dup_line_char_frac=0, short_line_thr=999, char_duplicates_ratio=0.1, min_stop_words=2; no C4).
  `python -m curation import-fineweb2 FW2_GIT_DIR --out configs/languages --force` rewrites them (`write_fineweb2`);
- eng_Latn: FineWeb's English settings (datatrove's defaults, LID 0.65, C4 on);
- default.yaml: see `default_from_fineweb2`;
- a language of your own: `python -m curation derive-language` (`derive_settings`) measures a
  reference text in that language.

Caveat: FineWeb-2's LID thresholds are GlotLID v3 probabilities; lid.176 (this project's default
model) scores differently. `derive-language` measures the threshold with the model we run.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import stat
import statistics
import subprocess
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import model_validator

from core.config import ConfigModel, build_config, read_yaml_mapping
from core.errors import ConfigError, InputError
from core.languages import MACROLANGUAGE, LanguageCodeError, check_code, is_canonical, split_code
from core.safe_json import loads_checked
from core.safe_yaml import load_yaml

log = logging.getLogger(__name__)

SHIPPED = Path(__file__).resolve().parent.parent / "configs"
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
            _check_language("language", self.language)
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


def _check_language(key: str, code: str) -> None:
    """ConfigError naming `key` unless `code` is canonical and in the ISO tables (a file or table entry
    for `eng_Latm` would be reached by no document)."""
    if not is_canonical(code):
        raise ConfigError(f"{key}: language code must be xxx_Scrp (e.g. rus_Cyrl), got {code!r}")
    try:
        check_code(code)
    except LanguageCodeError as e:
        raise ConfigError(f"{key}: {e}") from None


def check_out(out: str | Path, force: bool, flag: str = "--out", *, parent: bool = True) -> Path:
    """The path a command may write: anywhere but the project's shipped configs (SHIPPED), and there
    only with `--force`. The path is resolved first, so `..` and links into configs/ count as in it.
    A calibration or a derived file replaces what a preset reads (a 3-language reference cut the
    shipped 67-language LID table to 3, and every run of the multilingual preset after it); the user
    must name the shipped file and say so."""
    out = Path(out)
    real = out.resolve()
    if real.is_relative_to(SHIPPED.resolve()) and not force:
        raise InputError(
            f"{flag} {out} is a shipped config of this project ({real.relative_to(SHIPPED.resolve().parent)}): "
            f"write it elsewhere, or add --force to replace the shipped file"
        )
    if parent and not real.parent.is_dir():  # `parent=False`: the writer makes it
        raise InputError(f"{flag}: no folder {out.parent}")
    return out


def write_text_atomic(path: Path, text: str) -> None:
    """`text` to `path` through a temporary name in the same folder, renamed on success: a reader
    never sees a half-written file, and a failed write leaves the old one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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


def load_settings(path: str | Path) -> LanguageSettings:
    """One language file, validated; a ConfigError names the file and the key. Its `language` must
    be its file name, so a copied file cannot silently stand for another language."""
    path = Path(path)
    settings = build_config(LanguageSettings, read_yaml_mapping(path), str(path))
    if settings.language != path.stem:
        raise ConfigError(f"{path}: language is {settings.language!r} but the file is named {path.name}")
    return settings


@functools.lru_cache(maxsize=512)
def _cached(path: str) -> LanguageSettings:
    return load_settings(path)


SAME_WRITTEN_LANGUAGE = {"tgl": "fil"}
"""Codes that name one written language on the web under two ISO 639-3 codes, not a macrolanguage
and its member: lid.176's `tl` is Tagalog (`tgl`), and GlotLID and FineWeb-2 label the same pages
Filipino (`fil_Latn`, the standard form of Tagalog), so a `tgl_Latn` document takes fil_Latn.yaml
where no tgl_Latn.yaml is given. Codes stay as each model gives them; only the settings are shared."""


def settings_for(code: str, folder: str | Path = FOLDER) -> LanguageSettings:
    """The settings of language `code` (`rus_Cyrl`): its own file, else its macrolanguage's in the
    same script, else the file of the code it shares its written language with (SAME_WRITTEN_LANGUAGE),
    else default.yaml (the `language` of what comes back says which). Cached per file."""
    if not is_canonical(code):
        raise ConfigError(f"language code must be xxx_Scrp (e.g. rus_Cyrl), got {code!r}")
    folder = Path(folder)
    lang, script = split_code(code)
    same = SAME_WRITTEN_LANGUAGE.get(lang, "")
    for candidate in (code, f"{MACROLANGUAGE.get(lang, '')}_{script}", f"{same}_{script}"):
        path = folder / f"{candidate}.yaml"
        if path.is_file():
            return _cached(str(path.resolve()))
    return _cached(str((folder / f"{DEFAULT}.yaml").resolve()))


def check_folder(folder: str | Path, key: str) -> None:
    """A settings folder a config names: it exists, has default.yaml, and every file in it loads (a
    ConfigError naming `key` and the file), so a bad file fails on load, before Spark starts."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{key}: no such folder {str(folder)!r}")
    if not (folder / f"{DEFAULT}.yaml").is_file():
        raise ConfigError(
            f"{key}: {folder} has no {DEFAULT}.yaml (the settings of every language without a file)"
        )
    for path in sorted(folder.glob("*.yaml")):
        try:
            _cached(str(path.resolve()))
        except ConfigError as e:
            raise ConfigError(f"{key}: {e}") from None
    for path in sorted((folder / MODELS).glob("*.yaml")):
        try:
            _table(str(path.resolve()))
        except ConfigError as e:
            raise ConfigError(f"{key}: {e}") from None


def lowest_lid_threshold(folder: str | Path) -> float:
    """The lowest LID threshold of any file in the folder, or of its model tables (`models/`): what a
    pre-check may drop below, at most."""
    files = [_cached(str(p.resolve())).lid_threshold for p in Path(folder).glob("*.yaml")]
    tables = [
        t for p in sorted((Path(folder) / MODELS).glob("*.yaml")) for t in _table(str(p)).thresholds.values()
    ]
    return min(files + tables)


# --- LID thresholds measured with the model that runs ----------------------------------------------

MODELS = "models"
"""Subfolder of a settings folder: `<scheme>.yaml`, LID thresholds measured with a model of that label
scheme (`lid176`), for the languages whose own file's threshold was set with another model."""


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
            _check_language("thresholds", code)
            _check(f"thresholds.{code}", t, LID_FLOOR, 1.0)
        return self


@functools.cache
def _table(path: str) -> ModelThresholds:
    table = build_config(ModelThresholds, read_yaml_mapping(path), path)
    if table.model != Path(path).stem:
        raise ConfigError(f"{path}: model is {table.model!r} but the file is named {Path(path).name}")
    return table


def model_thresholds(scheme: str, folder: str | Path = FOLDER) -> dict[str, float]:
    """The thresholds measured with a model of `scheme` (`models/<scheme>.yaml`), {} without a table."""
    path = Path(folder) / MODELS / f"{scheme}.yaml"
    return dict(_table(str(path.resolve())).thresholds) if path.is_file() else {}


def lid_threshold_for(code: str, scheme: str, folder: str | Path = FOLDER) -> float:
    """The threshold `code` is judged by under a model of `scheme`: its settings file's `lid_threshold`,
    or the threshold measured with that model (`model_thresholds`) where that is lower. The files'
    values are FineWeb-2's, set on GlotLID's probabilities; where clean prose in the language
    scores lower under the model we run, FineWeb-2's value would drop it, so the measured one is
    used. Never higher: FineWeb-2's is the bound that web text (not clean prose) was judged by."""
    own = settings_for(code, folder).lid_threshold
    measured = model_thresholds(scheme, folder).get(code)
    return own if measured is None else min(own, measured)


def reference_lines(path: str | Path, max_lines: int) -> Iterator[str]:
    """The first `max_lines` non-empty lines of a calibration file, stripped, streamed (`iter_lines`)."""
    n = 0
    for _, line in iter_lines(path):
        if n >= max_lines:
            return
        if line := line.strip():
            n += 1
            yield line


def calibrate_lid(references: dict[str, Iterable[str]], lid: Any) -> dict[str, tuple[float, int]]:
    """Per language code, `lid_threshold` (clip(median - std, 0.3, 0.9)) of the probabilities the
    LID stage judges (the top label's, or its macrolanguage family's sum where higher: `_judge`) of the
    reference lines of `references` (gold code -> lines) whose predicted code is the gold language
    (any script, a macrolanguage's member included), grouped by the predicted code: Serbian lines give
    `srp_Cyrl` and `srp_Latn` apart. A code with fewer than MIN_LID_LINES such lines is left out.
    Returns code -> (threshold, lines measured)."""
    from core.languages import LanguageSet

    scores: dict[str, list[float]] = {}
    for gold, lines in references.items():
        want = LanguageSet([gold])
        for line in lines:
            top = lid.top_labels(line, 10)
            if not top or top[0][0] not in want:
                continue
            code, p = top[0]
            scores.setdefault(code, []).append(max(p, lid.family_score(code, line, top)))
    return {c: (lid_threshold(x), len(x)) for c, x in sorted(scores.items()) if len(x) >= MIN_LID_LINES}


def write_model_thresholds(
    table: dict[str, tuple[float, int]], scheme: str, source: str, out: str | Path, how: str
) -> Path:
    """Write `models/<scheme>.yaml`: the text is built and validated first (read back as the loader
    reads it: an empty table, a bad code or value is a ConfigError and nothing is written), then
    written through a temporary name. Each code's line says how many reference lines measured it."""
    import yaml

    out = Path(out)
    if not table:
        raise ConfigError("thresholds: no language (a table must measure at least one); nothing written")
    if out.name != f"{scheme}.yaml":
        raise InputError(f"--out must be named {scheme}.yaml (the model's label scheme)")
    lines = [
        f"# LID thresholds measured with the {scheme} model (curation/language_settings.py: calibrate_lid).",
        f"# {how}",
        "# A language is judged by min(its file's lid_threshold, this value): lid_threshold_for.",
        f"model: {scheme}",
        yaml.safe_dump({"source": source}, allow_unicode=True, width=1_000_000).rstrip("\n"),
        "thresholds:",
        *(f"  {code}: {t}  # {n} lines" for code, (t, n) in table.items()),
    ]
    text = "\n".join(lines) + "\n"
    check = build_config(ModelThresholds, load_yaml(text, str(out)), str(out))
    if check.model != scheme or check.thresholds != {c: t for c, (t, _) in table.items()}:
        raise ConfigError(f"{out}: the table does not read back as measured")  # a bug, never a user's
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, text)
    _table.cache_clear()
    return out


# --- FineWeb-2's configs -> our files ------------------------------------------------------------

FW2_REPO = "huggingface/fineweb-2"

# fineweb-2-pipeline.py's settings shared by every language (its comments say why: trafilatura
# leaves few paragraphs, FineWebQuality counts duplicated line characters with its own ratio).
FW2_SHARED_REPETITION = {"dup_para_frac": 0, "dup_para_char_frac": 0, "dup_line_char_frac": 0}
FW2_SHARED_FINEWEB = {"short_line_thr": 999, "char_duplicates_ratio": 0.1}
FW2_MIN_STOP_WORDS = 2
FW2_KEYS = {
    "language_score", "dup_line_frac", "dup_n_grams", "top_n_grams", "line_punct_thr", "new_line_ratio",
    "min_avg_word_length", "max_avg_word_length", "max_non_alpha_words_ratio", "stopwords",
}  # fmt: skip


def from_fineweb2(
    fw2: dict[str, Any], code: str, source: str, segmenter: str | None = None
) -> LanguageSettings:
    """A FineWeb-2 config (configs/<code>.yml, read) as our settings, each key passed where
    fineweb-2-pipeline.py passes it: language_score -> the LID threshold; dup_line_frac, top_n_grams,
    dup_n_grams -> GopherRepetitionFilter; line_punct_thr, new_line_ratio -> FineWebQualityFilter;
    min/max_avg_word_length, max_non_alpha_words_ratio, stopwords (as stop_words) ->
    GopherQualityFilter; with the pipeline's shared settings (FW2_SHARED_*, min_stop_words=2)."""
    if set(fw2) != FW2_KEYS:
        missing, extra = sorted(FW2_KEYS - set(fw2)), sorted(set(fw2) - FW2_KEYS)
        raise ConfigError(f"{source}: not a FineWeb-2 language config (missing {missing}, unknown {extra})")
    stop_words = tuple(dict.fromkeys(str(w).strip() for w in fw2["stopwords"] if str(w).strip()))
    return build_config(
        LanguageSettings,
        {
            "language": code,
            "source": source,
            "lid_threshold": fw2["language_score"],
            "segmenter": segmenter or default_segmenter(code),
            "gopher_repetition": {
                **FW2_SHARED_REPETITION,
                "dup_line_frac": fw2["dup_line_frac"],
                "top_n_grams": fw2["top_n_grams"],
                "dup_n_grams": fw2["dup_n_grams"],
            },
            "gopher_quality": {
                "min_avg_word_length": fw2["min_avg_word_length"],
                "max_avg_word_length": fw2["max_avg_word_length"],
                "max_non_alpha_words_ratio": fw2["max_non_alpha_words_ratio"],
                "min_stop_words": FW2_MIN_STOP_WORDS,
                "stop_words": stop_words,
            },
            "fineweb_quality": {
                **FW2_SHARED_FINEWEB,
                "line_punct_thr": fw2["line_punct_thr"],
                "new_line_ratio": fw2["new_line_ratio"],
            },
        },
        source,
    )


def default_from_fineweb2(configs: Sequence[LanguageSettings], source: str) -> LanguageSettings:
    """default.yaml: for a language no file measured.

    - LID threshold 0.3: FineWeb-2's floor, and its value for 1,102 of its 1,929 languages; with no
      score distribution measured, a higher bar would drop a whole language unseen.
    - No stop words (min_stop_words null): a list of another language would drop every document.
    - line_punct_thr -1 (off), FineWeb-2's value for 1,613 of its 1,929 languages: whether a
      language's lines end in punctuation datatrove knows depends on its script (Thai's do not).
    - Every other threshold: the lenient decile over `configs` (the 50 largest languages, whose values
      were measured on web-scale text): the value that 90% of them filter harder than, so a language
      no one measured is judged no harder than nine in ten measured ones (a maximum fraction or
      length: the 90th percentile; a minimum: the 10th). Not the median: half of the measured
      languages would then be filtered more leniently than an unknown one, whose prose (its
      segmenter, punctuation, numerals) nothing here has seen. FineWeb-2's small subsets are not
      used: they are mostly Bible text, whose verse repetition gave them thresholds no web page
      resembles (e.g. new_line_ratio 0.07).
    - Segmenter: whitespace (settings_for never changes it: a caller that knows better asks
      curation/filters/segment.py's segmenter_for).
    """

    def lenient(values: Iterable[float], upper: bool) -> float:
        xs = sorted(values)
        q = statistics.quantiles(xs, n=10, method="inclusive")  # 9 cut points: deciles
        return round(q[-1] if upper else q[0], 3)

    def hi(values: Iterable[float]) -> float:  # a maximum: lenient is high
        return lenient(values, upper=True)

    def lo(values: Iterable[float]) -> float:  # a minimum: lenient is low
        return lenient(values, upper=False)

    def hi_pairs(pairs_of: list[tuple[tuple[int, float], ...]]) -> list[tuple[int, float]]:
        ns = sorted({n for pairs in pairs_of for n, _ in pairs})
        return [(n, hi(f for pairs in pairs_of for m, f in pairs if m == n)) for n in ns]

    rep = [c.gopher_repetition for c in configs]
    qual = [c.gopher_quality for c in configs]
    fw = [c.fineweb_quality for c in configs]
    return build_config(
        LanguageSettings,
        {
            "language": DEFAULT,
            "source": source,
            "lid_threshold": 0.3,
            "segmenter": "whitespace",
            "gopher_repetition": {
                **FW2_SHARED_REPETITION,
                "dup_line_frac": hi(r.dup_line_frac or 0 for r in rep),
                "top_n_grams": hi_pairs([r.top_n_grams for r in rep]),
                "dup_n_grams": hi_pairs([r.dup_n_grams for r in rep]),
            },
            "gopher_quality": {
                "min_avg_word_length": lo(q.min_avg_word_length or 0 for q in qual),
                "max_avg_word_length": hi(q.max_avg_word_length or 0 for q in qual),
                # datatrove's name, but a minimum share of words with a letter: lenient is low
                "max_non_alpha_words_ratio": lo(q.max_non_alpha_words_ratio or 0 for q in qual),
                "min_stop_words": None,
                "stop_words": (),
            },
            "fineweb_quality": {
                **FW2_SHARED_FINEWEB,
                "line_punct_thr": -1,
                "new_line_ratio": hi(f.new_line_ratio for f in fw),
            },
        },
        source,
    )


def english_settings() -> LanguageSettings:
    """eng_Latn: FineWeb's English settings (datatrove's defaults for every block, C4's included)."""
    return LanguageSettings(
        language="eng_Latn",
        source="FineWeb (English): datatrove 0.10.1's defaults of GopherRepetitionFilter, "
        "GopherQualityFilter, FineWebQualityFilter and C4QualityFilter; LID threshold 0.65",
        lid_threshold=ENGLISH_LID_THRESHOLD,
        segmenter=default_segmenter("eng_Latn"),
        gopher_quality=GopherQualitySettings(stop_words=ENGLISH_STOP_WORDS),
        c4_quality=True,
    )


class _Fw2Repo:
    """Files of a FineWeb-2 git repository (a clone, or a bare git directory) at one commit."""

    def __init__(self, git_dir: str | Path, rev: str = "HEAD") -> None:
        self.git_dir = str(git_dir)
        self.commit = self._git("rev-parse", "--verify", f"{rev}^{{commit}}").strip()
        self.skipped: list[tuple[str, str]] = []
        """(subset, words) of the distribution's rows `largest` left out: words not a whole number."""

    def _git(self, *args: str) -> str:
        try:
            out = subprocess.run(
                ["git", f"--git-dir={self.git_dir}", *args], capture_output=True, text=True, check=True
            )
        except subprocess.CalledProcessError as e:
            raise InputError(f"{self.git_dir}: git {' '.join(args)}: {e.stderr.strip()}") from None
        return out.stdout

    def read(self, path: str) -> str:
        return self._git("show", f"{self.commit}:{path}")

    def largest(self, top: int) -> list[str]:
        """The `top` subsets with the most words (fineweb2-language-distribution.csv, train split)."""
        import csv
        import io

        name = "fineweb2-language-distribution.csv"
        rows = csv.DictReader(io.StringIO(self.read(name)))
        words: dict[str, int] = {}
        for r in rows:
            if r.get("split") != "train" or str(r.get("subset")).endswith("_removed"):
                continue
            n = str(r.get("words") or "").strip()
            if n.isascii() and n.isdigit():
                words[str(r["subset"])] = int(n)
            else:  # counted and said: a row left out could be one of the largest
                self.skipped.append((str(r.get("subset")), n))
        if self.skipped:
            shown = ", ".join(f"{s} ({w!r})" for s, w in self.skipped[:5])
            log.warning(
                "%s: %d train rows left out, their words is not a whole number: %s",
                name,
                len(self.skipped),
                shown,
            )
        return sorted(words, key=lambda s: (-words[s], s))[:top]


def header(settings: LanguageSettings, how: str) -> str:
    """The comment atop a generated file: what it is, where its values come from, how to remake it."""
    return f"# Curation settings of {settings.language} (curation/language_settings.py).\n# Source: {settings.source}\n# {how}\n"


def dump(settings: LanguageSettings, how: str) -> str:
    """The YAML text of a settings file: header, then every key in the model's order (a file shows
    each threshold, defaults included), lists of words and (n, fraction) pairs inline, UTF-8."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        def represent_list(self, data: Any) -> Any:  # a list of scalars on one line
            flow = all(not isinstance(x, (list, tuple, dict)) for x in data)
            return self.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)

    _Dumper.add_representer(list, _Dumper.represent_list)
    body = yaml.dump(
        settings.to_dict(),
        Dumper=_Dumper,
        allow_unicode=True,
        sort_keys=False,
        default_flow_style=False,
        width=100,
    )
    text = header(settings, how) + body
    check = build_config(LanguageSettings, load_yaml(text, settings.language), settings.language)
    assert check == settings, "a settings file must read back as what was written"
    return text


def write_settings(settings: LanguageSettings, path: str | Path, how: str) -> Path:
    """Write `settings` to `path`: validated first (`dump` reads its text back), then through a
    temporary name, so a half-written file never exists. The per-file cache is cleared: a reader in
    this process must see the new file, not the one it read before."""
    path = Path(path)
    write_text_atomic(path, dump(settings, how))
    _cached.cache_clear()
    return path


def write_fineweb2(
    git_dir: str | Path, out: str | Path = FOLDER, top: int = 50, rev: str = "HEAD"
) -> list[Path]:
    """configs/languages/ from a FineWeb-2 repository: its `top` largest languages, eng_Latn and
    default.yaml (`python -m curation import-fineweb2`)."""
    repo = _Fw2Repo(git_dir, rev)
    out = Path(out)
    how = "Made by `python -m curation import-fineweb2 FINEWEB2_GIT_DIR`; edit the generator, not this file."
    shipped = []
    for code in repo.largest(top):
        file = f"configs/{code}.yml"
        source = f"{FW2_REPO} commit {repo.commit}, file {file} (Apache-2.0)"
        data = load_yaml(repo.read(file), f"{FW2_REPO}:{file}")
        shipped.append(from_fineweb2(data, code, source))
    source = (
        f"{FW2_REPO} commit {repo.commit}: lenient deciles over configs/<code>.yml of its {top} "
        "largest languages (fineweb2-language-distribution.csv, words), see default_from_fineweb2"
    )
    # every file is built and validated before the first is written: a bad config of FineWeb-2's
    # cannot leave the folder half old, half new
    files = [*shipped, english_settings(), default_from_fineweb2(shipped, source)]
    out.mkdir(parents=True, exist_ok=True)
    return [write_settings(s, out / f"{s.language}.yaml", how) for s in files]


# --- A language's settings from a reference text --------------------------------------------------

STOP_WORD_FREQUENCY = 0.008
"""A stop word is above 0.8% of the reference's word tokens (EPFL's method, FineWeb-2's lists)..."""
STOP_WORD_FALLBACK = 0.003
"""... or above 0.3% when 0.8% gives fewer than MIN_STOP_WORDS_LISTED."""
MIN_STOP_WORDS_LISTED = 8
LID_FLOOR, LID_CAP = 0.3, 0.9
"""FineWeb-2's clip of median - std."""
RATIO_CLIP = (0.5, 2.0)
"""How far a language's threshold may move from English's: a freak reference cannot switch a
filter off (x100) or make it drop everything (x0.01)."""
MIN_LID_LINES = 20
"""Fewer reference lines identified as the language make median - std meaningless."""


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


def lid_threshold(scores: Sequence[float]) -> float:
    """FineWeb-2's τ = clip(median(X) − σ(X), 0.3, 0.9) over the language's own LID scores X
    (σ: the population standard deviation)."""
    if len(scores) < MIN_LID_LINES:
        raise InputError(
            f"only {len(scores)} reference lines were identified as the language (need {MIN_LID_LINES})"
        )
    tau = statistics.median(scores) - statistics.pstdev(scores)
    return round(min(max(tau, LID_FLOOR), LID_CAP), 3)


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


MAX_LINE_CHARS = 1 << 20
"""Longest line a reference file may have (a `.jsonl` record is one line: a long Wikipedia article
is ~200K characters); a longer one is refused, naming the file and the line."""
MAX_DOC_CHARS = 4 << 20
"""A plain-text document ends here if no blank line (or --lines-per-doc) ended it before: every
statistic is a rate over lines, so where a long block is cut changes nothing but the count."""
MAX_REFERENCE_LINES = 1_000_000
"""Non-empty lines `derive-language` reads by default (`--max-lines`): Leipzig's 1M-sentence corpora."""
MAX_REFERENCE_CHARS = 512 << 20
"""Characters read at most, whatever the line count: with the line cap, what bounds the run's memory."""


def open_regular(path: str | Path):
    """`path` opened for reading UTF-8 text if it is a regular file (a link to one included); an
    InputError naming it otherwise. A FIFO, socket or device would block `open` or `read` forever (a
    FIFO in calibrate-lid's folder hung it): opened without blocking, checked on the descriptor
    (no race between the check and the open), then read as a file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror or e})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{path}: not a regular file (a folder, FIFO, socket or device)")
        os.set_blocking(fd, True)
        return open(fd, encoding="utf-8", errors="strict")  # the caller closes it
    except BaseException:
        os.close(fd)
        raise


def is_regular(path: Path) -> bool:
    """Whether `path` is (a link to) a regular file, decided without opening it."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def iter_lines(path: str | Path, max_chars: int = MAX_LINE_CHARS) -> Iterator[tuple[int, str]]:
    """(line number, line without its end) of a UTF-8 text file, read as a stream: no line longer
    than `max_chars` is ever held (an InputError naming the file and the line), and a byte that is
    not UTF-8 is an InputError naming the file. Lines end where `str.splitlines` ends them."""
    with open_regular(path) as f:
        n = 0
        while True:
            try:
                raw = f.readline(max_chars + 1)
            except UnicodeDecodeError as e:
                raise InputError(f"{path}: not UTF-8 text after line {n}: {e.reason}") from None
            except OSError as e:
                raise InputError(f"{path}: cannot be read ({e.strerror or e})") from None
            if not raw:
                return
            n += 1
            if len(raw) > max_chars and not raw.endswith(("\n", "\r")):
                raise InputError(f"{path}:{n}: a line of more than {max_chars:,} characters")
            yield from ((n, part) for part in (raw.splitlines() or [""]))


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

    _check_language("--lang", code)
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
