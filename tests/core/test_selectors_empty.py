"""Selections no row can pass are refused when parsed (issue 31, item 13), and only those.

The static check (core.selectors.empty_reason) is held against what selection_mask itself selects: every
selector is also applied, condition by condition and without the check, to a column holding a witness for
each satisfiable one (bounds, both infinities, NaN, null); refused <=> 0 rows selected.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from core.selectors import AND_SEPARATOR, SelectorError, parse_selector, parse_selectors, selection_mask

NUMBERS = [-math.inf, -1.0, 0.0, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 1000.0, math.inf, math.nan, None]
WORDS = ["a", "b", "de", "en", "fr", None]

# (column, condition, refused?)
CASES = [
    ("q", "> 0.5 and < 0.2", True),  # the example
    ("q", ">= 0.7 and <= 0.3", True),
    ("q", "== 1 and == 2", True),
    ("q", "> 0.5 and < 0.5", True),  # bounds that meet, one strict
    ("q", ">= 0.5 and < 0.5", True),
    ("q", ">= 1 and <= 1 and != 1", True),  # the only value in range excluded
    ("q", "== 3 and > 5", True),
    ("q", "> nan", True),  # every comparison with NaN is false (IEEE, Arrow)
    ("q", "== nan", True),
    ("q", "> inf", True),
    ("q", "< -inf", True),
    ("q", "< 0.3 and > 0.7 and != 0.5", True),  # three conditions, bounds given high-first
    ("w", "> en and < de", True),  # strings order too
    ("w", "== en and != en", True),
    ("w", "== en and == de", True),
    ("q", ">= 0.5 and <= 0.5", False),  # one value: 0.5
    ("q", "> 0.2 and < 0.7", False),
    ("q", "> 1 and < 2", False),  # 1.5 (a float column)
    ("q", ">= inf", False),
    ("q", "<= -inf", False),
    ("q", "!= nan", False),
    ("q", "== 3 and > 2", False),
    ("q", "> 30 and < 3000", False),
    ("w", ">= en and <= en", False),
    ("w", "> de and < fr", False),
    ("w", "== en and != de", False),
]


def _rows_selected(column: str, cond: str) -> int:
    """What the job would select: the conditions applied as they are, without the static check."""
    sels = tuple(parse_selector(column, p) for p in AND_SEPARATOR.split(cond))
    table = pa.table({column: pa.array(WORDS if column == "w" else NUMBERS)})
    mask, _ = selection_mask(table, sels)
    return sum(mask.to_pylist())


@pytest.mark.parametrize(("column", "cond", "refused"), CASES)
def test_refused_exactly_when_no_row_can_pass(column, cond, refused):
    selected = _rows_selected(column, cond)
    if refused:
        assert selected == 0
        with pytest.raises(SelectorError, match=rf"select\.{column}: .* selects no document: "):
            parse_selectors({column: cond}, where="sources.web.select")
    else:
        assert selected > 0
        assert len(parse_selectors({column: cond})) == len(AND_SEPARATOR.split(cond))


def test_message_names_the_place_the_column_and_the_empty_range():
    with pytest.raises(SelectorError) as e:
        parse_selectors({"lang": "en", "quality": ">= 0.7 and <= 0.3"}, where="sources.web_hq.select")
    assert str(e.value) == (
        "sources.web_hq.select: select.quality: '>= 0.7 and <= 0.3' selects no document: "
        "the range [0.7, 0.3] is empty (a band is '> low and < high')"
    )


@pytest.mark.parametrize("spec", [[], "[]"])
def test_empty_list_is_refused(spec):
    """`tag: []` (YAML's empty list); as a string "[]" it is the word "[]" compared for equality. On
    `lang` the word is no language code, refused on load like any other (core/languages.py)."""
    if spec == []:
        with pytest.raises(SelectorError, match=r"select\.tag: an empty list selects no document"):
            parse_selectors({"tag": spec})
    else:
        assert parse_selectors({"tag": spec})[0].op == "=="
        with pytest.raises(SelectorError, match=r"select\.lang: unknown language code '\[\]'"):
            parse_selectors({"lang": spec})


def test_what_it_cannot_tell_it_lets_run():
    """Mixed kinds (a number and a word on one column) are not judged here: selection_mask reports the type."""
    assert len(parse_selectors({"q": "> 1 and == en"})) == 2
    assert len(parse_selectors({"q": [None]})) == 1  # null rows only
    assert len(parse_selectors({"q": ["en", None]})) == 1
