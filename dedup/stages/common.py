"""Spark helpers the dedup stages share: decision rows, keep policies, surviving rows, pair checks.

Decisions are rows (_row, id, stage, reason, partner_id, _bytes): every removed document has one,
with the id of the document kept in its place where there is one. A document is alive while no
finished stage (`ctx.done`) has a decision row for it. Nothing here collects to the driver but
per-reason counts.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from dedup.minhash import MinHashConfig, estimate_jaccard, exact_jaccard, shingle_hashes
from dedup.normalize import normalize_bytes, normalize_text
from dedup.stages.base import StageContext
from dedup.words import shingle_texts

ADDED_COLUMNS = ("dup_cluster", "dup_cluster_size")
DECISION_COLS = ("_row", "id", "stage", "reason", "partner_id", "_bytes")


def keep_order(policy: str, columns: set[str]):
    """Sort expressions: the first row of a group under this policy is the one kept."""
    from pyspark.sql import functions as F

    time_cols = [c for c in ("fetch_time", "crawl") if c in columns]
    if policy == "best":
        order = [F.col("quality").desc_nulls_last()] if "quality" in columns else []
        order += [F.col("_bytes").desc()] + [F.col(c).asc_nulls_last() for c in time_cols]
    elif policy == "first":
        order = [F.col(c).asc_nulls_last() for c in time_cols]
    else:  # last
        order = [F.col(c).desc_nulls_last() for c in time_cols]
    return [*order, F.col("id").asc(), F.col("_row").asc()]


def reason_counts(decisions) -> dict[str, dict[str, int]]:
    """{reason: {docs, bytes}} of decision rows: the `removed` part of a stage's info."""
    from pyspark.sql import functions as F

    rows = decisions.groupBy("reason").agg(F.count(F.lit(1)).alias("n"), F.sum("_bytes").alias("b")).collect()
    return {r["reason"]: {"docs": int(r["n"]), "bytes": int(r["b"] or 0)} for r in rows}


def decisions_of(df, stage: str, reason, partner=None):
    """Decision rows (DECISION_COLS) from `df`: `reason` and `partner` are Spark columns (or None)."""
    from pyspark.sql import functions as F

    return df.select(
        "_row",
        "id",
        F.lit(stage).alias("stage"),
        reason.alias("reason"),
        (partner if partner is not None else F.lit(None).cast("string")).alias("partner_id"),
        "_bytes",
    )


