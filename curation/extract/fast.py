"""The fast extraction engine (`extract.extractors: [fast]`): resiliparse's lexbor DOM, every line of
the page scored by a linear model distilled from trafilatura's own choices (issue 52).

Why this shape (measured on WCXB dev, 1,497 pages, word F1; bench/curation/extraction_quality.py):
- the cost must be a sixth of FineWeb's trafilatura call, and libxml2's parse alone takes most of
  that budget on modern pages (7 ms of 51 per page), as does any walk over the DOM in Python (lexbor
  through resiliparse's node objects: 160 ms per page). So the DOM is read by resiliparse's C++ only:
  two `extract_plain_text` calls on one parsed tree, ~4 ms together;
- the first call gives every line of the page (`main_content=False`) as minimal HTML: each line's
  block tag and its links are still visible, so its link density can be counted; the second gives
  resiliparse's main-content lines (its class, id and ARIA-role rules). A line's membership of the
  second is one feature among the line's own (length, sentence punctuation, digits, links) and its
  neighbourhood's (the lines around it: their length, links and membership);
- the model is a logistic regression over those features (`FEATURES`), trained by
  curation/extract/train_fast.py on pages of no reported gold set's held-out part, labelled by which
  lines trafilatura keeps at its best setting (`trafilatura.extract` defaults). A gradient-boosted
  model of the same features scored 0.790 against the regression's 0.798 on WCXB, at 3.4 ms per page
  for sklearn's predictor against microseconds: the simpler model transfers better from the training
  pages (mostly articles) to forums, listings and products.

Bounds: resiliparse's calls are C++ that no signal interrupts, so the page is bounded before them: the
size cap (`max_html_chars`, extract_oversize) and the depth cut (`max_tag_depth`, counter
`html_too_deep`, `parse_bounded`), both before lexbor parses the page, as for the `resiliparse`
extractor. The Python that follows is linear in the text.
"""

from __future__ import annotations

import functools
import html as html_lib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from curation.config import ExtractConfig
from curation.extract.extractors import Extracted, HtmlExtractor, _empty, _oversize
from curation.extract.html_depth import MAX_TAG_DEPTH, bound_depth

if TYPE_CHECKING:
    from resiliparse.parse.html import HTMLTree

MODEL_PATH = Path(__file__).with_name("models") / "fast-lines.json"

_TAG = re.compile(r"<[^>]+>")
_OPEN = re.compile(r"\s*<(\w+)")
_LINK = re.compile(r"<a\b[^>]*>(.*?)</a>", re.S)
# Sentence punctuation of Latin, CJK, Devanagari, Arabic and Ethiopic scripts, and their commas: a
# stop or a comma in a line is evidence of prose, whatever the language.
_STOPS = re.compile(r"[.!?。！？।؟።]")
_COMMAS = re.compile(r"[,;:、，；：،]")
_STOP_END = frozenset(".!?。！？।؟።")

# The block tag a line starts with (minimal HTML keeps these); any other line is `none`.
LINE_TAGS = ("p", "li", "h", "pre", "blockquote", "none")
_WINDOW = 3  # lines on each side that make a line's neighbourhood

FEATURES: tuple[str, ...] = (
    "log_chars", "log_words", "mean_word_len", "stops", "commas", "ends_with_stop", "digit_share",
    "upper_share", "link_share", "links", "in_main", "indented", "position", "char_position",
    *(f"tag_{t}" for t in LINE_TAGS),
    "prev_log_chars", "next_log_chars", "prev_link_share", "next_link_share", "prev_in_main",
    "next_in_main", "window_in_main", "window_link_share", "window_log_chars", "repeated",
    "page_log_chars", "page_main_share", "page_log_lines",
)  # fmt: skip


@dataclass(slots=True)
class Line:
    """One line of the page's text as resiliparse lays it out, and what it shows of its markup."""

    text: str  # white space collapsed, entities decoded
    tag: str  # one of LINE_TAGS
    link_chars: int
    links: int
    in_main: bool  # resiliparse's main-content pass kept it
    indented: bool  # inside a list or other nested block of the minimal HTML


def parse_bounded(html: str, max_tag_depth: int = MAX_TAG_DEPTH) -> tuple[HTMLTree, bool]:
    """The page's lexbor tree, cut before its first element deeper than `max_tag_depth` (then True).

    The cut comes from curation/extract/html_depth.py's linear scan before lexbor sees the page (5 ms
    of the engine's ~13 per WCXB page). Asking the parsed tree instead (a CSS chain of 256 child
    combinators: 0.4 ms) was measured and refused: lexbor's parse itself is quadratic on HTML5's
    re-opened formatting elements (tests/curation/test_hostile_html.py's `formatting_attrs`: 15 s,
    `reopened_formatting`: 8 s), which only a scan before the parse bounds."""
    from resiliparse.parse.html import HTMLTree

    html, depth = bound_depth(html, max_tag_depth)
    return HTMLTree.parse(html), depth.cut is not None


def page_lines(tree: HTMLTree) -> tuple[list[Line], str | None]:
    """The page's lines and its <title>: two resiliparse passes over one lexbor tree, bounded in
    depth (`parse_bounded`)."""
    from resiliparse.extract.html2text import extract_plain_text

    title = (tree.title or "").strip() or None
    common = {"alt_texts": False, "form_fields": False, "list_bullets": False}
    every = extract_plain_text(
        tree, preserve_formatting="minimal_html", main_content=False, comments=True, links=True, **common
    )
    main = extract_plain_text(tree, preserve_formatting=True, main_content=True, comments=False, **common)
    kept = {" ".join(line.split()) for line in main.split("\n")}
    lines = []
    for raw in every.split("\n"):
        text = _plain(raw)
        if not text:
            continue
        m = _OPEN.match(raw)
        tag = m.group(1) if m else "none"
        if len(tag) == 2 and tag[0] == "h" and tag[1].isdigit():
            tag = "h"
        elif tag not in LINE_TAGS:
            tag = "none"
        anchors = _LINK.findall(raw) if "<a " in raw else ()
        link_chars = min(sum(len(_plain(a)) for a in anchors), len(text))
        lines.append(Line(text, tag, link_chars, len(anchors), text in kept, raw.startswith(" ")))
    return lines, title


