"""mixtures/search.py on synthetic swarms whose true law is known: the fit recovers it, the held-out ρ is
Spearman's (as scipy computes it), the solve keeps to the simplex, caps and bounds, the noise gate fires
when mixtures differ no more than seeds do, the bootstrap interval holds the truth."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import spearmanr

from core.errors import ConfigError
from mixtures.search import (
    FitSection,
    LogLinearLaw,
    SearchConfig,
    SolveSection,
    SwarmSection,
    bootstrap,
    bounds_for,
    cross_validate,
    draw_swarm,
    fit_laws,
    fit_loglinear,
    noise_gate,
    project_box_simplex,
    regret,
    rounded,
    solve,
    spearman,
)

SOURCES = ("a", "b", "c", "d")
P = np.array([0.4, 0.3, 0.2, 0.1])
# two eval sets with different favourite sources (t centred: the law's identifiable form)
TRUE = (
    LogLinearLaw(2.0, np.array([-0.6, 0.2, 0.5, -0.1])),
    LogLinearLaw(2.5, np.array([0.3, -0.5, 0.1, 0.1])),
)


def swarm(n: int, noise: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    w = np.array(draw_swarm(P, SwarmSection(proxies=n, seed=seed), lambda w: True))
    rng = np.random.default_rng(seed + 1)
    y = np.column_stack([law.predict(w) for law in TRUE]) + rng.normal(0, noise, (n, len(TRUE)))
    return w, y


def test_swarm_is_seeded_distinct_rounded_capped_and_a_prefix_of_a_larger_one():
    cap = np.array([0.6, 1, 1, 1])
    fits = lambda w: w[0] <= cap[0]  # noqa: E731
    s24 = draw_swarm(P, SwarmSection(proxies=24, seed=3), fits)
    s32 = draw_swarm(P, SwarmSection(proxies=32, seed=3), fits)
    assert all(
        np.array_equal(a, b) for a, b in zip(s24, s32[:24], strict=False)
    )  # more proxies reuse the first
    assert len({tuple(w) for w in s32}) == 32
    for w in s32:
        assert w[0] <= 0.6 and abs(w.sum() - 1) < 1e-9 and np.array_equal(w, np.round(w, 4))
    # centred on natural: the mean weight of an uncapped swarm is p
    assert np.allclose(
        np.mean(draw_swarm(P, SwarmSection(proxies=400), lambda w: True), axis=0), P, atol=0.03
    )
    # an anchor is never drawn again
    again = draw_swarm(P, SwarmSection(proxies=5, seed=3), fits, exclude=[s24[0]])
    assert not any(np.array_equal(w, s24[0]) for w in again)
    with pytest.raises(ConfigError, match="fit the epoch caps"):
        draw_swarm(P, SwarmSection(proxies=3, max_draws=50), lambda w: False)


def test_fit_recovers_the_true_law_and_beats_the_linear_fit():
    w, y = swarm(40, noise=0.0)
    for i, true in enumerate(TRUE):
        law = fit_loglinear(w, y[:, i])
        assert law.c == pytest.approx(true.c, abs=0.02)
        assert np.allclose(law.t, true.t, atol=0.03)
        rec = law.record(SOURCES)
        assert rec["k"] == pytest.approx(math.exp(true.t.mean()), rel=0.05)
    # with noise and an outlier (a diverged proxy) the Huber fit still finds the law
    w, y = swarm(40, noise=0.003, seed=5)
    y[7, 0] += 0.5
    law = fit_loglinear(w, y[:, 0], delta=0.02)
    assert np.allclose(law.t, TRUE[0].t, atol=0.08)
    laws = fit_laws(w, y, ("x", "y"), FitSection())
    grid = np.array(draw_swarm(P, SwarmSection(proxies=200, seed=9), lambda w: True))
    truth = np.mean([t.predict(grid) for t in TRUE], axis=0)
    err_ll = np.abs(laws.objective(grid) - truth).mean()
    err_lin = np.abs(laws.objective(grid, "linear") - truth).mean()
    assert err_ll < err_lin


def test_spearman_is_scipys_and_held_out_rho_ranks_the_swarm():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=30), rng.normal(size=30)
    b[:5] = b[5]  # ties
    assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    assert spearman([1, 2], [2, 1]) is None and spearman([1, 1, 1], [1, 2, 3]) is None
    w, y = swarm(30, noise=0.002)
    cv = cross_validate(w, y, ("x", "y"), FitSection(folds=5), P)
    ll = cv["predictors"]["loglinear"]
    assert ll["rho"] > 0.9 and ll["rho_top_quartile"] is not None
    # the reported ρ is Spearman's of the out-of-fold predictions against the actual objective
    assert ll["rho"] == pytest.approx(spearmanr(cv["oof_objective"]["loglinear"], y.mean(axis=1)).statistic)
    assert set(cv["predictors"]) == {"loglinear", "linear", "more_of_largest", "near_natural"}


def test_solve_respects_simplex_caps_and_bounds_and_the_pull():
    w, y = swarm(40, noise=0.0)
    laws = fit_laws(w, y, ("x", "y"), FitSection())
    caps = np.array([0.35, 1.0, 1.0, 1.0])
    lo, hi = bounds_for(SOURCES, caps, SolveSection(min={"d": 0.15}, max={"b": 0.3}))
    for strength, pull in ((0.0, "kl"), (0.05, "kl"), (0.5, "l2")):
        x = solve(laws, P, lo, hi, pull, strength)
        assert abs(x.sum() - 1) < 1e-9 and (x >= lo - 1e-9).all() and (x <= hi + 1e-9).all()
    # without the pull the optimum of the true objective is found (checked against a dense random search)
    x = solve(laws, P, lo, hi, "kl", 0.0)
    cand = np.array(
        [project_box_simplex(v, lo, hi) for v in np.random.default_rng(1).dirichlet(np.ones(4), 1000)]
    )
    truth = lambda W: np.mean([t.predict(W) for t in TRUE], axis=0)  # noqa: E731
    assert truth(x[None])[0] <= truth(cand).min() + 1e-3
    # a strong pull keeps the mixture near natural
    near = solve(laws, P, np.zeros(4), np.ones(4), "kl", 100.0)
    assert np.abs(near - P).max() < 0.02
    with pytest.raises(ConfigError, match="no mixture satisfies"):
        bounds_for(SOURCES, np.array([0.2, 0.2, 0.2, 0.2]), SolveSection())
    with pytest.raises(ConfigError, match="not searched"):
        bounds_for(SOURCES, np.ones(4), SolveSection(max={"zz": 0.5}))
    with pytest.raises(ConfigError, match="adds up to"):
        SearchConfig(solve={"min": {"a": 0.6, "b": 0.6}})


def test_noise_gate_fires_when_seeds_spread_like_mixtures():
    rng = np.random.default_rng(0)
    seeds = [list(2.0 + rng.normal(0, 0.05, 3)) for _ in range(4)]
    same = noise_gate(list(2.0 + rng.normal(0, 0.05, 24)), seeds, 3.0)
    assert not same["passed"] and 0.5 < same["ratio"] < 2
    wide = noise_gate(list(2.0 + rng.normal(0, 0.5, 24)), seeds, 3.0)
    assert wide["passed"] and wide["ratio"] > 3
    assert not noise_gate([2.0, 2.0, 2.0], [[2.0, 2.0]], 3.0)["passed"]  # nothing moves at all
    with pytest.raises(ConfigError, match="2 seeds"):
        noise_gate([1.0, 2.0], [[1.0]], 3.0)


def test_bootstrap_interval_holds_the_true_loss_and_regret():
    w, y = swarm(30, noise=0.004, seed=2)
    cfg = FitSection(bootstrap=40, starts=3)
    laws = fit_laws(w, y, ("x", "y"), cfg)
    lo, hi = np.zeros(4), np.ones(4)
    x = solve(laws, P, lo, hi)
    b = bootstrap(w, y, laws, x, P, lo, hi, SOURCES, cfg, SolveSection())
    truth = float(np.mean([t.predict(x[None])[0] for t in TRUE]))
    assert b is not None and b.samples + b.failed == 40
    assert b.objective[0] - 0.01 <= truth <= b.objective[1] + 0.01
    assert all(a <= c for a, c in b.weights.values())
    r = regret(2.1, {"s0": 2.3, "s1": 2.05})
    assert r["best_run"] == "s1" and r["regret"] == pytest.approx(0.05)


def test_rounded_keeps_the_simplex():
    w = rounded(np.array([1 / 3, 1 / 3, 1 / 3]))
    assert w.sum() == pytest.approx(1.0) and set(np.round(w, 4)) == set(w)


def test_mixtures_search_names_the_workflow_command_and_starts_nothing(capsys):
    from mixtures.__main__ import main

    assert main(["search", "r.yaml", "--output", "out dir", "--eval", "w=x.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "-m workflows mixture-search r.yaml --output 'out dir' --eval w=x.jsonl" in err
