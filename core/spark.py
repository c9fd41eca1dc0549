"""The Spark session every job uses, and the `--spark-conf KEY=VALUE` settings that reach it.

`get_spark` gives the embedded `local[*]` master by default, spark-submit's master when the driver
was started by spark-submit, or the `--master` a user named. Nothing else in the project builds a
SparkSession, so every job behaves the same on a laptop and on a cluster.

Who can reach the driver: an embedded (local) Spark is a private engine, so it listens on the
loopback interface only (driver RPC, BlockManager, and the web UI, which is off unless asked for
with `--spark-conf spark.ui.enabled=true`). Spark's defaults listen on every interface with no
authentication: anyone on the network could fetch blocks or submit work to the driver. On a
cluster (spark://, YARN, Kubernetes) the driver must be reachable from the executors, so nothing is
bound to loopback; there `spark.authenticate` with a shared secret is the guard (docker-compose.yml
requires one), and a driver started without it is warned about.

`SparkOptions` is the one object a command line builds (`SparkOptions.from_args(args)`: `--master`,
`--spark-conf`, `--no-progress`) and every job's `run_*` takes as `spark=`, down to the per-file runner
(`DEFAULT_SPARK` when a caller gives none).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from core.errors import ConfigError

__all__ = [
    "DEFAULT_SPARK",
    "SparkOptions",
    "check_master",
    "configure_worker_logging",
    "get_spark",
    "is_local_master",
    "parse_spark_conf",
    "under_spark_submit",
]

# The master URL forms Spark accepts (spark.apache.org/docs/latest/submitting-applications.html#master-urls);
# `local-cluster[N,C,M]` is Spark's own test master.
_MASTER = re.compile(
    r"^(local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?"
    r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|yarn"
    r"|spark://[^\s/]+(:\d+)?(,[^\s/]+(:\d+)?)*"
    r"|(k8s|mesos)://\S+)$"
)


def under_spark_submit() -> bool:
    """True when this Python driver was started by spark-submit (the JVM is already up)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def parse_spark_conf(pairs: Iterable[str]) -> dict[str, str]:
    """`--spark-conf KEY=VALUE` arguments -> a mapping; ConfigError on a malformed one."""
    conf = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise ConfigError(f"--spark-conf expects KEY=VALUE, got {p!r}")
        conf[k] = v
    return conf


def check_master(master: str | None) -> None:
    """ConfigError for a `--master` Spark would reject, checked before any folder or JVM is made.

    Spark itself reports a bad master only after the JVM started, as a Java and a Python traceback.
    """
    if master is not None and not _MASTER.match(master):
        raise ConfigError(
            f"--master {master!r} is not a Spark master URL; use local, local[N], local[*], local[N,F], "
            "spark://HOST:PORT, yarn, k8s://HOST:PORT or mesos://HOST:PORT"
        )


@dataclass(frozen=True, slots=True)
class SparkOptions:
    """Where a job's Spark runs and how it reports: what `--master`, `--spark-conf` and `--no-progress` say."""

    master: str | None = None
    """Spark master URL; None: spark-submit's, else the embedded local[*] (get_spark)."""
    conf: Mapping[str, str] = field(default_factory=dict)
    """Extra Spark settings (`--spark-conf KEY=VALUE`), applied over the local-only defaults."""
    progress: bool = True
    """Print the job's progress line (or a line per dedup stage)."""
    native_storage: str = "auto"
    """`--spark-native`: whether Spark's own Parquet I/O reaches an
    object-store URI (a Hadoop connector: s3a://, gs://, abfs://) or the executors do it through
    pyarrow + fsspec; auto asks the JVM for a connector of the scheme (core.tables)."""

    def __post_init__(self) -> None:
        # Frozen all the way down: a shared default object can never be changed by one job.
        object.__setattr__(self, "conf", MappingProxyType(dict(self.conf)))

    @classmethod
    def from_args(cls, args: Any) -> SparkOptions:
        """From the arguments `core.cli.add_spark_args` declares; ConfigError on a malformed --spark-conf.

        The master is checked by the job (`check_master`), before it makes a folder, as it always was.
        """
        conf = parse_spark_conf(args.spark_conf)
        return cls(args.master, conf, not args.no_progress, getattr(args, "spark_native", "auto"))


DEFAULT_SPARK = SparkOptions()
"""The `spark=` of a job called without one: spark-submit's or the embedded master, progress printed."""