def rank_groups(alive, key: str, policy: str, columns: set[str], stage: str, reason: str):
    """Within each group of equal `key`: the first row by policy is kept, the rest are decisions."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(key).orderBy(*keep_order(policy, columns))
    ranked = alive.withColumn("_rn", F.row_number().over(w)).withColumn("_keep_id", F.first("id").over(w))
    # copies: how many input documents this kept row now stands for (earlier merges included).
    ranked = ranked.withColumn("_group_copies", F.sum("_copies").over(Window.partitionBy(key)))
    removed = decisions_of(ranked.where(F.col("_rn") > 1), stage, F.lit(reason), F.col("_keep_id"))
    copies = ranked.where((F.col("_rn") == 1) & (F.col("_group_copies") > 1)).select(
        "_row", F.col("_group_copies").alias("copies")
    )
    return removed, copies


def alive(ctx: StageContext, cols: list[str]):
    """`cols` of the prepared rows that no finished stage removed."""
    narrow = ctx.prep.select(*cols)
    dec = ctx.decisions(ctx.done)
    return narrow.join(dec.select("_row"), "_row", "left_anti") if dec is not None else narrow


def copies_of(ctx: StageContext):
    """Alive rows with their `_copies`: 1 + the documents merged into them by exact/url dedup.

    A stage that keeps one row per group writes stages/<name>/copies (group_dedup); a later such
    stage's count includes the earlier ones', so the latest stage's count wins.
    """
    from pyspark.sql import functions as F

    base = alive(ctx, [*ctx.keep_cols, "_text_hash", "_url_norm"])
    merged = [n for n in reversed(ctx.done) if ctx.store.has(f"{n}/copies")]
    for n in merged:
        c = ctx.read(f"{n}/copies").withColumnRenamed("copies", f"_c_{n}")
        base = base.join(c, "_row", "left")
    parts = [F.col(f"_c_{n}") for n in merged]
    return base.withColumn("_copies", F.coalesce(*parts, F.lit(1)).cast("long")).drop(
        *[f"_c_{n}" for n in merged]
    )


def group_dedup(
    ctx: StageContext, name: str, key: str, policy: str, reason: str, skip_null_keys: bool = False
) -> dict[str, Any]:
    """One kept row per group of equal `key` among the alive rows (exact, url): decisions + copies.

    skip_null_keys: rows without a key are in no group (a document without a URL is no URL duplicate).
    """
    from pyspark.sql import functions as F

    base = copies_of(ctx)
    if skip_null_keys:
        base = base.where(F.col(key).isNotNull())
    removed, copies = rank_groups(base, key, policy, ctx.columns, name, reason)
    ctx.write(removed, f"{name}/removed")
    ctx.write(copies, f"{name}/copies")
    return {"removed": reason_counts(ctx.decisions([name]))}


def verify_pairs(ctx: StageContext, pairs, side, path: str):
    """The (a, b) rows of `pairs` whose documents reach the threshold by `minhash.verify`.

    side: (k, v) with v the signature or the text of the document keyed k (a and b are keys), and
    `lang` where `minhash.words` is language (the text is then shingled as the signature was).
    """
    mh = ctx.cfg.minhash
    sfx = "sig" if mh.verify == "signature" else "text"
    extra = ["lang"] if "lang" in side.columns else []
    eab = pairs.join(
        side.withColumnsRenamed({"k": "a", "v": f"{sfx}_a", **{c: f"{c}_a" for c in extra}}), "a"
    ).join(side.withColumnsRenamed({"k": "b", "v": f"{sfx}_b", **{c: f"{c}_b" for c in extra}}), "b")
    cols = ["a", "b", f"{sfx}_a", f"{sfx}_b", *(f"{c}_{e}" for c in extra for e in "ab")]
    ok = eab.select(*cols).mapInArrow(_verify_fn(mh), "a long, b long")
    ctx.write(ok, path)
    return ctx.read(path)


def _verify_fn(mh_config: MinHashConfig):
    """mapInArrow over candidate edges with both ends' signature or text: keep pairs >= threshold."""

    def run(batches):
        for batch in batches:
            d = batch.to_pydict()
            keep = []
            for i in range(batch.num_rows):
                if mh_config.verify == "signature":
                    a = _u32(d["sig_a"][i])
                    b = _u32(d["sig_b"][i])
                    sim = estimate_jaccard(a, b)
                else:  # with minhash.words = language, the tokens the signatures had (lang_a, lang_b)
                    langs = (d["lang_a"][i], d["lang_b"][i]) if "lang_a" in d else (None, None)
                    sim = text_jaccard(mh_config, d["text_a"][i], d["text_b"][i], *langs)
                keep.append(sim >= mh_config.threshold)
            yield pa.RecordBatch.from_pydict(
                {
                    "a": pa.array([x for x, k in zip(d["a"], keep) if k], pa.int64()),
                    "b": pa.array([x for x, k in zip(d["b"], keep) if k], pa.int64()),
                }
            )

    return run


def text_shingles(mh: MinHashConfig, text: str | None, lang: str | None = None):
    """The shingle hashes MinHash signed for `text`: word n-grams of its normalized text, or with
    `minhash.words = language` of its segmented words where `lang` names a segmenter."""
    if mh.words == "language" and lang is not None:
        return shingle_hashes(shingle_texts([normalize_bytes(text or "")], [text], [lang])[0], mh.ngram)
    return shingle_hashes(normalize_text(text or ""), mh.ngram)


def text_jaccard(
    mh: MinHashConfig, text_a: str | None, text_b: str | None, lang_a: str | None = None, lang_b=None
) -> float:
    """Exact Jaccard of two documents' shingle sets (`text_shingles`): what `verify: exact` checks and
    what a signature estimates."""
    return exact_jaccard(text_shingles(mh, text_a, lang_a), text_shingles(mh, text_b, lang_b))


def _u32(b: bytes):
    import numpy as np

    return np.frombuffer(b, dtype=np.uint32)


def with_fields(schema, ddl: str):
    """A new StructType: `schema` plus the fields of a DDL string (DataFrame.schema is not copied)."""
    from pyspark.sql.types import StructType

    return StructType(schema.fields + StructType.fromDDL(ddl).fields)
