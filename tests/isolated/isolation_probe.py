"""`spark-submit isolation_probe.py DRIVER_FILES S3_PREFIX OUT_JSON`: what each executor can see.

Two barrier tasks (barrier mode starts them together, so with two 1-core executors they run on
different workers): each tries to open each of DRIVER_FILES (files the driver wrote in its temporary
folders, joined by os.pathsep), writes a file in its own /tmp, lists S3_PREFIX and reads the objects
there, and reports its mount namespace and where it imported the project's code from. The driver
writes the reports and its own namespace to OUT_JSON. Used by tests/isolated/test_isolation.py.
"""

from __future__ import annotations

import json
import os
import sys
import uuid


def probe(driver_files: list[str], s3_prefix: str, _rows):
    import fsspec
    from pyspark import BarrierTaskContext

    import core  # the project's bottom package, as every job's executors import it

    ctx = BarrierTaskContext.get()
    report = {
        "partition": ctx.partitionId(),
        "mnt_ns": os.readlink("/proc/self/ns/mnt"),
        "code": os.path.dirname(os.path.dirname(core.__file__)),
        "driver_files": {},
    }
    for path in driver_files:
        try:
            with open(path) as f:
                report["driver_files"][path] = f"read: {f.read()!r}"
        except OSError as e:
            report["driver_files"][path] = f"{type(e).__name__}: {e.strerror}"
    mine = f"/tmp/written-by-executor-{uuid.uuid4().hex}.txt"
    with open(mine, "w") as f:
        f.write(f"partition {ctx.partitionId()}")
    report["wrote"] = mine
    fs = fsspec.filesystem("s3")  # AWS_ENDPOINT_URL and the keys come from the worker's environment
    keys = sorted(fs.ls(s3_prefix.removeprefix("s3://")))
    report["s3"] = {k: fs.cat(k).decode() for k in keys}
    ctx.barrier()  # both tasks alive at once: each holds its executor's only core
    yield json.dumps(report)


def main(driver_files: str, s3_prefix: str, out_json: str) -> None:
    from functools import partial

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("isolation-probe").getOrCreate()
    rdd = spark.sparkContext.parallelize(range(2), 2).barrier()
    task = partial(probe, driver_files.split(os.pathsep), s3_prefix)
    reports = [json.loads(r) for r in rdd.mapPartitions(task).collect()]
    spark.stop()
    with open(out_json, "w") as f:
        json.dump({"driver_mnt_ns": os.readlink("/proc/self/ns/mnt"), "executors": reports}, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
