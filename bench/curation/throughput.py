"""Curation throughput, WARC -> filtered documents: ours (Spark job and Spark-free) vs datatrove.

Three runs (four when the default config cascades) over the same WARC files, on the same number
of cores, in one process tree:

  (a) datatrove   its own local pipeline, FineWeb's stages with the same settings and model:
                  WarcReader -> URLFilter -> Trafilatura -> LanguageFilter -> GopherRepetitionFilter ->
                  GopherQualityFilter -> C4QualityFilter(filter_no_terminal_punct=False) ->
                  FineWebQualityFilter [-> ParquetWriter(zstd)], under
                  LocalPipelineExecutor(tasks=<n files>, workers=<cores>).
  (b) ours/pool   `curation.pipeline.process_file(uri, cfg, out_root)` mapped over the files by a
                  multiprocessing Pool(<cores>) (forkserver, one file per task): our per-file work
                  with no Spark in it.
  (c) ours/spark  the real job, `curation.job.run_extract(files, out, cfg, spark=<local[cores]>)`.
                  The SparkSession is started first, with a trivial job that starts Spark's Python
                  workers (and, as `extract` starts its session, the daemon they fork from builds
                  the default stages first: curation/spark_daemon.py; --no-preload: Spark's plain
                  daemon, each worker builds them in its first task); both are timed and reported
                  apart. The Spark row excludes them (a warm
                  session, as on a cluster), the "incl. startup" row adds them back (a cold
                  `refinery-curation extract`). With --repeat, later Spark runs reuse the warm
                  Python workers and their cached stages, as a long-lived session would.
  (d) ours/full   only when the default config cascades (`extract.cascade`): (b) with the cascade
                  off, the full path; the Spark run's kept set is compared with it (kept_agreement:
                  documents kept by both with the same text / documents kept by either).

Same settings on both sides, taken from `ExtractJobConfig()` (our defaults, FineWeb's values):
trafilatura favor_precision=True, deduplicate=True, include_comments=False, include_tables=True;
one per-page extraction timeout for both (`--timeout`, default 5 s: datatrove's own default of 1 s
would drop more slow pages than ours); lid.176 with keep-list ["en"] and threshold 0.65 (datatrove
is made to load the same local lid.176.ftz as ours, `curation.filters.langid.default_model_path()`, instead
of downloading lid.176.bin); the four datatrove filter blocks built with the kwargs of our config.
datatrove's WarcReader has no dedup option; it reads every record of every file (limit=-1).
Its JsonlWriter needs orjson, which is not installed: the comparable last block is its
ParquetWriter(compression="zstd") (ours writes zstd Parquet too), or none (`--dt-writer none`).

Counting. "pages in" is HTML pages past the URL filter (our `prelid` stage's docs_in with the
cascade, else `extract`'s; datatrove's Trafilatura `total`), "docs kept" the documents out of the last filter. The readers select pages
differently (ours: HTTP 200 + HTML content type; datatrove: WARC-Identified-Payload-Type text/html,
else libmagic, any HTTP status); the report counts the pages each reader takes that the other does
not. pages/s/core = pages in / (wall seconds x cores), with wall each run's whole call
(`executor.run()`, the Pool's start and map, `run_extract`). CPU s is the CPU time of the run's
whole process tree (workers, datatrove's sandboxes, the JVM and Spark's Python workers, the driver),
from /proc: on a shared machine it is the steadier per-core measure.

Timed the same way on every side (the headline). A side's set-up is what it spends on anything but
pages: the time before its first task starts (executor or Spark job start: cores x that), each task's
own set-up (models, tokenizers, the writer: datatrove builds its blocks afresh in every task, we once
per worker process), and for our Spark job a cold start's JVM, session and preloading daemon. A task's
own set-up is measured the same way for every side: after the timed runs, each side runs over one-page
WARCs (the record of a page every side keeps, one file per core), and the mean task wall there is its
per-task set-up. Two rates follow: set-up included on every side (a cold `refinery-curation extract`
against datatrove's whole run), and excluded on every side (steady: pages in / (cores x wall - set-up
core-s)), the latter given only where set-up is at most half of the run (a difference of two measured
times is noise beyond that). `--large-mb M` adds datatrove and our Spark job on <cores> files of M MB
(the inputs concatenated; a real crawl file is ~1 GB), where set-up is a small share on both sides.

Per-stage seconds come from each side's own stats: ours from `<output>/stats.json` "stages" (the
Pool run's per-file stats merged the same way), datatrove's from `<logging_dir>/stats.json` (each
block's time_stats.total, summed over tasks). The shares are of the core-seconds available
(cores x wall), split into the stages, "in-task overhead" (task wall minus its stage timers:
set-up of models and imports, untimed iteration and bookkeeping, closing output files) and
"outside tasks" (cores x wall minus the summed task walls: pool/JVM hand-off, scheduling, cores
idle at the tail). Task walls: ours from `stats/<unit>.json` "seconds", datatrove's from the
timestamps of its per-task logs. Files run largest first on every side (one WARC is one task; five
of the nine default files hold almost all pages), with the page cache warmed beforehand.

The sides (datatrove's pipeline, `run_pool`, `run_spark`) are bench/curation/sides.py's, shared with
bench/curation/multilingual.py; the clock, the kept-set agreement and the tables are bench/harness.py's.

    .venv/bin/python -m bench.curation.throughput [--cores 2] [--repeat 1] [--timeout 5]
        [--input FILES/GLOBS/FOLDERS ...] [--large-mb M] [--dt-writer parquet|none] [--no-preload] [--keep]
        [--verbose]

The last line printed is JSON: ours_pages_per_s_per_core (the Spark run) and datatrove_pages_per_s_per_core,
each {included, steady}, ratio_setup_included, ratio_steady, task_setup_s, large_files, kept_agreement, ratio_ceilings (the best ratio this run's own stage times allow: every page
dropped after extraction skipped for free, or nothing but the kept pages' extraction; see
`ceilings`), the kept counts and both sides' seconds per stage. URLFilter runs first on
both sides (ours: curation/filters/url_filter.py, FineWeb's lists; datatrove's URLFilter with the same lists,
tldextract on its bundled suffix list), so "pages in" counts pages past the URL filter.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.curation.sides import (
    OUR_STAGES,
    Run,
    large_inputs,
    resolve_files,
    run_datatrove,
    run_pool,
    run_spark,
    start_spark,
)
from bench.harness import kept_agreement, stderr_to, table
from curation.config import DATATROVE_FILTERS, ExtractConfig, ExtractJobConfig
from curation.filters.langid import default_model_path
from testkit.shared_data import REPO_ROOT

MAX_SETUP_SHARE = 0.5
"""Above this share of a run's core-seconds in set-up, no steady-state rate is derived from it."""


