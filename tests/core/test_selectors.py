"""Recipe selectors: the band form (`> a and < b`) that drops both tails of a score."""

from __future__ import annotations

import pyarrow as pa
import pytest

from core.selectors import SelectorError, parse_selectors, selection_mask, selectors_spec


def test_band_keeps_only_the_middle_and_counts_each_tail():
    sels = parse_selectors({"perplexity": "> 30 AND < 3000", "lang": "en"})
    table = pa.table(
        {
            "perplexity": [5.0, 30.0, 31.0, 2999.5, 3000.0, 9e9, None],
            "lang": ["en", "en", "en", "en", "en", "en", "en"],
        }
    )
    mask, drops = selection_mask(table, sels)
    # the bounds are strict: 30 and 3000 themselves are out
    assert mask.to_pylist() == [False, False, True, True, False, False, False]
    assert drops == {
        "select:perplexity > 30": 2,
        "select:perplexity < 3000": 2,
        "null:perplexity": 1,
    }
    # recorded as written (canonical spacing), so a manifest names the band it was made with
    assert selectors_spec(sels) == {"perplexity": "> 30 and < 3000", "lang": "en"}
    assert parse_selectors(selectors_spec(sels)) == sels


def test_single_conditions_record_as_before():
    """Tokenize fingerprints hash this mapping: one comparison must keep its old canonical form."""
    sels = parse_selectors({"quality": ">=0.02", "lang": ["en", "de"], "dup_cluster_size": 1})
    assert selectors_spec(sels) == {"quality": ">= 0.02", "lang": ["en", "de"], "dup_cluster_size": 1}


@pytest.mark.parametrize("bad", ["en and de", "> 3 and banana", "== en and de"])
def test_and_joins_only_comparisons(bad):
    with pytest.raises(SelectorError, match="only comparisons join with 'and'"):
        parse_selectors({"x": bad})


def test_null_selects_null_rows_and_a_list_may_hold_null():
    """`drop_reason: null` keeps what an annotate-mode extract kept; a list with null adds null rows."""
    table = pa.table(
        {
            "drop_reason": [None, "langid:low_score", None, "gopher_quality:x"],
            "drop_stage": [None, "langid", "filter:c4_quality", "filter:gopher_quality"],
        }
    )
    mask, drops = selection_mask(table, parse_selectors({"drop_reason": None}))
    assert mask.to_pylist() == [True, False, True, False]
    assert drops == {"select:drop_reason == None": 2}  # non-null rows fail it; nothing counted as null
    mask, drops = selection_mask(table, parse_selectors({"drop_stage": [None, "filter:c4_quality"]}))
    assert mask.to_pylist() == [True, False, True, False]
    assert sum(drops.values()) == 2 and not any(k.startswith("null:") for k in drops)
    # a plain list without null still counts null rows as `null:<column>`, as before
    mask, drops = selection_mask(table, parse_selectors({"drop_stage": ["langid"]}))
    assert mask.to_pylist() == [False, True, False, False]
    assert drops["null:drop_stage"] == 1
    # recorded as written, so a manifest and a fingerprint name the null selection
    spec = {"drop_reason": None, "drop_stage": [None, "langid"]}
    assert selectors_spec(parse_selectors(spec)) == spec


def test_null_selector_on_an_empty_file():
    """An input file with no rows (a WARC whose pages were all dropped) selects nothing, without error."""
    empty = pa.table({"drop_reason": pa.array([], pa.string())})
    mask, drops = selection_mask(empty, parse_selectors({"drop_reason": None}))
    assert mask.to_pylist() == [] and drops == {}


def test_lang_selector_matches_languages_not_strings():
    """`lang` holds canonical codes (`eng_Latn`) and, in outputs written before them, lid.176's (`en`):
    a recipe's `lang: en` keeps both, a macrolanguage keeps its members, a script narrows, `!=` keeps
    the rest but nulls, and a code that is no language is refused on load."""
    table = pa.table({"lang": ["eng_Latn", "en", "deu_Latn", None, "cmn_Hani", "srp_Cyrl", "srp_Latn"]})

    def kept(spec):
        mask, drops = selection_mask(table, parse_selectors(spec))
        return [v for v, k in zip(table.column("lang").to_pylist(), mask.to_pylist()) if k], drops

    assert kept({"lang": "en"})[0] == ["eng_Latn", "en"]
    assert kept({"lang": ["de", "zho"]})[0] == ["deu_Latn", "cmn_Hani"]
    assert kept({"lang": "srp_Latn"})[0] == ["srp_Latn"]
    assert kept({"lang": "hbs"})[0] == ["srp_Cyrl", "srp_Latn"]
    others, drops = kept({"lang": "!= en"})
    assert others == ["deu_Latn", "cmn_Hani", "srp_Cyrl", "srp_Latn"] and drops["null:lang"] == 1
    assert kept({"lang": ["en", None]})[0] == ["eng_Latn", "en", None]
    with pytest.raises(SelectorError, match=r"select\.lang: unknown language code 'english'"):
        parse_selectors({"lang": "english"})
