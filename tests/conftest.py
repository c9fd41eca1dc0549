"""Shared fixtures: the real data folder, and one local Spark session for the `spark` tier."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.shared_data import shared_data_dir


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