# What an embedded Spark sets unless the user's --spark-conf says otherwise (see the docstring).
LOCAL_ONLY_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
}


def planned_cores(spark: SparkOptions) -> int | None:
    """The task slots a job will have, known before its session starts, for planning its units:
    `spark.default.parallelism` if set, else a session already running in this process, else the
    local master's threads (local[N], local[*] and the embedded master: this machine's CPUs).
    None for a cluster master (its executors are unknown until they register)."""
    if n := spark.conf.get("spark.default.parallelism"):
        return int(n) if str(n).isdigit() and int(n) > 0 else None
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        return active.defaultParallelism
    master = spark.master or (None if under_spark_submit() else "local[*]")
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master or "")  # not local-cluster, yarn, ...
    if m is None:
        return None
    threads = m.group(1) or "1"
    return (os.cpu_count() or 1) if threads == "*" else int(threads)


def is_local_master(master: str | None) -> bool:
    """True when the session's JVM and executors all run on this machine (local[...], local-cluster)."""
    if master is None:
        return not under_spark_submit()
    return master.startswith("local")


SPARK_NATIVE_CHOICES = ("auto", "true", "false")


def check_spark_native(choice: str) -> None:
    """ConfigError unless `choice` is a `--spark-native` value (checked before Spark starts)."""
    if choice not in SPARK_NATIVE_CHOICES:
        raise ConfigError(f"--spark-native: {choice!r} is not one of {', '.join(SPARK_NATIVE_CHOICES)}")


LOG4J2_CONF = Path(__file__).with_name("log4j2.properties")
"""The driver JVM's console logging (see the file): Spark's defaults at WARN, without its banner."""


def quiet_driver_logging(conf: Mapping[str, str]) -> dict[str, str]:
    """`conf` with core/log4j2.properties put first in spark.driver.extraJavaOptions.

    Spark prints its log4j banner and startup lines before any `setLogLevel` can run, because it
    falls back to its built-in profile at INFO; a configuration file given to the JVM at start is
    the only early enough place. Put first, so a user's own `-Dlog4j2.configurationFile` (later on
    the java command line) still wins. Left out if the file is missing (an install without it).
    """
    out = dict(conf)
    if LOG4J2_CONF.is_file():
        key = "spark.driver.extraJavaOptions"
        out[key] = " ".join(
            filter(None, (f"-Dlog4j2.configurationFile={LOG4J2_CONF.as_uri()}", out.get(key)))
        )
    return out


def get_spark(master: str | None, app_name: str, conf: Mapping[str, str] | None = None):
    """SparkSession: `master` if given, else spark-submit's, else the embedded local[*]."""
    from pyspark.sql import SparkSession

    check_master(master)
    conf = dict(conf or {})
    # Executors' Python must be this interpreter (the venv with the project installed) unless
    # the user chose one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not under_spark_submit():
        builder = builder.master("local[*]")
    if is_local_master(master):
        # SPARK_LOCAL_IP is what the UI and the BlockManager bind to (the driver.* keys cover the RPC).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf = {**LOCAL_ONLY_CONF, **conf}
    elif conf.get("spark.authenticate", "").lower() != "true" and "spark.authenticate=true" not in (
        os.environ.get("SPARK_SUBMIT_OPTS", "") + os.environ.get("SPARK_DAEMON_JAVA_OPTS", "")
    ):
        logging.getLogger(__name__).warning(
            "Spark master %s: spark.authenticate is not set here; unless the cluster sets it, anyone who "
            "can reach the driver's and executors' ports can run code on them (see README, cluster)",
            master or "(spark-submit's)",
        )
    # Our own progress line replaces Spark's console bar (which interleaves with logs).
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    # Timestamps as Parquet INT64 microseconds, not Spark's default INT96 (deprecated): pyarrow reads
    # INT96 as nanoseconds and writes them back as such, which Spark then cannot read (a Spark job's
    # output filtered with pyarrow and fed to the next Spark job failed so: make ablate's kept/).
    builder = builder.config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    if not under_spark_submit():  # the driver JVM starts here (spark-submit's has started already)
        conf = quiet_driver_logging(conf)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("REFINERY_SPARK_LOG_LEVEL", "WARN"))
    return spark


def configure_worker_logging() -> None:
    """Log warnings from executor processes (a Spark Python worker starts with no handler)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
