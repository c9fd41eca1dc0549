"""Main-text extraction with trafilatura (or resiliparse), bounded in size and time.

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

The cascade's pre-check (curation/filters/langid.py, `PreLanguageFilter`) reads `page_text`: every
text node of the page as libxml2 parses it for trafilatura (script, style, noscript and template
removed), in C from parse to string, linear in the page whatever its nesting: 1.7 ms per page on the
shared WARCs, against 5.3 ms for resiliparse's main content behind the depth scan it needs, and the
same pages dropped (the removed bench/curation/cascade_agreement.py at 2d562b9; docs/extract.md).

resiliparse (`Resiliparse`, `main_content`) is the fast alternative extractor, the second one of
`extract.extractors`. Its main-content pass is one C++ call that no signal interrupts, and it is
quadratic in the depth of the tree (23 s for one 440 KB page of 40,000 nested <div>s). So before it runs, the page is held to
trafilatura's size cap (`max_html_chars`) and cut before its first element deeper than
`max_tag_depth` (curation/extract/html_depth.py: a linear scan, no parser); the cut is what libxml2 already
does to trafilatura's input at depth 256, so both extractors see the same page, and the cost of
the call is bounded by the page's size times the cap (measured: < 0.2 s for a 2 MB hostile page).
A cut page is counted (`html_too_deep`).
trafilatura itself needs no cut: libxml2 stops at depth 256 and its cost stays linear (tested).
"""

from __future__ import annotations

import abc
import contextlib
import functools
import logging
import re
import signal
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from core.stage import Document, DocumentStage, Drop
from curation.config import ExtractConfig
from curation.extract.charset import decode_html
from curation.extract.html_depth import MAX_TAG_DEPTH, bound_depth

log = logging.getLogger(__name__)


class ExtractTimeout(Exception):
    pass


@dataclass(slots=True)
class Extracted:
    text: str | None
    title: str | None
    reason: str | None  # None when text was extracted, else the drop reason
    detail: str = ""
    metric: str | None = None
    """A size rule's evidence, as core.stage.Drop's: `html_chars` > max_html_chars (extract_oversize),
    `text_chars` < min_text_chars (extract_empty)."""
    value: float | None = None
    threshold: float | None = None
    op: str | None = None


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


# Numeric character references (`&#x1;`, `&#65535;`, `&#1`: HTML accepts them without the `;`). A
# reference of a million digits is one out-of-range reference: `_as_browser` never calls int() on
# more than 8 significant digits (Python refuses an int() of over 4,300).
_NUMERIC_REF = re.compile(r"&#(?:[xX]([0-9A-Fa-f]+)|([0-9]+));?")

# HTML's numeric-reference table for 0x80-0x9F (WHATWG HTML, "numeric character reference end
# state"): browsers read these as windows-1252, the charset pages that write them meant
_C1_AS_WINDOWS_1252 = {
    0x80: "\u20ac", 0x82: "\u201a", 0x83: "\u0192", 0x84: "\u201e", 0x85: "\u2026", 0x86: "\u2020",
    0x87: "\u2021", 0x88: "\u02c6", 0x89: "\u2030", 0x8A: "\u0160", 0x8B: "\u2039", 0x8C: "\u0152",
    0x8E: "\u017d", 0x91: "\u2018", 0x92: "\u2019", 0x93: "\u201c", 0x94: "\u201d", 0x95: "\u2022",
    0x96: "\u2013", 0x97: "\u2014", 0x98: "\u02dc", 0x99: "\u2122", 0x9A: "\u0161", 0x9B: "\u203a",
    0x9C: "\u0153", 0x9E: "\u017e", 0x9F: "\u0178",
}  # fmt: skip


def _xml_char(cp: int) -> bool:
    """XML 1.0's Char production: what libxml2 (and so trafilatura's tree) can hold."""
    return (
        cp in (0x9, 0xA, 0xD) or 0x20 <= cp <= 0xD7FF or 0xE000 <= cp <= 0xFFFD or 0x10000 <= cp <= 0x10FFFF
    )


def _as_browser(m: re.Match[str]) -> str:
    hexd, dec = m.group(1), m.group(2)
    digits = (hexd or dec).lstrip("0")
    cp = int(digits or "0", 16 if hexd else 10) if len(digits) <= 8 else 0x110000
    if cp == 0 or cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
        return "\ufffd"  # what a browser shows for NUL, surrogates and code points past Unicode
    if 0x80 <= cp <= 0x9F:
        return _C1_AS_WINDOWS_1252.get(cp, "")  # the five unmapped ones are controls: nothing shown
    if not _xml_char(cp):
        # C0 controls but tab/LF/CR, U+FFFE, U+FFFF: a browser keeps the character (a parse error)
        # and shows nothing; trafilatura removes every non-printable from its text anyway
        return ""
    return m.group(0)  # a valid reference: lxml reads it as it always did


