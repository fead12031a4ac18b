"""Compiling a verified row-wise tree into one DuckDB SQL expression that no value can make fail.

DuckDB relations are derived in DuckDB itself. What every node computes is fixed by the Polars
target (:mod:`dpframe.rowwise.polars_target`, dpframe's reference); this module writes the same
computation in DuckDB's SQL so that a DuckDB result equals the Polars one value for value
(floats to the last bit), with missing values in the same rows and the corresponding column
type. Where DuckDB's own rules differ from Polars', the SQL is rewritten:

* every cast is non-strict (``TRY_CAST``); floats are truncated toward zero before they become
  integers (DuckDB rounds); a Float64 too large for Float32 becomes ±inf (DuckDB raises);
  strings are parsed only in the forms Polars accepts (DuckDB also takes spaces, ``_``, hex,
  exponents in integers); coarser time units round down (DuckDB rounds to nearest);
* integer ``+ - * // %`` are exact and checked: computed in the result type, where DuckDB
  raises on overflow and ``TRY`` makes that a missing value, or in 128 bits when an operand
  is wider, then brought back with ``TRY_CAST``; ``//`` rounds toward −∞ and ``%`` takes the
  divisor's sign (DuckDB truncates); a zero divisor gives a missing value, for floats too;
* float functions return IEEE values (NaN, ±inf) wherever DuckDB could raise instead
  (``ln(0)``, ``sqrt(-1)``, ``asin(2)``, ``sin(inf)``, ``0 ** -1``, a zero ``ln(base)``),
  whatever the connection's ``ieee_floating_point_ops`` setting; ``round``,
  ``round_sig_figs`` and ``**`` repeat Polars' own steps (its powers of ten by repeated
  squaring, its products for small integer exponents) so that they agree to the last bit;
* comparisons already agree (NaN equals NaN and is above every number in both), except that
  ``clip`` and ``max_horizontal`` / ``min_horizontal`` ignore NaN as Polars does; strings
  compare byte by byte (``COLLATE "binary"``, whatever the connection's collation);
* string functions count characters (code points) and report byte offsets where Polars does;
  regular expressions run on RE2: a pattern is accepted only if RE2 compiles it (tried on a
  throwaway connection) and it uses none of the classes RE2 reads as ASCII and Polars as
  Unicode (``\\d \\w \\s \\b``); Polars' replacement syntax (``$1``, ``${name}``) is rewritten
  for RE2;
* calendar parts are missing outside the years Polars' calendar holds (-262143..262142), and
  truncation to months, quarters and years outside its calendar-safe days, as in Polars.

Known differences that remain (total, but not Polars' value): ``str.to_uppercase`` and
``to_lowercase`` use DuckDB's one-to-one case mapping (``"ß"`` becomes ``"ẞ"``, Polars gives
``"SS"``; the hundred or so characters with a multi-character mapping differ); a timestamp
stored as ±(2^63 − 1) is DuckDB's ±infinity, so its calendar parts are missing.

What this target cannot compute exactly is refused by :func:`check`, before anything is read,
naming what to use instead: ``cbrt`` (DuckDB's differs from Polars' correctly rounded one in
the last bit), ``log1p`` (DuckDB has no exact one), title case, ``dt.round``, list functions,
transcendental functions and general ``**`` of Float32 values (Polars computes them in single
precision), float-to-string, float-to-decimal and string-to-date casts, computations on
time-zone aware datetimes, truncation to intervals other than one unit.

Every node DuckDB could still fail on is wrapped in ``TRY`` (a failing value becomes missing),
and :func:`to_sql` wraps the whole expression once more: a safety net that, by construction,
no value reaches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from dpframe.errors import DerivationError
from dpframe.rowwise.calendar import safe_days
from dpframe.rowwise.functions import FUNCTIONS, INTERNAL, OPERATORS, SEARCH_EDGES, search_steps
from dpframe.rowwise.nodes import Binary, Call, Cast, Col, Lit, RowExpr, When

__all__ = ["SUPPORTED", "apply_step", "check", "to_sql"]

_NOTHING = "Nothing was read or spent."


class _RefusalError(Exception):
    """Raised while compiling: what cannot run on DuckDB, and what to use instead."""

    def __init__(self, what: str, instead: str) -> None:
        super().__init__(what)
        self.what = what
        self.instead = instead

    def error(self) -> DerivationError:
        return DerivationError(f"{self.what} is not available on DuckDB; {self.instead}. "
                               f"{_NOTHING}")


# --------------------------------------------------------------------------------------------
# types

_INTS: dict[str, tuple[str, int, int]] = {
    "Int8": ("TINYINT", -(2**7), 2**7 - 1),
    "Int16": ("SMALLINT", -(2**15), 2**15 - 1),
    "Int32": ("INTEGER", -(2**31), 2**31 - 1),
    "Int64": ("BIGINT", -(2**63), 2**63 - 1),
    "Int128": ("HUGEINT", -(2**127), 2**127 - 1),
    "UInt8": ("UTINYINT", 0, 2**8 - 1),
    "UInt16": ("USMALLINT", 0, 2**16 - 1),
    "UInt32": ("UINTEGER", 0, 2**32 - 1),
    "UInt64": ("UBIGINT", 0, 2**64 - 1),
    "UInt128": ("UHUGEINT", 0, 2**128 - 1),
}
_SIMPLE_TYPES = {"Float32": "FLOAT", "Float64": "DOUBLE", "Boolean": "BOOLEAN",
                 "String": "VARCHAR", "Date": "DATE", "Time": "TIME_NS", "Binary": "BLOB"}
_TIMESTAMPS = {"ms": "TIMESTAMP_MS", "us": "TIMESTAMP", "ns": "TIMESTAMP_NS"}
#: Units per second of each Datetime time unit.
_PER_SECOND = {"ms": 10**3, "us": 10**6, "ns": 10**9}
#: The calendar range Polars computes dates in (chrono's): days since 1970-01-01.
_FIRST_DAY, _LAST_DAY = -96465292, 95026236  # -262143-01-01 and 262142-12-31
_MICROS_PER_DAY = 86_400 * 10**6


def _name(dtype: Any) -> str:
    """Polars' name of a dtype (``"Int64"``, ``"Datetime"``, ...)."""
    return dtype.__name__ if isinstance(dtype, type) else type(dtype).__name__


def _kind(dtype: Any) -> str:
    """``int``, ``float``, ``bool``, ``str``, ``decimal``, ``date``, ``datetime``, ``time``,
    ``null`` or ``other``."""
    name = _name(dtype)
    if name in _INTS:
        return "int"
    return {"Float32": "float", "Float64": "float", "Boolean": "bool", "String": "str",
            "Decimal": "decimal", "Date": "date", "Datetime": "datetime", "Time": "time",
            "Null": "null"}.get(name, "other")


def _unit(dtype: Any) -> str:
    return str(getattr(dtype, "time_unit", None) or "us")


def _zone(dtype: Any) -> Any:
    return getattr(dtype, "time_zone", None)


def _signed(dtype: Any) -> bool:
    return _name(dtype) in _INTS and not _name(dtype).startswith("U")


def _is_float32(dtype: Any) -> bool:
    return _name(dtype) == "Float32"


def _duck(dtype: Any) -> str:
    """The DuckDB type holding the values of a Polars dtype."""
    name = _name(dtype)
    if name in _INTS:
        return _INTS[name][0]
    if name in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[name]
    if name == "Datetime":
        if _zone(dtype) is not None:
            raise _RefusalError(f"computing on time-zone aware datetimes ({dtype})",
                                "store the column as a naive (UTC) Datetime, or use a Polars frame")
        return _TIMESTAMPS[_unit(dtype)]
    if name == "Decimal":
        precision, scale = getattr(dtype, "precision", None), getattr(dtype, "scale", 0)
        if precision is None or precision > 38:
            raise _RefusalError(f"{dtype} (DuckDB decimals hold at most 38 digits)",
                                "cast to Float64 first")
        return f"DECIMAL({precision},{scale})"
    if name == "Null":
        return "INTEGER"
    raise _RefusalError(f"computing on {dtype} values", "use a Polars frame for this derivation")


def _polars() -> Any:
    import polars as pl

    return pl


def _dtype(name: str) -> Any:
    return getattr(_polars(), name)


# --------------------------------------------------------------------------------------------
# SQL text

def _ident(name: str) -> str:
    """A quoted DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def _text(value: str) -> str:
    """A DuckDB string literal (standard SQL: only the quote is escaped)."""
    return "'" + value.replace("'", "''") + "'"


def _double(value: float) -> str:
    """An exact DOUBLE literal (``repr`` round-trips; inf and nan spelled out)."""
    if math.isnan(value):
        return "CAST('nan' AS DOUBLE)"
    if math.isinf(value):
        return "CAST('inf' AS DOUBLE)" if value > 0 else "CAST('-inf' AS DOUBLE)"
    return f"CAST('{value!r}' AS DOUBLE)"


_NAN = _double(math.nan)
_INF = _double(math.inf)
_NINF = _double(-math.inf)


def _int(value: int, duck: str) -> str:
    return f"CAST('{int(value)}' AS {duck})"


def _null(dtype: Any) -> str:
    return "NULL" if _kind(dtype) == "null" else f"CAST(NULL AS {_duck(dtype)})"


def _powi(base: float, exponent: int) -> float:
    """``base`` to an integer power the way Rust's ``f64::powi`` computes it (repeated
    squaring, rounding at every step), which is what Polars' rounding uses."""
    negative, n = exponent < 0, abs(exponent)
    result, square = 1.0, base
    while True:
        if n & 1:
            result *= square
        n >>= 1
        if n == 0:
            break
        square *= square
    return 1.0 / result if negative else result


#: Rust's ``to_degrees`` factor (180/π correctly rounded) and ``to_radians`` factor (π/180).
_DEGREES = 57.29577951308232
_RADIANS = math.pi / 180.0
#: Float32 limits: the largest finite value and the smallest value that rounds to infinity.
_F32_MAX = 3.4028234663852886e38
_F32_INF = 3.4028235677973366e38
#: Characters Rust's ``char::is_whitespace`` (Polars' default ``strip_chars``) removes.
_WHITESPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
               "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


# --------------------------------------------------------------------------------------------
# regular expressions

#: Escapes whose meaning differs between Polars' regex engine (Unicode classes) and RE2
#: (ASCII classes).
_UNICODE_CLASSES = frozenset("dDsSwWbB")


