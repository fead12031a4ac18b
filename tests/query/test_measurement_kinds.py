"""Measurement kinds: each measurement names how it is released; the pipeline calls it one way."""

from __future__ import annotations

import numpy as np

from dpframe.query._measurement_kinds import ADAPTIVE_DOMAIN, ADDED_NOISE, SELECTION, Drawn
from dpframe.query.statistics import Measurement


def _m(**kw: object) -> Measurement:
    return Measurement(name="m", statistic=lambda a: np.zeros(1), sensitivity=1.0, lower=0.0,
                       upper=1.0, weight=1.0, **kw)  # type: ignore[arg-type]


class _Fixed:
    """A stand-in mechanism with a domain; `sample` returns the clamped input plus 0.25."""

    class domain:
        lower, upper = 0.0, 1.0

    def sample(self, exact: np.ndarray, random_state: object = None) -> np.ndarray:
        return np.asarray(exact) + 0.25


def test_each_measurement_names_its_kind() -> None:
    assert _m().kind is ADDED_NOISE
    assert _m(make=lambda e, d: _Fixed()).kind is SELECTION
    assert _m(domain_after=lambda noisy: (0.0, 1.0), sensitivity_after=lambda a, b: 1.0
              ).kind is ADAPTIVE_DOMAIN


def test_added_noise_clamps_into_the_domain_before_sampling() -> None:
    drawn = ADDED_NOISE.draw(_m(), _Fixed(), np.array([5.0, -3.0]), {}, lambda *a: None, None)
    assert np.array_equal(drawn.value, [1.25, 0.25]) and drawn.point is None


def test_a_collapsed_adaptive_domain_is_released_as_its_point_without_noise() -> None:
    m = _m(domain_after=lambda noisy: (2.0, 2.0), sensitivity_after=lambda a, b: 1.0)
    built: list[object] = []
    drawn = ADAPTIVE_DOMAIN.draw(m, None, np.array([7.0]), {}, lambda *a: built.append(a),
                                 None)
    assert drawn == Drawn(drawn.value, None, (2.0, 2.0)) and drawn.value.tolist() == [2.0]
    assert built == []  # no mechanism built, nothing sampled


def test_an_adaptive_domain_builds_its_mechanism_at_draw_time_on_that_domain() -> None:
    m = _m(domain_after=lambda noisy: (-float(noisy["v"][0]), float(noisy["v"][0])),
           sensitivity_after=lambda a, b: (b - a) / 2)
    seen: list[tuple[object, ...]] = []

    def laplace(*args: object) -> _Fixed:
        seen.append(args)
        return _Fixed()

    drawn = ADAPTIVE_DOMAIN.draw(m, None, np.array([9.0]), {"v": np.array([0.5])}, laplace,
                                 None)
    assert seen == [(-0.5, 0.5, 0.5)]
    assert drawn.value.tolist() == [0.75]  # clamped to 0.5 by the domain, then to [0, 1]
