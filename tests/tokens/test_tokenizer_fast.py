"""The tiktoken fast path gives exactly the Hugging Face ids, and falls back to HF where it cannot.

Real text: the documents `process_file` keeps from a real WARC and Leipzig sentences (tests/mixtures/
corpus.py), the long multilingual Tatoeba sentences of ../shared/data/langid, and hand-picked tricky
strings. The tokenizer is trained on that text, so its merges cover every script in it (a regex
class difference between the two engines would change ids, not only splits). Also: a seeded fuzz
over random concatenations of vocabulary tokens (where a merge-order difference would show), a
stride over all code points in letter/number/space contexts, byte-identical shards from both paths,
and one inexpressible tokenizer.json per fallback reason.
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.errors import InputError
from core.files import doc_parquet_files
from testkit.corpus import EDGE_TEXTS, build_corpus
from testkit.shared_data import shared_data_dir
from tokens.job import TokenizeTask, run_tokenize, tokenize_file
from tokens.tokenizer import (
    PROBE_TEXTS,
    TokenizerConfig,
    build_encoder,
    bytes_to_unicode,
    load_tokenizer,
    train_tokenizer,
)

TRICKY = [
    *PROBE_TEXTS,
    *(t for t in EDGE_TEXTS if t),
    "<|endoftext|>",
    "a<|endoftext|>b<|pad|>c <|endoftext|><|endoftext|>",
    "\r\n\r\n\r\n",
    "\r\r\n\n \r\n\t\t \t\n",
    " " * 1000,
    "word" + " " * 257 + "word" + "\t" * 100 + "\n" * 50 + "end",
    "  leading and trailing  ",
    "e\u0301\u0301\u0301 a\u0308 \u05e9\u05c1\u05b8 \u0e01\u0e34\u0e4a ae\u0300\u0323",  # stacked combining marks
    "family \U0001f468\u200d\U0001f469\u200d\U0001f467 skin \U0001f44b\U0001f3ff rainbow \U0001f3f3\ufe0f\u200d\U0001f308",
    "rtl \u202eabc\u202c lrm\u200e zwsp\u200b nbsp\u00a0\u00a0 line\u2028para\u2029nel\u0085",
    "digits \u0661\u0662\u0663 \u0967\u0968 \u00b2\u00b3 \u216b \uff11\uff12 \U0001d7d8",
    "'s 'S 't 're 've 'm 'll 'd '' ''s x's X'LL",
    "\x00\x01\x1f\x7f \ufeffbom \ufffd \U0010ffff \U000e0001",
    "".join(chr(c) for c in range(32, 0x250)),
]


@pytest.fixture(scope="module")
def texts_and_tok(tmp_path_factory):
    """(every document text, tokenizer.json path): corpus docs + Tatoeba, and a tokenizer trained on both."""
    root = tmp_path_factory.mktemp("fast")
    corpus = build_corpus(root / "corpus")
    docs = root / "docs"
    docs.mkdir()
    for f in doc_parquet_files(corpus):
        shutil.copy(f, docs / f.name)
    rows = (shared_data_dir() / "langid" / "tatoeba_long.tsv").read_text("utf-8").splitlines()[1:]
    tatoeba = [r.split("\t")[3] for r in rows]
    assert len(tatoeba) > 400
    pq.write_table(
        pa.table({"id": [f"tatoeba-{i}" for i in range(len(tatoeba))], "text": tatoeba}),
        docs / "tatoeba.parquet",
    )
    texts = [
        t
        for f in doc_parquet_files(docs)
        for t in pq.read_table(f, columns=["text"]).column("text").to_pylist()
    ]
    texts = [t for t in texts if t]
    tok = train_tokenizer(docs, root / "tok", TokenizerConfig(vocab_size=4096))
    return docs, texts, tok


def _encoders(tok_path):
    text = tok_path.read_text()
    fast, slow = build_encoder(text, "tiktoken"), build_encoder(text, "hf")
    assert (fast.backend, slow.backend) == ("tiktoken", "hf")
    return fast, slow


def test_identical_ids_on_real_and_tricky_text(texts_and_tok):
    _, texts, tok = texts_and_tok
    fast, slow = _encoders(tok)
    assert build_encoder(tok.read_text()).backend == "tiktoken"  # auto picks it for our tokenizers
    every = texts + TRICKY
    assert sum(len(t) for t in every) > 200_000  # the WARC's documents are most of it
    got, want = fast.encode_batch(every), slow.encode_batch(every)
    eod = slow.hf.token_to_id("<|endoftext|>")
    for text, g, w in zip(every, got, want, strict=True):
        assert g == w, text[:80]
        assert eod not in g
        assert slow.hf.decode(g, skip_special_tokens=False) == text


def test_identical_ids_on_random_token_concatenations(texts_and_tok):
    # Pieces made of several vocabulary tokens glued together are where "merge by rank of the
    # result" (tiktoken) and "merge by rule order" (HF) could part ways.
    _, _, tok = texts_and_tok
    fast, slow = _encoders(tok)
    u2b = {c: b for b, c in bytes_to_unicode().items()}
    vocab = json.loads(tok.read_text())["model"]["vocab"]
    pieces = [bytes(u2b[c] for c in t) for t, i in vocab.items() if i > 1]  # not the 2 specials
    rng = random.Random(0)
    texts = [
        b"".join(rng.choice(pieces) for _ in range(rng.randint(2, 8))).decode("utf-8", "replace")
        for _ in range(20_000)
    ]
    assert fast.encode_batch(texts) == slow.encode_batch(texts)


def test_identical_ids_over_code_points(texts_and_tok):
    # A stride over all code points (the full range was checked once, ~90 s): each in contexts where
    # its regex class (letter, number, space, other) decides how neighbours are split.
    _, _, tok = texts_and_tok
    fast, slow = _encoders(tok)
    cps = [chr(c) for c in range(0, 0x110000, 23) if not 0xD800 <= c <= 0xDFFF]
    texts = [f"a{c}b {c}{c}  {c}\n1{c}2 {c}a x'{c}s {c} \t" for c in cps]
    assert fast.encode_batch(texts) == slow.encode_batch(texts)


def test_shards_byte_identical(tmp_path, texts_and_tok):
    docs, _, tok_path = texts_and_tok
    tok = load_tokenizer(tok_path)
    out = {}
    for mode in ("hf", "tiktoken"):
        d = tmp_path / mode
        task = TokenizeTask(
            source="s",
            out_dir=str(d),
            tokenizer_json=tok_path.read_text(),
            tokenizer_sha256=tok.sha256,
            eod_token=tok.eod_token,
            encoder=mode,
        )
        for i, f in enumerate(doc_parquet_files(docs)):
            res = tokenize_file(i, str(f), task)
            assert res["status"] == "done" and res["encoder"] == mode, res
        out[mode] = {p.name: p.read_bytes() for p in d.glob("part-*")}
    assert len(out["hf"]) == 3 * len(doc_parquet_files(docs))  # .bin, .idx, .ids.parquet per part
    assert out["tiktoken"] == out["hf"]


def _variant(tok_path, tmp_path, edit):
    spec = json.loads(tok_path.read_text())
    edit(spec)
    return json.dumps(spec)


def _swap_first_merges(spec):
    # Swap the first merge (a, b) with the first later one that competes with it, (b, c): the
    # order decides "ab c" vs "a bc" wherever "abc" occurs.
    m = spec["model"]["merges"]
    j = next(j for j, (x, _) in enumerate(m) if x == m[0][1])
    m[0], m[j] = m[j], m[0]


FALLBACKS = {
    "normalizer": lambda s: s.update(normalizer={"type": "NFC"}),
    "pre-tokenizer 'Metaspace'": lambda s: s.update(
        pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    ),
    "add_prefix_space=true": lambda s: s["pre_tokenizer"].update(add_prefix_space=True),
    "non-special added tokens": lambda s: s["added_tokens"].append(
        {
            "id": len(s["model"]["vocab"]),
            "content": "Refinery",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": False,
        }
    ),
    "merge order is not id order": _swap_first_merges,
    "post-processor 'TemplateProcessing'": lambda s: s.update(
        post_processor={
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {},
        }
    ),
}


@pytest.mark.parametrize("why", list(FALLBACKS))
def test_falls_back_to_hf_with_reason(why, tmp_path, texts_and_tok, caplog):
    _, texts, tok_path = texts_and_tok
    spec = _variant(tok_path, tmp_path, FALLBACKS[why])
    with caplog.at_level(logging.WARNING, logger="tokens.tokenizer"):
        enc = build_encoder(spec)
    assert enc.backend == "hf" and why in enc.reason
    assert why in caplog.text
    with pytest.raises(ValueError, match=f"encoder=tiktoken: .*{re.escape(why)}"):
        build_encoder(spec, "tiktoken")
    sample = texts[:20] + TRICKY
    assert enc.encode_batch(sample) == [e.ids for e in enc.hf.encode_batch(sample, add_special_tokens=False)]


def test_merge_order_check_is_needed(texts_and_tok):
    # Without the merge-order check, tiktoken on the swapped-merges tokenizer gives other ids: the
    # check guards against a real difference, not a hypothetical one.
    import tiktoken

    from tokens.tokenizer import GPT2_PATTERN

    _, texts, tok_path = texts_and_tok
    spec = json.loads(tok_path.read_text())
    _swap_first_merges(spec)
    slow = build_encoder(json.dumps(spec))
    u2b = {c: b for b, c in bytes_to_unicode().items()}
    ranks = {bytes(u2b[c] for c in t): i for t, i in spec["model"]["vocab"].items() if i > 1}
    naive = tiktoken.Encoding("naive", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    sample = texts[:50]
    assert [naive.encode_ordinary(t) for t in sample] != slow.encode_batch(sample)


def test_unreachable_token_and_missing_tiktoken(tmp_path, texts_and_tok, monkeypatch):
    _, _, tok_path = texts_and_tok
    # A vocabulary token no merge makes: tiktoken would emit it for that exact piece, HF never does.
    spec = _variant(tok_path, tmp_path, lambda s: s["model"]["vocab"].update(zqxj=len(s["model"]["vocab"])))
    enc = build_encoder(spec)
    assert enc.backend == "hf" and "'zqxj'" in enc.reason and "not what HF's merges give" in enc.reason
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import fails as if not installed
    enc = build_encoder(tok_path.read_text())
    assert enc.backend == "hf" and "pip install tiktoken" in enc.reason


def test_run_tokenize_refuses_forced_tiktoken_before_spark(tmp_path, texts_and_tok):
    docs, _, tok_path = texts_and_tok
    bad = tmp_path / "tokenizer.json"
    bad.write_text(_variant(tok_path, tmp_path, FALLBACKS["normalizer"]))
    with pytest.raises(InputError, match="encoder=tiktoken: not expressible in tiktoken: normalizer"):
        run_tokenize(
            str(docs), str(bad), str(tmp_path / "out"), eod_token="<|endoftext|>", encoder="tiktoken"
        )
    with pytest.raises(InputError, match="encoder must be one of auto, tiktoken, hf"):
        run_tokenize(str(docs), str(tok_path), str(tmp_path / "out"), encoder="fast")
