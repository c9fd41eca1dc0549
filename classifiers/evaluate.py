"""Evaluate a quality model on labelled documents (JSONL: `text`, `label` 1 = high, 0 = low).

The reference set is quality/dclm_human_labels_dev.jsonl: real Common Crawl documents with
majority-vote human labels (DCLM). Scores come from the same `QualityModel.predict` the `score`
stage runs, so these numbers describe the column recipes will threshold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from classifiers.data import DataError, iter_jsonl
from classifiers.metrics import binary_metrics
from classifiers.model import load_model
from core.errors import ConfigError


def load_labelled(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Texts and 0/1 labels; DataError names the file and line of a bad record."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"no such file: {p}")
    texts: list[str] = []
    labels: list[int] = []
    for lineno, obj in iter_jsonl(p):
        text, label = obj.get("text"), obj.get("label")
        if not isinstance(text, str):
            raise DataError(f"{p}:{lineno}: 'text' must be a string, got {type(text).__name__}")
        # 1/0 (also 1.0, true/false: equal in Python) are accepted; "1", 2, null are errors.
        if label not in (0, 1):
            raise DataError(f"{p}:{lineno}: 'label' must be 1 (high quality) or 0 (low), got {label!r}")
        texts.append(text)
        labels.append(int(label))
    if not texts:
        raise DataError(f"{p}: no labelled documents (empty file)")
    y = np.asarray(labels, dtype=np.int8)
    if y.min() == y.max():
        raise DataError(f"{p}: every label is {int(y[0])}; ROC-AUC needs both classes")
    return texts, y


def evaluate(
    model_dir: str | Path, labelled: str | Path, threshold: float = 0.5
) -> tuple[dict[str, Any], np.ndarray]:
    """(metrics, per-document scores in file order)."""
    if not 0.0 <= threshold <= 1.0:  # scores are probabilities: any other cut makes precision/recall trivial
        raise ConfigError(f"--threshold must be in [0, 1], got {threshold}")
    texts, y = load_labelled(labelled)
    model = load_model(model_dir)
    scores = model.predict(texts)
    metrics = binary_metrics(y, scores, threshold)
    metrics["model_sha256"] = model.sha256
    return metrics, scores