def xml_safe_references(html: str) -> str:
    """`html` with each numeric character reference to a character XML cannot hold replaced as a
    browser reads it (U+FFFD, windows-1252 for 0x80-0x9F, or nothing), every other one unchanged.

    Why (issue 54): lxml reads `&#x1;` or `&#xFFFE;` into the tree, and trafilatura then returned no
    text for the whole page (counted `extract_empty`): one stray reference lost a page. Raw control
    characters are no such trouble (libxml2 drops them as it decodes); references are expanded later,
    so they are mapped here, before the parser sees them. A page without `&#` is returned as is."""
    if "&#" not in html:
        return html
    return _NUMERIC_REF.sub(_as_browser, html)


def _oversize(html: str, limit: int) -> Extracted:
    return Extracted(
        None, None, "extract_oversize", f"{len(html)} chars", "html_chars", len(html), limit, ">"
    )


def _empty(text: str | None, title: str | None, minimum: int) -> Extracted:
    n = len(text.strip()) if text is not None else 0
    return Extracted(None, title, "extract_empty", "", "text_chars", n, minimum, "<")


class HtmlExtractor(DocumentStage, abc.ABC):
    """An extractor as a document stage: `doc.html` -> text and title through `self(html, url)`,
    or the drop its `Extracted` names. A subclass that lacks `__call__` fails when it is made."""

    name = "extract"

    @abc.abstractmethod
    def __call__(self, html: str, url: str | None = None) -> Extracted: ...

    def process(self, doc: Document) -> Document | Drop:
        ex = self(doc.html or "", doc.metadata.get("url"))
        if ex.reason is not None:
            return Drop(
                ex.reason, ex.detail, metric=ex.metric, value=ex.value, threshold=ex.threshold, op=ex.op
            )
        doc.text = ex.text
        doc.metadata["title"] = ex.title
        return doc


JOINERS = frozenset("\u200c\u200d")
"""ZERO WIDTH NON-JOINER and ZERO WIDTH JOINER. They are format characters (Unicode category Cf), so
`str.isprintable()` is False for them, and trafilatura (utils.return_printables_and_spaces, applied to
every line it outputs) deletes them. They are spelling, not control: Persian's half-space (کتاب‌ها,
"books", becomes the misspelt کتابها), Kurdish and Urdu likewise, the conjunct forms of Sinhala and
Malayalam, emoji sequences (a family emoji falls apart into its members). FineWeb-2, built on
trafilatura through datatrove, lost them too. Both are valid XML characters, so keeping them cannot
make lxml refuse a text (the reason trafilatura removes non-printables)."""


@functools.lru_cache(maxsize=2**14)  # as trafilatura's own: one entry per distinct character
def _printables_spaces_and_joiners(char: str) -> str:
    return char if char.isprintable() or char.isspace() or char in JOINERS else ""


_TRAFILATURA_PRINTABLES = None


def keep_joiners(on: bool) -> None:
    """Make trafilatura keep ZWNJ and ZWJ (`JOINERS`) in this process, or restore its own filter.

    trafilatura's `remove_control_characters` looks `return_printables_and_spaces` up in its module at
    each call, so replacing that one name changes every caller (line_processing, the baseline); the
    line cache is cleared on a switch so that no line filtered the other way is reused."""
    global _TRAFILATURA_PRINTABLES
    import trafilatura.utils as tu

    if _TRAFILATURA_PRINTABLES is None:
        _TRAFILATURA_PRINTABLES = tu.return_printables_and_spaces
    want = _printables_spaces_and_joiners if on else _TRAFILATURA_PRINTABLES
    if tu.return_printables_and_spaces is not want:
        tu.return_printables_and_spaces = want
        tu.line_processing.cache_clear()


