"""The mixture search's report from its search.json (workflows/search.py writes both): search.md, a
Markdown page of the diagnostics first (held-out ρ against the baselines, the noise gate, the regret,
the validation), then the weights and the predicted against actual loss of every proxy; and search.png,
out-of-fold predicted against actual objective beside the natural, chosen and uniform weights.

The diagnostics lead because they decide whether the weights below them mean anything
(docs/mixtures-and-ablations.md, "When to trust a search").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _f(x: Any, digits: int = 4) -> str:
    if x is None:
        return "–"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _ci(ci: Any) -> str:
    return "" if not ci else f" [{ci[0]:.4f}, {ci[1]:.4f}]"


def _at(s: dict[str, Any]) -> str:
    """Where mixtures are compared: at the seeds every proxy has (a seed moves all of them together)."""
    seeds = s.get("compared_seeds")
    return "" if not seeds else f" (seed {', '.join(map(str, seeds))}: the seeds every proxy has)"


def format_report(s: dict[str, Any]) -> str:
    """search.md's text: the verdict and the run's scale, the diagnostics, the chosen mixture, the
    validation (when run), then every proxy."""
    gate, reg, ch, cv = s["gate"], s["regret"], s["chosen"], s["cv"]
    lines = [*_head(s, gate), *_diagnostics(s, gate, reg, ch, cv), *_chosen(s, ch)]
    if "validate" in s:
        lines += _validation(s["validate"])
    lines += _proxies(s)
    return "\n".join(lines)


def _head(s: dict[str, Any], gate: dict[str, Any]) -> list[str]:
    """The title, the verdict of the noise gate, the proxies' scale and objective, and the cost."""
    verdict = (
        "**Recommended**: the noise gate passed; `chosen.yaml` is the law's optimum."
        if s["recommended"]
        else "**No recommendation**: the spread between mixtures is under "
        f"{gate['required']:g}x the spread between seeds, so the proxies cannot tell the mixtures apart; "
        "`law-optimum.yaml` is written for inspection only."
    )
    return [
        f"# Mixture search: {Path(s['recipe']).name}, phase `{s['phase']}`",
        "",
        verdict,
        "",
        f"{len(s['runs'])} mixtures ({sum(1 for r in s['runs'].values() if r['kind'] == 'anchor')} anchors), "
        f"{s['proxy_tokens']:,} tokens each on a {s['proxy_params']:,}-parameter proxy; objective: mean bits "
        f"per byte of {', '.join(s['objective'])}; target budget {s['target_tokens']:,} tokens.",
        "",
        f"Cost: estimated {s['cost_estimate']['proxies']['core_hours']:.2f} core-hours for the proxies "
        f"(6ND = {s['cost_estimate']['proxies']['flops']:.3g} FLOPs); measured "
        f"{s['cost_measured']['core_hours']:.2f} ({s['cost_measured']['runs']} runs, "
        f"{s['cost_measured']['wall_s'] / 60:.1f} min).",
        "",
    ]


def _diagnostics(s: dict[str, Any], gate: dict, reg: dict, ch: dict, cv: dict) -> list[str]:
    """## Diagnostics: held-out ρ of each predictor, the noise gate, the regret and the trivial baselines."""
    lines = [
        "## Diagnostics",
        "",
        f"Held-out Spearman ρ ({cv['folds']}-fold over {cv['n']} mixtures; top quartile: the best quarter by "
        "actual objective):",
        "",
        "| predictor | ρ | ρ top quartile | RMSE |",
        "|---|---|---|---|",
    ]
    for name, d in cv["predictors"].items():
        lines.append(f"| {name} | {_f(d['rho'], 3)} | {_f(d['rho_top_quartile'], 3)} | {_f(d['rmse'])} |")
    lines += [
        "",
        f"Noise gate: sd between mixtures {gate['mixture_sd']:.4f}, pooled sd between seeds {gate['seed_sd']:.4f}: "
        f"ratio {gate['ratio']:.2f} (needs ≥ {gate['required']:g}): **{'passed' if gate['passed'] else 'FAILED'}**.",
        "",
        f"Regret{_at(s)}: the chosen mixture's measured objective {_f(reg['chosen_objective'])} against the best proxy "
        f"`{reg['best_run']}` {_f(reg['best_run_objective'])}: {reg['regret']:+.4f} bits per byte "
        "(> 0: the best proxy was better).",
        "",
        "Trivial baselines (measured objective, mean over seeds) and the chosen mixture:",
        "",
        "| mixture | objective |",
        "|---|---|",
        *(f"| {n} | {v:.4f} |" for n, v in s["baselines"].items()),
        f"| chosen ({ch['name']}) | {ch['actual']:.4f} (seeds: {', '.join(f'{x:.4f}' for x in ch['actual_seeds'])}) |",
        "",
    ]
    return lines


