"""The `toxicity` score column: P(toxic) of a document, from a model that works offline.

Two backends behind one scorer (kind `toxicity`, `--toxicity MODEL` of `classifiers score`):

- `profanity-check` (**the default**): the linear SVM + TF-IDF bag of words shipped in the pinned
  `alt-profanity-check==1.9.1` wheel (trained with scikit-learn 1.9.1, which is pinned alongside:
  its pickles are loaded by the exact version that wrote them, so no InconsistentVersionWarning,
  and one would be an error). Nothing to train, nothing downloaded.
  Trust boundary: the model is two joblib *pickles*, and unpickling runs code. They come from a
  pinned package, and before loading them (on the driver in `describe`, and again on every
  executor in `load`, whose environment may differ) their sha256 is checked against the hashes of
  the 1.9.1 wheel (`PROFANITY_CHECK_SHA256`), and the package and scikit-learn versions against
  the pins. The package's own module is never imported: it unpickles at import time, before any
  check could run.
- a folder trained by `python -m classifiers train-toxicity --positive TOXIC --negative CLEAN
  --output DIR` on the user's own data: the fastText classifier of classifiers/train.py (same
  recipe, normalisation and folder checks as `train-quality`), labels `__label__toxic` /
  `__label__clean`. Its config's `languages` (default: every language) says which `lang` values it
  scores, so per-language models can sit side by side in one score job.

How a document is scored. Both backends judge a text as a bag of words, and a bag of words does not
scale to a whole page: measured with profanity-check on Wikipedia articles (shared data) with the
test rants spliced in, a whole-text score is a steep function of the toxic share, 0.007 for one
60-word rant in 1,000 clean words, 0.6-0.7 at 20 % toxic words, 0.93 at 33 %, so it both hides a
toxic passage in a long page and saturates long before a page is mostly abuse. The maximum over
short windows was no better the other way: one window at >= 0.5 is found in 20 of 105 Wikipedia
articles (windows of whole sentences, 15 words or more) and in 4 of 105 (60 words or more). So a
document is cut into windows of about `window_words` words (default 50, roughly one comment,
the kind of text the model was trained on: lines are kept together and joined up to that length,
longer lines are cut into equal pieces) and its score is the **mean of the windows' P(toxic),
weighted by their words**: about the share of the text that reads as toxic (0.16 / 0.24 / 0.36 /
0.44 for the 9 / 20 / 33 / 43 % mixes above, over a floor of ~0.02 on clean prose). A text of up
to `window_words` words is one window: its score is exactly the model's own P(toxic). Only the
first `classifiers.text.MAX_CHARS` characters are read. Null text, and a text with no word, get
null.

Languages. profanity-check is English only, and scoring other languages anyway is worse than not
scoring them: on the Leipzig sentences of the shared data, 0.4 % of English sentences reach 0.5
but 11 % of German, 25 % of Afrikaans and 58 % of Sesotho ones (their words collide with the
English vocabulary the model weighs; a text with no known word at all scores 0.036). So it scores
English documents (`lang` `eng_Latn`, or an older output's `en`) and documents with no language (a null `lang`, or no `lang` column: nothing says
they are not English, and the user asked for the score); any other language gets null, counted
by the score job as `toxicity_null`. A recipe selector on `toxicity` does not
select null rows: apply it to English sources, or train a model per language.

Known weaknesses (the test texts, testkit/toxicity_texts.py, show each):
- bag of words: it finds abusive *words*, not abuse. Threats and insults without profanity score
  low ("I will find where you live and make you regret every word" scores 0.27), sarcasm and
  implicit toxicity are missed;
- it flags sensitive words in innocent use: medical text about genitals and sexually transmitted
  infections, news quoting an insult from a court case, a rooster and a donkey ("cock", "ass")
  score above 0.5 (6 of 16 hard negatives); history of war and genocide scores low (no profanity);
- reclaimed and quoted words count the same as abuse; English only (above);
- it was trained on short social-media comments; on long documents it is only as good as the
  windowing above (a toxic window among many clean ones moves the mean by its share of words).
"""

from __future__ import annotations

import importlib.metadata
import math
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import model_validator

from classifiers.config import ToxicityTrainConfig
from classifiers.model import (
    FastTextClassifier,
    ModelError,
    check_model_file,
    load_model,
    read_metadata,
)
from classifiers.scorer import Scorer, score_selected
from classifiers.text import MAX_CHARS
from classifiers.train import FastTextTask, train_fasttext
from core.config import ConfigModel, build_config, check_positive
from core.files import sha256_file
from core.languages import LanguageSet

