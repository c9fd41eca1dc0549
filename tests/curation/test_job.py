"""The `extract` job on real Spark (local[2]): outputs, rerun/skip, resume after a kill, spark-submit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from core.output import OutputConflict
from core.spark import SparkOptions
from curation.config import ExtractJobConfig
from curation.job import run_extract
from curation.pipeline import process_file

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]
CFG = ExtractJobConfig()
FILES = [
    "cc-main-2020-34-sample.warc.gz",
    "crawl-2024-sample-0000.warc.gz",
    "crawl-2024-sample-0001.warc.gz",
    "cc-main-2024-22-whirlwind.warc.gz",
    "quirks/chunked-uncompressed.warc",
    "wet-cc-main-2016-50/fragment3.wet.gz",
]


def _docs(root: Path) -> list[dict]:
    rows = []
    for f in sorted((root / "docs").glob("*.parquet")):
        rows += pq.read_table(f).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def _inputs(warc_dir) -> list[str]:
    return [str(warc_dir / f) for f in FILES]


@pytest.fixture(scope="module")
def job_out(spark, warc_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("job") / "out"
    result = run_extract(_inputs(warc_dir), str(out), CFG, spark=SparkOptions(progress=False))
    return out, result


def test_job_outputs_match_direct_runs(job_out, warc_dir, tmp_path):
    out, result = job_out
    assert result.ok and result.inputs == len(FILES) and result.processed == len(FILES)
    assert (out / "_SUCCESS").exists()
    direct = tmp_path / "direct"
    from core.output import OutputDir

    OutputDir(direct).prepare("extract", CFG.to_dict(), CFG.fingerprint())
    for f in _inputs(warc_dir):
        assert process_file(f, CFG, str(direct))["status"] == "done"
    assert _docs(out) == _docs(direct)
    merged = json.loads((out / "stats.json").read_text())
    assert merged["docs_written"] == len(_docs(out)) > 0
    assert merged["done"] == len(FILES) and merged["failed"] == []
    stages = {s["stage"]: s for s in merged["stages"]}
    assert stages["write"]["docs_out"] == merged["docs_written"]


def test_rerun_skips_finished_files(job_out, warc_dir):
    out, _ = job_out
    before = _docs(out)
    again = run_extract(_inputs(warc_dir), str(out), CFG, spark=SparkOptions(progress=False))
    assert again.processed == 0 and again.skipped == len(FILES)
    assert _docs(out) == before


def test_other_config_is_refused(job_out, warc_dir):
    out, _ = job_out
    other = ExtractJobConfig.from_dict({"langid": {"threshold": 0.5}})
    with pytest.raises(OutputConflict, match=r"langid\.threshold"):
        run_extract(_inputs(warc_dir), str(out), other, spark=SparkOptions(progress=False))


def _cli(*args, **kw):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "REFINERY_SPARK_DAEMON_VERBOSE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "curation", "extract", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        **kw,
    )


def test_resume_after_kill_gives_same_output(job_out, warc_dir, tmp_path):
    """Kill the job (SIGKILL, whole process group) after its first file is done, rerun, compare."""
    out_ref, _ = job_out
    out = tmp_path / "resumed"
    args = ["--input", *_inputs(warc_dir), "--output", str(out), "--master", "local[1]"]
    args += ["--spark-conf", "spark.ui.enabled=false", "--no-progress"]
    proc = _cli(*args)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if list((out / "done").glob("*.json")) if (out / "done").exists() else []:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the job finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_after_kill = len(list((out / "done").glob("*.json")))
    assert 1 <= done_after_kill < len(FILES)
    assert not (out / "_SUCCESS").exists()
    rerun = _cli(*args)
    log, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, log
    assert f"already done: {done_after_kill}" in log
    # the CLI starts its session with the preloading daemon (curation/spark_daemon.py), which built
    # the stages before forking the worker; the output below is the reference's all the same
    assert "refinery spark daemon (curation.spark_daemon): preloaded in" in log, log
    assert not list(out.rglob(".*.tmp-*")), "temporary files left behind"
    assert _docs(out) == _docs(out_ref)
    assert (out / "_SUCCESS").exists()


def test_bad_input_fails_before_spark(tmp_path):
    proc = _cli("--input", str(tmp_path / "missing.warc.gz"), "--output", str(tmp_path / "o"))
    log, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert "error: input not found" in log
    assert "SparkContext" not in log and not (tmp_path / "o").exists()


def test_spark_submit_runs_the_same_module(job_out, warc_dir, tmp_path):
    """`spark-submit curation/__main__.py extract ...` gives the same documents as the CLI."""
    import pyspark

    out_ref, _ = job_out
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    out = tmp_path / "submitted"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    cmd = [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false", "curation/__main__.py"]
    cmd += ["extract", "--input", *_inputs(warc_dir), "--output", str(out), "--no-progress"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _docs(out) == _docs(out_ref)


def test_other_input_list_is_refused_same_list_resumes(job_out, warc_dir):
    """`extract --input A B --output O` then `--input C --output O` mixed C's documents into O while
    stats.json and _SUCCESS described only C."""
    out, _ = job_out
    before = sorted(p.name for p in (out / "docs").iterdir())
    with pytest.raises(OutputConflict, match=r"differs in: inputs\); inputs: 1 added \(.*BL-2014"):
        run_extract(
            [*_inputs(warc_dir), str(warc_dir / FILES_OTHER)],
            str(out),
            CFG,
            spark=SparkOptions(progress=False),
        )
    with pytest.raises(OutputConflict, match=r"inputs: \d+ removed"):
        run_extract(_inputs(warc_dir)[:2], str(out), CFG, spark=SparkOptions(progress=False))
    assert sorted(p.name for p in (out / "docs").iterdir()) == before
    again = run_extract(
        _inputs(warc_dir)[::-1], str(out), CFG, spark=SparkOptions(progress=False)
    )  # order is not a change
    assert again.processed == 0 and again.skipped == len(FILES)


FILES_OTHER = "BL-20140325121225068-00000-32090~opera~8443.warc.gz"
