"""Find the Python worker of a local Spark job that is inside a task's work, to kill or interrupt it.

A PySpark worker is a fork of the executor's Python daemon: it has the daemon's command line and the
daemon is its parent. The daemon is Spark's `pyspark.daemon`, or the module a job names in
`spark.python.daemon.module` (extract's `curation.spark_daemon`, which preloads the stages: its
workers begin a task's pages at once, where a plain daemon's workers first spend ~1.7 s of CPU on
set-up). So "busy" is CPU time past what a fork spends reading its task (~0.1 s).
"""

from __future__ import annotations

import itertools

from core.spark_daemon import PLAIN_DAEMON
from curation.spark_daemon import MODULE as CURATION_DAEMON

DAEMONS = (PLAIN_DAEMON, CURATION_DAEMON)


def _runs_daemon(proc) -> bool:
    """`python -m <daemon> ...`: the daemon or one of its forks. The module must follow `-m`: the
    executor JVM's own command line carries `spark.python.daemon.module=curation.spark_daemon`, so
    a substring test took the JVM for a daemon, and the daemon (its child, busy preloading) for a
    worker; the fault test then killed the daemon before any task ran (Spark's event log showed
    "EOFException ... reading the port number from curation.spark_daemon's stdout")."""
    cmd = proc.cmdline()
    return any(flag == "-m" and module in DAEMONS for flag, module in itertools.pairwise(cmd))


def busy_python_worker(root_pid: int, min_cpu_s: float = 0.5):
    """A psutil.Process of a Python worker under `root_pid` with at least `min_cpu_s` of user CPU
    (past set-up, inside its task: with a plain daemon pass set-up plus that), or None."""
    import psutil

    for p in psutil.Process(root_pid).children(recursive=True):
        try:
            if _runs_daemon(p) and _runs_daemon(p.parent()) and p.cpu_times().user >= min_cpu_s:
                return p
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None
