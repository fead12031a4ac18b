"""Compiling a verified row-wise tree into a Polars expression that no value can make fail.

Polars is the engine of Polars frames, of pandas frames (whose derivations dpframe evaluates
in Polars, :mod:`dpframe.rowwise.pandas_eval`) and of Dask partitions. The tree is Polars'
own plan, so most nodes map to the same Polars call; the exceptions are the places where
Polars fails or wraps on some values, rewritten to dpframe's total rules
(:mod:`dpframe.rowwise.functions`):

* integer ``+ - * // %`` run in Int128 (no two 64-bit integers overflow it) and are cast back
  non-strict, so a result that does not fit is null, never wrapped (Polars wraps);
* ``/``, and ``//`` and ``%`` on floats, are null where the divisor is zero;
* ``abs`` and negation of the smallest signed integer are null (Polars wraps);
* ``**`` of integers is exact and checked (Polars raises on a negative exponent and wraps);
  of floats, with an exponent read from a column, C's ``pow`` element by element;
* a float cast to a Decimal is missing where the value has too many digits (Polars raises);
* a subexpression a guard must read twice is computed once into a hidden column.
* every cast is non-strict, ``str.to_integer`` too.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

from dpframe.rowwise.calendar import PER_DAY, safe_days
from dpframe.rowwise.engines import RowwiseTarget
from dpframe.rowwise.functions import SEARCH_EDGES
from dpframe.rowwise.nodes import Binary, Call, Cast, Col, Lit, RowExpr, When, walk
from dpframe.rowwise.reading import int_range

__all__ = ["SUPPORTED", "TARGET", "PolarsTarget", "apply_step", "to_polars"]


class _Compiler:
    """Compiles one step's trees. A compiled subexpression that a rule must read twice (a
    guard and the value it guards) is first computed once into a hidden column (a *let*),
    unless it is a column or a literal: written twice inline, nested guards would double the
    expression at every level."""

    def __init__(self) -> None:
        self.lets: list[tuple[str, Any]] = []
        self._prefix = f"__dp_let_{secrets.token_hex(4)}_"

    def compile(self, expr: RowExpr) -> Any:
        """The Polars expression computing ``expr`` under dpframe's total rules."""
        import polars as pl

        if isinstance(expr, Col):
            return pl.col(expr.name)
        if isinstance(expr, Lit):
            return _literal(expr)
        if isinstance(expr, Cast):
            return self.cast(expr)
        if isinstance(expr, When):
            return pl.when(self.compile(expr.predicate)).then(self.compile(expr.then)
                                                              ).otherwise(
                self.compile(expr.otherwise))
        if isinstance(expr, Binary):
            return _binary(self, expr)
        assert isinstance(expr, Call)
        return _CALLS[expr.name](self, expr, [self.compile(a) for a in expr.args])

    def once(self, compiled: Any, node: RowExpr) -> Any:
        """``compiled`` (the compilation of ``node``) as something cheap to read twice."""
        import polars as pl

        inner = node.expr if isinstance(node, Cast) else node
        if isinstance(inner, Col | Lit):
            return compiled
        name = f"{self._prefix}{len(self.lets)}"
        self.lets.append((name, compiled))
        return pl.col(name)

    def cast(self, expr: Cast) -> Any:
        """A non-strict cast. Polars' one from a float to a Decimal still raises on a value
        with too many digits: such values are made missing first."""
        import polars as pl

        inner = self.compile(expr.expr)
        source, target = expr.expr.dtype, expr.dtype
        if (source == pl.Date or isinstance(source, pl.Datetime)) and (
                target == pl.String or getattr(source, "time_zone", None)):
            # formatting (or a zoned value's calendar) panics beyond chrono's range
            inner = _temporal_safe(self.once(inner, expr.expr), source)
        if isinstance(target, pl.Decimal) and source.is_float():
            inner = self.once(inner, expr.expr)
            digits = (target.precision or 38) - (target.scale or 0)
            largest = float(10**digits - 1) * (1.0 - 1e-15)  # below the largest it can hold
            inner = pl.when(inner.abs() <= largest).then(inner)
        return inner.cast(target, strict=False)


