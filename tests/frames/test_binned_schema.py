"""The binned frame of a histogram remembers its schema when it is built (the parent's
remembered schema plus the bin column, :func:`dpframe.engine.remember_schema` with its
``parent``): exactly what reading the derived frame's schema gives, in both in-memory engines,
and nothing is remembered where the parent's schema is unknown or the column already
exists."""

from __future__ import annotations

import warnings

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe import provenance
from dpframe.engine import _schema
from dpframe.frames import derivations
from dpframe.frames.bins import BIN

EDGES = [0.0, 25.0, 50.0, 100.0]


def _fresh(data: object, backend: object) -> tuple[dict, dict]:
    """The derived data's schemas as a release would read them."""
    obj = nw.from_native(data)
    columns = _schema._object_columns_as_object(obj, dict(obj.schema.items()))
    return columns, backend.schema(data)  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine", ["pandas", "polars"])
def test_the_remembered_schema_is_the_schema_read(engine: str) -> None:
    x = np.array([1.0, np.nan, 30.0, 99.0])
    native: object = {"x": x, "s": ["a", "b", "c", "d"], "k": [1, 2, 3, 4]}
    frame = pd.DataFrame(native) if engine == "pandas" else pl.DataFrame(native)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf = dpf.protect(frame, epsilon=10.0, bounds={"x": (0.0, 100.0)})
    binned = derivations.binned(pf, "x", EDGES, None)
    facts = provenance.resolve(binned)
    remembered = (_schema._SCHEMAS.get(facts.data), _schema._DTYPES.get(facts.data))
    assert remembered[0] is not None and remembered[1] is not None
    columns, dtypes = _fresh(facts.data, facts.dataset.backend)
    assert list(remembered[0].items()) == list(columns.items())
    assert list(remembered[1].items()) == list(dtypes.items())
    assert list(remembered[0])[-1] == BIN


def test_nothing_is_remembered_without_the_parents_schema_or_over_a_column() -> None:
    parent, child = pd.DataFrame({"x": [1.0]}), pd.DataFrame({"x": [1.0], "b": [1]})
    added = {"b": (nw.Int64(), np.dtype(np.int64))}

    def unread(_: object) -> dict:
        raise AssertionError("the derived frame's schema is not read")

    assert not _schema.remember_schema(child, unread, parent=parent, added=added)
    assert _schema._SCHEMAS.get(child) is None and _schema._DTYPES.get(child) is None
    _schema.remember_schema(parent, lambda f: dict(f.dtypes.items()))
    assert not _schema.remember_schema(child, unread, parent=parent, added={"x": added["b"]})
    assert _schema.remember_schema(child, unread, parent=parent, added=added)
    assert _schema.engine_dtypes(child) == dict(child.dtypes.items())
