"""What verification refuses because some value would make it fail (dpframe/rowwise/reading.py),
and what it refuses because no value can (the probe of two public rows)."""

from __future__ import annotations

import datetime as dt
import decimal

import polars as pl
import pytest

import dpframe as dpf
from dpframe.provenance import _derivations as derivations

SCHEMA = {"i": pl.Int64, "f": pl.Float64, "s": pl.String, "d": pl.Date,
          "tz": pl.Datetime("us", "Europe/Paris"), "dec": pl.Decimal(38, 3), "b": pl.Binary,
          "l": pl.List(pl.Int64), "x": pl.Int64, "ls": pl.List(pl.String),
          "ld": pl.List(pl.Date), "ll": pl.List(pl.List(pl.Int64)), "h": pl.Float16,
          "e": pl.Enum(["a", "b"])}

REFUSED = {
    # value-dependent failures in Polars
    "zfill beyond the cap (a Rust panic above 65,535)": pl.col("s").str.zfill(2**40),
    "round_sig_figs(0)": pl.col("f").round_sig_figs(0),
    "Decimal arithmetic (overflow)": pl.col("dec") * pl.col("dec"),
    "Decimal ceil (overflow in rounding)": pl.col("dec").ceil(),
    "Decimal round": pl.col("dec").round(1),
    "a zoned truncation (daylight-saving gaps)": pl.col("tz").dt.truncate("2h"),
    "an interval beyond a year": pl.col("d").dt.truncate("10y"),
    "an interval Polars cannot parse": pl.col("d").dt.truncate("nonsense"),
    "Binary to String (bytes that are not UTF-8)": pl.col("b").cast(pl.String, strict=False),
    "List to String": pl.col("l").cast(pl.String, strict=False),
    "a strict cast that can fail": pl.col("f").cast(pl.Int8),
    "strict string parsing": pl.col("s").str.to_integer(strict=True),
    "a regex that does not compile": pl.col("s").str.contains("("),
    "a pattern from the data": pl.col("s").str.contains(pl.col("s")),
    "a width from the data": pl.col("s").str.zfill(pl.col("i")),
    "clip bounds of another type": pl.col("x").clip(16.5, 89.5),
    "clip bounds beyond the type": pl.col("x").clip(0, 1e30),
    "a negative slice length": pl.col("s").str.slice(0, -1),
    "repeated replace keys": pl.col("i").replace([1, 1], [2, 3]),
    "replace values that do not fit": pl.col("i").replace([1], ["a"]),
    # a sum or mean of values that are not numbers: Polars fails on a row that reaches one
    # (the probe's own value may parse: "1" does)
    "mean_horizontal of strings": pl.mean_horizontal(
        pl.when(pl.col("i") > 100).then(pl.lit("x")).otherwise(pl.lit("1"))),
    "mean_horizontal of dates": pl.mean_horizontal(pl.col("d")),
    "sum_horizontal of strings (concatenation)": pl.sum_horizontal(pl.col("s"), pl.col("s")),
    "list.sum of strings": pl.col("ls").list.sum(),
    "list.mean of dates": pl.col("ld").list.mean(),
    "list.max of nested lists": pl.col("ll").list.max(),
    # Float16 arithmetic is not exact in Polars
    "Float16 arithmetic": pl.col("h") + 1,
    "Float16 floor": pl.col("h").floor(),
    "a cast to Float16 then arithmetic": pl.col("f").cast(pl.Float16) * 2,
    # fails on every non-missing value: caught by trying a public sample value
    "Enum to Int64": pl.col("e").cast(pl.Int64, strict=False),
    "String to Enum to Int64": pl.col("s").cast(pl.Enum(["a"]), strict=False).cast(
        pl.Int64, strict=False),
    "Enum to Float64": pl.col("e").cast(pl.Float64, strict=False),
    "Enum to Date": pl.col("e").cast(pl.Date, strict=False),
    "Enum to Boolean": pl.col("e").cast(pl.Boolean, strict=False),
    "Enum to Decimal": pl.col("e").cast(pl.Decimal(10, 2), strict=False),
    # fails on every value: caught by the probe of two public rows
    "hour of a date": pl.col("d").dt.hour(),
    "String to Boolean": pl.col("s").cast(pl.Boolean, strict=False),
    "String to Date": pl.col("s").cast(pl.Date, strict=False),
    # reads other rows
    "an aggregate": pl.col("i") > pl.col("i").mean(),
    "a window": pl.col("i").sum().over("s"),
    "a shift": pl.col("i").shift(1),
}


