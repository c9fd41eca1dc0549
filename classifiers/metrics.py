"""Binary classification metrics in numpy: ROC-AUC and the confusion counts at one threshold.

ROC-AUC is computed as the Mann-Whitney U statistic: the probability that a random positive scores
above a random negative, ties counting one half (Hanley & McNeil 1982). With average ranks of the
pooled scores, AUC = (R_pos - n_pos (n_pos + 1) / 2) / (n_pos n_neg): O(n log n), no sklearn.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of `x`, ties given the mean of the ranks they span (scipy's 'average')."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    # Start index of each run of equal values, and the run each sorted element belongs to.
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], len(xs)]
    run_rank = (starts + 1 + ends) / 2.0  # mean of ranks starts+1 .. ends
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.repeat(run_rank, ends - starts)
    return ranks


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve; ValueError unless both classes are present."""
    y = np.asarray(labels).astype(bool)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape:
        raise ValueError(f"labels and scores differ in shape: {y.shape} vs {s.shape}")
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"ROC-AUC needs both classes; got {n_pos} positive and {n_neg} negative")
    r = average_ranks(s)
    return float((r[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def binary_metrics(labels: np.ndarray, scores: np.ndarray, threshold: float) -> dict[str, Any]:
    """ROC-AUC plus precision/recall/F1/accuracy of `score >= threshold` for the positive class."""
    y = np.asarray(labels).astype(bool)
    s = np.asarray(scores, dtype=np.float64)
    pred = s >= threshold
    tp = int((pred & y).sum())
    fp = int((pred & ~y).sum())
    fn = int((~pred & y).sum())
    tn = int((~pred & ~y).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "roc_auc": roc_auc(y, s),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": (tp + tn) / len(y),
        "threshold": threshold,
        "n": len(y),
        "n_pos": int(y.sum()),
        "n_neg": int((~y).sum()),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "predicted_pos_rate": float(pred.mean()),
    }


def metrics_table(rows: dict[str, dict[str, Any]]) -> str:
    """A text table: one row per named evaluation (e.g. held-out, human labels)."""
    cols = ["n", "n_pos", "n_neg", "roc_auc", "precision", "recall", "f1", "accuracy", "threshold"]
    header = ["set", *cols]
    body = []
    for name, m in rows.items():
        body.append([name, *(f"{m[c]:.4f}" if isinstance(m[c], float) else str(m[c]) for c in cols)])
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(header)]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *(fmt(r) for r in body)])
