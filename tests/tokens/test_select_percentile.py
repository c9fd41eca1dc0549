"""`tokenize` with a percentile selector (`chars: "top 30%"`, issue 28 item 3): resolved per source on the
driver over every input file (local and `s3://`), recorded in the manifest as `resolved_select`, and the
recorded `>= t` selects exactly the same documents.

Real documents: the 218 Common Crawl pages of the DCLM human labels (../shared/data/quality), in three
Parquet files, with real columns: the human `label`, the length in characters `chars`, and `alpha`, the
share of letters in the text, left null for documents under 100 words, as a scorer leaves null what it
does not score (37 of the 218 are that short). Expected values are computed here from the JSONL with
plain Python, never by the code under test.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from core.files import doc_parquet_uris
from core.selectors import SelectorError, parse_selectors, resolve_percentiles, selection_mask
from testkit.shared_data import shared_data_dir
from tokens.job import config_fingerprint, run_tokenize
from tokens.tokenizer import TokenizerConfig, train_tokenizer

SHORT_WORDS = 100  # `alpha` is null under this many words


@pytest.fixture(scope="module")
def rows():
    path = shared_data_dir() / "quality" / "dclm_human_labels_dev.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _alpha(text: str) -> float | None:
    return None if len(text.split()) < SHORT_WORDS else sum(c.isalpha() for c in text) / len(text)


@pytest.fixture(scope="module")
def docs(rows, tmp_path_factory) -> Path:
    """A documents folder of three Parquet files (the rows in order, in thirds)."""
    root = tmp_path_factory.mktemp("dclm") / "docs"
    root.mkdir()
    cut = [0, len(rows) // 3, 2 * len(rows) // 3, len(rows)]
    for i in range(3):
        part = rows[cut[i] : cut[i + 1]]
        texts = [r["text"] for r in part]
        table = pa.table(
            {
                "id": [hashlib.sha1(t.encode()).hexdigest()[:16] for t in texts],
                "text": texts,
                "label": pa.array([r["label"] for r in part], pa.int64()),
                "chars": pa.array([len(t) for t in texts], pa.int64()),
                "alpha": pa.array([_alpha(t) for t in texts], pa.float32()),
            }
        )
        pq.write_table(table, root / f"part-{i}.parquet")
    return root


def _top(values: list, pct: float) -> tuple[int, object]:
    """(k, t): k = ceil(pct% of the values), t = the k-th highest value."""
    k = math.ceil(pct * len(values) / 100)
    return k, sorted(values, reverse=True)[k - 1]


def _kept(docs: Path, selectors) -> tuple[int, dict]:
    """Rows `selectors` keep over the folder's files, and their drop counts, added up."""
    kept, drops = 0, {}
    for f in doc_parquet_uris(docs):
        mask, d = selection_mask(pq.read_table(f), selectors, source=f)
        kept += pc.sum(mask).as_py() or 0
        for reason, n in d.items():
            drops[reason] = drops.get(reason, 0) + n
    return kept, drops


def _recipe(source: dict, base: Path):
    """A one-source, one-phase recipe drawing from `source` (a `sources:` entry)."""
    from mixtures.recipe import Recipe

    data = {
        "total_tokens": 1000,
        "bytes_per_token": 4,
        "sources": {"web": source},
        "phases": [{"name": "a", "share": 1, "weights": {"web": 1}}],
    }
    return Recipe.from_dict(data, base=base)


def test_percentile_is_of_the_documents_passing_the_other_selectors(rows, docs):
    """`{label: 1, chars: "top 30%"}` keeps 30% of the label-1 documents (DCLM's reading: a share of the
    pool that reached the classifier), not the label-1 documents among the longest 30% of all."""
    files = doc_parquet_uris(docs)
    resolved, counts = resolve_percentiles(parse_selectors({"label": 1, "chars": "top 30%"}), files, "web")
    good = [len(r["text"]) for r in rows if r["label"] == 1]
    k, t = _top(good, 30)
    assert [str(s) for s in resolved] == ["label == 1", f"chars >= {t}"]
    c = counts["chars"]
    # every document read, the 120 labelled 1 ranked (none null or NaN)
    want = {"rows": 218, "passing_other_selectors": 120, "ranked": 120, "null": 0, "nan": 0}
    assert {key: c[key] for key in want} == want
    selected = sum(v >= t for v in good)
    assert (c["target"], c["selected"], c["ties"]) == (k, selected, selected - k)
    # Share of the label-1 documents: 30%, up to one row of rounding (k = ceil) and the rows tied at t.
    assert 0.30 <= selected / len(good) < 0.30 + (1 + c["ties"]) / len(good)
    assert _kept(docs, resolved)[0] == selected
    # Ranked over all documents instead, the threshold is another one: the choice is visible in the data.
    alone, _ = resolve_percentiles(parse_selectors({"chars": "top 30%"}), files)
    assert alone[0].value == _top([len(r["text"]) for r in rows], 30)[1] != t
    # The same data resolves the same threshold, whatever order its files are listed in.
    again, counts_again = resolve_percentiles(parse_selectors({"label": 1, "chars": "top 30%"}), files[::-1])
    assert again == resolved and counts_again == counts


