"""FineWeb-2's per-language configs as our settings files (one job: the importer). `from_fineweb2`
passes each key of huggingface/fineweb-2's configs/<code>.yml where fineweb-2-pipeline.py passes it,
with the pipeline's shared settings (FW2_SHARED_*); `default_from_fineweb2` makes default.yaml from the
largest languages; `english_settings` is FineWeb's English; `write_fineweb2` reads a git clone of
FineWeb-2 at one commit and writes them all (`python -m curation import-fineweb2`)."""

from __future__ import annotations

import logging
import statistics
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from core.config import build_config
from core.errors import ConfigError, InputError
from core.safe_yaml import load_yaml
from curation.languages.files import write_settings
from curation.languages.schema import (
    DEFAULT,
    ENGLISH_LID_THRESHOLD,
    ENGLISH_STOP_WORDS,
    FOLDER,
    GopherQualitySettings,
    LanguageSettings,
    default_segmenter,
)

log = logging.getLogger(__name__)

FW2_REPO = "huggingface/fineweb-2"

# fineweb-2-pipeline.py's settings shared by every language (its comments say why: trafilatura
# leaves few paragraphs, FineWebQuality counts duplicated line characters with its own ratio).
FW2_SHARED_REPETITION = {"dup_para_frac": 0, "dup_para_char_frac": 0, "dup_line_char_frac": 0}
FW2_SHARED_FINEWEB = {"short_line_thr": 999, "char_duplicates_ratio": 0.1}
FW2_MIN_STOP_WORDS = 2
FW2_KEYS = {
    "language_score", "dup_line_frac", "dup_n_grams", "top_n_grams", "line_punct_thr", "new_line_ratio",
    "min_avg_word_length", "max_avg_word_length", "max_non_alpha_words_ratio", "stopwords",
}  # fmt: skip


def from_fineweb2(
    fw2: dict[str, Any], code: str, source: str, segmenter: str | None = None
) -> LanguageSettings:
    """A FineWeb-2 config (configs/<code>.yml, read) as our settings, each key passed where
    fineweb-2-pipeline.py passes it: language_score -> the LID threshold; dup_line_frac, top_n_grams,
    dup_n_grams -> GopherRepetitionFilter; line_punct_thr, new_line_ratio -> FineWebQualityFilter;
    min/max_avg_word_length, max_non_alpha_words_ratio, stopwords (as stop_words) ->
    GopherQualityFilter; with the pipeline's shared settings (FW2_SHARED_*, min_stop_words=2)."""
    if set(fw2) != FW2_KEYS:
        missing, extra = sorted(FW2_KEYS - set(fw2)), sorted(set(fw2) - FW2_KEYS)
        raise ConfigError(f"{source}: not a FineWeb-2 language config (missing {missing}, unknown {extra})")
    stop_words = tuple(dict.fromkeys(str(w).strip() for w in fw2["stopwords"] if str(w).strip()))
    return build_config(
        LanguageSettings,
        {
            "language": code,
            "source": source,
            "lid_threshold": fw2["language_score"],
            "segmenter": segmenter or default_segmenter(code),
            "gopher_repetition": {
                **FW2_SHARED_REPETITION,
                "dup_line_frac": fw2["dup_line_frac"],
                "top_n_grams": fw2["top_n_grams"],
                "dup_n_grams": fw2["dup_n_grams"],
            },
            "gopher_quality": {
                "min_avg_word_length": fw2["min_avg_word_length"],
                "max_avg_word_length": fw2["max_avg_word_length"],
                "max_non_alpha_words_ratio": fw2["max_non_alpha_words_ratio"],
                "min_stop_words": FW2_MIN_STOP_WORDS,
                "stop_words": stop_words,
            },
            "fineweb_quality": {
                **FW2_SHARED_FINEWEB,
                "line_punct_thr": fw2["line_punct_thr"],
                "new_line_ratio": fw2["new_line_ratio"],
            },
        },
        source,
    )


def default_from_fineweb2(configs: Sequence[LanguageSettings], source: str) -> LanguageSettings:
    """default.yaml: for a language no file measured.

    - LID threshold 0.3: FineWeb-2's floor, and its value for 1,102 of its 1,929 languages; with no
      score distribution measured, a higher bar would drop a whole language unseen.
    - No stop words (min_stop_words null): a list of another language would drop every document.
    - line_punct_thr -1 (off), FineWeb-2's value for 1,613 of its 1,929 languages: whether a
      language's lines end in punctuation datatrove knows depends on its script (Thai's do not).
    - Every other threshold: the lenient decile over `configs` (the 50 largest languages, whose values
      were measured on web-scale text): the value that 90% of them filter harder than, so a language
      no one measured is judged no harder than nine in ten measured ones (a maximum fraction or
      length: the 90th percentile; a minimum: the 10th). Not the median: half of the measured
      languages would then be filtered more leniently than an unknown one, whose prose (its
      segmenter, punctuation, numerals) nothing here has seen. FineWeb-2's small subsets are not
      used: they are mostly Bible text, whose verse repetition gave them thresholds no web page
      resembles (e.g. new_line_ratio 0.07).
    - Segmenter: whitespace (settings_for never changes it: a caller that knows better asks
      curation/filters/segment.py's segmenter_for).
    """

    def lenient(values: Iterable[float], upper: bool) -> float:
        xs = sorted(values)
        q = statistics.quantiles(xs, n=10, method="inclusive")  # 9 cut points: deciles
        return round(q[-1] if upper else q[0], 3)

    def hi(values: Iterable[float]) -> float:  # a maximum: lenient is high
        return lenient(values, upper=True)

    def lo(values: Iterable[float]) -> float:  # a minimum: lenient is low
        return lenient(values, upper=False)

    def hi_pairs(pairs_of: list[tuple[tuple[int, float], ...]]) -> list[tuple[int, float]]:
        ns = sorted({n for pairs in pairs_of for n, _ in pairs})
        return [(n, hi(f for pairs in pairs_of for m, f in pairs if m == n)) for n in ns]

    rep = [c.gopher_repetition for c in configs]
    qual = [c.gopher_quality for c in configs]
    fw = [c.fineweb_quality for c in configs]
    return build_config(
        LanguageSettings,
        {
            "language": DEFAULT,
            "source": source,
            "lid_threshold": 0.3,
            "segmenter": "whitespace",
            "gopher_repetition": {
                **FW2_SHARED_REPETITION,
                "dup_line_frac": hi(r.dup_line_frac or 0 for r in rep),
                "top_n_grams": hi_pairs([r.top_n_grams for r in rep]),
                "dup_n_grams": hi_pairs([r.dup_n_grams for r in rep]),
            },
            "gopher_quality": {
                "min_avg_word_length": lo(q.min_avg_word_length or 0 for q in qual),
                "max_avg_word_length": hi(q.max_avg_word_length or 0 for q in qual),
                # datatrove's name, but a minimum share of words with a letter: lenient is low
                "max_non_alpha_words_ratio": lo(q.max_non_alpha_words_ratio or 0 for q in qual),
                "min_stop_words": None,
                "stop_words": (),
            },
            "fineweb_quality": {
                **FW2_SHARED_FINEWEB,
                "line_punct_thr": -1,
                "new_line_ratio": hi(f.new_line_ratio for f in fw),
            },
        },
        source,
    )


