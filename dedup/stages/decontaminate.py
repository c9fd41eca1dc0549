"""Stage `decontaminate`: documents that contain n-grams of the user's evaluation sets.

Off while `decontaminate.sets` is empty (it then declares no feature, so it costs nothing). On, the
driver reads the sets into one n-gram table (dedup.decontam.build_index) and broadcasts it;
`prepare`, in its one pass over the text, hands every document's normalized text to the compiled
matcher (dedup.kernels.ngram_hits) and keeps, for a document that shares any n-gram, one entry per
set: distinct n-grams shared, the first of them as text, and their hashes (`_decon`). This stage,
right after `ids`, turns that into decisions:

- a document with at least `min_ngrams` distinct n-grams of a set is contaminated by it;
- mode `drop`: removed, reason `decontaminate:<set>` (the first such set in config order: one
  reason per document, so the funnel adds up; the report counts it under every set);
- a drop that removes 99% or more of the documents checked (of 100 or more) is refused, naming
  `ngram`, `skip_trivial` and `min_ngrams` (core/removal.py), unless `allow_remove_all` is set;
- mode `annotate`: kept, with output columns `contaminated_by` (the sets, [] when none) and
  `contamination_ngrams` (distinct n-grams it shares with any set, below the threshold too).

It runs before exact, URL and near-duplicate dedup, so a contaminated document is never the copy
kept in place of clean ones. Its report (stages/decontaminate/report.json, and its marker in
stats.json) gives per set its size (files, passages, n-grams, what was left out) and, among the
documents checked, those hit, the distinct n-grams hit and a few examples (id + shared n-gram).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa

from core.removal import check_removal
from dedup.config import DecontaminateConfig, DedupJobConfig
from dedup.decontam import EvalIndex, NgramTable, build_index, find_hits
from dedup.stages.base import DocBatch, Feature, Stage, StageContext
from dedup.stages.common import alive, decisions_of, reason_counts

_HITS = pa.list_(
    pa.struct(
        [
            ("eval_set", pa.string()),
            ("ngrams", pa.int32()),
            ("example", pa.string()),
            ("keys", pa.list_(pa.int64())),
        ]
    )
)
_DDL = "_decon array<struct<eval_set:string,ngrams:int,example:string,keys:array<bigint>>>"
ANNOTATIONS = ("contaminated_by", "contamination_ngrams")


class Decontaminate(Stage):
    name = "decontaminate"
    removes = True
    funnel_row = "decontaminate"
    counters = ("contaminated_docs",)

    def enabled(self, cfg: DedupJobConfig) -> bool:
        return cfg.decontaminate.enabled

    def features(self, cfg: DedupJobConfig) -> tuple[Feature, ...]:
        if not cfg.decontaminate.enabled:
            return ()
        index = build_index(cfg.decontaminate)
        return (Feature(_DDL, functools.partial(_matcher, index.names, _shared(index.table))),)

    def output_columns(self, cfg: DedupJobConfig) -> tuple[str, ...]:
        dc = cfg.decontaminate
        return ANNOTATIONS if dc.enabled and dc.mode == "annotate" else ()

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from pyspark.sql import functions as F

        dc = ctx.cfg.decontaminate
        reaching = F.filter("_decon", lambda h: h["ngrams"] >= dc.min_ngrams)
        by = F.coalesce(F.transform(reaching, lambda h: h["eval_set"]), F.array().cast("array<string>"))
        rows = alive(ctx, ["_row", "id", "_bytes", "_decon"]).withColumn("contaminated_by", by)
        if dc.mode == "annotate":
            shared = F.size(F.array_distinct(F.flatten(F.transform("_decon", lambda h: h["keys"]))))
            ngrams = F.when(F.col("_decon").isNull(), 0).otherwise(shared).cast("int").alias(ANNOTATIONS[1])
            ctx.write(rows.select("_row", "contaminated_by", ngrams), f"{self.name}/columns")
        # the few documents sharing any n-gram: everything after this reads them, not every document
        ctx.write(rows.where(F.col("_decon").isNotNull()), f"{self.name}/hits")
        hits = ctx.read(f"{self.name}/hits")
        contaminated = hits.where(F.size("contaminated_by") > 0)
        # annotate removes nothing, but writes its (empty) decisions like any stage that removes
        removed = contaminated if dc.mode == "drop" else contaminated.where(F.lit(False))
        reason = F.concat(F.lit(f"{self.name}:"), F.col("contaminated_by")[0])
        ctx.write(decisions_of(removed, self.name, reason), f"{self.name}/removed")
        report = {
            "mode": dc.mode,
            "ngram": dc.ngram,
            "min_ngrams": dc.min_ngrams,
            "documents_checked": _alive_docs(ctx),
            "contaminated_docs": contaminated.count(),
            "sets": _set_reports(hits, build_index(dc), dc),
        }
        ctx.store.write_json(f"{self.name}/report.json", report)
        if dc.mode == "drop":
            # before the stage's marker: a refused run publishes nothing and resumes from here
            check_removal(
                "decontaminate",
                report["contaminated_docs"],
                report["documents_checked"],
                f"decontaminate.ngram ({dc.ngram}), decontaminate.skip_trivial ({str(dc.skip_trivial).lower()}) "
                f"and decontaminate.min_ngrams ({dc.min_ngrams})",
                "decontaminate.allow_remove_all",
                dc.allow_remove_all,
                left=f"Nothing is published: {ctx.root}/stages/{self.name}/report.json shows what each set "
                "hit; the stages before this one are kept, and a rerun resumes from this stage.",
            )
        return {"removed": reason_counts(ctx.decisions([self.name])), **report}


def _alive_docs(ctx: StageContext) -> int:
    """Documents no finished stage removed, from the stages' own counts (no pass over the data)."""
    gone = sum(c["docs"] for name in ctx.done for c in ctx.infos[name].get("removed", {}).values())
    return int(ctx.infos["prepare"]["docs"]) - gone


