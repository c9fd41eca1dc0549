"""Train the fastText quality classifier (DCLM-style): high-quality reference text vs web documents.

Recipe (Li et al. 2024, "DataComp-LM", section 4.4: a fastText bigram classifier, reference text as
positives and random web text as negatives, is the filter that worked best):
1. read the labelled sources (classifiers/data.py: JSONL, Parquet, text). A source is a file or folder
   with a class and a weight: `--positive`/`--negative` make one source per class (all their files
   pooled, weight 1); the config's `sources:` list gives several, each with a `weight` and `max_docs`;
   `--labels` makes the two classes from an `annotate` labels.jsonl (FineWeb-Edu: score >= 3 is a
   positive; null scores are skipped and counted; `read_scored`);
2. drop exact duplicate texts within a class (a text already in an earlier source of its class counts
   as a duplicate of the later one), and texts found in both classes (contradictory labels), so no
   document can sit in both the training and the held-out split;
3. shuffle each source with the seed and cap it (`max_docs`); a class keeps as many documents as its
   sources hold (capped by `max_docs_per_class`, and with `balance: downsample` by the smaller class);
4. hold out `holdout_fraction` of each class, and share its held-out documents and its training
   examples among its sources by weight (`shares`: largest remainder, each within one document of
   weight / class weight). A source whose share exceeds its distinct documents is up-sampled: its
   training documents repeat, in the seeded order, never a held-out one. One source per class is
   exactly the split this module always made: same inputs and seed, same model.bin;
5. train fastText on the training examples with `seed` and `thread` from the config (thread 1 =
   deterministic, see classifiers/config.py);
6. score the held-out documents through the same `QualityModel.predict` that `score` and
   `evaluate` use, and write MODEL_DIR atomically: model.bin + metadata.json are built in a
   temporary sibling folder and renamed into place, so a crash never leaves a half-written model.
   metadata.json records per source the documents read, deduplicated, capped, held out and trained on.

`--labels` trains a binary classifier, not one label per score: the model stays a two-label quality
model that `score`, `evaluate` and the scorers read unchanged (P(high) is the column), and a softmax over
six score labels would ignore their order (FineWeb-Edu itself thresholds its regressor at 3 to filter).

`train-toxicity` (classifiers/toxicity.py) is the same recipe with other labels and another model
class: `train_fasttext` takes them as a `FastTextTask`; `train_quality` is its quality instance.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from classifiers.config import FastTextTrainConfig, QualityTrainConfig
from classifiers.data import DataError, FileDocs, iter_jsonl, read_inputs
from classifiers.metrics import binary_metrics
from classifiers.model import METADATA_FILE, MODEL_FILE, FastTextClassifier, QualityModel, _ensure_fasttext
from classifiers.text import LABEL_HIGH, LABEL_LOW, MAX_CHARS, fasttext_line
from core.errors import ConfigError, OutputConflict
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


@dataclass
class Source:
    """One labelled input: its files, its class, its weight, and how its documents were counted."""

    name: str
    label: str
    """'positive' or 'negative'."""
    files: list[FileDocs]
    weight: float = 1.0
    max_docs: int | None = None
    docs: list[str] = field(default_factory=list)
    """Distinct documents left for the mix: deduplicated, shuffled with the seed, capped."""
    counts: dict[str, Any] = field(default_factory=dict)

    def summary(self, class_weight: float) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "weight": self.weight,
            "share": round(self.weight / class_weight, 6),
            "max_docs": self.max_docs,
            "files": [f.path for f in self.files],
            **self.counts,
        }


def shares(total: int, weights: list[float]) -> list[int]:
    """`total` split in proportion to `weights` by largest remainder: the parts sum to `total` and each
    is within 1 of its exact share total * w / sum(w) (ties go to the earlier weight)."""
    exact = [total * w / sum(weights) for w in weights]
    parts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - parts[i]), i))
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


def _distinct(sources: list[Source]) -> int:
    """Keep each source's documents not seen in an earlier source of its class nor in the other class;
    the number of texts dropped for being in both classes."""
    by_class: dict[str, set[str]] = {"positive": set(), "negative": set()}
    raw = []
    for s in sources:
        docs = [d for f in s.files for d in f.docs]
        kept, _ = _dedup([d for d in docs if d not in by_class[s.label]])
        s.counts = {
            "read": sum(f.records for f in s.files),
            "documents": len(docs),
            "duplicates_dropped": len(docs) - len(kept),
            "capped": 0,
        }
        by_class[s.label].update(kept)
        raw.append(kept)
    both = by_class["positive"] & by_class["negative"]
    for s, kept in zip(sources, raw, strict=True):
        s.docs = [d for d in kept if d not in both]
        s.counts["in_both_classes_dropped"] = len(kept) - len(s.docs)
    return len(both)


def _draw(docs: list[str], n: int) -> list[str]:
    """The first `n` of `docs` (already shuffled), repeated in order when `n` is larger (up-sampling)."""
    return docs * (n // len(docs)) + docs[: n % len(docs)]


def _class_split(sources: list[Source], n: int, holdout_fraction: float) -> tuple[list[str], list[str]]:
    """(held-out, training) documents of one class of `n` documents: the class's training examples and
    its held-out documents are shared among its sources by weight. A source holds out at most all but
    one of its distinct documents, and draws its training examples from the others, up-sampled by
    repetition when its share is larger; a held-out document is never also a training example."""
    k = min(max(1, round(n * holdout_fraction)), n - 1)  # one of each at least, whatever the fraction
    weights = [s.weight for s in sources]
    held, train = [], []
    for s, k_s, t_s in zip(sources, shares(k, weights), shares(n - k, weights), strict=True):
        if not s.docs:
            raise DataError(
                f"source {s.name} ({s.label}): no documents left after deduplication "
                f"({s.counts['duplicates_dropped']} duplicates, {s.counts['in_both_classes_dropped']} in both classes)"
            )
        k_s = min(k_s, len(s.docs) - 1)
        rest = s.docs[k_s:]
        held += s.docs[:k_s]
        train += _draw(rest, t_s)
        s.counts.update(
            held_out=k_s, train_distinct=min(t_s, len(rest)), train_examples=t_s, upsampled=t_s > len(rest)
        )
    if not held:
        raise DataError(
            f"no {sources[0].label} document to hold out: each of its sources has a single document"
        )
    return held, train


def prepare_sources(
    sources: list[Source], cfg: FastTextTrainConfig
) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Dedup, balance, weight and split: {'train_pos', 'train_neg', 'holdout_pos', 'holdout_neg'} + counts.

    A class keeps as many documents as its sources hold distinct (capped by `max_docs_per_class`, and
    with `balance: downsample` by the other class's number); the weights decide its composition, not
    its size. One source per class is the recipe `--positive`/`--negative` always had: same split,
    same model for the same inputs and seed.
    """
    sources = [s for s in sources if s.label == "positive"] + [s for s in sources if s.label == "negative"]
    both = _distinct(sources)
    rng = random.Random(cfg.seed)
    for s in sources:  # positives first, in order, then negatives: the shuffle order is the seed's
        rng.shuffle(s.docs)
        if s.max_docs is not None:
            s.counts["capped"] = max(0, len(s.docs) - s.max_docs)
            s.docs = s.docs[: s.max_docs]
    by_class = {lab: [s for s in sources if s.label == lab] for lab in ("positive", "negative")}
    sizes = {lab: sum(len(s.docs) for s in ss) for lab, ss in by_class.items()}
    if cfg.max_docs_per_class is not None:
        sizes = {lab: min(n, cfg.max_docs_per_class) for lab, n in sizes.items()}
    if cfg.balance == "downsample":
        sizes = dict.fromkeys(sizes, min(sizes.values()))
    for lab, n in sizes.items():
        if n < 2:
            raise DataError(
                f"{n} {lab} document(s) left after deduplication and balancing; need at least 2 "
                "per class (one to train on, one to hold out)"
            )
    split: dict[str, list[str]] = {}
    for lab, short in (("positive", "pos"), ("negative", "neg")):
        split[f"holdout_{short}"], split[f"train_{short}"] = _class_split(
            by_class[lab], sizes[lab], cfg.holdout_fraction
        )
    counts = {
        # Documents (records kept by min_chars), as these counts always were; `sources` has both.
        "positive_read": sum(s.counts["documents"] for s in by_class["positive"]),
        "negative_read": sum(s.counts["documents"] for s in by_class["negative"]),
        "duplicates_dropped": sum(s.counts["duplicates_dropped"] for s in sources),
        "in_both_classes_dropped": both,
    }
    counts.update({k: len(v) for k, v in split.items()})
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
    """Train the quality model (high-quality text vs web documents); returns its metadata.

    The inputs are `positive` and `negative` (one source per class), or, when both are empty,
    `cfg.sources` (several, each with a weight)."""
    if cfg.sources is None:
        return train_fasttext(positive, negative, output, cfg, QUALITY)
    if positive or negative:
        raise ConfigError(
            "give the inputs as a sources: list in the config or as --positive/--negative, not both"
        )
    out = check_new_folder(output)
    return _train_sources(out, lambda: (_config_sources(cfg), {}), cfg, QUALITY)


