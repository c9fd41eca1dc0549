"""A Spark standalone cluster whose two workers share nothing with the driver but an S3 server.

The master runs in the test's namespaces; each worker runs in its own mount namespace with a private
tmpfs on /tmp (`unshare -m`, root only), and its work dir (executors run and log there) and Spark
local dirs (shuffle, spills) are inside that private /tmp. So a file the driver writes in its /tmp (the
test's tmp_path included) does not exist for the executors, and what an executor writes in its /tmp
does not exist for the driver or the other worker: a job passes only if it exchanges its data through
storage every node sees. The moto S3 server (testkit/s3.py) on 127.0.0.1 is the one shared store: the
workers and the driver get its AWS environment. The network and process namespaces stay shared
(127.0.0.1, and the test can kill a worker by its process group).

What a machine of a real cluster has installed stays visible: the checkout, its Python environment
and the shared data folder (`project_paths`). Where one of them lies under /tmp (a clone in /tmp, a
../shared copied or linked there: issue 47) it is bound back into the private /tmp at the same path,
and nothing else of the driver's /tmp is. The workers import the checkout's code (PYTHONPATH), so
they run the code under test whichever checkout the virtual environment was installed from.

Where `unshare` or the mounts are refused (no root, a container without CAP_SYS_ADMIN) the tier skips
with the reason, and fails under CI=true (testkit/tiers.py). The fixtures (`isolated_cluster`,
`disposable_isolated_cluster`) are in tests/conftest.py; tests/isolated and tests/test_object_storage.py
run their jobs on it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from testkit.spark_cluster import Cluster, Workers, start_cluster
from testkit.tiers import refused

ROOT = Path(__file__).resolve().parents[1]  # the project: spark-submit runs from there

# Run as `sh -c PRIVATE_TMP sh HOLD N KEPT... ARGV...` inside `unshare -m`. The tmpfs is first mounted on
# HOLD (an empty folder of this process, any will do: the mount exists in the new namespace only), the
# N kept folders (paths relative to /tmp) are bound into it at their own place, then the whole is moved
# onto /tmp: the driver's /tmp is hidden from the worker and all it starts, but for those folders. A
# kept folder's symbolic link (../shared -> elsewhere) is followed by the bind. 2 GB bounds a worker's
# scratch (tmpfs is memory-backed).
PRIVATE_TMP = """set -e
hold=$1; n=$2; shift 2
mount -t tmpfs -o size=2g tmpfs "$hold"
while [ "$n" -gt 0 ]; do
    mkdir -p "$hold/$1"
    mount --rbind "/tmp/$1" "$hold/$1"
    shift; n=$((n - 1))
done
mount --move "$hold" /tmp
exec "$@"
"""
TMP = Path("/tmp")

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


def project_paths() -> list[Path]:
    """What a worker or node needs of the driver's machine, as a real one has it installed: the checkout
    (its code, the jobs' scripts), the Python environment (the interpreter, pyspark's Spark) and the
    shared data folder (../shared beside the checkout, or $REFINERY_SHARED_DATA), each as the processes
    name it and as it resolves (a link, a venv's interpreter)."""
    from testkit.shared_data import ENV_VAR, REPO_ROOT

    paths = [ROOT, REPO_ROOT.parent / "shared", Path(sys.prefix), Path(sys.base_prefix)]
    if os.environ.get(ENV_VAR):
        paths.append(Path(os.environ[ENV_VAR]))
    absolute = [Path(os.path.abspath(p)) for p in paths if p.exists()]
    return list(dict.fromkeys([*absolute, *(p.resolve() for p in absolute)]))


def _kept_under_tmp(paths: Sequence[Path]) -> list[str]:
    """Those of `paths` inside /tmp, relative to it, none inside another (an rbind carries its subfolders)."""
    inside = sorted({p.relative_to(TMP) for p in paths if p.is_relative_to(TMP)}, key=lambda p: p.parts)
    if Path(".") in inside:
        raise RuntimeError("the project is /tmp itself: a private /tmp cannot hide anything from it")
    kept: list[Path] = []
    for p in inside:  # parents sort before their children
        if not any(p.is_relative_to(k) for k in kept):
            kept.append(p)
    return [str(p) for p in kept]


@cache  # one per process; only a private namespace ever mounts on it, so it stays empty here
def _hold_dir() -> str:
    hold = tempfile.mkdtemp(prefix="refinery-private-tmp-", dir=TMP)

    def remove() -> None:
        with contextlib.suppress(OSError):
            os.rmdir(hold)

    atexit.register(remove)
    return hold


def private_tmp(argv: list[str], keep: Sequence[Path] | None = None) -> list[str]:
    """`argv` run with a private tmpfs on /tmp, in which only `keep` (default `project_paths()`) of the
    driver's /tmp are still there."""
    kept = _kept_under_tmp(project_paths() if keep is None else keep)
    script = ["sh", "-c", PRIVATE_TMP, "sh", _hold_dir(), str(len(kept)), *kept]
    return ["unshare", "-m", "--propagation", "private", *script, *argv]


@cache  # probed once per session
def why_no_private_tmp() -> str | None:
    """Why a private /tmp cannot be made here, or None when it can."""
    if shutil.which("unshare") is None:
        return "`unshare` (util-linux) is not installed"
    probe = subprocess.run(private_tmp(["true"]), capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"a private /tmp is refused here (unshare -m + mount tmpfs, exit {probe.returncode}): {probe.stderr.strip()}"
    return None


def require_private_tmp() -> None:
    """Skip the test where a private /tmp cannot be made; fail it there under CI=true (testkit/tiers.py)."""
    why = why_no_private_tmp()
    if why:
        refused(why)


def project_pythonpath(current: str | None = None) -> str:
    """PYTHONPATH with the checkout first (then `current`'s entries): workers, executors and nodes import
    the code under test, also when the virtual environment's editable install points at another checkout
    (tests/isolated/test_checkout_under_tmp.py runs a copy with this checkout's environment)."""
    rest = [p for p in (current or "").split(os.pathsep) if p and p != str(ROOT)]
    return os.pathsep.join([str(ROOT), *rest])


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
    workers reach the S3 server and import this checkout. Skips (fails under CI=true) where a private
    /tmp cannot be made."""
    require_private_tmp()
    t0 = time.perf_counter()
    workers = Workers(
        count=2,
        work_dir=lambda _logs, i: f"/tmp/spark-worker{i}",
        # TMPDIR too: a TMPDIR pointing outside /tmp would be a folder the workers share.
        env={
            **s3_server.env,
            "SPARK_LOCAL_DIRS": "/tmp/spark-local",
            "TMPDIR": "/tmp",
            "PYTHONPATH": project_pythonpath(os.environ.get("PYTHONPATH")),
        },
        wrap=private_tmp,
    )
    cluster = start_cluster(tmp_path_factory.mktemp("isolated-cluster"), add_finalizer, workers)
    cluster.env.update(s3_server.env, PYTHONPATH=project_pythonpath(cluster.env.get("PYTHONPATH")))
    print(f"isolated cluster up in {time.perf_counter() - t0:.1f} s")
    return cluster