def test_null_scores_are_not_ranked_and_are_counted_as_null(rows, docs):
    resolved, counts = resolve_percentiles(parse_selectors({"alpha": "bottom 25%"}), doc_parquet_uris(docs))
    scored = [a for r in rows if (a := _alpha(r["text"])) is not None]
    short = len(rows) - len(scored)
    assert short == 37 and counts["alpha"]["null"] == short and counts["alpha"]["ranked"] == len(scored)
    kept, drops = _kept(docs, resolved)
    assert drops["null:alpha"] == short  # the existing null rule counts them, as for any selector
    # float32 values: the 25% lowest of the scored documents (k = ceil(0.25 * 181) = 46), ties included
    as_f32 = sorted(float(pa.array([a], pa.float32())[0].as_py()) for a in scored)
    k = math.ceil(0.25 * len(scored))
    assert resolved[0].value == as_f32[k - 1] and kept == sum(v <= as_f32[k - 1] for v in as_f32) >= k


def test_bad_percentile_columns_are_refused_naming_them(docs):
    files = doc_parquet_uris(docs)
    with pytest.raises(SelectorError, match=r"selector `id top 10%` ranks numbers; column 'id' is string"):
        resolve_percentiles(parse_selectors({"id": "top 10%"}), files)
    with pytest.raises(SelectorError, match=r"selector `score top 10%` needs column 'score'"):
        resolve_percentiles(parse_selectors({"score": "top 10%"}), files)
    with pytest.raises(SelectorError, match=r"source 'web': selector `chars top 10%`: no document has"):
        resolve_percentiles(parse_selectors({"label": 2, "chars": "top 10%"}), files, "source 'web'")


def test_resolution_reads_an_s3_source_the_same(docs, s3_bucket):
    from testkit.s3 import upload_tree

    upload_tree(docs, f"{s3_bucket}/docs")
    remote = doc_parquet_uris(f"{s3_bucket}/docs")
    assert len(remote) == 3 and all(u.startswith("s3://") for u in remote)
    sels = parse_selectors({"label": 1, "chars": "top 30%", "alpha": "bottom 50%"})
    assert resolve_percentiles(sels, remote) == resolve_percentiles(sels, doc_parquet_uris(docs))


def test_an_invalid_percentile_fails_before_anything_is_made(docs, tmp_path):
    with pytest.raises(SelectorError, match=r"select\.chars: 'top 120%' is not a percentile"):
        run_tokenize(str(docs), "no-tokenizer.json", str(tmp_path / "t"), select={"chars": "top 120%"})
    assert not (tmp_path / "t").exists()


@pytest.mark.spark
def test_manifest_records_the_threshold_and_it_selects_the_same_documents(
    spark, rows, docs, tmp_path, capsys
):
    from mixtures.recipe import RecipeError
    from mixtures.validate import check_sources
    from tokens.cli import main

    tok = train_tokenizer(docs, tmp_path / "tok", TokenizerConfig(vocab_size=512))
    out = tmp_path / "tokens"
    args = [
        "tokenize",
        "--input",
        str(docs),
        "--tokenizer",
        str(tok),
        "--output",
        str(out),
        "--source",
        "top",
    ]
    assert main([*args, "--select", "label=1", "--select", "chars=top 30%"]) == 0
    good = [len(r["text"]) for r in rows if r["label"] == 1]
    _, t = _top(good, 30)
    selected = sum(v >= t for v in good)
    printed = capsys.readouterr().out
    assert f"chars: top 30% -> >= {t} ({selected} of 120 ranked documents" in printed
    m = json.loads((out / "shards" / "top" / "manifest.json").read_text())
    assert m["select"] == {"label": 1, "chars": "top 30%"}
    assert m["resolved_select"] == {"label": 1, "chars": f">= {t}"}
    assert m["percentiles"]["chars"]["selected"] == selected == m["documents"]
    # A rerun resolves the same threshold: the same config, nothing redone, the same manifest bytes.
    again = run_tokenize(str(docs), str(tok), str(out), source="top", select=m["select"])
    assert (again.processed, again.skipped) == (0, 3) and again.manifest == m
    # The threshold is part of the folder's identity: its config (hashed into the fingerprint) holds it.
    cfg = json.loads((out / "shards" / "top" / "_config.json").read_text())["config"]
    assert cfg["resolved_select"] == m["resolved_select"]
    assert config_fingerprint(cfg) == m["config_fingerprint"]
    # The recorded plain selection, run as it stands, makes the same shards byte for byte (and has no
    # resolution of its own to record).
    plain = run_tokenize(str(docs), str(tok), str(out), source="plain", select=m["resolved_select"])
    assert [f["bin_sha256"] for f in plain.manifest["files"]] == [f["bin_sha256"] for f in m["files"]]
    assert "resolved_select" not in plain.manifest
    # A recipe may name the percentile or the threshold it resolved to; any other selection is refused.
    shards = str(out / "shards" / "top")
    for select in (m["select"], m["resolved_select"]):
        manifests = check_sources(_recipe({"shards": shards, "select": select}, tmp_path))
        assert manifests["web"]["documents"] == selected
    with pytest.raises(RecipeError, match="was tokenized with"):
        check_sources(_recipe({"shards": shards, "select": {"label": 1, "chars": "top 40%"}}, tmp_path))


def test_plan_estimates_a_percentile_source_from_its_selected_documents(rows, docs, tmp_path):
    from mixtures.plan import available_tokens

    recipe = _recipe({"docs": str(docs), "select": {"chars": "bottom 10%"}}, tmp_path)
    chars = [len(r["text"]) for r in rows]
    t = sorted(chars)[math.ceil(0.1 * len(chars)) - 1]
    nbytes = sum(len(r["text"].encode("utf-8")) for r in rows if len(r["text"]) <= t)
    assert available_tokens(recipe, "web") == (round(nbytes / 4), False)  # bytes_per_token 4
