"""Key selection after the read is total (dpframe/release/_key_observation.py; docs/privacy.md,
section K): every observed key is counted inside the engine, and only keys a Python value
stands for exactly are handed to Python — a key out of Python's range, finer than a
microsecond, or not Unicode is in no group. Neighbouring data sets that differ in one such
row give the same outcome on every engine; key columns no engine hands back exactly are
refused before anything is read or spent.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpframe as dpf
from dpframe.release._key_observation import observed_keys

COMMON = 300  # rows per common key: selected with certainty at the ε used here


def _engines() -> dict[str, Callable[[pl.DataFrame], Any]]:
    def duckdb_frame(frame: pl.DataFrame) -> Any:
        duckdb = pytest.importorskip("duckdb")
        return duckdb.connect().from_arrow(frame.to_arrow())

    def dask_frame(frame: pl.DataFrame) -> Any:
        dd = pytest.importorskip("dask.dataframe")
        return dd.from_pandas(frame.to_pandas(use_pyarrow_extension_array=True),
                              npartitions=2)

    return {
        "polars": lambda f: f.clone(),
        "polars-lazy": lambda f: f.clone().lazy(),
        "pandas": lambda f: f.to_pandas(),
        "pandas-arrow": lambda f: f.to_pandas(use_pyarrow_extension_array=True),
        "duckdb": duckdb_frame,
        "dask": dask_frame,
    }


ENGINES = _engines()


def _dates(extra: int) -> pl.Series:
    return pl.Series("k", [0] * COMMON + [5] * COMMON + [extra], dtype=pl.Int32).cast(pl.Date)


def _datetimes(extra: int, unit: str = "us", zone: str | None = None) -> pl.Series:
    day = 86_400 * {"us": 10**6, "ns": 10**9, "ms": 10**3}[unit]
    series = pl.Series("k", [0] * COMMON + [day] * COMMON + [extra], dtype=pl.Int64).cast(
        pl.Datetime(unit))
    return series.dt.replace_time_zone(zone) if zone else series


#: A neighbour's one different row (its key), built fresh each time; the other neighbour
#: holds a common key (0) in that row.
NEIGHBOURS: dict[str, Callable[[bool], pl.Series]] = {
    "a date in year 5,881,580": lambda odd: _dates(2**31 - 1 if odd else 0),
    "a date before year 1": lambda odd: _dates(-(2**31) if odd else 0),
    "a datetime in year 146,140": lambda odd: _datetimes(2**62 if odd else 0),
    # local 10000-01-01 01:00 at UTC+14 (9999-12-31 11:00 UTC): no Python value
    "a zoned datetime past year 9999 locally": lambda odd: _datetimes(
        (253_402_300_800 + 3_600) * 10**6 if odd else 0, "us", "Pacific/Kiritimati"),
    "a nanosecond beside a microsecond key": lambda odd: _datetimes(1 if odd else 0, "ns"),
    "a millisecond datetime in year 200,000": lambda odd: _datetimes(
        6 * 10**15 if odd else 0, "ms"),
}


def _frame(keys: pl.Series) -> pl.DataFrame:
    return pl.DataFrame({"k": keys, "x": np.linspace(0.0, 1.0, len(keys))})


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("case", list(NEIGHBOURS))
def test_a_key_python_cannot_hold_is_in_no_group(engine, case):
    """The same keys come back on both neighbours: the extra row's key is left out (not an
    error, not a wrong key), and the common keys' counts differ by at most 1."""
    outs = []
    for series in (NEIGHBOURS[case](True), NEIGHBOURS[case](False)):
        try:
            native = ENGINES[engine](_frame(series))
        except Exception as exc:  # the engine itself cannot hold the value: not our case
            pytest.skip(f"{engine} cannot build this frame ({type(exc).__name__})")
        found, counts = observed_keys(native, ["k"])
        outs.append(dict(zip(map(str, found), counts.tolist(), strict=True)))
    assert set(outs[0]) == set(outs[1]) and len(outs[0]) == 2
    assert all(abs(outs[0][k] - outs[1][k]) <= 1 for k in outs[0])


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("case", ["a date in year 5,881,580",
                                  "a nanosecond beside a microsecond key"])
