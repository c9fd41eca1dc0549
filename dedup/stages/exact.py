"""Stage `exact`: documents with the same normalized text (dedup.normalize); one per group stays."""

from __future__ import annotations

from typing import Any

from dedup.config import DedupJobConfig
from dedup.stages.base import Stage, StageContext
from dedup.stages.common import group_dedup


class Exact(Stage):
    name = "exact"
    removes = True
    funnel_row = "exact"

    def enabled(self, cfg: DedupJobConfig) -> bool:
        return cfg.exact.enabled

    def run(self, ctx: StageContext) -> dict[str, Any]:
        return group_dedup(ctx, self.name, "_text_hash", ctx.cfg.exact.keep, "exact_duplicate")
