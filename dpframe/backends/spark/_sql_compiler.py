"""Spark row-wise SQL: the compiler of one node (columns, literals, casts, ``when``, operators),
dispatching function calls to the table :mod:`._rowwise` fills.

* integer ``+ - *`` are checked in the result type: ``try_add``/``try_subtract``/
  ``try_multiply`` on BIGINT, then ``try_cast`` to the node's type (a 64-bit result that does
  not fit is NULL, and so is a narrower one); ``//`` rounds toward −∞ and ``%`` takes the sign of
  the divisor (Python's rules), a zero divisor gives NULL, for integers and floats; ``/`` is a
  float division with NULL for a zero divisor (an IEEE division, also by a literal);
* comparisons need no rewriting: Spark and Polars both order NaN above every number and equal
  to itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpframe.backends.spark._sql_casts import _convert
from dpframe.backends.spark._sql_types import (
    MAX_SQL_CHARS,
    _fit,
    _floor_double,
    _Info,
    _info,
    _is_pow_mismatch,
    _literal,
    _name,
    _quote,
    _refuse,
)
from dpframe.rowwise.functions import FUNCTIONS
from dpframe.rowwise.nodes import Binary, Call, Cast, Col, Lit, RowExpr, When, walk


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


#: The table of functions, filled by :mod:`._rowwise` (which imports every handler).
_CALLS: dict[str, Callable[[Call], str]] = {}
