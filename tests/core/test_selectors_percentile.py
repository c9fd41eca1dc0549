"""Percentile selectors (`quality: "top 30%"`, issue 28 item 3): how they parse, which forms are refused
when parsed, and the threshold they resolve to on real values: the lengths and line counts of the 218
real Common Crawl documents of the DCLM human labels (../shared/data/quality).

The checks are the definition, not the code's arithmetic: for "top p%" of n ranked values the resolved
`>= t` must keep at least ceil(p*n) values while fewer than ceil(p*n) lie strictly above t (t is then
the ceil(p*n)-th highest value), computed here with plain Python sorting.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from core.selectors import (
    SelectorError,
    parse_selectors,
    percentile_threshold,
    selection_mask,
    selectors_spec,
)
from testkit.shared_data import shared_data_dir


@pytest.fixture(scope="module")
def labelled():
    """The DCLM human-labelled documents: (text, label) pairs, real CC pages."""
    path = shared_data_dir() / "quality" / "dclm_human_labels_dev.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("spec", "op", "value", "canonical"),
    [
        ("top 30%", "top", 30, "top 30%"),
        ("  Bottom 12.5 % ", "bottom", 12.5, "bottom 12.5%"),
        ("TOP 100%", "top", 100, "top 100%"),
        ("top 0.5%", "top", 0.5, "top 0.5%"),
    ],
)
def test_percentile_forms_parse_and_record_canonically(spec, op, value, canonical):
    (sel,) = parse_selectors({"quality": spec})
    assert (sel.op, sel.value, sel.is_percentile) == (op, value, True)
    # a manifest records the canonical form, which parses back to the same selector
    assert selectors_spec((sel,)) == {"quality": canonical}
    assert parse_selectors(selectors_spec((sel,))) == (sel,)


@pytest.mark.parametrize("bad", ["top 0%", "top 120%", "top x%", "bottom -5%", "top nan%", "top 30", "top %"])
def test_invalid_percentiles_are_refused_when_parsed_naming_the_column(bad):
    with pytest.raises(SelectorError, match=r"sources\.web\.select: select\.quality: .* is not a percentile"):
        parse_selectors({"lang": "en", "quality": bad}, where="sources.web.select")


def test_a_percentile_stands_alone_and_a_word_stays_a_word():
    with pytest.raises(SelectorError, match="a percentile stands alone on its column"):
        parse_selectors({"quality": "top 30% and > 0.2"})
    # `top rated` has neither a number nor a %: an equality on a string column, as before
    (sel,) = parse_selectors({"tier": "top rated"})
    assert (sel.op, sel.value) == ("==", "top rated")


def test_executors_refuse_an_unresolved_percentile():
    table = pa.table({"quality": [0.1, 0.9]})
    with pytest.raises(SelectorError, match="is a percentile, which is resolved per source on the driver"):
        selection_mask(table, parse_selectors({"quality": "top 50%"}))


def _kth(values, k, top):
    """The k-th highest (top) or lowest value, by sorting."""
    return sorted(values, reverse=top)[k - 1]


@pytest.mark.parametrize("side", ["top", "bottom"])
@pytest.mark.parametrize("pct", [10, 30, 50, 12.5, 100])
def test_threshold_keeps_the_stated_share_of_real_document_lengths(labelled, side, pct):
    chars = [len(d["text"]) for d in labelled]
    (sel,) = parse_selectors({"chars": f"{side} {pct}%"})
    resolved, info = percentile_threshold(sel, np.asarray(chars))
    n = len(chars)
    k = math.ceil(Fraction(str(pct)) * n / 100)  # the smallest count that is at least pct% of n
    t = _kth(chars, k, side == "top")
    assert resolved.op == (">=" if side == "top" else "<=") and resolved.value == t
    assert isinstance(resolved.value, int)  # an integer column gives an integer threshold
    kept = [c for c in chars if (c >= t if side == "top" else c <= t)]
    ties = len(kept) - k
    assert info == {
        "percentile": f"{side} {pct}%",
        "resolved": f"{resolved.op} {t}",
        "ranked": n,
        "target": k,
        "selected": len(kept),
        "ties": ties,
    }
    # The share kept is the stated one, up to one row of rounding (k = ceil) plus the rows tied with t:
    # 207 distinct lengths among 218 documents, so ties add at most a few rows.
    assert pct / 100 <= len(kept) / n < pct / 100 + (1 + ties) / n
    # the resolved selector is a plain comparison: applied to the same rows, it keeps exactly those
    mask, _ = selection_mask(pa.table({"chars": chars}), (resolved,))
    assert [c for c, m in zip(chars, mask.to_pylist(), strict=True) if m] == kept


def test_ties_at_the_threshold_are_kept_and_counted(labelled):
    """Line counts of real pages tie heavily (18 documents have 2 lines): every tied row is selected."""
    lines = [d["text"].count("\n") + 1 for d in labelled]
    n = len(lines)
    found_ties = False
    for pct in (5, 10, 20, 30, 40, 50, 60, 70, 80, 90):
        (sel,) = parse_selectors({"lines": f"bottom {pct}%"})
        _, info = percentile_threshold(sel, np.asarray(lines))
        k = math.ceil(pct * n / 100)
        t = _kth(lines, k, top=False)
        below, at = sum(v < t for v in lines), sum(v == t for v in lines)
        # t is the k-th lowest: fewer than k values lie strictly below it, at least k at or below it
        assert below < k <= below + at
        assert info["selected"] == below + at and info["ties"] == below + at - k
        found_ties |= info["ties"] > 0
    assert found_ties  # the data does tie at some threshold, so the tie rule was exercised


def test_float_threshold_round_trips_through_its_recorded_form(labelled):
    """A float32 score's threshold, written as `>= t` and parsed back, selects the same rows."""
    ratio = np.asarray(
        [sum(ch.isalpha() for ch in d["text"]) / len(d["text"]) for d in labelled], dtype=np.float32
    )
    (sel,) = parse_selectors({"alpha": "top 30%"})
    resolved, info = percentile_threshold(sel, ratio.astype(np.float64))
    table = pa.table({"alpha": pa.array(ratio, pa.float32())})
    again = parse_selectors(selectors_spec((resolved,)))  # as a manifest's resolved_select reads back
    mask, _ = selection_mask(table, again)
    assert pc.sum(mask).as_py() == info["selected"] >= math.ceil(0.3 * len(ratio))


def test_nothing_to_rank_is_an_error_naming_the_selector():
    (sel,) = parse_selectors({"quality": "top 10%"})
    with pytest.raises(SelectorError, match=r"source 'web': selector `quality top 10%`: no document has"):
        percentile_threshold(sel, np.zeros(0), source="source 'web'")
