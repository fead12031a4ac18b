"""The ``.dp`` methods that answer with a table (``dpframe.frames.analyses``): a table of the
frame's library (eager Polars for a LazyFrame), carrying its release's log; planning tables
spend nothing."""

from __future__ import annotations

import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.accounting.seals import release_log_of


@pytest.mark.parametrize("make, table_type", [
    (pd.DataFrame, pd.DataFrame),
    (pl.DataFrame, pl.DataFrame),
    (pl.LazyFrame, pl.DataFrame),
])
def test_tables_are_of_the_frames_library_and_carry_their_log(make, table_type):
    pf = dpf.protect(make({"x": [1.0, 2.0, 4.0] * 10, "k": ["a", "b", "a"] * 10}), epsilon=2,
                     bounds={"x": (0, 5)}, missing={"x": 0.0}, keys={"k": ["a", "b"]})
    tables = {
        "release": pf.dp.release({"m": dpf.mean("x")}, epsilon=0.1, random_state=1),
        "describe": pf.dp.describe(epsilon=0.1, random_state=1),
        "histogram": pf.dp.histogram("x", bins=2, epsilon=0.1, random_state=1),
        "value_counts": pf.dp.value_counts("k", epsilon=0.1, random_state=1),
        "proportions": pf.dp.proportions("k", epsilon=0.1, random_state=1),
    }
    assert {n: type(t) for n, t in tables.items()} == dict.fromkeys(tables, table_type)
    assert all(release_log_of(t) is not None for t in tables.values())
    spent = pf.dp.budget.epsilon_spent
    plan = pf.dp.accuracy({"m": dpf.mean("x")}, epsilon=0.1)
    split = pf.dp.split({"s": (dpf.sum("x"), 10.0)}, epsilon=0.1, mechanism="laplace")
    assert type(plan) is table_type and type(split) is table_type
    assert pf.dp.budget.epsilon_spent == spent


def test_the_remainder_of_all_but_one_must_be_a_key():
    pf = dpf.protect(pd.DataFrame({"k": ["a", "b"] * 5}), epsilon=1, bounds={},
                     keys={"k": ["a", "b"]})
    with pytest.raises(dpf.ParameterError, match="remainder"):
        pf.dp.proportions("k", epsilon=0.1, method="all_but_one", remainder="z")
    assert pf.dp.budget.epsilon_spent == 0
