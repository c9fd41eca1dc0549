"""The scoring stage: per file without Spark, the Spark job, and agreement with the evaluator."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from classifiers.cli import main
from classifiers.evaluate import load_labelled
from classifiers.metrics import roc_auc
from classifiers.model import QualityModel
from classifiers.score import ScoreJobConfig, score_file
from classifiers.scorer import Scorer
from core.output import OutputDir
from core.spark import SparkOptions
from core.stage import register
from curation.schema import DOC_SCHEMA


def _score_one(path, unit, model_dir, root):
    cfg = ScoreJobConfig.for_model(model_dir)
    OutputDir(root, ("docs", "stats", "done")).prepare("score", cfg.to_dict(), cfg.fingerprint())
    return score_file(path, unit, cfg, root)


def test_scorer_and_evaluator_agree(tmp_path, model_dir, labelled, capsys):
    texts, y = load_labelled(labelled)
    src = tmp_path / "labelled.parquet"
    pq.write_table(pa.table({"text": texts, "label": y.tolist()}), src)
    res = _score_one(src, "labelled", model_dir, tmp_path / "scored")
    assert res["status"] == "done"
    scored = pq.read_table(tmp_path / "scored" / "docs" / "labelled.parquet")
    preds = tmp_path / "preds.jsonl"
    rc = main(
        ["evaluate", "--model", str(model_dir), "--labelled", str(labelled), "--predictions", str(preds)]
    )
    assert rc == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"roc_auc", "precision", "recall", "threshold", "n"} <= set(last) and last["n"] == len(texts)
    ev = np.array([json.loads(line)["quality"] for line in preds.read_text().splitlines()], dtype=np.float32)
    # Same text, same model, same code path: equal as float32, no tolerance.
    assert np.array_equal(scored.column("quality").to_numpy(), ev)
    assert last["roc_auc"] == roc_auc(np.array(scored.column("label").to_pylist()), ev)


def test_score_file_keeps_columns_replaces_quality_and_nulls(tmp_path, extract_out, model_dir):
    src = next(p for p in sorted((extract_out / "docs").glob("*.parquet")) if pq.read_metadata(p).num_rows)
    table = pq.read_table(src)
    assert table.schema.remove_metadata().equals(DOC_SCHEMA)  # extract writes quality (null, no model)
    res = _score_one(src, "u", model_dir, tmp_path / "o")
    out = pq.read_table(tmp_path / "o" / "docs" / "u.parquet")
    assert out.column_names == table.column_names  # quality replaced in place, nothing dropped
    assert out.schema.field("quality").type == pa.float32()
    assert out.drop_columns(["quality"]).equals(table.drop_columns(["quality"]))
    direct = QualityModel(model_dir).predict(table.column("text").to_pylist())
    assert np.array_equal(out.column("quality").to_numpy(), direct)
    assert b"refinery" in out.schema.metadata  # extract's provenance survives
    assert res["docs"] == len(table) and (tmp_path / "o" / "done" / "u.json").is_file()

    # A foreign file: no quality column yet (appended), a null text (null score, counted), 0 rows.
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"text": ["some words here", None], "n": [1, 2]}), other)
    _score_one(other, "other", model_dir, tmp_path / "o2")
    o = pq.read_table(tmp_path / "o2" / "docs" / "other.parquet")
    assert o.column_names == ["text", "n", "quality"]
    assert o.column("quality").null_count == 1 and o.column("quality")[1].as_py() is None
    stats = json.loads((tmp_path / "o2" / "stats" / "other.json").read_text())
    assert stats["counters"]["quality_null_text"] == 1
    empty = tmp_path / "empty.parquet"
    pq.write_table(DOC_SCHEMA.empty_table(), empty)
    assert _score_one(empty, "empty", model_dir, tmp_path / "o3")["status"] == "done"
    assert pq.read_table(tmp_path / "o3" / "docs" / "empty.parquet").num_rows == 0


def test_score_cli_bad_inputs(tmp_path, model_dir, capsys):
    notext = tmp_path / "in" / "a.parquet"
    notext.parent.mkdir()
    pq.write_table(pa.table({"body": ["x"]}), notext)
    cases = [
        (["--input", str(tmp_path / "nope"), "--model", str(model_dir)], "no such input folder"),
        (["--input", str(notext.parent), "--model", str(model_dir)], "has no 'text' column (columns: body)"),
        (["--input", str(notext.parent), "--model", str(tmp_path)], "model.bin is missing"),
    ]
    for args, needle in cases:
        assert main(["score", *args, "--output", str(tmp_path / "out")]) == 2
        assert needle in capsys.readouterr().err


@pytest.mark.spark
def test_score_job_on_spark(spark, tmp_path, extract_out, model_dir, positives, capsys):
    from classifiers.score import run_score
    from core.output import OutputConflict

    master = spark.sparkContext.master
    res = run_score(extract_out, tmp_path / "scored", model_dir, spark=SparkOptions(master))
    inputs = sorted((extract_out / "docs").glob("*.parquet"))
    assert res.ok and res.inputs == res.processed == len(inputs)
    model = QualityModel(model_dir)
    total = 0
    for p in inputs:
        src = pq.read_table(p)
        out = pq.read_table(tmp_path / "scored" / "docs" / p.name)
        assert np.array_equal(out.column("quality").to_numpy(), model.predict(src.column("text").to_pylist()))
        total += len(src)
    stats = json.loads((tmp_path / "scored" / "stats.json").read_text())
    assert stats["docs_written"] == total and (tmp_path / "scored" / "_SUCCESS").exists()
    hist = sum(v for k, v in stats["counters"].items() if k.startswith("quality_bin_"))
    assert hist == total
    again = run_score(extract_out, tmp_path / "scored", model_dir, spark=SparkOptions(master))
    assert again.processed == 0 and again.skipped == len(inputs)  # done markers: nothing redone
    # Another model into the same folder is refused: outputs say which model made them.
    from classifiers.train import train_quality
    from tests.classifiers.conftest import small_config

    other = tmp_path / "other-model"
    train_quality(positives, [extract_out], other, small_config(seed=7))
    with pytest.raises(OutputConflict):
        run_score(extract_out, tmp_path / "scored", other, spark=SparkOptions(master))


def test_score_batch_size_zero_refused_before_spark(tmp_path, extract_out, model_dir, capsys):
    """It started Spark and failed every input with pyarrow's `batch_size must be greater than zero`."""
    out = tmp_path / "out"
    args = ["score", "--input", str(extract_out), "--model", str(model_dir), "--output", str(out)]
    for bad in ("0", "-3"):
        assert main([*args, "--batch-size", bad]) == 2
        assert f"--batch-size must be a positive integer, got {bad}" in capsys.readouterr().err
        assert not out.exists()


