"""The `dedup` Spark job: the stages of dedup/stages/ run in order, each resumable.

    prepare -> ids -> [decontaminate] -> exact -> url -> minhash -> cluster -> lines -> output

(decontaminate runs only when the config names evaluation sets: dedup/stages/decontaminate.py.)

Each stage writes its result under OUTPUT/stages/<stage>/ (Parquet tables, core.tables: on a local
folder via a temporary name and a rename; on an object store each executor writes its own parts and
the driver a manifest last) and then a marker OUTPUT/stages/<stage>.json holding the stage's counts;
a rerun, on this machine or any other that reaches OUTPUT, skips every
stage that has its marker, so a crashed run resumes at the first unfinished stage (connected
components also resume per round). Only the first stage and the last two read document text; the
others work on narrow rows (row number, hashes, lengths, the keep-policy columns).

After the stages: removed_ids/ (every decision), removed/ (a bounded sample per stage, reason,
language and group-size band, with a snippet and the similarity to the document kept:
dedup/removed.py), stats.json (the funnel, built from the stages' own infos) and _SUCCESS. Nothing
is collected to the driver but per-reason counts (and the removed sample's row numbers pass through
it as a broadcast: at most 2 x k per cell).

A stage marker holds for the inputs it was made from, so before resuming the inputs are checked by
content as well as by name (core.output.guard_inputs: size, mtime and a sampled hash; an object's
ETag). An input rewritten under the same name is refused naming the file (exit 2); with
`on_changed_input="restart"` (`--on-changed-input restart`, or REFINERY_ON_CHANGED_INPUT=restart)
every stage is redone instead: prepare reads all inputs, so no stage survives a changed one. An
output that is its input, lies inside it or holds it is refused before anything is read
(core.output.check_disjoint).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from core.errors import InputError
from core.files import doc_parquet_uris, parquet_schema
from core.output import (
    OutputDir,
    check_disjoint,
    check_layout,
    guard_folder,
    guard_inputs,
    input_identities,
)
from core.spark import DEFAULT_SPARK, SparkOptions, check_master, check_spark_native
from core.stats import Stats, funnel_table
from core.storage import is_object_store
from dedup.config import DedupJobConfig
from dedup.removed import write_removed
from dedup.stages import STAGES, Flow, StageContext, StageStore, job_stages
from dedup.stages.base import progress_printer
from dedup.stages.common import ADDED_COLUMNS

__all__ = ["ADDED_COLUMNS", "DedupResult", "InputError", "print_funnel", "resolve_input", "run_dedup"]


@dataclass
class DedupResult:
    output: str
    stats: Stats
    resumed: list[str] = field(default_factory=list)
    docs_in: int = 0
    docs_out: int = 0


def resolve_input(path: str, lang_for: str | None = None) -> list[str]:
    """Parquet files of a document dataset (core.files.doc_parquet_uris): absolute paths, or URIs.

    Checks, from the Parquet footers only, that every file has string columns `id` and `text`, and
    a string (or all-null) `lang` column when `lang_for`, the config key that reads it, is given.
    """
    files = doc_parquet_uris(path)
    for f in files:
        schema = parquet_schema(f)
        for col in ("id", "text"):
            if col not in schema.names:
                raise InputError(f"{f}: no `{col}` column (columns: {', '.join(schema.names)})")
            kind = schema.field(col).type
            if not pa.types.is_string(kind) and not pa.types.is_large_string(kind):
                raise InputError(f"{f}: column `{col}` is {kind}, expected string")
        if lang_for is not None:
            # Refused rather than run over one shared index: the user asked for per-language groups.
            if "lang" not in schema.names:
                raise InputError(
                    f"{f}: no `lang` column, which {lang_for} needs (columns: {', '.join(schema.names)}); "
                    f"label the languages first (curation's langid) or turn {lang_for} off"
                )
            kind = schema.field("lang").type
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)):
                raise InputError(f"{f}: column `lang` is {kind}, expected string ({lang_for})")
    return files


def run_dedup(
    input_path: str,
    output: str,
    cfg: DedupJobConfig,
    on_changed_input: str | None = None,
    *,
    spark: SparkOptions = DEFAULT_SPARK,
) -> DedupResult:
    """Run (or resume) the whole job; raises InputError / OutputConflict before Spark starts.

    `input_path` and `output` may be object-store URIs (`s3://...`): the executors read the inputs
    and write every stage's tables there themselves (core.tables), and the stage markers are objects
    there too, so nothing passes through the driver's disk and a rerun on any machine resumes.
    `on_changed_input`: "refuse" (default: $REFINERY_ON_CHANGED_INPUT, else refuse) or "restart",
    for an input whose content changed since the folder's stages were made from it.
    """
    # Before the input is listed: an output inside it would be listed as input (and fail on its
    # schema, far from the cause).
    check_disjoint(output, [input_path])
    per_language = cfg.minhash.per_language and cfg.cluster.enabled  # the minhash stage runs
    files = resolve_input(input_path, "minhash.per_language" if per_language else None)
    check_disjoint(output, files=files)
    check_master(spark.master)  # a bad --master is a ConfigError before the folder is made
    check_spark_native(spark.native_storage)
    identities = input_identities(files)
    remote = is_object_store(output)
    root: str | Path = str(output).rstrip("/") if remote else Path(output).expanduser().resolve()
    if not remote:
        check_layout(Path(root), (*_PUBLISHED_FOLDERS, "stages", "_inputs"))
    out = OutputDir(root, ())
    # The input list decides the outputs like the config does: a changed list is refused too.
    guard_folder(root, "dedup", cfg.to_dict(), cfg.fingerprint(), extra={"inputs": files})
    guard_inputs(root, files, on_changed_input, lambda _: _start_over(out), identities)
    if remote and out.store.exists(out.path("_SUCCESS")):
        # Finished: a rerun does nothing (a local one re-resumes every stage from its marker).
        done = out.read_json("stats.json") or {}
        resumed = list(done.get("stage_info") or {})
        return DedupResult(
            out.uri, Stats.from_dict(done), resumed, done.get("docs_in", 0), done.get("docs_out", 0)
        )
    return _run(files, out, cfg, spark)


# What a finished dedup output holds besides stats.json and _SUCCESS (written last).
_PUBLISHED_FOLDERS = ("docs", "removed_ids", "removed")


def _start_over(out: OutputDir) -> None:
    """Remove every stage and result of a dedup output (its `_config.json` stays).

    `_SUCCESS` first; the inputs' record is rewritten only after this returns, so a crash midway
    is refused (or restarted) again, never resumed from the stages left. (`_inputs` is where
    releases before 2026-11-26 downloaded object-store inputs.)
    """
    out.set_success(False)
    out.delete("stats.json")
    for sub in ("stages", *_PUBLISHED_FOLDERS, "_inputs"):
        out.store.delete_tree(out.path(sub))


def _run(files: list[str], out: OutputDir, cfg: DedupJobConfig, spark: SparkOptions) -> DedupResult:
    """Every stage into the output folder or URI `out`, guarded already."""
    from core.spark import get_spark

    session = get_spark(spark.master, "refinery-dedup", spark.conf)
    store = StageStore(out.uri, session, spark.native_storage)
    partitions = cfg.output.partitions or max(2, 2 * session.sparkContext.defaultParallelism)
    session.conf.set("spark.sql.shuffle.partitions", str(partitions))
    stages = job_stages(cfg, STAGES)  # STAGES read here, so that tests can patch this module's list
    ctx = StageContext(session, cfg, out.uri, store, files, partitions, progress_printer(spark.progress))
    ctx.stages = stages
    for stage in stages:
        if stage.enabled(cfg):
            ctx.run(stage)

    write_removed(ctx, cfg.output.removed_sample_per_reason)
    stats = funnel_stats(ctx)
    docs_in, docs_out = ctx.infos["prepare"]["docs"], ctx.infos["output"]["docs"]
    out.write_json(
        "stats.json",
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
    out.set_success(True)
    return DedupResult(out.uri, stats, ctx.resumed, docs_in, docs_out)


def funnel_stats(ctx: StageContext) -> Stats:
    """The funnel (docs and bytes in/out per stage, drops per reason) and counters, from each stage."""
    stats, flow = Stats(), Flow()
    for stage in ctx.stages or STAGES:
        if ctx.ran(stage.name):
            stage.add_to_stats(stats, ctx.infos[stage.name], flow)
    return stats


def print_funnel(result: DedupResult) -> None:
    print(funnel_table(result.stats), file=sys.stderr)
