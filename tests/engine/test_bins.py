"""The block binning kernel (dpframe/engine/_bins.py): the bin counts of the numpy path equal
the narwhals path's and :meth:`Bins.index`'s, bit for bit, across block boundaries, on values
chosen to break it (NaN, ±inf, ±1.8e308, subnormals, the bounds themselves), with missing
values dropped or filled and rows of undeclared keys left out; nothing raises or warns."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import polars as pl
import pytest

from dpframe import backends
from dpframe.engine import _bins
from dpframe.query._aggregates import Agg, Bins

NASTY = [0.0, 100.0, -0.0, 5e-324, -5e-324, 1e-310, 1.7976931348623157e308,
         -1.7976931348623157e308, math.inf, -math.inf, math.nan, 99.99999999999999,
         100.00000000000001, 50.0, 49.99999999999999, math.nan]


def _values(n: int = 300) -> np.ndarray:
    rng = np.random.default_rng(34)
    x = rng.normal(50.0, 40.0, n)
    x[: len(NASTY)] = NASTY
    rng.shuffle(x)
    return x


def _reference(x: np.ndarray, bins: Bins, policy: object, mask: np.ndarray) -> np.ndarray:
    present = ~np.isnan(x)
    if policy == "drop":
        mask = mask & present
    else:
        x = np.where(present, x, float(policy))  # type: ignore[arg-type]
    return np.bincount(bins.index(x[mask]), minlength=bins.count).astype(float)


@pytest.mark.parametrize("bounds", [(0.0, 100.0), (-1e308, 1e308), (-1e-320, 1e-320)])
@pytest.mark.parametrize("policy", ["drop", 100.0])
@pytest.mark.parametrize("block", [7, None])  # None: one block, counted straight into doubles
def test_block_counts_equal_the_bin_formula_across_blocks(monkeypatch, bounds, policy, block):
    if block is not None:
        monkeypatch.setattr(_bins, "_BIN_BLOCK", block)  # many blocks, a short last one
    x = _values()
    keys = ["a", "b", "c"]
    g = np.random.default_rng(1).choice(["a", "b", "c", "z"], x.size)  # "z": undeclared
    bins = Bins(*bounds, 16)
    agg = Agg("bins", "x", bins=bins)
    df = pd.DataFrame({"x": x, "g": g})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flat = backends.aggregate(df, [agg], missing={"x": policy}, method="numpy")[agg]
        grouped = backends.aggregate(df, [agg], missing={"x": policy}, group_by="g", keys=keys,
                                     method="numpy")[agg]
    assert flat.dtype == np.float64 and flat.shape == (1, 16)
    np.testing.assert_array_equal(flat[0], _reference(x, bins, policy, np.ones(x.size, bool)))
    for i, key in enumerate(keys):
        np.testing.assert_array_equal(grouped[i], _reference(x, bins, policy, g == key))


@pytest.mark.parametrize("frame", ["pandas", "polars"])
def test_numpy_path_equals_narwhals_path(frame):
    x = np.append(_values(500), np.linspace(-1.0, 101.0, 2000))
    bins = Bins(0.0, 100.0, 1 << 12)
    agg = Agg("bins", "x", bins=bins)
    data = pd.DataFrame({"x": x}) if frame == "pandas" else pl.DataFrame(
        {"x": x}, nan_to_null=False)
    got = {m: backends.aggregate(data, [agg], missing={"x": 3.5}, method=m)[agg]
           for m in ("numpy", "narwhals")}
    np.testing.assert_array_equal(got["numpy"], got["narwhals"])
    assert got["numpy"].sum() == x.size
    assert got["numpy"][0, -1] >= 1  # the upper bound itself lands in the last bin


def test_integer_columns_bin_as_doubles():
    x = np.array([-(2**62), -3, 0, 7, 100, 101, 2**62], dtype=np.int64)
    bins = Bins(0.0, 100.0, 10)
    agg = Agg("bins", "x", bins=bins)
    got = backends.aggregate(pd.DataFrame({"x": x}), [agg], missing={"x": "drop"},
                             method="numpy")[agg]
    np.testing.assert_array_equal(got[0], np.bincount(bins.index(x.astype(float)),
                                                      minlength=10))


def test_counts_become_doubles_in_place_exactly(monkeypatch):
    monkeypatch.setattr(_bins, "_BIN_BLOCK", 5)  # several slices, a short last one
    cells = np.array([0, 1, 2**31, 2**52, 2**53 - 1, 7] * 4 - np.arange(24) % 2, np.int64)
    want = cells.astype(np.float64)
    got = _bins._as_doubles_in_place(cells)
    assert got.dtype == np.float64 and np.shares_memory(got, cells)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("policy", ["drop", 100.0])
def test_nulls_nan_and_extremes_are_counted_never_raised(policy):
    x = [None, *NASTY, None, 42.0, 3.0]
    data = pl.DataFrame({"x": x, "g": ["a", "b"] * (len(x) // 2)}, nan_to_null=False,
                        strict=False)
    bins = Bins(0.0, 100.0, 1 << 10)
    agg = Agg("bins", "x", bins=bins)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = {m: backends.aggregate(data, [agg], missing={"x": policy}, method=m,
                                     group_by="g", keys=["a", "b"])[agg]
               for m in ("auto", "narwhals")}
    np.testing.assert_array_equal(got["auto"], got["narwhals"])
    missing = 2 + sum(1 for v in NASTY if math.isnan(v))
    assert got["auto"].sum() == len(x) - (missing if policy == "drop" else 0)