def _chosen(s: dict[str, Any], ch: dict[str, Any]) -> list[str]:
    """## The chosen mixture: predicted against measured, per eval set, and its weights with intervals."""
    lines = [
        "## The chosen mixture",
        "",
        f"Predicted objective {ch['predicted']:.4f}{_ci(ch['predicted_interval'])}, measured "
        f"{ch.get('actual_compared', ch['actual']):.4f}{_at(s)}"
        + (
            f" ({ch['bootstrap']['samples']} bootstrap resamples, 95% percentile intervals)"
            if ch["bootstrap"]
            else ""
        )
        + f"; fits every epoch cap at the target: {'yes' if ch['fits_target'] else 'NO'}.",
        "",
        "| eval set | predicted |",
        "|---|---|",
        *(
            f"| {e} | {v:.4f}{_ci((ch['predicted_per_set_interval'] or {}).get(e))} |"
            for e, v in ch["predicted_per_set"].items()
        ),
        "",
        "| source | tokens | natural | cap | chosen | interval |",
        "|---|---|---|---|---|---|",
    ]
    for src in s["sources"]:
        wi = (ch["weights_interval"] or {}).get(src)
        lines.append(
            f"| {src} | {s['tokens'][src]:,} | {s['natural'][src]:.4f} | {s['caps'][src]:.4f} | "
            f"{ch['weights'][src]:.4f} | {_ci(wi).strip() or '–'} |"
        )
    return lines


def _validation(v: dict[str, Any]) -> list[str]:
    """## Validation (--validate): each arm's objective per seed, and the optimum against the others."""
    return [
        "",
        f"## Validation: {v['tokens']:,} tokens, model overrides {v['model_overrides']}, seeds {v['seeds']}",
        "",
        "| mixture | objective per seed |",
        "|---|---|",
        *(f"| {a} | {', '.join(f'{x:.4f}' for x in xs)} |" for a, xs in v["objective_per_seed"].items()),
        "",
        *(
            f"- optimum − {o}: {d['mean_diff']:+.4f} bits per byte (paired over seeds, p = {_f(d['p'], 3)}); "
            f"better on every seed: {'yes' if d['optimum_better_every_seed'] else 'no'}"
            for o, d in v["vs"].items()
        ),
        f"- per eval set: {v['ablation']}",
    ]


def _proxies(s: dict[str, Any]) -> list[str]:
    """## Every proxy: its weights, actual, in-sample and out-of-fold predicted objective, best first."""
    lines = [
        "",
        f"## Every proxy: predicted (in-sample, out-of-fold) against actual{_at(s)}",
        "",
        "| mixture | kind | "
        + " | ".join(s["sources"])
        + " | actual | predicted | out-of-fold | fits target |",
        "|---|---|" + "---|" * len(s["sources"]) + "---|---|---|---|",
    ]
    for name, r in sorted(s["runs"].items(), key=lambda kv: kv[1]["objective"]):
        ws = " | ".join(f"{w:.3f}" for w in r["weights"])
        lines.append(
            f"| {name} | {r['kind']} | {ws} | {r['objective']:.4f} | {r['predicted']:.4f} | "
            f"{r['oof_loglinear']:.4f} | {'yes' if r['fits_target'] else 'no'} |"
        )
    return lines


def chart(s: dict[str, Any], path: Path) -> None:
    """Left: out-of-fold predicted against actual objective per proxy. Right: the weights."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for kind, colour in (("swarm", "tab:grey"), ("anchor", "tab:blue")):
        rs = [r for r in s["runs"].values() if r["kind"] == kind]
        a1.scatter([r["objective"] for r in rs], [r["oof_loglinear"] for r in rs], c=colour, s=16, label=kind)
    ch = s["chosen"]
    a1.scatter([ch["actual"]], [ch["predicted"]], marker="*", s=140, c="tab:red", label="chosen (in-sample)")
    vals = [r["objective"] for r in s["runs"].values()] + [r["oof_loglinear"] for r in s["runs"].values()]
    lo, hi = min(vals), max(vals)
    a1.plot([lo, hi], [lo, hi], lw=0.8, c="k")
    rho = s["cv"]["predictors"]["loglinear"]["rho"]
    a1.set_title(f"out-of-fold predicted vs actual (ρ = {rho if rho is None else round(rho, 3)})", fontsize=9)
    a1.set_xlabel("actual objective (bits per byte)")
    a1.set_ylabel("predicted")
    a1.legend(fontsize=7)
    src = s["sources"]
    x = np.arange(len(src))
    uniform = [1 / len(src)] * len(src)
    chosen = [ch["weights"][k] for k in src]
    err = None
    if ch["weights_interval"]:
        ci = [ch["weights_interval"][k] for k in src]
        err = [[max(c - a, 0) for c, (a, _) in zip(chosen, ci, strict=True)],
               [max(b - c, 0) for c, (_, b) in zip(chosen, ci, strict=True)]]  # fmt: skip
    a2.bar(x - 0.27, [s["natural"][k] for k in src], 0.27, label="natural")
    a2.bar(
        x,
        chosen,
        0.27,
        yerr=err,
        capsize=2,
        label="chosen" if s["recommended"] else "law optimum (not recommended)",
    )
    a2.bar(x + 0.27, uniform, 0.27, label="uniform")
    a2.plot(x, [s["caps"][k] for k in src], "k_", ms=18, label="epoch cap")
    a2.set_xticks(x, src, rotation=30, fontsize=7)
    a2.set_ylim(0, 1)
    a2.set_title(f"weights of phase {s['phase']}", fontsize=9)
    a2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
