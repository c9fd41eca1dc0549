"""`python -m curation extract` refuses, with exit 2 and before Spark or a folder, what would fail later;
`index` takes `--config`/`--set` like every command, its flags being aliases of the keys."""

from __future__ import annotations

import pytest

import curation.index.ccindex
import curation.job
from core.output import OutputDir
from core.runner import RunResult
from curation.cli import main
from curation.index.ccindex import IndexReport


def test_output_that_is_a_file(tmp_path, warc_dir, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["extract", "--input", str(warc_dir / "pages-aeb-181.warc.gz"), "--output", str(f)]) == 2
    assert f"error: output {f} is a file, not a folder" in capsys.readouterr().err


def test_bad_master(tmp_path, warc_dir, capsys):
    out = tmp_path / "o"
    args = ["extract", "--input", str(warc_dir / "pages-aeb-181.warc.gz"), "--output", str(out)]
    assert main([*args, "--master", "bogus://x"]) == 2
    assert "--master 'bogus://x' is not a Spark master URL" in capsys.readouterr().err
    assert not out.exists()


def test_index_settings_by_set_config_or_flag(tmp_path, warc_dir, monkeypatch, capsys):
    seen = []

    def build_index(warcs, output, root=None, cdxj=None, languages=True):
        seen.append((root, languages))
        return IndexReport()

    monkeypatch.setattr(curation.index.ccindex, "build_index", build_index)
    base = ["index", str(warc_dir / "pages-aeb-181.warc.gz"), "--output", str(tmp_path / "i.parquet")]
    cfg = tmp_path / "index.yaml"
    cfg.write_text("root: /data\nlanguages: false\n")
    assert main(base) == 0
    assert main([*base, "--set", "languages=false"]) == 0
    assert main([*base, "--no-languages"]) == 0
    assert main([*base, "--config", str(cfg), "--root", "/other"]) == 0
    assert seen == [(None, True), (None, False), (None, False), ("/other", False)]
    assert main([*base, "--set", "languages=maybe"]) == 2
    assert "languages must be true or false" in capsys.readouterr().err


def test_extract_help_says_index_needs_where_and_warc_base(capsys):
    with pytest.raises(SystemExit):
        main(["extract", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps at the terminal's width
    assert "--where selects, fetched by ranged reads from" in text and "(both required with --index)" in text
    assert "--where SQL required with --index: SQL condition" in text
    assert "--warc-base URL_OR_PREFIX required with --index: where warc_filename lives" in text


@pytest.mark.parametrize(("units", "note"), [(9, True), (4, False)])
def test_extract_says_when_its_inputs_are_byte_ranges(tmp_path, monkeypatch, capsys, units, note):
    """The runner counts units: 4 WARCs cut into 9 ranges print "inputs: 9", which the header explains
    with the range size the run recorded (a run of whole files says nothing more)."""
    out = tmp_path / "out"

    def run_extract(inputs, output, cfg, *, spark):
        files = [f"/w/{i}.warc.gz" for i in range(4)]
        OutputDir(output).prepare(
            "extract", {}, "f", {"inputs": files, "split_bytes": 16 << 20, "unit_bytes": 3 << 20}
        )
        return RunResult(str(out), inputs=units, skipped=0, processed=units)

    monkeypatch.setattr(curation.job, "run_extract", run_extract)
    assert main(["extract", "--input", "/w/*.warc.gz", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"inputs: {units}  processed now: {units}" in printed
    expected = "; inputs are byte ranges: 9 of 4 files, each up to 3.0 MiB (reader.split_bytes caps it"
    assert (expected in printed) is note
