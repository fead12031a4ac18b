"""A key selection that keeps no key (dpframe.release._pipeline, dpframe.frames.results).

The released table then has no rows but keeps its declared columns, each key column of the
dtype a kept key would give it, on every backend; a ``dpf.SelectionWarning`` names the public
threshold and the ways to get groups. The warning is post-processing of the released keys:
on neighbouring data sets it is issued exactly when the released table is empty, with the same
message (it quotes no data).
"""

from __future__ import annotations

import datetime as dt
import decimal
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpframe as dpf
from dpframe.mechanisms.selection import selection_rule

QUERIES = {"n": dpf.count(), "m": dpf.mean("income")}


def _frame(per_key: int, keys: tuple[object, ...]) -> pd.DataFrame:
    column = [k for k in keys for _ in range(per_key)]
    return pd.DataFrame({"key": column, "income": np.linspace(0.0, 5.0, len(column))})


def _release(pf: object, *, epsilon: float, ci: float | None = None,
             ) -> tuple[object, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = pf.dp.groupby("key").release(  # type: ignore[attr-defined]
            QUERIES, epsilon=epsilon, delta=1e-7, random_state=3, ci=ci)
    return table, [w for w in caught if issubclass(w.category, dpf.SelectionWarning)]


def _dtype(table: object, column: str) -> str:
    return str(table[column].dtype)  # type: ignore[index]


@pytest.mark.backends("pandas", "polars", "polars-lazy", "duckdb", "spark", "dask")
@pytest.mark.parametrize("keys", [(11, 12, 13), ("north", "south", "west")],
                         ids=["int", "str"])
def test_an_empty_selection_keeps_columns_and_key_dtype_and_warns(constructor, keys):
    big = dpf.protect(constructor(_frame(400, keys)), epsilon=100, delta=1e-5,
                      bounds={"income": (0.0, 5.0)})
    kept, quiet = _release(big, epsilon=50.0)
    assert constructor.column(kept, "key") == list(keys) and quiet == []
    small = dpf.protect(constructor(_frame(1, keys)), epsilon=100, delta=1e-5,
                        bounds={"income": (0.0, 5.0)})
    empty, caught = _release(small, epsilon=0.5, ci=0.9)
    assert len(empty) == 0  # type: ignore[arg-type]
    assert list(empty.columns) == ["key", "n", "n_lower", "n_upper",  # type: ignore[attr-defined]
                                   "m", "m_lower", "m_upper"]
    assert _dtype(empty, "key") == _dtype(kept, "key")
    assert _dtype(empty, "key") not in ("object", "Null")
    assert all(_dtype(empty, c) in ("float64", "Float64") for c in ("n", "m", "m_upper"))
    assert len(caught) == 1 and caught[0].filename == __file__  # the user's line
    assert small.dp.budget.epsilon_spent == pytest.approx(0.5)


KINDS = {
    "float": [1.5, 2.5],
    "bool": [True, False],
    "date": [dt.date(2020, 1, 1), dt.date(2020, 1, 2)],
    "datetime": [dt.datetime(2020, 1, 1, 10), dt.datetime(2020, 1, 2, 11)],
    "datetime-tz": list(pd.to_datetime(["2020-01-01 10:00", "2020-01-02 11:00"])
                        .tz_localize("Europe/Paris")),
    "decimal": [decimal.Decimal("1.25"), decimal.Decimal("2.50")],
}

ARROW = {"date": pd.ArrowDtype(pa.date32()), "decimal": pd.ArrowDtype(pa.decimal128(38, 2))}


@pytest.mark.backends("pandas", "polars", "polars-lazy", "duckdb", "spark", "dask")
@pytest.mark.parametrize("kind", KINDS)
def test_every_selectable_key_type_keeps_its_dtype(constructor, kind):
    """The empty table's key column has the dtype of a table with kept keys of that type."""
    dtypes = []
    for per, epsilon in ((1, 0.5), (400, 50.0)):
        values = pd.Series(KINDS[kind] * per, dtype=ARROW.get(kind))  # (pandas: no objects)
        frame = constructor(pd.DataFrame({"key": values}))
        pf = dpf.protect(frame, epsilon=100, delta=1e-5, bounds={})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpf.SelectionWarning)
            table = pf.dp.groupby("key").count(epsilon=epsilon, delta=1e-7, random_state=1)
        assert len(table) == (0 if per == 1 else 2)
        dtypes.append(_dtype(table, "key"))
    assert dtypes[0] == dtypes[1]


