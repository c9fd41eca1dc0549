"""The one per-file Spark runner: `extract`, `tokenize` and `score` are each a `PerFileJob` run by it.

    resolve (the job, before this) -> refuse an output that overlaps an input -> guard the output
    folder (config fingerprint, input list) -> guard the inputs' content -> skip units
    with a completion marker -> one Spark task per remaining unit -> merge the units' stats ->
    stats.json -> _SUCCESS when every unit is done

A unit is one input file (or a piece of one the job names as its own unit: `extract` cuts large
WARCs into byte ranges, curation/warc/ranges.py); a task writes its own outputs
(temporary names, renamed into place, marker last: core/output.py) and returns only a small
summary, so nothing large is collected to the driver. A task that raises is a failed unit: its
temporary files are removed, the error and traceback come back to the driver, and a rerun retries
it. The same code runs on the embedded `local[*]` master and under `spark-submit` on a cluster.

An input changed under the same name since its units were made (core.output.guard_inputs) is
refused naming the file, or, under the `restart` policy (`PerFileJob.on_changed_input`, else
$REFINERY_ON_CHANGED_INPUT), its units are forgotten and redone with the rest of the run.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from core.output import SUBDIRS, OutputDir, check_disjoint
from core.spark import SparkOptions, check_master, configure_worker_logging, get_spark
from core.stats import Stats

log = logging.getLogger(__name__)

__all__ = ["PerFileJob", "RunResult", "input_list", "run_per_file", "run_unit"]

ProcessFn = Callable[[str, str, Any, str], dict[str, Any]]
"""(input, unit name, payload, output root) -> summary; commits the unit's outputs or raises."""


@dataclass(frozen=True)
class PerFileJob:
    """What the runner needs of a job. `process` must be a module-level function (it is pickled)."""

    name: str
    """Job name: recorded in `_config.json` and `stats.json`, shown in the progress line."""
    config: dict[str, Any]
    fingerprint: str
    process: ProcessFn
    payload: Any = None
    """Broadcast once per executor and handed to every task (the config, a tokenizer's JSON)."""
    stage_order: tuple[str, ...] = ()
    """Funnel rows that come first, in this order, even when no document reached them."""
    subdirs: tuple[str, ...] = SUBDIRS
    guard_extra: dict[str, Any] | None = None
    """More than the config that decides the output, refused if it changes."""
    guard_inputs: bool = True
    """Record the input list in `_config.json` and refuse a rerun with another one (`inputs`): units
    of other inputs would be mixed into the folder that stats.json and _SUCCESS describe. False for
    a job whose config already holds its inputs (tokenize)."""
    stats_extra: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None
    """Extra fields of stats.json from the done units' stats (a per-file table, a model hash)."""
    on_changed_input: str | None = None
    """An input whose content changed since its units were made: "refuse" (OutputConflict) or
    "restart" (its units are redone); None: $REFINERY_ON_CHANGED_INPUT, else "refuse"."""
    spark_conf: dict[str, str] | None = None
    """Spark settings the job asks for when its run starts the session (a session already running
    keeps its own; the user's `--spark-conf` wins): extract's preloading daemon (core/spark_daemon.py)."""
    inputs_guarded: bool = False
    """The caller has already guarded the units' files (refused overlap with the output and checked
    their content): tokenize, which must before it judges its manifest; or index extraction, whose
    units are plans written into its own output and derived from `guard_extra`. The runner then does
    not read every input a second time."""


@dataclass
class RunResult:
    output: str
    inputs: int
    skipped: int
    processed: int
    failed: list[dict[str, Any]] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    units: list[dict[str, Any]] = field(default_factory=list)
    """Stats of every done unit, in input order."""

    @property
    def ok(self) -> bool:
        return not self.failed


def run_unit(process: ProcessFn, item: tuple[str, str], payload: Any, out_root: str) -> dict[str, Any]:
    """One unit in a task; never raises: a failure is a summary with status "failed"."""
    uri, unit = item
    try:
        summary = process(uri, unit, payload, out_root)
        return {"unit": unit, "input": uri, "status": "done", **summary}
    except Exception as e:
        OutputDir(out_root).remove_stale_tmp(unit)
        log.error("input %s failed: %s", uri, e)
        return {
            "unit": unit,
            "input": uri,
            "status": "failed",
            "error": f"{type(e).__name__}: {e}",
            "traceback": traceback.format_exc(limit=20),
        }


def _task(item: tuple[str, str], process: ProcessFn, payload_bc: Any, out_root: str) -> dict[str, Any]:
    configure_worker_logging()
    return run_unit(process, item, payload_bc.value, out_root)