def _check_regex(pattern: str) -> None:
    """Refuse a pattern RE2 cannot compile or reads differently from Polars."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            if pattern[i + 1] in _UNICODE_CLASSES:
                raise _RefusalError(
                    f"the regular expression {pattern!r} uses \\{pattern[i + 1]}, which "
                    "DuckDB (RE2) reads as an ASCII class and Polars as a Unicode class",
                    "spell the class out ([0-9], [A-Za-z0-9_], [ \\t\\n], ...)")
            i += 2
            continue
        i += 1
    if not _re2_compiles(pattern):
        raise _RefusalError(f"the regular expression {pattern!r} (DuckDB's RE2 engine does not "
                            "compile it)", "rewrite it in the syntax RE2 and Polars share, or pass "
                            "literal=True")


@functools.lru_cache(maxsize=256)
def _re2_compiles(pattern: str) -> bool:
    """Whether RE2 compiles ``pattern``: tried on a throwaway connection, on no data."""
    import duckdb

    connection = duckdb.connect()
    try:
        connection.execute("SELECT regexp_matches('', ?)", [pattern]).fetchall()
    except Exception:
        return False
    finally:
        connection.close()
    return True


def _re2_quote(text: str) -> str:
    """A regular expression matching ``text`` literally (RE2 syntax)."""
    out = []
    for ch in text:
        if ch == "\x00":
            out.append("\\x00")
        elif ord(ch) < 128 and not ch.isalnum() and ch != "_":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _regex_groups(pattern: str) -> tuple[str, ...]:
    """The capture groups of ``pattern`` as Polars numbers and names them (one entry per
    group, its name or its number)."""
    pl = _polars()
    fields = pl.Series([""], dtype=pl.String).str.extract_groups(pattern).struct.fields
    return tuple(fields)


_GROUP_NAME = re.compile(r"[_0-9A-Za-z]+")


def _rewrite(pattern: str, value: str) -> str:
    """A Polars (Rust ``regex``) replacement string as an RE2 rewrite string: ``$n``,
    ``${n}``, ``$name`` and ``${name}`` become ``\\n``; ``$$`` is a dollar; a group that does
    not exist is empty (as in Polars); backslashes are escaped."""
    groups = _regex_groups(pattern)
    out: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch != "$":
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
            continue
        if value.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if value.startswith("${", i):
            end = value.find("}", i + 2)
            name = value[i + 2:end] if end >= 0 else ""
            if end < 0 or not name or not _GROUP_NAME.fullmatch(name):
                out.append("$")
                i += 1
                continue
            i = end + 1
        else:
            match = _GROUP_NAME.match(value, i + 1)
            if match is None:
                out.append("$")
                i += 1
                continue
            name = match.group(0)
            i = match.end()
        index = int(name) if name.isdigit() else (
            groups.index(name) + 1 if name in groups else None)
        if index is None or index > len(groups):
            continue  # a group that does not exist is replaced by nothing
        if index > 9:
            raise _RefusalError(f"the replacement {value!r} refers to group {index} (RE2 "
                                "rewrites reach groups 0-9 only)", "use at most nine groups")
        out.append(f"\\{index}")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# the compiler

def _reference_types(expr: RowExpr) -> dict[int, Any]:
    """The dtype the Polars reference gives every node of ``expr``: Polars' own typing of the
    reference's expression for the node (on an empty frame: no data), with each non-literal
    child standing in as a column of the child's reference dtype, so that typing stays
    linear in the size of the tree. Mostly the node's dtype; where the reference computes in
    another type (and what depends on it), Polars' type rules decide."""
    from dpframe.backends.polars._rowwise import to_polars

    pl = _polars()
    types: dict[int, Any] = {}
    levels: dict[int, list[RowExpr]] = {}

    def height(node: RowExpr) -> int:
        h = 1 + max((height(child) for child in node.children()), default=-1)
        levels.setdefault(h, []).append(node)
        return h

    height(expr)
    for h in sorted(levels):
        schema: dict[str, Any] = {}
        exprs = []
        for i, node in enumerate(levels[h]):
            if isinstance(node, Col | Lit):
                types[id(node)] = node.dtype
                continue
            types[id(node)] = node.dtype  # unless the reference types it below
            try:
                stand_in = _with_stand_ins(node, types, schema)
                exprs.append((node, to_polars(stand_in).alias(f"n{i}"), f"n{i}"))
            except Exception:
                continue
        if not exprs:
            continue
        empty = pl.LazyFrame(schema=schema)
        try:
            found = empty.select([e for _, e, _ in exprs]).collect_schema()
            types.update({id(node): found[name] for node, _, name in exprs})
        except Exception:  # some node the reference cannot type: type the others one by one
            for node, e, name in exprs:
                with contextlib.suppress(Exception):
                    types[id(node)] = empty.select(e).collect_schema()[name]
    return types


def _with_stand_ins(node: RowExpr, types: dict[int, Any], schema: dict[str, Any]) -> RowExpr:
    """``node`` with every non-literal child replaced by a column of its reference dtype."""
    def stand_in(child: RowExpr) -> RowExpr:
        if isinstance(child, Lit):
            return child
        name = f"__dp_{len(schema)}"
        schema[name] = types.get(id(child), child.dtype)
        return Col(schema[name], name)

    if isinstance(node, Binary):
        return dataclasses.replace(node, left=stand_in(node.left), right=stand_in(node.right))
    if isinstance(node, Cast):
        return dataclasses.replace(node, expr=stand_in(node.expr))
    if isinstance(node, When):
        return dataclasses.replace(node, predicate=stand_in(node.predicate),
                                   then=stand_in(node.then), otherwise=stand_in(node.otherwise))
    if isinstance(node, Call):
        return dataclasses.replace(node, args=tuple(stand_in(a) for a in node.args))
    return node


def _is_simple(sql: str) -> bool:
    """Short enough to repeat (an identifier, a literal, a small expression)."""
    return len(sql) <= 160


