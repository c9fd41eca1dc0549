"""Evaluate quality signals on labelled documents (JSONL: `text`, `label` 1 = high, 0 = low).

The reference set is quality/dclm_human_labels_dev.jsonl: real Common Crawl documents with
majority-vote human labels (DCLM). Two uses:

- `evaluate(model_dir, labelled)`: one quality model's ROC-AUC and precision/recall at a threshold
  (`classifiers evaluate --model DIR`). Scores come from the same `QualityModel.predict` the `score`
  stage runs, so these numbers describe the column recipes will threshold.
- `signal_values` and `measure`, which classifiers/signal_report.py's `evaluate_signals(labelled,
  signals, settings)` runs: how well each signal ranks the documents as people did, and how sure
  that is: ROC-AUC of the *oriented* score (a lower-is-better signal such as
  `perplexity_bpb` is negated, so 0.5 is chance and 1 is perfect for every row) with a seeded
  stratified percentile-bootstrap interval (classifiers/metrics.py). A signal is
  - a scorer of the registry, `KIND=MODEL` (classifiers/scorer.py: `quality=DIR`, `perplexity=DIR`,
    `toxicity=profanity-check`, or a user's Scorer by import path): each of its columns is a row,
    scored through the scorer itself, as the score job would;
  - a text statistic (classifiers/signals.py: `length_chars`, the Gopher/C4/FineWeb statistics;
    `statistics` names them all);
  - a numeric field of the labelled file's records (scores computed elsewhere).
  With `cv`, a fastText quality model is trained on the labelled texts themselves, k-fold, and the
  AUC of its out-of-fold scores is the row: a model scored on the labels it learned from would
  report an in-sample number. A scorer whose model folder lists the labelled file among its
  training inputs (by sha256 in its metadata.json) is flagged `in_sample` for the same reason.

Which way is better is fixed before looking at the labels: the built-in columns' directions below,
the statistics' own, and for any other column the user's (`directions`); never chosen from the data,
which would push every AUC above 0.5.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from classifiers.config import EnsembleParams, FastTextParams, QualityTrainConfig
from classifiers.data import DataError, iter_jsonl
from classifiers.metrics import (
    binary_metrics,
    bootstrap_auc_ci,
    cross_validated_scores,
    roc_auc,
    stratified_folds,
)
from classifiers.model import METADATA_FILE, MODEL_FILE, ModelError, QualityModel, load_model, read_model_json
from classifiers.scorer import load_scorer, make_spec
from classifiers.signals import STATISTICS, statistic_columns
from classifiers.train import FORMAT, QUALITY, fit_fasttext
from core.config import ConfigModel, check_at_least
from core.errors import ConfigError
from core.files import sha256_file

BUILTIN_DIRECTIONS: dict[str, bool] = {
    "quality": True,  # P(high quality)
    "perplexity": False,  # under a reference LM of good text: lower = more like it
    "perplexity_bpb": False,
    "toxicity": False,
    "quality_ensemble": True,  # P(high quality) of classifiers/ensemble.py
    "quality_bucket": True,  # 0-19, Nemotron-CC's (classifiers/buckets.py)
}
"""Which way is better (True: higher) for the built-in scorers' columns."""

ALL_STATISTICS = "statistics"
"""The `--signal` name that stands for every text statistic."""

BATCH = 1024  # documents per Scorer.score call, as the score job's default --batch-size


class BootstrapSettings(ConfigModel):
    """The confidence interval of every AUC."""

    resamples: int = 2000
    confidence: float = 0.95
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> BootstrapSettings:
        check_at_least("bootstrap.resamples", self.resamples, 100)  # fewer leave the 2.5% tail to a few draws
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(f"bootstrap.confidence must be in (0, 1), got {self.confidence!r}")
        return self


class CrossValidationSettings(ConfigModel):
    """The models trained on the labelled texts (`--cv`): fastText, and/or the quality ensemble."""

    models: list[Literal["fasttext", "ensemble"]] = Field(default_factory=lambda: ["fasttext"])
    """Which to train and score out of fold: `quality_cv` (fastText), `quality_ensemble_cv`
    (classifiers/ensemble.py, with the `ensemble` settings)."""
    folds: int = 5
    seed: int = 0
    """Seeds the fold assignment, fastText, and the ensemble's inner folds."""
    fasttext: FastTextParams = Field(default_factory=FastTextParams)
    """train-quality's fastText settings (classifiers/config.py), by default its defaults."""

    @model_validator(mode="after")
    def _check(self) -> CrossValidationSettings:
        check_at_least("cv.folds", self.folds, 2)
        return self


