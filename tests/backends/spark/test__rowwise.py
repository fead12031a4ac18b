"""The Spark compiler (:mod:`dpframe.backends.spark._rowwise`) against the Polars reference.

Every supported function and every operator is compiled for Spark and evaluated on frames of
extreme values (0, ±1, the extremes of Int8..Int64, ±inf, NaN, -0.0, NULL, 1e308, the smallest
subnormal, empty, long and non-ASCII strings, dates from year 1 to 9999, and dates and
timestamps at the edges of Spark's own range), with and without a preceding filter, with ANSI
mode on (Spark's default) and off. Spark must never raise, and each result must equal the
reference (:mod:`dpframe.backends.polars._rowwise`): same values, NULLs in the same places, floats
to the bit (sign of zero included, NaN equal to NaN), same type — except for the differences
listed in :data:`KNOWN_DIFFERENCES` (and, per expression, :data:`ULPS`). All expressions of a
frame run in one Spark query.

Refusals (:func:`spark_target.check`) need no Spark and run without Java.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import struct
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from typing import Any

import narwhals as nw
import polars as pl
import pytest

from dpframe.backends.polars._rowwise import apply_step as polars_step
from dpframe.backends.spark import _rowwise as spark_target
from dpframe.errors import DerivationError
from dpframe.provenance import _derivations as derivations
from dpframe.rowwise.functions import FUNCTIONS, OPERATORS
from dpframe.rowwise.nodes import Binary, Call, Col, Lit, RowExpr, walk

I64 = (-(2**63), 2**63 - 1)
I32 = (-(2**31), 2**31 - 1)
INF, NAN = math.inf, math.nan

#: Expressions whose Spark result may differ from the reference, with the largest difference
#: allowed (in units in the last place) and why. Everything else must be equal to the bit.
LIBM_REASON = ("Spark computes it with Java's StrictMath (fdlibm), Polars with the platform's "
               "libm: the last bits can differ (special values are equal)")
ULPS: dict[str, tuple[int, str]] = {}

#: Every way a Spark result may differ from the reference, and why (the tests allow exactly
#: these; the module docstring of spark_target states them too).
KNOWN_DIFFERENCES = {
    "libm": LIBM_REASON + "; allowed up to 2 units in the last place (ULPS).",
    "one-row division": "Polars divides a column by a literal as a multiplication by its "
                        "reciprocal, except on a one-row frame (exact division); Spark always "
                        "multiplies. The frames here have many rows.",
    "truncate at the bottom of Spark's range": "within a year of the smallest date/timestamp "
                        "Spark holds, the truncated value is not representable: Spark gives "
                        "NULL, the reference's integer arithmetic wraps around (skipped in "
                        "test_temporal_extremes_never_raise).",
    "reference failures": "where the reference itself raises or panics (dt.truncate to months, "
                          "quarters or years outside chrono's range), Spark gives NULL; those "
                          "expressions are not compared.",
    "time-zone database": "Spark uses Java's tz database, Polars chrono-tz: zones whose history "
                          "changed between versions can differ (not exercised here).",
}


def _libm(name: str) -> str:
    ULPS[name] = (2, LIBM_REASON)
    return name


# -- frames --------------------------------------------------------------------------------

CORE_INTS = [0, 1, -1, 2, -7, 7, I64[0], I64[1], I64[0] + 1, 3**39, None]
CORE_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.675, 1e308, -1e308, 5e-324, INF, -INF, NAN,
               None, 2.0**63, 7.0, 1e16 + 2]
INT8S = [0, 1, -1, -128, 127, 5, None]
INT16S = [0, -32768, 32767, 1, -300, None]
INT32S = [0, 1, -1, I32[0], I32[1], 100_000, None]
FLOAT32S = [0.0, -0.0, 1.0, -1.0, 0.1, 3.4e38, -3.4e38, 1e-45, INF, -INF, NAN, None, 2.5,
            16777217.0]
BOOLS = [True, False, None]


def _numeric_columns() -> dict[str, list[Any]]:
    n = len(CORE_FLOATS)
    cols: dict[str, list[Any]] = {k: [] for k in
                                  ("a", "b", "x", "y", "t8", "s8", "i16", "i32", "g", "h",
                                   "bo", "bp")}
    for i in range(n):
        for j in range(n):
            cols["a"].append(CORE_INTS[i % len(CORE_INTS)])
            cols["b"].append(CORE_INTS[j % len(CORE_INTS)])
            cols["x"].append(CORE_FLOATS[i])
            cols["y"].append(CORE_FLOATS[j])
            cols["t8"].append(INT8S[i % len(INT8S)])
            cols["s8"].append(INT8S[j % len(INT8S)])
            cols["i16"].append(INT16S[(i + j) % len(INT16S)])
            cols["i32"].append(INT32S[(i * 3 + j) % len(INT32S)])
            cols["g"].append(FLOAT32S[i % len(FLOAT32S)])
            cols["h"].append(FLOAT32S[j % len(FLOAT32S)])
            cols["bo"].append(BOOLS[i % 3])
            cols["bp"].append(BOOLS[j % 3])
    return cols


NUMERIC_SCHEMA = {"a": pl.Int64, "b": pl.Int64, "x": pl.Float64, "y": pl.Float64,
                  "t8": pl.Int8, "s8": pl.Int8, "i16": pl.Int16, "i32": pl.Int32,
                  "g": pl.Float32, "h": pl.Float32, "bo": pl.Boolean, "bp": pl.Boolean}

STRINGS = ["", "a", "abc", "héllo", "-12", "+12", "12", "007", " x ", "\u2003x\u00a0\n",
           "ab\u0301c", "😀b", "ABCdef", "hello-world foo_bar", "ǅx", "ß", "İ", "ΟΔΟΣ",
           "x" * 5000, "1e3", "1.5", ".5", "5.", "inf", "-Infinity", "NaN", "1d", "0x1p3",
           "ff", "-8000000000000000", "7fffffffffffffff", "9223372036854775808",
           "-9223372036854775808", "12\n", "aaaa", "a.b", "${x}", "it's", "back\\slash", "zz",
           "0000000000000000000000000000000000000000000000000000000000000000000000000101",
           "-zzzzzzzzzzzzz", "1y2p0ij32e8e7", "10000000000000000000000000000000000000000000000"
           "0000000000000000000", "-1000000000000000000000000000000000000000000000000000000"
           "0000000000", None]
STRING_SCHEMA = {"s": pl.String, "t": pl.String, "n": pl.Int64}


def _string_columns() -> dict[str, list[Any]]:
    m = len(STRINGS)
    others = ["ab", "", None, "é", "a", "l", "ΟΔ"]
    return {"s": STRINGS, "t": [others[i % len(others)] for i in range(m)],
            "n": [CORE_INTS[i % len(CORE_INTS)] for i in range(m)]}


DATES = [dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1969, 12, 31), dt.date(1970, 1, 1),
         dt.date(2020, 2, 29), dt.date(2021, 1, 3), dt.date(2024, 12, 30), dt.date(1900, 3, 1),
         dt.date(2000, 12, 31), dt.date(1582, 10, 10), None]
DATETIMES = [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
             dt.datetime(1969, 12, 31, 12, 30, 15, 123456), dt.datetime(1970, 1, 1),
             dt.datetime(2020, 2, 29, 23, 59, 59, 999999), dt.datetime(2021, 1, 3, 0, 0, 0, 1),
             dt.datetime(2024, 12, 30, 5, 6, 7, 890000), dt.datetime(1900, 3, 1, 1),
             dt.datetime(2020, 3, 29, 1, 30), dt.datetime(2020, 10, 25, 0, 59, 59), None]
TEMPORAL_SCHEMA = {"d": pl.Date, "ts": pl.Datetime("us"), "utc": pl.Datetime("us", "UTC"),
                   "paris": pl.Datetime("us", "Europe/Paris"), "e": pl.Date}


def _temporal_columns() -> dict[str, list[Any]]:
    n = len(DATES)
    # (the last instant of 9999 UTC is in year 10000 in Paris, which Python cannot hold)
    aware = [None if v is None else min(v, dt.datetime(9999, 12, 30)).replace(tzinfo=dt.UTC)
             for v in DATETIMES]
    return {"d": DATES, "ts": DATETIMES, "utc": aware, "paris": aware,
            "e": [DATES[(i + 3) % n] for i in range(n)]}


DECIMAL_SCHEMA = {"p": pl.Decimal(10, 2), "q": pl.Decimal(38, 0), "k": pl.Int64}


def _decimal_columns() -> dict[str, list[Any]]:
    return {"p": [Decimal("12.34"), Decimal("-0.01"), Decimal("99999999.99"), Decimal("0.00"),
                  Decimal("1.00"), None],
            "q": [Decimal("1" * 38), Decimal("-" + "9" * 38), Decimal("1"), Decimal("0"),
                  Decimal("12"), None],
            "k": [5, I64[0], I64[1], 0, 1, None]}


def _spark_type(dtype: Any) -> Any:
    from pyspark.sql import types as T

    name = type(dtype).__name__ if not isinstance(dtype, type) else dtype.__name__
    simple = {"Int8": T.ByteType(), "Int16": T.ShortType(), "Int32": T.IntegerType(),
              "Int64": T.LongType(), "Float32": T.FloatType(), "Float64": T.DoubleType(),
              "String": T.StringType(), "Boolean": T.BooleanType(), "Date": T.DateType()}
    if name in simple:
        return simple[name]
    if name == "Datetime":
        return T.TimestampType() if dtype.time_zone else T.TimestampNTZType()
    assert name == "Decimal"
    return T.DecimalType(dtype.precision, dtype.scale)


def _spark_frame(spark: Any, schema: dict[str, Any], cols: dict[str, list[Any]]) -> Any:
    from pyspark.sql import types as T

    struct_type = T.StructType([T.StructField(c, _spark_type(d)) for c, d in schema.items()])
    rows = list(zip(*(cols[c] for c in schema), strict=True))
    return spark.createDataFrame(rows, struct_type)


def _spark_type_name(dtype: Any) -> str:
    """The Spark type (simpleString) a reference result of ``dtype`` must have."""
    name = type(dtype).__name__
    simple = {"Int8": "tinyint", "Int16": "smallint", "Int32": "int", "Int64": "bigint",
              "Float32": "float", "Float64": "double", "String": "string",
              "Boolean": "boolean", "Date": "date"}
    if name in simple:
        return simple[name]
    if name == "Datetime":
        return "timestamp" if dtype.time_zone else "timestamp_ntz"
    assert name == "Decimal", dtype
    return f"decimal({dtype.precision},{dtype.scale})"


# -- expressions ---------------------------------------------------------------------------


def _tree(schema: dict[str, Any], expr: Any, name: str) -> RowExpr:
    steps, _ = derivations.verify_expressions(schema, [expr.alias(name)], "with_columns")
    ((out, tree),) = steps[-1].columns
    assert out == name
    return tree


def _predicate(schema: dict[str, Any], expr: Any) -> RowExpr:
    steps, _ = derivations.verify_expressions(schema, [expr], "filter")
    assert steps[-1].predicate is not None
    return steps[-1].predicate


c = pl.col
ARITH = {"add": lambda p, q: p + q, "sub": lambda p, q: p - q, "mul": lambda p, q: p * q,
         "div": lambda p, q: p / q, "fdiv": lambda p, q: p // q, "mod": lambda p, q: p % q,
         "pow": lambda p, q: p**q}
COMPARE = {"eq": lambda p, q: p == q, "ne": lambda p, q: p != q, "lt": lambda p, q: p < q,
           "le": lambda p, q: p <= q, "gt": lambda p, q: p > q, "ge": lambda p, q: p >= q,
           "eqm": lambda p, q: p.eq_missing(q), "nem": lambda p, q: p.ne_missing(q)}


def numeric_expressions() -> dict[str, Any]:
    e: dict[str, Any] = {}
    pairs = [("a", "b"), ("t8", "s8"), ("i32", "a"), ("i16", "t8"), ("x", "y"), ("g", "h"),
             ("a", "x"), ("t8", "g")]
    for p, q in pairs:
        for op, fn in ARITH.items():
            name = f"{op}_{p}_{q}"
            if op == "pow":  # an integer power is the reference's exact one: refused here
                e[name] = fn(c(p).cast(pl.Float64), c(q))
                ULPS[name] = (2, LIBM_REASON)
            else:
                e[name] = fn(c(p), c(q))
        for op, fn in COMPARE.items():
            e[f"{op}_{p}_{q}"] = fn(c(p), c(q))
    for p, q in (("a", "b"), ("t8", "s8"), ("bo", "bp")):
        e[f"and_{p}"], e[f"or_{p}"], e[f"xor_{p}"] = c(p) & c(q), c(p) | c(q), c(p) ^ c(q)
        e[f"not_{p}"] = ~c(p)
    for name, divisor in (("3", 3.0), ("tenth", 0.1), ("big", 1e308), ("tiny", 5e-324),
                          ("negzero", -0.0), ("nan", NAN)):
        for op in ("div", "fdiv", "mod"):
            e[f"{op}_x_by_{name}"] = ARITH[op](c("x"), divisor)
            e[f"{op}_g_by_{name}"] = ARITH[op](c("g"), pl.lit(divisor, dtype=pl.Float32))
    e["div_a_by_3"] = c("a") / 3
    e["div_by_lit_expr"] = c("x") / (pl.lit(2.0) + 1.0)
    e["div_lit_by_col"] = 1e308 / c("x")
    e["fdiv_t8_by_lit"], e["mod_t8_by_lit"] = c("t8") // -3, c("t8") % -3
    e["bool_add"] = (c("bo") + c("bp")).cast(pl.Int64)
    e["bool_num"] = c("bo") + c("x")
    e["uint_sub"] = (c("t8").cast(pl.UInt8, strict=False) - 200).cast(pl.Int64)
    e["uint_not"] = (~c("t8").cast(pl.UInt16, strict=False)).cast(pl.Int64)
    e["uint_neg"] = (-c("t8").cast(pl.UInt32, strict=False)).cast(pl.Int64)
    e["int_lit_ops"] = (c("a") * 100_000 + 7) // -3 % 5
    e["narwhals"] = (nw.col("a") * 100000 > 5) | (nw.col("x") / 0 < 1)
    e["lit_div_zero"] = c("a") + (pl.lit(5) // pl.lit(0))
    e["pow_root"] = c("a").cast(pl.Float64) ** 2
    e["pow_cmp"] = c("a").cast(pl.Float64) ** 2 > 10
    e["pow_neg"] = c("i32").cast(pl.Float64) ** -1
    for col in ("a", "t8", "i32", "x", "g"):
        for fn in ("abs", "floor", "ceil", "sign"):
            e[f"{fn}_{col}"] = getattr(c(col), fn)()
        e[f"neg_{col}"] = -c(col)
        e[f"clip_{col}"] = c(col).clip(-5, 100)
        e[f"clip_lo_{col}"] = c(col).clip(lower_bound=0)
        e[f"fill_{col}"] = c(col).fill_null(3)
        e[f"isnan_{col}"] = c(col).is_nan()
        e[f"isnotnan_{col}"] = c(col).is_not_nan()
        e[f"isfinite_{col}"] = c(col).is_finite()
        e[f"isinf_{col}"] = c(col).is_infinite()
        e[f"isnull_{col}"] = c(col).is_null()
        e[f"notnull_{col}"] = c(col).is_not_null()
        e[f"sqrt_{col}"] = c(col).sqrt()
        for target in (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.Float32, pl.Float64,
                       pl.Boolean):
            e[f"cast_{col}_{target.__name__}"] = c(col).cast(target, strict=False)
        for target in (pl.UInt8, pl.UInt32):
            e[f"ucast_{col}_{target.__name__}"] = c(col).cast(target, strict=False).cast(
                pl.Int64)
    for col in ("a", "i32", "bo"):
        e[f"str_{col}"] = c(col).cast(pl.String)
    e["clip_cols"] = c("x").clip(c("y"), 1.0)
    e["clip_both_cols"] = c("x").clip(c("y"), c("y") * 0.5)
    e["clip_int_cols"] = c("a").clip(c("b"), 5)
    for col in ("a", "x"):
        for d in (0, 1, 2, 3, 20, 308, 400):
            for mode in ("half_to_even", "half_away_from_zero"):
                e[f"round_{col}_{d}_{mode}"] = c(col).round(d, mode=mode)
    for fn in sorted(spark_target.LIBM_FUNCTIONS - {"log", "pow"}):
        for col in ("x", "a"):
            e[_libm(f"{fn}_{col}")] = getattr(c(col), fn)()
        e[_libm(f"{fn}_g64")] = getattr(c("g").cast(pl.Float64), fn)()
    for fn in ("degrees", "radians"):
        e[f"{fn}_x"], e[f"{fn}_a"] = getattr(c("x"), fn)(), getattr(c("a"), fn)()
    for base in (math.e, 10, 2, 1, 0, -2, 0.5, INF, NAN):
        e[_libm(f"log_{base}")] = c("x").log(base)
    e[_libm("log_a10")] = c("a").log(10)
    e[_libm("log_col")] = c("x").log(c("y"))
    e[_libm("pow_xy")] = c("x") ** c("y")
    e[_libm("pow_x2")] = c("x") ** 2
    e["between"] = c("x").is_between(c("y"), 1.0)
    for closed in ("both", "left", "right", "none"):
        e[f"between_{closed}"] = c("a").is_between(-1, 7, closed=closed)
    e["in_ints"] = c("a").is_in([0, 7, I64[0], None])
    e["in_ints_eq"] = c("a").is_in([0, 7, None], nulls_equal=True)
    e["in_floats"] = c("x").is_in([0.0, NAN, INF])
    e["in_empty"] = c("t8").is_in([])
    e["replace_ints"] = c("a").replace([0, I64[0], None], [5, 6, 7])
    e["replace_floats"] = c("x").replace([NAN, 0.0, INF], [1.0, 2.0, 3.0])
    e["replace_fractional"] = c("a").replace([1.5], [10])
    e["coalesce"] = pl.coalesce(c("t8"), c("a"), pl.lit(-1))
    e["coalesce_f"] = pl.coalesce(c("x"), c("g"))
    for fn in ("max_horizontal", "min_horizontal"):
        e[f"{fn}_f"] = getattr(pl, fn)(c("x"), c("y"), pl.lit(-0.0))
        e[f"{fn}_i"] = getattr(pl, fn)(c("a"), c("t8"))
        e[f"{fn}_g"] = getattr(pl, fn)(c("g"), c("h"))
        e[f"{fn}_mixed"] = getattr(pl, fn)(c("a"), c("x"))
    e["sum_h_i"] = pl.sum_horizontal(c("a"), c("b"), c("a"))
    e["sum_h_i_nulls"] = pl.sum_horizontal(c("a"), c("b"), ignore_nulls=False)
    e["sum_h_small"] = pl.sum_horizontal(c("t8"), c("s8"))
    e["sum_h_f"] = pl.sum_horizontal(c("x"), c("y"))
    e["sum_h_f5"] = pl.sum_horizontal(c("x"), c("y"), c("g"), c("a"), -c("x"))
    e["mean_h5"] = pl.mean_horizontal(c("y"), c("x"), c("i32"), -c("y"), c("x"))
    e["sum_h_f_nulls"] = pl.sum_horizontal(c("x"), c("y"), ignore_nulls=False)
    e["sum_h_g"] = pl.sum_horizontal(c("g"), c("h"))
    e["sum_h_bool"] = pl.sum_horizontal(c("bo"), c("bp")).cast(pl.Int64)
    e["mean_h"] = pl.mean_horizontal(c("x"), c("y"), c("i32"))
    e["mean_h_nulls"] = pl.mean_horizontal(c("x"), c("t8"), ignore_nulls=False)
    e["all_h"] = pl.all_horizontal(c("bo"), c("bp"), c("a") > 0)
    e["any_h"] = pl.any_horizontal(c("bo"), c("bp"))
    e["when"] = pl.when(c("bo")).then(c("t8")).otherwise(c("i32"))
    e["when_f"] = pl.when(c("x") > c("y")).then(c("x")).otherwise(pl.lit(None))
    e["fill_expr"] = c("x").fill_null(c("g"))
    return e


def string_expressions() -> dict[str, Any]:
    s, t = c("s"), c("t")
    e: dict[str, Any] = {
        "upper": s.str.to_uppercase(), "lower": s.str.to_lowercase(),
        "len_chars": s.str.len_chars().cast(pl.Int64), "len_bytes": s.str.len_bytes() > 3,
        "len_arith": (s.str.len_chars() - 2).cast(pl.Int32, strict=False),
        "concat": s + t, "cmp": s < t, "cmp_eq": s == t, "eqm": s.eq_missing(t),
        "in": s.is_in(["a", "", "é", None]), "replace_tbl": s.replace(["a", None], ["b", "z"]),
        "fill": s.fill_null("?"), "max_h": pl.max_horizontal(s, t),
        "coalesce": pl.coalesce(s, t),
        "concat_str": pl.concat_str([s, t, c("n")], separator="-"),
        "concat_str_ign": pl.concat_str([s, t], separator="é", ignore_nulls=True),
        "concat_str_nosep": pl.concat_str([s, t]),
        "to_int64": s.cast(pl.Int64, strict=False), "to_int8": s.cast(pl.Int8, strict=False),
        "to_f64": s.cast(pl.Float64, strict=False),
        "n_to_str": c("n").cast(pl.String),
    }
    for i, pat in enumerate(["a", "", "é", "l", "aa", "ll", "a.b", "${x}", "'", None]):
        lit = pl.lit(pat, dtype=pl.String)
        e[f"contains_{i}"] = s.str.contains(lit, literal=True)
        e[f"starts_{i}"] = s.str.starts_with(lit)
        e[f"ends_{i}"] = s.str.ends_with(lit)
        e[f"sprefix_{i}"] = s.str.strip_prefix(lit)
        e[f"ssuffix_{i}"] = s.str.strip_suffix(lit)
        if pat is not None:
            e[f"count_{i}"] = s.str.count_matches(pat, literal=True).cast(pl.Int64)
            e[f"find_{i}"] = s.str.find(pat, literal=True).cast(pl.Int64)
            if pat:
                e[f"replace1_{i}"] = s.str.replace(pat, "<é>", literal=True)
                e[f"replace_all_{i}"] = s.str.replace_all(pat, "$0", literal=True)
    e["contains_regex_plain"] = s.str.contains("ab")
    e["count_regex_plain"] = s.str.count_matches("a").cast(pl.Int64)
    e["find_regex_plain"] = s.str.find("l") == 3
    e["replace_regex_plain"] = s.str.replace_all("a", "b")
    for off in (-7, -5, -3, -1, 0, 2, 5, 7, 2**40):
        for length in (None, 0, 2, 9, 2**62):
            e[f"slice_{off}_{length}"] = s.str.slice(off, length)
    for k in (-7, -2, 0, 2, 9, 2**40, -(2**40)):
        e[f"head_{k}"], e[f"tail_{k}"] = s.str.head(k), s.str.tail(k)
    for i, chars in enumerate([None, "a-c", "", " x", "ΟΣ"]):
        e[f"strip_{i}"] = s.str.strip_chars(chars)
        e[f"lstrip_{i}"] = s.str.strip_chars_start(chars)
        e[f"rstrip_{i}"] = s.str.strip_chars_end(chars)
    for base in (10, 16, 2, 36, 7):
        e[f"to_integer_{base}"] = s.str.to_integer(base=base, strict=False)
    for w in (0, 4, 40):
        e[f"zfill_{w}"] = s.str.zfill(w)
        e[f"lpad_{w}"] = s.str.pad_start(w, "é")
        e[f"rpad_{w}"] = s.str.pad_end(w, "*")
    e["narwhals_len"] = nw.col("s").str.len_chars() > 2
    return e


def temporal_expressions() -> dict[str, Any]:
    e: dict[str, Any] = {}
    fields = ("year", "month", "day", "week", "quarter", "ordinal_day", "iso_year",
              "is_leap_year", "date")
    clock = ("hour", "minute", "second", "millisecond", "microsecond", "nanosecond")
    for col in ("d", "ts", "utc", "paris"):
        for f in fields + (clock if col != "d" else ()):
            e[f"{f}_{col}"] = getattr(c(col).dt, f)()
    for col in ("d", "ts"):
        for unit in ("1d", "1w", "1mo", "1q", "1y", "1h", "1m", "1s", "1ms", "1us", "1ns"):
            e[f"trunc_{col}_{unit}"] = c(col).dt.truncate(unit)
    e["d_to_ts"] = c("d").cast(pl.Datetime("us"), strict=False)
    e["ts_to_d"] = c("ts").cast(pl.Date, strict=False)
    e["d_to_i32"] = c("d").cast(pl.Int32, strict=False)
    e["d_to_i64"] = c("d").cast(pl.Int64, strict=False)
    e["d_to_i8"] = c("d").cast(pl.Int8, strict=False)
    e["ts_to_i64"] = c("ts").cast(pl.Int64, strict=False)
    e["utc_to_i64"] = c("utc").cast(pl.Int64, strict=False)
    e["utc_to_naive"] = c("utc").cast(pl.Datetime("us"), strict=False)
    e["d_cmp"] = c("d") < c("e")
    e["d_ts_cmp"] = c("d") <= c("ts")
    e["d_lit"] = c("d") > dt.date(2000, 1, 1)
    e["ts_lit"] = c("ts") >= dt.datetime(2020, 2, 29, 23, 59, 59, 999999)
    e["utc_lit"] = c("utc") < dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    e["d_between"] = c("d").is_between(dt.date(1900, 1, 1), c("e"))
    e["d_max"] = pl.max_horizontal(c("d"), c("e"))
    e["d_fill"] = c("d").fill_null(dt.date(2000, 2, 29))
    e["ts_fill"] = c("ts").fill_null(dt.datetime(1, 1, 1, 0, 0, 0, 1))
    e["d_in"] = c("d").is_in([dt.date(1, 1, 1), dt.date(2020, 2, 29)])
    e["narwhals_year"] = nw.col("ts").dt.year() + 1
    return e


def decimal_expressions() -> dict[str, Any]:
    return {
        "gt": c("p") > c("q"), "eq": c("p") == c("q"), "gt_int": c("p") > c("k"),
        "gt_lit": c("p") > Decimal("1.5"), "gt_float": c("p") > 1.5,
        "to_f64": c("p").cast(pl.Float64), "q_to_f64": c("q").cast(pl.Float64),
        "k_to_dec": c("k").cast(pl.Decimal(10, 2), strict=False),
        "k_to_dec38": c("k").cast(pl.Decimal(38, 5), strict=False),
        "fill": c("p").fill_null(0), "null": c("q").is_null(),
        "coalesce": pl.coalesce(c("p"), pl.lit(Decimal("7.25"))),
        "in": c("p").is_in([Decimal("1.00")]),
        "max_h": pl.max_horizontal(c("q"), pl.lit(Decimal("5"))),
    }


FRAMES: dict[str, tuple[dict[str, Any], Callable[[], dict[str, list[Any]]],
                        Callable[[], dict[str, Any]], Any]] = {
    "numeric": (NUMERIC_SCHEMA, _numeric_columns, numeric_expressions,
                (c("a") % 3 != 0) | c("x").is_nan()),
    "strings": (STRING_SCHEMA, _string_columns, string_expressions,
                c("s").str.len_chars() > 2),
    "temporal": (TEMPORAL_SCHEMA, _temporal_columns, temporal_expressions,
                 c("ts").dt.month() != 12),
    "decimal": (DECIMAL_SCHEMA, _decimal_columns, decimal_expressions, c("k") != 0),
}


def trees(frame: str) -> dict[str, RowExpr]:
    schema, _cols, exprs, _pred = FRAMES[frame]
    return {name: _tree(schema, expr, name) for name, expr in exprs().items()}


# -- comparing -----------------------------------------------------------------------------


def _ordinal(value: float) -> int:
    bits = struct.unpack("<q", struct.pack("<d", value))[0]
    return bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF)


def same(ref: Any, got: Any, ulps: int = 0) -> bool:
    """Equal values: floats to the bit (sign of zero included; NaN equals NaN) or within
    ``ulps`` units in the last place when both are finite."""
    if ref is None or got is None:
        return ref is None and got is None
    if isinstance(ref, float) or isinstance(got, float):
        if not (isinstance(ref, float) and isinstance(got, float)):
            return False
        if math.isnan(ref) or math.isnan(got):
            return math.isnan(ref) and math.isnan(got)
        if ref == got:
            return math.copysign(1.0, ref) == math.copysign(1.0, got)
        return bool(ulps) and math.isfinite(ref) and math.isfinite(got) and abs(
            _ordinal(ref) - _ordinal(got)) <= ulps
    return type(ref) is type(got) and ref == got


def reference(frame: pl.DataFrame, items: Iterable[tuple[str, RowExpr]]) -> dict[str, Any]:
    """Each tree evaluated by the Polars reference: (values, dtype) or the exception."""
    out: dict[str, Any] = {}
    for name, tree in items:
        try:
            # with_columns broadcasts a literal to every row, as Spark's select does
            result = polars_step(frame, "with_columns", None, [(name, tree)])
            out[name] = (result[name].to_list(), result.schema[name])
        except BaseException as exc:  # a reference failure (PanicException too)
            if isinstance(exc, KeyboardInterrupt):
                raise
            out[name] = exc
    return out


def mismatches(ref: dict[str, Any], spark_frame: Any,
               skip: Callable[[str, int], bool] | None = None) -> list[str]:
    """Spark's results against the reference (names whose reference failed are skipped, and
    the (name, row) pairs ``skip`` names)."""
    rows = spark_frame.collect()
    types = {f.name: f.dataType.simpleString() for f in spark_frame.schema.fields}
    problems = []
    for name, expected in ref.items():
        if isinstance(expected, BaseException):
            continue
        values, dtype = expected
        got = [row[name] for row in rows]
        if len(got) != len(values):
            problems.append(f"{name}: {len(got)} rows, reference {len(values)}")
            continue
        if types[name] != _spark_type_name(dtype):
            problems.append(f"{name}: Spark type {types[name]}, reference {dtype}")
        allowed = ULPS.get(name, (0, ""))[0]
        bad = [(i, r, g) for i, (r, g) in enumerate(zip(values, got, strict=True))
               if not same(r, g, allowed) and not (skip and skip(name, i))]
        if bad:
            problems.append(f"{name}: {len(bad)} differences, e.g. (row, reference, spark) "
                            f"{[(i, _short(r), _short(g)) for i, r, g in bad[:3]]}")
    return problems


def _short(value: Any) -> Any:
    return value[:20] + "..." if isinstance(value, str) and len(value) > 20 else value


def run_spark(spark: Any, spark_frame: Any, items: list[tuple[str, RowExpr]],
              predicate: RowExpr | None = None) -> Any:
    """All trees in one select (after the filter, if any); on a Spark error, the trees that
    raise alone are named."""
    frame = spark_frame
    if predicate is not None:
        frame = spark_target.apply_step(frame, "filter", predicate, ())
    out = spark_target.apply_step(frame, "select", None, items)
    try:
        out.collect()
    except Exception as exc:
        failing = []
        for name, tree in items:
            try:
                spark_target.apply_step(frame, "select", None, [(name, tree)]).collect()
            except Exception as single:
                failing.append(f"{name}: {str(single).splitlines()[0][:160]}")
        raise AssertionError(f"Spark raised: {failing or exc}") from None
    return out


@contextlib.contextmanager
def ansi(spark: Any, on: bool) -> Iterator[None]:
    """Spark's ANSI mode set for the block (then restored)."""
    key = "spark.sql.ansi.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "true" if on else "false")
    try:
        yield
    finally:
        spark.conf.set(key, before)


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark() -> Any:
    from conftest import spark_session

    return spark_session()  # skips the Spark tests without Java (or pyspark)


