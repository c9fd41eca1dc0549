"""Tokenize job: every document decodes back to its text, manifests match the files, reruns are idempotent.

Real documents (testkit/corpus.py: a real WARC through process_file, Leipzig sentences in
eight languages, edge rows). The Spark tier runs the real job on the session's local[2] Spark.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from core.output import OutputConflict
from core.selectors import SelectorError, parse_selectors
from testkit.corpus import EDGE_TEXTS, build_corpus
from tokens.job import TokenizeTask, run_tokenize, tokenize_file
from tokens.shards import IndexedShard
from tokens.tokenizer import TokenizerConfig, load_tokenizer, train_tokenizer


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def tok_path(corpus, tmp_path_factory):
    return train_tokenizer(corpus, tmp_path_factory.mktemp("tok"), TokenizerConfig(vocab_size=768))


def _task(out, tok, select=None):
    return TokenizeTask(
        source="s",
        out_dir=str(out),
        tokenizer_json=Path(tok.path).read_text(),
        tokenizer_sha256=tok.sha256,
        eod_token=tok.eod_token,
        selectors=parse_selectors(select or {}),
    )


def _sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_round_trip_every_document_without_spark(tmp_path, corpus, tok_path):
    tok = load_tokenizer(tok_path)
    files = sorted((corpus / "docs").glob("*.parquet"))
    for i, f in enumerate(files):
        res = tokenize_file(i, str(f), _task(tmp_path, tok))
        assert res["status"] == "done" and res["encoder"] == "tiktoken", res  # the fast path is exact here
        texts = pq.read_table(f, columns=["text"]).column("text").to_pylist()
        kept = [t for t in texts if t]  # null and empty rows are skipped, and counted below
        shard = IndexedShard(tmp_path / res["bin"])
        assert len(shard) == len(kept) == res["documents"]
        for j, text in enumerate(kept):
            doc = shard[j][:-1]  # without its EOD
            assert tok.eod_id not in doc  # the only EOD of a document is its last token
            assert tok.tokenizer.decode(doc.tolist(), skip_special_tokens=False) == text
        ids = pq.read_table(tmp_path / res["ids"]).to_pylist()
        assert [r["tokens"] for r in ids] == shard.lengths.tolist()
        assert res["bin_sha256"] == _sha(shard.bin_path) and res["idx_sha256"] == _sha(shard.idx_path)
    edge = json.loads((tmp_path / "done" / "part-00002.json").read_text())
    drops = json.loads((tmp_path / "stats" / "part-00002.json").read_text())["stages"][1]["drops"]
    assert drops == {"null_text": 1, "empty_text": 1} and edge["documents"] == len(EDGE_TEXTS) - 2
    # The completion marker records what the manifest is made of, as the summary reports it.
    assert all(edge[k] == res[k] for k in ("part", "bin_sha256", "idx_sha256", "input_sha256", "tokens"))


def test_selectors_and_missing_column(tmp_path, corpus, tok_path):
    tok = load_tokenizer(tok_path)
    multi = corpus / "docs" / "multi.parquet"
    res = tokenize_file(0, str(multi), _task(tmp_path, tok, {"quality": ">= 0.6", "lang": ["zh", "ja"]}))
    rows = pq.read_table(multi).to_pylist()
    want = [r["text"] for r in rows if r["quality"] >= 0.6 and r["lang"] in ("zh", "ja")]
    assert res["documents"] == len(want) == 6  # 3 of 5 quality levels x 2 languages
    shard = IndexedShard(tmp_path / res["bin"])
    assert [tok.tokenizer.decode(shard[i][:-1].tolist()) for i in range(len(shard))] == want
    web = next(p for p in (corpus / "docs").glob("crawl-*.parquet"))
    n_web = pq.read_metadata(web).num_rows
    res = tokenize_file(1, str(web), _task(tmp_path, tok, {"no_such_score": ">= 0.6"}))
    assert res["status"] == "failed" and "needs column 'no_such_score'" in res["error"]
    assert not (tmp_path / "done" / "part-00001.json").exists()
    if "quality" in pq.read_schema(web).names:
        # extract writes `quality` as null until a classifier scores it: counted, not silently dropped.
        res = tokenize_file(1, str(web), _task(tmp_path, tok, {"quality": ">= 0.6"}))
        nulls = res["stats"]["stages"][0]["drops"].get("null:quality", 0)
        assert res["documents"] + nulls == n_web


@pytest.mark.spark
def test_spark_job_manifest_rerun_and_conflict(spark, tmp_path, corpus, tok_path):
    out = tmp_path / "tokens"
    r1 = run_tokenize(str(corpus), str(tok_path), str(out), source="all")
    assert r1.ok and r1.processed == 3 and r1.manifest is not None and r1.encoder == "tiktoken"
    src = out / "shards" / "all"
    m = json.loads((src / "manifest.json").read_text())
    tok = load_tokenizer(tok_path)
    assert m["tokenizer"]["sha256"] == tok.sha256 and m["dtype"] == "uint16"
    total_docs = total_tokens = 0
    for f in m["files"]:
        shard = IndexedShard(src / f["bin"])
        assert f["bin_sha256"] == _sha(src / f["bin"]) and f["idx_sha256"] == _sha(src / f["idx"])
        assert len(shard) == f["documents"] and shard.num_tokens == f["tokens"]
        assert int(np.sum(shard[len(shard) - 1] == tok.eod_id)) >= 1
        total_docs += f["documents"]
        total_tokens += f["tokens"]
    assert (m["documents"], m["tokens"]) == (total_docs, total_tokens)
    assert m["files"][0]["input_metadata"]["config_fingerprint"]  # provenance from extract's Parquet
    # The runner's merged stats agree with the manifest; _SUCCESS marks every part done.
    stats = json.loads((src / "stats.json").read_text())
    assert stats["docs_written"] == m["documents"] and (src / "_SUCCESS").exists()
    assert [s["stage"] for s in stats["stages"]] == ["select", "tokenize"]
    before = {p.name: _sha(p) for p in src.glob("part-*")}
    manifest_bytes = (src / "manifest.json").read_bytes()
    # Rerun: nothing to do, same manifest bytes (the encoder is not part of the output's config).
    r2 = run_tokenize(str(corpus), str(tok_path), str(out), source="all", encoder="hf")
    assert (r2.processed, r2.skipped) == (0, 3) and (src / "manifest.json").read_bytes() == manifest_bytes
    # A lost marker (crash before it was written) redoes that part to identical bytes, here with
    # the HF encoder: the two encoders are interchangeable mid-source.
    (src / "done" / "part-00001.json").unlink()
    (src / "part-00001.bin").write_bytes(b"garbage")
    r3 = run_tokenize(str(corpus), str(tok_path), str(out), source="all", encoder="hf")
    assert (
        r3.processed == 1
        and r3.encoder.startswith("hf")
        and {p.name: _sha(p) for p in src.glob("part-*")} == before
    )
    assert (src / "manifest.json").read_bytes() == manifest_bytes
    # Another tokenizer into the same folder is refused; a selector on a missing column fails early.
    other = train_tokenizer(corpus, tmp_path / "tok2", TokenizerConfig(vocab_size=600))
    with pytest.raises(OutputConflict, match="tokenizer_sha256"):
        run_tokenize(str(corpus), str(other), str(out), source="all")
    with pytest.raises(SelectorError, match="needs column 'no_such_score'"):
        run_tokenize(str(corpus), str(tok_path), str(out), source="q", select={"no_such_score": ">= 0.5"})


@pytest.mark.parametrize(
    "select, needle",
    [
        (["quality=~~ 1"], "selector `quality == '~~ 1'` cannot compare column 'quality' of type"),
        (["lang=>= 0.5"], "selector `lang >= 0.5` cannot compare column 'lang' of type string"),
        (["quality=[en]"], "selector `quality in ['en']` cannot compare column 'quality'"),
    ],
)
def test_selector_the_column_type_refuses_fails_before_the_folder(
    tmp_path, corpus, tok_path, capsys, select, needle
):
    """Such a selector failed in every Spark task and left a folder that refused the corrected command."""
    from tokens.cli import main

    out = tmp_path / "t"
    args = ["tokenize", "--input", str(corpus), "--tokenizer", str(tok_path), "--output", str(out)]
    assert main([*args, *(a for s in select for a in ("--select", s))]) == 2
    err = capsys.readouterr().err
    assert needle in err and str(corpus / "docs") in err  # names the file
    assert not out.exists()


def test_tokenize_output_that_is_a_file(tmp_path, corpus, tok_path, capsys):
    from tokens.cli import main

    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["tokenize", "--input", str(corpus), "--tokenizer", str(tok_path), "--output", str(f)]) == 2
    assert f"{f} is a file, not a folder" in capsys.readouterr().err