class SignalSettings(ConfigModel):
    """How `evaluate_signals` scores and reports (the `--set` keys of `classifiers evaluate --signal`)."""

    lang: str = "en"
    """Language given to scorers for records without a `lang` field (the perplexity scorer scores
    only its model's languages)."""
    directions: dict[str, Literal["higher", "lower"]] = Field(default_factory=dict)
    """Which way is better, per signal name: needed for a column that is not built in; wins over the
    built-in directions."""
    scorers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Options per scorer kind, as `score --set KIND.KEY=VALUE` (e.g. scorers.perplexity.threads=2)."""
    bootstrap: BootstrapSettings = Field(default_factory=BootstrapSettings)
    cv: CrossValidationSettings = Field(default_factory=CrossValidationSettings)
    ensemble: EnsembleParams = Field(default_factory=EnsembleParams)
    """The quality ensemble's features and C grid (for `cv.models: [ensemble]` and train-ensemble)."""


@dataclass
class Labelled:
    """A labelled file as read: texts, 0/1 labels, and every other field of its records."""

    path: Path
    texts: list[str]
    labels: np.ndarray
    lines: list[int]
    fields: list[dict[str, Any]]
    sha256: str = ""

    def langs(self, default: str) -> list[str | None]:
        return [f["lang"] if isinstance(f.get("lang"), str) else default for f in self.fields]


def read_labelled(path: str | Path) -> Labelled:
    """The records of a labelled JSONL file; DataError names the file and line of a bad record."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"no such file: {p}")
    out = Labelled(p, [], np.zeros(0), [], [], sha256_file(p))
    labels: list[int] = []
    for lineno, obj in iter_jsonl(p):
        text, label = obj.pop("text", None), obj.pop("label", None)
        if not isinstance(text, str):
            raise DataError(f"{p}:{lineno}: 'text' must be a string, got {type(text).__name__}")
        # 1/0 (also 1.0, true/false: equal in Python) are accepted; "1", 2, null are errors.
        if label not in (0, 1):
            raise DataError(f"{p}:{lineno}: 'label' must be 1 (high quality) or 0 (low), got {label!r}")
        out.texts.append(text)
        labels.append(int(label))
        out.lines.append(lineno)
        out.fields.append(obj)
    if not out.texts:
        raise DataError(f"{p}: no labelled documents (empty file)")
    out.labels = np.asarray(labels, dtype=np.int8)
    if out.labels.min() == out.labels.max():
        raise DataError(f"{p}: every label is {int(out.labels[0])}; ROC-AUC needs both classes")
    return out


def load_labelled(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Texts and 0/1 labels; DataError names the file and line of a bad record."""
    ls = read_labelled(path)
    return ls.texts, ls.labels


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


@dataclass
class SignalValues:
    """One signal's value per labelled document (NaN: none), before it is measured."""

    name: str
    source: str
    higher_is_better: bool
    values: np.ndarray
    in_sample: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _direction(name: str, settings: SignalSettings) -> bool:
    """True if higher is better: the user's word, else the built-in column's or the statistic's."""
    if name in settings.directions:
        return settings.directions[name] == "higher"
    if name in BUILTIN_DIRECTIONS:
        return BUILTIN_DIRECTIONS[name]
    if name in STATISTICS:
        return STATISTICS[name].higher_is_better
    raise ConfigError(
        f"signal {name!r}: say which way is better with --set directions.{name}=higher (or lower); "
        "it is never guessed from the labels"
    )


def _trained_on(model: str, sha256: str) -> bool:
    """Whether the model folder's metadata.json names a file with this sha256 (a training input)."""
    meta = Path(model) / METADATA_FILE
    if not meta.is_file():
        return False

    def walk(x: Any) -> bool:
        if isinstance(x, dict):
            return x.get("sha256") == sha256 or any(walk(v) for v in x.values())
        return isinstance(x, list) and any(walk(v) for v in x)

    try:
        return walk(read_model_json(meta))  # the checked reader: depth bounded, so `walk` cannot recurse far
    except ModelError:
        return False  # the scorer's own checks have accepted the folder; its metadata is not ours to judge