class _Compiler:
    """Compiles one tree; ``sql(node)`` is DuckDB SQL whose type corresponds to the node's
    reference dtype."""

    def __init__(self, expr: RowExpr) -> None:
        self.types = _reference_types(expr)
        self.names = 0

    # -- helpers ------------------------------------------------------------------------------

    def t(self, node: RowExpr) -> Any:
        return self.types.get(id(node), node.dtype)

    def let(self, sql: str, body: Callable[[str], str]) -> str:
        """``body`` of ``sql`` computed once: repeated inline when short, else bound to a
        lambda parameter (so nested rewrites do not grow exponentially)."""
        if _is_simple(sql):
            return body(sql)
        self.names += 1
        name = f"__dp_v{self.names}"
        return f"list_transform([{sql}], lambda {name}: {body(name)})[1]"

    def operand(self, node: RowExpr, dtype: Any) -> str:
        return self.cast(self.sql(node), self.t(node), dtype)

    # -- nodes --------------------------------------------------------------------------------

    def sql(self, node: RowExpr) -> str:
        if isinstance(node, Col):
            return _ident(node.name)
        if isinstance(node, Lit):
            return self.literal(node.value, self.t(node))
        if isinstance(node, Cast):
            return self.cast(self.sql(node.expr), self.t(node.expr), self.t(node))
        if isinstance(node, When):
            out = self.t(node)
            return (f"(CASE WHEN {self.operand(node.predicate, _dtype('Boolean'))} "
                    f"THEN {self.operand(node.then, out)} "
                    f"ELSE {self.operand(node.otherwise, out)} END)")
        if isinstance(node, Binary):
            return self.binary(node)
        assert isinstance(node, Call)
        handler = _CALLS.get(node.name)
        if handler is None or (node.name not in FUNCTIONS and node.name not in INTERNAL):
            api = FUNCTIONS[node.name].api if node.name in FUNCTIONS else node.name
            raise _RefusalError(f"{api}", _INSTEAD.get(node.name, "use a Polars frame for this "
                                                  "derivation"))
        return handler(self, node)

    def literal(self, value: Any, dtype: Any) -> str:
        """An exactly typed literal."""
        import datetime as dt
        import decimal

        kind = _kind(dtype)
        if value is None:
            return _null(dtype)
        if kind == "null":
            return "NULL"
        if kind == "bool":
            return "TRUE" if value else "FALSE"
        if kind == "int":
            return _int(int(value), _duck(dtype))
        if kind == "float":
            return self.cast(_double(float(value)), _dtype("Float64"), dtype)
        if kind == "str":
            return f"CAST({_text(str(value))} AS VARCHAR)"
        if kind == "decimal" and isinstance(value, decimal.Decimal | int):
            return f"CAST('{value}' AS {_duck(dtype)})"
        if kind == "date":
            if isinstance(value, dt.date):
                return f"CAST('{value.isoformat()}' AS DATE)"
            if isinstance(value, int):
                return f"CAST(DATE '1970-01-01' + {int(value)} AS DATE)"
        if kind == "datetime":
            duck = _duck(dtype)
            if isinstance(value, dt.datetime) and value.tzinfo is None:
                return f"CAST(TIMESTAMP '{value.isoformat(sep=' ')}' AS {duck})"
            if isinstance(value, int):
                micros = value * 10**6 // _PER_SECOND[_unit(dtype)]
                if _unit(dtype) == "ns":
                    return f"make_timestamp_ns(CAST('{int(value)}' AS BIGINT))"
                return f"CAST(make_timestamp(CAST('{micros}' AS BIGINT)) AS {duck})"
        if kind == "time":
            if isinstance(value, dt.time) and value.tzinfo is None:
                return f"CAST(TIME '{value.isoformat()}' AS TIME_NS)"
            if isinstance(value, int):
                micros = value // 1000
                return (f"CAST(TIME '00:00:00' + to_microseconds(CAST('{micros}' AS BIGINT)) "
                        "AS TIME_NS)")
        raise _RefusalError(f"the literal {value!r} of type {dtype}", "use a number, string, "
                            "boolean, date or naive datetime literal")

    # -- casts --------------------------------------------------------------------------------

    def cast(self, sql: str, src: Any, dst: Any) -> str:
        """Polars' non-strict cast of ``sql`` (of dtype ``src``) to ``dst``: a value that does
        not convert is missing."""
        if src == dst:
            return sql
        s, d = _kind(src), _kind(dst)
        if s == "null":
            return _null(dst)
        if d == "null":
            return "NULL"
        target = _duck(dst)
        if d == "float":
            return self.to_float(sql, src, dst)
        if d == "int":
            if s == "int":
                return f"TRY_CAST({sql} AS {target})"
            if s == "bool":
                return f"CAST({sql} AS {target})"
            if s in ("float", "decimal"):
                return f"TRY_CAST(trunc({sql}) AS {target})"
            if s == "str":
                return f"TRY_CAST({self.parse_int(sql, dst)} AS {target})"
            if s in ("date", "datetime"):
                return f"TRY_CAST({self.physical(sql, src)} AS {target})"
        if d in ("date", "datetime") and s in ("int", "bool"):
            return self.from_physical(sql, src, dst)
        if d == "bool" and s in ("int", "float", "decimal"):
            return f"({sql} <> 0)"
        if d == "str" and s in ("int", "bool"):
            return f"CAST({sql} AS VARCHAR)"
        if d == "decimal" and s == "int":
            return f"TRY_CAST({sql} AS {target})"
        if d == "decimal" and s == "decimal":  # fewer decimals: half to even, as Polars
            scale = getattr(dst, "scale", 0)
            if scale < getattr(src, "scale", 0):
                return f"TRY_CAST(round_even({sql}, {scale}) AS {target})"
            return f"TRY_CAST({sql} AS {target})"
        if d == "str" and s == "decimal":  # DuckDB writes 0.5 as .5 when precision = scale
            return f"regexp_replace(CAST({sql} AS VARCHAR), '^(-?)\\.', '\\10.')"
        if d == "datetime" and s in ("date", "datetime"):
            return self.to_datetime(sql, src, dst)
        if d == "date" and s == "datetime":
            return self.to_date(sql, src)
        if d == "time" and s == "datetime":
            return self.time_of(sql, src)
        raise _RefusalError(f"casting {src} to {dst}", _CAST_INSTEAD.get((s, d), "cast through a "
                            "type DuckDB and Polars convert alike (numbers, booleans, integers to "
                            "String), or use a Polars frame"))

    def to_float(self, sql: str, src: Any, dst: Any) -> str:
        s = _kind(src)
        if s == "float":  # Float32 -> Float64 is exact
            return f"CAST({sql} AS DOUBLE)" if not _is_float32(dst) else self.to_f32(sql)
        target = _duck(dst)
        if s == "bool":
            return f"CAST({sql} AS {target})"
        if s == "int":
            if _name(src) in ("Int128", "UInt128"):
                return self.wide_to_float(sql, target)
            return f"CAST({sql} AS {target})"
        if s == "decimal":
            return self.decimal_to_float(sql, src, dst)
        if s == "str":
            return self.parse_float(sql, dst)
        raise _RefusalError(f"casting {src} to {dst}", "cast to an integer type first")

    def to_f32(self, sql: str) -> str:
        """A DOUBLE rounded to FLOAT the IEEE way (overflow gives ±inf; DuckDB raises)."""
        return self.let(sql, lambda x: (
            f"(CASE WHEN isnan({x}) THEN CAST('nan' AS FLOAT) "
            f"WHEN {x} >= {_F32_INF!r} THEN CAST('inf' AS FLOAT) "
            f"WHEN {x} <= -{_F32_INF!r} THEN CAST('-inf' AS FLOAT) "
            f"WHEN {x} > {_F32_MAX!r} THEN CAST({_F32_MAX!r} AS FLOAT) "
            f"WHEN {x} < -{_F32_MAX!r} THEN CAST(-{_F32_MAX!r} AS FLOAT) "
            f"ELSE CAST({x} AS FLOAT) END)"))

    def wide_to_float(self, sql: str, target: str) -> str:
        """A 128-bit integer correctly rounded to DOUBLE / FLOAT (DuckDB's own conversion of
        HUGEINT rounds twice): through BIGINT / UBIGINT when it fits, else through its exact
        decimal text."""
        return self.let(sql, lambda x: (
            f"(CASE WHEN {x} BETWEEN -9223372036854775808 AND 9223372036854775807 "
            f"THEN CAST(CAST({x} AS BIGINT) AS {target}) "
            f"WHEN {x} BETWEEN 0 AND 18446744073709551615 "
            f"THEN CAST(CAST({x} AS UBIGINT) AS {target}) "
            f"ELSE CAST(CAST({x} AS VARCHAR) AS {target}) END)"))

    def decimal_to_float(self, sql: str, src: Any, dst: Any) -> str:
        """DuckDB and Polars both divide the integer by the power of ten."""
        return f"CAST({sql} AS {_duck(dst)})"

    def parse_int(self, sql: str, dst: Any) -> str:
        """A string with Polars' integer syntax (optional sign, ASCII digits, nothing else;
        no sign for unsigned types), as HUGEINT; anything else is missing."""
        sign = "[+-]?" if _signed(dst) else "[+]?"
        return self.let(sql, lambda x: (
            f"(CASE WHEN regexp_full_match({x}, '{sign}0*[0-9]{{1,39}}') "
            f"THEN TRY_CAST({x} AS HUGEINT) END)"))

    def parse_float(self, sql: str, dst: Any) -> str:
        """A string with Polars' float syntax (``1``, ``-1.5e3``, ``.5``, ``1.``, ``inf``,
        ``infinity``, ``nan``, any case), correctly rounded; anything else is missing. Values
        beyond the type's range are ±inf, below it ±0, as in Polars."""
        target = _duck(dst)
        number = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
        return self.let(sql, lambda x: (
            f"(CASE WHEN regexp_full_match({x}, '{number}') "
            f"THEN coalesce(TRY_CAST({x} AS {target}), "
            f"CASE WHEN regexp_full_match({x}, '[+-]?[0.]*([eE].*)?') THEN "
            f"CAST(CASE WHEN starts_with({x}, '-') THEN '-0.0' ELSE '0.0' END AS {target}) "
            f"WHEN regexp_full_match({x}, '[^eE]*[eE]-.*') THEN "
            f"CAST(CASE WHEN starts_with({x}, '-') THEN '-0.0' ELSE '0.0' END AS {target}) "
            f"WHEN starts_with({x}, '-') THEN CAST('-inf' AS {target}) "
            f"ELSE CAST('inf' AS {target}) END) "
            f"WHEN regexp_full_match({x}, '[+-]?(inf|infinity)', 'i') "
            f"THEN CAST(CASE WHEN starts_with({x}, '-') THEN '-inf' ELSE 'inf' END "
            f"AS {target}) "
            f"WHEN regexp_full_match({x}, '[+-]?nan', 'i') THEN CAST('nan' AS {target}) "
            "END)"))

    def in_calendar(self, sql: str, dtype: Any, result: str) -> str:
        """``result`` where the date / datetime ``sql`` lies in Polars' calendar range, else
        missing."""
        kind = _kind(dtype)
        if kind == "date":
            low, high = "DATE '262144-01-01 (BC)'", "DATE '262142-12-31'"
        elif kind == "datetime":
            duck = _duck(dtype)
            if _unit(dtype) == "ns":  # the whole ns range is in the calendar, infinities not
                return f"(CASE WHEN isfinite({sql}) THEN {result} END)"
            first = _FIRST_DAY * _MICROS_PER_DAY
            last = (_LAST_DAY + 1) * _MICROS_PER_DAY - (1000 if _unit(dtype) == "ms" else 1)
            low = f"CAST(make_timestamp(CAST('{first}' AS BIGINT)) AS {duck})"
            high = f"CAST(make_timestamp(CAST('{last}' AS BIGINT)) AS {duck})"
        else:
            return result
        return f"(CASE WHEN {sql} BETWEEN {low} AND {high} THEN {result} END)"

    def finite(self, sql: str, dtype: Any, result: str) -> str:
        """``result`` where DuckDB can compute on the date / datetime ``sql`` (not one of its
        infinities; a millisecond value within the microsecond range), else missing."""
        if _kind(dtype) == "datetime" and _unit(dtype) == "ms":
            bound = 9223372036854775000
            return (f"(CASE WHEN {sql} BETWEEN "
                    f"CAST(make_timestamp(CAST('-{bound}' AS BIGINT)) AS TIMESTAMP_MS) AND "
                    f"CAST(make_timestamp(CAST('{bound}' AS BIGINT)) AS TIMESTAMP_MS) "
                    f"THEN {result} END)")
        return f"(CASE WHEN isfinite({sql}) THEN {result} END)"

    def to_datetime(self, sql: str, src: Any, dst: Any) -> str:
        """Polars' temporal casts: to a finer unit exactly (missing where it overflows), to
        a coarser one rounding down (DuckDB rounds to nearest)."""
        target = _duck(dst)
        _duck(src)
        if _kind(src) == "date":
            return self.let(sql, lambda v: self.finite(
                v, src, f"TRY_CAST(TRY_CAST({v} AS TIMESTAMP) AS {target})"))
        unit, to = _unit(src), _unit(dst)
        if _PER_SECOND[to] > _PER_SECOND[unit]:
            return self.let(sql, lambda v: self.finite(v, src, f"TRY_CAST({v} AS {target})"))
        if to == "us":  # from ns
            return self.let(sql, lambda v: self.finite(v, src, _micros(v, src)))
        # to ms, from us or ns: whole milliseconds, rounded down
        def body(v: str) -> str:
            count = f"epoch_ns({v})" if unit == "ns" else f"epoch_us({v})"
            per_ms = 10**6 if unit == "ns" else 10**3
            return self.let(count, lambda n: self.finite(v, src, (
                f"CAST(make_timestamp((({n}) - ((({n}) % {per_ms}) + {per_ms}) % {per_ms}) "
                f"// {per_ms} * 1000) AS TIMESTAMP_MS)")))
        return self.let(sql, body)

    def physical(self, sql: str, src: Any) -> str:
        """A date's days or a datetime's count of its unit since 1970-01-01 (BIGINT);
        missing at DuckDB's infinities (and for milliseconds beyond its microsecond range)."""
        _duck(src)
        if _kind(src) == "date":
            return self.let(sql, lambda v: self.finite(v, src, f"({v} - DATE '1970-01-01')"))
        unit = _unit(src)
        if unit == "ms":
            return self.let(sql, lambda v: self.finite(
                v, src, f"(epoch_us(CAST({v} AS TIMESTAMP)) // 1000)"))
        fn = "epoch_ns" if unit == "ns" else "epoch_us"
        return self.let(sql, lambda v: self.finite(v, src, f"{fn}({v})"))

    def from_physical(self, sql: str, src: Any, dst: Any) -> str:
        """An integer read as days (Date) or as a count of the unit (Datetime), as Polars
        casts it; missing where it does not fit, and where DuckDB's type cannot hold the value
        (its infinities ±2^63-1; milliseconds beyond its microsecond range)."""
        target = _duck(dst)
        n = self.cast(sql, src, _dtype("Int64"))
        if _kind(dst) == "date":
            return self.let(n, lambda v: (
                f"(CASE WHEN {v} BETWEEN -2147483646 AND 2147483646 "
                f"THEN TRY(CAST(DATE '1970-01-01' + CAST({v} AS INTEGER) AS DATE)) END)"))
        unit = _unit(dst)
        if unit == "ns":
            value = "make_timestamp_ns({v})"
        elif unit == "us":
            value = "make_timestamp({v})"
        else:
            value = "CAST(make_timestamp({v} * 1000) AS TIMESTAMP_MS)"
        limit = 9223372036854775 if unit == "ms" else 9223372036854775806
        return self.let(n, lambda v: (
            f"(CASE WHEN {v} BETWEEN -{limit} AND {limit} "
            f"THEN TRY(CAST({value.format(v=v)} AS {target})) END)"))

    def to_date(self, sql: str, src: Any) -> str:
        """The calendar day of a naive datetime (rounded down)."""
        _duck(src)
        return self.let(sql, lambda v: self.finite(
            v, src, f"CAST({_micros(v, src)} AS DATE)"))

    def time_of(self, sql: str, src: Any) -> str:
        """The time of day of a naive datetime, as TIME_NS (precision kept)."""
        _duck(src)
        if _unit(src) == "ns":
            return self.let(sql, lambda v: self.finite(v, src, f"CAST({v} AS TIME_NS)"))
        return self.let(sql, lambda v: self.finite(
            v, src, f"CAST(CAST({_micros(v, src)} AS TIME) AS TIME_NS)"))

    # -- operators ----------------------------------------------------------------------------

    def common(self, a: Any, b: Any) -> Any:
        """The type two operands are compared in (None: compare as they are)."""
        if a == b:
            return a
        ka, kb = _kind(a), _kind(b)
        if ka == "null":
            return b
        if kb == "null":
            return a
        numeric = {"int", "bool", "float"}
        if ka in numeric and kb in numeric:
            if "float" in (ka, kb):
                return _dtype("Float64")
            if ka == "bool" and kb == "bool":
                return a
            return _dtype("Int128")
        if ka == kb or {ka, kb} <= {"int", "decimal"}:
            return None
        raise _RefusalError(f"comparing {a} with {b}", "cast one side to the other's type first")

    def pair(self, left: RowExpr, right: RowExpr) -> tuple[str, str]:
        """Both operands in their common type; strings compared byte by byte."""
        common = self.common(self.t(left), self.t(right))
        if common is None:
            lsql, rsql = self.sql(left), self.sql(right)
        else:
            lsql, rsql = self.operand(left, common), self.operand(right, common)
        if _kind(self.t(left)) == "str" or _kind(self.t(right)) == "str":
            lsql, rsql = _binary_collation(lsql), _binary_collation(rsql)
        return lsql, rsql

    def binary(self, node: Binary) -> str:
        op, out = node.op, self.t(node)
        if op in _COMPARISONS:
            left, right = self.pair(node.left, node.right)
            return f"({left} {_COMPARISONS[op]} {right})"
        if op in ("And", "Or", "Xor", "LogicalAnd", "LogicalOr"):
            if _kind(out) == "bool":
                left = self.operand(node.left, out)
                right = self.operand(node.right, out)
                word = {"And": "AND", "LogicalAnd": "AND", "Or": "OR", "LogicalOr": "OR",
                        "Xor": "<>"}[op]
                return f"({left} {word} {right})"
            if _kind(out) == "int":
                left = self.operand(node.left, out)
                right = self.operand(node.right, out)
                if op == "Xor":
                    return f"CAST(xor({left}, {right}) AS {_duck(out)})"
                return f"CAST(({left} {'&' if op == 'And' else '|'} {right}) AS {_duck(out)})"
            raise _RefusalError(f"{OPERATORS[op].split(' ')[0]} on {out} values",
                                "apply it to booleans or integers")
        return self.arithmetic(node)

    def arithmetic(self, node: Binary) -> str:
        op, out = node.op, self.t(node)
        kind = _kind(out)
        if op == "Plus" and kind == "str":
            return (f"({self.operand(node.left, out)} || "
                    f"{self.operand(node.right, out)})")
        if kind == "int":
            return self.integer_arithmetic(node, out)
        if kind == "float":
            left = self.operand(node.left, out)
            right = self.operand(node.right, out)
            zero = self.literal(0.0, out)
            if op in ("Plus", "Minus", "Multiply"):
                return f"({left} {_ARITH[op]} {right})"
            divisor = f"NULLIF({right}, {zero})"
            if op == "TrueDivide":
                return f"({left} / {divisor})"
            if op == "FloorDivide":
                return f"floor({left} / {divisor})"
            # Modulus, as Polars: a - b * floor(a / b)
            return self.let(left, lambda a: self.let(divisor, lambda b: (
                f"({a} - {b} * floor({a} / {b}))")))
        raise _RefusalError(f"{OPERATORS[op].split(':')[0]} with a {out} result",
                            "cast the operands to Float64 or Int64 first")

    def integer_arithmetic(self, node: Binary, out: Any) -> str:
        """Exact, then brought to ``out`` (missing where it does not fit). When both operands
        hold values of ``out``'s range, DuckDB computes in ``out`` itself and raises on
        overflow, which ``TRY`` turns into a missing value; otherwise (an operand Polars typed
        wider, e.g. a Float64 ``**``) the result is computed in 128 bits and cast back."""
        op = node.op
        if op == "TrueDivide":  # Polars types `/` Float64; an integer result cannot occur
            raise _RefusalError("`/` with an integer result", "cast the operands to Float64")
        operands = (self.t(node.left), self.t(node.right))
        if all(_fits(t, out) for t in operands):
            work, signed = out, _signed(out)
        else:
            unsigned = all(not _signed(t) and _kind(t) in ("int", "bool") for t in operands)
            wide = "UInt128" if op == "Multiply" and unsigned else "Int128"
            work, signed = _dtype(wide), wide == "Int128"
        left = self.operand(node.left, work)
        right = self.operand(node.right, work)
        if op in ("Plus", "Minus", "Multiply"):
            if op == "Minus" and not signed:
                left, right = f"CAST({left} AS HUGEINT)", f"CAST({right} AS HUGEINT)"
            exact = f"({left} {_ARITH[op]} {right})"
        elif op == "FloorDivide":  # DuckDB truncates; step down when the signs differ
            def floor_div(a: str, b: str) -> str:
                if not signed:
                    return f"({a} // {b})"
                return (f"({a} // {b} - CASE WHEN {a} % {b} <> 0 AND ({a} < 0) <> ({b} < 0) "
                        "THEN 1 ELSE 0 END)")
            exact = self.let(left, lambda a: self.let(f"NULLIF({right}, 0)",
                                                      lambda b: floor_div(a, b)))
        elif op == "Modulus":  # DuckDB takes the dividend's sign, Polars the divisor's
            def modulus(a: str, b: str) -> str:
                if not signed:
                    return f"({a} % {b})"
                return self.let(f"({a} % {b})", lambda r: (
                    f"(CASE WHEN {b} = -1 THEN {a} * 0 WHEN {r} <> 0 AND ({r} < 0) <> ({b} < 0) "
                    f"THEN {r} + {b} ELSE {r} END)"))
            exact = self.let(left, lambda a: self.let(f"NULLIF({right}, 0)",
                                                      lambda b: modulus(a, b)))
        else:
            raise _RefusalError(f"the operator {op}", "use a Polars frame")
        return f"TRY_CAST(TRY({exact}) AS {_duck(out)})"


