"""Typed, validated configuration of the `dedup` job (YAML file + `--set` overrides -> frozen models).

Every key has a default (configs/dedup.yaml lists them all); unknown keys and bad values are errors
that name the key (core/config.py). The fingerprint of the whole config is written next to the
outputs, and a rerun into the same folder with a different config is refused.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from core.config import ConfigError, ConfigModel, build_config, check_at_least, check_choice, load_config
from core.storage import ObjectStore, file_identities, is_object_store
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


EVAL_FORMATS = ("jsonl", "parquet", "text")
DECONTAMINATE_MODES = ("drop", "annotate")
_SET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class EvalSetConfig(ConfigModel):
    """One evaluation set: its passages are what no training document may contain."""

    name: str
    """names the set in the drop reason (`decontaminate:<name>`), the report and `contaminated_by`"""
    paths: tuple[str, ...]
    """local files or globs, or `s3://` objects or globs (one path may be given as a string)"""
    format: str | None = None
    """jsonl (a record per line, `.gz` too) | parquet | text (a passage per non-empty line, `.gz`
    too); null: by each file's name (.jsonl/.json -> jsonl, .parquet -> parquet, else text)"""
    text_field: str = "text"
    """the field (jsonl) or column (parquet) holding a passage"""

    @field_validator("paths", mode="before")
    @classmethod
    def _one_path(cls, v: Any) -> Any:
        return (v,) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self) -> EvalSetConfig:
        if not _SET_NAME.fullmatch(self.name):
            raise ConfigError(
                "decontaminate.sets: a name must be letters, digits, _ . - (starting with a letter or "
                f"digit); got {self.name!r}"
            )
        if not self.paths:
            raise ConfigError(f"decontaminate.sets: {self.name}: paths must name at least one file")
        if self.format is not None:
            check_choice(f"decontaminate.sets: {self.name}: format", self.format, EVAL_FORMATS)
        return self

    def files(self) -> list[str]:
        """Every file the paths stand for, in order; ConfigError naming a path that matches none."""
        out: list[str] = []
        for i, p in enumerate(self.paths):
            found = _expand(p)
            if not found and _folders(p):  # "no such file" would send the user looking for a typo
                raise ConfigError(
                    f"{self.name}: paths[{i}]: {p!r} is a folder (or matches only folders), not a file: name "
                    f"its files or a glob of them ({p.rstrip('/')}/*.jsonl)"
                )
            if not found:
                raise ConfigError(f"{self.name}: paths[{i}]: no such file {p!r}")
            out += [f for f in found if f not in out]
        return out


def _folders(path: str) -> bool:
    """Whether `path` (or its glob) names folders: asked only once it named no file."""
    pattern = any(ch in path for ch in "*?[")
    if is_object_store(path):
        fs, key = ObjectStore(path).fs, path.split("://", 1)[1]
        try:
            return any(fs.isdir(k) for k in (fs.glob(key) if pattern else [key]))
        except Exception:  # listing failed: "no such file" (and _expand's own error) say enough
            return False
    local = Path(path).expanduser()
    if pattern:
        return any(Path(m).is_dir() for m in glob.glob(str(local), recursive=True))
    return local.is_dir()


def _expand(path: str) -> list[str]:
    """The files a path or glob names: local ones absolute, object-store ones as URIs."""
    pattern = any(ch in path for ch in "*?[")
    if is_object_store(path):
        fs, (proto, key) = ObjectStore(path).fs, path.split("://", 1)
        try:
            keys = sorted(fs.glob(key)) if pattern else [key]
            return [f"{proto}://{k}" for k in keys if fs.isfile(k)]
        except Exception as e:  # botocore's errors are not OSErrors: network, credentials, a bucket
            raise ConfigError(f"cannot list {path!r}: {e}") from None
    local = Path(path).expanduser()
    if pattern:
        return [
            str(Path(m).resolve()) for m in sorted(glob.glob(str(local), recursive=True)) if Path(m).is_file()
        ]
    return [str(local.resolve())] if local.is_file() else []