def to_polars(expr: RowExpr) -> Any:
    """The Polars expression computing ``expr`` alone (no hidden columns needed)."""
    compiler = _Compiler()
    out = compiler.compile(expr)
    if compiler.lets:
        raise ValueError("this tree needs hidden columns: apply it with apply_step")
    return out


def _literal(expr: Lit) -> Any:
    import polars as pl

    if expr.value is None:
        return pl.lit(None, dtype=expr.dtype)
    return pl.lit(expr.value, dtype=expr.dtype)


def _is_int(dtype: Any) -> bool:
    return bool(dtype.is_integer())


def _checked(result: Any, dtype: Any) -> Any:
    """An integer computed in Int128, brought to ``dtype``: null where it does not fit."""
    import polars as pl

    return result if dtype == pl.Int128 else result.cast(dtype, strict=False)


def _binary(c: _Compiler, expr: Binary) -> Any:
    import polars as pl

    left, right = c.compile(expr.left), c.compile(expr.right)
    op = expr.op
    if op in _COMPARE:
        return _COMPARE[op](left, right)
    if op == "Plus" and expr.dtype == pl.String:
        return left + right
    arith = _ARITH[op]
    if _is_int(expr.dtype):
        return _checked_int(c, expr, left, right)
    if op in ("TrueDivide", "FloorDivide", "Modulus"):
        if not _reads_column(expr.right):
            # Polars divides by a scalar as a multiplication by its reciprocal (off by one ulp
            # for a third of the values), except on a one-row frame: the result would depend
            # on how many rows a filter kept. A full-length divisor divides exactly (IEEE).
            right = right + pl.int_range(pl.len(), dtype=pl.Int64).cast(
                expr.right.dtype) * 0
        divisor = expr.right.value if isinstance(expr.right, Lit) else None
        if isinstance(divisor, int | float) and not isinstance(divisor, bool):
            # a literal divisor: zero is missing on every row, anything else divides as is
            return arith(left, right) if divisor != 0 else pl.lit(None, dtype=expr.dtype)
        right = c.once(right, expr.right)
        return pl.when(right != 0).then(arith(left, right))
    return arith(left, right)


def _reads_column(expr: RowExpr) -> bool:

    return any(isinstance(node, Col) for node in walk(expr))


