"""`extract --where "SQL condition"`: a SQL boolean condition over index columns -> a pyarrow filter.

The condition is the WHERE clause a user would give Athena or Spark SQL over the cc-index table
(`content_languages = 'eng' AND url_host_tld IN ('uk', 'ie')`). It is parsed here, on the driver,
into one tree, so that every mistake in it (a syntax error, a column the index does not have, a
literal of the wrong type) is reported before Spark starts, naming the position. The tree then
becomes a `pyarrow.dataset` expression (parse_where: the driver's selection, which reads only the
columns the condition uses and skips row groups and partition folders whose statistics exclude it)
or a Spark Column (spark_where: the selection on Spark, curation/index/job.py) that selects the
same rows: both engines' AND/OR/NOT, comparisons, IN and LIKE follow SQL's three-valued logic.

The grammar is the part of SQL a WHERE clause over this table needs (keywords in any case):
    cond      := or
    or        := and (OR and)*
    and       := not (AND not)*
    not       := NOT not | predicate
    predicate := operand [ (= | == | != | <> | < | <= | > | >=) operand
                         | [NOT] IN (literal, ...) | [NOT] LIKE 'pattern'
                         | [NOT] BETWEEN operand AND operand | IS [NOT] NULL ]
    operand   := column | 'string' | number | TRUE | FALSE | ( cond )
Columns are bare names or "quoted"/`quoted`; strings use '' for a quote; in a LIKE pattern a
backslash escapes %, _ or a backslash and nothing else (pyarrow and Spark disagree on the rest). A literal compared with a
column is cast to the column's type (`fetch_time >= '2024-05-20'` reads as a UTC timestamp). NULL
compares as in SQL: a row where the condition is null is not selected. Functions (lower(), substr())
are not supported: the error says so.

Limits, so that a condition cannot exhaust the driver (a --where of 1,000 ORs or 5,000 nested
parentheses used to end in a RecursionError): at most MAX_LENGTH characters, MAX_TERMS predicates
and MAX_NESTING levels of parentheses and NOTs. A chain of ANDs or ORs becomes a balanced tree, so
its depth grows with the logarithm of its length, in both engines' expressions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from core.errors import InputError

__all__ = ["parse_where", "spark_where"]

_TOKEN_RE = re.compile(
    r"""\s*(?:
        (?P<str>'(?:[^']|'')*')
      | (?P<qid>"[^"]+"|`[^`]+`)
      | (?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
      | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,)
      | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "LIKE", "BETWEEN", "IS", "NULL", "TRUE", "FALSE"}

