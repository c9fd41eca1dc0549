"""Ctrl-C (issue 31, item 12): a real command gets SIGINT while it works and ends with the one line
`interrupted` on stderr and exit status 130, never a traceback (it used to print one and die of the signal).

- the trainer, one rank with a real process group (DeepSpeed on gloo), interrupted between steps: it must
  still destroy the process group (gloo aborts the interpreter at exit otherwise: exit -6, not 130);
- a Spark command (`curation extract`), interrupted while a task runs: PySpark's own SIGINT handler and
  py4j's logging used to add three tracebacks; the JVM's own log lines may follow, no Python traceback.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from testkit.corpus import build_corpus, build_source
from testkit.shared_data import REPO_ROOT, shared_data_dir
from testkit.spark_workers import busy_python_worker
from tokens.tokenizer import TokenizerConfig, train_tokenizer
from trainer.launch import free_port

pytestmark = pytest.mark.faults

JVM_LOG = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR) ")
# The rest of a JVM log record: its Java stack trace (an interrupted job's DAGScheduler may log one, e.g.
# "Failed to update accumulator" with a java.net.SocketException, when the Python side went first)
JAVA_TRACE = re.compile(r"^(\s+at |\s*\.\.\. \d+ more|Caused by: |Suppressed: |[a-z][\w$]*(\.[\w$]+)+(: |$))")


def python_lines(stderr: str) -> list[str]:
    """The non-blank lines of `stderr` that are not the JVM's log records (each line and its trace)."""
    out, in_jvm_record = [], False
    for ln in stderr.splitlines():
        if JVM_LOG.match(ln):
            in_jvm_record = True
        elif not (in_jvm_record and JAVA_TRACE.match(ln)):
            in_jvm_record = False
            if ln.strip():
                out.append(ln)
    return out


def _interrupt_when(
    cmd: list[str], env: dict, tmp_path: Path, ready, timeout: float = 240
) -> tuple[int, str, str]:
    """Start `cmd`, send SIGINT once `ready(stdout_so_far, pid)` holds; (exit status, stderr after the
    signal, whole stderr)."""
    out_p, err_p = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out_p.open("w") as out, err_p.open("w") as err:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=out, stderr=err)
        deadline = time.time() + timeout
        while proc.poll() is None and time.time() < deadline and not ready(out_p.read_text(), proc.pid):
            time.sleep(0.2)
        assert proc.poll() is None, (
            "the command ended before it could be interrupted:\n" + err_p.read_text()[-3000:]
        )
        before = err_p.stat().st_size
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("still running 120 s after Ctrl-C") from None
    whole = err_p.read_text()
    return rc, whole.encode()[before:].decode(errors="replace"), whole


def test_trainer_interrupted_between_steps_exits_130_and_leaves_its_process_group(tmp_path):
    corpus = build_corpus(tmp_path / "corpus")
    tok = train_tokenizer(corpus, tmp_path / "tok", TokenizerConfig(vocab_size=512))
    shards = build_source(tmp_path / "tokens", tok, "web", sorted((corpus / "docs").glob("*.parquet")))
    recipe = {"name": "r", "total_tokens": "2M", "max_epochs": 1000, "sources": {"web": {"shards": str(shards)}},
              "phases": [{"name": "main", "share": 1.0, "weights": {"web": 1}}]}  # fmt: skip
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    cfg = yaml.safe_load((REPO_ROOT / "configs" / "train-debug.yaml").read_text())
    cfg["data"].update(recipe=str(tmp_path / "recipe.yaml"), seq_len=32)
    # far more steps than the test waits for: the run is always mid-training when the signal comes
    cfg["schedule"].update(steps=100_000, rampup=[], global_batch=2, micro_batch=2, warmup_steps=1)
    cfg["checkpoint"]["dir"] = str(tmp_path / "ckpt")
    cfg["logging"].update(dir=str(tmp_path / "log"), tensorboard=False, every=1, sample_tokens=0)
    cfg["eval"].update(sequences_per_source=0, every=0)
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(cfg))
    port = free_port()
    # one rank as the launcher starts it: RANK/WORLD_SIZE/MASTER_* set, so init_distributed makes a gloo group
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "RANK": "0", "WORLD_SIZE": "1",
           "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}  # fmt: skip
    cmd = [sys.executable, "trainer/train.py", "--config", str(tmp_path / "train.yaml")]

    def stepping(stdout: str, pid: int) -> bool:
        return re.search(r"^step +1 loss", stdout, re.M) is not None

    rc, after, whole = _interrupt_when(cmd, env, tmp_path, stepping)
    assert rc == 130, whole[-3000:]
    assert after == "interrupted\n", whole[-3000:]
    assert "Traceback" not in whole
    assert not list(Path("/dev/shm").glob(f"deepspeed_allreduce_buffer_*_{port}_*"))


@pytest.mark.spark
def test_spark_command_interrupted_mid_task_exits_130_without_traceback(tmp_path):
    out = tmp_path / "out"
    warc = shared_data_dir() / "warc" / "pages-trafilatura-eval-part0.warc.gz"  # ~250 pages: seconds of work
    cmd = [sys.executable, "-m", "curation", "extract", "--input", str(warc), "--output", str(out),
           "--master", "local[1]", "--no-progress", "--spark-conf", "spark.ui.enabled=false"]  # fmt: skip

    def task_running(stdout: str, pid: int) -> bool:
        # a Python worker with CPU time behind it: a task is inside its pages (testkit/spark_workers.py)
        return busy_python_worker(pid) is not None

    rc, after, whole = _interrupt_when(
        cmd, {**os.environ, "PYTHONPATH": str(REPO_ROOT)}, tmp_path, task_running
    )
    assert rc == 130, whole[-3000:]
    assert "Traceback" not in whole, whole[-3000:]
    assert python_lines(after) == ["interrupted"], after
    assert not (out / "_SUCCESS").exists()
