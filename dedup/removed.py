"""removed/: a bounded, deterministic sample of the documents dedup removed, each with its evidence.

Which rows (issue 46: bounded at any scale, fair to small cells): per cell (stage, reason, lang,
size_band), the `output.removed_sample_per_reason` rows with the smallest `sample_key`, the hash of
the document id that extract's rejected/ sample uses (curation.schema.sample_key, bottom-k as
curation/pipeline.py `_Rejected`). A hash of the id, not arrival order: the same rows on every rerun
and however Spark split the input, and a uniform sample of the cell. A cell per language so that a
language with few duplicates is not crowded out by one with many; a cell per group-size band so that
pairs and 1,000-copy clusters both show. Ties of the key (two rows with one id, `duplicate_id`) are
broken by id, then `_row`.

How, without collecting removed rows to the driver: each partition keeps its k smallest keys per
cell in Python (a combiner: at most k x cells rows leave it), then one window ranks those per cell.
Only the sampled rows' texts, and their partners', are read again, to cut the snippet and to measure
the similarity; their row numbers (at most 2 x k x cells longs) are broadcast to that scan.

Columns (every row; null where they do not apply):

    id, url, stage, reason, partner_id   the decision (removed_ids/ has every one); partner_id is the
                                         id of the document kept in its place (for drop_cluster: the
                                         cluster's id, itself removed)
    lang                                 the input's `lang` column (null without one)
    cluster_id                           near-duplicate removals (stage cluster): the cluster's id, the
                                         kept row's `dup_cluster` in docs/
    cluster_size                         the size of the group the row was removed from, in input
                                         documents as `dup_cluster_size` counts them: for `cluster`
                                         the kept row's dup_cluster_size (drop_cluster: the removed
                                         members' copies summed), for exact and url the copies the
                                         kept row stood for after that stage
    size_band                            cluster_size as a band of the sample's cells: 2, 3-5, 6-20,
                                         21+ (report/browse.py's bands)
    metric, value, threshold, op         the evidence against the partner, as in extract's rejected/
                                         (curation.schema.REJECTED_SCHEMA): metric `shingle_jaccard`,
                                         value the exact Jaccard of the two documents' shingle sets
                                         (the word n-grams MinHash signs, dedup.stages.common
                                         `text_shingles`; 1.0 for exact duplicates); for `cluster`
                                         threshold `minhash.threshold` and op ">=" or "<" as the
                                         value stands to it (without `verify`, LSH and transitive
                                         components can merge a pair below the threshold: the row
                                         shows it); other stages compare no similarity, so no
                                         threshold. Null without a partner, or when the partner is
                                         the row itself (drop_cluster's first member)
    snippet                              the first 500 characters of the text
    sample_key                           the ordering key of the sample (see above)
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from curation.schema import sample_key
from dedup.config import DedupJobConfig
from dedup.minhash import MinHashConfig
from dedup.stages.base import StageContext
from dedup.stages.common import DECISION_COLS, text_jaccard

SIZE_BANDS = ((2, 2, "2"), (3, 5, "3-5"), (6, 20, "6-20"), (21, None, "21+"))
"""(lowest, highest, label) of the group sizes sampled apart; the browser's (report/browse.py _BANDS)."""

SNIPPET_CHARS = 500
METRIC = "shingle_jaccard"
CELL = ("stage", "reason", "lang", "size_band")
_CANDIDATE = (
    "_row long, id string, stage string, reason string, partner_id string, lang string, "
    "cluster_id string, cluster_size long, size_band string, sample_key long"
)
_EVIDENCE = "metric string, value double, threshold double, op string"
COLUMNS = (
    "id",
    "url",
    "stage",
    "reason",
    "partner_id",
    "lang",
    "cluster_id",
    "cluster_size",
    "size_band",
    "metric",
    "value",
    "threshold",
    "op",
    "snippet",
    "sample_key",
)
# Above this many rows to read again, the sampled rows are joined to the texts by a shuffle instead of
# a broadcast of their row numbers (16 bytes a row through the driver).
_BROADCAST_ROWS = 2_000_000


def write_removed(ctx: StageContext, per_cell: int) -> None:
    """removed_ids/: every decision; removed/: the sample of the module docstring."""
    from pyspark import StorageLevel

    dec = ctx.decisions(ctx.done).select(*DECISION_COLS)
    tables = ctx.store.tables
    tables.write(
        dec.drop("_row", "_bytes").repartition(1).sortWithinPartitions("reason", "id"), "removed_ids", "zstd"
    )
    sample = bottom_k(with_cells(ctx, dec), per_cell).persist(StorageLevel.DISK_ONLY)
    held = [sample]
    try:
        out = _with_evidence(ctx, sample, sample.count(), held)
        tables.write(
            out.select(*COLUMNS).repartition(1).sortWithinPartitions(*CELL, "sample_key", "id"),
            "removed",
            "zstd",
        )
    finally:
        for df in held:
            df.unpersist()


