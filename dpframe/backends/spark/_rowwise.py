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
  reference gives a missing value.

The other rewrites are stated in the modules that write them: casts in :mod:`._sql_casts`,
operators in :mod:`._sql_compiler`, numeric functions in :mod:`._sql_numeric`, string functions
in :mod:`._sql_strings`, dates and times in :mod:`._sql_temporal`, literals and types in
:mod:`._sql_types`. This module holds the table of functions and the entry points.

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

import math
from collections.abc import Sequence
from typing import Any

from dpframe.backends.spark._sql_compiler import _CALLS, _arg, _value
from dpframe.backends.spark._sql_numeric import (
    _abs,
    _clip,
    _coalesce,
    _exact_unary,
    _fill_null,
    _float_predicate,
    _floor_ceil,
    _horizontal_extreme,
    _is_between,
    _is_in,
    _is_null,
    _kleene,
    _libm,
    _log,
    _log1p,
    _mean_horizontal,
    _negate,
    _not,
    _pow,
    _replace,
    _round,
    _sign,
    _sqrt,
    _sum_horizontal,
)
from dpframe.backends.spark._sql_strings import (
    _affix,
    _case,
    _concat_str,
    _contains,
    _count_matches,
    _find,
    _head_tail,
    _length,
    _pad,
    _replace_str,
    _slice,
    _str_to_integer,
    _strip,
    _strip_affix,
    _zfill,
)
from dpframe.backends.spark._sql_temporal import _FIELDS, _date_part, _field, _leap_year, _truncate
from dpframe.backends.spark._sql_types import LIBM_FUNCTIONS as LIBM_FUNCTIONS
from dpframe.backends.spark._sql_types import MAX_SQL_CHARS as MAX_SQL_CHARS
from dpframe.backends.spark._sql_types import _float64, _info, _refuse
from dpframe.rowwise.functions import FUNCTIONS, SEARCH_EDGES, search_steps
from dpframe.rowwise.nodes import Binary, Call, Cast, Col, RowExpr, When, walk

__all__ = ["SUPPORTED", "apply_step", "check", "to_sql"]

_CALLS.update({
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
})

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
