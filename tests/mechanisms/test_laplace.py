"""Bad mechanism parameters raise a ValueError subclass whose message says what to change."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpframe.errors import ParameterError
from dpframe.mechanisms import (
    BoundedLaplace,
    Laplace,
    TruncatedLaplace,
    half_line,
    interval,
    make_mechanism,
    union,
)

CASES = [
    (dict(epsilon=0.0), "epsilon"),
    (dict(epsilon=-1.0), "epsilon"),
    (dict(epsilon=math.inf), "epsilon"),
    (dict(epsilon=math.nan), "epsilon"),
    (dict(epsilon="1"), "epsilon"),
    (dict(epsilon=True), "epsilon"),
    (dict(delta=-0.1), "delta"),
    (dict(delta=1.0), "delta"),
    (dict(delta=math.nan), "delta"),
    (dict(sensitivity=0.0), "sensitivity"),
    (dict(sensitivity=-2.0), "sensitivity"),
    (dict(sensitivity=math.inf), "sensitivity"),
    (dict(sensitivity=11.0), r"sensitivity=upper-lower"),
    (dict(lower=5.0, upper=5.0), "strictly below"),
    (dict(lower=6.0, upper=5.0), "strictly below"),
    (dict(lower=math.nan), "NaN"),
]


@pytest.mark.parametrize(("change", "needle"), CASES, ids=[str(c[0]) for c in CASES])
def test_bad_parameters(change, needle):
    kw = dict(epsilon=1.0, sensitivity=1.0, lower=0.0, upper=10.0, delta=0.0) | change
    with pytest.raises(ParameterError, match=needle) as info:
        BoundedLaplace(**kw)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("cls", [TruncatedLaplace, Laplace])
def test_delta_refused_by_pure_mechanisms(cls):
    with pytest.raises(ParameterError, match="mechanism='bounded'"):
        cls(1.0, 1.0, lower=0, upper=10, delta=1e-6)


def test_unknown_mechanism_name():
    with pytest.raises(ParameterError, match="bounded, truncated, laplace"):
        make_mechanism("gaussian", epsilon=1.0, sensitivity=1.0, lower=0, upper=1)


@pytest.mark.parametrize(
    ("value", "needle"),
    [(math.nan, "NaN"), (math.inf, "infinite"), (-0.5, "outside the feasible set"),
     (np.array([1.0, 11.0]), "outside")],
)
def test_bad_true_values(value, needle):
    for cls in (BoundedLaplace, TruncatedLaplace, Laplace):
        m = cls(1.0, 1.0, lower=0.0, upper=10.0)
        with pytest.raises(ParameterError, match=needle):
            m.sample(value, random_state=0)


def test_feasible_set_validation():
    with pytest.raises(ParameterError, match="overlap"):
        union([(0, 2), (1, 3)])
    with pytest.raises(ParameterError, match="overlap or touch"):
        union([(0, 1), (1, 3)])
    with pytest.raises(ParameterError, match=r"sorted|overlap"):
        union([(2, 3), (0, 1)])
    with pytest.raises(ParameterError, match="only the first"):
        union([(0, 1), (-math.inf, 3)])
    with pytest.raises(ParameterError, match="exactly one"):
        half_line()
    with pytest.raises(ParameterError, match="finite"):
        half_line(lower=math.inf)
    with pytest.raises(ParameterError, match="either lower=/upper= or domain="):
        BoundedLaplace(1.0, 1.0, lower=0, domain=interval(0, 1))


def test_gap_value_is_outside_a_union():
    m = BoundedLaplace(1.0, 0.5, domain=union([(0, 1), (2, 3)]))
    with pytest.raises(ParameterError, match="outside"):
        m.sample(1.5)


def test_unbounded_domain_needs_magnitude_for_huge_values():
    m = BoundedLaplace(1.0, 1.0, domain=half_line(lower=0.0))
    with pytest.raises(ParameterError, match="magnitude="):
        m.sample(1e12)
    big = BoundedLaplace(1.0, 1.0, domain=half_line(lower=0.0), magnitude=1e13)
    assert big.sample(1e12, random_state=0) >= 0


def test_make_mechanism_cache_never_bypasses_validation():
    ok = make_mechanism("bounded", epsilon=1.0, sensitivity=1.0, lower=0, upper=10)
    assert make_mechanism("bounded", epsilon=1.0, sensitivity=1.0, lower=0, upper=10) is ok
    with pytest.raises(ParameterError, match="epsilon"):
        make_mechanism("bounded", epsilon=True, sensitivity=1.0, lower=0, upper=10)
    with pytest.raises(ParameterError, match="epsilon"):
        make_mechanism("bounded", epsilon=math.nan, sensitivity=1.0, lower=0, upper=10)