@pytest.fixture(scope="module")
def compiled() -> dict[str, list[tuple[str, RowExpr]]]:
    """Per frame: every expression's tree (the Spark target accepts them all)."""
    return {frame: list(trees(frame).items()) for frame in FRAMES}


def test_every_compared_expression_is_accepted(compiled):
    refused = []
    for items in compiled.values():
        for name, tree in items:
            try:
                spark_target.check(tree)
            except DerivationError as exc:
                refused.append(f"{name}: {exc}")
    assert not refused


# -- the comparisons -------------------------------------------------------------------------


@pytest.mark.parametrize("frame", list(FRAMES))
@pytest.mark.parametrize("filtered", [False, True], ids=["all-rows", "after-filter"])
def test_spark_equals_reference(spark, compiled, frame, filtered):
    schema, columns, _exprs, filter_expr = FRAMES[frame]
    cols = columns()
    polars_frame = pl.DataFrame(cols, schema=schema)
    predicate = _predicate(schema, filter_expr) if filtered else None
    if predicate is not None:
        polars_frame = polars_step(polars_frame, "filter", predicate, ())
    items = compiled[frame]
    ref = reference(polars_frame, items)
    with ansi(spark, True):
        out = run_spark(spark, _spark_frame(spark, schema, cols), items, predicate)
        problems = mismatches(ref, out)
    assert not problems


