"""``quiet()`` (dpframe/release/_safety_net.py): no warning raised during the read reaches the
caller, whatever the caller's filters and floating-point settings, and everything the caller
had is back afterwards."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.engine import _aggregation as engine
from dpframe.release._safety_net import quiet


def test_quiet_drops_every_warning_and_restores_the_callers_settings():
    def shown(*args: object) -> None:  # (the caller's own way of showing warnings)
        raise AssertionError("a warning reached the caller")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.showwarning = shown
        before, show = warnings.filters, warnings.showwarning
        saved = list(before)
        with np.errstate(all="raise"), quiet():
            warnings.warn("value 73421 overflowed", RuntimeWarning, stacklevel=1)
            warnings.warn("a deprecation", DeprecationWarning, stacklevel=1)
            np.float64(1e308) * 10.0  # overflow: neither raised nor shown
            warnings.filterwarnings("ignore", message="inner")  # code inside may change
            warnings.warn("inner", UserWarning, stacklevel=1)  # the filters it sees
        assert warnings.filters is before and warnings.filters == saved
        assert warnings.showwarning is show
        with pytest.raises(UserWarning):  # the caller's "error" filter holds again
            warnings.warn("after", UserWarning, stacklevel=1)
        assert np.geterr()["over"] == "warn"


@pytest.mark.filterwarnings("error")
def test_a_warning_inside_a_release_pass_never_reaches_the_caller(monkeypatch):
    pf = dpf.protect(pd.DataFrame({"x": [1.0, 2.0, 3.0]}), epsilon=1.0,
                     bounds={"x": (0.0, 10.0)}, missing={"x": 0.0})
    real = engine.aggregate

    def warning_pass(*args, **kwargs):
        warnings.warn("a value: 73421", RuntimeWarning, stacklevel=1)
        np.float64(1e308) * 10.0
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "aggregate", warning_pass)
    with np.errstate(all="raise"):
        assert np.isfinite(pf.dp.mean("x", epsilon=0.5))
    assert pf.dp.budget.epsilon_spent == pytest.approx(0.5)
