"""Quality buckets (`quality-buckets`): Nemotron-CC's way of combining several quality scores (issue 28).

Nemotron-CC (Su et al. 2024, "Nemotron-CC: Transforming Common Crawl into a Refined Long-Horizon
Pretraining Dataset", section 2.2) scores every document with three classifiers whose scales do not
compare, so it ranks each classifier's scores over the corpus, cuts each ranking into 20 buckets of equal
size (percentiles: bucket 19 holds the top 5%), and gives a document the highest bucket any classifier puts
it in. Recipes then select on the integer (`quality_bucket: ">= 17"`), or on groups of buckets per phase.

Two halves, so that a document's bucket never depends on which other documents share its Spark task:

- `classifiers calibrate-buckets --input SCORED --column quality --column perplexity_bpb:lower` reads the
  score columns of a scored output (Parquet, local or `s3://`: only those columns are read), and writes a
  folder with `buckets.json` (per column: its direction and the n-1 cut points, the k/n quantiles of its
  non-null values) and `metadata.json` (its sha256, the documents counted per column, the input files);
- the scorer `--scorer quality-buckets=DIR` reads those columns from the documents (the input Parquet, or
  an earlier scorer of the same job) and writes `quality_bucket` in [0, n-1]: for each column, the number
  of its cut points the score is above (below, for `:lower` columns such as `perplexity_bpb`), then the
  largest of them. A document null in one column is bucketed by the others; null in all, it stays null.

Cut points from one corpus applied to another keep their meaning (the same score, the same bucket), but
the buckets' shares drift: calibrate on a sample of the data the recipe selects from.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from classifiers.data import DataError
from classifiers.model import ModelError, parse_model_json, read_folder_json, read_model_bytes
from classifiers.scorer import Scorer
from classifiers.train import check_new_folder, new_folder
from core.errors import ConfigError
from core.files import open_parquet

FORMAT = "refinery-quality-buckets-1"
BUCKETS_FILE = "buckets.json"
METADATA_FILE = "metadata.json"
COLUMN = "quality_bucket"
TRAINER = "python -m classifiers calibrate-buckets"
MAX_BUCKETS = 1000  # a bucket holds >= 0.1% of the corpus: finer ranks are what percentile selectors are for
MAX_COLUMNS = 64  # score columns combined; Nemotron-CC combines 3
# buckets.json at its largest: MAX_COLUMNS x (MAX_BUCKETS - 1) cut points of ~25 characters, with room
MAX_MODEL_BYTES = 4 << 20


def parse_column(spec: str) -> tuple[str, bool]:
    """`name` (higher is better) or `name:lower` (lower is better) -> (name, higher_is_better)."""
    name, _, direction = spec.partition(":")
    if not name or direction not in ("", "lower", "higher"):
        raise ConfigError(
            f"--column {spec!r}: expected NAME, NAME:higher or NAME:lower (e.g. perplexity_bpb:lower)"
        )
    return name, direction != "lower"


def cut_points(values: np.ndarray, n_buckets: int) -> list[float]:
    """The n-1 cut points between n equal-count buckets of `values` (higher is better), ascending."""
    qs = np.arange(1, n_buckets) / n_buckets
    return [float(x) for x in np.quantile(values, qs, method="linear")]


def bucket_of(values: np.ndarray, cuts: Sequence[float], higher_is_better: bool) -> np.ndarray:
    """Each value's bucket: how many cut points it is above (strictly; below for lower-is-better), so
    that a value equal to a cut point goes to the lower bucket either way. NaN stays NaN."""
    cuts_a = np.asarray(cuts, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if higher_is_better:
        b = np.searchsorted(cuts_a, v, side="left").astype(np.float64)
    else:  # k cut points strictly above v: the bucket of -v against the negated, re-sorted cuts
        b = (len(cuts_a) - np.searchsorted(cuts_a, v, side="right")).astype(np.float64)
    b[~np.isfinite(v)] = np.nan
    return b


def _read_columns(files: Sequence[str | Path], names: Sequence[str]) -> dict[str, np.ndarray]:
    got: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for f in files:
        with open_parquet(f) as pf:
            have = set(pf.schema_arrow.names)
            missing = [n for n in names if n not in have]
            if missing:
                raise DataError(
                    f"{f}: no column {', '.join(missing)} (score the documents with that scorer first)"
                )
            table = pf.read(columns=list(names))
        for n in names:
            got[n].append(table.column(n).to_numpy(zero_copy_only=False).astype(np.float64))
    return {n: np.concatenate(v) if v else np.empty(0) for n, v in got.items()}


def calibrate_buckets(
    input_dir: str | Path, columns: Sequence[str], output: str | Path, n_buckets: int = 20
) -> dict[str, Any]:
    """Cut points of `n_buckets` equal-count buckets per score column of a scored output; writes the
    model folder and returns its metadata."""
    from classifiers.score import list_inputs

    if not 2 <= n_buckets <= MAX_BUCKETS:
        raise ConfigError(f"--buckets must be in [2, {MAX_BUCKETS}], got {n_buckets}")
    parsed = [parse_column(c) for c in columns]
    names = [n for n, _ in parsed]
    if not names or len(set(names)) != len(names):
        raise ConfigError(f"--column: give each score column once, got {list(columns)}")
    if len(names) > MAX_COLUMNS:
        raise ConfigError(f"--column: at most {MAX_COLUMNS} score columns, got {len(names)}")
    out = check_new_folder(output)
    t0 = time.perf_counter()
    _, files = list_inputs(input_dir)
    values = _read_columns(files, names)
    spec, counts = [], {}
    for name, higher in parsed:
        v = values[name]
        v = v[np.isfinite(v)]
        if len(v) < n_buckets:
            raise DataError(f"column {name}: {len(v)} non-null scores, fewer than the {n_buckets} buckets")
        counts[name] = len(v)
        spec.append({"name": name, "higher_is_better": higher, "cuts": cut_points(v, n_buckets)})
    raw = json.dumps({"format": FORMAT, "buckets": n_buckets, "columns": spec}, indent=1).encode()
    meta = {
        "format": FORMAT,
        "model_sha256": hashlib.sha256(raw).hexdigest(),
        "buckets": n_buckets,
        "columns": [c["name"] for c in spec],
        "documents": counts,
        "input": {"path": str(input_dir), "files": [str(f) for f in files]},
        "seconds": round(time.perf_counter() - t0, 3),
    }
    with new_folder(out) as tmp:
        (tmp / BUCKETS_FILE).write_bytes(raw)
        (tmp / METADATA_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return meta


def read_buckets(model_dir: str | Path) -> tuple[dict[str, Any], str]:
    """(buckets.json of a calibrated folder, its sha256), after every check; ModelError if one fails."""
    d, meta = read_folder_json(
        model_dir, "a buckets folder", (BUCKETS_FILE, METADATA_FILE), f"calibrate one with {TRAINER}"
    )
    if (
        not isinstance(meta, dict)
        or meta.get("format") != FORMAT
        or not isinstance(meta.get("model_sha256"), str)
    ):
        raise ModelError(f"{d / METADATA_FILE}: not the metadata of a buckets folder ({TRAINER})")
    path = d / BUCKETS_FILE
    raw = read_model_bytes(path, MAX_MODEL_BYTES)
    if hashlib.sha256(raw).hexdigest() != meta["model_sha256"]:
        raise ModelError(f"{path} does not match the model_sha256 of its metadata.json")
    return check_buckets(parse_model_json(raw, path, MAX_MODEL_BYTES), str(path)), meta["model_sha256"]


def check_buckets(obj: Any, where: str) -> dict[str, Any]:
    """The model of a parsed buckets.json (`buckets`, `columns` as (name, higher_is_better, cuts));
    ModelError naming `where` and the key unless every field is what calibrate_buckets writes.

    Its hash only proves the file is the one its metadata.json names, not that calibrate wrote it:
    a NaN cut point compares false with every score (every document fell in bucket 0), a bucket
    count outside [2, MAX_BUCKETS] is one calibrate refuses, so both are refused here too. The
    numbers are finite and bounded already (core/safe_json.py, through parse_model_json)."""

    def bad(key: str, msg: str) -> ModelError:
        return ModelError(f"{where}: {key}: {msg} (not written by {TRAINER}?)")

    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise bad("format", f"is not {FORMAT}")
    n = obj.get("buckets")
    if type(n) is not int or not 2 <= n <= MAX_BUCKETS:
        raise bad("buckets", f"must be an integer in [2, {MAX_BUCKETS}], got {repr(n)[:40]}")
    columns = obj.get("columns")
    if not isinstance(columns, list) or not 0 < len(columns) <= MAX_COLUMNS:
        raise bad("columns", f"must be a list of 1 to {MAX_COLUMNS} columns")
    cols: list[tuple[str, bool, list[float]]] = []
    for i, c in enumerate(columns):
        key = f"columns[{i}]"
        if not isinstance(c, dict):
            raise bad(key, "must be an object with name, higher_is_better and cuts")
        name, higher, cuts = c.get("name"), c.get("higher_is_better"), c.get("cuts")
        if not isinstance(name, str) or not name or name in {seen for seen, _, _ in cols}:
            raise bad(f"{key}.name", "must be a non-empty column name, each column once")
        if not isinstance(higher, bool):  # bool("false") is True: a string would flip the direction
            raise bad(f"{key}.higher_is_better", f"must be true or false, got {repr(higher)[:40]}")
        if not isinstance(cuts, list) or len(cuts) != n - 1:
            raise bad(f"{key}.cuts", f"must be a list of {n - 1} cut points (buckets - 1)")
        for j, x in enumerate(cuts):
            if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
                raise bad(f"{key}.cuts[{j}]", f"must be a finite number, got {repr(x)[:40]}")
            # ascending, not strictly: tied scores (a discrete column) give equal quantiles, and the
            # buckets between equal cuts are simply empty (bucket_of counts cuts strictly below)
            if j and x < cuts[j - 1]:
                raise bad(f"{key}.cuts[{j}]", f"{x!r} is below the cut point before it ({cuts[j - 1]!r})")
        cols.append((name, higher, [float(x) for x in cuts]))
    return {"buckets": n, "columns": cols}


class BucketScorer(Scorer):
    """The `quality_bucket` column: the highest bucket any of its score columns puts a document in."""

    kind = "quality-buckets"

    def __init__(self, model: Mapping[str, Any]) -> None:
        self.model = model

    @property
    def columns(self) -> tuple[str, ...]:
        return (COLUMN,)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(name for name, _, _ in self.model["columns"])

    def score(
        self, texts: list[str | None], langs: list[str | None], columns: Mapping[str, Any] | None = None
    ) -> dict[str, np.ndarray]:
        cols = self.input_columns(columns)
        per = np.stack([bucket_of(cols[n], cuts, hi) for n, hi, cuts in self.model["columns"]])
        best = np.full(len(texts), np.nan, dtype=np.float32)
        some = ~np.all(np.isnan(per), axis=0)
        best[some] = np.nanmax(per[:, some], axis=0)
        best[[t is None for t in texts]] = np.nan
        return {COLUMN: best}

    @classmethod
    def describe(cls, model: str, options: dict[str, Any]) -> dict[str, Any]:
        cls.refuse_options(options)
        m, sha = read_buckets(model)
        return {"model_sha256": sha, "buckets": m["buckets"], "inputs": [n for n, _, _ in m["columns"]]}

    @classmethod
    def load(cls, model: str, options: dict[str, Any]) -> BucketScorer:
        return cls(read_buckets(model)[0])