@pytest.mark.parametrize("frame", ["numeric", "strings", "temporal"])
def test_ansi_off(spark, compiled, frame):
    """The same SQL with ANSI mode off (Spark's legacy arithmetic) gives the same results."""
    schema, columns, _exprs, _pred = FRAMES[frame]
    cols = columns()
    items = compiled[frame]
    ref = reference(pl.DataFrame(cols, schema=schema), items)
    with ansi(spark, False):
        out = run_spark(spark, _spark_frame(spark, schema, cols), items)
        problems = mismatches(ref, out)
    assert not problems


def test_temporal_ignores_the_session_time_zone(spark, compiled):
    """Every temporal expression reads the dtype's zone (or none), never the session's."""
    schema, columns, _exprs, _pred = FRAMES["temporal"]
    cols = columns()
    items = compiled["temporal"]
    ref = reference(pl.DataFrame(cols, schema=schema), items)
    key = "spark.sql.session.timeZone"
    before = spark.conf.get(key)
    spark.conf.set(key, "Asia/Kathmandu")
    try:
        out = run_spark(spark, _spark_frame(spark, schema, cols), items)
        problems = mismatches(ref, out)
    finally:
        spark.conf.set(key, before)
    assert not problems


# -- values only Spark holds: temporal extremes --------------------------------------------

