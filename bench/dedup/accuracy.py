"""MinHash LSH accuracy on real text: precision, recall and F1 against brute-force Jaccard.

Evaluation set (testkit.neardup): the real documents in ../shared/data (Wikipedia chunks, ABC news,
human-labelled CC documents, cc_net CC documents, Clough-Stevenson sources), plus for the first
`--bases` of them `--copies` edited copies each, with word-edit fractions drawn from a fixed ladder
(0 to 30% of words deleted, inserted or substituted, sometimes two sentences swapped), so pairs fall
on both sides of the threshold. Every pair's true Jaccard is computed by brute force on the same
shingles the LSH sees (all pairs, candidates and non-candidates); a pair is a true duplicate when
its Jaccard >= --threshold. Then, per configuration: the LSH candidate pairs (sharing any band) and,
with verification, those whose signature estimate / exact Jaccard reaches the threshold.

Also the Clough-Stevenson corpus: for each answer category (cut / light / heavy / non), the share of
answer-vs-source pairs that the default configuration flags, and their true Jaccard.

    .venv/bin/python -m bench.dedup.accuracy [--bases 600 --copies 3]
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import sys
import time

from bench.harness import table
from dedup.minhash import MinHashConfig, MinHasher, estimate_jaccard, shingle_hashes
from dedup.normalize import normalize_text
from testkit.neardup import (
    candidate_pairs,
    edit,
    jaccard_matrix,
    pair_metrics,
    real_documents,
    vocabulary,
)
from testkit.shared_data import shared_data_dir

LADDER = [0.0, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2, 0.3]

CONFIGS = [
    ("ours default: 128 perm, 9x13 for t=0.8", MinHashConfig(), "none"),
    ("FineWeb/datatrove: 112 perm, 14x8", MinHashConfig(num_perm=112, bands=14, rows=8), "none"),
    ("ours + signature check", MinHashConfig(verify="signature"), "signature"),
    (
        "lsh_threshold 0.7 + signature check",
        MinHashConfig(lsh_threshold=0.7, verify="signature"),
        "signature",
    ),
    ("lsh_threshold 0.7 + exact check", MinHashConfig(lsh_threshold=0.7, verify="exact"), "exact"),
    (
        "256 perm, lsh_threshold 0.7 + exact",
        MinHashConfig(num_perm=256, lsh_threshold=0.7, verify="exact"),
        "exact",
    ),
]


def build_set(bases: int, copies: int, seed: int) -> list[str]:
    docs = real_documents()
    rng = random.Random(seed)
    vocab = vocabulary(docs)
    corpus = list(docs)
    for i, t in enumerate(docs[:bases]):
        for c in range(copies):
            corpus.append(edit(t, LADDER[(i * copies + c) % len(LADDER)], rng, vocab))
    return corpus


def evaluate(corpus: list[str], threshold: float) -> list[dict]:
    norm = [normalize_text(t) for t in corpus]
    rows = []
    jac_cache: dict[int, object] = {}
    for name, cfg, verify in CONFIGS:
        cfg = cfg.replace(threshold=threshold)
        hasher = MinHasher(cfg)
        hashes = [shingle_hashes(n, cfg.ngram) for n in norm]
        if cfg.ngram not in jac_cache:
            jac_cache[cfg.ngram] = jaccard_matrix(hashes)
        jac = jac_cache[cfg.ngram]
        t0 = time.perf_counter()
        sigs = [hasher.signature(h) if h.size else None for h in hashes]
        keys = [hasher.band_keys(s) if s is not None else None for s in sigs]
        cand = candidate_pairs(keys)
        if verify == "signature":
            pred = {(i, j) for i, j in cand if estimate_jaccard(sigs[i], sigs[j]) >= threshold}
        elif verify == "exact":
            pred = {(i, j) for i, j in cand if jac[i, j] >= threshold}
        else:
            pred = cand
        m = pair_metrics(jac, pred, threshold)
        b, r = cfg.band_rows
        rows.append(
            {
                "config": name,
                "bands x rows": f"{b}x{r}",
                "candidates": len(cand),
                **m,
                "s": time.perf_counter() - t0,
            }
        )
    return rows


def clough_stevenson(threshold: float) -> list[dict]:
    d = shared_data_dir() / "neardup" / "clough-stevenson"
    hasher = MinHasher(MinHashConfig(threshold=threshold))

    def read(name: str) -> str:
        raw = (d / name).read_bytes()
        for enc in ("utf-8", "cp1252", "latin-1"):  # the corpus mixes encodings
            try:
                return raw.decode(enc)
            except UnicodeDecodeError:
                continue
        return raw.decode("utf-8", "replace")

    sources = {}
    for task in "abcde":
        n = normalize_text(read(f"orig_task{task}.txt"))
        sources[task] = (shingle_hashes(n, 5), hasher.text_signature(n))
    by_cat: dict[str, list[tuple[float, bool, float]]] = {}
    with open(d / "file_information.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            n = normalize_text(read(row["File"]))
            h, sig = shingle_hashes(n, 5), hasher.text_signature(n)
            src_h, src_sig = sources[row["Task"]]
            from dedup.minhash import exact_jaccard

            true_j = exact_jaccard(h, src_h)
            flagged = sig is not None and bool(set(hasher.band_keys(sig)) & set(hasher.band_keys(src_sig)))
            est = estimate_jaccard(sig, src_sig) if sig is not None else 0.0
            by_cat.setdefault(row["Category"], []).append((true_j, flagged, est))
    out = []
    for cat in ("cut", "light", "heavy", "non"):
        v = by_cat.get(cat, [])
        out.append(
            {
                "category": cat,
                "answers": len(v),
                "true J >= t": sum(j >= threshold for j, _, _ in v),
                "LSH flagged": sum(f for _, f, _ in v),
                "median true J": statistics.median(j for j, _, _ in v) if v else 0.0,
                "max true J": max((j for j, _, _ in v), default=0.0),
            }
        )
    return out


def spark_clusters(corpus: list[str], threshold: float, configs: list[tuple[str, dict]]) -> list[dict]:
    """The Spark job itself (MinHash + components only) on the set: pairs that share a cluster."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from core.spark import SparkOptions
    from dedup.config import DedupJobConfig
    from dedup.job import run_dedup

    norm = [normalize_text(t) for t in corpus]
    jac = jaccard_matrix([shingle_hashes(n, 5) for n in norm])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ids = [f"d{i:06d}" for i in range(len(corpus))]
        pq.write_table(pa.table({"id": ids, "text": corpus}), f"{tmp}/in.parquet")
        for name, mh in configs:
            cfg = DedupJobConfig.from_dict(
                {
                    "exact": {"enabled": False},
                    "url": {"enabled": False},
                    "lines": {"enabled": False},
                    "minhash": {**mh, "threshold": threshold},
                    "output": {"partitions": 4},
                }
            )
            out = f"{tmp}/{abs(hash(name))}"
            t0 = time.perf_counter()
            run_dedup(f"{tmp}/in.parquet", out, cfg, spark=SparkOptions(progress=False))
            secs = time.perf_counter() - t0
            label = {r["id"]: r["dup_cluster"] for r in pq.read_table(f"{out}/docs").to_pylist()}
            for r in pq.read_table(f"{out}/removed_ids").to_pylist():
                label[r["id"]] = label[r["partner_id"]]
            groups: dict[str, list[int]] = {}
            for i, doc_id in enumerate(ids):
                groups.setdefault(label[doc_id], []).append(i)
            pred = {(a, b) for g in groups.values() for x, a in enumerate(g) for b in g[x + 1 :]}
            removed = pq.read_table(f"{out}/removed_ids").to_pylist()
            idx = {d: i for i, d in enumerate(ids)}
            ok = sum(jac[idx[r["id"]], idx[r["partner_id"]]] >= threshold for r in removed)
            m = pair_metrics(jac, pred, threshold)
            rows.append(
                {
                    "config": name,
                    "removed": len(removed),
                    "removal precision": ok / len(removed) if removed else 1.0,
                    "pair precision": m["precision"],
                    "pair recall": m["recall"],
                    "pair f1": m["f1"],
                    "job s": secs,
                }
            )
    return rows


