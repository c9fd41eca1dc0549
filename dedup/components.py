"""Connected components in Spark: alternating large-star / small-star (Kiveris et al., SoCC 2014).

Edges are a DataFrame of int64 pairs (src, dst) with src > dst. Each round is two joins and two
aggregations over edges; nothing is collected to the driver except two numbers per round (edge count
and an order-independent checksum) to detect the fixed point. Every round is written to Parquet and
read back, which cuts Spark's lineage (bounded plans and driver memory) and makes a crashed run
resume at the last finished round. Memory is what Spark's shuffles use: executor settings bound it.

At the fixed point every edge is (node, root) where root is the smallest node id of its component,
so the component id is deterministic: it depends on the graph only, not on partitioning or order.
Rounds needed grow as O(log^2 n) in the worst case; on real dedup graphs 3-6 rounds are typical.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)


def normalize_edges(edges):
    """Undirected pairs (a, b) -> distinct (src=max, dst=min), self-loops removed."""
    from pyspark.sql import functions as F

    return (
        edges.where(F.col("a") != F.col("b"))
        .select(F.greatest("a", "b").alias("src"), F.least("a", "b").alias("dst"))
        .distinct()
    )


def large_star(edges):
    """Connect every larger neighbour v of u to m(u) = min(u, neighbours of u)."""
    from pyspark.sql import functions as F

    both = edges.select(F.col("src").alias("u"), F.col("dst").alias("v")).unionByName(
        edges.select(F.col("dst").alias("u"), F.col("src").alias("v"))
    )
    m = both.groupBy("u").agg(F.least(F.min("v"), F.col("u")).alias("m"))
    return (
        both.where(F.col("v") > F.col("u"))
        .join(m, "u")
        .select(F.col("v").alias("src"), F.col("m").alias("dst"))
        .distinct()
    )


def small_star(edges):
    """Connect u and every smaller neighbour of u to the smallest of them (edges have src > dst)."""
    from pyspark.sql import functions as F

    m = edges.groupBy("src").agg(F.min("dst").alias("m"))
    joined = edges.join(m, "src")
    return (
        joined.where(F.col("dst") != F.col("m"))
        .select(F.col("dst").alias("src"), F.col("m").alias("dst"))
        .unionByName(m.select("src", F.col("m").alias("dst")))
        .distinct()
    )


def _checksum(edges) -> tuple[int, int]:
    from pyspark.sql import functions as F

    # Order-independent: a sum of per-edge hashes. Each term is reduced mod 2^31-1 so the long sum
    # cannot overflow (Spark 4 runs with ANSI mode: an overflow would be an error, not a wrap).
    h = F.pmod(F.xxhash64("src", "dst"), F.lit(2_147_483_647))
    row = edges.agg(F.count(F.lit(1)).alias("n"), F.sum(h).alias("h")).first()
    return int(row["n"]), int(row["h"] or 0)


def _write(df, path: Path, partitions: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    df.repartition(partitions, "src").write.parquet(str(tmp))
    tmp.rename(path)


def connected_components(
    spark,
    edges,
    workdir: Path,
    partitions: int,
    max_iterations: int = 64,
    on_round: Callable[[int, int], None] | None = None,
):
    """(node, root) for every node that has at least one edge; root = min node id of its component.

    `edges`: DataFrame with columns (a, b), undirected, int64. Rounds are kept under `workdir`
    (round_NNN/); an existing finished round is reused, so a rerun resumes where the last one died.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in workdir.glob(".*.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    start = workdir / "round_000"
    if not start.exists():
        _write(normalize_edges(edges), start, partitions)
    done = sorted(p for p in workdir.glob("round_[0-9][0-9][0-9]") if p.is_dir())
    current = done[-1]
    rnd = int(current.name.split("_")[1])
    prev_sum = _checksum(spark.read.parquet(str(current)))
    converged = (workdir / "_CONVERGED").exists()
    while not converged:
        if rnd >= max_iterations:
            raise RuntimeError(
                f"connected components did not converge in {max_iterations} rounds "
                "(raise cluster.max_iterations)"
            )
        cur = spark.read.parquet(str(current))
        nxt = workdir / f"round_{rnd + 1:03d}"
        _write(small_star(large_star(cur)), nxt, partitions)
        rnd, current = rnd + 1, nxt
        new_sum = _checksum(spark.read.parquet(str(current)))
        if on_round:
            on_round(rnd, new_sum[0])
        log.info("connected components: round %d, %d edges", rnd, new_sum[0])
        converged = new_sum == prev_sum
        prev_sum = new_sum
    (workdir / "_CONVERGED").write_text(current.name)
    final = spark.read.parquet(str(workdir / (workdir / "_CONVERGED").read_text().strip()))
    from pyspark.sql import functions as F

    roots = final.select(F.col("dst").alias("node"), F.col("dst").alias("root")).distinct()
    return final.select(F.col("src").alias("node"), F.col("dst").alias("root")).unionByName(roots)
