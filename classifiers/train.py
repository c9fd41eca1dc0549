"""Train the fastText quality classifier (DCLM-style): high-quality reference text vs web documents.

Recipe (Li et al. 2024, "DataComp-LM", section 4.4: a fastText bigram classifier, reference text as
positives and random web text as negatives, is the filter that worked best):
1. read the positive and negative inputs (classifiers/data.py: JSONL, Parquet, text);
2. drop exact duplicate texts within a class, and texts found in both classes (contradictory
   labels), so no document can sit in both the training and the held-out split;
3. shuffle each class with the seed, cap it (`max_docs_per_class`), and with `balance: downsample`
   sample the larger class down to the smaller;
4. hold out `holdout_fraction` of each class (stratified), train fastText on the rest with
   `seed` and `thread` from the config (thread 1 = deterministic, see classifiers/config.py);
5. score the held-out documents through the same `QualityModel.predict` that `score` and
   `evaluate` use, and write MODEL_DIR atomically: model.bin + metadata.json are built in a
   temporary sibling folder and renamed into place, so a crash never leaves a half-written model.

`train-toxicity` (classifiers/toxicity.py) is the same recipe with other labels and another model
class: `train_fasttext` takes them as a `FastTextTask`; `train_quality` is its quality instance.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from classifiers.config import FastTextTrainConfig, QualityTrainConfig
from classifiers.data import DataError, FileDocs, read_inputs
from classifiers.metrics import binary_metrics
from classifiers.model import METADATA_FILE, MODEL_FILE, FastTextClassifier, QualityModel, _ensure_fasttext
from classifiers.text import LABEL_HIGH, LABEL_LOW, MAX_CHARS, fasttext_line
from core.errors import OutputConflict
from core.files import sha256_file

log = logging.getLogger(__name__)

FORMAT = "refinery-quality-fasttext-v1"
# Held-out metrics are reported at this threshold; recipes choose their own (scores are columns).
DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class FastTextTask:
    """What one kind of fastText classifier trains: its labels, its folder format, its model class."""

    format: str
    """metadata.json's `format`."""
    positive_label: str
    negative_label: str
    model_cls: type[FastTextClassifier]
    """Scores the held-out split: the class that will score the folder later."""


QUALITY = FastTextTask(FORMAT, LABEL_HIGH, LABEL_LOW, QualityModel)


def _dedup(docs: list[str]) -> tuple[list[str], int]:
    seen: set[str] = set()
    out = []
    for d in docs:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out, len(docs) - len(out)


