"""Stage `lines`: the lines (normalized, hashed) found in more than K surviving documents.

K is `lines.max_docs`, raised to `max_fraction` of the surviving documents when that is set. This
stage only lists the lines to drop per document (stages/lines/drops: _row -> positions); `output`
removes them while it writes the text, and drops documents left too short.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from dedup.config import DedupJobConfig
from dedup.normalize import line_hashes
from dedup.stages.base import Stage, StageContext
from dedup.stages.common import alive


class Lines(Stage):
    name = "lines"
    counters = ("frequent_lines", "lines_removed")

    def enabled(self, cfg: DedupJobConfig) -> bool:
        return cfg.lines.enabled

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from pyspark.sql import functions as F

        texts = alive(ctx, ["_row", "text"])
        ctx.write(texts.mapInArrow(_lines_fn, "_row long, pos int, h long"), "lines/exploded")
        ex = ctx.read("lines/exploded")
        limit = ctx.cfg.lines.max_docs
        if ctx.cfg.lines.max_fraction is not None:
            limit = max(limit, int(ctx.cfg.lines.max_fraction * texts.count()))
        freq = (ex.select("_row", "h").distinct().groupBy("h").agg(F.count(F.lit(1)).alias("docs"))).where(
            F.col("docs") > limit
        )
        ctx.write(freq, "lines/frequent")
        fr = ctx.read("lines/frequent")
        drops = ex.join(fr.select("h"), "h").groupBy("_row").agg(F.collect_list("pos").alias("_drop_lines"))
        ctx.write(drops, "lines/drops")
        dr = ctx.read("lines/drops")
        agg = dr.agg(F.count(F.lit(1)).alias("docs"), F.sum(F.size("_drop_lines")).alias("lines")).first()
        return {
            "max_docs": limit,
            "frequent_lines": fr.count(),
            "docs_touched": int(agg["docs"] or 0),
            "lines_removed": int(agg["lines"] or 0),
        }


def _lines_fn(batches):
    """(_row, text) -> one row per non-empty line: (_row, pos, h)."""
    for batch in batches:
        rows, pos, hs = [], [], []
        for r, text in zip(batch.column("_row").to_pylist(), batch.column("text").to_pylist()):
            for i, h in enumerate(line_hashes(text or "")):
                if h is not None:
                    rows.append(r), pos.append(i), hs.append(h)
        yield pa.RecordBatch.from_pydict(
            {
                "_row": pa.array(rows, pa.int64()),
                "pos": pa.array(pos, pa.int32()),
                "h": pa.array(hs, pa.int64()),
            }
        )
