"""Refuse a step that removed (nearly) every document it was given, unless the user said so.

`decontaminate.ngram: 1` with `skip_trivial: false` matches every document (every page shares a
word with an evaluation set): 157 of 157 removed, exit status 0, and the mistake shows only when
the training data turns out empty. A selector on a column that is NaN everywhere matches no
document the same way. The project already refuses, when it is parsed, a selector that can select
nothing (core/selectors.py), and a percentile with nothing to rank; this is the same refusal for
what only the data shows, made once the step has counted and before its result is published.

A step calls `check_removal` with its counts, the settings that decide what it removes (named in
the error, so the user knows what to look at) and the key that says "yes, remove that much". The
error is a ConfigError (`error: ...`, exit 2) and says what is left on disk, which the caller knows.
"""

from __future__ import annotations

from core.errors import ConfigError

__all__ = ["MIN_DOCUMENTS", "REMOVE_ALL_SHARE", "RemovedTooMuch", "check_removal"]

REMOVE_ALL_SHARE = 0.99
"""A step that removes at least this share of its input is refused (a real filter removes far less:
the demo's decontamination removes < 1% of the shared WARC pages, dedup a few tens of percent)."""
MIN_DOCUMENTS = 100
"""Inputs smaller than this are not judged by share: 3 of 3 removed from a test's handful of
documents can be right, and says nothing about the setting."""


class RemovedTooMuch(ConfigError):
    """A step removed (nearly) everything; the message names its settings and the opt-in key."""


def check_removal(
    step: str,
    removed: int,
    total: int,
    settings: str,
    opt_in: str,
    allowed: bool,
    *,
    share: float = REMOVE_ALL_SHARE,
    min_total: int = MIN_DOCUMENTS,
    left: str = "",
) -> None:
    """Raise RemovedTooMuch when `step` removed at least `share` of `total` documents (and `total`
    is at least `min_total`), unless `allowed` (the user's `opt_in` key is set).

    `settings` names what decides the removal (`decontaminate.ngram=1, skip_trivial=false`), `left`
    what the failed run left behind and how to go on; both go into the message."""
    if allowed or total <= 0 or total < min_total or removed < share * total:
        return
    how_much = f"all {total:,}" if removed >= total else f"{removed:,} of {total:,} ({removed / total:.1%})"
    raise RemovedTooMuch(
        f"{step} removed {how_much} documents, which is almost always a setting that matches "
        f"everything: check {settings}. If that is what you want, set {opt_in}: true."
        + (f" {left}" if left else "")
    )