def run_per_file(
    job: PerFileJob,
    units: list[tuple[str, str]],
    output: str,
    spark: SparkOptions | None = None,
) -> RunResult:
    """Run the units (input, unit name) of `job` that are not done yet, one Spark task each."""
    spark = spark or SparkOptions()
    check_master(spark.master)  # before a folder is made or a JVM started
    if not job.inputs_guarded:
        check_disjoint(output, files=[u for u, _ in units])  # an input inside the output: refused
    out = OutputDir(output, job.subdirs)
    extra = {"inputs": input_list(units)} if job.guard_inputs else {}
    # OutputConflict before Spark; the same inputs resume (done units are skipped below)
    created = out.prepare(job.name, job.config, job.fingerprint, {**extra, **(job.guard_extra or {})})
    # ... if their content is the same too: a unit made from other bytes is refused or redone
    try:
        if not job.inputs_guarded:
            out.guard_inputs(units, job.on_changed_input)
    except BaseException:
        if created:  # an unreadable input: no folder left claiming this config
            out.discard()
        raise
    todo = [(u, n) for u, n in units if not out.is_done(n)]
    skipped = len(units) - len(todo)
    if skipped:
        log.warning("%d of %d inputs already done in %s: skipped", skipped, len(units), out.root)
    failed: list[dict[str, Any]] = []
    if todo:
        out.set_success(False)
        try:
            session = get_spark(
                spark.master, f"refinery-{job.name}", {**(job.spark_conf or {}), **spark.conf}
            )
        except BaseException:
            if created:
                out.discard()
            raise
        sc = session.sparkContext
        payload_bc = sc.broadcast(job.payload)  # travels once per executor, not once per task
        rdd = sc.parallelize(todo, numSlices=len(todo))  # one partition = one task per unit
        fn = partial(_task, process=job.process, payload_bc=payload_bc, out_root=str(out.root))
        with _Progress(job.name, out, [n for _, n in todo], spark.progress):
            results = rdd.map(fn).collect()
        failed = [r for r in results if r["status"] != "done"]
        for r in failed:
            log.error("FAILED %s: %s\n%s", r["input"], r["error"], r.get("traceback", ""))
    try:
        done, merged = _finish(job, out, units, failed)
    except OSError as e:  # an object store gone mid-run: the units' own failures are the news
        log.error("could not read the markers or write stats.json in %s: %s", out.uri, e)
        return RunResult(out.uri, len(units), skipped, len(todo), [*failed, _unfinished(out, e)])
    return RunResult(out.uri, len(units), skipped, len(todo), failed, merged, done)


def _finish(
    job: PerFileJob, out: OutputDir, units: list[tuple[str, str]], failed: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], Stats]:
    """Merge the done units' stats into stats.json; _SUCCESS when every unit is done."""
    done = [s for _, n in units if out.is_done(n) and (s := out.read_stats(n)) is not None]
    merged = Stats.merged(done, order=job.stage_order)
    out.write_json(
        "stats.json",
        {
            "job": job.name,
            "config_fingerprint": job.fingerprint,
            "inputs": len(units),
            "done": len(done),
            "failed": [{"input": r["input"], "error": r["error"]} for r in failed],
            "docs_written": sum(s.get("docs_written", 0) for s in done),
            **merged.to_dict(),
            **(job.stats_extra(done) if job.stats_extra else {}),
        },
    )
    out.set_success(len(done) == len(units))
    return done, merged


def _unfinished(out: OutputDir, e: Exception) -> dict[str, Any]:
    """The run itself as a failure when stats.json and _SUCCESS could not be written: the units
    that reported done did commit (their markers were written), a rerun writes the rest."""
    error = f"stats.json and _SUCCESS not written (rerun to finish): {type(e).__name__}: {e}"
    return {"unit": "", "input": out.uri, "status": "failed", "error": error}


def input_list(units: list[tuple[str, str]]) -> list[str]:
    """The inputs a folder records: sorted and unique (order does not change outputs), local paths
    absolute (the same files named from another working directory are the same inputs)."""
    return sorted({u if "://" in u else os.path.abspath(u) for u, _ in units})


class _Progress:
    """Prints units done / total while the Spark job runs (markers are counted on disk)."""

    def __init__(self, job: str, out: OutputDir, units: list[str], enabled: bool) -> None:
        self.job, self.out, self.units, self.enabled = job, out, units, enabled
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
        try:
            done = sum(self.out.is_done(u) for u in self.units)
        except OSError:  # an object store that stopped answering: the tasks report it
            return
        elapsed = time.time() - self.t0
        width = 30
        filled = int(width * done / max(1, len(self.units)))
        bar = "#" * filled + "-" * (width - filled)
        end = "\r" if sys.stderr.isatty() else "\n"
        sys.stderr.write(f"[{self.job}] [{bar}] {done}/{len(self.units)} files  {elapsed:6.1f}s{end}")
        sys.stderr.flush()

    def _loop(self) -> None:
        interval = 1.0 if sys.stderr.isatty() else 10.0
        while not self._stop.wait(interval):
            self._print()