def _fits(dtype: Any, out: Any) -> bool:
    """Every value of ``dtype`` (an integer or boolean type) is a value of integer type
    ``out``."""
    if _kind(dtype) == "bool":
        return True
    if _kind(dtype) != "int":
        return False
    low, high = _INTS[_name(dtype)][1:]
    out_low, out_high = _INTS[_name(out)][1:]
    return out_low <= low and high <= out_high


def _binary_collation(sql: str) -> str:
    return f"({sql} COLLATE \"binary\")"


_COMPARISONS = {"Eq": "=", "NotEq": "<>", "Lt": "<", "LtEq": "<=", "Gt": ">", "GtEq": ">=",
                "EqValidity": "IS NOT DISTINCT FROM", "NotEqValidity": "IS DISTINCT FROM"}
_ARITH = {"Plus": "+", "Minus": "-", "Multiply": "*"}

_CAST_INSTEAD: dict[tuple[str, str], str] = {
    ("float", "str"): "DuckDB writes floats differently from Polars (1e+308 / 1e308); round "
                      "and cast to an integer first, or use a Polars frame",
    ("date", "str"): "DuckDB writes dates differently from Polars outside years 1-9999; "
                     "extract the parts (dt.year(), ...) instead",
    ("datetime", "str"): "DuckDB writes datetimes differently from Polars; extract the parts "
                         "(dt.year(), dt.hour(), ...) instead",
    ("str", "date"): "parsing dates is not available on DuckDB; use a Polars frame",
    ("str", "datetime"): "parsing datetimes is not available on DuckDB; use a Polars frame",
    ("float", "decimal"): "Polars raises on floats too large for the decimal, even "
                          "non-strict; cast to an integer type first",
    ("str", "decimal"): "parse the string as Float64 first",
}


# --------------------------------------------------------------------------------------------
# functions

Handler = Callable[[_Compiler, Call], str]


def _lit_value(node: Call, i: int) -> Any:
    """The Python value of literal argument ``i``."""
    arg = node.args[i]
    assert isinstance(arg, Lit)
    return arg.value


def _exact_literal(arg: RowExpr) -> Any:
    """The value of a literal argument (through casts Polars inserted), or ``...`` if it is
    computed from the data."""
    while isinstance(arg, Cast):
        arg = arg.expr
    return arg.value if isinstance(arg, Lit) else ...


def _one_type(c: _Compiler, node: Call, out: Any | None = None) -> list[str]:
    """Every argument converted to the node's reference dtype (or ``out``)."""
    target = c.t(node) if out is None else out
    return [c.operand(a, target) for a in node.args]


def _float_in(c: _Compiler, node: Call) -> str:
    """The subject as DOUBLE (the type Polars computes float functions of non-Float32 values
    in)."""
    return c.operand(node.args[0], _dtype("Float64"))


def _float_out(c: _Compiler, node: Call, sql: str) -> str:
    return c.cast(sql, _dtype("Float64"), c.t(node))


def _math(build: Callable[[str], str], bind: bool = True,
          single: Callable[[str], str] | None = None) -> Handler:
    """A Float64 function of the subject (``build`` writes it from the DOUBLE value, guarded
    so that DuckDB returns Polars' IEEE result instead of raising). Polars computes it in
    single precision for Float32 values: only ``single``, the same computation in FLOAT
    (or None: refused), reproduces that."""
    def handler(c: _Compiler, node: Call) -> str:
        out = c.t(node)
        if _is_float32(out):
            if single is None:
                raise _RefusalError(f"{node.name}() of Float32 values (Polars computes it in "
                                    "single precision, DuckDB in double)",
                                    "cast to Float64 first")
            return c.let(c.operand(node.args[0], out), single)
        x = _float_in(c, node)
        body = c.let(x, build) if bind else build(x)
        return _float_out(c, node, f"TRY({body})")
    return handler


def _ln(x: str) -> str:
    return (f"(CASE WHEN isnan({x}) THEN {x} WHEN {x} = 0 THEN {_NINF} "
            f"WHEN {x} < 0 THEN {_NAN} ELSE ln({x}) END)")


def _ieee_divide(n: str, d: str) -> str:
    """IEEE ``n / d`` (a zero divisor gives ±inf or NaN, never an error)."""
    return (f"(CASE WHEN {n} IS NULL OR {d} IS NULL THEN NULL WHEN {d} <> 0 THEN {n} / {d} "
            f"WHEN {n} = 0 OR isnan({n}) THEN {_NAN} "
            f"WHEN ({n} < 0) <> signbit({d}) THEN {_NINF} ELSE {_INF} END)")


def _pow_ieee(a: str, b: str) -> str:
    """C's ``pow`` (Rust's ``powf``): zero to a negative power is ±inf (DuckDB may raise)."""
    odd = f"(isfinite({b}) AND {b} = trunc({b}) AND abs({b}) % 2 = 1)"
    return (f"(CASE WHEN {a} = 0 AND {b} < 0 THEN CASE WHEN signbit({a}) AND {odd} "
            f"THEN {_NINF} ELSE {_INF} END ELSE pow({a}, {b}) END)")


def _abs(c: _Compiler, node: Call) -> str:
    out = c.t(node)
    x = c.operand(node.args[0], out)
    if _signed(out):
        low = _INTS[_name(out)][1]
        return c.let(x, lambda v: f"(CASE WHEN {v} = {low} THEN NULL ELSE abs({v}) END)")
    if _kind(out) == "int":
        return x
    if _kind(out) in ("float", "decimal"):
        return f"abs({x})"
    raise _RefusalError(f"abs() on {out}", "cast to Float64 or an integer type first")


def _negate(c: _Compiler, node: Call) -> str:
    out = c.t(node)
    x = c.operand(node.args[0], out)
    if _signed(out):
        low = _INTS[_name(out)][1]
        return c.let(x, lambda v: f"(CASE WHEN {v} = {low} THEN NULL ELSE -{v} END)")
    if _kind(out) == "int":  # unsigned: only 0 has a negation that fits
        return c.let(x, lambda v: f"(CASE WHEN {v} = 0 THEN {v} END)")
    if _kind(out) in ("float", "decimal"):
        return f"(-{x})"
    raise _RefusalError(f"negation of {out}", "cast to Float64 or an integer type first")