# ---------------------------------------------------------------------------------------------
# side measurements: which pages each reader takes; our per-process set-up
# ---------------------------------------------------------------------------------------------


def reader_selection(files: list[str], cfg: ExtractJobConfig) -> dict[str, Counter]:
    """Pages (by record offset) each reader takes that the other does not, with the reason."""
    from datatrove.pipeline.readers.warc import process_record
    from warcio.archiveiterator import ArchiveIterator

    from curation.warc.records import iter_records

    out = {"both": Counter(), "ours only": Counter(), "datatrove only": Counter()}
    for f in files:
        ours = {it.offset: it for it in iter_records(f, cfg.reader)}
        with open(f, "rb") as fh:
            records = ArchiveIterator(fh)
            for rec in records:
                offset = records.offset
                payload_type = rec.rec_headers.get_header("WARC-Identified-Payload-Type")
                dt_takes = process_record(rec) is not None
                item = ours.get(offset)
                our_takes = getattr(item, "kind", None) is not None
                if dt_takes and our_takes:
                    out["both"]["pages"] += 1
                elif our_takes:
                    if payload_type is None:
                        why = "no WARC-Identified-Payload-Type, libmagic not text/html"
                    elif payload_type in ("text/html", "application/xhtml+xml"):
                        why = "not UTF-8, cchardet failed"
                    else:
                        why = f"WARC-Identified-Payload-Type {payload_type}"
                    out["ours only"][why] += 1
                elif dt_takes:
                    out["datatrove only"][f"ours: {getattr(item, 'reason', 'unread')}"] += 1
    return out


_SETUP_CODE = """
import time
t0 = time.perf_counter()
from curation.config import ExtractJobConfig
from curation.pipeline import build_stages
t1 = time.perf_counter()
build_stages(ExtractJobConfig())
print(t1 - t0, time.perf_counter() - t1)
"""


def our_setup_seconds() -> tuple[float, float] | None:
    """(imports s, build_stages s) in a fresh interpreter: what each new worker process pays once."""
    try:
        r = subprocess.run(
            [sys.executable, "-c", _SETUP_CODE], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
        )
        imports, build = (float(x) for x in r.stdout.split())
        return imports, build
    except Exception:
        return None