class Extractor(HtmlExtractor):
    """HTML -> (text, title) with trafilatura; drop reasons extract_oversize/timeout/error/empty."""

    name = "extract"
    label = "trafilatura"
    section_config = True  # built from the `extract` section (curation.config.uses_section)

    def __init__(self, cfg: ExtractConfig) -> None:
        self.cfg = cfg
        self._dedup_cache = None
        # trafilatura logs a warning per page it discards; the funnel counts those as
        # extract_empty, so the per-page log lines are noise in a job's output.
        logging.getLogger("trafilatura").setLevel(logging.ERROR)
        self.start_file()

    def warm_up(self) -> None:
        """Import what trafilatura imports lazily (its readability and jusText fallbacks: ~0.15 s)
        on two small pages, so a worker's first real page does not pay for it; then forget them."""
        self(
            "<html><body><article><p>"
            + "Warm-up text for the extractor. " * 20
            + "</p></article></body></html>"
        )
        self("<html><body><div>" + "Short. " * 3 + "</div><p>" + "A line. " * 30 + "</p></body></html>")
        self.start_file()

    def start_file(self) -> None:
        """Forget the segments seen so far (call once per input file, before its first page)."""
        if self.cfg.deduplicate:
            from trafilatura.deduplication import LRU_SIZE, LRUCache

            self._dedup_cache = LRUCache(maxsize=LRU_SIZE)

    def __call__(self, html: str, url: str | None = None) -> Extracted:
        cfg = self.cfg
        if len(html) > cfg.max_html_chars:
            return _oversize(html, cfg.max_html_chars)
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
            return _empty(text, title, cfg.min_text_chars)
        return Extracted(text, title, None)

    def _extract(self, html: str, url: str | None) -> tuple[str | None, str | None]:
        from trafilatura import bare_extraction
        from trafilatura.metadata import extract_title
        from trafilatura.utils import load_html

        keep_joiners(self.cfg.keep_joiners)  # a no-op unless another config ran in this process
        tree = load_html(xml_safe_references(html))
        if tree is None:
            return None, None
        title = extract_title(tree)
        doc = bare_extraction(
            tree,
            url=url,
            fast=self.cfg.fast,
            favor_precision=self.cfg.favor_precision,
            include_comments=self.cfg.include_comments,
            include_tables=self.cfg.include_tables,
            deduplicate=self._dedup_cache if self.cfg.deduplicate else False,
            with_metadata=False,
        )
        if doc is None:
            return None, title
        # what trafilatura.extract() returns, the text datatrove (FineWeb, FineWeb-2) keeps: its txt
        # output appends the comments (an empty body without include_comments), strips the whole text
        # and normalizes it to NFC; bare_extraction's python output does none of the three
        text = doc.text if not (self.cfg.include_comments and doc.comments) else f"{doc.text}\n{doc.comments}"
        return unicodedata.normalize("NFC", text.strip()), title


class Resiliparse(HtmlExtractor):
    """HTML -> (text, title) with resiliparse's main-content heuristics (19x faster than trafilatura).

    The same size cap and minimum length as trafilatura, with the same drop reasons. No timeout:
    resiliparse is one C++ call that a Python signal handler cannot interrupt; the size cap and the
    depth cut (module doc) bound its cost instead. No cross-page state, so `start_file` has nothing
    to reset.
    """

    name = "extract"
    label = "resiliparse"
    section_config = True

    def __init__(self, cfg: ExtractConfig) -> None:
        self.cfg = cfg

    def __call__(self, html: str, url: str | None = None) -> Extracted:
        if len(html) > self.cfg.max_html_chars:
            return _oversize(html, self.cfg.max_html_chars)
        html, depth = bound_depth(html, self.cfg.max_tag_depth)
        if depth.cut is not None:
            self.count("html_too_deep")
        try:
            text, title = main_content(html, max_tag_depth=None)
        except Exception as e:  # resiliparse raises on markup its parser refuses
            return Extracted(None, None, "extract_error", f"{type(e).__name__}: {str(e)[:200]}")
        if len(text.strip()) < self.cfg.min_text_chars:
            return _empty(text, title, self.cfg.min_text_chars)
        return Extracted(text, title, None)


def main_content(html: str, max_tag_depth: int | None = MAX_TAG_DEPTH) -> tuple[str, str | None]:
    """resiliparse's main-content plain text (paragraphs as lines) and the page's <title>, of the
    page cut before its first element deeper than `max_tag_depth` (None: the caller has cut it)."""
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    if max_tag_depth is not None:
        html = bound_depth(html, max_tag_depth)[0]
    tree = HTMLTree.parse(html)
    title = (tree.title or "").strip() or None
    return extract_plain_text(tree, main_content=True), title


def decoded_html(doc: Document, stage: DocumentStage) -> str:
    """The page's HTML as text, decoded once per document by the first stage that needs it.

    The charset's source (HTTP header, meta tag, detection) is counted by that stage, so a page
    the cascade's pre-check decodes is not counted twice when the extractor reads it.
    """
    if doc.html is None:
        html, _codec, source = decode_html(doc.payload or b"", doc.metadata.get("content_type"))
        stage.count(f"charset_{source}")
        doc.html = html
    return doc.html


