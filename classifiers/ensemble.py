"""The quality ensemble (`quality-ensemble`): a logistic regression over the signal columns, trained
on human quality labels (issue 28).

No single signal the pipeline writes agrees well with people (the demo's fastText, the reference
LM's `perplexity_bpb`, length, the Gopher/C4/FineWeb filter statistics: AUC 0.61-0.69 on the
shared DCLM labels), but they fail on different documents. Nemotron-CC combines several classifiers;
here a small linear model learns the combination from labelled documents:

- **features**: the 28 text statistics of classifiers/signals.py (computed from the text), and any
  score column the documents already carry (`quality`, `perplexity_bpb`, `toxicity`, ...);
- **model**: each feature through sign(x) log(1 + |x|) (counts such as length span five decades;
  ratios in [0, 1] are barely bent), NaN (a ratio over zero words; a record without a field in
  training) replaced by the training median, standardized with the training mean and deviation, then sklearn's L2 logistic regression. Its
  one hyper-parameter, C, is chosen from a decade grid by an inner stratified k-fold on the
  training labels alone (classifiers/config.py EnsembleParams). Gradient boosting was measured
  against it (bench/classifiers/quality_signals.py, docs/classifiers.md) and is not used;
- **honest AUC**: `nested_scores` gives every document the score of a model (C selection
  included) that never saw it, through classifiers/metrics.py's folds; `train-ensemble` records
  that AUC with its bootstrap interval, and `evaluate --cv --set cv.models=[ensemble]` reports it
  next to the other signals.

The model folder holds `ensemble.json` (the numbers: features, medians, means, scales,
coefficients, intercept, C: plain JSON, never a pickle, since model folders are untrusted input)
and `metadata.json` (its sha256, the training labels' sha256, the CV AUC and interval, the config).
Scoring needs neither sklearn nor the labels: a dot product and a logistic per document.

As a scorer (classifiers/scorer.py) it writes the `quality_ensemble` column, P(high quality). It
reads the score columns among its features from the documents: columns of the input Parquet, or
those an earlier scorer of the same job writes (`--scorer perplexity=LM --scorer
quality-ensemble=DIR`); a missing one is refused before Spark, by name. A document whose score
column is null (no perplexity model for its language, no quality model run) gets a null ensemble
score, not one made from a guessed feature.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from classifiers.config import EnsembleParams
from classifiers.evaluate import (
    ALL_STATISTICS,
    Labelled,
    SignalSettings,
    SignalValues,
    columns_or_fields,
    cv_summary,
    measure,
    read_labelled,
    signal_values,
    text_folds,
)
from classifiers.metrics import cross_validated_scores, roc_auc, stratified_folds
from classifiers.model import METADATA_FILE, ModelError, parse_model_json, read_folder_json, read_model_bytes
from classifiers.scorer import Scorer, score_selected
from classifiers.signals import STATISTICS, statistic_columns
from classifiers.train import check_new_folder, new_folder
from core.errors import ConfigError
from core.files import sha256_file

FORMAT = "refinery-quality-ensemble/1"
ENSEMBLE_FILE = "ensemble.json"
COLUMN = "quality_ensemble"
TRAINER = "train-ensemble"
MAX_MODEL_BYTES = 1 << 20  # 1 MiB: a few thousand features; a larger file is refused unread
MAX_FEATURES = 1000
# Bounds of what fit_linear can write, so that no model file makes predict overflow into NaN:
# signed_log1p of any float64 is within +-710 (median, mean; a scale is a deviation of such values),
# and an L2-regularised coefficient or intercept on standardized features is far below 1e6.
MAX_LOG_VALUE = 1e3
MIN_SCALE = 1e-12  # a deviation below it is a constant feature in rounding noise: fit_linear sets 1
MAX_WEIGHT = 1e6


def _signed_log1p(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log1p(np.abs(x))


@dataclass(frozen=True)
class LinearEnsemble:
    """A fitted model: P(high) = logistic(coef . standardized(signed_log1p(x)) + intercept)."""

    features: tuple[str, ...]
    median: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    C: float

    def predict(self, X: np.ndarray) -> np.ndarray:
        """P(high quality) per row of raw feature values (columns in `features` order; NaN allowed)."""
        Z = _signed_log1p(np.asarray(X, dtype=np.float64))
        Z = np.where(np.isfinite(Z), Z, self.median)  # NaN or an infinity: no value
        z = ((Z - self.mean) / self.scale) @ self.coef + self.intercept
        return (0.5 * (1.0 + np.tanh(0.5 * z))).astype(np.float32)  # the logistic, without overflow

    def to_json(self) -> dict[str, Any]:
        arrays = {k: [float(v) for v in getattr(self, k)] for k in ("median", "mean", "scale", "coef")}
        return {
            "format": FORMAT,
            "model": "logistic regression on signed_log1p, median-imputed, standardized features",
            "features": list(self.features),
            **arrays,
            "intercept": float(self.intercept),
            "C": float(self.C),
        }

    @classmethod
    def from_json(cls, obj: Any, where: str) -> LinearEnsemble:
        """The model of a parsed ensemble.json; ModelError naming `where` unless every field is sound."""

        def bad(msg: str) -> ModelError:
            return ModelError(f"{where}: {msg} (not written by {TRAINER}?)")

        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise bad(f"format is not {FORMAT}")
        feats = obj.get("features")
        if not isinstance(feats, list) or not 0 < len(feats) <= MAX_FEATURES:
            raise bad(f"'features' must be a list of 1 to {MAX_FEATURES} names")
        if not all(isinstance(f, str) and f for f in feats) or len(set(feats)) != len(feats):
            raise bad("'features' must be distinct non-empty strings")
        arrays = {}
        for key, lo, hi in (
            ("median", -MAX_LOG_VALUE, MAX_LOG_VALUE),
            ("mean", -MAX_LOG_VALUE, MAX_LOG_VALUE),
            ("scale", MIN_SCALE, MAX_LOG_VALUE),
            ("coef", -MAX_WEIGHT, MAX_WEIGHT),
        ):
            v = obj.get(key)
            if not isinstance(v, list) or len(v) != len(feats):
                raise bad(f"'{key}' must be {len(feats)} numbers, one per feature")
            for i, x in enumerate(v):
                if not _within(x, lo, hi):
                    raise bad(
                        f"'{key}'[{i}] ({feats[i]}) must be a number in [{lo:g}, {hi:g}], got {str(x)[:40]}"
                    )
            arrays[key] = np.asarray(v, dtype=np.float64)
        if not _within(obj.get("intercept"), -MAX_WEIGHT, MAX_WEIGHT):
            raise bad(
                f"'intercept' must be a number in [{-MAX_WEIGHT:g}, {MAX_WEIGHT:g}], got {str(obj.get('intercept'))[:40]}"
            )
        # C is recorded, not used to score: any positive number ensemble.C allows (classifiers/config.py)
        if not _within(obj.get("C"), 0.0, math.inf) or not obj["C"] > 0:
            raise bad(f"'C' must be a positive number, got {str(obj.get('C'))[:40]}")
        return cls(tuple(feats), **arrays, intercept=float(obj["intercept"]), C=float(obj["C"]))


def _within(x: Any, lo: float, hi: float) -> bool:
    """A number (not a bool) in [lo, hi]; never raises, so a Python int of any size is refused, not an
    OverflowError (math.isfinite(10**400) raises one)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return False
    if isinstance(x, int):
        return lo <= x <= hi  # exact comparison of int with float: no conversion, no overflow
    return math.isfinite(x) and lo <= x <= hi


