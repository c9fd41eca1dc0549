"""The extraction-quality metrics of bench/curation/extraction_quality.py, on hand-computed cases, plus a
quality floor for our extractor on 20 real pages of the article-extraction benchmark."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.curation import extraction_quality as eq

# --- article-extraction-benchmark: 4-gram shingles ------------------------------------------


def test_tokenize_keeps_case_and_splits_on_non_word_characters():
    assert eq.aeb_tokenize("Hello, World! it's 2024") == ["Hello", "World", "it", "s", "2024"]
    assert eq.aeb_tokenize(None) == []
    assert eq.aeb_tokenize(" \n ,.; ") == []


def test_shingles_are_a_multiset_of_4_grams():
    # 8 tokens -> 5 windows: abcd, bcda, cdab, dabc, abcd
    sh = eq.aeb_shingles("a b c d a b c d")
    assert sh[("a", "b", "c", "d")] == 2
    assert sum(sh.values()) == 5
    # fewer than 4 tokens: one shorter shingle; none for no token
    assert eq.aeb_shingles("one two") == {("one", "two"): 1}
    assert eq.aeb_shingles("") == {}


def test_identical_text_scores_one():
    text = "The quick brown fox jumps over the lazy dog."
    assert eq.aeb_tp_fp_fn(text, text) == (1.0, 0.0, 0.0)
    assert eq.aeb_evaluate([text], [text]) == (1.0, 1.0, 1.0)
    # tokenization ignores punctuation and whitespace layout
    assert eq.aeb_evaluate([text], ["The quick brown fox\n\njumps over the lazy dog"]) == (1.0, 1.0, 1.0)


def test_disjoint_text_scores_zero():
    assert eq.aeb_evaluate(["alpha beta gamma delta"], ["one two three four"]) == (0.0, 0.0, 0.0)


def test_case_matters():
    assert eq.aeb_evaluate(["alpha beta gamma delta"], ["Alpha beta gamma delta"]) == (0.0, 0.0, 0.0)


def test_partial_overlap_worked_example():
    # gold  a b c d e f   -> abcd bcde cdef            (3 shingles)
    # pred  a b c d e x y -> abcd bcde cdex dexy       (4 shingles)
    # tp = 2, fp = 2, fn = 1; normalized by 5 -> (0.4, 0.4, 0.2)
    # P = 2/4 = 0.5, R = 2/3, F1 = 2 * 0.5 * 2/3 / (0.5 + 2/3) = 4/7
    gold, pred = "a b c d e f", "a b c d e x y"
    assert eq.aeb_tp_fp_fn(gold, pred) == pytest.approx((0.4, 0.4, 0.2))
    p, r, f1 = eq.aeb_evaluate([gold], [pred])
    assert (p, r, f1) == pytest.approx((0.5, 2 / 3, 4 / 7))


def test_repeated_shingles_count_with_multiplicity():
    # gold has abcd twice (5 shingles), pred once: tp 1, fp 0, fn 4 -> P 1, R 1/5
    p, r, _ = eq.aeb_evaluate(["a b c d a b c d"], ["a b c d"])
    assert (p, r) == pytest.approx((1.0, 0.2))


def test_macro_average_is_harmonic_mean_of_averaged_p_and_r():
    # page 1 perfect (P 1, R 1); page 2 the worked example (P 1/2, R 2/3)
    # macro P = 3/4, macro R = 5/6, F1 = 2 * 3/4 * 5/6 / (3/4 + 5/6) = 15/19
    # (the mean of per-page F1s would be (1 + 4/7) / 2 = 11/14, a different number)
    golds = ["w x y z v", "a b c d e f"]
    preds = ["w x y z v", "a b c d e x y"]
    assert eq.aeb_evaluate(golds, preds) == pytest.approx((0.75, 5 / 6, 15 / 19))


def test_empty_prediction_costs_recall_not_precision():
    # page 2 has no output: left out of the precision average, recall 0 there
    # P = 1, R = (1 + 0) / 2 = 1/2, F1 = 2/3
    golds = ["w x y z v", "a b c d e f"]
    assert eq.aeb_evaluate(golds, ["w x y z v", None]) == pytest.approx((1.0, 0.5, 2 / 3))
    assert eq.aeb_evaluate(golds, ["w x y z v", ""]) == pytest.approx((1.0, 0.5, 2 / 3))
    # both empty: the page counts in neither average
    assert eq.aeb_tp_fp_fn("", None) == (0.0, 0.0, 0.0)
    assert eq.aeb_evaluate(["w x y z v", ""], ["w x y z v", None]) == (1.0, 1.0, 1.0)
    # no output anywhere: 0 rather than the benchmark's empty-mean error
    assert eq.aeb_evaluate(golds, [None, None]) == (0.0, 0.0, 0.0)


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError):
        eq.aeb_evaluate(["a"], [])


# --- trafilatura snippets --------------------------------------------------------------------


def test_snippets_tp_fp_fn_tn():
    text = "Die GEMA dreht völlig am Zeiger! Impressum"
    c = eq.snippet_counts(["Die GEMA dreht", "openpetition"], ["Impressum", "31. Mai"], text)
    assert (c.tp, c.fp, c.fn, c.tn) == (1, 1, 1, 1)
    assert c.scores() == pytest.approx((0.5, 0.5, 0.5))


def test_snippets_all_right_and_no_output():
    perfect = eq.snippet_counts(["alpha", "beta"], ["gamma"], "alpha and beta")
    assert (perfect.tp, perfect.fp, perfect.fn, perfect.tn) == (2, 0, 0, 1)
    assert perfect.scores() == (1.0, 1.0, 1.0)
    none = eq.snippet_counts(["alpha", "beta"], ["gamma", "delta"], None)
    assert (none.tp, none.fp, none.fn, none.tn) == (0, 0, 2, 2)
    assert none.scores() == (0.0, 0.0, 0.0)
    # an empty string is output too: the unwanted snippets are absent from it
    empty = eq.snippet_counts(["alpha"], ["gamma"], "")
    assert (empty.tp, empty.fp, empty.fn, empty.tn) == (0, 0, 1, 1)


def test_snippets_pool_over_pages():
    # page 1: tp 1, fn 1, tn 1; page 2: tp 1, fp 1 -> tp 2, fp 1, fn 1
    # P = 2/3, R = 2/3, F1 = 4 / (4 + 1 + 1) = 2/3
    total = eq.SnippetCounts()
    total.add(eq.snippet_counts(["a1", "a2"], ["x1"], "a1"))
    total.add(eq.snippet_counts(["b1"], ["y1"], "b1 y1"))
    assert (total.tp, total.fp, total.fn, total.tn) == (2, 1, 1, 1)
    assert total.scores() == pytest.approx((2 / 3, 2 / 3, 2 / 3))


def test_snippet_whitespace_rule():
    text = "first line\n  second line"
    assert eq.snippet_counts(["line second"], [], text).tp == 0
    assert eq.snippet_counts(["line second"], [], text, normalize=True).tp == 1
    assert eq.snippet_counts(["line\n  second"], [], text).tp == 1


# --- our extractor on real pages ----------------------------------------------------------------

# Floor for our extractor (default ExtractConfig, favor_precision=True) on the first 20 pages of
# ground-truth.json. Measured: macro F1 0.961 on all 181 pages, 0.988 on these 20. Over 10,000
# random 20-page subsets of the 181, F1 ranged 0.868-1.0 with 1st percentile 0.896, so 0.90 allows
# for the subset (and for small trafilatura/lxml drifts) while still failing an extractor that
# regresses to boilerplate-level quality: on these same 20 pages trafilatura's own `baseline()`
# (JSON-LD articleBody or all <p> text) scores 0.887 and whole-page `html2txt()` 0.768.
AEB_F1_FLOOR = 0.90


def test_our_extractor_on_20_real_aeb_pages(data_dir: Path):
    (result,) = eq.run_benchmark(["aeb"], ["refinery"], limit=20, data_dir=data_dir)
    assert result.pages == 20
    assert result.f1 > AEB_F1_FLOOR, result


# --- trafilatura-eval by language -----------------------------------------------------------


def test_by_language_groups_every_real_page_by_its_gold_text(data_dir: Path):
    """The per-language table of trafilatura-eval: every page lands in exactly one group, the set is
    multilingual (lid.176 on the gold snippets finds several languages with enough pages), and a
    group scores what its own pages score: the gold `with` snippets as output find every one of them,
    and no output finds none."""
    pages = eq.load_trafilatura_eval(data_dir / "extraction" / "trafilatura-eval")
    gold_outs = ["\n".join(p.gold["with"]) for p in pages]
    groups = eq.trafilatura_eval_by_language(pages, gold_outs, normalize_ws=False)
    assert sum(n for _, n in groups.values()) == len(pages)
    named = [k for k in groups if k != "other"]
    # lid.176's code read into the project's one code (core/languages.py: ISO 639-3 and script)
    assert "eng_Latn" in named and len(named) >= 3, groups
    assert all(n >= eq.MIN_LANGUAGE_PAGES for k, (_, n) in groups.items() if k != "other")
    # every `with` snippet is found; a `without` snippet inside a `with` one would cost precision, which
    # the set does not have (measured 1.0 in every group), so a group that loses pages shows here
    assert all(f1 == 1.0 for f1, _ in groups.values()), groups
    empty = eq.trafilatura_eval_by_language(pages, [None] * len(pages), normalize_ws=False)
    assert set(empty) == set(groups) and all(f1 == 0.0 for f1, _ in empty.values())
