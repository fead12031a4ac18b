"""The engine's paths agree bit for bit, selected through its public ``method=`` argument
(scipy-style: ``method="numpy"``, the cache-blocked numpy kernel on zero-copy views, against
``method="narwhals"``, the generic path that runs inside pandas or Polars), and both equal exact
integer arithmetic done in Python."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe import backends
from dpframe.engine import _aggregation as engine
from dpframe.engine._aggregation import Agg, FixedPoint


def _aggs(fp: FixedPoint, squares: bool, column: str = "x") -> list[Agg]:
    out = [Agg("rows"), Agg("rows", column), Agg("sum", column, fp)]
    if squares:
        out.append(Agg("sum_sq", column, fp))
    return out


def _python_k(values: np.ndarray, fp: FixedPoint) -> np.ndarray:
    """round(clip((x − c)/q)) in exact integer arithmetic (round-half-even, like the engine)."""
    with np.errstate(over="ignore"):  # ±1.7e308 / q overflows to ±inf: clamped below
        xs = (np.asarray(values, dtype=float) - fp.center) / fp.q
    return np.round(np.clip(xs, fp.k_lo, fp.k_hi)).astype(np.int64)


@pytest.mark.parametrize("squares", [False, True])
@pytest.mark.parametrize(("lo", "hi", "center"), [(0.0, 250_000.0, 0.0), (-3.0, 7.5, 2.25),
                                                   (1e12, 1e12 + 1, 1e12)])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
@pytest.mark.parametrize("missing", ["drop", 0.5])
def test_numpy_method_matches_narwhals_method(squares, lo, hi, center, dtype, missing):
    rng = np.random.default_rng(7)
    n = 200_003  # several blocks plus a ragged tail
    x = rng.uniform(lo - (hi - lo) * 0.2, hi + (hi - lo) * 0.2, n)
    if dtype.startswith("int"):
        x = np.round(x).clip(np.iinfo(dtype).min, np.iinfo(dtype).max)
    else:
        x[::1009] = np.nan  # missing values follow the declared policy in both paths
        x[7] = np.inf  # infinities are values: clamped to the bounds
        x[8] = -np.inf
        x[9], x[10] = 1.7e308, -1.7e308  # finite extremes (inf in float32): clamped too
    with np.errstate(over="ignore"):  # ±1.7e308 is ±inf in float32
        df = pd.DataFrame({"x": x.astype(dtype)})
    fill = lo + (hi - lo) * missing if missing != "drop" else "drop"
    policy = {"x": fill}
    fp = FixedPoint.choose(lo, hi, center, n, squares)
    aggs = _aggs(fp, squares)
    fast = backends.aggregate(df, aggs, missing=policy, method="numpy")
    generic = backends.aggregate(df, aggs, missing=policy, method="narwhals")
    auto = backends.aggregate(df, aggs, missing=policy)  # auto takes the numpy path here
    for a in aggs:
        assert np.array_equal(auto[a], fast[a]), a
        assert np.array_equal(fast[a], generic[a]), a
    polars_lazy = backends.aggregate(pl.from_pandas(df, nan_to_null=False).lazy(), aggs,
                                   missing=policy, method="narwhals")
    for a in aggs:
        assert np.array_equal(polars_lazy[a], fast[a]), a
    if dtype.startswith("int"):  # a Polars column without nulls takes the numpy path too
        polars_eager = pl.from_pandas(df)
        fast_pl = backends.aggregate(polars_eager, aggs, missing=policy, method="numpy")
        for a in aggs:
            assert np.array_equal(fast_pl[a], fast[a]), a
    # and both equal exact integer arithmetic done in Python
    values = df["x"].to_numpy().astype(float)
    present = ~np.isnan(values)
    if fill != "drop":
        values = np.where(present, values, fill)
        present = np.ones(n, dtype=bool)
    k = _python_k(np.where(present, values, center), fp)[present]
    assert fast[Agg("rows")][0] == n
    assert fast[Agg("rows", "x")][0] == present.sum()
    assert fast[Agg("sum", "x", fp)][0] == int(k.sum())
    if squares:
        assert fast[Agg("sum_sq", "x", fp)][0] == sum(int(v) * int(v) for v in k)


@pytest.mark.parametrize("squares", [False, True])
@pytest.mark.parametrize("dtype", ["Float64", "Int64", "boolean", "double[pyarrow]",
                                   "int64[pyarrow]", "polars_nulls", "polars_chunks",
                                   "polars_int_nulls", "polars_sliced", "polars_int32_nulls"])
@pytest.mark.parametrize("missing", ["drop", 0.5])
@pytest.mark.parametrize("grouped", [False, True])
def test_nullable_columns_take_the_numpy_path_bit_for_bit(squares, dtype, missing, grouped):
    """Nullable and Arrow-backed pandas columns, and Polars columns with nulls (values buffer
    and validity bitmap read in place, also from a slice that starts mid-byte) or several
    chunks, are read by the numpy kernel in float64 blocks (NA/null -> NaN): the results equal
    the narwhals path's, NA and NaN alike following the declared policy, grouped or not."""
    rng = np.random.default_rng(11)
    n = 150_007
    lo, hi = -3.0, 40.0
    x = rng.uniform(lo - 10, hi + 10, n)
    na = rng.random(n) < 0.05
    if dtype in ("Int64", "int64[pyarrow]", "polars_int_nulls", "polars_int32_nulls"):
        x = np.round(x)
    if dtype == "boolean":
        x = (x > 10).astype(float)
    values = pd.array(np.where(na, None, x).tolist(), dtype={
        "Float64": "Float64", "Int64": "Int64", "boolean": "boolean",
        "double[pyarrow]": "double[pyarrow]", "int64[pyarrow]": "int64[pyarrow]"}.get(
            dtype, "Float64"))
    if dtype == "Float64":
        values[::997] = np.nan  # NaN and NA both missing
    g = rng.integers(0, 9, n)
    df = pd.DataFrame({"x": values, "g": g})
    if dtype.startswith("polars"):
        s = pl.Series("x", np.where(na, None, x).tolist(),
                      dtype={"polars_int_nulls": pl.Int64, "polars_int32_nulls": pl.Int32}.get(
                          dtype, pl.Float64), strict=False)
        if dtype == "polars_sliced":  # an Arrow offset of 5 bits into the validity bitmap
            s = pl.Series("x", [None] * 5 + s.to_list(), dtype=pl.Float64).slice(5)
            assert s.n_chunks() == 1 and s.to_arrow().offset == 5
            assert engine._MaskedBlocks.of(s) is not None
        if dtype == "polars_chunks":
            s = pl.concat([s.slice(0, 70_001).fill_null(1.0), s.slice(70_001).fill_null(2.0)],
                          rechunk=False)
            assert s.n_chunks() > 1
        frame = pl.DataFrame({"x": s, "g": g})
    else:
        frame = df
    policy = {"x": "drop" if missing == "drop" else lo + (hi - lo) * missing}
    fp = FixedPoint.choose(lo, hi, 1.5, n, squares)
    aggs = _aggs(fp, squares)
    kw: dict = {"missing": policy}
    if grouped:
        kw.update(group_by="g", keys=[0, 2, 3, 5, 8, 42])
    generic = backends.aggregate(frame, aggs, method="narwhals", **kw)
    fast = backends.aggregate(frame, aggs, method="numpy", **kw)
    for a in aggs:
        assert np.array_equal(fast[a], generic[a]), (a, fast[a], generic[a])
    auto = backends.aggregate(frame, aggs, **kw)
    for a in aggs:
        assert np.array_equal(auto[a], generic[a]), a


