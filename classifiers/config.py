"""Typed configs of `train-quality` and `train-toxicity` (core.config models), validated on load.

Both train the same fastText classifier (classifiers/train.py); `FastTextTrainConfig` holds what
they share and each command has its subclass (the toxicity one differs in `min_chars` and adds
`languages`, see `ToxicityTrainConfig`). `QualityTrainConfig` adds where its examples may come from
besides `--positive`/`--negative`: `sources` (several labelled inputs, each with a weight, checked here
on load so a bad entry is named) and `score_threshold` (for `--labels`); classifiers/train.py uses them.

Defaults suit the shared data (a few hundred documents per class after balancing): softmax with
word bigrams as DCLM's quality classifier uses, lr 0.5 and 25 epochs (fastText's own 0.1 x 5 left
every probability within 0.001 of 0.5 on this little data, measured: ranking fine, the 0.5
threshold meaningless; a sweep of lr 0.1-1.0 x 5-50 epochs put lr 0.5 x 25 at the top of the human-
label AUC, bench/classifiers/quality_classifier.py), a smaller embedding (dim 64) and hash-bucket table (200k)
so model.bin stays ~50 MB instead of fastText's default 2M x 100 (800 MB), and `thread: 1`: fastText trains with lock-free Hogwild SGD, so with
more than one thread the update order, hence the model, changes from run to run. One thread is the
only way the same seed gives the same model; raise it for speed on large data when determinism
does not matter (metadata.json records the value).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Self

from pydantic import Field, model_validator

from core.config import ConfigModel, build_config, check_choice, check_positive, fingerprint_of, load_config
from core.errors import ConfigError


class FastTextParams(ConfigModel):
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

    @model_validator(mode="after")
    def _check(self) -> FastTextParams:
        for key in ("lr", "epoch", "dim", "word_ngrams", "min_count", "bucket", "thread"):
            check_positive(f"fasttext.{key}", getattr(self, key))
        check_choice("fasttext.loss", self.loss, ("softmax", "hs", "ns"))
        return self

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


class FastTextTrainConfig(ConfigModel):
    """What a fastText classifier trains with; recorded (and fingerprinted) in the model's metadata.json."""

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
    fasttext: FastTextParams = Field(default_factory=FastTextParams)

    @model_validator(mode="after")
    def _check(self) -> FastTextTrainConfig:
        if not 0.0 < self.holdout_fraction < 1.0:
            raise ConfigError(f"holdout_fraction must be in (0, 1), got {self.holdout_fraction!r}")
        check_choice("balance", self.balance, ("downsample", "none"))
        if self.min_chars < 0:
            raise ConfigError(f"min_chars must be >= 0, got {self.min_chars!r}")
        if self.max_docs_per_class is not None and self.max_docs_per_class < 2:
            raise ConfigError(f"max_docs_per_class must be >= 2 or null, got {self.max_docs_per_class!r}")
        return self

    def fingerprint(self) -> str:
        """sha256 of the compact sorted JSON of `to_dict()`, 12 hex digits."""
        return fingerprint_of(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> Self:
        return build_config(cls, data, source)

    @classmethod
    def load(cls, path: str | Path | None, overrides: Iterable[str] = ()) -> Self:
        """Defaults when `path` is None; else the YAML file; then `section.key=value` overrides."""
        return load_config(cls, path, overrides)


SOURCE_LABELS = ("positive", "negative")


class SourceSpec(ConfigModel):
    """One labelled input of `train-quality`'s `sources:` list (checked by `QualityTrainConfig`)."""

    path: str
    """A file or folder, as `--positive`/`--negative` take (relative to the working directory)."""
    label: str
    """'positive' (high quality) or 'negative'."""
    weight: float = 1.0
    """This source's share of its class's training examples is weight / (sum of the class's weights)."""
    max_docs: int | None = None
    """Cap on this source's distinct documents (sampled with the seed) before the mix is drawn."""


class QualityTrainConfig(FastTextTrainConfig):
    """What `train-quality` trains with: the shared fields, and where its examples come from when not
    from `--positive`/`--negative` (classifiers/train.py: `sources`, or `--labels` with `score_threshold`)."""

    sources: list[SourceSpec] | None = None
    """Several labelled inputs, each with a weight; null = `--positive`/`--negative` (one source per class)."""
    score_threshold: float = 3.0
    """`--labels`: a score at or above it is a positive, below it a negative (FineWeb-Edu binarises
    its 0-5 educational scores at 3)."""

    def to_dict(self) -> dict[str, Any]:
        """The recorded config; `sources` and `score_threshold` left out while unused (no sources, the
        default threshold), so models trained as before keep their config fingerprint."""
        d = super().to_dict()
        if self.sources is None:
            del d["sources"]
        if self.score_threshold == type(self).model_fields["score_threshold"].default:
            del d["score_threshold"]
        return d

    @model_validator(mode="after")
    def _check_sources(self) -> QualityTrainConfig:
        if self.sources is None:
            return self
        seen: dict[tuple[str, str], int] = {}
        for i, s in enumerate(self.sources):
            where = f"sources[{i}] (path {s.path!r})"
            if not s.path.strip():
                raise ConfigError(f"sources[{i}]: path must not be empty")
            if s.label not in SOURCE_LABELS:
                raise ConfigError(
                    f"{where}: label must be one of {', '.join(SOURCE_LABELS)}, got {s.label!r}"
                )
            if not s.weight > 0:
                raise ConfigError(f"{where}: weight must be > 0, got {s.weight!r}")
            if s.max_docs is not None and s.max_docs < 1:
                raise ConfigError(f"{where}: max_docs must be >= 1 or null, got {s.max_docs!r}")
            if (s.path, s.label) in seen:
                raise ConfigError(f"{where}: the same path and label as sources[{seen[(s.path, s.label)]}]")
            seen[(s.path, s.label)] = i
        missing = [lab for lab in SOURCE_LABELS if all(s.label != lab for s in self.sources)]
        if missing:
            raise ConfigError(f"sources: no {missing[0]} source; give at least one of each label")
        return self


class ToxicityTrainConfig(FastTextTrainConfig):
    """What `train-toxicity` trains with: toxic texts (positive) against clean ones (negative)."""

    min_chars: int = 1
    """Toxic comments are short ("fuck off" is 8 characters): only empty texts are skipped, where
    the quality default (100) would drop most insults of a comment data set."""
    languages: list[str] | None = None
    """Languages (lid.176 codes, the `lang` column) the model scores; other languages get null.
    null = every language (the model is whatever the data taught it). Recorded in metadata.json,
    so the score job can hold one toxicity model per language."""

    @model_validator(mode="after")
    def _check_languages(self) -> ToxicityTrainConfig:
        if self.languages is not None and (not self.languages or not all(self.languages)):
            raise ConfigError(f"languages must be a non-empty list of codes or null, got {self.languages!r}")
        return self


class EnsembleParams(ConfigModel):
    """The quality ensemble (classifiers/ensemble.py): which features, and the one hyper-parameter.

    A logistic regression on standardized features; its L2 strength is chosen per training set
    from `C` by an inner stratified k-fold (`inner_folds`) on the training labels alone, so the
    outer cross-validation that reports its AUC stays honest (nested CV)."""

    features: list[str] = Field(default_factory=lambda: ["statistics"])
    """Column names: a text statistic of classifiers/signals.py (`statistics` = all 28), computed
    from the text, or a score column (`quality`, `perplexity_bpb`, ...) read from the documents."""
    C: list[float] = Field(default_factory=lambda: [0.01, 0.1, 1.0, 10.0])
    """Candidates for sklearn's inverse L2 strength: a decade apart, from strong to weak."""
    inner_folds: int = 5

    @model_validator(mode="after")
    def _check(self) -> EnsembleParams:
        if not self.features or not all(isinstance(f, str) and f for f in self.features):
            raise ConfigError(f"ensemble.features must be a non-empty list of names, got {self.features!r}")
        if not self.C or not all(0.0 < c < float("inf") for c in self.C):
            raise ConfigError(f"ensemble.C must be a non-empty list of positive numbers, got {self.C!r}")
        if self.inner_folds < 2:
            raise ConfigError(f"ensemble.inner_folds must be >= 2, got {self.inner_folds!r}")
        return self
