"""Fault injection (`pytest -m faults`): each fault ends in a correct result or a clear error naming
the unit, and never in output that a later stage would take as complete.

Here: a Spark executor's Python worker killed mid-task (Spark retries the task), a full disk
(ENOSPC injected while a unit commits, and a real one: a size-limited tmpfs), a corrupt input Parquet file for each job that reads documents, and
a truncated token shard. Faults tested elsewhere, with the same rule: the driver killed mid-job
and rerun (tests/curation/test_job.py::test_resume_after_kill_gives_same_output, dedup's resume
tests), a corrupt or incomplete newest checkpoint (tests/trainer/test_train_deepspeed.py::
test_damaged_newest_checkpoints_fall_back), the trainer killed mid-run (test_sigkill_and_relaunch_
resumes_bit_exactly), damaged WARCs (tests/curation/test_warc.py).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.output import OutputDir
from curation.config import ExtractJobConfig
from curation.pipeline import process_file
from testkit.shared_data import REPO_ROOT
from testkit.spark_workers import busy_python_worker
from testkit.tiers import refused

pytestmark = pytest.mark.faults

WARC = "crawl-2024-sample-0000.warc.gz"


def _cli(module: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", module, *args], env=env, capture_output=True, text=True,
                          timeout=900, cwd=REPO_ROOT)  # fmt: skip


def _rows(folder: Path) -> list[dict]:
    files = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))
    return sorted((r for f in files for r in pq.read_table(f).to_pylist()), key=lambda r: r["id"])


# -- a full disk while a unit commits ----------------------------------------------------------------


def test_enospc_while_committing_leaves_no_finished_looking_unit(tmp_path, warc_dir, monkeypatch):
    """The rename into place fails with ENOSPC: the unit fails naming the error, no marker and no
    temporary file is left, and a rerun once there is space gives what a clean run gives."""
    import core.output

    cfg = ExtractJobConfig()
    uri = str(warc_dir / WARC)
    out = tmp_path / "out"
    OutputDir(out).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    real_replace = os.replace

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))

    monkeypatch.setattr(core.output.os, "replace", full_disk)
    res = process_file(uri, cfg, str(out))
    assert res["status"] == "failed" and "No space left on device" in res["error"]
    assert not list((out / "done").glob("*.json")), "a failed unit must not look finished"
    assert not list(out.rglob(".*.tmp-*")), "temporary files left behind"
    assert not list((out / "docs").glob("*.parquet"))

    monkeypatch.setattr(core.output.os, "replace", real_replace)
    assert process_file(uri, cfg, str(out))["status"] == "done"
    clean = tmp_path / "clean"
    OutputDir(clean).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    assert process_file(uri, cfg, str(clean))["status"] == "done"
    assert _rows(out / "docs") == _rows(clean / "docs") and _rows(out / "docs")


@pytest.fixture
def small_disk(tmp_path):
    """A real 64 KiB filesystem (tmpfs with a size limit): writes fail with the kernel's own ENOSPC."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    # the platform cannot give this fault: skipped, but a failure under CI=true (the tier runs in CI)
    if res.returncode != 0:
        refused(f"cannot mount a size-limited tmpfs here (needs CAP_SYS_ADMIN): {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        # lazy: the mount point can stay busy for the kernel a moment after the last file closes; what
        # this process itself holds open there is asserted by the test
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _open_paths() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
    return out


def test_real_full_disk_fails_the_unit_and_a_rerun_with_space_completes(tmp_path, warc_dir, small_disk):
    """The output folder is on a filesystem too small for one WARC's documents. The unit fails naming
    ENOSPC, leaves no marker and no temporary file (the space is given back), and once the filesystem
    is grown the rerun gives exactly what a clean run gives."""
    cfg = ExtractJobConfig()
    uri = str(warc_dir / "BL-20140325121225068-00000-32090~opera~8443.warc.gz")  # ~0.4 MB of documents
    out = small_disk / "out"
    OutputDir(out).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    res = process_file(uri, cfg, str(out))
    assert res["status"] == "failed" and "No space left on device" in res["error"], res
    # the failed unit's files are closed: a deleted file still open keeps its space taken
    assert not [p for p in _open_paths() if p.startswith(str(small_disk))]
    assert not list((out / "done").glob("*.json")), "a failed unit must not look finished"
    assert not list(out.rglob(".*.tmp-*")), "temporary files left behind"
    assert not list((out / "docs").glob("*.parquet"))
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    assert process_file(uri, cfg, str(out))["status"] == "done"
    clean = tmp_path / "clean"
    OutputDir(clean).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    assert process_file(uri, cfg, str(clean))["status"] == "done"
    assert _rows(out / "docs") == _rows(clean / "docs") and _rows(out / "docs")


# -- corrupt input Parquet ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def docs_with_a_corrupt_file(tmp_path_factory, data_dir) -> Path:
    """A documents folder: one good Parquet file of real text, one file of garbage named .parquet."""
    root = tmp_path_factory.mktemp("corrupt") / "docs"
    root.mkdir()
    lines = (data_dir / "quality" / "enwiki_sample_articles.jsonl").read_text().splitlines()[:20]
    texts = [json.loads(ln)["text"] for ln in lines]
    table = pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts, "lang": ["en"] * len(texts)})
    pq.write_table(table, root / "a.parquet")
    # a real file cut in half: what a crashed copy or a bad disk leaves
    blob = (root / "a.parquet").read_bytes()
    (root / "b.parquet").write_bytes(blob[: len(blob) // 2])
    return root


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, data_dir) -> Path:
    """A real (small) fastText quality model: score must get past its model check to read inputs."""
    from classifiers.config import QualityTrainConfig
    from classifiers.train import train_quality

    out = tmp_path_factory.mktemp("model") / "m"
    q = data_dir / "quality"
    cfg = QualityTrainConfig.from_dict({"fasttext": {"dim": 8, "bucket": 10_000, "epoch": 2}})
    train_quality([q / "enwiki_sample_articles.jsonl"], [q / "lee_background.cor"], out, cfg)
    return out


@pytest.mark.parametrize(
    "module,args",
    [
        ("dedup", ["run", "--input", "{docs}", "--output", "{out}"]),
        ("tokens", ["train-tokenizer", "--input", "{docs}", "--output", "{out}"]),
        ("classifiers", ["score", "--input", "{docs}", "--output", "{out}", "--model", "{model}"]),
    ],
)
def test_corrupt_input_parquet_is_named_before_any_work(
    docs_with_a_corrupt_file, tiny_model, tmp_path, module, args
):
    out = tmp_path / "out"
    argv = [a.format(docs=docs_with_a_corrupt_file, out=out, model=tiny_model) for a in args]
    run = _cli(module, *argv)
    assert run.returncode == 2, run.stderr[-2000:]
    err = run.stderr.strip().splitlines()[-1]
    assert err.startswith("error: ") and "b.parquet" in err, err
    assert not (out / "_SUCCESS").exists() and not (out / "done").exists()


# -- a truncated token shard ------------------------------------------------------------------------


def test_truncated_shard_is_refused_naming_the_file(tmp_path):
    from tokens.shards import IndexedShard, ShardFormatError, write_shard

    rng = np.random.default_rng(0)
    docs = [rng.integers(1, 4096, size=n, dtype=np.int64) for n in (5, 17, 3, 40)]
    prefix = tmp_path / "part-00000"
    write_shard(prefix, docs, eod_id=0, dtype=np.dtype(np.uint16))
    shard = IndexedShard(prefix)
    assert [len(shard[i]) for i in range(len(shard))] == [n + 1 for n in (5, 17, 3, 40)]
    bin_path = prefix.with_suffix(".bin")
    bin_path.write_bytes(bin_path.read_bytes()[:-7])  # a copy that stopped early
    with pytest.raises(ShardFormatError, match=r"part-00000\.bin: \d+ bytes, the index describes \d+"):
        IndexedShard(prefix)


# -- an executor's Python worker killed mid-task -----------------------------------------------------


def _task_ends(event_dir: Path) -> list[dict]:
    """Spark's own record of each task attempt's end (SparkListenerTaskEnd) from the event log.

    Read from the log, not from the job's output: a run whose kill missed the task (an idle worker)
    or whose task was never retried ends with the same output, and only Spark knows the attempts.
    The log may still be named `.inprogress` (the driver exits without stopping the context); job
    and stage ends flush it, so every task end of a finished job is there.
    """
    ends = []
    for f in event_dir.iterdir():
        if f.name.startswith("."):  # Hadoop's .crc checksums
            continue
        for line in f.read_text().splitlines():
            event = json.loads(line)
            if event.get("Event") == "SparkListenerTaskEnd":
                ends.append(event)
    return ends


@pytest.mark.spark
def test_killed_python_worker_is_retried_and_output_is_complete(tmp_path, warc_dir):
    """local[1,2]: one core, a task may fail twice. The Python worker running the task is killed
    while it works; Spark's event log shows that attempt failed and a later attempt of the same
    task succeeded, and the unit's output equals a direct run's."""
    import psutil

    uri = str(warc_dir / "pages-trafilatura-eval-part0.warc.gz")  # ~250 pages: seconds of work to hit
    out = tmp_path / "out"
    events = tmp_path / "events"
    events.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    cmd = [sys.executable, "-m", "curation", "extract", "--input", uri, "--output", str(out),
           "--master", "local[1,2]", "--no-progress", "--spark-conf", "spark.ui.enabled=false",
           # one plain JSON-lines log (Spark 4 rolls and zstd-compresses it by default)
           "--spark-conf", "spark.eventLog.enabled=true", "--spark-conf", f"spark.eventLog.dir={events.as_uri()}",
           "--spark-conf", "spark.eventLog.rolling.enabled=false", "--spark-conf", "spark.eventLog.compress=false"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = None
    deadline = time.time() + 300
    while killed is None and time.time() < deadline and proc.poll() is None:
        # a Python worker with CPU time behind it is inside the task's pages (testkit/spark_workers.py)
        worker = busy_python_worker(proc.pid)
        if worker is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                worker.kill()
                killed = worker.pid
        time.sleep(0.1)
    log, _ = proc.communicate(timeout=600)
    assert killed is not None, "no busy Python worker was found to kill\n" + log[-2000:]
    assert proc.returncode == 0, log[-3000:]
    assert (out / "_SUCCESS").exists()
    ends = _task_ends(events)
    failed = [e for e in ends if e["Task End Reason"]["Reason"] != "Success"]
    assert failed, f"no task attempt failed, so none was retried: {len(ends)} task ends\n" + log[-2000:]
    for e in failed:
        task, attempt = (e["Stage ID"], e["Task Info"]["Index"]), e["Task Info"]["Attempt"]
        # the attempt lost its running Python worker ("Python worker exited unexpectedly"), not its
        # daemon before the task began, nor anything else
        assert "Python worker exited unexpectedly" in json.dumps(e["Task End Reason"]), e["Task End Reason"]
        retried = [r for r in ends if (r["Stage ID"], r["Task Info"]["Index"]) == task]
        assert any(
            r["Task Info"]["Attempt"] > attempt and r["Task End Reason"]["Reason"] == "Success"
            for r in retried
        ), f"task {task} failed at attempt {attempt} and no later attempt succeeded"
    direct = tmp_path / "direct"
    cfg = ExtractJobConfig()
    OutputDir(direct).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    assert process_file(uri, cfg, str(direct))["status"] == "done"
    assert _rows(out / "docs") == _rows(direct / "docs")