def one_record(path: str, offset: int) -> bytes:
    """The gzip member of the WARC record at `offset` (a .warc.gz holds one member per record)."""
    import zlib

    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(64 << 20)
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    d.decompress(data)
    if not d.eof:
        raise ValueError(f"{path} @ {offset}: not a whole gzip member (a .warc.gz record is needed)")
    return data[: len(data) - len(d.unused_data)]


def probe_inputs(files: list[str], kept_root: Path, n: int, work: Path) -> list[str]:
    """`n` WARC files of one page each: the record of the first document our Spark run kept, so on
    every side the page passes every block and each block's lazy set-up (trafilatura's import, the
    LID model, spaCy, the writer) happens in every task."""
    import pyarrow.parquet as pq

    by_name = {Path(f).name: f for f in files}
    for f in sorted((kept_root / "docs").rglob("*.parquet")):
        for row in pq.read_table(f, columns=["warc_file", "warc_offset"]).to_pylist():
            src = by_name.get(Path(row["warc_file"]).name)
            if src is not None and src.endswith(".gz"):
                record = one_record(src, row["warc_offset"])
                work.mkdir(parents=True)
                out = [work / f"probe-{i}.warc.gz" for i in range(n)]
                for p in out:
                    p.write_bytes(record)
                return [str(p) for p in out]
    raise RuntimeError("no kept document of a .warc.gz input to probe set-up with")


def probe_setup(runs: list[Run]) -> float:
    """Seconds of a task's own set-up: the mean wall of a task whose file holds one page (what a
    task of that side costs before and after its pages: models, tokenizers, the writer's open and
    close; one page of work included, ~30 ms)."""
    walls = [e - s for r in runs for s, e in r.tasks]
    return sum(walls) / len(walls)


def ceilings(dt: Run, spark: Run) -> dict[str, float]:
    """What our Spark run's ratio to datatrove could be at best, from its own measured stage times.

    `skip_later_drops`: had every page that was extracted and then dropped (empty text, langid, the
    filters) been skipped before extraction at no cost, the most a "will this page survive?"
    predictor could buy, its extraction seconds taken off the run. `kept_extraction_only`: had
    the run spent nothing but the extractor's time on the pages it keeps, the least any input set
    asks of us whatever else gets faster (the pre-check, reading, Spark, the filters). Both keep
    the extractor's per-page seconds as measured: it is the library datatrove runs too."""
    ex = spark.stages["extract"]
    per_page = ex.seconds / max(1, ex.docs_in)
    later_drops = max(0, ex.docs_in - spark.kept)
    theirs = dt.per_core()
    cap = spark.cores * spark.wall

    def ratio(core_s: float) -> float:
        return round(spark.pages_in / max(core_s, 1e-9) / theirs, 3)

    return {
        "skip_later_drops": ratio(cap - per_page * later_drops),
        "kept_extraction_only": ratio(per_page * spark.kept),
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a / b, 3)


def summary(dt: Run, pool: Run, spark: Run, ctx: Context) -> dict[str, Any]:
    """The last line: our Spark job (the default config) against datatrove, per core, and where time went."""
    ours, theirs = ctx.same_way(spark), ctx.same_way(dt)
    large = None
    if ctx.large:
        l_dt, l_spark = (ctx.same_way(r) for r in ctx.large)
        large = {
            "mb_per_file": ctx.args.large_mb,
            "files": len(ctx.large[0].tasks),
            "ratio_setup_included": round(l_spark["included"] / l_dt["included"], 3),
            "ratio_steady": _ratio(l_spark["steady"], l_dt["steady"]),
        }
    return {
        "files": len(ctx.files),
        "cores": ctx.args.cores,
        "cascade": ctx.cfg.extract.cascade,
        # Both sides timed the same way (issue 44): set-up included on both (our cold start, JVM and
        # daemon, against datatrove's whole run), and excluded on both (steady state).
        "ours_pages_per_s_per_core": {k: _round(ours[k]) for k in ("included", "steady")},
        "datatrove_pages_per_s_per_core": {k: _round(theirs[k]) for k in ("included", "steady")},
        "ratio_setup_included": round(ours["included"] / theirs["included"], 3),
        "ratio_steady": _ratio(ours["steady"], theirs["steady"]),
        "setup_share": {"ours": round(ours["setup_share"], 3), "datatrove": round(theirs["setup_share"], 3)},
        "task_setup_s": {k: round(v, 3) for k, v in ctx.task_setup.items()},
        "large_files": large,
        "ours_pool_ratio": round(pool.per_core() / dt.per_core(), 3),
        "ours_full_path_ratio": round(ctx.full.per_core() / dt.per_core(), 3) if ctx.full else None,
        "kept_agreement": round(ctx.agreement, 5),
        "ratio_ceilings": ceilings(dt, spark),
        "kept": {
            "ours": spark.kept,
            "datatrove": dt.kept,
            **({"ours_full_path": ctx.full.kept} if ctx.full else {}),
        },
        "stage_seconds": {
            "ours": {k: round(v.seconds, 2) for k, v in spark.stages.items()},
            "datatrove": {k: round(v.seconds, 2) for k, v in dt.stages.items()},
        },
    }


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------


