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


# -- masked integer key columns (a histogram's nullable bin column, Polars keys with nulls) --

def _masked(dtype, size, seed, share):
    """A pandas nullable integer array: values in [-60, 100) (clipped at 0 for unsigned),
    ``share`` of the rows missing (their stored integer left as it is: arbitrary)."""
    rng = np.random.default_rng(seed)
    low = 0 if dtype.startswith("U") else -60
    values = rng.integers(low, 100, size).astype(dtype.lower())
    return pd.arrays.IntegerArray(values, rng.random(size) < share)


@pytest.mark.parametrize("dtype", ["Int64", "Int8", "UInt16"])
@pytest.mark.parametrize("declared", [[0, 1, 2, 3], [5, -3, 7, 40]])
@pytest.mark.parametrize("share", [0.0, 0.1, 1.0])
def test_a_masked_key_column_counts_as_its_codes(dtype, declared, share):
    """The direct count of a nullable integer column (several blocks) equals the code path's
    (-1 for a missing key, then the codes counted) and the row-by-row count, a missing key in
    no key; the route is taken whether no row, some rows or every row misses its key."""
    from dpframe.engine._column_views import _NullableIntBlocks
    from dpframe.engine._key_codes import _masked_int_codes

    array = _masked(dtype, 2 * engine._BLOCK + 17, len(declared), share)
    keys = checked_keys([k for k in declared if k >= 0 or not dtype.startswith("U")])
    view = _NullableIntBlocks.of(array)
    assert view is not None
    direct = engine._small_range_counts(view, keys)
    assert direct is not None  # (decided from the dtype and the keys, not the mask)
    codes = _masked_int_codes(array, keys)
    assert codes is not None
    present = array._data[~array._mask]
    assert direct.tolist() == engine._key_counts(codes, len(keys)).tolist()
    assert direct.tolist() == [float(np.count_nonzero(present == k)) for k in keys]


def test_pandas_nullable_and_polars_null_keys_match_the_narwhals_path():
    """End to end (``aggregate``): a pandas ``Int64`` key column and a Polars integer key
    column with nulls take the direct count (before: codes, or Polars' group-by) and give the
    narwhals path's counts; the value kernels still read the pandas column as float64
    blocks."""
    import polars as pl

    from dpframe.backends import backend_of
    from dpframe.engine._column_views import _FloatBlocks, _MaskedBlocks, pandas_view

    array = _masked("Int64", 3000, 7, 0.2)
    keys = checked_keys(list(range(12)))
    expected = [float(np.count_nonzero(array._data[~array._mask] == k)) for k in keys]
    frames = [pd.DataFrame({"k": array}), pl.DataFrame({"k": pl.Series(array._data).set(
        pl.Series(array._mask), None)})]
    view = pandas_view(frames[0], "k")
    assert isinstance(view, _FloatBlocks) and np.array_equal(
        view[0:3000], array.to_numpy(dtype=np.float64, na_value=np.nan), equal_nan=True)
    assert isinstance(_MaskedBlocks.of(frames[1]["k"]), _MaskedBlocks)
    rows = Agg("rows")
    for frame in frames:
        backend = backend_of(frame)
        direct = _numpy_sums(frame, backend, [rows], {}, {}, "k", keys)
        assert direct is not None and direct[rows].tolist() == expected
        kw = {"backend": backend, "missing": {}, "group_by": "k", "keys": keys}
        slow = engine.aggregate(frame, [rows], method="narwhals", **kw)[rows]
        assert slow.tolist() == expected


@pytest.mark.parametrize("kind", ["pandas", "polars"])
def test_histogram_neighbours_missing_value_or_in_a_bin(kind, monkeypatch):
    """Neighbouring frames, one row's value missing (dropped: in no bin) or in a bin: both
    histograms take the direct count (the route is decided from public facts), their exact
    counts differ by at most the logged sensitivity, and both releases have the same
    outcome (a table of every bin)."""
    import polars as pl

    import dpframe as dpf
    from dpframe.engine import _kernel
    from dpframe.frames import bins as bins_
    from dpframe.frames.derivations import binned
    from dpframe.release._pipeline import exact_measurements

    taken = []

    def spy(values, keys):
        out = _small_range_counts(values, keys)
        taken.append(out is not None)
        return out

    _small_range_counts = _kernel._small_range_counts
    monkeypatch.setattr(_kernel, "_small_range_counts", spy)
    edges = [0.0, 25.0, 50.0, 75.0, 100.0]
    exact, tables = [], []
    for last in (float("nan"), 60.0):
        x = np.linspace(0.0, 100.0, 200)
        x[-1] = last
        frame = pd.DataFrame({"x": x}) if kind == "pandas" else pl.DataFrame(
            {"x": pl.Series(x).fill_nan(None)})
        pf = dpf.protect(frame, epsilon=10.0, bounds={"x": (0.0, 100.0)})
        exact.append(exact_measurements(binned(pf, "x", edges, None), {"n": dpf.count()},
                                        group_by=bins_.BIN, keys=list(range(4)))[("n", "count")])
        tables.append(pf.dp.histogram("x", edges=edges, epsilon=1.0, random_state=1))
    ((missing, s1), (present, s2)) = exact
    assert s1 == s2 and taken and all(taken)
    assert np.abs(missing - present).sum() <= s1 and present.sum() == 200.0
    assert missing.tolist() == [50.0, 50.0, 50.0, 49.0]  # (the last row: 100.0 or 60.0)
    assert [len(t) for t in tables] == [4, 4] and list(tables[0].columns) == list(
        tables[1].columns)


@pytest.mark.parametrize("size", [0, 1000])
@pytest.mark.parametrize("declared", [[0, 1, 2, 3], [3, 1, 2, 0], [-2, -1, 0], [4, 6, 5]])
def test_one_block_and_key_orders(size, declared):
    """A column of one block (counted in one call) or none, keys that fill their range in
    increasing order (the first cells taken as they are) or in another order: the counts of
    the codes, for a plain and a masked column."""
    from dpframe.engine._column_views import _NullableIntBlocks
    from dpframe.engine._key_codes import _masked_int_codes

    array = _masked("Int64", size, 3, 0.1)
    keys = checked_keys(declared)
    view = _NullableIntBlocks.of(array)
    assert view is not None
    for column, codes in [(array._data, engine._lookup_codes(array._data, keys.int_lookup)),
                          (view, _masked_int_codes(array, keys))]:
        direct = engine._small_range_counts(column, keys)
        assert direct is not None and direct.dtype == np.float64
        assert direct.tolist() == engine._key_counts(codes, len(keys)).tolist()