ACCEPTED = {
    "Float16 compared": pl.col("h") > 1,
    "Float16 null test": pl.col("h").is_nan() | pl.col("h").is_null(),
    "Float16 to Float32, then arithmetic": pl.col("h").cast(pl.Float32) + 1,
    "Enum to String": pl.col("e").cast(pl.String),
    "mean_horizontal of numbers and booleans": pl.mean_horizontal(pl.col("i"), pl.col("f"),
                                                                  pl.col("i") > 1),
    "list.max of strings": pl.col("ls").list.max(),
    "list.sum of integers": pl.col("l").list.sum(),
}


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_accepted_near_the_refusals(name):
    derivations.verify_expressions(SCHEMA, [ACCEPTED[name].alias("o")], "with_columns")


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_before_any_read(name):
    with pytest.raises(dpf.DerivationError, match="Nothing was read or spent"):
        derivations.verify_expressions(SCHEMA, [REFUSED[name].alias("o")], "with_columns")


def test_the_probe_is_cached_per_plan():
    from dpframe.provenance._derivations import _PROBED

    derivations.verify_expressions(SCHEMA, [(pl.col("i") + 17).alias("o")], "with_columns")
    size = len(_PROBED)
    derivations.verify_expressions(SCHEMA, [(pl.col("i") + 17).alias("o")], "with_columns")
    assert len(_PROBED) == size


def test_values_that_panicked_are_missing():
    """A datetime formatted as text, or a zoned datetime's calendar fields, beyond chrono's
    range: Polars panics (and prints a backtrace quoting nothing but its own code)."""
    from dpframe.backends.polars._rowwise import apply_step

    frame = pl.DataFrame({"i": [10**18, 0, -(10**18)]})
    text = (pl.col("i").cast(pl.Datetime("ms"), strict=False)
            .cast(pl.String, strict=False)).alias("t")
    steps, _ = derivations.verify_expressions({"i": pl.Int64}, [text], "with_columns")
    out = apply_step(frame, "with_columns", None, steps[0].columns)["t"].to_list()
    assert out == [None, "1970-01-01 00:00:00.000", None]
    zoned = pl.DataFrame({"t": pl.Series([10**18, 0], dtype=pl.Int64).cast(pl.Datetime("ms"))
                          .dt.replace_time_zone("UTC")})
    for field in ("date", "time", "ordinal_day", "iso_year", "is_leap_year"):
        steps, _ = derivations.verify_expressions(
            dict(zoned.schema), [getattr(pl.col("t").dt, field)().alias("o")], "with_columns")
        got = apply_step(zoned, "with_columns", None, steps[0].columns)["o"].to_list()
        assert got[0] is None and got[1] is not None, field


def test_a_decimal_cast_of_a_float_with_too_many_digits_is_missing():
    from dpframe.backends.polars._rowwise import apply_step

    frame = pl.DataFrame({"f": [1e17, 1.5, float("nan"), float("inf")]})
    steps, _ = derivations.verify_expressions(
        {"f": pl.Float64}, [pl.col("f").cast(pl.Decimal(20, 3), strict=False).alias("o")],
        "with_columns")
    out = apply_step(frame, "with_columns", None, steps[0].columns)["o"].to_list()
    assert out == [None, decimal.Decimal("1.500"), None, None]


def test_dates_at_the_ends_of_their_range_truncate_to_missing():
    from dpframe.backends.polars._rowwise import apply_step
    from dpframe.rowwise.calendar import safe_days

    days = safe_days(pl.Date)
    assert days is not None
    values = [days[0] - 1, days[0], 0, days[1], days[1] + 1]
    frame = pl.DataFrame({"d": pl.Series(values, dtype=pl.Int32).cast(pl.Date)})
    steps, _ = derivations.verify_expressions({"d": pl.Date},
                                              [pl.col("d").dt.truncate("1mo").alias("m")],
                                              "with_columns")
    out = apply_step(frame, "with_columns", None, steps[0].columns)["m"]
    physical = out.to_physical().to_list()  # (Python's dates end at year 9999)
    assert physical[0] is None and physical[-1] is None
    assert all(v is not None for v in physical[1:4])
    assert out[2] == dt.date(1970, 1, 1)
