"""Stage `prepare`: the input with a row number and every per-document column the stages read.

The only pass over the text until `lines`: per document the UTF-8 size (`_bytes`), a reason for
text that cannot be compared at all (`_reason`: empty_text, no_words; removed by `ids`), and the
columns each stage of the job declares (`Stage.features`, dedup/stages/base.py): exact's
normalized-text hash, url's normalized URL, minhash's band keys and signature, a user stage's own.
The text is normalized once per document here and handed to every feature (`DocBatch.norms`), so
a new dedup method declares its columns on its stage and this file does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from core.stats import Stats
from dedup.normalize import normalize_bytes
from dedup.stages.base import DocBatch, Feature, Flow, Stage, StageContext
from dedup.stages.common import ADDED_COLUMNS, with_fields


class Prepare(Stage):
    name = "prepare"
    counters = ("minhash_too_short",)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from pyspark.sql import functions as F

        # The job's stage list, which the job sets (dedup/job.py). Not a fallback to dedup.stages.STAGES
        # here: importing the package from one of its own modules made an import circle.
        if not ctx.stages:
            raise RuntimeError("prepare needs StageContext.stages: the features of every stage of the job")
        features = [f for st in ctx.stages for f in st.features(ctx.cfg)]
        df = ctx.store.tables.read_files(ctx.files)
        # A rerun over dedup output replaces its cluster columns; private (_) columns are ours.
        df = df.drop(*[c for c in df.columns if c in ADDED_COLUMNS or c.startswith("_")])
        input_columns = df.columns
        df = df.withColumn("_row", F.monotonically_increasing_id())
        ddl = ", ".join(["_reason string", *(f.ddl for f in features), "_bytes long"])
        out = df.mapInArrow(_features_fn(features), with_fields(df.schema, ddl))
        ctx.write(out, "prepare")
        prep = ctx.read("prepare")
        # minhash's own count, kept here where every document is seen: texts too short to shingle
        short = (
            F.col("_reason").isNull() & F.col("_bands").isNull() if "_bands" in prep.columns else F.lit(False)
        )
        agg = prep.agg(
            F.count(F.lit(1)).alias("docs"),
            F.sum("_bytes").alias("bytes"),
            F.sum(F.when(short, 1).otherwise(0)).alias("short"),
        ).first()
        return {
            "docs": int(agg["docs"]),
            "bytes": int(agg["bytes"] or 0),
            "minhash_too_short": int(agg["short"] or 0),
            "columns": input_columns,
        }

    def add_to_stats(self, stats: Stats, info: dict[str, Any], flow: Flow) -> None:
        flow.docs, flow.bytes = info["docs"], info["bytes"]  # every document enters the funnel here
        super().add_to_stats(stats, info, flow)


def _features_fn(features: Sequence[Feature]):
    """mapInArrow function: the input columns, `_reason`, every stage's feature columns, `_bytes`."""

    def run(batches):
        fns = [f.make() for f in features]  # per task, on the executor
        for batch in batches:
            texts = batch.column("text").to_pylist()
            urls = batch.column("url").to_pylist() if "url" in batch.schema.names else [None] * len(texts)
            # UTF-8 sizes from Arrow's offsets, not by encoding every text again in Python
            nbytes = pc.fill_null(pc.binary_length(batch.column("text")), 0).cast(pa.int64())
            reason, norms = [], []
            for text in texts:
                norm = normalize_bytes(text) if text and not text.isspace() else None
                if norm is None:
                    reason.append("empty_text")
                elif not norm:
                    reason.append("no_words")  # only punctuation/symbols: nothing to compare
                else:
                    reason.append(None)
                norms.append(norm)
            docs = DocBatch(batch, texts, urls, norms)
            cols = dict(zip(batch.schema.names, batch.columns))
            cols["_reason"] = pa.array(reason, pa.string())
            for fn in fns:
                cols.update(fn(docs))
            cols["_bytes"] = nbytes
            yield pa.RecordBatch.from_pydict(cols)

    return run
