"""report/browse.py without a browser: what the page embeds, how it is escaped, and that it is bounded.

The views themselves are clicked through in Chromium by test_browse_browser.py.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.parquet as pq

from curation.schema import REJECTED_SCHEMA
from report.browse import BottomK, Limits, _allot, collect_browse, embedded_data, page, write_browse


def _rejected(run, rows, schema=None):
    (run / "extract" / "rejected").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), run / "extract" / "rejected" / "u.parquet")


def test_page_escapes_what_would_end_its_data_block():
    """No string of the data can close the JSON block or open a comment in it; it reads back equal."""
    hostile = "</script><script>alert(1)</script><!-- & \u2028 </SCRIPT >"
    data = {"run": hostile, "docs": [{"text": hostile, "url": "javascript:alert(1)"}]}
    html = page(data)
    block = html[html.index('id="browse-data">') : html.index("</script>", html.index('id="browse-data">'))]
    assert "<" not in block.removeprefix('id="browse-data">') and "&" not in block
    assert embedded_data(html) == data
    # the page's own script and style only, nothing loads from anywhere
    assert "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:" in html
    assert not re.search(r"\b(src|href)=\"(?!data:)", html)
    assert "innerHTML" not in html and "insertAdjacentHTML" not in html and "document.write" not in html


def test_bottom_k_is_a_bounded_reproducible_sample():
    a, b = BottomK(10), BottomK(10)
    for i in range(5000):
        a.offer(f"doc-{i}", i)
    for i in reversed(range(5000)):  # another order: the same sample
        b.offer(f"doc-{i}", i)
    assert len(a.items()) == 10 and sorted(a.items()) == sorted(b.items())
    assert a.seen == 5000
    # roughly uniform: not the first or last ids
    assert max(a.items()) > 500 and min(a.items()) < 4500


def test_allot_caps_cells_to_the_budget():
    def cell(n, seen=None):
        bk = BottomK(100)
        for i in range(n):
            bk.offer(str(i))
        bk.seen = seen or n
        return bk

    cells = {"a": cell(100), "b": cell(5), "c": cell(40)}
    got = _allot(cells, 60)
    assert got["b"] == 5 and got["a"] == got["c"] <= 28  # small cells whole, the others one share
    assert sum(got.values()) <= 60 < sum(min(len(c.heap), got["a"] + 1) for c in cells.values())
    # more cells than the budget: one each from the cells that saw the most documents
    many = {k: cell(2, seen=k + 1) for k in range(10)}
    assert _allot(many, 3) == {9: 1, 8: 1, 7: 1}


def test_evidence_columns_are_read_when_present_and_detail_otherwise(tmp_path):
    """Older runs (REJECTED_SCHEMA: detail and a snippet) and newer ones (metric, value, threshold and a
    bounded text) both give rows; only the newer carry structured evidence."""
    old = tmp_path / "old"
    _rejected(
        old,
        [
            {
                "id": "a",
                "stage": "filter:g",
                "reason": "g:short",
                "detail": "5 words < 50",
                "lang": "eng_Latn",
                "snippet": "Five words and no more",
                "warc_file": "w.warc.gz",
                "warc_offset": 1,
            }
        ],
        REJECTED_SCHEMA,
    )
    (row,) = collect_browse(old)["dropped"]["rows"]
    assert row["snippet"] is True and row["detail"] == "5 words < 50" and "metric" not in row
    new = tmp_path / "new"
    _rejected(
        new,
        [
            {
                "id": "a",
                "stage": "filter:g",
                "reason": "g:top_2_gram",
                "detail": "",
                "lang": "eng_Latn",
                "snippet": "x",
                "text": "the whole text " * 10,
                "metric": "top_2_gram_share",
                "value": 0.31,
                "threshold": 0.2,
                "warc_file": "w.warc.gz",
                "warc_offset": 1,
            }
        ],
    )
    data = collect_browse(new)
    (row,) = data["dropped"]["rows"]
    assert row["snippet"] is False
    assert (row["metric"], row["value"], row["threshold"]) == ("top_2_gram_share", 0.31, 0.2)
    assert data["docs"][row["doc"]]["text"] == "the whole text " * 10


def test_page_stays_small_for_a_large_run(tmp_path, data_dir):
    """20,000 dropped documents of real text in 800 cells (stage, reason, language), kept ones beside:
    the page holds at most per_cell per cell and max_dropped in all, max_kept kept ones, each text cut to
    text_chars, and stays a few MB."""
    from testkit.neardup import real_documents

    texts = real_documents(data_dir)
    langs = [f"l{k:02d}_Latn" for k in range(40)]
    rows = [
        {
            "id": f"d{i}",
            "url": f"https://example.org/{i}",
            "warc_file": f"w{i % 13}.warc.gz",
            "warc_offset": i,
            "stage": f"filter:f{i % 4}",
            "reason": f"f{i % 4}:r{i % 20}",
            "detail": "",
            "lang": langs[i // 20 % 40],
            "snippet": texts[i % len(texts)][:5000],
        }
        for i in range(20_000)
    ]
    _rejected(tmp_path, rows)
    kept = [
        {k: r[k] for k in ("id", "url", "warc_file", "lang")} | {"id": f"k{r['id']}", "text": r["snippet"]}
        for r in rows
    ]
    (tmp_path / "extract" / "docs").mkdir()
    pq.write_table(pa.Table.from_pylist(kept), tmp_path / "extract" / "docs" / "part-0.parquet")
    limits = Limits()
    path = write_browse(tmp_path, limits=limits)
    data = embedded_data(path.read_text())
    drops = data["dropped"]["rows"]
    assert len(drops) <= limits.max_dropped
    cells: dict = {}
    for r in drops:
        key = (r["stage"], r["reason"], data["docs"][r["doc"]]["lang"])
        cells[key] = cells.get(key, 0) + 1
    assert len(cells) == 800 and max(cells.values()) <= limits.per_cell
    assert max(len(d["text"]) for d in data["docs"]) <= limits.text_chars
    shown_kept = {i for ids in data["kept"].values() for i in ids}
    assert 0 < len(shown_kept) <= limits.max_kept
    assert path.stat().st_size < 8_000_000


def test_kept_pages_are_the_kept_ones_with_their_evidence(tmp_path):
    """Annotate mode keeps every document and marks the dropped (`drop_reason`): only the others are
    shown as kept, each with what the rules measured on it (`evidence`)."""
    from curation.schema import EVIDENCE_TYPE

    _rejected(
        tmp_path,
        [
            {
                "id": "r",
                "stage": "filter:g",
                "reason": "g:short",
                "lang": "eng_Latn",
                "warc_file": "w.warc.gz",
                "warc_offset": 1,
                "snippet": "short",
                "metric": "words",
                "value": 3.0,
                "op": "<",
                "threshold": 50.0,
            }
        ],
    )
    docs = pa.table(
        {
            "id": ["k", "d"],
            "warc_file": ["w.warc.gz", "w.warc.gz"],
            "lang": ["eng_Latn", "eng_Latn"],
            "text": ["a kept page", "an annotated drop"],
            "drop_reason": [None, "g:short"],
            "evidence": pa.array([[("filter:g/words", 120.0)], [("filter:g/words", 3.0)]], EVIDENCE_TYPE),
        }
    )
    (tmp_path / "extract" / "docs").mkdir()
    pq.write_table(docs, tmp_path / "extract" / "docs" / "part-0.parquet")
    data = collect_browse(tmp_path)
    (kept,) = data["kept"]["w.warc.gz|eng_Latn"]
    assert data["docs"][kept]["id"] == "k"
    assert data["docs"][kept]["evidence"] == {"filter:g/words": 120.0}
    (row,) = data["dropped"]["rows"]
    assert (row["metric"], row["value"], row["op"], row["threshold"]) == ("words", 3.0, "<", 50.0)


def test_selectors_use_the_threshold_the_shards_were_made_with(tmp_path):
    """A percentile resolved when tokenized (the manifest's `resolved_select`) is the threshold shown,
    not one resolved again; the pages nearest to it on each side, nearest first."""
    import json

    (tmp_path / "scored" / "docs").mkdir(parents=True)
    vals = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    pq.write_table(
        pa.table({"id": [f"d{i}" for i in range(8)], "text": ["t"] * 8, "lang": ["eng_Latn"] * 8, "q": vals}),
        tmp_path / "scored" / "docs" / "part-0.parquet",
    )
    shards = tmp_path / "tokens" / "shards" / "hq"
    shards.mkdir(parents=True)
    (shards / "manifest.json").write_text(json.dumps({"resolved_select": {"q": ">= 0.45"}}))
    (tmp_path / "recipe.yaml").write_text(
        "name: t\ntotal_tokens: 1000\nsources:\n"
        "  hq: {shards: tokens/shards/hq, docs: scored, select: {q: 'top 50%'}}\n"
        "phases:\n  - {name: main, share: 1.0, weights: {hq: 1}}\n"
    )
    data = collect_browse(tmp_path, Limits(boundary=2))
    (src,) = data["selectors"]["sources"]
    assert src["resolved_by"] == "the shards' manifest"
    (cut,) = src["cuts"]
    assert (cut["op"], cut["threshold"], cut["given"]) == (">=", 0.45, "top 50%")
    value = [[data["docs"][i]["scores"]["q"] for i in cut[side]] for side in ("inside", "outside")]
    assert value == [[0.5, 0.6], [0.4, 0.3]]


def test_scores_spanning_decades_get_log_bins(tmp_path):
    (tmp_path / "scored" / "docs").mkdir(parents=True)
    ppl = [2.0, 20.0, 200.0, 2_000.0, 20_000.0, None]
    pq.write_table(
        pa.table({"id": list("abcdef"), "text": ["t"] * 6, "perplexity": ppl, "toxicity": [0.1] * 5 + [0.9]}),
        tmp_path / "scored" / "docs" / "part-0.parquet",
    )
    h = collect_browse(tmp_path)["scores"]
    assert h["perplexity"]["log"] and not h["toxicity"]["log"]
    assert sum(h["perplexity"]["counts"]) == 5 and sum(h["toxicity"]["counts"]) == 6
    assert h["perplexity"]["edges"][0] == 2.0 and h["perplexity"]["edges"][-1] == 20_000.0
