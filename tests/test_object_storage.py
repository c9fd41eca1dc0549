"""The whole chain on a real S3 server: extract -> score -> train-tokenizer -> tokenize -> train, every
input and output s3://, on several "machines".

The server is moto's, on 127.0.0.1 (testkit/s3.py), the only storage the driver shares with the
executors: every Spark job is `spark-submit`ted to the isolated cluster (testkit/isolated.py: each
worker has a private /tmp; `isolated` tier), train-tokenizer runs on the driver's machine, and each
reaches the server only through the standard AWS environment (AWS_ENDPOINT_URL + credentials). The
same chain runs on local folders in this process, and the two must agree: same document ids and
texts after every job, same scores, the same tokenizer bytes, byte-identical token shards (sha256).
Training on S3 shards on two isolated nodes is tests/trainer/test_multinode.py's (the suite's one
two-node run: the per-step losses of one node with two ranks, checkpoints on S3, a resume): shards
byte-identical to the local chain's train as those do, so a second two-node run here repeated it.
dedup s3:// -> s3:// on the isolated cluster is tests/isolated/test_dedup_s3.py's (its corpus has
planted duplicates of every kind, and a worker and the driver die mid-job): on these three WARCs dedup
removes nothing, so a dedup step here (a fourth spark-submit, ~40 s of a loaded run) checked only that
documents pass through it unchanged, and score reads extract's output instead.
A rerun skips every finished unit. The fault
test stops the server while `extract` runs: the job exits 1 naming the inputs that failed, no
marker claims a unit it did not finish, and once the server is back the rerun completes them with
nothing lost or duplicated.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from core.files import doc_parquet_uris
from core.spark import SparkOptions
from core.storage import ObjectStore, join, local_input
from testkit.isolated import ROOT, project_pythonpath, submit_command
from testkit.s3 import s3_env, upload_tree

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Three small real WARCs: two 2024 crawl samples and the whirlwind one (~0.5 MB in all), so the
# chain has several units per job and documents for every stage.
WARCS = (
    "crawl-2024-sample-0000.warc.gz",
    "crawl-2024-sample-0001.warc.gz",
    "cc-main-2024-22-whirlwind.warc.gz",
)
TOXICITY = "profanity-check"  # the scorer that needs no training (the model ships in its wheel)


def _rows(folder: str | Path, *columns: str) -> list[tuple]:
    """Rows (id first) of every Parquet file of a documents folder, local or s3://, sorted by id."""
    rows: list[tuple] = []
    for f in doc_parquet_uris(folder):
        with local_input(f) as path:
            t = pq.read_table(path, columns=["id", *columns])
        rows += list(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))
    return sorted(rows, key=lambda r: r[0])


def _env(server) -> dict[str, str]:
    """The test's environment, the AWS one to find S3, and this checkout first on PYTHONPATH: `python -m`
    runs the code under test from any current folder and whichever checkout the venv was installed from."""
    return {**os.environ, **server.env, "PYTHONPATH": project_pythonpath(os.environ.get("PYTHONPATH"))}


def _cli(server, *args: str, spark: bool = True) -> subprocess.CompletedProcess:
    """`python -m <args> [--master local[2] --no-progress]` with only the AWS environment to find S3."""
    cmd = [sys.executable, "-m", *args, *(("--master", "local[2]", "--no-progress") if spark else ())]
    return subprocess.run(cmd, cwd=ROOT, env=_env(server), capture_output=True, text=True, timeout=900)


def _ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


