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


def test_tables_from_pandas_constructors_are_the_public_functions(monkeypatch):
    """The block tables made with pandas' own constructors (_table_of_blocks) are the ones
    its public create_dataframe_from_blocks makes, and the public path runs without them."""
    assert results._BLOCK_CONSTRUCTORS is not None
    edges = np.array([[0.0, 1.5, -0.0], [1.5, 2.0, np.inf]])
    cases = [[(np.vstack([edges, [np.nan, 3.0, 1e300]]), np.arange(3, dtype=np.intp))],
             [(np.arange(3, dtype=np.int64)[None, :], np.zeros(1, dtype=np.intp)),
              (np.ones((2, 3)), np.array([1, 2], dtype=np.intp))]]
    names = [("bin_lower", "bin_upper", "count"), ("k", "count", "count_lower")]
    for blocks, labels in zip(cases, names, strict=True):
        made = results._table_of_blocks(blocks, results._row_index(3), results._labels(labels))
        public = results._from_blocks(blocks, index=results._row_index(3),
                                      columns=results._labels(labels))
        pd.testing.assert_frame_equal(made, public, check_exact=True)
        assert [b.dtype for b in made._mgr.blocks] == [b.dtype for b in public._mgr.blocks]
        assert [type(b) for b in made._mgr.blocks] == [type(b) for b in public._mgr.blocks]
        assert type(made._mgr) is type(public._mgr) and made.flags == public.flags
        assert table_digest(made) == table_digest(public)
        monkeypatch.setattr(results, "_BLOCK_CONSTRUCTORS", None)
        fallback = results._table_of_blocks(blocks, results._row_index(3),
                                            results._labels(labels))
        monkeypatch.undo()
        pd.testing.assert_frame_equal(fallback, public, check_exact=True)
