"""Group-by on several columns (issue 12): every combination of the declared keys (or the key
tuples given), empty combinations answered like empty groups, ε/2 per cell."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.release._pipeline import exact_measurements

KEYS = {"r": ["n", "s", "w"], "sex": ["F", "M"]}


def data(first: tuple[str, str] = ("n", "F")) -> dict[str, list]:
    r = [first[0], "n", "s", "s", "n", "zzz"]
    sex = [first[1], "M", "F", "M", "F", "F"]
    return {"x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "r": r, "sex": sex}


def test_every_combination_of_declared_keys_appears(constructor):
    pf = dpf.protect(constructor(data()), epsilon=1e6, bounds={"x": (0.0, 10.0)}, keys=KEYS)
    table = pf.dp.groupby(["r", "sex"]).count(epsilon=1e5, random_state=0)
    combos = list(zip(constructor.column(table, "r"), constructor.column(table, "sex"),
                      strict=True))
    assert combos == list(itertools.product(KEYS["r"], KEYS["sex"]))
    counts = dict(zip(combos, constructor.values(table, "count"), strict=True))
    assert counts[("n", "F")] == 2 and counts[("w", "M")] == 0  # "zzz" is in no cell


def test_explicit_key_tuples_and_their_checks(constructor):
    pf = dpf.protect(constructor(data()), epsilon=1.0, bounds={"x": (0.0, 10.0)})
    table = pf.dp.groupby(["r", "sex"], keys=[("n", "F"), ("s", "M")]).mean("x", epsilon=0.5)
    assert constructor.column(table, "r") == ["n", "s"]
    for keys in ([("n",)], [("n", "F", "x")], [("n", "F"), ("n", "F")], [(1, "F")]):
        with pytest.raises(dpf.ParameterError):
            pf.dp.groupby(["r", "sex"], keys=keys).count(epsilon=0.1)
    with pytest.raises(dpf.ParameterError, match="no declared keys"):
        pf.dp.groupby(["r", "sex"]).count(epsilon=0.1)
    assert pf.dp.budget.epsilon_spent == pytest.approx(0.5)


@pytest.mark.parametrize(("a", "b"), [(("n", "F"), ("s", "M")), (("n", "F"), ("zzz", "F")),
                                      (("w", "M"), ("n", "M"))])
def test_a_replaced_row_changes_at_most_two_cells_by_the_sensitivity(a, b):
    exact = []
    for first in (a, b):
        pf = dpf.protect(pd.DataFrame(data(first)), epsilon=1.0, bounds={"x": (0.0, 10.0)},
                         keys=KEYS, missing=0.0)
        exact.append(exact_measurements(pf, {"n": dpf.count(), "m": dpf.mean("x")},
                                        group_by=("r", "sex")))
    for key, (values, sens) in exact[0].items():
        diff = np.abs(values - exact[1][key][0])
        assert np.all(diff <= sens) and np.count_nonzero(diff) <= 2, key


def test_log_names_the_columns_and_the_key_tuples():
    pf = dpf.protect(pd.DataFrame(data()), epsilon=1.0, bounds={"x": (0.0, 10.0)}, keys=KEYS)
    pf.dp.groupby(["r", "sex"]).count(epsilon=0.5)
    entry = pf.dp.log.iloc[-1]
    assert entry["group_by"] == "r,sex" and entry["group_keys"].startswith('[["n", "F"]')
    assert "parallel over 6 declared groups" in entry["composition"]
