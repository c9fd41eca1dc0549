"""The quality ensemble (classifiers/ensemble.py): trained and cross-validated on the real DCLM human
labels (quality/dclm_human_labels_dev.jsonl, 218 Common Crawl documents), scored as a scorer column.

What is checked against something outside the code under test: the nested CV AUC against a single
weak statistic's AUC, both with their bootstrap intervals; honesty by construction (the out-of-fold
score of a document does not move when its fold's labels change); the scorer against the model's
own formula written out here; the score job against the columns it must read; hostile model files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from classifiers.cli import main
from classifiers.config import EnsembleParams
from classifiers.ensemble import (
    COLUMN,
    ENSEMBLE_FILE,
    EnsembleScorer,
    feature_matrix,
    nested_scores,
)
from classifiers.evaluate import SignalSettings, read_labelled, text_folds
from classifiers.model import METADATA_FILE, ModelError
from classifiers.score import ScoreJobConfig, check_inputs, run_score, score_file
from classifiers.scorer import load_scorer, make_spec
from classifiers.signal_report import evaluate_signals
from classifiers.signals import STATISTICS, statistic_columns
from core.errors import ConfigError
from core.files import sha256_file
from core.output import OutputDir


@pytest.fixture(scope="module")
def ls(labelled):
    return read_labelled(labelled)


@pytest.fixture(scope="module")
def stats(ls):
    """The 28 text statistics of the 218 documents, computed once for the module."""
    return statistic_columns(ls.texts, list(STATISTICS))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, labelled):
    """`classifiers train-ensemble` with its defaults (the text statistics), through the CLI."""
    out = tmp_path_factory.mktemp("ensemble") / "model"
    assert main(["train-ensemble", "--labels", str(labelled), "--output", str(out)]) == 0
    return out


def test_nested_cv_auc_clears_a_weak_statistic_by_both_intervals(trained, ls, labelled):
    meta = json.loads((trained / METADATA_FILE).read_text())
    row = meta["cv"]
    assert row["n"] == 218 and row["signal"] == "quality_ensemble_cv" and not row["in_sample"]
    assert meta["features"] == list(STATISTICS) and meta["inputs"] == []
    assert meta["training_data"]["labels"]["sha256"] == ls.sha256
    assert meta["C"] in EnsembleParams().C
    # The weak statistic: the share of repeated lines, one rule of Gopher's repetition filter.
    report, _ = evaluate_signals(labelled, ["gopher_dup_line_frac"], SignalSettings())
    (weak,) = report["signals"]
    # The margin: the ensemble's whole 95% interval lies above the weak statistic's whole interval.
    # Two 95% intervals that do not overlap is a conservative test of a difference (for independent
    # estimates it means p < 0.006); the intervals come from the same 2,000-resample bootstrap.
    assert row["ci"][0] > weak["ci"][1], (row, weak)
    assert row["ci"][0] < row["auc"] < row["ci"][1]
    # The model file is plain JSON (no pickle) with one coefficient per feature.
    obj = json.loads((trained / ENSEMBLE_FILE).read_text())
    assert len(obj["coef"]) == len(STATISTICS) and meta["model_sha256"] == sha256_file(
        trained / ENSEMBLE_FILE
    )


def test_out_of_fold_scores_ignore_the_labels_of_their_own_fold(ls, stats):
    """Honesty: a document's CV score comes from a model (C selection included) that never saw its
    label. Flipping every label of fold 0 leaves fold 0's scores exactly as they were and moves the
    others' (so the check can fail: the labels do reach the models)."""
    _, X = feature_matrix(ls, ["statistics"], stats)
    y = ls.labels.astype(int)
    folds = text_folds(ls, 5, 0)
    params = EnsembleParams(C=[0.1, 1.0])
    before, _ = nested_scores(X, y, folds, params, 0)
    flipped = np.where(folds == 0, 1 - y, y)
    after, _ = nested_scores(X, flipped, folds, params, 0)
    assert np.array_equal(before[folds == 0], after[folds == 0])
    assert not np.allclose(before[folds != 0], after[folds != 0])


