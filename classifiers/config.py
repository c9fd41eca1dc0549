"""Typed config of `train-quality`, loaded from YAML and validated on load (as curation/config.py).

Defaults suit the shared data (a few hundred documents per class after balancing): softmax with
word bigrams as DCLM's quality classifier uses, lr 0.5 and 25 epochs (fastText's own 0.1 x 5 left
every probability within 0.001 of 0.5 on this little data, measured: ranking fine, the 0.5
threshold meaningless; a sweep of lr 0.1-1.0 x 5-50 epochs put lr 0.5 x 25 at the top of the human-
label AUC, bench/quality_classifier.py), a smaller embedding (dim 64) and hash-bucket table (200k)
so model.bin stays ~50 MB instead of fastText's default 2M x 100 (800 MB), and `thread: 1`: fastText trains with lock-free Hogwild SGD, so with
more than one thread the update order, hence the model, changes from run to run. One thread is the
only way the same seed gives the same model; raise it for speed on large data when determinism
does not matter (metadata.json records the value).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curation.config import ConfigError, build_config, load_yaml_config


@dataclass(kw_only=True, frozen=True, slots=True)
class FastTextParams:
    """Arguments of `fasttext.train_supervised` (fastText's names in parentheses where they differ)."""

    lr: float = 0.5
    epoch: int = 25
    dim: int = 64
    word_ngrams: int = 2
    """(wordNgrams) bigrams, as DCLM's fastText quality classifier."""
    min_count: int = 2
    """(minCount) words seen fewer times are ignored."""
    bucket: int = 200_000
    """Hash buckets for n-grams: model.bin is about (vocabulary + bucket) x dim x 4 bytes."""
    loss: str = "softmax"
    thread: int = 1
    """1 = deterministic (see the module docstring); more is faster but not reproducible."""

    def __post_init__(self) -> None:
        for key in ("lr", "epoch", "dim", "word_ngrams", "min_count", "bucket", "thread"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"fasttext.{key} must be > 0, got {getattr(self, key)!r}")
        if self.loss not in ("softmax", "hs", "ns"):
            raise ConfigError(f"fasttext.loss must be one of softmax, hs, ns; got {self.loss!r}")

    def train_kwargs(self) -> dict[str, Any]:
        return {
            "lr": self.lr,
            "epoch": self.epoch,
            "dim": self.dim,
            "wordNgrams": self.word_ngrams,
            "minCount": self.min_count,
            "bucket": self.bucket,
            "loss": self.loss,
            "thread": self.thread,
        }


@dataclass(kw_only=True, frozen=True, slots=True)
class QualityTrainConfig:
    seed: int = 0
    """Seeds the shuffle, the class balancing, the held-out split and fastText itself."""
    holdout_fraction: float = 0.2
    """Share of each class held out of training and evaluated; 0.2 keeps > 50 per class here."""
    balance: str = "downsample"
    """'downsample': the larger class is sampled down to the smaller (DCLM trains on balanced
    classes, and it makes 0.5 a meaningful default threshold); 'none': use everything."""
    min_chars: int = 100
    """Shorter documents (headings, navigation lines) are skipped and counted."""
    max_docs_per_class: int | None = None
    """Cap per class after deduplication (sampled with the seed); null = no cap."""
    fasttext: FastTextParams = field(default_factory=FastTextParams)

    def __post_init__(self) -> None:
        if not 0.0 < self.holdout_fraction < 1.0:
            raise ConfigError(f"holdout_fraction must be in (0, 1), got {self.holdout_fraction!r}")
        if self.balance not in ("downsample", "none"):
            raise ConfigError(f"balance must be one of downsample, none; got {self.balance!r}")
        if self.min_chars < 0:
            raise ConfigError(f"min_chars must be >= 0, got {self.min_chars!r}")
        if self.max_docs_per_class is not None and self.max_docs_per_class < 2:
            raise ConfigError(f"max_docs_per_class must be >= 2 or null, got {self.max_docs_per_class!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def fingerprint(self) -> str:
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> QualityTrainConfig:
        return build_config(cls, data, source)

    @classmethod
    def load(cls, path: str | Path | None) -> QualityTrainConfig:
        return load_yaml_config(cls, path)