class DecontaminateConfig(ConfigModel):
    """Documents that contain n-grams of an evaluation set (dedup/stages/decontaminate.py).

    Off while `sets` is empty: the stage does not run and the section is left out of the recorded
    config, so the fingerprint of every run without it stays what it was.
    """

    sets: tuple[EvalSetConfig, ...] = ()
    ngram: int = 13
    """words per n-gram (normalized as every dedup stage normalizes): 13 as GPT-3 and datatrove"""
    mode: str = "drop"
    """drop: remove a contaminated document (reason `decontaminate:<set>`); annotate: keep it, with
    columns `contaminated_by` (set names) and `contamination_ngrams`"""
    min_ngrams: int = 1
    """distinct n-grams of one set a document must contain to count as contaminated by it"""
    skip_trivial: bool = True
    """leave out evaluation n-grams made only of numbers and single ASCII letters (a row of a table
    of figures, `a b c ... m`): digits are all 0 once normalized, so such n-grams match any table"""
    examples: int = 5
    """documents per set shown in the report with the n-gram they share with it"""
    allow_remove_all: bool = False
    """let drop mode remove 99% or more of the documents (refused otherwise: core/removal.py); not
    part of the fingerprint, so a refused run resumes with it set"""

    @model_validator(mode="after")
    def _check(self) -> DecontaminateConfig:
        check_at_least("decontaminate.ngram", self.ngram, 1)
        check_choice("decontaminate.mode", self.mode, DECONTAMINATE_MODES)
        check_at_least("decontaminate.min_ngrams", self.min_ngrams, 1)
        check_at_least("decontaminate.examples", self.examples, 0)
        names = [s.name for s in self.sets]
        if len(set(names)) != len(names):
            raise ConfigError(f"decontaminate.sets: a set name is given twice in {names}")
        for i, st in enumerate(self.sets):
            try:
                st.files()
            except ConfigError as e:
                raise ConfigError(f"decontaminate.sets[{i}]: {e}") from None
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.sets)

    def identities(self) -> dict[str, dict[str, Any] | None]:
        """What each evaluation file is (core.storage.file_identities, its mtime left out: a copy
        of the same bytes is the same set); a file edited in place changes the fingerprint."""
        files = [f for st in self.sets for f in st.files()]
        return {
            f: ({k: v for k, v in ident.items() if k != "mtime_ns"} if ident else None)
            for f, ident in file_identities(files).items()
        }


class OutputConfig(ConfigModel):
    removed_sample_per_reason: int = 1000
    """removed/: documents kept with a snippet and their evidence, per (stage, reason, lang, group-size
    band) cell: those of smallest curation.schema.sample_key (dedup/removed.py; the name predates
    the cells)"""
    partitions: int = 0
    """Spark shuffle partitions and output hash buckets by id; 0: 2 x the default parallelism"""

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
    decontaminate: DecontaminateConfig = Field(default_factory=DecontaminateConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    stages: tuple[str | dict[str, Any], ...] = ()
    """Dedup stages of your own (dedup/stages/base.py `Stage`), run in this order after `lines` and
    before `output`: an import path (`mypkg.dedup:MyStage`) or a registry name of kind "dedup_stage",
    or `{class: ..., <its arguments>}`. A stage declares the per-document columns it reads
    (`features`), which `prepare` computes with everyone else's."""

    @model_validator(mode="after")
    def _check_stages(self) -> DedupJobConfig:
        names = {"prepare", "ids", "decontaminate", "exact", "url", "minhash", "cluster", "lines", "output"}
        for st in self.user_stages():
            if st.name in names:
                raise ConfigError(f"stages: a second stage named {st.name!r}; give each stage its own `name`")
            names.add(st.name)
        return self

    def user_stages(self) -> list[Any]:
        """The `stages` entries, built (a ConfigError names the entry that cannot be).

        Checked against dedup/stages/base.py's `Stage` without importing it: the stage package
        imports this module (every stage reads its section of the config), so an import from here,
        even one deferred to this method, would close a circle (importing dedup.stages.base runs
        dedup/stages/__init__.py, which loads every stage). A class can only subclass `Stage` once
        its module has run, so where dedup.stages.base is not loaded after resolving the class,
        nothing named here is a stage (pyproject.toml's contract "dedup: the config does not import
        its stages" and tests/dedup/test_config.py hold this)."""
        import sys

        from core.stage import check_arguments, class_entries, resolve_stage

        out = []
        for i, (spec, args) in enumerate(class_entries(self.stages, "stages")):
            key = f"stages[{i}]"
            cls = resolve_stage("dedup_stage", spec, key, base=object)  # any class: checked below
            base = sys.modules.get("dedup.stages.base")
            if base is None or not issubclass(cls, base.Stage):
                raise ConfigError(f"{key}: {spec!r} is not a subclass of dedup.stages.base.Stage")
            check_arguments(cls, args, key)
            try:
                out.append(cls(**args))
            except (TypeError, ValueError) as e:  # what its constructor refuses
                raise ConfigError(f"{key}: {e}") from None
        return out

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["minhash"] = self.minhash.to_dict()  # bands x rows resolved: the folder name says them
        if not d["stages"]:
            del d["stages"]  # configs written before the key existed keep their fingerprint
        if not self.decontaminate.enabled:
            del d["decontaminate"]  # off: runs without it keep their fingerprint (and record)
        return d

    def fingerprint(self) -> str:
        # Output partitions change file layout, not content: not part of the fingerprint. The
        # formula (default json separators, 16 hex digits) is the one existing output folders
        # recorded, so it is not core.config.fingerprint_of (compact JSON, 12 digits).
        d = self.to_dict()
        d.pop("output")
        if self.decontaminate.enabled:
            # a permission, not a setting of what is removed: the folder of a refused run accepts it
            d["decontaminate"].pop("allow_remove_all")
            # the sets' content decides what is removed, as their names do
            d["decontaminate"]["identities"] = self.decontaminate.identities()
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, source: str = "<dict>") -> DedupJobConfig:
        return build_config(cls, data or {}, source=source)

    @classmethod
    def load(cls, path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> DedupJobConfig:
        return load_config(cls, path, overrides)
