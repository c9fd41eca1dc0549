"""The Spark side of `extract`: one Spark task per input file.

`extract` maps WARC files through `pipeline.process_file` (the `tokenize` job is tokens/job.py).

The driver resolves inputs, checks the output folder's config, skips files already done, and
parallelises the rest with exactly one partition per file (a WARC is never split across tasks).
Each task writes its own outputs (atomic rename + marker) and returns only a small summary, so
nothing large is collected to the driver. The same code runs on the embedded `local[*]` master
and under `spark-submit --master spark://...` (or YARN/Kubernetes): under spark-submit the master
comes from spark-submit, and `--master` is not needed.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from core.output import OutputDir, atomic_write_json, unit_name
from core.spark import configure_worker_logging, get_spark
from core.stats import Stats
from curation.config import ExtractJobConfig
from curation.inputs import resolve_inputs
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
