"""Heuristic quality filters: datatrove's own filter blocks, called one document at a time.

We do not reimplement Gopher, C4 or FineWeb rules: the blocks come from datatrove
(`datatrove.pipeline.filters`) and are called through their public `filter(doc)` method, which
returns True (keep), False, or (False, reason). The drop reason recorded is
`<config key>:<datatrove reason>` (e.g. `gopher_quality:gopher_short_doc`), so the funnel shows
both the block and its rule. Blocks are built once per worker process; they are stateless
per document (GopherQuality's word tokenizer is spaCy's blank English pipeline, no download).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from curation.config import DATATROVE_FILTERS, FiltersConfig

_CACHE: dict[str, list[tuple[str, Any]]] = {}


@dataclass(slots=True)
class FilterResult:
    reason: str | None  # None: kept by every filter
    filter: str | None = None


class QualityFilters:
    """Run the enabled datatrove filters in FineWeb's order; the first drop wins."""

    name = "filters"

    def __init__(self, cfg: FiltersConfig) -> None:
        self.cfg = cfg
        self.blocks = _build(cfg)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.blocks]

    def run_one(self, name: str, block: Any, text: str, doc_id: str) -> str | None:
        """Return the drop reason of one block for `text`, or None if it keeps it."""
        from datatrove.data import Document

        result = block.filter(Document(text=text, id=doc_id, metadata={}))
        if isinstance(result, tuple):
            keep, why = result[0], (result[1] if len(result) > 1 else None)
        else:
            keep, why = bool(result), None
        if keep:
            return None
        return f"{name}:{why or 'dropped'}"

    def __call__(self, text: str, doc_id: str = "") -> FilterResult:
        for name, block in self.blocks:
            reason = self.run_one(name, block, text, doc_id)
            if reason is not None:
                return FilterResult(reason, name)
        return FilterResult(None)


def _build(cfg: FiltersConfig) -> list[tuple[str, Any]]:
    import json

    key = json.dumps(cfg.enabled(), sort_keys=True)
    blocks = _CACHE.get(key)
    if blocks is None:
        from datatrove.pipeline import filters as dt_filters

        blocks = [
            (name, getattr(dt_filters, DATATROVE_FILTERS[name])(**kwargs))
            for name, kwargs in cfg.enabled().items()
        ]
        _CACHE[key] = blocks
    return blocks