def test_neighbours_give_the_same_release_outcome(engine, case):
    """Through the whole release (selection, then the queries on the kept keys): both
    neighbours answer, with the same keys, and nothing is printed or failed."""
    shapes = []
    for series in (NEIGHBOURS[case](True), NEIGHBOURS[case](False)):
        try:
            native = ENGINES[engine](_frame(series))
        except Exception as exc:
            pytest.skip(f"{engine} cannot build this frame ({type(exc).__name__})")
        pf = dpf.protect(native, epsilon=100.0, delta=1e-3, bounds={"x": (0.0, 1.0)})
        table = pf.dp.groupby("k").release({"n": dpf.count(), "m": dpf.mean("x")},
                                           epsilon=50.0, delta=1e-4, random_state=3)
        shapes.append(len(table))
        assert all(e["query"] != "failed release"
                   for e in pf.dp.session.ledger.snapshot_document()["entries"])
    assert shapes == [2, 2]


def test_the_derived_key_steered_by_a_predicate_is_no_oracle():
    """The review's attack: a derived Date key that is extreme only for rows the analyst's
    predicate picks. Both neighbours answer the same keys."""
    outcomes = []
    for age in (30, 101):
        frame = pl.DataFrame({"age": [40] * COMMON + [age]})
        pf = dpf.protect(frame, epsilon=100.0, delta=1e-3, bounds={"age": (0, 120)})
        key = (pl.when(pl.col("age") > 100).then(pl.lit(2**31 - 1, dtype=pl.Int32))
               .otherwise(pl.lit(0, dtype=pl.Int32)).cast(pl.Date, strict=False).alias("k"))
        table = pf.dp.with_columns(key).dp.groupby("k").count(epsilon=10.0, delta=1e-4,
                                                              random_state=1)
        outcomes.append(table.get_column("k").to_list())
    assert outcomes[0] == outcomes[1] == [dt.date(1970, 1, 1)]


@pytest.mark.parametrize("engine", list(ENGINES))
def test_negative_and_positive_zero_are_one_key(engine):
    frame = pl.DataFrame({"k": [-0.0, 0.0] * COMMON + [1.0] * COMMON + [math.nan, None],
                          "x": [0.5] * (3 * COMMON + 2)})
    found, counts = observed_keys(ENGINES[engine](frame), ["k"])
    assert sorted(zip(found, counts.tolist(), strict=True)) == [(0.0, 2 * COMMON),
                                                                (1.0, COMMON)]
    assert all(math.copysign(1.0, k) == 1.0 for k in found)


@pytest.mark.backends("spark")
def test_spark_selects_dates_and_zeros_too(constructor):
    import pandas as pd

    data = pd.DataFrame({"d": [dt.date(2020, 1, 1)] * COMMON + [dt.date(9999, 12, 31)],
                         "z": [-0.0, 0.0] * (COMMON // 2) + [1.0],
                         "x": [0.5] * (COMMON + 1)})
    found, counts = observed_keys(constructor(data), ["d", "z"])
    # 9999-12-31 is Python's last day: kept (a date, not a datetime near the end)
    assert sorted(zip(found, counts.tolist(), strict=True)) == [
        ((dt.date(2020, 1, 1), 0.0), COMMON), ((dt.date(9999, 12, 31), 1.0), 1)]


@pytest.mark.parametrize("column", [
    pl.Series("k", [[1], [2]] * 5),
    pl.Series("k", [{"a": 1}, {"a": 2}] * 5),
    pl.Series("k", [dt.timedelta(1), dt.timedelta(2)] * 5),
    pl.Series("k", [dt.time(1), dt.time(2)] * 5),
    pl.Series("k", [1.0, 2.0] * 5, dtype=pl.Float16),
    pl.Series("k", [1, 2] * 5, dtype=pl.Int128),
], ids=["list", "struct", "duration", "time", "float16", "int128"])
def test_key_columns_no_engine_hands_back_exactly_are_refused_before_the_read(column):
    pf = dpf.protect(pl.DataFrame({"k": column, "x": [0.5] * 10}), epsilon=1.0, delta=1e-3,
                     bounds={"x": (0.0, 1.0)})
    with pytest.raises(dpf.ParameterError, match="keys cannot be selected"):
        pf.dp.groupby("k").count(epsilon=0.5, delta=1e-4)
    assert pf.dp.budget.epsilon_spent == 0.0
    assert pf.dp.session.ledger.snapshot_document()["entries"] == []


def test_a_lone_surrogate_in_a_pandas_object_column_is_refused_at_protect():
    """pandas cannot group or hash such a string: refused when the data is protected (before
    any budget exists), with a message that quotes no value."""
    import pandas as pd

    frame = pd.DataFrame({"k": pd.Series(["a"] * 10 + ["\ud800"], dtype=object),
                          "pid": [f"p{i}" for i in range(11)]})
    with pytest.raises(dpf.UnsupportedInputError, match="not valid Unicode") as info:
        dpf.protect(frame, epsilon=1.0, delta=1e-3, bounds={})
    assert "\ud800" not in str(info.value)