EXTREME_DAYS = [-(2**31), -(2**31) + 400, -106751992, -106751991, -96465293, -96465292, -1, 0,
                95026236, 95026237, 106751991, 2**31 - 1]
EXTREME_MICROS = [I64[0], I64[0] + 1, -8334601228800000001, -8334601228800000000, -1, 0,
                  8210266876799999999, 8210266876800000000, I64[1]]


def test_temporal_extremes_never_raise(spark):
    """Dates and timestamps at the edges of Spark's range (beyond Python's): every temporal
    function runs, and equals the reference wherever the reference does not fail (the
    reference panics in ``dt.truncate`` outside chrono's range; Spark gives NULL there)."""
    from pyspark.sql import functions as F

    n = max(len(EXTREME_DAYS), len(EXTREME_MICROS))
    days = [EXTREME_DAYS[i % len(EXTREME_DAYS)] for i in range(n)]
    micros = [EXTREME_MICROS[i % len(EXTREME_MICROS)] for i in range(n)]
    polars_frame = pl.DataFrame({"d": days, "ts": micros}).select(
        c("d").cast(pl.Int32).cast(pl.Date), c("ts").cast(pl.Datetime("us")))
    spark_frame = spark.createDataFrame(list(zip(days, micros, strict=True)), "d int, ts long")
    spark_frame = spark_frame.select(
        F.expr("date_from_unix_date(d)").alias("d"),
        F.expr("timestampadd(MICROSECOND, ts, TIMESTAMP_NTZ'1970-01-01 00:00:00')").alias("ts"))
    schema = {"d": pl.Date, "ts": pl.Datetime("us")}
    exprs: dict[str, Any] = {}
    for col in ("d", "ts"):
        for f in ("year", "month", "day", "week", "quarter", "ordinal_day", "iso_year",
                  "is_leap_year"):
            exprs[f"{f}_{col}"] = getattr(c(col).dt, f)()
        for unit in ("1d", "1w", "1mo", "1q", "1y", "1h", "1m", "1s", "1ms"):
            exprs[f"trunc_{col}_{unit}"] = c(col).dt.truncate(unit).cast(pl.Int64,
                                                                         strict=False)
    for f in ("hour", "minute", "second", "millisecond", "microsecond"):
        exprs[f"{f}_ts"] = getattr(c("ts").dt, f)()
    exprs["date_ts"] = c("ts").dt.date().cast(pl.Int64, strict=False)
    exprs["d_to_ts"] = c("d").cast(pl.Datetime("us"), strict=False).cast(pl.Int64,
                                                                           strict=False)
    exprs["ts_to_d"] = c("ts").cast(pl.Date, strict=False).cast(pl.Int64, strict=False)
    exprs["ts_to_i64"] = c("ts").cast(pl.Int64, strict=False)
    exprs["d_cmp"] = c("d") < c("ts")
    items = [(name, _tree(schema, e, name)) for name, e in exprs.items()]
    ref = reference(polars_frame, items)
    failed = sorted(name for name, r in ref.items() if isinstance(r, BaseException))
    # the reference panics on these (a reference bug: months, quarters and years outside
    # chrono's range)
    assert set(failed) <= {f"trunc_{col}_{u}" for col in ("d", "ts") for u in ("1mo", "1q", "1y")}

    def bottom_edge(name: str, row: int) -> bool:
        """Truncating within a year of the bottom of Spark's range: the result is not
        representable; the reference's integer arithmetic wraps around, Spark gives NULL."""
        if not name.startswith("trunc_"):
            return False
        if name.startswith("trunc_d_"):
            return days[row] < -(2**31) + 366
        return micros[row] < (-106751991 + 366) * 86_400_000_000

    assert not mismatches(ref, run_spark(spark, spark_frame, items), bottom_edge)


