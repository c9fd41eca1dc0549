"""`extract --where "SQL condition"`: a SQL boolean condition over index columns -> a pyarrow filter.

The condition is the WHERE clause a user would give Athena or Spark SQL over the cc-index table
(`content_languages = 'eng' AND url_host_tld IN ('uk', 'ie')`). It is parsed here, on the driver,
into a `pyarrow.dataset` expression, for two reasons: every mistake in it (a syntax error, a column
the index does not have, a literal of the wrong type) is reported before Spark starts, naming the
position; and pyarrow then reads only the columns the condition uses and skips row groups and
partition folders (`crawl=.../subset=...`) whose statistics exclude it, so a condition on one
host reads a small part of a crawl's index.

The grammar is the part of SQL a WHERE clause over this table needs (keywords in any case):
    cond      := or
    or        := and (OR and)*
    and       := not (AND not)*
    not       := NOT not | predicate
    predicate := operand [ (= | == | != | <> | < | <= | > | >=) operand
                         | [NOT] IN (literal, ...) | [NOT] LIKE 'pattern'
                         | [NOT] BETWEEN operand AND operand | IS [NOT] NULL ]
    operand   := column | 'string' | number | TRUE | FALSE | ( cond )
Columns are bare names or "quoted"/`quoted`; strings use '' for a quote. A literal compared with a
column is cast to the column's type (`fetch_time >= '2024-05-20'` reads as a UTC timestamp). NULL
compares as in SQL: a row where the condition is null is not selected. Functions (lower(), substr())
are not supported: the error says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from core.errors import InputError

__all__ = ["parse_where"]

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
        self.toks = _tokens(text)
        self.i = 0
        self.columns: set[str] = set()

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
    def parse(self) -> ds.Expression:
        if self.peek().kind == "end":
            raise InputError("--where is empty; give a SQL condition, e.g. \"content_languages = 'eng'\"")
        expr = self.or_()
        if self.peek().kind != "end":
            raise self.fail("expected AND, OR or the end of the condition")
        return self.boolean(expr)

    def or_(self):
        left = self.and_()
        while self.accept("kw", "OR"):
            left = self.boolean(left) | self.boolean(self.and_())
        return left

    def and_(self):
        left = self.not_()
        while self.accept("kw", "AND"):
            left = self.boolean(left) & self.boolean(self.not_())
        return left

    def not_(self):
        if self.accept("kw", "NOT"):
            return ~self.boolean(self.not_())
        return self.predicate()

    def boolean(self, x):
        if isinstance(x, ds.Expression):
            return x
        if isinstance(x, _Lit) and isinstance(x.value, bool):
            return ds.scalar(x.value)
        if isinstance(x, _Col) and pa.types.is_boolean(self.schema.field(x.name).type):
            return ds.field(x.name)
        raise InputError(f"--where: {self.describe(x)} is not a condition (compare it with something)")

    def predicate(self):
        start = self.peek()
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
            expr = self.compare(">=", left, low) & self.compare("<=", left, high)
        elif not negate and self.accept("kw", "IS"):
            is_not = self.accept("kw", "NOT")
            self.expect("kw", "NULL")
            col = self.column_of(left, start, "IS NULL")
            return ~col.is_null() if is_not else col.is_null()
        elif negate:
            raise self.fail("expected IN, LIKE or BETWEEN after NOT")
        else:
            return left
        return ~expr if negate else expr

    def operand(self):
        tok = self.take()
        if tok.kind == "op" and tok.value == "(":
            inner = self.or_()
            self.expect("op", ")")
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
        # isin() says false for a null, where SQL's IN says null (so NOT IN must not select it)
        return pc.if_else(col.is_null(), ds.scalar(pa.scalar(None, pa.bool_())), col.isin(arr))

    def like(self, left, start: _Tok):
        col = self.column_of(left, start, "LIKE")
        if not pa.types.is_string(self.schema.field(left.name).type):
            raise InputError(f"--where: LIKE needs a string column; {left.name} is not one")
        tok = self.take()
        if tok.kind != "str":
            raise self.fail("LIKE takes a 'pattern' string", tok)
        return pc.match_like(col, pattern=tok.value)

    def column_of(self, x, tok: _Tok, op: str) -> ds.Expression:
        if not isinstance(x, _Col):
            raise self.fail(f"{op} applies to a column", tok)
        return ds.field(x.name)

    def compare(self, op: str, left, right) -> ds.Expression:
        if isinstance(left, ds.Expression) or isinstance(right, ds.Expression):
            raise InputError(f"--where: cannot compare a condition with {op}; compare columns and literals")
        if isinstance(left, _Lit) and isinstance(right, _Lit):
            raise InputError(f"--where: {left.value!r} {op} {right.value!r} compares two literals")
        a, b = self.value(left, right), self.value(right, left)
        return {
            "=": lambda: a == b,
            "!=": lambda: a != b,
            "<": lambda: a < b,
            "<=": lambda: a <= b,
            ">": lambda: a > b,
            ">=": lambda: a >= b,
        }[op]()

    def value(self, x, other):
        if isinstance(x, _Col):
            return ds.field(x.name)
        if isinstance(other, _Col):  # a literal takes the type of the column it is compared with
            return ds.scalar(self.cast(x.value, self.schema.field(other.name).type))
        return ds.scalar(x.value)

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


def parse_where(text: str, schema: pa.Schema) -> tuple[ds.Expression, set[str]]:
    """(filter expression, columns it reads) of the condition over `schema`; InputError if it is not one.

    The expression is also evaluated once over an empty table of the schema, so a type mismatch
    that only pyarrow's kernels see (a LIKE on a dictionary column, ...) fails here too.
    """
    parser = _Parser(text, schema)
    expr = parser.parse()
    try:
        ds.dataset(schema.empty_table()).to_table(filter=expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InputError(f"--where {text!r} does not apply to the index columns: {e}") from None
    return expr, parser.columns