def test_several_key_columns_keep_their_dtypes():
    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"], "income": [1.0, 2.0, 3.0]})
    pf = dpf.protect(df, epsilon=10, delta=1e-5, bounds={"income": (0.0, 5.0)})
    with pytest.warns(dpf.SelectionWarning):
        table = pf.dp.groupby(["a", "b"]).count(epsilon=0.5, delta=1e-7)
    assert list(table.columns) == ["a", "b", "count"] and len(table) == 0
    assert str(table["a"].dtype) == "int64" and str(table["b"].dtype) in ("str", "string")


def test_the_message_names_the_threshold_and_the_ways_out_and_quotes_no_data():
    secret = ("zq-alpha-7431", "zq-beta-9902")
    df = pd.DataFrame({"key": list(secret) * 3, "income": [4.321] * 6})
    pf = dpf.protect(df, epsilon=10, delta=1e-5, bounds={"income": (0.0, 5.0)})
    with pytest.warns(dpf.SelectionWarning) as caught:
        pf.dp.groupby("key").mean("income", epsilon=0.4, delta=1e-7)
    message = str(caught[0].message)
    rule = selection_rule(0.2, 1e-7, 1, neighbours="replace", count_upper=6.0)
    assert f"{rule.threshold:.4g}" in message and str(rule.smallest_kept(0.5)) in message
    for way in ("keys=[...]", "more epsilon", "larger selection_share", "accuracy("):
        assert way in message
    assert not any(s in message for s in (*secret, "4.321", " 3 ", " 6 "))
    assert issubclass(dpf.SelectionWarning, UserWarning)
    assert "SelectionWarning" in dpf.__all__


def test_a_selection_that_keeps_keys_does_not_warn():
    df = _frame(300, ("p", "q"))
    pf = dpf.protect(df, epsilon=10, delta=1e-5, bounds={"income": (0.0, 5.0)})
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpf.SelectionWarning)
        table = pf.dp.groupby("key").count(epsilon=2.0, delta=1e-7, random_state=0)
    assert list(table["key"]) == ["p", "q"]


def test_declared_keys_never_warn_even_with_no_rows():
    df = pd.DataFrame({"key": ["p"], "income": [1.0]})
    pf = dpf.protect(df, epsilon=10, bounds={"income": (0.0, 5.0)}, keys={"key": ["p", "q"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpf.SelectionWarning)
        table = pf.dp.groupby("key").count(epsilon=0.1)
    assert list(table["key"]) == ["p", "q"]


def test_neighbours_the_warning_is_issued_iff_the_released_table_is_empty():
    """Two data sets that differ in one row (replace one key's row by another key's), group
    sizes at the threshold so both outcomes occur: over 120 seeded releases on each, the
    warning is issued exactly when the released table has no row, and its message is one
    and the same string everywhere (public parameters only)."""
    epsilon, delta = 2.0, 1e-3  # selection: ε 1, Laplace scale 2, threshold ≈ 15.2
    rule = selection_rule(epsilon / 2, delta, 1, neighbours="replace", count_upper=30.0)
    size = rule.smallest_kept(0.5) - 3  # each key kept with probability ≈ 0.2
    base = ["u"] * size + ["v"] * size + ["w"] * (2 * 15 - 2 * size)
    first = pd.DataFrame({"key": base, "income": np.ones(len(base))})
    second = first.copy()
    second.loc[0, "key"] = "v"  # the neighbour: one row replaced
    outcomes: dict[str, set[tuple[bool, bool]]] = {"first": set(), "second": set()}
    messages = set()
    for name, df in (("first", first), ("second", second)):
        pf = dpf.protect(df, epsilon=1e4, delta=0.9, bounds={"income": (0.0, 1.0)})
        for seed in range(120):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                table = pf.dp.groupby("key").count(epsilon=epsilon, delta=delta,
                                                   random_state=seed)
            ours = [w for w in caught if issubclass(w.category, dpf.SelectionWarning)]
            messages.update(str(w.message) for w in ours)
            outcomes[name].add((len(table) == 0, len(ours) == 1))
            assert len(ours) == (1 if len(table) == 0 else 0)
    assert outcomes["first"] == outcomes["second"] == {(True, True), (False, False)}
    assert len(messages) == 1