#: Compared on hand-made trees (weekday on dates, datetimes and zoned datetimes).
HAND_MADE = ("TemporalFunction.WeekDay",)


def test_hand_made_trees(spark):
    cols = _temporal_columns()
    cols["p"] = [True, False, None, True, None, False, True, True, None, False, True]
    cols["q"] = [None, None, None, True, False, False, True, False, True, True, False]
    schema = {**TEMPORAL_SCHEMA, "p": pl.Boolean, "q": pl.Boolean}
    p, q = Col(pl.Boolean(), "p"), Col(pl.Boolean(), "q")
    items: list[tuple[str, RowExpr]] = [
        (f"weekday_{col}", Call(pl.Int8(), "TemporalFunction.WeekDay",
                                (Col(TEMPORAL_SCHEMA[col], col),)))
        for col in ("d", "ts", "paris")]
    for name in HAND_MADE[1:]:
        items.append((name, Call(pl.Boolean(), name, (p, q, p))))
        items.append((name + "_1", Call(pl.Boolean(), name, (q,))))
    ref = reference(pl.DataFrame(cols, schema=schema), items)
    assert not mismatches(ref, run_spark(spark, _spark_frame(spark, schema, cols), items))


# -- steps ---------------------------------------------------------------------------------


def test_apply_step_kinds(spark):
    schema = {"a": pl.Int64, "x": pl.Float64, "s": pl.String}
    frame = _spark_frame(spark, schema, {"a": [1, None, 3, -4], "x": [0.5, 1.0, NAN, None],
                                         "s": ["p", "q", None, "r"]})
    (step,), _ = derivations.verify_expressions(
        schema, [(c("a") * 2).alias("x"), c("s").str.to_uppercase().alias("A")],
        "with_columns")
    out = spark_target.apply_step(frame, "with_columns", None, step.columns)
    assert out.columns == ["a", "x", "s", "A"]  # replaced in place, new appended
    assert [tuple(r) for r in out.collect()] == [(1, 2, "p", "P"), (None, None, "q", "Q"),
                                                 (3, 6, None, None), (-4, -8, "r", "R")]
    selected = spark_target.apply_step(frame, "select", None, [
        ("n", _tree(schema, c("s"), "n")), ("m", _tree(schema, c("a") + 1, "m"))])
    assert selected.columns == ["n", "m"]
    assert [tuple(r) for r in selected.collect()] == [("p", 2), ("q", None), (None, 4),
                                                      ("r", -3)]
    kept = spark_target.apply_step(frame, "filter", _predicate(schema, c("x") > 0.7), ())
    assert [r["a"] for r in kept.collect()] == [None, 3]  # NULL drops the row; NaN > 0.7


