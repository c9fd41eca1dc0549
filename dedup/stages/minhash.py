"""Stage `minhash`: LSH band collisions -> candidate edges -> (verified) edges -> connected components.

Every alive document with bands is a node (xxhash64 of its id). Each member of a band bucket is
linked to the bucket's smallest node: n-1 edges per bucket, never n^2, so one giant cluster costs no
more than its size. With `minhash.verify` on, a candidate edge is kept only when its two documents
reach the threshold (signature estimate or exact shingle Jaccard). Components (dedup.components)
resume per round. Everything goes under stages/minhash/<MinHashConfig>/: the folder names the
parameters that made it. This stage removes nothing; `cluster` decides per component.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pyarrow as pa

from dedup.components import connected_components
from dedup.config import DedupJobConfig
from dedup.minhash import MinHashConfig, MinHasher
from dedup.stages.base import DocBatch, Feature, Stage, StageContext
from dedup.stages.common import alive, verify_pairs


def minhash_dir(cfg: DedupJobConfig) -> str:
    """stages/<this>/: the folder of this MinHash config's edges and components."""
    return f"minhash/{cfg.minhash}"


class MinHash(Stage):
    name = "minhash"
    counters = ("candidate_edges", "edges", "cc_rounds", "node_hash_collisions", "largest_bucket")

    def enabled(self, cfg: DedupJobConfig) -> bool:
        return cfg.cluster.enabled  # components are only made for `cluster` to act on

    def features(self, cfg: DedupJobConfig) -> tuple[Feature, ...]:
        keep_sig = cfg.minhash.verify == "signature"
        return (
            Feature(
                "_n_shingles int, _bands array<long>, _sig binary", partial(_signer, cfg.minhash, keep_sig)
            ),
        )

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from pyspark.sql import functions as F

        mh, folder = ctx.cfg.minhash, minhash_dir(ctx.cfg)
        nodes = alive(ctx, ["_row", "id", "_bands", "_sig"]).where(F.col("_bands").isNotNull())
        nodes = nodes.withColumn("node", F.xxhash64("id"))
        bands = nodes.select("node", F.posexplode("_bands").alias("band", "key"))
        buckets = bands.groupBy("band", "key").agg(F.min("node").alias("m"), F.count(F.lit(1)).alias("n"))
        buckets = buckets.where(F.col("n") > 1)
        edges = (
            bands.join(buckets, ["band", "key"])
            .where(F.col("node") != F.col("m"))
            .select(F.col("node").alias("a"), F.col("m").alias("b"))
            .distinct()
        )
        ctx.write(edges, f"{folder}/candidates")
        edges = ctx.read(f"{folder}/candidates")
        n_candidates = edges.count()
        if mh.verify != "none":
            edges = verify_pairs(ctx, edges, _verify_side(ctx, nodes), f"{folder}/verified")
        n_edges = edges.count()
        rounds: list[int] = []
        comp = connected_components(
            ctx.spark,
            edges,
            ctx.store.tables,
            f"stages/{folder}/cc",
            ctx.partitions,
            ctx.cfg.cluster.max_iterations,
            on_round=lambda r, n: (rounds.append(r), ctx.say(f"minhash: components round {r}: {n} edges")),
        )
        ctx.write(comp, f"{folder}/components")
        n_nodes = nodes.count()
        distinct_nodes = nodes.select("node").distinct().count()
        buckets_info = buckets.agg(F.count(F.lit(1)).alias("b"), F.max("n").alias("mx")).first()
        return {
            "nodes": n_nodes,
            "node_hash_collisions": n_nodes - distinct_nodes,
            "shared_buckets": int(buckets_info["b"] or 0),
            "largest_bucket": int(buckets_info["mx"] or 0),
            "candidate_edges": n_candidates,
            "edges": n_edges,
            "cc_rounds": len(rounds),
            "bands": mh.band_rows[0],
            "rows": mh.band_rows[1],
        }


def _signer(mh: MinHashConfig, keep_sig: bool):
    """Per task: the hasher (tables built on the executor) and its batch function."""
    hasher = MinHasher(mh)

    def sign(docs: DocBatch) -> dict[str, pa.Array]:
        # One compiled call per batch; a text with no shingle (count 0) gets no bands.
        sig_mat, counts = hasher.sign_batch([n or b"" for n in docs.norms])
        keys = hasher.band_keys_batch(sig_mat)
        has = (counts > 0).tolist()
        bands = [k if ok else None for k, ok in zip(keys.tolist(), has)]
        sigs = [s.tobytes() if ok and keep_sig else None for s, ok in zip(sig_mat, has)]
        return {
            "_n_shingles": pa.array(counts.tolist(), pa.int32()),
            "_bands": pa.array(bands, pa.list_(pa.int64())),
            "_sig": pa.array(sigs, pa.binary()),
        }

    return sign


def _verify_side(ctx: StageContext, nodes):
    """(k = node, v = what `minhash.verify` compares: the signature, or the text) of every node."""
    from pyspark.sql import functions as F

    if ctx.cfg.minhash.verify == "signature":
        return nodes.select(F.col("node").alias("k"), F.col("_sig").alias("v"))
    side = ctx.prep.select(F.xxhash64("id").alias("k"), F.col("text").alias("v"))
    return side.join(nodes.select(F.col("node").alias("k")), "k")
