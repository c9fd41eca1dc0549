"""Read a run's stats files into one JSON-able dict: the numbers behind every chart of the report.

Layout read (what `python -m workflows demo` writes; any part may be missing, its section is then empty):

    DIR/extract/stats.json      funnel stages read → … → write, drops per reason, counters
    DIR/dedup/stats.json        exact / url / minhash / cluster / lines stages; cluster counters
    DIR/dedup/docs/*.parquet    dup_cluster_size of the kept documents (one kept per cluster)
    DIR/scored/stats.json       counters quality_bin_0 … quality_bin_9 (tenths of P(high quality))
    DIR/scored/docs/*.parquet   quality, perplexity and toxicity columns: histograms and quantiles
    DIR/tokens/shards/*/manifest.json   tokens and documents per source; documents, bytes and tokens
                                        per language (`languages`, tokens/lang_counts.py) summed over sources
    DIR/recipe.yaml or mixtures/demo.yaml   the recipe: its plan gives tokens per source and phase
    DIR/train/metrics.jsonl     per-step loss, tokens/s, phase; the `end` event
    DIR/timings.json            seconds per demo stage

Nothing is recomputed from documents except the duplicate-cluster size histogram, the languages of
kept documents and the score histograms (read from the Parquet columns because the stats do not hold them).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.files import doc_parquet_files
from core.safe_json import JSONFileError, read_json_file
from mixtures.plan import make_plan
from mixtures.recipe import Recipe
from report.histogram import finite_values, quantiles
from tokens.manifest import ManifestError, read_manifest_file
from trainer.metrics import MetricsLog


class ReportError(InputError):
    """The folder is not a run (no stage output at all); the message names it."""


def _json(path: Path) -> dict[str, Any] | None:
    """A run's JSON file (stats, timings, configs), None where it is missing. Read by the checked
    reader (core/safe_json.py: bounded size and depth, finite numbers, no duplicate keys): a run
    folder is shared and copied about, and its files are data to this report."""
    if not path.exists():
        return None
    value = read_json_file(path)
    if not isinstance(value, dict):
        raise JSONFileError(f"{path}: holds a JSON {type(value).__name__}, not an object")
    return value


def funnel(stats: dict[str, Any] | None, job: str) -> list[dict[str, Any]]:
    """Stages of one job's stats.json, in order, each with its drop reasons (docs and bytes)."""
    if not stats:
        return []
    stages = stats["stages"]
    # extract writes a list of stages; dedup writes Stats.to_dict() (also a list) — accept a mapping too.
    items = stages if isinstance(stages, list) else [{"stage": k, **v} for k, v in stages.items()]
    keys = ("docs_in", "docs_out", "bytes_in", "bytes_out", "seconds")
    return [
        {"job": job, "stage": s["stage"], **{k: s[k] for k in keys}, "drops": dict(s.get("drops", {}))}
        for s in items
    ]


def _parquet_files(folder: Path) -> list[Path]:
    """The Parquet files of a dataset folder by the project's one listing rule; none is not an error here."""
    try:
        return doc_parquet_files(folder)
    except InputError:
        return []


def _parquet_column_counts(folder: Path, column: str) -> Counter:
    import pyarrow.parquet as pq

    counts: Counter = Counter()
    for f in _parquet_files(folder):
        if column in pq.read_schema(f).names:
            counts.update(
                v for v in pq.read_table(f, columns=[column]).column(column).to_pylist() if v is not None
            )
    return counts


