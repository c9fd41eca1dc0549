"""One input file through every curation stage: read -> extract -> langid -> filters -> pii -> quality -> write.

This is the whole per-task logic of the `extract` job, with no Spark in it: `process_file` is
what a Spark task calls for its one WARC, and what the unit tests call directly. It never raises
for bad data: every record or document that does not reach the output is counted under a stage
and a reason, and a capped sample of them is written to `rejected/`.

Stages (the funnel rows, in order):
    read                 WARC records -> pages (response/200/HTML, or WET conversions)
    extract              HTML -> main text + title (WET text passes through, counted)
    langid               lid.176 -> lang, lang_score; keep-list and threshold
    filter:<name>        each datatrove filter block, in FineWeb's order
    pii                  curation/pii.py: typed placeholders, per-type counts -> `pii_counts`
                         (on by default; `pii.enabled: false` removes the row)
    quality              classifiers/: P(high quality) -> `quality` (only with `quality.model`)
    write                documents written to docs/

PII runs after the filters so that only kept documents pay for it, and so that the filters judge
the text as it was written (a placeholder is not a word). Quality runs after PII: it scores the
text exactly as docs/ stores it, so `python -m classifiers score` over the output gives the same
numbers. Neither drops documents for what they find; a document whose scrubbing raises is
dropped (`pii_error`: never written unscrubbed), one whose scoring raises keeps a null score
(counter `quality_error`), both logged.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from core.output import OutputDir, unit_name
from core.stats import Stats
from curation.charset import decode_html
from curation.config import ExtractJobConfig
from curation.extract import Extractor
from curation.filters import QualityFilters
from curation.inputs import is_remote, local_copy
from curation.langid import LanguageIdentifier
from curation.pii import PiiScrubber
from curation.schema import DOC_SCHEMA, PII_COUNT_FIELDS, REJECTED_SCHEMA, doc_id
from curation.warc import Page, Skip, crawl_from_name, iter_records

log = logging.getLogger(__name__)

# Documents buffered before a Parquet row group is written: bounds task memory on big WARCs.
ROW_GROUP_DOCS = 2000


@dataclass
class Stages:
    """The stage objects, built once per worker process and reused across files."""

    extractor: Extractor
    langid: LanguageIdentifier
    filters: QualityFilters
    pii: PiiScrubber | None = None
    quality: Any = None
    """classifiers.model.QualityModel, or None; imported only when configured (no cycle, no fastText
    model load for users who do not score)."""

    @classmethod
    def build(cls, cfg: ExtractJobConfig) -> Stages:
        st = cls(Extractor(cfg.extract), LanguageIdentifier(cfg.langid), QualityFilters(cfg.filters))
        if cfg.pii.enabled:
            st.pii = PiiScrubber(cfg.pii.scrub_config())
        if cfg.quality.model is not None:
            from classifiers.model import load_model

            st.quality = load_model(cfg.quality.model)
        # Warm-up: load the LID model and the filters' lazy resources (spaCy tokenizer, datatrove
        # imports) once per process, so per-stage seconds measure documents, not start-up.
        warm = "This is a short warm-up text. It loads the models once per worker process."
        st.langid(warm)
        st.filters(warm)
        if st.quality is not None:
            st.quality.predict_one(warm)
        return st


_STAGES: dict[str, Stages] = {}


def stages_for(cfg: ExtractJobConfig) -> Stages:
    key = cfg.fingerprint()
    st = _STAGES.get(key)
    if st is None:
        st = _STAGES[key] = Stages.build(cfg)
    return st


@dataclass
class _Rejected:
    cap: int
    snippet_chars: int
    scrubber: PiiScrubber | None = None
    """When the PII stage is on, snippets of dropped documents are scrubbed too: rejected/ is
    for inspection and must not be the one place that keeps the raw personal data."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    per_reason: dict[str, int] = field(default_factory=dict)

    def add(self, stage: str, reason: str, **row: Any) -> None:
        n = self.per_reason.get(reason, 0)
        if n >= self.cap:
            return
        self.per_reason[reason] = n + 1
        snippet = row.pop("snippet", None)
        self.rows.append(
            {
                "stage": stage,
                "reason": reason,
                "snippet": self._snippet(snippet) if snippet else None,
                **row,
            }
        )

    def _snippet(self, text: str) -> str:
        # Scrub a little more than is kept, so a match cut by the limit is still found whole.
        text = text[: self.snippet_chars + 256]
        if self.scrubber is not None:
            text = self.scrubber(text)[0]
        return text[: self.snippet_chars]