def train_quality_labels(labels: str | Path, output: str | Path, cfg: QualityTrainConfig) -> dict[str, Any]:
    """Train the quality model on the 0-5 scores of an `annotate` labels.jsonl (FineWeb-Edu's way):
    a score >= `cfg.score_threshold` is a positive, a lower one a negative, a null score is skipped
    and counted. Returns the metadata."""
    out = check_new_folder(output)
    return _train_sources(out, lambda: _labels_sources(Path(labels), cfg), cfg, QUALITY)


def train_fasttext(
    positive: list[str | Path],
    negative: list[str | Path],
    output: str | Path,
    cfg: FastTextTrainConfig,
    task: FastTextTask,
) -> dict[str, Any]:
    """Train on `positive` vs `negative` (one source per class), evaluate on the held-out split,
    write MODEL_DIR; returns its metadata."""
    out = check_new_folder(output)

    def load() -> tuple[list[Source], dict[str, Any]]:
        return [
            Source(", ".join(map(str, positive)), "positive", read_inputs(list(positive), cfg.min_chars)),
            Source(", ".join(map(str, negative)), "negative", read_inputs(list(negative), cfg.min_chars)),
        ], {}

    return _train_sources(out, load, cfg, task)


def _config_sources(cfg: QualityTrainConfig) -> list[Source]:
    """The config's `sources`, read; an input error names the entry."""
    out = []
    for i, spec in enumerate(cfg.sources or ()):
        try:
            files = read_inputs([spec.path], cfg.min_chars)
        except DataError as e:
            raise DataError(f"sources[{i}]: {e}") from None
        out.append(Source(spec.path, spec.label, files, spec.weight, spec.max_docs))
    return out