def languages(run: Path) -> dict[str, Any]:
    """Languages of kept documents, and of the rejected sample's language drops (a sample, said so)."""
    ex = run / "extract"
    kept = _parquet_column_counts(ex / "docs", "lang") if (ex / "docs").is_dir() else Counter()
    rejected = Counter()
    if (ex / "rejected").is_dir():
        import pyarrow.parquet as pq

        for f in sorted((ex / "rejected").glob("*.parquet")):
            names = pq.read_schema(f).names
            if "lang" in names and "stage" in names:
                t = pq.read_table(f, columns=["stage", "lang"]).to_pylist()
                # `prelid`: the cascade's language check before extraction (extract.cascade).
                rejected.update(r["lang"] for r in t if r["stage"] in ("langid", "prelid") and r["lang"])
    # Exact counts of every document langid (or the cascade's prelid) judged: counters `lang:<code>`.
    stats = _json(ex / "stats.json") or {}
    counters = stats.get("counters", {})
    seen = {k.removeprefix("lang:"): v for k, v in counters.items() if k.startswith("lang:")}
    return {
        "kept": dict(kept.most_common()),
        "seen": dict(sorted(seen.items(), key=lambda kv: -kv[1])),
        "funnel": language_funnel(counters),
        "rejected_sample": dict(rejected.most_common()),
        "note": "rejected_sample counts the rejected/ sample (at most N per stage, reason and language, per file), "
        "not every drop: the funnel has the exact counts",
    }