def _scorer_signals(
    spec: str, ls: Labelled, settings: SignalSettings, known: list[SignalValues] = ()
) -> list[SignalValues]:
    """Every column of the scorer `KIND=MODEL`, scored through the scorer as the score job does; a
    scorer that reads columns (`Scorer.inputs`) gets them from the signals before it or the records."""
    kind, _, model = spec.partition("=")
    if not kind or not model:
        raise ConfigError(f"--signal {spec!r}: expected KIND=MODEL, e.g. quality=out/models/quality")
    scorer = load_scorer(make_spec(kind, model, settings.scorers.get(kind)))  # checks the model first
    better = {c: _direction(c, settings) for c in scorer.columns}  # before the scoring, which may be long
    inputs = _scorer_inputs(spec, scorer.inputs, ls, known)
    langs = ls.langs(settings.lang)
    t0 = time.perf_counter()
    parts: dict[str, list[np.ndarray]] = {c: [] for c in scorer.columns}
    for s in range(0, len(ls.texts), BATCH):
        texts, cut = ls.texts[s : s + BATCH], langs[s : s + BATCH]
        batch = (
            scorer.score(texts, cut, columns={c: v[s : s + BATCH] for c, v in inputs.items()})
            if inputs
            else scorer.score(texts, cut)
        )
        for c in scorer.columns:
            parts[c].append(np.asarray(batch[c], dtype=np.float64))
    seconds = round(time.perf_counter() - t0, 3)
    in_sample = _trained_on(model, ls.sha256)
    return [
        SignalValues(c, spec, better[c], np.concatenate(parts[c]), in_sample, {"seconds": seconds})
        for c in scorer.columns
    ]


def field_values(name: str, ls: Labelled) -> np.ndarray:
    """A numeric field of every record (null: NaN); DataError naming the first record without one."""
    values = np.empty(len(ls.texts), dtype=np.float64)
    for i, (f, line) in enumerate(zip(ls.fields, ls.lines)):
        v = f.get(name)
        if name not in f or isinstance(v, bool) or not isinstance(v, int | float | None):
            got = "no such field" if name not in f else f"{v!r}"
            raise DataError(f"{ls.path}:{line}: signal field {name!r} must be a number or null, got {got}")
        values[i] = np.nan if v is None else v
    return values


def _scorer_inputs(
    spec: str, needs: tuple[str, ...], ls: Labelled, known: list[SignalValues]
) -> dict[str, np.ndarray]:
    """The columns a scorer reads: from a signal named before it, else a field of every record."""
    return columns_or_fields(
        needs,
        {v.name: v.values for v in known},
        ls,
        lambda missing: (
            f"--signal {spec}: it reads the column(s) {', '.join(missing)}: name the scorer "
            f"that writes them before it (e.g. --signal perplexity=LM_DIR for perplexity_bpb) or give them as "
            f"fields of every record of {ls.path}"
        ),
    )


def columns_or_fields(
    names: Sequence[str],
    have: Mapping[str, np.ndarray],
    ls: Labelled,
    missing_message: Callable[[list[str]], str],
) -> dict[str, np.ndarray]:
    """Each of `names` from `have` (columns computed in this run), else the numeric field of every record
    of `ls` (field_values); ConfigError(missing_message(names found in neither)) before any is read."""
    missing = [c for c in names if c not in have and not all(c in f for f in ls.fields)]
    if missing:
        raise ConfigError(missing_message(missing))
    return {c: have[c] if c in have else field_values(c, ls) for c in names}


def _field_signal(name: str, ls: Labelled, settings: SignalSettings) -> SignalValues:
    """A numeric field of every record (null: no value): a bad record is named before a missing direction."""
    values = field_values(name, ls)
    return SignalValues(name, f"field of {ls.path.name}", _direction(name, settings), values)


def _unknown_signal(name: str, ls: Labelled) -> ConfigError:
    fields = sorted({k for f in ls.fields for k in f})
    return ConfigError(
        f"--signal {name!r}: not a scorer (KIND=MODEL, e.g. quality=out/models/quality), not a text "
        f"statistic ({ALL_STATISTICS}, or one of {', '.join(STATISTICS)}), and not a field of {ls.path} "
        f"(its records have: text, label{''.join(', ' + f for f in fields)})"
    )


