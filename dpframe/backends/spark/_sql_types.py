"""Spark row-wise SQL: the refusal, Polars dtypes as Spark types, and literals.

Literals are written exactly and typed: integers as ``CAST(n AS <type>)``, doubles through
``CAST('<repr>' AS DOUBLE)`` (Java's parser rounds correctly; ``'NaN'``, ``'Infinity'``,
``'-0.0'`` included), strings quoted when they hold only plain characters and otherwise as
``decode(unhex('<utf-8 hex>'), 'UTF-8')`` (no escape or ``${...}`` substitution setting can
change them), dates as ``date_from_unix_date(days)``, naive datetimes as microseconds added to
the epoch. Polars dtypes map to Spark types: Int8..Int64 → TINYINT..BIGINT, Float32/Float64 →
FLOAT/DOUBLE, String, Boolean, Date, Datetime("us") → TIMESTAMP_NTZ (naive) or TIMESTAMP (with a
time zone), Decimal(p, s) → DECIMAL(p, s). Spark has no unsigned or 128-bit integers: an
intermediate UInt8/16/32 value (``str.len_chars()``, ``str.find()``...) is held in a wider signed
type and checked against its unsigned range; a tree whose *result* is unsigned, or which needs
UInt64/Int128, is refused.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from dpframe.errors import DerivationError
from dpframe.rowwise.nodes import Call, RowExpr

_NOTHING = "Nothing was read or spent."

#: Compiled expressions longer than this are refused (the text repeats guarded operands; a very
#: deep tree would make Spark's parser and optimiser slow).
MAX_SQL_CHARS = 500_000

#: Functions computed by the math library (Java's StrictMath in Spark, libm in Polars): equal
#: to the reference up to the last bits, not always to the bit.
LIBM_FUNCTIONS = frozenset({
    "cbrt", "exp", "log", "log1p", "pow", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
    "sinh", "cosh", "tanh"})

def _refuse(what: str, instead: str) -> DerivationError:
    return DerivationError(f"{what} is not available on Spark; {instead}. {_NOTHING}")
# -- types -----------------------------------------------------------------------------------

_INT_TYPES = {"Int8": ("TINYINT", 8), "Int16": ("SMALLINT", 16), "Int32": ("INT", 32),
              "Int64": ("BIGINT", 64)}
#: unsigned types and the signed Spark type that holds all their values
_UINT_TYPES = {"UInt8": ("SMALLINT", 8), "UInt16": ("INT", 16), "UInt32": ("BIGINT", 32)}


@dataclass(frozen=True)
class _Info:
    """How values of one Polars dtype are held in Spark.

    ``kind``: ``int`` (signed), ``uint`` (unsigned, held in a wider signed type), ``float``,
    ``bool``, ``str``, ``date``, ``datetime``, ``decimal`` or ``null``; ``sql``: the Spark type;
    ``lo``/``hi``: the integer range (int, uint, bool); ``bits``: a float's width; ``tz``: a
    datetime's time zone (None: naive); ``precision``/``scale``: a decimal's."""

    kind: str
    sql: str
    lo: int = 0
    hi: int = 0
    bits: int = 0
    tz: str | None = None
    precision: int = 0
    scale: int = 0


def _name(dtype: Any) -> str:
    return dtype.__name__ if isinstance(dtype, type) else type(dtype).__name__


#: The Spark representation of the dtypes without parameters (other than integers).
_FIXED_INFOS = {"Float64": _Info("float", "DOUBLE", bits=64),
                "Float32": _Info("float", "FLOAT", bits=32),
                "Boolean": _Info("bool", "BOOLEAN", 0, 1), "String": _Info("str", "STRING"),
                "Date": _Info("date", "DATE"), "Null": _Info("null", "VOID")}


def _datetime_info(dtype: Any) -> _Info:
    unit = getattr(dtype, "time_unit", "us")
    if unit != "us":
        raise _refuse(f"a Datetime with {unit!r} precision", "Spark timestamps hold "
                      "microseconds: use Datetime('us')")
    tz = getattr(dtype, "time_zone", None)
    return _Info("datetime", "TIMESTAMP" if tz else "TIMESTAMP_NTZ", tz=tz)


def _decimal_info(dtype: Any) -> _Info:
    precision = getattr(dtype, "precision", None) or 38
    scale = getattr(dtype, "scale", 0) or 0
    if not 0 <= scale <= precision <= 38:
        raise _refuse(f"the type {dtype}", "use a Decimal of at most 38 digits")
    return _Info("decimal", f"DECIMAL({precision},{scale})", precision=precision,
                 scale=scale)


def _info(dtype: Any) -> _Info:
    """The Spark representation of ``dtype``; refuses dtypes Spark cannot hold exactly."""
    name = _name(dtype)
    if name in _INT_TYPES:
        sql, bits = _INT_TYPES[name]
        return _Info("int", sql, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if name in _UINT_TYPES:
        sql, bits = _UINT_TYPES[name]
        return _Info("uint", sql, 0, 2**bits - 1)
    if name in _FIXED_INFOS:
        return _FIXED_INFOS[name]
    if name == "Datetime":
        return _datetime_info(dtype)
    if name == "Decimal":
        return _decimal_info(dtype)
    if name in ("UInt64", "Int128", "UInt128"):
        raise _refuse(f"the 64-bit unsigned or 128-bit integer type {dtype}",
                      "cast to Int64 (values that do not fit become missing) or to Float64")
    raise _refuse(f"a value of type {dtype}", "use numbers, strings, booleans, dates or "
                  "datetimes")


def _is_pow_mismatch(node: RowExpr) -> bool:
    """A ``**`` whose plan type is not Float64: the reference computes it in Float64."""
    return isinstance(node, Call) and node.name == "pow" and _name(node.dtype) != "Float64"


def _float64() -> Any:
    import polars as pl

    return pl.Float64()


# -- literals ------------------------------------------------------------------------------

_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.,:;+-*/%#@!?="
                   "<>&|^~()[]")
_EPOCH_NTZ = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"
_INF = "CAST('Infinity' AS DOUBLE)"
_NINF = "CAST('-Infinity' AS DOUBLE)"
_NAN = "CAST('NaN' AS DOUBLE)"


def _string(value: str) -> str:
    """A Spark SQL string literal equal to ``value`` whatever the parser settings."""
    if all(c in _PLAIN for c in value):
        return "'" + value + "'"
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError:
        raise _refuse("a string literal that is not valid Unicode", "fix the literal") from None
    return f"decode(unhex('{data.hex().upper()}'), 'UTF-8')"


def _double(value: float) -> str:
    """A DOUBLE literal equal to ``value`` (NaN, ±inf and -0.0 included)."""
    value = float(value)
    if math.isnan(value):
        return _NAN
    if math.isinf(value):
        return _INF if value > 0 else _NINF
    return f"CAST('{value!r}' AS DOUBLE)"


def _micros(value: _dt.datetime) -> int:
    if value.tzinfo is not None:
        value = value.astimezone(_dt.UTC).replace(tzinfo=None)
    delta = value - _dt.datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _literal(value: Any, dtype: Any) -> str:
    """A typed Spark SQL literal for a Python scalar of Polars dtype ``dtype``."""
    info = _info(dtype)
    if value is None:
        return "NULL" if info.kind == "null" else f"CAST(NULL AS {info.sql})"
    if info.kind in ("int", "uint"):
        number = int(value)
        if not info.lo <= number <= info.hi:
            raise _refuse(f"the literal {value!r} (it does not fit {dtype})", "use a literal "
                          "of a type that holds it")
        return f"CAST({number} AS {info.sql})"
    if info.kind == "float":
        text = _double(value)
        return text if info.bits == 64 else f"CAST({text} AS FLOAT)"
    if info.kind == "bool":
        return "TRUE" if value else "FALSE"
    if info.kind == "str":
        return _string(str(value))
    if info.kind == "date":
        if isinstance(value, _dt.datetime):
            value = value.date()
        days = value.toordinal() - _dt.date(1970, 1, 1).toordinal() if isinstance(
            value, _dt.date) else int(value)
        return f"date_from_unix_date({days})"
    if info.kind == "datetime":
        micros = _micros(value) if isinstance(value, _dt.datetime) else int(value)
        if info.tz is None:
            return f"timestampadd(MICROSECOND, {micros}, {_EPOCH_NTZ})"
        return f"timestamp_micros({micros})"
    if info.kind == "decimal":
        text = format(Decimal(value), "f")
        return f"CAST('{text}' AS {info.sql})"
    raise _refuse(f"the literal {value!r}", "use a literal number, string, boolean or date")


def _quote(name: str) -> str:
    if "${" in name:
        raise _refuse(f"the column name {name!r} (Spark substitutes '${{...}}' in SQL text)",
                      "rename the column")
    return "`" + name.replace("`", "``") + "`"


# -- numeric building blocks -----------------------------------------------------------------

_TWO52 = "CAST(4503599627370496 AS DOUBLE)"


def _floor_double(x: str) -> str:
    """floor of a DOUBLE that never raises: ±0, |x| ≥ 2^52, ±inf and NaN are returned as
    they are (Spark's floor returns a BIGINT, which overflows)."""
    return (f"(CASE WHEN {x} = 0 THEN {x} WHEN abs({x}) < {_TWO52} "
            f"THEN CAST(floor({x}) AS DOUBLE) ELSE {x} END)")


def _ceil_double(x: str) -> str:
    """ceil of a DOUBLE that never raises; values in (-1, 0) give -0.0, as in Polars."""
    return (f"(CASE WHEN {x} = 0 THEN {x} WHEN {x} < 0 AND {x} > -1 THEN {x} * 0D "
            f"WHEN abs({x}) < {_TWO52} THEN CAST(ceil({x}) AS DOUBLE) ELSE {x} END)")


def _double_to_bigint(x: str) -> str:
    """A DOUBLE truncated toward zero to BIGINT, NULL when it does not fit (NaN, ±inf,
    |x| ≥ 2^63). Spark's cast saturates 2^63 to the largest long; the range test does not."""
    return (f"(CASE WHEN {x} >= CAST('-9.223372036854775808E18' AS DOUBLE) "
            f"AND {x} < CAST('9.223372036854775808E18' AS DOUBLE) "
            f"THEN CAST({x} AS BIGINT) END)")


def _fit(big: str, dtype: Any) -> str:
    """A BIGINT (or exact DECIMAL) integer brought to integer ``dtype``: NULL if it does not
    fit."""
    info = _info(dtype)
    if info.kind == "int":
        return f"try_cast({big} AS {info.sql})"
    if info.kind == "uint":
        return (f"(CASE WHEN {big} >= 0 AND {big} <= {info.hi} "
                f"THEN CAST({big} AS {info.sql}) END)")
    raise _refuse(f"an integer result of type {dtype}", "cast to Int64")


def _fits(inner: _Info, outer: _Info) -> bool:
    return outer.lo <= inner.lo and inner.hi <= outer.hi


# Java regular expressions (rendered as hex literals; \z is the true end of the input).
_INT_TEXT = r"^[+-]?[0-9]+\z"
_FLOAT_TEXT = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\z"


def _string_to_double(s: str) -> str:
    """Polars' non-strict string → Float64: decimal or scientific notation, or inf/infinity/nan
    (any case, optional sign); anything else (whitespace, hex, '1d', '1_0') is NULL."""
    low = f"lower({s})"
    return (f"(CASE WHEN {s} RLIKE {_string(_FLOAT_TEXT)} THEN CAST({s} AS DOUBLE) "
            f"WHEN {low} IN ('inf', '+inf', 'infinity', '+infinity') THEN {_INF} "
            f"WHEN {low} IN ('-inf', '-infinity') THEN {_NINF} "
            f"WHEN {low} IN ('nan', '+nan', '-nan') THEN {_NAN} END)")


def _days_guard(date_sql: str, lo: int, hi: int) -> str:
    return (f"{date_sql} >= date_from_unix_date({lo}) AND "
            f"{date_sql} <= date_from_unix_date({hi})")


#: Dates (days since 1970) chrono, hence Polars, can represent; temporal functions of values
#: outside this range give NULL.
_CHRONO_DAYS = (-96465292, 95026236)
_CHRONO_MICROS = (-8334601228800000000, 8210266876799999999)
#: Dates whose midnight is a representable microsecond timestamp.
_MICRO_DAYS = (-106751991, 106751991)