def language_funnel(counters: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Extract's exact funnel per language (counters `lang_funnel|<code>|...`, curation/pipeline.py):
    code -> kept documents, their characters, and every drop after language ID by reason; most kept first."""
    out: dict[str, dict[str, Any]] = {}
    for key, n in counters.items():
        parts = key.split("|", 3)
        if parts[0] != "lang_funnel" or len(parts) < 3:
            continue
        row = out.setdefault(parts[1], {"kept": 0, "chars": 0, "drops": {}})
        if parts[2] == "drop" and len(parts) == 4:
            row["drops"][parts[3]] = row["drops"].get(parts[3], 0) + n
        elif parts[2] in ("kept", "chars"):
            row[parts[2]] += n
    return dict(sorted(out.items(), key=lambda kv: (-kv[1]["kept"], kv[0])))


def quality(stats: dict[str, Any] | None, run: Path | None = None) -> dict[str, Any]:
    """The score job's histogram (tenths), plus a log-scale one from the `quality` column.

    The tenths are what the stats hold; but a classifier whose negatives are these very pages scores
    most of them under 0.1, so the log-scale histogram (20 bins over 1e-4 … 1) is what shows where a
    recipe threshold cuts.
    """
    if not stats:
        return {}
    bins = {
        k.removeprefix("quality_bin_"): v
        for k, v in stats.get("counters", {}).items()
        if k.startswith("quality_bin_")
    }
    # Keys are the score job's own labels ("0.0-0.1"), kept as they are; ordered by their lower edge.
    out: dict[str, Any] = {"bins": dict(sorted(bins.items(), key=lambda kv: float(kv[0].split("-")[0])))}
    docs = run / "scored" / "docs" if run is not None else None
    if docs is not None and docs.is_dir():
        import numpy as np
        import pyarrow.parquet as pq

        vals = [
            v
            for f in _parquet_files(docs)
            if "quality" in pq.read_schema(f).names  # a score job may have run without a quality model
            for v in pq.read_table(f, columns=["quality"]).column(0).to_pylist()
        ]
        # NaN and ±inf counted apart, not binned nor in the quantiles (report/histogram.py: why)
        q, nonfinite, _nulls = finite_values(vals)
        counts, edges = np.histogram(np.log10(np.clip(q, 1e-4, 1.0)), bins=20, range=(-4.0, 0.0))
        out["log_bins"] = {"edges": [float(10**e) for e in edges], "counts": [int(c) for c in counts]}
        out["nonfinite"] = nonfinite
        out["quantiles"] = quantiles(q, (0.1, 0.25, 0.5, 0.75, 0.9))
    return out


# Score columns other than quality, and how each is binned: perplexity spans orders of magnitude
# (log10 bins from 1 to 1e5; beyond counted in the last bin), toxicity is a probability (20 bins).
SCORE_COLUMNS = {"perplexity": ("log", 1.0, 1e5), "toxicity": ("linear", 0.0, 1.0)}


def scores(run: Path) -> dict[str, Any]:
    """Histogram, quantiles and nulls of each score column the scored documents have, plus the
    comparisons the recipe makes on it (drawn as lines: a band shows both of its bounds)."""
    docs = run / "scored" / "docs"
    if not docs.is_dir():
        return {}
    import numpy as np
    import pyarrow.parquet as pq

    files = _parquet_files(docs)
    bounds = recipe_bounds(run)
    out: dict[str, Any] = {}
    for col, (scale, lo, hi) in SCORE_COLUMNS.items():
        vals = [
            v
            for f in files
            if col in pq.read_schema(f).names
            for v in pq.read_table(f, columns=[col])[0].to_pylist()
        ]
        if not vals:
            continue
        x, nonfinite, nulls = finite_values(vals)  # NaN and ±inf apart (report/histogram.py)
        clipped = np.clip(x, lo, hi)
        if scale == "log":
            counts, edges = np.histogram(np.log10(clipped), bins=20, range=(np.log10(lo), np.log10(hi)))
        else:
            counts, edges = np.histogram(clipped, bins=20, range=(lo, hi))
        out[col] = {
            "scale": scale,
            "edges": [float(10**e) if scale == "log" else float(e) for e in edges],
            "counts": [int(c) for c in counts],
            "null": nulls,
            "nonfinite": nonfinite,
            "quantiles": quantiles(x, (0.01, 0.1, 0.5, 0.9, 0.99)),
            "recipe": bounds.get(col, []),
        }
    return out


def recipe_bounds(run: Path) -> dict[str, list[dict[str, Any]]]:
    """column -> the recipe's comparisons on it: [{source, op, value}], in recipe order."""
    rp = recipe_path(run)
    if rp is None:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for name, src in Recipe.load(rp).sources.items():
        for sel in src.select:
            if sel.op in (">=", ">", "<=", "<") and isinstance(sel.value, int | float):
                out.setdefault(sel.column, []).append(
                    {"source": name, "op": sel.op, "value": float(sel.value)}
                )
    return out


def dup_clusters(run: Path, stats: dict[str, Any] | None) -> dict[str, Any]:
    """Size histogram of near-duplicate clusters: one kept document per cluster carries its size."""
    docs = run / "dedup" / "docs"
    sizes = _parquet_column_counts(docs, "dup_cluster_size") if docs.is_dir() else Counter()
    counters = {k: v for k, v in (stats or {}).get("counters", {}).items()}
    return {"kept_docs_by_cluster_size": {str(k): sizes[k] for k in sorted(sizes)}, "counters": counters}


def recipe_path(run: Path) -> Path | None:
    """`run/recipe.yaml` (the demo driver writes it for a non-default --out); mixtures/demo.yaml for out/demo."""
    own = run / "recipe.yaml"
    if own.exists():
        return own
    root = Path(__file__).resolve().parents[1]  # the project root (report/ sits in it)
    if run.resolve() == (root / "out" / "demo").resolve():
        return root / "mixtures" / "demo.yaml"
    return None


def tokens(run: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"manifests": {}, "plan": {}}
    rp = recipe_path(run)
    names = None
    if rp is not None:
        names = set(Recipe.load(rp).sources)  # shards of sources the recipe no longer has are not shown
    for m in sorted((run / "tokens" / "shards").glob("*/manifest.json")):
        try:  # the checked reader: a manifest is data (tokens/manifest.py)
            man = read_manifest_file(m).model_dump()
        except ManifestError as e:  # one bad source is named, the others still shown
            out.setdefault("refused_manifests", []).append(str(e))
            continue
        source = man.get("source") if isinstance(man.get("source"), str) else m.parent.name
        if names is not None and source not in names:
            continue
        out["manifests"][source] = {
            "tokens": man["tokens"],
            "documents": man["documents"],
            "select": man.get("select", {}),
            "languages": man.get("languages", {}),  # absent in manifests made before it was counted
        }
    out["bytes_per_token"] = bytes_per_token([m.get("languages", {}) for m in out["manifests"].values()])
    if rp is not None and out["manifests"]:
        plan = make_plan(Recipe.load(rp))
        out["recipe"] = str(rp)
        out["plan"] = {name: dict(sp.drawn) for name, sp in plan.sources.items()}
        out["plan_warnings"] = list(plan.warnings)
    return out


def bytes_per_token(per_source: list[dict[str, dict[str, int]]]) -> list[dict[str, Any]]:
    """Per language over all sources: documents, UTF-8 bytes, tokens (EOD not counted) and bytes per
    token, most tokens first: how well the tokenizer compresses each language's text."""
    total: dict[str, Counter] = {}
    for langs in per_source:
        for lang, c in langs.items():
            total.setdefault(lang, Counter()).update({k: int(c[k]) for k in ("documents", "bytes", "tokens")})
    return [
        {
            "lang": lang,
            **dict(c),
            "bytes_per_token": c["bytes"] / c["tokens"] if c["tokens"] else None,
        }
        for lang, c in sorted(total.items(), key=lambda kv: (-kv[1]["tokens"], kv[0]))
    ]


def quality_thresholds(run: Path) -> list[float]:
    """Lower bounds the recipe puts on `quality` (drawn as lines on the histogram)."""
    rp = recipe_path(run)
    if rp is None:
        return []
    found = set()
    for src in Recipe.load(rp).sources.values():
        for sel in src.select:
            if sel.column == "quality" and sel.op in (">=", ">"):
                found.add(float(sel.value))
    return sorted(found)


def training(run: Path) -> dict[str, Any]:
    log = MetricsLog.read(run / "train")
    if not log.records:
        return {}
    ordered = log.steps()  # a resumed run rewrites steps after its checkpoint: the last record of each
    end = log.last("end")
    # held-out loss per source, by step
    evals = {r["step"]: {src: v["loss"] for src, v in r["eval"].items()} for r in log.events("eval")}
    # Tokens actually trained per phase and source: the trainer's cumulative per-source counts at the
    # last step of each phase, minus those at the end of the phase before.
    by_phase: dict[str, dict[str, int]] = {}
    prev: dict[str, int] = {}
    for i, r in enumerate(ordered):
        last_of_phase = i + 1 == len(ordered) or ordered[i + 1].get("phase") != r.get("phase")
        if last_of_phase and "per_source_tokens" in r:
            cur = r["per_source_tokens"]
            by_phase[str(r.get("phase"))] = {
                k: v - prev.get(k, 0) for k, v in cur.items() if v - prev.get(k, 0)
            }
            prev = cur
    return {
        "trained_tokens_by_phase": by_phase,
        "eval": {
            src: {"step": sorted(evals), "loss": [evals[k].get(src) for k in sorted(evals)]}
            for src in dict.fromkeys(s for e in evals.values() for s in e)
        },
        "step": [r["step"] for r in ordered],
        "loss": [r["loss"] for r in ordered],
        "tokens_per_s": [r["tokens_per_s"] for r in ordered],
        "phase": [r.get("phase") for r in ordered],
        "tokens": [r.get("tokens") for r in ordered],
        "end": end,
    }


def collect(run: str | Path) -> dict[str, Any]:
    run = Path(run)
    if not run.is_dir():
        raise ReportError(f"{run}: not a folder")
    ex, dd, sc = (_json(run / n / "stats.json") for n in ("extract", "dedup", "scored"))
    if ex is None and dd is None and sc is None:
        raise ReportError(f"{run}: no extract/, dedup/ or scored/ stats.json — is this a demo output folder?")
    return {
        "run": str(run),
        "funnel": funnel(ex, "extract") + funnel(dd, "dedup"),
        "extract_counters": (ex or {}).get("counters", {}),
        "languages": languages(run),
        "quality": quality(sc, run),
        "quality_thresholds": quality_thresholds(run),
        "scores": scores(run),
        "dup_clusters": dup_clusters(run, dd),
        "tokens": tokens(run),
        "training": training(run),
        "timings": _json(run / "timings.json") or {},
    }


def collect_ablation(folder: str | Path) -> dict[str, Any]:
    """ablation.json of `python -m workflows ablate` (workflows/ablate.py), as it is."""
    data = _json(Path(folder) / "ablation.json")
    if data is None:
        raise ReportError(
            f"{folder}: no ablation.json — is this a `python -m workflows ablate` output folder?"
        )
    return data
