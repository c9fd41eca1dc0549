"""Heuristic filters: the four built-in blocks as registry entries, plus the user's own stages.

The "filter" registry (core/stage.py) holds two implementations of each of FineWeb's four blocks:
- `gopher_repetition`, `gopher_quality`, `c4_quality`, `fineweb_quality`: ours
  (curation/filters/text.py), the default: datatrove's rules, arguments and drop reasons, with one
  shared pre-pass per document and the n-gram counting compiled (parity and speed:
  tests/curation/test_filters_parity.py, bench/curation/filters.py);
- `datatrove_gopher_repetition`, ... : datatrove's own blocks (`datatrove.pipeline.filters`),
  called through their public `filter(doc)` method, selected with `class:` in the config entry.

Each configured entry runs as a `FilterStep`: funnel row `filter:<key>`, drop reason
`<key>:<stage's reason>` (e.g. `gopher_quality:gopher_short_doc`), so the funnel shows both the
block and its rule, whichever implementation runs. Blocks are built once per worker process. A
block's evidence (the Drop's metric, value, op and threshold; the values it measured on a document
it kept) passes through unchanged: the metric is not prefixed, the stage column says whose it is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.stage import DatatroveFilter, Document, DocumentStage, Drop, build_stage, register
from curation.config import DATATROVE_FILTERS, FiltersConfig
from curation.filters import text as _text  # noqa: F401  (registers our four blocks)


def _datatrove_block(key: str, cls_name: str) -> type:
    """A registry entry that builds datatrove's block `cls_name` (imported only when built)."""

    class Block(DatatroveFilter):
        def __init__(self, **kwargs: Any) -> None:
            from datatrove.pipeline import filters

            super().__init__(getattr(filters, cls_name)(**kwargs), key)

    Block.__name__ = Block.__qualname__ = cls_name
    return register("filter", f"datatrove_{key}")(Block)


for _key, _cls_name in DATATROVE_FILTERS.items():
    _datatrove_block(_key, _cls_name)


class FilterStep(DocumentStage):
    """One configured filter in the pipeline: names its funnel row and prefixes its reasons."""

    annotatable = True

    def __init__(self, key: str, inner: DocumentStage) -> None:
        self.key, self.inner = key, inner
        self.name = f"filter:{key}"

    @property
    def error_reason(self) -> str:
        return f"{self.key}:filter_error"

    def start_file(self) -> None:
        self.inner.start_file()

    def warm_up(self) -> None:
        self.inner.warm_up()
        self.inner.process(Document(id="warm-up", text=WARM_UP_TEXT))

    def process(self, doc: Document) -> Document | Drop:
        result = self.inner.process(doc)
        self.adopt(self.inner)
        if isinstance(result, Drop):
            return replace(result, reason=f"{self.key}:{result.reason}")
        return result


WARM_UP_TEXT = "This is a short warm-up text. It loads the models once per worker process."


PER_LANGUAGE_BLOCKS = tuple(DATATROVE_FILTERS)
"""The built-in blocks whose arguments a language's settings file gives (C4: whether it runs)."""
_MISSING = object()
_BLOCKS_PER_STAGE = 4096  # languages x scripts a worker remembers blocks for; a label set is far smaller