def _clip(c: _Compiler, node: Call) -> str:
    """Polars' clamp: below a present lower bound -> the bound, else above a present upper
    bound -> that bound (IEEE comparisons: a NaN value or bound changes nothing)."""
    out = c.t(node)
    if _kind(out) not in ("int", "float", "date", "datetime", "decimal"):
        raise _RefusalError(f"clip() on {out}", "clip numbers")
    has_lower, has_upper = bool(node.params[0]), bool(node.params[1])
    rest = iter(node.args[1:])
    lower = c.operand(next(rest), out) if has_lower else None
    upper = c.operand(next(rest), out) if has_upper else None
    x = c.operand(node.args[0], out)
    is_float = _kind(out) == "float"

    def body(v: str) -> str:
        branches = []
        if lower is not None:
            cond = f"{v} < {{lo}}" + (" AND NOT isnan({lo})" if is_float else "")
            branches.append((cond, lower))
        if upper is not None:
            cond = f"{v} > {{hi}}" + (f" AND NOT isnan({v})" if is_float else "")
            branches.append((cond, upper))
        if not branches:
            return v
        text = "(CASE"
        for cond, bound in branches:
            key = "lo" if bound is lower else "hi"
            text += f" WHEN {cond.format(**{key: bound})} THEN {bound}"
        return text + f" ELSE {v} END)"

    return c.let(x, body)


def _round(c: _Compiler, node: Call) -> str:
    """Polars' float rounding: ``op(x * 10^d) / 10^d`` with 10^d as Rust's ``powi`` computes
    it, the value itself where that is not finite; integers unchanged."""
    out = c.t(node)
    decimals, mode = int(node.params[0]), str(node.params[1])
    if mode not in ("half_to_even", "half_away_from_zero"):
        raise _RefusalError(f"round(mode={mode!r})", "use 'half_to_even' or 'half_away_from_zero'")
    x = c.operand(node.args[0], out)
    if _kind(out) == "int":
        return x
    fn = "round_even" if mode == "half_to_even" else "round"
    if _kind(out) == "decimal":  # exact in DuckDB as in Polars
        return f"TRY_CAST({fn}({x}, {decimals}) AS {_duck(out)})"
    if _kind(out) != "float":
        raise _RefusalError(f"round() on {out}", "cast to Float64 first")

    def op(v: str) -> str:
        return f"{fn}({v}, 0)"

    if decimals == 0:
        return op(x)
    if _is_float32(out):
        if decimals >= 47:
            return x
        scale = _double(_powi(10.0, decimals))
        rounded = c.to_f32(f"({op(f'(CAST({{v}} AS DOUBLE) * {scale})')} / {scale})")
    else:
        if decimals >= 326:
            return x
        if decimals >= 300:
            mul2, mul5 = 2.0 ** decimals, _powi(5.0, decimals)
            rounded = (f"({op(f'(({{v}} * {_double(mul2)}) * {_double(mul5)})')} / "
                       f"{_double(mul5)} * {_double(1.0 / mul2)})")
        else:
            scale = _double(_powi(10.0, decimals))
            rounded = f"({op(f'({{v}} * {scale})')} / {scale})"
    return c.let(x, lambda v: c.let(rounded.replace("{v}", v), lambda r: (
        f"(CASE WHEN isfinite({r}) THEN {r} ELSE {v} END)")))


def _pow5(exponent: str) -> str:
    """Rust's ``5f64.powi(e)`` for an INTEGER ``e`` with |e| < 1024 (repeated squaring,
    each square rounded, multiplied in from the lowest bit up)."""
    squares = [5.0]
    for _ in range(9):
        squares.append(squares[-1] * squares[-1])
    factors = " * ".join(
        f"(CASE WHEN (abs({exponent}) >> {k}) & 1 = 1 THEN {_double(sq)} ELSE 1.0 END)"
        for k, sq in enumerate(squares))
    return (f"(CASE WHEN {exponent} < 0 THEN 1.0 / (1.0 * {factors}) "
            f"ELSE (1.0 * {factors}) END)")


def _round_sig_figs(c: _Compiler, node: Call) -> str:
    """Polars' significant-figure rounding, step by step: e = digits - 1 - floor(log10|x|);
    x * 2^e * 5^e rounded half away from zero, divided by 5^e, times 2^-e; the value itself
    where that is not finite; integers go through Float64 and back (saturating)."""
    out = c.t(node)
    digits = int(node.params[0])
    if _kind(out) not in ("int", "float"):
        raise _RefusalError(f"round_sig_figs() on {out}", "cast to Float64 first")
    v = c.operand(node.args[0], _dtype("Float64"))

    def body(x: str) -> str:
        exponent = f"CAST({digits - 1} - floor(log10(abs({x}))) AS INTEGER)"

        def scaled(e: str) -> str:
            pow5 = _pow5(e)
            return c.let(pow5, lambda p: (
                f"(round((({x} * pow(2.0, {e})) * {p}), 0) / {p}) * pow(2.0, -{e})"))

        descaled = c.let(exponent, scaled)
        return (f"(CASE WHEN {x} = 0 OR NOT isfinite({x}) THEN {x} ELSE "
                + c.let(descaled, lambda d: f"(CASE WHEN isfinite({d}) THEN {d} ELSE {x} END)")
                + " END)")

    result = c.let(v, body)
    if _kind(out) == "float":
        return c.cast(result, _dtype("Float64"), out)
    low, high = _INTS[_name(out)][1], _INTS[_name(out)][2]
    duck = _duck(out)
    return c.let(result, lambda r: (
        f"(CASE WHEN isnan({r}) THEN CAST(0 AS {duck}) WHEN {r} >= {float(high)!r} "
        f"THEN {_int(high, duck)} WHEN {r} <= {float(low)!r} THEN {_int(low, duck)} "
        f"ELSE CAST(trunc({r}) AS {duck}) END)"))


