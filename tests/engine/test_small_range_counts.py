"""Rows per key of a small integer key range counted without a code per row (issue 34: a value
count or grouped count at 10 M rows) equal the counts of the looked-up codes, for keys with
gaps, negative keys, values outside the range and other integer widths."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpframe.engine import _aggregation as engine
from dpframe.engine._kernel import _numpy_sums
from dpframe.query._aggregates import Agg
from dpframe.query._keys import checked_keys


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int8"])
@pytest.mark.parametrize("declared", [[0, 1, 2, 3], [5, -3, 7, 40], [2]])
def test_direct_counts_equal_the_counts_of_the_codes(dtype, declared):
    rng = np.random.default_rng(len(declared))
    low = 0 if dtype == "uint8" else -60
    values = rng.integers(low, 100, 3 * engine._BLOCK + 17).astype(dtype)
    keys = checked_keys([k for k in declared if k >= low])
    direct = engine._small_range_counts(values, keys)
    lookup = engine._int_lookup(keys, values.dtype)
    assert direct is not None and lookup is not None
    codes = engine._lookup_codes(values, lookup)
    assert direct.tolist() == engine._key_counts(codes, len(keys)).tolist()
    assert direct.tolist() == [float(np.count_nonzero(values == k)) for k in keys]


def test_wide_ranges_and_other_columns_take_the_code_path():
    wide = checked_keys([0, engine.SMALL_RANGE_CELLS * 10])
    assert engine._small_range_counts(np.arange(10), wide) is None
    assert engine._small_range_counts(np.arange(10.0), checked_keys([1, 2])) is None
    assert engine._small_range_counts(np.arange(10), [1, 2]) is None  # not checked Keys


def test_a_grouped_count_on_pandas_uses_it_and_matches_the_narwhals_path():
    from dpframe.backends import backend_of

    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"k": rng.integers(-2, 12, 5000), "x": rng.uniform(0, 1, 5000)})
    keys = checked_keys(list(range(10)))
    rows = Agg("rows")
    kw = {"backend": backend_of(frame), "missing": {}, "group_by": "k", "keys": keys}
    fast = engine.aggregate(frame, [rows], method="numpy", **kw)[rows]
    slow = engine.aggregate(frame, [rows], method="narwhals", **kw)[rows]
    assert fast.tolist() == slow.tolist() == [float((frame["k"] == k).sum()) for k in keys]


def test_a_polars_value_count_left_to_polars_is_counted_directly_with_the_same_counts():
    """Few keys for many rows (the group-by Polars would run): the kernel counts an integer
    key column directly, before leaving the group-by to Polars; a column of another dtype and
    several group columns stay with Polars. Every count equals the value-by-value count."""
    import polars as pl

    from dpframe.backends import backend_of

    rng = np.random.default_rng(5)
    k = rng.integers(-4, 9, 2000)
    keys = checked_keys([0, 1, 2, 5])
    rows = Agg("rows")
    expected = [float(np.count_nonzero(k == key)) for key in keys]
    frame = pl.DataFrame({"k": k, "s": [str(v) for v in k]})
    backend = backend_of(frame)
    assert backend.leaves_group_by(len(keys), frame.height)
    direct = _numpy_sums(frame, backend, [rows], {}, {}, "k", keys)
    assert direct is not None and direct[rows].tolist() == expected
    for agg, key_frame, column in [(rows, frame, "k"),
                                   (rows, frame.with_columns(pl.col("k").cast(pl.Float64)), "k"),
                                   (rows, frame.with_columns(k=pl.when(pl.col("k") != 7)
                                                             .then(pl.col("k"))), "k"),
                                   (Agg("rows", "k"), frame, "k")]:
        counted = engine.aggregate(key_frame, [agg], backend=backend, missing={}, group_by=column,
                                   keys=keys)[agg]
        assert counted.tolist() == expected
    assert _numpy_sums(frame.with_columns(pl.col("k").cast(pl.Float64)), backend, [rows], {},
                       {}, "k", keys) is None
    assert _numpy_sums(frame, backend, [rows], {}, {}, ("k", "s"), keys) is None
