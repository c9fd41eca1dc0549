"""Mixture search, the math: a swarm of mixtures, a mixing law fitted on the proxies trained on them, a
constrained solve, and the diagnostics that say whether to trust it. Pure numpy/scipy: nothing trains
here (workflows/search.py trains the proxies and calls these functions).

The method is Olmix's (Chen et al. 2026, allenai/olmix `olmix/fit/law.py`) over RegMix's swarm (Liu et
al. 2025, sail-sg/regmix `mixture_config/synthesize_mixture.py`); ../shared/research/mixture-search-2026.md
reads both and says what to keep.

- **Swarm** (`draw_swarm`): mixtures w over the m sources from a Dirichlet centred on the natural token
  distribution p: alpha = concentration · s · m · p, with s log-uniform in [1/spread, spread] per draw
  (RegMix varies the concentration per draw so that the swarm holds both near-natural and skewed
  mixtures). A draw is rejected when `fits(w)` says it breaks a source's epoch cap at the *target*
  budget (the caller counts it with mixtures/draw.py, the planner's exact rows and pools), rounded to
  `ROUND` decimals and deduplicated. Draws come one at a time from one seeded stream, so a swarm of 32
  starts with the swarm of 24 (a rerun with more proxies reuses the finished ones).
- **Law** (`fit_loglinear`): per evaluation set, loss(w) = c + k·exp(Σ_j t_j w_j) (Data Mixing Laws,
  Ye et al. 2025, eq. 1). On the simplex k is not identifiable apart from t (k·exp(t·w) =
  exp((t + ln k)·w) because Σw = 1), so the fit is c + exp(t·w) and reports k = exp(mean t) with t
  centred; fitted with scipy's least_squares under a Huber loss (Olmix: δ = 0.02 bits per byte),
  several starts. `fit_linear` (loss = β·w, the per-source loss a linear model sees) is the baseline
  the law must beat.
- **Diagnostics**: k-fold out-of-fold Spearman ρ of predicted against actual objective (all runs, and
  within the best quartile, where a search decides: ranking among good mixtures is much harder,
  research §2), RMSE, the same for the linear fit and two trivial rankers (more of the largest
  source; closeness to natural); the noise gate (`noise_gate`): the spread between mixtures must be
  ≥ `ratio` × the spread between seeds of one mixture, or no mixture is recommended; the regret of
  the chosen mixture against the best swarm run.
- **Solve** (`solve`): minimise the objective (the mean of the per-set laws) + λ·D(w, p), D = KL(w‖p)
  or ||w − p||², subject to the simplex, the epoch caps (w_j ≤ cap_j) and optional min/max per source.
  Without the pull the optimum of a log-linear law sits on a vertex (marin #2403): one source only.
  Convex (exp of a linear form, KL), solved with SLSQP from several feasible starts.
- **Bootstrap** (`bootstrap`): the swarm rows resampled with replacement, every law refitted and the
  mixture re-solved: percentile intervals of the predicted loss and of each weight.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from core.config import ConfigModel
from core.errors import ConfigError
from core.names import check_file_name
from mixtures.bounds import between

ROUND = 4
"""Decimals a mixture's weights are written with (the recipe's weights, and what the proxies train)."""

# Every number of the search's settings has a stated finite range, checked when the config loads, so a
# value past it is refused with its key and the range before anything runs: unbounded, 1e308 ended in
# an OverflowError traceback (concentration · spread overflowed the Dirichlet's alpha) and a million
# proxies ran out of draws with advice about caps that had rejected nothing.
MAX_SEED = 2**63 - 1
"""Seeds fit int64 (numpy's SeedSequence, JSON readers)."""
MAX_PROXIES = 4096
"""Each proxy is a training run: RegMix trained 512 (research: 3m-6m for m sources); 4096 is far past any
search this workflow can afford, and below max_draws' default, so the draws can find them."""

# ------------------------------------------------------------------ settings


class SwarmSection(ConfigModel):
    proxies: between(int, 2, MAX_PROXIES) = 24
    """swarm mixtures trained once each (research: 3m–6m for m sources), besides the anchors"""
    concentration: between(float, 1e-3, 1e3) = 1.0
    """Dirichlet concentration per source around the natural mixture (alpha = c·s·m·p): larger = closer"""
    spread: between(float, 1, 1e3) = 3.0
    """each draw's concentration is scaled by s, log-uniform in [1/spread, spread] (1: fixed)"""
    seed: between(int, 0, MAX_SEED) = 0
    anchors: tuple[Literal["natural", "uniform", "recipe", "largest"], ...] = (
        "natural",
        "uniform",
        "recipe",
        "largest",
    )
    """the fixed mixtures trained beside the swarm: natural (token-proportional), uniform, the recipe as
    written, more of the largest source (the trivial rule a search must beat); at least one"""
    anchor_seeds: between(int, 2, 64) = 2
    """seeds of each anchor (natural, uniform, the recipe, more of the largest) and of the chosen mixture:
    their spread is the noise the gate compares the mixtures' spread with"""
    max_draws: between(int, 1, 10_000_000) = 100_000
    """draws before giving up when the caps reject nearly every mixture (a draw costs ~0.1 ms)"""

    @model_validator(mode="after")
    def _check(self) -> SwarmSection:
        if not self.anchors or len(set(self.anchors)) != len(self.anchors):
            raise ConfigError(
                f"swarm.anchors must name distinct anchors, at least one; got {list(self.anchors)}"
            )
        if self.max_draws < self.proxies:  # then no cap could be to blame
            raise ConfigError(
                f"swarm.max_draws ({self.max_draws:,}) must be at least swarm.proxies ({self.proxies:,})"
            )
        return self


class FitSection(ConfigModel):
    folds: between(int, 2, 100) = 5
    """k of the k-fold held-out Spearman ρ"""
    huber_delta: between(float, 1e-6, 10) = 0.02
    """residual (bits per byte) beyond which the fit's loss grows linearly (Olmix's δ)"""
    starts: between(int, 1, 100) = 6
    """starting points of each law's fit (the best Huber cost is kept)"""
    bootstrap: between(int, 0, 10_000) = 100
    """resamples of the swarm for the intervals (0: none)"""
    seed: between(int, 0, MAX_SEED) = 0


class SolveSection(ConfigModel):
    pull: Literal["kl", "l2"] = "kl"
    """the pull toward the natural mixture: KL(w‖p) (Olmix) or squared distance"""
    strength: between(float, 0, 100) = 0.05
    """λ of the pull (Olmix's code default 0.05); 0 lets the optimum collapse onto a vertex"""
    min: dict[str, between(float, 0, 1)] = Field(default_factory=dict)
    """source -> lowest weight allowed"""
    max: dict[str, between(float, 0, 1)] = Field(default_factory=dict)
    """source -> highest weight allowed (the epoch cap applies as well)"""


class GateSection(ConfigModel):
    ratio: between(float, 1, 100) = 3.0
    """no recommendation unless sd between mixtures >= ratio × sd between seeds; below 1 the gate would
    pass mixtures that differ less than one mixture's seeds do (a gate that cannot fail)"""


class BucketSpec(ConfigModel):
    """A source cut into quantile buckets of a score column: each bucket becomes a source."""

    source: str
    """a source of the recipe; its buckets are tokenized into DIR/tokens/shards/<source>_q<k>/"""
    column: str
    count: between(int, 2, 20) = 4
    """buckets (Olmix uses 20 on a large crawl; each must hold documents to train on)"""

    @field_validator("source")
    @classmethod
    def _plain(cls, source: str) -> str:
        # a bucket's shards folder is named from the source (<source>_q<k>): the one checked helper
        # before it is a path; 251 characters leave room for `_q20` in a 255-byte file name
        try:
            check_file_name(source, folder="DIR/tokens/shards/")
            if len(source) > 251:
                raise ValueError(f"must be at most 251 characters (its buckets add _q<k>), got {len(source)}")
        except ValueError as e:  # the message through the context (a hostile value may hold braces),
            # less its `got ...`: core.config's formatter adds the value itself
            raise PydanticCustomError("file_name", "{why}", {"why": str(e).rsplit(", got ", 1)[0]}) from None
        return source


class SearchConfig(ConfigModel):
    """What a search draws, fits and solves (the `search:` section of workflows/search.py's config)."""

    phase: str | None = None
    """the phase whose weights are searched (default: the recipe's longest); other phases stay as written"""
    objective: tuple[str, ...] = ()
    """eval sets averaged into the objective, fixed before the search (default: every --eval set)"""
    swarm: SwarmSection = Field(default_factory=SwarmSection)
    fit: FitSection = Field(default_factory=FitSection)
    solve: SolveSection = Field(default_factory=SolveSection)
    gate: GateSection = Field(default_factory=GateSection)
    buckets: tuple[BucketSpec, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> SearchConfig:
        for name, lo in self.solve.min.items():
            hi = self.solve.max.get(name, 1.0)
            if lo > hi:
                raise ConfigError(f"solve.min.{name} = {lo:g} is above solve.max.{name} = {hi:g}")
        if sum(self.solve.min.values()) > 1:
            raise ConfigError(f"solve.min adds up to {sum(self.solve.min.values()):g} > 1: no mixture has it")
        seen = [b.source for b in self.buckets]
        if len(set(seen)) != len(seen):
            raise ConfigError(f"buckets: each source may be cut once, got {seen}")
        return self


# ------------------------------------------------------------------ the swarm


@dataclass(frozen=True, slots=True)
class Mixture:
    name: str
    weights: dict[str, float]
    """source -> weight, summing to 1 (sources with 0 are not drawn)"""
    kind: str = "swarm"
    """swarm | anchor | chosen"""

    def vector(self, sources: Sequence[str]) -> np.ndarray:
        return np.array([self.weights.get(s, 0.0) for s in sources])


def rounded(w: np.ndarray) -> np.ndarray:
    """Weights rounded to ROUND decimals, still summing to 1 (the largest weight takes the remainder)."""
    r = np.round(np.asarray(w, dtype=float), ROUND)
    r[int(np.argmax(r))] += round(1.0 - float(r.sum()), ROUND)
    return np.round(np.clip(r, 0.0, 1.0), ROUND)


def as_mixture(name: str, sources: Sequence[str], w: np.ndarray, kind: str) -> Mixture:
    r = rounded(w)
    return Mixture(name, {s: float(x) for s, x in zip(sources, r, strict=True) if x > 0}, kind)


def natural(tokens: Sequence[float]) -> np.ndarray:
    t = np.asarray(tokens, dtype=float)
    if not (t > 0).all():
        raise ConfigError(f"every source searched needs tokens, got {list(t)}")
    return t / t.sum()


def more_of_largest(p: np.ndarray) -> np.ndarray:
    """The trivial rule 'more of the biggest source': its weight halfway from natural to 1."""
    w = p * 0.5
    w[int(np.argmax(p))] += 0.5
    return w


def draw_swarm(
    p: np.ndarray,
    cfg: SwarmSection,
    fits: Callable[[np.ndarray], bool],
    n: int | None = None,
    exclude: Sequence[np.ndarray] = (),
) -> list[np.ndarray]:
    """`n` (default cfg.proxies) distinct rounded mixtures that `fits` accepts, in draw order.

    `exclude`: mixtures already taken (the anchors), never drawn again. ConfigError when `max_draws`
    draws do not give n: the caps leave too little room (say which knob widens it)."""
    n = cfg.proxies if n is None else n
    m = len(p)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([cfg.seed, 0x5E4C])))
    seen = {tuple(rounded(w)) for w in exclude}
    out: list[np.ndarray] = []
    rejected = 0
    for _ in range(cfg.max_draws):
        s = math.exp(rng.uniform(-math.log(cfg.spread), math.log(cfg.spread)))
        alpha = np.maximum(cfg.concentration * s * m * p, 1e-3)
        w = rounded(rng.dirichlet(alpha))
        key = tuple(w)
        if key in seen:
            continue
        if not fits(w):
            rejected += 1
            continue
        seen.add(key)
        out.append(w)
        if len(out) == n:
            return out
    repeated = cfg.max_draws - rejected - len(out)
    if rejected > repeated:  # the advice follows what rejected the draws
        raise ConfigError(
            f"only {len(out)} of {n} mixtures fit the epoch caps at the target budget after {cfg.max_draws:,} "
            f"draws ({rejected:,} rejected by a cap, {repeated:,} repeats): lower the target tokens, raise "
            "max_epochs, or raise swarm.concentration (mixtures closer to natural)"
        )
    raise ConfigError(
        f"only {len(out)} of {n} distinct mixtures after {cfg.max_draws:,} draws ({repeated:,} repeated a "
        f"mixture already drawn at {ROUND} decimals, {rejected:,} rejected by a cap): lower swarm.proxies, "
        "raise swarm.max_draws, or widen the swarm (a lower swarm.concentration, a larger swarm.spread)"
    )