def test_products_of_columns_need_the_narwhals_path():
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [1.0, -1.0, 2.0]})
    fx = FixedPoint.choose(0.0, 4.0, 2.0, 3, True)
    fy = FixedPoint.choose(-2.0, 2.0, 0.0, 3, True)
    prod = Agg("sum_prod", "x", fx, "y", fy)
    with pytest.raises(dpf.ParameterError, match="products"):
        backends.aggregate(df, [prod], missing={}, method="numpy")
    out = backends.aggregate(df, [prod], missing={})
    kx, ky = _python_k(df["x"], fx), _python_k(df["y"], fy)
    assert out[prod][0] == int((kx * ky).sum())


def test_unknown_method_is_a_parameter_error():
    with pytest.raises(dpf.ParameterError, match="'numpy' or 'narwhals'"):
        backends.aggregate(pd.DataFrame({"x": [1.0]}), [Agg("rows")], missing={}, method="fast")


@pytest.mark.parametrize("squares", [False, True])
@pytest.mark.parametrize("kind", ["int", "str", "categorical", "string[pyarrow]", "object"])
def test_grouped_numpy_method_matches_narwhals_method(squares, kind):
    rng = np.random.default_rng(3)
    n = 150_001
    raw_keys = rng.integers(0, 12, n)
    if kind == "int":
        g = raw_keys
        declared = [0, 2, 3, 5, 7, 11, 99]  # 99: empty group; 1, 4, ... undeclared
    else:
        g = np.array([f"k{v}" for v in raw_keys], dtype=object)
        g[::97] = None  # missing keys are never aggregated
        declared = ["k0", "k2", "k3", "k5", "k7", "k11", "k99"]
    x = rng.normal(3.0, 4.0, n)
    x[::101] = np.nan
    df = pd.DataFrame({"x": x, "g": g})
    if kind == "categorical":
        df["g"] = df["g"].astype("category")
    elif kind == "string[pyarrow]":
        df["g"] = df["g"].astype(kind)
    elif kind == "object":  # Python strings and None
        df["g"] = pd.Series(g, dtype=object)
    if kind in ("str", "string[pyarrow]"):  # Arrow-backed: matched in Arrow
        assert engine._arrow_string_codes(df["g"], declared) is not None
    fp = FixedPoint.choose(-2.0, 9.0, 3.5, n, squares)
    aggs = _aggs(fp, squares)
    kw = {"missing": {"x": "drop"}, "group_by": "g", "keys": declared}
    fast = backends.aggregate(df, aggs, method="numpy", **kw)
    generic = backends.aggregate(df, aggs, method="narwhals", **kw)
    in_polars = backends.aggregate(pl.from_pandas(df, nan_to_null=False), aggs, **kw)
    for a in aggs:
        assert fast[a].shape == (len(declared),)
        assert np.array_equal(fast[a], generic[a]), a
        assert np.array_equal(fast[a], in_polars[a]), a
    assert fast[Agg("rows")][-1] == 0  # the empty declared group is present
    # per group, the row counts are those of the declared keys only
    keys = pd.Series(g).astype(object)
    assert list(fast[Agg("rows")]) == [int((keys == k).sum()) for k in declared]