def english_settings() -> LanguageSettings:
    """eng_Latn: FineWeb's English settings (datatrove's defaults for every block, C4's included)."""
    return LanguageSettings(
        language="eng_Latn",
        source="FineWeb (English): datatrove 0.10.1's defaults of GopherRepetitionFilter, "
        "GopherQualityFilter, FineWebQualityFilter and C4QualityFilter; LID threshold 0.65",
        lid_threshold=ENGLISH_LID_THRESHOLD,
        segmenter=default_segmenter("eng_Latn"),
        gopher_quality=GopherQualitySettings(stop_words=ENGLISH_STOP_WORDS),
        c4_quality=True,
    )


class _Fw2Repo:
    """Files of a FineWeb-2 git repository (a clone, or a bare git directory) at one commit."""

    def __init__(self, git_dir: str | Path, rev: str = "HEAD") -> None:
        self.git_dir = str(git_dir)
        self.commit = self._git("rev-parse", "--verify", f"{rev}^{{commit}}").strip()
        self.skipped: list[tuple[str, str]] = []
        """(subset, words) of the distribution's rows `largest` left out: words not a whole number."""

    def _git(self, *args: str) -> str:
        try:
            out = subprocess.run(
                ["git", f"--git-dir={self.git_dir}", *args], capture_output=True, text=True, check=True
            )
        except subprocess.CalledProcessError as e:
            raise InputError(f"{self.git_dir}: git {' '.join(args)}: {e.stderr.strip()}") from None
        return out.stdout

    def read(self, path: str) -> str:
        return self._git("show", f"{self.commit}:{path}")

    def largest(self, top: int) -> list[str]:
        """The `top` subsets with the most words (fineweb2-language-distribution.csv, train split)."""
        import csv
        import io

        name = "fineweb2-language-distribution.csv"
        rows = csv.DictReader(io.StringIO(self.read(name)))
        words: dict[str, int] = {}
        for r in rows:
            if r.get("split") != "train" or str(r.get("subset")).endswith("_removed"):
                continue
            n = str(r.get("words") or "").strip()
            if n.isascii() and n.isdigit():
                words[str(r["subset"])] = int(n)
            else:  # counted and said: a row left out could be one of the largest
                self.skipped.append((str(r.get("subset")), n))
        if self.skipped:
            shown = ", ".join(f"{s} ({w!r})" for s, w in self.skipped[:5])
            log.warning(
                "%s: %d train rows left out, their words is not a whole number: %s",
                name,
                len(self.skipped),
                shown,
            )
        return sorted(words, key=lambda s: (-words[s], s))[:top]


def write_fineweb2(
    git_dir: str | Path, out: str | Path = FOLDER, top: int = 50, rev: str = "HEAD"
) -> list[Path]:
    """configs/languages/ from a FineWeb-2 repository: its `top` largest languages, eng_Latn and
    default.yaml (`python -m curation import-fineweb2`)."""
    repo = _Fw2Repo(git_dir, rev)
    out = Path(out)
    how = "Made by `python -m curation import-fineweb2 FINEWEB2_GIT_DIR`; edit the generator, not this file."
    shipped = []
    for code in repo.largest(top):
        file = f"configs/{code}.yml"
        source = f"{FW2_REPO} commit {repo.commit}, file {file} (Apache-2.0)"
        data = load_yaml(repo.read(file), f"{FW2_REPO}:{file}")
        shipped.append(from_fineweb2(data, code, source))
    source = (
        f"{FW2_REPO} commit {repo.commit}: lenient deciles over configs/<code>.yml of its {top} "
        "largest languages (fineweb2-language-distribution.csv, words), see default_from_fineweb2"
    )
    # every file is built and validated before the first is written: a bad config of FineWeb-2's
    # cannot leave the folder half old, half new
    files = [*shipped, english_settings(), default_from_fineweb2(shipped, source)]
    out.mkdir(parents=True, exist_ok=True)
    return [write_settings(s, out / f"{s.language}.yaml", how) for s in files]
