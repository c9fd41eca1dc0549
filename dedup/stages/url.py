"""Stage `url`: captures of the same normalized URL; one per URL stays, documents without one are kept."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from dedup.config import DedupJobConfig
from dedup.normalize import normalize_url
from dedup.stages.base import DocBatch, Feature, Stage, StageContext
from dedup.stages.common import group_dedup


class Url(Stage):
    name = "url"
    removes = True
    funnel_row = "url"

    def enabled(self, cfg: DedupJobConfig) -> bool:
        return cfg.url.enabled

    def features(self, cfg: DedupJobConfig) -> tuple[Feature, ...]:
        return (Feature("_url_norm string", lambda: _url_norm),)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        return group_dedup(
            ctx, self.name, "_url_norm", ctx.cfg.url.keep, "url_duplicate", skip_null_keys=True
        )


def _url_norm(docs: DocBatch) -> dict[str, pa.Array]:
    return {"_url_norm": pa.array([normalize_url(u) for u in docs.urls], pa.string())}
