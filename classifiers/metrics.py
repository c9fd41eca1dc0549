"""Binary classification metrics in numpy: ROC-AUC, its bootstrap interval, k-fold splits, and the
confusion counts at one threshold.

ROC-AUC is computed as the Mann-Whitney U statistic: the probability that a random positive scores
above a random negative, ties counting one half (Hanley & McNeil 1982). With average ranks of the
pooled scores, AUC = (R_pos - n_pos (n_pos + 1) / 2) / (n_pos n_neg): O(n log n), no sklearn.

How sure an AUC is: `bootstrap_auc_ci` resamples the documents with replacement, positives and
negatives separately (a *stratified* bootstrap, pROC's default for ROC curves: every resample keeps
the class counts, so none lacks a class), and takes the percentile interval of the resampled AUCs
(Efron & Tibshirani 1993, ch. 13). It describes the sampling of the labelled documents only: a
model's own training randomness is not in it.

A model trained on the labels it is scored on reports an in-sample AUC. `cross_validated_scores`
gives every document the score of a model that never saw it (stratified k-fold: each fold keeps
the classes' proportions), so the AUC of those scores is an out-of-sample estimate.
"""

from __future__ import annotations

from collections.abc import Callable
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


def _checked(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(labels as bool, scores as float64); ValueError unless shapes agree and both classes are present."""
    y = np.asarray(labels).astype(bool)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape:
        raise ValueError(f"labels and scores differ in shape: {y.shape} vs {s.shape}")
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == len(y):
        raise ValueError(f"ROC-AUC needs both classes; got {n_pos} positive and {len(y) - n_pos} negative")
    return y, s


def _auc_of_classes(pos: np.ndarray, neg: np.ndarray) -> float:
    """AUC from the scores of the positives and of the negatives (the rank-sum form above)."""
    r = average_ranks(np.concatenate([pos, neg]))
    n_pos, n_neg = len(pos), len(neg)
    return float((r[:n_pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve; ValueError unless both classes are present."""
    y, s = _checked(labels, scores)
    return _auc_of_classes(s[y], s[~y])


def bootstrap_auc_ci(
    labels: np.ndarray, scores: np.ndarray, resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """(low, high): the percentile interval of ROC-AUC over `resamples` stratified bootstrap resamples.

    Seeded: the same inputs and seed give the same interval. With 2,000 resamples the ends of a 95%
    interval move little with the seed: on the 218 shared DCLM labels (length, top 2-gram share and
    C4 sentence count as scores), their standard deviation over seeds 0-9 was 0.001-0.003 AUC and
    their range at most 0.008, against intervals about 0.15 wide (~0.17 s per interval).
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    y, s = _checked(labels, scores)
    pos, neg = s[y], s[~y]
    rng = np.random.default_rng(seed)
    aucs = np.empty(resamples, dtype=np.float64)
    for b in range(resamples):
        aucs[b] = _auc_of_classes(
            pos[rng.integers(0, len(pos), len(pos))], neg[rng.integers(0, len(neg), len(neg))]
        )
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(aucs, [tail, 1.0 - tail])
    return float(low), float(high)


def stratified_folds(labels: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """The fold (0..k-1) of each item: each class shuffled with `seed` and dealt round-robin, so every
    fold holds floor or ceil of 1/k of each class. ValueError if a class has fewer than k items."""
    y = np.asarray(labels).astype(bool)
    if k < 2:
        raise ValueError(f"k-fold needs k >= 2, got {k}")
    folds = np.empty(len(y), dtype=np.int64)
    rng = np.random.default_rng(seed)
    for cls in (True, False):
        idx = np.flatnonzero(y == cls)
        if len(idx) < k:
            raise ValueError(f"{k}-fold needs at least {k} items of each class; one class has {len(idx)}")
        folds[rng.permutation(idx)] = np.arange(len(idx)) % k
    return folds


def cross_validated_scores(
    folds: np.ndarray, fit_predict: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """Out-of-fold scores: for each fold f, `fit_predict(train_idx, test_idx)` trains on the items of
    the other folds and returns the scores of fold f's items, in `test_idx` order."""
    folds = np.asarray(folds)
    out = np.full(len(folds), np.nan, dtype=np.float64)
    for f in np.unique(folds):
        test = np.flatnonzero(folds == f)
        out[test] = fit_predict(np.flatnonzero(folds != f), test)
    return out


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
    return text_table(header, body, left={0})


def text_table(header: list[str], body: list[list[str]], left: set[int]) -> str:
    """Columns padded to their widest cell, a rule under the header; columns in `left` are left-aligned
    (names), the others right-aligned (numbers)."""
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(header)]

    def fmt(row: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
        ).rstrip()

    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *(fmt(r) for r in body)])