def with_cells(ctx: StageContext, dec):
    """Decision rows with lang, cluster_id, cluster_size and size_band (narrow joins, no text)."""
    from pyspark.sql import functions as F

    prep = ctx.prep
    lang = F.col("lang").cast("string") if "lang" in prep.columns else F.lit(None).cast("string")
    dec = dec.join(prep.select("_row", lang.alias("lang")), "_row")
    dec = dec.join(_group_sizes(ctx), ["stage", "partner_id"], "left")
    size = F.col("cluster_size")
    band = F.lit(None).cast("string")
    for lo, hi, label in reversed(SIZE_BANDS):
        band = F.when((size >= lo) & (size <= hi if hi is not None else F.lit(True)), label).otherwise(band)
    return dec.withColumn("size_band", band)


def _group_sizes(ctx: StageContext):
    """(stage, partner_id, cluster_id, cluster_size) of every group a stage kept one row of."""
    from functools import reduce

    from pyspark.sql import functions as F

    ids = ctx.prep.select("_row", F.col("id").alias("partner_id"))
    none = F.lit(None).cast("string")
    parts = []
    for name in ctx.done:
        if name != "cluster" and ctx.store.has(f"{name}/copies"):  # exact, url (group_dedup)
            copies = ctx.read(f"{name}/copies").join(ids, "_row")
            parts.append(
                copies.select(F.lit(name).alias("stage"), "partner_id", none.alias("cluster_id"), "copies")
            )
    if "cluster" in ctx.done:
        if ctx.cfg.cluster.keep == "drop_cluster":
            # no kept row: the cluster is its removed members (partner_id = the cluster's id)
            members = _with_copies(ctx, ctx.read("cluster/removed").select("_row", "partner_id"))
            sizes = members.groupBy("partner_id").agg(F.sum("_copies").alias("copies"))
            sizes = sizes.withColumn("cluster_id", F.col("partner_id"))
        else:
            info = ctx.read("cluster/info").join(ids, "_row")
            sizes = info.select(
                "partner_id",
                F.col("dup_cluster").alias("cluster_id"),
                F.col("dup_cluster_size").alias("copies"),
            )
        parts.append(sizes.select(F.lit("cluster").alias("stage"), "partner_id", "cluster_id", "copies"))
    if not parts:
        return ctx.spark.createDataFrame(
            [], "stage string, partner_id string, cluster_id string, cluster_size long"
        )
    groups = reduce(lambda a, b: a.unionByName(b), parts)
    return groups.select(
        "stage", "partner_id", "cluster_id", F.col("copies").cast("long").alias("cluster_size")
    )


def _with_copies(ctx: StageContext, rows):
    """`rows` with `_copies`: 1 + the documents exact/url dedup merged into each (common.copies_of's
    count, for rows that are no longer alive)."""
    from pyspark.sql import functions as F

    merged = [n for n in reversed(ctx.done) if n != "cluster" and ctx.store.has(f"{n}/copies")]
    for n in merged:
        rows = rows.join(ctx.read(f"{n}/copies").withColumnRenamed("copies", f"_c_{n}"), "_row", "left")
    parts = [F.col(f"_c_{n}") for n in merged]
    return rows.withColumn("_copies", F.coalesce(*parts, F.lit(1)).cast("long"))


