"""`python -m curation extract` refuses, with exit 2 and before Spark or a folder, what would fail later;
`index` takes `--config`/`--set` like every command, its flags being aliases of the keys."""

from __future__ import annotations

import curation.index.ccindex
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
