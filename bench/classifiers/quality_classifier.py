"""Train the fastText quality classifier on the shared data, evaluate it, and count what passes.

Positives: the shared high-quality references (quality/enwiki_sample_articles.jsonl,
wikitext-2-valid.txt, lee_background.cor). Negatives: the documents of an `extract` output of the
real WARCs (default out/demo/extract, made by `make demo`). For each seed it trains a model with
the default config (classifiers/config.py), then prints one row per seed: the held-out split's
ROC-AUC, ROC-AUC/precision/recall on DCLM's human-labelled Common Crawl documents
(quality/dclm_human_labels_dev.jsonl), and how many extract documents reach the threshold
(default 0.5; a recipe would choose its own). Note the extract documents are also the training
negatives, so the pass count is an in-sample figure.

    python -m bench.classifiers.quality_classifier [--negative out/demo/extract] [--seeds 0 1 2] [--threshold 0.5]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import table
from classifiers.config import QualityTrainConfig
from classifiers.data import read_inputs
from classifiers.evaluate import evaluate
from classifiers.model import QualityModel
from classifiers.train import train_quality
from testkit.shared_data import REPO_ROOT, shared_data_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--negative", default=str(REPO_ROOT / "out" / "demo" / "extract"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--config", default=None)
    args = ap.parse_args()
    q = shared_data_dir() / "quality"
    positives = [q / "enwiki_sample_articles.jsonl", q / "wikitext-2-valid.txt", q / "lee_background.cor"]
    labelled = q / "dclm_human_labels_dev.jsonl"
    extract_docs = [d for f in read_inputs([args.negative], 0) for d in f.docs]
    base = QualityTrainConfig.load(args.config)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            cfg = base.replace(seed=seed)
            out = Path(tmp) / f"m{seed}"
            t0 = time.time()
            meta = train_quality(positives, [args.negative], out, cfg)
            secs = time.time() - t0
            human, _ = evaluate(out, labelled, args.threshold)
            scores = QualityModel(out).predict(extract_docs)
            passed = int((scores >= args.threshold).sum())
            c = meta["counts"]
            rows.append(
                {
                    "seed": seed,
                    "train": f"{c['train_pos']}+{c['train_neg']}",
                    "heldout_auc": meta["heldout"]["roc_auc"],
                    "human_auc": human["roc_auc"],
                    "human_precision": human["precision"],
                    "human_recall": human["recall"],
                    "human_pos_rate": human["predicted_pos_rate"],
                    "extract_pass": f"{passed}/{len(scores)}",
                    "seconds": secs,
                }
            )
    header = list(rows[0])
    print(f"positives: {', '.join(p.name for p in positives)}; negatives: {args.negative}")
    print(f"human labels: {labelled.name} (n={human['n']}); threshold {args.threshold}")
    print(table(header, [[_fmt(r[h]) for h in header] for r in rows]))
    aucs = np.array([r["human_auc"] for r in rows])
    print(
        json.dumps(
            {
                "human_auc_mean": float(aucs.mean()),
                "human_auc_min": float(aucs.min()),
                "human_auc_max": float(aucs.max()),
            }
        )
    )


def _fmt(v) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    main()
