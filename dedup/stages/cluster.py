"""Stage `cluster`: the keep policy per near-duplicate cluster (a connected component of `minhash`).

The cluster id is the id of the component's first node in `minhash`'s node order (xxhash64(id), then
id: the same on every run, whatever the cluster layout); `dup_cluster_size` counts the input
documents a kept row stands for (exact/url copies folded into a member count too). Policies: keep
one member by KEEP_ONE order and remove the rest (near_duplicate), or remove every member
(drop_cluster: near_duplicate_cluster).

Components are transitive: a member can be in a cluster only through others and be far from the
document kept. With `minhash.verify` on, a member is removed only if it reaches the threshold
against the kept document itself; the others are kept as clusters of their own ("detached"), so
every removal is checked.
"""

from __future__ import annotations

from typing import Any

from dedup.config import DedupJobConfig
from dedup.stages.base import Stage, StageContext
from dedup.stages.common import copies_of, decisions_of, keep_order, reason_counts, verify_pairs
from dedup.stages.minhash import minhash_dir

_INFO_COLS = ("_row", "dup_cluster", "dup_cluster_size")


class Cluster(Stage):
    name = "cluster"
    removes = True
    funnel_row = "cluster"
    counters = ("clusters", "largest_cluster", "detached")

    def enabled(self, cfg: DedupJobConfig) -> bool:
        return cfg.cluster.enabled

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from pyspark.sql import functions as F

        members = _members(ctx)
        if ctx.cfg.cluster.keep == "drop_cluster":
            removed = decisions_of(members, "cluster", F.lit("near_duplicate_cluster"), F.col("dup_cluster"))
            kept_info = members.where(F.lit(False)).select(*_INFO_COLS)
        else:
            removed, kept_info = _keep_one(ctx, members)
        ctx.write(removed, "cluster/removed")
        ctx.write(kept_info, "cluster/info")
        return _cluster_info(ctx, members)


def _members(ctx: StageContext):
    """Alive rows in a component, with its `root`, size in members and copies, and cluster id."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    comp = ctx.read(f"{minhash_dir(ctx.cfg)}/components")
    wc = Window.partitionBy("root")
    return (
        copies_of(ctx)
        .join(comp, "_row")
        .withColumn("dup_cluster_size", F.sum("_copies").over(wc))
        .withColumn("_members", F.count(F.lit(1)).over(wc))
        .withColumn("dup_cluster", F.first("id").over(wc.orderBy("node")))
    )


def _keep_one(ctx: StageContext, members):
    """(decisions, kept rows' cluster columns) when one member per cluster stays."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    verify = ctx.cfg.minhash.verify
    w = Window.partitionBy("root").orderBy(*keep_order(ctx.cfg.cluster.keep, ctx.columns))
    ranked = (
        members.withColumn("_rn", F.row_number().over(w))
        .withColumn("_keep_id", F.first("id").over(w))
        .withColumn("_keep_row", F.first("_row").over(w))
    )
    losers = ranked.where(F.col("_rn") > 1)
    winners = ranked.where(F.col("_rn") == 1)
    if verify != "none":
        # Only members that reach the threshold against the kept document go (module docstring).
        col = "_sig" if verify == "signature" else "text"
        side = ctx.prep.select(F.col("_row").alias("k"), F.col(col).alias("v"))
        pairs = losers.select(F.col("_row").alias("a"), F.col("_keep_row").alias("b"))
        ok = verify_pairs(ctx, pairs, side, "cluster/confirmed").select(F.col("a").alias("_row"))
        losers = losers.join(ok, "_row", "left_semi")
        # recount each kept document's cluster: itself plus the members it really replaces
        sizes = losers.groupBy(F.col("_keep_row").alias("_row")).agg(
            F.sum("_copies").alias("_removed_copies")
        )
        winners = winners.join(sizes, "_row", "left").withColumn(
            "dup_cluster_size", F.col("_copies") + F.coalesce("_removed_copies", F.lit(0))
        )
    removed = decisions_of(losers, "cluster", F.lit("near_duplicate"), F.col("_keep_id"))
    return removed, winners.select(*_INFO_COLS)


def _cluster_info(ctx: StageContext, members) -> dict[str, Any]:
    """The stage's counts: clusters, their sizes, and members detached by verification."""
    from pyspark.sql import functions as F

    sizes = members.select("root", "_members", "dup_cluster_size").distinct()
    agg = sizes.agg(
        F.count(F.lit(1)).alias("clusters"),
        F.max("_members").alias("largest"),
        F.max("dup_cluster_size").alias("largest_copies"),
    ).first()
    hist = {
        str(r["_members"]): int(r["n"])
        for r in sizes.groupBy("_members").agg(F.count(F.lit(1)).alias("n")).collect()
    }
    # members of 2+ clusters neither kept nor removed failed the check against the kept one
    in_clusters = sum(int(size) * n for size, n in hist.items() if int(size) > 1)
    n_removed = ctx.read("cluster/removed").count()
    n_kept = ctx.read("cluster/info").count()
    return {
        "removed": reason_counts(ctx.decisions(["cluster"])),
        "detached": in_clusters - n_removed - n_kept,
        "clusters": int(agg["clusters"] or 0),
        "largest_cluster": int(agg["largest"] or 0),
        "largest_cluster_copies": int(agg["largest_copies"] or 0),
        "cluster_size_histogram": dict(sorted(hist.items(), key=lambda kv: int(kv[0]))),
        "kept_in_clusters": n_kept,
    }
