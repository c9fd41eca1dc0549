"""Stage `url`: captures of the same normalized URL; one per URL stays, documents without one are kept."""

from __future__ import annotations

from typing import Any

from dedup.config import DedupJobConfig
from dedup.stages.base import Stage, StageContext
from dedup.stages.common import group_dedup


class Url(Stage):
    name = "url"
    removes = True
    funnel_row = "url"

    def enabled(self, cfg: DedupJobConfig) -> bool:
        return cfg.url.enabled

    def run(self, ctx: StageContext) -> dict[str, Any]:
        return group_dedup(
            ctx, self.name, "_url_norm", ctx.cfg.url.keep, "url_duplicate", skip_null_keys=True
        )
