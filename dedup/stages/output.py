"""Stage `output`: the surviving documents with their cluster columns, boilerplate lines removed.

Writes OUTPUT/docs/ (the input columns + dup_cluster, dup_cluster_size + the columns stages add,
`Stage.output_columns`; hash-partitioned by id into `output.partitions` buckets, each sorted by id:
the same files for the same documents however the input was split; documents that lost lines are in
a second set of files per bucket) and the decisions for documents left with fewer than
`lines.min_words` words once their boilerplate lines are gone (lines_too_short). Its funnel row is
`lines`: those are the documents it removes.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from dedup.stages.base import Stage, StageContext
from dedup.stages.common import (
    ADDED_COLUMNS,
    alive,
    copies_of,
    decisions_of,
    reason_counts,
    with_fields,
)


class Output(Stage):
    name = "output"
    removes = True
    # Its bytes_out is bytes_in less the removed documents' bytes, like every other row; the bytes of
    # the lines removed are not subtracted there (info["bytes"] has the measured output size).
    funnel_row = "lines"

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        added = [
            (st.name, cols) for st in ctx.stages if ctx.ran(st.name) and (cols := st.output_columns(ctx.cfg))
        ]
        names = [c for _, cols in added for c in cols]
        # an input column a stage adds again (a rerun over this job's output) takes the new values
        input_cols = [c for c in ctx.infos["prepare"]["columns"] if c not in names]
        base = _with_texts(ctx, _annotations(ctx, added), input_cols)
        # Only documents with lines to drop cross into Python: most have none (every one when the
        # lines stage is off), and sending them through mapInArrow would move every text twice.
        has = F.coalesce(F.size("_drop_lines"), F.lit(0)) > 0
        plain = (
            base.where(~has)
            .withColumn("_reason", F.lit(None).cast("string"))
            .withColumn("_lines_removed", F.lit(0))
            .withColumn("_out_bytes", F.col("_bytes"))  # the text unchanged: prepare measured it
        )
        schema = with_fields(base.schema, "_reason string, _lines_removed int")
        edited = base.where(has).mapInArrow(_apply_lines_fn(ctx.cfg.lines.min_words), schema)
        edited = edited.withColumn("_out_bytes", F.octet_length("text")).persist(StorageLevel.DISK_ONLY)
        try:
            short = decisions_of(edited.where(F.col("_reason").isNotNull()), "lines", F.col("_reason"))
            ctx.write(short, "output/removed")
            kept = plain.unionByName(edited.where(F.col("_reason").isNull()))
            # counted from narrow columns first (the plain side needs no text for it)
            agg = kept.agg(F.count(F.lit(1)).alias("n"), F.sum("_out_bytes").alias("b")).first()
            # Both sides keep _with_texts' partitioning: side i's partition k holds the documents of
            # hash bucket k of their id, so the files are a function of the kept ids and
            # `partitions` alone (not of how the input was split), with no second shuffle of the texts.
            docs = kept.sortWithinPartitions("id", "_row")
            ctx.store.tables.write(docs.select(*input_cols, *ADDED_COLUMNS, *names), "docs", "zstd")
        finally:
            edited.unpersist()
        return {
            "removed": reason_counts(ctx.decisions(["output"])),
            "docs": int(agg["n"]),
            "bytes": int(agg["b"] or 0),
        }


def _annotations(ctx: StageContext, added: list[tuple[str, tuple[str, ...]]]):
    """Per alive document, no text: _row, id, _bytes, the cluster columns, the columns stages add and
    _drop_lines (the lines `lines` removes). Its joins on _row move only these narrow rows."""
    from pyspark.sql import functions as F

    ann = _with_cluster_columns(ctx, alive(ctx, ["_row", "id", "_bytes"]))
    for stage_name, _ in added:
        ann = ann.join(ctx.read(f"{stage_name}/columns"), "_row", "left")
    if ctx.ran("lines"):
        return ann.join(ctx.read("lines/drops"), "_row", "left")
    return ann.withColumn("_drop_lines", F.lit(None).cast("array<int>"))


def _with_texts(ctx: StageContext, ann, input_cols: list[str]):
    """The annotated documents with their input columns: the text crosses the cluster once, both sides
    hash-partitioned by id into `partitions`, so the join on id moves nothing more and the result
    keeps that partitioning. Removed documents (no annotation row) drop out here.

    The row is matched by id, then _row (a duplicate id's removed row has the same id): as `a - b ==
    0`, not `a == b`, which Catalyst would turn into a second join key and shuffle both sides again
    by (id, _row)."""
    from pyspark.sql import functions as F

    n = ctx.partitions
    wide = ctx.prep.select(*input_cols, "_row").repartition(n, "id")
    ann = ann.withColumnRenamed("_row", "_ann_row").repartition(n, "id")
    same_row = (F.col("_row") - F.col("_ann_row")) == 0
    return wide.join(ann, "id").where(same_row).drop("_ann_row")


def _with_cluster_columns(ctx: StageContext, base):
    """dup_cluster (the cluster's id, else the document's own) and dup_cluster_size (else its copies)."""
    from pyspark.sql import functions as F

    cp = copies_of(ctx).select("_row", "_copies")
    base = base.join(cp, "_row", "left")
    if ctx.ran("cluster"):
        base = base.join(ctx.read("cluster/info"), "_row", "left")
    else:
        base = base.withColumn("dup_cluster", F.lit(None).cast("string")).withColumn(
            "dup_cluster_size", F.lit(None).cast("long")
        )
    return base.withColumn("dup_cluster", F.coalesce("dup_cluster", "id")).withColumn(
        "dup_cluster_size", F.coalesce("dup_cluster_size", "_copies", F.lit(1)).cast("long")
    )


def _apply_lines_fn(min_words: int):
    """Remove the listed lines; a document left with < min_words words gets _reason lines_too_short."""

    def run(batches):
        for batch in batches:
            texts = batch.column("text").to_pylist()
            drops = batch.column("_drop_lines").to_pylist()
            out_text, reason, removed = [], [], []
            for text, dl in zip(texts, drops):
                if not dl:
                    out_text.append(text), reason.append(None), removed.append(0)
                    continue
                gone = set(dl)
                lines = text.split("\n")
                kept = "\n".join(line for i, line in enumerate(lines) if i not in gone).strip("\n")
                out_text.append(kept)
                removed.append(len(gone))
                reason.append("lines_too_short" if len(kept.split()) < min_words else None)
            cols = dict(zip(batch.schema.names, batch.columns))
            cols["text"] = pa.array(out_text, pa.string())
            cols["_reason"] = pa.array(reason, pa.string())
            cols["_lines_removed"] = pa.array(removed, pa.int32())
            yield pa.RecordBatch.from_pydict(cols)

    return run
