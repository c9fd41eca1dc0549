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
    # the report tests' extract, dedup and score run (tests/report/conftest.py): report and browser tiers
    "report_run": "report",
    # the isolated tier's cluster, and the dedup corpus run its dedup test compares against
    "isolated_cluster": "dedup-isolated",
    "first_run": "dedup-isolated",
}
# The units that take longest (seconds of a two-worker run on 2 cores, 2026-11-27), handed out first and
# in this order, as longest-processing-time-first scheduling does: a long unit started late would leave
# the other worker idle at the end (the trainer file did, ~100 s). The rest follow in collection order.
LONGEST_UNITS = (
    # ~900 s on a loaded machine (2026-11-28): the reduced demo (340 s quiet) and, sharing its run,
    # tests/workflows/test_search.py's real mixture search and its --validate trainings
    "demo",
    "dedup-isolated",  # 633 s: the dedup job tests, the isolated tier, the S3 chain
    "tests/trainer/test_train_deepspeed.py",  # 216 s
    "report",  # ~200 s loaded: the report tests' extract, dedup and score run, then the browser tier
    "tests/dedup/test_removed_sample.py",  # 175 s loaded: two dedup jobs over planted clusters
    # 264 s on a loaded machine (2026-11-28, test_multinode.py took 170 s there, 97 s quiet): the isolated
    # tier's proof and a two-node job, run again from a copy of the checkout in /tmp
    "tests/isolated/test_checkout_under_tmp.py",
    "tests/curation/test_filters_parity.py",  # 106 s (133 s before it shared datatrove's split cache)
    "tests/trainer/test_multinode.py",  # 97 s
    "tests/dedup/test_node_ids.py",  # 91 s
    "tests/trainer/test_checkpoint_s3.py",  # 80 s
)
TESTS = Path(__file__).resolve().parent


def pytest_configure(config) -> None:
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


def pytest_collection_modifyitems(config, items: list[pytest.Item]) -> None:
    """Under xdist, LONGEST_UNITS' tests first (in its order): the scheduler hands out units in
    collection order. Every worker sorts alike, so their collections still match; a serial run keeps
    the files' order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank = {u: i for i, u in enumerate(LONGEST_UNITS)}
    items.sort(key=lambda it: rank.get(_unit(it.nodeid.split("::", 1)[0]), len(rank)))  # stable


def pytest_xdist_make_scheduler(config, log):
    """Load scheduling by work unit: a test file, or the group of the shared set-up its tests use."""
    from xdist.scheduler import LoadScopeScheduling

    class SharedSetupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid.split("::", 1)[0])

    # Units in collection order (LONGEST_UNITS first, pytest_collection_modifyitems), not xdist's
    # most-tests-first, which knows nothing of how long a unit takes.
    config.option.loadscopereorder = False
    return SharedSetupScheduling(config, log)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return shared_data_dir()


@pytest.fixture(scope="session")
def warc_dir(data_dir: Path) -> Path:
    return data_dir / "warc"


@pytest.fixture(scope="session")
def spark():
    """A real local[2] SparkSession (2 cores, as CI has), shared by the `spark` tier."""
    from core.spark import get_spark
    from curation.pipeline import SPARK_CONF

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # 4 shuffle partitions, not 200: test data is small, and each partition is a task to schedule.
    # SPARK_CONF: the preloading Python daemon `extract` starts its sessions with (the default path;
    # a job that started this process's session first, dedup's, leaves Spark's plain daemon: both work).
    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", **SPARK_CONF}
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