@pytest.fixture(scope="module")
def local_chain(tmp_path_factory, warc_dir: Path, spark) -> dict:
    """The reference: the same four jobs on local folders, in this process."""
    from classifiers.score import run_score
    from classifiers.scorer import make_spec
    from curation.config import ExtractJobConfig
    from curation.job import run_extract
    from tokens.job import run_tokenize
    from tokens.tokenizer import TokenizerConfig, train_tokenizer

    root = tmp_path_factory.mktemp("local-chain")
    p = {k: str(root / k) for k in ("extract", "scored", "tokens")}
    assert run_extract(
        [str(warc_dir / w) for w in WARCS],
        p["extract"],
        ExtractJobConfig(),
        spark=SparkOptions(progress=False),
    ).ok
    scorers = [make_spec("toxicity", TOXICITY)]
    assert run_score(p["extract"], p["scored"], None, scorers=scorers, spark=SparkOptions(progress=False)).ok
    p["tokenizer"] = str(train_tokenizer(p["scored"], root / "tok", TokenizerConfig(vocab_size=768)))
    assert run_tokenize(
        p["scored"], p["tokenizer"], p["tokens"], source="web", spark=SparkOptions(progress=False)
    ).manifest
    return p


def _submit(
    cluster, pkg: str, *args: str, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`spark-submit --master <isolated cluster> <pkg>/__main__.py <args> --no-progress`."""
    cmd = submit_command(cluster, f"{pkg}/__main__.py", [*args, "--no-progress"])
    env = {**cluster.env, **(env_extra or {})}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def s3_chain(s3_server, isolated_cluster, local_chain, warc_dir: Path, tmp_path_factory):
    """The same chain through the command lines, WARCs uploaded to and every output on S3, every Spark
    step submitted to the isolated cluster (testkit/isolated.py: executors share only S3 with the
    driver), train-tokenizer from and to S3 on the driver's machine.

    Every Spark driver runs with its own empty TMPDIR: `driver_tmp` must still be empty afterwards, so no
    job's data passed through the driver's disk.
    """
    import s3fs

    driver_tmp = {k: tmp_path_factory.mktemp(f"{k}-driver-tmp") for k in ("extract", "score", "tokenize")}
    with s3_env(s3_server):
        s3fs.S3FileSystem().mkdir("refinery-chain")
        b = "s3://refinery-chain"
        warcs = [upload_tree(warc_dir / w, f"{b}/warc/{w}")[0] for w in WARCS]
        p = {k: f"{b}/out/{k}" for k in ("extract", "scored", "tokenizer", "tokens")}
        p["warcs"], p["driver_tmp"] = warcs, driver_tmp
        c = isolated_cluster
        runs = {
            "extract": _ok(
                _submit(c, "curation", "extract", "--input", *warcs, "--output", p["extract"],
                        env_extra={"TMPDIR": str(driver_tmp["extract"])})
            )
        }  # fmt: skip
        runs["score"] = _ok(
            _submit(
                c,
                "classifiers",
                "score",
                "--input",
                p["extract"],
                "--output",
                p["scored"],
                "--toxicity",
                TOXICITY,
                env_extra={"TMPDIR": str(driver_tmp["score"])},
            )
        )
        runs["train-tokenizer"] = _ok(
            _cli(s3_server, "tokens", "train-tokenizer", "--input", p["scored"], "--output", p["tokenizer"],
                 "--set", "vocab_size=768", spark=False)
        )  # fmt: skip
        p["tokenizer"] = join(p["tokenizer"], "tokenizer.json")
        runs["tokenize"] = _ok(
            _submit(c, "tokens", "tokenize", "--input", p["scored"], "--tokenizer", p["tokenizer"],
                    "--output", p["tokens"], "--source", "web", env_extra={"TMPDIR": str(driver_tmp["tokenize"])})
        )  # fmt: skip
        p["runs"] = runs
        yield p


def _tokenize(server, p: dict) -> subprocess.CompletedProcess:
    return _cli(
        server,
        "tokens",
        "tokenize",
        "--input",
        p["scored"],
        "--tokenizer",
        p["tokenizer"],
        "--output",
        p["tokens"],
        "--source",
        "web",
    )


@pytest.mark.isolated
def test_chain_on_s3_equals_the_local_chain(s3_chain, local_chain, s3_server):
    with s3_env(s3_server):
        tok = ObjectStore(s3_chain["tokenizer"]).read_bytes(s3_chain["tokenizer"])
        assert tok == Path(local_chain["tokenizer"]).read_bytes(), "train-tokenizer from S3 gave other bytes"
        assert _rows(s3_chain["extract"], "text", "url") == _rows(local_chain["extract"], "text", "url")
        for step, folder in s3_chain["driver_tmp"].items():
            left = sorted(str(f) for f in folder.rglob("*"))
            assert not left, f"{step} s3 -> s3 put files in the driver's temporary folder: {left[:5]}"
        local_scored = _rows(local_chain["scored"], "text", "toxicity")
        assert len(local_scored) > 10 and _rows(s3_chain["scored"], "text", "toxicity") == local_scored
        store = ObjectStore(s3_chain["tokens"])
        shards = join(s3_chain["tokens"], "shards", "web")
        local_shards = Path(local_chain["tokens"]) / "shards" / "web"
        markers = sorted(store.list(join(shards, "done"), ".json"))
        assert markers
        assert [m.rsplit("/", 1)[-1] for m in markers] == sorted(
            p.name for p in (local_shards / "done").iterdir()
        )
        for m in markers:
            s3_marker = json.loads(store.read_bytes(m))
            local_marker = json.loads((local_shards / "done" / m.rsplit("/", 1)[-1]).read_text())
            # not input_sha256: the scored Parquet records its input's name (an s3:// URI here, a
            # local path there) in its metadata, so the files differ while their rows are equal
            for key in ("bin_sha256", "idx_sha256", "documents", "tokens"):
                assert s3_marker[key] == local_marker[key], key
            # the objects themselves hold those bytes (the marker is not just copied from the task)
            for kind in ("bin", "idx"):
                data = store.read_bytes(join(shards, s3_marker[kind]))
                assert hashlib.sha256(data).hexdigest() == s3_marker[f"{kind}_sha256"]
        assert store.exists(join(shards, "manifest.json"))
        every_key = ObjectStore("s3://refinery-chain").list("s3://refinery-chain/out", recursive=True)
        assert not [k for k in every_key if ".tmp-" in k]  # nothing ever stored under a temporary name


@pytest.mark.isolated
def test_rerun_on_s3_skips_everything_done(s3_chain, s3_server):
    with s3_env(s3_server):
        store = ObjectStore("s3://refinery-chain")
        before = {
            k: store.fs.info(k.split("://", 1)[1])["ETag"] for k in store.list(s3_chain["extract"] + "/docs")
        }
        again = _ok(
            _cli(
                s3_server,
                "curation",
                "extract",
                "--input",
                *s3_chain["warcs"],
                "--output",
                s3_chain["extract"],
            )
        )
        assert f"processed now: 0  already done: {len(WARCS)}" in again.stdout
        after = {
            k: store.fs.info(k.split("://", 1)[1])["ETag"] for k in store.list(s3_chain["extract"] + "/docs")
        }
        assert after == before and len(before) == len(WARCS)
        assert "processed now: 0" in _ok(_tokenize(s3_server, s3_chain)).stdout
        # another config into the same S3 folder is refused before Spark, like a local folder
        other = _cli(
            s3_server,
            "curation",
            "extract",
            "--input",
            *s3_chain["warcs"],
            "--output",
            s3_chain["extract"],
            "--set",
            "langid.threshold=0.9",
        )
        assert other.returncode == 2 and "differs in: langid.threshold" in other.stderr


def test_server_stopped_mid_job_then_rerun_completes(s3_server, local_chain, warc_dir):
    """The server goes away once the first unit is done; the rerun after it is back finishes the rest."""
    import s3fs

    with s3_env(s3_server):
        s3fs.S3FileSystem().mkdir("refinery-fault")
        warcs = [upload_tree(warc_dir / w, f"s3://refinery-fault/warc/{w}")[0] for w in WARCS]
        out = "s3://refinery-fault/extract"
        store = ObjectStore(out)
        stopped = threading.Event()

        def stop_after_first_marker() -> None:
            while not stopped.is_set():
                if store.list(join(out, "done"), ".json"):
                    s3_server.stop()
                    stopped.set()
                time.sleep(0.05)

        watcher = threading.Thread(target=stop_after_first_marker, daemon=True)
        watcher.start()
        env = _env(s3_server)
        # local[1]: one unit at a time, so units remain to run when the server goes away
        cmd = [
            sys.executable,
            "-m",
            "curation",
            "extract",
            "--input",
            *warcs,
            "--output",
            out,
            "--master",
            "local[1]",
            "--no-progress",
            # one download attempt: the units after the stop fail at once instead of after two more tries
            # and their back-off (99 -> 42 s for this test); retrying is test_inputs.py's subject
            "--set",
            "reader.download_retries=1",
        ]
        first = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        stopped.set()
        watcher.join(timeout=5)
        s3_server.start()
        assert first.returncode == 1, first.stdout[-2000:] + first.stderr[-3000:]
        assert "input(s) failed; rerun the same command to retry them" in first.stderr, first.stderr[-5000:]
        failed = [w for w in warcs if f"  {w}: " in first.stderr]  # each failed input named
        done = store.list(join(out, "done"), ".json")
        print(
            "fault run:", [ln for ln in first.stderr.splitlines() if ln.startswith("  s3://")]
        )  # -rP shows it
        assert failed and len(done) + len(failed) == len(WARCS)
        # no marker without its stats, no temporary key, no _SUCCESS for a half-done folder
        for m in done:
            assert store.exists(m.replace("/done/", "/stats/"))
        assert not [k for k in store.list(out, recursive=True) if ".tmp-" in k]
        assert not store.exists(join(out, "_SUCCESS"))

        rerun = _ok(subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900))
        assert f"processed now: {len(failed)}  already done: {len(done)}" in rerun.stdout
        assert store.exists(join(out, "_SUCCESS"))
        rows = _rows(out, "text", "url")
        assert len({r[0] for r in rows}) == len(rows)  # nothing duplicated
        assert rows == _rows(local_chain["extract"], "text", "url")  # nothing lost


def test_a_stray_unit_file_is_never_read_downstream(tmp_path, warc_dir, spark, s3_server, caplog):
    """A docs/ file without its done/ marker (what a killed run can leave; planted here) in a real extract
    output: `score` reads only the marked unit, from a local folder and from S3 alike (core.files.
    finished_docs, one helper for both), and says how many files it skipped and which."""
    import logging

    import s3fs

    from classifiers.score import run_score
    from classifiers.scorer import make_spec
    from core.output import OutputDir
    from curation.config import ExtractJobConfig
    from curation.pipeline import process_file

    ex = tmp_path / "extract"
    cfg = ExtractJobConfig()
    OutputDir(ex).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    res = process_file(str(warc_dir / WARCS[0]), cfg, str(ex))
    unit = res["unit"]
    shutil.copy(ex / "docs" / f"{unit}.parquet", ex / "docs" / "stray.parquet")  # real rows, no marker
    scorers = [make_spec("toxicity", TOXICITY)]
    with caplog.at_level(logging.WARNING, logger="core.files"):
        assert run_score(
            str(ex), str(tmp_path / "scored"), None, scorers=scorers, spark=SparkOptions(progress=False)
        ).ok
    assert sorted(p.name for p in (tmp_path / "scored" / "docs").iterdir()) == [f"{unit}.parquet"]
    assert "1 file(s) in docs/ without a completion marker in done/ skipped" in caplog.text
    assert "stray.parquet" in caplog.text

    with s3_env(s3_server):
        s3fs.S3FileSystem().mkdir("refinery-stray")
        upload_tree(ex, "s3://refinery-stray/extract")
        out = "s3://refinery-stray/scored"
        args = ("--input", "s3://refinery-stray/extract", "--output", out, "--toxicity", TOXICITY)
        run = _ok(_cli(s3_server, "classifiers", "score", *args))
        assert "1 file(s) in docs/ without a completion marker in done/ skipped" in run.stderr
        assert [k.rsplit("/", 1)[-1] for k in ObjectStore(out).list(join(out, "docs"))] == [f"{unit}.parquet"]
