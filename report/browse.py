"""The data browser: one self-contained `browse.html` to read what each stage did to which documents.

`python -m report --demo-dir RUN` writes it beside report.html (issue 46). Where report.html shows
counts, this page shows documents: what a filter dropped (per stage and reason, with the measured value
against the rule's threshold when the extract wrote those columns, kept pages of the same source
beside), the members of a duplicate cluster side by side with a word diff against the one kept, the
documents of any range of a score histogram (drag over it), and the documents just inside and just
outside each threshold a recipe's selector resolved to. Every view filters by language and source
(`source` is the WARC file a document came from: the one provenance column every row carries).

Bounded at any input size (datatrove's `inspect` and Data-Juicer's analysis sample too): documents are
chosen by a bottom-k sample of a hash of their id per cell (stage, reason, language; score bin; cluster
size band; source and language), so the sample is uniform, the same on every rerun, and never holds
more than `Limits` rows in memory; every text is cut to `Limits.text_chars`, and every URL, title, id
or other name from the data to `Limits.field_chars`. The inputs (extract's rejected/ and dedup's
removed/ alike) are streamed batch by batch into those samples, reading only the columns needed, then
the sampled rows' text by id. With the default limits a billion-document crawl gives a page of a few
MB. Score histograms are finite whatever the column holds (report/histogram.py: NaN and ±inf are
counted apart, a ±1e308 range is binned without overflow).

Safety: the page makes no request (a Content-Security-Policy allows only its own inline script and
style and data: images, and nothing in it names a URL to load); the data is JSON in a
`<script type="application/json">` block with every `<`, `>` and `&` escaped, so no document text can
close the block; the script puts every document string on screen with `textContent`, never as markup,
never as a link, and bidirectional control characters in URLs and titles are shown as visible marks
(an RTL override there can disguise a URL). tests/report/test_browse_browser.py proves it in Chromium.
What the run's files name (dedup's inputs in its stats.json, a recipe's docs and shards folders) is
read only under the run folder (`RunFiles`, CONVENTIONS 14); others are counted on the page, not
read. A shards manifest is read by tokens/manifest.py's checked reader.

Layout read (any part may be missing; its view then says so):

    RUN/extract/docs, rejected/     kept documents; dropped ones (stage, reason, detail, snippet, and
                                    metric, value, threshold, text when the extract wrote them)
    RUN/dedup/docs, removed_ids/, removed/, _config.json   kept rows with dup_cluster(_size); every
                                    duplicate decision (id, stage, reason, partner_id = the id kept in its
                                    place); the keep policies
    RUN/scored/docs                 score columns (any float column is one)
    recipe (report.collect.recipe_path), tokens/shards/<source>/manifest.json   selectors; their
                                    percentiles as resolved when tokenized (`resolved_select`)
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.safe_json import loads_checked
from curation.schema import sample_key
from report.browse_page import TEMPLATE
from report.collect import _json, _parquet_files, recipe_path
from report.histogram import bin_edges, bin_index, finite_values

if TYPE_CHECKING:
    from core.selectors import Selector
    from mixtures.recipe import Source

BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


@dataclass(frozen=True, slots=True)
class Limits:
    """How much of a run the page holds: the page's size is bounded by these, not by the run."""

    per_cell: int = 12
    """Dropped documents per (stage, reason, language)."""
    max_dropped: int = 1200
    """All dropped documents together: when the cells hold more, each keeps its share (water-filled)."""
    per_bin: int = 5
    """Documents per bin of each score histogram."""
    bins: int = 30
    kept_per_cell: int = 3
    """Kept documents per (source, language) of a dropped document shown: what is shown beside it."""
    max_kept: int = 400
    """All those kept documents together (water-filled over the cells, as max_dropped)."""
    clusters_per_band: int = 8
    """Duplicate clusters per size band (2, 3-5, 6-20, 21+)."""
    members: int = 6
    """Members shown per cluster (the kept one and up to this many removed)."""
    boundary: int = 6
    """Documents each side of a selector's threshold."""
    text_chars: int = 2500
    """Characters of a document's text kept (the page says when a text was cut)."""
    field_chars: int = 300
    """Characters of a URL, title, id, language, stage, reason or other name from the data (one
    1 MB URL made a 1 MB page): a longer one ends in `…`. No string on the page is longer than
    text_chars, whatever field it is in."""
    max_langs: int = 40
    """Languages with their own histogram counts; the rest are counted as `other`."""


