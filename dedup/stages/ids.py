"""Stage `ids`: unusable text (empty_text, no_words), documents without an id (null_id), and duplicate
ids (the longest text under an id stays).

A null id is removed and counted here rather than carried on: every later stage keys decisions and
clusters by id, and the output would hold a document with a null `id` and `dup_cluster`.
"""

from __future__ import annotations

from typing import Any

from dedup.stages.base import Stage, StageContext
from dedup.stages.common import decisions_of, reason_counts


class Ids(Stage):
    name = "ids"
    removes = True
    funnel_row = "ids"

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        # unusable text first (prepare's reason), then a missing id
        reason = F.coalesce(F.col("_reason"), F.when(F.col("id").isNull(), F.lit("null_id")))
        prep = ctx.prep.withColumn("_reason", reason)
        bad = decisions_of(prep.where(F.col("_reason").isNotNull()), "ids", F.col("_reason"))
        w = Window.partitionBy("id").orderBy(F.col("_bytes").desc(), F.col("_text_hash"), F.col("_row"))
        dup = (
            prep.where(F.col("_reason").isNull())
            .select("_row", "id", "_bytes", "_text_hash")
            .withColumn("_rn", F.row_number().over(w))
            .where(F.col("_rn") > 1)
        )
        dup = decisions_of(dup, "ids", F.lit("duplicate_id"), F.col("id"))
        ctx.write(bad.unionByName(dup), "ids/removed")
        return {"removed": reason_counts(ctx.decisions(["ids"]))}