# ------------------------------------------------------------------ the laws


@dataclass(frozen=True, slots=True)
class LogLinearLaw:
    """loss(w) = c + exp(t·w) = c + k·exp(t'·w), k = exp(mean t), t' = t − mean t."""

    c: float
    t: np.ndarray
    cost: float = 0.0
    """the Huber cost of the fit (least_squares' `cost`)"""

    def predict(self, W: np.ndarray) -> np.ndarray:
        return self.c + np.exp(np.atleast_2d(W) @ self.t)

    def record(self, sources: Sequence[str]) -> dict[str, Any]:
        mean = float(self.t.mean())
        return {
            "c": self.c,
            "k": math.exp(mean),
            "t": {s: float(x - mean) for s, x in zip(sources, self.t, strict=True)},
        }


@dataclass(frozen=True, slots=True)
class LinearLaw:
    """loss(w) = β·w: β_j is the loss the fit gives a run on source j alone (Σw = 1 holds the intercept)."""

    beta: np.ndarray

    def predict(self, W: np.ndarray) -> np.ndarray:
        return np.atleast_2d(W) @ self.beta

    def record(self, sources: Sequence[str]) -> dict[str, Any]:
        return {"beta": {s: float(x) for s, x in zip(sources, self.beta, strict=True)}}


