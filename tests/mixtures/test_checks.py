"""Checks of a recipe against its shards that could not fail (issue 54), on real tokenized shards.

- a source with 0 tokens under temperature weights was given weight 0 with exit 0: refused now, naming
  it, by the plan, the sampler and `python -m mixtures plan` (exit 2);
- a recipe's `select: {lang: ...}` was compared with the shards' as a string, so `lang: deu` over shards
  made with `--select lang=de` was refused though the two select the same documents: languages compare
  as languages now, and a different language or script is still refused.
"""

from __future__ import annotations

import pytest
import yaml

from mixtures.__main__ import main
from mixtures.plan import make_plan
from mixtures.recipe import Recipe, RecipeError
from mixtures.sampler import MixtureSampler
from mixtures.validate import check_sources, same_selection
from testkit.corpus import build_corpus, build_source
from tokens.tokenizer import TokenizerConfig, train_tokenizer

SEQ = 64


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Real shards of the Leipzig documents: German (`--select lang=de`, the corpus's lid.176-style
    codes), Russian, and Finnish, which the corpus has none of (a selection that kept nothing)."""
    corpus = build_corpus(tmp_path_factory.mktemp("corpus"))
    root = tmp_path_factory.mktemp("checks")
    tok = train_tokenizer(corpus, root / "tok", TokenizerConfig(vocab_size=400))
    multi = [corpus / "docs" / "multi.parquet"]
    return root, {
        lang: build_source(root / "t", tok, lang, multi, {"lang": lang}) for lang in ("de", "ru", "fi")
    }


def _recipe(root, srcs: dict, select: dict | None = None, **extra) -> Recipe:
    data = {
        "name": "t",
        "total_tokens": 6_400,
        "max_epochs": 1000,
        "sources": {k: {"shards": str(v), **({"select": select[k]} if select and k in select else {})}
                    for k, v in srcs.items()},
        "phases": [{"name": "main", "share": 1.0, **({} if "weights" in extra else {"weights": dict.fromkeys(srcs, 1)})}],
        **extra,
    }  # fmt: skip
    return Recipe.from_dict(data, source="r.yaml", base=root)


def test_a_source_without_tokens_is_refused_under_temperature_weights(shards, tmp_path, capsys):
    root, s = shards
    from mixtures.validate import read_manifest

    assert read_manifest(s["fi"])["tokens"] == 0 and read_manifest(s["de"])["tokens"] > 0  # real, empty
    temp = {"weights": {"by": "tokens", "temperature": 0.3}}
    recipe = _recipe(root, {"de": s["de"], "ru": s["ru"], "fi": s["fi"]}, **temp)
    with pytest.raises(RecipeError, match=r"^t: weights by tokens: sources\.fi holds 0 tokens") as e:
        make_plan(recipe, SEQ)
    assert "sources.fi holds 0 tokens" in str(e.value) and "drop it from `sources`" in str(e.value)
    with pytest.raises(RecipeError, match=r"sources\.fi holds 0 tokens"):
        MixtureSampler(recipe, SEQ, 0, 1)
    # the command: exit 2 with the message, not a plan with a weight of 0
    path = tmp_path / "r.yaml"
    data = {"name": "t", "total_tokens": 6_400, "max_epochs": 1000, **temp,
            "sources": {k: {"shards": str(s[k])} for k in ("de", "ru", "fi")},
            "phases": [{"name": "main", "share": 1.0}]}  # fmt: skip
    path.write_text(yaml.safe_dump(data))
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "sources.fi holds 0 tokens" in err and str(path) in err
    # without it, the same recipe plans, every source weighted
    ok = _recipe(root, {"de": s["de"], "ru": s["ru"]}, **temp)
    weights = make_plan(ok, SEQ).recipe.phases[0].weights
    assert set(weights) == {"de", "ru"} and all(w > 0.1 for w in weights.values())


@pytest.mark.parametrize("select", ["deu", "de", ["de"], ["deu"], "== de"], ids=repr)
def test_a_language_select_matches_the_shards_as_a_language(shards, select):
    """Shards made with `--select lang=de`: the recipe may name German in any spelling core/languages.py
    reads, and the sampler (the trainer's check) accepts it."""
    root, s = shards
    recipe = _recipe(root, {"de": s["de"]}, select={"de": {"lang": select}})
    assert set(check_sources(recipe)) == {"de"}
    MixtureSampler(recipe, SEQ, 0, 1).close()


@pytest.mark.parametrize("select", ["deu_Latn", "rus", ["de", "ru"], "!= de", "deu_Cyrl"], ids=repr)
def test_another_language_or_script_is_still_refused(shards, select):
    """Only the spelling is normalised: a script is part of the language (`deu_Latn` is not `de`, any
    script), and another language, a larger set or the negation is another selection."""
    root, s = shards
    recipe = _recipe(root, {"de": s["de"]}, select={"de": {"lang": select}})
    with pytest.raises(RecipeError, match=r"^t: sources\.de\.select is .* tokenized with \{'lang': 'de'\}"):
        check_sources(recipe)


def test_same_selection_reads_every_spelling():
    assert same_selection({"lang": "en"}, {"lang": "eng"})
    assert same_selection({"lang": ["deu", "fra"]}, {"lang": ["fr", "de"]})
    assert same_selection({"lang": "zh"}, {"lang": "cmn"})  # lid.176's zh is Mandarin (core/languages.py)
    assert same_selection({"lang": "!= en", "quality": ">= 0.6"}, {"quality": ">= 0.6", "lang": "!= eng"})
    assert not same_selection({"lang": "zho"}, {"lang": "cmn"})  # the macrolanguage holds yue too
    assert not same_selection({"lang": "srp"}, {"lang": "srp_Latn"})  # Serbian is written in two scripts
    assert not same_selection({"lang": "en", "quality": ">= 0.6"}, {"lang": "en", "quality": ">= 0.4"})
    assert not same_selection({"lang": "en"}, None)


def test_buckets_use_only_the_tokenizer_their_source_was_made_with(shards, tmp_path):
    """mixture search tokenizes a bucketed source's buckets with the tokenizer its manifest names: a path
    from data, used only when the file there has the manifest's sha256."""
    import json
    import shutil

    from core.errors import InputError
    from workflows.search import _source_tokenizer

    _, s = shards
    good = _source_tokenizer(s["de"], "de")
    assert good.endswith("tokenizer.json")
    copy = tmp_path / "de"
    shutil.copytree(s["de"], copy)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"not": "the tokenizer"}))
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["tokenizer"]["path"] = str(other)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(
        InputError, match=r"source de: the tokenizer its manifest names .* is missing or is not"
    ):
        _source_tokenizer(copy, "de")
