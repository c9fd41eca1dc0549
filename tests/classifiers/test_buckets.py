"""Nemotron-CC's quality buckets (classifiers/buckets.py) on the real DCLM human-labelled documents.

Two real signals of the 218 Common Crawl documents (quality/dclm_human_labels_dev.jsonl): the length in
characters (higher is better, as its 0.61 AUC on these labels says) and profanity-check's `toxicity`
(lower is better). `classifiers calibrate-buckets` cuts each into 20 buckets; the checks are by rank,
computed here without the module's quantile code: each bucket of the length holds its 1/20 of the
documents, the longest 5% are bucket 19 and the shortest 5% bucket 0, the least toxic 5% are 19 in the
toxicity column, and through the score job each document gets the larger of its two buckets.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from classifiers.buckets import BUCKETS_FILE, COLUMN, BucketScorer
from classifiers.cli import main
from classifiers.evaluate import read_labelled
from classifiers.model import ModelError
from classifiers.score import ScoreJobConfig, check_inputs, score_file
from classifiers.scorer import load_scorer, make_spec
from core.output import OutputDir

N = 20


@pytest.fixture(scope="module")
def scored(tmp_path_factory, labelled) -> tuple[Path, dict[str, np.ndarray]]:
    """A Parquet folder of the labelled texts with `chars` and the real toxicity scorer's column."""
    texts = read_labelled(labelled).texts
    tox = load_scorer(make_spec("toxicity", "profanity-check")).score(texts, [None] * len(texts))["toxicity"]
    cols = {"chars": np.array([len(t) for t in texts], dtype=np.float64), "toxicity": tox.astype(np.float64)}
    src = tmp_path_factory.mktemp("buckets") / "in"
    src.mkdir()
    pq.write_table(pa.table({"text": texts, **cols}), src / "part.parquet")
    return src, cols


@pytest.fixture(scope="module")
def model(scored, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("buckets-model") / "m"
    argv = ["calibrate-buckets", "--input", str(scored[0]), "--column", "chars", "--column", "toxicity:lower"]
    assert main([*argv, "--buckets", str(N), "--output", str(out)]) == 0
    return out


def _alone(model: Path, column: str, values: np.ndarray) -> np.ndarray:
    """The bucket of one column alone: the scorer with the other column null everywhere."""
    other = {"chars": "toxicity", "toxicity": "chars"}[column]
    nan = np.full(len(values), np.nan)
    return BucketScorer.load(str(model), {}).score(["x"] * len(values), [None] * len(values),
                                                   columns={column: values, other: nan})[COLUMN]  # fmt: skip


def test_each_bucket_holds_its_twentieth_by_rank(scored, model):
    _, cols = scored
    n = len(cols["chars"])
    b = _alone(model, "chars", cols["chars"])
    counts = np.bincount(b.astype(int), minlength=N)
    # 218 documents in 20 buckets: 10.9 each; +-2 for the cut points' interpolation and tied lengths
    assert (
        counts.sum() == n and counts.min() >= math.floor(n / N) - 2 and counts.max() <= math.ceil(n / N) + 2
    ), counts
    order = np.argsort(cols["chars"], kind="stable")
    assert np.all(np.diff(b[order]) >= 0)  # longer never lands lower
    top = int(n * 0.05)  # the longest 10 of 218 (4.6%) are inside the top 5%
    assert set(b[order[-top:]]) == {N - 1} and set(b[order[:top]]) == {0}
    # lower is better for toxicity: the least toxic 5% are the top bucket
    t = _alone(model, "toxicity", cols["toxicity"])
    least = np.argsort(cols["toxicity"], kind="stable")[:top]
    assert set(t[least]) == {N - 1}, cols["toxicity"][least]


def test_the_score_job_writes_the_max_of_the_buckets(scored, model, tmp_path):
    src, cols = scored
    spec = make_spec("quality-buckets", str(model))
    assert spec.identity["inputs"] == ["chars", "toxicity"] and spec.identity["buckets"] == N
    check_inputs([spec], [src / "part.parquet"])
    cfg = ScoreJobConfig.for_model(None, [spec])
    root = tmp_path / "scored"
    OutputDir(root, ("docs", "stats", "done")).prepare("score", cfg.to_dict(), cfg.fingerprint())
    assert score_file(src / "part.parquet", "part", cfg, root)["status"] == "done"
    got = pq.read_table(root / "docs" / "part.parquet").column(COLUMN).to_numpy()
    want = np.maximum(_alone(model, "chars", cols["chars"]), _alone(model, "toxicity", cols["toxicity"]))
    np.testing.assert_array_equal(got, want)
    assert got.min() >= 0 and got.max() == N - 1 and np.all(got == np.round(got))
    # the max of two buckets puts more than 1/20 in the top one: 2/20 at most, when no document is top in both
    assert np.mean(got == N - 1) <= 2 / N + 0.01
    # a document null in one column is bucketed by the other; null in both stays null
    s = BucketScorer.load(str(model), {})
    r = s.score(["a", "b", None], [None] * 3, columns={"chars": np.array([1e9, np.nan, 1e9]),
                                                        "toxicity": np.array([np.nan, np.nan, 0.0])})[COLUMN]  # fmt: skip
    assert r[0] == N - 1 and np.isnan(r[1]) and np.isnan(r[2])


def test_bad_calibrations_and_tampered_folders_are_refused_by_name(scored, model, tmp_path, capsys):
    src = scored[0]
    for column, message in (
        ("perplexity_bpb:lowest", "perplexity_bpb:lowest"),
        ("quality", "no column quality"),
    ):
        out = tmp_path / column.replace(":", "-")
        assert main(["calibrate-buckets", "--input", str(src), "--column", column, "--output", str(out)]) == 2
        assert message in capsys.readouterr().err and not out.exists()
    bad = tmp_path / "tampered"
    bad.mkdir()
    for f in model.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    obj = json.loads((bad / BUCKETS_FILE).read_text())
    obj["columns"][0]["cuts"][0] -= 1
    (bad / BUCKETS_FILE).write_text(json.dumps(obj))
    with pytest.raises(ModelError, match="model_sha256"):
        make_spec("quality-buckets", str(bad))