def read_scored(path: Path, threshold: float, min_chars: int) -> tuple[FileDocs, FileDocs, dict[str, Any]]:
    """The documents of an `annotate` labels.jsonl (records with `text` and `score`, a number or
    null), split at `threshold`: (at or above, below, a summary with the score histogram)."""
    if not path.is_file():
        raise DataError(f"--labels {path}: no such file")
    sha = sha256_file(path)
    cut = f"{threshold:g}"
    classes = {
        True: FileDocs(f"{path} (score >= {cut})", "labels", sha),
        False: FileDocs(f"{path} (score < {cut})", "labels", sha),
    }
    hist: Counter[str] = Counter()
    for lineno, obj in iter_jsonl(path):
        text, score = obj.get("text"), obj.get("score")
        if not isinstance(text, str):
            raise DataError(f"{path}:{lineno}: 'text' must be a string, got {type(text).__name__}")
        if "score" not in obj:
            raise DataError(
                f"{path}:{lineno}: no 'score' field (expected classifiers annotate's labels.jsonl)"
            )
        if score is None:  # an unparseable reply: annotate keeps it with a null score
            hist["null"] += 1
            continue
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            raise DataError(f"{path}:{lineno}: 'score' must be a number or null, got {score!r}")
        hist[f"{score:g}"] += 1
        target = classes[score >= threshold]
        target.records += 1
        if len(text.strip()) < min_chars:
            target.skipped_short += 1
        else:
            target.docs.append(text.strip())
    pos, neg = classes[True], classes[False]
    for name, side in (("at or above", pos), ("below", neg)):
        if not side.records:
            raise DataError(
                f"{path}: no document scored {name} {cut} (score_threshold); scores: "
                + (", ".join(f"{k}: {v}" for k, v in sorted(hist.items())) or "none")
            )
    if hist["null"]:
        log.info("%s: %d record(s) with a null score skipped", path, hist["null"])
    summary = {
        "path": str(path),
        "sha256": sha,
        "records": sum(hist.values()),
        "null_scores": hist["null"],
        "score_threshold": threshold,
        "scores": dict(sorted(hist.items())),
        "positive_documents": len(pos.docs),
        "negative_documents": len(neg.docs),
        "skipped_short": pos.skipped_short + neg.skipped_short,
    }
    return pos, neg, summary


def _labels_sources(path: Path, cfg: QualityTrainConfig) -> tuple[list[Source], dict[str, Any]]:
    pos, neg, summary = read_scored(path, cfg.score_threshold, cfg.min_chars)
    return [Source(pos.path, "positive", [pos]), Source(neg.path, "negative", [neg])], {"labels": summary}


def _train_sources(
    out: Path,
    load: Callable[[], tuple[list[Source], dict[str, Any]]],
    cfg: FastTextTrainConfig,
    task: FastTextTask,
) -> dict[str, Any]:
    """Read the sources (`load`), train, evaluate on the held-out split, write `out`; the metadata."""
    t0 = time.time()
    sources, extra = load()
    split, counts = prepare_sources(sources, cfg)
    _ensure_fasttext()  # a missing engine fails here, with the install hint, before any work
    weight = {lab: sum(s.weight for s in sources if s.label == lab) for lab in ("positive", "negative")}

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
                **{lab: [f.summary() for s in sources if s.label == lab for f in s.files] for lab in weight},
                "sources": [s.summary(weight[s.label]) for s in sources],
                **extra,
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
