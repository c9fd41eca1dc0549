"""`make demo` on any WARCs and any good text (workflows/demo_inputs.py), checked through `--dry-run`.

Each WARCS form is resolved as `extract` resolves it (a local glob; an s3:// glob on moto's S3 server; an
http:// warc.paths listing on a real server on 127.0.0.1 with WARC_BASE; a cc-index table with
RECORDS, whose `pick-records` step then runs for real, on the local file and over HTTP ranged reads),
down to the extract command the demo would run. Without inputs or a shared data folder the demo exits 2
saying what to pass; explicit POSITIVES replace the shared files in train-quality and train-lm. The
reduced demo (tests/support/demo.py) runs the whole path on explicit WARCS and POSITIVES.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from testkit.range_server import serving
from testkit.shared_data import REPO_ROOT
from workflows.cli import main
from workflows.demo_inputs import DEFAULT_WHERE
from workflows.paths import SHARED_DATA_ENV

SAMPLES = ("crawl-2024-sample-0000.warc.gz", "crawl-2024-sample-0001.warc.gz")


def dry_run(capsys, out: Path, *args: str) -> list[list[str]]:
    """`python -m workflows demo --dry-run` in this process: its lines, each split as the shell would."""
    assert main(["demo", "--out", str(out), "--dry-run", *args]) == 0
    return [shlex.split(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def command(lines: list[list[str]], *head: str) -> list[str]:
    [cmd] = [c for c in lines if c[: len(head)] == list(head)]
    return cmd


def resolved(lines: list[list[str]]) -> int:
    """The number of WARC files the dry run resolved (`# WARCs: N files (...)`)."""
    [line] = [c for c in lines if c[:2] == ["#", "WARCs:"]]
    return int(line[2])


def test_local_glob(capsys, tmp_path, warc_dir):
    glob = str(warc_dir / "crawl-2024-sample-*.warc.gz")
    lines = dry_run(capsys, tmp_path, "--warcs", glob)
    assert resolved(lines) == 2
    extract = command(lines, "python", "-m", "curation", "extract")
    assert extract == [
        "python",
        "-m",
        "curation",
        "extract",
        "--input",
        glob,
        "--output",
        f"{tmp_path}/extract",
    ]


def test_s3_glob(capsys, tmp_path, warc_dir, s3_bucket):
    from testkit.s3 import upload_tree

    for name in SAMPLES:
        upload_tree(warc_dir / name, f"{s3_bucket}/crawl/{name}")
    lines = dry_run(capsys, tmp_path, "--warcs", f"{s3_bucket}/crawl/*.warc.gz")
    assert resolved(lines) == 2
    extract = command(lines, "python", "-m", "curation", "extract")
    assert extract[4:] == ["--input", f"{s3_bucket}/crawl/*.warc.gz", "--output", f"{tmp_path}/extract"]


def test_http_listing_with_warc_base(capsys, tmp_path, warc_dir):
    served = tmp_path / "served"
    (served / "crawl").mkdir(parents=True)
    for name in SAMPLES:
        (served / "crawl" / name).symlink_to(warc_dir / name)
    (served / "warc.paths").write_text("".join(f"crawl/{n}\n" for n in SAMPLES))
    with serving(served) as server:
        url = server.url
        lines = dry_run(capsys, tmp_path / "out", "--warcs", f"{url}warc.paths", "--warc-base", url)
    assert resolved(lines) == 2
    assert lines[0][-2] == f"({url}crawl/{SAMPLES[0]},"  # the lines joined to WARC_BASE
    extract = command(lines, "python", "-m", "curation", "extract")
    assert extract[4:] == ["--input", f"{url}warc.paths", "--set", f"cc_base_url={url}",
                           "--output", f"{tmp_path}/out/extract"]  # fmt: skip


@pytest.fixture(scope="module")
def index(tmp_path_factory, warc_dir) -> Path:
    """A cc-index table of the two crawl samples (`python -m curation index`)."""
    from curation.index.ccindex import build_index

    out = tmp_path_factory.mktemp("index") / "index.parquet"
    assert not build_index([str(warc_dir / w) for w in SAMPLES], str(out)).errors
    return out


def test_index_records(capsys, tmp_path, index, warc_dir):
    lines = dry_run(capsys, tmp_path, "--index", str(index), "--records", "5", "--warc-base", str(warc_dir))
    sample = f"{tmp_path}/index-sample/records.parquet"
    pick = command(lines, "python", "-m", "workflows", "pick-records")
    assert pick[4:] == ["--index", str(index), "--where", DEFAULT_WHERE, "--records", "5", "--output", sample]
    extract = command(lines, "python", "-m", "curation", "extract")
    assert extract[4:] == ["--index", sample, "--where", DEFAULT_WHERE, "--warc-base", str(warc_dir),
                           "--output", f"{tmp_path}/extract"]  # fmt: skip
    assert lines.index(pick) < lines.index(extract)

    # The step itself: the first 5 selected rows, which the same condition selects again in extract.
    assert main(pick[3:]) == 0
    picked = pq.read_table(sample)
    whole = pq.read_table(index)
    en_html = [r for r in whole.to_pylist()
               if r["fetch_status"] == 200 and r["content_mime_type"] == "text/html"
               and (r["content_languages"] or "").startswith("eng")]  # fmt: skip
    assert len(en_html) > 5
    keys = ("warc_filename", "warc_record_offset", "warc_record_length")
    assert [tuple(r[k] for k in keys) for r in picked.to_pylist()] == [
        tuple(r[k] for k in keys) for r in en_html[:5]
    ]
    assert {"fetch_status", "content_mime_type", "content_languages"} <= set(picked.column_names)

    # Over HTTP ranged reads (an https:// index file of Common Crawl is read the same way): the same rows.
    with serving(index.parent) as server:
        url = f"{server.url}{index.name}"
        assert main([*pick[3:5], url, *pick[6:-1], str(tmp_path / "http.parquet")]) == 0
    assert pq.read_table(tmp_path / "http.parquet").equals(picked)


def test_no_shared_data_and_no_inputs_says_what_to_pass(tmp_path):
    env = {**os.environ, SHARED_DATA_ENV: str(tmp_path / "none")}
    res = subprocess.run([sys.executable, "-m", "workflows", "demo", "--out", str(tmp_path / "out")],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert "make demo needs WARCS and POSITIVES" in res.stderr
    for example in ("make demo INDEX=https://data.commoncrawl.org/cc-index/", "RECORDS=", "WARCS=s3://commoncrawl/",
                    "WARCS=https://", "WARC_BASE=", "POSITIVES=good.jsonl"):  # fmt: skip
        assert example in res.stderr, example
    assert not (tmp_path / "out").exists()  # nothing started


def test_warcs_without_positives_names_positives(capsys, tmp_path, warc_dir, monkeypatch):
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path / "none"))
    assert main(["demo", "--out", str(tmp_path), "--dry-run", "--warcs", str(warc_dir / SAMPLES[0])]) == 2
    err = capsys.readouterr().err
    assert "make demo needs POSITIVES" in err and "WARCS=" not in err


def test_explicit_positives_replace_the_shared_files(capsys, tmp_path, data_dir):
    good = tmp_path / "good.jsonl"
    shutil.copy(data_dir / "quality" / "enwiki_sample_articles.jsonl", good)
    lines = dry_run(capsys, tmp_path / "out", "--positives", str(good))  # the shared folder is there too
    quality = command(lines, "python", "-m", "classifiers", "train-quality")
    assert quality[quality.index("--positive") + 1 : quality.index("--negative")] == [str(good)]
    lm = command(lines, "python", "-m", "workflows", "train-lm")
    assert lm[lm.index("--reference") + 1 :] == [str(good)]
    assert not any("/quality/" in arg for line in lines if line[0] != "#" for arg in line)


def test_makefile_passes_the_inputs_as_given(tmp_path):
    """`make demo WARCS=... POSITIVES=...`: each word one argument, quoted, globs unexpanded."""
    res = subprocess.run(
        ["make", "-n", "--no-print-directory", "-o", "install", "demo", f"WARCS={tmp_path}/*.warc.gz s3://b/c.warc.gz",
         "POSITIVES=a.jsonl b.txt", "INDEX=i.parquet", "WHERE=content_languages = 'eng'", "RECORDS=5"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
        # under `make test` the parent make's variables would make this one a sub-make
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    [line] = [x for x in res.stdout.splitlines() if " -m workflows demo " in x]
    args = shlex.split(line)
    assert args[args.index("--warcs") + 1 : args.index("--warcs") + 3] == [
        f"{tmp_path}/*.warc.gz",
        "s3://b/c.warc.gz",
    ]
    assert args[args.index("--positives") + 1 :][:2] == ["a.jsonl", "b.txt"]
    assert args[args.index("--where") + 1] == "content_languages = 'eng'"
    assert args[args.index("--records") + 1] == "5"


@pytest.mark.parametrize("command", ["demo", "pick-records"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0 and "--records" in capsys.readouterr().out


def test_lm_overrides_reach_train_lm_and_a_bad_one_stops_the_demo_first(capsys, tmp_path):
    lines = dry_run(capsys, tmp_path / "out", "--lm-set", "steps=150", "--lm-set", "global_batch=16")
    lm = command(lines, "python", "-m", "workflows", "train-lm")
    assert lm[lm.index("--set") :] == ["--set", "steps=150", "--set", "global_batch=16"]
    # checked before any step (here: before the dry run prints one), naming the key
    assert main(["demo", "--out", str(tmp_path / "bad"), "--dry-run", "--lm-set", "stepz=150"]) == 2
    out, err = capsys.readouterr()
    assert "stepz" in err and "train-lm" not in out
