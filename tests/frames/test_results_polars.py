"""Polars result tables of numpy float64/int64 columns (dpframe.frames.results.
_polars_numeric_table: Polars' column constructors called as ``pl.Series(name, array)`` calls
them, one frame from the columns) are the tables the public constructors build: same names,
dtypes, values bit for bit (NaN stays NaN, -0.0 stays -0.0) and seal digest."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import dpframe as dpf
from dpframe.accounting.seals import table_digest
from dpframe.frames import results
from tests.helpers.result_tables import recorded_outcomes

if results._PySeries is None:  # pragma: no cover - a Polars without these constructors
    pytest.skip("this Polars builds result tables with the public constructors only",
                allow_module_level=True)


def _public(data):
    return pl.DataFrame([pl.Series(name, values) for name, values in data.items()])


def test_adversarial_columns_are_the_public_table():
    data = {"f": np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 5e-324, 1.7976931348623157e308]),
            "i": np.array([0, -1, 2**63 - 1, -(2**63), 7, 8, 9], dtype=np.int64)}
    fast = results._polars_numeric_table({k: v.copy() for k, v in data.items()})
    public = _public({k: v.copy() for k, v in data.items()})
    assert fast.schema == public.schema
    assert_frame_equal(fast, public, check_exact=True)
    assert fast["f"].to_numpy().tobytes() == data["f"].tobytes()
    assert fast["f"].is_nan().to_list() == public["f"].is_nan().to_list()
    assert fast["f"].null_count() == 0 and table_digest(fast) == table_digest(public)
    # anything else (a list, another dtype, a strided view, two dimensions) is not taken
    for other in ([1.0, 2.0], np.arange(3, dtype=np.int32), np.arange(6.0)[::2],
                  np.zeros((2, 2)), np.ma.masked_array([1.0, 2.0, 3.0], [0, 1, 0])):
        assert results._polars_numeric_table({"a": other}) is None
    assert results._polars_numeric_table({"": np.arange(3.0)}) is None  # (public: column_0)


def test_release_tables_are_the_public_tables(monkeypatch):
    rng = np.random.default_rng(0)
    frame = pl.DataFrame({"x": rng.uniform(0, 100, 200), "k": rng.integers(0, 5, 200)})
    pf = dpf.protect(frame, epsilon=1e6, bounds={"x": (0.0, 100.0)},
                     keys={"k": list(range(5))})

    def releases():
        pf.dp.histogram("x", edges=[0, 10, 50, 100], epsilon=1, random_state=1, ci=0.9)
        pf.dp.value_counts("k", epsilon=1, random_state=2)
        pf.dp.release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=1, random_state=3)

    outcomes = recorded_outcomes(monkeypatch, releases)
    fast = [results.to_frame(out, edges) for out, edges in outcomes]
    monkeypatch.setattr(results, "_polars_numeric_table", lambda data: None)
    for table, (out, edges) in zip(fast, outcomes, strict=True):
        public = results.to_frame(out, edges)
        assert table.schema == public.schema
        assert_frame_equal(table, public, check_exact=True)
        assert table_digest(table) == table_digest(public)