class BottomK:
    """A uniform, reproducible sample of at most k keys: the k smallest hashes seen (a max-heap). The
    hash is the extract's own `sample_key`, so a cell of the rejected sample (the k smallest keys per
    unit file) read back through this is the run-wide sample of those files, without bias."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.heap: list[tuple[int, str, Any]] = []
        self.seen = 0

    def offer(self, key: str, item: Any = None) -> None:
        self.seen += 1
        h = sample_key(key)  # of the whole key: the sample extract and dedup keep is by this hash
        key = key[:256]  # only breaks ties of the hash: a 1 MB id is not held k times
        if len(self.heap) < self.k:
            heapq.heappush(self.heap, (-h, key, item))
        elif -self.heap[0][0] > h:
            heapq.heapreplace(self.heap, (-h, key, item))

    def items(self) -> list[Any]:
        return [item for _, _, item in sorted(self.heap, key=lambda e: -e[0])]


def _source(warc_file: str | None) -> str:
    return (warc_file or "").rsplit("/", 1)[-1] or "?"


def _cut(text: str, n: int) -> str:
    """`text` in at most `n` characters; a cut one ends in `…` (the page shows it as it is)."""
    return text if len(text) <= n else text[: n - 1] + "…"


def _bounded(value: Any, n: int) -> Any:
    """`value` with every string in it, keys too, cut to `n` characters: the page's last guard, so
    that a field nobody thought to cut cannot make the page as large as the data."""
    if isinstance(value, str):
        return _cut(value, n)
    if isinstance(value, dict):
        return {_bounded(k, n): _bounded(v, n) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bounded(v, n) for v in value]
    return value


class RunFiles:
    """What the page may read: files under the run folder (CONVENTIONS 14).

    dedup's stats.json names its inputs and a recipe names its sources' folders: those are data, so a
    path found there is read only when it resolves (symbolic links followed) under the run folder, or
    under a folder a link at the run's top level points to (the run's own layout: the browser test's
    run links its extract and scores from another run; a link is laid out by whoever made the folder,
    it is not a name in a file). A URL is never under a local folder. Anything else is not read and is
    counted (`refused`, shown on the page), and the view it fed says so.
    """

    def __init__(self, run: Path) -> None:
        self.roots = [os.path.realpath(run)]
        if run.is_dir():
            self.roots += [os.path.realpath(e) for e in sorted(run.iterdir()) if e.is_symlink()]
        self.refused: list[str] = []

    def allows(self, path: str | Path, what: str) -> bool:
        """Whether `path` (named by `what`, e.g. "dedup/stats.json inputs") may be read; counts it if not."""
        text = str(path)
        if "://" not in text and "\0" not in text:
            real = os.path.realpath(text)
            if any(os.path.commonpath([root, real]) == root for root in self.roots):
                return True
        self.refused.append(f"{what}: {text}")
        return False


def _batches(files: Iterable[Path | str], want: Iterable[str]) -> Iterator[tuple[Any, list[str]]]:
    """(record batch, its columns) of each file, reading only the wanted columns it has."""
    import pyarrow.parquet as pq

    want = list(want)
    for f in files:
        pf = pq.ParquetFile(f)
        cols = [c for c in want if c in pf.schema_arrow.names]
        if cols:
            for b in pf.iter_batches(columns=cols, batch_size=8192):
                yield b, cols


def _fetch(files: Iterable[Path | str], ids: set[str], columns: Iterable[str]) -> dict[str, dict]:
    """Rows by id (the first of each), with the wanted columns a file has: only row groups that hold
    a wanted id are read beyond their `id` column."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out: dict[str, dict] = {}
    if not ids:
        return out
    wanted = pa.array(sorted(ids), pa.string())
    for f in files:
        pf = pq.ParquetFile(f)
        names = pf.schema_arrow.names
        if "id" not in names:
            continue
        cols = list(dict.fromkeys(["id", *(c for c in columns if c in names)]))
        for rg in range(pf.num_row_groups):
            idcol = pf.read_row_group(rg, columns=["id"]).column(0)
            hit = pc.is_in(idcol, value_set=wanted)
            if not pc.any(hit).as_py():
                continue
            t = pf.read_row_group(rg, columns=cols).filter(hit)
            for row in t.to_pylist():
                out.setdefault(row["id"], row)
        if len(out) >= len(ids):
            break
    return out


def _float_columns(files: list[Path]) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols: dict[str, None] = {}
    for f in files:
        for fld in pq.read_schema(f):
            if pa.types.is_floating(fld.type) and fld.name not in ("warc_offset",):
                cols[fld.name] = None
    return list(cols)