# -- engines: the Spark SQL text and the Dask per-partition path against the numpy path ---------
def _engine_frame(name: str, df: pd.DataFrame):
    from conftest import Constructor

    return Constructor(name)(df)


def _tricky(n: int, seed: int) -> pd.DataFrame:
    """Floats with NaN, ±inf and finite extremes, float32, ints, booleans and keys."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-5.0, 12.0, n)
    x[::13] = np.nan
    x[5], x[6], x[7], x[8] = np.inf, -np.inf, 1.7e308, -1.7e308
    return pd.DataFrame({
        "x": x, "x32": rng.uniform(-5.0, 12.0, n).astype("float32"),
        "i": rng.integers(-20, 40, n), "b": rng.random(n) < 0.3,
        "k": rng.integers(0, 6, n), "f": rng.integers(0, 6, n).astype(float),
        "s": np.array([f"k{v}" for v in rng.integers(0, 6, n)], dtype=object)})


def _engine_aggs(n: int) -> list[Agg]:
    out: list[Agg] = [Agg("rows")]
    for col, (lo, hi, c) in {"x": (-3.0, 7.5, 2.25), "x32": (0.0, 4.0, 0.0),
                             "i": (-10.0, 30.0, 10.0), "b": (0.0, 1.0, 0.5)}.items():
        fp = FixedPoint.choose(lo, hi, c, n, True)
        out += [Agg("rows", col), Agg("sum", col, fp), Agg("sum_sq", col, fp)]
    fx = FixedPoint.choose(-3.0, 7.5, 2.25, n, True)
    fi = FixedPoint.choose(-10.0, 30.0, 10.0, n, True)
    out.append(Agg("sum_prod", "x", fx, "i", fi))
    return out


@pytest.mark.parametrize("kind", ["int", "int32", "int_nulls", "str", "categorical"])
def test_polars_group_keys_are_matched_outside_polars_bit_for_bit(kind):
    """An eager Polars frame grouped on an integer column without nulls (pandas' hash index
    of the keys) or a String column (Arrow's index_in) runs the numpy kernel; other key
    columns group in Polars. Both give the narwhals path's exact sums."""
    rng = np.random.default_rng(8)
    n = 90_001
    raw = rng.integers(0, 12, n)
    x = rng.normal(3.0, 4.0, n)
    if kind.startswith("int"):
        g = pl.Series("g", raw, dtype=pl.Int32 if kind == "int32" else pl.Int64)
        if kind == "int_nulls":
            g = g.scatter(np.arange(0, n, 89), None)
        declared = [0, 2, 3, 5, 7, 11, 99]
    else:
        g = pl.Series("g", [f"k{v}" for v in raw])
        if kind == "categorical":
            g = g.cast(pl.Categorical)
        declared = ["k0", "k2", "k3", "k5", "k7", "k11", "k99"]
    frame = pl.DataFrame({"x": x, "g": g})
    fp = FixedPoint.choose(-2.0, 9.0, 3.5, n, True)
    aggs = _aggs(fp, True)
    kw = {"missing": {"x": "drop"}, "group_by": "g", "keys": declared}
    generic = backends.aggregate(frame, aggs, method="narwhals", **kw)
    if kind in ("int", "int32", "str"):
        fast = backends.aggregate(frame, aggs, method="numpy", **kw)
    else:
        with pytest.raises(dpf.ParameterError, match="method='numpy'"):
            backends.aggregate(frame, aggs, method="numpy", **kw)
        fast = backends.aggregate(frame, aggs, **kw)
    for a in aggs:
        assert np.array_equal(fast[a], generic[a]), a
    assert fast[Agg("rows")][-1] == 0 and fast[Agg("rows")].sum() > 0


@pytest.mark.parametrize("engine_name", ["spark", "dask"])
@pytest.mark.parametrize("missing", ["drop", 1.25])
@pytest.mark.parametrize(("group_by", "keys"), [
    (None, None), ("k", [0, 2, 3, 5, 99]), ("k", [5, 4, 3, 2, 1]), ("k", list(range(-3, 40, 2))),
    ("f", [0, 2.0, 3, 99]), ("s", ["k1", "k3", "k9"]),
    (("k", "s"), [(0, "k1"), (2, "k3"), (5, "k9")])])
def test_engine_paths_match_the_numpy_path(engine_name, missing, group_by, keys,
                                          monkeypatch):
    n = 4_001
    df = _tricky(n, 11)
    aggs = _engine_aggs(n)
    policy = {"x": missing, "x32": missing, "i": missing, "b": missing}
    kw = {"missing": policy, "group_by": group_by, "keys": keys}
    want = backends.aggregate(df, aggs, **kw)  # numpy where it can, else narwhals in pandas
    native = _engine_frame(engine_name, df)
    sql_answers: list[Any] = []
    if engine_name == "spark":  # record what the SQL text gave (None: the narwhals fallback)
        from dpframe.backends.spark import _adapter as spark_adapter

        sql = spark_adapter.spark_sums
        monkeypatch.setattr(spark_adapter, "spark_sums",
                            lambda *a: sql_answers.append(sql(*a)) or sql_answers[-1])
    got = backends.aggregate(native, aggs, **kw)
    generic = engine._expression_sums(native, backends.backend_of(native), aggs,
                                      engine.frame_columns(native), policy, group_by,
                                      keys)  # the narwhals expressions in the engine
    for a in aggs:
        assert np.array_equal(got[a], want[a]), a
        assert np.array_equal(generic[a], want[a]), a
    if engine_name == "spark":  # the SQL text ran (no fallback to the narwhals expressions)
        assert len(sql_answers) == 1 and sql_answers[0] is not None


def test_spark_keys_it_cannot_write_as_literals_take_the_narwhals_path(monkeypatch):
    from dpframe.backends.spark import _sql as engine_spark

    df = pd.DataFrame({"s": ["it's", "a\\b", "c", "it's"], "x": [1.0, 2.0, 3.0, 4.0]})
    native = _engine_frame("spark", df)
    fp = FixedPoint.choose(0.0, 10.0, 5.0, 4, False)
    aggs = [Agg("rows"), Agg("sum", "x", fp)]
    columns = engine.frame_columns(native)
    assert engine_spark.spark_sums(native, aggs, columns, {}, "s", ["it's", "c"]) is None
    got = backends.aggregate(native, aggs, missing={}, group_by="s", keys=["it's", "a\\b", "z"])
    assert got[aggs[0]].tolist() == [2.0, 1.0, 0.0]
    assert (got[aggs[1]] * fp.q + 5.0 * got[aggs[0]]).tolist() == [5.0, 2.0, 0.0]


def test_spark_double_literals_are_exact():
    from dpframe.backends.spark._sql import _double

    spark = _engine_frame("spark", pd.DataFrame({"x": [0.0]})).sparkSession
    values = [0.1, -0.1, 1e-300, 5e-324, 1.7976931348623157e308, 2.0**-60, -2.5e16,
              6755399441055744.0, 1.0 / 3.0, -0.0]
    row = spark.sql("SELECT " + ", ".join(f"{_double(v)} AS c{i}"
                                         for i, v in enumerate(values))).collect()[0]
    assert [float(v).hex() for v in row] == [v.hex() for v in values]


def test_spark_integer_keys_in_few_runs_are_filtered_by_ranges():
    """Declared integer keys forming few runs of consecutive integers become BETWEEN ranges
    (the same rows; much cheaper in Spark than a 1,000-element IN); many runs keep IN."""
    import narwhals.stable.v2 as nw

    from dpframe.backends.spark._sql import MAX_RANGES, _key_filter

    assert _key_filter("k", nw.Int64, list(range(1000))) == "(`k` BETWEEN 0 AND 999)"
    assert _key_filter("k", nw.Int32, [7, -2, -1, 0, 9, 8]) == \
        "(`k` BETWEEN -2 AND 0 OR `k` BETWEEN 7 AND 9)"
    assert _key_filter("k", nw.Int64, [4]) == "(`k` = 4)"
    many = list(range(0, 2 * (MAX_RANGES + 1), 2))
    assert _key_filter("k", nw.Int64, many).startswith("`k` IN (0, 2, 4")
    assert _key_filter("f", nw.Float64, [1, 2]) == "`f` IN (1.0D, 2.0D)"  # never ranges
    assert _key_filter("s", nw.String, ["a", "b"]) == "`s` IN ('a', 'b')"
    assert _key_filter("s", nw.String, ["it's"]) is None


def test_polars_group_by_with_few_keys_per_row_stays_in_polars():
    """``auto`` leaves an eager Polars group-by with fewer than one key per 160 rows to
    Polars' parallel group-by; with more keys, the numpy kernel (same exact sums)."""
    n = 16_000
    frame = pl.DataFrame({"g": np.arange(n) % 200, "x": np.linspace(0.0, 1.0, n)})
    fp = FixedPoint.choose(0.0, 1.0, 0.5, n, False)
    aggs = _aggs(fp, False)
    cols = engine.frame_columns(frame)
    few, many = list(range(10)), list(range(200))
    miss = {"x": "drop"}
    polars = backends.backend_of(frame)
    assert engine._numpy_sums(frame, polars, aggs, cols, miss, "g", few) is None
    assert engine._numpy_sums(frame, polars, aggs, cols, miss, "g", few, "numpy") is not None
    assert engine._numpy_sums(frame, polars, aggs, cols, miss, "g", many) is not None
    for keys in (few, many):
        auto = backends.aggregate(frame, aggs, missing=miss, group_by="g", keys=keys)
        generic = backends.aggregate(frame, aggs, missing=miss, group_by="g", keys=keys,
                                   method="narwhals")
        for a in aggs:
            assert np.array_equal(auto[a], generic[a]), a


@pytest.mark.parametrize("missing", ["drop", 2.5])
@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("squares", [False, True])
def test_nan_after_clean_blocks_is_caught_by_the_speculative_kernel(missing, grouped, squares):
    """The kernel sums a float block before looking for NaN (NaN reaches every sum); a NaN
    that first appears in a late block, next to ±inf, still follows the declared rule."""
    n = 5 * engine._BLOCK + 123
    x = np.random.default_rng(4).uniform(-5.0, 15.0, n)
    x[3 * engine._BLOCK + 7] = np.nan  # blocks 0-2 clean
    x[3 * engine._BLOCK + 9] = np.inf
    x[4 * engine._BLOCK + 1 :: 1001] = np.nan
    x[-1] = -np.inf
    df = pd.DataFrame({"x": x, "g": np.arange(n) % 3})
    fp = FixedPoint.choose(0.0, 10.0, 5.0, n, squares)
    aggs = _aggs(fp, squares)
    kw: dict = {"missing": {"x": missing}}
    if grouped:
        kw.update(group_by="g", keys=[0, 1, 2])
    fast = backends.aggregate(df, aggs, method="numpy", **kw)
    generic = backends.aggregate(df, aggs, method="narwhals", **kw)
    for a in aggs:
        assert np.array_equal(fast[a], generic[a]), a


@pytest.mark.parametrize("dtype", ["Int8", "Int16", "Int32", "Int64", "Int128", "UInt8",
                                   "UInt16", "UInt32", "UInt64", "UInt128", "Float32",
                                   "Float64"])
@pytest.mark.parametrize("as_key", [False, True])
def test_every_polars_number_dtype_with_and_without_nulls(dtype, as_key):
    """Which path reads a Polars column is decided from its dtype, never its values: with or
    without a null, every number dtype (as the value or as the group key) is answered, and
    equals the narwhals path (an error for some values only would leak them)."""
    pl_dtype = getattr(pl, dtype)
    n = 2_000
    base = np.arange(n) % 19 + 1
    for with_null in (False, True):
        values = pl.Series("v", base, dtype=pl_dtype)
        if with_null:
            values = values.scatter([5], None)
        if as_key:
            frame = pl.DataFrame({"v": values, "x": np.linspace(0.0, 1.0, n)})
            column, kw = "x", {"group_by": "v", "keys": list(range(1, 20))}
        else:
            frame = pl.DataFrame({"v": values})
            column, kw = "v", {}
        fp = FixedPoint.choose(0.0, 20.0, 10.0, n, True)
        aggs = _aggs(fp, True, column)
        auto = backends.aggregate(frame, aggs, missing={column: "drop"}, **kw)
        generic = backends.aggregate(frame, aggs, missing={column: "drop"}, method="narwhals",
                                   **kw)
        for a in aggs:
            assert np.array_equal(auto[a], generic[a]), (dtype, with_null, a)


@pytest.mark.parametrize("build", [
    lambda v: pl.DataFrame({"f": v}).lazy().with_columns(pl.col("f").cast(pl.Float16)),
    lambda v: pl.DataFrame({"f": v}, schema={"f": pl.Float16}),
    lambda v: pd.DataFrame({"f": np.asarray(v, dtype=np.float16)}),
], ids=["polars-lazy cast", "polars Float16", "pandas float16"])
def test_a_float16_nan_is_a_missing_value(build):
    """Every float width treats NaN as missing: one NaN row moves the exact sum by at most the
    logged sensitivity (it used to turn the whole Polars sum into NaN, shown as 0), and the
    quantile answers on both neighbours."""
    from dpframe.release._pipeline import exact_measurements

    sums = []
    for last in (5.0, float("nan")):
        pf = dpf.protect(build([5.0] * 999 + [last]), epsilon=10.0, bounds={"f": (-10, 10)})
        (value, sensitivity), = exact_measurements(pf, {"s": dpf.sum("f")}).values()
        sums.append(float(value[0]))
        assert np.isfinite(pf.dp.quantile("f", 0.5, epsilon=1.0, random_state=0))
    assert abs(sums[0] - sums[1]) <= sensitivity and sums[1] == 4995.0