MAX_LENGTH = 1_000_000
"""Longest --where text, in characters."""
MAX_TERMS = 10_000
"""Most predicates (comparisons, IN, LIKE, ...) in one condition; an IN list counts once."""
MAX_NESTING = 64
"""Deepest nesting of parentheses and NOTs."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # str, id, num, op, kw, end
    value: Any
    pos: int


@dataclass(frozen=True)
class _Col:
    name: str


@dataclass(frozen=True)
class _Lit:
    value: Any


@dataclass(frozen=True)
class _Node:
    """A parsed condition: `op` is and/or/not (args: nodes), cmp (operator, _Col or _Lit, _Col or
    _Lit: a literal already cast to its column's type), in (column, pa.Array), like (column,
    pattern), isnull (column), col (a boolean column) or lit (True/False). One tree, two engines:
    `_to_arrow` (the driver's pyarrow scan) and `_to_spark` (Spark's scan), so both select the
    same rows."""

    op: str
    args: tuple


def _tokens(text: str) -> list[_Tok]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN_RE.match(text, pos)
        if m is None or m.end() == pos:
            start = len(text) - len(text[pos:].lstrip())
            raise InputError(f"--where: cannot read {text[start : start + 20]!r} at character {start + 1}")
        at = m.start(m.lastgroup)
        kind, raw = m.lastgroup, m.group(m.lastgroup)
        if kind == "str":
            out.append(_Tok("str", raw[1:-1].replace("''", "'"), at))
        elif kind == "qid":
            out.append(_Tok("id", raw[1:-1], at))
        elif kind == "num":
            out.append(_Tok("num", float(raw) if any(c in raw for c in ".eE") else int(raw), at))
        elif kind == "op":
            out.append(_Tok("op", "=" if raw == "==" else "!=" if raw == "<>" else raw, at))
        elif raw.upper() in _KEYWORDS:
            out.append(_Tok("kw", raw.upper(), at))
        else:
            out.append(_Tok("id", raw, at))
        pos = m.end()
    out.append(_Tok("end", None, len(text)))
    return out


class _Parser:
    def __init__(self, text: str, schema: pa.Schema) -> None:
        self.text, self.schema = text, schema
        if len(text) > MAX_LENGTH:
            raise InputError(f"--where is {len(text):,} characters long; the limit is {MAX_LENGTH:,}")
        self.toks = _tokens(text)
        self.i = 0
        self.columns: set[str] = set()
        self.terms = 0
        self.nesting = 0

    # -- token helpers
    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def accept(self, kind: str, value: Any = None) -> bool:
        tok = self.peek()
        if tok.kind == kind and (value is None or tok.value == value):
            self.i += 1
            return True
        return False

    def fail(self, what: str, tok: _Tok | None = None) -> InputError:
        tok = tok or self.peek()
        got = "the end" if tok.kind == "end" else repr(self.text[tok.pos : tok.pos + 20])
        return InputError(f"--where: {what} at character {tok.pos + 1}, found {got}")

    def expect(self, kind: str, value: Any) -> None:
        if not self.accept(kind, value):
            raise self.fail(f"expected {value!r}")

    # -- grammar
    def parse(self) -> _Node:
        if self.peek().kind == "end":
            raise InputError("--where is empty; give a SQL condition, e.g. \"content_languages = 'eng'\"")
        expr = self.or_()
        if self.peek().kind != "end":
            raise self.fail("expected AND, OR or the end of the condition")
        return self.boolean(expr)

    def or_(self):
        items = [self.and_()]
        while self.accept("kw", "OR"):
            items.append(self.and_())
        return self.chain("or", items)

    def and_(self):
        items = [self.not_()]
        while self.accept("kw", "AND"):
            items.append(self.not_())
        return self.chain("and", items)

    def chain(self, op: str, items: list):
        """`a op b op c ...` as a balanced tree (depth log2(n), not n: no engine recurses n deep)."""
        if len(items) == 1:
            return items[0]
        nodes = [self.boolean(x) for x in items]
        while len(nodes) > 1:
            pairs = [_Node(op, (nodes[i], nodes[i + 1])) for i in range(0, len(nodes) - 1, 2)]
            nodes = pairs + ([nodes[-1]] if len(nodes) % 2 else [])
        return nodes[0]

    def nest(self, tok: _Tok) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise InputError(
                f"--where: nested more than {MAX_NESTING} levels deep (parentheses and NOTs) at "
                f"character {tok.pos + 1}; the limit is {MAX_NESTING}"
            )

    def not_(self):
        tok = self.peek()
        if self.accept("kw", "NOT"):
            self.nest(tok)
            node = _Node("not", (self.boolean(self.not_()),))
            self.nesting -= 1
            return node
        return self.predicate()

    def boolean(self, x):
        if isinstance(x, _Node):
            return x
        if isinstance(x, _Lit) and isinstance(x.value, bool):
            return _Node("lit", (x.value,))
        if isinstance(x, _Col) and pa.types.is_boolean(self.schema.field(x.name).type):
            return _Node("col", (x.name,))
        raise InputError(f"--where: {self.describe(x)} is not a condition (compare it with something)")

    def predicate(self):
        start = self.peek()
        if not (start.kind == "op" and start.value == "("):  # a parenthesised condition is no predicate
            self.terms += 1
            if self.terms > MAX_TERMS:
                raise InputError(
                    f"--where has more than {MAX_TERMS:,} predicates (character {start.pos + 1}); "
                    f"the limit is {MAX_TERMS:,}: use IN (...) for a list of values"
                )
        left = self.operand()
        tok = self.peek()
        if tok.kind == "op" and tok.value in ("=", "!=", "<", "<=", ">", ">="):
            self.take()
            right = self.operand()
            return self.compare(tok.value, left, right)
        negate = self.accept("kw", "NOT")
        if self.accept("kw", "IN"):
            expr = self.in_list(left, start)
        elif self.accept("kw", "LIKE"):
            expr = self.like(left, start)
        elif self.accept("kw", "BETWEEN"):
            low = self.operand()
            self.expect("kw", "AND")
            high = self.operand()
            expr = _Node("and", (self.compare(">=", left, low), self.compare("<=", left, high)))
        elif not negate and self.accept("kw", "IS"):
            is_not = self.accept("kw", "NOT")
            self.expect("kw", "NULL")
            col = self.column_of(left, start, "IS NULL")
            node = _Node("isnull", (col,))
            return _Node("not", (node,)) if is_not else node
        elif negate:
            raise self.fail("expected IN, LIKE or BETWEEN after NOT")
        else:
            return left
        return _Node("not", (expr,)) if negate else expr

    def operand(self):
        tok = self.take()
        if tok.kind == "op" and tok.value == "(":
            self.nest(tok)
            inner = self.or_()
            self.expect("op", ")")
            self.nesting -= 1
            return inner
        if tok.kind == "id":
            if self.peek().kind == "op" and self.peek().value == "(":
                raise self.fail(f"functions ({tok.value}(...)) are not supported", tok)
            if tok.value not in self.schema.names:
                near = [n for n in self.schema.names if tok.value.lower() in n.lower()][:5]
                raise InputError(
                    f"--where: no column {tok.value!r} in the index (character {tok.pos + 1}); "
                    f"{'did you mean ' + ', '.join(near) + '? ' if near else ''}"
                    f"columns: {', '.join(self.schema.names)}"
                )
            self.columns.add(tok.value)
            return _Col(tok.value)
        if tok.kind in ("str", "num"):
            return _Lit(tok.value)
        if tok.kind == "kw" and tok.value in ("TRUE", "FALSE"):
            return _Lit(tok.value == "TRUE")
        if tok.kind == "kw" and tok.value == "NULL":
            raise self.fail("NULL compares to nothing in SQL; use IS NULL / IS NOT NULL", tok)
        raise self.fail("expected a column, a literal or '('", tok)

    def literal(self) -> _Lit:
        tok = self.take()
        if tok.kind in ("str", "num"):
            return _Lit(tok.value)
        if tok.kind == "kw" and tok.value in ("TRUE", "FALSE"):
            return _Lit(tok.value == "TRUE")
        raise self.fail("expected a literal", tok)

    def in_list(self, left, start: _Tok):
        col = self.column_of(left, start, "IN")
        self.expect("op", "(")
        values = [self.literal()]
        while self.accept("op", ","):
            values.append(self.literal())
        self.expect("op", ")")
        typ = self.schema.field(left.name).type
        arr = pa.array([self.cast(v.value, typ).as_py() for v in values], type=typ)
        return _Node("in", (col, arr))

    def like(self, left, start: _Tok):
        col = self.column_of(left, start, "LIKE")
        if not pa.types.is_string(self.schema.field(left.name).type):
            raise InputError(f"--where: LIKE needs a string column; {left.name} is not one")
        tok = self.take()
        if tok.kind != "str":
            raise self.fail("LIKE takes a 'pattern' string", tok)
        # A backslash escapes the next character. pyarrow reads `\b` as `b` where Spark refuses
        # it: only the escapes both read the same (\%, \_, \\) are accepted.
        bad = "\\" in re.sub(r"\\[%_\\]", "", tok.value)
        if bad:
            raise self.fail("in a LIKE pattern a backslash escapes only %, _ or a backslash", tok)
        return _Node("like", (col, tok.value))

    def column_of(self, x, tok: _Tok, op: str) -> str:
        if not isinstance(x, _Col):
            raise self.fail(f"{op} applies to a column", tok)
        return x.name

    def compare(self, op: str, left, right) -> _Node:
        if isinstance(left, _Node) or isinstance(right, _Node):
            raise InputError(f"--where: cannot compare a condition with {op}; compare columns and literals")
        if isinstance(left, _Lit) and isinstance(right, _Lit):
            raise InputError(f"--where: {left.value!r} {op} {right.value!r} compares two literals")
        return _Node("cmp", (op, self.value(left, right), self.value(right, left)))

    def value(self, x, other):
        if isinstance(x, _Col):
            return x
        # a literal takes the type of the column it is compared with
        return _Lit(self.cast(x.value, self.schema.field(other.name).type))

    @staticmethod
    def cast(value: Any, typ: pa.DataType) -> pa.Scalar:
        try:
            if pa.types.is_timestamp(typ) and typ.tz and isinstance(value, str):
                try:
                    return pa.scalar(value).cast(typ)
                except pa.ArrowInvalid:  # no zone in the literal: read as UTC, as the column is
                    naive = pa.array([value]).cast(pa.timestamp(typ.unit))
                    return pc.assume_timezone(naive, "UTC").cast(typ)[0]
            return pa.scalar(value).cast(typ)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError) as e:
            raise InputError(f"--where: {value!r} is not a value of type {typ}: {e}") from None

    @staticmethod
    def describe(x) -> str:
        return f"column {x.name}" if isinstance(x, _Col) else f"literal {x.value!r}"


def _to_arrow(node: _Node) -> ds.Expression:
    op, a = node.op, node.args
    if op in ("and", "or"):  # pyarrow's & and | are Kleene's, as SQL's AND and OR
        return _to_arrow(a[0]) & _to_arrow(a[1]) if op == "and" else _to_arrow(a[0]) | _to_arrow(a[1])
    if op == "not":
        return ~_to_arrow(a[0])
    if op == "cmp":
        x, y = (ds.field(v.name) if isinstance(v, _Col) else ds.scalar(v.value) for v in a[1:])
        return {"=": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[a[0]]
    if op == "in":
        col = ds.field(a[0])
        # isin() says false for a null, where SQL's IN says null (so NOT IN must not select it)
        return pc.if_else(col.is_null(), ds.scalar(pa.scalar(None, pa.bool_())), col.isin(a[1]))
    if op == "like":
        return pc.match_like(ds.field(a[0]), pattern=a[1])
    if op == "isnull":
        return ds.field(a[0]).is_null()
    if op == "col":
        return ds.field(a[0])
    return ds.scalar(a[0])


def _to_spark(node: _Node):
    from pyspark.sql import functions as F

    def col(name: str):
        return F.col("`" + name.replace("`", "``") + "`")  # a name with a dot is not a nested field

    def lit(value: pa.Scalar):
        # the literal already has the column's type; as_py() gives Spark the same value (a
        # timestamp as an aware datetime: the same instant)
        return F.lit(value.as_py())

    op, a = node.op, node.args
    if op == "and":  # Spark's AND, OR, NOT, comparisons, IN and LIKE are SQL's: null-aware as above
        return _to_spark(a[0]) & _to_spark(a[1])
    if op == "or":
        return _to_spark(a[0]) | _to_spark(a[1])
    if op == "not":
        return ~_to_spark(a[0])
    if op == "cmp":
        x, y = (col(v.name) if isinstance(v, _Col) else lit(v.value) for v in a[1:])
        return {"=": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[a[0]]
    if op == "in":
        return col(a[0]).isin(a[1].to_pylist())
    if op == "like":  # escape character: backslash in both (the parser allows only \%, \_, \\)
        return col(a[0]).like(a[1])
    if op == "isnull":
        return col(a[0]).isNull()
    if op == "col":
        return col(a[0])
    return F.lit(a[0])


def parse_where(text: str, schema: pa.Schema) -> tuple[ds.Expression, set[str]]:
    """(filter expression, columns it reads) of the condition over `schema`; InputError if it is not one.

    The expression is also evaluated once over an empty table of the schema, so a type mismatch
    that only pyarrow's kernels see (a LIKE on a dictionary column, ...) fails here too.
    """
    parser = _Parser(text, schema)
    expr = _to_arrow(parser.parse())
    try:
        ds.dataset(schema.empty_table()).to_table(filter=expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InputError(f"--where {text!r} does not apply to the index columns: {e}") from None
    return expr, parser.columns


def spark_where(text: str, schema: pa.Schema):
    """The same condition as a Spark Column, for `DataFrame.filter` over the same index.

    Call parse_where first: it reports every mistake before Spark starts. The Column is built from
    the same parse tree, not by handing the text to Spark SQL, whose reading differs ("x" is a
    string there, a literal is cast by other rules, `\\b` in LIKE is an error).
    """
    return _to_spark(_Parser(text, schema).parse())
