"""Shared fixtures: the real data folder, one local Spark session for the `spark` tier, the S3 server, and
the one reduced demo run (tests/support/demo.py) whose outputs several modules read, and the grouping of
test files for `make test`'s worker processes (pytest-xdist)."""

from __future__ import annotations

import os
import re
import sys
from functools import cache
from pathlib import Path

import pytest

from testkit.shared_data import shared_data_dir
from tests.support import durations

# the dedup job test's corpus and first run, session-wide (tests/isolated compares against them)
pytest_plugins = ["tests.support.dedup_corpus"]

# `make test` runs two pytest-xdist workers (CI has 2 cores). Each worker is its own session, so a test
# file goes to one worker whole (its module- and session-scoped set-up is built once), and the files that
# share a session set-up costing a minute or more go to one worker together: the reduced demo (its
# trained models and outputs, read by the perplexity, demo and cluster tests; the cluster tests start
# the standalone cluster too) and the classifiers' extracted pages. A file joins such a group by naming
# the fixture. (xdist's own `--dist loadgroup` marks do not take under pytest 9, whose nodeids xdist
# 3.8 cannot suffix, hence this scheduler.)
SHARED_SETUP_GROUPS = {
    "demo_run": "demo",
    "spark_cluster": "demo",
    "extract_out": "classifiers-extract",
    "model_dir": "classifiers-extract",  # built from extract_out (tests/classifiers/conftest.py)
    # the report and browser tiers read the demo's run (tests/report/conftest.py)
    "report_run": "demo",
    # the isolated tier's cluster, and the dedup corpus run its dedup test compares against
    "isolated_cluster": "dedup-isolated",
    "first_run": "dedup-isolated",
}
_GROUPS = frozenset(SHARED_SETUP_GROUPS.values())
TESTS = Path(__file__).resolve().parent


def pytest_configure(config) -> None:
    """The durations recorder (tests/support/durations.py), the JDK options below, and OpenMP's wait
    policy, all set before any worker starts (under xdist the workers inherit the controller's env)."""
    config.pluginmanager.register(durations.Recorder(_unit), "refinery-durations")
    _jdk_options()
    # OpenMP threads (torch's CPU ops) sleep when idle instead of spinning: the suite always runs two
    # workers on 2 cores, and a spinning team takes the cores the other worker needs. Measured on a
    # 40-step train-lm run beside two busy processes: 5.2K tokens/s and 34.3 CPU-s spinning, 8.7K and
    # 19.2 passive; on quiet cores passive costs 6% (20.1K vs 18.9K tokens/s). Your own setting wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _jdk_options() -> None:
    """JDK options for every JVM the tests start (testkit/jvm.py: the C1 tier and a class archive),
    set once, before any worker starts: under xdist by the controller, whose environment the workers
    inherit. A JDK_JAVA_OPTIONS of your own wins."""
    if os.environ.get("PYTEST_XDIST_WORKER") or "JDK_JAVA_OPTIONS" in os.environ:
        return
    from testkit.jvm import jvm_options

    os.environ["JDK_JAVA_OPTIONS"] = jvm_options(TESTS.parent)


@cache  # asked once per test id
def _shared_setup_group(test_file: Path) -> str | None:
    text = test_file.read_text(encoding="utf-8") if test_file.is_file() else ""
    return next((g for name, g in SHARED_SETUP_GROUPS.items() if re.search(rf"\b{name}\b", text)), None)


def _unit(test_file: str) -> str:
    """A test file's scheduling unit: the group of the shared set-up it uses, or the file itself."""
    return _shared_setup_group(TESTS.parent / test_file) or test_file


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the `slow` marks below must be there
def pytest_collection_modifyitems(config, items: list[pytest.Item]) -> None:
    """`slow` on every test that tests/durations.json says takes durations.SLOW_S or more, itself or
    through a fixture's set-up. Under xdist, the units sorted longest first by their recorded seconds
    (the scheduler hands out units in collection order; every worker sorts alike, so their collections
    still match; a file not recorded yet goes last, a set-up group first); a serial run keeps the
    files' order."""
    table = durations.load()
    for it in items:
        if durations.is_slow(it, table):
            it.add_marker(pytest.mark.slow)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    seconds = durations.unit_seconds(table, _unit)

    def recorded(item: pytest.Item) -> float:
        unit = _unit(item.nodeid.split("::", 1)[0])
        # a shared set-up group not recorded yet (a fresh table) is long by definition: a set-up of a
        # minute or more, so it goes out first rather than last
        return seconds.get(unit, durations.UNRECORDED_GROUP_S if unit in _GROUPS else 0.0)

    items.sort(key=lambda it: -recorded(it))  # stable


