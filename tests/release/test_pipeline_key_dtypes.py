"""Declared keys of another kind than their column's dtype (naive against zoned datetimes, a
datetime for a date, a string or number for a temporal column, a float for a decimal, an
integer a float column cannot hold) are refused before anything is read, on every engine: a
``ParameterError`` that spends nothing and locks nothing (issue 30, item 5). Before, Polars
and LazyFrames failed after the reservation (``ReleaseFailedError``: the whole ε charged and
the data set locked) where pandas answered. Neighbouring frames (one value replaced) give the
same outcome class; keys of the column's kind are answered everywhere.
"""

from __future__ import annotations

import datetime as dt
import decimal
import warnings
import zoneinfo

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.engine._tick_keys import duration_tick, temporal_key_fits
from dpframe.errors import ParameterError

duckdb = pytest.importorskip("duckdb")

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
ENGINES = ["pandas", "polars", "lazy", "duckdb"]

#: column -> (its values (3 rows), keys of its kind, keys of another kind or out of reach)
CASES = {
    "date": (pl.Series([dt.date(2020, 1, 1)] * 3, dtype=pl.Date),
             [dt.date(2020, 1, 1)],
             [[dt.datetime(2020, 1, 1)], [pd.Timestamp("2020-01-01")], ["2020-01-01"], [1],
              [np.datetime64("2020-01-01")]]),
    "naive": (pl.Series([dt.datetime(2020, 1, 1)] * 3, dtype=pl.Datetime("us")),
              [dt.datetime(2020, 1, 1), pd.Timestamp("2020-01-02")],
              [[dt.datetime(2020, 1, 1, tzinfo=dt.UTC)], [pd.Timestamp("2020-01-01", tz="UTC")],
               [dt.date(2020, 1, 1)], ["2020-01-01"], [1.5], [dt.time(1)],
               [np.datetime64("2020-01-01T00:00:00")], [pd.Timestamp(1, unit="ns")]]),
    "zoned": (pl.Series([dt.datetime(2020, 1, 1)] * 3, dtype=pl.Datetime("us", "UTC")),
              [dt.datetime(2020, 1, 1, 1, tzinfo=PARIS), dt.datetime(2020, 7, 1, 2, tzinfo=PARIS)],
              [[dt.datetime(2020, 1, 1)], [pd.Timestamp("2020-01-01")], [dt.date(2020, 1, 1)],
               [1], [dt.datetime(2020, 1, 1, tzinfo=dt.UTC), dt.datetime(2020, 1, 1, 2,
                                                                       tzinfo=PARIS)]]),
    "ns": (pl.Series([dt.datetime(2020, 1, 1)] * 3, dtype=pl.Datetime("ns")),
           [dt.datetime(2020, 1, 1)],
           [[dt.datetime(9999, 1, 1)], [dt.datetime(2020, 1, 1, tzinfo=dt.UTC)]]),
    "decimal": (pl.Series([decimal.Decimal("1.50")] * 3, dtype=pl.Decimal(10, 2)),
                [1, 2],
                [[1.5], [10**30], ["1.5"], [True]]),
    "float": (pl.Series([1.5] * 3), [1.5, 2], [[10**400], [2**53 + 1], ["1.5"]]),
}


#: a value of each column's type that differs from the others (the replaced row)
OTHER = {pl.Date: dt.date(1, 1, 1), pl.Datetime: dt.datetime(2262, 1, 1),
         pl.Decimal: decimal.Decimal("-99999999.99"), pl.Float64: float("nan")}


def _frame(engine: str, column: pl.Series, odd: bool = False):
    values = column.to_list()
    if odd:  # a neighbour: one row replaced by another value of the column's type
        values = [*values[:2], OTHER[column.dtype.base_type()]]
    df = pl.DataFrame({"t": pl.Series(values, dtype=column.dtype), "x": [0.5] * 3})
    if engine == "pandas":
        return df.to_pandas(use_pyarrow_extension_array=column.dtype == pl.Date)
    if engine == "polars":
        return df
    if engine == "lazy":
        return df.lazy()
    return duckdb.connect().from_arrow(df.to_arrow())