def test_filter_must_be_boolean():
    with pytest.raises(DerivationError, match="boolean"):
        spark_target.apply_step(None, "filter", Col(pl.Int64(), "a"), ())


# -- refusals (no Spark needed) --------------------------------------------------------------

def _nested(expr: Any, depth: int) -> Any:
    for _ in range(depth):
        expr = (expr % 3.0) // c("f")
    return expr


REFUSALS_SCHEMA = {"i": pl.Int64, "f": pl.Float64, "g": pl.Float32, "s": pl.String,
                   "d": pl.Date, "t": pl.Datetime("us"), "tz": pl.Datetime("us", "UTC"),
                   "b8": pl.Int8, "l": pl.List(pl.Int64), "${x}": pl.Int64}
REFUSED = {
    "round_sig_figs": c("f").round_sig_figs(3),
    "titlecase": c("s").str.to_titlecase(),
    "reverse": c("s").str.reverse(),
    "time": c("t").dt.time(),
    "dt_round": c("t").dt.round("1h"),
    "list_len": c("l").list.len().cast(pl.Int64),
    "list_sum": c("l").list.sum(),
    "list_max": c("l").list.max(),
    "list_contains": c("l").list.contains(3),
    "regex_contains": c("s").str.contains("a.b"),
    "regex_replace": c("s").str.replace_all("a+", "b"),
    "regex_count": c("s").str.count_matches("[ab]").cast(pl.Int64),
    "regex_find": c("s").str.find("^a").cast(pl.Int64),
    "regex_group_ref": c("s").str.replace_all("a", "$0$0"),
    "replace_n2": c("s").str.replace("a", "b", n=2, literal=True),
    "replace_empty": c("s").str.replace_all("", "-", literal=True),
    "float32_sin": c("g").sin(),
    "float32_exp": c("g").exp(),
    "float32_round": c("g").round(1),
    "float_to_string": c("f").cast(pl.String),
    "date_to_string": c("d").cast(pl.String, strict=False),
    "datetime_to_string": c("t").cast(pl.String, strict=False),
    "string_to_date": c("s").cast(pl.Date, strict=False),
    "string_to_bool": c("s").cast(pl.Boolean, strict=False),
    "string_to_float32": c("s").cast(pl.Float32, strict=False),
    "truncate_2d": c("t").dt.truncate("2d"),
    "truncate_tz": c("tz").dt.truncate("1d"),
    "unsigned_result": c("s").str.len_chars(),
    "uint64": c("i").cast(pl.UInt64, strict=False),
    "int128": c("i").cast(pl.Int128),
    "nanoseconds": c("t").cast(pl.Datetime("ns"), strict=False),
    "pow_integer": c("i") ** 2,
    "pow_nested": c("i") ** -1 + 1,
    "pow_abs": (c("i") ** 1).abs(),
    "mean_h_int64": pl.mean_horizontal(c("i"), c("i")),
    "replace_duplicates": c("i").replace([1, 1], [2, 3]),
    "replace_not_fitting": c("b8").replace([1], [1000]),
    "substitution": c("${x}") + 1,
    "negative_length": c("s").str.slice(0, pl.lit(-1)),
    "hour_of_date": c("d").dt.hour(),
    "too_deep": _nested(c("f"), 12),
}