def test_evaluate_checks_before_the_work(tmp_path, model_dir, labelled, capsys):
    base = ["evaluate", "--model", str(model_dir), "--labelled", str(labelled)]
    for t in ("7", "-0.1", "nan"):
        assert main([*base, "--threshold", t]) == 2
        assert "--threshold must be in [0, 1]" in capsys.readouterr().err
    missing = tmp_path / "missing" / "dir" / "p.jsonl"
    assert main([*base, "--predictions", str(missing)]) == 2
    captured = capsys.readouterr()
    assert f"folder {missing.parent} does not exist" in captured.err
    assert captured.out == ""  # refused before the model ran (no metrics printed)
    assert main([*base, "--predictions", str(tmp_path)]) == 2
    assert "is a folder; name a file" in capsys.readouterr().err


@register("scorer", "length")  # a scorer registered by name in the one registry (core/stage.py)
class _LengthScorer(Scorer):
    """A scorer written for the test: characters of the text, only for the language its "model" names."""

    kind = "length"

    def __init__(self, lang: str) -> None:
        self.lang = lang

    @property
    def columns(self):
        return ("length",)

    def score(self, texts, langs):
        return {
            "length": np.array(
                [len(t) if t is not None and g == self.lang else np.nan for t, g in zip(texts, langs)],
                dtype=np.float32,
            )
        }

    @classmethod
    def describe(cls, model, options):
        return {"languages": [model]}

    @classmethod
    def load(cls, model, options):
        return cls(model)


def test_per_language_models_fill_one_column_and_overlaps_are_refused(tmp_path, model_dir):
    import classifiers.scorer as scorer_mod

    texts = ["an English page", "eine deutsche Seite", "une page", None]
    langs = ["en", "de", "fr", "en"]
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ["a", "b", "c", "d"], "text": texts, "lang": langs}), src)
    specs = [scorer_mod.make_spec("length", "en"), scorer_mod.make_spec("length", "de")]
    cfg = ScoreJobConfig.for_model(model_dir, specs)
    root = tmp_path / "scored"
    OutputDir(root, ("docs", "stats", "done")).prepare("score", cfg.to_dict(), cfg.fingerprint())
    assert score_file(src, "in", cfg, root)["status"] == "done"
    out = pq.read_table(root / "docs" / "in.parquet")
    assert out.column_names == ["id", "text", "lang", "quality", "length"]
    # en and de from their own model; fr has none, the null text has none: both null, and counted
    assert out.column("length").to_pylist() == [15.0, 19.0, None, None]
    assert out.column("quality").null_count == 1  # only the null text
    unit_stats = json.loads(next((root / "stats").glob("*.json")).read_text())
    assert unit_stats["counters"]["length_null"] == 2
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="two length models score the same languages"):
        ScoreJobConfig.for_model(None, [*specs, scorer_mod.make_spec("length", "de")])
    with pytest.raises(ConfigError, match="no scorer"):
        ScoreJobConfig.for_model(None, [])


def test_documents_per_process_from_a_sample_of_footers(tmp_path, monkeypatch):
    """Scorer.plan's input: the rows of the inputs over the planned cores; at most ROWS_SAMPLE_FILES
    footers are read (counted here), scaled to every file."""
    import classifiers.score as score_mod

    files = []
    for i in range(40):
        files.append(tmp_path / f"p{i:02d}.parquet")
        pq.write_table(pa.table({"text": [f"t{j}" for j in range(30)]}), files[-1])
    opened = []
    real = score_mod.open_parquet
    monkeypatch.setattr(score_mod, "open_parquet", lambda f: opened.append(f) or real(f))
    # the cores as core.spark.planned_cores says (its own tests cover it; a session already running in
    # this process would answer for it here)
    monkeypatch.setattr(score_mod, "planned_cores", lambda spark: 2)
    assert score_mod._docs_per_process(files, SparkOptions("local[2]")) == 40 * 30 // 2
    assert len(opened) == score_mod.ROWS_SAMPLE_FILES
    # a cluster master's cores are unknown until executors register: one file's rows per process
    monkeypatch.setattr(score_mod, "planned_cores", lambda spark: None)
    assert score_mod._docs_per_process(files, SparkOptions("spark://nowhere:7077")) == 30
    assert score_mod._docs_per_process([], SparkOptions("local[2]")) == 0