def _floor_ceil(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        out = c.t(node)
        x = c.operand(node.args[0], out)
        if _kind(out) == "int":
            return x
        if _kind(out) == "float":
            return f"{fn}({x})"
        if _kind(out) == "decimal":
            return f"TRY_CAST({fn}({x}) AS {_duck(out)})"
        raise _RefusalError(f"{fn}() on {out}", "cast to Float64 first")
    return handler


def _sign(c: _Compiler, node: Call) -> str:
    out = c.t(node)
    if _kind(out) == "int":
        return f"CAST(sign({c.operand(node.args[0], out)}) AS {_duck(out)})"
    if _kind(out) == "float":
        x = c.operand(node.args[0], out)
        one = c.literal(1.0, out)
        minus = c.literal(-1.0, out)
        return c.let(x, lambda v: (f"(CASE WHEN isnan({v}) THEN {v} WHEN {v} > 0 THEN {one} "
                                   f"WHEN {v} < 0 THEN {minus} ELSE {v} END)"))
    raise _RefusalError(f"sign() on {out}", "cast to Float64 first")


def _log(c: _Compiler, node: Call) -> str:
    """Rust's ``x.log(base)``: ``ln(x) / ln(base)`` with IEEE results."""
    out = c.t(node)
    work = _dtype("Float32") if _is_float32(out) else _dtype("Float64")
    if _is_float32(work):
        raise _RefusalError("log() of Float32 values (Polars computes it in single precision)",
                            "cast to Float64 first")
    x = c.operand(node.args[0], work)
    base = c.operand(node.args[1], work)
    body = c.let(x, lambda v: c.let(base, lambda b: c.let(_ln(v), lambda n: c.let(
        _ln(b), lambda d: _ieee_divide(n, d)))))
    return c.cast(f"TRY({body})", work, out)


def _pow(c: _Compiler, node: Call) -> str:
    """Polars' power. Floats: in the plan's float type; a literal exponent 1 is the value,
    0.5 its square root, 2..9 repeated products (as Polars computes them), anything else C's
    ``pow`` (Float64 only: Polars' single-precision ``powf`` has no DuckDB twin). Integers:
    the exact power, missing for an exponent outside [0, 2^32) or a result that does not
    fit the type."""
    out = c.t(node)
    if _kind(out) == "int":
        return _integer_pow(c, node, out)
    if _kind(out) != "float":
        raise _RefusalError(f"** with a {out} result", "cast the operands to Float64")
    base = c.operand(node.args[0], out)
    exponent = _exact_literal(node.args[1])
    single = _is_float32(out)
    if exponent is None:
        return _null(out)
    if exponent is not ... and float(exponent) == 0.0:  # x ** 0 is 1, NaN included
        return c.let(base, lambda a: f"(CASE WHEN {a} IS NOT NULL THEN {c.literal(1.0, out)} END)")
    if exponent is not ... and float(exponent) == 1.0:
        return base
    if exponent is not ... and float(exponent) == 0.5:
        root = (f"(CASE WHEN {{a}} < 0 THEN {_NAN} ELSE sqrt(CAST({{a}} AS DOUBLE)) END)")
        return c.let(base, lambda a: c.cast(root.format(a=a), _dtype("Float64"), out))
    if exponent is not ... and float(exponent).is_integer() and 1.0 < float(exponent) < 10.0:
        def product(a: str) -> str:
            text = a
            for _ in range(int(exponent) - 1):
                text = f"({text} * {a})"
            return text
        return c.let(base, product)
    if single:
        raise _RefusalError("** on Float32 values (Polars computes it in single precision, "
                            "DuckDB in double)", "cast to Float64 first")
    if exponent is ...:
        e = c.operand(node.args[1], out)
        return c.let(base, lambda a: c.let(e, lambda b: f"TRY({_pow_ieee(a, b)})"))
    return c.let(base, lambda a: f"TRY({_pow_ieee(a, _double(float(exponent)))})")


def _integer_pow(c: _Compiler, node: Call, out: Any) -> str:
    """The exact integer power by squaring (each square computed only when the exponent
    needs it, so an overflow means the power itself does not fit)."""
    if _name(out) in ("Int128", "UInt128"):
        raise _RefusalError("** on 128-bit integers", "cast to Int64 or Float64 first")
    wide = _dtype("Int128")
    base = c.operand(node.args[0], wide)
    exponent = c.operand(node.args[1], wide)

    def power(b: str, e: str) -> str:
        def squares(k: int, previous: str, factors: list[str]) -> str:
            factors = [*factors, f"(CASE WHEN ({e} >> {k}) & 1 = 1 THEN {previous} ELSE 1 END)"]
            if k == 6:
                return "(" + " * ".join(factors) + ")"
            square = f"(CASE WHEN {e} >= {2 ** (k + 1)} THEN {previous} * {previous} END)"
            return c.let(square, lambda sq: squares(k + 1, sq, factors))
        return (f"(CASE WHEN {b} IS NULL OR {e} IS NULL OR {e} < 0 OR {e} > 4294967295 "
                "THEN NULL "
                f"WHEN {b} = 0 THEN CASE WHEN {e} = 0 THEN 1 ELSE 0 END "
                f"WHEN {b} = 1 THEN 1 "
                f"WHEN {b} = -1 THEN CASE WHEN {e} % 2 = 0 THEN 1 ELSE -1 END "
                f"WHEN {e} > 127 THEN NULL "
                f"ELSE TRY({squares(0, b, [])}) END)")
    body = c.let(base, lambda b: c.let(exponent, lambda e: power(b, e)))
    return f"TRY_CAST({body} AS {_duck(out)})"


def _fill_null(c: _Compiler, node: Call) -> str:
    return "coalesce(" + ", ".join(_one_type(c, node)) + ")"


def _replace(c: _Compiler, node: Call) -> str:
    """Values equal to an entry of ``old`` (NaN equals NaN, a null entry matches missing
    values) become the matching entry of ``new``; the first entry wins."""
    out = c.t(node)
    old, new = _lit_value(node, 1), _lit_value(node, 2)
    old_type = getattr(c.t(node.args[1]), "inner", out)
    new_type = getattr(c.t(node.args[2]), "inner", out)
    if not isinstance(old, list):
        old = [old]
    if not isinstance(new, list):
        new = [new] * len(old)
    if len(new) == 1 and len(old) > 1:
        new = new * len(old)
    x = c.operand(node.args[0], out)
    strings = _kind(out) == "str"

    def body(v: str) -> str:
        text = "(CASE"
        for o, n in zip(old, new, strict=True):
            value = c.cast(c.literal(n, new_type), new_type, out)
            if o is None:
                text += f" WHEN {v} IS NULL THEN {value}"
                continue
            key = c.cast(c.literal(o, old_type), old_type, out)
            left, right = ((_binary_collation(v), _binary_collation(key)) if strings
                           else (v, key))
            text += f" WHEN {left} = {right} THEN {value}"
        return text + f" ELSE {v} END)"

    return c.let(x, body) if old else x


def _coalesce(c: _Compiler, node: Call) -> str:
    return "coalesce(" + ", ".join(_one_type(c, node)) + ")"


def _extreme(largest: bool) -> Handler:
    """max_horizontal / min_horizontal: the largest / smallest non-missing value; NaN only
    where every present value is NaN (Polars ignores NaN here); on ties the last argument
    (Polars folds left to right and keeps the later of equal values: -0.0 vs 0.0)."""
    def handler(c: _Compiler, node: Call) -> str:
        out = c.t(node)
        if _is_float32(out):  # DuckDB's greatest on FLOAT loses the sign of zero
            return c.cast(compute(c, node, _dtype("Float64")), _dtype("Float64"), out)
        return compute(c, node, out)

    def compute(c: _Compiler, node: Call, out: Any) -> str:
        args = list(reversed(_one_type(c, node, out)))
        fn = "greatest" if largest else "least"
        if _kind(out) == "str":
            args = [_binary_collation(a) for a in args]
        if _kind(out) != "float":
            return f"{fn}({', '.join(args)})"
        nan = c.literal(math.nan, out)

        def body(names: list[str]) -> str:
            plain = ", ".join(f"NULLIF({a}, {nan})" for a in names)
            return f"coalesce({fn}({plain}), greatest({', '.join(names)}))"
        return _let_all(c, args, body)
    return handler


def _let_all(c: _Compiler, sqls: list[str], body: Callable[[list[str]], str]) -> str:
    """``body`` of all ``sqls``, each computed once."""
    if not sqls:
        return body([])

    def step(i: int, names: list[str]) -> str:
        if i == len(sqls):
            return body(names)
        return c.let(sqls[i], lambda n: step(i + 1, [*names, n]))
    return step(0, [])


def _sum_horizontal(c: _Compiler, node: Call) -> str:
    """Sum of the row's arguments, left to right; with ``ignore_nulls`` missing ones are
    skipped (an all-missing row sums to 0), else any missing one makes the sum missing.
    Integers are summed exactly and checked."""
    out = c.t(node)
    ignore_nulls = bool(node.params[0]) if node.params else True
    if _kind(out) == "int":
        wide = _dtype("Int128")
        args = [c.operand(a, wide) for a in node.args]
        if ignore_nulls:
            args = [f"coalesce({a}, 0)" for a in args]
        return f"TRY_CAST(TRY({' + '.join(args)}) AS {_duck(out)})"
    if _kind(out) != "float":
        raise _RefusalError(f"sum_horizontal() with a {out} result", "sum numbers")
    args = _one_type(c, node)
    return _float_sum(c, args, ignore_nulls, c.literal(0.0, out))


def _float_sum(c: _Compiler, args: list[str], ignore_nulls: bool, zero: str) -> str:
    """Left to right; with ``ignore_nulls`` a missing value counts as 0 (Polars fills them
    with zero, so ``-0.0 + missing`` is ``0.0``)."""
    if ignore_nulls:
        args = [f"coalesce({a}, {zero})" for a in args]
    return "(" + " + ".join(args) + ")"


def _mean_horizontal(c: _Compiler, node: Call) -> str:
    out = c.t(node)
    ignore_nulls = bool(node.params[0]) if node.params else True
    if _kind(out) != "float":
        raise _RefusalError(f"mean_horizontal() with a {out} result", "average numbers")
    args = _one_type(c, node)
    if not ignore_nulls:
        return f"(({' + '.join(args)}) / {c.literal(float(len(args)), out)})"

    def body(names: list[str]) -> str:
        count = " + ".join(f"CAST({n} IS NOT NULL AS INTEGER)" for n in names)
        total = _float_sum(c, names, True, c.literal(0.0, out))
        return (f"(CASE WHEN ({count}) = 0 THEN NULL "
                f"ELSE {total} / CAST(({count}) AS {_duck(out)}) END)")
    return _let_all(c, args, body)


def _is_null(negate: bool) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        return f"({c.sql(node.args[0])} IS {'NOT ' if negate else ''}NULL)"
    return handler


def _float_predicate(fn: str, on_other: bool) -> Handler:
    """is_nan / is_not_nan / is_finite / is_infinite; on integers the answer is the same for
    every present value."""
    def handler(c: _Compiler, node: Call) -> str:
        x = c.sql(node.args[0])
        kind = _kind(c.t(node.args[0]))
        if kind == "float":
            return f"{fn}({x})"
        if kind in ("int", "bool", "decimal"):
            answer = "TRUE" if on_other else "FALSE"
            return f"(CASE WHEN {x} IS NOT NULL THEN {answer} END)"
        raise _RefusalError(f"{fn}() on {c.t(node.args[0])}", "apply it to numbers")
    return handler


def _not(c: _Compiler, node: Call) -> str:
    out = c.t(node)
    x = c.operand(node.args[0], out)
    if _kind(out) == "bool":
        return f"(NOT {x})"
    if _kind(out) == "int":
        return f"CAST((~{x}) AS {_duck(out)})"
    raise _RefusalError(f"not_() on {out}", "apply it to booleans or integers")


def _is_between(c: _Compiler, node: Call) -> str:
    closed = str(node.params[0])
    x, lower, upper = node.args
    low_op = ">=" if closed in ("both", "left") else ">"
    high_op = "<=" if closed in ("both", "right") else "<"
    xl, lo = c.pair(x, lower)
    xh, hi = c.pair(x, upper)
    if xl == xh:
        return c.let(xl, lambda v: f"(({v} {low_op} {lo}) AND ({v} {high_op} {hi}))")
    return f"(({xl} {low_op} {lo}) AND ({xh} {high_op} {hi}))"


def _is_in(c: _Compiler, node: Call) -> str:
    """Polars' ``is_in``: a missing value is missing (or, with ``nulls_equal``, whether the
    list holds a null); a present value is in the list or not (a null in the list does not
    make the answer missing, unlike SQL's IN)."""
    values = _lit_value(node, 1)
    if not isinstance(values, list):
        values = [values]
    nulls_equal = bool(node.params[0]) if node.params else False
    subject = c.t(node.args[0])
    inner = getattr(c.t(node.args[1]), "inner", subject)
    common = c.common(subject, inner)
    target = subject if common is None else common
    x = c.operand(node.args[0], target)
    present = [c.cast(c.literal(v, inner), inner, target) for v in values if v is not None]
    has_null = len(present) < len(values)
    if _kind(target) == "str":
        x = _binary_collation(x)
        present = [_binary_collation(p) for p in present]
    if_null = ("TRUE" if has_null else "FALSE") if nulls_equal else "NULL"
    if not present:
        return f"(CASE WHEN {x} IS NULL THEN {if_null} ELSE FALSE END)"
    return c.let(x, lambda v: (f"(CASE WHEN {v} IS NULL THEN {if_null} "
                               f"ELSE coalesce({v} IN ({', '.join(present)}), FALSE) END)"))


# -- strings ----------------------------------------------------------------------------------

def _subject(c: _Compiler, node: Call) -> str:
    return c.operand(node.args[0], _dtype("String"))


def _string_fn(template: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        return template.format(_subject(c, node))
    return handler


def _text_arg(c: _Compiler, node: Call, i: int) -> str | None:
    value = _lit_value(node, i)
    return None if value is None else str(value)


def _contains(c: _Compiler, node: Call) -> str:
    pattern = _text_arg(c, node, 1)
    s = _subject(c, node)
    if pattern is None:
        return "CAST(NULL AS BOOLEAN)"
    if bool(node.params[0]):
        return f"contains({s}, {_text(pattern)})"
    _check_regex(pattern)
    return f"regexp_matches({s}, {_text(pattern)})"


def _starts_ends(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        affix = _text_arg(c, node, 1)
        if affix is None:
            return "CAST(NULL AS BOOLEAN)"
        return f"{fn}({_subject(c, node)}, {_text(affix)})"
    return handler


def _length(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        return f"TRY_CAST({fn}({_subject(c, node)}) AS {_duck(c.t(node))})"
    return handler


#: DuckDB's ``substring``/``left`` accept positions and lengths up to 2^32 − 1 and raise
#: beyond; a VARCHAR holds at most 4 GiB, so clamping there changes no result.
_STRING_MAX = 2**32 - 2


def _clamped(value: Any) -> int:
    return max(-_STRING_MAX, min(_STRING_MAX, int(value)))


def _slice(c: _Compiler, node: Call) -> str:
    """Polars' ``str.slice``: characters from ``offset`` (from the end if negative, the range
    clipped to the string), at most ``length`` of them."""
    offset, length = _lit_value(node, 1), _lit_value(node, 2)
    s = _subject(c, node)
    if offset is None:
        return "CAST(NULL AS VARCHAR)"
    offset = _clamped(offset)
    length = None if length is None else max(0, _clamped(length))
    if offset >= 0:
        if length is None:
            return f"substring({s}, {offset + 1})"
        return f"substring({s}, {offset + 1}, {length})"

    def body(v: str) -> str:
        start = f"greatest(length({v}) + ({offset}), 0)"
        end = (f"length({v})" if length is None
               else f"least(greatest(length({v}) + ({offset + length}), 0), length({v}))")
        return f"substring({v}, {start} + 1, greatest({end} - {start}, 0))"
    return c.let(s, body)


def _head_tail(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        n = _lit_value(node, 1)
        if n is None:
            return "CAST(NULL AS VARCHAR)"
        return f"{fn}({_subject(c, node)}, {_clamped(n)})"
    return handler


def _strip(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        chars = _text_arg(c, node, 1)
        return f"{fn}({_subject(c, node)}, {_text(_WHITESPACE if chars is None else chars)})"
    return handler


def _strip_prefix(c: _Compiler, node: Call) -> str:
    prefix = _text_arg(c, node, 1)
    if prefix is None:
        return "CAST(NULL AS VARCHAR)"
    p = _text(prefix)
    return c.let(_subject(c, node), lambda v: (
        f"(CASE WHEN starts_with({v}, {p}) THEN substring({v}, {len(prefix) + 1}) "
        f"ELSE {v} END)"))


def _strip_suffix(c: _Compiler, node: Call) -> str:
    suffix = _text_arg(c, node, 1)
    if suffix is None:
        return "CAST(NULL AS VARCHAR)"
    p = _text(suffix)
    return c.let(_subject(c, node), lambda v: (
        f"(CASE WHEN ends_with({v}, {p}) THEN left({v}, length({v}) - {len(suffix)}) "
        f"ELSE {v} END)"))


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _to_integer(c: _Compiler, node: Call) -> str:
    """Rust's ``i64::from_str_radix`` (Polars' ``str.to_integer``): an optional sign, then
    digits of the base (either case), nothing else; a value that does not fit is missing."""
    base = _lit_value(node, 1)
    out = c.t(node)
    if base is None:
        return _null(out)
    base = int(base)
    digits = _DIGITS[:base]
    letters = digits[10:]
    cls = "0-" + digits[min(base, 10) - 1]
    if letters:
        cls += f"a-{letters[-1]}A-{letters[-1].upper()}"
    sign = "[+-]?" if _signed(out) or _kind(out) != "int" else "[+]?"
    pattern = _text(f"{sign}[{cls}]+")
    if base == 10:
        value = "TRY_CAST({v} AS HUGEINT)"
    else:
        value = ("(CASE WHEN starts_with({v}, '-') THEN -1 ELSE 1 END) * "
                 "TRY(list_reduce(list_transform(string_split(lower(ltrim({v}, '+-')), ''), "
                 "lambda __dp_d: CAST(strpos('" + _DIGITS + "', __dp_d) - 1 AS HUGEINT)), "
                 f"lambda __dp_a, __dp_b: __dp_a * {base} + __dp_b, CAST(0 AS HUGEINT)))")
    return c.let(_subject(c, node), lambda v: (
        f"TRY_CAST((CASE WHEN regexp_full_match({v}, {pattern}) "
        f"THEN {value.format(v=v)} END) AS {_duck(out)})"))


def _replace_string(c: _Compiler, node: Call) -> str:
    n, literal = int(node.params[0]), bool(node.params[1])
    if n not in (1, -1):
        raise _RefusalError(f"str.replace(n={n})", "replace the first match or all of them")
    pattern, value = _text_arg(c, node, 1), _text_arg(c, node, 2)
    s = _subject(c, node)
    if pattern is None or value is None:
        return "CAST(NULL AS VARCHAR)"
    if literal:
        if n == -1 and pattern:
            return f"replace({s}, {_text(pattern)}, {_text(value)})"
        regex, rewrite = _re2_quote(pattern), value.replace("\\", "\\\\")
    else:
        _check_regex(pattern)
        regex, rewrite = pattern, _rewrite(pattern, value)
    flags = ", 'g'" if n == -1 else ""
    return f"regexp_replace({s}, {_text(regex)}, {_text(rewrite)}{flags})"


def _concat(c: _Compiler, node: Call) -> str:
    separator, ignore_nulls = str(node.params[0]), bool(node.params[1])
    args = _one_type(c, node, _dtype("String"))
    if ignore_nulls:
        return f"concat_ws({_text(separator)}, {', '.join(args)})"
    return "(" + f" || {_text(separator)} || ".join(args) + ")" if separator else (
        "(" + " || ".join(args) + ")")


def _zfill(c: _Compiler, node: Call) -> str:
    """Zeros in front to ``width`` characters, after a leading sign (``-`` or ``+``)."""
    width = _lit_value(node, 1)
    if width is None:
        return "CAST(NULL AS VARCHAR)"
    w = int(width)
    return c.let(_subject(c, node), lambda v: (
        f"(CASE WHEN length({v}) >= {w} THEN {v} "
        f"WHEN left({v}, 1) IN ('-', '+') THEN left({v}, 1) || "
        f"lpad(substring({v}, 2), {max(w - 1, 0)}, '0') "
        f"ELSE lpad({v}, {w}, '0') END)"))


def _pad(fn: str) -> Handler:
    def handler(c: _Compiler, node: Call) -> str:
        width = _lit_value(node, 1)
        if width is None:
            return "CAST(NULL AS VARCHAR)"
        w, fill = int(width), _text(str(node.params[0]))
        return c.let(_subject(c, node), lambda v: (
            f"(CASE WHEN length({v}) >= {w} THEN {v} ELSE {fn}({v}, {w}, {fill}) END)"))
    return handler


def _pattern_call(c: _Compiler, node: Call) -> tuple[str | None, str, str]:
    """``(pattern, result type, subject)`` of a string function taking a literal pattern
    (the pattern is None when the literal is missing: the result is then missing)."""
    return _text_arg(c, node, 1), _duck(c.t(node)), _subject(c, node)


def _count_matches(c: _Compiler, node: Call) -> str:
    """Non-overlapping matches, left to right. A regex match is counted by marking each
    match with one extra character (RE2's global replace walks the matches the way Polars
    does, including empty ones)."""
    pattern, out, s = _pattern_call(c, node)
    if pattern is None:
        return f"CAST(NULL AS {out})"
    if bool(node.params[0]):
        if not pattern:
            return f"TRY_CAST(length({s}) + 1 AS {out})"
        p = _text(pattern)
        return c.let(s, lambda v: (
            f"TRY_CAST((strlen({v}) - strlen(replace({v}, {p}, ''))) // {len(pattern.encode())}"
            f" AS {out})"))
    _check_regex(pattern)
    return c.let(s, lambda v: (
        f"TRY_CAST(length(regexp_replace({v}, {_text(pattern)}, '_\\0', 'g')) - length({v}) "
        f"AS {out})"))


def _find(c: _Compiler, node: Call) -> str:
    """Byte offset of the first match (missing if none)."""
    pattern, out, s = _pattern_call(c, node)
    if pattern is None:
        return f"CAST(NULL AS {out})"
    if bool(node.params[0]):
        if not pattern:
            return f"(CASE WHEN {s} IS NOT NULL THEN CAST(0 AS {out}) END)"
        p = _text(pattern)
        return c.let(s, lambda v: (f"(CASE WHEN contains({v}, {p}) "
                                   f"THEN TRY_CAST(strlen(split_part({v}, {p}, 1)) AS {out}) "
                                   "END)"))
    _check_regex(pattern)
    prefixed = _text(f"^(?s:(.*?))(?:{pattern})")
    return c.let(s, lambda v: (
        f"(CASE WHEN regexp_matches({v}, {_text(pattern)}) "
        f"THEN TRY_CAST(strlen(regexp_extract({v}, {prefixed}, 1)) AS {out}) END)"))


# -- dates and times --------------------------------------------------------------------------

def _temporal_subject(c: _Compiler, node: Call, allow: tuple[str, ...]) -> tuple[str, Any]:
    dtype = c.t(node.args[0])
    kind = _kind(dtype)
    if kind not in allow:
        raise _RefusalError(f"{FUNCTIONS[node.name].api} on {dtype} values",
                            "apply it to a column of the right temporal type")
    if kind == "datetime":
        _duck(dtype)  # refuses time zones
    return c.sql(node.args[0]), dtype


def _micros(sql: str, dtype: Any) -> str:
    """A datetime as a microsecond TIMESTAMP: nanoseconds floored (DuckDB's own conversion of
    TIMESTAMP_NS rounds to the nearest microsecond), milliseconds converted exactly (some of
    DuckDB's functions read TIMESTAMP_MS through nanoseconds, which fails outside
    1677-2262)."""
    if _kind(dtype) != "datetime":
        return sql
    if _unit(dtype) == "ns":
        return (f"make_timestamp((epoch_ns({sql}) - (epoch_ns({sql}) % 1000 + 1000) % 1000) "
                "// 1000)")
    if _unit(dtype) == "ms":
        return f"CAST({sql} AS TIMESTAMP)"
    return sql


def _part(fn: str, allow: tuple[str, ...] = ("date", "datetime")) -> Handler:
    """A calendar or clock part, as ``fn(value)`` on the microsecond value."""
    def handler(c: _Compiler, node: Call) -> str:
        sql, dtype = _temporal_subject(c, node, allow)
        out = _duck(c.t(node))
        return c.let(sql, lambda v: c.in_calendar(
            v, dtype, f"CAST({fn.format(_micros(v, dtype))} AS {out})"))
    return handler


def _subsecond(scale: int) -> Handler:
    """Millisecond / microsecond / nanosecond of the second (Polars: 0 up to 10^k - 1)."""
    def handler(c: _Compiler, node: Call) -> str:
        sql, dtype = _temporal_subject(c, node, ("datetime", "time"))
        out = _duck(c.t(node))

        def body(v: str) -> str:
            if _kind(dtype) == "datetime" and _unit(dtype) == "ns":
                nanos = f"((epoch_ns({v}) % 1000000000 + 1000000000) % 1000000000)"
            else:
                nanos = f"(nanosecond({_micros(v, dtype)}) % 1000000000)"
            return c.in_calendar(v, dtype, f"CAST({nanos} // {10**9 // scale} AS {out})")
        return c.let(sql, body)
    return handler


def _leap(c: _Compiler, node: Call) -> str:
    sql, dtype = _temporal_subject(c, node, ("date", "datetime"))
    return c.let(sql, lambda v: c.in_calendar(v, dtype, c.let(
        f"year({_micros(v, dtype)})", lambda y: (
            f"(({y} % 4 = 0 AND {y} % 100 <> 0) OR {y} % 400 = 0)"))))


def _date(c: _Compiler, node: Call) -> str:
    sql, dtype = _temporal_subject(c, node, ("date", "datetime"))
    return sql if _kind(dtype) == "date" else c.to_date(sql, dtype)


def _time(c: _Compiler, node: Call) -> str:
    sql, dtype = _temporal_subject(c, node, ("datetime", "time"))
    return sql if _kind(dtype) == "time" else c.time_of(sql, dtype)


#: ``dt.truncate`` intervals of one calendar or clock unit, and DuckDB's name for the unit.
_TRUNCATE_UNITS = {"1us": "microseconds", "1ms": "milliseconds", "1s": "second",
                   "1m": "minute", "1h": "hour", "1d": "day", "1w": "week", "1mo": "month",
                   "1q": "quarter", "1y": "year"}


def _truncate(c: _Compiler, node: Call) -> str:
    """``dt.truncate`` to one unit, on the reference's safe days
    (:func:`~dpframe.rowwise.calendar.safe_days`: about ±200,000 years, and 1,000 days
    inside the type's range), missing elsewhere and at DuckDB's infinities."""
    every = _lit_value(node, 1)
    sql, dtype = _temporal_subject(c, node, ("date", "datetime"))
    out = c.t(node)
    unit = _TRUNCATE_UNITS.get(str(every))
    if every != "1ns" and unit is None:
        raise _RefusalError(f"dt.truncate({every!r})", "truncate to one unit: "
                            + ", ".join(repr(k) for k in ("1ns", *_TRUNCATE_UNITS)))
    is_date = _kind(dtype) == "date"
    identity = every == "1ns" or (is_date and every in ("1us", "1ms", "1s", "1m", "1h", "1d"))
    truncated = f"TRY(CAST(date_trunc('{unit}', {{v}}) AS {_duck(out)}))"
    days = safe_days(dtype)
    assert days is not None

    def body(v: str) -> str:
        # the reference computes only the values whose day is in its safe days
        result = v if identity else truncated.format(v=_micros(v, dtype))
        day = v if is_date else f"TRY(CAST({v} AS DATE))"
        return (f"(CASE WHEN {c.finite(v, dtype, 'TRUE')} AND {day} BETWEEN "
                f"(DATE '1970-01-01' + {days[0]}) AND (DATE '1970-01-01' + {days[1]}) "
                f"THEN {result} END)")
    return c.let(sql, body)


_INSTEAD: dict[str, str] = {
    "log1p": "DuckDB has no exact ln(1 + x); write (x + 1).log() (not bit-identical "
             "either), or use a Polars frame",
    "cbrt": "DuckDB's cube root can differ from Polars' (correctly rounded) one in the last "
            "bit; use x ** (1 / 3) on non-negative values, or a Polars frame",
    "StringFunction.Titlecase": "DuckDB has no title case with Polars' word rules; use a "
                                "Polars frame",
    "TemporalFunction.Round": "DuckDB has no rounding to Polars' intervals; use "
                              "dt.truncate() with a one-unit interval",
    **{name: "DuckDB relations hold no Polars lists here; use a Polars frame"
       for name in FUNCTIONS if name.startswith("ListFunction.")},
}


_CALLS: dict[str, Handler] = {
    "abs": _abs, "negate": _negate, "clip": _clip, "round": _round,
    "round_sig_figs": _round_sig_figs, "floor": _floor_ceil("floor"),
    "ceil": _floor_ceil("ceil"), "sign": _sign, "log": _log, "pow": _pow,
    "sqrt": _math(lambda x: f"(CASE WHEN {x} < 0 THEN {_NAN} ELSE sqrt({x}) END)",
                  single=lambda x: (f"CAST((CASE WHEN {x} < 0 THEN {_NAN} "
                                    f"ELSE sqrt(CAST({x} AS DOUBLE)) END) AS FLOAT)")),
    "exp": _math(lambda x: f"exp({x})", bind=False),
    "sin": _math(lambda x: f"(CASE WHEN isinf({x}) THEN {_NAN} ELSE sin({x}) END)"),
    "cos": _math(lambda x: f"(CASE WHEN isinf({x}) THEN {_NAN} ELSE cos({x}) END)"),
    "tan": _math(lambda x: f"(CASE WHEN isinf({x}) THEN {_NAN} ELSE tan({x}) END)"),
    "arcsin": _math(lambda x: f"(CASE WHEN abs({x}) > 1 THEN {_NAN} ELSE asin({x}) END)"),
    "arccos": _math(lambda x: f"(CASE WHEN abs({x}) > 1 THEN {_NAN} ELSE acos({x}) END)"),
    "arctan": _math(lambda x: f"atan({x})", bind=False),
    "sinh": _math(lambda x: f"sinh({x})", bind=False),
    "cosh": _math(lambda x: f"cosh({x})", bind=False),
    "tanh": _math(lambda x: f"tanh({x})", bind=False),
    "degrees": _math(lambda x: f"({x} * {_DEGREES!r})", bind=False,
                     single=lambda x: f"({x} * CAST({_DEGREES!r} AS FLOAT))"),
    "radians": _math(lambda x: f"({x} * {_RADIANS!r})", bind=False,
                     single=lambda x: f"({x} * CAST({_RADIANS!r} AS FLOAT))"),
    "fill_null": _fill_null, "replace": _replace, "coalesce": _coalesce,
    "max_horizontal": _extreme(True), "min_horizontal": _extreme(False),
    "sum_horizontal": _sum_horizontal, "mean_horizontal": _mean_horizontal,
    "BooleanFunction.IsNull": _is_null(False),
    "BooleanFunction.IsNotNull": _is_null(True),
    "BooleanFunction.IsNan": _float_predicate("isnan", False),
    "BooleanFunction.IsNotNan": _float_predicate("NOT isnan", True),
    "BooleanFunction.IsFinite": _float_predicate("isfinite", True),
    "BooleanFunction.IsInfinite": _float_predicate("isinf", False),
    "BooleanFunction.Not": _not,
    "BooleanFunction.IsBetween": _is_between,
    "BooleanFunction.IsIn": _is_in,
    "StringFunction.Uppercase": _string_fn("upper({})"),
    "StringFunction.Lowercase": _string_fn("lower({})"),
    "StringFunction.Contains": _contains,
    "StringFunction.StartsWith": _starts_ends("starts_with"),
    "StringFunction.EndsWith": _starts_ends("ends_with"),
    "StringFunction.LenChars": _length("length"),
    "StringFunction.LenBytes": _length("strlen"),
    "StringFunction.Slice": _slice,
    "StringFunction.Head": _head_tail("left"),
    "StringFunction.Tail": _head_tail("right"),
    "StringFunction.StripChars": _strip("trim"),
    "StringFunction.StripCharsStart": _strip("ltrim"),
    "StringFunction.StripCharsEnd": _strip("rtrim"),
    "StringFunction.StripPrefix": _strip_prefix,
    "StringFunction.StripSuffix": _strip_suffix,
    "StringFunction.ToInteger": _to_integer,
    "StringFunction.Replace": _replace_string,
    "StringFunction.ConcatHorizontal": _concat,
    "StringFunction.ZFill": _zfill,
    "StringFunction.PadStart": _pad("lpad"),
    "StringFunction.PadEnd": _pad("rpad"),
    "StringFunction.Reverse": _string_fn("reverse({})"),
    "StringFunction.CountMatches": _count_matches,
    "StringFunction.Find": _find,
    "TemporalFunction.Year": _part("year({})"),
    "TemporalFunction.Month": _part("month({})"),
    "TemporalFunction.Day": _part("day({})"),
    "TemporalFunction.Hour": _part("hour({})", ("datetime", "time")),
    "TemporalFunction.Minute": _part("minute({})", ("datetime", "time")),
    "TemporalFunction.Second": _part("second({})", ("datetime", "time")),
    "TemporalFunction.Millisecond": _subsecond(1000),
    "TemporalFunction.Microsecond": _subsecond(10**6),
    "TemporalFunction.Nanosecond": _subsecond(10**9),
    "TemporalFunction.WeekDay": _part("isodow({})"),
    "TemporalFunction.Week": _part("week({})"),
    "TemporalFunction.Quarter": _part("quarter({})"),
    "TemporalFunction.OrdinalDay": _part("dayofyear({})"),
    "TemporalFunction.IsoYear": _part("isoyear({})"),
    "TemporalFunction.Date": _date,
    "TemporalFunction.Time": _time,
    "TemporalFunction.IsLeapYear": _leap,
    "TemporalFunction.Truncate": _truncate,
}

#: The catalogue functions this target compiles (every operator is compiled too).
SUPPORTED: frozenset[str] = frozenset(name for name in _CALLS if name in FUNCTIONS)


def _search_edges(c: _Compiler, node: Call) -> str:
    """:data:`~dpframe.rowwise.functions.SEARCH_EDGES` as a branch-free binary search
    (:func:`~dpframe.rowwise.functions.search_steps`): ``list_reduce`` over the ⌈log₂ k⌉ step
    sizes, each comparing one element of the edges (a list literal parsed once from its exact
    ``repr`` text) with the value. DuckDB compares ``-0.0`` equal to ``0.0`` and sorts NaN
    above every number; a missing value makes every comparison missing, so no step is taken
    (0). An index never leaves the list (``i + s ≤ k`` is tested first; DuckDB would give NULL
    anyway). The SQL is O(k) text (the literal) and O(log k) work per row: a nested CASE per
    edge costs DuckDB time per vector in the number of nodes, not the rows that reach them."""
    edges = node.params[0]
    if not edges:
        return "CAST(0 AS BIGINT)"
    count = len(edges)
    table = "CAST('[" + ", ".join(repr(float(e)) for e in edges) + "]' AS DOUBLE[])"
    steps = "[" + ", ".join(str(s) for s in search_steps(count)) + "]::BIGINT[]"
    c.names += 1
    acc, step, bound = f"__dp_i{c.names}", f"__dp_s{c.names}", f"__dp_e{c.names}"

    def body(x: str) -> str:  # the edges bound once per row: indexing the literal re-reads it
        return (f"list_transform([{table}], lambda {bound}: list_reduce({steps}, "
                f"lambda {acc}, {step}: {acc} + (CASE WHEN "
                f"{acc} + {step} <= {count} AND {bound}[{acc} + {step}] <= {x} "
                f"THEN {step} ELSE 0 END), CAST(0 AS BIGINT)))[1]")

    return c.let(c.operand(node.args[0], _dtype("Float64")), body)


#: dpframe's internal functions (not in the catalogue, so not in SUPPORTED).
_CALLS[SEARCH_EDGES] = _search_edges

#: Supported functions that some argument types still make unavailable (refused by ``check``).
PARTIAL: dict[str, str] = {
    **dict.fromkeys(("sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh",
                     "tanh", "exp", "log"), "not on Float32"),
    "pow": "Float32: small exponents only", "TemporalFunction.Truncate": "one unit",
    "StringFunction.Contains": "no \\d \\w \\s \\b in patterns",
    # DuckDB maps case one character to one: "ß" becomes "ẞ" where Polars gives "SS"
    "StringFunction.Uppercase": "simple case mapping (ß → ẞ)",
    "StringFunction.Lowercase": "simple case mapping"}


# --------------------------------------------------------------------------------------------
# public interface

def _compile(expr: RowExpr) -> str:
    """The SQL of ``expr`` without the outer safety net (tests use it to see that nothing
    inside can raise)."""
    try:
        return _Compiler(expr).sql(expr)
    except _RefusalError as refusal:
        raise refusal.error() from None


def check(expr: RowExpr) -> None:
    """Refuse (:class:`~dpframe.errors.DerivationError`) anything in ``expr`` this target
    cannot compute exactly and totally: functions and casts without a faithful DuckDB form,
    regular expressions RE2 does not compile (tried on a throwaway connection) or reads
    differently, time-zone aware computations. Reads no data."""
    _compile(expr)


def to_sql(expr: RowExpr) -> str:
    """One DuckDB SQL expression computing ``expr`` under dpframe's total rules (refuses, as
    :func:`check`, what it cannot compile)."""
    sql = _compile(expr)
    if isinstance(expr, Col):
        return sql
    return f"TRY({sql})"


def apply_step(relation: Any, kind: str, predicate: RowExpr | None,
               columns: Sequence[tuple[str, RowExpr]]) -> Any:
    """One verified step on a DuckDB relation: ``filter`` keeps the rows where the predicate
    is true (missing drops the row); ``with_columns`` keeps every column in order, replaces
    those it names in place and appends the new ones; ``select`` gives exactly ``columns``."""
    import duckdb

    if kind == "filter":
        assert predicate is not None
        return relation.filter(duckdb.SQLExpression(to_sql(predicate)))
    compiled = [(name, to_sql(e)) for name, e in columns]

    def column(name: str, sql: str) -> Any:
        return duckdb.SQLExpression(sql).alias(name)

    if kind == "select":
        return relation.project(*(column(name, sql) for name, sql in compiled))
    if kind != "with_columns":
        raise ValueError(f"unknown step kind {kind!r}")
    new = dict(compiled)
    existing = list(relation.columns)
    out = [column(name, new.pop(name)) if name in new else column(name, _ident(name))
           for name in existing]
    out.extend(column(name, sql) for name, sql in compiled if name in new)
    return relation.project(*out)