def _breakdown(run: Run) -> list[tuple[str, float]]:
    """(row, core-seconds): the stages, in-task overhead, outside tasks; sums to cores x wall."""
    rows = [(s, run.stages[s].seconds) for s in OUR_STAGES if s in run.stages]
    rows.append(("in-task overhead", run.task_seconds - run.stage_seconds))
    rows += [(f"outside tasks: {k}", v) for k, v in run.outside_tasks().items()]
    return rows


@dataclass
class Context:
    args: argparse.Namespace
    files: list[str]
    cfg: ExtractJobConfig
    spark_start: tuple[float, float]
    selection: dict[str, Counter]
    setup: tuple[float, float] | None
    walls: dict[str, list[float]]
    full: Run | None
    """Our Pool run of the full path (no cascade), when the default config cascades."""
    agreement: float
    """Kept-set agreement of the Spark run (default config) with the full path: same ids, same texts."""
    task_setup: dict[str, float] = field(default_factory=dict)
    """Per-task set-up seconds of each side (run name -> s), from its run over one-page files."""
    large: tuple[Run, Run] | None = None
    """datatrove and our Spark job on the large files (`--large-mb`), when asked for."""

    @property
    def startup(self) -> float:
        return sum(self.spark_start)

    def same_way(self, run: Run) -> dict[str, float]:
        """`run` timed as every side is: set-up included (a cold start: our Spark job's JVM and
        daemon start added to its wall), and set-up excluded (steady state)."""
        cold = self.startup if "Spark" in run.name else 0.0
        setup = self.task_setup[run.name]
        setup_core_s = run.setup_core_s(setup) + cold * run.cores
        share = setup_core_s / (run.cores * (run.wall + cold))
        return {
            "included": run.per_core(cold),
            "setup_core_s": setup_core_s,
            "setup_share": share,
            # A difference of two measured times is only as good as its smaller part: where set-up is
            # most of the run, the steady rate is mostly noise, and none is given (use --large-mb).
            "steady": run.steady_per_core(setup) if share <= MAX_SETUP_SHARE else None,
        }


