"""A pandas derivation step whose expression reads no column (``nw.lit(True)``, a comparison
of literals) gives one value per row of the frame (issue 30, item 6): the evaluator
(:mod:`dpframe.backends.pandas._rowwise`) broadcasts a scalar result to the frame's height itself,
so the step is total by construction, not by how Polars happens to broadcast a literal.
"""

from __future__ import annotations

import pandas as pd
import polars as pl
import pytest

from dpframe.backends.pandas import _rowwise as pandas_eval
from dpframe.backends.polars import _rowwise as polars_target
from dpframe.rowwise.nodes import Binary, Col, Lit, When

B = pl.Boolean
SCHEMA = {"a": pl.Int64}
PREDICATES = {
    "true": (Lit(B, True), True),
    "false": (Lit(B, False), False),
    "missing": (Lit(B, None), False),  # a missing predicate keeps no row
    "literal comparison": (Binary(B, "Gt", Lit(pl.Int64, 1), Lit(pl.Int64, 0)), True),
    "literal when": (When(B, Lit(B, True), Lit(B, False), Lit(B, True)), False),
}


def _frame(height: int) -> pd.DataFrame:
    return pd.DataFrame({"a": range(height)}, index=range(10, 10 + height))


@pytest.mark.parametrize("height", [0, 1, 3])
@pytest.mark.parametrize("name", list(PREDICATES))
def test_a_predicate_reading_no_column_keeps_all_rows_or_none(name, height):
    predicate, keeps = PREDICATES[name]
    out = pandas_eval.apply_step(_frame(height), "filter", predicate, [], SCHEMA)
    assert list(out.index) == (list(range(10, 10 + height)) if keeps else [])


@pytest.mark.parametrize("height", [0, 1, 3])
@pytest.mark.parametrize("kind", ["with_columns", "select"])
def test_a_literal_column_has_the_frames_height(kind, height):
    out = pandas_eval.apply_step(_frame(height), kind, None,
                                 [("x", Lit(pl.Int64, 7)), ("b", Col(pl.Int64, "a"))], SCHEMA)
    assert len(out) == height and out["x"].tolist() == [7] * height
    assert list(out.index) == list(range(10, 10 + height))


@pytest.mark.parametrize("height", [0, 2, 5])
def test_a_scalar_result_is_broadcast_whatever_the_engine_returns(monkeypatch, height):
    """Even if the Polars step gave one row for a literal (as ``select`` would), the
    evaluator repeats it on every row."""
    real = polars_target.apply_step

    def scalar_result(data, kind, predicate, columns):
        return real(data.head(1), "select", predicate, columns)

    monkeypatch.setattr(polars_target, "apply_step", scalar_result)
    out = pandas_eval.apply_step(_frame(height), "filter", Lit(B, True), [], SCHEMA)
    assert len(out) == height
    out = pandas_eval.apply_step(_frame(height), "with_columns", None,
                                 [("x", Lit(pl.Int64, 7))], SCHEMA)
    assert out["x"].tolist() == [7] * height
