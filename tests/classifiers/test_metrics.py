"""ROC-AUC and threshold metrics against brute-force definitions written out in the test."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from classifiers.metrics import average_ranks, binary_metrics, roc_auc


def auc_pairwise(y, s) -> float:
    """Definition: P(score of a random positive > that of a random negative), ties = 1/2."""
    pos = [b for a, b in zip(y, s) if a]
    neg = [b for a, b in zip(y, s) if not a]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(5))
def test_auc_matches_pairwise_definition_with_ties(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 200)
    y[:2] = [0, 1]
    s = rng.integers(0, 12, 200) / 11.0  # 12 distinct values: many ties
    # 1e-12: both are exact sums of halves over <= 10^4 pairs; only float rounding differs.
    assert roc_auc(y, s) == pytest.approx(auc_pairwise(y, s), abs=1e-12)


def test_auc_extremes_and_errors():
    assert roc_auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert roc_auc([1, 1, 0, 0], [0.1, 0.2, 0.3, 0.4]) == 0.0
    assert roc_auc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5
    with pytest.raises(ValueError, match="both classes"):
        roc_auc([1, 1], [0.1, 0.2])


def test_average_ranks_ties():
    assert average_ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]


def test_threshold_metrics_counts():
    m = binary_metrics(np.array([1, 1, 0, 0, 1]), np.array([0.9, 0.4, 0.6, 0.1, 0.5]), 0.5)
    # >= 0.5 predicts positive: 0.9 (tp), 0.6 (fp), 0.5 (tp); 0.4 is a fn, 0.1 a tn.
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (2, 1, 1, 1)
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == pytest.approx(2 / 3)
    assert m["n"] == 5 and m["threshold"] == 0.5