def _checked_int(c: _Compiler, expr: Binary, left: Any, right: Any) -> Any:
    """Integer ``left op right`` whose result is null where it does not fit ``expr.dtype``.

    Polars' own integer ``//`` and ``%`` already follow Python's rules and give null for a zero
    divisor; only ``MIN // -1`` overflows (it wraps), so it is masked. ``+ - *`` with a literal
    operand run natively where the other operand lies in the exact range (Python integers)
    that keeps the result in the type, and are null elsewhere; two columns run in Int128 (no
    two 64-bit integers overflow it) and are cast back non-strict. The guards cost ~0.1 ms per
    million rows, Int128 about 4 ms."""
    import polars as pl

    dtype, op = expr.dtype, expr.op
    if op in ("FloorDivide", "Modulus"):
        if op == "FloorDivide" and dtype.is_signed_integer():
            smallest = _smallest(dtype)
            left, right = c.once(left, expr.left), c.once(right, expr.right)
            return pl.when((left != smallest) | (right != -1)).then(left // right)
        return _ARITH[op](left, right)
    same = expr.left.dtype == dtype and expr.right.dtype == dtype and dtype != pl.Int128
    literal = _int_literal(expr.right) if same else None
    if literal is not None:
        return _guarded(c.once(left, expr.left), op, literal, dtype, literal_on_left=False)
    literal = _int_literal(expr.left) if same else None
    if literal is not None:
        return _guarded(c.once(right, expr.right), op, literal, dtype, literal_on_left=True)
    return _checked(_ARITH[op](left.cast(pl.Int128), right.cast(pl.Int128)), dtype)


def _int_literal(node: RowExpr) -> int | None:
    if isinstance(node, Lit) and isinstance(node.value, int) and not isinstance(
            node.value, bool):
        return int(node.value)
    return None


def _guarded(x: Any, op: str, c: int, dtype: Any, *, literal_on_left: bool) -> Any:
    """``x op c`` (or ``c op x``) where x's exact range keeps the result in ``dtype``."""
    import polars as pl


    lo, hi = int_range(dtype)
    if op == "Plus":
        x_lo, x_hi = lo - c, hi - c
    elif op == "Minus" and not literal_on_left:  # x - c
        x_lo, x_hi = lo + c, hi + c
    elif op == "Minus":  # c - x
        x_lo, x_hi = c - hi, c - lo
    elif c == 0:  # x * 0
        x_lo, x_hi = lo, hi
    elif c > 0:
        x_lo, x_hi = -((-lo) // c), hi // c
    else:
        x_lo, x_hi = -((-hi) // c), lo // c
    x_lo, x_hi = max(x_lo, lo), min(x_hi, hi)
    if x_lo > x_hi:
        return pl.lit(None, dtype=dtype)
    literal = pl.lit(c, dtype=dtype)
    result = (literal - x if literal_on_left else x - literal) if op == "Minus" else \
        _ARITH[op](x, literal)
    if (x_lo, x_hi) == (lo, hi):
        return result
    return pl.when(x.is_between(x_lo, x_hi)).then(result)


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "Eq": lambda a, b: a == b, "NotEq": lambda a, b: a != b, "Lt": lambda a, b: a < b,
    "LtEq": lambda a, b: a <= b, "Gt": lambda a, b: a > b, "GtEq": lambda a, b: a >= b,
    "EqValidity": lambda a, b: a.eq_missing(b), "NotEqValidity": lambda a, b: a.ne_missing(b),
    "And": lambda a, b: a & b, "Or": lambda a, b: a | b, "Xor": lambda a, b: a ^ b,
    "LogicalAnd": lambda a, b: a & b, "LogicalOr": lambda a, b: a | b,
}
_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "Plus": lambda a, b: a + b, "Minus": lambda a, b: a - b, "Multiply": lambda a, b: a * b,
    "TrueDivide": lambda a, b: a / b, "FloorDivide": lambda a, b: a // b,
    "Modulus": lambda a, b: a % b,
}


def _smallest(dtype: Any) -> int:

    return int_range(dtype)[0]


def _abs(c: _Compiler, node: Call, a: list[Any]) -> Any:
    import polars as pl

    if node.dtype.is_signed_integer():
        x = c.once(a[0], node.args[0])
        return pl.when(x != _smallest(node.dtype)).then(x.abs())
    return a[0].abs()


def _negate(c: _Compiler, node: Call, a: list[Any]) -> Any:
    import polars as pl

    if node.dtype.is_signed_integer():
        x = c.once(a[0], node.args[0])
        return pl.when(x != _smallest(node.dtype)).then(-x)
    if node.dtype.is_integer():  # unsigned: only 0 has a negation that fits
        return _checked(pl.lit(0, dtype=pl.Int128) - a[0].cast(pl.Int128), node.dtype)
    return -a[0]


def _clip(c: _Compiler, node: Call, a: list[Any]) -> Any:
    has_lower, has_upper = node.params[0], node.params[1]
    rest = iter(a[1:])
    lower = next(rest) if has_lower else None
    upper = next(rest) if has_upper else None
    return a[0].clip(lower, upper)


def _pow(c: _Compiler, node: Call, a: list[Any]) -> Any:
    """Floats: the power in the plan's float type — Polars' own for a literal exponent (a fixed
    function of the literal), C's ``pow`` for an exponent read from a column (Polars takes its
    literal shortcut there too when a frame has one row, which would make a row's result
    depend on how many rows a filter kept). Integers: the exact power, checked like every
    integer operator: Polars raises on a negative exponent and wraps on overflow, so the
    exponent is missing outside [0, 2^32) and the result is computed in Int128 where a
    Float64 estimate says it is far below 2^100 (exact there), then cast back non-strict to
    the plan's type (missing if it does not fit)."""
    import polars as pl

    if not _is_int(node.dtype):
        if _reads_column(node.args[1]):
            return _c_pow(a[0], a[1], node.dtype)
        return a[0].cast(node.dtype).pow(a[1].cast(node.dtype))
    base = c.once(a[0], node.args[0])
    exponent = c.once(a[1], node.args[1])
    safe = exponent.cast(pl.UInt32, strict=False)
    estimate = base.cast(pl.Float64).abs().pow(safe.cast(pl.Float64))
    exact = pl.when(estimate < 2.0**100).then(base.cast(pl.Int128).pow(safe))
    return _checked(exact, node.dtype)


def _c_pow(base: Any, exponent: Any, dtype: Any) -> Any:
    """``base ** exponent`` element by element with Polars' column kernel (C's ``pow``) on
    every batch, a one-row batch included (padded to two rows, so that Polars does not take
    its scalar shortcut): the same bits for every row whatever the frame's height."""
    import polars as pl

    def power(pair: Any) -> Any:
        x, y = pair.struct.field("b"), pair.struct.field("e")
        if len(x) == 1:
            x, y = x.extend_constant(1.0, 1), y.extend_constant(1.0, 1)
            return (x ** y).head(1).alias(pair.name)
        return (x ** y).alias(pair.name)

    pair = pl.struct(base.cast(dtype).alias("b"), exponent.cast(dtype).alias("e"))
    return pair.map_batches(power, return_dtype=dtype, is_elementwise=True)


def _sum_horizontal(c: _Compiler, node: Call, a: list[Any]) -> Any:
    import polars as pl

    ignore_nulls = bool(node.params[0]) if node.params else True
    if _is_int(node.dtype):
        total = pl.sum_horizontal([x.cast(pl.Int128) for x in a], ignore_nulls=ignore_nulls)
        return _checked(total, node.dtype)
    return pl.sum_horizontal(a, ignore_nulls=ignore_nulls)


def _list_sum(c: _Compiler, node: Call, a: list[Any]) -> Any:
    import polars as pl

    if _is_int(node.dtype):
        return _checked(a[0].cast(pl.List(pl.Int128)).list.sum(), node.dtype)
    return a[0].list.sum()


def _raw(node: Call, i: int) -> Any:
    """The Python value of literal argument ``i`` (lists for tables, strings for patterns)."""
    arg = node.args[i]
    assert isinstance(arg, Lit)
    return arg.value


def _concat(c: _Compiler, node: Call, a: list[Any]) -> Any:
    import polars as pl

    return pl.concat_str(a, separator=node.params[0], ignore_nulls=bool(node.params[1]))


def _replace_str(c: _Compiler, node: Call, a: list[Any]) -> Any:
    n, literal = node.params[0], bool(node.params[1])
    if n == 1:
        return a[0].str.replace(a[1], a[2], literal=literal)
    return a[0].str.replace_all(a[1], a[2], literal=literal)


def _method(path: str, *params: int) -> Callable[[_Compiler, Call, list[Any]], Any]:
    """``subject.<path>(*other args)``, plus the named plan options in ``params``."""
    def build(c: _Compiler, node: Call, a: list[Any]) -> Any:
        target = a[0]
        for part in path.split("."):
            target = getattr(target, part)
        return target(*a[1:], *(node.params[i] for i in params))
    return build


def _horizontal(name: str) -> Callable[[_Compiler, Call, list[Any]], Any]:
    def build(c: _Compiler, node: Call, a: list[Any]) -> Any:
        import polars as pl

        return getattr(pl, name)(a)
    return build


def _mean_horizontal(c: _Compiler, node: Call, a: list[Any]) -> Any:
    """The mean in Float64: Polars sums 64-bit integers in their own type first (wrapping)."""
    import polars as pl

    floats = [x if arg.dtype.is_float() else x.cast(pl.Float64)
              for x, arg in zip(a, node.args, strict=True)]
    return pl.mean_horizontal(floats,
                              ignore_nulls=bool(node.params[0]) if node.params else True)


def _temporal_safe(x: Any, dtype: Any) -> Any:
    """``x`` where its day lies in :func:`safe_days`, missing elsewhere."""
    import polars as pl

    days = safe_days(dtype)
    if days is None:
        return x
    per_day = PER_DAY["date" if dtype == pl.Date else str(dtype.time_unit)]
    lo, hi = days[0] * per_day, (days[1] + 1) * per_day - 1
    return pl.when(x.to_physical().is_between(lo, hi)).then(x)


def _zoned_safe(path: str) -> Callable[[_Compiler, Call, list[Any]], Any]:
    """``subject.<path>()``; a datetime with a time zone is first limited to the safe days
    (its calendar conversions panic on values beyond chrono's range)."""
    method = _method(path)

    def build(c: _Compiler, node: Call, a: list[Any]) -> Any:
        dtype = node.args[0].dtype
        if getattr(dtype, "time_zone", None):
            a = [_temporal_safe(c.once(a[0], node.args[0]), dtype), *a[1:]]
        return method(c, node, a)
    return build


def _truncate_or_round(method: str) -> Callable[[_Compiler, Call, list[Any]], Any]:
    """Truncating or rounding to a literal interval (at most a year, checked when read), on
    the values every engine can compute (:func:`safe_days`); the others are missing."""
    def build(c: _Compiler, node: Call, a: list[Any]) -> Any:
        subject = _temporal_safe(c.once(a[0], node.args[0]), node.args[0].dtype)
        return getattr(subject.dt, method)(str(_raw(node, 1)))
    return build


_CALLS: dict[str, Callable[[_Compiler, Call, list[Any]], Any]] = {
    "abs": _abs, "negate": _negate, "clip": _clip, "pow": _pow,
    "round": lambda c, n, a: a[0].round(n.params[0], mode=n.params[1]),
    "round_sig_figs": lambda c, n, a: a[0].round_sig_figs(n.params[0]),
    **{name: _method(name) for name in (
        "floor", "ceil", "sqrt", "cbrt", "exp", "log1p", "sign", "sin", "cos", "tan",
        "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "degrees", "radians")},
    "log": lambda c, n, a: a[0].log(a[1]),
    "fill_null": lambda c, n, a: a[0].fill_null(a[1]),
    "replace": lambda c, n, a: a[0].replace(_raw(n, 1), _raw(n, 2)),
    "coalesce": _horizontal("coalesce"),
    "max_horizontal": _horizontal("max_horizontal"),
    "min_horizontal": _horizontal("min_horizontal"),
    "sum_horizontal": _sum_horizontal,
    "mean_horizontal": _mean_horizontal,
    "BooleanFunction.IsNull": _method("is_null"),
    "BooleanFunction.IsNotNull": _method("is_not_null"),
    "BooleanFunction.IsNan": _method("is_nan"),
    "BooleanFunction.IsNotNan": _method("is_not_nan"),
    "BooleanFunction.IsFinite": _method("is_finite"),
    "BooleanFunction.IsInfinite": _method("is_infinite"),
    "BooleanFunction.Not": lambda c, n, a: ~a[0],
    "BooleanFunction.IsBetween": lambda c, n, a: a[0].is_between(a[1], a[2], closed=n.params[0]),
    "BooleanFunction.IsIn": lambda c, n, a: a[0].is_in(_raw(n, 1), nulls_equal=bool(n.params[0])),
    "StringFunction.Uppercase": _method("str.to_uppercase"),
    "StringFunction.Lowercase": _method("str.to_lowercase"),
    "StringFunction.Titlecase": _method("str.to_titlecase"),
    "StringFunction.Contains": lambda c, n, a: a[0].str.contains(
        _raw(n, 1), literal=bool(n.params[0]), strict=False),
    "StringFunction.StartsWith": _method("str.starts_with"),
    "StringFunction.EndsWith": _method("str.ends_with"),
    "StringFunction.LenChars": _method("str.len_chars"),
    "StringFunction.LenBytes": _method("str.len_bytes"),
    "StringFunction.Slice": _method("str.slice"),
    "StringFunction.Head": _method("str.head"),
    "StringFunction.Tail": _method("str.tail"),
    "StringFunction.StripChars": _method("str.strip_chars"),
    "StringFunction.StripCharsStart": _method("str.strip_chars_start"),
    "StringFunction.StripCharsEnd": _method("str.strip_chars_end"),
    "StringFunction.StripPrefix": _method("str.strip_prefix"),
    "StringFunction.StripSuffix": _method("str.strip_suffix"),
    "StringFunction.ToInteger": lambda c, n, a: a[0].str.to_integer(base=_raw(n, 1),
                                                                 strict=False),
    "StringFunction.Replace": _replace_str,
    "StringFunction.ConcatHorizontal": _concat,
    "StringFunction.ZFill": lambda c, n, a: a[0].str.zfill(_raw(n, 1)),
    "StringFunction.PadStart": lambda c, n, a: a[0].str.pad_start(_raw(n, 1), n.params[0]),
    "StringFunction.PadEnd": lambda c, n, a: a[0].str.pad_end(_raw(n, 1), n.params[0]),
    "StringFunction.Reverse": _method("str.reverse"),
    "StringFunction.CountMatches": lambda c, n, a: a[0].str.count_matches(
        _raw(n, 1), literal=bool(n.params[0])),
    "StringFunction.Find": lambda c, n, a: a[0].str.find(
        _raw(n, 1), literal=bool(n.params[0]), strict=False),
    **{f"TemporalFunction.{t}": _zoned_safe(f"dt.{m}") for t, m in (
        ("Year", "year"), ("Month", "month"), ("Day", "day"), ("Hour", "hour"),
        ("Minute", "minute"), ("Second", "second"), ("Millisecond", "millisecond"),
        ("Microsecond", "microsecond"), ("Nanosecond", "nanosecond"),
        ("WeekDay", "weekday"), ("Week", "week"), ("Quarter", "quarter"),
        ("OrdinalDay", "ordinal_day"), ("IsoYear", "iso_year"), ("Date", "date"),
        ("Time", "time"), ("IsLeapYear", "is_leap_year"))},
    "TemporalFunction.Truncate": _truncate_or_round("truncate"),
    "TemporalFunction.Round": _truncate_or_round("round"),
    "ListFunction.Length": _method("list.len"),
    "ListFunction.Sum": _list_sum,
    "ListFunction.Mean": _method("list.mean"),
    "ListFunction.Max": _method("list.max"),
    "ListFunction.Min": _method("list.min"),
    "ListFunction.Contains": lambda c, n, a: a[0].list.contains(_raw(n, 1)),
}

#: The functions this target compiles (all of the catalogue).
SUPPORTED = frozenset(_CALLS)


def _search_edges(c: _Compiler, node: Call, a: list[Any]) -> Any:
    """:data:`~dpframe.rowwise.functions.SEARCH_EDGES`: Polars' binary search of each value
    in the sorted public edges, ``side="right"`` (the number of edges ≤ x; Polars compares
    ``-0.0`` equal to ``0.0`` and sorts NaN above every number; a missing value gives 0).
    Total: any Float64 value, missing or not, has an index."""
    import polars as pl

    edges = node.params[0]
    if not edges:
        return pl.lit(0, dtype=pl.Int64)
    table = pl.lit(pl.Series(values=[float(e) for e in edges], dtype=pl.Float64))
    return table.search_sorted(a[0], side="right").cast(pl.Int64)


#: dpframe's internal functions (not in the catalogue, so not in SUPPORTED).
_CALLS[SEARCH_EDGES] = _search_edges


def apply_step(frame: Any, kind: str, predicate: RowExpr | None,
               columns: Sequence[tuple[str, RowExpr]]) -> Any:
    """One verified step on a Polars ``DataFrame`` or ``LazyFrame`` (the hidden columns the
    compilation needs are added first and dropped after)."""
    compiler = _Compiler()
    if kind == "filter":
        assert predicate is not None
        exprs = [compiler.compile(predicate)]
    else:
        exprs = [compiler.compile(e).alias(name) for name, e in columns]
    for name, expr in compiler.lets:
        frame = frame.with_columns(expr.alias(name))
    hidden = [name for name, _ in compiler.lets]
    if kind == "filter":
        out = frame.filter(exprs[0])
    elif kind == "with_columns":
        out = frame.with_columns(exprs)
    else:
        return frame.select(exprs)
    return out.drop(hidden) if hidden else out


class PolarsTarget(RowwiseTarget):
    """Polars eager frames and lazy plans: each step through :func:`apply_step`."""

    label = "Polars"

    def apply(self, native: Any, step: Any, schema: Any) -> Any:
        return apply_step(native, step.kind, step.predicate, step.columns)


#: the compiler the Polars adapters name (``Backend.rowwise``)
TARGET = PolarsTarget()
