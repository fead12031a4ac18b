"""dpframe/engine/_row_expressions.py: aligning an engine's groups with the declared keys.

DuckDB hands an INTERVAL group column back as Arrow ``month_day_nano_interval`` values
(``pyarrow.MonthDayNano``), which equal no ``datetime.timedelta`` key: every declared group was
empty (a count of exactly 0) where pandas and Polars answered. Such values are compared as the
timedeltas they are; one that no timedelta equals (months, sub-microsecond, beyond
timedelta's range) matches no key and fails nothing."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.engine._row_expressions import group_positions

pa = pytest.importorskip("pyarrow")

KEYS = [dt.timedelta(seconds=s) for s in (1, 2, 3)]


def test_intervals_match_timedelta_keys_and_odd_intervals_match_none():
    MDN = pa.MonthDayNano
    found = [[MDN([0, 0, 2_000_000_000]), MDN([0, 0, 1_000_000_000]), MDN([1, 0, 0]),
              MDN([0, 0, 1]), MDN([0, 2**31 - 1, 2**63 - 1]), None]]
    import narwhals.stable.v2 as nw

    pos = group_positions(found, ["d"], {"d": nw.Duration("us")}, [(k,) for k in KEYS])
    assert pos.tolist() == [1, 0, -1]


@pytest.mark.parametrize("extreme", [False, True])
def test_duckdb_interval_groups_count_like_pandas(extreme):
    duckdb = pytest.importorskip("duckdb")
    seconds = [1, 2, 2, 3] + ([10**9] if extreme else [5])
    pdf = pd.DataFrame({"d": pd.to_timedelta(seconds, unit="s"), "x": np.ones(5)})
    counts = []
    for frame in (pdf.copy(), duckdb.connect().from_df(pdf)):
        pf = dpf.protect(frame, epsilon=1e6, bounds={"x": (0, 1)}, keys={"d": KEYS},
                         missing={"x": 0.0})
        table = pf.dp.groupby("d").count(epsilon=1e5, random_state=1)
        counts.append(np.round(np.asarray(table["count"], dtype=float)).tolist())
    assert counts[0] == counts[1] == [1.0, 2.0, 1.0]