def _fasttext_version() -> str:
    for dist in ("fasttext-numpy2", "fasttext", "fasttext-wheel"):
        try:
            return f"{dist}=={importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def prepare_split(
    pos_files: list[FileDocs], neg_files: list[FileDocs], cfg: FastTextTrainConfig
) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Dedup, balance and split: {'train_pos', 'train_neg', 'holdout_pos', 'holdout_neg'} + counts."""
    pos, pos_dups = _dedup([d for f in pos_files for d in f.docs])
    neg, neg_dups = _dedup([d for f in neg_files for d in f.docs])
    both = set(pos) & set(neg)
    if both:
        pos = [d for d in pos if d not in both]
        neg = [d for d in neg if d not in both]
    counts = {
        "positive_read": sum(len(f.docs) for f in pos_files),
        "negative_read": sum(len(f.docs) for f in neg_files),
        "duplicates_dropped": pos_dups + neg_dups,
        "in_both_classes_dropped": len(both),
    }
    rng = random.Random(cfg.seed)
    rng.shuffle(pos)
    rng.shuffle(neg)
    if cfg.max_docs_per_class is not None:
        pos, neg = pos[: cfg.max_docs_per_class], neg[: cfg.max_docs_per_class]
    if cfg.balance == "downsample":
        n = min(len(pos), len(neg))
        pos, neg = pos[:n], neg[:n]
    for name, docs in (("positive", pos), ("negative", neg)):
        if len(docs) < 2:
            raise DataError(
                f"{len(docs)} {name} document(s) left after deduplication and balancing; need at least 2 "
                "per class (one to train on, one to hold out)"
            )
    split: dict[str, list[str]] = {}
    for name, docs in (("pos", pos), ("neg", neg)):
        # At least one held-out and one training document per class, whatever the fraction.
        k = min(max(1, round(len(docs) * cfg.holdout_fraction)), len(docs) - 1)
        split[f"holdout_{name}"], split[f"train_{name}"] = docs[:k], docs[k:]
    counts.update({f"{k}": len(v) for k, v in split.items()})
    return split, counts


# Runs in a fresh interpreter: see _train_in_subprocess.
_WORKER = """
import json, sys
import fasttext
a = json.loads(sys.argv[1])
model = fasttext.train_supervised(input=a["input"], seed=a["seed"], verbose=0, **a["kwargs"])
model.save_model(a["output"])
"""


def _train_in_subprocess(train_file: Path, model_path: Path, cfg: FastTextTrainConfig) -> None:
    """`fasttext.train_supervised` in a fresh Python process.

    Why: in fasttext-numpy2 0.10.4, every training after the first one in a process fails with
    "Encountered NaN" (measured on the shared data: same file, same seed, same arguments; the first
    call in a process succeeded, the next 8 of 8 failed), which looks like C++ state that outlives a
    model. In fresh processes 4 of 4 runs succeeded with byte-identical model.bin. A subprocess per
    training (about 0.3 s of start-up) makes training independent of what ran before it in the
    same process: tests, benchmarks and sweeps train many models.
    """
    args = {
        "input": str(train_file),
        "output": str(model_path),
        "seed": cfg.seed,
        "kwargs": cfg.fasttext.train_kwargs(),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _WORKER, json.dumps(args)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 or not model_path.is_file():
        tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        hint = " (the model diverged: lower fasttext.lr)" if "NaN" in tail else ""
        raise RuntimeError(f"fastText training failed: {tail}{hint}")


def fit_fasttext(
    pos: list[str], neg: list[str], folder: Path, cfg: FastTextTrainConfig, task: FastTextTask
) -> float:
    """fastText trained on `pos` vs `neg` as they are (no dedup, balancing or hold-out: the caller
    split them) into `folder`/model.bin; returns the training seconds. Also what `classifiers evaluate`
    trains each cross-validation fold with (classifiers/evaluate.py)."""
    rows = [(task.positive_label, d) for d in pos] + [(task.negative_label, d) for d in neg]
    random.Random(cfg.seed).shuffle(rows)  # fastText streams its file in order: mix the classes
    train_file = folder / "train.txt"
    with open(train_file, "w", encoding="utf-8") as f:
        for label, doc in rows:
            f.write(f"{label} {fasttext_line(doc)}\n")
    t_train = time.time()
    _train_in_subprocess(train_file, folder / MODEL_FILE, cfg)
    seconds = time.time() - t_train
    train_file.unlink()
    return seconds


def check_new_folder(output: str | Path) -> Path:
    """`output` as a Path; OutputConflict unless it is free (absent, or an empty folder)."""
    out = Path(output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise OutputConflict(f"{out} already exists; choose another --output or delete it")
    return out


@contextmanager
def new_folder(out: Path) -> Iterator[Path]:
    """A temporary sibling of `out` to write a model into, renamed to `out` when the block ends
    without error and removed when it fails: a crash never leaves a half-written model folder."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        yield tmp
        if out.is_dir():
            out.rmdir()  # empty (checked by check_new_folder); rename needs the name free
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def train_quality(
    positive: list[str | Path], negative: list[str | Path], output: str | Path, cfg: QualityTrainConfig
) -> dict[str, Any]:
    """Train the quality model (high-quality text vs web documents); returns its metadata."""
    return train_fasttext(positive, negative, output, cfg, QUALITY)


def train_fasttext(
    positive: list[str | Path],
    negative: list[str | Path],
    output: str | Path,
    cfg: FastTextTrainConfig,
    task: FastTextTask,
) -> dict[str, Any]:
    """Train, evaluate on the held-out split, write MODEL_DIR; returns its metadata."""
    out = check_new_folder(output)
    t0 = time.time()
    pos_files = read_inputs(list(positive), cfg.min_chars)
    neg_files = read_inputs(list(negative), cfg.min_chars)
    split, counts = prepare_split(pos_files, neg_files, cfg)
    _ensure_fasttext()  # a missing engine fails here, with the install hint, before any work

    with new_folder(out) as tmp:
        train_seconds = fit_fasttext(split["train_pos"], split["train_neg"], tmp, cfg, task)
        meta: dict[str, Any] = {
            "format": task.format,
            "labels": {"positive": task.positive_label, "negative": task.negative_label},
            "model_sha256": sha256_file(tmp / MODEL_FILE),
            "model_bytes": (tmp / MODEL_FILE).stat().st_size,
            "fasttext_version": _fasttext_version(),
            "config": cfg.to_dict(),
            "config_fingerprint": cfg.fingerprint(),
            "text_normalization": f"classifiers.text.fasttext_line (lower-case, punctuation split, "
            f"first {MAX_CHARS} chars)",
            "training_data": {
                "positive": [f.summary() for f in pos_files],
                "negative": [f.summary() for f in neg_files],
            },
            "counts": counts,
            "train_seconds": round(train_seconds, 3),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (tmp / METADATA_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        model = task.model_cls(tmp)
        scores = model.predict(split["holdout_pos"] + split["holdout_neg"])
        labels = np.r_[np.ones(len(split["holdout_pos"])), np.zeros(len(split["holdout_neg"]))]
        meta["heldout"] = binary_metrics(labels, scores, DEFAULT_THRESHOLD)
        meta["total_seconds"] = round(time.time() - t0, 3)
        (tmp / METADATA_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    log.info(
        "trained %s in %.1fs: held-out ROC-AUC %.4f", out, meta["total_seconds"], meta["heldout"]["roc_auc"]
    )
    return meta
