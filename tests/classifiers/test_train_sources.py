"""train-quality the ways that work: weighted sources, DCLM's preset, and FineWeb-Edu's `--labels`.

Real data: the shared Wikipedia articles and ABC news as positives; the DCLM human-labelled CC documents
(label 0) and the real WARC pages `extract` keeps (conftest's `extract_out`) as negatives; the DCLM human
labels turned into an `annotate` labels.jsonl for `--labels`. Models are the small test size (dim 16,
20k buckets) unless the preset's own sizes are what is checked.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import classifiers.train as train_mod
from classifiers.cli import main
from classifiers.model import QualityModel
from tests.classifiers.conftest import SMALL

ROOT = Path(__file__).resolve().parents[2]
SMALL_SET = ["--set", "fasttext.dim=16", "--set", "fasttext.bucket=20000"]


def _texts(path: Path, min_chars: int = 100) -> list[str]:
    """The documents of a shared file as train-quality's docs define them (JSONL `text`, or one per
    non-empty line), read here with plain json/str so the test does not lean on the reader it checks."""
    if path.suffix == ".jsonl":
        raw = [
            json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
    else:
        raw = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [t.strip() for t in raw if len(t.strip()) >= min_chars]


@pytest.fixture(scope="module")
def dclm_negatives(tmp_path_factory, labelled: Path) -> Path:
    """The 98 DCLM documents people labelled low quality, as a JSONL of `text`."""
    out = tmp_path_factory.mktemp("neg") / "dclm_label0.jsonl"
    rows = [json.loads(line) for line in labelled.read_text(encoding="utf-8").splitlines()]
    out.write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in rows if r["label"] == 0))
    return out


def _config(tmp_path: Path, name: str, data: dict) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps({**SMALL, **data}))  # JSON is YAML
    return p


def _train_capturing(monkeypatch, argv: list[str]) -> dict[str, list[str]]:
    """Run the CLI (exit 0 asserted) and return the split it trained on (train/held-out texts per class)."""
    seen: dict[str, list[str]] = {}
    real = train_mod.prepare_sources

    def spy(sources, cfg):
        split, counts = real(sources, cfg)
        seen.update(split)
        return split, counts

    monkeypatch.setattr(train_mod, "prepare_sources", spy)
    assert main(argv) == 0
    return seen


def test_one_source_in_the_config_is_the_old_flags_byte_for_byte(tmp_path, positives, dclm_negatives):
    # The same inputs and seed through --positive/--negative and through a two-entry sources: list
    # give the same model.bin (thread 1: fastText is deterministic, so any difference in the mix shows).
    old, new = tmp_path / "flags", tmp_path / "sources"
    flags = ["--positive", str(positives[0]), "--negative", str(dclm_negatives)]
    assert main(["train-quality", *flags, "--output", str(old), *SMALL_SET]) == 0
    cfg = _config(
        tmp_path,
        "c.yaml",
        {
            "sources": [
                {"path": str(positives[0]), "label": "positive"},
                {"path": str(dclm_negatives), "label": "negative"},
            ]
        },
    )
    assert main(["train-quality", "--config", str(cfg), "--output", str(new)]) == 0
    assert (old / "model.bin").read_bytes() == (new / "model.bin").read_bytes()


def test_weights_set_the_training_mix(tmp_path, monkeypatch, capsys, positives, dclm_negatives, extract_out):
    enwiki, lee = positives
    wiki_docs, lee_docs = set(_texts(enwiki)), _texts(lee)
    dclm_docs = set(_texts(dclm_negatives))
    mixes = {}
    for w_wiki, w_lee in ((1, 3), (3, 1)):
        cfg = _config(
            tmp_path,
            f"c{w_wiki}.yaml",
            {
                "sources": [
                    {"path": str(enwiki), "label": "positive", "weight": w_wiki},
                    {"path": str(lee), "label": "positive", "weight": w_lee},
                    {"path": str(dclm_negatives), "label": "negative"},
                    {"path": str(extract_out), "label": "negative"},
                ]
            },
        )
        out = tmp_path / f"m{w_wiki}"
        split = _train_capturing(monkeypatch, ["train-quality", "--config", str(cfg), "--output", str(out)])
        assert "share 0.750" in capsys.readouterr().out  # the mix is printed per source
        meta = json.loads((out / "metadata.json").read_text())
        src = {s["name"]: s for s in meta["training_data"]["sources"]}
        train = Counter(split["train_pos"])
        from_wiki = sum(n for t, n in train.items() if t in wiki_docs)
        total = len(split["train_pos"])
        assert from_wiki + sum(n for t, n in train.items() if t in set(lee_docs)) == total
        # Each source's share of its class's training examples is weight / sum of weights, within one
        # document: the examples are whole documents, split by largest remainder.
        assert abs(from_wiki - total * w_wiki / (w_wiki + w_lee)) < 1
        assert src[str(enwiki)]["train_examples"] == from_wiki  # the metadata says what was trained on
        assert src[str(lee)]["train_examples"] == total - from_wiki
        # Read, deduplicated, used: lee_background.cor repeats some of its lines.
        assert src[str(lee)]["documents"] == len(lee_docs)
        assert src[str(lee)]["duplicates_dropped"] == len(lee_docs) - len(set(lee_docs))
        for cls in ("pos", "neg"):  # nothing held out is trained on, up-sampled or not
            assert not set(split[f"holdout_{cls}"]) & set(split[f"train_{cls}"])
        mixes[w_wiki] = from_wiki / total
        # Negatives, weight 1 each: the 40 extracted pages cannot fill half the class, so they are
        # up-sampled (repeated) to their share, while the DCLM documents are drawn without repeats.
        ext = src[str(extract_out)]
        assert ext["upsampled"] and ext["train_examples"] > ext["train_distinct"]
        neg_train = Counter(split["train_neg"])
        assert abs(ext["train_examples"] - len(split["train_neg"]) / 2) < 1
        assert max(n for t, n in neg_train.items() if t not in dclm_docs) >= 2
        assert max(n for t, n in neg_train.items() if t in dclm_docs) == 1
    assert mixes[1] < 0.27 and mixes[3] > 0.73  # 1/4 vs 3/4, each within one document of ~100


def test_dclm_preset_reaches_fasttext(tmp_path, monkeypatch, positives, dclm_negatives):
    """The preset's values (DCLM's, cited in the file) are what fastText trains with: read back from
    model.bin (fastText stores dim, epoch, minCount, wordNgrams, loss, bucket) and, for lr and thread
    (not stored), from the arguments the training subprocess received."""
    import fasttext

    calls = []
    real = subprocess.run

    def spy(cmd, **kw):
        calls.append(json.loads(cmd[-1]))
        return real(cmd, **kw)

    monkeypatch.setattr(train_mod.subprocess, "run", spy)
    out = tmp_path / "dclm"
    argv = ["train-quality", "--config", str(ROOT / "configs" / "quality-dclm.yaml")]
    # fastText's default 2M buckets make an 800 MB model: a smaller table here, the rest as published.
    argv += [
        "--set",
        "fasttext.bucket=20000",
        "--positive",
        str(positives[0]),
        "--negative",
        str(dclm_negatives),
    ]
    assert main([*argv, "--output", str(out)]) == 0
    args = fasttext.load_model(str(out / "model.bin")).f.getArgs()
    # DCLM: --wordNgrams 2 and its script's defaults dim 100, epoch 5, minCount 1; softmax (fastText's).
    assert (args.wordNgrams, args.dim, args.epoch, args.minCount) == (2, 100, 5, 1)
    assert str(args.loss).endswith("softmax") and args.bucket == 20_000  # --set still overrides
    (kwargs,) = [c["kwargs"] for c in calls]
    assert kwargs["lr"] == 0.1 and kwargs["thread"] == 1  # DCLM's lr; 1 thread for determinism
    preset = json.loads((out / "metadata.json").read_text())["config"]["fasttext"]
    assert preset["bucket"] == 20_000 and preset["lr"] == 0.1


def _labels_file(path: Path, rows: list[dict], null_every: int = 10) -> Counter:
    """An `annotate` labels.jsonl (key, text, score, reply, ...) from human labels: 1 -> 4, 0 -> 1,
    every `null_every`-th reply unparseable (score null); returns how many of each score were written."""
    written: Counter = Counter()
    with open(path, "w", encoding="utf-8") as f:
        for i, r in enumerate(rows):
            score = None if i % null_every == 0 else (4.0 if r["label"] == 1 else 1.0)
            reply = "no score here" if score is None else f"... Educational score: {score:g}"
            rec = {"key": f"k{i}", "id": str(i), "text": r["text"], "score": score, "reply": reply}
            f.write(json.dumps(rec) + "\n")
            written[score] += 1
    return written


def test_labels_train_a_classifier_that_ranks_unseen_documents(tmp_path, capsys, labelled):
    """Two-fold: train on the labels of one half of the DCLM documents, score the other half."""
    rows = [json.loads(line) for line in labelled.read_text(encoding="utf-8").splitlines()]
    idx = list(range(len(rows)))
    random.Random(0).shuffle(idx)
    aucs = []
    for k, (train_idx, test_idx) in enumerate(((idx[::2], idx[1::2]), (idx[1::2], idx[::2]))):
        labels = tmp_path / f"labels{k}.jsonl"
        written = _labels_file(labels, [rows[i] for i in train_idx])
        out = tmp_path / f"m{k}"
        assert main(["train-quality", "--labels", str(labels), "--output", str(out), *SMALL_SET]) == 0
        assert f"{written[None]} with a null score skipped" in capsys.readouterr().out
        lab = json.loads((out / "metadata.json").read_text())["training_data"]["labels"]
        assert lab["null_scores"] == written[None] and lab["records"] == len(train_idx)
        scores = QualityModel(out).predict([rows[i]["text"] for i in test_idx])
        aucs.append(roc_auc_score([rows[i]["label"] for i in test_idx], scores))
    # Out of sample, 109 documents per half (~60 positive, ~49 negative): a model that learnt nothing
    # has AUC 0.5 with standard error sqrt((n1+n2+1)/(12 n1 n2)) ~ 0.056 per half, ~0.040 for the mean
    # of the two. 0.58 is two of those above chance. Measured: mean 0.63-0.70 over seeds 0-4 (0.63 at
    # seed 0, the one here); the fastText CV of docs/classifiers.md gets 0.69 on all 218.
    assert np.mean(aucs) >= 0.58, aucs


def test_labels_binary_at_the_threshold(tmp_path, labelled):
    rows = [json.loads(line) for line in labelled.read_text(encoding="utf-8").splitlines()]
    labels = tmp_path / "labels.jsonl"
    written = _labels_file(labels, rows, null_every=7)
    out = tmp_path / "m"
    assert main(["train-quality", "--labels", str(labels), "--output", str(out), *SMALL_SET]) == 0
    lab = json.loads((out / "metadata.json").read_text())["training_data"]["labels"]
    long = [len(r["text"].strip()) >= 100 for r in rows]
    # Score 4 (human label 1) is >= 3, score 1 is below; nulls and documents under min_chars are out.
    expect_pos = sum(1 for i, r in enumerate(rows) if i % 7 and r["label"] == 1 and long[i])
    expect_neg = sum(1 for i, r in enumerate(rows) if i % 7 and r["label"] == 0 and long[i])
    assert (lab["positive_documents"], lab["negative_documents"]) == (expect_pos, expect_neg)
    assert lab["scores"] == {"1": written[1.0], "4": written[4.0], "null": written[None]}
    # At 5 no document is a positive: refused, naming the file and the threshold.
    rc = main(
        [
            "train-quality",
            "--labels",
            str(labels),
            "--output",
            str(tmp_path / "m5"),
            "--set",
            "score_threshold=5",
        ]
    )
    assert rc == 2 and not (tmp_path / "m5").exists()


def _bad(tmp_path: Path, capsys, argv: list[str], needle: str) -> None:
    out = tmp_path / "bad"
    assert main(["train-quality", *argv, "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err, err
    assert not out.exists()  # nothing half-written


def test_bad_inputs_exit_2_naming_them(tmp_path, capsys, positives, dclm_negatives):
    pos, neg = str(positives[0]), str(dclm_negatives)

    def cfg(*sources: dict) -> list[str]:
        return ["--config", str(_config(tmp_path, "bad.yaml", {"sources": list(sources)}))]

    p, n = {"path": pos, "label": "positive"}, {"path": neg, "label": "negative"}
    _bad(tmp_path, capsys, cfg(p, {**n, "weight": 0}), "sources[1] (path")
    _bad(tmp_path, capsys, cfg(p, {**n, "weight": -1}), "weight must be > 0")
    _bad(tmp_path, capsys, cfg(p, {**n, "label": "bad"}), "label must be one of positive, negative")
    _bad(tmp_path, capsys, cfg(p, {**n, "weigth": 2}), "unknown key sources[1].weigth")
    _bad(tmp_path, capsys, cfg(p), "no negative source")
    _bad(tmp_path, capsys, cfg(p, n, {**p, "weight": 2}), "the same path and label as sources[0]")
    _bad(tmp_path, capsys, cfg(p, {**n, "path": str(tmp_path / "nope.jsonl")}), "sources[1]: no such file")
    dup = tmp_path / "dup.jsonl"  # a second positive source holding only texts of the first
    dup.write_text("".join(json.dumps({"text": t}) + "\n" for t in _texts(positives[0])[:5]))
    _bad(
        tmp_path,
        capsys,
        cfg(p, {"path": str(dup), "label": "positive"}, n),
        "no documents left after deduplication",
    )
    _bad(tmp_path, capsys, [*cfg(p, n), "--positive", pos], "the config has a sources: list; drop --positive")
    _bad(tmp_path, capsys, ["--positive", pos], "give --positive FILE... and --negative FILE...")
    labels = tmp_path / "labels.jsonl"
    lines = [
        {"text": "x" * 200, "score": 4},
        {"text": "y" * 200, "score": 1},
        {"text": "z" * 200, "score": "high"},
    ]
    labels.write_text("".join(json.dumps(r) + "\n" for r in lines))
    _bad(
        tmp_path,
        capsys,
        ["--labels", str(labels)],
        f"{labels}:3: 'score' must be a number or null, got 'high'",
    )
    labels.write_text(json.dumps({"text": "x" * 200}) + "\n")
    _bad(tmp_path, capsys, ["--labels", str(labels)], f"{labels}:1: no 'score' field")
    _bad(tmp_path, capsys, ["--labels", str(tmp_path / "none.jsonl")], "no such file")
    _bad(tmp_path, capsys, ["--labels", str(labels), "--negative", neg], "drop --negative")
