"""The quality model as a score-job scorer: the `quality` column, P(high quality) from fastText.

The model folder and its checks are classifiers/model.py's (`read_metadata`, `load_model`); this
file only adapts them to the scorer contract of classifiers/scorer.py. Every text gets a score,
whatever its language (the classifier was trained on what the user gave it); null text is null.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from classifiers.model import QualityModel, check_model_file, load_model, read_metadata
from classifiers.scorer import Scorer, score_selected
from core.errors import ConfigError


class QualityScorer(Scorer):
    kind = "quality"

    def __init__(self, model: QualityModel) -> None:
        self.model = model

    @property
    def columns(self) -> tuple[str, ...]:
        return ("quality",)

    def score(self, texts: list[str | None], langs: list[str | None]) -> dict[str, np.ndarray]:
        idx = [i for i, t in enumerate(texts) if t is not None]
        return {"quality": score_selected(texts, idx, self.model.predict)}

    @classmethod
    def describe(cls, model: str, options: dict[str, Any]) -> dict[str, Any]:
        if options:
            raise ConfigError(f"the quality scorer takes no options, got {', '.join(sorted(options))}")
        sha = read_metadata(model)["model_sha256"]  # ModelError if not a model folder
        check_model_file(model, sha)  # the hash and fastText's header, before Spark or an output folder
        return {"model_sha256": sha}

    @classmethod
    def load(cls, model: str, options: dict[str, Any]) -> QualityScorer:
        return cls(load_model(model))
