"""Stage `exact`: documents with the same normalized text (dedup.normalize); one per group stays."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from dedup.config import DedupJobConfig
from dedup.normalize import hash64
from dedup.stages.base import DocBatch, Feature, Stage, StageContext
from dedup.stages.common import group_dedup


class Exact(Stage):
    name = "exact"
    removes = True
    funnel_row = "exact"

    def enabled(self, cfg: DedupJobConfig) -> bool:
        return cfg.exact.enabled

    def features(self, cfg: DedupJobConfig) -> tuple[Feature, ...]:
        return (Feature("_text_hash long", lambda: _text_hash),)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        return group_dedup(ctx, self.name, "_text_hash", ctx.cfg.exact.keep, "exact_duplicate")


def _text_hash(docs: DocBatch) -> dict[str, pa.Array]:
    """xxhash64 of the normalized text; null when it has no word."""
    return {"_text_hash": pa.array([hash64(n) if n else None for n in docs.norms], pa.int64())}