def pre_extract(doc: Document, stage: DocumentStage, cfg: ExtractConfig) -> str | None:
    """The cascade's pre-extraction: the page's text (`page_text`), or None when the page is over
    the extractor's size cap (counter `prelid_oversize`: the extractor drops it as `extract_oversize`,
    so it is not worth a pre-check). Raises what lxml raises on a page it cannot parse."""
    html = decoded_html(doc, stage)
    if len(html) > cfg.max_html_chars:
        stage.count("prelid_oversize")
        return None
    return page_text(html)


# Elements whose content is not text a reader sees. lxml's HTML parser as trafilatura configures it
# (trafilatura/utils.py HTML_PARSER), so the pre-check reads the tree trafilatura will read.
_NOT_TEXT = ("script", "style", "noscript", "template")


@functools.cache
def _html_parser():
    from lxml.html import HTMLParser

    return HTMLParser(
        collect_ids=False, default_doctype=False, encoding="utf-8", remove_comments=True, remove_pis=True
    )


def page_text(html: str) -> str:
    """Every text node of the page, white space collapsed: main content and boilerplate alike ("" for
    a page with no element).

    libxml2 parses in C in time linear in the page (it stops nesting at depth 256 by itself, the
    cut trafilatura's input gets), and the text is serialised in C: no scan, no Python per node.
    Text nodes are joined as they stand, so two blocks with no white space between their tags run
    together (`<p>a</p><p>b</p>`: "ab"); in the shared WARCs this changed no language decision, and
    joining node by node in Python costs 0.6 ms more per page."""
    from lxml import etree
    from lxml.html import fromstring

    try:
        tree = fromstring(xml_safe_references(html).encode("utf-8", "replace"), parser=_html_parser())
    except etree.ParserError:  # "Document is empty": nothing but white space or comments
        return ""
    etree.strip_elements(tree, *_NOT_TEXT, with_tail=False)
    return " ".join(etree.tostring(tree, method="text", encoding=str).split())


class ExtractStep(DocumentStage):
    """The `extract` funnel row: raw payload -> text, whatever extractor is configured.

    HTML is decoded here (charset from the HTTP header, the page's meta tag or detection, counted
    per source) and handed to the extractor as `doc.html`; a WET conversion record is already text
    and passes through. The extractor is trafilatura unless the config names another one.

    With several extractors (`extract.mode: fallback`), the next one runs only when the previous
    one gave no text (empty, error, timeout); when none gives text, the first one's drop reason is
    the page's, so the funnel reads as with the first extractor alone. `record` adds the
    `extractor` column: the name of the extractor whose text the document carries.
    """

    name = "extract"

    def __init__(self, extractor: DocumentStage | list[DocumentStage], record: bool = False) -> None:
        self.extractors = list(extractor) if isinstance(extractor, list) else [extractor]
        self.extractor = self.extractors[0]
        self.record = record
        self.columns = {"extractor": pa.string()} if record else {}

    def start_file(self) -> None:
        for ex in self.extractors:
            ex.start_file()

    def warm_up(self) -> None:
        for ex in self.extractors:
            ex.warm_up()

    def process(self, doc: Document) -> Document | Drop:
        if doc.metadata.get("source_format") == "wet":
            doc.text = (doc.payload or b"").decode("utf-8", "replace")
            doc.metadata["title"] = None
            self.count("wet_passthrough")
        else:
            decoded_html(doc, self)
            result = self._first_text(doc)
            if isinstance(result, Drop):
                return result  # the rejected sample shows the HTML (the document has no text)
            doc = result
        if self.record and doc.metadata.get("source_format") == "wet":
            doc.metadata["extractor"] = None  # the record came as text: no extractor ran
        doc.payload = doc.html = None  # the page is not needed past this point
        return doc

    def _first_text(self, doc: Document) -> Document | Drop:
        first_drop: Drop | None = None
        for i, ex in enumerate(self.extractors):
            result = ex.process(doc)
            self.adopt(ex)  # its counters, and what it measured
            if not isinstance(result, Drop) and result.text is None:
                result = Drop("extract_empty", f"{type(ex).__name__} returned no text")
            if isinstance(result, Drop):
                first_drop = first_drop or result
                continue
            label = extractor_label(ex)
            if self.record:
                result.metadata["extractor"] = label
            if i:
                self.count(f"extract_fallback:{label}")
            return result
        assert first_drop is not None
        return first_drop


def extractor_label(ex: DocumentStage) -> str:
    """What the `extractor` column says: the registry label, or a user class's name."""
    return getattr(ex, "label", None) or type(ex).__name__
