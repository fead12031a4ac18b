"""The one-block pass (dpframe/engine/_kernel.py, ``one_block_sums``): an ungrouped frame of at
most one block of plain numpy columns gets the blocked pass's numbers bit for bit (and exact
integer arithmetic's), falls back to the blocked pass where a column holds NaN, and never
raises or warns because of a value."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import polars as pl
import pytest

from dpframe import backends
from dpframe.backends import backend_of
from dpframe.engine import _kernel as kernel
from dpframe.engine._aggregation import Agg, FixedPoint

N = 1_000


def _aggs(fp: FixedPoint, column: str = "x") -> list[Agg]:
    return [Agg("rows"), Agg("rows", column), Agg("sum", column, fp),
            Agg("sum_sq", column, fp)]


def _values(dtype: str, nan: bool) -> np.ndarray:
    x = np.random.default_rng(3).uniform(-8.0, 18.0, N)
    if dtype.startswith("int"):
        return np.round(x).astype(dtype)
    x[5], x[6], x[7], x[8] = np.inf, -np.inf, 1.7e308, -1.7e308  # clamped to the bounds
    x[9], x[10] = -0.0, 0.0
    if nan:
        x[::97] = np.nan
    with np.errstate(over="ignore"):  # ±1.7e308 is ±inf in float32
        return x.astype(dtype)


@pytest.mark.parametrize(("dtype", "nan"), [("float64", False), ("float64", True),
                                            ("float32", False), ("int64", False),
                                            ("int32", False)])
@pytest.mark.parametrize("fill", ["drop", 2.5])
@pytest.mark.parametrize("center", [0.0, 5.0])
def test_one_block_matches_the_blocked_pass_and_the_engine(dtype, nan, fill, center):
    df = pd.DataFrame({"x": _values(dtype, nan)})
    fp = FixedPoint.choose(0.0, 10.0, center, N, True)
    aggs, missing = _aggs(fp), {"x": fill}
    backend = backend_of(df)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing warns, whatever the values
        with np.errstate(all="raise"):  # and a caller's "raise" setting raises nothing
            one = kernel.one_block_sums(df, backend, aggs, missing)
            auto = backends.aggregate(df, aggs, missing=missing)
    with np.errstate(over="ignore"):  # (aggregate's setting, which the blocked pass runs in)
        blocked = kernel._numpy_sums(df, backend, aggs, {"x": df["x"].dtype}, missing, None,
                                     None, "numpy")
    generic = backends.aggregate(df, aggs, missing=missing, method="narwhals")
    assert (one is None) == nan  # a NaN hands the column to the blocked pass
    assert blocked is not None
    for a in aggs:
        for got in ([] if one is None else [one[a]]) + [auto[a], generic[a]]:
            assert got.dtype == np.float64 and got.shape == (1,)
            assert got.tobytes() == blocked[a].tobytes(), a
    values = df["x"].to_numpy().astype(float)
    present = ~np.isnan(values)
    if fill != "drop":
        values, present = np.where(present, values, fill), np.ones(N, dtype=bool)
    with np.errstate(over="ignore"):
        k = np.rint(np.clip((values[present] - fp.center) / fp.q, fp.k_lo, fp.k_hi))
    assert auto[Agg("rows")][0] == N and auto[Agg("rows", "x")][0] == present.sum()
    assert auto[Agg("sum", "x", fp)][0] == sum(int(v) for v in k)
    assert auto[Agg("sum_sq", "x", fp)][0] == sum(int(v) * int(v) for v in k)


def test_what_the_one_block_pass_leaves_to_the_blocked_pass():
    fp = FixedPoint.choose(0.0, 10.0, 0.0, 2 * kernel._BLOCK, False)
    small = pd.DataFrame({"x": np.ones(N), "y": np.ones(N)})
    backend = backend_of(small)
    assert kernel.one_block_sums(small, backend, [Agg("sum", "x", fp)], {}) is not None
    long = pd.DataFrame({"x": np.ones(kernel._BLOCK + 1)})  # more than one block
    assert kernel.one_block_sums(long, backend, [Agg("sum", "x", fp)], {}) is None
    product = Agg("sum_prod", "x", fp, "y", fp)  # another kind of aggregate
    assert kernel.one_block_sums(small, backend, [product], {}) is None
    nullable = pd.DataFrame({"x": pd.array([1.0, None], dtype="Float64")})  # not a plain array
    assert kernel.one_block_sums(nullable, backend, [Agg("sum", "x", fp)], {}) is None
    with_null = pl.DataFrame({"x": [1.0, None]})
    assert kernel.one_block_sums(with_null, backend_of(with_null), [Agg("sum", "x", fp)],
                                 {}) is None


@pytest.mark.parametrize("frame", [pd.DataFrame, pl.DataFrame])
def test_row_counts_alone_and_an_empty_frame(frame):
    """Rows present under "drop" without a sum of the column (NaN counted out directly), and
    a frame without rows: the blocked pass's numbers."""
    x = np.arange(40.0)
    x[::7] = np.nan
    for values in (x, x[:0]):
        df = frame({"x": values})
        aggs = [Agg("rows"), Agg("rows", "x")]
        one = kernel.one_block_sums(df, backend_of(df), aggs, {"x": "drop"})
        generic = backends.aggregate(df, aggs, missing={"x": "drop"}, method="narwhals")
        assert one is not None
        for a in aggs:
            assert one[a].tobytes() == np.asarray(generic[a], dtype=np.float64).tobytes()