def pytest_xdist_make_scheduler(config, log):
    """Load scheduling by work unit: a test file, or the group of the shared set-up its tests use."""
    from xdist.scheduler import LoadScopeScheduling

    class SharedSetupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid.split("::", 1)[0])

    # Units in collection order (longest recorded first, pytest_collection_modifyitems), not xdist's
    # most-tests-first, which knows nothing of how long a unit takes.
    config.option.loadscopereorder = False
    return SharedSetupScheduling(config, log)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return shared_data_dir()


@pytest.fixture(scope="session")
def warc_dir(data_dir: Path) -> Path:
    return data_dir / "warc"


# The shared session's plans run interpreted, without Janino and without adaptive re-planning: on the
# suite's inputs (tens of documents) compiling each plan's generated Java costs more than it saves
# (a JFR profile of a warm dedup run: Janino 18% of its CPU), and AQE re-plans every shuffle for
# partitions of a few rows. Same results by Spark's contract (its own tests run both paths);
# tests/dedup/test_job.py + test_node_ids.py + tests/curation/test_job.py went from 358 and 352 to 328 and
# 304 CPU-s (2026-12-03, one process, quiet 2-vCPU VM). Only this in-process session: every
# `python -m` / spark-submit job of the suite (the demo, the clusters) keeps Spark's defaults, so the
# generated-code path and AQE are still what those runs execute.
FAST_SMALL_JOBS = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
}


@pytest.fixture(scope="session")
def spark():
    """A real local[2] SparkSession (2 cores, as CI has), shared by the `spark` tier."""
    from core.spark import get_spark
    from curation.pipeline import SPARK_CONF

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # 4 shuffle partitions, not 200: test data is small, and each partition is a task to schedule.
    # SPARK_CONF: the preloading Python daemon `extract` starts its sessions with (the default path;
    # a job that started this process's session first, dedup's, leaves Spark's plain daemon: both work).
    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", **SPARK_CONF, **FAST_SMALL_JOBS}
    session = get_spark("local[2]", "refinery-tests", conf)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1 (testkit/s3.py), started once, stopped at the end."""
    from testkit.s3 import S3Server

    server = S3Server()
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def s3_bucket(s3_server) -> str:
    """A fresh bucket on the test server, as `s3://name`, with this process's AWS env pointed at it."""
    import uuid

    import s3fs

    from testkit.s3 import s3_env

    if not s3_server.running:  # a fault test that failed half way leaves it stopped
        s3_server.start()
    with s3_env(s3_server):
        name = f"refinery-{uuid.uuid4().hex[:12]}"
        s3fs.S3FileSystem().mkdir(name)
        yield f"s3://{name}"


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory, warc_dir, data_dir) -> Path:
    """The reduced demo (tests/support/demo.py), run once per session: its folder, every stage done."""
    from tests.support.demo import run_demo

    out = tmp_path_factory.mktemp("demo")
    res = run_demo(out, warc_dir, data_dir)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def isolated_cluster(tmp_path_factory, request, s3_server):
    """A Spark standalone cluster whose workers share only the S3 server with the driver
    (testkit/isolated.py), started once per session; skips where a private /tmp cannot be made."""
    from testkit.isolated import start_isolated_cluster

    return start_isolated_cluster(tmp_path_factory, request.addfinalizer, s3_server)


@pytest.fixture()
def disposable_isolated_cluster(tmp_path_factory, request, s3_server):
    """The same, the test's own, stopped at its end: for a test that kills a worker."""
    from testkit.isolated import start_isolated_cluster

    return start_isolated_cluster(tmp_path_factory, request.addfinalizer, s3_server)