def fit_linear(X: np.ndarray, y: np.ndarray, C: float, features: tuple[str, ...] = ()) -> LinearEnsemble:
    """The model fitted on raw features `X` (n, f) and 0/1 labels `y`, with inverse L2 strength C."""
    from sklearn.linear_model import LogisticRegression

    Z = _signed_log1p(np.asarray(X, dtype=np.float64))
    has = np.isfinite(Z)
    # a column with no value at all in training is imputed with 0: after standardizing it is constant
    median = np.array([np.median(Z[has[:, j], j]) if has[:, j].any() else 0.0 for j in range(Z.shape[1])])
    Z = np.where(has, Z, median)
    mean, scale = Z.mean(axis=0), Z.std(axis=0)
    scale[scale < MIN_SCALE] = 1.0  # a constant feature: coefficient 0 whatever its scale
    lr = LogisticRegression(C=C, max_iter=2000).fit((Z - mean) / scale, np.asarray(y).astype(int))
    feats = features or tuple(f"x{j}" for j in range(Z.shape[1]))
    return LinearEnsemble(feats, median, mean, scale, lr.coef_[0].copy(), float(lr.intercept_[0]), C)


def fit_selected(
    X: np.ndarray, y: np.ndarray, params: EnsembleParams, seed: int, features: tuple[str, ...] = ()
) -> tuple[LinearEnsemble, dict[str, float]]:
    """(the model refit on all of X with the best C, the inner out-of-fold AUC of every C).

    C is chosen by a stratified k-fold on these labels alone; ties go to the smaller C (stronger
    regularization: the simpler model)."""
    folds = stratified_folds(y, params.inner_folds, seed)
    aucs: dict[str, float] = {}
    for C in sorted(params.C):
        oof = cross_validated_scores(folds, lambda tr, te, C=C: fit_linear(X[tr], y[tr], C).predict(X[te]))
        aucs[repr(C)] = roc_auc(y, oof)
    best = max(sorted(params.C), key=lambda C: aucs[repr(C)])  # max keeps the first of equals
    return fit_linear(X, y, best, features), {k: round(v, 4) for k, v in aucs.items()}


