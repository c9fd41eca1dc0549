"""Connected components on Spark (large-star/small-star) against graphs whose answer is known."""

from __future__ import annotations

import itertools
import random

import pytest

from core.tables import Tables
from dedup.components import connected_components

pytestmark = pytest.mark.spark


def _reference(edges: list[tuple[int, int]]) -> dict[int, int]:
    """node -> smallest node of its component, by union-find (the independent answer)."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {n: find(n) for n in parent}


def _run(spark, tmp_path, edges: list[tuple[int, int]]) -> tuple[dict[int, int], int]:
    df = spark.createDataFrame(edges, "a long, b long")
    rounds: list[int] = []
    comp = connected_components(
        spark, df, Tables(tmp_path, spark), "cc", 4, on_round=lambda r, n: rounds.append(r)
    )
    got = {r["node"]: r["root"] for r in comp.collect()}
    return got, len(rounds)


def _labels(n: int, rng: random.Random) -> list[int]:
    # Random signed 64-bit ids, as xxhash64 of document ids are: order is unrelated to structure.
    out: set[int] = set()
    while len(out) < n:
        out.add(rng.getrandbits(64) - 2**63)
    return sorted(out, key=lambda _: rng.random())


def test_graphs_with_known_components(spark, tmp_path):
    rng = random.Random(3)
    ids = _labels(1000, rng)
    edges: list[tuple[int, int]] = []
    # a long path (the worst case for label propagation: 250 hops end to end)
    path = ids[:250]
    edges += list(itertools.pairwise(path))
    # a star of 150 leaves around one centre, with edges in both orientations
    centre, leaves = ids[250], ids[251:401]
    edges += [(centre, x) if i % 2 else (x, centre) for i, x in enumerate(leaves)]
    # 100 small components: chains of 2..5 nodes
    pos = 401
    for k in range(100):
        size = 2 + k % 4
        chunk = ids[pos : pos + size]
        pos += size
        edges += list(itertools.pairwise(chunk))
    # a dense clique of 30, with duplicate and self edges (both must be harmless)
    clique = ids[pos : pos + 30]
    edges += [(a, b) for a in clique for b in clique]
    rng.shuffle(edges)
    got, rounds = _run(spark, tmp_path, edges)
    want = _reference([(a, b) for a, b in edges if a != b])
    assert got == want
    assert len(set(want.values())) == 1 + 1 + 100 + 1
    assert rounds <= 30  # O(log^2 n) rounds; a 250-node path needs far fewer than 30


def test_resume_reuses_finished_rounds(spark, tmp_path):
    rng = random.Random(5)
    ids = _labels(100, rng)
    edges = list(itertools.pairwise(ids))
    got, _rounds = _run(spark, tmp_path, edges)
    assert got == _reference(edges)
    # A rerun over the same work folder finds the converged rounds: no new round runs.
    again, rounds_again = _run(spark, tmp_path, edges)
    assert again == got
    assert rounds_again == 0
