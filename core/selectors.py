"""Document selectors: `column: condition` pairs from a recipe, applied to Parquet document tables.

Scores are columns and thresholds live in the recipe (dolma's "annotate, then mix"): a selector
never runs a model, it compares a column that an earlier stage wrote. Forms (YAML value -> test):

    lang: en                  equality (strings, numbers, booleans)
    lang: [en, de]            membership
    quality: ">= 0.6"         comparison: one of >=, <=, >, <, ==, != then a number or a word
    dup_cluster_size: "<= 1"
    drop_reason: null         the column is null (e.g. documents an annotate-mode extract kept)
    drop_stage: [null, x]     membership may list null: null rows are then selected
    perplexity: "> 30 and < 3000"   a band: comparisons joined by `and`, all must hold (both
                              tails of a score dropped, as the perplexity filter of the design does)

Any column works; a missing column is a `SelectorError` naming the column, the file and the
columns it does have. Rows whose column is null are not selected and are counted per selector
(`null:<column>`), never dropped silently, unless the selector itself names null.

A selection no row can pass (`"> 0.5 and < 0.2"`, `">= 0.7 and <= 0.3"`, `"== 1 and == 2"`,
`"== en and != en"`, `"> nan"`, `"> inf"`, `[]`) is refused when it is parsed, naming the column: it
is always a typo or a swapped bound, and run as written it would cost a whole job and then give 0
documents with exit status 0 (a warning would scroll by in the job's log; a refusal costs nothing and
says which bound to fix). The check is static and only refuses what is empty whatever the column
holds; where it cannot tell (values of different types, `> 1 and < 2` on what may be integers) it
lets the selection run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from core.errors import ConfigError

OPS = (">=", "<=", "==", "!=", ">", "<")
# OPS as the regex's alternatives, in its order: a two-character operator is tried before its prefix.
_CMP = re.compile(r"^\s*(" + "|".join(OPS) + r")\s*([^<>=!\s].*?)\s*$")


class SelectorError(ConfigError):
    """A selector cannot be parsed or applied; the message names the column and what is allowed."""


@dataclass(frozen=True, slots=True)
class Selector:
    """One `column: condition` of a recipe's `select`, parsed (the forms in the module docstring)."""

    column: str
    op: str
    """One of OPS, or 'in' for membership."""
    value: Any

    def __str__(self) -> str:
        if self.op == "in":
            return f"{self.column} in {list(self.value)}"
        return f"{self.column} {self.op} {self.value!r}"

    def to_spec(self) -> Any:
        """The canonical YAML/JSON form (what a manifest records)."""
        if self.op == "in":
            return list(self.value)
        if self.op == "==":
            return self.value  # None stays None: YAML's null
        return f"{self.op} {self.value}"

    @property
    def accepts_null(self) -> bool:
        """The selector names null (`column: null`, or a list holding null): null rows pass it."""
        return (self.op == "==" and self.value is None) or (self.op == "in" and None in self.value)


def parse_selector(column: str, spec: Any) -> Selector:
    """One `column: spec` entry of a recipe's `select` mapping."""
    if not isinstance(column, str) or not column:
        raise SelectorError(f"selector column must be a non-empty string, got {column!r}")
    if isinstance(spec, list):
        if not spec:
            raise SelectorError(
                f"select.{column}: an empty list selects no document; list the values to keep"
            )
        if not all(v is None or isinstance(v, str | int | float | bool) for v in spec):
            raise SelectorError(f"select.{column}: a list must hold strings, numbers or null, got {spec!r}")
        return Selector(column, "in", tuple(spec))
    if spec is None or isinstance(spec, bool | int | float):
        return Selector(column, "==", spec)
    if isinstance(spec, str):
        m = _CMP.match(spec)
        if not m:
            # A plain word is equality (`lang: en`).
            if any(spec.lstrip().startswith(c) for c in "<>=!"):
                raise SelectorError(
                    f"select.{column}: cannot parse {spec!r}; allowed: a value, a list, or "
                    f"'<op> <value>' with op one of {', '.join(OPS)}"
                )
            return Selector(column, "==", spec)
        op, raw = m.groups()
        return Selector(column, op, _scalar(raw))
    raise SelectorError(
        f"select.{column}: {spec!r} is not a value, a list or a comparison string like '>= 0.6'"
    )


