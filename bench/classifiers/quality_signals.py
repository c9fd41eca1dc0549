"""How well does each quality signal agree with people? ROC-AUC with a 95% CI, per signal (issue 28).

On DCLM's 218 human-labelled Common Crawl documents (quality/dclm_human_labels_dev.jsonl, labels
1/0) it evaluates, through `classifiers.evaluate.evaluate_signals` (what `classifiers evaluate
--signal ... --cv` runs):
- `quality`: the fastText quality model the demo trains: the demo's positives (Wikipedia articles
  and WikiText-2, workflows.pipeline.quality_positives) against the pages `extract` keeps from
  every shared WARC (default extract config, without Spark, as testkit.kept_sets runs it), default
  train-quality config, seed 0; or the folder given with --quality-model;
- `perplexity`, `perplexity_bpb` under a reference LM: the folder given with --lm, or one trained
  here by `python -m workflows train-lm` with --train-lm (its defaults: minutes on 2 cores); without
  either the rows are skipped, with the reason printed;
- `toxicity` (profanity-check, the default scorer);
- every text statistic of classifiers/signals.py: length in characters and the Gopher, C4 and
  FineWeb statistics the curation filters threshold;
- `quality_cv`: a fastText quality model trained on the labelled texts themselves, k-fold, scored
  out of fold (an in-sample score of such a model would say nothing);
- `quality_ensemble_cv`: the quality ensemble (classifiers/ensemble.py: logistic regression, C chosen
  by an inner k-fold) trained on the labels, nested k-fold, out of fold, over the 28 text statistics
  and the `quality` and `perplexity_bpb` columns (those scored); `quality_ensemble_cv_text`: over the
  text statistics alone; `hgb_cv_text`, `hgb_cv`: sklearn's HistGradientBoostingClassifier with fixed
  small settings on the same features, the alternative the ensemble was measured against (not shipped).
AUC is that of the oriented score (lower-is-better signals negated); the CI is the percentile
interval of a seeded stratified bootstrap. The table is sorted by AUC; the last line is one JSON
object with every number and the seconds each part took.

    python -m bench.classifiers.quality_signals [--quality-model DIR] [--lm DIR | --train-lm]
        [--labelled FILE] [--resamples 2000] [--folds 5] [--seed 0] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from classifiers.config import EnsembleParams, QualityTrainConfig
from classifiers.ensemble import cross_validated_ensemble, feature_matrix
from classifiers.evaluate import (
    ALL_STATISTICS,
    BootstrapSettings,
    CrossValidationSettings,
    SignalSettings,
    SignalValues,
    cv_summary,
    measure,
    read_labelled,
    text_folds,
)
from classifiers.metrics import cross_validated_scores
from classifiers.signal_report import evaluate_signals, signals_table
from classifiers.train import train_quality
from curation.config import ExtractJobConfig
from testkit.kept_sets import all_warcs, kept_run
from testkit.shared_data import shared_data_dir
from workflows.pipeline import quality_positives

REPO = Path(__file__).resolve().parents[2]


def demo_quality_model(work: Path, seconds: dict[str, float]) -> Path:
    """The demo's quality model: its positives against the pages extracted from every shared WARC."""
    extract, model = work / "extract", work / "quality-model"
    if not (model / "metadata.json").is_file():
        t0 = time.perf_counter()
        run = kept_run(all_warcs(shared_data_dir() / "warc"), ExtractJobConfig(), extract)
        seconds["extract"] = round(time.perf_counter() - t0, 1)
        print(f"extracted {len(run.texts)} pages from the shared WARCs ({seconds['extract']} s)", flush=True)
        t0 = time.perf_counter()
        meta = train_quality(
            quality_positives(str(shared_data_dir())), [extract], model, QualityTrainConfig()
        )
        seconds["train_quality"] = round(time.perf_counter() - t0, 1)
        c = meta["counts"]
        print(
            f"trained {model}: {c['train_pos']} + {c['train_neg']} documents ({seconds['train_quality']} s)"
        )
    return model


