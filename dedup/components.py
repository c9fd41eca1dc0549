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
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.tables import Tables

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


def connected_components(
    spark,
    edges,
    tables: Tables,
    folder: str,
    partitions: int,
    max_iterations: int = 64,
    on_round: Callable[[int, int], None] | None = None,
):
    """(node, root) for every node that has at least one edge; root = min node id of its component.

    `edges`: DataFrame with columns (a, b), undirected, int64. Rounds are kept as tables
    `folder/round_NNN` of `tables` (core.tables: a local folder or an object store); an existing
    finished round is reused, so a rerun resumes where the last one died, on any machine.
    """

    def write(df, name: str) -> None:
        tables.write(df.repartition(partitions, "src"), f"{folder}/{name}")

    def read(name: str):
        return tables.read(f"{folder}/{name}")

    tables.clean_stale(folder)
    done = tables.finished(folder, prefix="round_")
    if not done:
        write(normalize_edges(edges), "round_000")
        done = ["round_000"]
    current = done[-1]
    rnd = int(current.split("_")[1])
    prev_sum = _checksum(read(current))
    converged_marker = tables.path(f"{folder}/_CONVERGED")
    converged = tables.store.exists(converged_marker)
    while not converged:
        if rnd >= max_iterations:
            raise RuntimeError(
                f"connected components did not converge in {max_iterations} rounds "
                "(raise cluster.max_iterations)"
            )
        nxt = f"round_{rnd + 1:03d}"
        write(small_star(large_star(read(current))), nxt)
        rnd, current = rnd + 1, nxt
        new_sum = _checksum(read(current))
        if on_round:
            on_round(rnd, new_sum[0])
        log.info("connected components: round %d, %d edges", rnd, new_sum[0])
        converged = new_sum == prev_sum
        prev_sum = new_sum
    if not tables.store.exists(converged_marker):
        tables.store.write_bytes(converged_marker, current.encode())
    final = read(tables.store.read_bytes(converged_marker).decode().strip())
    from pyspark.sql import functions as F

    roots = final.select(F.col("dst").alias("node"), F.col("dst").alias("root")).distinct()
    return final.select(F.col("src").alias("node"), F.col("dst").alias("root")).unionByName(roots)
