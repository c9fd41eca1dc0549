"""Node ids of the near-duplicate graph (dedup.stages.minhash.node_ids): dense ranks that cannot collide
and do not depend on how Spark split the input, on real documents with planted near duplicates."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.spark import SparkOptions
from dedup.config import DedupJobConfig
from dedup.job import run_dedup
from dedup.stages import minhash as minhash_stage
from testkit.neardup import edit, real_documents, vocabulary

# Only the stages these tests are about: exact, url and lines only slow the runs down (the exact copy of
# each family then joins its near-duplicate cluster, at Jaccard 1).
CFG = {"lines": {"enabled": False}, "exact": {"enabled": False}, "url": {"enabled": False}}


@pytest.fixture(scope="module")
def corpus(data_dir) -> list[dict]:
    """60 distinct real documents; 12 of them with 3 edited copies each (0.5% to 4% of words: from
    sure duplicates to pairs near the 0.8 threshold, which `verify` may reject) and an exact copy."""
    docs = [d for d in real_documents(data_dir) if 300 <= len(d.split()) <= 900][:60]
    rng = random.Random(27)
    vocab = vocabulary(docs)
    rows = [{"id": f"doc-{i:04d}", "text": t, "quality": round(rng.random(), 3)} for i, t in enumerate(docs)]
    for i in range(12):
        for k, fraction in enumerate((0.005, 0.02, 0.04)):
            rows.append(
                {"id": f"doc-{i:04d}-near{k}", "text": edit(docs[i], fraction, rng, vocab), "quality": 0.5}
            )
        rows.append({"id": f"doc-{i:04d}-copy", "text": docs[i], "quality": 0.1})
    return rows


def _write(rows: list[dict], folder: Path, files: int) -> Path:
    folder.mkdir(parents=True)
    table = pa.Table.from_pylist(rows)
    per = -(-len(rows) // files)
    for f in range(files):
        pq.write_table(table.slice(f * per, per), folder / f"part-{f}.parquet")
    return folder


def _dedup(inp: Path, out: Path, cfg: dict) -> dict:
    """What a run decided: kept rows, decisions, cluster counts, and the node id of every document."""
    run_dedup(
        str(inp), str(out), DedupJobConfig.from_dict({**CFG, **cfg}), spark=SparkOptions(progress=False)
    )
    kept = {
        r["id"]: (r["dup_cluster"], r["dup_cluster_size"]) for r in pq.read_table(out / "docs").to_pylist()
    }
    removed = sorted(
        (r["id"], r["reason"], r["partner_id"]) for r in pq.read_table(out / "removed_ids").to_pylist()
    )
    cluster = json.loads((out / "stages" / "cluster.json").read_text())
    minhash = json.loads((out / "stages" / "minhash.json").read_text())
    prep = pq.read_table(out / "stages" / "prepare", columns=["_row", "id"]).to_pydict()
    return {
        "kept": kept,
        "removed": removed,
        "cluster": {k: v for k, v in cluster.items() if k != "seconds"},
        "graph": {k: minhash[k] for k in ("nodes", "candidate_edges", "edges")},
        "ids": dict(zip(prep["_row"], prep["id"])),
        "out": out,
    }


def _groups(res: dict) -> set[frozenset[str]]:
    """Clusters of 2+ as sets of ids: a kept document and the ones removed in its favour."""
    members: dict[str, set[str]] = {}
    for rid, reason, partner in res["removed"]:
        if reason == "near_duplicate":
            members.setdefault(partner, {partner}).add(rid)
    return {frozenset(m) for m in members.values()}


@pytest.mark.spark
@pytest.mark.slow
def test_colliding_hashes_do_not_merge_documents(spark, corpus, tmp_path, monkeypatch):
    """With 1 bit of hash every id collides with half the others: the result must not change."""
    inp = _write(corpus, tmp_path / "in", files=2)
    cfg = {"minhash": {"verify": "none"}}
    full = _dedup(inp, tmp_path / "full", cfg)
    monkeypatch.setattr(minhash_stage, "ORDER_HASH_BITS", 1)
    narrow = _dedup(inp, tmp_path / "narrow", cfg)

    # the planted families, each its own cluster (a 4% edit may not reach the threshold): no cluster
    # holds two unrelated documents
    families = {frozenset(i[:8] for i in g) for g in _groups(full)}
    assert len(families) == 12 and all(len(f) == 1 for f in families)
    assert narrow["removed"] == full["removed"]  # same documents removed, for the same kept partner
    # (the edge count may differ: each bucket's edges go to its first node, which the order picks)
    assert narrow["graph"]["nodes"] == full["graph"]["nodes"]
    assert narrow["cluster"] == full["cluster"]
    assert {k: size for k, (_, size) in narrow["kept"].items()} == {
        k: size for k, (_, size) in full["kept"].items()
    }
    # The cluster id is the first member in node order, which the hash's bits change: only the
    # label may differ, and it is always a member of the cluster.
    for res in (full, narrow):
        for g in _groups(res):
            (keeper,) = (k for k in g if k in res["kept"])
            assert res["kept"][keeper][0] in g


@pytest.mark.spark
@pytest.mark.slow
def test_node_ids_do_not_depend_on_the_input_split(spark, corpus, tmp_path):
    """One input file and 2 partitions vs 5 files (rows in another order) and 7 partitions, with
    verification on (which edges it checks follows the node order): the same nodes, the same
    clusters, cluster ids and decisions."""
    cfg = {"minhash": {"verify": "exact"}}
    one = _dedup(
        _write(corpus, tmp_path / "one", files=1), tmp_path / "out1", {**cfg, "output": {"partitions": 2}}
    )
    shuffled = random.Random(1).sample(corpus, len(corpus))
    many = _dedup(
        _write(shuffled, tmp_path / "many", files=5), tmp_path / "out5", {**cfg, "output": {"partitions": 7}}
    )

    assert many["kept"] == one["kept"] and many["removed"] == one["removed"]
    assert many["cluster"] == one["cluster"] and many["graph"] == one["graph"]
    # some planted copies go and some are checked and kept: the verification had work to do
    assert one["cluster"]["removed"]["near_duplicate"]["docs"] >= 12 and one["graph"]["edges"] > 0

    def nodes(res: dict) -> dict[str, int]:
        folder = next((res["out"] / "stages" / "minhash").iterdir()) / "nodes"
        t = pq.read_table(folder).to_pydict()
        return {res["ids"][r]: n for r, n in zip(t["_row"], t["node"])}

    by_id = nodes(one)
    assert nodes(many) == by_id
    # dense, and ranked by (xxhash64(id), id): Spark's hash, asked of Spark
    from pyspark.sql import functions as F

    hashed = spark.createDataFrame([(i,) for i in by_id], "id string").select(
        "id", F.xxhash64("id").alias("h")
    )
    ranked = [r["id"] for r in sorted(hashed.collect(), key=lambda r: (r["h"], r["id"]))]
    assert [by_id[i] for i in ranked] == list(range(len(by_id)))