#: Refused by the verifier itself (for every engine), before the Spark target sees them.
REFUSED_BY_THE_VERIFIER = {"string_to_date", "string_to_bool", "replace_duplicates",
                           "replace_not_fitting", "negative_length", "hour_of_date",
                           "truncate_tz"}


@pytest.mark.parametrize("name", sorted(REFUSED_BY_THE_VERIFIER))
def test_the_verifier_refuses(name):
    with pytest.raises(DerivationError, match="Nothing was read or spent"):
        _tree(REFUSALS_SCHEMA, REFUSED[name], name)


@pytest.mark.parametrize("name", sorted(set(REFUSED) - REFUSED_BY_THE_VERIFIER))
def test_check_refuses(name):
    if name in REFUSED_BY_THE_VERIFIER:
        return
    tree = _tree(REFUSALS_SCHEMA, REFUSED[name], name)
    with pytest.raises(DerivationError) as info:
        spark_target.check(tree)
    message = str(info.value)
    assert "not available on Spark; " in message
    assert message.endswith("Nothing was read or spent.")
    with pytest.raises(DerivationError):
        spark_target.to_sql(tree)


#: Trees the verifier itself now refuses (the reference would raise on them), built by hand:
#: the Spark target refuses them too.
REFUSED_TREES = {
    "clip_float_bound": Call(pl.Int64(), "clip", (Col(pl.Int64(), "i"), Col(pl.Float64(), "f")),
                             (True, False)),
    "clip_out_of_range": Call(pl.Int8(), "clip", (Col(pl.Int8(), "b8"), Lit(pl.Int32(), -1000),
                                                  Lit(pl.Int32(), 1000)), (True, True)),
    "weekday_of_string": Call(pl.Int8(), "TemporalFunction.Weekday", (Col(pl.String(), "s"),)),
}


