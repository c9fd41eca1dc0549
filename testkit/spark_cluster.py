"""A real Spark standalone cluster on 127.0.0.1 for the `cluster` and `isolated` tiers: a master and workers.

Started with pyspark's own `bin/spark-class` (the pip wheel ships the whole Spark distribution), each
daemon in its own process group so the finalizer can stop it, and its JVM children, by PID — also when
the test fails or is interrupted, or a start fails half way. Ports are picked free by the OS.
Shared-secret authentication is on, as in docker-compose.yml, with the secret passed the same way
(SPARK_DAEMON_JAVA_OPTS for the daemons, SPARK_SUBMIT_OPTS for spark-submit), so the compose setting is
exercised for real.

`Workers` says how the workers start: the `cluster` tier's share the driver's filesystem (their folders
under the test's temporary folder); the `isolated` tier wraps each one in a command that gives it a
private /tmp (tests/isolated/conftest.py) and puts its folders there.

Workers are small (1 core, 1.5 GB each): the CI machine has 2 cores, shared with the test process.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from trainer.launch import free_port

__all__ = ["Cluster", "Workers", "spark_home", "start_cluster", "stop_process"]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class Cluster:
    master_url: str
    ui_url: str
    env: dict[str, str]
    """Environment for spark-submit: the venv's Python for driver and executors, the auth options."""
    spark_submit: str
    logs: Path
    workers: list[subprocess.Popen] = field(default_factory=list)
    """The worker daemons (each the leader of its process group), in start order."""

    def submit_conf(self) -> dict[str, str]:
        # 1 core and 1 GB per executor: one executor per worker, both workers used.
        return {
            "spark.executor.memory": "1g",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            "spark.ui.enabled": "false",
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
        }


@dataclass(frozen=True)
class Workers:
    """How each worker starts: its folder, extra environment, and a command wrapped around spark-class."""

    count: int = 2
    work_dir: Callable[[Path, int], str] = lambda logs, i: str(logs / f"work{i}")
    """The worker's --work-dir (executors run and log there), from the cluster's folder and its number."""
    env: dict[str, str] = field(default_factory=dict)
    """Set for the workers only, over the daemons' environment (e.g. SPARK_LOCAL_DIRS, AWS_*)."""
    wrap: Callable[[list[str]], list[str]] = lambda argv: argv
    """The worker's command line from spark-class's (e.g. run inside `unshare`)."""


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM the daemon's process group, then SIGKILL what is left after 10 s."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _alive_workers(ui_url: str) -> int:
    with urllib.request.urlopen(f"{ui_url}/json/", timeout=2) as r:
        return int(json.load(r).get("aliveworkers", 0))


def _log_tails(work: Path, names: list[str]) -> str:
    return "\n".join(
        f"--- {n}.log ---\n" + (work / f"{n}.log").read_text(errors="replace")[-2000:]
        for n in names
        if (work / f"{n}.log").exists()
    )


def start_cluster(
    work: Path, add_finalizer: Callable[[Callable[[], None]], None], workers: Workers = Workers()
) -> Cluster:
    """A master and `workers.count` workers, up and registered (or the test fails with their logs).

    `work` holds the daemons' logs (and, by default, the workers' folders); `add_finalizer` gets the
    function that stops every daemon, before the first one starts.
    """
    home = spark_home()
    spark_class = home / "bin" / "spark-class"
    if not spark_class.exists():
        pytest.fail(f"{spark_class} is missing: the pyspark wheel should ship bin/spark-class")
    port, ui = free_port(), free_port()
    master_url, ui_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}"
    auth = f"-Dspark.authenticate=true -Dspark.authenticate.secret={secrets.token_hex(16)}"
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOG_DIR=str(work / "logs"),
        SPARK_WORKER_DIR=str(work / "work"),
        SPARK_LOCAL_DIRS=str(work / "local"),
        SPARK_DAEMON_JAVA_OPTS=auth,
    )
    procs: list[subprocess.Popen] = []

    def stop_all() -> None:
        for p in reversed(procs):
            stop_process(p)

    # Registered before the first start: a failure halfway still stops what did start.
    add_finalizer(stop_all)

    def start(name: str, argv: list[str], extra_env: dict[str, str] | None = None) -> subprocess.Popen:
        log = (work / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            argv,
            env={**env, **(extra_env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(proc)
        return proc

    start("master", [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(ui)])  # fmt: skip
    names = ["master"]
    started = []
    for i in range(1, workers.count + 1):
        names.append(f"worker{i}")
        argv = [str(spark_class), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores",
                "1", "--memory", "1500m", "--webui-port", str(free_port()), "--work-dir",
                workers.work_dir(work, i), master_url]  # fmt: skip
        started.append(start(f"worker{i}", workers.wrap(argv), workers.env))
    deadline = time.monotonic() + 120
    while True:
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"a Spark daemon exited with {p.returncode}:\n{_log_tails(work, names)}")
        with contextlib.suppress(OSError, ValueError):
            if _alive_workers(ui_url) == workers.count:
                break
        if time.monotonic() > deadline:
            pytest.fail(f"the cluster did not get {workers.count} workers in 120 s; logs in {work}")
        time.sleep(1)
    submit_env = dict(env)
    submit_env.pop("SPARK_DAEMON_JAVA_OPTS")
    submit_env["SPARK_SUBMIT_OPTS"] = auth
    return Cluster(master_url, ui_url, submit_env, str(home / "bin" / "spark-submit"), work, started)
