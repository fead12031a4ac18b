"""``dpf.Estimate`` (dpframe/frames/results.py) behaves as the number it releases: arithmetic
and comparisons use the value and return plain floats and bools, ``format`` shows
``value ± half_width``, and it still unpacks like the named tuple it was."""

from __future__ import annotations

import copy
import math
import pickle
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe import Estimate

E = Estimate(47.1683349609375, 46.268121251262045, 48.068548670612955, 0.95)


def test_arithmetic_returns_plain_floats():
    v = E.value
    cases = [(E + 1, v + 1), (1 + E, 1 + v), (E - 2, v - 2), (10 - E, 10 - v), (2 * E, 2 * v),
             (E * 0.5, v * 0.5), (E / 4, v / 4), (100 / E, 100 / v), (E // 3, v // 3),
             (E % 5, v % 5), (E ** 2, v ** 2), (2 ** E, 2 ** v), (-E, -v), (+E, v),
             (abs(Estimate(-1.5, -2, -1, 0.9)), 1.5), (E + Fraction(1, 2), v + 0.5),
             (E + np.float64(1), v + 1), (E + E, 2 * v)]
    for got, want in cases:
        assert type(got) in (float, np.float64) and got == want
    assert float(E) == v and int(E) == 47 and round(E, 1) == 47.2
    assert (math.floor(E), math.ceil(E), math.trunc(E)) == (47, 48, 47)
    assert E < 48 and E > 47 and E <= v and E >= v and E == v and E != 47.0  # noqa: SIM300
    assert bool(E) and not bool(Estimate(0.0, -1, 1, 0.9))
    with pytest.raises(TypeError):
        E + "1"


def test_numpy_and_pandas_see_the_value():
    assert np.allclose(np.array([1.0, 2.0]) + E, [E.value + 1, E.value + 2])
    assert np.array([E, E]).shape == (2,) and np.mean([E, E]) == E.value
    assert pd.Series([1.0]).mul(E).iloc[0] == E.value


def test_format_value_plus_minus_half_width():
    assert E.half_width == pytest.approx(0.900214, rel=1e-5)
    assert str(E) == "47.17 ± 0.90" and format(E) == str(E)
    assert f"{E:.1f}" == "47.2 ± 0.9" and f"{E:.3g}" == "47.2 ± 0.9"
    cut = Estimate(0.0, 0.0, 12.3, 0.9)  # an interval cut by a bound is not ± anything
    assert str(cut) == "0.0 [0.0, 12.3]" and f"{cut:g}" == "0 [0, 12.3]"
    assert str(Estimate(3.0, 3.0, 3.0, 0.95)) == "3 ± 0"
    assert repr(E).startswith("Estimate(value=47.1683349609375, lower=")


def test_still_a_record_immutable_unpackable_picklable():
    value, lower, upper, level = E
    assert (value, lower, upper, level) == (E.value, E.lower, E.upper, E.level)
    assert E == (value, lower, upper, level) and len(E) == 4 and E[3] == 0.95  # noqa: SIM300
    assert pickle.loads(pickle.dumps(E)) == E and copy.deepcopy(E) == E
    assert hash(E) == hash(E.value) and len({E, copy.copy(E)}) == 1
    with pytest.raises(AttributeError):
        E.value = 1.0  # type: ignore[misc]


def test_released_estimate_is_a_number():
    pf = dpf.protect(pd.DataFrame({"x": np.linspace(0, 10, 200)}), epsilon=1.0,
                     bounds={"x": (0, 10)})
    est = pf.dp.mean("x", epsilon=0.5, ci=0.9, random_state=1)
    assert isinstance(est, dpf.Estimate) and est.lower <= est <= est.upper
    assert est * 2 == 2 * est.value
    assert ("±" in str(est)) if est.symmetric else ("[" in str(est))
    assert "<svg" in est._repr_html_() and "dpf-interval" in est._repr_html_()