PROFANITY_CHECK = "profanity-check"
"""The `--toxicity` value that selects the packaged model (the default)."""
PROFANITY_CHECK_PACKAGE = "alt-profanity-check"
PROFANITY_CHECK_VERSION = "1.9.1"
SKLEARN_VERSION = "1.9.1"
"""alt-profanity-check x.y.z is trained with scikit-learn x.y.z (its README); both are pinned."""
PROFANITY_CHECK_SHA256 = {
    # sha256 of the files of the alt-profanity-check 1.9.1 wheel from the package index.
    "profanity_check/data/model.joblib": "aeafc04849d4d93db4721cf30a86ebf22085595294b8a07d51918e7fa98f538b",
    "profanity_check/data/vectorizer.joblib": (
        "19c5200dc6a41f026e0558e2f164f5fe8d8f58e502b46b37e4385037fcfa4831"
    ),
}
PROFANITY_CHECK_LANGUAGES = ("en",)

LABEL_TOXIC = "__label__toxic"
LABEL_CLEAN = "__label__clean"
FORMAT = "refinery-toxicity-fasttext-v1"
DEFAULT_WINDOW_WORDS = 50


class ToxicityModel(FastTextClassifier):
    """A `train-toxicity` folder: `predict(texts) -> P(toxic)`."""

    positive_label = LABEL_TOXIC
    kind = "toxicity"
    trainer = "train-toxicity"


TOXICITY = FastTextTask(FORMAT, LABEL_TOXIC, LABEL_CLEAN, ToxicityModel)


def train_toxicity(
    positive: list[str | Path], negative: list[str | Path], output: str | Path, cfg: ToxicityTrainConfig
) -> dict[str, Any]:
    """Train a fastText toxicity model: toxic texts (positive) vs clean texts; returns its metadata."""
    return train_fasttext(positive, negative, output, cfg, TOXICITY)


class ToxicityOptions(ConfigModel):
    """`--option toxicity.KEY=VALUE` of the score job."""

    window_words: int = DEFAULT_WINDOW_WORDS
    """Words per scoring window (see the module docstring); part of the scores' identity."""

    @model_validator(mode="after")
    def _check(self) -> ToxicityOptions:
        check_positive("window_words", self.window_words)
        return self


def windows(text: str, window_words: int) -> list[tuple[str, int]]:
    """(window, its word count): whole lines joined up to `window_words` words, a longer line cut
    into equal pieces no longer than that. No window for a text without words."""
    out: list[tuple[str, int]] = []
    cur: list[str] = []
    for line in text[:MAX_CHARS].split("\n"):
        words = line.split()
        if len(words) > window_words:
            if cur:
                out.append((" ".join(cur), len(cur)))
                cur = []
            size = math.ceil(len(words) / math.ceil(len(words) / window_words))
            out += [
                (" ".join(words[i : i + size]), len(words[i : i + size])) for i in range(0, len(words), size)
            ]
        elif words:
            if cur and len(cur) + len(words) > window_words:
                out.append((" ".join(cur), len(cur)))
                cur = []
            cur += words
    if cur:
        out.append((" ".join(cur), len(cur)))
    return out


def document_scores(
    texts: Sequence[str], window_words: int, predict: Callable[[list[str]], np.ndarray]
) -> np.ndarray:
    """Word-weighted mean of P(toxic) over each text's windows; NaN for a text without words.

    All windows of the batch go to `predict` in one call (one sparse product, one fastText call)."""
    wins: list[str] = []
    weights: list[int] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        for win, n in windows(text, window_words):
            wins.append(win)
            weights.append(n)
            owner.append(i)
    if not wins:
        return np.full(len(texts), np.nan, dtype=np.float32)
    w = np.asarray(weights, dtype=np.float64)
    probs = np.asarray(predict(wins), dtype=np.float64)
    num = np.bincount(owner, probs * w, minlength=len(texts))
    den = np.bincount(owner, w, minlength=len(texts))
    with np.errstate(invalid="ignore"):  # 0/0 -> NaN: a text without words
        return (num / den).astype(np.float32)


def profanity_check_files() -> dict[str, Path]:
    """The pinned package's model files, after checking versions and hashes; ModelError otherwise."""
    try:
        dist = importlib.metadata.distribution(PROFANITY_CHECK_PACKAGE)
        sklearn = importlib.metadata.version("scikit-learn")
    except importlib.metadata.PackageNotFoundError as e:
        raise ModelError(
            f"toxicity model {PROFANITY_CHECK!r} needs {e.name}: pip install "
            f"{PROFANITY_CHECK_PACKAGE}=={PROFANITY_CHECK_VERSION} scikit-learn=={SKLEARN_VERSION}"
        ) from None
    for name, have, want in (
        (PROFANITY_CHECK_PACKAGE, dist.version, PROFANITY_CHECK_VERSION),
        ("scikit-learn", sklearn, SKLEARN_VERSION),
    ):
        if have != want:
            raise ModelError(f"toxicity model {PROFANITY_CHECK!r} needs {name}=={want}, found {have}")
    files = {}
    for rel, sha in PROFANITY_CHECK_SHA256.items():
        path = Path(str(dist.locate_file(rel)))
        if not path.is_file():
            raise ModelError(f"{PROFANITY_CHECK_PACKAGE} is installed without {rel}")
        if sha256_file(path) != sha:
            # Never unpickled: a changed pickle is code we did not check.
            raise ModelError(
                f"{path} is not the file of {PROFANITY_CHECK_PACKAGE}=={PROFANITY_CHECK_VERSION}"
            )
        files[Path(rel).name] = path
    return files


