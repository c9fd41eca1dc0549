"""The `extract` job: WARC files -> documents, one Spark task per input file (core/runner.py).

The driver resolves the inputs (globs, folders, s3://, https://, Common Crawl listings) and
validates the config before Spark starts; the per-file runner guards the output folder with the
config's fingerprint, skips files already done, runs `pipeline.process_unit` once per remaining
file (a WARC is never split across tasks), merges the per-file stats into stats.json and writes
_SUCCESS when every input is done. The same code runs on the embedded `local[*]` master and under
`spark-submit --master spark://...` (or YARN/Kubernetes).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from core.output import atomic_write_json, unit_name
from core.runner import PerFileJob, RunResult, run_per_file
from core.spark import configure_worker_logging, get_spark
from core.stats import Stats
from curation.config import ExtractJobConfig
from curation.inputs import InputError, resolve_inputs
from curation.pipeline import process_unit, stage_order

log = logging.getLogger(__name__)


def _files_table(done: list[dict[str, Any]]) -> dict[str, Any]:
    return {"files": {s["unit"]: {"input": s["input"], "docs": s["docs_written"]} for s in done}}


def run_extract(
    inputs: list[str],
    output: str,
    cfg: ExtractJobConfig,
    master: str | None = None,
    spark_conf: dict[str, str] | None = None,
    progress: bool = True,
) -> RunResult:
    """Resolve inputs, run the missing files on Spark, merge stats; raises on bad input/output."""
    uris = resolve_inputs(inputs, cfg.cc_base_url)  # InputError before Spark starts
    job = PerFileJob(
        name="extract",
        config=cfg.to_dict(),
        fingerprint=cfg.fingerprint(),
        process=process_unit,
        payload=cfg,
        stage_order=tuple(stage_order(cfg)),
        stats_extra=_files_table,
    )
    units = [(uri, unit_name(uri)) for uri in uris]
    return run_per_file(job, units, output, master=master, spark_conf=spark_conf, progress=progress)


# -- tokenize ----------------------------------------------------------------------------------


@dataclass
class TokenizeResult:
    output: str
    """The shards/<source> folder."""
    parts: int
    skipped: int
    processed: int
    failed: list[dict[str, Any]] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    manifest: dict[str, Any] | None = None
    encoder: str = ""
    """Encoder the driver chose ("tiktoken" or "hf (reason)"); each part's marker records its own."""

    @property
    def ok(self) -> bool:
        return not self.failed


def _tokenize_task(item: tuple[int, str], task_bc: Any) -> dict[str, Any]:
    from curation.tokenize import tokenize_file

    configure_worker_logging()
    # One Spark task per core: the tokenizer's own Rust thread pool would oversubscribe the cores.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    index, path = item
    return tokenize_file(index, path, task_bc.value)


