"""train-quality: determinism, metadata, a held-out AUC floor, and clear errors on bad input."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from classifiers.cli import main
from classifiers.evaluate import load_labelled
from classifiers.model import QualityModel
from classifiers.train import train_quality
from tests.classifiers.conftest import small_config


def test_same_seed_same_model_other_seed_other_model(tmp_path, positives, extract_out, labelled, model_dir):
    texts, _ = load_labelled(labelled)
    again = tmp_path / "again"
    train_quality(positives, [extract_out], again, small_config())
    a, b = QualityModel(model_dir).predict(texts), QualityModel(again).predict(texts)
    assert np.array_equal(a, b)  # thread=1 + seed: bit-identical, no tolerance
    assert (again / "model.bin").read_bytes() == (model_dir / "model.bin").read_bytes()
    other = tmp_path / "other"
    train_quality(positives, [extract_out], other, small_config(seed=1))
    assert not np.array_equal(a, QualityModel(other).predict(texts))


def test_metadata_records_data_and_evaluation(model_dir, positives, extract_out):
    meta = json.loads((model_dir / "metadata.json").read_text())
    assert meta["model_sha256"] == hashlib.sha256((model_dir / "model.bin").read_bytes()).hexdigest()
    assert meta["fasttext_version"] == "fasttext-numpy2==0.10.4"  # the pinned engine
    assert meta["config"]["fasttext"]["thread"] == 1 and meta["config"]["seed"] == 0
    pos = {f["path"]: f for f in meta["training_data"]["positive"]}
    for p in positives:
        assert pos[str(p)]["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
    neg_docs = sum(f["documents"] for f in meta["training_data"]["negative"])
    assert neg_docs == 40  # what the 3 WARCs yield under FineWeb's filters (conftest)
    c = meta["counts"]
    # Balanced by downsampling to the 40 negatives (all distinct), 20% of each class held out.
    assert c["train_pos"] == c["train_neg"] == 32 and c["holdout_pos"] == c["holdout_neg"] == 8
    assert meta["heldout"]["n"] == 16


def test_heldout_auc_floor(model_dir):
    # Floor 0.9. Measured on this 8 + 8 split: 1.0 at seeds 0, 2, 3, 4 and 0.984 at seed 1
    # (bench: 0.99-0.999 on 58 + 58 with the full data). With 64 positive/negative pairs, 0.9
    # allows 6 mis-ordered pairs: slack for another fastText build, while a model that learnt
    # nothing (AUC ~0.5) or a label flip (AUC ~0) fails.
    meta = json.loads((model_dir / "metadata.json").read_text())
    assert meta["heldout"]["roc_auc"] >= 0.9


def test_cli_bad_inputs_exit_2_with_a_clear_error(tmp_path, capsys, extract_out, positives):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    cases = [
        ([str(tmp_path / "missing.txt")], [str(extract_out)], "no such file or folder"),
        ([str(empty)], [str(extract_out)], "no documents (empty file)"),
        ([str(positives[0])], [str(extract_out / "stats")], "folder holds no .parquet files"),
    ]
    for i, (pos, neg, needle) in enumerate(cases):
        out = tmp_path / f"m{i}"
        rc = main(["train-quality", "--positive", *pos, "--negative", *neg, "--output", str(out)])
        assert rc == 2
        assert needle in capsys.readouterr().err
        assert not out.exists()  # nothing half-written
    bad_cfg = tmp_path / "c.yaml"
    bad_cfg.write_text("fasttext:\n  epochs: 3\n")
    rc = main(
        [
            "train-quality",
            "--positive",
            str(positives[0]),
            "--negative",
            str(extract_out),
            "--output",
            str(tmp_path / "m"),
            "--config",
            str(bad_cfg),
        ]
    )
    assert rc == 2
    assert "unknown key fasttext.epochs; allowed:" in capsys.readouterr().err
