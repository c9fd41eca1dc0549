"""Histogram bins that stay finite for any column of floats: the one binning rule of report and browser.

A score column is data: a scorer can write NaN, ±inf or values near the float limit (±1e308). Bins
taken as `np.linspace(lo, hi, n + 1)` then break in three ways, each seen in a run (issue 54):

- `hi - lo` overflows to inf when the column spans more than the float range (-1e308 … 1e308), so
  every edge but the ends is NaN and the page's JSON (`allow_nan=False`) refuses to be written;
- a column holding one inf has an infinite min or max, so it had no histogram at all;
- NaN is neither in nor out of a range: numpy drops it from a histogram without a word, and a
  quantile over it is NaN (report.json then holds `NaN`, which is not JSON).

So non-finite values are counted apart (`nonfinite`), never binned, and left out of quantiles; the
edges are a convex combination of the two ends (`lo·(1-t) + hi·t`, each term no larger than an end,
so nothing overflows), and a column of one value gets a small range around it that stays finite.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["bin_edges", "bin_index", "finite_values", "quantiles"]


def finite_values(values: Iterable[Any]) -> tuple[np.ndarray, int, int]:
    """(the finite values as float64, how many were NaN or ±inf, how many were null) of `values`
    (a list from Arrow: None for a null)."""
    vals = list(values)
    x = np.array([np.nan if v is None else v for v in vals], dtype=np.float64)
    nulls = sum(v is None for v in vals)
    ok = np.isfinite(x)
    return x[ok], int(x.size - ok.sum()) - nulls, nulls


def bin_edges(lo: float, hi: float, bins: int) -> np.ndarray:
    """`bins + 1` finite, non-decreasing edges from `lo` to `hi` (finite numbers, lo <= hi); a
    range of one value is widened around it (by 1e-9 of its size, at least 1e-9) within the floats."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"bin_edges needs finite lo <= hi, got {lo!r}, {hi!r}")
    if hi == lo:
        d = max(abs(lo) * 1e-9, 1e-9)
        # near the float limit the range opens towards zero only (lo ± d would be inf)
        lo, hi = (lo - d, hi + d) if abs(lo) < 1e300 else ((lo - 2 * d, lo) if lo > 0 else (lo, lo + 2 * d))
    t = np.linspace(0.0, 1.0, bins + 1)
    with np.errstate(over="ignore"):  # a sum can round one ulp past the float limit: clipped below
        edges = lo * (1.0 - t) + hi * t
    edges = np.clip(edges, lo, hi)
    edges[0], edges[-1] = lo, hi
    return np.maximum.accumulate(edges)


def bin_index(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The bin of each finite value of `x` (0 … len(edges) - 2; the ends count in the end bins)."""
    return np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)


def quantiles(x: np.ndarray, ps: Iterable[float]) -> dict[str, float]:
    """`{str(p): quantile}` of finite values `x` (empty without any); never NaN or inf."""
    out: dict[str, float] = {}
    for p in ps if x.size else ():
        with np.errstate(over="ignore", invalid="ignore"):
            v = float(np.quantile(x, p))
        if not math.isfinite(v):  # interpolating between values near ±1e308 overflowed: the nearer one
            v = float(np.quantile(x, p, method="nearest"))
        out[str(p)] = v
    return out
