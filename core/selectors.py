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

Percentiles: `quality: "top 30%"` keeps the 30% of documents with the highest `quality`, `"bottom 10%"`
the 10% with the lowest (DCLM keeps its fastText score's "top 10%"). A percentile is not a test a row
can pass alone: it is resolved per source on the driver, before any selection, by
`resolve_percentiles`, into the plain comparison it stands for (`">= t"` / `"<= t"`), so executors
(selection_mask) only ever see plain selectors and refuse an unresolved one. How the threshold t is
chosen (ties, nulls, NaN, other selectors) is said there. A percentile stands alone on its column (no
`and`), ranks numbers only, and its share is in (0, 100]: `"top 0%"`, `"top 120%"`, `"top x%"` are
refused when parsed, naming the column.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from core.errors import ConfigError

OPS = (">=", "<=", "==", "!=", ">", "<")
# OPS as the regex's alternatives, in its order: a two-character operator is tried before its prefix.
_CMP = re.compile(r"^\s*(" + "|".join(OPS) + r")\s*([^<>=!\s].*?)\s*$")
PERCENTILE_OPS = ("top", "bottom")
# `top 30%`, `bottom 12.5%`; `top 30` (no %) is caught too, to be refused rather than read as a word.
_PCT = re.compile(r"^\s*(top|bottom)\s+(\S.*?)\s*(%?)\s*$", re.IGNORECASE)


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
        if self.is_percentile:
            return f"{self.column} {self.to_spec()}"
        return f"{self.column} {self.op} {self.value!r}"

    def to_spec(self) -> Any:
        """The canonical YAML/JSON form (what a manifest records)."""
        if self.op == "in":
            return list(self.value)
        if self.is_percentile:
            return f"{self.op} {self.value}%"
        if self.op == "==":
            return self.value  # None stays None: YAML's null
        return f"{self.op} {self.value}"

    @property
    def accepts_null(self) -> bool:
        """The selector names null (`column: null`, or a list holding null): null rows pass it."""
        return (self.op == "==" and self.value is None) or (self.op == "in" and None in self.value)

    @property
    def is_percentile(self) -> bool:
        """`top P%` / `bottom P%` (`value` is P): resolved to a comparison by `resolve_percentiles`."""
        return self.op in PERCENTILE_OPS


def parse_selector(column: str, spec: Any) -> Selector:
    """One `column: spec` entry of a recipe's `select` mapping; a `lang` selector's codes are checked
    here, on load, so `lang: english` fails before any job rather than selecting nothing."""
    sel = _parse_selector(column, spec)
    from core.languages import LanguageCodeError

    try:
        _language_selector(sel)
    except LanguageCodeError as e:
        raise SelectorError(f"select.{column}: {e}") from None
    return sel


def _parse_selector(column: str, spec: Any) -> Selector:
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
        pct = _parse_percentile(column, spec)
        if pct is not None:
            return pct
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


def _parse_percentile(column: str, spec: str) -> Selector | None:
    """`top P%` / `bottom P%` with 0 < P <= 100, or None where `spec` is no percentile (`top rated` is a
    word). What is one by a `%` or a number (`top x%`, `top %`, `top 120%`, `top 30`) but malformed is refused."""
    m = _PCT.match(spec)
    if m is None:
        return None
    side, value, percent_sign = m.group(1).lower(), _scalar(m.group(2)), m.group(3)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if "%" not in spec and not number:
        return None
    if not (percent_sign and number and 0 < value <= 100):  # NaN fails the range test too
        raise SelectorError(
            f"select.{column}: {spec!r} is not a percentile; write '{side} P%' with P a number in (0, 100], "
            f"e.g. '{side} 30%'"
        )
    return Selector(column, side, value)


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
            if len(parts) > 1 and any(_parse_percentile(column, p) for p in parts):
                raise SelectorError(
                    f"select.{column}: {cond!r}: a percentile stands alone on its column (it is resolved "
                    "to one comparison); put other conditions on other columns"
                )
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


LANG_COLUMN = "lang"
"""The column whose string values are language codes, compared as languages, not as strings."""


def _language_selector(sel: Selector) -> Any:
    """The LanguageSet of a `lang` selector that compares codes (`==`, `!=`, `in`), else None."""
    if sel.column != LANG_COLUMN or sel.op not in ("==", "!=", "in"):
        return None
    values = [v for v in sel.value if v is not None] if sel.op == "in" else [sel.value]
    if not values or not all(isinstance(v, str) for v in values):
        return None
    from core.languages import LanguageSet

    return LanguageSet(values)


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
    if any(s.is_percentile for s in sels):
        return None  # it keeps at least one row of any source with a value to rank (or is refused then)
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
        if sel.is_percentile:
            raise SelectorError(
                f"{source}: selector `{sel}` is a percentile, which is resolved per source on the driver "
                "(core.selectors.resolve_percentiles) before any selection; it reached selection unresolved"
            )
        if sel.column not in table.column_names:
            raise SelectorError(
                f"{source}: selector `{sel}` needs column {sel.column!r}, which is not there; "
                f"columns: {', '.join(table.column_names)}"
            )
        col = table.column(sel.column)
        try:
            values = [v for v in sel.value if v is not None] if sel.op == "in" else None
            langs = _language_selector(sel)
            if langs is not None:
                # `lang: en` keeps `eng_Latn` (and an older output's `en`): the codes are matched as
                # languages (core/languages.py), over the column's few distinct values
                hits = pa.array(langs.matching(pc.unique(col).to_pylist()), type=col.type)
                test = pc.is_in(col, value_set=hits)
                if sel.op == "!=":  # a null row is no language: dropped as `null:lang`, as `!=` does
                    test = pc.and_(pc.invert(test), pc.is_valid(col))
                elif sel.accepts_null:
                    test = pc.or_(pc.fill_null(test, False), pc.is_null(col))
            elif sel.accepts_null and not values:  # `column: null` (or a list of null alone)
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


# -- percentiles, resolved on the driver ----------------------------------------------------------


def resolve_percentiles(
    selectors: tuple[Selector, ...], files: list[str], source: str = "<source>"
) -> tuple[tuple[Selector, ...], dict[str, dict[str, Any]]]:
    """`selectors` with each percentile replaced by the plain comparison it stands for on `files` (one
    source's documents, local paths or `s3://` URIs), and what each resolution counted, by column.

    Only the selectors' columns are read (Parquet column projection; from an object store by ranged
    reads of those column chunks). The ranked values are those of the rows that pass every *plain*
    selector of the source: `{lang: en, quality: "top 30%"}` keeps 30% of the English documents, as
    DCLM's "top 10%" is a share of the pool that reached the classifier, and datatrove's filters each
    see what the previous ones kept; a share of all documents would keep an unpredictable share of
    the English ones (none, if the top 30% were all another language). Two percentiles are each
    ranked over those rows, independently of one another, so their order in the recipe never matters.

    Threshold: with n ranked values (null and NaN rows are not ranked: null rows are then dropped
    and counted as `null:<column>`, NaN rows fail every comparison) and share p, k = ceil(p * n) exactly
    (the smallest count that is at least the share; p is read as an exact decimal, so 30% of 10 is 3),
    and t is the k-th highest value (`top`, resolved to `>= t`) or the k-th lowest (`bottom`, `<= t`).
    Every row whose value equals t is selected: ties at the threshold are kept, never broken by row
    order (which would make the selection depend on file order), so `selected` = k + `ties`, and the
    share selected exceeds p by ties / n. The result depends on the values alone: the same data
    resolves the same t. Exact, so the ranked values are held on the driver (8 bytes a row).
    SelectorError when a percentile's column is missing, not numeric, or has no value to rank.
    """
    pcts = [s for s in selectors if s.is_percentile]
    if not pcts:
        return selectors, {}
    plain = tuple(s for s in selectors if not s.is_percentile)
    values, counts = _ranked_values(plain, pcts, files, source)
    resolved: dict[str, Selector] = {}
    for sel in pcts:
        resolved[sel.column], info = percentile_threshold(sel, values[sel.column], source)
        counts[sel.column].update(info)
    return tuple(resolved.get(s.column, s) if s.is_percentile else s for s in selectors), counts


def percentile_threshold(sel: Selector, values: Any, source: str = "<source>") -> tuple[Selector, dict]:
    """The comparison `sel` (a percentile) resolves to on `values` (a numpy array without null or NaN),
    and its counts: ranked, target (k), selected, ties (resolve_percentiles says how)."""
    import numpy as np

    n = len(values)
    if n == 0:
        raise SelectorError(
            f"{source}: selector `{sel}`: no document has a {sel.column!r} value to rank (every row is "
            "null or NaN, or fails the source's other selectors)"
        )
    k = math.ceil(Fraction(str(sel.value)) * n / 100)
    if sel.op == "top":
        t = np.partition(values, n - k)[n - k]
        op, selected = ">=", int(np.count_nonzero(values >= t))
    else:
        t = np.partition(values, k - 1)[k - 1]
        op, selected = "<=", int(np.count_nonzero(values <= t))
    t = t.item()  # a Python int or float: its repr round-trips through a manifest exactly
    resolved = replace(sel, op=op, value=t)
    info = {"ranked": n, "target": k, "selected": selected, "ties": selected - k}
    return resolved, {"percentile": sel.to_spec(), "resolved": resolved.to_spec(), **info}


def _ranked_values(
    plain: tuple[Selector, ...], pcts: list[Selector], files: list[str], source: str
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Per percentile column: its non-null, non-NaN values on the rows passing `plain` (numpy), and counts."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = list(dict.fromkeys([*(s.column for s in plain), *(s.column for s in pcts)]))
    parts: dict[str, list[Any]] = {s.column: [] for s in pcts}
    counts = {s.column: {"rows": 0, "passing_other_selectors": 0, "null": 0, "nan": 0} for s in pcts}
    for f in files:
        table = read_columns(f, columns)
        mask, _ = selection_mask(table, plain, source=str(f))
        eligible = table.filter(mask)
        for sel in pcts:
            if sel.column not in table.column_names:
                raise SelectorError(
                    f"{f}: selector `{sel}` needs column {sel.column!r}, which is not there; "
                    f"columns: {', '.join(table.column_names)}"
                )
            col = eligible.column(sel.column)
            if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
                raise SelectorError(
                    f"{f}: selector `{sel}` ranks numbers; column {sel.column!r} is {col.type}"
                )
            vals = pc.drop_null(col).to_numpy()
            nan = np.isnan(vals) if vals.dtype.kind == "f" else np.zeros(len(vals), dtype=bool)
            c = counts[sel.column]
            c["rows"] += table.num_rows
            c["passing_other_selectors"] += eligible.num_rows
            c["null"] += col.null_count
            c["nan"] += int(nan.sum())
            parts[sel.column].append(vals[~nan])
    # kept in the column's own type: `.item()` of a float32 threshold widens to a Python float exactly
    return {c: np.concatenate(v) if v else np.zeros(0) for c, v in parts.items()}, counts


def read_columns(uri: str, columns: list[str]) -> Any:
    """The `columns` of one Parquet file that it has (a pyarrow Table), local or on an object store:
    only their column chunks are read (ranged reads on S3), never the `text`."""
    from core.files import open_parquet

    with open_parquet(uri) as pf:
        return pf.read(columns=[c for c in columns if c in pf.schema_arrow.names])
