"""Typed, validated configuration of the `dedup` job (YAML file + `--set` overrides -> frozen models).

Every key has a default (configs/dedup.yaml lists them all); unknown keys and bad values are errors
that name the key (core/config.py). The fingerprint of the whole config is written next to the
outputs, and a rerun into the same folder with a different config is refused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from core.config import ConfigError, ConfigModel, build_config, check_at_least, check_choice, load_config
from dedup.minhash import MinHashConfig

KEEP_ONE = ("best", "first", "last")
"""best: highest `quality` (if that column exists), then longest text, then earliest fetch, then id.
first / last: earliest / latest `fetch_time` (then `crawl`), ties by id."""


class ExactConfig(ConfigModel):
    """Exact dedup on the hash of normalized text (dedup.normalize)."""

    enabled: bool = True
    keep: str = "best"
    """which copy stays: one of KEEP_ONE"""

    @model_validator(mode="after")
    def _check(self) -> ExactConfig:
        check_choice("exact.keep", self.keep, KEEP_ONE)
        return self


class UrlConfig(ConfigModel):
    """URL dedup on normalized URLs; documents without a URL are never URL duplicates."""

    enabled: bool = True
    keep: str = "last"
    """the newest capture of a page"""

    @model_validator(mode="after")
    def _check(self) -> UrlConfig:
        check_choice("url.keep", self.keep, KEEP_ONE)
        return self


class ClusterConfig(ConfigModel):
    """What happens to a near-duplicate cluster (a connected component of MinHash edges)."""

    enabled: bool = True
    keep: str = "best"
    """one of KEEP_ONE, or drop_cluster: remove every member of a cluster of 2+"""
    max_iterations: int = 64
    """large-star/small-star rounds; O(log n) are needed, this is a guard"""

    @model_validator(mode="after")
    def _check(self) -> ClusterConfig:
        check_choice("cluster.keep", self.keep, (*KEEP_ONE, "drop_cluster"))
        check_at_least("cluster.max_iterations", self.max_iterations, 1)
        return self


class LinesConfig(ConfigModel):
    """Line-level dedup: a line (normalized) found in more than `max_docs` documents is boilerplate.

    With `max_fraction`, a line must also be in more than that fraction of the documents surviving
    the earlier stages: an absolute count that suits a few thousand documents is far too low for
    millions, where real sentences recur by chance; the count stays the floor for small runs.
    """

    enabled: bool = True
    max_docs: int = 10
    max_fraction: float | None = None
    min_words: int = 50
    """a document left with fewer words (whitespace-separated) is dropped"""

    @model_validator(mode="after")
    def _check(self) -> LinesConfig:
        check_at_least("lines.max_docs", self.max_docs, 1)
        if self.max_fraction is not None and not 0.0 < self.max_fraction < 1.0:
            raise ConfigError(f"lines.max_fraction must be in (0, 1), got {self.max_fraction}")
        check_at_least("lines.min_words", self.min_words, 0)
        return self


class OutputConfig(ConfigModel):
    removed_sample_per_reason: int = 1000
    """removed documents kept with a text snippet, per reason"""
    partitions: int = 0
    """Spark shuffle partitions and output files; 0: 2 x the default parallelism"""

    @model_validator(mode="after")
    def _check(self) -> OutputConfig:
        if self.removed_sample_per_reason < 0:
            raise ConfigError("output.removed_sample_per_reason must be >= 0")
        if self.partitions < 0:
            raise ConfigError("output.partitions must be >= 0")
        return self


class DedupJobConfig(ConfigModel):
    exact: ExactConfig = Field(default_factory=ExactConfig)
    url: UrlConfig = Field(default_factory=UrlConfig)
    minhash: MinHashConfig = Field(default_factory=MinHashConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    lines: LinesConfig = Field(default_factory=LinesConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    stages: tuple[str | dict[str, Any], ...] = ()
    """Dedup stages of your own (dedup/stages/base.py `Stage`), run in this order after `lines` and
    before `output`: an import path (`mypkg.dedup:MyStage`) or a registry name of kind "dedup_stage",
    or `{class: ..., <its arguments>}`. A stage declares the per-document columns it reads
    (`features`), which `prepare` computes with everyone else's."""

    @model_validator(mode="after")
    def _check_stages(self) -> DedupJobConfig:
        names = {"prepare", "ids", "exact", "url", "minhash", "cluster", "lines", "output"}
        for st in self.user_stages():
            if st.name in names:
                raise ConfigError(f"stages: a second stage named {st.name!r}; give each stage its own `name`")
            names.add(st.name)
        return self

    def user_stages(self) -> list[Any]:
        """The `stages` entries, built (a ConfigError names the entry that cannot be)."""
        from core.stage import build_class, class_entries
        from dedup.stages.base import Stage

        out = []
        for i, (spec, args) in enumerate(class_entries(self.stages, "stages")):
            try:
                out.append(build_class("dedup_stage", spec, args, f"stages[{i}]", base=Stage))
            except ConfigError:
                raise
            except (TypeError, ValueError) as e:  # what its constructor refuses
                raise ConfigError(f"stages[{i}]: {e}") from None
        return out

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["minhash"] = self.minhash.to_dict()  # bands x rows resolved: the folder name says them
        if not d["stages"]:
            del d["stages"]  # configs written before the key existed keep their fingerprint
        return d

    def fingerprint(self) -> str:
        # Output partitions change file layout, not content: not part of the fingerprint. The
        # formula (default json separators, 16 hex digits) is the one existing output folders
        # recorded, so it is not core.config.fingerprint_of (compact JSON, 12 digits).
        d = self.to_dict()
        d.pop("output")
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, source: str = "<dict>") -> DedupJobConfig:
        return build_config(cls, data or {}, source=source)

    @classmethod
    def load(cls, path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> DedupJobConfig:
        return load_config(cls, path, overrides)
