"""`tokenize --select` values (issue 31, items 12 and 13): a malformed YAML value, a column given twice and
a selection no document can pass are `error: ...`, exit 2, before Spark starts; not a YAML traceback,
not a silently replaced condition, not a job that ends with 0 documents and exit 0."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.config import ConfigError
from tokens.cli import parse_select

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("lang=[en, de", r"expected ',' or '\]'.* at column 8"),  # the example
        ("lang={en: 1", r"expected ',' or '\}'"),
        ('lang="en', r"found unexpected end of stream"),
        ("lang=[en, [de]", r"expected ',' or '\]'"),
        ("lang=en: de: fr", r"mapping values are not allowed here"),
    ],
)
def test_malformed_yaml_value_is_a_config_error_naming_it(value, why):
    with pytest.raises(ConfigError, match=rf"--select '{value[:4]}.*is not a value or a YAML list \({why}"):
        parse_select([value])


def test_well_formed_values_parse_as_before():
    assert parse_select(["lang=[en, de]", "quality=>= 0.6", "dup=1", "drop_reason=null"]) == {
        "lang": ["en", "de"],
        "quality": ">= 0.6",
        "dup": 1,
        "drop_reason": None,
    }


def test_a_column_given_twice_is_refused_not_replaced():
    """`--select 'q=> 0.5' --select 'q=< 0.2'` used to keep only the second condition."""
    with pytest.raises(ConfigError, match=r"--select quality is given twice; join conditions .* 'and'"):
        parse_select(["quality=> 0.5", " quality =< 0.2"])


def _docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    pq.write_table(
        pa.table({"id": ["a", "b"], "text": ["one", "two"], "quality": [0.1, 0.9]}), d / "x.parquet"
    )
    return d


@pytest.mark.parametrize(
    ("select", "message"),
    [
        ("lang=[en, de", r"error: --select 'lang=\[en, de': '\[en, de' is not a value or a YAML list"),
        (
            "quality=> 0.5 and < 0.2",
            r"error: --select: select\.quality: '> 0\.5 and < 0\.2' selects no document",
        ),
        ("quality=== 1 and == 2", r"error: --select: select\.quality: '== 1 and == 2' selects no document"),
        ("lang=[]", r"error: --select: select\.lang: an empty list selects no document"),
    ],
)
def test_cli_exits_2_with_one_line_before_spark(tmp_path, select, message):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "tokens", "tokenize", "--input", str(_docs(tmp_path)),
           "--tokenizer", str(tmp_path / "none.json"), "--output", str(out), "--select", select]  # fmt: skip
    p = subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert p.returncode == 2, p.stderr[-2000:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and re.match(message, lines[0]), p.stderr
    assert not out.exists()  # refused before any output folder or Spark session


# -- a plain threshold that matches no document (issue 44, item 5) --------------------------------
# Real documents: the 218 pages of the DCLM human labels, in two Parquet files, with their length in
# characters (`chars`) and a score column as a scorer that scored nothing leaves it: NaN everywhere
# (a NaN fails every comparison) or null. parse_selectors cannot see these (the condition itself is
# satisfiable), so the job counts, and refuses before the manifest: exit 2, the selector and the
# column named. Before, it tokenized 0 documents and exited 0.


@pytest.fixture(scope="module")
def dclm_docs(tmp_path_factory) -> Path:
    from testkit.shared_data import shared_data_dir

    path = shared_data_dir() / "quality" / "dclm_human_labels_dev.jsonl"
    texts = [
        json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    root = tmp_path_factory.mktemp("dclm") / "docs"
    root.mkdir()
    half = len(texts) // 2
    for i, part in enumerate((texts[:half], texts[half:])):
        n = len(part)
        table = pa.table(
            {
                "id": [f"{i}-{j}" for j in range(n)],
                "text": part,
                "chars": pa.array([len(t) for t in part], pa.int64()),
                "nan_score": pa.array([float("nan")] * n, pa.float32()),
                "null_score": pa.array([None] * n, pa.float32()),
            }
        )
        pq.write_table(table, root / f"part-{i}.parquet")
    return root


EMPTY_SELECTIONS = {  # --select -> what the refusal names
    "nan_score=>= 0.5": r"`nan_score >= 0\.5` failed on 218 \(a NaN value fails every comparison\)",
    "nan_score=< 0.5": r"`nan_score < 0\.5` failed on 218",
    "null_score=>= 0.5": r"column 'null_score' is null on 218",
    "chars=> 100000000": r"`chars > 100000000` failed on 218",
}


@pytest.mark.spark
@pytest.mark.parametrize("select", list(EMPTY_SELECTIONS))
def test_a_selection_that_keeps_no_document_exits_2_naming_the_selector(
    spark, dclm_docs, tmp_path, capsys, select
):
    from tokens.cli import main
    from tokens.tokenizer import TokenizerConfig, train_tokenizer

    tok = train_tokenizer(dclm_docs, tmp_path / "tok", TokenizerConfig(vocab_size=512))
    out = tmp_path / "tokens"
    args = ["tokenize", "--input", str(dclm_docs), "--tokenizer", str(tok), "--output", str(out)]
    capsys.readouterr()
    assert main([*args, "--source", "s", "--select", select]) == 2
    err = capsys.readouterr().err  # the progress bar's lines, then one error line
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: tokenize's selection removed all 218 documents") and "Traceback" not in err
    assert re.search(EMPTY_SELECTIONS[select], err), err
    assert "set allow_remove_all: true" in err and "without manifest.json" in err
    assert not (out / "shards" / "s" / "manifest.json").exists()
    # The user says so: the same folder is finished (its parts are done), with an empty manifest.
    assert main([*args, "--source", "s", "--select", select, "--set", "allow_remove_all=true"]) == 0
    m = json.loads((out / "shards" / "s" / "manifest.json").read_text())
    assert m["documents"] == 0
