"""Declared group keys are one checked value whose derived forms are built once (issue 15:
100,000 keys cost per release only what the aggregation needs, not a pass per step)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.query._keys import Keys, keys_reference
from dpframe.release import _key_checks as release


def test_keys_is_the_tuple_of_its_keys():
    k = Keys([3, 1, 2])
    assert k == (3, 1, 2) and hash(k) == hash((3, 1, 2)) and list(k) == [3, 1, 2]
    assert k.kinds == {int}
    assert list(k.pandas_index) == [3, 1, 2]
    assert isinstance(k.column_values, np.ndarray) and k.column_values.dtype == np.int64
    assert Keys(["a", "b"]).column_values == ["a", "b"]
    assert Keys([2**70, 1]).column_values == [2**70, 1]  # beyond int64: kept as Python ints


def test_reference_is_computed_once_and_equals_the_plain_one():
    keys = list(range(1000))
    k = Keys(keys)
    first = keys_reference(k)
    assert first == keys_reference(keys) == keys_reference(tuple(keys))
    assert keys_reference(k) is first  # cached on the object


def test_checked_dtypes_are_remembered_and_bad_keys_still_refused():
    import narwhals.stable.v2 as nw

    k = Keys([1, 2, 3])
    release._check_keys_match(nw.Int64, "g", k)
    assert ("g", repr(nw.Int64)) in k.matched_dtypes
    release._check_keys_match(nw.Int64, "g", k)  # remembered: no second pass
    with pytest.raises(dpf.ParameterError, match="do not match column"):
        release._check_keys_match(nw.String, "g", k)
    assert ("g", repr(nw.String)) not in k.matched_dtypes
    with pytest.raises(dpf.ParameterError, match="do not match"):
        release._check_keys_match(nw.Int8, "g", Keys([1, 1000]))  # out of the column's range


@pytest.mark.parametrize("backend", ["pandas", "polars"])
def test_a_groupby_checks_its_keys_once_and_logs_them_once(backend):
    rng = np.random.default_rng(0)
    data = {"g": rng.integers(0, 50, 2000), "x": rng.uniform(0, 10, 2000)}
    frame = pd.DataFrame(data) if backend == "pandas" else pl.DataFrame(data)
    pf = dpf.protect(frame, epsilon=10.0, bounds={"x": (0, 10)}, missing={"x": 0.0})
    keys = list(range(60))
    grouped = pf.dp.groupby("g", keys=keys)
    a = grouped.mean("x", epsilon=0.5)
    declared = grouped._declared()
    assert isinstance(declared, Keys) and declared == tuple(keys)
    b = grouped.mean("x", epsilon=0.5)
    assert grouped._declared() is declared  # the same checked object for every release
    assert len(a) == len(b) == 60
    assert list(a["g"]) == keys and list(b["g"]) == keys
    doc = pf.dp.session.ledger.snapshot_document()
    assert len(doc["keys"]) == 1  # stored once per ledger, named by reference
    refs = {e["group_keys"] for e in doc["entries"]}
    assert refs == {keys_reference(keys)[0]}
    with pytest.raises(dpf.ParameterError, match="duplicates"):
        pf.dp.groupby("g", keys=[1, 1]).mean("x", epsilon=0.5)


def test_a_keys_object_built_outside_dpframe_is_checked_again():
    """Only keys dpframe checked are trusted: a hand-made Keys with a duplicate is refused
    (a duplicate key would release one group twice while charging ε once)."""
    lf = dpf.protect(pl.LazyFrame({"g": [1, 1, 2], "x": [0.1, 0.2, 0.3]}), epsilon=1.0,
                     bounds={"x": (0, 1)}, missing={"x": 0.0})
    with pytest.raises(dpf.ParameterError, match="duplicates"):
        lf.dp.groupby("g", keys=Keys([1, 1, 2])).mean("x", epsilon=0.5)
    assert not Keys([1, 2]).checked
    assert release.declared_keys("g", Keys([1, 2])).checked
