"""`spark-submit isolation_probe.py DRIVER_FILE S3_PREFIX OUT_JSON`: what each executor can see.

Two barrier tasks (barrier mode starts them together, so with two 1-core executors they run on
different workers): each tries to open DRIVER_FILE (a file the driver wrote in its /tmp), writes a file
in its own /tmp, lists S3_PREFIX and reads the objects there, and reports its mount namespace. The
driver writes the reports and its own namespace to OUT_JSON. Used by tests/isolated/test_isolation.py.
"""

from __future__ import annotations

import json
import os
import sys
import uuid


def probe(driver_file: str, s3_prefix: str, _rows):
    import fsspec
    from pyspark import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    report = {"partition": ctx.partitionId(), "mnt_ns": os.readlink("/proc/self/ns/mnt")}
    try:
        with open(driver_file) as f:
            report["driver_file"] = f"read: {f.read()!r}"
    except OSError as e:
        report["driver_file"] = f"{type(e).__name__}: {e.strerror}"
    mine = f"/tmp/written-by-executor-{uuid.uuid4().hex}.txt"
    with open(mine, "w") as f:
        f.write(f"partition {ctx.partitionId()}")
    report["wrote"] = mine
    fs = fsspec.filesystem("s3")  # AWS_ENDPOINT_URL and the keys come from the worker's environment
    keys = sorted(fs.ls(s3_prefix.removeprefix("s3://")))
    report["s3"] = {k: fs.cat(k).decode() for k in keys}
    ctx.barrier()  # both tasks alive at once: each holds its executor's only core
    yield json.dumps(report)


def main(driver_file: str, s3_prefix: str, out_json: str) -> None:
    from functools import partial

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("isolation-probe").getOrCreate()
    rdd = spark.sparkContext.parallelize(range(2), 2).barrier()
    reports = [json.loads(r) for r in rdd.mapPartitions(partial(probe, driver_file, s3_prefix)).collect()]
    spark.stop()
    with open(out_json, "w") as f:
        json.dump({"driver_mnt_ns": os.readlink("/proc/self/ns/mnt"), "executors": reports}, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
