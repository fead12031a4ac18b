"""pandas result tables built from their blocks (dpframe.frames.results._pandas_float_table,
_numeric_blocks) are the tables the general path builds: same values, dtypes, labels, row
index and seal digest."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.accounting.seals import table_digest
from dpframe.frames import results
from tests.helpers.result_tables import recorded_outcomes

pytest.importorskip("pandas.api.internals")  # (pandas 3: tables from blocks)


def test_block_tables_are_the_general_tables(monkeypatch):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.uniform(0, 100, 300), "k": rng.integers(0, 5, 300),
                          "s": rng.choice(list("ab"), 300)})
    pf = dpf.protect(frame, epsilon=1e6, bounds={"x": (0.0, 100.0)},
                     keys={"k": list(range(5)), "s": ["a", "b"]})

    def releases():
        pf.dp.histogram("x", edges=[0, 10, 50, 100], epsilon=1, random_state=1, ci=0.9)
        pf.dp.value_counts("k", epsilon=1, random_state=2)
        pf.dp.value_counts("s", epsilon=1, random_state=2)
        pf.dp.release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=1, random_state=3)

    outcomes = recorded_outcomes(monkeypatch, releases)
    fast = [results._pandas_float_table(out, edges) for out, edges in outcomes]
    assert [t is None for t in fast] == [False, False, True, False]
    monkeypatch.setattr(results, "_pandas_float_table", lambda out, edges: None)
    for table, (out, edges) in zip(fast, outcomes, strict=True):
        general = results.to_frame(out, edges)
        if table is None:
            continue
        pd.testing.assert_frame_equal(table, general, check_exact=True)
        assert type(table.index) is type(general.index)
        assert table.columns.dtype == general.columns.dtype
        assert table_digest(table) == table_digest(general)


def test_mixed_numbers_are_one_block_per_column():
    class Backend:
        results_in = "pandas"

    data = {"k": np.arange(4), "n": np.arange(4) > 1, "count": np.ones(4)}
    table = results._fresh_table(Backend(), dict(data))  # type: ignore[arg-type]
    general = pd.DataFrame(data)
    pd.testing.assert_frame_equal(table, general, check_exact=True)
    assert table_digest(table) == table_digest(general)
    labels = table.columns
    labels.name = "changed"  # a table's labels are its own object
    assert results._fresh_table(Backend(), dict(data)).columns.name is None  # type: ignore
