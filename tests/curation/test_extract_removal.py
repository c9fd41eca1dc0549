"""Extract's removal guard (issue 54, core/removal.py), as tokenize and decontamination have: a run
that writes under 1% of the >= 100 documents it read is refused, exit 2, naming what dropped them,
unless `allow_remove_all`. Real pages (the trafilatura evaluation WARC, 238 pages), real lid.176.
Before, a keep-list that matched nothing dropped every page with exit 0 and a folder marked finished."""

from __future__ import annotations

import pytest

from curation.cli import main
from curation.config import ExtractJobConfig

pytestmark = pytest.mark.spark


def test_extract_that_removes_everything_is_refused_then_published_when_allowed(warc_dir, tmp_path, capsys):
    warc = str(warc_dir / "pages-trafilatura-eval-part0.warc.gz")
    out = tmp_path / "out"
    args = ["extract", "--input", warc, "--output", str(out), "--set", "langid.languages=[zul]"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "\nerror: extract removed all 238 documents" in err and "Traceback" not in err
    assert (
        "prelid: lang_not_kept 236" in err and "langid.languages" in err and "allow_remove_all: true" in err
    )
    assert "read:" not in err  # WARC records that are not pages are not documents
    assert (out / "stats.json").is_file() and not (out / "_SUCCESS").exists()
    # the opt-in is not in the fingerprint: the same folder, no unit redone, published
    assert main([*args, "--set", "allow_remove_all=true"]) == 0
    assert "processed now: 0  already done: 6" in capsys.readouterr().out
    assert (out / "_SUCCESS").exists()


def test_a_run_that_keeps_documents_is_not_judged(warc_dir, tmp_path, capsys):
    out = tmp_path / "out"
    warc = str(warc_dir / "pages-trafilatura-eval-part0.warc.gz")
    assert main(["extract", "--input", warc, "--output", str(out)]) == 0
    assert (out / "_SUCCESS").exists()


def test_allow_remove_all_changes_no_fingerprint():
    a, b = ExtractJobConfig.load(None), ExtractJobConfig.load(None, ["allow_remove_all=true"])
    assert b.allow_remove_all and a.fingerprint() == b.fingerprint() and "allow_remove_all" not in a.to_dict()