def nested_scores(
    X: np.ndarray, y: np.ndarray, folds: np.ndarray, params: EnsembleParams, seed: int
) -> tuple[np.ndarray, list[float]]:
    """(out-of-fold P(high) of every document, the C each outer fold chose): for each fold, C is
    selected and the model fitted on the other folds only (nested cross-validation)."""
    chosen: list[float] = []

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        model, _ = fit_selected(X[train], y[train], params, seed)
        chosen.append(model.C)
        return model.predict(X[test])

    return cross_validated_scores(folds, fit_predict), chosen


def feature_names(features: list[str]) -> tuple[str, ...]:
    """The feature list with `statistics` expanded to every text statistic, in order, each once."""
    return tuple(dict.fromkeys(n for f in features for n in (STATISTICS if f == ALL_STATISTICS else [f])))


def feature_matrix(
    ls: Labelled, features: list[str], columns: Mapping[str, np.ndarray]
) -> tuple[tuple[str, ...], np.ndarray]:
    """(names, X (n, f)): text statistics from the texts (or `columns` when already computed there),
    other features from `columns` (the signals scored in this run) or the records' numeric fields.
    ConfigError naming every feature found nowhere."""
    names = feature_names(features)
    todo = [n for n in names if n in STATISTICS and n not in columns]
    computed = {**(statistic_columns(ls.texts, todo) if todo else {}), **columns}
    cols = columns_or_fields(
        names,
        computed,
        ls,
        lambda missing: (
            f"ensemble feature(s) {', '.join(missing)}: not a text statistic ({ALL_STATISTICS}, "
            f"classifiers/signals.py), not a column of the scorers given ({', '.join(columns) or 'none'}), "
            f"and not a field of every record of {ls.path}"
        ),
    )
    return names, np.column_stack([np.asarray(cols[n], dtype=np.float64) for n in names])


def _cv_row(
    ls: Labelled, names: tuple[str, ...], X: np.ndarray, settings: SignalSettings, in_sample: bool
) -> SignalValues:
    cv, params = settings.cv, settings.ensemble
    t0 = time.perf_counter()
    folds = text_folds(ls, cv.folds, cv.seed)
    oof, chosen = nested_scores(X, ls.labels.astype(int), folds, params, cv.seed)
    extra = cv_summary(ls, folds, oof, cv, t0) | {"features": len(names), "C_chosen": chosen}
    source = (
        f"logistic regression on {len(names)} features trained on these labels, {cv.folds}-fold "
        f"nested CV, out-of-fold scores (fold AUCs {min(extra['fold_aucs']):.2f}-{max(extra['fold_aucs']):.2f})"
    )
    return SignalValues(f"{COLUMN}_cv", source, True, oof, in_sample, extra)


def cross_validated_ensemble(
    ls: Labelled, values: list[SignalValues], settings: SignalSettings
) -> SignalValues:
    """The `quality_ensemble_cv` row of `evaluate --cv`: features from the texts and the signals of
    the run (`values`); in-sample if one of those came from a model trained on these labels."""
    columns = {v.name: v.values for v in values}
    names, X = feature_matrix(ls, settings.ensemble.features, columns)
    return _cv_row(ls, names, X, settings, any(v.in_sample for v in values if v.name in names))


