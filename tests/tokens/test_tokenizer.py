"""Byte-level BPE training: determinism, sample independence from file layout, config errors, EOD handling."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.config import ConfigError
from testkit.corpus import EDGE_TEXTS, build_corpus
from tokens.tokenizer import TokenizerConfig, load_tokenizer, train_tokenizer

CFG = TokenizerConfig(vocab_size=512, sample_docs=10_000)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_corpus(tmp_path_factory.mktemp("corpus"))


def test_deterministic_and_independent_of_file_layout(tmp_path, corpus):
    a = train_tokenizer(corpus, tmp_path / "a", CFG)
    b = train_tokenizer(corpus, tmp_path / "b", CFG)
    assert a.read_bytes() == b.read_bytes()
    # The same documents in one file instead of three: the sample (keyed by id) is the same.
    merged = pa.concat_tables(
        promote_options="permissive",
        tables=[pq.read_table(p).select(["id", "text"]) for p in sorted((corpus / "docs").glob("*.parquet"))],
    )
    one = tmp_path / "one"
    one.mkdir()
    pq.write_table(merged, one / "all.parquet")
    c = train_tokenizer(one, tmp_path / "c", CFG)
    assert c.read_bytes() == a.read_bytes()
    meta = json.loads((tmp_path / "a" / "tokenizer_meta.json").read_text())
    tok = load_tokenizer(a)
    assert tok.vocab_size == meta["vocab_size"] == 512
    assert tok.eod_id == meta["eod_id"] and tok.tokenizer.id_to_token(tok.eod_id) == "<|endoftext|>"
    assert meta["config_fingerprint"] == CFG.fingerprint() and meta["tokenizer_sha256"] == tok.sha256
    # A different seed picks a different sample when the sample is smaller than the corpus.
    small = TokenizerConfig(vocab_size=512, sample_docs=10, seed=0)
    d = train_tokenizer(corpus, tmp_path / "d", small)
    e = train_tokenizer(corpus, tmp_path / "e", TokenizerConfig(vocab_size=512, sample_docs=10, seed=1))
    assert d.read_bytes() != e.read_bytes()


def test_lossless_and_eod_string_is_text(tmp_path, corpus):
    tok = load_tokenizer(train_tokenizer(corpus, tmp_path / "t", CFG))
    for text in [t for t in EDGE_TEXTS if t] + ["数据 данные データ 데이터 \u0000 \ufeff"]:
        ids = tok.tokenizer.encode(text, add_special_tokens=False).ids
        assert tok.eod_id not in ids, text
        assert tok.tokenizer.decode(ids, skip_special_tokens=False) == text


def test_given_tokenizer_eod_lookup(tmp_path, corpus):
    path = train_tokenizer(corpus, tmp_path / "t", CFG)
    given = tmp_path / "given"
    given.mkdir()
    shutil.copy(path, given / "tokenizer.json")  # no tokenizer_meta.json beside it
    assert load_tokenizer(given / "tokenizer.json").eod_token == "<|endoftext|>"  # a known name
    assert load_tokenizer(given / "tokenizer.json", eod_token="<|pad|>").eod_id == 1
    with pytest.raises(ValueError, match="not in the vocabulary"):
        load_tokenizer(given / "tokenizer.json", eod_token="</nope>")
    (given / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"not a Hugging Face tokenizer\.json"):
        load_tokenizer(given / "bad.json")


def test_config_errors_name_file_and_key(tmp_path):
    p = tmp_path / "tok.yaml"
    p.write_text("vocab_size: 100\n")
    with pytest.raises(ConfigError, match=r"tok\.yaml: vocab_size must be >= 259"):
        TokenizerConfig.load(p)
    p.write_text("vocab: 1000\n")
    with pytest.raises(ConfigError, match=r"unknown key vocab; allowed: .*vocab_size"):
        TokenizerConfig.load(p)
    p.write_text("special_tokens: ['<|endoftext|>']\n")
    with pytest.raises(ConfigError, match="distinct"):
        TokenizerConfig.load(p)
    p.write_text("vocab_size: 4096\nsample_docs: 7\n")
    assert TokenizerConfig.load(p) == TokenizerConfig(vocab_size=4096, sample_docs=7)


def test_output_that_is_a_file_refused_before_training(tmp_path, corpus, capsys):
    from tokens.cli import main

    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["train-tokenizer", "--input", str(corpus), "--output", str(f)]) == 2
    assert f"--output {f} is a file, not a folder" in capsys.readouterr().err
    assert f.read_text() == "x"


@pytest.mark.parametrize("columns", [{"id": ["a"], "body": ["x"]}, {"text": ["x"]}])
def test_parquet_without_text_or_id_names_the_file(tmp_path, capsys, columns):
    docs = tmp_path / "docs"
    docs.mkdir()
    pq.write_table(pa.table({"id": ["b"], "text": ["fine"]}), docs / "a.parquet")
    bad = docs / "b.parquet"
    pq.write_table(pa.table(columns), bad)
    from tokens.cli import main

    assert main(["train-tokenizer", "--input", str(docs), "--output", str(tmp_path / "tok")]) == 2
    err = capsys.readouterr().err
    missing = "'text'" if "text" not in columns else "'id'"
    assert f"error: {bad}: no {missing} column; columns: {', '.join(columns)}" in err
    assert not (tmp_path / "tok").exists()


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ('{"eod_token": NaN}', r"eod_token: NaN is not a finite number"),
        ('{"vocab_size": 1' + "0" * 400 + "}", r"vocab_size: the integer .* beyond int64"),
        ("[" * 100_000 + "]" * 100_000, r"nests deeper than the 64"),
        ('["<|endoftext|>"]', r"not a JSON object"),
        (
            '{"eod_token": "<|pad|>", "eod_token": "<|endoftext|>"}',
            r"eod_token: the key 'eod_token' is given twice",
        ),
        ("{not json", r"not valid JSON"),
    ],
    ids=["nan", "huge-int", "deep", "list", "duplicate-key", "invalid"],
)
def test_a_hostile_tokenizer_meta_is_an_input_error_naming_it(tmp_path, corpus, text, refusal):
    """tokenizer_meta.json goes through the checked JSON reader (core/safe_json.py) as every model
    folder's JSON does: an InputError (exit 2) naming the file and key, not a traceback."""
    from core.errors import InputError

    path = train_tokenizer(corpus, tmp_path / "t", CFG)
    (tmp_path / "t" / "tokenizer_meta.json").write_text(text)
    with pytest.raises(InputError, match=rf"tokenizer_meta\.json: {refusal}"):
        load_tokenizer(path)
