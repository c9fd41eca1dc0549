"""The `classifiers evaluate --signal/--cv` report: one row per signal, its AUC and interval.

It joins the two halves that build on the labelled set: classifiers/evaluate.py (the signals,
fastText cross-validation, `measure`) and classifiers/ensemble.py (the quality ensemble, which
builds on evaluate.py for its features and its CV row). Living above both, it lets each of them
import only downward: evaluate.py used to import ensemble.py back, inside this function, a
two-file import circle (pyproject.toml's import-linter contract keeps it gone).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from classifiers.ensemble import cross_validated_ensemble
from classifiers.evaluate import (
    SignalSettings,
    SignalValues,
    cross_validated,
    measure,
    read_labelled,
    signal_values,
)
from classifiers.metrics import text_table
from core.errors import ConfigError


def evaluate_signals(
    labelled: str | Path, signals: list[str], settings: SignalSettings, cv: bool = False
) -> tuple[dict[str, Any], list[SignalValues]]:
    """(the report: one row per signal, the labelled set and the interval's method; the values)."""
    if not signals and not cv:
        raise ConfigError("evaluate: name at least one --signal (or --cv)")
    ls = read_labelled(labelled)
    values = signal_values(signals, ls, settings)
    scored = list(values)  # the ensemble's columns: never an out-of-fold score (its folds differ)
    if cv and "fasttext" in settings.cv.models:
        values.append(cross_validated(ls, settings.cv))
    if cv and "ensemble" in settings.cv.models:
        values.append(cross_validated_ensemble(ls, scored, settings))
    b = settings.bootstrap
    report = {
        "labelled": str(ls.path),
        "labelled_sha256": ls.sha256,
        "n": len(ls.texts),
        "n_pos": int(ls.labels.sum()),
        "n_neg": int(len(ls.labels) - ls.labels.sum()),
        "auc": "ROC-AUC of the oriented score (lower-is-better signals negated)",
        "ci": {"method": "percentile bootstrap, stratified by label", **b.to_dict()},
        "signals": [measure(v, ls.labels, b) for v in values],
    }
    return report, values


def signals_table(report: dict[str, Any]) -> str:
    """The report as text: what was measured, then signal, better, AUC, CI, n, source."""
    b = report["ci"]
    lines = [
        f"labelled: {report['labelled']} (n={report['n']}: {report['n_pos']} positive, {report['n_neg']} negative)",
        f"AUC: {report['auc']}; {b['confidence']:.0%} CI: {b['method']}, {b['resamples']} resamples, seed {b['seed']}",
    ]
    ci_head = f"{b['confidence']:.0%} CI"
    header = ["signal", "better", "AUC", ci_head, "n", "source"]
    body = []
    for r in report["signals"]:
        note = r.get("note") or ("IN-SAMPLE: the model was trained on this file" if r["in_sample"] else "")
        auc = "-" if r["auc"] is None else f"{r['auc']:.3f}"
        ci = "-" if r["ci"] is None else f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"
        source = r["source"] + (f"; {note}" if note else "")
        body.append([r["signal"], r["better"], auc, ci, str(r["n"]), source])
    return "\n".join([*lines, text_table(header, body, left={0, 1, 5})])