def _plain(markup: str) -> str:
    if "<" in markup:
        markup = _TAG.sub("", markup)
    if "&" in markup:
        markup = html_lib.unescape(markup)
    return " ".join(markup.split())


def line_features(lines: list[Line]) -> list[list[float]]:
    """One row of `FEATURES` per line."""
    n = len(lines)
    if not n:
        return []
    chars = [len(line.text) for line in lines]
    page_chars = sum(chars)
    main_chars = sum(c for c, line in zip(chars, lines, strict=True) if line.in_main)
    counts: dict[str, int] = {}
    for line in lines:
        counts[line.text] = counts.get(line.text, 0) + 1
    in_main = [float(line.in_main) for line in lines]
    link_share = [line.link_chars / c for line, c in zip(lines, chars, strict=True)]
    log_chars = [math.log1p(c) for c in chars]
    page = [math.log1p(page_chars), main_chars / page_chars, math.log1p(n)]
    rows = []
    offset = 0
    for k, line in enumerate(lines):
        t, c = line.text, chars[k]
        words = t.count(" ") + 1
        lo, hi = max(0, k - _WINDOW), min(n, k + _WINDOW + 1)
        width = hi - lo
        first, last = k == 0, k + 1 == n
        rows.append(
            [
                log_chars[k],
                math.log1p(words),
                (c - words + 1) / words,
                float(len(_STOPS.findall(t))),
                float(len(_COMMAS.findall(t))),
                float(t[-1] in _STOP_END),
                sum(map(str.isdigit, t)) / c,
                sum(map(str.isupper, t)) / c,
                link_share[k],
                float(line.links),
                in_main[k],
                float(line.indented),
                k / n,
                offset / page_chars,
                *(float(line.tag == tag) for tag in LINE_TAGS),
                0.0 if first else log_chars[k - 1],
                0.0 if last else log_chars[k + 1],
                0.0 if first else link_share[k - 1],
                0.0 if last else link_share[k + 1],
                0.0 if first else in_main[k - 1],
                0.0 if last else in_main[k + 1],
                sum(in_main[lo:hi]) / width,
                sum(link_share[lo:hi]) / width,
                sum(log_chars[lo:hi]) / width,
                float(counts[t] > 1),
                *page,
            ]
        )
        offset += c
    return rows


@dataclass(frozen=True, slots=True)
class LineModel:
    """A logistic regression over standardized `FEATURES`: keep a line when p >= `threshold`."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float

    def keep(self, rows: list[list[float]]) -> list[bool]:
        w, cut = self._weights()
        return [sum(map(float.__mul__, w, row)) >= cut for row in rows]

    @functools.cache  # noqa: B019 (one entry per model, which lives as long as the process)
    def _weights(self) -> tuple[list[float], float]:
        """The weights on raw features and the cut on their sum: p >= threshold exactly when the
        logit >= log(threshold / (1 - threshold)), so no exp per line and no standardizing."""
        w = [c / s for c, s in zip(self.coef, self.scale, strict=True)]
        shift = sum(wi * m for wi, m in zip(w, self.mean, strict=True))
        return w, math.log(self.threshold / (1.0 - self.threshold)) - self.intercept + shift

    @classmethod
    def from_json(cls, data: dict) -> LineModel:
        feats = tuple(data["features"])
        if feats != FEATURES:
            raise ValueError(
                f"model features {feats} are not this engine's {FEATURES}: retrain it with "
                "python -m curation.extract.train_fast"
            )
        return cls(
            feats,
            tuple(data["mean"]),
            tuple(data["scale"]),
            tuple(data["coef"]),
            float(data["intercept"]),
            float(data["threshold"]),
        )


@functools.cache
def load_model(path: str | None = None) -> LineModel:
    return LineModel.from_json(json.loads(Path(path or MODEL_PATH).read_text(encoding="utf-8")))


def fast_text(tree: HTMLTree, model: LineModel | None = None) -> tuple[str, str | None]:
    """The kept lines of a page's depth-bounded tree, one per line, and its title."""
    lines, title = page_lines(tree)
    keep = (model or load_model()).keep(line_features(lines))
    return "\n".join(line.text for line, k in zip(lines, keep, strict=True) if k), title


class FastExtractor(HtmlExtractor):
    """HTML -> (text, title) with the fast engine; the size cap, depth cut, minimum length and drop
    reasons of the other extractors. No cross-page state."""

    name = "extract"
    label = "fast"
    section_config = True

    def __init__(self, cfg: ExtractConfig) -> None:
        self.cfg = cfg
        self.model = load_model()

    def __call__(self, html: str, url: str | None = None) -> Extracted:
        if len(html) > self.cfg.max_html_chars:
            return _oversize(html, self.cfg.max_html_chars)
        try:
            tree, cut = parse_bounded(html, self.cfg.max_tag_depth)
            if cut:
                self.count("html_too_deep")
            text, title = fast_text(tree, self.model)
        except Exception as e:  # resiliparse raises on markup its parser refuses
            return Extracted(None, None, "extract_error", f"{type(e).__name__}: {str(e)[:200]}")
        if len(text.strip()) < self.cfg.min_text_chars:
            return _empty(text, title, self.cfg.min_text_chars)
        return Extracted(text, title, None)
