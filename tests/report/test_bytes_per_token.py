"""The report's "bytes per token by language" table: tokenize's per-`lang` counts from the manifests.

Real shards: testkit/corpus.py's documents (Leipzig sentences in eight languages and a real WARC's
documents) tokenized into two sources, without Spark.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from report.collect import tokens
from report.render import _section_tables
from testkit.corpus import build_corpus, build_source
from tokens.tokenizer import TokenizerConfig, train_tokenizer


def test_bytes_per_token_by_language_from_the_manifests(tmp_path):
    corpus = build_corpus(tmp_path / "corpus")
    tok = train_tokenizer(corpus, tmp_path / "tok", TokenizerConfig(vocab_size=512))
    run = tmp_path / "run"
    docs = sorted((corpus / "docs").glob("*.parquet"))
    multi = [d for d in docs if d.name == "multi.parquet"]
    for name, files in (("multi", multi), ("rest", [d for d in docs if d not in multi])):
        build_source(run / "tokens", tok, name, files)
    got = tokens(run)
    rows = {x["lang"]: x for x in got["bytes_per_token"]}
    # bytes counted here from the documents; tokens summed from the manifests over both sources
    want_bytes: dict[str, int] = {}
    for f in docs:
        t = pq.read_table(f, columns=["text", "lang"])
        for text, lang in zip(t.column("text").to_pylist(), t.column("lang").to_pylist(), strict=True):
            if text:
                want_bytes[lang] = want_bytes.get(lang, 0) + len(text.encode())
    assert {k: x["bytes"] for k, x in rows.items()} == want_bytes
    mans = [json.loads(p.read_text()) for p in (run / "tokens" / "shards").glob("*/manifest.json")]
    for lang, x in rows.items():
        assert x["tokens"] == sum(m["languages"].get(lang, {}).get("tokens", 0) for m in mans)
        assert x["bytes_per_token"] == x["bytes"] / x["tokens"]
    # a 512-token vocabulary: every language is compressed past one token per byte, none past 8
    assert all(1.0 < x["bytes_per_token"] < 8 for x in rows.values()), rows
    html = _section_tables({"tokens": got, "training": {}, **_empty()})["tokens"]
    assert "Bytes per token by language" in html
    zh = rows["zh"]
    assert f"<td>zh</td><td>{zh['documents']:,}</td><td>{zh['bytes']:,}</td><td>{zh['tokens']:,}</td>" in html


def _empty() -> dict:
    """The other sections' inputs, empty (this test is about the tokens section)."""
    return {
        "funnel": [],
        "languages": {"kept": {}, "rejected_sample": {}, "note": ""},
        "quality": {},
        "scores": {},
        "dup_clusters": {"kept_docs_by_cluster_size": {}, "counters": {}},
    }
