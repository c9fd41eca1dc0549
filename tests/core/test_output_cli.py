"""Every job's command line refuses a damaged or overlapping output folder with exit 2 and a message
naming the path, before Spark starts (issue 31, items 12 and 13; core.output.check_layout,
check_disjoint, `_config.json` read by guard_folder). `score` is in tests/classifiers/test_score_guard.py
(it needs a model)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from testkit.neardup import real_documents

WARC = "crawl-2024-sample-0000.warc.gz"


@pytest.fixture(scope="module")
def docs(tmp_path_factory, data_dir) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    texts = real_documents(data_dir)[:40]
    pq.write_table(
        pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts}), folder / "a.parquet"
    )
    return folder


@pytest.fixture(scope="module")
def tokenizer(docs, tmp_path_factory) -> Path:
    from tokens.tokenizer import TokenizerConfig, train_tokenizer

    return train_tokenizer(docs, tmp_path_factory.mktemp("tok"), TokenizerConfig(vocab_size=300))


def _main(module: str):
    if module == "dedup":
        from dedup.cli import main
    elif module == "curation":
        from curation.cli import main
    else:
        from tokens.cli import main
    return main


def _argv(module: str, inp: str, out: str, tokenizer: Path | None = None) -> list[str]:
    if module == "dedup":
        return ["run", "--input", inp, "--output", out, "--no-progress"]
    if module == "curation":
        return ["extract", "--input", inp, "--output", out, "--no-progress"]
    return ["tokenize", "--input", inp, "--output", out, "--tokenizer", str(tokenizer), "--no-progress"]


def _input(module: str, docs: Path, warc_dir: Path, tmp_path: Path) -> Path:
    if module != "curation":
        return docs
    folder = tmp_path / "warcs"
    folder.mkdir()
    os.symlink(warc_dir / WARC, folder / WARC)  # a folder of WARCs, without copying the data
    return folder


def _run(module, argv, capsys) -> tuple[int, str]:
    rc = _main(module)(argv)
    return rc, capsys.readouterr().err.strip().splitlines()[-1]


JOBS = ["dedup", "curation", "tokens"]


@pytest.mark.parametrize("module", JOBS)
@pytest.mark.parametrize("damage", ["garbage", "folder", "json-list"])
def test_damaged_config_record_exits_2_naming_it(module, damage, docs, tokenizer, warc_dir, tmp_path, capsys):
    inp = _input(module, docs, warc_dir, tmp_path)
    out = tmp_path / "out"
    # tokenize keeps its folder under shards/<source>
    folder = out / "shards" / "default" if module == "tokens" else out
    folder.mkdir(parents=True)
    cfg = folder / "_config.json"
    if damage == "folder":
        cfg.mkdir()
    else:
        cfg.write_text("{not json" if damage == "garbage" else "[]")
    rc, err = _run(module, _argv(module, str(inp), str(out), tokenizer), capsys)
    assert rc == 2 and err.startswith(f"error: {cfg} "), err
    assert not (folder / "done").exists() and not (folder / "stages").exists()


@pytest.mark.parametrize("module", JOBS)
def test_a_folder_where_stats_json_belongs_exits_2_naming_it(
    module, docs, tokenizer, warc_dir, tmp_path, capsys
):
    inp = _input(module, docs, warc_dir, tmp_path)
    out = tmp_path / "out"
    folder = out / "shards" / "default" if module == "tokens" else out
    (folder / "stats.json").mkdir(parents=True)
    rc, err = _run(module, _argv(module, str(inp), str(out), tokenizer), capsys)
    assert rc == 2 and f"{folder / 'stats.json'} is a folder, not a file" in err, err


@pytest.mark.parametrize("module", JOBS)
def test_output_equal_to_input_exits_2(module, docs, tokenizer, warc_dir, tmp_path, capsys):
    inp = _input(module, docs, warc_dir, tmp_path)
    before = sorted(p.name for p in inp.iterdir())
    rc, err = _run(module, _argv(module, str(inp) + "/", str(inp), tokenizer), capsys)
    assert rc == 2 and f"--output {inp} is also the --input" in err, err
    assert sorted(p.name for p in inp.iterdir()) == before  # nothing written into the input


@pytest.mark.parametrize("module", ["dedup", "tokens"])
def test_output_inside_input_and_input_inside_output_exit_2(module, docs, tokenizer, tmp_path, capsys):
    """The jobs that list an input folder recursively: an output inside it is refused naming both,
    before any schema is read (dedup used to fail on its own stage files' schema on the rerun)."""
    inp = tmp_path / "in"
    shutil_copy = inp / "part"
    shutil_copy.mkdir(parents=True)
    (shutil_copy / "a.parquet").write_bytes((docs / "a.parquet").read_bytes())
    rc, err = _run(module, _argv(module, str(inp), str(inp / "out"), tokenizer), capsys)
    assert rc == 2 and f"--output {inp / 'out'} lies inside --input {inp}" in err, err
    assert not (inp / "out").exists()
    rc, err = _run(module, _argv(module, str(shutil_copy), str(inp), tokenizer), capsys)
    assert rc == 2 and f"--input {shutil_copy} lies inside --output {inp}" in err, err
    assert not (inp / "_config.json").exists()


def test_extract_output_beside_its_warcs_is_accepted_up_to_spark(warc_dir, tmp_path, capsys):
    """extract lists a folder one level deep, files only: an output folder inside it is fine (the
    run here stops at a bad --master, after the overlap check)."""
    inp = _input("curation", None, warc_dir, tmp_path)
    rc, err = _run("curation", [*_argv("curation", str(inp), str(inp / "out")), "--master", "nope"], capsys)
    assert rc == 2 and "master" in err and "lies inside" not in err, err


@pytest.mark.parametrize("module", JOBS)
@pytest.mark.parametrize("scheme", ["hdfs://namenode:8020", "file://"])
def test_an_output_uri_no_job_writes_exits_2_and_makes_no_local_folder(
    module, scheme, docs, tokenizer, warc_dir, tmp_path, capsys, monkeypatch
):
    """Taken as a path, `hdfs://nn/out` was a folder `hdfs:` under the working directory that every
    job wrote into without a word; it is refused before anything is made."""
    monkeypatch.chdir(tmp_path)
    inp = _input(module, docs, warc_dir, tmp_path)
    out = f"{scheme}{tmp_path}/out"
    rc, err = _run(module, _argv(module, str(inp), out, tokenizer), capsys)
    scheme_name = scheme.split(":")[0]
    assert rc == 2 and f"--output {out}: {scheme_name}:// is not a storage the jobs write to" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["warcs"] if module == "curation" else [])
    assert not (tmp_path / "out").exists()
