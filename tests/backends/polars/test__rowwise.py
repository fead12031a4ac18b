"""dpframe's total semantics, compiled for Polars, against an independent reference.

The reference is Python's own arithmetic on exact integers and IEEE doubles, with dpframe's
rules written out directly (a result that does not fit the result type is missing, a zero
divisor gives a missing value, floor division and modulo follow Python, ``**`` is a float
power). Every value pair of a grid of extreme values is checked, for every integer width.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import narwhals as nw
import polars as pl
import pytest

from dpframe.backends.polars._rowwise import apply_step
from dpframe.provenance import _derivations as derivations
from dpframe.rowwise.reading import int_range

INT_TYPES = [pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt32, pl.UInt64]


def _grid(dtype: Any) -> list[int]:
    lo, hi = int_range(dtype)
    picks = {lo, lo + 1, -7, -2, -1, 0, 1, 2, 3, 7, hi - 1, hi, hi // 2, lo // 2}
    return sorted(v for v in picks if lo <= v <= hi)


def _evaluate(schema: dict[str, Any], frame: pl.DataFrame, expr: Any) -> list[Any]:
    steps, _ = derivations.verify_expressions(schema, [expr.alias("out")], "with_columns")
    return apply_step(frame, steps[0].kind, None, steps[0].columns)["out"].to_list()


def _fits(value: int, dtype: Any) -> int | None:
    lo, hi = int_range(dtype)
    return value if lo <= value <= hi else None


def _floor_div(a: int, b: int) -> int | None:
    return None if b == 0 else a // b


def _mod(a: int, b: int) -> int | None:
    return None if b == 0 else a % b


OPS = {
    "+": (lambda x, y: x + y, lambda a, b: a + b),
    "-": (lambda x, y: x - y, lambda a, b: a - b),
    "*": (lambda x, y: x * y, lambda a, b: a * b),
    "//": (lambda x, y: x // y, _floor_div),
    "%": (lambda x, y: x % y, _mod),
}


@pytest.mark.parametrize("dtype", INT_TYPES, ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_integer_arithmetic_is_checked_in_the_result_type(dtype, op):
    values = _grid(dtype)
    pairs = list(itertools.product(values, values))
    frame = pl.DataFrame({"a": [a for a, _ in pairs], "b": [b for _, b in pairs]},
                         schema={"a": dtype, "b": dtype})
    build, exact = OPS[op]
    got = _evaluate({"a": dtype, "b": dtype}, frame, build(nw.col("a"), nw.col("b")))
    for (a, b), value in zip(pairs, got, strict=True):
        want = exact(a, b)
        want = None if want is None else _fits(want, dtype)
        assert value == want, (str(dtype), a, op, b, value, want)


@pytest.mark.parametrize("dtype", INT_TYPES, ids=str)
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("side", ["right", "left"])
def test_integer_arithmetic_with_a_literal_is_checked_exactly(dtype, op, side):
    """A literal operand takes a faster path (a range guard computed with Python integers):
    the same results as the reference, for every value and every literal of the grid."""
    values = _grid(dtype)
    frame = pl.DataFrame({"a": values}, schema={"a": dtype})
    build, exact = OPS[op]
    for c in values:
        literal = nw.lit(c, dtype=getattr(nw, str(dtype)))
        expr = build(nw.col("a"), literal) if side == "right" else build(literal, nw.col("a"))
        got = _evaluate({"a": dtype}, frame, expr)
        for a, value in zip(values, got, strict=True):
            want = exact(a, c) if side == "right" else exact(c, a)
            want = None if want is None else _fits(want, dtype)
            assert value == want, (str(dtype), a, op, c, side, value, want)


@pytest.mark.parametrize("dtype", [pl.Int8, pl.Int32, pl.Int64], ids=str)
def test_abs_and_negation_of_the_smallest_integer_are_missing(dtype):
    values = _grid(dtype)
    frame = pl.DataFrame({"a": values}, schema={"a": dtype})
    assert _evaluate({"a": dtype}, frame, nw.col("a").abs()) == [
        _fits(abs(v), dtype) for v in values]
    assert _evaluate({"a": dtype}, frame, -nw.col("a")) == [_fits(-v, dtype) for v in values]


FLOATS = [0.0, -0.0, 1.5, -2.5, 7.0, 1e308, -1e308, math.inf, -math.inf, 5e-324, 3.0]


def _same(x: float | None, y: float | None) -> bool:
    if x is None or y is None:
        return x is y
    return (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(
        1, y))


def _floor_quotient(a: float, b: float) -> float:
    import numpy as np

    return float(np.floor(np.float64(a) / np.float64(b)))  # keeps the sign of a zero


#: dpframe's float rules, written with Python's IEEE doubles: ``/`` divides, ``//`` is the
#: floor of the quotient, ``%`` is a − b·⌊a/b⌋ evaluated as written
FLOAT_RULES = {"/": lambda a, b: a / b, "//": _floor_quotient,
               "%": lambda a, b: a - b * _floor_quotient(a, b)}


@pytest.mark.parametrize("op", ["/", "//", "%"])
def test_float_division_by_zero_is_missing_and_otherwise_the_ieee_formula(op):
    """Every pair of extreme floats: a zero divisor is missing, anything else is the IEEE
    evaluation of the documented formula, bit for bit (signed zeros included)."""
    pairs = list(itertools.product(FLOATS, FLOATS))
    frame = pl.DataFrame({"a": [a for a, _ in pairs], "b": [b for _, b in pairs]})
    schema = {"a": pl.Float64, "b": pl.Float64}
    build = {"/": lambda x, y: x / y, "//": lambda x, y: x // y, "%": lambda x, y: x % y}[op]
    got = _evaluate(schema, frame, build(nw.col("a"), nw.col("b")))
    for (a, b), value in zip(pairs, got, strict=True):
        if b == 0:
            assert value is None, (a, op, b, value)
            continue
        with np_errstate():
            want = FLOAT_RULES[op](a, b)
        assert _same(value, want), (a, op, b, value, want)


def np_errstate() -> Any:
    import numpy as np

    return np.errstate(all="ignore")


def test_integer_powers_are_exact_and_checked_and_float_powers_are_ieee():
    bases = [2, -2, 3, -3, 0, 1, -1, 10, 7]
    exponents = [-1, 0, 1, 2, 39, 40, 62, 63, 64, 400]
    pairs = list(itertools.product(bases, exponents))
    frame = pl.DataFrame({"a": [a for a, _ in pairs], "b": [b for _, b in pairs]})
    got = _evaluate({"a": pl.Int64, "b": pl.Int64}, frame, nw.col("a") ** nw.col("b"))
    for (a, b), value in zip(pairs, got, strict=True):
        want = None if b < 0 else _fits(a**b, pl.Int64)
        assert value == want, (a, b, value, want)
    floats = pl.DataFrame({"x": [2.0, -8.0, 0.0, 1e308]})
    assert _evaluate({"x": pl.Float64}, floats, nw.col("x") ** -1) == [
        0.5, -0.125, math.inf, 2.0**-1 / 1e308 * 2.0]


def test_division_by_a_literal_is_ieee_division_whatever_the_rows():
    """Polars multiplies by the reciprocal of a scalar divisor on frames of several rows (one
    ulp off for a third of the values) but divides on a one-row frame; dpframe divides."""
    import numpy as np

    x = np.random.default_rng(0).normal(size=50_000) * 1e3
    frame = pl.DataFrame({"x": x})
    for divisor in (3.0, 7.0, 0.1, 1e-300):
        got = np.array(_evaluate({"x": pl.Float64}, frame, nw.col("x") / divisor))
        assert np.array_equal(got, x / divisor)
        one = _evaluate({"x": pl.Float64}, frame.head(1), nw.col("x") / divisor)
        assert one == [x[0] / divisor]
    ints = pl.DataFrame({"i": np.arange(10_000)})
    got = np.array(_evaluate({"i": pl.Int64}, ints, nw.col("i") / 7))
    assert np.array_equal(got, np.arange(10_000) / 7)


def test_calendar_truncation_of_far_dates_is_missing_not_a_panic():
    import datetime as dt

    days = pl.Series([-(2**31), 2**31 - 1, 0, 18_000], dtype=pl.Int32).cast(pl.Date)
    frame = pl.DataFrame({"d": days})
    steps, _ = derivations.verify_expressions(
        {"d": pl.Date}, [pl.col("d").dt.truncate("1mo").alias("m"),
                         pl.col("d").dt.round("1y").alias("y")], "with_columns")
    out = apply_step(frame, "with_columns", None, steps[0].columns)
    assert out["m"].to_list() == [None, None, dt.date(1970, 1, 1), dt.date(2019, 4, 1)]


def test_the_horizontal_mean_of_large_integers_does_not_wrap():
    big = 2**63 - 1
    frame = pl.DataFrame({"a": [big, 1], "b": [big, 2]})
    got = _evaluate({"a": pl.Int64, "b": pl.Int64}, frame, nw.mean_horizontal("a", "b"))
    assert got == [float(big), 1.5]


def test_casts_are_non_strict_and_truncate_toward_zero():
    frame = pl.DataFrame({"f": [1.7, -1.7, 1e10, math.nan, math.inf, None]})
    got = _evaluate({"f": pl.Float64}, frame, nw.col("f").cast(nw.Int32))
    assert got == [1, -1, None, None, None, None]
    text = pl.DataFrame({"s": ["12", " 3", "x", "", "99999999999999999999", None]})
    assert _evaluate({"s": pl.String}, text, nw.col("s").cast(nw.Int64)) == [
        12, None, None, None, None, None]


def test_unsigned_subtraction_below_zero_is_missing():
    frame = pl.DataFrame({"a": [1, 5], "b": [2, 3]}, schema={"a": pl.UInt32, "b": pl.UInt32})
    assert _evaluate({"a": pl.UInt32, "b": pl.UInt32}, frame, nw.col("a") - nw.col("b")) == [
        None, 2]


def test_sums_across_columns_and_in_lists_are_checked():
    big = 2**62
    frame = pl.DataFrame({"a": [big, 1, None], "b": [big, 2, 3], "l": [[big, big], [1], []]})
    schema = {"a": pl.Int64, "b": pl.Int64, "l": pl.List(pl.Int64)}
    assert _evaluate(schema, frame, nw.sum_horizontal("a", "b")) == [None, 3, 3]
    steps, _ = derivations.verify_expressions(schema, [pl.col("l").list.sum().alias("o")],
                                              "with_columns")
    out = apply_step(frame, "with_columns", None, steps[0].columns)["o"].to_list()
    assert out == [None, 1, 0]
