"""Dedup from s3:// to s3:// on the isolated cluster, through a lost worker and a lost driver, equals
the local run (issue 27).

The input is the dedup job test's corpus (tests/support/dedup_corpus.py: real documents with planted
exact, URL, near and boilerplate-line duplicates and bad rows, so every stage decides something), and
the reference is that test's own local run of it (`first_run`, same config). Here the same job runs as
`spark-submit --master spark://... dedup/__main__.py run --input s3://... --output s3://...` on the
cluster of testkit/isolated.py, whose executors share nothing with the driver but the S3 server:
- once the first stage's marker is on S3, worker 1 (and its executor) is SIGKILLed: the job goes on
  with the other worker;
- once a later stage's marker is on S3, the driver (spark-submit and its Python) is SIGKILLed too;
- the rerun is a new driver with a new, empty temporary folder (as on another machine): it must resume
  from the stages on S3, not redo them, and give the local run's documents (every column), removal
  decisions and funnel. Its temporary folder must still be empty at the end: nothing of the job's
  data went through the driver's disk.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from core.files import doc_parquet_uris, open_parquet
from core.storage import ObjectStore, join, open_store
from testkit.isolated import ROOT, failure, spark_submit, submit_command
from testkit.s3 import upload_tree
from tests.support.dedup_corpus import CFG

pytestmark = [pytest.mark.isolated, pytest.mark.slow]

# The job test's config (2 output partitions, a boilerplate-line threshold its corpus crosses).
SETS = [a for sec, kv in CFG.items() for k, v in kv.items() for a in ("--set", f"{sec}.{k}={v}")]


def dedup_args(inp: str, out: str) -> list[str]:
    return ["run", "--input", inp, "--output", out, "--no-progress", *SETS]


def rows(folder: str | Path) -> list[dict]:
    """Every row of a Parquet dataset (a dedup output's docs, or removed_ids/), local or s3://."""
    out: list[dict] = []
    for f in doc_parquet_uris(folder):
        with open_parquet(f) as pf:
            out += pf.read().to_pylist()
    return out


def funnel(out: str | Path) -> list[tuple]:
    stats = json.loads(open_store(out).read_bytes(join(str(out), "stats.json")))
    return [(s["stage"], s["docs_in"], s["docs_out"], s["drops"]) for s in stats["stages"]]


def wait_for(store: ObjectStore, marker: str, job: subprocess.Popen, log: Path, cluster, t0: float) -> float:
    """Seconds since t0 when `marker` appeared; fails if the job ended first."""
    while not store.exists(marker):
        assert job.poll() is None, f"the job ended (exit {job.returncode}) before {marker}:\n" + failure(
            log, cluster
        )
        assert time.perf_counter() - t0 < 600, f"no {marker} after 600 s"
        time.sleep(0.2)
    return time.perf_counter() - t0


def test_dedup_on_isolated_workers_survives_a_lost_worker_and_driver(
    disposable_isolated_cluster, s3_bucket, first_run, corpus, tmp_path
):
    cluster = disposable_isolated_cluster
    local, _ = first_run
    inp, out = f"{s3_bucket}/input", f"{s3_bucket}/dedup"
    upload_tree(corpus[0], inp)
    log = tmp_path / "dedup.log"
    store = ObjectStore(out)
    driver_tmp = [tmp_path / "driver1-tmp", tmp_path / "driver2-tmp"]
    for d in driver_tmp:
        d.mkdir()

    t0 = time.perf_counter()
    cmd = submit_command(cluster, "dedup/__main__.py", dedup_args(inp, out))
    with log.open("ab") as f:
        job = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**cluster.env, "TMPDIR": str(driver_tmp[0])},
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the driver's group: spark-submit's JVM and the Python it runs
        )
    try:
        lost_worker = wait_for(store, join(out, "stages", "prepare.json"), job, log, cluster, t0)
        os.killpg(cluster.workers[0].pid, signal.SIGKILL)  # the worker and the executor it started
        lost_driver = wait_for(store, join(out, "stages", "exact.json"), job, log, cluster, t0)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=60)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    print(f"worker 1 killed {lost_worker:.1f} s in, the driver {lost_driver:.1f} s in")
    assert not store.exists(join(out, "_SUCCESS"))

    # A new driver, one worker left: it starts once that one executor registers.
    t1 = time.perf_counter()
    rerun = spark_submit(
        cluster,
        "dedup/__main__.py",
        dedup_args(inp, out),
        log,
        {"spark.scheduler.minRegisteredResourcesRatio": "0.5"},
        env={"TMPDIR": str(driver_tmp[1])},
    )
    print(f"rerun: {time.perf_counter() - t1:.1f} s")
    assert rerun.returncode == 0, failure(log, cluster)
    resumed = [ln for ln in log.read_text().splitlines() if ln.startswith("resumed: stages")]
    assert resumed and "prepare" in resumed[-1] and "exact" in resumed[-1], resumed

    by_id = sorted(rows(local / "docs"), key=lambda r: r["id"])
    assert len(by_id) > 40 and any(r["dup_cluster_size"] > 1 for r in by_id)
    assert sorted(rows(join(out, "docs")), key=lambda r: r["id"]) == by_id, "documents differ"
    key = lambda r: (r["id"] or "", r["stage"], r["reason"])  # noqa: E731  (the corpus's null ids)
    decided = sorted(rows(local / "removed_ids"), key=key)
    assert len({r["stage"] for r in decided}) >= 3, decided  # exact, url, minhash, lines at least
    assert sorted(rows(join(out, "removed_ids")), key=key) == decided, "removal decisions differ"
    # the removed/ sample, drawn by a hash of the id (dedup/removed.py): a run of its own draws the same
    sample = sorted(rows(local / "removed"), key=key)
    assert sample and sorted(rows(join(out, "removed")), key=key) == sample, "removed/ samples differ"
    assert funnel(out) == funnel(local)
    left = sorted(str(p) for d in driver_tmp for p in d.rglob("*"))
    assert not left, f"the drivers put files in their temporary folders: {left[:5]}"