def fit_linear(W: np.ndarray, y: np.ndarray) -> LinearLaw:
    beta, *_ = np.linalg.lstsq(np.asarray(W, float), np.asarray(y, float), rcond=None)
    return LinearLaw(beta)


def fit_loglinear(
    W: np.ndarray, y: np.ndarray, delta: float = 0.02, starts: int = 6, x0: np.ndarray | None = None
) -> LogLinearLaw:
    """The law's c and t by Huber least squares; the best of `starts` starts (and `x0` = (c, t) if given).

    Fitted on u = (y − min y) / span, where every parameter is of order one whatever the losses' scale
    (proxy losses differ in the third decimal: fitted on y itself the optimiser crawled for seconds).
    The law is closed under that map: u = c' + exp(t'·w) with c = min y + span·c', t = t' + ln span
    (Σw = 1), and the Huber threshold scales with it (δ / span). Each start fixes c' below 0 and takes t'
    from the linear fit of log(u − c') on W (exact when the data follow the law), so every start is
    already a fair fit that the optimiser refines. c is bounded to [0, min y): bits per byte are positive,
    and so is the exponential term."""
    from scipy.optimize import least_squares

    W = np.asarray(W, float)
    y = np.asarray(y, float)
    lo_y = float(y.min())
    span = float(np.ptp(y)) or max(abs(lo_y), 1.0) * 1e-6
    u = (y - lo_y) / span
    c_lo, c_hi = -lo_y / span, -1e-9  # c in [0, min y), in u's units
    inits = []
    if x0 is not None:  # a warm start (the bootstrap's refits): that start alone, refined briefly
        x0 = np.asarray(x0, float)
        inits.append(np.concatenate([[(x0[0] - lo_y) / span], x0[1:] - math.log(span)]))
    for f in np.geomspace(0.05, 50.0, starts if x0 is None else 0):
        c0 = max(-f, c_lo)
        t0, *_ = np.linalg.lstsq(W, np.log(np.maximum(u - c0, 1e-12)), rcond=None)
        inits.append(np.concatenate([[c0], t0]))

    def resid(x: np.ndarray) -> np.ndarray:
        return x[0] + np.exp(np.clip(W @ x[1:], -50, 50)) - u

    def jac(x: np.ndarray) -> np.ndarray:
        e = np.exp(np.clip(W @ x[1:], -50, 50))
        return np.column_stack([np.ones(len(u)), W * e[:, None]])

    lower = np.concatenate([[c_lo], np.full(W.shape[1], -np.inf)])
    upper = np.concatenate([[c_hi], np.full(W.shape[1], np.inf)])
    f_scale = delta / span

    def huber(x: np.ndarray) -> float:
        z = (resid(x) / f_scale) ** 2
        return float(np.sum(np.where(z <= 1, z, 2 * np.sqrt(z) - 1)))

    # the flat valley along (c' down, t' up) of a nearly linear law costs the optimiser hundreds of
    # evaluations per start: refine only the two best starts (ranked by their Huber cost as they are)
    for x in inits:
        x[0] = min(max(x[0], c_lo + 1e-12 * abs(c_lo)), c_hi * 2)  # strictly inside, as least_squares needs
    best = None
    for x in sorted(inits, key=huber)[:2]:
        r = least_squares(resid, x, jac=jac, bounds=(lower, upper), loss="huber", f_scale=f_scale,
                          max_nfev=200 if x0 is None else 60)  # fmt: skip
        if best is None or r.cost < best.cost:
            best = r
    assert best is not None
    c = lo_y + span * float(best.x[0])
    return LogLinearLaw(c, np.asarray(best.x[1:]) + math.log(span), float(best.cost) * span**2)


