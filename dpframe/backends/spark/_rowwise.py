"""Compiling a verified row-wise tree into one Spark SQL expression that no value can make fail.

Spark evaluates a derivation of a Spark frame. The reference semantics are those of
:mod:`dpframe.rowwise.polars_target` (the total rules of :mod:`dpframe.rowwise.functions`); this
module writes the same computation as Spark SQL text, built with
``pyspark.sql.functions.expr``. Spark differs from Polars in many small ways, and under ANSI
mode (on by default since Spark 4) it *raises* on integer overflow, on a zero divisor, on a cast
that does not fit, on ``floor`` of a huge double, on ``conv`` overflow, on datetime overflow...
An exception raised by one row would make the outcome of a query depend on the data (and Spark
logs the offending value), so every node is written in a form that cannot raise for any value,
with ANSI mode on or off:

* a failing computation is guarded by ``CASE WHEN`` (Spark evaluates the branches of a ``CASE``
  lazily, row by row) or computed with Spark's ``try_*`` functions, and gives NULL where the
  reference gives a missing value;
* every cast is non-strict (``try_cast`` or an explicit range test), and where Spark's cast
  reads a value differently from Polars (it trims strings, saturates ``2^63`` to the largest
  long, parses ``"1d"`` as a double...), the input is first checked against exactly what Polars
  accepts;
* horizontal sums and means add their arguments in the reference's order (the first half,
  then the rest, recursively), so that float rounding is the same;
* integer ``+ - *`` are checked in the result type: ``try_add``/``try_subtract``/
  ``try_multiply`` on BIGINT, then ``try_cast`` to the node's type (a 64-bit result that does
  not fit is NULL, and so is a narrower one); ``//`` rounds toward −∞ and ``%`` takes the sign of
  the divisor (Python's rules), a zero divisor gives NULL, for integers and floats; ``/`` is a
  float division with NULL for a zero divisor (an IEEE division, also by a literal);
* ``floor``/``ceil`` of a double stay doubles (Spark's return a BIGINT and overflow): values of
  magnitude ≥ 2^52, infinities and NaN are already integral and are returned as they are, and
  the sign of a zero result is Polars' (``ceil(-0.5)`` is ``-0.0``);
* ``ln``/``log``/``log1p`` give −inf at the pole and NaN below it, as Polars, where Spark gives
  NULL; ``pow`` follows C's special cases (``1 ** NaN`` is 1), not Java's;
* comparisons need no rewriting: Spark and Polars both order NaN above every number and equal
  to itself.

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

What this target cannot reproduce exactly, or where the reference itself fails, is refused by
:func:`check` before anything is read: ``round_sig_figs``, ``str.to_titlecase`` (other word
boundaries), ``str.reverse`` (Polars reverses grapheme clusters), ``dt.time``, ``dt.round``,
list functions, regular expressions other than plain literals (and ``$`` group references in
their replacements), ``str.replace`` with an empty pattern or ``n`` other than 1 or all,
float/temporal → string casts, string → date/boolean/Float32 casts, float → decimal and
narrowing decimal casts, casts to UInt64/Int128 or to non-microsecond datetimes,
``dt.truncate`` to anything but one calendar or clock unit (or of a zoned datetime), clock
fields of dates, math-library functions and ``round`` of Float32 values, ``mean_horizontal``
of 64-bit integers (the reference wraps), ``pow`` nested where its integer plan type and its
Float64 result would disagree, clip bounds and replace tables whose values do not fit the
column (the reference raises), a negative ``str.slice`` length, column names containing
``${`` (Spark substitutes variables in SQL text), and trees whose SQL would exceed
:data:`MAX_SQL_CHARS`.

Remaining differences from the reference (``tests/rowwise/test_spark_target.py`` lists each):

* the math-library functions (:data:`LIBM_FUNCTIONS`) use Java's ``StrictMath`` (fdlibm) in
  Spark and the platform's libm in Polars: results can differ in the last one or two bits
  (special values — zeros, poles, ±inf, NaN, domain errors — are the same);
* time zones: Spark converts a TIMESTAMP to local time with Java's time-zone database, Polars
  with chrono-tz; the two can disagree where a database version changed a zone's history;
* temporal functions of a value outside chrono's range (before year −262144 or after +262143)
  give NULL, as in Polars, except ``dt.date()`` of a naive datetime and ``dt.truncate``,
  computed on the stored integer in both (Polars panics for months, quarters and years
  there); within a year of the bottom of Spark's range (years −5.8 million for dates,
  −290308 for timestamps) ``dt.truncate`` gives NULL where Polars' integer arithmetic wraps
  around;
* ``str.to_uppercase``/``to_lowercase`` use Spark's ICU case mappings (the default since
  Spark 4, ``spark.sql.icu.caseMappings.enabled``); they equal Polars' for every code point
  up to U+2FFFF. String functions assume the default ``UTF8_BINARY`` collation.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from dpframe.errors import DerivationError
from dpframe.rowwise.functions import FUNCTIONS, SEARCH_EDGES, search_steps
from dpframe.rowwise.nodes import Binary, Call, Cast, Col, Lit, RowExpr, When, walk

__all__ = ["SUPPORTED", "apply_step", "check", "to_sql"]

_NOTHING = "Nothing was read or spent."

#: Compiled expressions longer than this are refused (the text repeats guarded operands; a very
#: deep tree would make Spark's parser and optimiser slow).
MAX_SQL_CHARS = 500_000

#: Functions computed by the math library (Java's StrictMath in Spark, libm in Polars): equal
#: to the reference up to the last bits, not always to the bit.
LIBM_FUNCTIONS = frozenset({
    "cbrt", "exp", "log", "log1p", "pow", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
    "sinh", "cosh", "tanh"})

# -- refusals ------------------------------------------------------------------------------


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


def _info(dtype: Any) -> _Info:
    """The Spark representation of ``dtype``; refuses dtypes Spark cannot hold exactly."""
    name = _name(dtype)
    if name in _INT_TYPES:
        sql, bits = _INT_TYPES[name]
        return _Info("int", sql, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if name in _UINT_TYPES:
        sql, bits = _UINT_TYPES[name]
        return _Info("uint", sql, 0, 2**bits - 1)
    if name == "Float64":
        return _Info("float", "DOUBLE", bits=64)
    if name == "Float32":
        return _Info("float", "FLOAT", bits=32)
    if name == "Boolean":
        return _Info("bool", "BOOLEAN", 0, 1)
    if name == "String":
        return _Info("str", "STRING")
    if name == "Date":
        return _Info("date", "DATE")
    if name == "Null":
        return _Info("null", "VOID")
    if name == "Datetime":
        unit = getattr(dtype, "time_unit", "us")
        if unit != "us":
            raise _refuse(f"a Datetime with {unit!r} precision", "Spark timestamps hold "
                          "microseconds: use Datetime('us')")
        tz = getattr(dtype, "time_zone", None)
        return _Info("datetime", "TIMESTAMP" if tz else "TIMESTAMP_NTZ", tz=tz)
    if name == "Decimal":
        precision = getattr(dtype, "precision", None) or 38
        scale = getattr(dtype, "scale", 0) or 0
        if not 0 <= scale <= precision <= 38:
            raise _refuse(f"the type {dtype}", "use a Decimal of at most 38 digits")
        return _Info("decimal", f"DECIMAL({precision},{scale})", precision=precision,
                     scale=scale)
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


def _convert(sql: str, source: Any, target: Any) -> str:
    """Polars' non-strict cast of a value of dtype ``source`` to ``target``, in Spark: a value
    that does not convert is NULL; nothing raises."""
    src, dst = _info(source), _info(target)
    if src == dst:
        return sql
    if src.kind == "null":
        return f"CAST({sql} AS {dst.sql})"
    if dst.kind in ("int", "uint"):
        return _to_integer(sql, source, src, target, dst)
    if dst.kind == "float":
        if src.kind in ("int", "uint", "bool", "float"):
            return f"CAST({sql} AS {dst.sql})"
        if src.kind == "str" and dst.bits == 64:
            return _string_to_double(sql)
        if src.kind == "decimal" and dst.bits == 64:
            return f"CAST({sql} AS DOUBLE)"
    elif dst.kind == "bool":
        if src.kind in ("int", "uint", "float"):
            return f"CAST({sql} AS BOOLEAN)"
    elif dst.kind == "str":
        if src.kind in ("int", "uint", "bool"):
            return f"CAST({sql} AS STRING)"
    elif dst.kind == "date":
        if src.kind == "datetime":
            return f"CAST({_local_ntz(sql, src)} AS DATE)"
    elif dst.kind == "datetime" and dst.tz is None:
        if src.kind == "date":
            return (f"(CASE WHEN {_days_guard(sql, *_MICRO_DAYS)} "
                    f"THEN CAST({sql} AS TIMESTAMP_NTZ) END)")
        if src.kind == "datetime":
            return f"timestampadd(MICROSECOND, unix_micros({sql}), {_EPOCH_NTZ})"
    elif dst.kind == "decimal":
        if src.kind in ("int", "uint", "bool"):
            return f"try_cast({sql} AS {dst.sql})"
        if src.kind == "decimal" and src.scale <= dst.scale and (
                src.precision - src.scale <= dst.precision - dst.scale):
            return f"CAST({sql} AS {dst.sql})"
    raise _refuse(f"a cast from {source} to {target}", _CAST_ADVICE)


_CAST_ADVICE = ("cast between numbers, from integers or booleans to strings, from strings to "
                "Int/Float64, or between dates and datetimes (format floats and dates with "
                "explicit functions instead)")


def _to_integer(sql: str, source: Any, src: _Info, target: Any, dst: _Info) -> str:
    if src.kind in ("int", "uint", "bool"):
        if _fits(src, dst):
            return f"CAST({sql} AS {dst.sql})"
        return _fit(f"CAST({sql} AS BIGINT)", target)
    if src.kind == "float":
        return _fit(_double_to_bigint(f"CAST({sql} AS DOUBLE)"), target)
    if src.kind == "str" and dst.kind == "int":
        return f"(CASE WHEN {sql} RLIKE {_string(_INT_TEXT)} THEN try_cast({sql} AS {dst.sql}) END)"
    if src.kind == "date":
        return _fit(f"CAST(unix_date({sql}) AS BIGINT)", target)
    if src.kind == "datetime":
        micros = f"unix_micros({sql})" if src.tz is not None else _ntz_micros(sql)
        return _fit(micros, target)
    raise _refuse(f"a cast from {source} to {target}", _CAST_ADVICE)


def _ntz_micros(t: str) -> str:
    """Microseconds since the epoch of a TIMESTAMP_NTZ, without any time zone (exact, in
    DECIMAL so that the midnight of the first representable day does not overflow)."""
    return (f"try_cast(CAST(unix_date(CAST({t} AS DATE)) AS DECIMAL(20,0)) * 86400000000 + "
            f"(hour({t}) * 3600 + minute({t}) * 60) * CAST(1000000 AS BIGINT) + "
            f"CAST(extract(SECOND FROM {t}) * 1000000 AS BIGINT) AS BIGINT)")


def _local_ntz(sql: str, info: _Info) -> str:
    """The local wall-clock time of a datetime as TIMESTAMP_NTZ, independent of the session
    time zone (TIMESTAMP values are instants; their local time is taken in the dtype's zone)."""
    if info.tz is None:
        return sql
    micros = f"unix_micros({sql})"
    if info.tz.upper() not in ("UTC", "ETC/UTC", "Z", "+00:00"):
        micros = f"unix_micros(from_utc_timestamp({sql}, {_string(info.tz)}))"
    lo, hi = _CHRONO_MICROS
    return (f"(CASE WHEN unix_micros({sql}) >= {lo} AND unix_micros({sql}) <= {hi} "
            f"THEN timestampadd(MICROSECOND, {micros}, {_EPOCH_NTZ}) END)")


# -- the compiler ------------------------------------------------------------------------------


def _value(node: RowExpr) -> tuple[str, Any]:
    """The SQL of ``node`` and the dtype of the value it computes (the plan's dtype, except for
    ``**``, which the reference computes in Float64)."""
    sql, dtype = _compile(node)
    if len(sql) > MAX_SQL_CHARS:  # checked at every node: the text never grows far beyond
        raise _refuse("an expression this deeply nested", "split it into several "
                      "with_columns steps")
    return sql, dtype


def _compile(node: RowExpr) -> tuple[str, Any]:
    if isinstance(node, Col):
        _info(node.dtype)
        return _quote(node.name), node.dtype
    if isinstance(node, Lit):
        return _literal(node.value, node.dtype), node.dtype
    if isinstance(node, Cast):
        inner, source = _value(node.expr)
        return _convert(inner, source, node.dtype), node.dtype
    if isinstance(node, When):
        _info(node.dtype)
        predicate = _boolean(node.predicate)
        then = _arg(node.then, node.dtype)
        otherwise = _arg(node.otherwise, node.dtype)
        return f"(CASE WHEN {predicate} THEN {then} ELSE {otherwise} END)", node.dtype
    if isinstance(node, Binary):
        return _binary(node), node.dtype
    if isinstance(node, Call):
        build = _CALLS.get(node.name)
        if build is None:
            spec = FUNCTIONS.get(node.name)
            what = f"{spec.api} ({node.name})" if spec else repr(node.name)
            raise _refuse(what, _REFUSED.get(
                node.name, "compute it from supported functions or on another backend"))
        sql = build(node)
        return sql, node.dtype
    raise _refuse(f"the expression node {type(node).__name__}", "use supported expressions")


def _arg(node: RowExpr, dtype: Any | None = None) -> str:
    """The SQL of an argument, converted to ``dtype`` when given (as the reference's supertype
    casts do). A ``**`` with an integer plan type is refused here: its parent would compute
    with the plan's integer type, the reference with Float64."""
    if _is_pow_mismatch(node):
        raise _refuse(
            f"'**' typed {node.dtype} in the plan inside another expression (the reference "
            "computes the power in Float64 and its parent with the plan's type)",
            "cast one operand of '**' to Float64, or the power itself: (x ** y).cast(Float64)")
    sql, source = _value(node)
    return sql if dtype is None else _convert(sql, source, dtype)


def _boolean(node: RowExpr) -> str:
    sql, dtype = _value(node)
    if _info(dtype).kind not in ("bool", "null"):
        raise _refuse(f"a condition of type {dtype}", "compare the value to get a boolean")
    return sql


_COMPARE = {"Eq": "=", "NotEq": "!=", "Lt": "<", "LtEq": "<=", "Gt": ">", "GtEq": ">="}
_NULL_EQ = {"EqValidity": False, "NotEqValidity": True}


def _comparable(left: RowExpr, right: RowExpr) -> tuple[str, str]:
    """Both operands of a comparison, converted to one type where Spark's implicit choice could
    differ from Polars' (mixed numbers are compared as doubles, as Polars does)."""
    a, at = _value(left)
    b, bt = _value(right)
    ai, bi = _info(at), _info(bt)
    if ai.kind == "null" or bi.kind == "null" or ai == bi:
        return a, b
    numeric = ("int", "uint", "float", "bool")
    if ai.kind in numeric and bi.kind in numeric:
        if "float" in (ai.kind, bi.kind):
            return f"CAST({a} AS DOUBLE)", f"CAST({b} AS DOUBLE)"
        return f"CAST({a} AS BIGINT)", f"CAST({b} AS BIGINT)"
    if ai.kind == bi.kind and ai.kind in ("decimal", "str", "date"):
        return a, b
    if {ai.kind, bi.kind} == {"date", "datetime"} or (ai.kind == bi.kind == "datetime"):
        return _ntz_or_instant(a, ai), _ntz_or_instant(b, bi)
    raise _refuse(f"a comparison of {at} with {bt}", "cast both sides to one type first")


def _ntz_or_instant(sql: str, info: _Info) -> str:
    if info.kind == "date":
        return f"CAST({sql} AS TIMESTAMP_NTZ)"
    if info.tz is not None:
        raise _refuse("a comparison between datetimes of different time zones",
                      "compare datetimes of one type")
    return sql


def _binary(node: Binary) -> str:
    op = node.op
    if op in _COMPARE:
        a, b = _comparable(node.left, node.right)
        return f"({a} {_COMPARE[op]} {b})"
    if op in _NULL_EQ:
        a, b = _comparable(node.left, node.right)
        return f"(NOT ({a} <=> {b}))" if _NULL_EQ[op] else f"({a} <=> {b})"
    info = _info(node.dtype)
    if op in ("And", "Or", "Xor", "LogicalAnd", "LogicalOr"):
        return _logical(node, info)
    if op == "Plus" and info.kind == "str":
        return f"concat({_arg(node.left, node.dtype)}, {_arg(node.right, node.dtype)})"
    if op not in _ARITHMETIC:
        raise _refuse(f"the operator {op!r}", "use a supported operator")
    if info.kind in ("int", "uint"):
        return _integer_arithmetic(node)
    if info.kind == "float":
        return _float_arithmetic(node, info)
    raise _refuse(f"{op!r} with a {node.dtype} result", "cast the operands to Float64 first")


_ARITHMETIC = ("Plus", "Minus", "Multiply", "TrueDivide", "FloorDivide", "Modulus")


def _logical(node: Binary, info: _Info) -> str:
    op = node.op
    if info.kind in ("bool", "null"):
        a, b = _arg(node.left), _arg(node.right)
        for side in (node.left, node.right):
            if _info(side.dtype).kind not in ("bool", "null"):
                raise _refuse(f"{op!r} mixing booleans and numbers", "cast to one type first")
        if op == "Xor":
            return f"({a} != {b})"
        word = "AND" if op in ("And", "LogicalAnd") else "OR"
        return f"({a} {word} {b})"
    if info.kind in ("int", "uint") and op in ("And", "Or", "Xor"):
        a, b = _arg(node.left, node.dtype), _arg(node.right, node.dtype)
        symbol = {"And": "&", "Or": "|", "Xor": "^"}[op]
        return f"({a} {symbol} {b})"
    raise _refuse(f"{op!r} on {node.dtype}", "use booleans or integers")


def _operand_bigint(node: RowExpr) -> str:
    sql = _arg(node)
    kind = _info(node.dtype).kind
    if kind not in ("int", "uint", "bool", "null"):
        raise _refuse(f"integer arithmetic on a {node.dtype} operand", "cast it first")
    return f"CAST({sql} AS BIGINT)"


def _integer_arithmetic(node: Binary) -> str:
    a, b = _operand_bigint(node.left), _operand_bigint(node.right)
    op = node.op
    if op == "TrueDivide":  # pragma: no cover - '/' always has a float type
        raise _refuse("'/' with an integer result", "cast to Float64")
    if op in ("Plus", "Minus", "Multiply"):
        name = {"Plus": "try_add", "Minus": "try_subtract", "Multiply": "try_multiply"}[op]
        raw = f"{name}({a}, {b})"
    elif op == "FloorDivide":
        # truncating `div`, moved down by one when the remainder and the divisor have
        # opposite signs; MIN // -1 (= 2^63) does not fit
        raw = (f"(CASE WHEN {b} = 0 THEN NULL "
               f"WHEN {a} = CAST(-9223372036854775808 AS BIGINT) AND {b} = -1 THEN NULL "
               f"WHEN {a} % {b} != 0 AND ({a} % {b} < 0) != ({b} < 0) "
               f"THEN ({a} div {b}) - 1 ELSE {a} div {b} END)")
    else:  # Modulus: the remainder takes the sign of the divisor
        raw = (f"(CASE WHEN {b} = 0 THEN NULL "
               f"WHEN {a} % {b} != 0 AND ({a} % {b} < 0) != ({b} < 0) "
               f"THEN {a} % {b} + {b} ELSE {a} % {b} END)")
    if _name(node.dtype) == "Int64":
        return raw
    return _fit(raw, node.dtype)


def _float_arithmetic(node: Binary, info: _Info) -> str:
    op = node.op
    a, b = _arg(node.left, node.dtype), _arg(node.right, node.dtype)
    if op in ("Plus", "Minus", "Multiply"):
        symbol = {"Plus": "+", "Minus": "-", "Multiply": "*"}[op]
        return f"({a} {symbol} {b})"
    single = info.bits == 32
    if single:
        # Spark divides FLOATs as DOUBLEs: rounding the double quotient to float gives the
        # correctly rounded float quotient (53 ≥ 2·24 + 2 bits)
        quotient = f"CAST(CAST({a} AS DOUBLE) / CAST({b} AS DOUBLE) AS FLOAT)"
    else:
        quotient = f"({a} / {b})"
    if op == "TrueDivide":
        result = quotient
    else:
        floored = _floor_double(f"CAST({quotient} AS DOUBLE)" if single else quotient)
        if single:
            floored = f"CAST({floored} AS FLOAT)"
        result = floored if op == "FloorDivide" else f"({a} - {b} * {floored})"
    return f"(CASE WHEN {b} = 0 THEN NULL ELSE {result} END)"


def _reads_columns(node: RowExpr) -> bool:
    return any(isinstance(n, Col) for n in walk(node))


# -- functions -----------------------------------------------------------------------------


def _subject(node: Call) -> tuple[str, _Info]:
    sql = _arg(node.args[0])
    return sql, _info(node.args[0].dtype)


def _literal_arg(node: Call, i: int) -> Any:
    arg = node.args[i]
    if not isinstance(arg, Lit):
        raise _refuse(f"{node.name!r} with a computed argument", "pass a literal")
    return arg.value


def _typed_null(dtype: Any) -> str:
    info = _info(dtype)
    return "NULL" if info.kind == "null" else f"CAST(NULL AS {info.sql})"


def _abs(node: Call) -> str:
    x, info = _subject(node)
    if info.kind == "int":
        return f"(CASE WHEN {x} = {_literal(info.lo, node.dtype)} THEN NULL ELSE abs({x}) END)"
    if info.kind in ("uint", "float"):
        return f"abs({x})" if info.kind == "float" else x
    raise _refuse(f"abs of {node.args[0].dtype}", "use numbers")


def _negate(node: Call) -> str:
    x, info = _subject(node)
    if info.kind == "int":
        return (f"(CASE WHEN {x} = {_literal(info.lo, node.dtype)} THEN NULL "
                f"ELSE negative({x}) END)")
    if info.kind == "uint":  # only 0 has a negation that fits
        return f"(CASE WHEN {x} = 0 THEN {x} END)"
    if info.kind == "float":
        return f"negative({x})"
    raise _refuse(f"negation of {node.args[0].dtype}", "use numbers")


def _clip(node: Call) -> str:
    """``x < lower → lower``, else ``x > upper → upper``, else x; a missing or NaN bound is
    ignored and NaN stays NaN (IEEE comparisons, as the reference's clip kernel)."""
    x, info = _subject(node)
    if info.kind not in ("int", "uint", "float"):
        raise _refuse(f"clip of {node.dtype}", "clip numbers")
    has_lower, has_upper = bool(node.params[0]), bool(node.params[1])
    bounds = iter(node.args[1:])
    cases = []
    for present, symbol in ((has_lower, "<"), (has_upper, ">")):
        if not present:
            continue
        bound = next(bounds)
        _check_clip_bound(bound, node.dtype)
        b = _arg(bound, node.dtype)
        guard = f"NOT isnan({b}) AND " if info.kind == "float" else ""
        cases.append(f"WHEN {guard}{x} {symbol} {b} THEN {b}")
    if not cases:
        return x
    nan = f"WHEN isnan({x}) THEN {x} " if info.kind == "float" else ""
    return f"(CASE {nan}{' '.join(cases)} ELSE {x} END)"


def _check_clip_bound(bound: RowExpr, dtype: Any) -> None:
    """The reference casts clip bounds to the subject's type *strictly*; refuse bounds for
    which that cast could fail (it would raise in Polars)."""
    target = _info(dtype)
    source = _info(bound.dtype)
    if (isinstance(bound, Lit) and source.kind in ("int", "uint")
            and target.kind in ("int", "uint")
            and (bound.value is None or target.lo <= int(bound.value) <= target.hi)):
        return
    if source.kind == "null" or source == target:
        return
    if target.kind == "float" and source.kind in ("int", "uint", "float", "bool"):
        return
    if target.kind in ("int", "uint") and source.kind in ("int", "uint", "bool") and _fits(
            source, target):
        return
    raise _refuse(f"clip bounds of type {bound.dtype} on {dtype} values (the reference "
                  "raises on bounds that do not fit)", "give bounds of the column's type")


def _powi(base: float, exponent: int) -> float:
    """``base ** exponent`` by repeated squaring, as Rust's ``powi`` computes the scale of
    ``round``."""
    result, factor = 1.0, base
    while exponent:
        if exponent & 1:
            result *= factor
        factor *= factor
        exponent >>= 1
    return result


def _round(node: Call) -> str:
    """Floats: ``y = x·10^d``; if y is not finite, x; else y rounded to an integer (half to
    even or half away from zero, as the mode says) divided by 10^d — the reference's algorithm,
    with 10^d computed as Rust's ``powi``. A zero keeps the sign of x."""
    x, info = _subject(node)
    decimals, mode = int(node.params[0]), str(node.params[1])
    if info.kind in ("int", "uint"):
        return x
    if info.kind != "float" or info.bits != 64:
        raise _refuse(f"round of {node.args[0].dtype}", "cast to Float64 first")
    if mode not in ("half_to_even", "half_away_from_zero") or decimals < 0:
        raise _refuse(f"round with mode {mode!r} and {decimals} decimals",
                      "use half_to_even or half_away_from_zero")
    scale = _powi(10.0, decimals)
    y = x if scale == 1.0 else f"({x} * {_double(scale)})"
    fn = "bround" if mode == "half_to_even" else "round"
    rounded = f"(CASE WHEN {fn}({y}, 0) = 0 THEN {y} * 0D ELSE {fn}({y}, 0) END)"
    scaled = rounded if scale == 1.0 else f"({rounded} / {_double(scale)})"
    return f"(CASE WHEN abs({y}) < {_INF} THEN {scaled} ELSE {x} END)"


def _floor_ceil(node: Call) -> str:
    x, info = _subject(node)
    if info.kind in ("int", "uint"):
        return x
    if info.kind != "float":
        raise _refuse(f"{node.name} of {node.args[0].dtype}", "use numbers")
    fn = _floor_double if node.name == "floor" else _ceil_double
    if info.bits == 64:
        return fn(x)
    return f"CAST({fn(f'CAST({x} AS DOUBLE)')} AS FLOAT)"


def _double_arg(node: Call, i: int = 0) -> str:
    arg = node.args[i]
    kind = _info(arg.dtype).kind
    if kind not in ("int", "uint", "float", "bool"):
        raise _refuse(f"{node.name!r} of {arg.dtype}", "use numbers")
    return _arg(arg, _float64())


def _require_float64(node: Call) -> None:
    if _name(node.dtype) != "Float64":
        raise _refuse(f"{node.name!r} computed in {node.dtype}",
                      "cast the argument to Float64 first")


def _sqrt(node: Call) -> str:
    x = _double_arg(node)
    if _name(node.dtype) == "Float32":  # a correctly rounded sqrt survives double rounding
        return f"CAST(sqrt({x}) AS FLOAT)"
    _require_float64(node)
    return f"sqrt({x})"


def _libm(spark_name: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        _require_float64(node)
        return f"{spark_name}({_double_arg(node)})"
    return build


def _exact_unary(spark_name: str) -> Callable[[Call], str]:
    """degrees/radians: one multiplication by the same constant in Java and Rust (exact)."""
    return _libm(spark_name)


def _ln(v: str) -> str:
    """Natural log as Polars computes it: −inf at ±0, NaN below 0 (Spark's ln gives NULL)."""
    return (f"(CASE WHEN {v} > 0 THEN ln({v}) WHEN {v} = 0 THEN {_NINF} "
            f"WHEN {v} < 0 THEN {_NAN} END)")


def _divide_by_zero(numerator: str) -> str:
    """IEEE ``numerator / +0.0`` (Spark's division raises or gives NULL)."""
    return (f"(CASE WHEN {numerator} IS NULL THEN NULL "
            f"WHEN isnan({numerator}) OR {numerator} = 0 THEN {_NAN} "
            f"WHEN {numerator} > 0 THEN {_INF} ELSE {_NINF} END)")


def _log(node: Call) -> str:
    """``ln(x) / ln(base)`` (the reference's formula). A literal base's logarithm is computed
    here with the platform's libm, as Polars computes it."""
    _require_float64(node)
    lx = _ln(_double_arg(node))
    base = node.args[1]
    if isinstance(base, Lit):
        if base.value is None:
            return _typed_null(node.dtype)
        value = float(base.value)
        lb = (math.log(value) if value > 0 else -math.inf if value == 0 else math.nan)
        if lb == 1.0:
            return lx
        if lb == 0.0:
            return _divide_by_zero(lx)
        return f"({lx} / {_double(lb)})"
    lbase = _ln(_double_arg(node, 1))
    return f"(CASE WHEN {lbase} = 0 THEN {_divide_by_zero(lx)} ELSE {lx} / {lbase} END)"


def _log1p(node: Call) -> str:
    _require_float64(node)
    x = _double_arg(node)
    return (f"(CASE WHEN {x} = -1 THEN {_NINF} WHEN {x} < -1 THEN {_NAN} "
            f"ELSE log1p({x}) END)")


def _pow(node: Call) -> str:
    """Float64 ``power`` with C's special cases where Java's differ: ``1 ** y`` is 1 for every
    y (NaN included) and ``(-1) ** ±inf`` is 1. An integer power (the reference's exact,
    checked integer power) or a Float32 one has no exact Spark form: refused."""
    if _name(node.dtype) != "Float64":
        raise _refuse(f"'**' typed {node.dtype} (an exact integer or Float32 power)",
                      "cast an operand to Float64 first: nw.col(...).cast(nw.Float64) ** y")
    x, y = _double_arg(node, 0), _double_arg(node, 1)
    return (f"(CASE WHEN {x} = 1 AND {y} IS NOT NULL THEN 1D "
            f"WHEN {x} = -1 AND abs({y}) = {_INF} THEN 1D ELSE power({x}, {y}) END)")


def _sign(node: Call) -> str:
    x, info = _subject(node)
    if info.kind in ("int", "uint"):
        return f"CAST(signum({x}) AS {_info(node.dtype).sql})"
    if info.kind == "float":
        return "signum(" + x + ")" if info.bits == 64 else f"CAST(signum({x}) AS FLOAT)"
    raise _refuse(f"sign of {node.args[0].dtype}", "use numbers")


def _fill_null(node: Call) -> str:
    return f"coalesce({_arg(node.args[0], node.dtype)}, {_arg(node.args[1], node.dtype)})"


def _coalesce(node: Call) -> str:
    _info(node.dtype)
    return "coalesce(" + ", ".join(_arg(a, node.dtype) for a in node.args) + ")"


def _table(node: Call, i: int, dtype: Any) -> list[Any]:
    """Literal list ``i`` cast to ``dtype`` the way Polars casts it (strictly: a value that
    does not convert makes the reference raise, so the tree is refused)."""
    import polars as pl

    arg = node.args[i]
    values = _literal_arg(node, i)
    if not isinstance(values, list):
        values = [values]
    inner = getattr(arg.dtype, "inner", None) or arg.dtype
    try:
        series = pl.Series(values, dtype=inner, strict=False).cast(dtype, strict=True)
    except Exception:
        raise _refuse(f"{node.name!r} with a table whose values do not fit {dtype} (the "
                      "reference raises)", "give values of the column's type") from None
    out: list[Any] = series.to_list()
    return out


def _replace(node: Call) -> str:
    """``CASE`` over the literal table; a missing value matches a missing key, NaN matches NaN
    and 0.0 matches -0.0 (Spark's ``=`` on doubles, as Polars' hash lookup)."""
    subject = node.args[0]
    x = _arg(subject, node.dtype)
    old = _table(node, 1, node.dtype)
    new = _table(node, 2, node.dtype)
    if len(new) == 1 and len(old) != 1:
        new = new * len(old)
    if len(old) != len(new):
        raise _refuse("replace with tables of different lengths", "give one new value per old")
    keys = [_hashable(v) for v in old]
    if len(set(keys)) != len(keys):
        raise _refuse("replace with duplicate old values (the reference raises)",
                      "list each old value once")
    pairs = [(o, n) for o, n in zip(old, new, strict=True) if o is not None]
    null_new = [n for o, n in zip(old, new, strict=True) if o is None]
    inner = x
    if pairs:
        whens = " ".join(f"WHEN {_literal(o, node.dtype)} THEN {_literal(n, node.dtype)}"
                         for o, n in pairs)
        inner = f"(CASE {x} {whens} ELSE {x} END)"
    if null_new:
        return f"(CASE WHEN {x} IS NULL THEN {_literal(null_new[0], node.dtype)} ELSE {inner} END)"
    return inner


def _hashable(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value == 0:
            return 0.0
    return value


def _horizontal_extreme(node: Call) -> str:
    """Largest (smallest) non-missing argument. Floats: NaN is skipped unless every present
    argument is NaN; among arguments equal to the result, the last one is returned (it decides
    the sign of a zero), as the reference's fold does."""
    info = _info(node.dtype)
    args = [_arg(a, node.dtype) for a in node.args]
    fn = "greatest" if node.name == "max_horizontal" else "least"
    if len(args) == 1:
        return args[0]
    if info.kind != "float":
        if info.kind not in ("int", "uint", "bool", "str", "date", "datetime", "decimal"):
            raise _refuse(f"{node.name} of {node.dtype}", "use numbers, strings or dates")
        return f"{fn}({', '.join(args)})"
    null = f"CAST(NULL AS {info.sql})"
    m = f"{fn}({', '.join(f'nanvl({a}, {null})' for a in args)})"
    any_nan = " OR ".join(f"isnan({a})" for a in args)
    last_zero = " ".join(f"WHEN {a} = 0 THEN {a}" for a in reversed(args))
    nan = _NAN if info.bits == 64 else f"CAST({_NAN} AS FLOAT)"
    return (f"(CASE WHEN {m} IS NULL THEN (CASE WHEN {any_nan} THEN {nan} END) "
            f"WHEN {m} = 0 THEN (CASE {last_zero} END) ELSE {m} END)")


def _halves(terms: list[str]) -> str:
    """The sum of ``terms`` associated as the reference adds them: the sum of the first half
    (``len // 2`` terms) plus the sum of the rest, recursively (float addition is not
    associative)."""
    if len(terms) == 1:
        return terms[0]
    middle = len(terms) // 2
    return f"({_halves(terms[:middle])} + {_halves(terms[middle:])})"


def _sum_horizontal(node: Call) -> str:
    info = _info(node.dtype)
    ignore_nulls = bool(node.params[0]) if node.params else True
    if info.kind == "float":
        zero = f"CAST(0 AS {info.sql})"
        terms = [_arg(a, node.dtype) for a in node.args]
        if ignore_nulls:
            terms = [f"coalesce({t}, {zero})" for t in terms]
        return _halves(terms)
    if info.kind not in ("int", "uint"):
        raise _refuse(f"sum_horizontal with a {node.dtype} result", "sum numbers")
    terms = []
    for a in node.args:
        if _info(a.dtype).kind not in ("int", "uint", "bool"):
            raise _refuse(f"sum_horizontal of {a.dtype} into {node.dtype}", "cast first")
        term = f"CAST({_arg(a)} AS DECIMAL(20,0))"  # exact: no sum of 64-bit values overflows
        terms.append(f"coalesce({term}, CAST(0 AS DECIMAL(20,0)))" if ignore_nulls else term)
    return _fit(f"try_cast(({' + '.join(terms)}) AS BIGINT)", node.dtype)


def _mean_horizontal(node: Call) -> str:
    """Sum of the present arguments (added as the reference adds them, missing ones as 0)
    divided by their number; NULL when none is present (or, without ``ignore_nulls``, when
    one is missing)."""
    _require_float64(node)
    ignore_nulls = bool(node.params[0]) if node.params else True
    terms = []
    for a in node.args:
        info = _info(a.dtype)
        if not (info.kind in ("bool", "null") or (info.kind == "float" and info.bits == 64)
                or (info.kind in ("int", "uint") and info.hi < 2**32)):
            raise _refuse(f"mean_horizontal of {a.dtype} values (the reference's integer sum "
                          "can wrap)", "cast the arguments to Float64 first")
        terms.append(_arg(a, _float64()))
    if not ignore_nulls:
        return f"({_halves(terms)} / {_double(len(terms))})"
    total = _halves([f"coalesce({t}, 0D)" for t in terms])
    count = " + ".join(f"(CASE WHEN {t} IS NULL THEN 0D ELSE 1D END)" for t in terms)
    return f"(CASE WHEN ({count}) = 0 THEN NULL ELSE ({total}) / ({count}) END)"


def _kleene(word: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        return "(" + f" {word} ".join(_boolean(a) for a in node.args) + ")"
    return build


def _is_null(negate: bool) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        x = _arg(node.args[0])
        return f"({x} IS NOT NULL)" if negate else f"({x} IS NULL)"
    return build


def _float_predicate(kind: str) -> Callable[[Call], str]:
    """is_nan / is_not_nan / is_finite / is_infinite: NULL for a missing value; integers are
    never NaN or infinite."""
    def build(node: Call) -> str:
        x, info = _subject(node)
        if info.kind in ("int", "uint"):
            answer = "TRUE" if kind in ("not_nan", "finite") else "FALSE"
            return f"(CASE WHEN {x} IS NULL THEN NULL ELSE {answer} END)"
        if info.kind != "float":
            raise _refuse(f"{node.name!r} of {node.args[0].dtype}", "use numbers")
        test = {"nan": f"isnan({x})", "not_nan": f"NOT isnan({x})",
                "finite": f"NOT isnan({x}) AND abs({x}) != {_INF}",
                "infinite": f"abs({x}) = {_INF}"}[kind]
        return f"(CASE WHEN {x} IS NULL THEN NULL ELSE {test} END)"
    return build


def _not(node: Call) -> str:
    x, info = _subject(node)
    if info.kind in ("bool", "null"):
        return f"(NOT {x})"
    if info.kind == "int":
        return f"(~ {x})"
    if info.kind == "uint":
        return f"CAST({info.hi} - {x} AS {info.sql})"
    raise _refuse(f"not of {node.args[0].dtype}", "use booleans or integers")


def _is_between(node: Call) -> str:
    closed = str(node.params[0]) if node.params else "both"
    if closed not in ("both", "left", "right", "none"):
        raise _refuse(f"is_between(closed={closed!r})", "use both, left, right or none")
    lo_op = ">=" if closed in ("both", "left") else ">"
    hi_op = "<=" if closed in ("both", "right") else "<"
    x1, lo = _comparable(node.args[0], node.args[1])
    x2, hi = _comparable(node.args[0], node.args[2])
    return f"(({x1} {lo_op} {lo}) AND ({x2} {hi_op} {hi}))"


def _is_in(node: Call) -> str:
    """``x IN (items)`` over the present items; a missing x is NULL, or, with
    ``nulls_equal``, whether the list holds a missing item."""
    x, source = _arg(node.args[0]), node.args[0].dtype
    info = _info(source)
    if info.kind == "null":
        return "CAST(NULL AS BOOLEAN)"
    items = _table(node, 1, source)
    nulls_equal = bool(node.params[0]) if node.params else False
    present = [v for v in items if v is not None]
    test = ("FALSE" if not present else
            f"{x} IN ({', '.join(_literal(v, source) for v in present)})")
    missing = ("TRUE" if None in items else "FALSE") if nulls_equal else "NULL"
    return f"(CASE WHEN {x} IS NULL THEN {missing} ELSE {test} END)"


# -- strings -----------------------------------------------------------------------------

#: The characters Rust's ``char::is_whitespace`` (Unicode White_Space) accepts, which Polars'
#: ``strip_chars()`` removes by default.
_WHITESPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
               "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_REGEX_META = frozenset("\\.+*?()|[]{}^$")
_MAX_INT = 2**31 - 1


def _string_subject(node: Call) -> str:
    x, info = _subject(node)
    if info.kind not in ("str", "null"):
        raise _refuse(f"{node.name!r} of {node.args[0].dtype}", "cast to String first")
    return x


def _pattern(node: Call, literal_flag: int | None) -> str | None:
    """A literal pattern argument; a regular expression is accepted only when it has no
    metacharacter (then it matches literally in every regex engine)."""
    value = _literal_arg(node, 1)
    if value is None:
        return None
    pattern = str(value)
    literal = literal_flag is None or bool(node.params[literal_flag])
    if not literal and any(c in _REGEX_META for c in pattern):
        raise _refuse(f"the regular expression {pattern!r} in {node.name!r} (Java's regex "
                      "engine can read it differently from Polars')",
                      "pass literal=True, or a pattern without regex metacharacters")
    return pattern


def _contains(node: Call) -> str:
    s = _string_subject(node)
    p = _pattern(node, 0)
    return _typed_null(node.dtype) if p is None else f"contains({s}, {_string(p)})"


def _affix(fn: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        s = _string_subject(node)
        p = _literal_arg(node, 1)
        return _typed_null(node.dtype) if p is None else f"{fn}({s}, {_string(str(p))})"
    return build


def _length(fn: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        return f"CAST({fn}({_string_subject(node)}) AS {_info(node.dtype).sql})"
    return build


def _clamp(value: int) -> int:
    """A literal position or length clamped to ±2^40: strings have fewer than 2^31
    characters, so the result is the same and no arithmetic overflows."""
    return max(-(2**40), min(2**40, int(value)))


def _substring(s: str, start: str, end: str) -> str:
    """Characters [start, end) of s, with start and end BIGINT expressions already within
    [0, char_length(s)]."""
    return f"substr({s}, CAST({start} + 1 AS INT), CAST(greatest({end} - {start}, 0) AS INT))"


def _slice(node: Call) -> str:
    """Polars' ``str.slice``: a negative offset counts from the end; start and end
    (start + length) are clipped to the string."""
    s = _string_subject(node)
    offset, length = _literal_arg(node, 1), _literal_arg(node, 2)
    if offset is None:
        return _typed_null(node.dtype)
    if length is not None and int(length) < 0:
        raise _refuse("str.slice with a negative length (the reference raises)",
                      "give a length ≥ 0")
    n = f"CAST(char_length({s}) AS BIGINT)"
    off = _clamp(offset)
    begin = f"CAST({off} AS BIGINT)" if off >= 0 else f"({n} + {off})"
    stop = n if length is None else f"({begin} + {_clamp(length)})"
    start = f"least(greatest({begin}, 0), {n})"
    end = f"least(greatest({stop}, 0), {n})"
    # least/greatest skip NULLs: a missing string must not reach the casts to INT
    return f"(CASE WHEN {s} IS NOT NULL THEN {_substring(s, start, end)} END)"


def _head_tail(node: Call) -> str:
    s = _string_subject(node)
    count = _literal_arg(node, 1)
    if count is None:
        return _typed_null(node.dtype)
    k = _clamp(count)
    n = f"CAST(char_length({s}) AS BIGINT)"
    head = node.name.endswith("Head")
    if k >= 0:
        width = min(k, _MAX_INT)
        return f"left({s}, {width})" if head else f"right({s}, {width})"
    if head:  # all but the last |k| characters
        return f"substr({s}, 1, CAST(greatest({n} + {k}, 0) AS INT))"
    return f"substr({s}, {min(-k, _MAX_INT - 1) + 1})"  # all but the first |k|


def _strip(where: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        s = _string_subject(node)
        chars = _literal_arg(node, 1)
        chars = _WHITESPACE if chars is None else str(chars)
        return f"trim({where} {_string(chars)} FROM {s})"
    return build


def _strip_affix(node: Call) -> str:
    s = _string_subject(node)
    p = _literal_arg(node, 1)
    if p is None:
        return _typed_null(node.dtype)
    p = str(p)
    lit, n = _string(p), len(p)
    if node.name.endswith("Prefix"):
        return f"(CASE WHEN startswith({s}, {lit}) THEN substr({s}, {n + 1}) ELSE {s} END)"
    return (f"(CASE WHEN endswith({s}, {lit}) THEN substr({s}, 1, char_length({s}) - {n}) "
            f"ELSE {s} END)")


def _str_to_integer(node: Call) -> str:
    """Polars' ``str.to_integer(base)``: an optional sign and at least one digit of the base
    (ASCII, either case), nothing else; out of Int64 range → NULL. Base 10 uses Spark's cast
    after the same check; other bases convert with ``conv`` in pieces that cannot overflow."""
    s = _string_subject(node)
    base = int(_literal_arg(node, 1))
    if base == 10:
        value = f"(CASE WHEN {s} RLIKE {_string(_INT_TEXT)} THEN try_cast({s} AS BIGINT) END)"
        return value if _name(node.dtype) == "Int64" else _fit(value, node.dtype)
    digits = f"0-{base - 1}" if base <= 10 else (
        f"0-9a-{chr(ord('a') + base - 11)}A-{chr(ord('A') + base - 11)}")
    shape = _string(rf"^[+-]?[{digits}]+\z")
    body = (f"(CASE WHEN startswith({s}, '+') OR startswith({s}, '-') THEN substr({s}, 2) "
            f"ELSE {s} END)")
    d = f"trim(LEADING '0' FROM {body})"
    most = 1  # the most digits whose value always fits 64 unsigned bits (conv's range)
    while base ** (most + 1) <= 2**64:
        most += 1
    dec = "DECIMAL(21,0)"
    value = (f"(CASE WHEN char_length({d}) = 0 THEN CAST(0 AS {dec}) "
             f"WHEN char_length({d}) <= {most} THEN CAST(conv({d}, {base}, 10) AS {dec}) "
             f"WHEN char_length({d}) = {most + 1} THEN "
             f"CAST(conv(left({d}, 1), {base}, 10) AS {dec}) * CAST({base**most} AS {dec}) + "
             f"CAST(conv(substr({d}, 2), {base}, 10) AS {dec}) END)")
    signed = f"(CASE WHEN startswith({s}, '-') THEN negative({value}) ELSE {value} END)"
    return _fit(f"(CASE WHEN {s} RLIKE {shape} THEN try_cast({signed} AS BIGINT) END)",
                node.dtype)


def _replace_str(node: Call) -> str:
    s = _string_subject(node)
    n = int(node.params[0])
    pattern = _pattern(node, 1)
    value = _literal_arg(node, 2)
    if pattern is None or value is None:
        raise _refuse("str.replace with a missing pattern or value", "give literal strings")
    value = str(value)
    if not bool(node.params[1]) and "$" in value:
        raise _refuse("str.replace with '$' in the replacement of a regex pattern (group "
                      "references)", "pass literal=True")
    if pattern == "":
        raise _refuse("str.replace with an empty pattern", "give a non-empty pattern")
    p, v = _string(pattern), _string(value)
    if n < 0:
        return f"replace({s}, {p}, {v})"
    if n != 1:
        raise _refuse(f"str.replace(n={n})", "replace the first (n=1) or every match")
    at = f"instr({s}, {p})"
    return (f"(CASE WHEN {at} = 0 THEN {s} ELSE concat(substr({s}, 1, {at} - 1), {v}, "
            f"substr({s}, {at} + {len(pattern)})) END)")


def _concat_str(node: Call) -> str:
    separator, ignore_nulls = str(node.params[0]), bool(node.params[1])
    args = [_arg(a, node.dtype) for a in node.args]
    if ignore_nulls:
        return f"concat_ws({_string(separator)}, {', '.join(args)})"
    sep = _string(separator)
    parts = []
    for i, a in enumerate(args):
        if i and separator:
            parts.append(sep)
        parts.append(a)
    return f"concat({', '.join(parts)})"


def _width(node: Call) -> int:
    width = _literal_arg(node, 1)
    if not isinstance(width, int) or not 0 <= width <= 4096:
        raise _refuse(f"{node.name!r} to width {width!r}", "use a literal width ≤ 4096")
    return width


def _zfill(node: Call) -> str:
    """Zeros after a leading sign; strings at least ``width`` characters long unchanged."""
    s = _string_subject(node)
    w = _width(node)
    return (f"(CASE WHEN char_length({s}) >= {w} THEN {s} "
            f"WHEN startswith({s}, '-') OR startswith({s}, '+') "
            f"THEN concat(left({s}, 1), lpad(substr({s}, 2), {max(w - 1, 0)}, '0')) "
            f"ELSE lpad({s}, {w}, '0') END)")


def _pad(node: Call) -> str:
    s = _string_subject(node)
    w = _width(node)
    fill = str(node.params[0])
    if len(fill) != 1:
        raise _refuse(f"padding with {fill!r}", "pad with one character")
    fn = "lpad" if node.name.endswith("PadStart") else "rpad"
    return f"(CASE WHEN char_length({s}) >= {w} THEN {s} ELSE {fn}({s}, {w}, {_string(fill)}) END)"


def _count_matches(node: Call) -> str:
    s = _string_subject(node)
    p = _pattern(node, 0)
    if p is None:
        return _typed_null(node.dtype)
    if p == "":
        count = f"(char_length({s}) + 1)"
    else:  # the non-overlapping matches are what replace() removes, left to right
        count = f"((char_length({s}) - char_length(replace({s}, {_string(p)}, ''))) div {len(p)})"
    return f"CAST({count} AS {_info(node.dtype).sql})"


def _find(node: Call) -> str:
    """Byte offset (UTF-8) of the first match, NULL when there is none."""
    s = _string_subject(node)
    p = _pattern(node, 0)
    sql = _info(node.dtype).sql
    if p is None:
        return _typed_null(node.dtype)
    if p == "":
        return f"(CASE WHEN {s} IS NULL THEN NULL ELSE CAST(0 AS {sql}) END)"
    at = f"instr({s}, {_string(p)})"
    return (f"(CASE WHEN {at} = 0 THEN NULL "
            f"ELSE CAST(octet_length(substr({s}, 1, {at} - 1)) AS {sql}) END)")


def _case(fn: str) -> Callable[[Call], str]:
    def build(node: Call) -> str:
        return f"{fn}({_string_subject(node)})"
    return build


# -- dates and times -----------------------------------------------------------------------

#: Temporal fields: the Spark expression of the naive local time ``{t}`` (or a date), and
#: whether it exists for dates.
_FIELDS: dict[str, tuple[str, bool]] = {
    "Year": ("year({t})", True), "Month": ("month({t})", True), "Day": ("day({t})", True),
    "Hour": ("hour({t})", False), "Minute": ("minute({t})", False),
    "Second": ("second({t})", False),
    "Millisecond": ("(CAST(extract(SECOND FROM {t}) * 1000 AS INT) % 1000)", False),
    "Microsecond": ("(CAST(extract(SECOND FROM {t}) * 1000000 AS INT) % 1000000)", False),
    "Nanosecond": ("((CAST(extract(SECOND FROM {t}) * 1000000 AS INT) % 1000000) * 1000)",
                   False),
    "Weekday": ("(weekday({t}) + 1)", True), "Week": ("weekofyear({t})", True),
    "Quarter": ("quarter({t})", True), "OrdinalDay": ("dayofyear({t})", True),
    "IsoYear": ("extract(YEAROFWEEK FROM {t})", True),
}


def _temporal_subject(node: Call) -> tuple[str, _Info, str]:
    """The subject, its type, and the guard 'inside chrono's range' (Polars gives NULL, or
    panics, outside it)."""
    x, info = _subject(node)
    if info.kind == "date":
        return x, info, _days_guard(x, *_CHRONO_DAYS)
    if info.kind == "datetime":
        if info.tz is not None:
            local = _local_ntz(x, info)  # already NULL outside the range
            return local, info, f"{local} IS NOT NULL"
        return x, info, _days_guard(f"CAST({x} AS DATE)", *_CHRONO_DAYS)
    raise _refuse(f"{node.name!r} of {node.args[0].dtype}", "use dates or datetimes")


def _field(part: str) -> Callable[[Call], str]:
    template, on_dates = _FIELDS[part]

    def build(node: Call) -> str:
        t, info, guard = _temporal_subject(node)
        if info.kind == "date" and not on_dates:
            raise _refuse(f"dt.{part.lower()}() of a Date (the reference raises)",
                          "use it on datetimes")
        value = template.format(t=t)
        return f"(CASE WHEN {guard} THEN CAST({value} AS {_info(node.dtype).sql}) END)"
    return build


def _date_part(node: Call) -> str:
    x, info = _subject(node)
    if info.kind == "date":
        return x
    if info.kind == "datetime":
        return f"CAST({_local_ntz(x, info)} AS DATE)"
    raise _refuse(f"dt.date() of {node.args[0].dtype}", "use dates or datetimes")


def _leap_year(node: Call) -> str:
    t, _, guard = _temporal_subject(node)
    y = f"year({t})"
    return (f"(CASE WHEN {guard} THEN ({y} % 4 = 0 AND {y} % 100 != 0) OR {y} % 400 = 0 "
            "END)")


#: dt.truncate intervals: Spark ``trunc`` unit for dates (None: the day itself) and how many
#: days truncation can go back (to keep away from the edge of Spark's range).
_CALENDAR_UNITS = {"1d": (None, 0), "1w": ("WEEK", 6), "1mo": ("MM", 30),
                   "1q": ("QUARTER", 91), "1y": ("YEAR", 365)}
#: sub-day intervals: microseconds to remove, from the second-of-minute ``{s}`` (µs) and ``{t}``
_CLOCK_UNITS = {
    "1h": "minute({t}) * CAST(60000000 AS BIGINT) + {s}",
    "1m": "{s}",
    "1s": "{s} % 1000000",
    "1ms": "{s} % 1000",
    "1us": None, "1ns": None,
}


def _safe_days_guard(day: str, dtype: Any) -> str:
    """The reference's safe days for truncation (:func:`dpframe.rowwise.calendar.safe_days`)."""
    from dpframe.rowwise.calendar import safe_days

    days = safe_days(dtype)
    assert days is not None
    return f"unix_date({day}) BETWEEN {days[0]} AND {days[1]}"


def _truncate(node: Call) -> str:
    """``dt.truncate`` to one calendar unit (day, Monday-start week, month, quarter, year) or
    clock unit (hour, minute, second, millisecond; microsecond and nanosecond leave
    microsecond values as they are). The reference computes day, week and clock units
    arithmetically on the stored integer, for any value; so does this, except within a year of
    the bottom of Spark's range, where the result would not be representable (NULL; the
    reference wraps around there)."""
    x, info = _subject(node)
    every = _literal_arg(node, 1)
    if info.kind not in ("date", "datetime") or (info.kind == "datetime" and info.tz):
        raise _refuse(f"dt.truncate of {node.args[0].dtype}",
                      "truncate dates or datetimes without a time zone")
    if every not in _CALENDAR_UNITS and every not in _CLOCK_UNITS:
        raise _refuse(f"dt.truncate({every!r})", "truncate to one unit: '1us', '1ms', '1s', "
                      "'1m', '1h', '1d', '1w', '1mo', '1q' or '1y'")
    # the reference computes only values whose day lies in its safe days (about ±200,000
    # years: chrono's calendar fails beyond), missing elsewhere; the same days here
    if info.kind == "date":
        unit, _back = _CALENDAR_UNITS.get(every, (None, 0))
        result = x if unit is None else f"trunc({x}, '{unit}')"
        return f"(CASE WHEN {_safe_days_guard(x, node.args[0].dtype)} THEN {result} END)"
    day = f"CAST({x} AS DATE)"
    guard = _safe_days_guard(day, node.args[0].dtype)
    if every in _CALENDAR_UNITS:
        unit, _back = _CALENDAR_UNITS[every]
        start = day if unit is None else f"trunc({day}, '{unit}')"
        return f"(CASE WHEN {guard} THEN CAST({start} AS TIMESTAMP_NTZ) END)"
    template = _CLOCK_UNITS[every]
    if template is None:
        return f"(CASE WHEN {guard} THEN {x} END)"
    second = f"CAST(extract(SECOND FROM {x}) * 1000000 AS BIGINT)"
    drop = template.format(t=x, s=second)
    return f"(CASE WHEN {guard} THEN timestampadd(MICROSECOND, -({drop}), {x}) END)"


# -- the catalogue -------------------------------------------------------------------------

_CALLS: dict[str, Callable[[Call], str]] = {
    "abs": _abs, "negate": _negate, "clip": _clip, "round": _round,
    "floor": _floor_ceil, "ceil": _floor_ceil, "sqrt": _sqrt,
    "cbrt": _libm("cbrt"), "exp": _libm("exp"), "log": _log, "log1p": _log1p, "pow": _pow,
    "sign": _sign,
    **{name: _libm(spark) for name, spark in (
        ("sin", "sin"), ("cos", "cos"), ("tan", "tan"), ("arcsin", "asin"),
        ("arccos", "acos"), ("arctan", "atan"), ("sinh", "sinh"), ("cosh", "cosh"),
        ("tanh", "tanh"))},
    "degrees": _exact_unary("degrees"), "radians": _exact_unary("radians"),
    "fill_null": _fill_null, "replace": _replace, "coalesce": _coalesce,
    "max_horizontal": _horizontal_extreme, "min_horizontal": _horizontal_extreme,
    "sum_horizontal": _sum_horizontal, "mean_horizontal": _mean_horizontal,
    "BooleanFunction.AllHorizontal": _kleene("AND"),
    "BooleanFunction.AnyHorizontal": _kleene("OR"),
    "BooleanFunction.IsNull": _is_null(False), "BooleanFunction.IsNotNull": _is_null(True),
    "BooleanFunction.IsNan": _float_predicate("nan"),
    "BooleanFunction.IsNotNan": _float_predicate("not_nan"),
    "BooleanFunction.IsFinite": _float_predicate("finite"),
    "BooleanFunction.IsInfinite": _float_predicate("infinite"),
    "BooleanFunction.Not": _not, "BooleanFunction.IsBetween": _is_between,
    "BooleanFunction.IsIn": _is_in,
    "StringFunction.Uppercase": _case("upper"), "StringFunction.Lowercase": _case("lower"),
    "StringFunction.Contains": _contains,
    "StringFunction.StartsWith": _affix("startswith"),
    "StringFunction.EndsWith": _affix("endswith"),
    "StringFunction.LenChars": _length("char_length"),
    "StringFunction.LenBytes": _length("octet_length"),
    "StringFunction.Slice": _slice, "StringFunction.Head": _head_tail,
    "StringFunction.Tail": _head_tail,
    "StringFunction.StripChars": _strip("BOTH"),
    "StringFunction.StripCharsStart": _strip("LEADING"),
    "StringFunction.StripCharsEnd": _strip("TRAILING"),
    "StringFunction.StripPrefix": _strip_affix, "StringFunction.StripSuffix": _strip_affix,
    "StringFunction.ToInteger": _str_to_integer, "StringFunction.Replace": _replace_str,
    "StringFunction.ConcatHorizontal": _concat_str, "StringFunction.ZFill": _zfill,
    "StringFunction.PadStart": _pad, "StringFunction.PadEnd": _pad,
    "StringFunction.CountMatches": _count_matches, "StringFunction.Find": _find,
    **{f"TemporalFunction.{part}": _field(part) for part in _FIELDS},
    "TemporalFunction.WeekDay": _field("Weekday"),  # the name in Polars' plans
    "TemporalFunction.Date": _date_part, "TemporalFunction.IsLeapYear": _leap_year,
    "TemporalFunction.Truncate": _truncate,
}

#: Why the catalogue's other functions are refused, and what to use instead.
_REFUSED = {
    "round_sig_figs": "Spark cannot reproduce its rounding exactly; use round(decimals)",
    "StringFunction.Titlecase": "Spark's initcap splits words differently; use "
                                "str.to_uppercase / str.to_lowercase",
    "StringFunction.Reverse": "Polars reverses grapheme clusters, Spark code points",
    "TemporalFunction.Time": "Spark has no time-of-day type; use dt.hour() / dt.minute() / "
                             "dt.second()",
    "TemporalFunction.Round": "use dt.truncate",
    **{f"ListFunction.{f}": "list columns are not supported on Spark; explode or aggregate "
       "them before protecting the frame" for f in ("Length", "Sum", "Mean", "Max", "Min",
                                                      "Contains")},
}

#: The catalogue's functions this target compiles (each exactly as the reference computes it,
#: except the last bits of :data:`LIBM_FUNCTIONS`).
SUPPORTED: frozenset[str] = frozenset(name for name in _CALLS if name in FUNCTIONS)


def _search_edges(node: Call) -> str:
    """:data:`~dpframe.rowwise.functions.SEARCH_EDGES` as a branch-free binary search
    (:func:`~dpframe.rowwise.functions.search_steps`): ``aggregate`` over the ⌈log₂ k⌉ step
    sizes, each comparing one element of the edges with the value. The edges are one string
    literal of their exact ``repr`` texts, split and cast to ``ARRAY<DOUBLE>`` once (Java's
    correctly rounded parse). Spark compares ``-0.0`` equal to ``0.0`` and sorts NaN above
    every number; a missing value makes the comparison NULL, so no step is taken (0). The
    ``CASE`` tests ``i + s > k`` first, so ``element_at`` never reads past the end (it would
    raise under ANSI mode)."""
    edges = node.params[0]
    if not edges:
        return "CAST(0 AS BIGINT)"
    count = len(edges)
    x = _arg(node.args[0], _float64())
    table = ("CAST(split('" + ",".join(repr(float(e)) for e in edges)
             + "', ',') AS ARRAY<DOUBLE>)")
    steps = "array(" + ", ".join(f"CAST({s} AS BIGINT)" for s in search_steps(count)) + ")"
    return (f"aggregate({steps}, CAST(0 AS BIGINT), (__dp_i, __dp_s) -> __dp_i + (CASE "
            f"WHEN __dp_i + __dp_s > {count} THEN CAST(0 AS BIGINT) "
            f"WHEN element_at({table}, CAST(__dp_i + __dp_s AS INT)) <= {x} THEN __dp_s "
            "ELSE CAST(0 AS BIGINT) END))")


#: dpframe's internal functions (not in the catalogue, so not in SUPPORTED).
_CALLS[SEARCH_EDGES] = _search_edges
#: Supported functions that some argument types still make unavailable (refused by ``check``).
PARTIAL: dict[str, str] = {"pow": "Float64 only", "round": "not on Float32",
                           "TemporalFunction.Truncate": "one unit: 1d, 1mo, 1h, ..."}


def check(expr: RowExpr) -> None:
    """Raise :class:`~dpframe.errors.DerivationError` if ``expr`` cannot be compiled for Spark
    under the total rules (a function, type, pattern or cast Spark cannot reproduce exactly,
    or that could fail on some value). Reads no data. A
    :data:`~dpframe.rowwise.functions.SEARCH_EDGES` node is checked as :func:`apply_step` runs
    it (its subject compiled, the search itself a hidden Bucketizer column), so the length of
    its edges' literal never counts against :data:`MAX_SQL_CHARS`."""
    searches = [node for node in walk(expr)
                if isinstance(node, Call) and node.name == SEARCH_EDGES]
    for node in searches:
        _arg(node.args[0], _float64())
    to_sql(_replaced(expr, {id(node): Cast(node.dtype, Col(_float64(), "__dp_bucket"))
                            for node in searches}))


def to_sql(expr: RowExpr) -> str:
    """One Spark SQL expression computing ``expr`` under dpframe's total rules, valid with ANSI
    mode on or off; its type is the Spark type of the reference's result type."""
    sql, dtype = _value(expr)
    info = _info(dtype)
    if info.kind == "uint":
        raise _refuse(f"a {dtype} result (Spark has no unsigned integers)",
                      "cast the result to Int64")
    return sql


def apply_step(frame: Any, kind: str, predicate: RowExpr | None,
               columns: Sequence[tuple[str, RowExpr]]) -> Any:
    """One verified step on a Spark DataFrame.

    ``filter``: the rows where the predicate is TRUE (NULL drops the row); ``with_columns``:
    every existing column in order, replaced ones in place, new ones appended (Polars'
    ``with_columns``, matching names exactly); ``select``: exactly ``columns``, in order."""
    from pyspark.sql import functions as F  # noqa: N812

    if kind == "filter":
        assert predicate is not None
        dtype = _value(predicate)[1]
        if _info(dtype).kind not in ("bool", "null"):
            raise _refuse(f"a filter on a {dtype} value", "filter on a boolean predicate")
        return frame.filter(F.expr(to_sql(predicate)))
    existing = list(frame.columns)
    frame, columns = _bucketized(frame, columns)
    compiled = [(name, F.expr(to_sql(tree)).alias(name)) for name, tree in columns]
    if kind == "select":
        return frame.select([column for _, column in compiled])
    if kind != "with_columns":
        raise ValueError(f"unknown step kind {kind!r}")
    replaced = dict(compiled)
    out = [replaced[name] if name in replaced  # copied columns are not parsed as SQL
           else F.col("`" + name.replace("`", "``") + "`") for name in existing]
    out += [column for name, column in compiled if name not in existing]
    return frame.select(out)


def _bucketized(frame: Any, columns: Sequence[tuple[str, RowExpr]]
                ) -> tuple[Any, list[tuple[str, RowExpr]]]:
    """``frame`` with every :data:`~dpframe.rowwise.functions.SEARCH_EDGES` of ``columns``
    computed first by Spark MLlib's ``Bucketizer`` (a binary search in the JVM, O(log k) per
    row), into hidden columns the trees then read. The SQL form (:func:`_search_edges`) gives
    the same bins but Spark rebuilds its array for every row, O(k) per row.

    The same semantics: splits ``[-inf, e_1, …, e_m, +inf]`` make bucket ``j`` the number of
    edges ≤ x (the last bucket closed, so ``+inf`` is in it); the value is read as
    ``CASE WHEN x = 0 THEN 0.0 ELSE x END`` first, since the JVM's binary search orders
    ``-0.0`` below ``0.0``. ``handleInvalid="keep"`` puts NaN in an extra bucket and a missing
    value gives a missing bucket: no value raises (``histogram`` masks both anyway)."""
    searches = [node for _, tree in columns for node in walk(tree)
                if isinstance(node, Call) and node.name == SEARCH_EDGES and node.params[0]]
    if not searches:
        return frame, list(columns)
    import secrets

    from pyspark.ml.feature import Bucketizer
    from pyspark.sql import functions as F  # noqa: N812

    tag = secrets.token_hex(4)
    done: dict[int, RowExpr] = {}
    for i, node in enumerate(searches):
        if id(node) in done:
            continue
        source, bucket = f"__dp_x{i}_{tag}", f"__dp_bucket{i}_{tag}"
        x = _arg(node.args[0], _float64())
        frame = frame.withColumn(source, F.expr(
            f"CASE WHEN {x} = CAST(0 AS DOUBLE) THEN CAST(0 AS DOUBLE) ELSE {x} END"))
        splits = [-math.inf, *(float(e) for e in node.params[0]), math.inf]
        frame = Bucketizer(splits=splits, inputCol=source, outputCol=bucket,
                           handleInvalid="keep").transform(frame)
        done[id(node)] = Cast(node.dtype, Col(_float64(), bucket))
    return frame, [(name, _replaced(tree, done)) for name, tree in columns]


def _replaced(node: RowExpr, done: dict[int, RowExpr]) -> RowExpr:
    """``node`` with the nodes in ``done`` (by identity) replaced."""
    import dataclasses

    if id(node) in done:
        return done[id(node)]
    if isinstance(node, Binary):
        return dataclasses.replace(node, left=_replaced(node.left, done),
                                   right=_replaced(node.right, done))
    if isinstance(node, Cast):
        return dataclasses.replace(node, expr=_replaced(node.expr, done))
    if isinstance(node, When):
        return dataclasses.replace(node, predicate=_replaced(node.predicate, done),
                                   then=_replaced(node.then, done),
                                   otherwise=_replaced(node.otherwise, done))
    if isinstance(node, Call):
        return dataclasses.replace(node, args=tuple(_replaced(a, done) for a in node.args))
    return node
