"""The engine's fast paths give bit-identical exact aggregates to the generic narwhals path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

from dpframe import engine
from dpframe.engine import FixedPoint


def generic(native, column, fp, squares):
    cols = engine._row_expressions(column, engine.frame_columns(native)[column], fp, squares,
                                   masked=False)
    return engine._aggregates(engine._sums(native, cols, None, None), fp, 10**9, None,
                              None)[None]


@pytest.mark.parametrize("squares", [False, True])
@pytest.mark.parametrize(("lo", "hi", "center"), [(0.0, 250_000.0, 0.0), (-3.0, 7.5, 2.25),
                                                   (1e12, 1e12 + 1, 1e12)])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
def test_numpy_kernel_matches_narwhals(squares, lo, hi, center, dtype):
    rng = np.random.default_rng(7)
    n = 200_003  # several blocks plus a ragged tail
    x = rng.uniform(lo - (hi - lo) * 0.2, hi + (hi - lo) * 0.2, n)
    if dtype.startswith("int"):
        x = np.round(x).clip(np.iinfo(dtype).min, np.iinfo(dtype).max)
    df = pd.DataFrame({"x": x.astype(dtype)})
    fp = FixedPoint.choose(lo, hi, center, 4 * n, squares)
    fast = engine.aggregate(df, column="x", fixed_point=fp, squares=squares, row_cap=4 * n)[None]
    assert engine._numpy_column_sums(df, "x", fp, squares) is not None
    assert fast == generic(df, "x", fp, squares)
    assert fast == generic(pl.from_pandas(df), "x", fp, squares)
    polars_eager = pl.from_pandas(df)
    assert engine._numpy_view(polars_eager, "x", grouped=False) is not None
    fast_pl = engine.aggregate(polars_eager, column="x", fixed_point=fp, squares=squares,
                               row_cap=4 * n)[None]
    assert fast_pl == fast
    # and both equal exact integer arithmetic done in Python
    xs = (df["x"].to_numpy().astype(float) - center) / fp.q
    k = np.clip(xs, fp.k_lo, fp.k_hi)
    k = np.round(k).astype(np.int64)  # round-half-even, as the engine's rounder
    assert fast.k_sum == int(k.sum())
    if squares:
        assert fast.k_sq == sum(int(v) * int(v) for v in k)


def test_extension_dtypes_take_the_narwhals_path():
    df = pd.DataFrame({"x": pd.array([1.0, 2.0, 3.5], dtype="Float64")})
    fp = FixedPoint.choose(0.0, 10.0, 0.0, 12, False)
    assert engine._numpy_column_sums(df, "x", fp, False) is None
    agg = engine.aggregate(df, column="x", fixed_point=fp, squares=False, row_cap=12)[None]
    assert agg.k_sum * agg.q == 6.5


def generic_grouped(native, column, fp, squares, group_by, keys):
    cols = engine._row_expressions(column, engine.frame_columns(native)[column], fp, squares,
                                   masked=False)
    data = engine._sums(native, cols, group_by, keys)
    return engine._aggregates(data, fp, 10**9, group_by, keys).values()


@pytest.mark.parametrize("squares", [False, True])
@pytest.mark.parametrize("kind", ["int", "str", "categorical"])
def test_grouped_numpy_kernel_matches_narwhals(squares, kind):
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
    df = pd.DataFrame({"x": rng.normal(3.0, 4.0, n), "g": g})
    if kind == "categorical":
        df["g"] = df["g"].astype("category")
    fp = FixedPoint.choose(-2.0, 9.0, 3.5, 4 * n, squares)
    fast = engine.aggregate(df, column="x", fixed_point=fp, squares=squares, row_cap=4 * n,
                            group_by="g", keys=declared)
    assert engine._numpy_column_sums(df, "x", fp, squares, "g", declared) is not None
    assert fast.values() == generic_grouped(df, "x", fp, squares, "g", declared)
    assert fast.values() == generic_grouped(pl.from_pandas(df), "x", fp, squares, "g", declared)
    assert fast.values()[-1].rows == 0  # the empty declared group is present