class ProfanityCheck:
    """alt-profanity-check's vectorizer + calibrated linear SVM, loaded from its verified files."""

    def __init__(self) -> None:
        import joblib
        from sklearn.exceptions import InconsistentVersionWarning

        files = profanity_check_files()
        with warnings.catch_warnings():
            # A pickle from another scikit-learn may predict differently: refuse, do not warn.
            warnings.simplefilter("error", InconsistentVersionWarning)
            self.vectorizer = joblib.load(files["vectorizer.joblib"])
            self.model = joblib.load(files["model.joblib"])
        self.toxic_column = list(self.model.classes_).index(1)

    def predict(self, texts: list[str]) -> np.ndarray:
        return self.model.predict_proba(self.vectorizer.transform(texts))[:, self.toxic_column]


class ToxicityScorer(Scorer):
    """The `toxicity` column; `model` is `profanity-check` or a train-toxicity folder."""

    kind = "toxicity"

    def __init__(
        self,
        predict: Callable[[list[str]], np.ndarray],
        window_words: int,
        languages: LanguageSet | None,
    ) -> None:
        self.predict = predict
        self.window_words = window_words
        self.languages = languages
        """Scored `lang` values (None: all); a document without `lang` is always scored."""

    @property
    def columns(self) -> tuple[str, ...]:
        return ("toxicity",)

    def score(self, texts: list[str | None], langs: list[str | None]) -> dict[str, np.ndarray]:
        keep = self.languages
        idx = [
            i
            for i, (t, lang) in enumerate(zip(texts, langs))
            if t is not None and (keep is None or lang is None or lang in keep)
        ]
        windowed = partial(document_scores, window_words=self.window_words, predict=self.predict)
        return {"toxicity": score_selected(texts, idx, windowed)}

    @classmethod
    def describe(cls, model: str, options: dict[str, Any]) -> dict[str, Any]:
        opts = build_config(ToxicityOptions, options, "--option toxicity")
        scoring = {"window_words": opts.window_words, "aggregate": "word-weighted mean of windows"}
        if model == PROFANITY_CHECK:
            files = profanity_check_files()
            return {
                "backend": PROFANITY_CHECK,
                "package": f"{PROFANITY_CHECK_PACKAGE}=={PROFANITY_CHECK_VERSION}",
                "scikit_learn": SKLEARN_VERSION,
                "files_sha256": {
                    name: PROFANITY_CHECK_SHA256[f"profanity_check/data/{name}"] for name in files
                },
                **scoring,
                "languages": list(PROFANITY_CHECK_LANGUAGES),
            }
        meta = _toxicity_metadata(model)
        languages = meta.get("config", {}).get("languages")
        return {
            "backend": "fasttext",
            "model_sha256": meta["model_sha256"],
            **scoring,
            **({"languages": sorted(languages)} if languages else {}),
        }

    @classmethod
    def load(cls, model: str, options: dict[str, Any]) -> ToxicityScorer:
        opts = build_config(ToxicityOptions, options, "--option toxicity")
        if model == PROFANITY_CHECK:
            return cls(ProfanityCheck().predict, opts.window_words, LanguageSet(PROFANITY_CHECK_LANGUAGES))
        languages = _toxicity_metadata(model).get("config", {}).get("languages")
        ft = load_model(model, ToxicityModel)  # hash checked again here, on the executor
        return cls(ft.predict, opts.window_words, LanguageSet(languages) if languages else None)


def _toxicity_metadata(model: str) -> dict[str, Any]:
    """metadata.json of a train-toxicity folder whose model.bin has its hash; ModelError otherwise."""
    path = Path(model)
    if not path.is_dir():
        raise ModelError(
            f"toxicity model {model!r}: not {PROFANITY_CHECK!r} (the packaged model) and no such folder "
            "(train one with train-toxicity)"
        )
    meta = read_metadata(path, "train-toxicity")
    if meta.get("format") != FORMAT:
        raise ModelError(
            f"{path} is a {meta.get('format', 'unknown')!s} folder, not a toxicity model "
            "(train one with train-toxicity)"
        )
    check_model_file(path, meta["model_sha256"])  # the hash and fastText's header (ModelError)
    return meta