def _table(rows: list[dict], cols: list[str]) -> str:
    return table(
        cols, [[f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols] for r in rows]
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bases", type=int, default=600)
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spark", action="store_true", help="also run the Spark job on the set (local[2])")
    args = ap.parse_args()
    corpus = build_set(args.bases, args.copies, args.seed)
    print(
        f"evaluation set: {len(corpus)} documents ({len(corpus) * (len(corpus) - 1) // 2:,} pairs), "
        f"threshold {args.threshold}\n"
    )
    rows = evaluate(corpus, args.threshold)
    cols = [
        "config",
        "bands x rows",
        "candidates",
        "true_pairs",
        "predicted_pairs",
        "precision",
        "recall",
        "f1",
    ]
    print(_table(rows, cols))
    print("\nClough-Stevenson (95 short answers vs their Wikipedia source), default config:\n")
    cs = clough_stevenson(args.threshold)
    print(_table(cs, list(cs[0])))
    if args.spark:
        print("\nThe Spark job (MinHash + connected components, keep one per cluster), same set:")
        print("pair = two documents that end in the same cluster; removal precision = share of removed")
        print("documents whose Jaccard with the document kept in their place is >= the threshold\n")
        sp = spark_clusters(
            corpus,
            args.threshold,
            [
                ("default (9x13, no check)", {}),
                ("lsh_threshold 0.7 + exact check", {"lsh_threshold": 0.7, "verify": "exact"}),
            ],
        )
        print(_table(sp, list(sp[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