def train_ensemble(
    labels: str | Path, output: str | Path, settings: SignalSettings, scorers: list[str] = ()
) -> dict[str, Any]:
    """Train on a labelled JSONL, measure by nested CV, write the model folder; returns its metadata.

    `scorers` (`KIND=MODEL`, as `evaluate --signal`) score the texts first, for the score columns
    among the features; columns may instead be numeric fields of the records."""
    out = check_new_folder(output)
    for s in scorers:
        if "=" not in s:
            raise ConfigError(f"--scorer {s!r}: expected KIND=MODEL, e.g. perplexity=out/demo/lm/model")
    t0 = time.perf_counter()
    ls = read_labelled(labels)
    values = signal_values(list(scorers), ls, settings)
    names, X = feature_matrix(ls, settings.ensemble.features, {v.name: v.values for v in values})
    row = measure(_cv_row(ls, names, X, settings, False), ls.labels, settings.bootstrap)
    model, inner = fit_selected(X, ls.labels.astype(int), settings.ensemble, settings.cv.seed, names)
    meta: dict[str, Any] = {
        "format": FORMAT,
        "features": list(names),
        "inputs": [n for n in names if n not in STATISTICS],
        "C": model.C,
        "inner_cv_auc_by_C": inner,
        "cv": row,
        "training_data": {
            "labels": {"path": str(ls.path), "sha256": ls.sha256, "n": len(ls.texts)},
            "n_pos": int(ls.labels.sum()),
            "scorers": [{"signal": v.source, "column": v.name} for v in values],
        },
        "config": settings.to_dict(),
        "sklearn_version": importlib.metadata.version("scikit-learn"),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with new_folder(out) as tmp:
        (tmp / ENSEMBLE_FILE).write_text(json.dumps(model.to_json(), indent=1) + "\n", encoding="utf-8")
        meta["model_sha256"] = sha256_file(tmp / ENSEMBLE_FILE)
        meta["total_seconds"] = round(time.perf_counter() - t0, 3)
        (tmp / METADATA_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


def read_ensemble(model_dir: str | Path) -> tuple[LinearEnsemble, str]:
    """(the model of an ensemble folder, its sha256), after every check; ModelError if one fails."""
    d, meta = read_folder_json(
        model_dir, "an ensemble folder", (ENSEMBLE_FILE, METADATA_FILE), f"train one with {TRAINER}"
    )
    if (
        not isinstance(meta, dict)
        or meta.get("format") != FORMAT
        or not isinstance(meta.get("model_sha256"), str)
    ):
        raise ModelError(
            f"{d / METADATA_FILE}: not the metadata of a quality ensemble (train one with {TRAINER})"
        )
    path = d / ENSEMBLE_FILE
    raw = read_model_bytes(path, MAX_MODEL_BYTES)
    if hashlib.sha256(raw).hexdigest() != meta["model_sha256"]:
        raise ModelError(f"{path} does not match the model_sha256 of its metadata.json")
    obj = parse_model_json(raw, path, MAX_MODEL_BYTES)  # finite numbers, int64 integers, bounded depth
    return LinearEnsemble.from_json(obj, str(path)), meta["model_sha256"]


class EnsembleScorer(Scorer):
    """The `quality_ensemble` column; reads its score-column features from the documents."""

    kind = "quality-ensemble"

    def __init__(self, model: LinearEnsemble) -> None:
        self.model = model

    @property
    def columns(self) -> tuple[str, ...]:
        return (COLUMN,)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(f for f in self.model.features if f not in STATISTICS)

    def score(
        self, texts: list[str | None], langs: list[str | None], columns: Mapping[str, Any] | None = None
    ) -> dict[str, np.ndarray]:
        cols = self.input_columns(columns)
        # a null score column (no perplexity model for the language, no quality model run) makes the
        # ensemble null too, rather than a score from a guessed feature
        idx = [
            i for i, t in enumerate(texts) if t is not None and all(np.isfinite(v[i]) for v in cols.values())
        ]
        feats = self.model.features
        stats = [f for f in feats if f in STATISTICS]

        def predict(selected: list[str]) -> np.ndarray:
            computed = statistic_columns(selected, stats)
            X = np.column_stack([computed[f] if f in computed else cols[f][idx] for f in feats])
            return self.model.predict(X)

        return {COLUMN: score_selected(texts, idx, predict)}

    @classmethod
    def describe(cls, model: str, options: dict[str, Any]) -> dict[str, Any]:
        cls.refuse_options(options)
        m, sha = read_ensemble(model)
        inputs = [f for f in m.features if f not in STATISTICS]
        return {"model_sha256": sha, "features": list(m.features), "inputs": inputs}

    @classmethod
    def load(cls, model: str, options: dict[str, Any]) -> EnsembleScorer:
        return cls(read_ensemble(model)[0])
