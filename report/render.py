"""Charts (PNG, matplotlib's Agg backend: no display needed) and report.html, drawn from report.json only.

One function per chart (`CHARTS`); each returns its figure, or None when its section has no data (a
run stopped early still gets a report of what it has), and `render` saves it as <name>.png. The HTML
puts the numbers in a table under each chart, so a reader can quote them without opening the JSON.
"""

from __future__ import annotations

import html
import itertools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _plt():
    import matplotlib

    matplotlib.use("Agg")  # headless: CI and servers have no display
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Figure, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=110)
    _plt().close(fig)
    return f"{name}.png"


def _histogram(ax, bins: list[tuple[float, float]], counts: list[int], color: str) -> None:
    """One bar per (low, high) bin, as wide as the bin."""
    lows, widths = [lo for lo, _ in bins], [hi - lo for lo, hi in bins]
    ax.bar(lows, counts, width=widths, align="edge", color=color, edgecolor="white")


def _bound(ax, x: float, top: float, label: str) -> None:
    """A recipe's threshold: a dashed vertical line at x, labelled near the top of the highest bar."""
    ax.axvline(x, color="black", ls="--", lw=1)
    ax.text(x, top * 0.95, label, va="top")


def chart_funnel(r: dict[str, Any]) -> Figure | None:
    rows = r["funnel"]
    if not rows:
        return None
    fig, (a1, a2) = _plt().subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1, 1.3]})
    # The first bar is what went in (WARC records), then what each stage left.
    labels = ["records read", *(f"{x['job']}:{x['stage']}" for x in rows)]
    a1.barh(labels, [rows[0]["docs_in"], *(x["docs_out"] for x in rows)], color="#4c72b0")
    a1.invert_yaxis()
    a1.set_xlabel("documents out")
    a1.set_title("Funnel: documents left after each stage")
    reasons: dict[str, int] = {}
    for x in rows:
        for k, v in x["drops"].items():
            # Filter reasons already name their block ("gopher_quality:gopher_short_doc").
            label = k if ":" in k else f"{x['stage']}: {k}"
            reasons[label] = reasons.get(label, 0) + v
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:20]
    a2.barh([k for k, _ in top], [v for _, v in top], color="#c44e52")
    a2.invert_yaxis()
    a2.set_xlabel("documents dropped")
    a2.set_title("Drop reasons (top 20)")
    return fig


def chart_languages(r: dict[str, Any]) -> Figure | None:
    lang = r["languages"]
    # Dropped: exact when extract counted every language (`seen`), else the rejected/ sample's count.
    if lang.get("seen"):
        dropped = {k: v - lang["kept"].get(k, 0) for k, v in lang["seen"].items()}
        label = "dropped by langid"
    else:
        dropped = dict(lang["rejected_sample"])
        label = "dropped by langid (rejected sample only)"
    merged = {k: lang["kept"].get(k, 0) + dropped.get(k, 0) for k in set(lang["kept"]) | set(dropped)}
    if not merged:
        return None
    top = sorted(merged.items(), key=lambda kv: -kv[1])[:20]
    fig, ax = _plt().subplots(figsize=(8, 4.5))
    names = [k for k, _ in top]
    ax.bar(names, [lang["kept"].get(k, 0) for k in names], label="kept", color="#55a868")
    ax.bar(names, [dropped.get(k, 0) for k in names], bottom=[lang["kept"].get(k, 0) for k in names],
           label=label, color="#c44e52")  # fmt: skip
    ax.legend()
    ax.set_ylabel("documents")
    ax.set_title("Languages (lid.176)")
    return fig


def chart_quality(r: dict[str, Any]) -> Figure | None:
    q = r["quality"]
    if not q.get("bins"):
        return None
    fig, (a1, a2) = _plt().subplots(1, 2, figsize=(12, 4))
    edges = [tuple(float(x) for x in k.split("-")) for k in q["bins"]]  # "0.0-0.1" -> (0.0, 0.1)
    _histogram(a1, edges, list(q["bins"].values()), "#8172b2")
    a1.set_xlabel("quality score P(high quality)")
    a1.set_ylabel("documents")
    a1.set_title("Quality scores (score job's stats, tenths)")
    lb = q.get("log_bins")
    if lb:
        _histogram(a2, list(itertools.pairwise(lb["edges"])), lb["counts"], "#8172b2")
        a2.set_xscale("log")
        a2.set_xlabel("quality score (log scale; below 1e-4 counted in the first bin)")
        a2.set_title("Quality scores, log scale, with the recipe's thresholds")
        for t in r.get("quality_thresholds", []):
            _bound(a2, t, max(lb["counts"]), f" recipe ≥ {t}")
    return fig