@pytest.mark.parametrize("name", list(REFUSED_TREES))
def test_check_refuses_hand_made_trees(name):
    with pytest.raises(DerivationError, match=r"not available on Spark; .+ Nothing was read"):
        spark_target.check(REFUSED_TREES[name])


def test_supported_and_operators_are_all_tested():
    """Every supported function and every operator appears in a compared tree; what is not
    supported is exactly the documented list; the catalogue has no other names."""
    assert set(FUNCTIONS) >= spark_target.SUPPORTED
    seen_calls, seen_ops = set(HAND_MADE), set()
    for frame in FRAMES:
        for tree in trees(frame).values():
            try:
                spark_target.check(tree)
            except DerivationError:
                continue
            for node in walk(tree):
                if isinstance(node, Call):
                    seen_calls.add(node.name)
                elif isinstance(node, Binary):
                    seen_ops.add(node.op)
    assert seen_calls >= spark_target.SUPPORTED, spark_target.SUPPORTED - seen_calls
    assert set(OPERATORS) <= seen_ops, set(OPERATORS) - seen_ops


@pytest.mark.parametrize("name", sorted(set(FUNCTIONS) - spark_target.SUPPORTED))
def test_unsupported_functions_are_refused(name):
    """Catalogue functions outside SUPPORTED are refused whatever their arguments, with
    what to use instead."""
    x = Col(pl.Float64(), "x")
    with pytest.raises(DerivationError, match=r"not available on Spark; .+ Nothing was read"):
        spark_target.check(Call(pl.Float64(), name, (x,)))


def test_literals_are_exact():
    """Literals are typed and survive any parser setting (no backslash escapes, no ``${}``)."""
    assert spark_target.to_sql(Lit(pl.Int8(), -128)) == "CAST(-128 AS TINYINT)"
    assert spark_target.to_sql(Lit(pl.Float64(), -0.0)) == "CAST('-0.0' AS DOUBLE)"
    assert spark_target.to_sql(Lit(pl.Float64(), NAN)) == "CAST('NaN' AS DOUBLE)"
    assert spark_target.to_sql(Lit(pl.String(), "a b")) == "'a b'"
    assert "unhex" in spark_target.to_sql(Lit(pl.String(), "it's ${x} \\n"))
    assert spark_target.to_sql(Lit(pl.Date(), dt.date(1970, 1, 2))) == "date_from_unix_date(1)"


# -- random expressions --------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_LEAVES = ("a", "b", "t8", "i32", "x", "y", "g")
_LITS = (0, 1, -1, 7, 2**31, I64[1], 0.5, -0.0, 1e308)


def _numbers(depth: int) -> st.SearchStrategy[Any]:
    """Recipes (nested tuples, which Hypothesis can print and compare) of numeric
    expressions; :func:`_build` turns one into a Polars expression."""
    leaf = st.one_of(st.sampled_from(_LEAVES).map(lambda n: ("col", n)),
                     st.sampled_from(_LITS).map(lambda v: ("lit", v)))
    if depth <= 0:
        return leaf
    sub = _numbers(depth - 1)
    binary = st.tuples(st.just("bin"), st.sampled_from(sorted(set(ARITH) - {"pow"})), sub, sub)
    unary = st.tuples(st.just("un"), st.sampled_from(
        ["abs", "neg", "floor", "ceil", "round", "clip", "fill", "i8", "i32", "i64", "f32",
         "f64", "sign"]), sub)
    choose = st.tuples(st.just("when"), st.sampled_from(sorted(COMPARE)), sub, sub, sub)
    return st.one_of(leaf, binary, unary, choose)


def _build(recipe: tuple[Any, ...]) -> Any:
    kind = recipe[0]
    if kind == "col":
        return c(recipe[1])
    if kind == "lit":
        return pl.lit(recipe[1])
    if kind == "bin":
        return ARITH[recipe[1]](_build(recipe[2]), _build(recipe[3]))
    if kind == "when":
        a, b, other = (_build(r) for r in recipe[2:])
        return pl.when(COMPARE[recipe[1]](a, b)).then(b).otherwise(other)
    x, op = _build(recipe[2]), recipe[1]
    casts = {"i8": pl.Int8, "i32": pl.Int32, "i64": pl.Int64, "f32": pl.Float32,
             "f64": pl.Float64}
    if op in casts:
        return x.cast(casts[op], strict=False)
    return {"abs": lambda: x.abs(), "neg": lambda: -x, "floor": lambda: x.floor(),
            "ceil": lambda: x.ceil(), "round": lambda: x.round(1), "sign": lambda: x.sign(),
            "clip": lambda: x.clip(-5, 5), "fill": lambda: x.fill_null(2)}[op]()


@settings(max_examples=5, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(_numbers(3), min_size=6, max_size=6))
def test_random_expressions_equal_reference(spark, recipes):
    """Random nested arithmetic (all of one example in one Spark query): Spark never raises
    and equals the reference; trees the verifier or this target refuse are skipped."""
    items = []
    for i, recipe in enumerate(recipes):
        try:
            tree = _tree(NUMERIC_SCHEMA, _build(recipe), f"e{i}")
            spark_target.check(tree)
        except DerivationError:
            continue
        items.append((f"e{i}", tree))
    if not items:
        return
    cols = _numeric_columns()
    ref = reference(pl.DataFrame(cols, schema=NUMERIC_SCHEMA), items)
    out = run_spark(spark, _spark_frame(spark, NUMERIC_SCHEMA, cols), items)
    assert not mismatches(ref, out)


def test_edge_searches_are_checked_without_their_literal():
    """histogram's search over many edges (dpframe.frames.bins) runs as a Bucketizer column:
    its edges' text never counts against MAX_SQL_CHARS, and its subject is still checked."""
    from dpframe.rowwise.functions import SEARCH_EDGES
    from dpframe.rowwise.nodes import Call, Cast, Col

    edges = tuple(float(i) + 0.123456789 for i in range(60_000))
    search = Call(pl.Int64(), SEARCH_EDGES, (Cast(pl.Float64(), Col(pl.Int64(), "x")),),
                  (edges,))
    spark_target.check(search)
