"""Per-language counts of tokenized documents: documents, UTF-8 bytes and tokens per `lang` value.

`tokenize` (tokens/job.py) counts them per part, the manifest (tokens/shards.py) sums the parts, and
the report's "bytes per token by language" table divides them: bytes per token is how well the
tokenizer compresses each language's text (mT5 and BLOOM report it to show a tokenizer trained on a
multilingual mix does not leave a script at one token per byte). Tokens exclude the EOD token.

The `lang` column is data, so the mapping is bounded: `MAX_LANGUAGE_KEYS` values, the rest summed
under "other" (a column of ids mistaken for languages must not grow a marker without end).

Counting only: what a language code is (its form, ISO tables, scripts) is core/languages.py's, the one
home of the language vocabulary; a `lang` value is counted here as the string it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

LANGUAGE_COLUMN = "lang"
MAX_LANGUAGE_KEYS = 10_000
"""Distinct `lang` values counted per part and per manifest; further ones are summed under OTHER."""
OTHER, NO_LANGUAGE = "other", "none"


def count_languages(
    langs: list[Any], texts: list[str], arrays: list[np.ndarray], cap: int = MAX_LANGUAGE_KEYS
) -> dict[str, dict[str, int]]:
    """{lang: {documents, bytes, tokens}} over the tokenized documents (null lang: "none").

    The first `cap` values met (in document order, so a rerun counts the same) have their own entry;
    any further value is added to "other"."""
    out: dict[str, dict[str, int]] = {}
    for lang, text, arr in zip(langs, texts, arrays, strict=True):
        key = NO_LANGUAGE if lang is None else str(lang)
        if key not in out and len(out) >= cap:
            key = OTHER
        c = out.setdefault(key, {"documents": 0, "bytes": 0, "tokens": 0})
        c["documents"] += 1
        c["bytes"] += len(text.encode("utf-8"))
        c["tokens"] += len(arr)
    return out


def merge_languages(
    counts: list[dict[str, dict[str, int]]], cap: int = MAX_LANGUAGE_KEYS
) -> dict[str, dict[str, int]]:
    """Sum of parts' `languages`; past `cap` values, the ones with fewest tokens go to "other"
    (ties by name: the same parts give the same manifest)."""
    total: dict[str, dict[str, int]] = {}
    for part in counts:
        for key, c in part.items():
            t = total.setdefault(key, {"documents": 0, "bytes": 0, "tokens": 0})
            for k in t:
                t[k] += int(c[k])
    if len(total) > cap:
        named = sorted((k for k in total if k != OTHER), key=lambda k: (-total[k]["tokens"], k))
        keep = set(named[: cap - 1])  # one place left for "other"
        other = {"documents": 0, "bytes": 0, "tokens": 0}
        for k in [k for k in total if k not in keep]:
            c = total.pop(k)
            for f in other:
                other[f] += c[f]
        total[OTHER] = other
    return dict(sorted(total.items()))
