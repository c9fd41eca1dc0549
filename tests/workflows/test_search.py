"""`python -m workflows mixture-search` (workflows/search.py): bad input is refused before anything trains;
(--validate's hand-off to the ablation: test_search_validate.py, with a stand-in trainer); and (slow) a tiny real search on the reduced demo run's data: buckets tokenized, proxies trained, the
law fitted, diagnostics written, a recipe the planner accepts at the target budget, and a rerun that
reuses every finished proxy.

The killed-proxy resume is train_run's, tested in tests/workflows/test_ablate.py (same bits per byte)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from core.errors import ConfigError, InputError
from mixtures.draw import fits
from mixtures.plan import make_plan
from mixtures.recipe import Recipe
from testkit.shared_data import shared_data_dir
from tests.workflows.search_support import small_sets, two_source_inputs
from workflows import search as ws
from workflows.cli import main


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    return two_source_inputs(tmp_path_factory.mktemp("search"))


_cfg = small_sets


def _args(recipe, out, wiki, *extra, sets=()):
    cmd = ["mixture-search", str(recipe), "--output", str(out), "--eval", f"wiki={wiki}"]
    return cmd + [a for s in (sets or _cfg()) for a in ("--set", s)] + list(extra)


def test_bad_inputs_are_refused_before_anything_trains(two, tmp_path, capsys):
    _, recipe, wiki = two
    out = tmp_path / "out"
    cases = [
        (_args(recipe, out, tmp_path / "none.jsonl"), "--eval wiki"),
        (_args(recipe, out, wiki, sets=_cfg(**{"search.buckets": '[{source: nope, column: q}]'})), "unknown source 'nope'"),
        (_args(recipe, out, wiki, sets=_cfg(**{"search.buckets": '[{source: web, column: q}]'})), "has no `docs`"),
        (_args(recipe, out, wiki, sets=_cfg(**{"search.objective": "[dclm]"})), "eval sets not given"),
        (_args(recipe, out, wiki, sets=_cfg(**{"search.phase": "warmup"})), "no such phase"),
        (_args(recipe, out, wiki, sets=_cfg(**{"search.swarm.anchor_seeds": 1})), "anchor_seeds"),
        (_args(recipe, out, wiki, sets=_cfg(**{"search.solve.max": "{zz: 0.5}"})), "not searched"),
        (_args(recipe, out, wiki, sets=_cfg(**{"proxy.tokens": 10})), "less than one step"),
        # a target so large that every mixture breaks a cap
        (_args(recipe, out, wiki, sets=_cfg(**{"target.tokens": "50M"})), "no mixture satisfies the bounds"),
        (_args(recipe, out, wiki, "--budget", "0.0001"), "over --budget"),
    ]  # fmt: skip
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err, (argv, err)
        assert not (out / "proxies").exists()  # nothing trained, not even started
    # --dry-run: the cost, and no proxy
    assert main(_args(recipe, out, wiki, "--dry-run")) == 0
    printed = capsys.readouterr().out
    assert "6ND" in printed and "core-hours" in printed and not (out / "proxies").exists()
    with pytest.raises(ConfigError, match="greater than or equal to 4"):
        ws.MixtureSearchConfig.load(None, ["transfer.token_multiple=2"])  # the issue: >= 4x
    with pytest.raises(ConfigError):
        ws.MixtureSearchConfig.load(None, ["transfer.seeds=2"])


def test_the_space_counts_caps_as_the_sampler_does(two):
    """Every swarm mixture fits at the target budget by the planner's own count; the continuous caps the
    solver gets are never looser than that count."""
    _, recipe, _ = two
    cfg = ws.MixtureSearchConfig.load(None, _cfg(**{"target.tokens": 200_000}))  # web capped at ~0.74
    space = ws.Space(recipe, cfg)
    assert space.phase == "main" and set(space.sources) == {"web", "multi"}
    assert np.allclose(space.p, space.tokens / space.tokens.sum())
    from mixtures.search import draw_swarm

    for w in draw_swarm(space.p, cfg.search.swarm, space.fits):
        assert fits(space.with_weights(space.target, w), space.row, space.pools)
    # at its cap (less a row) a source fits; a hair over the cap, with room elsewhere, it does not
    j = int(np.argmin(space.caps))
    w = np.full(2, 1 - space.caps[j])
    w[j] = space.caps[j]
    assert space.fits(w)
    over = w.copy()
    over[j] += 0.02
    over[1 - j] -= 0.02
    assert not space.fits(over)


def test_a_temperature_recipe_is_searched_and_written_back_as_plain_weights(two, tmp_path):
    _, recipe, _ = two
    data = yaml.safe_load(recipe.read_text())
    data["weights"] = {"by": "tokens", "temperature": 0.5}
    data["phases"] = [{"name": "main", "share": 1.0}]
    path = tmp_path / "temp.yaml"
    path.write_text(yaml.safe_dump(data))
    space = ws.Space(path, ws.MixtureSearchConfig.load(None, _cfg()))
    # the recipe as written is the temperature mixture, p_i ∝ n_i^0.5, not natural
    expect = np.sqrt(space.tokens) / np.sqrt(space.tokens).sum()
    assert np.allclose(space.as_written(), expect) and not np.allclose(space.as_written(), space.p)
    written = tmp_path / "out.yaml"
    written.write_text(space.recipe_yaml(space.p, "out", 12_800))
    loaded = Recipe.load(written)  # the temperature nothing uses any more is dropped, or the loader refuses
    assert loaded.temperature is None
    assert loaded.phases[0].fractions() == pytest.approx(
        dict(zip(space.sources, space.p, strict=True)), abs=1e-4
    )


def test_mixtures_are_compared_at_the_seeds_they_share():
    """A seed moves every mixture together (the full demo's data: seed 2 was 0.018-0.023 bits per byte below
    seed 1 for every anchor, 4x the spread between mixtures). Anchors trained with seeds 1 and 2 are fitted
    and ranked at seed 1 with the swarm's seed-1 runs, not at their mean over both seeds, which would put
    every anchor half that shift ahead of every swarm run."""

    def run(wiki, dclm):
        return {"bpb": {"wiki": wiki, "dclm": dclm, "own": None}}

    shift = -0.02  # seed 2, every mixture
    results = {
        "natural": {1: run(3.37, 3.41), 2: run(3.37 + shift, 3.41 + shift)},
        "largest": {1: run(3.36, 3.40), 2: run(3.36 + shift, 3.40 + shift)},
        "s000": {1: run(3.35, 3.39)},  # the best mixture, trained (as the swarm is) with seed 1 only
    }
    seeds, Y = ws.seed_matched(results, ["natural", "largest", "s000"], ("wiki", "dclm"))
    assert seeds == [1]
    assert np.allclose(Y, [[3.37, 3.41], [3.36, 3.40], [3.35, 3.39]])
    assert int(np.argmin(Y.mean(axis=1))) == 2  # the seed-2 shift no longer ranks the anchors first
    # mixtures that all have both seeds are compared over both
    both = {k: v for k, v in results.items() if k != "s000"}
    seeds, Y = ws.seed_matched(both, ["natural", "largest"], ("wiki",))
    assert seeds == [1, 2] and np.allclose(Y[:, 0], [3.37 + shift / 2, 3.36 + shift / 2])
    with pytest.raises(InputError, match="no seed is shared"):
        ws.seed_matched({"a": {1: run(3.0, 3.0)}, "b": {2: run(3.0, 3.0)}}, ["a", "b"], ("wiki",))


@pytest.mark.slow
def test_a_tiny_search_on_the_demo_data_resumes_and_writes_a_recipe_the_planner_accepts(demo_run, tmp_path):
    wiki = tmp_path / "wiki.jsonl"
    lines = (shared_data_dir() / "quality" / "enwiki_sample_articles.jsonl").read_text().splitlines()
    wiki.write_text("\n".join(lines[:4]) + "\n")
    out = tmp_path / "search"
    sets = _cfg(**{
        # tertiles: a third of `web` cannot be the same documents as web_hq, the recipe's top half of it
        # (a median cut can be, on a small source: the search then refuses it before any proxy trains)
        "search.buckets": "[{source: web, column: perplexity_bpb, count: 3}]",
        "search.swarm.proxies": 2, "search.swarm.anchors": "[natural]", "search.fit.bootstrap": 5,
        "search.fit.folds": 2, "proxy.eval_docs": 4, "target.seq_len": 128, "target.tokens": "30K",
    })  # fmt: skip
    logs: list[str] = []
    cfg = ws.MixtureSearchConfig.load(None, sets)
    s = ws.mixture_search(demo_run / "recipe.yaml", out, cfg, [f"wiki={wiki}"], log=logs.append)

    # the buckets are sources: perplexity_bpb tertiles cut web in three, tokenized with the band selector
    assert set(s["sources"]) == {"web_hq", "web_q1", "web_q2", "web_q3"}
    q1 = json.loads((out / "tokens" / "shards" / "web_q1" / "manifest.json").read_text())
    assert q1["select"]["perplexity_bpb"].startswith("< ") and q1["tokens"] > 0
    # every proxy is a unit folder with its config and result: natural x2, 2 swarm, the chosen x2
    runs = sorted((out / "proxies" / "runs").glob("*/seed-*"))
    assert len(runs) == 6 and all((r / "run.json").is_file() and (r / "result.json").is_file() for r in runs)
    assert set(s["runs"]) >= {"natural"} and len(s["runs"]) == 3
    # diagnostics: held-out rho for the law and its baselines, the gate, the regret, intervals
    assert set(s["cv"]["predictors"]) == {"loglinear", "linear", "more_of_largest", "near_natural"}
    assert s["gate"]["seed_sd"] >= 0 and isinstance(s["gate"]["passed"], bool)
    assert s["recommended"] == s["gate"]["passed"]
    # the regret compares the chosen mixture with the runs at the seeds every run has (seed 1 here:
    # the swarm's), not at its mean over both of its seeds
    assert s["compared_seeds"] == [1]
    assert s["chosen"]["actual_compared"] == pytest.approx(s["chosen"]["actual_seeds"][0])
    assert s["regret"]["regret"] == pytest.approx(
        s["chosen"]["actual_compared"] - min(r["objective"] for r in s["runs"].values())
    )
    # 3 mixtures cannot fit a law of 5 parameters on any resample: no interval rather than a made-up one
    assert s["chosen"]["predicted_interval"] is None and s["chosen"]["bootstrap"] is None
    assert 0.5 < s["chosen"]["actual"] < 9  # bits per byte of a (barely) trained model
    assert len(s["chosen"]["actual_seeds"]) == 2
    md = (out / "search.md").read_text()
    for words in ("Held-out Spearman", "Noise gate", "Regret", "Every proxy"):
        assert words in md
    assert (out / "search.png").stat().st_size > 0
    # the written recipe loads, is at the target budget, and the planner finds every cap kept
    optimum = Recipe.load(out / "law-optimum.yaml")
    assert optimum.total_tokens == 30_000
    assert sum(optimum.phases[0].weights.values()) == pytest.approx(1.0)
    assert make_plan(optimum, 129, 2).warnings == [] and s["chosen"]["fits_target"]
    assert (out / "chosen.yaml").is_file() == s["recommended"]

    # a rerun (other fit settings) trains nothing: every proxy is reused, results untouched
    stamps = {r: (r / "result.json").stat().st_mtime_ns for r in runs}
    logs.clear()
    cfg2 = ws.MixtureSearchConfig.load(None, [*sets, "search.fit.bootstrap=3"])
    s2 = ws.mixture_search(demo_run / "recipe.yaml", out, cfg2, [f"wiki={wiki}"], log=logs.append)
    assert not any(": train " in m or m.startswith("$ python -m tokens") for m in logs)
    assert {r: (r / "result.json").stat().st_mtime_ns for r in runs} == stamps
    assert s2["chosen"]["weights"] == s["chosen"]["weights"]
    # a proxy setting that changes results is another search: refused, not mixed in
    with pytest.raises(Exception, match="was made by"):
        ws.mixture_search(demo_run / "recipe.yaml", out, ws.MixtureSearchConfig.load(None, [*sets, "proxy.seq_len=64"]),
                          [f"wiki={wiki}"], log=logs.append)  # fmt: skip