def chart_scores(r: dict[str, Any]) -> Figure | None:
    """One histogram per score column (perplexity, toxicity) with the recipe's bounds on it."""
    sc = r.get("scores") or {}
    if not sc:
        return None
    fig, axes = _plt().subplots(1, len(sc), figsize=(6 * len(sc), 4), squeeze=False)
    for ax, (col, h) in zip(axes[0], sc.items()):
        _histogram(ax, list(itertools.pairwise(h["edges"])), h["counts"], "#55a868")
        if h["scale"] == "log":
            ax.set_xscale("log")
        ax.set_xlabel(f"{col} ({h['scale']} scale; outside the range counted in the end bins)")
        ax.set_ylabel("documents")
        ax.set_title(f"{col}: {sum(h['counts'])} scored, {h['null']} null, with the recipe's bounds")
        for b in h["recipe"]:
            _bound(ax, b["value"], max(h["counts"] or [1]), f" {b['source']}: {b['op']} {b['value']:g}")
    return fig


def chart_dup_clusters(r: dict[str, Any]) -> Figure | None:
    sizes = r["dup_clusters"]["kept_docs_by_cluster_size"]
    if not sizes:
        return None
    fig, ax = _plt().subplots(figsize=(7, 4))
    ax.bar([str(k) for k in sizes], list(sizes.values()), color="#dd8452")
    ax.set_yscale("log")
    ax.set_xlabel("near-duplicate cluster size (documents)")
    ax.set_ylabel("clusters (log)")
    ax.set_title("Duplicate-cluster sizes (MinHash LSH)")
    return fig


def chart_tokens(r: dict[str, Any]) -> Figure | None:
    plan = r["tokens"]["plan"]
    mans = r["tokens"]["manifests"]
    if not mans:
        return None
    fig, (a1, a2) = _plt().subplots(1, 2, figsize=(12, 4.2))
    names = list(mans)
    a1.bar(names, [mans[n]["tokens"] for n in names], color="#4c72b0")
    a1.set_ylabel("tokens")
    a1.set_title("Tokens available per source (manifests)")
    trained = r["training"].get("trained_tokens_by_phase", {})
    phases = list(dict.fromkeys(p for d in plan.values() for p in d))  # recipe order
    # Bars: each phase as planned, and (after training) as the trainer actually drew it.
    cols = [(f"{p}\nplan", {n: plan[n].get(p, 0) for n in plan}) for p in phases]
    cols += [(f"{p}\ntrained", trained[p]) for p in phases if p in trained]
    bottom = [0] * len(cols)
    for n in names:
        vals = [c.get(n, 0) for _, c in cols]
        a2.bar([label for label, _ in cols], vals, bottom=bottom, label=n)
        bottom = [b + v for b, v in zip(bottom, vals)]
    a2.set_ylabel("tokens")
    a2.set_title("Tokens per source and phase: recipe plan and trained")
    a2.legend()
    return fig


def chart_loss(r: dict[str, Any]) -> Figure | None:
    t = r["training"]
    if not t.get("step"):
        return None
    fig, ax = _plt().subplots(figsize=(8, 4))
    ax.plot(t["step"], t["loss"], lw=1, color="#4c72b0")
    # Shade phases so the anneal's effect on the loss is visible.
    prev, start = None, None
    for s, p in zip(t["step"], t["phase"]):
        if p != prev:
            if prev is not None:
                ax.axvline(s, color="grey", ls=":", lw=1)
                ax.text(s, max(t["loss"]), f" {p}", va="top", color="grey")
            prev, start = p, s
    del start
    for src, ev in t.get("eval", {}).items():
        ax.plot(ev["step"], ev["loss"], "o--", ms=4, lw=1, label=f"held-out {src}")
    if t.get("eval"):
        ax.legend()
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title("Loss curve")
    return fig


def chart_throughput(r: dict[str, Any]) -> Figure | None:
    t = r["training"]
    if not t.get("step"):
        return None
    fig, ax = _plt().subplots(figsize=(8, 4))
    ax.plot(t["step"], t["tokens_per_s"], lw=1, color="#55a868")
    ax.set_xlabel("step")
    ax.set_ylabel("tokens / s (all ranks)")
    ax.set_title("Training throughput")
    return fig