@dataclass(frozen=True, slots=True)
class Laws:
    """One law per eval set; the objective is their mean (a macro average, fixed before the search)."""

    sets: tuple[str, ...]
    loglinear: tuple[LogLinearLaw, ...]
    linear: tuple[LinearLaw, ...]

    def predict(self, W: np.ndarray, kind: str = "loglinear") -> np.ndarray:
        """(n, sets) predictions."""
        laws = self.loglinear if kind == "loglinear" else self.linear
        return np.column_stack([law.predict(W) for law in laws])

    def objective(self, W: np.ndarray, kind: str = "loglinear") -> np.ndarray:
        return self.predict(W, kind).mean(axis=1)


def fit_laws(
    W: np.ndarray, Y: np.ndarray, sets: Sequence[str], cfg: FitSection, warm: Laws | None = None
) -> Laws:
    """Y: (n, sets) bits per byte per run and eval set."""
    ll = tuple(
        fit_loglinear(W, Y[:, i], cfg.huber_delta, cfg.starts if warm is None else 1,
                      None if warm is None else np.concatenate([[warm.loglinear[i].c], warm.loglinear[i].t]))
        for i in range(Y.shape[1])
    )  # fmt: skip
    return Laws(tuple(sets), ll, tuple(fit_linear(W, Y[:, i]) for i in range(Y.shape[1])))


