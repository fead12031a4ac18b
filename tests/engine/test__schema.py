"""engine/_schema.py: a frame's schema from its dtypes alone."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.engine._schema import frame_columns
from dpframe.errors import ParameterError


@pytest.mark.parametrize("first", ["a", 7])
def test_a_pandas_object_column_is_object_whatever_its_first_values(first: object) -> None:
    """narwhals calls an object column String when its first 100 values are strings; dpframe
    takes the dtype alone (review of 2026-11-29: neighbours differing in row 0 were answered
    and refused)."""
    cells = np.array([first] + ["a", "b"] * 60, dtype=object)
    df = pd.DataFrame({"g": pd.Series(cells, dtype=object), "x": np.linspace(0, 1, 121)})
    assert str(frame_columns(df)["g"]) == "Object"


def test_neighbouring_object_columns_plan_alike() -> None:
    """Row 0 'a' or 7: key selection refused on both (cast to str first), declared mixed keys
    answered on both, with the same columns, dtypes and length."""
    outcomes = []
    for first in ("a", 7):
        cells = np.array([first] + ["a", "b"] * 60, dtype=object)
        df = pd.DataFrame({"g": pd.Series(cells, dtype=object), "x": np.linspace(0, 1, 121)})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pf = dpf.protect(df, epsilon=10.0, delta=1e-6, bounds={"x": (0.0, 1.0)},
                             missing="lower")
            with pytest.raises(ParameterError, match="cannot be selected"):
                pf.dp.groupby("g").count(epsilon=1.0, delta=1e-7)
            table = pf.dp.groupby("g", keys=["a", "b", 7]).count(epsilon=1.0)
        outcomes.append((list(table.columns), [str(t) for t in table.dtypes], len(table)))
    assert outcomes[0] == outcomes[1]