def format_seconds(v: Any) -> Any:
    """Seconds as a reader wants them: three figures at most below 100 s ("0.04", "3.4", "57.2"), whole
    seconds above ("1,234"). Stage timings carry no millisecond meaning (a stage's seconds vary by
    more than that between two runs), and "1234.567" only hides the size. Anything else is returned
    as it is (a missing value's "" or "—")."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return v
    if abs(v) < 1:
        return f"{v:.2f}"
    if abs(v) < 100:
        return f"{v:.1f}"
    return f"{v:,.0f}"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.3f}"
        if isinstance(v, int):
            return f"{v:,}"
        return html.escape(str(v))

    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _training_tables(tr: dict[str, Any]) -> dict[str, str]:
    """The loss and throughput tables (none before the first logged step)."""
    t: dict[str, str] = {}
    end = tr.get("end") or {}
    if tr.get("step"):
        t["loss"] = _table(
            ["first step", "last step", "first loss", "last loss", "min loss"],
            [[tr["step"][0], tr["step"][-1], tr["loss"][0], tr["loss"][-1], min(tr["loss"])]],
        )
        if tr.get("eval"):
            t["loss"] += _table(
                ["held-out source", "step", "loss"],
                [[src, st, v] for src, ev in tr["eval"].items() for st, v in zip(ev["step"], ev["loss"])],
            )
        t["throughput"] = _table(
            ["mean tokens/s (steps)", "tokens/s (end event)", "wall s", "tokens trained", "sample"],
            [
                [
                    round(sum(tr["tokens_per_s"]) / len(tr["tokens_per_s"])),  # tokens/s: whole tokens
                    round(v) if isinstance(v := end.get("tokens_per_s"), int | float) else "",
                    format_seconds(end.get("wall_s", "")),
                    tr["tokens"][-1],
                    end.get("sample", ""),
                ]
            ],
        )
    return t


def _section_tables(r: dict[str, Any]) -> dict[str, str]:
    """The HTML tables under each section's chart, by section name."""
    t: dict[str, str] = {
        "funnel": _funnel_table(r["funnel"]),
        "languages": _language_tables(r["languages"]),
        "quality": _quality_tables(r["quality"]),
        "scores": _score_tables(r.get("scores") or {}),
        "dup_clusters": _dup_cluster_tables(r["dup_clusters"]),
        "tokens": _token_tables(r["tokens"], r["training"]),
    }
    t.update(_training_tables(r["training"]))
    return t


def _funnel_table(funnel: list[dict[str, Any]]) -> str:
    """Documents and bytes in and out of each stage of each job, with its seconds and drop reasons."""
    return _table(
        ["job", "stage", "docs in", "docs out", "bytes in", "bytes out", "seconds", "drops"],
        [
            [
                x["job"],
                x["stage"],
                x["docs_in"],
                x["docs_out"],
                x["bytes_in"],
                x["bytes_out"],
                format_seconds(x["seconds"]),
                ", ".join(f"{k}: {v}" for k, v in sorted(x["drops"].items())),
            ]
            for x in funnel
        ],
    )


def _language_tables(lang: dict[str, Any]) -> str:
    """Documents per language kept, seen and dropped; then, where extract counted them, the exact drops
    after language ID per language and reason."""
    seen = lang.get("seen", {})
    out = (
        _table(
            ["language", "kept", "seen by langid (stats)", "dropped (rejected sample)"],
            [
                [k, lang["kept"].get(k, 0), seen.get(k, "—"), lang["rejected_sample"].get(k, 0)]
                for k in sorted(set(lang["kept"]) | set(lang["rejected_sample"]) | set(seen))
            ],
        )
        + f"<p class=note>{html.escape(lang['note'])}</p>"
    )
    funnel = lang.get("funnel") or {}
    if funnel:  # exact, from extract's counters: every drop after language ID, per language and reason
        out += _table(
            ["language", "kept", "characters kept", "dropped", "drops by reason"],
            [
                [
                    k,
                    x["kept"],
                    x["chars"],
                    sum(x["drops"].values()),
                    ", ".join(f"{r}: {n}" for r, n in sorted(x["drops"].items(), key=lambda kv: -kv[1])),
                ]
                for k, x in funnel.items()
            ],
        )
    return out


def _quality_tables(quality: dict[str, Any]) -> str:
    """Documents per quality-score bin, and the score's quantiles where recorded."""
    q = quality.get("bins", {})
    out = _table(["score bin", "documents"], [[k, v] for k, v in q.items()])
    qa = quality.get("quantiles", {})
    if qa:
        out += _table(["quantile", "score"], [[k, v] for k, v in qa.items()])
    return out


def _score_tables(scores: dict[str, Any]) -> str:
    """Per score column: its quantiles, and the recipe sources' bounds on it."""
    return "".join(
        _table([f"{col} quantile", "value"], [[k, v] for k, v in h["quantiles"].items()])
        + _table(
            ["recipe source", "bound"], [[b["source"], f"{b['op']} {b['value']:g}"] for b in h["recipe"]]
        )
        for col, h in scores.items()
    )


