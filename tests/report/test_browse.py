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
    # a manifest as tokenize writes one (read by the checked reader: tokens/manifest.py), no shards
    manifest = {
        "source": "hq",
        "files": [],
        "tokenizer": {},
        "tokens": 0,
        "resolved_select": {"q": ">= 0.45"},
    }
    (shards / "manifest.json").write_text(json.dumps(manifest))
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


def _all_strings(value):
    """Every string of the embedded data, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _all_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _all_strings(v)


def test_dedups_removed_sample_is_streamed_into_the_cells(tmp_path, data_dir):
    """dedup's removed/ of 30,000 rows (2 KB URLs, real snippets) in 40 cells (stage, reason, language):
    each cell keeps the bottom-k of its ids by the extract's own sample key, and what the page holds
    while it reads them is one batch and the samples (~20 MB; all of removed/ in memory was ~90 MB)."""
    import tracemalloc

    from curation.schema import sample_key
    from testkit.neardup import real_documents

    texts = real_documents(data_dir)
    langs = [f"l{k}_Latn" for k in range(10)]
    rows = [
        {
            "id": f"r{i}",
            "url": f"https://example.org/{i}/" + "x" * 2000,
            "stage": ("exact", "cluster")[i % 2],
            "reason": ("exact_duplicate", "near_duplicate", "url_duplicate", "lines")[i % 4],
            "partner_id": f"k{i}",
            "lang": langs[i // 7 % 10],
            "snippet": texts[i % len(texts)][:500],
        }
        for i in range(30_000)
    ]
    (tmp_path / "dedup" / "removed").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "dedup" / "removed" / "part-0.parquet")
    limits = Limits()
    tracemalloc.start()
    try:
        data = collect_browse(tmp_path, limits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20, f"{peak / 2**20:.0f} MB held reading removed/"
    shown: dict = {}
    for r in data["dropped"]["rows"]:
        d = data["docs"][r["doc"]]
        shown.setdefault((r["stage"], r["reason"], d["lang"]), set()).add(d["id"])
    expected: dict = {}
    for r in rows:
        expected.setdefault((f"dedup:{r['stage']}", r["reason"], r["lang"]), []).append(r["id"])
    assert shown.keys() == expected.keys() and len(shown) == 40
    for cell, ids in expected.items():  # the cell's per_cell smallest keys: uniform, the same every run
        assert shown[cell] == set(sorted(ids, key=sample_key)[: limits.per_cell])
    doc = data["docs"][data["dropped"]["rows"][0]["doc"]]
    assert doc["text"] in {t[:500] for t in texts}  # no input to read: removed/'s snippet is shown


def test_paths_named_by_the_runs_files_are_read_only_under_it(tmp_path, data_dir):
    """dedup's stats.json and the recipe name files outside the run (absolute, `..`, a URL): none is
    read or embedded; each is counted on the page, and the views they fed say so. The run's own files,
    and a folder a link at its top level points to (the run's layout, not a name in a file), are read."""
    import json

    from testkit.neardup import real_documents

    texts = real_documents(data_dir)
    outside = tmp_path / "outside"
    (outside / "docs").mkdir(parents=True)
    secret = "OUTSIDE-THE-RUN " + texts[0]
    pq.write_table(
        pa.table({"id": ["k0", "r0"], "text": [secret, secret], "lang": ["en"] * 2, "q": [0.9, 0.1]}),
        outside / "docs" / "part-0.parquet",
    )
    (outside / "shards").mkdir()
    manifest = {"source": "hq", "files": [], "tokenizer": {}, "tokens": 0, "resolved_select": {"q": ">= 0.5"}}
    (outside / "shards" / "manifest.json").write_text(json.dumps(manifest))
    run = tmp_path / "run"
    (run / "dedup" / "removed").mkdir(parents=True)
    (run / "dedup" / "docs").mkdir()
    (run / "dedup" / "removed_ids").mkdir()
    inputs = [str(outside / "docs" / "part-0.parquet"), f"{run}/../outside/docs/part-0.parquet"]
    inputs += ["https://example.org/docs/part-0.parquet", "docs\0x"]
    (run / "dedup" / "stats.json").write_text(json.dumps({"stages": [], "counters": {}, "inputs": inputs}))
    pq.write_table(
        pa.table({"id": ["r0"], "stage": ["exact"], "reason": ["exact_duplicate"], "partner_id": ["k0"]}),
        run / "dedup" / "removed" / "part-0.parquet",
    )
    pq.write_table(
        pa.table({"id": ["k0"], "dup_cluster_size": [2]}), run / "dedup" / "docs" / "part-0.parquet"
    )
    pq.write_table(
        pa.table({"id": ["r0"], "stage": ["exact"], "reason": ["exact_duplicate"], "partner_id": ["k0"]}),
        run / "dedup" / "removed_ids" / "part-0.parquet",
    )
    linked = tmp_path / "elsewhere" / "scored"
    linked.mkdir(parents=True)
    pq.write_table(
        pa.table({"id": ["s0", "s1"], "text": texts[1:3], "lang": ["en"] * 2, "q": [0.2, 0.7]}),
        linked / "part-0.parquet",
    )
    (run / "scored").symlink_to(linked)
    (run / "recipe.yaml").write_text(
        "name: t\ntotal_tokens: 1000\nsources:\n"
        f"  hq: {{shards: {outside / 'shards'}, docs: {outside / 'docs'}, select: {{q: '>= 0.5'}}}}\n"
        "  up: {docs: ../outside/docs, select: {q: '>= 0.5'}}\n"
        "  mine: {docs: scored, select: {q: '>= 0.5'}}\n"
        "phases:\n  - {name: main, share: 1.0, weights: {hq: 1, up: 1, mine: 1}}\n"
    )
    html = write_browse(run).read_text()
    assert "OUTSIDE-THE-RUN" not in html
    data = embedded_data(html)
    assert data["refused"]["count"] == 6  # four inputs, two recipe folders
    assert all(("dedup/stats.json inputs" in r or "recipe sources." in r) for r in data["refused"]["first"])
    srcs = {s["source"]: s for s in data["selectors"]["sources"]}
    assert (
        "not under the run folder" in srcs["hq"]["note"] and "not under the run folder" in srcs["up"]["note"]
    )
    (cut,) = srcs["mine"]["cuts"]  # the linked folder is the run's own
    assert [data["docs"][i]["id"] for i in cut["inside"]] == ["s1"]
    (row,) = data["dropped"]["rows"]  # the removal is shown, without the outside text
    assert row["stage"] == "dedup:exact" and data["docs"][row["doc"]]["text"] == ""


def test_every_string_from_the_data_is_cut(tmp_path):
    """A megabyte in every field a page shows (URL, title, id, language, source, stage, reason,
    detail, metric, cluster id, a score column's name): the page stays small, each name is cut to
    field_chars with a visible `…`, no string of it is longer than text_chars, and the kept pages of
    a long (source, language) cell are still found beside its drops."""
    big = "\u00e9" * 1_000_000
    limits = Limits()
    _rejected(
        tmp_path,
        [
            {
                "id": "a" + big,
                "url": "https://example.org/" + big,
                "title": "t" + big,
                "warc_file": "w" + big,
                "warc_offset": 1,
                "stage": "filter:" + big,
                "reason": "r" + big,
                "detail": "d" + big,
                "lang": "l" + big,
                "snippet": "s" + big,
                "metric": "m" + big,
                "value": 1.0,
                "threshold": 2.0,
                "op": "<" + big,
            }
        ],
    )
    (tmp_path / "extract" / "docs").mkdir()
    pq.write_table(
        pa.table(
            {
                "id": ["k" + big],
                "url": ["https://example.org/k" + big],
                "title": ["kt" + big],
                "warc_file": ["w" + big],
                "lang": ["l" + big],
                "text": ["a kept page"],
                "q" + big: [0.5],
            }
        ),
        tmp_path / "extract" / "docs" / "part-0.parquet",
    )
    path = write_browse(tmp_path, limits=limits)
    assert path.stat().st_size < 200_000
    data = embedded_data(path.read_text())
    assert max(len(s) for s in _all_strings(data)) <= limits.text_chars
    for d in data["docs"]:
        for k in ("id", "url", "title", "lang", "src"):
            assert len(d[k]) <= limits.field_chars and d[k].endswith("…"), k
    (row,) = data["dropped"]["rows"]
    for k in ("stage", "reason", "detail", "metric", "op"):
        assert len(row[k]) <= limits.field_chars and row[k].endswith("…"), k
    (kept,) = data["kept"].values()
    assert data["docs"][kept[0]]["text"] == "a kept page"
    (col,) = data["scores"]
    assert len(col) <= limits.field_chars and col.startswith("q")
