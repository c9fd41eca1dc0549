"""Main-text extraction with trafilatura, bounded in size and time.

trafilatura's `extract()` can run for minutes on pathological pages and offers no timeout of its
own outside its CLI (trafilatura #704). datatrove runs it in a sandbox process and pays a pipe
round trip per page; here a POSIX interval timer (SIGALRM) interrupts the call in-process, which
costs nothing when it does not fire. Spark runs Python tasks on the worker's main thread, where
signals are delivered; elsewhere (a thread) the limit cannot be enforced and a warning says so.

The title is read from the same parsed tree before trafilatura prunes it (trafilatura's own
title heuristic: og:title, <title>, <h1>), so the page is parsed once; full metadata extraction
(dates, authors) would cost ~30% more per page and nothing downstream uses it.

trafilatura's `deduplicate` keeps a cache of text segments seen so far; by default that cache is a
process-wide global, so output would depend on which pages a Spark worker happened to process
before. Here the cache belongs to the extractor and is reset at the start of every WARC file
(`start_file()`), so a file's output depends on that file alone: reruns and resumes are exact.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from core.stage import Document, DocumentStage, Drop, register
from curation.charset import decode_html
from curation.config import ExtractConfig

log = logging.getLogger(__name__)


class ExtractTimeout(Exception):
    pass


@dataclass(slots=True)
class Extracted:
    text: str | None
    title: str | None
    reason: str | None  # None when text was extracted, else the drop reason
    detail: str = ""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ExtractTimeout in the block after `seconds` (main thread only; else no limit)."""
    if threading.current_thread() is not threading.main_thread():
        _warn_no_timer()
        yield
        return

    def _fire(signum, frame):
        raise ExtractTimeout()

    previous = signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_warned = False


def _warn_no_timer() -> None:
    global _warned
    if not _warned:
        log.warning("extraction runs outside the main thread: the per-page timeout is not enforced")
        _warned = True


class Extractor(DocumentStage):
    """HTML -> (text, title) with trafilatura; drop reasons extract_oversize/timeout/error/empty."""

    name = "extract"

    def __init__(self, cfg: ExtractConfig) -> None:
        self.cfg = cfg
        self._dedup_cache = None
        # trafilatura logs a warning per page it discards; the funnel counts those as
        # extract_empty, so the per-page log lines are noise in a job's output.
        logging.getLogger("trafilatura").setLevel(logging.ERROR)
        self.start_file()

    def start_file(self) -> None:
        """Forget the segments seen so far (call once per input file, before its first page)."""
        if self.cfg.deduplicate:
            from trafilatura.deduplication import LRU_SIZE, LRUCache

            self._dedup_cache = LRUCache(maxsize=LRU_SIZE)

    def __call__(self, html: str, url: str | None = None) -> Extracted:
        cfg = self.cfg
        if len(html) > cfg.max_html_chars:
            return Extracted(None, None, "extract_oversize", f"{len(html)} chars")
        try:
            with time_limit(cfg.timeout_s):
                text, title = self._extract(html, url)
        except ExtractTimeout:
            return Extracted(None, None, "extract_timeout", f"> {cfg.timeout_s} s")
        except RecursionError:
            return Extracted(None, None, "extract_error", "RecursionError (deeply nested HTML)")
        except Exception as e:  # trafilatura and lxml raise many types on broken markup
            return Extracted(None, None, "extract_error", f"{type(e).__name__}: {str(e)[:200]}")
        if text is None or len(text.strip()) < cfg.min_text_chars:
            return Extracted(None, title, "extract_empty")
        return Extracted(text, title, None)

    def process(self, doc: Document) -> Document | Drop:
        ex = self(doc.html or "", doc.metadata.get("url"))
        if ex.reason is not None:
            return Drop(ex.reason, ex.detail)
        doc.text = ex.text
        doc.metadata["title"] = ex.title
        return doc

    def _extract(self, html: str, url: str | None) -> tuple[str | None, str | None]:
        from trafilatura import bare_extraction
        from trafilatura.metadata import extract_title
        from trafilatura.utils import load_html

        tree = load_html(html)
        if tree is None:
            return None, None
        title = extract_title(tree)
        doc = bare_extraction(
            tree,
            url=url,
            favor_precision=self.cfg.favor_precision,
            include_comments=self.cfg.include_comments,
            include_tables=self.cfg.include_tables,
            deduplicate=self._dedup_cache if self.cfg.deduplicate else False,
            with_metadata=False,
        )
        if doc is None:
            return None, title
        return doc.text, title


@register("extractor", "trafilatura")
class Trafilatura(Extractor):
    """The registry entry: `extract: {class: trafilatura, ...}` takes ExtractConfig's keys."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(ExtractConfig(**kwargs))


class ExtractStep(DocumentStage):
    """The `extract` funnel row: raw payload -> text, whatever extractor is configured.

    HTML is decoded here (charset from the HTTP header, the page's meta tag or detection, counted
    per source) and handed to the extractor as `doc.html`; a WET conversion record is already text
    and passes through. The extractor is trafilatura unless the config names another one.
    """

    name = "extract"

    def __init__(self, extractor: DocumentStage) -> None:
        self.extractor = extractor

    def start_file(self) -> None:
        self.extractor.start_file()

    def warm_up(self) -> None:
        self.extractor.warm_up()

    def process(self, doc: Document) -> Document | Drop:
        payload = doc.payload or b""
        if doc.metadata.get("source_format") == "wet":
            doc.text = payload.decode("utf-8", "replace")
            doc.metadata["title"] = None
            self.count("wet_passthrough")
        else:
            html, _codec, source = decode_html(payload, doc.metadata.get("content_type"))
            self.count(f"charset_{source}")
            doc.html = html
            result = self.extractor.process(doc)
            for k, n in (self.extractor.take_counters() or {}).items():
                self.count(k, n)
            if isinstance(result, Drop):
                return result  # the rejected sample shows the HTML (the document has no text)
            if result.text is None:
                return Drop("extract_empty", f"{type(self.extractor).__name__} returned no text")
            doc = result
        doc.payload = doc.html = None  # the page is not needed past this point
        return doc