def _dup_cluster_tables(dc: dict[str, Any]) -> str:
    """Clusters per size (of the kept documents), then dedup's counters."""
    return _table(
        ["cluster size", "clusters"], [[k, v] for k, v in dc["kept_docs_by_cluster_size"].items()]
    ) + _table(["dedup counter", "value"], [[k, v] for k, v in sorted(dc["counters"].items())])


def _token_tables(tok: dict[str, Any], training: dict[str, Any]) -> str:
    """Tokens per source's manifest, the plan's tokens per source and phase beside those trained, and
    bytes per token by language where tokenize counted them."""
    out = _table(
        ["source", "tokens", "documents", "select"],
        [[n, m["tokens"], m["documents"], json.dumps(m["select"])] for n, m in tok["manifests"].items()],
    ) + _table(
        ["source", "phase", "tokens drawn (plan)", "tokens trained"],
        [
            [n, p, v, training.get("trained_tokens_by_phase", {}).get(p, {}).get(n, "—")]
            for n, d in tok["plan"].items()
            for p, v in d.items()
        ],
    )
    bpt = tok.get("bytes_per_token") or []
    if bpt:  # manifests of tokenize runs that counted per `lang` (tokens/lang_counts.py)
        out += "<h3>Bytes per token by language</h3>" + _table(
            ["language", "documents", "bytes", "tokens", "bytes per token"],
            [[x["lang"], x["documents"], x["bytes"], x["tokens"], x["bytes_per_token"] or "—"] for x in bpt],
        )
    return out


CHARTS = {
    "funnel": ("Funnel and drop reasons", chart_funnel),
    "languages": ("Languages", chart_languages),
    "quality": ("Quality scores", chart_quality),
    "scores": ("Perplexity and toxicity", chart_scores),
    "dup_clusters": ("Duplicate clusters", chart_dup_clusters),
    "tokens": ("Tokens per source and phase", chart_tokens),
    "loss": ("Loss curve", chart_loss),
    "throughput": ("Tokens per second", chart_throughput),
}
"""The page's sections in order: name (its PNG file and anchor) -> (title, chart function)."""


def _ablation_section(a: dict[str, Any], out: Path) -> str:
    """Bits per byte per arm and eval set (mean ± sd over seeds, paired difference to the baseline)."""
    from mixtures.ablation_table import chart, format_cell

    chart(a, out / "ablation.png")
    rows = [
        [name, *(format_cell(x["bpb"].get(e)) for e in a["evals"]), round(x["tokens_seen"]), x["unique_tokens"],
         f"{x['epochs']:.2f}" + (" (repeated)" if x["repeated"] else ""), round(x["wall_s"])]
        for name, x in ((n, a["arms"][n]) for n in a.get("order", a["arms"]))
    ]  # fmt: skip
    head = ["arm", *(f"{e} bpb" for e in a["evals"]), "tokens seen", "unique tokens", "epochs", "wall s"]
    note = (
        f"Bits per byte (lower is better), mean ± sd over seeds {a['seeds']}; in brackets the difference to "
        f"`{a['baseline']}` and the paired t-test's p over seeds. `own`: each arm's own held-out documents."
    )
    return (
        '<h2 id=ablation>Ablation: does each stage improve the data?</h2><img src="ablation.png" alt="ablation">'
        + _table(head, rows)
        + f"<p class=note>{html.escape(note)}</p>"
    )


def render(r: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    tables = _section_tables(r) if "funnel" in r else {}
    parts = []
    for name, (title, chart) in CHARTS.items() if "funnel" in r else ():
        fig = chart(r)
        png = _save(fig, out, name) if fig is not None else None
        img = f'<img src="{png}" alt="{name}">' if png else "<p class=note>no data for this section</p>"
        parts.append(f"<h2 id={name}>{title}</h2>{img}{tables.get(name, '')}")
    timings = r.get("timings", {})
    if timings:
        parts.insert(
            0,
            "<h2 id=timings>Wall time per stage</h2>"
            + _table(
                ["stage", "seconds (last run that did the work)"],
                [
                    [k, format_seconds(v["seconds"]) if v.get("seconds") is not None else "—"]
                    for k, v in timings.items()
                ],
            ),
        )
    if r.get("ablation"):
        parts.append(_ablation_section(r["ablation"], out))
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}"
        "td:first-child{text-align:left}img{max-width:100%}.note{color:#777;font-size:13px}"
    )
    page = (
        f"<!doctype html><html><head><meta charset=utf-8><title>Refinery run report</title>"
        f"<style>{style}</style></head><body><h1>Refinery run report</h1>"
        f"<p>Run folder: <code>{html.escape(r['run'])}</code>. Numbers: <a href=report.json>report.json</a>.</p>"
        + "".join(parts)
        + "</body></html>"
    )
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