def report(dt: Run, pool: Run, spark: Run, ctx: Context) -> str:
    args, cfg, files = ctx.args, ctx.cfg, ctx.files
    size = sum(Path(f).stat().st_size for f in files)
    model = cfg.langid.model_path or default_model_path()
    filters = ", ".join(
        f"{DATATROVE_FILTERS[k]}({', '.join(f'{a}={v}' for a, v in kw.items())})"
        for k, kw in cfg.filters.enabled().items()
    )
    jvm, first_job = ctx.spark_start
    startup = jvm + first_job
    lines = [
        f"Curation throughput: {len(files)} WARC files, {size / 1e6:.1f} MB compressed, {args.cores} cores "
        f"(machine has {os.cpu_count()}), best wall of {args.repeat} run(s) per side",
        f"settings, both sides: trafilatura favor_precision={cfg.extract.favor_precision} "
        f"deduplicate={cfg.extract.deduplicate} include_comments={cfg.extract.include_comments} "
        f"include_tables={cfg.extract.include_tables} fast={cfg.extract.fast}; extraction timeout {args.timeout:g} s per page",
        f"  langid: {Path(model).name} ({model}), keep {list(cfg.langid.languages)}, score >= "
        f"{cfg.langid.threshold}",
        f"  filters: {filters}",
        "  writers: ours Parquet (zstd) docs + rejected samples + per-file stats; datatrove "
        + ("ParquetWriter(compression='zstd')" if args.dt_writer == "parquet" else "no writer"),
        "  files, largest first (scheduling order on every side): " + ", ".join(Path(f).name for f in files),
        f"Spark startup, reported apart: JVM + SparkSession {jvm:.1f} s, first trivial job (starts Spark's "
        f"Python workers) {first_job:.1f} s; {startup:.1f} s in all",
    ]
    if args.repeat > 1:
        lines.append(
            "walls of every run: "
            + "; ".join(f"{k}: {', '.join(f'{w:.1f}' for w in v)}" for k, v in ctx.walls.items())
        )
    lines.append("")

    # -- throughput --------------------------------------------------------------------------
    base, base_cpu = dt.per_core(), dt.pages_in / dt.cpu
    rows = []
    for run, extra, label in (
        (dt, 0.0, dt.name),
        (pool, 0.0, pool.name),
        (spark, 0.0, spark.name),
        (spark, startup, f"{spark.name} incl. startup"),
        *([(ctx.full, 0.0, ctx.full.name)] if ctx.full else []),
    ):
        wall = run.wall + extra
        rows.append(
            [
                label,
                f"{wall:.1f}",
                f"{run.pages_in:,}",
                f"{run.kept:,}",
                f"{run.pages_in / wall:.1f}",
                f"{run.per_core(extra):.2f}",
                f"{run.per_core(extra) / base:.2f}x",
                f"{run.cpu:.1f}" if not extra else "-",
                f"{run.pages_in / run.cpu:.2f}" if not extra else "-",
                f"{run.pages_in / run.cpu / base_cpu:.2f}x" if not extra else "-",
                f"{run.first_task_s + extra:.1f}",
            ]
        )
    headers = [
        "run",
        "wall s",
        "pages in",
        "docs kept",
        "pages/s",
        "pages/s/core",
        "vs dt",
        "CPU s",
        "pages/CPU-s",
        "vs dt",
        "1st task at s",
    ]
    lines.append(table(headers, rows))
    lines.append(
        "  pages/s/core = pages in / (wall x cores). CPU s: the run's whole process tree. "
        "1st task at: seconds from the call to the first task starting."
    )
    lines.append(
        f"  ours/datatrove pages/s/core: Pool {pool.per_core() / base:.2f}x, Spark {spark.per_core() / base:.2f}x, "
        f"Spark incl. startup {spark.per_core(startup) / base:.2f}x. Spark vs Pool: {spark.wall - pool.wall:+.1f} s "
        f"wall, {spark.cpu - pool.cpu:+.1f} CPU s; a cold start adds {startup:.1f} s."
    )
    if ctx.full is not None:
        lines.append(
            f"  cascade (extract.cascade, margin {cfg.extract.cascade_margin}): kept-set agreement of the Spark run "
            f"with the full path (same ids, same texts) {100 * ctx.agreement:.2f}%; the full path's Pool run is "
            f"{ctx.full.per_core() / base:.2f}x datatrove per core."
        )
    sel = ctx.selection
    lines.append(
        f"  pages read: {sel['both']['pages']:,} by both readers; ours only "
        f"{sum(sel['ours only'].values()):,} ({', '.join(f'{k}: {v}' for k, v in sel['ours only'].items()) or '-'}); "
        f"datatrove only {sum(sel['datatrove only'].values()):,} "
        f"({', '.join(f'{k}: {v}' for k, v in sel['datatrove only'].items()) or '-'})"
    )
    lines.append(
        f"  extraction timeouts ({args.timeout:g} s): "
        + ", ".join(
            f"{label} {r.stages['extract'].timeouts}"
            for label, r in (("datatrove", dt), ("ours/pool", pool), ("ours/spark", spark))
        )
    )
    for run in (dt, pool, spark):
        lines.extend(f"  FAILED in {run.name}: {f}" for f in run.failed)
    lines.append("")

    lines.extend(same_way_table(dt, pool, spark, ctx))
    lines.append("")

    # -- stages ------------------------------------------------------------------------------
    dt_names = {
        "read": "Warc",
        "url_filter": "URLFilter",
        "prelid": "(none: datatrove extracts every page)",
        "extract": "Trafilatura",
        "langid": "Language ID",
        "filter:gopher_repetition": "Gopher Repetition",
        "filter:gopher_quality": "Gopher Quality",
        "filter:c4_quality": "C4 Quality",
        "filter:fineweb_quality": "FineWeb Quality",
        "write": "Parquet" if args.dt_writer == "parquet" else "(none)",
    }
    runs = (spark, pool, dt)
    bd = {r.name: dict(_breakdown(r)) for r in runs}
    cap = {r.name: r.cores * r.wall for r in runs}
    rows = []
    for key in [k for k, _ in _breakdown(spark)]:
        st_o, st_d = spark.stages.get(key), dt.stages.get(key)
        cells = []
        for r in runs:
            v = bd[r.name].get(key)
            cells += ["-", "-"] if v is None else [f"{v:.1f}", f"{100 * v / cap[r.name]:.1f}%"]
        rows.append(
            [
                key,
                dt_names.get(key, ""),
                f"{st_o.docs_in:,}" if st_o else "",
                f"{st_d.docs_in:,}" if st_d else "",
                *cells,
                f"{1000 * st_o.seconds / st_o.docs_in:.2f}" if st_o and st_o.docs_in else "",
                f"{1000 * st_d.seconds / st_d.docs_in:.2f}" if st_d and st_d.docs_in else "",
            ]
        )
    totals = [x for r in runs for x in (f"{cap[r.name]:.1f}", "100%")]
    rows.append(["total = cores x wall", "", "", "", *totals, "", ""])
    lines.append("Seconds per stage (summed over tasks) and share of cores x wall")
    headers = [
        "stage (ours)",
        "datatrove block",
        "in: ours",
        "dt",
        "spark s",
        "%",
        "pool s",
        "%",
        "dt s",
        "%",
        "ms/doc ours",
        "dt",
    ]
    lines.append(table(headers, rows, left=2))
    lines.append(
        "  in: documents entering the stage (ours: Spark run). ms/doc: stage seconds per document entering "
        "it (ours: Spark run). Our `read` is timed per WARC record, pages and skipped records alike; "
        "datatrove times only process_record for the records it yields, its record iteration is in its "
        "in-task overhead."
    )
    lines.append(
        "  datatrove's stage seconds include each task's lazy set-up (sandbox process start and trafilatura "
        "import, lid.176 load, spaCy tokenizer: its blocks are fresh per task); ours build them once per "
        "worker process (build_stages), counted as in-task overhead. datatrove's Trafilatura seconds include "
        "its sandbox pipe round trip per page."
    )
    lines.append("")
    lines.append(where_time_goes(dt, pool, spark, ctx))
    return "\n".join(lines)