def _release(frame, keys):
    session = dpf.Session()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf = dpf.protect(frame, epsilon=1.0, bounds={"x": (0.0, 1.0)}, missing={"x": 0.5},
                         session=session)
    try:
        pf.dp.groupby("t", keys=keys).count(epsilon=0.5, random_state=1)
    except Exception as exc:  # the outcome class is what is compared
        return type(exc).__name__, session, pf
    return "answered", session, pf


def _skip_object_columns(engine: str, name: str) -> None:
    if engine == "pandas" and name == "decimal":
        pytest.skip("pandas holds decimals as objects: keys of any type match by equality")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", list(CASES))
def test_mismatched_keys_are_refused_before_the_read(engine, name):
    _skip_object_columns(engine, name)
    column, _, bad = CASES[name]
    for keys in bad:
        for odd in (False, True):
            outcome, session, pf = _release(_frame(engine, column, odd), keys)
            assert outcome == "ParameterError", (keys, odd, outcome)
            budget = session.budget
            assert budget.epsilon_spent == 0 and budget.delta_spent == 0
            # nothing locked: the data set still answers a release
            pf.dp.groupby("t", keys=CASES[name][1]).count(epsilon=0.5, random_state=1)
            assert session.budget.epsilon_spent == pytest.approx(0.5)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", list(CASES))
def test_keys_of_the_columns_kind_are_answered(engine, name):
    _skip_object_columns(engine, name)
    column, good, _ = CASES[name]
    session = dpf.Session()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf = dpf.protect(_frame(engine, column), epsilon=1.0, bounds={"x": (0.0, 1.0)},
                         missing={"x": 0.5}, session=session)
    table = pf.dp.groupby("t", keys=good).count(epsilon=0.5, random_state=1)
    assert len(table) == len(good)
    assert session.budget.epsilon_spent == pytest.approx(0.5)
    # the refusal leaves the same data set usable, and spends nothing
    with pytest.raises(ParameterError, match="do not match column 't'"):
        pf.dp.groupby("t", keys=CASES[name][2][0]).count(epsilon=0.1)
    assert session.budget.epsilon_spent == pytest.approx(0.5)
    pf.dp.groupby("t", keys=good).count(epsilon=0.1, random_state=2)


def test_the_refusal_names_the_fix_and_reads_only_keys_and_dtype():
    frame = pl.DataFrame({"t": pl.Series([dt.datetime(2020, 1, 1)] * 3,
                                         dtype=pl.Datetime("us", "UTC")), "x": [0.5] * 3})
    pf = dpf.protect(frame, epsilon=1.0, bounds={"x": (0.0, 1.0)}, missing={"x": 0.5})
    with pytest.raises(ParameterError, match="with a time zone for a zoned one"):
        pf.dp.groupby("t", keys=[dt.datetime(2020, 1, 1)]).count(epsilon=0.1)


def test_temporal_key_fits_and_duration_ticks():
    import narwhals.stable.v2 as nw

    assert temporal_key_fits(dt.date(2020, 1, 1), nw.Date())
    assert not temporal_key_fits(dt.datetime(2020, 1, 1), nw.Date())
    assert temporal_key_fits(dt.datetime(2020, 1, 1, tzinfo=PARIS), nw.Datetime("us", "UTC"))
    assert not temporal_key_fits(dt.datetime(2020, 1, 1), nw.Datetime("us", "UTC"))
    assert not temporal_key_fits(dt.datetime(2020, 1, 1, 0, 0, 0, 5), nw.Datetime("ms"))
    assert temporal_key_fits(dt.time(1), nw.Time())
    assert not temporal_key_fits(dt.time(1, tzinfo=dt.UTC), nw.Time())
    assert temporal_key_fits(dt.timedelta(days=1), nw.Duration("us"))
    assert not temporal_key_fits(np.timedelta64(1, "D"), nw.Duration("us"))
    assert duration_tick(dt.timedelta(milliseconds=3), "ms") == 3
    assert duration_tick(dt.timedelta(microseconds=3), "ms") is None
    assert duration_tick(pd.Timedelta(1, unit="ns"), "ns") == 1