# ------------------------------------------------------------------ diagnostics


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's ρ (ties get their mean rank); None with fewer than 3 pairs or a constant side."""
    from scipy.stats import rankdata

    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    ra, rb = rankdata(a), rankdata(b)
    return float(np.corrcoef(ra, rb)[0, 1])


def top_quartile(actual: np.ndarray) -> np.ndarray:
    """Indices of the best (lowest-loss) quarter of the runs, at least 3."""
    k = max(3, math.ceil(len(actual) / 4))
    return np.argsort(actual, kind="stable")[:k]


def folds_of(n: int, k: int, seed: int) -> list[np.ndarray]:
    order = np.random.Generator(np.random.PCG64(seed)).permutation(n)
    return [order[i::k] for i in range(min(k, n))]


def cross_validate(
    W: np.ndarray, Y: np.ndarray, sets: Sequence[str], cfg: FitSection, p: np.ndarray
) -> dict[str, Any]:
    """Out-of-fold predictions of the objective by each predictor, and their ρ, top-quartile ρ and RMSE.

    Predictors: the log-linear law, the linear fit, and two trivial rankers that need no fit ('more of
    the largest source': minus its weight; 'close to natural': the L1 distance to p) — the law earns
    its keep only where it ranks better than they do."""
    n = len(W)
    actual = Y.mean(axis=1)
    pred = {"loglinear": np.zeros(n), "linear": np.zeros(n)}
    for held in folds_of(n, cfg.folds, cfg.seed):
        train = np.setdiff1d(np.arange(n), held)
        laws = fit_laws(W[train], Y[train], sets, cfg)
        for kind in pred:
            pred[kind][held] = laws.objective(W[held], kind)
    largest = int(np.argmax(p))
    pred["more_of_largest"] = -W[:, largest]
    pred["near_natural"] = np.abs(W - p).sum(axis=1)
    top = top_quartile(actual)
    out: dict[str, Any] = {"n": n, "folds": min(cfg.folds, n), "predictors": {}}
    for kind, pr in pred.items():
        fitted = kind in ("loglinear", "linear")
        out["predictors"][kind] = {
            "rho": spearman(pr, actual),
            "rho_top_quartile": spearman(pr[top], actual[top]),
            "rmse": float(np.sqrt(np.mean((pr - actual) ** 2))) if fitted else None,
        }
    out["oof_objective"] = {k: v.tolist() for k, v in pred.items() if k in ("loglinear", "linear")}
    return out