def test_scorer_computes_the_logistic_of_its_json_and_evaluate_flags_in_sample(
    trained, ls, stats, labelled, capsys
):
    scorer = EnsembleScorer.load(str(trained), {})
    texts = [*ls.texts[:30], None]
    got = scorer.score(texts, [None] * len(texts))[COLUMN]
    # The formula of the module docstring, written out from the JSON.
    obj = json.loads((trained / ENSEMBLE_FILE).read_text())
    X = np.column_stack([stats[f][:30] for f in obj["features"]])
    Z = np.sign(X) * np.log1p(np.abs(X))
    Z = np.where(np.isnan(Z), obj["median"], Z)
    z = ((Z - obj["mean"]) / np.array(obj["scale"])) @ np.array(obj["coef"]) + obj["intercept"]
    # float32 output: its rounding (6e-8 relative) is far below 1e-6
    np.testing.assert_allclose(got[:30], 1.0 / (1.0 + np.exp(-z)), atol=1e-6)
    assert np.isnan(got[30])  # a null text scores null
    # Scored on the labels it was trained on, evaluate marks the row in-sample.
    assert main(["evaluate", "--labelled", str(labelled), "--signal", f"quality-ensemble={trained}"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["signals"][0]
    assert row["signal"] == COLUMN and row["in_sample"] is True


def _docs(tmp: Path, texts: list[str], **columns) -> Path:
    src = tmp / "in"
    src.mkdir(parents=True)
    pq.write_table(pa.table({"text": texts, **columns}), src / "part.parquet")
    return src


@pytest.fixture(scope="module")
def with_toxicity(tmp_path_factory, labelled):
    """An ensemble over the statistics and the `toxicity` column (profanity-check, scored in training)."""
    out = tmp_path_factory.mktemp("ensemble-tox") / "model"
    argv = ["train-ensemble", "--labels", str(labelled), "--scorer", "toxicity=profanity-check"]
    argv += ["--features", "statistics", "toxicity", "--output", str(out), "--set", "ensemble.C=[1.0]"]
    assert main(argv) == 0
    return out


def test_the_score_job_reads_the_columns_it_needs_and_refuses_without_them(tmp_path, with_toxicity, ls):
    spec = make_spec("quality-ensemble", str(with_toxicity))
    assert spec.identity["inputs"] == ["toxicity"]
    texts = ls.texts[:12]
    # Without a toxicity column or scorer: refused before Spark, by name (exit 2 from the CLI).
    bare = _docs(tmp_path / "a", texts)
    with pytest.raises(ConfigError, match="toxicity"):
        run_score(bare, tmp_path / "out-a", None, scorers=[spec])
    assert not (tmp_path / "out-a").exists()
    rc = main(
        [
            "score",
            "--input",
            str(bare),
            "--output",
            str(tmp_path / "out-b"),
            "--scorer",
            f"quality-ensemble={with_toxicity}",
        ]
    )
    assert rc == 2
    # With the toxicity scorer before it, in one job (no Spark: one file through score_file).
    tox = make_spec("toxicity", "profanity-check")
    check_inputs([tox, spec], [bare / "part.parquet"])  # the driver's check passes
    cfg = ScoreJobConfig.for_model(None, [tox, spec])
    root = tmp_path / "scored"
    OutputDir(root, ("docs", "stats", "done")).prepare("score", cfg.to_dict(), cfg.fingerprint())
    assert score_file(bare / "part.parquet", "part", cfg, root)["status"] == "done"
    out = pq.read_table(root / "docs" / "part.parquet")
    tox_scores = load_scorer(tox).score(texts, [None] * len(texts))["toxicity"]
    alone = EnsembleScorer.load(str(with_toxicity), {}).score(
        texts, [None] * len(texts), columns={"toxicity": tox_scores}
    )
    np.testing.assert_array_equal(out.column(COLUMN).to_numpy(), alone[COLUMN])
    # A column of the input is read as it is; a null there gives a null score, never a guessed one.
    given = tox_scores.astype(np.float64).tolist()
    given[3] = None
    src = _docs(tmp_path / "c", texts, toxicity=pa.array(given, pa.float64()))
    check_inputs([spec], [src / "part.parquet"])
    got = load_scorer(spec).score(
        texts, [None] * len(texts), columns={"toxicity": np.array(given, dtype=float)}
    )[COLUMN]
    assert np.isnan(got[3]) and np.array_equal(np.delete(got, 3), np.delete(alone[COLUMN], 3))


def test_evaluate_cross_validates_the_ensemble_and_names_missing_features(labelled, capsys):
    argv = ["evaluate", "--labelled", str(labelled), "--cv", "--set", "cv.models=[ensemble]"]
    argv += ["--set", "ensemble.C=[1.0]", "--set", "bootstrap.resamples=500"]
    assert (
        main(
            [
                *argv,
                "--set",
                "ensemble.features=[statistics,toxicity]",
                "--signal",
                "toxicity=profanity-check",
            ]
        )
        == 0
    )
    rows = {r["signal"]: r for r in json.loads(capsys.readouterr().out.strip().splitlines()[-1])["signals"]}
    assert set(rows) == {"toxicity", "quality_ensemble_cv"}
    assert (
        rows["quality_ensemble_cv"]["features"] == 29 and len(rows["quality_ensemble_cv"]["fold_aucs"]) == 5
    )
    # perplexity_bpb is neither scored here nor a field of the records: exit 2, naming it.
    assert main([*argv, "--set", "ensemble.features=[statistics,perplexity_bpb]"]) == 2
    assert "perplexity_bpb" in capsys.readouterr().err


def _tamper(src: Path, dst: Path, text: str, rehash: bool = True) -> Path:
    shutil.copytree(src, dst)
    (dst / ENSEMBLE_FILE).write_text(text)
    if rehash:  # as someone with write access to the folder would: the hash check then passes
        meta = json.loads((dst / METADATA_FILE).read_text())
        meta["model_sha256"] = sha256_file(dst / ENSEMBLE_FILE)
        (dst / METADATA_FILE).write_text(json.dumps(meta))
    return dst


def test_hostile_ensemble_files_are_refused_by_name(tmp_path, trained):
    good = json.loads((trained / ENSEMBLE_FILE).read_text())
    cases = {
        "changed": (json.dumps({**good, "intercept": 5.0}), False, "does not match"),
        "nan": (json.dumps({**good, "coef": [float("nan")] * len(good["coef"])}), True, "finite"),
        "short": (json.dumps({**good, "mean": good["mean"][:3]}), True, "one per feature"),
        "zero-scale": (
            json.dumps({**good, "scale": [0.0] * len(good["scale"])}),
            True,
            r"'scale'\[0\] .* must be a number in \[1e-12",
        ),
        "pickle": ("\x80\x04\x95 not json", True, "not valid JSON"),
        "huge": (" " * (1 << 20) + json.dumps(good), True, "bytes, over"),
        "deep": ("[" * 100_000 + "]" * 100_000, True, "nests deeper than the 64"),
    }
    for name, (text, rehash, message) in cases.items():
        d = _tamper(trained, tmp_path / name, text, rehash)
        with pytest.raises(ModelError, match=message):
            make_spec("quality-ensemble", str(d))
