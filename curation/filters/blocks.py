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
block and its rule, whichever implementation runs. Blocks are built once per worker process.
"""

from __future__ import annotations

from dataclasses import dataclass
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
        counters = self.inner.take_counters()
        if counters:
            for k, n in counters.items():
                self.count(k, n)
        if isinstance(result, Drop):
            return Drop(f"{self.key}:{result.reason}", result.detail, result.snippet)
        return result


WARM_UP_TEXT = "This is a short warm-up text. It loads the models once per worker process."


def build_filter_steps(cfg: FiltersConfig) -> list[FilterStep]:
    """The enabled filters, in pipeline order: the four built-in blocks, then the user's entries."""
    steps = []
    for key, kwargs in cfg.enabled().items():
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
