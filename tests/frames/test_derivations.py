"""The ``.dp`` derivations' orchestration (``dpframe.frames.derivations``): refusals from
public facts before anything is read or spent, and what a row-keeping verb keeps. The
verification of expressions is ``tests/provenance/test_derivations.py``'s subject."""

from __future__ import annotations

import narwhals as nw
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe.errors import DerivationError, ParameterError
from dpframe.frames import derivations
from dpframe.frames.bins import BIN


@pytest.fixture
def pf():
    frame = pd.DataFrame({"age": [30.0, 70.0, 50.0], "region": ["n", "s", "n"]})
    return dpf.protect(frame, epsilon=1, bounds={"age": (0, 120)})


@pytest.mark.parametrize("call, error", [
    (lambda pf: pf.dp.select("nope"), ParameterError),
    (lambda pf: pf.dp.select(), ParameterError),
    (lambda pf: pf.dp.select(["age"]), ParameterError),
    (lambda pf: pf.dp.drop("age", "nope"), ParameterError),
    (lambda pf: pf.dp.drop("age", "region"), DerivationError),
    (lambda pf: pf.dp.rename({"nope": "x"}), ParameterError),
    (lambda pf: pf.dp.rename({"age": 1}), ParameterError),
    (lambda pf: pf.dp.rename([("age", "x")]), ParameterError),
    (lambda pf: pf.dp.rename({"age": "region"}), ParameterError),
    (lambda pf: pf.dp.filter(pl.col("age") > 40), DerivationError),
    (lambda pf: pf.dp.with_columns(nw.col("age").alias("a2"), bounds={"zzz": (0, 1)}),
     ParameterError),
])
def test_bad_requests_are_refused_before_anything_is_spent(pf, call, error):
    with pytest.raises(error):
        call(pf)
    assert pf.dp.budget.epsilon_spent == 0


def test_row_keeping_verbs_keep_the_public_size_and_the_declarations(pf):
    renamed = pf.dp.rename({"age": "years"})
    assert list(renamed.columns) == ["years", "region"]
    assert renamed.dp.size == 3
    assert 0 <= renamed.dp.mean("years", epsilon=0.1, random_state=1) <= 120
    assert list(pf.dp.drop("region").columns) == ["age"]
    assert list(pf.dp.select("region", "age").columns) == ["region", "age"]


def test_with_columns_declares_bounds_of_new_columns(pf):
    derived = pf.dp.with_columns((nw.col("age") / 10).alias("decade"), bounds={"decade": (0, 12)})
    assert 0 <= derived.dp.mean("decade", epsilon=0.1, random_state=1) <= 12


def test_the_binned_frame_has_the_hidden_bin_column_and_the_same_ledger(pf):
    binned = derivations.binned(pf, "age", [0.0, 40.0, 120.0], None)
    assert BIN in binned.columns
    assert binned.dp.session is pf.dp.session
