"""The `dedup` Spark job: the stages of dedup/stages/ run in order, each resumable.

    prepare -> ids -> [decontaminate] -> exact -> url -> minhash -> cluster -> lines -> output

(decontaminate runs only when the config names evaluation sets: dedup/stages/decontaminate.py.)

Each stage writes its result under OUTPUT/stages/<stage>/ (Parquet, via a temporary name and a
rename) and then a marker OUTPUT/stages/<stage>.json holding the stage's counts; a rerun skips every
stage that has its marker, so a crashed run resumes at the first unfinished stage (connected
components also resume per round). Only the first stage and the last two read document text; the
others work on narrow rows (row number, hashes, lengths, the keep-policy columns).

After the stages: removed_ids/ (every decision), removed/ (a sample per reason with a snippet),
stats.json (the funnel, built from the stages' own infos) and _SUCCESS. Nothing is collected to the
driver but per-reason counts.

A stage marker holds for the inputs it was made from, so before resuming the inputs are checked by
content as well as by name (core.output.guard_inputs: size, mtime and a sampled hash; an object's
ETag). An input rewritten under the same name is refused naming the file (exit 2); with
`on_changed_input="restart"` (`--on-changed-input restart`, or REFINERY_ON_CHANGED_INPUT=restart)
every stage is redone instead: prepare reads all inputs, so no stage survives a changed one. An
output that is its input, lies inside it or holds it is refused before anything is read
(core.output.check_disjoint).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from core.errors import InputError
from core.files import doc_parquet_uris, parquet_schema
from core.output import (
    OutputDir,
    atomic_write_json,
    check_disjoint,
    check_layout,
    guard_folder,
    guard_inputs,
    input_identities,
)
from core.spark import DEFAULT_SPARK, SparkOptions, check_master
from core.stats import Stats, funnel_table
from core.storage import is_object_store, local_input, staging_dir
from dedup.config import DedupJobConfig
from dedup.stages import STAGES, Flow, StageContext, StageStore, job_stages
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
    """Parquet files of a document dataset (core.files.doc_parquet_uris): absolute paths, or URIs.

    Checks, from the Parquet footers only, that every file has string columns `id` and `text`.
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

    `input_path` and `output` may be object-store URIs (`s3://...`): Spark here has no S3 connector,
    so the job runs on local copies (see `_run_to_object_store` and `_local_inputs`).
    `on_changed_input`: "refuse" (default: $REFINERY_ON_CHANGED_INPUT, else refuse) or "restart",
    for an input whose content changed since the folder's stages were made from it.
    """
    # Before the input is listed: an output inside it would be listed as input (and fail on its
    # schema, far from the cause).
    check_disjoint(output, [input_path])
    files = resolve_input(input_path)
    check_disjoint(output, files=files)
    check_master(spark.master)  # a bad --master is a ConfigError before the folder is made
    identities = input_identities(files)
    if is_object_store(output):
        uri = str(output).rstrip("/")
        return _run_to_object_store(files, uri, cfg, spark, on_changed_input, identities)
    root = Path(output).expanduser().resolve()
    check_layout(root, (*_PUBLISHED_FOLDERS, "stages", "_inputs"))
    # The input list decides the outputs like the config does: a changed list is refused too.
    guard_folder(root, "dedup", cfg.to_dict(), cfg.fingerprint(), extra={"inputs": files})
    guard_inputs(root, files, on_changed_input, lambda _: _start_over(root), identities)
    return _run(files, root, cfg, spark)


def _start_over(root: Path) -> None:
    """Remove every stage and result of a local dedup folder (its `_config.json` stays).

    `_SUCCESS` first; the inputs' record is rewritten only after this returns, so a crash midway
    is refused (or restarted) again, never resumed from the stages left.
    """
    (root / "_SUCCESS").unlink(missing_ok=True)
    (root / "stats.json").unlink(missing_ok=True)
    for sub in ("stages", *_PUBLISHED_FOLDERS, "_inputs"):
        shutil.rmtree(root / sub, ignore_errors=True)


def _run(
    files: list[str],
    root: Path,
    cfg: DedupJobConfig,
    spark: SparkOptions,
) -> DedupResult:
    """Every stage into the local (or shared) folder `root`, guarded already."""
    store = StageStore(root)
    local_files = _local_inputs(files, root / "_inputs")

    from core.spark import get_spark

    session = get_spark(spark.master, "refinery-dedup", spark.conf)
    partitions = cfg.output.partitions or max(2, 2 * session.sparkContext.defaultParallelism)
    session.conf.set("spark.sql.shuffle.partitions", str(partitions))
    stages = job_stages(cfg, STAGES)  # STAGES read here, so that tests can patch this module's list
    ctx = StageContext(session, cfg, root, store, local_files, partitions, progress_printer(spark.progress))
    ctx.stages = stages
    for stage in stages:
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
    shutil.rmtree(root / "_inputs", ignore_errors=True)  # downloaded inputs (_local_inputs)
    return DedupResult(str(root), stats, ctx.resumed, docs_in, docs_out)


def _local_inputs(files: list[str], cache: Path) -> list[str]:
    """Local paths Spark can read: local files as they are, object-store files downloaded once.

    Copies are named by their position in the input list (the order Spark reads them in, so
    row numbers are the same as a local run's) and kept until the job is done, so a resumed run
    does not download them again. On a cluster the output folder (and so `cache`) must be on a
    filesystem every executor sees, as for any local output of this job.
    """
    if not any(is_object_store(f) for f in files):
        return files
    cache.mkdir(parents=True, exist_ok=True)
    out = []
    for i, f in enumerate(files):
        if not is_object_store(f):
            out.append(f)
            continue
        local = cache / f"{i:05d}-{f.rsplit('/', 1)[-1]}"
        if not local.exists():
            with local_input(f) as tmp:
                shutil.copyfile(tmp, local.with_name(local.name + ".part"))
            os.replace(local.with_name(local.name + ".part"), local)
        out.append(str(local))
    return out


# What a finished dedup output holds, uploaded in this order; `_SUCCESS` goes last.
_PUBLISHED_FOLDERS = ("docs", "removed_ids", "removed")


def _run_to_object_store(
    files: list[str],
    uri: str,
    cfg: DedupJobConfig,
    spark: SparkOptions,
    on_changed_input: str | None,
    identities: dict,
) -> DedupResult:
    """The job into a local work folder, then its outputs uploaded to `uri`, `_SUCCESS` last.

    Dedup is one global computation whose stages re-read each other's DataFrames, and Spark here
    cannot write (or read) `s3://` without Hadoop's S3 connector, so the stages run on local disk
    (`core.storage.staging_dir`, kept across a failed run: a rerun on this machine resumes at the
    first unfinished stage) and only the result is published. The output's `_SUCCESS` is the one
    completion marker: a rerun with it does nothing; one without it deletes whatever a killed
    upload left under docs/, removed_ids/ and removed/ and uploads them again.
    """
    out = OutputDir(uri, ())
    extra = {"inputs": files}
    work = staging_dir(uri) / "work"

    def start_over(_: list[str]) -> None:
        out.set_success(False)
        out.delete("stats.json")
        for sub in _PUBLISHED_FOLDERS:
            out.store.delete_tree(out.path(sub))
        shutil.rmtree(work, ignore_errors=True)

    guard_folder(uri, "dedup", cfg.to_dict(), cfg.fingerprint(), extra=extra)
    guard_inputs(uri, files, on_changed_input, start_over, identities)
    if out.store.exists(out.path("_SUCCESS")):
        done = out.read_json("stats.json") or {}
        stats = Stats.from_dict(done)
        resumed = [s for s in (done.get("stage_info") or {})]
        return DedupResult(uri, stats, resumed, done.get("docs_in", 0), done.get("docs_out", 0))
    guard_folder(work, "dedup", cfg.to_dict(), cfg.fingerprint(), extra=extra)
    # The local stages too: a work folder left by a run on other content is never resumed.
    guard_inputs(work, files, on_changed_input, lambda _: _start_over(work), identities)
    result = _run(files, work, cfg, spark)
    for sub in _PUBLISHED_FOLDERS:
        out.store.delete_tree(out.path(sub))
        for f in sorted((work / sub).rglob("*")):
            if f.is_file() and not f.name.startswith("."):  # Spark's .crc checksums stay local
                out.store.upload(f, out.path(sub, f.relative_to(work / sub).as_posix()))
    out.store.write_bytes(out.path("stats.json"), (work / "stats.json").read_bytes())
    out.set_success(True)
    shutil.rmtree(work.parent, ignore_errors=True)
    return DedupResult(uri, result.stats, result.resumed, result.docs_in, result.docs_out)


def funnel_stats(ctx: StageContext) -> Stats:
    """The funnel (docs and bytes in/out per stage, drops per reason) and counters, from each stage."""
    stats, flow = Stats(), Flow()
    for stage in ctx.stages or STAGES:
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
