"""The accuracy planner with ``ci=``: a quantile's value interval takes ``ci_share`` of its ε,
so its point's (rank) accuracy is the one at ``ε·(1 − ci_share)``, and the row says so."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.errors import ParameterError


@pytest.fixture(scope="module")
def pf():
    data = pd.DataFrame({"age": np.arange(200) % 90, "g": np.arange(200) % 2})
    return dpf.protect(data, epsilon=10, bounds={"age": (0, 100)}, keys={"g": [0, 1]})


def _ranks(note: str) -> float:
    return float(re.search(r"within ±([0-9.e+-]+) rows", note).group(1))


@pytest.mark.parametrize("share", [0.5, 0.2])
def test_quantile_with_ci_reports_the_point_at_its_share_of_epsilon(pf, share):
    query = dpf.quantile("age", 0.25, ci_share=share)
    with_ci = pf.dp.accuracy({"q": query}, epsilon=1.0, ci=0.9)
    alone = pf.dp.accuracy({"q": query}, epsilon=1.0 - share)
    assert _ranks(with_ci["note"].iloc[0]) == _ranks(alone["note"].iloc[0])
    assert _ranks(with_ci["note"].iloc[0]) > _ranks(
        pf.dp.accuracy({"q": query}, epsilon=1.0)["note"].iloc[0])
    note = with_ci["note"].iloc[0]
    assert f"ci_share = {share:g}" in note and "ci_share" not in alone["note"].iloc[0]
    assert pf.dp.budget.epsilon_spent == 0


def test_grouped_accuracy_takes_ci_too(pf):
    grouped = pf.dp.groupby("g")
    with_ci = grouped.accuracy({"m": dpf.median("age")}, epsilon=1.0, ci=0.95)
    alone = grouped.accuracy({"m": dpf.median("age")}, epsilon=0.5)
    assert _ranks(with_ci["note"].iloc[0]) == _ranks(alone["note"].iloc[0])
    assert "ci_share = 0.5" in with_ci["note"].iloc[0]


def test_ci_share_zero_and_other_statistics_are_unchanged(pf):
    plain = pf.dp.accuracy({"m": dpf.median("age", ci_share=0.0), "n": dpf.count(),
                            "s": dpf.sum("age")}, epsilon=1.0)
    with_ci = pf.dp.accuracy({"m": dpf.median("age", ci_share=0.0), "n": dpf.count(),
                              "s": dpf.sum("age")}, epsilon=1.0, ci=0.95)
    assert list(plain["note"]) == list(with_ci["note"])
    assert np.array_equal(plain["half_width"].to_numpy(), with_ci["half_width"].to_numpy(),
                          equal_nan=True)


def test_epsilon_for_a_quantile_points_at_accuracy(pf):
    with pytest.raises(ParameterError, match="ci_share"):
        pf.dp.epsilon_for(dpf.median("age"), 3.0)