def test_a_column_of_a_type_dpframe_cannot_name_refuses_keys_before_the_read():
    """DuckDB reads an Arrow time64[ns] column as TIME_NS, which narwhals types as Unknown and
    DuckDB cannot compare with a TIME key (it failed after the reservation)."""
    frame = pl.DataFrame({"t": [dt.time(1)] * 3, "x": [0.5] * 3})
    session = dpf.Session()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf = dpf.protect(duckdb.connect().from_arrow(frame.to_arrow()), epsilon=1.0,
                         bounds={"x": (0.0, 1.0)}, missing={"x": 0.5}, session=session)
    with pytest.raises(ParameterError, match="cast the column first"):
        pf.dp.groupby("t", keys=[dt.time(1)]).count(epsilon=0.5)
    assert session.budget.epsilon_spent == 0
    pf.dp.count(epsilon=0.5)  # not locked


def test_dask_refuses_what_pandas_refuses():
    dd = pytest.importorskip("dask.dataframe")
    column = CASES["zoned"][0]
    for keys, expected in ((CASES["zoned"][1], "answered"), (CASES["zoned"][2][0],
                                                               "ParameterError")):
        frame = dd.from_pandas(_frame("pandas", column), npartitions=2)
        outcome, session, _ = _release(frame, keys)
        assert outcome == expected
        assert session.budget.epsilon_spent == (0.5 if expected == "answered" else 0)


#: column -> (3 values, keys refused before the read); the result table holds keys as a
#: 64-bit column, engines cannot compare a list or a struct with a key, nor bytes with text
MORE = {
    "binary": (pl.Series([b"a"] * 3, dtype=pl.Binary), [["a"], [1]]),
    "list": (pl.Series([[1]] * 3), [[1], [(1,)]]),
    "struct": (pl.Series([{"a": 1}] * 3), [[1]]),
    "int128": (pl.Series([1] * 3, dtype=pl.Int128), [[2**70], [-(2**64)]]),
    "float32": (pl.Series([1.5] * 3, dtype=pl.Float32), [[2**64], [2**53 + 1]]),
    "float mixed signs": (pl.Series([1.5] * 3), [[-1, 2**63]]),
}


@pytest.mark.parametrize("engine", ["polars", "lazy", "duckdb"])
@pytest.mark.parametrize("name", list(MORE))
def test_more_keys_engines_fail_on_after_the_read_are_refused_before(engine, name):
    if engine == "duckdb" and name == "int128":
        pytest.skip("Arrow has no 128-bit integers to hand the column to DuckDB")
    column, bad = MORE[name]
    for keys in bad:
        outcome, session, _ = _release(_frame(engine, column), keys)
        assert outcome == "ParameterError", (keys, outcome)
        assert session.budget.epsilon_spent == 0


def test_64_bit_keys_at_the_ends_of_their_range_are_answered():
    for dtype, keys in ((pl.UInt64, [2**63, 2**64 - 1]), (pl.Int64, [-(2**63), 2**63 - 1]),
                        (pl.Binary, [b"a", b"b"])):
        column = pl.Series([b"a"] * 3 if dtype == pl.Binary else [1] * 3, dtype=dtype)
        outcome, session, _ = _release(_frame("polars", column), keys)
        assert outcome == "answered" and session.budget.epsilon_spent == 0.5


def test_the_fast_paths_refuse_exactly_what_the_tick_check_refuses():
    import narwhals.stable.v2 as nw

    from dpframe.release._key_checks import _bad_temporal_keys

    class NoOffset(dt.tzinfo):
        def utcoffset(self, when):
            return None

    lists = [
        [dt.datetime(2000, 1, 1), dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59)],
        [dt.datetime(2000, 1, 1, tzinfo=dt.UTC), dt.datetime(2000, 1, 1, tzinfo=PARIS),
         dt.datetime(2000, 1, 1)],
        [dt.datetime(2000, 1, 1, tzinfo=NoOffset()), dt.datetime(2000, 1, 2)],
        [dt.date(1, 1, 1), dt.date(9999, 12, 31)],
    ]
    for dtype in (nw.Datetime("us"), nw.Datetime("us", "UTC"), nw.Date()):
        for keys in lists:
            slow = [k for k in keys if not temporal_key_fits(k, dtype)]
            assert _bad_temporal_keys(dtype, keys) == slow, (dtype, keys)
