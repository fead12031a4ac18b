"""Key codes of a pandas nullable integer column over a run of consecutive keys
(dpframe.engine._key_codes._run_codes: a row's offset from the first key) are the codes the
keys' lookup table gives, row for row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpframe.backends.pandas._adapter import PandasBackend
from dpframe.engine import _key_codes, pandas_codes
from dpframe.query._keys import checked_keys


def _lookup_only(frame, column, keys, monkeypatch):
    """The codes without the run's shortcut: the lookup-table path alone."""
    with monkeypatch.context() as patched:
        patched.setattr(_key_codes, "_consecutive_run", lambda keys: None)
        return pandas_codes(frame, column, keys)


@pytest.mark.parametrize("declared", [list(range(10)), list(range(-3, 7)), [5], [0, 2, 1],
                                      [2, 3, 5]])
def test_the_codes_are_the_lookup_tables(declared, monkeypatch):
    rng = np.random.default_rng(7)
    values = pd.array(rng.integers(-20, 20, 400), dtype="Int64")
    values[rng.random(400) < 0.2] = pd.NA
    values[0], values[1] = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    frame = pd.DataFrame({"b": values, "x": rng.random(400)})
    keys = checked_keys(declared)
    array = frame["b"].array
    fast = _key_codes._run_codes(array._data, array._mask, keys)
    general = _lookup_only(frame, "b", keys, monkeypatch)
    consecutive = declared == list(range(declared[0], declared[0] + len(declared)))
    assert (fast is not None) == consecutive == (_key_codes._consecutive_run(keys) is not None)
    assert np.array_equal(PandasBackend().key_codes(frame, "b", keys), general)
    if fast is not None:
        assert fast.dtype == np.int64 and np.array_equal(fast, general)


def test_other_columns_take_the_lookup_path():
    keys = checked_keys(list(range(3)))
    frame = pd.DataFrame({"i": np.arange(6) % 4, "s": list("abcabc"),
                          "n": pd.array([0, 1, None, 2, 3, 1], dtype="Int32")})
    for column in ("i", "s", "n"):
        array = frame[column].array
        assert _key_codes._run_codes(getattr(array, "_data", array),
                                     getattr(array, "_mask", None), keys) is None


@pytest.mark.parametrize("dtype", ["Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16",
                                   "UInt32", "UInt64"])
@pytest.mark.parametrize("declared", [list(range(10)), list(range(-3, 7)), [0, 2, 1]])
def test_eager_polars_integer_columns_get_the_lookup_tables_codes(dtype, declared,
                                                                  monkeypatch):
    """An eager Polars integer column without nulls over a run of keys takes the offsets
    (:func:`_key_codes._run_codes` with no missing-value mask): the same codes as the lookup
    table, for every integer width, the extremes of the dtype and a column of two chunks."""
    import polars as pl

    from dpframe.engine import polars_codes

    pl_dtype = getattr(pl, dtype)
    info = np.iinfo(np.dtype(dtype.lower()))
    rng = np.random.default_rng(11)
    low = max(int(info.min), -20)
    values = [*rng.integers(low, 20, 300).tolist(), int(info.min), int(info.max)]
    column = pl.concat([pl.Series("b", values[:150], dtype=pl_dtype),
                        pl.Series("b", values[150:], dtype=pl_dtype)], rechunk=False)
    keys = checked_keys(declared)
    fast = polars_codes(column, keys)
    with monkeypatch.context() as patched:
        patched.setattr(_key_codes, "_consecutive_run", lambda keys: None)
        general = polars_codes(column, keys)
    want = np.array([declared.index(v) if v in declared else -1 for v in values])
    assert fast is not None and general is not None
    assert np.array_equal(fast, want) and np.array_equal(general, want)
