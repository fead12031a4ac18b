"""DuckDB row-wise SQL: the refusal, Polars dtypes as DuckDB types, and exact SQL text for
identifiers, strings, floats, integers and typed missing values; the dtype the Polars reference
gives every node of a tree.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import math
from typing import Any

from dpframe.backends.polars._rowwise import to_polars
from dpframe.errors import DerivationError
from dpframe.rowwise.nodes import Binary, Call, Cast, Col, Lit, RowExpr, When

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


def _date_literal(value: Any, dtype: Any) -> str | None:
    if isinstance(value, dt.date):
        return f"CAST('{value.isoformat()}' AS DATE)"
    if isinstance(value, int):
        return f"CAST(DATE '1970-01-01' + {int(value)} AS DATE)"
    return None


def _datetime_literal(value: Any, dtype: Any) -> str | None:
    duck = _duck(dtype)
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return f"CAST(TIMESTAMP '{value.isoformat(sep=' ')}' AS {duck})"
    if isinstance(value, int):
        micros = value * 10**6 // _PER_SECOND[_unit(dtype)]
        if _unit(dtype) == "ns":
            return f"make_timestamp_ns(CAST('{int(value)}' AS BIGINT))"
        return f"CAST(make_timestamp(CAST('{micros}' AS BIGINT)) AS {duck})"
    return None


def _time_literal(value: Any, dtype: Any) -> str | None:
    if isinstance(value, dt.time) and value.tzinfo is None:
        return f"CAST(TIME '{value.isoformat()}' AS TIME_NS)"
    if isinstance(value, int):
        micros = value // 1000
        return (f"CAST(TIME '00:00:00' + to_microseconds(CAST('{micros}' AS BIGINT)) "
                "AS TIME_NS)")
    return None


#: Exactly typed literals of the temporal kinds: the SQL, or None for a value of another form.
_TEMPORAL_LITERALS = {"date": _date_literal, "datetime": _datetime_literal,
                      "time": _time_literal}


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


def _reference_types(expr: RowExpr) -> dict[int, Any]:
    """The dtype the Polars reference gives every node of ``expr``: Polars' own typing of the
    reference's expression for the node (on an empty frame: no data), with each non-literal
    child standing in as a column of the child's reference dtype, so that typing stays
    linear in the size of the tree. Mostly the node's dtype; where the reference computes in
    another type (and what depends on it), Polars' type rules decide."""

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
