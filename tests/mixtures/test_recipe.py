"""Recipe validation: every error names the file, the key and what is allowed; shares resolve exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from mixtures.recipe import Recipe, RecipeError

REPO = Path(__file__).resolve().parents[2]

BASE = """
name: t
seed: 7
total_tokens: 1000
sources:
  a: {shards: sa}
  b: {docs: db, select: {lang: en, quality: ">= 0.6", dup_cluster_size: "<= 1", tag: [x, y]}}
phases:
  - {name: main, share: 0.7, weights: {a: 1, b: 1}}
  - {name: anneal, share: 0.3, weights: {b: 1}}
"""


def _load(tmp_path, text):
    p = tmp_path / "r.yaml"
    p.write_text(text)
    return Recipe.load(p)


def test_valid_recipe_resolves(tmp_path):
    r = _load(tmp_path, BASE)
    assert [ph.tokens for ph in r.phases] == [700, 300]
    assert r.sources["a"].shards == tmp_path / "sa"  # relative to the recipe file
    assert r.sources["a"].max_epochs == 4.0  # the recipe default
    sel = {str(s) for s in r.sources["b"].select}
    assert sel == {"lang == 'en'", "quality >= 0.6", "dup_cluster_size <= 1", "tag in ['x', 'y']"}


@pytest.mark.parametrize(
    "old,new,message",
    [
        # the allowed keys are listed in sorted order (core.config), all of them
        (
            "seed: 7",
            "seeds: 7",
            r"r\.yaml: unknown key seeds; allowed: bytes_per_token, max_epochs, name, phases, seed, sources, "
            r"total_tokens, train, weights$",
        ),
        (
            "a: {shards: sa}",
            "a: {shard: sa}",
            r"unknown key sources\.a\.shard; allowed: docs, max_epochs, select, shards$",
        ),
        ("a: {shards: sa}", "a: {max_epochs: 2}", r"sources\.a needs `shards`"),
        ("{a: 1, b: 1}", "{a: 1, c: 1}", r"phases\.main\.weights\.c: unknown source; allowed: a, b"),
        (
            "{a: 1, b: 1}",
            "{a: -1, b: 1}",
            r"phases\[0\]\.weights\.a: must be greater than or equal to 1e-09 and less than or equal to 1e\+09",
        ),
        ("share: 0.3", "share: 0.2", r"phases add up to 900 tokens .* total_tokens is 1,000"),
        ("share: 0.3", "share: 0.3, tokens: 300", r"phases\.anneal needs exactly one of `share`"),
        ('quality: ">= 0.6"', 'quality: ">== 0.6"', r"select\.quality: cannot parse '>== 0\.6'.*>=, <="),
        (
            "total_tokens: 1000",
            "total_tokens: lots",
            r"total_tokens: must be an integer or a count like '2\.5B'.*'lots'",
        ),
        ("name: anneal", "name: main", r"phases\[1\]\.name must be unique"),
    ],
)
def test_errors_name_file_key_and_allowed(tmp_path, old, new, message):
    assert old in BASE
    with pytest.raises(RecipeError, match=message):
        _load(tmp_path, BASE.replace(old, new, 1))


def test_token_counts_suffixes_and_mixed_phases(tmp_path):
    text = BASE.replace("total_tokens: 1000", "total_tokens: 2.5K").replace("share: 0.3", "tokens: 750")
    r = _load(tmp_path, text)
    # 0.7 * 2500 = 1750, plus the 750-token phase = 2500.
    assert r.total_tokens == 2500 and [ph.tokens for ph in r.phases] == [1750, 750]


def test_shares_that_do_not_divide_evenly_sum_exactly(tmp_path):
    text = (
        BASE.replace("total_tokens: 1000", "total_tokens: 1001").replace("0.7", "0.5").replace("0.3", "0.5")
    )
    r = _load(tmp_path, text)
    assert [ph.tokens for ph in r.phases] == [500, 501]  # floor, the last share phase takes the remainder


@pytest.mark.parametrize("name", ["demo.yaml", "llama3-style.yaml"])
def test_shipped_recipes_load(name):
    r = Recipe.load(REPO / "mixtures" / name)
    assert sum(ph.tokens for ph in r.phases) == r.total_tokens
    if name == "llama3-style.yaml":
        main = r.phases[0].fractions()
        general = main["web_general"] + main["web_hq"]
        assert (round(general, 6), main["math"], main["code"], main["multilingual"]) == (
            0.5,
            0.25,
            0.17,
            0.08,
        )
        # The anneal phase upsamples the high-quality web source relative to the main phase.
        assert r.phases[1].fractions()["web_hq"] > main["web_hq"]


@pytest.mark.parametrize("total", [4, 7, 999, 1001, 123_457])
def test_with_total_tokens_is_the_file_with_that_budget(tmp_path, total):
    """What the demo sizes a budget with: the same phases as loading the file with `--set total_tokens=N`."""
    p = tmp_path / "r.yaml"
    p.write_text(BASE)
    assert Recipe.load(p).with_total_tokens(total) == Recipe.load(p, [f"total_tokens={total}"])
    fixed = BASE.replace("share: 0.3", "tokens: 300").replace("share: 0.7", "tokens: 700")
    p.write_text(fixed)
    with pytest.raises(RecipeError, match="phases add up to 1,000 tokens"):  # token phases do not scale
        Recipe.load(p).with_total_tokens(total)
