"""Shared fixtures: the real data folder, one local Spark session for the `spark` tier, the S3 server, and
the one reduced demo run (tests/support/demo.py) whose outputs several modules read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from testkit.shared_data import shared_data_dir


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

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # 4 shuffle partitions, not 200: test data is small, and each partition is a task to schedule.
    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}
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
