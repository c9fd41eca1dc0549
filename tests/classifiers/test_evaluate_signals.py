"""`classifiers evaluate --signal/--cv`: AUC, its bootstrap interval, k-fold, orientation, the statistics.

All on the real DCLM human labels (quality/dclm_human_labels_dev.jsonl, 218 Common Crawl documents).
References are independent of the code under test: scikit-learn's roc_auc_score for the AUC, the
curation filters themselves for the text statistics (a statistic must cross the filter's threshold
exactly where the filter drops the document).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from classifiers.cli import main
from classifiers.evaluate import (
    BootstrapSettings,
    CrossValidationSettings,
    SignalSettings,
    load_labelled,
)
from classifiers.metrics import bootstrap_auc_ci, cross_validated_scores, roc_auc, stratified_folds
from classifiers.model import METADATA_FILE, MODEL_FILE, QualityModel
from classifiers.signal_report import evaluate_signals, signals_table
from classifiers.signals import statistic_columns
from classifiers.train import QUALITY, fit_fasttext, train_quality
from core.files import sha256_file
from curation.filters.text import C4Quality, FineWebQuality, GopherQuality, GopherRepetition
from testkit.filter_off import OFF_FINEWEB, OFF_QUALITY, OFF_REPETITION  # each rule off
from tests.classifiers.conftest import SMALL, small_config

# fastText at the tests' small size (classifiers/conftest.py): trains in about a second per fold.
SMALL_CV = CrossValidationSettings(folds=3, seed=0, fasttext=SMALL["fasttext"])


@pytest.fixture(scope="module")
def real(labelled):
    texts, y = load_labelled(labelled)
    return texts, y


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_auc_matches_scikit_learn_on_real_scores(real):
    texts, y = real
    cols = statistic_columns(texts, ["length_chars", "gopher_stop_words", "c4_sentences"])
    # gopher_stop_words takes 9 values over 218 documents: the tie rule (half a win) is exercised.
    assert len(np.unique(cols["gopher_stop_words"])) < 10
    for name, s in cols.items():
        # 1e-12: both sum the same pairs' wins exactly; only float summation order differs.
        assert roc_auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12), name


def test_bootstrap_interval_contains_the_estimate_and_narrows_with_n(real):
    texts, y = real
    s = np.array([len(t) for t in texts], dtype=np.float64)
    auc = roc_auc(y, s)
    lo, hi = bootstrap_auc_ci(y, s, resamples=2000, seed=0)
    assert 0.0 <= lo < auc < hi <= 1.0
    assert bootstrap_auc_ci(y, s, resamples=2000, seed=0) == (lo, hi)  # seeded
    # The same documents four times over: the same AUC, and the bootstrap's standard error scales as
    # 1/sqrt(n), so the interval halves. 0.65 leaves room for the Monte Carlo error of 2,000
    # resamples (the ends move by ~0.003 with the seed, against a width of ~0.15).
    y4, s4 = np.tile(y, 4), np.tile(s, 4)
    lo4, hi4 = bootstrap_auc_ci(y4, s4, resamples=2000, seed=0)
    assert roc_auc(y4, s4) == pytest.approx(auc, abs=1e-12)
    assert lo4 < auc < hi4 and (hi4 - lo4) < 0.65 * (hi - lo)


def test_stratified_folds_keep_the_classes_and_cover_everything_once(real):
    _, y = real
    folds = stratified_folds(y, 5, seed=3)
    assert set(folds.tolist()) == set(range(5))
    for f in range(5):  # 120 positives and 98 negatives dealt into 5 folds: 24 each, and 19 or 20
        assert (y[folds == f] == 1).sum() == 24 and (y[folds == f] == 0).sum() in (19, 20)
    assert np.array_equal(stratified_folds(y, 5, seed=3), folds)
    assert not np.array_equal(stratified_folds(y, 5, seed=4), folds)
    with pytest.raises(ValueError, match="at least 5 items of each class"):
        stratified_folds(np.array([1, 1, 1, 1, 1, 0, 0, 0]), 5)
    seen = []

    def fit_predict(train, test):
        assert not set(train) & set(test) and len(train) + len(test) == len(y)
        seen.extend(test.tolist())
        return test.astype(float)  # each item's own index: shows which score landed where

    oof = cross_validated_scores(folds, fit_predict)
    assert sorted(seen) == list(range(len(y))) and np.array_equal(oof, np.arange(len(y)))


def test_a_lower_is_better_signal_is_negated(tmp_path, real):
    texts, y = real
    f = _write(
        tmp_path / "l.jsonl",
        [{"text": t, "label": int(lab), "chars": len(t)} for t, lab in zip(texts, y)],
    )
    up = SignalSettings(directions={"chars": "higher"})
    down = SignalSettings(directions={"chars": "lower"})
    (hi_row,) = evaluate_signals(f, ["chars"], up)[0]["signals"]
    (lo_row,) = evaluate_signals(f, ["chars"], down)[0]["signals"]
    # 1e-4: the report rounds to 4 decimals
    assert hi_row["auc"] == pytest.approx(roc_auc_score(y, [len(t) for t in texts]), abs=1e-4)
    assert lo_row["auc"] == pytest.approx(1 - hi_row["auc"], abs=1e-4)
    assert lo_row["ci"] == pytest.approx([1 - hi_row["ci"][1], 1 - hi_row["ci"][0]], abs=1e-4)
    assert (hi_row["better"], lo_row["better"]) == ("higher", "lower")
    # The same numbers as a field and as the built-in statistic length_chars (higher is better).
    (stat_row,) = evaluate_signals(f, ["length_chars"], up)[0]["signals"]
    assert (stat_row["auc"], stat_row["ci"]) == (hi_row["auc"], hi_row["ci"])


def test_cli_prints_the_table_for_the_real_labels(labelled, real, tmp_path, capsys):
    texts, y = real
    preds = tmp_path / "p.jsonl"
    rc = main(
        ["evaluate", "--labelled", str(labelled), "--signal", "length_chars", "--predictions", str(preds)]
    )
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    assert out[2].split() == ["signal", "better", "AUC", "95%", "CI", "n", "source"]
    assert out[4].split()[:2] == ["length_chars", "higher"]
    (row,) = json.loads(out[-1])["signals"]
    assert row["n"] == len(texts) == 218 and row["auc"] == pytest.approx(
        roc_auc_score(y, [len(t) for t in texts]), abs=1e-4
    )
    assert 0.0 <= row["ci"][0] <= row["auc"] <= row["ci"][1] <= 1.0
    assert [json.loads(line)["length_chars"] for line in preds.read_text().splitlines()] == [
        len(t) for t in texts
    ]


@pytest.mark.parametrize(
    ("records", "signal", "message"),
    [
        (
            [{"text": "a page", "label": 1}] * 3,
            "length_chars",
            "every label is 1; ROC-AUC needs both classes",
        ),
        ([{"text": "a", "label": 1}, {"text": "b", "label": 0}], "no_such", "'no_such': not a scorer"),
        (
            [{"text": "a", "label": 1, "s": 1}, {"text": "b", "label": 0}],
            "s",
            ":2: signal field 's' must be a number",
        ),
        ([{"text": "a", "label": 1, "s": 1}, {"text": "b", "label": 0, "s": 2}], "s", "directions.s=higher"),
        ([{"text": "a", "label": 1}, {"text": "b", "label": 0}], "perplexity=/no/such/lm", "/no/such/lm"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path, capsys, records, signal, message):
    f = _write(tmp_path / "l.jsonl", records)
    assert main(["evaluate", "--labelled", str(f), "--signal", signal]) == 2
    assert message in capsys.readouterr().err


def test_threshold_is_for_model_alone(labelled, capsys):
    assert (
        main(["evaluate", "--labelled", str(labelled), "--signal", "length_chars", "--threshold", "0.5"]) == 2
    )
    assert "--threshold is for --model alone" in capsys.readouterr().err
    assert main(["evaluate", "--labelled", str(labelled)]) == 2
    assert "give --model MODEL_DIR, or --signal" in capsys.readouterr().err


def test_cross_validation_is_out_of_sample_and_in_sample_models_are_flagged(
    tmp_path, labelled, data_dir, real, capsys
):
    texts, y = real
    settings = SignalSettings(cv=SMALL_CV, bootstrap=BootstrapSettings(resamples=500))
    report, _ = evaluate_signals(labelled, [], settings, cv=True)
    (cv,) = report["signals"]
    assert (
        cv["signal"] == "quality_cv" and cv["n"] == 218 and len(cv["fold_aucs"]) == 3 and not cv["in_sample"]
    )
    assert 0.0 <= cv["ci"][0] <= cv["auc"] <= cv["ci"][1] <= 1.0
    # The same model trained on every labelled text and scored on them: the in-sample number that the
    # CV row replaces. It lies above the out-of-sample interval.
    (tmp_path / "all").mkdir()
    fit_fasttext(
        [t for t, lab in zip(texts, y) if lab],
        [t for t, lab in zip(texts, y) if not lab],
        tmp_path / "all",
        small_config(),
        QUALITY,
    )
    (tmp_path / "all" / METADATA_FILE).write_text(
        json.dumps({"model_sha256": sha256_file(tmp_path / "all" / MODEL_FILE)})
    )
    in_sample = roc_auc(y, QualityModel(tmp_path / "all").predict(texts))
    assert in_sample > cv["ci"][1]

    # A quality model whose training inputs include the labelled file is flagged; another is not.
    lee = data_dir / "quality" / "lee_background.cor"
    train_quality([labelled], [lee], tmp_path / "on-labels", small_config())
    train_quality(
        [data_dir / "quality" / "enwiki_sample_articles.jsonl"], [lee], tmp_path / "other", small_config()
    )
    report, _ = evaluate_signals(
        labelled, [f"quality={tmp_path / 'on-labels'}", f"quality={tmp_path / 'other'}"], settings
    )
    assert [r["in_sample"] for r in report["signals"]] == [True, False]
    assert (
        "IN-SAMPLE" in signals_table(report).splitlines()[4]
        and "IN-SAMPLE" not in signals_table(report).splitlines()[5]
    )
    # --model with --signal: the model is one more row, first, flagged the same way.
    args = [
        "evaluate",
        "--model",
        str(tmp_path / "on-labels"),
        "--labelled",
        str(labelled),
        "--signal",
        "length_chars",
    ]
    assert main(args) == 0
    rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["signals"]
    assert [(r["signal"], r["in_sample"]) for r in rows] == [("quality", True), ("length_chars", False)]


def _doubled(texts: list[str]) -> list[str]:
    """Real pages with their text repeated once (a template printed twice): gives the repetition
    statistics values above zero, which the DCLM documents alone rarely have."""
    return [t + "\n\n" + t for t in texts[:30]]


# (statistic, the filter with only its rule on at threshold t, the filter's reason, drops above t?)
RULES = [
    ("gopher_dup_para_frac", lambda t: GopherRepetition(**{**OFF_REPETITION, "dup_para_frac": t}), "dup_para_frac", True),
    ("gopher_dup_para_char_frac", lambda t: GopherRepetition(**{**OFF_REPETITION, "dup_para_char_frac": t}), "dup_para_char_frac", True),
    ("gopher_dup_line_frac", lambda t: GopherRepetition(**{**OFF_REPETITION, "dup_line_frac": t}), "dup_line_frac", True),
    ("gopher_dup_line_char_frac", lambda t: GopherRepetition(**{**OFF_REPETITION, "dup_line_char_frac": t}), "dup_line_char_frac", True),
    ("gopher_top_2_gram_frac", lambda t: GopherRepetition(**{**OFF_REPETITION, "top_n_grams": ((2, t),)}), "top_2_gram", True),
    ("gopher_top_4_gram_frac", lambda t: GopherRepetition(**{**OFF_REPETITION, "top_n_grams": ((4, t),)}), "top_4_gram", True),
    ("gopher_dup_5_gram_frac", lambda t: GopherRepetition(**{**OFF_REPETITION, "dup_n_grams": ((5, t),)}), "duplicated_5_n_grams", True),
    ("gopher_dup_10_gram_frac", lambda t: GopherRepetition(**{**OFF_REPETITION, "dup_n_grams": ((10, t),)}), "duplicated_10_n_grams", True),
    ("gopher_words", lambda t: GopherQuality(**{**OFF_QUALITY, "min_doc_words": t}), "gopher_short_doc", False),
    ("gopher_mean_word_length", lambda t: GopherQuality(**{**OFF_QUALITY, "min_avg_word_length": t}), "gopher_below_avg_threshold", False),
    ("gopher_hash_ratio", lambda t: GopherQuality(**{**OFF_QUALITY, "max_symbol_word_ratio": t}), "gopher_too_many_hashes", True),
    ("gopher_bullet_lines_frac", lambda t: GopherQuality(**{**OFF_QUALITY, "max_bullet_lines_ratio": t}), "gopher_too_many_bullets", True),
    ("gopher_ellipsis_lines_frac", lambda t: GopherQuality(**{**OFF_QUALITY, "max_ellipsis_lines_ratio": t}), "gopher_too_many_end_ellipsis", True),
    ("gopher_alpha_words_frac", lambda t: GopherQuality(**{**OFF_QUALITY, "max_non_alpha_words_ratio": t}), "gopher_below_alpha_threshold", False),
    ("gopher_stop_words", lambda t: GopherQuality(**{**OFF_QUALITY, "min_stop_words": t}), "gopher_enough_stop_words", False),
    ("c4_sentences", lambda t: C4Quality(min_num_sentences=math.ceil(t), filter_lorem_ipsum=False, filter_curly_bracket=False), "too_few_sentences", False),
    ("fineweb_line_punct_ratio", lambda t: FineWebQuality(**{**OFF_FINEWEB, "line_punct_thr": t}), "line_punct_ratio", False),
    ("fineweb_short_line_ratio", lambda t: FineWebQuality(**{**OFF_FINEWEB, "short_line_thr": t}), "short_line_ratio", True),
    ("fineweb_char_dup_ratio", lambda t: FineWebQuality(**{**OFF_FINEWEB, "char_duplicates_ratio": t}), "char_dup_ratio", True),
    ("fineweb_list_ratio", lambda t: FineWebQuality(**{**OFF_FINEWEB, "new_line_ratio": t}), "list_ratio", True),
]  # fmt: skip


@pytest.fixture(scope="module")
def corpus(real):
    texts = real[0] + _doubled(real[0])
    return texts, statistic_columns(texts, [r[0] for r in RULES])


@pytest.mark.parametrize(("stat", "make", "reason", "above"), RULES, ids=[r[0] for r in RULES])
def test_each_statistic_crosses_its_filters_threshold_where_the_filter_drops(
    corpus, stat, make, reason, above
):
    texts, cols = corpus
    values = cols[stat]
    distinct = np.unique(values)
    m = len(distinct) // 2
    # The threshold: halfway between two middle values seen, so that documents fall on both sides and
    # none sits on it; never 0, which the filters read as "rule off".
    t = float(distinct[m - 1] + distinct[m]) / 2 if m else 0.5
    f = make(t)
    drops = np.array(
        [(f.kept_lines(x)[1] if isinstance(f, C4Quality) else f.reason(x)) == reason for x in texts]
    )
    expected = values > t if above else values < t
    assert 0 < expected.sum() < len(texts), "every document on one side: the threshold tests nothing"
    assert np.array_equal(drops, expected), [texts[i][:80] for i in np.flatnonzero(drops != expected)[:3]]
