"""LID thresholds measured with the model that runs (one job: the models/ tables). FineWeb-2's
thresholds are GlotLID v3 probabilities; `calibrate_lid` measures FineWeb-2's τ = clip(median - std,
0.3, 0.9) (`lid_threshold`) on reference text with our model (lid.176), and `write_model_thresholds`
writes the table `lid_threshold_for` (curation/languages/lookup.py) reads
(`python -m curation calibrate-lid`)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from core.config import build_config
from core.errors import ConfigError, InputError
from core.safe_yaml import load_yaml
from curation.languages.files import iter_lines, write_text_atomic
from curation.languages.lookup import _table
from curation.languages.schema import LID_CAP, LID_FLOOR, ModelThresholds

MIN_LID_LINES = 20
"""Fewer reference lines identified as the language make median - std meaningless."""


def lid_threshold(scores: Sequence[float]) -> float:
    """FineWeb-2's τ = clip(median(X) − σ(X), 0.3, 0.9) over the language's own LID scores X
    (σ: the population standard deviation)."""
    if len(scores) < MIN_LID_LINES:
        raise InputError(
            f"only {len(scores)} reference lines were identified as the language (need {MIN_LID_LINES})"
        )
    tau = statistics.median(scores) - statistics.pstdev(scores)
    return round(min(max(tau, LID_FLOOR), LID_CAP), 3)


def reference_lines(path: str | Path, max_lines: int) -> Iterator[str]:
    """The first `max_lines` non-empty lines of a calibration file, stripped, streamed (`iter_lines`)."""
    n = 0
    for _, line in iter_lines(path):
        if n >= max_lines:
            return
        if line := line.strip():
            n += 1
            yield line


def calibrate_lid(references: dict[str, Iterable[str]], lid: Any) -> dict[str, tuple[float, int]]:
    """Per language code, `lid_threshold` (clip(median - std, 0.3, 0.9)) of the probabilities the
    LID stage judges (the top label's, or its macrolanguage family's sum where higher: `_judge`) of the
    reference lines of `references` (gold code -> lines) whose predicted code is the gold language
    (any script, a macrolanguage's member included), grouped by the predicted code: Serbian lines give
    `srp_Cyrl` and `srp_Latn` apart. A code with fewer than MIN_LID_LINES such lines is left out.
    Returns code -> (threshold, lines measured)."""
    from core.languages import LanguageSet

    scores: dict[str, list[float]] = {}
    for gold, lines in references.items():
        want = LanguageSet([gold])
        for line in lines:
            top = lid.top_labels(line, 10)
            if not top or top[0][0] not in want:
                continue
            code, p = top[0]
            scores.setdefault(code, []).append(max(p, lid.family_score(code, line, top)))
    return {c: (lid_threshold(x), len(x)) for c, x in sorted(scores.items()) if len(x) >= MIN_LID_LINES}


def write_model_thresholds(
    table: dict[str, tuple[float, int]], scheme: str, source: str, out: str | Path, how: str
) -> Path:
    """Write `models/<scheme>.yaml`: the text is built and validated first (read back as the loader
    reads it: an empty table, a bad code or value is a ConfigError and nothing is written), then
    written through a temporary name. Each code's line says how many reference lines measured it."""
    import yaml

    out = Path(out)
    if not table:
        raise ConfigError("thresholds: no language (a table must measure at least one); nothing written")
    if out.name != f"{scheme}.yaml":
        raise InputError(f"--out must be named {scheme}.yaml (the model's label scheme)")
    lines = [
        f"# LID thresholds measured with the {scheme} model (curation/languages/lid_tables.py: calibrate_lid).",
        f"# {how}",
        "# A language is judged by min(its file's lid_threshold, this value): lid_threshold_for.",
        f"model: {scheme}",
        yaml.safe_dump({"source": source}, allow_unicode=True, width=1_000_000).rstrip("\n"),
        "thresholds:",
        *(f"  {code}: {t}  # {n} lines" for code, (t, n) in table.items()),
    ]
    text = "\n".join(lines) + "\n"
    check = build_config(ModelThresholds, load_yaml(text, str(out)), str(out))
    if check.model != scheme or check.thresholds != {c: t for c, (t, _) in table.items()}:
        raise ConfigError(f"{out}: the table does not read back as measured")  # a bug, never a user's
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, text)
    _table.cache_clear()
    return out
