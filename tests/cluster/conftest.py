"""A real Spark standalone cluster on 127.0.0.1 for the `cluster` tier: one master, two workers.

Started with pyspark's own `bin/spark-class` (the pip wheel ships the whole Spark distribution), each
daemon in its own process group so the finalizer can stop it, and its JVM children, by PID — also when
the test fails or is interrupted. Ports are picked free by the OS. Shared-secret authentication is on,
as in docker-compose.yml, with the secret passed the same way (SPARK_DAEMON_JAVA_OPTS for the daemons,
SPARK_SUBMIT_OPTS for spark-submit), so the compose setting is exercised for real here.

Workers are small (1 core, 1 GB each): the CI machine has 2 cores, shared with the test process.
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
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainer.launch import free_port


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


def _stop(proc: subprocess.Popen) -> None:
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


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory, request) -> Cluster:
    home = spark_home()
    spark_class = home / "bin" / "spark-class"
    if not spark_class.exists():
        pytest.fail(f"{spark_class} is missing: the pyspark wheel should ship bin/spark-class")
    work = tmp_path_factory.mktemp("spark-cluster")
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
            _stop(p)

    # Registered before the first start: a failure halfway still stops what did start.
    request.addfinalizer(stop_all)

    def start(name: str, args: list[str]) -> None:
        log = (work / f"{name}.log").open("wb")
        procs.append(
            subprocess.Popen(
                [str(spark_class), *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(ui)])  # fmt: skip
    for i in (1, 2):
        start(
            f"worker{i}",
            ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1", "--memory", "1500m",
             "--webui-port", str(free_port()), "--work-dir", str(work / f"work{i}"), master_url],
        )  # fmt: skip
    deadline = time.monotonic() + 120
    while True:
        for p in procs:
            if p.poll() is not None:
                logs = "\n".join((work / f).read_text(errors="replace")[-2000:] for f in ("master.log",))
                pytest.fail(f"a Spark daemon exited with {p.returncode}:\n{logs}")
        with contextlib.suppress(OSError, ValueError):
            if _alive_workers(ui_url) == 2:
                break
        if time.monotonic() > deadline:
            pytest.fail(f"the cluster did not get 2 workers in 120 s; logs in {work}")
        time.sleep(1)
    submit_env = dict(env)
    submit_env.pop("SPARK_DAEMON_JAVA_OPTS")
    submit_env["SPARK_SUBMIT_OPTS"] = auth
    return Cluster(master_url, ui_url, submit_env, str(home / "bin" / "spark-submit"), work)
