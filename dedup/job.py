"""The `dedup` Spark job: the stages of dedup/stages/ run in order, each resumable.

    prepare -> ids -> exact -> url -> minhash -> cluster -> lines -> output

Each stage writes its result under OUTPUT/stages/<stage>/ (Parquet, via a temporary name and a
rename) and then a marker OUTPUT/stages/<stage>.json holding the stage's counts; a rerun skips every
stage that has its marker, so a crashed run resumes at the first unfinished stage (connected
components also resume per round). Only the first stage and the last two read document text; the
others work on narrow rows (row number, hashes, lengths, the keep-policy columns).

After the stages: removed_ids/ (every decision), removed/ (a sample per reason with a snippet),
stats.json (the funnel, built from the stages' own infos) and _SUCCESS. Nothing is collected to the
driver but per-reason counts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from core.errors import InputError
from core.files import doc_parquet_files, parquet_schema
from core.output import atomic_write_json, guard_folder
from core.spark import check_master
from core.stats import Stats, funnel_table
from dedup.config import DedupJobConfig
from dedup.stages import STAGES, Flow, StageContext, StageStore
from dedup.stages.base import progress_printer
from dedup.stages.common import ADDED_COLUMNS, DECISION_COLS, replace_folder

__all__ = ["ADDED_COLUMNS", "DedupResult", "InputError", "print_funnel", "resolve_input", "run_dedup"]


@dataclass
class DedupResult:
    output: str
    stats: Stats
    resumed: list[str] = field(default_factory=list)
    docs_in: int = 0
    docs_out: int = 0


def resolve_input(path: str) -> list[str]:
    """Parquet files of a document dataset (core.files.doc_parquet_files), as absolute paths.

    Checks, from the Parquet footers only, that every file has string columns `id` and `text`.
    """
    files = doc_parquet_files(path)
    for f in files:
        schema = parquet_schema(f)
        for col in ("id", "text"):
            if col not in schema.names:
                raise InputError(f"{f}: no `{col}` column (columns: {', '.join(schema.names)})")
            kind = schema.field(col).type
            if not pa.types.is_string(kind) and not pa.types.is_large_string(kind):
                raise InputError(f"{f}: column `{col}` is {kind}, expected string")
    return [str(f.resolve()) for f in files]


def run_dedup(
    input_path: str,
    output: str,
    cfg: DedupJobConfig,
    master: str | None = None,
    spark_conf: dict[str, str] | None = None,
    progress: bool = True,
) -> DedupResult:
    """Run (or resume) the whole job; raises InputError / OutputConflict before Spark starts."""
    files = resolve_input(input_path)
    check_master(master)  # a bad --master is a ConfigError before the folder is made
    root = Path(output).expanduser().resolve()
    # The input list decides the outputs like the config does: a changed list is refused too.
    guard_folder(root, "dedup", cfg.to_dict(), cfg.fingerprint(), extra={"inputs": files})
    store = StageStore(root)

    from core.spark import get_spark

    spark = get_spark(master, "refinery-dedup", spark_conf)
    partitions = cfg.output.partitions or max(2, 2 * spark.sparkContext.defaultParallelism)
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    ctx = StageContext(spark, cfg, root, store, files, partitions, progress_printer(progress))
    for stage in STAGES:
        if stage.enabled(cfg):
            ctx.run(stage)

    _write_removed(ctx, cfg.output.removed_sample_per_reason)
    stats = funnel_stats(ctx)
    docs_in, docs_out = ctx.infos["prepare"]["docs"], ctx.infos["output"]["docs"]
    atomic_write_json(
        root / "stats.json",
        {
            "job": "dedup",
            "config_fingerprint": cfg.fingerprint(),
            "inputs": files,
            "docs_in": docs_in,
            "docs_out": docs_out,
            "minhash": str(cfg.minhash),
            "stage_info": ctx.infos,
            **stats.to_dict(),
        },
    )
    (root / "_SUCCESS").write_text("")
    return DedupResult(str(root), stats, ctx.resumed, docs_in, docs_out)


def funnel_stats(ctx: StageContext) -> Stats:
    """The funnel (docs and bytes in/out per stage, drops per reason) and counters, from each stage."""
    stats, flow = Stats(), Flow()
    for stage in STAGES:
        if ctx.ran(stage.name):
            stage.add_to_stats(stats, ctx.infos[stage.name], flow)
    return stats


def _write_removed(ctx: StageContext, per_reason: int) -> None:
    """removed_ids/: every decision; removed/: a sample per reason with URL and a text snippet."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    dec = ctx.decisions(ctx.done).select(*DECISION_COLS)
    replace_folder(
        dec.drop("_row", "_bytes").repartition(1).sortWithinPartitions("reason", "id"),
        ctx.root / "removed_ids",
    )
    w = Window.partitionBy("reason").orderBy(F.xxhash64("id"), "_row")
    sample = dec.withColumn("_rn", F.row_number().over(w)).where(F.col("_rn") <= per_reason)
    prep = ctx.prep
    extra = ["url"] if "url" in prep.columns else []
    sample = sample.join(prep.select("_row", *extra, F.substring("text", 1, 500).alias("snippet")), "_row")
    replace_folder(
        sample.select("id", *extra, "stage", "reason", "partner_id", "snippet")
        .repartition(1)
        .sortWithinPartitions("reason", "id"),
        ctx.root / "removed",
    )


def print_funnel(result: DedupResult) -> None:
    print(funnel_table(result.stats), file=sys.stderr)
