"""Main-text extraction quality of our extractor against two public gold sets.

Datasets (read from the shared data folder, see its README, `extraction/`):

* ``aeb`` -- scrapinghub/article-extraction-benchmark: 181 news/blog pages with the gold
  ``articleBody``. Metric exactly as that benchmark's ``evaluate.py`` computes it:

  - tokens are the matches of the regex ``\\w+`` (Unicode word characters; case is kept, no
    lowercasing; punctuation and whitespace only separate tokens);
  - shingles are the tuples of 4 consecutive tokens, counted as a *multiset*; a text of 1 to 3
    tokens is one shorter shingle, a text of 0 tokens (empty or ``None``) has none;
  - per page: tp = sum of min(gold count, predicted count) over shingles, fp = predicted surplus,
    fn = gold surplus, then (tp, fp, fn) are divided by their sum (this leaves per-page P and R
    unchanged; the benchmark does it so long pages do not weigh more in its bootstrap);
  - per-page precision = tp / (tp + fp), recall = tp / (tp + fn); 1.0 when fp == fn == 0;
  - precision is averaged over the pages with a non-empty prediction (tp + fp > 0) only, recall over
    pages with a non-empty gold text (tp + fn > 0) only: a page where the extractor returns nothing
    costs recall (0 for that page) but not precision;
  - F1 = 2PR / (P + R) of those two macro averages (not the mean of per-page F1s).

  The HTML is read as UTF-8 text, as the benchmark's runners do (all 181 files are UTF-8).

* ``trafilatura-eval`` -- adbar/trafilatura's evaluation set: 990 multilingual pages and
  ``evaldata.json`` mapping each URL to its HTML ``file`` (``html/<file>.gz``) and to snippets that
  must appear (``with``) or must not appear (``without``) in the extracted text. Metric as
  trafilatura's ``tests/evaluate.py``: a ``with`` snippet found in the output is a true positive,
  missing a false negative; a ``without`` snippet found is a false positive, absent a true negative;
  a page with no output (``None``) counts every ``with`` as fn and every ``without`` as tn.
  P = tp/(tp+fp), R = tp/(tp+fn), F1 = 2tp/(2tp+fp+fn), pooled over all snippets of all pages
  (micro average). Matching is plain substring matching (``snippet in text``), as evaluate.py did
  before it moved scoring to ``eval_common.py``; ``--normalize-whitespace`` selects the newer rule
  (whitespace runs collapsed to one space and stripped on both sides), which finds a few more
  snippets that span a line break. The HTML is handed over as raw *bytes*, as evaluate.py does
  (27 files are not UTF-8; trafilatura guesses their encoding).

Rows:

* ``refinery precision (default cfg)``: ``curation.extract.extractors.Extractor(ExtractConfig())``, i.e. the
  pipeline's configuration (favor_precision=True as FineWeb, include_comments=False, trafilatura's
  deduplicate with a per-file cache, timeout), on HTML decoded from bytes by
  ``curation.extract.charset.decode_html`` as the pipeline does (no HTTP header here). ``start_file()`` is
  called every ``--group-size`` pages (default 250, about the size of the WARC files these pages
  are packaged in under ``warc/``), so the dedup cache sees what it would in a pipeline run.
* ``trafilatura.extract() defaults``: ``trafilatura.extract(html)`` with every keyword at its
  default (so include_comments=True, deduplicate=False). This is the call behind the reference
  numbers in the data README (aeb F1 ~= 0.953, trafilatura-eval F1 ~= 0.919 with substring
  matching); reproducing them validates the two metric implementations.
* ``refinery extract.fast=true``: the first row with trafilatura's fast mode (no readability/jusText
  comparison on each page).
* ``refinery favor_precision=False``: our extractor with trafilatura's default balance, everything
  else as the first row.
* ``trafilatura (eval-script call)``: trafilatura.extract as each dataset's own evaluation script
  calls it: ``include_comments=False`` for aeb (extractors/run_trafilatura.py), ``fast=False,
  include_comments=False, include_tables=True, include_formatting=False`` for trafilatura-eval.

* ``resiliparse main_content``: ``curation.extract.extractors.Resiliparse`` (resiliparse's
  ``extract_plain_text(main_content=True)``), the second extractor and configs/extract-resiliparse.yaml's only one.
* ``extractors [trafilatura, resiliparse] fallback`` / ``union``: the two `extract.mode`s (see
  ``mode_runner``); their seconds include the langid and filter checks union runs per page.

Seconds cover decoding + extraction only (files are read and decompressed beforehand; scoring is
excluded), single process.

    .venv/bin/python -m bench.curation.extraction_quality              # both datasets, all rows
    .venv/bin/python -m bench.curation.extraction_quality --limit 50   # quick look
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.stage import Document, run_stages
from core.stats import Stats
from curation.config import ExtractConfig, ExtractJobConfig
from curation.extract.charset import decode_html
from curation.extract.extractors import Extractor, Resiliparse
from curation.filters.blocks import build_filter_steps
from curation.filters.langid import LanguageIdentifier
from testkit.shared_data import shared_data_dir

# ---------------------------------------------------------------------------------------------
# article-extraction-benchmark metric (scrapinghub/article-extraction-benchmark, evaluate.py)
# ---------------------------------------------------------------------------------------------

_AEB_TOKEN_RE = re.compile(r"\w+", re.UNICODE)
AEB_NGRAM = 4

TpFpFn = tuple[float, float, float]


def aeb_tokenize(text: str | None) -> list[str]:
    """Word tokens as the benchmark finds them: regex ``\\w+``, case kept."""
    return _AEB_TOKEN_RE.findall(text or "")


def aeb_shingles(text: str | None, n: int = AEB_NGRAM) -> Counter[tuple[str, ...]]:
    """Multiset of n-token shingles; 1..n-1 tokens make one short shingle, 0 tokens none."""
    tokens = aeb_tokenize(text)
    grams = (tuple(tokens[i : i + n]) for i in range(max(1, len(tokens) - n + 1)))
    return Counter(g for g in grams if g)


def aeb_tp_fp_fn(gold: str | None, pred: str | None, n: int = AEB_NGRAM) -> TpFpFn:
    """Shingle tp/fp/fn of one page, normalized to sum to 1 (all 0 when both texts are empty)."""
    g, p = aeb_shingles(gold, n), aeb_shingles(pred, n)
    tp = fp = fn = 0.0
    for key in g.keys() | p.keys():
        gc, pc = g.get(key, 0), p.get(key, 0)
        tp += min(gc, pc)
        fp += max(0, pc - gc)
        fn += max(0, gc - pc)
    s = tp + fp + fn
    if s > 0:
        return tp / s, fp / s, fn / s
    return tp, fp, fn


def aeb_page_precision(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    if tp == fp == 0:
        return 0.0
    return tp / (tp + fp)


def aeb_page_recall(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    if tp == fn == 0:
        return 0.0
    return tp / (tp + fn)


def aeb_scores(per_page: Iterable[TpFpFn]) -> tuple[float, float, float]:
    """(precision, recall, F1): P macro-averaged over pages with output, R over pages with gold.

    An empty average (no page with output at all) is 0.0 here; the benchmark would raise.
    """
    per_page = list(per_page)
    ps = [aeb_page_precision(*c) for c in per_page if c[0] + c[1] > 0]
    rs = [aeb_page_recall(*c) for c in per_page if c[0] + c[2] > 0]
    precision = sum(ps) / len(ps) if ps else 0.0
    recall = sum(rs) / len(rs) if rs else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def aeb_evaluate(golds: Sequence[str | None], preds: Sequence[str | None]) -> tuple[float, float, float]:
    """(precision, recall, F1) of predictions against gold article bodies, page by page."""
    if len(golds) != len(preds):
        raise ValueError(f"{len(golds)} gold texts but {len(preds)} predictions")
    return aeb_scores(aeb_tp_fp_fn(g, p) for g, p in zip(golds, preds, strict=True))


# ---------------------------------------------------------------------------------------------
# trafilatura snippet metric (adbar/trafilatura tests/evaluate.py + tests/eval_common.py)
# ---------------------------------------------------------------------------------------------

_WS_RE = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


@dataclass
class SnippetCounts:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    def add(self, other: SnippetCounts) -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.tn += other.tn

    def scores(self) -> tuple[float, float, float]:
        """(precision, recall, F1), each 0.0 when its denominator is 0."""
        precision = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        recall = self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0
        denom = 2 * self.tp + self.fp + self.fn
        return precision, recall, (2 * self.tp / denom if denom else 0.0)


def snippet_counts(
    with_: Sequence[str], without: Sequence[str], text: str | None, normalize: bool = False
) -> SnippetCounts:
    """Score one page's output against its must-have and must-not-have snippets.

    Substring matching; with `normalize`, whitespace runs in both snippet and text become one space.
    """
    if not isinstance(text, str):  # no output: every wanted snippet missed, every unwanted absent
        return SnippetCounts(0, 0, len(with_), len(without))
    f = _norm if normalize else (lambda s: s)
    hay = f(text)
    tp = sum(1 for s in with_ if f(s) in hay)
    fp = sum(1 for s in without if f(s) in hay)
    return SnippetCounts(tp, fp, len(with_) - tp, len(without) - fp)


# ---------------------------------------------------------------------------------------------
# datasets and runners
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Page:
    key: str
    payload: bytes
    url: str | None
    gold: dict = field(default_factory=dict)


def load_aeb(root: Path, limit: int | None = None) -> list[Page]:
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for key, item in list(truth.items())[:limit]:
        with gzip.open(root / "html" / f"{key}.html.gz", "rb") as f:
            pages.append(Page(key, f.read(), item.get("url"), item))
    return pages


def load_trafilatura_eval(root: Path, limit: int | None = None) -> list[Page]:
    evaldata = json.loads((root / "evaldata.json").read_text(encoding="utf-8"))
    pages = []
    for url, item in list(evaldata.items())[:limit]:
        with gzip.open(root / "html" / f"{item['file']}.gz", "rb") as f:
            pages.append(Page(item["file"], f.read(), url, item))
    return pages


def load_trafilatura_eval_heldout(root: Path, limit: int | None = None) -> list[Page]:
    """The half of trafilatura-eval the fast engine's line model was not trained on
    (curation/extract/train_fast.py `in_training_half`): the set every row is compared on for it."""
    from curation.extract.train_fast import in_training_half

    return [p for p in load_trafilatura_eval(root) if not in_training_half(p.key)][:limit]


def wcxb_page_type(truth: dict) -> str:
    """A page's type as WCXB's evaluate.py reads it (`_internal.page_type.primary`, default article,
    `category` read as `collection`)."""
    kind = (truth.get("_internal") or {}).get("page_type", {})
    kind = kind.get("primary", "article") if isinstance(kind, dict) else (kind or "article")
    return "collection" if kind == "category" else kind


def load_wcxb(root: Path, limit: int | None = None) -> list[Page]:
    pages = []
    for path in sorted((root / "ground-truth").glob("*.json"))[:limit]:
        truth = json.loads(path.read_text(encoding="utf-8"))
        with gzip.open(root / "html" / f"{path.stem}.html.gz", "rb") as f:
            gold = {
                "main_content": (truth.get("ground_truth") or {}).get("main_content") or "",
                "page_type": wcxb_page_type(truth),
            }
            pages.append(Page(path.stem, f.read(), truth.get("url"), gold))
    return pages


_WCXB_TOKEN = re.compile(r"\w+")


def wcxb_word_prf(pred: str | None, gold: str) -> tuple[float, float, float]:
    """WCXB's word-level (precision, recall, F1) of one page (its evaluate.py `word_f1`): lowercased
    `\\w+` tokens as bags; an empty gold scores 1 against an empty prediction, else 0."""
    p, g = _WCXB_TOKEN.findall((pred or "").lower()), _WCXB_TOKEN.findall(gold.lower())
    if not g:
        return (0.0, 0.0, 0.0) if p else (1.0, 1.0, 1.0)
    if not p:
        return 0.0, 0.0, 0.0
    overlap = sum((Counter(p) & Counter(g)).values())
    precision, recall = overlap / len(p), overlap / len(g)
    return precision, recall, (2 * precision * recall / (precision + recall) if overlap else 0.0)


# A runner turns one dataset's pages into (outputs, number of pages without output). The second
# argument says how the dataset's evaluation script hands HTML to trafilatura ("utf8-text" for aeb,
# "bytes" for trafilatura-eval); only the trafilatura rows use it, ours always decode_html the bytes.
Runner = Callable[[list[Page], str], tuple[list[str | None], int]]


def refinery_runner(favor_precision: bool, group_size: int, fast: bool = False) -> Runner:
    def run(pages: list[Page], _script_input: str) -> tuple[list[str | None], int]:
        ex = Extractor(ExtractConfig(favor_precision=favor_precision, fast=fast))
        outs: list[str | None] = []
        for i, page in enumerate(pages):
            if i % group_size == 0:
                ex.start_file()
            html, _codec, _source = decode_html(page.payload)
            outs.append(ex(html, page.url).text)
        return outs, sum(o is None for o in outs)

    return run


def resiliparse_runner() -> Runner:
    def run(pages: list[Page], _script_input: str) -> tuple[list[str | None], int]:
        ex = Resiliparse(ExtractConfig())
        outs = [ex(decode_html(page.payload)[0], page.url).text for page in pages]
        return outs, sum(o is None for o in outs)

    return run


def fast_runner() -> Runner:
    def run(pages: list[Page], _script_input: str) -> tuple[list[str | None], int]:
        from curation.extract.fast import FastExtractor

        ex = FastExtractor(ExtractConfig())
        outs = [ex(decode_html(page.payload)[0], page.url).text for page in pages]
        return outs, sum(o is None for o in outs)

    return run


def mode_runner(mode: str, group_size: int) -> Runner:
    """`extract.extractors: [trafilatura, resiliparse]` with `mode` (fallback or union), per page.

    fallback: trafilatura's text, or resiliparse's when trafilatura gives none. union: the first of
    the two texts that passes the pipeline's judges (lid.176 with the default keep-list and
    threshold, then the four filter blocks, as `extract` runs them); when neither passes, the page
    would be dropped whatever its text, and trafilatura's text is scored (the extraction the
    pipeline's funnel reports for it), so the row measures the extractor choice, not the filters.
    """

    def run(pages: list[Page], _script_input: str) -> tuple[list[str | None], int]:
        cfg = ExtractJobConfig()
        traf, resi = Extractor(cfg.extract), Resiliparse(cfg.extract)
        judges = [LanguageIdentifier(cfg.langid), *build_filter_steps(cfg.filters)]
        outs: list[str | None] = []
        for i, page in enumerate(pages):
            if i % group_size == 0:
                traf.start_file()
            html = decode_html(page.payload)[0]
            first = traf(html, page.url).text
            if mode == "fallback":
                outs.append(first or resi(html, page.url).text)
                continue
            if first is not None and _passes(first, judges):
                outs.append(first)
                continue
            second = resi(html, page.url).text
            outs.append(second if second is not None and _passes(second, judges) else first)
        return outs, sum(o is None for o in outs)

    return run


def _passes(text: str, judges: list) -> bool:
    doc = Document(id="page", text=text, metadata={})
    return run_stages(doc, judges, Stats(), lambda *_: None) is not None


def trafilatura_runner(**kwargs) -> Runner:
    def run(pages: list[Page], script_input: str) -> tuple[list[str | None], int]:
        import trafilatura

        outs: list[str | None] = []
        for page in pages:
            doc = page.payload.decode("utf-8") if script_input == "utf8-text" else page.payload
            try:
                outs.append(trafilatura.extract(doc, **kwargs))
            except Exception:  # both reference scripts count a crash as no output
                outs.append(None)
        return outs, sum(not o for o in outs)

    return run


DATASETS = {
    # name: (folder under shared data, loader, how its evaluation script feeds trafilatura)
    "aeb": ("extraction/aeb", load_aeb, "utf8-text"),
    "trafilatura-eval": ("extraction/trafilatura-eval", load_trafilatura_eval, "bytes"),
    "trafilatura-eval-heldout": ("extraction/trafilatura-eval", load_trafilatura_eval_heldout, "bytes"),
    "wcxb": ("extraction/wcxb-dev", load_wcxb, "utf8-text"),
}

# The keywords each dataset's own evaluation script passes to trafilatura.extract.
EVAL_SCRIPT_KWARGS = {
    "aeb": {"include_comments": False},
    "trafilatura-eval": {
        "fast": False,
        "include_comments": False,
        "include_tables": True,
        "include_formatting": False,
    },
}
EVAL_SCRIPT_KWARGS["trafilatura-eval-heldout"] = EVAL_SCRIPT_KWARGS["trafilatura-eval"]
EVAL_SCRIPT_KWARGS["wcxb"] = {}  # WCXB's leaderboard calls trafilatura.extract with its defaults

ROWS = (
    "refinery",
    "refinery-fast",
    "trafilatura",
    "refinery-recall",
    "trafilatura-script",
    "resiliparse",
    "fast",
    "fallback",
    "union",
)
ROW_LABELS = {
    "refinery": "refinery precision (default cfg)",
    "refinery-fast": "refinery extract.fast=true",
    "resiliparse": "resiliparse main_content",
    "fast": "refinery fast engine (extractors: [fast])",
    "fallback": "extractors [trafilatura, resiliparse] fallback",
    "union": "extractors [trafilatura, resiliparse] union",
    "trafilatura": "trafilatura.extract() defaults",
    "refinery-recall": "refinery favor_precision=False",
    "trafilatura-script": "trafilatura (eval-script call)",
}


@dataclass
class Result:
    dataset: str
    row: str
    precision: float
    recall: float
    f1: float
    pages: int
    empty: int
    seconds: float
    cpu_seconds: float = 0.0
    by_type: dict[str, tuple[float, int]] = field(default_factory=dict)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds else float("inf")


def make_runner(row: str, dataset: str, group_size: int) -> Runner:
    if row == "refinery":
        return refinery_runner(True, group_size)
    if row == "refinery-fast":
        return refinery_runner(True, group_size, fast=True)
    if row == "refinery-recall":
        return refinery_runner(False, group_size)
    if row == "trafilatura":
        return trafilatura_runner()
    if row == "resiliparse":
        return resiliparse_runner()
    if row == "fast":
        return fast_runner()
    if row in ("fallback", "union"):
        return mode_runner(row, group_size)
    if row == "trafilatura-script":
        return trafilatura_runner(**EVAL_SCRIPT_KWARGS[dataset])
    raise ValueError(f"unknown row {row!r}")


def score(
    dataset: str, pages: list[Page], outs: list[str | None], normalize_ws: bool
) -> tuple[float, float, float]:
    if dataset == "wcxb":  # macro averages over pages, as WCXB's evaluate.py
        prf = [wcxb_word_prf(o, p.gold["main_content"]) for p, o in zip(pages, outs, strict=True)]
        return tuple(sum(x[i] for x in prf) / len(prf) for i in range(3))  # type: ignore[return-value]
    if dataset == "aeb":
        return aeb_evaluate([p.gold.get("articleBody") for p in pages], outs)
    total = SnippetCounts()
    for page, out in zip(pages, outs, strict=True):
        total.add(snippet_counts(page.gold["with"], page.gold["without"], out, normalize_ws))
    return total.scores()


def run_benchmark(
    datasets: Sequence[str],
    rows: Sequence[str],
    limit: int | None = None,
    group_size: int = 250,
    normalize_ws: bool = False,
    data_dir: Path | None = None,
) -> list[Result]:
    data_dir = data_dir or shared_data_dir()
    results = []
    for name in datasets:
        folder, loader, script_input = DATASETS[name]
        pages = loader(data_dir / folder, limit)
        for row in rows:
            runner = make_runner(row, name, group_size)
            t0, c0 = time.perf_counter(), time.process_time()
            outs, empty = runner(pages, script_input)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
            p, r, f1 = score(name, pages, outs, normalize_ws)
            by_type = by_group(name, pages, outs, normalize_ws)
            results.append(Result(name, ROW_LABELS[row], p, r, f1, len(pages), empty, seconds, cpu, by_type))
            print(f"  [{name}] {ROW_LABELS[row]}: F1 {f1:.3f} ({seconds:.1f} s)", file=sys.stderr)
    return results


def wcxb_by_type(pages: list[Page], outs: list[str | None]) -> dict[str, tuple[float, int]]:
    """Mean word F1 and page count per WCXB page type."""
    f1s: dict[str, list[float]] = {}
    for page, out in zip(pages, outs, strict=True):
        f1s.setdefault(page.gold["page_type"], []).append(wcxb_word_prf(out, page.gold["main_content"])[2])
    return {kind: (sum(v) / len(v), len(v)) for kind, v in sorted(f1s.items())}


# A language with fewer pages than this is pooled into "other": a snippet F1 over 2 pages says little.
MIN_LANGUAGE_PAGES = 10


def gold_language(page: Page, lid) -> str:
    """A trafilatura-eval page's language: lid.176 on its gold `with` snippets (the text the page must
    yield), so the grouping is the same for every extractor and depends on none of them."""
    text = " ".join(page.gold.get("with") or []).replace("\n", " ")
    return lid.predict(text)[0] if text.strip() else "none"


def trafilatura_eval_by_language(
    pages: list[Page], outs: list[str | None], normalize_ws: bool
) -> dict[str, tuple[float, int]]:
    """Snippet F1 (pooled within the language, as the whole set's) and page count per gold language;
    languages under MIN_LANGUAGE_PAGES pages pooled as "other"."""
    from curation.config import LangIdConfig

    lid = LanguageIdentifier(LangIdConfig())
    langs = [gold_language(p, lid) for p in pages]
    sizes = Counter(langs)
    counts: dict[str, SnippetCounts] = {}
    pages_of: Counter[str] = Counter()
    for page, out, lang in zip(pages, outs, langs, strict=True):
        key = lang if sizes[lang] >= MIN_LANGUAGE_PAGES else "other"
        counts.setdefault(key, SnippetCounts()).add(
            snippet_counts(page.gold["with"], page.gold["without"], out, normalize_ws)
        )
        pages_of[key] += 1
    return {k: (counts[k].scores()[2], pages_of[k]) for k in sorted(counts, key=lambda k: (k == "other", k))}


def by_group(
    dataset: str, pages: list[Page], outs: list[str | None], normalize_ws: bool
) -> dict[str, tuple[float, int]]:
    """F1 per page type (WCXB) or per language (trafilatura-eval); {} for aeb (English news only)."""
    if dataset == "wcxb":
        return wcxb_by_type(pages, outs)
    if dataset.startswith("trafilatura-eval"):
        return trafilatura_eval_by_language(pages, outs, normalize_ws)
    return {}


def format_type_table(results: Sequence[Result], dataset: str = "wcxb") -> str:
    """One dataset's F1 per group (WCXB: page type; trafilatura-eval: language), one row per extractor;
    each column head gives the group's page count."""
    rows = [r for r in results if r.by_type and r.dataset == dataset]
    if not rows:
        return ""
    kinds = list(rows[0].by_type)
    head = ["extractor", *(f"{k} ({rows[0].by_type[k][1]})" for k in kinds)]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(kinds)]
    for r in rows:
        lines.append("| " + " | ".join([r.row, *(f"{r.by_type[k][0]:.3f}" for k in kinds)]) + " |")
    return "\n".join(lines)