def same_way_table(dt: Run, pool: Run, spark: Run, ctx: Context) -> list[str]:
    """Every side timed the same way: set-up included on all (a cold start), and excluded on all."""
    runs = [("", dt), ("", pool), ("", spark)]
    if ctx.large:
        mb = ctx.args.large_mb
        n = len(ctx.large[0].tasks)  # datatrove: one task per file
        runs += [(f"{n} x {mb:g} MB: ", r) for r in ctx.large]
    base = {"": ctx.same_way(dt), **({"large": ctx.same_way(ctx.large[0])} if ctx.large else {})}
    rows = []
    for prefix, run in runs:
        w, b = ctx.same_way(run), base["large" if ctx.large and run in ctx.large else ""]
        rows.append(
            [
                prefix + run.name,
                f"{ctx.task_setup[run.name]:.2f}",
                f"{len(run.tasks)}",
                f"{run.first_task_s:.1f}",
                f"{w['setup_core_s']:.1f}",
                f"{100 * w['setup_share']:.0f}%",
                f"{w['included']:.2f}",
                f"{w['included'] / b['included']:.2f}x",
                "-" if w["steady"] is None else f"{w['steady']:.2f}",
                "-" if w["steady"] is None or b["steady"] is None else f"{w['steady'] / b['steady']:.2f}x",
            ]
        )
    headers = [
        "timed the same way",
        "task set-up s",
        "tasks",
        "1st task at s",
        "set-up core-s",
        "share",
        "incl. set-up",
        "vs dt",
        "steady",
        "vs dt",
    ]
    return [
        table(headers, rows),
        "  pages/s/core, set-up included on every side (a cold start: our Spark job's JVM and daemon start, "
        f"{ctx.startup:.1f} s, added to its wall; datatrove's and the Pool's whole call) and excluded on every "
        "side (steady: pages in / (cores x wall - set-up core-s)). Set-up core-s = cores x the time before the "
        "first task + tasks x a task's own set-up (+ cores x the cold start for Spark), where a task's set-up is "
        "the mean wall of that side's tasks over one-page WARCs (the record of a page every side keeps, one "
        "file per core, run after the timed runs: its models, tokenizers and writer, once per task). "
        f"share: set-up of all core-s; over {MAX_SETUP_SHARE:.0%} no steady rate is given ('-'): the "
        "difference of two measured times would be mostly noise.",
    ]


