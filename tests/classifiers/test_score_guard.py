"""`score` refuses a damaged or overlapping output folder with exit 2 naming the path, before Spark
(issue 31, items 12 and 13; the other jobs: tests/core/test_output_cli.py)."""

from __future__ import annotations

import pytest

from classifiers.cli import main


def _score(inp, out, model_dir, capsys) -> tuple[int, str]:
    rc = main(
        ["score", "--input", str(inp), "--output", str(out), "--model", str(model_dir), "--no-progress"]
    )
    return rc, capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("damage", ["garbage", "folder"])
def test_damaged_config_record_exits_2_naming_it(tmp_path, extract_out, model_dir, damage, capsys):
    out = tmp_path / "out"
    out.mkdir()
    cfg = out / "_config.json"
    cfg.mkdir() if damage == "folder" else cfg.write_text('{"job": ')
    rc, err = _score(extract_out, out, model_dir, capsys)
    assert rc == 2 and err.startswith(f"error: {cfg} "), err
    assert not (out / "done").exists()


def test_overlapping_output_exits_2(tmp_path, extract_out, model_dir, capsys):
    inp = tmp_path / "in"
    (inp / "sub").mkdir(parents=True)
    for f in sorted((extract_out / "docs").glob("*.parquet"))[:1]:
        (inp / "sub" / f.name).write_bytes(f.read_bytes())
    rc, err = _score(inp, inp, model_dir, capsys)
    assert rc == 2 and f"--output {inp} is also the --input" in err, err
    rc, err = _score(inp, inp / "scored", model_dir, capsys)
    assert rc == 2 and f"--output {inp / 'scored'} lies inside --input {inp}" in err, err
    rc, err = _score(inp / "sub", inp, model_dir, capsys)
    assert rc == 2 and f"--input {inp / 'sub'} lies inside --output {inp}" in err, err
    assert sorted(p.name for p in inp.iterdir()) == ["sub"]
