"""The Spark side of `extract` and `tokenize`: one Spark task per input file.

`extract` maps WARC files through `pipeline.process_file`; `tokenize` maps document Parquet files
through `tokenize.tokenize_file` (one shard per file) and writes the source's manifest.json.

The driver resolves inputs, checks the output folder's config, skips files already done, and
parallelises the rest with exactly one partition per file (a WARC is never split across tasks).
Each task writes its own outputs (atomic rename + marker) and returns only a small summary, so
nothing large is collected to the driver. The same code runs on the embedded `local[*]` master
and under `spark-submit --master spark://...` (or YARN/Kubernetes): under spark-submit the master
comes from spark-submit, and `--master` is not needed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from core.output import OutputDir, atomic_write_json, unit_name
from core.spark import configure_worker_logging, get_spark
from core.stats import Stats
from curation.config import ExtractJobConfig
from curation.inputs import InputError, resolve_inputs
from curation.pipeline import process_file, stage_order

log = logging.getLogger(__name__)


@dataclass
class JobResult:
    output: str
    inputs: int
    skipped: int
    processed: int
    failed: list[dict[str, Any]] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)

    @property
    def ok(self) -> bool:
        return not self.failed


def _run_task(item: tuple[str, str], cfg: ExtractJobConfig, out_root: str) -> dict[str, Any]:
    uri, _unit = item
    configure_worker_logging()
    return process_file(uri, cfg, out_root)


class _Progress:
    """Prints files done / total while the Spark job runs (markers are counted on disk)."""

    def __init__(self, out: OutputDir, units: list[str], enabled: bool) -> None:
        self.out, self.units, self.enabled = out, units, enabled
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.t0 = time.time()

    def __enter__(self) -> _Progress:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.enabled:
            self._thread.join(timeout=5)
            self._print()
            sys.stderr.write("\n")

    def _print(self) -> None:
        done = sum(self.out.is_done(u) for u in self.units)
        elapsed = time.time() - self.t0
        width = 30
        filled = int(width * done / max(1, len(self.units)))
        bar = "#" * filled + "-" * (width - filled)
        end = "\r" if sys.stderr.isatty() else "\n"
        sys.stderr.write(f"[extract] [{bar}] {done}/{len(self.units)} files  {elapsed:6.1f}s{end}")
        sys.stderr.flush()

    def _loop(self) -> None:
        interval = 1.0 if sys.stderr.isatty() else 10.0
        while not self._stop.wait(interval):
            self._print()


def run_extract(
    inputs: list[str],
    output: str,
    cfg: ExtractJobConfig,
    master: str | None = None,
    spark_conf: dict[str, str] | None = None,
    progress: bool = True,
) -> JobResult:
    """Resolve inputs, run the missing files on Spark, merge stats; raises on bad input/output."""
    uris = resolve_inputs(inputs, cfg.cc_base_url)  # InputError before Spark starts
    out = OutputDir(output)
    out.prepare("extract", cfg.to_dict(), cfg.fingerprint())  # OutputConflict before Spark starts
    units = [(uri, unit_name(uri)) for uri in uris]
    todo = [(u, n) for u, n in units if not out.is_done(n)]
    skipped = len(units) - len(todo)
    if skipped:
        log.warning("%d of %d inputs already done in %s: skipped", skipped, len(units), out.root)
    failed: list[dict[str, Any]] = []
    if todo:
        out.set_success(False)
        spark = get_spark(master, "refinery-extract", spark_conf)
        sc = spark.sparkContext
        rdd = sc.parallelize(todo, numSlices=len(todo))  # one partition = one task per file
        with _Progress(out, [n for _, n in todo], progress):
            results = rdd.map(partial(_run_task, cfg=cfg, out_root=str(out.root))).collect()
        failed = [r for r in results if r["status"] != "done"]
        for r in failed:
            log.error("FAILED %s: %s\n%s", r["input"], r["error"], r.get("traceback", ""))
    per_file = [s for _, n in units if (s := out.read_stats(n)) is not None and out.is_done(n)]
    merged = Stats.merged(per_file, order=stage_order(cfg))
    atomic_write_json(
        out.root / "stats.json",
        {
            "job": "extract",
            "config_fingerprint": cfg.fingerprint(),
            "inputs": len(units),
            "done": len(per_file),
            "failed": [{"input": r["input"], "error": r["error"]} for r in failed],
            "docs_written": sum(s["docs_written"] for s in per_file),
            **merged.to_dict(),
            "files": {s["unit"]: {"input": s["input"], "docs": s["docs_written"]} for s in per_file},
        },
    )
    out.set_success(len(per_file) == len(units))
    return JobResult(str(out.root), len(units), skipped, len(todo), failed, merged)


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
