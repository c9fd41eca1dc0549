"""Spark's Python daemon with a job's heavy set-up done once, before it forks the workers.

PySpark starts one daemon process per executor (`pyspark.daemon`), and the daemon forks a Python
worker for every task slot. Each worker then pays the job's set-up itself: imports, models, compiled
kernels. For the extract job that is ~1.7 s per worker (spaCy, numba's kernels, lid.176, trafilatura),
13% of a run over the nine shared WARCs on 2 cores (bench/curation/throughput.py). Spark lets a job
name its own daemon module (`spark.python.daemon.module`): a module that calls `serve(preload)`
does the set-up once in the daemon, and every worker forked from it starts with it done (pages
shared copy-on-write). The cost moves from once per worker to once per executor.

Forking is only safe while the process has no other thread (a lock held by a thread that the child
does not inherit stays held forever there; pyspark's own daemon defers every import to after the
fork for this reason). So after `preload` the daemon lists its threads: a Python thread, or a native
one other than jemalloc's background thread (pyarrow's allocator; jemalloc reinitialises it in a
forked child by design), and the daemon replaces itself with the plain `pyspark.daemon` (exec: a
fresh process, nothing preloaded, nothing lost) after saying so on stderr. A `preload` that raises
is reported the same way and leads to the same plain daemon, so a preload can cost speed, never a
job. Nothing may be written to stdout before the daemon reports its port there: `preload` runs with
stdout sent to stderr.

Only Linux lists native threads (/proc/self/task); elsewhere only Python threads are checked.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from core.files import redirected_fd

# Native threads a fork is safe with: jemalloc (pyarrow's allocator) registers fork handlers that
# reset its background threads in the child.
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})
PLAIN_DAEMON = "pyspark.daemon"


def native_threads() -> list[str] | None:
    """The names of this process's threads other than the calling one (None: not listable here)."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    me = str(threading.get_native_id())
    names = []
    for tid in tids:
        if tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:  # the thread ended while listed
            continue
    return names


def fork_hazards() -> list[str]:
    """Threads that would make forking this process unsafe (empty: safe)."""
    hazards = [f"python thread {t.name}" for t in threading.enumerate() if t is not threading.main_thread()]
    hazards += [f"native thread {n}" for n in native_threads() or [] if n not in FORK_SAFE_THREADS]
    return hazards


def serve(preload: Callable[[], None], name: str = "") -> None:
    """Run `preload`, then Spark's daemon loop; the plain daemon instead when that is not safe."""
    label = name or getattr(preload, "__module__", "preload")
    t0 = time.perf_counter()
    problem = None
    try:
        with redirected_fd(1, 2):  # fd 1 is the JVM's channel (it reads the port there): no preload output
            preload()
    except Exception as e:  # a preload is an optimisation: the job must run without it
        problem = f"preload failed: {type(e).__name__}: {e}"
    if problem is None and (hazards := fork_hazards()):
        problem = "threads running after preload, forking would be unsafe: " + ", ".join(hazards)
    if problem is not None:
        print(
            f"refinery spark daemon ({label}): {problem}; running the plain {PLAIN_DAEMON}", file=sys.stderr
        )
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", PLAIN_DAEMON, *sys.argv[1:]])
    if os.environ.get("REFINERY_SPARK_DAEMON_VERBOSE"):
        print(
            f"refinery spark daemon ({label}): preloaded in {time.perf_counter() - t0:.2f} s", file=sys.stderr
        )
    from pyspark.daemon import manager

    manager()