class _DocWriter:
    """Streams kept documents into a Parquet file, one row group per ROW_GROUP_DOCS documents."""

    def __init__(self, path, metadata: dict[bytes, bytes], level: int) -> None:
        self.schema = DOC_SCHEMA.with_metadata(metadata)
        self.writer = pq.ParquetWriter(path, self.schema, compression="zstd", compression_level=level)
        self.buf: list[dict[str, Any]] = []
        self.count = 0

    def add(self, row: dict[str, Any]) -> None:
        self.buf.append(row)
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


def stage_order(cfg: ExtractJobConfig) -> list[str]:
    """The funnel's rows in pipeline order."""
    return [
        "read",
        "extract",
        "langid",
        *(f"filter:{n}" for n in cfg.filters.enabled()),
        *(["pii"] if cfg.pii.enabled else []),
        *(["quality"] if cfg.quality.model is not None else []),
        "write",
    ]


def process_file(uri: str, cfg: ExtractJobConfig, out_root: str) -> dict[str, Any]:
    """Run every stage over one input file and commit its outputs; returns a small summary.

    status is "done" (outputs committed, marker written) or "failed" (nothing committed: an
    unexpected error, e.g. a download that kept failing; a rerun retries the file).
    """
    out = OutputDir(out_root)
    unit = unit_name(uri)
    warc_name = uri.rstrip("/").rsplit("/", 1)[-1]
    started = time.time()
    stats = Stats()
    for name in stage_order(cfg):  # every row present, in order, even when no document reaches it
        stats.stage(name)
    meta = {
        b"refinery": json.dumps(
            {"job": "extract", "config_fingerprint": cfg.fingerprint(), "input": uri, "unit": unit}
        ).encode()
    }
    docs_tmp = out.tmp_path("docs", unit, ".parquet")
    rej_tmp = out.tmp_path("rejected", unit, ".parquet")
    try:
        stages = stages_for(cfg)
        stages.extractor.start_file()
        writer = _DocWriter(docs_tmp, meta, cfg.output.compression_level)
        rejected = _Rejected(cfg.output.rejected_per_reason, cfg.output.snippet_chars, stages.pii)
        try:
            with local_copy(uri, retries=cfg.reader.download_retries) as path:
                _run(path, warc_name, cfg, stages, stats, writer, rejected)
        except FileNotFoundError as e:
            if is_remote(uri):
                raise
            # A local input deleted or unreadable after the driver listed it: a counted skip.
            stats.enter("read", 0)
            stats.drop("read", "file_unreadable", 0)
            rejected.add("read", "file_unreadable", url=None, warc_file=warc_name, detail=str(e)[:300])
        except PermissionError as e:
            stats.enter("read", 0)
            stats.drop("read", "file_unreadable", 0)
            rejected.add("read", "file_unreadable", url=None, warc_file=warc_name, detail=str(e)[:300])
        writer.close()
        pq.write_table(
            pa.Table.from_pylist(rejected.rows, schema=REJECTED_SCHEMA.with_metadata(meta)),
            rej_tmp,
            compression="zstd",
        )
        summary = {
            "input": uri,
            "unit": unit,
            "config_fingerprint": cfg.fingerprint(),
            "docs_written": writer.count,
            "started": started,
            "seconds": round(time.time() - started, 3),
            **stats.to_dict(),
        }
        out.commit_unit(unit, {"docs": docs_tmp, "rejected": rej_tmp}, summary)
        return {"unit": unit, "input": uri, "status": "done", "docs": writer.count}
    except Exception as e:
        for p in (docs_tmp, rej_tmp):
            p.unlink(missing_ok=True)
        log.error("input %s failed: %s", uri, e)
        return {
            "unit": unit,
            "input": uri,
            "status": "failed",
            "error": f"{type(e).__name__}: {e}",
            "traceback": traceback.format_exc(limit=20),
        }


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def _run(path, warc_name, cfg, stages: Stages, stats: Stats, writer: _DocWriter, rejected: _Rejected) -> None:
    records = iter_records(path, cfg.reader, crawl_hint=crawl_from_name(warc_name))
    filter_names = [f"filter:{n}" for n in stages.filters.names]
    while True:
        with stats.timed("read"):
            item = next(records, None)
        if item is None:
            break
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
        nbytes = len(page.payload)
        stats.enter("read", nbytes)
        stats.keep("read", nbytes)
        did = doc_id(warc_name, page.offset)
        base = {"id": did, "url": page.url, "warc_file": warc_name, "warc_offset": page.offset}

        # extract
        with stats.timed("extract"):
            stats.enter("extract", nbytes)
            if page.kind == "html":
                html, _codec, source = decode_html(page.payload, page.content_type)
                stats.counters[f"charset_{source}"] += 1
                ex = stages.extractor(html, page.url)
                if ex.reason is not None:
                    stats.drop("extract", ex.reason, nbytes)
                    rejected.add("extract", ex.reason, **base, detail=ex.detail, snippet=html)
                    continue
                text, title = ex.text, ex.title
            else:  # WET conversion: the text is already extracted
                text, title = page.payload.decode("utf-8", "replace"), None
                stats.counters["wet_passthrough"] += 1
            tbytes = _utf8_len(text)
            stats.keep("extract", tbytes)

        # langid
        with stats.timed("langid"):
            stats.enter("langid", tbytes)
            try:
                lr = stages.langid(text)
            except Exception as e:  # a model error on one text must not end the file
                stats.drop("langid", "langid_error", tbytes)
                rejected.add("langid", "langid_error", **base, detail=str(e)[:300], snippet=text)
                continue
            # Every identified language is counted, kept or not: the report's language chart.
            stats.counters[f"lang:{lr.lang}"] += 1
            if lr.reason is not None:
                stats.drop("langid", lr.reason, tbytes)
                rejected.add(
                    "langid", lr.reason, **base, lang=lr.lang, lang_score=lr.score, snippet=text, detail=""
                )
                continue
            stats.keep("langid", tbytes)

        # datatrove filters, each its own funnel row
        dropped = False
        for stage_name, (name, block) in zip(filter_names, stages.filters.blocks):
            with stats.timed(stage_name):
                stats.enter(stage_name, tbytes)
                try:
                    reason = stages.filters.run_one(name, block, text, did)
                except Exception as e:
                    reason = f"{name}:filter_error"
                    log.warning("filter %s failed on %s: %s", name, did, e)
                if reason is not None:
                    stats.drop(stage_name, reason, tbytes)
                    rejected.add(
                        stage_name, reason, **base, lang=lr.lang, lang_score=lr.score, snippet=text, detail=""
                    )
                    dropped = True
                    break
                stats.keep(stage_name, tbytes)
        if dropped:
            continue

        # pii: replace, count per type (fields of types not scanned stay null)
        pii_counts = None
        if stages.pii is not None:
            with stats.timed("pii"):
                stats.enter("pii", tbytes)
                try:
                    scrubbed, counts = stages.pii(text)
                except Exception as e:  # never write a document we could not scrub
                    log.warning("pii scrub failed on %s: %s", did, e)
                    stats.drop("pii", "pii_error", tbytes)
                    # No snippet: the text is exactly what could not be scrubbed.
                    rejected.add(
                        "pii", "pii_error", **base, lang=lr.lang, lang_score=lr.score, detail=str(e)[:300]
                    )
                    continue
                pii_counts = {t: counts.get(t) for t in PII_COUNT_FIELDS}
                found = 0
                for t, n in counts.items():
                    if n:
                        stats.counters[f"pii_{t}"] += n
                        stats.counters[f"pii_docs_{t}"] += 1
                        found += n
                if found:
                    stats.counters["pii_docs"] += 1
                text = scrubbed
                tbytes = _utf8_len(text)
                stats.keep("pii", tbytes)

        # quality: a score, never a drop (thresholds live in the mixture recipe)
        quality = None
        if stages.quality is not None:
            with stats.timed("quality"):
                stats.enter("quality", tbytes)
                try:
                    quality = stages.quality.predict_one(text)
                except Exception as e:
                    log.warning("quality scoring failed on %s: %s", did, e)
                    stats.counters["quality_error"] += 1
                stats.keep("quality", tbytes)

        with stats.timed("write"):
            stats.enter("write", tbytes)
            writer.add(
                {
                    **base,
                    "warc_record_id": page.record_id,
                    "crawl": page.crawl,
                    "fetch_time": page.fetch_time,
                    "source_format": "warc" if page.kind == "html" else "wet",
                    "text": text,
                    "title": title,
                    "lang": lr.lang,
                    "lang_score": lr.score,
                    "pii_counts": pii_counts,
                    "quality": quality,
                }
            )
            stats.keep("write", tbytes)