def bottom_k(cells, k: int):
    """Per (stage, reason, lang, size_band): the k rows of smallest (sample_key, id, _row)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    names = [c.split()[0] for c in _CANDIDATE.split(", ")]
    cand = cells.select(*names[:-1]).mapInArrow(_bottom_k_fn(k, names), _CANDIDATE)
    w = Window.partitionBy(*CELL).orderBy("sample_key", "id", "_row")
    return cand.withColumn("_rn", F.row_number().over(w)).where(F.col("_rn") <= k).drop("_rn")


def _bottom_k_fn(k: int, names: list[str]):
    """mapInArrow: the k smallest (sample_key, id, _row) per cell of each partition (none when k is 0)."""
    fields = [
        pa.field(n, pa.int64() if n in ("_row", "cluster_size", "sample_key") else pa.string()) for n in names
    ]
    schema = pa.schema(fields)

    def run(batches):
        cells: dict[tuple, list[tuple]] = {}
        for batch in batches:
            if k <= 0:
                continue
            d = batch.to_pydict()
            cols = [d[n] for n in names[:-1]]
            for i, doc_id in enumerate(d["id"]):
                key = sample_key(doc_id or "")
                row = tuple(c[i] for c in cols)
                cell = cells.setdefault((d["stage"][i], d["reason"][i], d["lang"][i], d["size_band"][i]), [])
                cell.append(((key, doc_id or "", d["_row"][i]), (*row, key)))
                if len(cell) >= 2 * k:  # amortized: sort and cut to k only now and then
                    cell.sort(key=lambda e: e[0])
                    del cell[k:]
        rows = [r for cell in cells.values() for _, r in sorted(cell, key=lambda e: e[0])[:k]]
        yield pa.RecordBatch.from_pylist([dict(zip(names, r)) for r in rows], schema=schema)

    return run


def _with_evidence(ctx: StageContext, sample, n_rows: int, held: list):
    """The sampled rows with url, snippet and the similarity to their partner (module docstring);
    what it persists is appended to `held` for the caller to release once the result is written."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    prep = ctx.prep
    # The partner: the one row with its id that `ids` did not remove (ids are unique among the rest;
    # for duplicate_id the partner id is the row's own id and this is the copy kept).
    gone = ctx.read("ids/removed").select("_row") if ctx.store.has("ids/removed") else None
    named = prep.select(F.col("_row").alias("_p_row"), F.col("id").alias("partner_id"))
    if gone is not None:
        named = named.join(gone.withColumnRenamed("_row", "_p_row"), "_p_row", "left_anti")
    partners = sample.select("partner_id").where(F.col("partner_id").isNotNull()).distinct()
    small = n_rows <= _BROADCAST_ROWS
    sample = sample.join(
        named.join(F.broadcast(partners) if small else partners, "partner_id"), "partner_id", "left"
    )
    need = (
        sample.select("_row")
        .unionByName(sample.select(F.col("_p_row").alias("_row")))
        .where(F.col("_row").isNotNull())
        .distinct()
    )
    url = F.col("url").cast("string") if "url" in prep.columns else F.lit(None).cast("string")
    lang = F.col("lang").cast("string") if "lang" in prep.columns else F.lit(None).cast("string")
    texts = prep.select("_row", "text", url.alias("url"), lang.alias("_lang")).join(
        F.broadcast(need) if small else need, "_row"
    )
    # read for the rows and again for their partners: one scan of the prepared texts, not two
    texts = texts.persist(StorageLevel.DISK_ONLY)
    held.append(texts)
    own = texts.select("_row", "url", "text")
    other = texts.select(
        F.col("_row").alias("_p_row"), F.col("text").alias("_p_text"), F.col("_lang").alias("_p_lang")
    )
    rows = sample.join(own, "_row", "left").join(other, "_p_row", "left")
    rows = rows.withColumn("snippet", F.substring("text", 1, SNIPPET_CHARS))
    keep = [c for c in rows.columns if c not in ("text", "_p_text", "_p_lang", "_p_row")]
    schema = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in rows.select(*keep).schema.fields)
    return rows.mapInArrow(_evidence_fn(ctx.cfg, keep), f"{schema}, {_EVIDENCE}")


def _evidence_fn(cfg: DedupJobConfig, keep: list[str]):
    """mapInArrow: metric, value, threshold, op of each sampled row against its partner's text."""
    mh: MinHashConfig = cfg.minhash

    def run(batches):
        for batch in batches:
            d = batch.to_pydict()
            metric, value, threshold, op = [], [], [], []
            for i in range(batch.num_rows):
                p_text, p_row = d["_p_text"][i], d["_p_row"][i]
                if p_text is None or p_row == d["_row"][i]:
                    metric.append(None), value.append(None), threshold.append(None), op.append(None)
                    continue
                sim = text_jaccard(mh, d["text"][i], p_text, d["lang"][i], d["_p_lang"][i])
                metric.append(METRIC), value.append(sim)
                if d["stage"][i] == "cluster":
                    threshold.append(mh.threshold), op.append(">=" if sim >= mh.threshold else "<")
                else:
                    threshold.append(None), op.append(None)
            cols: dict[str, Any] = {n: batch.column(n) for n in keep}
            cols["metric"] = pa.array(metric, pa.string())
            cols["value"] = pa.array(value, pa.float64())
            cols["threshold"] = pa.array(threshold, pa.float64())
            cols["op"] = pa.array(op, pa.string())
            yield pa.RecordBatch.from_pydict(cols)

    return run
