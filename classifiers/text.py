"""The one normalisation from document text to a fastText input line, shared by train, score, evaluate.

fastText reads one line per example and splits tokens on whitespace only, so text must be a single
line; and a token is a word *with* its attached punctuation ("end." and "end" are different words).
Our positives mix styles: WikiText is pre-tokenised ("end ." , "@-@"), Wikipedia and web pages are
not. Left alone, the model would learn "punctuation detached from words = high quality", a cue
that says nothing about web pages. So every text is lower-cased and every non-word character is
made its own token before fastText sees it (the same for training and scoring, which is what keeps
the scorer and the evaluator in agreement). Lower-casing follows the same reasoning at our data
sizes: case doubles the vocabulary for little signal (cc_net's and DCLM's fastText inputs are
likewise normalised before training).

Texts are cut to `MAX_CHARS` first: fastText averages word vectors, so a longer text changes the
score very little, while a multi-megabyte page would cost time per prediction.
"""

from __future__ import annotations

import re

LABEL_HIGH = "__label__hq"
LABEL_LOW = "__label__lq"

# 100k characters ~ 15k words, far above a typical web document (a few thousand characters).
MAX_CHARS = 100_000

_PUNCT = re.compile(r"([^\w\s])")
_SPACE = re.compile(r"\s+")


def fasttext_line(text: str) -> str:
    """One lower-cased line with punctuation split into tokens; no newline at the end."""
    text = _PUNCT.sub(r" \1 ", text[:MAX_CHARS].lower())
    return _SPACE.sub(" ", text).strip()
