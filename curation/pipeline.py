"""One input file through every stage: read -> url_filter -> extract -> langid -> filters -> pii -> quality -> write.

This is the whole per-unit logic of the `extract` job, with no Spark in it: `process_unit` is what
the per-file runner (core/runner.py) calls in a Spark task for its one WARC (or one byte range of
it, curation/warc/ranges.py), and `process_file` runs the same without Spark (tests, benchmarks). Both
go through `run_unit_stages`, the frame every unit shares; the index job's units
(curation/index/job.py) use it too, reading their fetched records with the same `_run`. Everything between reading and writing is a list
of document stages (core/stage.py) run by `core.stage.run_stages`, which counts, times and reports
drops in one place; this file only reads records, builds the stage list from the config, keeps a
sample of dropped documents and writes the kept ones.

Funnel rows, in order (each stage's docs/bytes in and out, drops per reason, seconds):
    read                 curation/warc/records.py: records -> pages; skips (non-HTML, errors, ...) counted
    url_filter           curation/filters/url_filter.py: FineWeb's URL filter + domain blocklists, on the URL
                         alone, so a blocked page is never extracted (`url_filter.enabled: false`
                         removes the row)
    optout_page          only with `optout.enabled`: curation/optout/page.py, TDMRep and `noai` from the
                         record's headers and the head of its HTML -> `optout_signals`; in `remove`
                         mode a reserved page is dropped before extraction
    prelid               only with `extract.cascade`: resiliparse's cheap main-content text -> lid.176;
                         a page clearly not in a kept language is dropped before the extractor
    extract              charset decoding + trafilatura (or the configured extractor) -> text, title;
                         with `extract.extractors: [a, b]`, `mode: fallback` runs b when a gives no
                         text, `mode: union` retries a page langid or a filter dropped on b's text
    langid               fastText lid.176 -> lang, lang_score; keep-list + threshold
    filter:<key>         each datatrove filter block in FineWeb's order, then the user's own stages
    pii                  curation/pii/scrub.py: typed placeholders, per-type counts -> `pii_counts`
                         (on by default; `pii.enabled: false` removes the row)
    quality              classifiers' annotator: P(high quality) -> `quality` (only with `quality.model`)
    <annotator>          each entry of `annotators:` (registry name or import path), its own row
    write                documents written to docs/ (in `filters.mode: annotate`, the documents kept;
                         those annotated as dropped are written too, counted as `annotated_written`)

PII runs after the filters so that only kept documents pay for it, and so that the filters judge
the text as it was written (a placeholder is not a word). Quality runs after PII: it scores the
text exactly as docs/ stores it, so `python -m classifiers score` over the output gives the same
numbers. Neither drops documents for what they find; a document whose scrubbing raises is
dropped (`pii_error`: never written unscrubbed), one whose scoring raises keeps a null score
(counter `quality_error`), both logged.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from core.output import OutputDir, partition_folder, unit_name
from core.runner import PerFileJob, run_unit
from core.stage import (
    Document,
    DocumentStage,
    Drop,
    OnDrop,
    build_stage,
    resolve_stage,
    run_stages,
    utf8_len,
)
from core.stats import Stats
from core.storage import is_remote, local_input
from curation.config import ExtractJobConfig, stage_name, uses_section
from curation.extract.extractors import ExtractStep, decoded_html
from curation.filters.blocks import build_filter_steps
from curation.filters.langid import LanguageIdentifier, PreLanguageFilter, prelid_can_drop
from curation.filters.url_filter import UrlFilter
from curation.optout.page import PageSignalStage
from curation.pii.scrub import PiiScrubber, PiiStage
from curation.schema import (
    DOC_SCHEMA,
    EVIDENCE_TYPE,
    REJECTED_DETAIL_CHARS,
    REJECTED_SCHEMA,
    doc_id,
    sample_key,
)
from curation.warc.ranges import parse_range_unit
from curation.warc.records import Page, Skip, crawl_from_name, iter_records

log = logging.getLogger(__name__)

# Documents buffered before a Parquet row group is written: bounds task memory on big WARCs.
ROW_GROUP_DOCS = 2000


@dataclass
class Plan:
    """The document stages of one config, in three parts.

    `head` runs before extraction (url_filter, the cascade's prelid), `tail` after the filters
    (pii, quality). `attempts` holds [extract, langid, filters...] once per extractor tried: one
    list, except in `extract.mode: union`, where a page dropped on the first extractor's text is
    tried again on the next one's (the langid and filter stages are shared between attempts).
    """

    head: list[DocumentStage]
    attempts: list[list[DocumentStage]]
    tail: list[DocumentStage]

    def stages(self) -> list[DocumentStage]:
        """Every distinct stage, in pipeline order (then the union's other extract steps)."""
        out: list[DocumentStage] = []
        for st in (*self.head, *(s for a in self.attempts for s in a), *self.tail):
            if not any(st is o for o in out):
                out.append(st)
        return out


def _extractors(cfg: ExtractJobConfig) -> list[DocumentStage]:
    """The configured extractors, from the one registry: the built-ins take the `extract` section."""
    out: list[DocumentStage] = []
    for i, (spec, args) in enumerate(cfg.extract.entries()):
        key = f"extract.extractors[{i}]"
        cls = resolve_stage("extractor", spec, key)
        out.append(
            cls(cfg.extract)
            if uses_section(cls)
            else build_stage("extractor", spec, args, key, name="extract")
        )
    return out


def cascades(cfg: ExtractJobConfig) -> bool:
    """Whether the cascade's pre-LID runs. Not in `filters.mode: annotate`: its point is to skip the
    extraction of pages langid will drop, and annotate mode writes those pages (an ablation's `raw`
    arm is every language), so each page goes the full way there. Nor where it can drop no page
    (`prelid_can_drop`: every language kept, a floor at 0), where it would be pure cost."""
    return (
        cfg.extract.cascade
        and cfg.filters.mode != "annotate"
        and prelid_can_drop(cfg.langid, cfg.languages.folder(), cfg.extract.cascade_margin)
    )


def build_plan(cfg: ExtractJobConfig) -> Plan:
    """The config's stages, warmed up (models loaded once per process)."""
    extractors = _extractors(cfg)
    record = len(extractors) > 1  # the `extractor` column only when there is a choice to record
    settings = cfg.languages.folder()
    lid = LanguageIdentifier(cfg.langid, settings)
    annotate = cfg.filters.mode == "annotate"
    head: list[DocumentStage] = [
        *([UrlFilter(cfg.url_filter)] if cfg.url_filter.enabled else []),
        *([PageSignalStage(cfg.optout, annotate)] if cfg.optout.enabled else []),
        *([PreLanguageFilter(lid, cfg.extract.cascade_margin, cfg.extract)] if cascades(cfg) else []),
    ]
    if record and cfg.extract.mode == "union":
        steps = [ExtractStep([ex], record=True) for ex in extractors]
    else:
        steps = [ExtractStep(extractors, record=record)]
    judges = [lid, *build_filter_steps(cfg.filters, settings)]
    tail: list[DocumentStage] = [PiiStage(cfg.pii.scrub_config())] if cfg.pii.enabled else []
    for spec, args, key in cfg.annotator_specs():
        cls = resolve_stage("annotator", spec, key)
        tail.append(build_stage("annotator", spec, args, key, name=stage_name(cls)))
    plan = Plan(head, [[step, *judges] for step in steps], tail)
    # Warm-up: load the LID model and the filters' lazy resources (spaCy tokenizer, datatrove
    # imports) once per process, so per-stage seconds measure documents, not start-up.
    for st in plan.stages():
        st.warm_up()
    return plan


def build_stages(cfg: ExtractJobConfig) -> list[DocumentStage]:
    """The document stages of the config, in order, warmed up (see `Plan.stages`)."""
    return build_plan(cfg).stages()


_PLANS: dict[str, Plan] = {}


def plan_for(cfg: ExtractJobConfig) -> Plan:
    """Stages built once per worker process and config, reused across the files of its tasks."""
    key = cfg.fingerprint()
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = build_plan(cfg)
    return plan


def run_plan(
    doc: Document, plan: Plan, stats: Stats, on_drop: OnDrop, annotate: bool = False
) -> Document | None:
    """One document through the plan: the kept document, or None once a stage dropped it.

    `annotate` (`filters.mode: annotate`): a drop by langid or a filter is recorded on the document
    instead (core.stage.run_stages), which then goes on through the tail uncounted.
    """
    kept = run_stages(doc, plan.head, stats, on_drop, annotate)
    if kept is None:
        return None
    if len(plan.attempts) == 1:
        kept = run_stages(kept, plan.attempts[0], stats, on_drop, annotate)
    else:
        kept = _union(kept, plan.attempts, stats, on_drop, annotate)
    return None if kept is None else run_stages(kept, plan.tail, stats, on_drop, annotate)


def _union(
    doc: Document, attempts: list[list[DocumentStage]], stats: Stats, on_drop: OnDrop, annotate: bool = False
) -> Document | None:
    """`extract.mode: union`: the first attempt whose document passes langid and the filters wins.

    Each attempt counts into its own Stats; the funnel gets the winner's counts and drops (the
    first attempt's when none passes, so the funnel reads as with the first extractor alone) and
    every attempt's seconds (the time was spent). The charset is counted once, before the attempts.
    """
    first = attempts[0][0]
    if doc.html is None and doc.metadata.get("source_format") != "wet":
        decoded_html(doc, first)
        stats.counters.update(first.take_counters() or {})
    trials: list[tuple[Stats, list[tuple[str, Document, Drop]]]] = []
    results: list[Document | None] = []
    for attempt in attempts:
        trial, drops = Stats(), []
        out = run_stages(_copy(doc), attempt, trial, lambda *a, d=drops: d.append(a), annotate)
        trials.append((trial, drops))
        results.append(out)
        # an annotated document is one the attempt would have dropped: the next extractor is tried
        if out is not None and out.metadata.get("drop_stage") is None:
            break
    passed = results[-1] is not None and results[-1].metadata.get("drop_stage") is None
    winner = len(trials) - 1 if passed else 0
    kept = results[winner]
    for i, (trial, drops) in enumerate(trials):
        for name, st in trial.stages.items():
            if i == winner:
                stats.stage(name).merge(st)
            else:
                stats.stage(name).seconds += st.seconds
        if i == winner:
            stats.counters.update(trial.counters)
            for drop in drops:
                on_drop(*drop)
    if passed:
        stats.counters[f"union_kept:{kept.metadata.get('extractor')}"] += 1
    return kept


def _copy(doc: Document) -> Document:
    """A document an attempt may change (text, metadata, payload cleared) without touching `doc`."""
    return Document(id=doc.id, text=doc.text, metadata=dict(doc.metadata), payload=doc.payload, html=doc.html)


# Characters scrubbed beyond what a sampled row keeps, so a PII match cut by the limit is found whole.
_SCRUB_MARGIN = 256


@dataclass
class _Rejected:
    """A unit's sample of dropped documents: per (stage, reason, lang) cell, a reservoir of the `cap`
    rows with the smallest `sample_key` (curation/schema.py).

    The key is a hash of the document id, so the sample does not depend on the order records arrive
    in, a rerun keeps the same rows (idempotent units), and it merges: the k smallest keys of a cell
    over every unit's file are the run's sample of k, which is what a reader of many units takes
    (issue 46: bounded at any scale). A cell per language, so a language with few drops is not
    crowded out of the sample by one with many. What is counted stays exact elsewhere: drops per
    reason in the funnel (core/stage.py run_stages), per language in the `lang_funnel` counters.

    Rows keep the raw text cut to what they show (plus a margin) until `rows` scrubs the survivors:
    only the sample pays for PII scrubbing, never a candidate the reservoir evicted.
    """

    cap: int
    snippet_chars: int
    scrubber: PiiScrubber | None = None
    """When the PII stage is on, snippets and texts of dropped documents are scrubbed too: rejected/
    is for inspection and must not be the one place that keeps the raw personal data."""
    text_chars: int = 0
    """`output.rejected_text_chars`: characters of the `text` column (0: none)."""
    cells: dict[tuple[str, str, str | None], list[tuple[int, int, dict[str, Any]]]] = field(
        default_factory=dict
    )
    """(stage, reason, lang) -> a max-heap of (-sample_key, arrival, row): its root is the row to evict."""
    _arrivals: int = 0

    def add(self, stage: str, reason: str, **row: Any) -> None:
        if self.cap <= 0:
            return
        key = sample_key(row.get("id") or _record_key(row))
        cell = self.cells.setdefault((stage, reason, row.get("lang")), [])
        if len(cell) >= self.cap and key >= -cell[0][0]:
            return  # the cell is full of smaller keys: nothing of this document is kept
        raw = row.pop("snippet", None)
        keep = max(self.snippet_chars, self.text_chars) + _SCRUB_MARGIN
        entry = {
            "stage": stage,
            "reason": reason,
            "raw": raw[:keep] if raw else None,
            "sample_key": key,
            **row,
        }
        self._arrivals += 1
        item = (-key, self._arrivals, entry)
        if len(cell) < self.cap:
            heapq.heappush(cell, item)
        else:
            heapq.heapreplace(cell, item)

    def add_drop(self, stage: str, doc: Document, drop: Drop) -> None:
        """core.stage.run_stages' on_drop: one candidate row per dropped document."""
        m = doc.metadata
        self.add(
            stage,
            drop.reason,
            id=doc.id,
            url=m.get("url"),
            warc_file=m.get("warc_file"),
            warc_offset=m.get("warc_offset"),
            lang=m.get("lang"),
            lang_score=m.get("lang_score"),
            detail=drop.detail,
            metric=drop.metric,
            value=None if drop.value is None else float(drop.value),
            threshold=None if drop.threshold is None else float(drop.threshold),
            op=drop.op,
            snippet=drop.snippet if drop.snippet is not None else (doc.text or doc.html),
        )

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The sample, scrubbed, in a stable order: cells sorted, each by key."""
        out = []
        for cell_key in sorted(self.cells, key=lambda c: (c[0], c[1], c[2] or "")):
            for _, _, entry in sorted(self.cells[cell_key], key=lambda item: -item[0]):
                row = dict(entry)
                raw = row.pop("raw")
                shown = self._scrub(raw) if raw else None
                row["snippet"] = shown[: self.snippet_chars] if shown else None
                row["text"] = shown[: self.text_chars] if shown and self.text_chars else None
                for col in ("detail", "metric"):
                    if isinstance(row.get(col), str):
                        row[col] = row[col][:REJECTED_DETAIL_CHARS]
                out.append(row)
        return out

    def _scrub(self, text: str) -> str:
        if self.scrubber is not None:
            text = self.scrubber(text)[0]
        return text[: max(self.snippet_chars, self.text_chars)]


def _record_key(row: dict[str, Any]) -> str:
    """What a row without a document id (a record skipped while reading) is keyed by: the id its
    record would have had, else its file and detail."""
    if row.get("warc_file") is not None and row.get("warc_offset") is not None:
        return doc_id(row["warc_file"], row["warc_offset"])
    return f"{row.get('warc_file')}:{row.get('url')}:{row.get('detail')}"


class _DocWriter:
    """Streams kept documents into a Parquet file, one row group per ROW_GROUP_DOCS documents."""

    def __init__(self, path, schema: pa.Schema, metadata: dict[bytes, bytes], level: int) -> None:
        self.schema = schema.with_metadata(metadata)
        # The file is ours to close: after a failed write (ENOSPC) pyarrow's own handle can outlive
        # the exception, and a deleted file still open keeps its space taken on a full disk.
        self.file = open(path, "wb")  # noqa: SIM115 (closed by close/abort)
        self.writer = pq.ParquetWriter(self.file, self.schema, compression="zstd", compression_level=level)
        self.buf: list[dict[str, Any]] = []
        self.count = 0

    def add(self, doc: Document) -> None:
        meta = doc.metadata
        self.buf.append(
            {f: doc.id if f == "id" else doc.text if f == "text" else meta.get(f) for f in self.schema.names}
        )
        if len(self.buf) >= ROW_GROUP_DOCS:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.writer.write_table(pa.Table.from_pylist(self.buf, schema=self.schema))
            self.count += len(self.buf)
            self.buf = []

    def close(self) -> None:
        self.flush()
        self.writer.close()
        self.file.close()

    def abort(self) -> None:
        """Close the file after a failure, buffered rows discarded (the runner deletes it)."""
        self.buf = []
        with contextlib.suppress(Exception):  # the failure being handled is the one to report
            self.writer.close()
        self.file.close()


class _PartitionedDocWriter:
    """`output.partition_by`: one _DocWriter per value of the column, each its own file under
    docs/<column>=<value>/, opened at the value's first document (Hive's layout; core/output.py).

    A unit that keeps nothing still writes one empty file (in the null value's folder), as the
    unpartitioned writer does: every finished unit has its schema on disk for the readers after it.
    """

    def __init__(
        self, out: OutputDir, unit: str, column: str, schema: pa.Schema, metadata, level: int
    ) -> None:
        self.out, self.unit, self.column = out, unit, column
        self.schema, self.metadata, self.level = schema, metadata, level
        self.writers: dict[str, _DocWriter] = {}
        self.files: list[Path] = []

    @property
    def count(self) -> int:
        return sum(w.count + len(w.buf) for w in self.writers.values())

    def _writer(self, value: Any) -> _DocWriter:
        folder = partition_folder(self.column, value)
        w = self.writers.get(folder)
        if w is None:
            tmp = self.out.tmp_path(f"docs/{folder}", self.unit, ".parquet")
            w = self.writers[folder] = _DocWriter(tmp, self.schema, self.metadata, self.level)
            self.files.append(tmp)
        return w

    def add(self, doc: Document) -> None:
        self._writer(doc.metadata.get(self.column)).add(doc)

    def close(self) -> None:
        if not self.writers:
            self._writer(None)
        for w in self.writers.values():
            w.close()

    def abort(self) -> None:
        for w in self.writers.values():
            w.abort()


def doc_schema(stages: list[DocumentStage], annotate: bool = False) -> pa.Schema:
    """The document row, plus the columns the configured stages declare (a user annotator's score),
    plus `drop_stage`/`drop_reason` and `evidence` (curation/schema.py EVIDENCE_TYPE) in annotate mode
    (drop mode's row stays exactly as it was)."""
    schema = DOC_SCHEMA
    if annotate:
        schema = (
            schema.append(pa.field("drop_stage", pa.string()))
            .append(pa.field("drop_reason", pa.string()))
            .append(pa.field("evidence", EVIDENCE_TYPE))
        )
    for st in stages:
        for name, typ in st.columns.items():
            if name not in schema.names:
                schema = schema.append(pa.field(name, typ))
    return schema


SPARK_CONF = {"spark.python.daemon.module": "curation.spark_daemon"}
"""What every session the extract job starts is given: curation/spark_daemon.py as the executors' Python
daemon (its workers fork with the default stages built). Named as a string: the daemon imports this
module, and an import back would close a circle."""


def extract_job(cfg: ExtractJobConfig, process, **fields: Any) -> PerFileJob:
    """The runner's job for extract (files, byte ranges, or index-selected records): the same name,
    config record, fingerprint, funnel order and per-unit files table; `fields` add the rest."""
    return PerFileJob(
        name="extract",
        config=cfg.to_dict(),
        fingerprint=cfg.fingerprint(),
        process=process,
        payload=cfg,
        stage_order=tuple(stage_order(cfg)),
        stats_extra=_files_table,
        spark_conf=SPARK_CONF,
        **fields,
    )


def _files_table(done: list[dict[str, Any]]) -> dict[str, Any]:
    return {"files": {s["unit"]: {"input": s["input"], "docs": s["docs_written"]} for s in done}}


def stage_order(cfg: ExtractJobConfig) -> list[str]:
    """The funnel's rows in pipeline order."""
    return [
        "read",
        *(["url_filter"] if cfg.url_filter.enabled else []),
        *(["optout_page"] if cfg.optout.enabled else []),
        *(["prelid"] if cascades(cfg) else []),
        "extract",
        "langid",
        *(f"filter:{n}" for n in cfg.filters.enabled()),
        *(["pii"] if cfg.pii.enabled else []),
        *(stage_name(resolve_stage("annotator", spec, key)) for spec, _, key in cfg.annotator_specs()),
        "write",
    ]


def process_file(uri: str, cfg: ExtractJobConfig, out_root: str) -> dict[str, Any]:
    """`process_unit` without Spark; never raises: status "done", or "failed" with the error."""
    return run_unit(process_unit, (uri, unit_name(uri)), cfg, out_root)


def process_unit(uri: str, unit: str, cfg: ExtractJobConfig, out_root: str) -> dict[str, Any]:
    """Run every stage over one input file, or the byte range its unit name gives
    (curation/warc/ranges.py), and commit its outputs; returns a small summary.

    Raises on an unexpected error (e.g. a download that kept failing): nothing is committed, the
    runner removes the temporary files and reports the unit failed, and a rerun retries it.
    """
    warc_name = uri.rstrip("/").rsplit("/", 1)[-1]
    span = parse_range_unit(unit)  # None: the whole file

    def read(run: UnitRun) -> None:
        try:
            with local_input(uri, retries=cfg.reader.download_retries) as path:
                run.read_file(path, warc_name, span)
        except (FileNotFoundError, PermissionError) as e:
            if is_remote(uri) and isinstance(e, FileNotFoundError):
                raise
            # A local input deleted or unreadable after the driver listed it: a counted skip.
            run.stats.enter("read", 0)
            run.stats.drop("read", "file_unreadable", 0)
            run.rejected.add("read", "file_unreadable", url=None, warc_file=warc_name, detail=str(e)[:300])

    return run_unit_stages(uri, unit, cfg, out_root, read, {"range": list(span)} if span else {})


_FROM_NAME = object()


@dataclass
class UnitRun:
    """What a unit's reader feeds: the plan, the funnel, the writer and the rejected sample.

    `read_file` runs the reader over a local WARC and every page through the plan. A unit made of
    records fetched from elsewhere (curation/index/job.py) reads a local file of those records,
    with `offsets` mapping its positions back to the original file's and the crawl its index gave.
    """

    cfg: ExtractJobConfig
    plan: Plan
    stats: Stats
    writer: _DocWriter
    rejected: _Rejected

    def read_file(
        self,
        path: str,
        warc_name: str,
        span: tuple[int, int] | None = None,
        crawl: Any = _FROM_NAME,
        offsets: Callable[[int], int] | None = None,
    ) -> None:
        hint = crawl_from_name(warc_name) if crawl is _FROM_NAME else crawl
        _run(
            path, warc_name, self.cfg, self.plan, self.stats, self.writer, self.rejected, span, hint, offsets
        )


def run_unit_stages(
    uri: str,
    unit: str,
    cfg: ExtractJobConfig,
    out_root: str,
    read: Callable[[UnitRun], None],
    summary_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The unit frame every extract unit shares: stats rows, writers, `read(run)`, then the commit.

    `read` feeds the unit's records through `run.read_file`; whatever it raises fails the unit
    with nothing committed (the runner removes the temporary files).
    """
    out = OutputDir(out_root)
    started = time.time()
    stats = Stats()
    for name in stage_order(cfg):  # every row present, in order, even when no document reaches it
        stats.stage(name)
    meta = {
        b"refinery": json.dumps(
            {"job": "extract", "config_fingerprint": cfg.fingerprint(), "input": uri, "unit": unit}
        ).encode()
    }
    plan = plan_for(cfg)
    stages = plan.stages()
    for st in stages:
        st.start_file()
    rej_tmp = out.tmp_path("rejected", unit, ".parquet")
    annotate = cfg.filters.mode == "annotate"
    schema = doc_schema(stages, annotate)
    writer: _DocWriter | _PartitionedDocWriter
    if cfg.output.partition_by:
        writer = _PartitionedDocWriter(
            out, unit, cfg.output.partition_by, schema, meta, cfg.output.compression_level
        )
    else:
        docs_tmp = out.tmp_path("docs", unit, ".parquet")
        writer = _DocWriter(docs_tmp, schema, meta, cfg.output.compression_level)
    scrubber = next((st.scrubber for st in stages if isinstance(st, PiiStage)), None)
    rejected = _Rejected(
        cfg.output.rejected_per_reason, cfg.output.snippet_chars, scrubber, cfg.output.rejected_text_chars
    )
    try:
        read(UnitRun(cfg, plan, stats, writer, rejected))
        writer.close()
    except BaseException:
        writer.abort()
        raise
    with open(rej_tmp, "wb") as f:  # closed even when the write fails (see _DocWriter)
        pq.write_table(
            pa.Table.from_pylist(rejected.rows, schema=REJECTED_SCHEMA.with_metadata(meta)),
            f,
            compression="zstd",
        )
    summary = {
        "input": uri,
        "unit": unit,
        "config_fingerprint": cfg.fingerprint(),
        "docs_written": writer.count,
        **(summary_extra or {}),
        "started": started,
        "seconds": round(time.time() - started, 3),
        **stats.to_dict(),
    }
    docs_files = writer.files if isinstance(writer, _PartitionedDocWriter) else [docs_tmp]
    out.commit_unit(unit, [*docs_files, rej_tmp], summary)
    return {"docs": writer.count}


def _run(
    path,
    warc_name,
    cfg,
    plan: Plan,
    stats: Stats,
    writer: _DocWriter,
    rejected: _Rejected,
    span=None,
    crawl_hint: str | None = None,
    offsets: Callable[[int], int] | None = None,
) -> None:
    """Read every record of one file (or of its range `span`); each page goes through the plan,
    kept ones to the writer. `offsets` maps the file's offsets to those its documents record."""
    start, end = span or (0, None)
    records = iter_records(path, cfg.reader, crawl_hint, start, end)

    def on_drop(stage: str, doc: Document, drop: Drop) -> None:
        # the funnel per language: a page dropped before language ID (URL filter, extraction) has none
        lang = doc.metadata.get("lang")
        if lang is not None:
            stats.counters[lang_counter(lang, "drop", drop.reason)] += 1
        rejected.add_drop(stage, doc, drop)

    items = 0
    while True:
        with stats.timed("read"):
            item = next(records, None)
        if item is None:
            break
        items += 1
        if offsets is not None:
            item.offset = offsets(item.offset)
        if isinstance(item, Skip):
            stats.enter("read", item.nbytes)
            stats.drop("read", item.reason, item.nbytes)
            rejected.add(
                "read",
                item.reason,
                url=item.url,
                warc_file=warc_name,
                warc_offset=item.offset,
                detail=item.detail,
            )
            continue
        page: Page = item
        stats.enter("read", len(page.payload))
        stats.keep("read", len(page.payload))
        annotate = cfg.filters.mode == "annotate"
        doc = run_plan(_document(page, warc_name), plan, stats, on_drop, annotate)
        if doc is None:
            continue
        if doc.metadata.get("drop_stage") is not None:
            # annotate mode: written, but the funnel's `write` row counts what drop mode writes
            writer.add(doc)
            stats.counters["annotated_written"] += 1
            continue
        lang = doc.metadata.get("lang")
        if lang is not None:
            stats.counters[lang_counter(lang, "kept")] += 1
            stats.counters[lang_counter(lang, "chars")] += len(doc.text or "")
        with stats.timed("write"):
            nbytes = utf8_len(doc.text)
            stats.enter("write", nbytes)
            writer.add(doc)
            stats.keep("write", nbytes)
    if not items and start == 0:  # (a later range starts at a record: never empty)
        # A 0-byte file or one without a single record (a truncated upload, an empty gzip member)
        # would otherwise be a unit with no row anywhere in the funnel: it is counted as a drop.
        stats.enter("read", 0)
        stats.drop("read", "empty_file", 0)
        detail = f"{os.path.getsize(path)} bytes, no WARC record"
        rejected.add("read", "empty_file", url=None, warc_file=warc_name, detail=detail)


LANG_COUNTER = "lang_funnel"
"""stats.json counters of the funnel per language: `lang_funnel|<code>|kept` (documents written that
every stage passed), `lang_funnel|<code>|chars` (their characters), `lang_funnel|<code>|drop|<reason>`
(documents dropped after language ID). `|` because codes never hold one and reasons hold `:`."""


def lang_counter(lang: str, *parts: str) -> str:
    return "|".join((LANG_COUNTER, lang, *parts))


def _document(page: Page, warc_name: str) -> Document:
    """A page as the first stage sees it: raw payload, provenance columns, no text yet."""
    return Document(
        id=doc_id(warc_name, page.offset),
        text=None,
        payload=page.payload,
        metadata={
            "url": page.url,
            "warc_file": warc_name,
            "warc_offset": page.offset,
            "warc_record_id": page.record_id,
            "crawl": page.crawl,
            "fetch_time": page.fetch_time,
            "source_format": "warc" if page.kind == "html" else "wet",
            "content_type": page.content_type,
            "optout_headers": page.optout_headers,
        },
    )
