"""A Spark standalone cluster whose two workers share nothing with the driver but an S3 server.

The master runs in the test's namespaces; each worker runs in its own mount namespace with a private
tmpfs on /tmp (`unshare -m`, root only), and its work dir (executors run and log there) and Spark
local dirs (shuffle, spills) are inside that private /tmp. So a file the driver writes in its /tmp (the
test's tmp_path included) does not exist for the executors, and what an executor writes in its /tmp
does not exist for the driver or the other worker: a job passes only if it exchanges its data through
storage every node sees. The project (/work/main and its .venv) is not under /tmp, so the workers run
the same code. The moto S3 server (testkit/s3.py) on 127.0.0.1 is the one shared store: the workers and
the driver get its AWS environment. The network and process namespaces stay shared (127.0.0.1, and
the test can kill a worker by its process group).

Where `unshare` or the tmpfs mount is refused (no root, a container without CAP_SYS_ADMIN) the tier
skips with the reason. The fixtures (`isolated_cluster`, `disposable_isolated_cluster`) are in
tests/conftest.py; tests/isolated and tests/test_object_storage.py run their jobs on it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import pytest

from testkit.spark_cluster import Cluster, Workers, start_cluster

ROOT = Path(__file__).resolve().parents[1]  # the project: spark-submit runs from there

# Run as `sh -c PRIVATE_TMP sh spark-class ...` inside `unshare -m`: the tmpfs hides the driver's /tmp
# from the worker and everything it starts. 2 GB bounds a worker's scratch (tmpfs is memory-backed).
PRIVATE_TMP = 'mount -t tmpfs -o size=2g tmpfs /tmp && exec "$@"'

# Executors wait for both to register before the first job (else the first tasks may all land on
# the one that came first, and a barrier stage waits for slots): 60 s bounds a slow JVM start.
# Both workers are host 127.0.0.1, so Spark would read the other executor's shuffle files straight from
# "the same host's" disk (spark.shuffle.readHostLocalDisk), which is the other worker's private /tmp:
# off, shuffle blocks are fetched over the network as between two machines. (Measured: with it on,
# dedup's first shuffle fails with NoSuchFileException on /tmp/spark-local/.../shuffle_0_3_0.index.)
SUBMIT_CONF = {
    "spark.shuffle.readHostLocalDisk": "false",
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
}


def private_tmp(argv: list[str]) -> list[str]:
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", PRIVATE_TMP, "sh", *argv]


@cache  # probed once per session
def why_no_private_tmp() -> str | None:
    """Why a private /tmp cannot be made here, or None when it can."""
    if shutil.which("unshare") is None:
        return "`unshare` (util-linux) is not installed"
    probe = subprocess.run(private_tmp(["true"]), capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"a private /tmp is refused here (unshare -m + mount tmpfs, exit {probe.returncode}): {probe.stderr.strip()}"
    return None


def worker_tmp(cluster: Cluster, i: int) -> Path:
    """Worker i's (1-based) private /tmp, as the test process reaches it: through its /proc root."""
    return Path(f"/proc/{cluster.workers[i - 1].pid}/root/tmp")


def executor_logs(cluster: Cluster, tail: int = 3000) -> str:
    """The tails of every executor's stderr, read from the workers' private /tmp (for failure messages)."""
    out = []
    for i in range(1, len(cluster.workers) + 1):
        for f in sorted(worker_tmp(cluster, i).glob(f"spark-worker{i}/app-*/*/stderr")):
            out.append(f"--- worker{i} {f.parent.parent.name}/{f.parent.name} ---\n")
            out.append(f.read_text(errors="replace")[-tail:])
    return "".join(out) or "(no executor logs)"


def failure(log: Path, cluster: Cluster) -> str:
    """A failed job's story: its first distinct error lines, its log's tail, the executors' logs."""
    lines = log.read_text(errors="replace").splitlines()
    errors = list(dict.fromkeys(ln.strip() for ln in lines if "Exception:" in ln or "rror:" in ln))[:8]
    return "\n".join(["first errors:", *errors, "--- log tail ---", *lines[-60:], executor_logs(cluster)])


def submit_command(
    cluster: Cluster, app: str, args: Sequence[str], conf: dict[str, str] | None = None
) -> list[str]:
    """`spark-submit --master <cluster> --conf ... app args` (run it from the project root)."""
    conf = {**cluster.submit_conf(), **SUBMIT_CONF, **(conf or {})}
    cmd = [cluster.spark_submit, "--master", cluster.master_url]
    cmd += [a for k, v in sorted(conf.items()) for a in ("--conf", f"{k}={v}")]
    return [*cmd, app, *args]


def spark_submit(
    cluster: Cluster,
    app: str,
    args: Sequence[str],
    log: Path,
    conf: dict[str, str] | None = None,
    timeout: float = 900,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """The submit command run to its end, its output appended to `log`; `env` over the cluster's."""
    cmd = submit_command(cluster, app, args, conf)
    with log.open("ab") as f:
        f.write(("\n$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        return subprocess.run(
            cmd,
            cwd=ROOT,
            env={**cluster.env, **(env or {})},
            stdout=f,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )


def start_isolated_cluster(tmp_path_factory, add_finalizer, s3_server) -> Cluster:
    """A master and two workers, each worker with a private /tmp; its `env` (for spark-submit) and the
    workers reach the S3 server. Skips where a private /tmp cannot be made."""
    why = why_no_private_tmp()
    if why:
        pytest.skip(why)
    t0 = time.perf_counter()
    workers = Workers(
        count=2,
        work_dir=lambda _logs, i: f"/tmp/spark-worker{i}",
        # TMPDIR too: a TMPDIR pointing outside /tmp would be a folder the workers share.
        env={**s3_server.env, "SPARK_LOCAL_DIRS": "/tmp/spark-local", "TMPDIR": "/tmp"},
        wrap=private_tmp,
    )
    cluster = start_cluster(tmp_path_factory.mktemp("isolated-cluster"), add_finalizer, workers)
    cluster.env.update(s3_server.env)
    print(f"isolated cluster up in {time.perf_counter() - t0:.1f} s")
    return cluster