class PerLanguageBlock(DocumentStage):
    """One built-in block with each document's language's own arguments and word segmenter
    (`languages.settings`, curation/languages/): built once per language and worker.

    The arguments are the language file's, then the config's `filters.<key>` entries over them (a user's
    `min_doc_words: 30` holds for every language). C4's block runs only for a language whose file says
    `c4_quality: true` (English, as in FineWeb-2). A document without a language (`lang` null) gets
    default.yaml's settings. Words are split by the language's segmenter (`_build`), never by the
    file's field alone.
    """

    annotatable = True

    def __init__(self, key: str, overrides: dict[str, Any], folder: Path) -> None:
        self.key, self.name = key, key
        self.overrides, self.folder = overrides, folder
        self._blocks: dict[str | None, DocumentStage | None] = {}

    def block_for(self, lang: str | None) -> DocumentStage | None:
        block = self._blocks.get(lang, _MISSING)
        if block is _MISSING:
            block = self._build(lang)
            if len(self._blocks) < _BLOCKS_PER_STAGE:
                self._blocks[lang] = block
        return block  # type: ignore[return-value]

    def _build(self, lang: str | None) -> DocumentStage | None:
        from core.errors import ConfigError
        from core.languages import is_canonical
        from curation.filters.segment import segmenter_name_for
        from curation.languages.lookup import settings_for

        code = lang if lang is not None and is_canonical(lang) else None
        s = settings_for(code or "und_Zyyy", self.folder)
        # The segmenter is the language's, chosen by the one function dedup's `minhash.words:
        # language` calls too (segment.segmenter_name_for), so both stages split a document into the
        # same words. The block built for `language: code` already has it. default.yaml's `segmenter:
        # whitespace` stands for no language in particular and is not applied (issue 54: it turned
        # jieba, the syllable clusters and Ethiopic into whitespace runs of 25-65 characters), nor is
        # the field of a file the language borrows (its macrolanguage's, SAME_WRITTEN_LANGUAGE's). A
        # language's own file measured its thresholds in its segmenter's words: one naming another
        # segmenter is refused rather than judged in words it was not measured in (every shipped
        # file names its language's, tests/curation/test_multilingual_segmenters.py).
        chosen = segmenter_name_for(code or "und_Zyyy")
        if s.language == code and s.segmenter != chosen:
            raise ConfigError(
                f"{self.folder / (s.language + '.yaml')}: segmenter: {s.segmenter!r}, but documents in "
                f"{code} are split by {chosen!r} (curation/filters/segment.py, as dedup splits them)"
            )
        if self.key == "c4_quality":
            if not s.c4_quality:
                return None
            args = dict(self.overrides)
        else:
            args = {**getattr(s, self.key).kwargs(), **self.overrides}
        block = build_stage(
            "filter", self.key, {**args, "language": code or "und_Zyyy"}, f"filters.{self.key}"
        )
        return block

    def warm_up(self) -> None:
        self.block_for("eng_Latn")
        self.block_for(None)

    def process(self, doc: Document) -> Document | Drop:
        block = self.block_for(doc.metadata.get("lang"))
        if block is None:
            return doc
        result = block.process(doc)
        self.adopt(block)
        return result


def build_filter_steps(cfg: FiltersConfig, settings: Path | None = None) -> list[FilterStep]:
    """The enabled filters, in pipeline order: the four built-in blocks, then the user's entries.
    With a per-language `settings` folder, the built-in blocks without another `class` take each
    document's language's arguments (PerLanguageBlock)."""
    steps = []
    for key, kwargs in cfg.enabled().items():
        if settings is not None and key in PER_LANGUAGE_BLOCKS and "class" not in kwargs:
            steps.append(FilterStep(key, PerLanguageBlock(key, kwargs, settings)))
            continue
        spec = kwargs.pop("class", key)
        steps.append(FilterStep(key, build_stage("filter", spec, kwargs, f"filters.{key}", name=key)))
    return steps


@dataclass(slots=True)
class FilterResult:
    reason: str | None  # None: kept by every filter
    filter: str | None = None


class HeuristicFilters:
    """The configured filters over one text, outside any job (tests, benchmarks): first drop wins."""

    def __init__(self, cfg: FiltersConfig) -> None:
        self.steps = build_filter_steps(cfg)

    @property
    def names(self) -> list[str]:
        return [s.key for s in self.steps]

    def __call__(self, text: str, doc_id: str = "") -> FilterResult:
        for step in self.steps:
            result = step.process(Document(id=doc_id, text=text))
            if isinstance(result, Drop):
                return FilterResult(result.reason, step.key)
        return FilterResult(None)
