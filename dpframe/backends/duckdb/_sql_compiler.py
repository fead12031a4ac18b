"""DuckDB row-wise SQL: the compiler of one tree (columns, literals, casts, ``when``, operators),
in the types the Polars reference gives every node.

* every cast is non-strict (``TRY_CAST``); floats are truncated toward zero before they become
  integers (DuckDB rounds); a Float64 too large for Float32 becomes ±inf (DuckDB raises);
  strings are parsed only in the forms Polars accepts (DuckDB also takes spaces, ``_``, hex,
  exponents in integers); coarser time units round down (DuckDB rounds to nearest);
* integer ``+ - * // %`` are exact and checked: computed in the result type, where DuckDB
  raises on overflow and ``TRY`` makes that a missing value, or in 128 bits when an operand
  is wider, then brought back with ``TRY_CAST``; ``//`` rounds toward −∞ and ``%`` takes the
  divisor's sign (DuckDB truncates); a zero divisor gives a missing value, for floats too;
* comparisons already agree (NaN equals NaN and is above every number in both); strings
  compare byte by byte (``COLLATE "binary"``, whatever the connection's collation).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Mapping
from typing import Any

from dpframe.backends.duckdb._sql_types import (
    _F32_INF,
    _F32_MAX,
    _FIRST_DAY,
    _INTS,
    _LAST_DAY,
    _MICROS_PER_DAY,
    _PER_SECOND,
    _TEMPORAL_LITERALS,
    _double,
    _dtype,
    _duck,
    _ident,
    _int,
    _is_float32,
    _kind,
    _micros,
    _name,
    _null,
    _reference_types,
    _RefusalError,
    _signed,
    _text,
    _unit,
)
from dpframe.rowwise.functions import FUNCTIONS, INTERNAL, OPERATORS
from dpframe.rowwise.nodes import Binary, Call, Cast, Col, Lit, RowExpr, When


def _is_simple(sql: str) -> bool:
    """Short enough to repeat (an identifier, a literal, a small expression)."""
    return len(sql) <= 160


class _Compiler:
    """Compiles one tree; ``sql(node)`` is DuckDB SQL whose type corresponds to the node's
    reference dtype."""

    def __init__(self, expr: RowExpr, calls: Mapping[str, Handler]) -> None:
        self.types = _reference_types(expr)
        self.calls = calls
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
        handler = self.calls.get(node.name)
        if handler is None or (node.name not in FUNCTIONS and node.name not in INTERNAL):
            api = FUNCTIONS[node.name].api if node.name in FUNCTIONS else node.name
            raise _RefusalError(f"{api}", _INSTEAD.get(node.name, "use a Polars frame for this "
                                                  "derivation"))
        return handler(self, node)

    def literal(self, value: Any, dtype: Any) -> str:
        """An exactly typed literal."""
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
        temporal = _TEMPORAL_LITERALS.get(kind)
        sql = temporal(value, dtype) if temporal is not None else None
        if sql is None:
            raise _RefusalError(f"the literal {value!r} of type {dtype}", "use a number, "
                                "string, boolean, date or naive datetime literal")
        return sql

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
        to = {"int": self.cast_to_int, "bool": _cast_to_bool, "str": _cast_to_str,
              "decimal": _cast_to_decimal, "date": self.cast_to_date,
              "datetime": self.cast_to_datetime, "time": self.cast_to_time}.get(d)
        converted = to(sql, src, dst, target) if to is not None else None
        if converted is not None:
            return converted
        raise _RefusalError(f"casting {src} to {dst}", _CAST_INSTEAD.get((s, d), "cast through a "
                            "type DuckDB and Polars convert alike (numbers, booleans, integers to "
                            "String), or use a Polars frame"))

    # Each cast to one destination kind (``target``: its DuckDB type): the SQL, or None if the
    # source kind does not convert (then ``cast`` refuses).

    def cast_to_int(self, sql: str, src: Any, dst: Any, target: str) -> str | None:
        s = _kind(src)
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
        return None

    def cast_to_date(self, sql: str, src: Any, dst: Any, target: str) -> str | None:
        s = _kind(src)
        if s in ("int", "bool"):
            return self.from_physical(sql, src, dst)
        if s == "datetime":
            return self.to_date(sql, src)
        return None

    def cast_to_datetime(self, sql: str, src: Any, dst: Any, target: str) -> str | None:
        s = _kind(src)
        if s in ("int", "bool"):
            return self.from_physical(sql, src, dst)
        if s in ("date", "datetime"):
            return self.to_datetime(sql, src, dst)
        return None

    def cast_to_time(self, sql: str, src: Any, dst: Any, target: str) -> str | None:
        return self.time_of(sql, src) if _kind(src) == "datetime" else None

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


def _cast_to_bool(sql: str, src: Any, dst: Any, target: str) -> str | None:
    return f"({sql} <> 0)" if _kind(src) in ("int", "float", "decimal") else None


def _cast_to_str(sql: str, src: Any, dst: Any, target: str) -> str | None:
    s = _kind(src)
    if s in ("int", "bool"):
        return f"CAST({sql} AS VARCHAR)"
    if s == "decimal":  # DuckDB writes 0.5 as .5 when precision = scale
        return f"regexp_replace(CAST({sql} AS VARCHAR), '^(-?)\\.', '\\10.')"
    return None


def _cast_to_decimal(sql: str, src: Any, dst: Any, target: str) -> str | None:
    s = _kind(src)
    if s == "int":
        return f"TRY_CAST({sql} AS {target})"
    if s == "decimal":  # fewer decimals: half to even, as Polars
        scale = getattr(dst, "scale", 0)
        if scale < getattr(src, "scale", 0):
            return f"TRY_CAST(round_even({sql}, {scale}) AS {target})"
        return f"TRY_CAST({sql} AS {target})"
    return None


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


Handler = Callable[[_Compiler, Call], str]


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
