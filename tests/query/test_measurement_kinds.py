"""Measurement kinds: each measurement names how it is released (the query names it; nothing
infers it from which field is set); the pipeline calls it one way."""

from __future__ import annotations

import numpy as np
import pytest

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
    assert _m().kind is ADDED_NOISE  # the default: added noise
    assert _m(make=lambda e, d: _Fixed(), kind=SELECTION).kind is SELECTION
    assert _m(domain_after=lambda noisy: (0.0, 1.0), sensitivity_after=lambda a, b: 1.0,
              kind=ADAPTIVE_DOMAIN).kind is ADAPTIVE_DOMAIN


@pytest.mark.parametrize("fields", [
    {"make": lambda e, d: _Fixed()},  # a selection's field without naming the kind
    {"domain_after": lambda noisy: (0.0, 1.0), "sensitivity_after": lambda a, b: 1.0},
    {"kind": SELECTION},  # a selection without its mechanism
    {"kind": ADAPTIVE_DOMAIN, "domain_after": lambda noisy: (0.0, 1.0)},
])
def test_a_measurement_whose_fields_do_not_fit_its_kind_is_refused(fields: dict) -> None:
    with pytest.raises(TypeError, match="a measurement of kind"):
        _m(**fields)


def test_the_queries_name_the_kinds_they_plan() -> None:
    import dpframe as dpf
    from dpframe.query.statistics import PlanContext

    ctx = PlanContext(size_public=True, n=10, bounds=(0.0, 1.0), column="x",
                      all_bounds={"x": (0.0, 1.0), "y": (0.0, 1.0)})
    kinds = {m.name: m.kind for q in (dpf.quantile("x"), dpf.cov(["x", "y"]), dpf.mean("x"))
             for m in q.plan(ctx).measurements}
    assert kinds == {"quantile": SELECTION, "variance[x]": ADDED_NOISE,
                     "variance[y]": ADDED_NOISE, "covariance[x,y]": ADAPTIVE_DOMAIN,
                     "mean": ADDED_NOISE}


def test_added_noise_clamps_into_the_domain_before_sampling() -> None:
    drawn = ADDED_NOISE.draw(_m(), _Fixed(), np.array([5.0, -3.0]), {}, lambda *a: None, None)
    assert np.array_equal(drawn.value, [1.25, 0.25]) and drawn.point is None


def test_a_collapsed_adaptive_domain_is_released_as_its_point_without_noise() -> None:
    m = _m(domain_after=lambda noisy: (2.0, 2.0), sensitivity_after=lambda a, b: 1.0,
           kind=ADAPTIVE_DOMAIN)
    built: list[object] = []
    drawn = ADAPTIVE_DOMAIN.draw(m, None, np.array([7.0]), {}, lambda *a: built.append(a),
                                 None)
    assert drawn == Drawn(drawn.value, None, (2.0, 2.0)) and drawn.value.tolist() == [2.0]
    assert built == []  # no mechanism built, nothing sampled


def test_an_adaptive_domain_builds_its_mechanism_at_draw_time_on_that_domain() -> None:
    m = _m(domain_after=lambda noisy: (-float(noisy["v"][0]), float(noisy["v"][0])),
           sensitivity_after=lambda a, b: (b - a) / 2, kind=ADAPTIVE_DOMAIN)
    seen: list[tuple[object, ...]] = []

    def laplace(*args: object) -> _Fixed:
        seen.append(args)
        return _Fixed()

    drawn = ADAPTIVE_DOMAIN.draw(m, None, np.array([9.0]), {"v": np.array([0.5])}, laplace,
                                 None)
    assert seen == [(-0.5, 0.5, 0.5)]
    assert drawn.value.tolist() == [0.75]  # clamped to 0.5 by the domain, then to [0, 1]