def pooled_sd(groups: Sequence[Sequence[float]]) -> float | None:
    """The within-group standard deviation pooled over groups of ≥ 2 (the seeds of each anchor)."""
    ss = sum(float(np.sum((np.asarray(g) - np.mean(g)) ** 2)) for g in groups if len(g) > 1)
    dof = sum(len(g) - 1 for g in groups if len(g) > 1)
    return math.sqrt(ss / dof) if dof else None


def noise_gate(mixture_values: Sequence[float], seed_groups: Sequence[Sequence[float]], ratio: float) -> dict:
    """Can the proxies tell mixtures apart? sd across mixtures (one run each) against the pooled sd
    across seeds of the same mixture; passed iff the former is ≥ ratio × the latter (and > 0)."""
    between = float(np.std(mixture_values, ddof=1)) if len(mixture_values) > 1 else 0.0
    seeds = pooled_sd(seed_groups)
    if seeds is None:
        raise ConfigError("the noise gate needs a mixture trained with 2 seeds or more")
    return {
        "mixture_sd": between,
        "seed_sd": seeds,
        "ratio": between / seeds if seeds > 0 else math.inf if between > 0 else 0.0,
        "required": ratio,
        "passed": between > 0 and between >= ratio * seeds,
    }


# ------------------------------------------------------------------ the solve


