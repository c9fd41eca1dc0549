"""core/removal.py: the one check that a step did not remove (nearly) everything it was given.

Its callers (dedup's decontaminate stage, tokenize's selection) are tested on real data in their own
tests; here the rule itself: the share, the smallest input judged, the opt-in, and the message.
"""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from core.removal import MIN_DOCUMENTS, REMOVE_ALL_SHARE, RemovedTooMuch, check_removal


def _check(removed: int, total: int, allowed: bool = False, **kw) -> None:
    check_removal("step", removed, total, "step.knob (3)", "step.allow_remove_all", allowed, **kw)


@pytest.mark.parametrize(
    ("removed", "total", "refused"),
    [
        (157, 157, True),  # the case
        (99, 100, True),  # exactly the share, at the smallest input judged
        (98, 100, False),
        (990, 1000, True),
        (989, 1000, False),
        (99, 99, False),  # under MIN_DOCUMENTS: a handful says nothing about the setting
        (0, 0, False),
        (0, 1000, False),
    ],
)
def test_refused_exactly_from_the_share_on_inputs_large_enough(removed, total, refused):
    assert (REMOVE_ALL_SHARE, MIN_DOCUMENTS) == (0.99, 100)
    if refused:
        with pytest.raises(RemovedTooMuch):
            _check(removed, total)
    else:
        _check(removed, total)
    _check(removed, total, allowed=True)  # the opt-in always passes


def test_message_names_the_step_the_counts_the_settings_the_opt_in_and_what_is_left():
    with pytest.raises(RemovedTooMuch) as e:
        _check(157, 157, left="Nothing is published.")
    assert isinstance(e.value, ConfigError)
    assert str(e.value) == (
        "step removed all 157 documents, which is almost always a setting that matches "
        "everything: check step.knob (3). If that is what you want, set step.allow_remove_all: true. "
        "Nothing is published."
    )
    with pytest.raises(RemovedTooMuch, match=r"step removed 995 of 1,000 \(99\.5%\) documents"):
        _check(995, 1000)


def test_only_everything_with_share_1_from_one_document():
    """How tokenize's selection uses it: only a selection that keeps nothing is refused."""
    _check(999, 1000, share=1.0, min_total=1)
    with pytest.raises(RemovedTooMuch, match="removed all 1 documents"):
        _check(1, 1, share=1.0, min_total=1)
