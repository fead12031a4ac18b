"""pandas columns as Polars reads them in derivations (dpframe/backends/pandas/_rowwise.py): every
pandas dtype either converts totally or is unreadable (refused before any read)."""

from __future__ import annotations

import narwhals as nw
import numpy as np
import pandas as pd
import pytest

import dpframe as dpf


def _protected(**columns: object) -> pd.DataFrame:
    frame = pd.DataFrame({"y": [1.0, 2.0, 3.0], **columns})
    return dpf.protect(frame, epsilon=10.0, bounds={"y": (0.0, 5.0)})


@pytest.mark.parametrize("dtype", [object, "string[python]"])
def test_a_string_that_is_not_valid_unicode_is_refused_at_protect_and_missing_anyway(dtype):
    """Refused when protected (pandas cannot hash or group it); the evaluation itself is total
    on it too (defence in depth): the value is missing, not an error."""
    import polars as pl

    from dpframe.backends import backend_of
    from dpframe.backends.pandas._rowwise import TARGET as PANDAS
    from dpframe.provenance import _derivations as derivations
    from dpframe.rowwise.engines import apply_steps

    frame = pd.DataFrame({"s": pd.Series(["a", "b\ud800b", None], dtype=dtype)})
    with pytest.raises(dpf.UnsupportedInputError, match="not valid Unicode"):
        dpf.protect(frame, epsilon=1.0, bounds={})
    schema = backend_of(frame).polars_schema(frame)
    steps, _ = derivations.verify_expressions(
        schema, [pl.col("s").str.len_chars().alias("n")], "with_columns")
    out = apply_steps(frame, steps, PANDAS, schema)
    assert out["n"].tolist()[0] == 1 and pd.isna(out["n"].tolist()[1])


def test_categories_are_read_as_their_text():
    pf = _protected(c=pd.Categorical([1, 2, None]))
    out = pf.dp.with_columns((nw.col("c") == "1").alias("one"))
    assert out["one"].tolist()[:2] == [True, False] and pd.isna(out["one"].tolist()[2])


def test_seconds_are_read_in_milliseconds():
    stamps = np.array(["2020-01-01", "2021-06-01", "1999-12-31"], dtype="datetime64[s]")
    pf = _protected(t=stamps)
    assert pf.dp.with_columns(nw.col("t").dt.year().alias("y2"))["y2"].tolist() == [
        2020, 2021, 1999]


def test_a_128_bit_result_is_int64_missing_where_it_does_not_fit():
    pf = _protected(u=pd.Series([2**64 - 1, 1, 2], dtype="uint64"), i=[1, 2, 3])
    out = pf.dp.with_columns((nw.col("u") + nw.col("i")).alias("o"))
    assert str(out["o"].dtype) == "Int64"
    assert pd.isna(out["o"].tolist()[0]) and out["o"].tolist()[1:] == [3, 5]


@pytest.mark.parametrize("column", [
    pd.Series(pd.period_range("2020-01", periods=3, freq="M")),
    pd.Series(pd.interval_range(0, 3)),
    pd.Series(pd.arrays.SparseArray([0.0, 1.0, 0.0])),
    pd.Series([1 + 2j, 3j, 0j]),
])
def test_unreadable_pandas_dtypes_are_refused_before_any_read(column):
    pf = _protected(z=column)
    with pytest.raises(dpf.DerivationError, match="cannot read"):
        pf.dp.filter(nw.col("z").is_null())
    pf.dp.filter(nw.col("y") > 1)  # the other columns are still readable