def project_box_simplex(v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The point of {lo ≤ w ≤ hi, Σw = 1} nearest `v` (bisection on the shift τ of clip(v − τ, lo, hi))."""
    a, b = float(np.min(v - hi)) - 1.0, float(np.max(v - lo)) + 1.0
    for _ in range(100):  # halves an interval of a few units: far below float resolution by then
        tau = (a + b) / 2
        if np.clip(v - tau, lo, hi).sum() > 1:
            a = tau
        else:
            b = tau
    return np.clip(v - (a + b) / 2, lo, hi)


def bounds_for(
    sources: Sequence[str], caps: np.ndarray, solve_cfg: SolveSection
) -> tuple[np.ndarray, np.ndarray]:
    """Per-source [lo, hi]: solve.min/max and the epoch cap; ConfigError when no mixture is left."""
    unknown = sorted((set(solve_cfg.min) | set(solve_cfg.max)) - set(sources))
    if unknown:
        raise ConfigError(f"solve.min/max name sources not searched: {unknown}; searched: {list(sources)}")
    lo = np.array([solve_cfg.min.get(s, 0.0) for s in sources])
    hi = np.minimum([solve_cfg.max.get(s, 1.0) for s in sources], caps)
    bad = [s for s, a, b in zip(sources, lo, hi, strict=True) if a > b]
    if bad or lo.sum() > 1 or hi.sum() < 1:
        detail = ", ".join(f"{s} [{a:.4f}, {b:.4f}]" for s, a, b in zip(sources, lo, hi, strict=True))
        raise ConfigError(
            f"no mixture satisfies the bounds (min/max and epoch caps at the target budget): {detail}; "
            "the upper bounds must add up to 1 or more: lower the target tokens or raise max_epochs"
        )
    return lo, hi


def solve(
    laws: Laws, p: np.ndarray, lo: np.ndarray, hi: np.ndarray, pull: str = "kl", strength: float = 0.05
) -> np.ndarray:
    """argmin over lo ≤ w ≤ hi, Σw = 1 of mean_i law_i(w) + strength·D(w, p) (SLSQP, several starts)."""
    from scipy.optimize import minimize

    T = np.column_stack([law.t for law in laws.loglinear])  # (m, sets)
    a = 1.0 / T.shape[1]

    def f(w: np.ndarray) -> tuple[float, np.ndarray]:
        e = np.exp(np.clip(w @ T, -50, 50))  # (sets,)
        val = a * e.sum()
        grad = a * (T @ e)
        if pull == "kl":
            wc = np.maximum(w, 1e-12)
            val += strength * float(np.sum(wc * np.log(wc / p)))
            grad = grad + strength * (np.log(wc / p) + 1.0)
        else:
            val += strength * float(np.sum((w - p) ** 2))
            grad = grad + strength * 2 * (w - p)
        return val, grad

    m = len(p)
    starts = [p, np.full(m, 1.0 / m), *np.eye(m)]
    best_w, best_v = None, math.inf
    for s in starts:
        x0 = project_box_simplex(np.asarray(s, float), lo, hi)
        r = minimize(f, x0, jac=True, method="SLSQP", bounds=list(zip(lo, hi, strict=True)),
                     constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0, "jac": lambda w: np.ones(m)}],
                     options={"maxiter": 500, "ftol": 1e-12})  # fmt: skip
        w = project_box_simplex(r.x, lo, hi)  # SLSQP may end a hair outside a bound
        v = f(w)[0]
        if v < best_v:
            best_w, best_v = w, v
    assert best_w is not None
    return best_w


@dataclass
class Bootstrap:
    objective: tuple[float, float]
    """2.5 and 97.5 percentiles of the predicted objective at the chosen mixture"""
    per_set: dict[str, tuple[float, float]]
    weights: dict[str, tuple[float, float]]
    """percentile interval of each weight when the whole fit and solve are redone on a resample"""
    samples: int
    failed: int = 0
    objective_samples: list[float] = field(default_factory=list)


def bootstrap(
    W: np.ndarray,
    Y: np.ndarray,
    laws: Laws,
    chosen: np.ndarray,
    p: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    sources: Sequence[str],
    fit_cfg: FitSection,
    solve_cfg: SolveSection,
) -> Bootstrap | None:
    """Refit on `fit_cfg.bootstrap` resamples of the runs (warm-started from `laws`); predict at `chosen`
    and re-solve. None when bootstrap = 0."""
    if fit_cfg.bootstrap == 0:
        return None
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([fit_cfg.seed, 0xB007])))
    preds, objs, ws = [], [], []
    failed = 0
    for _ in range(fit_cfg.bootstrap):
        idx = rng.integers(0, len(W), len(W))
        if len(np.unique(idx)) <= W.shape[1]:  # fewer distinct runs than parameters: no fit
            failed += 1
            continue
        b = fit_laws(W[idx], Y[idx], laws.sets, fit_cfg, warm=laws)
        preds.append(b.predict(chosen[None, :])[0])
        objs.append(float(b.objective(chosen[None, :])[0]))
        ws.append(solve(b, p, lo, hi, solve_cfg.pull, solve_cfg.strength))
    if not objs:
        return None
    P, Wb = np.array(preds), np.array(ws)

    def ci(x: np.ndarray) -> tuple[float, float]:
        return float(np.percentile(x, 2.5)), float(np.percentile(x, 97.5))

    return Bootstrap(
        objective=ci(np.array(objs)),
        per_set={s: ci(P[:, i]) for i, s in enumerate(laws.sets)},
        weights={s: ci(Wb[:, j]) for j, s in enumerate(sources)},
        samples=len(objs),
        failed=failed,
        objective_samples=objs,
    )


def regret(chosen_actual: float | None, swarm_actual: dict[str, float]) -> dict[str, Any]:
    """The chosen mixture's measured objective less the best measured swarm run's (> 0: worse)."""
    best = min(swarm_actual, key=swarm_actual.__getitem__)
    return {
        "best_run": best,
        "best_run_objective": swarm_actual[best],
        "chosen_objective": chosen_actual,
        "regret": None if chosen_actual is None else chosen_actual - swarm_actual[best],
    }
