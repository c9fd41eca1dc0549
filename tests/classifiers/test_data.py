"""Reading training documents: the three formats, counted skips, and errors that name the file."""

from __future__ import annotations

import hashlib
import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from classifiers.data import DataError, read_file, read_inputs


def test_text_file_is_one_document_per_line(data_dir):
    path = data_dir / "quality" / "lee_background.cor"
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    fd = read_file(path, min_chars=100)
    assert fd.format == "text"
    assert fd.docs == [ln for ln in lines if len(ln) >= 100]
    assert fd.skipped_short == sum(len(ln) < 100 for ln in lines)
    assert fd.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_jsonl_and_extract_folder(data_dir, extract_out):
    path = data_dir / "quality" / "enwiki_sample_articles.jsonl"
    fd = read_file(path, min_chars=1)
    assert len(fd.docs) == 105  # the data README: 105 articles
    files = read_inputs([extract_out], min_chars=1)
    # The extract folder is read through docs/ only, never rejected/.
    assert {f.path for f in files} == {str(p) for p in (extract_out / "docs").glob("*.parquet")}
    expected = sum(pq.read_metadata(p).num_rows for p in (extract_out / "docs").glob("*.parquet"))
    assert sum(len(f.docs) for f in files) == expected > 0


def test_bad_inputs_name_the_file(tmp_path):
    with pytest.raises(DataError, match=r"no such file or folder: .*missing\.jsonl"):
        read_inputs([tmp_path / "missing.jsonl"], 1)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(DataError, match=re.escape("empty.txt: no documents (empty file)")):
        read_inputs([empty], 1)
    short = tmp_path / "short.txt"
    short.write_text("a\nbb\n")
    with pytest.raises(DataError, match=re.escape("all 2 records shorter than 5 chars")):
        read_inputs([short], 5)
    notext = tmp_path / "notext.parquet"
    pq.write_table(pa.table({"body": ["x" * 200]}), notext)
    with pytest.raises(DataError, match=re.escape("notext.parquet has no 'text' column (columns: body)")):
        read_inputs([notext], 1)
    badjson = tmp_path / "bad.jsonl"
    badjson.write_text(json.dumps({"text": "fine"}) + "\n{oops\n")
    with pytest.raises(DataError, match=re.escape("bad.jsonl:2: not valid JSON")):
        read_inputs([badjson], 1)
    nofield = tmp_path / "nofield.jsonl"
    nofield.write_text(json.dumps({"body": "x"}) + "\n")
    with pytest.raises(DataError, match=re.escape("nofield.jsonl:1: no 'text' field")):
        read_inputs([nofield], 1)
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(DataError, match=re.escape("folder holds no .parquet files")):
        read_inputs([tmp_path / "emptydir"], 1)
    notparquet = tmp_path / "x.parquet"
    notparquet.write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match=re.escape("x.parquet: not a readable Parquet file")):
        read_inputs([notparquet], 1)
