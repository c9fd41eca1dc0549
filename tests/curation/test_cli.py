"""`python -m curation extract` refuses, with exit 2 and before Spark or a folder, what would fail later."""

from __future__ import annotations

from curation.cli import main


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