AND_SEPARATOR = re.compile(r"\s+and\s+", re.IGNORECASE)


def parse_selectors(spec: Any, where: str = "select") -> tuple[Selector, ...]:
    if spec is None:
        return ()
    if not isinstance(spec, dict):
        raise SelectorError(f"{where} must be a mapping of column: condition, got {spec!r}")
    out: list[Selector] = []
    try:
        for column, cond in spec.items():
            parts = AND_SEPARATOR.split(cond.strip()) if isinstance(cond, str) else [cond]
            if len(parts) > 1 and not all(_CMP.match(p) for p in parts):
                # `lang: "en and de"` is not a band: only comparisons join with `and`
                raise SelectorError(
                    f"select.{column}: {cond!r}: only comparisons join with 'and', e.g. '> 30 and < 3000'"
                )
            sels = [parse_selector(column, p) for p in parts]
            why = empty_reason(sels)
            if why is not None:
                raise SelectorError(f"select.{column}: {cond!r} selects no document: {why}")
            out += sels
    except SelectorError as e:
        raise SelectorError(f"{where}: {e}") from None
    return tuple(out)


def _kind(v: Any) -> str:
    """Values only compare within a kind: a column holds one type, and Arrow refuses a mixed comparison."""
    return "bool" if isinstance(v, bool) else "num" if isinstance(v, int | float) else type(v).__name__


def _holds(v: Any, sel: Selector) -> bool:
    """`sel` on a non-null value `v` of its own kind, as selection_mask's Arrow kernels compute it (IEEE:
    every comparison with NaN is false but !=)."""
    if sel.op == "in":
        return v in sel.value
    return {
        "==": v == sel.value,
        "!=": v != sel.value,
        ">": v > sel.value,
        ">=": v >= sel.value,
        "<": v < sel.value,
        "<=": v <= sel.value,
    }[sel.op]


def empty_reason(sels: list[Selector] | tuple[Selector, ...]) -> str | None:
    """Why no row can pass all of `sels` (the conditions on one column, joined by `and`), or None when
    some row can or this cannot tell.

    A null row passes only selectors naming null; a non-null value v passes when every condition holds
    for it. Equalities and lists leave a finite set of candidates, each tried; otherwise the comparisons
    bound an interval (numbers within [-inf, inf]) that is empty when its bounds cross, or meet with a
    strict bound or an excluded value. Only conditions of one kind of value are reasoned about.
    """
    if not sels or all(s.accepts_null for s in sels):
        return None  # the null rows pass (or nothing is asked)
    conds = [s for s in sels if not (s.op == "==" and s.value is None)]
    if len(conds) < len(sels):
        return "null and a value at once"  # `== null` with another condition: only null rows, refused by it
    values = [v for s in conds for v in (s.value if s.op == "in" else (s.value,)) if v is not None]
    if len({_kind(v) for v in values}) > 1:
        return None  # mixed kinds: selection_mask names the type error, if there is one
    if any(s.op not in ("!=", "in") and isinstance(s.value, float) and math.isnan(s.value) for s in conds):
        return "a comparison with NaN is never true"
    finite = [s for s in conds if s.op in ("==", "in")]
    if finite:
        candidates = {
            v for v in (finite[0].value if finite[0].op == "in" else (finite[0].value,)) if v is not None
        }
        if not any(all(_holds(v, s) for s in conds) for v in candidates):
            return "no value meets every condition"
        return None
    kind = _kind(values[0]) if values else None
    lo, lo_strict = (-math.inf, False) if kind == "num" else (None, False)
    hi, hi_strict = (math.inf, False) if kind == "num" else (None, False)
    for s in conds:
        if s.op in (">", ">=") and (lo is None or s.value > lo or (s.value == lo and s.op == ">")):
            lo, lo_strict = s.value, s.op == ">"
        elif s.op in ("<", "<=") and (hi is None or s.value < hi or (s.value == hi and s.op == "<")):
            hi, hi_strict = s.value, s.op == "<"
    if lo is None or hi is None:
        return None  # a one-sided range of strings is never empty
    if lo > hi or (lo == hi and (lo_strict or hi_strict)):
        rng = f"{'(' if lo_strict else '['}{lo!r}, {hi!r}{')' if hi_strict else ']'}"
        return f"the range {rng} is empty (a band is '> low and < high')"
    if lo == hi and any(s.op == "!=" and s.value == lo for s in conds):
        return f"the only value in range, {lo!r}, is excluded by != {lo!r}"
    return None


