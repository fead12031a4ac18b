"""The run sampler of the quantile mechanism (issue 34): racing runs of bins that share a score
draws from the same law as racing every bin (docs in :func:`race_over_runs`).

* chi-square against the exact per-bin law (:meth:`QuantileMechanism.probabilities`) for the
  point release and both brackets, sharp laws (most bins capped), flat laws (everything in the
  window), empty data, and through ``sample`` at the threshold's bin count;
* the uniform choice inside a run is exact; the finite-precision bound covers ``ln m``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpframe.mechanisms.quantile_intervals import BracketMechanism
from dpframe.mechanisms.quantiles import (
    LOG_MAX_BINS,
    RUNS_MIN_BINS,
    SCORE_CAP,
    CumulativeCounts,
    QuantileMechanism,
    _uniform_index,
    race_error,
    race_over_runs,
)
from dpframe.mechanisms.randomness import RandomSource

P_MIN = 1e-4


def _chi2(observed: np.ndarray, probs: np.ndarray) -> float:
    expected = probs * observed.sum()
    keep = expected >= 5
    o = np.append(observed[keep], observed[~keep].sum())
    e = np.append(expected[keep], expected[~keep].sum())
    if e[-1] < 1e-9:
        assert o[-1] == 0  # bins of (numerically) no probability are never drawn
        o, e = o[:-1], e[:-1]
    if o.size < 2:
        return 1.0
    return float(stats.chisquare(o, e * o.sum() / e.sum()).pvalue)


def _counts(bins: int) -> np.ndarray:
    c = np.zeros(bins, dtype=np.int64)
    c[[2, 3, 9, 10, 11, 30, 31, 50, bins - 1]] = [4, 1, 7, 0, 3, 2, 6, 5, 1]
    return c


CASES = [
    ("point, flat", QuantileMechanism(0.5, 0.0, 1.0, 0.5, bins=64)),
    ("point, sharp: most bins capped", QuantileMechanism(400.0, 0.0, 1.0, 0.3, bins=64)),
    ("point, add/remove", QuantileMechanism(2.0, 0.0, 1.0, 0.9, bins=64,
                                            neighbours="add/remove")),
    ("lower bracket", BracketMechanism(3.0, 0.0, 1.0, 0.5, side="lower", alpha_side=0.05,
                                       bins=64)),
    ("upper bracket", BracketMechanism(3.0, 0.0, 1.0, 0.2, side="upper", alpha_side=0.05,
                                       bins=64)),
]


@pytest.mark.parametrize("name, mech", CASES, ids=[c[0] for c in CASES])
def test_run_race_follows_the_per_bin_law(name, mech):
    counts = _counts(64)
    ranks = CumulativeCounts(counts)
    source = RandomSource(2026)
    draws = np.array([race_over_runs(counts, ranks, mech.levels[0], mech.target_offset(0),
                                     mech.padding, mech.coefficients[0], source)
                      for _ in range(2000)])
    observed = np.bincount(draws, minlength=64)
    assert _chi2(observed, mech.probabilities(counts)) > P_MIN, name


def test_empty_data_and_tiny_grids():
    source = RandomSource(5)
    for bins in (1, 2, 3, 8):
        mech = QuantileMechanism(1.0, 0.0, 1.0, 0.5, bins=bins)
        counts = np.zeros(bins, dtype=np.int64)
        draws = [race_over_runs(counts, CumulativeCounts(counts), 0.5, mech.target_offset(0), 0,
                                mech.coefficients[0], source) for _ in range(500)]
        assert _chi2(np.bincount(draws, minlength=bins), np.full(bins, 1 / bins)) > P_MIN


def test_sample_uses_runs_from_the_threshold_on_and_keeps_the_law():
    bins = RUNS_MIN_BINS
    counts = np.zeros(bins, dtype=np.int64)
    counts[[100, 101, 500, 900]] = [30, 20, 40, 10]
    mech = QuantileMechanism(0.2, 0.0, 1.0, 0.5, bins=bins)
    out = mech.sample(np.tile(counts, (1500, 1)), random_state=9)
    probs = mech.probabilities(counts)
    # coarse cells (groups of 64 bins) keep the expected counts large
    observed = np.bincount(out.bins[:, 0] // 64, minlength=bins // 64)
    assert _chi2(observed, probs.reshape(-1, 64).sum(axis=1)) > P_MIN


@pytest.mark.parametrize("bins", [1, 5, 1024, 3000])
def test_cumulative_counts_agree_with_numpy(bins):
    counts = np.random.default_rng(bins).integers(0, 3, bins)
    cum = np.cumsum(counts)
    ranks = CumulativeCounts(counts)
    assert ranks.total == cum[-1]
    for x in (-1, 0, 1, int(cum[-1]) // 2, int(cum[-1]), int(cum[-1]) + 1):
        for side in ("left", "right"):
            assert ranks.searchsorted(np.int64(x), side) == np.searchsorted(cum, x, side=side)
    for j in {0, 1, bins // 2, bins - 1, bins}:
        assert ranks.before(j) == (cum[j - 1] if j else 0)
    np.testing.assert_array_equal(ranks.span(bins // 3, bins), cum[bins // 3:])


def test_uniform_index_is_exact_and_in_range():
    source = RandomSource(3)
    draws = [_uniform_index(3, source) for _ in range(3000)]
    assert set(draws) <= {0, 1, 2}
    assert _chi2(np.bincount(draws, minlength=3), np.full(3, 1 / 3)) > P_MIN
    assert _uniform_index(1, source) == 0


def test_finite_precision_bound_covers_log_m():
    """η includes the rounding of ln m (m ≤ 2^22) and its subtraction; still ≈ 1e-12."""
    eta = race_error(1.0)
    assert math.log(2**22) <= LOG_MAX_BINS
    assert eta >= 2 * (2.0**-52 * math.log(2**22) + 2.0**-53 * SCORE_CAP)
    assert eta < 1e-11
