"""`python -m workflows mixture-search --validate` (workflows/search.py's run_validation): the optimum,
natural and uniform mixtures handed to the ablation at the next scale and compared paired by seed.

The ablation's per-run trainer is a stand-in here (issue 53/55: `--validate`'s nine real trainings cost
~175 s of the suite to check wiring). What the stand-in replaces is checked for real elsewhere:
workflows/ablate.py's train_run (DeepSpeed training, export, scoring, resume) by
tests/workflows/test_ablate.py::test_identical_arms_agree_and_a_killed_run_resumes_to_the_same_result,
and the search's proxies through that same train_run by
tests/workflows/test_search.py::test_a_tiny_search_on_the_demo_data_resumes_and_writes_a_recipe_the_planner_accepts.
The stand-in itself still loads every run's trainer config the way the trainer does (so the larger
model's overrides must be a valid model), counts its steps with the ablation's own `steps_for`, and
returns bits per byte from a known law with a per-seed shift, so every figure the validation reports
can be recomputed here from the law, not from the code under test.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from mixtures.recipe import Recipe
from tests.workflows.search_support import small_sets, two_source_inputs
from trainer.config import load_config
from workflows import ablate
from workflows import search as ws

# The stand-in's law: bits per byte quadratic in the web share, least at 0.6 web (the optimum arm's), plus a shift per seed that every arm shares (what pairing by seed must cancel).
SEED_SHIFT = {1: 0.0, 2: 0.031, 3: -0.017}


def law(web: float) -> float:
    return 3.0 + 0.5 * (web - 0.6) ** 2


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    return two_source_inputs(tmp_path_factory.mktemp("search"))


def test_validate_hands_three_arms_at_four_times_the_tokens_on_a_larger_model_to_the_ablation(
    two, tmp_path, monkeypatch
):
    """Three arms, each at 4x the proxies' tokens on the transfer model, `transfer.seeds` seeds each;
    the ablation's record and the paired comparison by seed come out as the law implies."""
    _, recipe, wiki = two
    cfg = ws.MixtureSearchConfig.load(None, small_sets())
    space = ws.Space(recipe, cfg)
    runs: list[dict] = []

    def train_run(arm, seed, opts, evals, log):
        # the trainer's own loader over what train_run passes it (the arm's recipe, the search's overrides)
        tcfg = load_config(
            opts.trainer_config, [f"data.recipe={arm.path}", *opts.overrides, *arm.train_args()]
        )
        web = arm.recipe.phases[0].fractions()["web"]
        runs.append({"arm": arm.name, "seed": seed, "steps": ablate.steps_for(arm.recipe.total_tokens, opts),
                     "n_layers": tcfg.model.overrides.get("n_layers")})  # fmt: skip
        bpb = law(web) + SEED_SHIFT[seed]
        return {"arm": arm.name, "seed": seed, "steps": runs[-1]["steps"], "tokens_seen": arm.recipe.total_tokens,
                "train_wall_s": 0.0, "wall_s": 0.0, "bpb": {name: bpb for name in evals} | {"own": None}}  # fmt: skip

    monkeypatch.setattr(ablate, "train_run", train_run)
    w = np.array([{"web": 0.6, "multi": 0.4}[s] for s in space.sources])
    proxy_tokens = cfg.proxy.tokens  # small_sets' proxies
    v = ws.run_validation(space, cfg, tmp_path, w, 4 * proxy_tokens, [f"wiki={wiki}"], ("wiki",), print)

    recipes = {p.stem: Recipe.load(p) for p in sorted((tmp_path / "validate" / "mixtures").glob("*.yaml"))}
    assert set(recipes) == {"natural", "uniform", "optimum"}
    assert all(r.total_tokens == 4 * proxy_tokens for r in recipes.values())
    assert recipes["optimum"].phases[0].fractions() == pytest.approx({"web": 0.6, "multi": 0.4})
    assert recipes["uniform"].phases[0].fractions() == pytest.approx({"web": 0.5, "multi": 0.5})
    # every arm at every seed, seed by seed, on the transfer model (4 layers, larger than the proxies')
    assert cfg.transfer.seeds >= 3 and cfg.transfer.model_overrides["n_layers"] == 4
    assert [(r["seed"], r["arm"]) for r in runs] == [
        (s, a) for s in range(1, cfg.transfer.seeds + 1) for a in ("natural", "uniform", "optimum")
    ]
    assert {r["n_layers"] for r in runs} == {4} and v["model_overrides"] == cfg.transfer.model_overrides
    proxy_steps = ablate.steps_for(proxy_tokens, ws._opts(tmp_path, cfg, 1))
    assert {r["steps"] for r in runs} == {4 * proxy_steps}
    summary = json.loads((tmp_path / "validate" / "ablation" / "ablation.json").read_text())
    assert summary["seeds"] == [1, 2, 3] and set(summary["arms"]) == {"natural", "uniform", "optimum"}
    assert summary["baseline"] == "natural"
    # the paired comparison: the seed shift cancels, so each difference is the law's, at every seed
    web = {a: recipes[a].phases[0].fractions()["web"] for a in recipes}
    for other in ("natural", "uniform"):
        expect = law(web["optimum"]) - law(web[other])
        assert v["vs"][other]["diffs"] == pytest.approx([expect] * 3, abs=1e-9)
        assert v["vs"][other]["mean_diff"] == pytest.approx(expect, abs=1e-9)
        assert v["vs"][other]["optimum_better_every_seed"] == (expect < 0)
    assert v["objective_per_seed"]["optimum"] == pytest.approx([law(0.6) + SEED_SHIFT[s] for s in (1, 2, 3)])
    # a natural mixture other than 0.6 web: the optimum is better at every seed, as the law says
    assert web["natural"] != pytest.approx(0.6) and v["vs"]["natural"]["optimum_better_every_seed"]
