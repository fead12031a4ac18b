"""The engine's paths agree bit for bit, selected through its public ``method=`` argument
(scipy-style: ``method="numpy"``, the cache-blocked numpy kernel on zero-copy views, against
``method="narwhals"``, the generic path that runs inside pandas or Polars), and both equal exact
integer arithmetic done in Python."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe import engine
from dpframe.engine import Agg, FixedPoint


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
    fast = engine.aggregate(df, aggs, missing=policy, method="numpy")
    generic = engine.aggregate(df, aggs, missing=policy, method="narwhals")
    auto = engine.aggregate(df, aggs, missing=policy)  # auto takes the numpy path here
    for a in aggs:
        assert np.array_equal(auto[a], fast[a]), a
        assert np.array_equal(fast[a], generic[a]), a
    polars_lazy = engine.aggregate(pl.from_pandas(df, nan_to_null=False).lazy(), aggs,
                                   missing=policy, method="narwhals")
    for a in aggs:
        assert np.array_equal(polars_lazy[a], fast[a]), a
    if dtype.startswith("int"):  # a Polars column without nulls takes the numpy path too
        polars_eager = pl.from_pandas(df)
        fast_pl = engine.aggregate(polars_eager, aggs, missing=policy, method="numpy")
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
                                   "polars_int_nulls"])
@pytest.mark.parametrize("missing", ["drop", 0.5])
@pytest.mark.parametrize("grouped", [False, True])
def test_nullable_columns_take_the_numpy_path_bit_for_bit(squares, dtype, missing, grouped):
    """Nullable and Arrow-backed pandas columns, and Polars columns with nulls or several
    chunks, are read by the numpy kernel in float64 blocks (NA/null -> NaN): the results equal
    the narwhals path's, NA and NaN alike following the declared policy."""
    rng = np.random.default_rng(11)
    n = 150_007
    lo, hi = -3.0, 40.0
    x = rng.uniform(lo - 10, hi + 10, n)
    na = rng.random(n) < 0.05
    if dtype in ("Int64", "int64[pyarrow]", "polars_int_nulls"):
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
                      dtype=pl.Int64 if dtype == "polars_int_nulls" else pl.Float64,
                      strict=False)
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
    generic = engine.aggregate(frame, aggs, method="narwhals", **kw)
    if not (grouped and dtype.startswith("polars")):  # Polars group-bys run in Polars
        fast = engine.aggregate(frame, aggs, method="numpy", **kw)
        for a in aggs:
            assert np.array_equal(fast[a], generic[a]), (a, fast[a], generic[a])
    auto = engine.aggregate(frame, aggs, **kw)
    for a in aggs:
        assert np.array_equal(auto[a], generic[a]), a


def test_products_of_columns_need_the_narwhals_path():
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [1.0, -1.0, 2.0]})
    fx = FixedPoint.choose(0.0, 4.0, 2.0, 3, True)
    fy = FixedPoint.choose(-2.0, 2.0, 0.0, 3, True)
    prod = Agg("sum_prod", "x", fx, "y", fy)
    with pytest.raises(dpf.ParameterError, match="products"):
        engine.aggregate(df, [prod], missing={}, method="numpy")
    out = engine.aggregate(df, [prod], missing={})
    kx, ky = _python_k(df["x"], fx), _python_k(df["y"], fy)
    assert out[prod][0] == int((kx * ky).sum())


def test_unknown_method_is_a_parameter_error():
    with pytest.raises(dpf.ParameterError, match="'numpy' or 'narwhals'"):
        engine.aggregate(pd.DataFrame({"x": [1.0]}), [Agg("rows")], missing={}, method="fast")


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
    fast = engine.aggregate(df, aggs, method="numpy", **kw)
    generic = engine.aggregate(df, aggs, method="narwhals", **kw)
    in_polars = engine.aggregate(pl.from_pandas(df, nan_to_null=False), aggs, **kw)
    for a in aggs:
        assert fast[a].shape == (len(declared),)
        assert np.array_equal(fast[a], generic[a]), a
        assert np.array_equal(fast[a], in_polars[a]), a
    assert fast[Agg("rows")][-1] == 0  # the empty declared group is present
    # per group, the row counts are those of the declared keys only
    keys = pd.Series(g).astype(object)
    assert list(fast[Agg("rows")]) == [int((keys == k).sum()) for k in declared]