def signal_values(signals: list[str], ls: Labelled, settings: SignalSettings) -> list[SignalValues]:
    """The values of every signal named (in order; the statistics computed in one pass)."""
    stats = [
        n for s in signals for n in (list(STATISTICS) if s == ALL_STATISTICS else [s]) if n in STATISTICS
    ]
    columns = statistic_columns(ls.texts, list(dict.fromkeys(stats))) if stats else {}
    out: list[SignalValues] = []
    for s in signals:
        if "=" in s:
            out += _scorer_signals(s, ls, settings, out)
        elif s == ALL_STATISTICS or s in STATISTICS:
            names = list(STATISTICS) if s == ALL_STATISTICS else [s]
            out += [SignalValues(n, "text statistic", _direction(n, settings), columns[n]) for n in names]
        elif any(s in f for f in ls.fields):
            # then every record must have it: _field_signal names the first that lacks it
            out.append(_field_signal(s, ls, settings))
        else:
            raise _unknown_signal(s, ls)
    return out


def text_folds(ls: Labelled, k: int, seed: int) -> np.ndarray:
    """Stratified k-fold of the labelled documents; identical texts share a fold (the first one's),
    so no document is scored by a model that saw its copy."""
    folds = stratified_folds(ls.labels, k, seed)
    first: dict[str, int] = {}
    for i, t in enumerate(ls.texts):
        folds[i] = folds[first.setdefault(t, i)]
    return folds


def cv_summary(
    ls: Labelled, folds: np.ndarray, oof: np.ndarray, cv: CrossValidationSettings, t0: float
) -> dict[str, Any]:
    """What a cross-validated row records besides its AUC: folds, seed, AUC per fold, seconds since t0."""
    fold_aucs = [roc_auc(ls.labels[folds == f], oof[folds == f]) for f in range(cv.folds)]
    return {
        "folds": cv.folds,
        "seed": cv.seed,
        "fold_aucs": [round(a, 4) for a in fold_aucs],
        "seconds": round(time.perf_counter() - t0, 3),
    }


def cross_validated(ls: Labelled, cv: CrossValidationSettings) -> SignalValues:
    """Out-of-fold P(high quality) of fastText quality models trained on the labelled texts, k-fold.

    Identical texts share a fold (the first one's), so no document is scored by a model that saw
    its copy."""
    folds = text_folds(ls, cv.folds, cv.seed)
    cfg = QualityTrainConfig(seed=cv.seed, fasttext=cv.fasttext)
    y = ls.labels.astype(bool)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="evaluate-cv-") as tmp:

        def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
            d = Path(tempfile.mkdtemp(dir=tmp))
            fit_fasttext(
                [ls.texts[i] for i in train if y[i]],
                [ls.texts[i] for i in train if not y[i]],
                d,
                cfg,
                QUALITY,
            )
            meta = {"format": FORMAT, "model_sha256": sha256_file(d / MODEL_FILE)}
            (d / METADATA_FILE).write_text(json.dumps(meta), encoding="utf-8")
            scores = QualityModel(d).predict([ls.texts[i] for i in test])
            shutil.rmtree(d)  # a fold's model is ~50 MB at the default size: one on disk at a time
            return scores

        oof = cross_validated_scores(folds, fit_predict)
    extra = cv_summary(ls, folds, oof, cv, t0)
    fold_aucs = extra["fold_aucs"]
    source = (
        f"fastText trained on these labels, {cv.folds}-fold CV, out-of-fold scores "
        f"(fold AUCs {min(fold_aucs):.2f}-{max(fold_aucs):.2f})"
    )
    return SignalValues("quality_cv", source, True, oof, extra=extra)


def measure(sig: SignalValues, labels: np.ndarray, boot: BootstrapSettings) -> dict[str, Any]:
    """A signal's row: AUC of the oriented score over the documents that have a value, with its interval."""
    ok = ~np.isnan(sig.values)
    y = labels[ok]
    row: dict[str, Any] = {
        "signal": sig.name,
        "source": sig.source,
        "better": "higher" if sig.higher_is_better else "lower",
        "n": int(ok.sum()),
        "n_missing": int((~ok).sum()),
        "in_sample": sig.in_sample,
        **sig.extra,
    }
    if y.size == 0 or y.min() == y.max():
        row.update(auc=None, ci=None, note=f"{row['n']} documents have a value: ROC-AUC needs both classes")
        return row
    score = sig.values[ok] if sig.higher_is_better else -sig.values[ok]
    # 4 decimals: the interval's ends move by ~0.002 with the bootstrap seed (classifiers/metrics.py)
    row["auc"] = round(roc_auc(y, score), 4)
    row["ci"] = [round(x, 4) for x in bootstrap_auc_ci(y, score, boot.resamples, boot.confidence, boot.seed)]
    return row