def _num(v: Any) -> float | None:
    """A JSON-safe number: NaN and infinities become None (JSON has neither)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


class Docs:
    """The page's documents, each once, referred to by index from every view."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.rows: list[dict[str, Any]] = []
        self.index: dict[str, int] = {}

    def add(self, row: dict[str, Any], text: str | None = None, scores: dict[str, Any] | None = None) -> int:
        key = row.get("id") or f"{row.get('warc_file')}:{row.get('warc_offset')}"
        n = self.limits.field_chars
        key = (
            key
            if len(key) <= n
            else "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        )
        scores = {_cut(k, n): v for k, v in (scores or {}).items()}
        if key in self.index:
            i = self.index[key]
            d = self.rows[i]
            if scores:
                d["scores"].update({k: v for k, v in scores.items() if v is not None})
            if text and len(text) > d["n"]:
                d["text"], d["n"] = text[: self.limits.text_chars], len(text)
            return i
        t = text or ""
        self.index[key] = len(self.rows)
        self.rows.append(
            {
                "id": _cut(row.get("id") or key, n),
                "url": _cut(row.get("url") or "", n),
                "title": _cut(row.get("title") or "", n),
                "lang": _cut(row.get("lang") or "?", n),
                "src": _cut(_source(row.get("warc_file")), n),
                "text": t[: self.limits.text_chars],
                "n": len(t),  # the whole text's length: the page says when it shows less
                "scores": {k: v for k, v in (scores or {}).items() if v is not None},
            }
        )
        return self.index[key]


# ---------------------------------------------------------------- (a) dropped documents


def _allot(cells: dict[Any, BottomK], budget: int) -> dict[Any, int]:
    """How many of each cell's sample the page keeps: the largest common cap c with sum(min(n, c)) within
    `budget` (water-filling: small cells keep all, large ones the same share). When there are more cells
    than `budget`, one each from the cells with the most documents seen (the rest are counted, not shown)."""
    sizes = {c: len(s.heap) for c, s in cells.items() if s.heap}
    if len(sizes) > budget:
        return dict.fromkeys(sorted(sizes, key=lambda c: (-cells[c].seen, str(c)))[:budget], 1)
    lo, hi = 1, max(sizes.values(), default=1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in sizes.values()) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return {c: min(n, lo) for c, n in sizes.items()}


EVIDENCE = ("metric", "value", "threshold", "op")


def dropped(run: Path, docs: Docs, limits: Limits, inputs: list[Path | str]) -> dict[str, Any]:
    """Sampled drops per (stage, reason, language) from extract's rejected/ and dedup's removed/.

    Both are streamed batch by batch into the cells' bottom-k samples, so at most `per_cell` rows of a
    cell are held however large either folder is; only the sampled dedup rows' text, title and source
    are then read from dedup's inputs."""
    n = limits.field_chars
    cells: dict[tuple[str, str, str], BottomK] = defaultdict(lambda: BottomK(limits.per_cell))

    def offer(key: str, row: dict[str, Any]) -> None:
        # names from the data are cut before they are held (a cell key, a URL of a megabyte)
        for k in ("stage", "reason", "lang", "detail", "metric", "op", "url", "title", "partner_id"):
            if isinstance(row.get(k), str):
                row[k] = _cut(row[k], n)
        cells[(row.get("stage") or "?", row.get("reason") or "?", row.get("lang") or "?")].offer(key, row)

    rej = run / "extract" / "rejected"
    want = ("id", "url", "title", "warc_file", "warc_offset", "stage", "reason", "detail", "lang")
    want += ("lang_score", "snippet", "text", *EVIDENCE)
    for batch, _ in _batches(sorted(rej.glob("*.parquet")) if rej.is_dir() else [], want):
        for r in batch.to_pylist():
            offer(r.get("id") or f"{r.get('warc_file')}:{r.get('warc_offset')}", r)
    # dedup's removed/ (dedup/removed.py): its own `lang` (the input's) places a row in its cell
    removed = run / "dedup" / "removed"
    rwant = ("id", "url", "stage", "reason", "partner_id", "cluster_id", "lang", "snippet", *EVIDENCE)
    for batch, _ in _batches(_parquet_files(removed) if removed.is_dir() else [], rwant):
        for r in batch.to_pylist():
            row = {k: v for k, v in r.items() if v is not None}
            row["stage"] = f"dedup:{r.get('stage')}"
            row["detail"] = f"duplicate of {_cut(r['partner_id'], n)}" if r.get("partner_id") else ""
            if r.get("cluster_id"):  # dedup's removed/ since issue 46 (dedup/removed.py)
                row["detail"] += f" in cluster {_cut(r['cluster_id'], n)}"
            row["dedup"] = True
            offer(r["id"], row)
    allot = _allot(cells, limits.max_dropped)
    chosen = {c: sample.items()[: allot.get(c, 0)] for c, sample in sorted(cells.items())}
    dedup_ids = {r["id"] for rows in chosen.values() for r in rows if r.get("dedup")}
    cols = ("id", "url", "title", "warc_file", "lang", "text")
    by_id = _fetch(inputs, dedup_ids, cols) if dedup_ids else {}
    out = []
    for (stage, reason, _lang), rows in chosen.items():
        for r in rows:
            if r.get("dedup"):  # text, title and source from the input; the language its own first
                src = by_id.get(r["id"], {})
                r = {**src, **r, "text": src.get("text"), "lang": r.get("lang") or src.get("lang")}
            text = r.get("text") or r.get("snippet") or ""
            scores = {"lang_score": _num(r.get("lang_score"))}
            i = docs.add(r, text, scores)
            ev = {k: r.get(k) for k in EVIDENCE if r.get(k) is not None}
            for k in ("value", "threshold"):
                if k in ev and _num(ev[k]) is not None:
                    ev[k] = _num(ev[k])
            out.append(
                {
                    "stage": stage,
                    "reason": reason,
                    "doc": i,
                    "detail": r.get("detail") or "",
                    "snippet": not r.get("text"),  # only the snippet was recorded (older runs)
                    **ev,
                }
            )
    counts = _drop_counts(run, n)
    return {"rows": out, "counts": counts, "cells_left_out": len([c for c in cells if c not in allot])}


def _drop_counts(run: Path, n: int) -> dict[str, dict[str, int]]:
    """Every drop counted per stage and reason (the stats files; the sample is only a sample); names
    cut to `n` characters (two cut alike are summed)."""
    out: dict[str, dict[str, int]] = {}
    for job, prefix in (("extract", ""), ("dedup", "dedup:")):
        stats = _json(run / job / "stats.json") or {}
        stages = stats.get("stages", [])
        items = stages if isinstance(stages, list) else [{"stage": k, **v} for k, v in stages.items()]
        for s in items:
            for reason, c in (s.get("drops") or {}).items():
                cell = out.setdefault(_cut(f"{prefix}{s['stage']}", n), {})
                cell[_cut(reason, n)] = cell.get(_cut(reason, n), 0) + int(c)
    return out


def _dedup_inputs(run: Path, files: RunFiles) -> list[Path | str]:
    """The documents dedup read (its stats name them) that lie under the run folder, else extract's."""
    stats = _json(run / "dedup" / "stats.json") or {}
    named = [f for f in stats.get("inputs", []) if isinstance(f, str)]
    inside = [f for f in named if files.allows(f, "dedup/stats.json inputs") and Path(f).is_file()]
    return inside or _parquet_files(run / "extract" / "docs")


def kept_beside(run: Path, docs: Docs, limits: Limits, cells_wanted: set[str]) -> dict[str, list[int]]:
    """'source|lang' -> a few kept documents (the run's final documents: scored, dedup, else extract),
    for the cells of the dropped documents on the page only (a crawl has more cells than a page)."""
    folder = next(
        (run / n / "docs" for n in ("scored", "dedup", "extract") if (run / n / "docs").is_dir()), None
    )
    if folder is None:
        return {}
    files = _parquet_files(folder)
    cells: dict[str, BottomK] = defaultdict(lambda: BottomK(limits.kept_per_cell))
    for b, _ in _batches(files, ("id", "warc_file", "lang", "drop_reason")):
        d = b.to_pydict()
        none = [None] * b.num_rows
        for i, wf, lang, dropped_as in zip(
            d["id"], d.get("warc_file", none), d.get("lang", none), d.get("drop_reason", none)
        ):
            n = limits.field_chars  # as Docs.add cuts them: `cells_wanted` is made of its rows
            cell = f"{_cut(_source(wf), n)}|{_cut(lang or '?', n)}"
            # annotate mode keeps every document, the dropped ones marked (`drop_reason`): not those
            if cell in cells_wanted and dropped_as is None:
                cells[cell].offer(i, i)
    allot = _allot(cells, limits.max_kept)
    ids = {i for c, s in cells.items() for i in s.items()[: allot.get(c, 0)]}
    rows = _fetch(files, ids, _DOC_COLUMNS + tuple(_float_columns(files)))
    return {
        cell: [_add_doc(docs, rows[i]) for i in s.items()[: allot.get(cell, 0)] if i in rows]
        for cell, s in sorted(cells.items())
    }


# `evidence`: annotate mode's map of what each rule measured on a document (curation/schema.py)
_DOC_COLUMNS = ("id", "url", "title", "warc_file", "lang", "text", "fetch_time", "quality", "evidence")


def _add_doc(docs: Docs, row: dict[str, Any]) -> int:
    scores = {k: _num(v) for k, v in row.items() if isinstance(v, float)}
    i = docs.add(row, row.get("text"), scores)
    ev = row.get("evidence")
    if ev:  # a map reads back as (key, value) pairs
        docs.rows[i]["evidence"] = {k: _num(v) for k, v in (ev.items() if isinstance(ev, dict) else ev)}
    return i


# ---------------------------------------------------------------- (b) duplicate clusters

_BANDS = ((2, 2), (3, 5), (6, 20), (21, None))
_POLICY = {
    "best": "highest quality, then the most bytes, then the earliest fetch, then the smallest id",
    "first": "the earliest fetch (crawl), then the smallest id",
    "last": "the latest fetch (crawl), then the smallest id",
    "drop_cluster": "none: the whole cluster is removed",
}
_STAGE_POLICY = {"exact": "exact", "url": "url", "cluster": "cluster"}


def clusters(run: Path, docs: Docs, limits: Limits, inputs: list[Path | str]) -> dict[str, Any]:
    """Sampled duplicate groups: a kept document and the documents removed in its place.

    dedup records membership as decisions (removed_ids/: every removed id with `partner_id`, the id
    kept in its place); a member removed as an exact copy of a document that the cluster stage removed
    in turn points at that document, so partners are followed (two hops) to the one kept.
    """
    kept_dir, ids_dir = run / "dedup" / "docs", run / "dedup" / "removed_ids"
    if not kept_dir.is_dir() or not ids_dir.is_dir():
        return {"clusters": [], "note": "no dedup output (dedup/docs and dedup/removed_ids)"}
    cfg = (_json(run / "dedup" / "_config.json") or {}).get("config", {})
    bands = [BottomK(limits.clusters_per_band) for _ in _BANDS]
    kept_files = _parquet_files(kept_dir)
    for b, _ in _batches(kept_files, ("id", "dup_cluster_size")):
        d = b.to_pydict()
        for i, size in zip(d["id"], d.get("dup_cluster_size", [None] * b.num_rows)):
            if size and size > 1:
                band = next(
                    j for j, (lo, hi) in enumerate(_BANDS) if size >= lo and (hi is None or size <= hi)
                )
                bands[band].offer(i, (i, int(size)))
    chosen = {i: size for bk in bands for i, size in bk.items()}
    id_files = _parquet_files(ids_dir)
    # partner -> [(member id, stage, reason)], two hops from the kept ids
    members: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    frontier, owner = set(chosen), {i: i for i in chosen}
    for _hop in range(2):
        found: dict[str, str] = {}
        for b, _ in _batches(id_files, ("id", "stage", "reason", "partner_id")):
            for r in b.to_pylist():
                p = r.get("partner_id")
                if p in frontier and r["id"] not in owner:
                    root = owner[p]
                    if len(members[root]) < limits.members:
                        members[root].append((r["id"], r.get("stage") or "", r.get("reason") or ""))
                    found[r["id"]] = root
        owner.update(found)
        frontier = set(found)
        if not frontier:
            break
    want = set(chosen) | {m for ms in members.values() for m, _, _ in ms}
    cols = (*_DOC_COLUMNS, "crawl", "lang_score")
    rows = _fetch(inputs, want, cols)
    kept_rows = _fetch(kept_files, set(chosen), ("id", "dup_cluster", "dup_cluster_size", "quality"))
    out = []
    for kid, size in sorted(chosen.items(), key=lambda kv: (-kv[1], kv[0])):
        if kid not in rows:
            continue
        ms = []
        for mid, stage, reason in members.get(kid, []):
            if mid in rows:
                ms.append(
                    {
                        "doc": _member(docs, rows[mid]),
                        "stage": _cut(stage, limits.field_chars),
                        "reason": _cut(reason, limits.field_chars),
                    }
                )
        if not ms:
            continue
        # one line per stage that removed a member here (an exact copy and near copies: two policies)
        why = "; ".join(
            _cut(_why(stage, cfg), 2 * limits.field_chars) for stage in dict.fromkeys(m["stage"] for m in ms)
        )
        out.append(
            {
                "id": _cut((kept_rows.get(kid) or {}).get("dup_cluster") or kid, limits.field_chars),
                "size": size,
                "kept": _member(docs, rows[kid]),
                "members": ms,
                "why": why,
            }
        )
    return {"clusters": out, "bands": [f"{lo}-{hi or '…'}" for lo, hi in _BANDS]}


def _why(stage: str, cfg: dict[str, Any]) -> str:
    policy = cfg.get(_STAGE_POLICY.get(stage, "cluster"), {}).get("keep")
    if policy is None:
        return f"kept by the `{stage}` stage (no dedup/_config.json: policy unknown)"
    return f"kept by the `{stage}` stage's keep policy `{policy}`: {_POLICY.get(policy, policy)}"


def _member(docs: Docs, row: dict[str, Any]) -> int:
    text = row.get("text") or ""
    scores = {k: _num(row.get(k)) for k in ("quality", "lang_score")}
    scores["bytes"] = float(len(text.encode("utf-8", "surrogatepass")))
    i = docs.add(row, text, scores)
    ft = row.get("fetch_time")
    if ft is not None:
        docs.rows[i]["fetch"] = str(ft)[:19]
    return i


# ---------------------------------------------------------------- (c) score histograms


def _score_folder(run: Path) -> Path | None:
    return next(
        (run / n / "docs" for n in ("scored", "dedup", "extract") if (run / n / "docs").is_dir()), None
    )


def histograms(run: Path, docs: Docs, limits: Limits) -> dict[str, Any]:
    """Per float column: bins over the range of its finite values (log10 bins where it spans > 3
    decades of positives), counts overall and per language, and a sample of documents per bin.
    NaN and ±inf are counted apart (`nonfinite`), never binned (report/histogram.py: why)."""
    import numpy as np

    folder = _score_folder(run)
    if folder is None:
        return {}
    files = _parquet_files(folder)
    cols = _float_columns(files)
    lo = dict.fromkeys(cols, math.inf)
    hi = dict.fromkeys(cols, -math.inf)
    nonfinite = dict.fromkeys(cols, 0)
    for b, have in _batches(files, cols):
        for c in have:
            x, bad, _nulls = finite_values(b.column(have.index(c)).to_pylist())
            nonfinite[c] += bad
            if x.size:
                lo[c], hi[c] = min(lo[c], float(x.min())), max(hi[c], float(x.max()))
    out: dict[str, Any] = {}
    spec: dict[str, tuple[bool, np.ndarray]] = {}
    for c in cols:
        if lo[c] > hi[c]:  # no finite value at all
            continue
        # decades from the logs, not hi / lo (which overflows for 1e300 / 1e-300)
        log = lo[c] > 0 and math.log10(hi[c]) - math.log10(lo[c]) > 3
        a, z = (math.log10(lo[c]), math.log10(hi[c])) if log else (lo[c], hi[c])
        spec[c] = (log, bin_edges(a, z, limits.bins))
    counts = {c: np.zeros(limits.bins, np.int64) for c in spec}
    by_lang: dict[str, dict[str, np.ndarray]] = {c: {} for c in spec}
    samples = {c: [BottomK(limits.per_bin) for _ in range(limits.bins)] for c in spec}
    lang_total: dict[str, int] = defaultdict(int)
    for b, _ in _batches(files, ("id", "lang", *spec)):
        d = b.to_pydict()
        langs = [_cut(x or "?", limits.field_chars) for x in d.get("lang", ["?"] * b.num_rows)]
        for lang in langs:
            lang_total[lang] += 1
        for c in spec:
            if c not in d:
                continue
            log, edges = spec[c]
            x = np.array([np.nan if v is None else v for v in d[c]], dtype=np.float64)
            ok = np.isfinite(x)
            xs = np.log10(np.where(ok, x, 1.0)) if log else np.where(ok, x, 0.0)
            idx = bin_index(xs, edges)
            for j in np.nonzero(ok)[0]:
                k = int(idx[j])
                counts[c][k] += 1
                by_lang[c].setdefault(langs[j], np.zeros(limits.bins, np.int64))[k] += 1
                samples[c][k].offer(d["id"][j], d["id"][j])
    top = [lang for lang, _ in sorted(lang_total.items(), key=lambda kv: -kv[1])[: limits.max_langs]]
    want = {i for c in samples for s in samples[c] for i in s.items()}
    rows = _fetch(files, want, (*_DOC_COLUMNS, *spec))
    for c, (log, edges) in spec.items():
        langs = {lang: v.tolist() for lang, v in by_lang[c].items() if lang in top}
        other = sum((v for lang, v in by_lang[c].items() if lang not in top), np.zeros(limits.bins, np.int64))
        if other.any():
            langs["other"] = other.tolist()
        with np.errstate(over="ignore"):  # 10**308.25 may round past the float limit: clipped
            shown = np.clip(10.0**edges, lo[c], hi[c]) if log else edges
        shown = [float(e) for e in shown]
        if (
            log
        ):  # exact ends (10**log10(x) is not always x); linear ends are exact, or widened around one value
            shown[0], shown[-1] = float(lo[c]), float(hi[c])
        out[_cut(c, limits.field_chars)] = {
            "log": log,
            "edges": shown,
            "counts": counts[c].tolist(),
            "nonfinite": nonfinite[c],
            "langs": langs,
            "docs": [[_add_doc(docs, rows[i]) for i in s.items() if i in rows] for s in samples[c]],
        }
    return out


# ---------------------------------------------------------------- (d) selectors


def selectors(run: Path, docs: Docs, limits: Limits, allowed: RunFiles) -> dict[str, Any]:
    """For each recipe source and each numeric comparison of its selection (percentiles as resolved):
    the documents just inside and just outside the threshold, among those passing its other selectors.
    A source's docs and shards folders are read only under the run folder (`RunFiles`); its
    manifest only through tokens/manifest.py's checked reader."""
    from mixtures.recipe import Recipe

    rp = recipe_path(run)
    if rp is None:
        return {"sources": [], "note": "no recipe (RUN/recipe.yaml)"}
    recipe = Recipe.load(rp)
    out = [_source_cuts(name, src, docs, limits, allowed) for name, src in recipe.sources.items()]
    return {"sources": out, "recipe": str(rp)}


def _source_cuts(name: str, src: Source, docs: Docs, limits: Limits, allowed: RunFiles) -> dict[str, Any]:
    """One recipe source's entry: its selection as given and as resolved, and a cut per numeric comparison
    (or a note saying why it has none)."""
    entry: dict[str, Any] = {"source": name, "select": src.select_spec(), "cuts": []}
    if src.docs is None or not src.select:
        entry["note"] = "no selection" if src.docs is not None else "no docs folder in the recipe"
        return entry
    if not allowed.allows(src.docs, f"recipe sources.{name}.docs"):
        entry["note"] = f"{src.docs}: not under the run folder, not read"
        return entry
    files = _parquet_files(Path(src.docs))
    if not files:
        entry["note"] = f"{src.docs}: no documents"
        return entry
    resolved = _resolved_select(name, src, files, allowed, entry)
    for k, sel in enumerate(resolved):
        if sel.op not in (">=", ">", "<=", "<") or _num(sel.value) is None:
            continue
        others = tuple(s for j, s in enumerate(resolved) if j != k)
        entry["cuts"].append(_cut_at(name, src, sel, others, files, docs, limits))
    return entry


def _resolved_select(
    name: str, src: Source, files: list[Path], allowed: RunFiles, entry: dict[str, Any]
) -> list[Selector]:
    """A source's selectors with percentiles resolved: by its shards' manifest where that records them,
    else over these documents (else as the recipe gives them); `entry` gains resolved, resolved_by and,
    when the manifest was not read, why."""
    from core.selectors import parse_selectors, resolve_percentiles

    manifest, how_not = _source_manifest(src.shards, name, allowed)
    resolved, how = src.select, "the recipe"
    if how_not:
        entry["manifest"] = how_not
    if manifest and manifest.get("resolved_select"):
        resolved, how = parse_selectors(manifest["resolved_select"]), "the shards' manifest"
    elif any(s.is_percentile for s in src.select):
        resolved, how = (
            resolve_percentiles(src.select, [str(f) for f in files], name)[0],
            "these documents",
        )
    entry["resolved"] = {s.column: s.to_spec() for s in resolved}
    entry["resolved_by"] = how
    return resolved


def _cut_at(
    name: str,
    src: Source,
    sel: Selector,
    others: tuple[Selector, ...],
    files: list[Path],
    docs: Docs,
    limits: Limits,
) -> dict[str, Any]:
    """One comparison's cut: its threshold and the documents nearest it on either side, nearest first."""
    t = float(sel.value)
    inside, outside = _nearest_to(name, sel, others, t, files, limits)
    ids = {i for _, i, _ in inside + outside}
    rows = _fetch(files, ids, (*_DOC_COLUMNS, sel.column))

    def nearest_first(heap: list, rows: dict = rows) -> list[int]:
        return [_add_doc(docs, rows[i]) for _, i, _ in sorted(heap, reverse=True) if i in rows]

    return {
        "column": sel.column,
        "op": sel.op,
        "threshold": t,
        "given": src.select_spec().get(sel.column),
        "inside": nearest_first(inside),
        "outside": nearest_first(outside),
    }


def _nearest_to(
    name: str, sel: Selector, others: tuple[Selector, ...], t: float, files: list[Path], limits: Limits
) -> tuple[list, list]:
    """Heaps of (-distance, id, value) of the `limits.boundary` documents nearest threshold `t` that
    pass `sel` (inside) and that fail it (outside), among those passing the `others`."""
    import pyarrow.compute as pc

    from core.selectors import selection_mask

    inside, outside = [], []  # heaps of (-distance, id, value): the nearest kept
    cols = ("id", sel.column, *(s.column for s in others))
    for b, have in _batches(files, cols):
        if sel.column not in have:
            continue
        import pyarrow as pa

        table = pa.Table.from_batches([b])
        mask = selection_mask(table, others, source=name)[0] if others else None
        if mask is not None:
            table = table.filter(mask)
        table = table.filter(pc.is_valid(table[sel.column]))
        for i, v in zip(table["id"].to_pylist(), table[sel.column].to_pylist()):
            if not math.isfinite(v):
                continue
            passes = {">=": v >= t, ">": v > t, "<=": v <= t, "<": v < t}[sel.op]
            heap = inside if passes else outside
            item = (-abs(v - t), i, v)
            if len(heap) < limits.boundary:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
    return inside, outside


def _source_manifest(shards: Path | str | None, name: str, allowed: RunFiles) -> tuple[dict | None, str]:
    """(the checked manifest.json of a source's shards folder, or None; why not, when it was not read)."""
    from tokens.manifest import ManifestError, read_manifest_file

    if not isinstance(shards, Path):  # none, or an object-store URI: never under a local run folder
        if shards is not None:
            allowed.allows(shards, f"recipe sources.{name}.shards")
        return None, "" if shards is None else f"{shards}: not under the run folder, not read"
    path = shards / "manifest.json"
    if not path.is_file():
        return None, ""
    if not allowed.allows(path, f"recipe sources.{name}.shards"):
        return None, f"{path}: not under the run folder, not read"
    try:
        return read_manifest_file(path).model_dump(), ""
    except ManifestError as e:  # the message names the file and the field
        return None, f"refused: {e}"


# ---------------------------------------------------------------- the page


def collect_browse(run: str | Path, limits: Limits = Limits()) -> dict[str, Any]:
    """Everything the page shows, as one JSON-able dict."""
    run = Path(run)
    docs = Docs(limits)
    data: dict[str, Any] = {"run": str(run), "limits": {k: getattr(limits, k) for k in Limits.__slots__}}
    files = RunFiles(run)
    inputs = _dedup_inputs(run, files)  # once: both views read them, each refusal counted once
    data["dropped"] = dropped(run, docs, limits, inputs)
    wanted = {f"{docs.rows[r['doc']]['src']}|{docs.rows[r['doc']]['lang']}" for r in data["dropped"]["rows"]}
    data["kept"] = kept_beside(run, docs, limits, wanted)
    data["clusters"] = clusters(run, docs, limits, inputs)
    data["scores"] = histograms(run, docs, limits)
    data["selectors"] = selectors(run, docs, limits, files)
    data["docs"] = docs.rows
    data["refused"] = {"count": len(files.refused), "first": files.refused[:20]}
    return _bounded(data, limits.text_chars)


def page(data: dict[str, Any]) -> str:
    """browse.html: the template with `data` in its JSON block. Every `<`, `>` and `&` of the JSON is a
    \\u escape, so no string in it can end the block (`</script>`) or open a comment (`<!--`)."""
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    blob = blob.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return TEMPLATE.replace("/*DATA*/", blob, 1)


def embedded_data(html: str) -> dict[str, Any]:
    """The data a browse.html embeds (for tests and scripts that read a page back)."""
    start = html.index('id="browse-data">') + len('id="browse-data">')
    # the checked reader: a page read back is a file (page() writes finite JSON, a few MB)
    return loads_checked(html[start : html.index("</script>", start)], "browse.html", max_bytes=1 << 30)


def write_browse(run: str | Path, out: str | Path | None = None, limits: Limits = Limits()) -> Path:
    """Collect `run` and write `out/browse.html` (default: beside the run's report); its path."""
    out = Path(out or run)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "browse.html"
    tmp = target.with_name(".browse.html.tmp")
    tmp.write_text(page(collect_browse(run, limits)), encoding="utf-8")
    tmp.replace(target)  # a reader never sees half a page
    return target
