"""core/spark_daemon.py: the preloading Spark daemon reports its port cleanly, and falls back to
Spark's plain daemon when its preload fails or leaves a thread running (forking then is unsafe).

The daemon is started as Spark starts it (`python -m MODULE`, stdin and stdout pipes to the JVM);
the tests read the port it writes, connect to it, then close stdin, which is how Spark stops it.
The last test checks, on a real SparkSession started with the extract job's settings, that Python
workers are forked from the curation daemon and that it had loaded spaCy, fastText and numba first.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _start(tmp_path: Path, preload_body: str) -> subprocess.Popen:
    mod = tmp_path / "my_daemon.py"
    mod.write_text(
        textwrap.dedent(
            """
            from core.spark_daemon import serve

            def preload():
            {body}

            if __name__ == "__main__":
                serve(preload, "my_daemon")
            """
        ).format(body=textwrap.indent(textwrap.dedent(preload_body), "    "))
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    return subprocess.Popen(
        [sys.executable, "-m", "my_daemon"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _port_then_stop(proc: subprocess.Popen) -> tuple[int, str, str]:
    """The port the daemon reports (4 bytes, big-endian, as pyspark's write_int), the daemon's
    command line once it listens, and its stderr after Spark's way of stopping it (stdin closed)."""
    head = proc.stdout.read(4)
    assert len(head) == 4, proc.stderr.read().decode()
    (port,) = struct.unpack("!i", head)
    assert 0 < port < 65536, f"not a port: {head!r} (something else was written to stdout first)"
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        pass  # it listens: this is the daemon's loop, not a half-started process
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    proc.stdin.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=30)  # it exits (pyspark's daemon says 1 even then: its loop's `finally`)
    return port, cmdline, err


def test_preload_output_never_reaches_the_port_channel(tmp_path):
    proc = _start(tmp_path, "print('a preload that prints'); import json")
    _port, cmdline, err = _port_then_stop(proc)
    assert "my_daemon" in cmdline  # no fallback: the preloaded daemon itself serves
    assert "a preload that prints" in err  # sent to stderr, where Spark logs it
    assert "plain pyspark.daemon" not in err


def test_a_failing_preload_leaves_the_plain_daemon(tmp_path):
    proc = _start(tmp_path, "raise RuntimeError('model missing on this executor')")
    _port, cmdline, err = _port_then_stop(proc)
    assert "preload failed: RuntimeError: model missing on this executor" in err
    assert "running the plain pyspark.daemon" in err
    assert "-m pyspark.daemon" in cmdline and "my_daemon" not in cmdline


def test_a_thread_left_running_leaves_the_plain_daemon(tmp_path):
    """A fork with another thread alive can inherit a lock nobody will release: not risked."""
    body = "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), name='poller', daemon=True).start()"
    proc = _start(tmp_path, body)
    _port, cmdline, err = _port_then_stop(proc)
    assert "forking would be unsafe: python thread poller" in err
    assert "-m pyspark.daemon" in cmdline


_SESSION = """
import json, os, sys
from pathlib import Path
from core.spark import get_spark
from curation.pipeline import SPARK_CONF

def parent(_):
    ppid = os.getppid()
    cmd = Path(f"/proc/{ppid}/cmdline").read_bytes().replace(b"\\0", b" ").decode()
    maps = Path(f"/proc/{ppid}/maps").read_text()
    return cmd, {name: name in maps for name in ("spacy/tokenizer", "fasttext_pybind", "llvmlite")}

spark = get_spark("local[2]", "daemon-test", {"spark.ui.enabled": "false", **SPARK_CONF})
print(json.dumps(spark.sparkContext.parallelize(range(2), 2).map(parent).collect()))
spark.stop()
"""


@pytest.mark.spark
def test_extract_sessions_fork_workers_from_the_preloaded_daemon():
    """A session started with the extract job's settings (curation.pipeline.SPARK_CONF, as
    `extract` starts its own; in a process of its own, since a process has one SparkContext and
    the suite's may have been started by another job): its Python workers' parent is the curation
    daemon, which has spaCy's tokenizer, fastText and numba's LLVM mapped: loaded before the fork."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(
        [sys.executable, "-c", _SESSION], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == 2
    for cmd, libs in results:
        assert "curation.spark_daemon" in cmd, proc.stderr[-2000:]
        assert all(libs.values()), libs
