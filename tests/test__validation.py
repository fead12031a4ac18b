"""One check per parameter kind (dpframe/_validation.py): a value is accepted or refused — with
the same ``ParameterError`` — wherever it is passed (protect's budget, a release's charge, the
planner's accuracy), before anything is read or spent."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe import _validation as v

BAD_EPSILONS = [True, False, 0, -1.0, math.nan, math.inf, "1", None, [1.0], 10**400]


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"x": np.linspace(0.0, 5.0, 50)})


def _message(call) -> str:
    with pytest.raises(dpf.ParameterError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("value", BAD_EPSILONS, ids=repr)
def test_a_bad_epsilon_is_refused_alike_everywhere(value):
    pf = dpf.protect(_frame(), epsilon=1.0, bounds={"x": (0.0, 5.0)})
    at_protect = _message(lambda: dpf.protect(_frame(), epsilon=value, bounds={"x": (0, 5)}))
    at_release = _message(lambda: pf.dp.mean("x", epsilon=value))
    at_planner = _message(lambda: pf.dp.accuracy({"m": dpf.mean("x")}, epsilon=value))
    if value not in (0, False):  # a release may charge 0 (an answer from public facts)
        assert at_protect == at_release == at_planner
    assert "epsilon" in at_protect
    assert pf.dp.budget.epsilon_spent == 0.0


@pytest.mark.parametrize("value", [True, -1e-9, 1.0, math.nan, "0.1"], ids=repr)
def test_a_bad_delta_is_refused_alike_everywhere(value):
    pf = dpf.protect(_frame(), epsilon=1.0, delta=1e-3, bounds={"x": (0.0, 5.0)})
    at_protect = _message(lambda: dpf.protect(_frame(), epsilon=1.0, delta=value,
                                              bounds={"x": (0, 5)}))
    at_release = _message(lambda: pf.dp.groupby("x").count(epsilon=0.5, delta=value))
    assert at_protect == at_release and "delta" in at_protect


@pytest.mark.parametrize("value", [True, -1, 1.5, "3"], ids=repr)
def test_a_bad_seed_is_refused_alike(value):
    pf = dpf.protect(_frame(), epsilon=1.0, bounds={"x": (0.0, 5.0)})
    assert "random_state" in _message(lambda: pf.dp.mean("x", epsilon=0.5,
                                                         random_state=value))


def test_the_checks_themselves():
    assert v.check_epsilon(np.float32(0.5)) == 0.5
    assert v.check_epsilon(0, allow_zero=True) == 0.0
    assert v.check_delta(0) == 0.0 and v.check_ci(None) is None
    assert v.check_ci(0.95) == 0.95 and v.check_seed("s", np.int64(3)) == 3
    for bad in (0.0, 1.0, True):
        with pytest.raises(dpf.ParameterError):
            v.check_ci(bad)
