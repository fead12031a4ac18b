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
