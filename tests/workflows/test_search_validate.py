"""`python -m workflows mixture-search --validate` (workflows/search.py's run_validation) for real: the
optimum, natural and uniform mixtures trained by the ablation at the next scale and compared paired by
seed. Its own file (not test_search.py, which shares the reduced demo's run): nine DeepSpeed trainings
that need no demo, scheduled as a unit of their own."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mixtures.recipe import Recipe
from tests.workflows.search_support import small_sets, two_source_inputs
from workflows import search as ws


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    return two_source_inputs(tmp_path_factory.mktemp("search"))


@pytest.mark.slow
def test_validate_trains_three_arms_at_four_times_the_tokens_on_a_larger_model(two, tmp_path):
    """The transfer check for real, with small proxies: the optimum, natural and uniform mixtures are
    each trained by the ablation (DeepSpeed, the same train_run as `make ablate`) at 4x the tokens on
    the larger model, 3 seeds each, and compared paired by seed on the fixed evaluation set."""
    _, recipe, wiki = two
    cfg = ws.MixtureSearchConfig.load(None, small_sets())
    space = ws.Space(recipe, cfg)
    w = np.array([{"web": 0.6, "multi": 0.4}[s] for s in space.sources])
    v = ws.run_validation(space, cfg, tmp_path, w, 4 * 2064, [f"wiki={wiki}"], ("wiki",), print)

    recipes = {p.stem: Recipe.load(p) for p in sorted((tmp_path / "validate" / "mixtures").glob("*.yaml"))}
    assert set(recipes) == {"natural", "uniform", "optimum"}
    assert all(r.total_tokens == 4 * 2064 for r in recipes.values())
    assert recipes["optimum"].phases[0].fractions() == pytest.approx({"web": 0.6, "multi": 0.4})
    # the ablation's own record: every arm trained with 3 seeds on the transfer model
    summary = json.loads((tmp_path / "validate" / "ablation" / "ablation.json").read_text())
    assert len(summary["seeds"]) == 3 == cfg.transfer.seeds
    assert set(summary["arms"]) == {"natural", "uniform", "optimum"}
    assert (
        v["model_overrides"] == cfg.transfer.model_overrides and cfg.transfer.model_overrides["n_layers"] == 4
    )
    # the paired comparison, recomputed from the ablation's per-seed bits per byte
    values = {a: summary["arms"][a]["bpb"]["wiki"]["values"] for a in summary["arms"]}
    assert all(len(x) == 3 and all(0.5 < b < 12 for b in x) for x in values.values())
    for other in ("natural", "uniform"):
        diffs = [o - b for o, b in zip(values["optimum"], values[other], strict=True)]
        assert v["vs"][other]["diffs"] == pytest.approx(diffs, abs=1e-12)
        assert v["vs"][other]["mean_diff"] == pytest.approx(np.mean(diffs), abs=1e-12)
        assert v["vs"][other]["optimum_better_every_seed"] == all(d < 0 for d in diffs)
