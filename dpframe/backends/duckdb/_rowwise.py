"""Compiling a verified row-wise tree into one DuckDB SQL expression that no value can make fail.

DuckDB relations are derived in DuckDB itself. What every node computes is fixed by the Polars
target (:mod:`dpframe.rowwise.polars_target`, dpframe's reference); this module writes the same
computation in DuckDB's SQL so that a DuckDB result equals the Polars one value for value
(floats to the last bit), with missing values in the same rows and the corresponding column
type. Where DuckDB's own rules differ from Polars', the SQL is rewritten; each rewrite is stated
in the module that writes it:

* :mod:`._sql_compiler`: casts, ``when``, comparisons and integer arithmetic;
* :mod:`._sql_numeric`: float, rounding, missing-value, horizontal and boolean functions;
* :mod:`._sql_strings` and :mod:`._sql_regex`: string functions and regular expressions;
* :mod:`._sql_temporal`: calendar parts and truncation;
* :mod:`._sql_types`: the dtypes and the exact SQL text of literals.

This module holds the table of functions (``_CALLS``) and the entry points.

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

from collections.abc import Sequence
from typing import Any

from dpframe.backends.duckdb._sql_compiler import Handler, _Compiler
from dpframe.backends.duckdb._sql_numeric import (
    _abs,
    _clip,
    _coalesce,
    _extreme,
    _fill_null,
    _float_predicate,
    _floor_ceil,
    _is_between,
    _is_in,
    _is_null,
    _log,
    _math,
    _mean_horizontal,
    _negate,
    _not,
    _pow,
    _replace,
    _round,
    _round_sig_figs,
    _sign,
    _sum_horizontal,
)
from dpframe.backends.duckdb._sql_strings import (
    _concat,
    _contains,
    _count_matches,
    _find,
    _head_tail,
    _length,
    _pad,
    _replace_string,
    _slice,
    _starts_ends,
    _string_fn,
    _strip,
    _strip_prefix,
    _strip_suffix,
    _to_integer,
    _zfill,
)
from dpframe.backends.duckdb._sql_temporal import _date, _leap, _part, _subsecond, _time, _truncate
from dpframe.backends.duckdb._sql_types import (
    _DEGREES,
    _NAN,
    _RADIANS,
    _dtype,
    _ident,
    _RefusalError,
)
from dpframe.rowwise.functions import FUNCTIONS, SEARCH_EDGES, search_steps
from dpframe.rowwise.nodes import Call, Col, RowExpr

__all__ = ["SUPPORTED", "apply_step", "check", "to_sql"]

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
        return _Compiler(expr, _CALLS).sql(expr)
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