def train_lm(work: Path, seconds: dict[str, float]) -> Path:
    """`python -m workflows train-lm` with its defaults into `work`/lm (resumes there if interrupted)."""
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "workflows", "train-lm", "--output", str(work / "lm")]
    print("training the reference LM: " + " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO)
    seconds["train_lm"] = round(time.perf_counter() - t0, 1)
    return work / "lm" / "model"


def hgb_row(ls, values, settings: SignalSettings, features: list[str], name: str) -> SignalValues:
    """Gradient boosting out of fold on the ensemble's features and folds: fixed small settings
    (depth 3, 100 rounds at 0.05, L2 1.0, min 10 per leaf: a priori, not tuned on the labels)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    t0 = time.perf_counter()
    names, X = feature_matrix(ls, features, {v.name: v.values for v in values})
    y = ls.labels.astype(int)
    folds = text_folds(ls, settings.cv.folds, settings.cv.seed)

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        m = HistGradientBoostingClassifier(
            max_depth=3,
            learning_rate=0.05,
            max_iter=100,
            l2_regularization=1.0,
            min_samples_leaf=10,
            random_state=settings.cv.seed,
        )
        return m.fit(X[train], y[train]).predict_proba(X[test])[:, 1]

    oof = cross_validated_scores(folds, fit_predict)
    extra = cv_summary(ls, folds, oof, settings.cv, t0)
    return SignalValues(
        name,
        f"HistGradientBoosting on {len(names)} features, {settings.cv.folds}-fold CV (not shipped)",
        True,
        oof,
        extra=extra,
    )


def ensemble_rows(labelled: str, values: list[SignalValues], settings: SignalSettings) -> list[dict]:
    """The text-only ensemble, and gradient boosting on both feature sets, as rows of the table."""
    ls = read_labelled(labelled)
    scored = [v for v in values if not v.name.endswith("_cv")]
    text_only = settings.replace(ensemble=settings.ensemble.replace(features=[ALL_STATISTICS]))
    text = cross_validated_ensemble(ls, scored, text_only)
    text.name += "_text"
    rows = [text, hgb_row(ls, scored, settings, [ALL_STATISTICS], "hgb_cv_text")]
    if settings.ensemble.features != [ALL_STATISTICS]:
        rows.append(hgb_row(ls, scored, settings, settings.ensemble.features, "hgb_cv"))
    return [measure(r, ls.labels, settings.bootstrap) for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labelled", default=str(shared_data_dir() / "quality" / "dclm_human_labels_dev.jsonl"))
    ap.add_argument("--quality-model", default=None, metavar="DIR", help="default: train the demo's")
    lm = ap.add_mutually_exclusive_group()
    lm.add_argument("--lm", default=None, metavar="DIR", help="a workflows train-lm model folder (DIR/model)")
    lm.add_argument("--train-lm", action="store_true", help="train one with workflows train-lm (minutes)")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0, help="of the bootstrap and the folds")
    ap.add_argument(
        "--work", default=None, metavar="DIR", help="keep what is trained here (default: a temp folder)"
    )
    args = ap.parse_args()

    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="quality-signals-") as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        signals = [f"quality={args.quality_model or demo_quality_model(work, seconds)}"]
        lm_dir = args.lm or (train_lm(work, seconds) if args.train_lm else None)
        if lm_dir:
            signals.append(f"perplexity={lm_dir}")
        else:
            print(
                "perplexity, perplexity_bpb: skipped (no reference LM: give --lm DIR, or --train-lm to train one)"
            )
        signals += ["toxicity=profanity-check", ALL_STATISTICS]
        columns = ["quality"] + (["perplexity_bpb"] if lm_dir else [])
        settings = SignalSettings(
            bootstrap=BootstrapSettings(resamples=args.resamples, seed=args.seed),
            cv=CrossValidationSettings(folds=args.folds, seed=args.seed, models=["fasttext", "ensemble"]),
            ensemble=EnsembleParams(features=[ALL_STATISTICS, *columns]),
        )
        t0 = time.perf_counter()
        report, values = evaluate_signals(args.labelled, signals, settings, cv=True)
        seconds["evaluate"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        report["signals"] += ensemble_rows(args.labelled, values, settings)
        seconds["ensemble_rows"] = round(time.perf_counter() - t0, 1)
    report["signals"].sort(key=lambda r: -1.0 if r["auc"] is None else r["auc"], reverse=True)
    print(signals_table(report))
    print(json.dumps({**report, "seconds": seconds}, sort_keys=True))


if __name__ == "__main__":
    main()
