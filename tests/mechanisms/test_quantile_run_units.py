"""The run sampler's units (issue 34): a bin with rows races together with the run of empty bins
beside it on the side away from the target (:func:`_window_units`).

* exact: the units partition the window, and every bin of a unit has the unit's rank distance,
  computed here independently in rationals from the row multiset;
* in law: draws of :func:`race_over_runs` against the exponential mechanism's probabilities
  computed independently (rationals for the distances, ``math.exp`` for the weights), chi-square
  and a Kolmogorov–Smirnov distance on the bin's CDF, with targets on the edge of an empty run
  (an integer target rank), padded ranks (the brackets), and windows cut by the score cap.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpframe.mechanisms.quantiles import (
    SCORE_CAP,
    CumulativeCounts,
    QuantileMechanism,
    _window_units,
    race_over_runs,
)
from dpframe.mechanisms.randomness import RandomSource

P_MIN = 1e-4


def _spans(counts: np.ndarray, pad: int) -> list[tuple[int, int]]:
    """Padded rank span ``[L_j, L_{j+1}]`` of each bin, from a plain running sum (the first
    and last bins hold the ``pad`` public rows)."""
    c = [int(v) for v in counts]
    c[0] += pad
    c[-1] += pad
    out, below = [], 0
    for v in c:
        out.append((below, below + v))
        below += v
    return out


def _distance(span: tuple[int, int], t: Fraction) -> Fraction:
    return max(span[0] - t, t - span[1], Fraction(0))


def _exact_law(counts: np.ndarray, q: float, pad: int, offset: Fraction, lam: float
               ) -> np.ndarray:
    n = int(counts.sum()) + 2 * pad
    t = Fraction(q) * n + offset
    scores = [min(lam * float(_distance(s, t)), SCORE_CAP) for s in _spans(counts, pad)]
    top = min(scores)
    w = np.array([math.exp(top - s) for s in scores])
    return w / w.sum()


def _sparse_counts(bins: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = np.zeros(bins, dtype=np.int64)
    c[rng.choice(bins, bins // 6, replace=False)] = rng.integers(1, 4, bins // 6)
    return c


@pytest.mark.parametrize("pad", [0, 3])
@pytest.mark.parametrize("q", [0.0, 0.3, 0.5, 1.0])
def test_units_partition_the_window_with_one_distance_each(q, pad):
    counts = _sparse_counts(120, 7)
    counts[40:52] = 0  # a long empty run, the target on its edge for q = 0.5
    counts[52] = 2
    ranks = CumulativeCounts(counts)
    n = int(counts.sum()) + 2 * pad
    t = Fraction(q) * n
    whole = math.floor(t)
    spans = _spans(counts, pad)
    for first, last in ((1, 119), (5, 60), (40, 53), (53, 53 + 1), (41, 52)):
        start, size, lo, hi = _window_units(counts, ranks, first, last, pad, whole,
                                            whole + (t > whole))
        order = np.argsort(start)
        ends = start[order] + size[order]
        assert start[order][0] == first and ends[-1] == last
        np.testing.assert_array_equal(start[order][1:], ends[:-1])
        for s, m, a, b in zip(start, size, lo, hi, strict=True):
            unit = _distance((int(a), int(b)), t)
            assert all(_distance(spans[j], t) == unit for j in range(s, s + m))
    # bins with rows are never merged with one another
    start, size, *_ = _window_units(counts, ranks, 1, 119, pad, whole, whole + (t > whole))
    assert sum(int(counts[s:s + m].astype(bool).sum()) for s, m in zip(start, size,
                                                                      strict=True)) == int(
        (counts[1:119] > 0).sum())


CASES = [  # (q, epsilon, pad, offset): flat, sharp (most bins capped), padded, shifted target
    (0.5, 0.5, 0, Fraction(0)),
    (0.5, 60.0, 0, Fraction(0)),
    (0.25, 4.0, 2, Fraction(-3, 2)),
    (0.8, 8.0, 1, Fraction(5, 2)),
]


@pytest.mark.parametrize("q, eps, pad, offset", CASES)
def test_run_race_follows_the_independently_computed_law(q, eps, pad, offset):
    counts = _sparse_counts(96, 3)
    counts[30:45] = 0
    n = int(counts.sum())
    if q == 0.5 and (n + 2 * pad) % 2:  # an integer target rank, on the edge of a run
        counts[95] += 1
    lam = QuantileMechanism(eps, 0.0, 1.0, q, bins=96).coefficients[0]
    ranks = CumulativeCounts(counts)
    source = RandomSource(34)
    draws = np.array([race_over_runs(counts, ranks, q, offset, pad, lam, source)
                      for _ in range(1500)])
    probs = _exact_law(counts, q, pad, offset, lam)
    observed = np.bincount(draws, minlength=96)
    expected = probs * draws.size
    keep = expected >= 5
    o = np.append(observed[keep], observed[~keep].sum())
    e = np.append(expected[keep], expected[~keep].sum())
    if e[-1] < 1e-9:
        assert o[-1] == 0
        o, e = o[:-1], e[:-1]
    if o.size >= 2:
        assert stats.chisquare(o, e * o.sum() / e.sum()).pvalue > P_MIN
    # Kolmogorov–Smirnov distance of the bin's CDF, against its 1e-4 critical value
    ks = np.abs(np.cumsum(observed) / draws.size - np.cumsum(probs)).max()
    assert ks < 2.1 / math.sqrt(draws.size)


def test_engine_doubles_draw_exactly_what_int64_counts_draw():
    """``exact_counts=True`` reads the engine's integer-valued doubles as they are: the same
    draws, bit for bit, as the checked int64 path (point and bracket, several groups)."""
    from dpframe.mechanisms.quantile_intervals import BracketMechanism

    counts = np.stack([_sparse_counts(2048, s) for s in range(3)])
    counts[1] = 0  # an empty group
    for mech in (QuantileMechanism(1.0, 0.0, 1.0, [0.1, 0.5], bins=2048),
                 BracketMechanism(2.0, 0.0, 1.0, 0.7, side="upper", alpha_side=0.05,
                                  bins=2048)):
        a = mech.sample(counts, random_state=5)
        b = mech.sample(counts.astype(np.float64), random_state=5, exact_counts=True)
        np.testing.assert_array_equal(a.bins, b.bins)
        np.testing.assert_array_equal(a.values, b.values)


@pytest.mark.parametrize("bins", [64, 2048])
def test_no_groups_is_not_an_error(bins):
    """A (0, B) array (a group-by with no groups) draws nothing on either path, no exception."""
    mech = QuantileMechanism(1.0, 0.0, 1.0, 0.5, bins=bins)
    assert mech.sample(np.zeros((0, bins), np.int64), random_state=1).values.shape == (0, 1)
    assert mech.sample(np.zeros((0, bins)), random_state=1,
                       exact_counts=True).values.shape == (0, 1)