def where_time_goes(dt: Run, pool: Run, spark: Run, ctx: Context) -> str:
    cap = spark.cores * spark.wall
    out = [
        f"Where does our time go? (Spark run: {spark.cores} cores x {spark.wall:.1f} s = {cap:.1f} core-s)"
    ]
    for name, secs in sorted(_breakdown(spark), key=lambda kv: -kv[1]):
        out.append(f"  {name:<30} {secs:6.1f} s  {100 * secs / cap:5.1f}%")
    ex_o, ex_d = spark.stages["extract"], dt.stages["extract"]
    filt = [s for s in OUR_STAGES if s.startswith("filter:")]
    filt_o = sum(spark.stages[s].seconds for s in filt)
    filt_d = sum(dt.stages[s].seconds for s in filt)
    n_o, n_d = spark.stages[filt[0]].docs_in, dt.stages[filt[0]].docs_in
    out.append(
        f"  - extraction (trafilatura) is {100 * ex_o.seconds / spark.stage_seconds:.0f}% of our stage time: "
        f"{1000 * ex_o.seconds / max(1, ex_o.docs_in):.1f} ms/page vs datatrove's "
        f"{1000 * ex_d.seconds / max(1, ex_d.docs_in):.1f} ms/page ({100 * ex_d.seconds / dt.stage_seconds:.0f}% "
        "of its stage time)."
    )
    out.append(
        f"  - the four filter blocks (ours: curation/filters/text.py by default; datatrove's blocks): ours {filt_o:.1f} s for {n_o:,} docs "
        f"({1000 * filt_o / max(1, n_o):.1f} ms/doc), datatrove {filt_d:.1f} s for {n_d:,} "
        f"({1000 * filt_d / max(1, n_d):.1f} ms/doc); langid {spark.stages['langid'].seconds:.1f} s."
    )
    ceil = ceilings(dt, spark)
    out.append(
        f"  - ceilings (arithmetic on this run's stage times, extraction at its measured "
        f"{1000 * ex_o.seconds / max(1, ex_o.docs_in):.1f} ms/page): {max(0, ex_o.docs_in - spark.kept):,} of the "
        f"{ex_o.docs_in:,} pages extracted were dropped afterwards; skipping all of them at no cost would give "
        f"{ceil['skip_later_drops']:.2f}x datatrove, and a run that spent nothing but extraction of the "
        f"{spark.kept:,} pages it keeps {ceil['kept_extraction_only']:.2f}x."
    )
    if ctx.setup:
        imports, build = ctx.setup
        out.append(
            f"  - in-task overhead {spark.task_seconds - spark.stage_seconds:.1f} s: a fresh worker pays "
            f"{imports:.1f} s of imports + {build:.1f} s build_stages (lid.176, spaCy, filter blocks) once "
            f"({spark.cores} workers), the rest is per-file Parquet/stats writing and untimed bookkeeping."
        )
    parts = spark.outside_tasks()
    longest = max(e - s for s, e in spark.tasks)
    out.append(
        f"  - outside tasks {cap - spark.task_seconds:.1f} core-s: {parts['start']:.1f} before the first task "
        f"({spark.first_task_s:.2f} s x {spark.cores} cores), {parts['between tasks']:.1f} handing over between "
        f"tasks, {parts['tail idle']:.1f} with a core idle at the tail (one WARC = one task; the longest task "
        f"took {longest:.1f} s), {parts['end']:.1f} after the last task (merging stats, job end). datatrove: "
        + ", ".join(f"{k} {v:.1f}" for k, v in dt.outside_tasks().items())
        + "."
    )
    out.append(
        f"  - Spark itself: {spark.wall - pool.wall:+.1f} s wall and {spark.cpu - pool.cpu:+.1f} CPU s against "
        f"the Spark-free Pool run ({spark.wall:.1f} vs {pool.wall:.1f} s), plus {sum(ctx.spark_start):.1f} s "
        "of JVM and Python-worker start on a cold run."
    )
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument(
        "--input",
        "--files",
        dest="files",
        nargs="+",
        help="WARC files, globs or folders, or names in the shared warc/ folder (default: 9 files)",
    )
    ap.add_argument("--cores", type=int, default=2, help="workers on every side (default 2)")
    ap.add_argument(
        "--repeat", type=int, default=1, help="runs per side, interleaved; the fastest wall is reported"
    )
    ap.add_argument("--timeout", type=float, default=5.0, help="per-page extraction timeout, both sides (s)")
    ap.add_argument(
        "--dt-writer",
        choices=("parquet", "none"),
        default="parquet",
        help="datatrove's last block: ParquetWriter(zstd) (JsonlWriter needs orjson, not installed) or none",
    )
    ap.add_argument(
        "--trafilatura-fast",
        action="store_true",
        help="trafilatura's fast mode on both sides (extract.fast=true; datatrove's Trafilatura(fast=True))",
    )
    ap.add_argument(
        "--no-preload",
        action="store_true",
        help="Spark's plain Python daemon: each worker builds the stages itself (before curation/spark_daemon.py)",
    )
    ap.add_argument(
        "--large-mb",
        type=float,
        default=0.0,
        help="also run datatrove and our Spark job on <cores> files of this many MB each, the inputs "
        "concatenated (a real crawl file is ~1 GB; 0: off)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the outputs and logs (path printed)")
    ap.add_argument(
        "--verbose", action="store_true", help="leave stderr (datatrove, Spark logs) on the console"
    )
    args = ap.parse_args(argv)
    if args.cores < 1 or args.repeat < 1:
        ap.error("--cores and --repeat must be >= 1")

    files = resolve_files(args.files)
    fast = args.trafilatura_fast
    cfg = ExtractJobConfig(extract=ExtractConfig(timeout_s=args.timeout, fast=fast))
    # The full path (no cascade), for the kept-set agreement of our default against it.
    cfg_full = ExtractJobConfig(extract=ExtractConfig(timeout_s=args.timeout, cascade=False, fast=fast))
    for f in files:  # warm the page cache: time the work, not the disk
        Path(f).read_bytes()
    work = Path(tempfile.mkdtemp(prefix="refinery-throughput-"))
    log = None if args.verbose else work / "stderr.log"
    print(f"{len(files)} files, cores={args.cores}, repeat={args.repeat}; work dir {work}", flush=True)

    best: dict[str, Run] = {}
    walls: dict[str, list[float]] = defaultdict(list)

    def keep_best(run: Run) -> None:
        print(f"  {run.name:<38} {run.wall:6.1f} s  {run.pages_in} pages in, {run.kept} kept", flush=True)
        walls[run.name].append(run.wall)
        if run.name not in best or run.wall < best[run.name].wall:
            best[run.name] = run

    try:
        with stderr_to(log):
            jvm, first_job, spark_pids = start_spark(args.cores, preload=not args.no_preload)
            print(f"  Spark started: session {jvm:.1f} s + first job {first_job:.1f} s", flush=True)
            for r in range(args.repeat):  # interleaved, so load from elsewhere hits every side alike
                keep_best(
                    run_datatrove(
                        files, cfg, args.cores, args.timeout, work / f"dt-{r}", args.dt_writer, spark_pids
                    )
                )
                keep_best(run_pool(files, cfg, args.cores, work / f"pool-{r}", spark_pids))
                keep_best(run_spark(files, cfg, args.cores, work / f"spark-{r}", spark_pids))
                if cfg.extract.cascade:
                    keep_best(
                        run_pool(files, cfg_full, args.cores, work / f"full-{r}", spark_pids, " (no cascade)")
                    )
            # Each side's per-task set-up, measured the same way: its run over one-page files.
            probe = probe_inputs(files, work / "spark-0", args.cores, work / "probe")
            probes = (
                run_datatrove(
                    probe, cfg, args.cores, args.timeout, work / "probe-dt", args.dt_writer, spark_pids
                ),
                run_pool(probe, cfg, args.cores, work / "probe-pool", spark_pids),
                run_spark(probe, cfg, args.cores, work / "probe-spark", spark_pids),
            )
            task_setup = {r.name: probe_setup([r]) for r in probes}  # the names of the timed runs
            if cfg.extract.cascade:  # the full path's Pool: the same per-task set-up as the Pool's
                task_setup[probes[1].name + " (no cascade)"] = task_setup[probes[1].name]
            large = None
            if args.large_mb > 0:
                big = large_inputs(files, args.cores, args.large_mb, work / "large")
                large = (
                    run_datatrove(
                        big, cfg, args.cores, args.timeout, work / "large-dt", args.dt_writer, spark_pids
                    ),
                    run_spark(big, cfg, args.cores, work / "large-spark", spark_pids),
                )
                for r in large:
                    print(
                        f"  large: {r.name:<31} {r.wall:6.1f} s  {r.pages_in} pages in, {r.kept} kept",
                        flush=True,
                    )
            selection = reader_selection(files, cfg)
            setup = our_setup_seconds()
    except BaseException:
        if log is not None and log.is_file():
            sys.stderr.write("".join(log.read_text(errors="replace").splitlines(True)[-40:]))
            sys.stderr.write(f"\n(full stderr in {log})\n")
        raise
    dt, pool, spark, *full = best.values()
    agree = kept_agreement(work / "spark-0", work / "full-0") if full else 1.0
    ctx = Context(
        args,
        files,
        cfg,
        (jvm, first_job),
        selection,
        setup,
        dict(walls),
        full[0] if full else None,
        agree,
        task_setup,
        large,
    )
    print()
    print(report(dt, pool, spark, ctx))
    if args.keep:
        print(f"\noutputs and logs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(summary(dt, pool, spark, ctx)))  # the last line: machine-readable
    return 1 if dt.failed or pool.failed or spark.failed or (full and full[0].failed) else 0


if __name__ == "__main__":
    sys.exit(main())