def _shared(table: NgramTable) -> Any:
    """The table as a Spark broadcast: it travels once per executor, not with every task. Without
    an active session (features() called outside a job) the table itself, shipped in the closure."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    return spark.sparkContext.broadcast(table) if spark is not None else _Held(table)


class _Held:
    def __init__(self, value: NgramTable) -> None:
        self.value = value


def _matcher(names: tuple[str, ...], shared: Any):
    """On the executor, once per task: DocBatch -> {"_decon": hits per document, null when none}."""
    table = shared.value

    def match(docs: DocBatch) -> dict[str, pa.Array]:
        rows = []
        for h in find_hits(table, docs.norms):
            if h is None:
                rows.append(None)
                continue
            rows.append(
                [
                    {"eval_set": names[s], "ngrams": n, "example": ex, "keys": k.view(np.int64).tolist()}
                    for s, n, ex, k in zip(h.sets, h.ngrams, h.examples, h.keys, strict=True)
                ]
            )
        return {"_decon": pa.array(rows, _HITS)}

    return match


def _set_reports(hits, index: EvalIndex, dc: DecontaminateConfig) -> dict[str, dict[str, Any]]:
    """Per set: its size (EvalIndex) and, among the documents checked, what it hit (a few rows collected)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per = hits.select("id", F.explode("_decon").alias("h")).select("id", "h.*")
    per = per.withColumn("reached", F.col("ngrams") >= dc.min_ngrams)
    counts = {
        r["eval_set"]: r
        for r in per.select("id", "eval_set", "reached", F.explode("keys").alias("k"))
        .groupBy("eval_set")
        .agg(
            F.countDistinct("id").alias("matched"),
            F.countDistinct(F.when(F.col("reached"), F.col("id"))).alias("hit"),
            F.countDistinct(F.when(F.col("reached"), F.col("k"))).alias("ngrams_hit"),
        )
        .collect()
    }
    w = Window.partitionBy("eval_set").orderBy(F.col("ngrams").desc(), "id")
    top = (
        per.where(F.col("reached"))
        .withColumn("_rn", F.row_number().over(w))
        .where(F.col("_rn") <= dc.examples)
    )
    examples: dict[str, list[dict[str, Any]]] = {}
    for r in top.select("eval_set", "id", "ngrams", "example").collect():
        examples.setdefault(r["eval_set"], []).append(
            {"id": r["id"], "ngrams": r["ngrams"], "ngram": r["example"]}
        )
    out = {}
    for st in index.sets:
        c = counts.get(st.name)
        out[st.name] = {
            **st.to_dict(),
            "documents_hit": int(c["hit"]) if c else 0,
            "documents_matched": int(c["matched"]) if c else 0,
            "ngrams_hit": int(c["ngrams_hit"]) if c else 0,
            "examples": sorted(examples.get(st.name, []), key=lambda e: (-e["ngrams"], e["id"])),
        }
    return out
