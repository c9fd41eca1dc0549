"""The `cluster` tier's cluster: one master and two workers on 127.0.0.1 (testkit/spark_cluster.py).

The workers share the driver's filesystem (their folders under the test's temporary folder), as on one
machine; the `isolated` tier (tests/isolated/) gives each worker a private /tmp instead.
"""

from __future__ import annotations

import pytest

from testkit.spark_cluster import Cluster, start_cluster


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory, request) -> Cluster:
    return start_cluster(tmp_path_factory.mktemp("spark-cluster"), request.addfinalizer)
