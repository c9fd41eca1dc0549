"""`tokenize --select` values (issue 31, items 12 and 13): a malformed YAML value, a column given twice and
a selection no document can pass are `error: ...`, exit 2, before Spark starts; not a YAML traceback,
not a silently replaced condition, not a job that ends with 0 documents and exit 0."""

from __future__ import annotations

import os
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
    import re

    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "tokens", "tokenize", "--input", str(_docs(tmp_path)),
           "--tokenizer", str(tmp_path / "none.json"), "--output", str(out), "--select", select]  # fmt: skip
    p = subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert p.returncode == 2, p.stderr[-2000:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and re.match(message, lines[0]), p.stderr
    assert not out.exists()  # refused before any output folder or Spark session