def format_table(results: Sequence[Result]) -> str:
    head = (
        "dataset",
        "extractor",
        "precision",
        "recall",
        "F1",
        "pages",
        "empty",
        "seconds",
        "pages/s",
        "CPU ms/page",
    )
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---", "---"] + ["---:"] * (len(head) - 2)) + "|",
    ]
    for r in results:
        cells = (
            r.dataset,
            r.row,
            f"{r.precision:.3f}",
            f"{r.recall:.3f}",
            f"{r.f1:.3f}",
            str(r.pages),
            str(r.empty),
            f"{r.seconds:.1f}",
            f"{r.pages_per_s:.1f}",
            f"{1000 * r.cpu_seconds / r.pages:.1f}",
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--datasets", nargs="+", choices=list(DATASETS), default=["aeb", "trafilatura-eval-heldout", "wcxb"]
    )
    parser.add_argument(
        "--rows", nargs="+", choices=ROWS, default=list(ROWS), help="extractors to run (default: all)"
    )
    parser.add_argument("--limit", type=int, default=None, help="first N pages of each dataset only")
    parser.add_argument(
        "--group-size", type=int, default=250, help="pages per start_file() of our extractor (default 250)"
    )
    parser.add_argument(
        "--normalize-whitespace",
        action="store_true",
        help="trafilatura-eval: collapse whitespace before substring matching (trafilatura's newer "
        "eval_common.py) instead of plain substring matching (evaluate.py, the reference numbers)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here as JSON")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be >= 1")
    if args.group_size < 1:
        parser.error("--group-size must be >= 1")
    logging.basicConfig(level=logging.CRITICAL)  # trafilatura logs every page it finds hard

    results = run_benchmark(args.datasets, args.rows, args.limit, args.group_size, args.normalize_whitespace)
    print(format_table(results))
    for name in args.datasets:
        groups = format_type_table(results, name)
        if groups:
            what = (
                "word F1 per page type"
                if name == "wcxb"
                else "snippet F1 per language (lid.176 on the gold snippets)"
            )
            print(f"\n{name}, {what}:\n" + groups)
    if args.json:
        payload = [{**r.__dict__, "pages_per_s": r.pages_per_s} for r in results]
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
