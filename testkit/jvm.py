"""JVM options for the test suite's Spark JVMs: the C1 compiler tier and a class-data-sharing archive.

The suite starts well over a hundred Spark JVMs (sessions, `spark-submit`, cluster daemons), each
running jobs of seconds on small inputs. Two JDK features cut what each one costs before it does any
work:
- `-XX:TieredStopAtLevel=1`: no C2 compilation, which on jobs this short costs more CPU than its code
  wins back (tests/curation/test_job.py: 71 -> 54 CPU-s on 2 cores), with a code cache it cannot fill;
- a dynamic CDS archive (JDK 13+, `-XX:ArchiveClassesAtExit`) of the ~12,000 classes a Spark session
  loads from its jars, written once per machine by a small real Spark job, then mapped by every JVM
  whose class path matches (the others ignore it): tests/curation/test_job.py with
  tests/dedup/test_components.py went from 76 to 63 CPU-s and 60 to 48 s on top of C1.

Options only: no Spark behaviour changes. `tests/conftest.py` sets them, unless JDK_JAVA_OPTIONS is set.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# C1 only, with room for its code: under TieredStopAtLevel=1 the JVM reserves 48 MB of code cache, which
# a session running dedup jobs filled in 42 s ("CodeCache is full. Compiler has been disabled."): from
# then on new code, Spark's generated classes among it, ran interpreted. 256 MB is reserved address
# space, not memory used; tests/dedup/test_job.py went from 249 and 253 to 232 and 238 CPU-s.
C1_ONLY = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
# the archive's own notes (a JVM with another class path, classes it cannot hold) stay off stdout/stderr
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"

# What a Spark session of the suite loads: SQL, Parquet written and read, a shuffle, Arrow to pandas.
_DUMP_JOB = """
import tempfile
from core.spark import get_spark
s = get_spark("local[2]", "refinery-cds-archive", {"spark.ui.enabled": "false"})
d = tempfile.mkdtemp()
s.range(1000).selectExpr("id", "cast(id % 7 as string) as t").write.parquet(d + "/p")
assert s.read.parquet(d + "/p").groupBy("t").count().count() == 7
assert len(s.read.parquet(d + "/p").toPandas()) == 1000
s.stop()
"""


def _archive_path() -> Path:
    """Per JDK and Spark jar set: another install never maps an archive of different classes."""
    import pyspark

    # A JVM maps the archive only if every jar has the size and mtime it had when it was written:
    # a venv made again at the same path (a clean clone where an earlier one was) gets its own.
    jars = sorted(
        f"{p.name}:{st.st_size}:{st.st_mtime_ns}"
        for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")
        for st in [p.stat()]
    )
    # without the options in force: their "Picked up JDK_JAVA_OPTIONS" note would change the key
    env = {k: v for k, v in os.environ.items() if k not in ("JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS")}
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60, env=env).stderr
    key = hashlib.sha1("\n".join([java, pyspark.__file__, *jars]).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"refinery-tests-spark-{key}.jsa"


def spark_class_archive(root: Path) -> Path | None:
    """The archive for this machine's JDK and Spark, written first if missing (one writer at a time);
    None where it cannot be made (no JDK 13+, the job failed): the JVMs then run without it."""
    try:
        path = _archive_path()
    except (OSError, subprocess.SubprocessError):
        return None
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second pytest run waits, then finds it written
        if path.is_file():
            return path
        part = path.with_suffix(f".{os.getpid()}.part")
        env = {**os.environ, "JDK_JAVA_OPTIONS": f"-XX:ArchiveClassesAtExit={part} {C1_ONLY} {QUIET_CDS}"}
        try:
            res = subprocess.run(
                [sys.executable, "-c", _DUMP_JOB], cwd=root, env=env, capture_output=True, timeout=300
            )
        except subprocess.TimeoutExpired:
            res = None
        if res is None or res.returncode != 0 or not part.is_file():
            part.unlink(missing_ok=True)
            return None
        os.replace(part, path)  # whole or absent: a JVM never maps a half-written archive
        return path


def jvm_options(root: Path) -> str:
    """JDK_JAVA_OPTIONS for the suite: C1 only, and the class archive where one could be made."""
    archive = spark_class_archive(root)
    return f"{C1_ONLY} -XX:SharedArchiveFile={archive} {QUIET_CDS}" if archive else C1_ONLY
