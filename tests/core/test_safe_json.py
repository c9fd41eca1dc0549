"""core/safe_json.py: the checked JSON reader every model folder's files go through.

Real JSON files of the shared data (a JSON Schema, two extraction ground truths, a PII set: 75 KB to
1 MB, nested, with numbers and escaped strings) read exactly as `json.loads` reads them; each kind of
hostile text is refused with an error naming the file and, for a value, its key path, quickly and
without a RecursionError, OverflowError or ValueError traceback.
"""

from __future__ import annotations

import json
import time

import pytest

from core.errors import InputError
from core.safe_json import (
    INT_BOUND,
    MAX_DEPTH,
    JSONFileError,
    key_path,
    loads_checked,
    nesting_depth,
    read_json_file,
)

REAL = (
    "schemas/compose-spec.json",
    "extraction/aeb/ground-truth.json",
    "extraction/trafilatura-eval/evaldata.json",
    "pii/presidio_synth_dev.json",
)


@pytest.mark.parametrize("rel", REAL)
def test_real_json_files_read_as_json_loads_reads_them(data_dir, rel):
    path = data_dir / rel
    assert read_json_file(path) == json.loads(path.read_text(encoding="utf-8"))
    text = path.read_text(encoding="utf-8")
    assert nesting_depth(text) <= MAX_DEPTH


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": NaN}', r"f\.json: a: NaN is not a finite number"),
        ('{"a": [1, {"b": Infinity}]}', r"f\.json: a\[1\]\.b: Infinity is not a finite number"),
        ('{"a": {"b": [-Infinity]}}', r"f\.json: a\.b\[0\]: -Infinity is not a finite number"),
        ('{"cuts": [0.5, 1e400]}', r"f\.json: cuts\[1\]: 1e400 overflows a float"),
        ('{"cuts": [-1e309]}', r"f\.json: cuts\[0\]: -1e309 overflows a float"),
        (
            '{"coef": [1' + "0" * 400 + "]}",
            r"f\.json: coef\[0\]: the integer \d+\.\.\. \(401 digits\) is beyond int64",
        ),
        ('{"n": ' + "9" * 5000 + "}", r"f\.json: n: the integer 9+\.\.\. \(5000 digits\) is beyond int64"),
        (f'{{"n": {INT_BOUND}}}', r"f\.json: n: the integer 9223372036854775808\.\.\. \(19 digits\)"),
        ('{"a": 1, "a": 2}', r"f\.json: a: the key 'a' is given twice in one object"),
        ("[NaN]", r"f\.json: \[0\]: NaN"),
        ("NaN", r"f\.json: \(top level\): NaN"),
        ("[" * 100_000 + "]" * 100_000, r"f\.json: nests deeper than the 64 levels"),
        ('{"a": ' * 65 + "1" + "}" * 65, r"f\.json: nests deeper than the 64 levels"),
        ('{"a": [1, 2', r"f\.json: not valid JSON: Expecting .* \(line 1, column \d+\)"),
        ("", r"f\.json: not valid JSON"),
        (b"\xff{}", r"f\.json: not UTF-8 \(byte 0\)"),
    ],
    ids=lambda v: str(v)[:24],
)
def test_hostile_json_is_refused_naming_the_file_and_the_key(text, message):
    t0 = time.monotonic()
    with pytest.raises(JSONFileError, match=message) as e:
        loads_checked(text, "f.json")
    assert isinstance(e.value, InputError)  # `error: ...`, exit 2 from every CLI
    assert time.monotonic() - t0 < 5


def test_the_bounds_are_inclusive_of_what_a_model_writes():
    ok = '{"a": [1.5e308, -1.5e308, 9223372036854775807, -9223372036854775807, 0.0, -0, 1e-320]}'
    assert loads_checked(ok, "f.json") == json.loads(ok)
    assert loads_checked('{"a": ' * 64 + "1" + "}" * 64, "f.json") is not None  # exactly the limit


def test_brackets_inside_strings_are_not_nesting():
    text = json.dumps({"s": "[" * 1000 + "{" * 1000, "t": 'a "quoted \\" [[[ " string'})
    assert nesting_depth(text) == 1
    assert loads_checked(text, "f.json")["s"].startswith("[[[")


def test_size_is_checked_before_reading(tmp_path):
    p = tmp_path / "big.json"
    p.write_text("[" + "0," * 1000 + "0]")
    with pytest.raises(JSONFileError, match=r"big\.json: 2,003 bytes, over the 1,000"):
        read_json_file(p, max_bytes=1000)
    with pytest.raises(JSONFileError, match=r"2,003 bytes, over the 1,000"):
        loads_checked(p.read_bytes(), str(p), max_bytes=1000)
    with pytest.raises(JSONFileError, match=r"missing\.json: cannot be read"):
        read_json_file(tmp_path / "missing.json")


def test_key_path():
    assert key_path(("columns", 0, "cuts", 3)) == "columns[0].cuts[3]"
    assert key_path((2, "a")) == "[2].a"
    assert key_path(()) == "(top level)"
