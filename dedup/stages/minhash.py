"""Stage `minhash`: LSH band collisions -> candidate edges -> (verified) edges -> connected components.

Every alive document with bands is a node. Its node id is its rank 0..n-1 among those documents by
(xxhash64(id), id) (`node_ids`): dense, distinct for distinct ids (ids are unique once `ids` ran),
and a function of the documents alone, not of how Spark split them, so a local run, a cluster run
and a resumed one build the same graph. The hash only spreads the order (the cluster id is the id of
the component's first node, not its smallest id); two ids with the same hash stay two nodes.
Each member of a band bucket is linked to the bucket's smallest node: n-1 edges per bucket, never
n^2, so one giant cluster costs no more than its size. With `minhash.verify` on, a candidate edge is
kept only when its two documents reach the threshold (signature estimate or exact shingle Jaccard).
With `minhash.per_language`, each document's band keys are mixed with the hash of its
`lang` (dedup.minhash.language_hashes), so buckets, and so clusters, never span two languages.
Components (dedup.components) resume per round. Everything goes under
stages/minhash/<MinHashConfig>/: the folder names the parameters that made it. This stage removes
nothing; `cluster` decides per component.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pyarrow as pa

from dedup.components import connected_components
from dedup.config import DedupJobConfig
from dedup.minhash import MinHashConfig, MinHasher, language_hashes
from dedup.stages.base import DocBatch, Feature, Stage, StageContext
from dedup.stages.common import alive, verify_pairs
from dedup.words import shingle_texts

ORDER_HASH_BITS = 64
"""How many high bits of xxhash64(id) order the nodes (1..64; ties are broken by the id). Only the
order depends on it, never which documents are one node: tests narrow it to 1 so that every id
collides and check that the result does not change."""

# monotonically_increasing_id() is (partition index << 33) + position in the partition.
_POS_BITS = 33


def minhash_dir(cfg: DedupJobConfig) -> str:
    """stages/<this>/: the folder of this MinHash config's edges and components."""
    return f"minhash/{cfg.minhash}"


class MinHash(Stage):
    name = "minhash"
    counters = ("candidate_edges", "edges", "cc_rounds", "largest_bucket")

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
        docs = alive(ctx, ["_row", "id", "_bands", "_sig"]).where(F.col("_bands").isNotNull())
        n_nodes = node_ids(ctx, docs.select("_row", "id"), f"{folder}/nodes")
        node_map = ctx.read(f"{folder}/nodes")
        nodes = docs.join(node_map, "_row")
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
            edges = verify_pairs(ctx, edges, _verify_side(ctx, nodes, node_map), f"{folder}/verified")
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
        # (node, root, _row): `cluster` finds its members by row and orders them by node
        ctx.write(comp.join(node_map, "node"), f"{folder}/components")
        buckets_info = buckets.agg(F.count(F.lit(1)).alias("b"), F.max("n").alias("mx")).first()
        return {
            "nodes": n_nodes,
            "shared_buckets": int(buckets_info["b"] or 0),
            "largest_bucket": int(buckets_info["mx"] or 0),
            "candidate_edges": n_candidates,
            "edges": n_edges,
            "cc_rounds": len(rounds),
            "bands": mh.band_rows[0],
            "rows": mh.band_rows[1],
        }


def node_ids(ctx: StageContext, docs, name: str) -> int:
    """Write (_row, node) to the table `name`: node = rank of the row's document among `docs`
    (_row, id; ids distinct) by (the high ORDER_HASH_BITS of xxhash64(id), id). Returns the count.

    A distributed sort (range-partitioned, nothing in one partition), then each row's position in
    the sorted order: its partition's start (a prefix sum of the per-partition counts, the only
    thing collected) plus its place in the partition. `_row` is only the join key, never the order:
    it depends on how the input was split. The sorted positions are written before they are
    counted, since a re-run sort may cut its ranges elsewhere (Spark samples them anew).
    """
    from pyspark.sql import functions as F

    order = F.shiftrightunsigned(F.xxhash64("id"), 64 - ORDER_HASH_BITS)
    sorted_rows = docs.orderBy(order, F.col("id")).select(
        "_row", F.monotonically_increasing_id().alias("_pos")
    )
    ctx.write(sorted_rows, f"{name}_sorted")
    sorted_rows = ctx.read(f"{name}_sorted")
    part = F.shiftright("_pos", _POS_BITS)
    counts = sorted_rows.groupBy(part.alias("p")).agg(F.count(F.lit(1)).alias("n")).collect()
    starts: list[Any] = []
    total = 0
    for r in sorted(counts, key=lambda r: r["p"]):
        starts += [F.lit(r["p"]), F.lit(total)]
        total += r["n"]
    start = F.create_map(*starts)[part] if starts else F.lit(0).cast("long")
    in_part = F.col("_pos").bitwiseAND((1 << _POS_BITS) - 1)
    ctx.write(sorted_rows.select("_row", (start + in_part).alias("node")), name)
    return total


def _signer(mh: MinHashConfig, keep_sig: bool):
    """Per task: the hasher (tables built on the executor) and its batch function."""
    hasher = MinHasher(mh)

    def sign(docs: DocBatch) -> dict[str, pa.Array]:
        # One compiled call per batch; a text with no shingle (count 0) gets no bands.
        names = docs.batch.schema.names
        if mh.words == "language":
            langs = docs.batch.column("lang").to_pylist() if "lang" in names else None
            texts = shingle_texts(docs.norms, docs.texts, langs)
        else:
            texts = [n or b"" for n in docs.norms]
        sig_mat, counts = hasher.sign_batch(texts)
        groups = None
        if mh.per_language:
            if "lang" not in names:  # the job refuses such input before Spark starts (dedup.job)
                raise ValueError("minhash.per_language needs a `lang` column; the input has none")
            groups = language_hashes(docs.batch.column("lang"))
        keys = hasher.band_keys_batch(sig_mat, groups)
        has = (counts > 0).tolist()
        bands = [k if ok else None for k, ok in zip(keys.tolist(), has)]
        sigs = [s.tobytes() if ok and keep_sig else None for s, ok in zip(sig_mat, has)]
        return {
            "_n_shingles": pa.array(counts.tolist(), pa.int32()),
            "_bands": pa.array(bands, pa.list_(pa.int64())),
            "_sig": pa.array(sigs, pa.binary()),
        }

    return sign


def _verify_side(ctx: StageContext, nodes, node_map):
    """(k = node, v = what `minhash.verify` compares: the signature, or the text) of every node."""
    from pyspark.sql import functions as F

    if ctx.cfg.minhash.verify == "signature":
        return nodes.select(F.col("node").alias("k"), F.col("_sig").alias("v"))
    lang = ["lang"] if ctx.cfg.minhash.words == "language" and "lang" in ctx.prep.columns else []
    side = ctx.prep.select("_row", F.col("text").alias("v"), *lang).join(node_map, "_row")
    return side.select(F.col("node").alias("k"), "v", *lang)