def run_tokenize(
    input_dir: str,
    tokenizer: str,
    output: str,
    source: str = "default",
    select: dict[str, Any] | None = None,
    eod_token: str | None = None,
    master: str | None = None,
    spark_conf: dict[str, str] | None = None,
    encoder: str = "auto",
) -> TokenizeResult:
    """Tokenize every Parquet file of `input_dir` into `output/shards/<source>/` on Spark.

    Bad input (no documents, a missing `text` or selector column, a tokenizer without an EOD token,
    an output folder made by another tokenizer/selection/input list) raises before Spark starts.
    `encoder` (curation.tokenizer.ENCODERS) is not part of the output's config: every encoder gives
    the same bytes, so a rerun with another one resumes the same folder.
    """
    import pyarrow.parquet as pq

    from core.output import OutputConflict, diff_keys
    from core.selectors import SelectorError, parse_selectors
    from curation.tokenize import STAGES, TokenizeTask, part_name
    from curation.tokenizer import build_encoder, doc_parquet_files, load_tokenizer

    if not source or "/" in source or source.startswith("."):
        raise InputError(f"--source must be a plain folder name, got {source!r}")
    selectors = parse_selectors(select or {}, where="--select")
    try:
        files = [str(p.resolve()) for p in doc_parquet_files(input_dir)]
    except FileNotFoundError as e:
        raise InputError(str(e)) from None
    for f in files:
        names = pq.read_schema(f).names
        if "text" not in names:
            raise InputError(f"{f}: no 'text' column; columns: {', '.join(names)}")
        for s in selectors:
            if s.column not in names:
                raise SelectorError(
                    f"{f}: selector `{s}` needs column {s.column!r}, which is not there; "
                    f"columns: {', '.join(names)}"
                )
    try:
        tok = load_tokenizer(tokenizer, eod_token)
        tokenizer_json = Path(tok.path).read_text(encoding="utf-8")
        # Chosen here once so the log says which encoder and why, and encoder=tiktoken on a
        # tokenizer it cannot express fails before Spark starts; workers repeat the same choice.
        enc = build_encoder(tokenizer_json, encoder)
    except (FileNotFoundError, ValueError) as e:
        raise InputError(str(e)) from None
    encoder_used = enc.backend + (f" ({enc.reason})" if enc.reason else "")
    log.info("tokenize: encoder %s", encoder_used)
    out = Path(output).expanduser().resolve() / "shards" / source
    (out / "done").mkdir(parents=True, exist_ok=True)
    config = {
        "source": source,
        "select": {s.column: s.to_spec() for s in selectors},
        "tokenizer_sha256": tok.sha256,
        "eod_token": tok.eod_token,
        "inputs": files,
    }
    fingerprint = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
    cfg_path = out / "_config.json"
    if cfg_path.exists():
        old = json.loads(cfg_path.read_text())
        if old.get("fingerprint") != fingerprint:
            diff = diff_keys(old.get("config", {}), config)
            raise OutputConflict(
                f"{out} was made with config {old.get('fingerprint')}; this run is {fingerprint} "
                f"(differs in: {', '.join(diff[:10]) or '?'}). Use another --output or --source, "
                "or delete that folder to start over."
            )
    else:
        atomic_write_json(cfg_path, {"job": "tokenize", "fingerprint": fingerprint, "config": config})
    for p in list(out.glob(".*.tmp-*")) + list((out / "done").glob(".*.tmp-*")):
        with contextlib.suppress(OSError):
            p.unlink()
    manifest_path = out / "manifest.json"
    parts = list(enumerate(files))
    todo = [(i, f) for i, f in parts if not (out / "done" / f"{part_name(i)}.json").is_file()]
    skipped = len(parts) - len(todo)
    if skipped:
        log.warning("%d of %d parts already done in %s: skipped", skipped, len(parts), out)
    failed: list[dict[str, Any]] = []
    if todo:
        with contextlib.suppress(FileNotFoundError):
            manifest_path.unlink()  # the manifest marks a complete source; it is rewritten below
        task = TokenizeTask(
            source=source,
            out_dir=str(out),
            tokenizer_json=tokenizer_json,
            tokenizer_sha256=tok.sha256,
            eod_token=tok.eod_token,
            selectors=selectors,
            encoder=encoder,
        )
        spark = get_spark(master, "refinery-tokenize", spark_conf)
        sc = spark.sparkContext
        task_bc = sc.broadcast(task)  # the tokenizer JSON travels once per executor, not per task
        rdd = sc.parallelize(todo, numSlices=len(todo))  # one partition = one task per input file
        results = rdd.map(partial(_tokenize_task, task_bc=task_bc)).collect()
        failed = [r for r in results if r["status"] != "done"]
        for r in failed:
            log.error("FAILED %s: %s\n%s", r["input"], r["error"], r.get("traceback", ""))
    done = []
    for i, _f in parts:
        p = out / "done" / f"{part_name(i)}.json"
        if p.is_file():
            done.append(json.loads(p.read_text()))
    merged = Stats.merged([d["stats"] for d in done], order=STAGES)
    manifest = None
    if len(done) == len(parts):
        manifest = build_manifest(source, config, fingerprint, tok, done)
        atomic_write_json(manifest_path, manifest)
    return TokenizeResult(str(out), len(parts), skipped, len(todo), failed, merged, manifest, encoder_used)


def build_manifest(
    source: str, config: dict[str, Any], fingerprint: str, tok: Any, done: list[dict[str, Any]]
) -> dict[str, Any]:
    """manifest.json of a complete source. No timestamps: the same run gives the same bytes."""
    from curation.shards import dtype_for_vocab

    return {
        "format": "refinery-shards/1 (Megatron MMIDIDX .bin/.idx, one sequence per document, EOD appended)",
        "source": source,
        "config_fingerprint": fingerprint,
        "select": config["select"],
        "tokenizer": {
            "path": tok.path,
            "sha256": tok.sha256,
            "vocab_size": tok.vocab_size,
            "eod_token": tok.eod_token,
            "eod_id": tok.eod_id,
            "config_fingerprint": tok.meta.get("config_fingerprint"),
        },
        "dtype": str(dtype_for_vocab(tok.vocab_size)),
        "documents": sum(d["documents"] for d in done),
        "tokens": sum(d["tokens"] for d in done),
        "files": [
            {
                k: d[k]
                for k in (
                    "part",
                    "bin",
                    "idx",
                    "ids",
                    "bin_sha256",
                    "idx_sha256",
                    "bin_bytes",
                    "documents",
                    "tokens",
                    "input",
                    "input_sha256",
                    "input_metadata",
                )
            }
            for d in done
        ],
    }
