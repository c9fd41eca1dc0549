"""The isolated cluster really isolates: executors cannot see the driver's /tmp, nor it theirs, and
every worker reaches the S3 server (testkit/isolated.py; the probe job is isolation_probe.py). And it
isolates no more than that: the executors run this checkout's code, also when the checkout is itself
under /tmp (then a file beside it stays hidden: only the checkout is bound back; issue 47, checked
without Spark by tests/isolated/test_private_tmp.py).

If this fails, a test of the tier that passes proves nothing about running on several machines.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest

from testkit.isolated import ROOT, TMP, executor_logs, spark_submit, worker_tmp

pytestmark = [pytest.mark.isolated, pytest.mark.slow]

PROBE = Path(__file__).with_name("isolation_probe.py")


def test_workers_cannot_see_the_drivers_tmp(isolated_cluster, s3_bucket, tmp_path):
    import s3fs

    token = uuid.uuid4().hex
    # In /tmp itself (tmp_path is under it too, but a TMPDIR elsewhere would move that one), and beside
    # the checkout when that is under /tmp: the workers get the checkout back, not the folder around it.
    driver_files = [TMP / f"refinery-driver-{token}.txt"]
    if ROOT.is_relative_to(TMP) and ROOT.parent != TMP:
        driver_files.append(ROOT.parent / f"refinery-driver-{token}.txt")
    for f in driver_files:
        f.write_text(token)
    prefix = f"{s3_bucket}/isolation"
    s3fs.S3FileSystem().pipe(f"{prefix.removeprefix('s3://')}/hello.txt", token.encode())
    out = tmp_path / "probe.json"
    t0 = time.perf_counter()
    try:
        run = spark_submit(
            isolated_cluster,
            str(PROBE),
            [os.pathsep.join(map(str, driver_files)), prefix, str(out)],
            tmp_path / "probe.log",
        )
    finally:
        for f in driver_files:
            f.unlink()
    print(f"probe job: {time.perf_counter() - t0:.1f} s")
    assert run.returncode == 0, (tmp_path / "probe.log").read_text()[-4000:] + executor_logs(isolated_cluster)
    found = json.loads(out.read_text())
    reports = found["executors"]

    # Two tasks in two different mount namespaces: exactly the two workers', neither the driver's.
    workers_ns = {os.readlink(f"/proc/{w.pid}/ns/mnt") for w in isolated_cluster.workers}
    assert len(workers_ns) == 2
    assert found["driver_mnt_ns"] == os.readlink("/proc/self/ns/mnt") not in workers_ns
    assert sorted(r["partition"] for r in reports) == [0, 1]
    assert {r["mnt_ns"] for r in reports} == workers_ns

    holders = []
    for r in reports:
        # The driver's files are not there for the executors...
        assert sorted(r["driver_files"]) == sorted(map(str, driver_files)), r
        assert all(v.startswith("FileNotFoundError") for v in r["driver_files"].values()), r
        # ...while this checkout is, and its code is what they run (PYTHONPATH: testkit/isolated.py)...
        assert r["code"] == str(ROOT), r
        # ...what an executor wrote is not there for the driver, but is in its worker's private /tmp
        # (read through the worker's /proc root: the write did happen, on that worker only).
        assert not Path(r["wrote"]).exists()
        name = Path(r["wrote"]).name
        holders += [i for i in (1, 2) if (worker_tmp(isolated_cluster, i) / name).is_file()]
        # ...and S3 is shared: each executor listed and read the object the driver put there.
        assert r["s3"] == {f"{prefix.removeprefix('s3://')}/hello.txt": token}, r
    assert sorted(holders) == [1, 2]  # one file per worker, each only in its own /tmp
