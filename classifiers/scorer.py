"""The scorer contract: what `python -m classifiers score` asks of a model that annotates documents.

dolma's rule, which the project follows: scorers *annotate*, recipes *select*. A scorer adds float
columns to every document and never drops one; thresholds live in mixture recipes (`select:`).

The score job (classifiers/score.py) holds a list of `ScorerSpec`s (kind + model folder + options),
validated on the driver before Spark starts (`describe`), and builds the scorer itself once per
executor Python process (`load`, cached: Spark reuses Python workers across tasks). Each batch of
documents is handed to `Scorer.score` with its texts and languages; the result is one float32 array
per output column, NaN where the document gets null (null text, no model for its language).

A kind is a registry name of kind "scorer" in core/stage.py's one registry (the built-ins are
registered below by import path, so this module imports no model code), or the import path of a
user's `Scorer` subclass (`mypkg.scorers:MyScorer` or `mypkg.scorers.MyScorer`): a new scorer is one
file of theirs, named on the command line as `--scorer mypkg.scorers.MyScorer=DIR`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from classifiers.data import DataError
from core.config import ConfigModel
from core.errors import ConfigError
from core.stage import register_path, resolve_stage


class Scorer(ABC):
    """A loaded model that turns a batch of documents into float columns."""

    kind: ClassVar[str]
    """Its name in messages (`quality`, `perplexity`, `toxicity`); configs name it by registry name or path."""

    @property
    @abstractmethod
    def columns(self) -> tuple[str, ...]:
        """The float32 columns this scorer writes, in order (e.g. `("perplexity", "perplexity_bpb")`)."""

    @abstractmethod
    def score(self, texts: list[str | None], langs: list[str | None]) -> dict[str, np.ndarray]:
        """One float32 array of len(texts) per column; NaN marks a null (no text, no model for the language)."""

    @property
    def inputs(self) -> tuple[str, ...]:
        """Document columns besides text and lang that this scorer reads (none by default). A scorer
        that names some is called as `score(texts, langs, columns={name: values})`, with each from the
        input documents or an earlier scorer of the job (classifiers/ensemble.py reads score columns)."""
        return ()

    def input_columns(self, columns: Mapping[str, Any] | None) -> dict[str, np.ndarray]:
        """Each of `inputs` from the `columns` given to `score`, as float64 (NaN: null); DataError naming
        the ones not given."""
        columns = columns or {}
        missing = [c for c in self.inputs if c not in columns]
        if missing:
            raise DataError(f"the {self.kind} scorer needs the column(s) {', '.join(missing)}, not given")
        return {c: np.asarray(columns[c], dtype=np.float64) for c in self.inputs}

    @classmethod
    def refuse_options(cls, options: dict[str, Any]) -> None:
        """For a scorer that takes no options (its `describe`): ConfigError naming any given."""
        if options:
            raise ConfigError(f"the {cls.kind} scorer takes no options, got {', '.join(sorted(options))}")

    @classmethod
    @abstractmethod
    def describe(cls, model: str, options: dict[str, Any]) -> dict[str, Any]:
        """What identifies the scores (model sha256, settings), JSON-able; raises a UserError if
        `model` is not a usable model folder or an option is wrong. Runs on the driver, before Spark."""

    @classmethod
    def plan(cls, options: dict[str, Any], docs_per_process: int) -> dict[str, Any]:
        """The options resolved for a job's size, on the driver before `describe` names the scores:
        `docs_per_process` is about how many documents each executor process will score (a cost
        paid once per process, such as a compile, may pay back only past some count). As given by
        default."""
        return options

    @classmethod
    @abstractmethod
    def load(cls, model: str, options: dict[str, Any]) -> Scorer:
        """Build the scorer from its folder (called once per process through `load_scorer`)."""


def score_selected(
    texts: list[str | None], idx: list[int], predict: Callable[[list[str]], np.ndarray]
) -> np.ndarray:
    """One column of `score`: `predict` of the texts at `idx` there, NaN (null) everywhere else.

    `idx` holds the documents the scorer scores (text not null, a language it has a model for); with
    none, `predict` is not called."""
    out = np.full(len(texts), np.nan, dtype=np.float32)
    if idx:
        out[idx] = predict([texts[i] for i in idx])
    return out


class ScorerSpec(ConfigModel):
    """One scorer of a score job: which kind, which model folder, with which options."""

    kind: str
    model: str
    options: dict[str, Any] = Field(default_factory=dict)
    identity: dict[str, Any] = Field(default_factory=dict)
    """`describe`'s result: the part that names the scores (and the output folder's fingerprint)."""


BUILTIN: dict[str, str] = {
    "quality": "classifiers.quality:QualityScorer",
    "perplexity": "classifiers.perplexity:PerplexityScorer",
    "toxicity": "classifiers.toxicity:ToxicityScorer",
    "quality-ensemble": "classifiers.ensemble:EnsembleScorer",  # it may read the columns above
    "quality-buckets": "classifiers.buckets:BucketScorer",  # last: Nemotron-CC's max bucket of any above
}
"""The built-in kinds, in the order their columns come (the old `--model/--perplexity/--toxicity`)."""
for _name, _path in BUILTIN.items():
    register_path("scorer", _name, _path)


def scorer_class(kind: str) -> type[Scorer]:
    """The Scorer a kind names (registry name or import path); ConfigError if there is none."""
    return resolve_stage("scorer", kind, f"scorer {kind}", base=Scorer)


def make_spec(kind: str, model: str, options: dict[str, Any] | None = None) -> ScorerSpec:
    """A validated spec: `describe` runs here, on the driver, so a bad model fails before Spark."""
    options = dict(options or {})
    return ScorerSpec(
        kind=kind, model=model, options=options, identity=scorer_class(kind).describe(model, options)
    )


@cache
def _load(kind: str, model: str, options_json: str) -> Scorer:
    # options_json is our own json.dumps of validated options (a hashable cache key), not outside text
    return scorer_class(kind).load(model, json.loads(options_json))


def plan_spec(spec: ScorerSpec, docs_per_process: int) -> ScorerSpec:
    """`spec` with its options resolved for the job's size (`Scorer.plan`), described again if they moved."""
    options = scorer_class(spec.kind).plan(dict(spec.options), docs_per_process)
    return spec if options == spec.options else make_spec(spec.kind, spec.model, options)


def load_scorer(spec: ScorerSpec) -> Scorer:
    """The scorer of `spec`, loaded once per process."""
    return _load(spec.kind, spec.model, json.dumps(spec.options, sort_keys=True))
