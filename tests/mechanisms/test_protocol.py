"""The mechanism protocol (:mod:`dpframe.mechanisms.protocol`): every mechanism a release
builds offers the members it names. mypy checks the same statically where the pipeline and
the queries name the type; this checks the objects themselves."""

from __future__ import annotations

import numpy as np
import pytest

from dpframe.mechanisms.laplace import make_mechanism
from dpframe.mechanisms.protocol import Mechanism
from dpframe.mechanisms.quantiles import QuantileMechanism
from dpframe.query._quantile import QuantileSelection

MEMBERS = ("name", "epsilon", "delta", "sensitivity", "scale", "domain", "epsilon_overhead",
           "grid", "sample")


def _mechanisms() -> list[Mechanism]:
    laplace: list[Mechanism] = [
        make_mechanism(name, epsilon=1.0, sensitivity=1.0, lower=0.0, upper=10.0)
        for name in ("bounded", "truncated", "laplace")]
    return [*laplace, QuantileSelection(QuantileMechanism(1.0, 0.0, 1.0, [0.5], bins=4))]


@pytest.mark.parametrize("mechanism", _mechanisms(), ids=lambda m: m.name)
def test_every_mechanism_offers_the_protocol(mechanism: Mechanism) -> None:
    assert all(hasattr(mechanism, member) for member in MEMBERS)
    assert mechanism.domain.lower <= mechanism.domain.upper
    assert 0.0 <= mechanism.epsilon_overhead < mechanism.epsilon
    assert mechanism.delta == 0.0 and mechanism.scale > 0 and mechanism.grid >= 0
    exact = np.array([[1.0, 2.0, 3.0, 4.0]]) if isinstance(
        mechanism, QuantileSelection) else np.array([5.0])
    out = np.asarray(mechanism.sample(exact, random_state=0), dtype=float)
    assert np.all((out >= mechanism.domain.lower) & (out <= mechanism.domain.upper))
