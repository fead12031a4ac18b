"""Group-by with public keys: parallel composition, empty groups, undeclared keys hidden."""

from __future__ import annotations

import narwhals as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf

KEYS = ["north", "south", "west"]  # "west" is empty, "east" exists but is undeclared


def _data(n=600):
    rng = np.random.default_rng(4)
    return pd.DataFrame({
        "region": rng.choice(["north", "south", "east"], n),
        "age": rng.uniform(0, 100, n),
    })


ALL_REGIONS = ["north", "south", "east", "west"]


def _keyed(constructor, key_dtype):
    """The data in this backend, its key column as a string, categorical or enum (pandas: a
    categorical with fixed categories) column."""
    frame = constructor(_data())
    if key_dtype == "string":
        return frame
    if constructor.family == "pandas":
        dtype = "category" if key_dtype == "categorical" else pd.CategoricalDtype(ALL_REGIONS)
        return frame.assign(region=frame["region"].astype(dtype))
    dtype = pl.Categorical if key_dtype == "categorical" else pl.Enum(ALL_REGIONS)
    return frame.with_columns(pl.col("region").cast(dtype))


def _col(table, name):
    return list(table[name]) if isinstance(table, pd.DataFrame) else table[name].to_list()


@pytest.mark.parametrize("key_dtype", ["string", "categorical", "enum"])
def test_groupby_all_queries_declared_keys_only(constructor, key_dtype):
    if key_dtype != "string" and constructor.name in ("duckdb", "spark", "dask"):
        pytest.skip("categorical and enum key columns are built with pandas' and Polars' casts")
    frame = _keyed(constructor, key_dtype)
    s = dpf.Session()
    pf = dpf.protect(frame, epsilon=4.0, bounds={"age": (0, 100)}, session=s)
    g = pf.dp.groupby("region", keys=KEYS)
    out = {
        "count": g.count(epsilon=1.0, random_state=1),
        "sum": g.sum("age", epsilon=1.0, random_state=2),
        "mean": g.mean("age", epsilon=1.0, random_state=3),
        "variance": g.variance("age", epsilon=1.0, random_state=4),
    }
    for name, table in out.items():
        assert [str(k) for k in _col(table, "region")] == KEYS, (key_dtype, name)
        assert list(table.columns) == ["region", name]
        assert len(table) == 3
    assert "east" not in str(out)
    # parallel composition: each group-by cost its ε once
    assert s.budget.epsilon_spent == pytest.approx(4.0)
    truth = _data().groupby("region")["age"]
    counts = dict(zip(KEYS, _col(out["count"], "count"), strict=True))
    assert counts["north"] == pytest.approx(truth.size()["north"], abs=15)
    assert all(0 <= c <= 600 for c in counts.values())  # counts: domain [0, n]
    means = dict(zip(KEYS, _col(out["mean"], "mean"), strict=True))
    assert means["south"] == pytest.approx(truth.mean()["south"], abs=10)
    assert 0 <= means["west"] <= 100  # empty group: still a valid, in-domain answer


def test_groupby_log_records_parallel_composition_and_half_epsilon():
    pf = dpf.protect(_data(), epsilon=1.0, bounds={"age": (0, 100)},
                     keys={"region": KEYS})
    pf.dp.groupby("region").mean("age", epsilon=0.6, random_state=0)  # keys from protect()
    log = pf.dp.log
    assert list(log["part"]) == ["count", "sum"]
    assert log["epsilon"].sum() == pytest.approx(0.6)
    assert np.allclose(log["mechanism_epsilon"], 0.15)  # ε/2 per group, /2 per part
    assert log["composition"].str.startswith("parallel over 3").all()
    assert log["group_keys"].iloc[0] == '["north", "south", "west"]'
    assert (log["size"] == "private").all()


def test_groupby_release_several_queries_one_frame():
    pf = dpf.protect(pl.from_pandas(_data()), epsilon=1.0, bounds={"age": (0, 100)})
    t = pf.dp.groupby("region", keys=KEYS).release(
        {"n": dpf.count(), "avg": dpf.mean("age")}, epsilon=0.5, random_state=0)
    assert t.columns == ["region", "n", "avg"] and t.height == 3
    assert pf.dp.budget.epsilon_spent == pytest.approx(0.5)


def test_groupby_on_a_derived_frame(constructor):
    pf = dpf.protect(constructor(_data()), epsilon=1.0, bounds={"age": (0, 100)})
    t = pf.dp.filter(nw.col("age") > 50).dp.groupby("region", keys=KEYS).count(
        epsilon=0.5, random_state=0)
    assert len(t) == 3
    # no verified derivation has more rows than the protected frame: counts on [0, n]
    assert constructor.column(pf.dp.log, "domain_upper") == [600.0]
    assert constructor.column(pf.dp.log, "derivation") == ["protect > filter"]


def test_groupby_missing_keys_are_in_no_group(constructor):
    """A row whose key is missing or undeclared is in no group (left out inside the engine;
    nothing is refused or revealed)."""
    data = {"region": ["north", None, "east", "south"], "age": [10.0, 20.0, 30.0, 40.0]}
    pf = dpf.protect(constructor(data), epsilon=1.0, bounds={"age": (0, 100)})
    t = pf.dp.groupby("region", keys=KEYS).count(epsilon=0.5, random_state=0)
    assert [str(k) for k in constructor.column(t, "region")] == KEYS
    assert all(0 <= c <= 4 for c in constructor.values(t, "count"))


@pytest.mark.parametrize("keys", [None, [], "north", ["a", "a"], [None, "a"]])
def test_groupby_bad_keys_spend_nothing(keys):
    pf = dpf.protect(_data(), epsilon=1.0, bounds={"age": (0, 100)})
    with pytest.raises(dpf.ParameterError, match="keys"):
        pf.dp.groupby("region", keys=keys).count(epsilon=0.5)
    assert pf.dp.budget.epsilon_spent == 0


def test_groupby_missing_key_column():
    pf = dpf.protect(_data(), epsilon=1.0, bounds={"age": (0, 100)})
    with pytest.raises(dpf.UnsupportedInputError, match="not in the frame"):
        pf.dp.groupby("nope", keys=["a"]).count(epsilon=0.5)
    assert pf.dp.budget.epsilon_spent == 0


def test_numeric_keys_must_fit_the_column_type_on_every_backend(constructor):
    """Keys are checked against the schema before anything is spent, alike on every backend
    (Polars used to raise InvalidOperationError from inside the engine for float keys of an
    integer column, or int keys of a float one, and TypeError for an out-of-range key)."""
    data = {"g": [1, 2, 1, 3], "f": [1.0, 2.0, np.nan, 1.0], "age": [10.0, 20.0, 30.0, 40.0]}
    pf = dpf.protect(constructor(data), epsilon=10.0, bounds={"age": (0, 100)})
    for keys in ([1.0, 2.0], [1, 2.5], [1, 2**70], [True, 2]):
        with pytest.raises(dpf.ParameterError, match="do not match column 'g'"):
            pf.dp.groupby("g", keys=keys).count(epsilon=0.5)
    assert pf.dp.budget.epsilon_spent == 0
    t = pf.dp.groupby("g", keys=[1, np.int64(2), 99]).count(epsilon=1.0, random_state=0)
    assert constructor.column(t, "g") == [1, 2, 99]
    t = pf.dp.groupby("f", keys=[1, 2]).mean("age", epsilon=1.0, random_state=0)  # float col
    assert len(constructor.column(t, "f")) == 2
    assert pf.dp.budget.epsilon_spent == pytest.approx(2.0)
