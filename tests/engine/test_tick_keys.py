"""Declared temporal keys on pandas and Dask frames are matched as integer ticks
(dpframe/engine/_tick_keys.py): pandas would otherwise convert the column to the keys' resolution
(or to Python objects) and fail on a value that does not fit — after the read. A key's tick is
public arithmetic, checked here against pandas' own conversion; neighbouring frames that differ
in one extreme value give the same outcome and counts within the sensitivity.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpframe as dpf
from dpframe.engine._tick_keys import key_tick
from dpframe.release._pipeline import exact_measurements

UNITS = ["s", "ms", "us", "ns"]


@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=dt.datetime(1700, 1, 1), max_value=dt.datetime(2250, 1, 1)),
       st.sampled_from(UNITS), st.booleans())
def test_a_key_tick_is_what_pandas_stores(value, unit, zoned):
    """Independent computation: pandas' own integer of the key in a column of that unit (for
    keys that fit the unit exactly; others have no tick)."""
    key = pd.Timestamp(value, tz="UTC" if zoned else None)
    kind = pa.timestamp(unit, tz="UTC" if zoned else None)
    stored = pd.Series([key]).astype(f"datetime64[{unit}, UTC]" if zoned
                                     else f"datetime64[{unit}]")
    exact = stored.iloc[0] == key
    expected = int(stored.array.asi8[0]) if exact else None
    assert key_tick(key, kind) == expected
    assert key_tick(value.replace(tzinfo=dt.UTC) if zoned else value, kind) == expected


def test_ticks_of_dates_and_keys_that_match_no_row():
    assert key_tick(dt.date(1970, 1, 2), pa.date32()) == 1
    assert key_tick(dt.date(1, 1, 1), pa.date32()) == -719_162
    assert key_tick(dt.datetime(1970, 1, 2), pa.date32()) == 1  # midnight: that day
    assert key_tick(dt.datetime(1970, 1, 2, 1), pa.date32()) is None
    assert key_tick(np.datetime64("1970-01-01T00:00:01"), pa.timestamp("ms")) == 1000
    # finer than the unit, out of int64, naive against zoned, not a date at all
    assert key_tick(pd.Timestamp(1, unit="ns"), pa.timestamp("us")) is None
    assert key_tick(dt.datetime(9999, 1, 1), pa.timestamp("ns")) is None
    assert key_tick(dt.datetime(2000, 1, 1), pa.timestamp("us", tz="UTC")) is None
    assert key_tick("2000-01-01", pa.timestamp("us")) is None


def _frames() -> dict[str, pd.DataFrame]:
    """pandas frames whose key column's resolution or storage pandas converts when it meets
    declared keys, each with one extreme value in the last row."""
    ms = np.array([0, 86_400_000, -(2**62)], dtype="datetime64[ms]")
    days = pa.array([0, 1, -(2**31)], pa.int32()).cast(pa.date32())
    return {
        "datetime64[ms]": pd.DataFrame({"k": ms}),
        "datetime64[s], zoned": pd.DataFrame({"k": pd.Series(
            np.array([0, 86_400, 2**62], dtype="datetime64[s]")).dt.tz_localize("UTC")}),
        "Arrow date32": pd.DataFrame({"k": pd.Series(days, dtype=pd.ArrowDtype(pa.date32()))}),
    }


@pytest.mark.parametrize("engine", ["pandas", "dask"])
@pytest.mark.parametrize("name", list(_frames()))
def test_public_temporal_keys_with_one_extreme_neighbour(engine, name):
    outcomes = []
    for odd in (True, False):
        frame = _frames()[name]
        if not odd:
            frame = frame.iloc[[0, 1, 0]].reset_index(drop=True)
        frame = pd.concat([frame] * 50, ignore_index=True).assign(x=0.5)
        if engine == "dask":
            dd = pytest.importorskip("dask.dataframe")
            frame = dd.from_pandas(frame, npartitions=2)
        keys = ([dt.date(1970, 1, 1), dt.date(1970, 1, 2)] if "date32" in name else
                [pd.Timestamp(0, tz="UTC" if "zoned" in name else None),
                 pd.Timestamp(86_400 * 10**9, tz="UTC" if "zoned" in name else None)])
        pf = dpf.protect(frame, epsilon=10.0, bounds={"x": (0.0, 1.0)})
        exact = exact_measurements(pf, {"n": dpf.count()}, group_by="k", keys=keys)
        counts, sensitivity = exact[("n", "count")]
        table = pf.dp.groupby("k", keys=keys).count(epsilon=1.0)
        outcomes.append((counts, sensitivity, len(table)))
    (odd, s1, n1), (even, s2, n2) = outcomes
    assert n1 == n2 == 2 and s1 == s2
    assert odd.tolist() == [50.0, 50.0] and even.tolist() == [100.0, 50.0]
    assert np.abs(odd - even).sum() <= 50 * s1  # 50 rows differ, each within the sensitivity
