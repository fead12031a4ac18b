"""The scalar sampler (dpframe.mechanisms.scalar) releases exactly what the vectorised one does.

A one-value draw (every scalar query) takes the array-free path; a seeded source must give
the bit-identical value the vectorised path gives for the same words, on every mechanism,
feasible-set kind, snapping setting and position of the true value, including the rare words
that take the uniform's general path.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpframe.errors import ParameterError
from dpframe.mechanisms import BoundedLaplace, Laplace, TruncatedLaplace
from dpframe.mechanisms.domains import FeasibleSet, half_line, interval, real_line, union
from dpframe.mechanisms.randomness import RandomSource
from dpframe.mechanisms.scalar import project_one

DOMAINS: dict[str, FeasibleSet] = {
    "interval": interval(0.0, 100.0),
    "narrow": interval(-1e-3, 1e-3),
    "lower half-line": half_line(lower=-5.0),
    "upper half-line": half_line(upper=7.5),
    "two pieces": union([(0.0, 1.0), (3.0, 10.0)]),
    "three pieces": union([(-4.0, -1.0), (0.0, 0.5), (2.0, 9.0)]),
    "open union": union([(-math.inf, -1.0), (1.0, math.inf)]),
}
CLASSES = {"bounded": BoundedLaplace, "truncated": TruncatedLaplace, "laplace": Laplace}


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _vectorised(mech: object, q: float, seed: int | np.random.Generator) -> float:
    return float(mech._draw(np.array([q]), RandomSource(seed))[0])  # type: ignore[attr-defined]


def _mechanism(kind: str, domain: FeasibleSet, *, epsilon: float = 0.7,
               snapping: bool = True) -> object:
    sensitivity = 1.0 if not domain.is_bounded else min(1.0, domain.upper - domain.lower)
    return CLASSES[kind](epsilon, sensitivity, domain=domain, snapping=snapping)


def _points(domain: FeasibleSet) -> list[float]:
    """True values worth checking: the ends of every component and inner points."""
    out = []
    for lo, hi in domain.components:
        lo_f = lo if math.isfinite(lo) else (hi - 3.0)
        hi_f = hi if math.isfinite(hi) else (lo_f + 3.0)
        out += [lo_f, hi_f, lo_f + (hi_f - lo_f) / 3]
    return out


@pytest.mark.parametrize("snapping", [True, False], ids=["snapped", "unsnapped"])
@pytest.mark.parametrize("kind", sorted(CLASSES))
@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_a_scalar_draw_is_the_vectorised_draw_bit_for_bit(name: str, kind: str,
                                                          snapping: bool) -> None:
    mech = _mechanism(kind, DOMAINS[name], snapping=snapping)
    for q in _points(DOMAINS[name]):
        for seed in range(25):
            scalar = mech.sample(q, random_state=seed)  # type: ignore[attr-defined]
            assert isinstance(scalar, float)
            assert _bits(scalar) == _bits(_vectorised(mech, q, seed)), (name, kind, q, seed)


@given(q=st.floats(0.0, 100.0), seed=st.integers(0, 2**32), eps=st.floats(1e-3, 20.0))
def test_any_true_value_and_seed_agree(q: float, seed: int, eps: float) -> None:
    for kind in CLASSES:
        mech = _mechanism(kind, DOMAINS["interval"], epsilon=eps)
        assert _bits(mech.sample(q, random_state=seed)) == _bits(  # type: ignore[attr-defined]
            _vectorised(mech, q, seed))


def _seeds_with_a_short_word(count: int) -> list[int]:
    """Seeds whose first four words include one below 2^52 (the uniform's general path,
    probability 2^-12 per word)."""
    found = []
    seed = 0
    while len(found) < count:
        g = np.random.default_rng(seed)
        words = [g.integers(0, 2**64, size=1, dtype=np.uint64)[0] for _ in range(4)]
        if min(int(w) for w in words) < 2**52:
            found.append(seed)
        seed += 1
    return found


def test_the_rare_short_words_take_the_same_general_path() -> None:
    for seed in _seeds_with_a_short_word(4):
        for name in ("interval", "three pieces", "upper half-line"):
            for kind in CLASSES:
                mech = _mechanism(kind, DOMAINS[name])
                q = _points(DOMAINS[name])[2]
                assert _bits(mech.sample(q, random_state=seed)) == _bits(  # type: ignore[attr-defined]
                    _vectorised(mech, q, seed))


def test_a_one_element_array_keeps_its_shape_and_the_words_line_up_across_draws() -> None:
    mech = BoundedLaplace(0.5, 1.0, 0.0, 10.0)
    g_scalar, g_vector = np.random.default_rng(7), np.random.default_rng(7)
    for q in (0.0, 3.3, 10.0):
        out = mech.sample(np.array([q]), random_state=g_scalar)
        assert isinstance(out, np.ndarray) and out.shape == (1,)
        assert _bits(float(out[0])) == _bits(_vectorised(mech, q, g_vector))
    assert np.shape(mech.sample(np.array([[2.0]]), random_state=1)) == (1, 1)


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, 11.0])
def test_a_scalar_true_value_outside_the_mechanism_is_refused_as_an_array_is(
        value: float) -> None:
    mech = BoundedLaplace(0.5, 1.0, 0.0, 10.0)
    with pytest.raises(ParameterError) as scalar:
        mech.sample(value)
    with pytest.raises(ParameterError) as vector:
        mech.sample(np.array([value, 1.0]))
    assert str(scalar.value) == str(vector.value)


def test_project_one_is_the_sets_projection() -> None:
    domain = DOMAINS["three pieces"]
    for x in np.linspace(-6.0, 11.0, 341):
        assert project_one(domain, float(x)) == float(domain.project(x))
    assert project_one(real_line(), 3.25) == 3.25


#: true values at the edge of floating point next to a finite end of a component: subnormal
#: distances (whose length / scale underflows to 0 when the scale is > 2), the next double
#: inside an end, the smallest normal
_TINY = 5e-324
_EDGE_DOMAINS = {
    "unit": interval(0.0, 1.0),
    "negative unit": interval(-1.0, 0.0),
    "two pieces": union([(0.0, 1.0), (3.0, 10.0)]),
    "lower half-line": half_line(lower=0.0),
    "upper half-line": half_line(upper=0.0),
}


def _edge_values(domain: FeasibleSet) -> list[float]:
    out = []
    for lo, hi in domain.components:
        for end in (lo, hi):
            if not math.isfinite(end):
                continue
            for step in (_TINY, 2 * _TINY, 1e-310, 2.2250738585072014e-308):
                out += [end + step, end - step]
            out += [float(np.nextafter(end, 0.5 if end < 0.5 else -0.5)), end]
    return [v for v in out if any(a <= v <= b for a, b in domain.components)]


@pytest.mark.parametrize("snapping", [True, False], ids=["snapped", "unsnapped"])
@pytest.mark.parametrize("kind", sorted(CLASSES))
@pytest.mark.parametrize("name", sorted(_EDGE_DOMAINS))
def test_edge_true_values_are_silent_under_warnings_as_errors_on_both_paths(
        name: str, kind: str, snapping: bool) -> None:
    """Issue 30: a bounded draw whose true value lies a subnormal away from a finite end with
    a scale > 2 made the scalar path warn (``divide by zero encountered in log``), an error
    under ``-W error``, where the array path was silent. Both are silent, and bit-identical."""
    import warnings

    domain = _EDGE_DOMAINS[name]
    for epsilon in (0.01, 0.3, 5.0):  # scales 100 (> 2), ~3.3 and 0.2
        mech = _mechanism(kind, domain, epsilon=epsilon, snapping=snapping)
        for q in _edge_values(domain):
            for seed in range(4):
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    scalar = mech.sample(q, random_state=seed)  # type: ignore[attr-defined]
                    vector = _vectorised(mech, q, seed)
                assert _bits(scalar) == _bits(vector), (name, kind, epsilon, q, seed)
