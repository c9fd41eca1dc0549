"""The ablation's summary: per arm, mean ± sd over seeds of bits per byte per eval set, the paired
difference to a baseline arm, and the data facts that explain a result (tokens seen, unique tokens,
repetition); as ablation.json, a Markdown table and a chart.

The test against the baseline is paired by seed: arm and baseline at seed s share the initial
weights (and the data order where they share documents), so the seed-to-seed spread of the
initialisation cancels in the difference. With n seeds, the two-sided paired t-test (scipy's
ttest_rel) has n - 1 degrees of freedom: with 3 seeds only a difference that is large against its
own spread is called significant, which is the honest reading of a small proxy run.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any


def _mean_sd(xs: list[float]) -> dict[str, Any]:
    return {
        "mean": statistics.fmean(xs),
        "sd": statistics.stdev(xs) if len(xs) > 1 else None,
        "n": len(xs),
        "values": xs,
    }


def _paired(xs: list[float], base: list[float]) -> dict[str, Any]:
    """Mean of arm − baseline over paired seeds; t and two-sided p (None with fewer than 2 pairs or no spread)."""
    from scipy import stats

    diffs = [a - b for a, b in zip(xs, base, strict=True)]
    out: dict[str, Any] = {"mean": statistics.fmean(diffs), "t": None, "p": None}
    if len(diffs) > 1 and statistics.pstdev(diffs) > 0:
        res = stats.ttest_rel(xs, base)
        out["t"], out["p"] = float(res.statistic), float(res.pvalue)
    return out


def summarize(arms: dict[str, dict], results: list[dict], baseline: str, evals: list[str]) -> dict:
    """ablation.json: per arm its facts, per eval set mean/sd and the paired difference to `baseline`."""
    by_arm: dict[str, dict[int, dict]] = {}
    for r in results:
        by_arm.setdefault(r["arm"], {})[r["seed"]] = r
    seeds = sorted(by_arm[baseline])
    # `order`: the arms as given (ablation.json is written with sorted keys)
    out: dict[str, Any] = {
        "baseline": baseline,
        "seeds": seeds,
        "evals": evals,
        "order": list(arms),
        "arms": {},
    }
    for name, info in arms.items():
        runs = [by_arm[name][s] for s in seeds]
        entry = {
            **info,
            "epochs": info["budget"] / max(info["unique_tokens"], 1),
            "repeated": info["budget"] > info["unique_tokens"],
            "tokens_seen": _mean_sd([float(r["tokens_seen"]) for r in runs])["mean"],
            "wall_s": sum(r["wall_s"] for r in runs),
            "bpb": {},
        }
        for ev in evals:
            xs = [r["bpb"].get(ev) for r in runs]
            if any(x is None for x in xs):
                continue
            entry["bpb"][ev] = _mean_sd(xs)
            if name != baseline and ev != "own":  # each arm's `own` set is its own: no pairing
                base = [by_arm[baseline][s]["bpb"][ev] for s in seeds]
                entry["bpb"][ev]["vs_baseline"] = _paired(xs, base)
        out["arms"][name] = entry
    return out


def format_cell(b: dict | None) -> str:
    if b is None:
        return "–"
    sd = f" ± {b['sd']:.4f}" if b["sd"] is not None else ""
    cell = f"{b['mean']:.4f}{sd}"
    vs = b.get("vs_baseline")
    if vs is not None:
        p = f", p={vs['p']:.3f}" if vs["p"] is not None else ""
        cell += f" ({vs['mean']:+.4f}{p})"
    return cell


def format_table(summary: dict) -> str:
    """Markdown: one row per arm; bpb as mean ± sd (difference to the baseline, paired p)."""
    evals = summary["evals"]
    head = ["arm", *(f"{e} bpb" for e in evals), "tokens seen", "unique tokens", "epochs", "wall s"]
    lines = [
        f"bits per byte, mean ± sd over seeds {summary['seeds']}; (arm − {summary['baseline']}, "
        "paired t-test p); lower is better. `own`: each arm's own held-out documents (not comparable "
        "across arms).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for name in summary.get("order", summary["arms"]):
        a = summary["arms"][name]
        flag = " (repeated)" if a["repeated"] else ""
        cells = [name, *(format_cell(a["bpb"].get(e)) for e in evals)]
        cells += [f"{a['tokens_seen']:,.0f}", f"{a['unique_tokens']:,}", f"{a['epochs']:.2f}{flag}"]
        lines.append("| " + " | ".join([*cells, f"{a['wall_s']:.0f}"]) + " |")
    return "\n".join(lines)


def chart(summary: dict, path: Path) -> None:
    """Bits per byte per arm, one group per eval set, error bars one sd over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evals, arms = summary["evals"], list(summary.get("order", summary["arms"]))
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(evals) * max(1, len(arms)) / 3, 3.6))
    width = 0.8 / max(len(arms), 1)
    for i, name in enumerate(arms):
        bpb = summary["arms"][name]["bpb"]
        xs = [k + i * width for k, e in enumerate(evals) if e in bpb]
        ys = [bpb[e]["mean"] for e in evals if e in bpb]
        err = [bpb[e]["sd"] or 0.0 for e in evals if e in bpb]
        ax.bar(xs, ys, width, yerr=err, capsize=2, label=name)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(evals))], evals)
    ax.set_ylabel("bits per byte (lower is better)")
    lo = min((b["mean"] for a in summary["arms"].values() for b in a["bpb"].values()), default=0.0)
    ax.set_ylim(bottom=max(0.0, math.floor(lo * 10) / 10 - 0.2))
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(f"ablation: {len(summary['seeds'])} seeds per arm")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
