"""train-tokenizer and tokenize with the tokenizer on an object store (`s3://`), against the local runs.

The store is moto's real S3 server on 127.0.0.1 (testkit/s3.py), reached only through the standard
AWS environment; the documents are the real test corpus (testkit/corpus.py: a real crawl WARC's
pages, Leipzig sentences, edge rows). A tokenizer trained from an `s3://` copy of a folder must be
byte-identical to one trained from the folder itself; one written to `s3://` must give `tokenize`
the same shards as its local twin; a store with nothing to read, or that does not answer, is an
`error: ...` with exit status 2, not a traceback.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from core.storage import ObjectStore
from testkit.corpus import build_corpus
from testkit.s3 import upload_tree
from tokens.cli import main
from tokens.tokenizer import TokenizerConfig, load_tokenizer, train_tokenizer

# 17 of the corpus's 59 documents: the sample is a strict subset (so which rows are picked, and from
# which row groups, matters), and a 512-token vocabulary still has merges to learn from it.
CFG = TokenizerConfig(vocab_size=512, sample_docs=17)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return build_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def small_groups(corpus, tmp_path_factory) -> Path:
    """The corpus's documents rewritten with 3-row row groups: sampled texts then come from some
    row groups of a file and not others (what `read_sample_texts` reads selectively)."""
    out = tmp_path_factory.mktemp("small-groups")
    for f in sorted((corpus / "docs").glob("*.parquet")):
        pq.write_table(pq.read_table(f), out / f.name, row_group_size=3)
    assert max(pq.read_metadata(f).num_row_groups for f in out.iterdir()) > 1
    return out


def _read(uri: str) -> bytes:
    return ObjectStore(uri).read_bytes(uri)


def test_s3_input_gives_the_local_tokenizer_byte_for_byte(tmp_path, corpus, small_groups, s3_bucket):
    local = train_tokenizer(corpus, tmp_path / "local", CFG)
    # The whole extract-shaped folder (docs/, done/ markers, _config.json, _SUCCESS), as a job leaves it.
    upload_tree(corpus, f"{s3_bucket}/extract")
    remote = train_tokenizer(f"{s3_bucket}/extract", tmp_path / "from-s3", CFG)
    assert remote.read_bytes() == local.read_bytes()
    metas = [json.loads(p.with_name("tokenizer_meta.json").read_text()) for p in (local, remote)]
    assert metas[1]["sample"]["input"] == f"{s3_bucket}/extract"
    for m in metas:
        m["sample"].pop("input")
    assert metas[0] == metas[1] and metas[0]["sample"]["documents"] == 17
    # Files of several row groups each, on the store: only some row groups hold the sample, and the
    # texts read from them still train the same tokenizer.
    upload_tree(small_groups, f"{s3_bucket}/small-groups")
    grouped = train_tokenizer(f"{s3_bucket}/small-groups", tmp_path / "grouped", CFG)
    assert grouped.read_bytes() == local.read_bytes()


@pytest.mark.spark
def test_s3_output_tokenizes_to_the_same_shards(spark, tmp_path, corpus, s3_bucket, capsys):
    local = train_tokenizer(corpus, tmp_path / "tok", CFG)
    upload_tree(corpus, f"{s3_bucket}/extract")
    tok_dir = f"{s3_bucket}/run/tokenizer"
    # Through the command line, every path on the store.
    argv = ["train-tokenizer", "--input", f"{s3_bucket}/extract", "--output", tok_dir]
    assert main([*argv, "--set", "vocab_size=512", "--set", "sample_docs=17"]) == 0
    assert f"-> {tok_dir}/tokenizer.json" in capsys.readouterr().out
    remote_bytes = _read(f"{tok_dir}/tokenizer.json")
    assert remote_bytes == local.read_bytes()
    meta = json.loads(_read(f"{tok_dir}/tokenizer_meta.json"))
    assert meta["tokenizer_sha256"] == hashlib.sha256(remote_bytes).hexdigest()

    # tokenize (Spark local[2], the session's) on the local corpus with each tokenizer; the store's
    # is named by its folder, as a local one may be.
    manifests = {}
    for name, tok in (("local", str(local)), ("s3", tok_dir)):
        out = tmp_path / f"tokens-{name}"
        argv = ["tokenize", "--input", str(corpus), "--tokenizer", tok, "--output", str(out)]
        assert main([*argv, "--source", "web", "--master", "local[2]", "--no-progress"]) == 0
        manifests[name] = json.loads((out / "shards" / "web" / "manifest.json").read_text())
    shas = {k: [(f["bin_sha256"], f["idx_sha256"]) for f in m["files"]] for k, m in manifests.items()}
    assert len(shas["s3"]) == 3 and shas["s3"] == shas["local"]
    assert manifests["s3"]["tokenizer"]["path"] == f"{tok_dir}/tokenizer.json"
    assert manifests["s3"]["tokenizer"]["sha256"] == load_tokenizer(local).sha256
    assert manifests["s3"]["tokenizer"]["config_fingerprint"] == CFG.fingerprint()  # meta read from S3


def test_empty_prefix_and_missing_tokenizer_exit_2(tmp_path, corpus, s3_bucket, capsys):
    argv = ["train-tokenizer", "--input", f"{s3_bucket}/nothing-here", "--output", str(tmp_path / "t")]
    assert main(argv) == 2
    assert f"error: no Parquet files under {s3_bucket}/nothing-here" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()
    # tokenize with a tokenizer URI where there is none: refused before Spark starts.
    argv = ["tokenize", "--input", str(corpus), "--tokenizer", f"{s3_bucket}/no-tok"]
    assert main([*argv, "--output", str(tmp_path / "tokens")]) == 2
    assert f"error: tokenizer file not found: {s3_bucket}/no-tok" in capsys.readouterr().err


@pytest.mark.parametrize("side", ["input", "output"])
def test_unreachable_store_exits_2(tmp_path, corpus, s3_server, monkeypatch, capsys, side):
    import s3fs

    from trainer.launch import free_port

    # The test server's credentials, but an endpoint where nothing listens.
    for k, v in {**s3_server.env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}.items():
        monkeypatch.setenv(k, v)
    # botocore retries a refused connection with backoff (legacy mode, 5 attempts): 1 keeps the test short.
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3fs.S3FileSystem.clear_instance_cache()  # a cached client keeps the endpoint it was made with
    paths = {"input": str(corpus), "output": str(tmp_path / "t")}
    paths[side] = "s3://nowhere/prefix"
    assert main(["train-tokenizer", "--input", paths["input"], "--output", paths["output"]]) == 2
    err = capsys.readouterr().err
    want = "error: cannot list s3://nowhere/prefix" if side == "input" else "cannot be reached"
    assert want in err and "Traceback" not in err, err
    s3fs.S3FileSystem.clear_instance_cache()