def selectors_spec(selectors: tuple[Selector, ...]) -> dict[str, Any]:
    """The canonical `column: condition` mapping of `selectors` (what manifests and fingerprints record);
    a band's comparisons are joined back with ` and `."""
    out: dict[str, Any] = {}
    for s in selectors:
        spec = s.to_spec()
        out[s.column] = f"{out[s.column]} and {spec}" if s.column in out else spec
    return out


def _scalar(raw: str) -> Any:
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    return raw.strip("'\"")


def selection_mask(table: Any, selectors: tuple[Selector, ...], source: str = "<table>") -> tuple[Any, dict]:
    """Boolean mask (pyarrow) of the rows every selector keeps, and drop counts per reason.

    Reasons: `null:<column>` (the column is null on that row), `select:<selector>` (the test fails).
    Rows are attributed to the first selector that drops them, so counts add up to the drops.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    keep = pa.array([True] * table.num_rows, type=pa.bool_())
    drops: dict[str, int] = {}
    for sel in selectors:
        if sel.column not in table.column_names:
            raise SelectorError(
                f"{source}: selector `{sel}` needs column {sel.column!r}, which is not there; "
                f"columns: {', '.join(table.column_names)}"
            )
        col = table.column(sel.column)
        try:
            values = [v for v in sel.value if v is not None] if sel.op == "in" else None
            if sel.accepts_null and not values:  # `column: null` (or a list of null alone)
                test = pc.is_null(col)
            elif sel.op == "in":
                test = pc.is_in(col, value_set=pa.array(values))
                if sel.accepts_null:
                    test = pc.or_(pc.fill_null(test, False), pc.is_null(col))
            else:
                fn = {
                    ">=": pc.greater_equal,
                    "<=": pc.less_equal,
                    ">": pc.greater,
                    "<": pc.less,
                    "==": pc.equal,
                    "!=": pc.not_equal,
                }[sel.op]
                test = fn(col, pa.scalar(sel.value))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError) as e:
            raise SelectorError(
                f"{source}: selector `{sel}` cannot compare column {sel.column!r} of type {col.type}: {e}"
            ) from None
        # a selector that names null selects null rows: they are not counted as `null:<column>`
        is_null = pc.is_null(col) if not sel.accepts_null else pa.array([False] * len(col), pa.bool_())
        null_now = pc.sum(pc.and_(keep, is_null)).as_py() or 0
        passed = pc.fill_null(test, False)
        fail_now = pc.sum(pc.and_(pc.and_(keep, pc.invert(is_null)), pc.invert(passed))).as_py() or 0
        if null_now:
            drops[f"null:{sel.column}"] = drops.get(f"null:{sel.column}", 0) + null_now
        if fail_now:
            drops[f"select:{sel}"] = drops.get(f"select:{sel}", 0) + fail_now
        keep = pc.and_(keep, passed)
        if isinstance(keep, pa.ChunkedArray):
            keep = keep.combine_chunks()
    return keep, drops
