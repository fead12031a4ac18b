"""What one draw of the run sampler reads (issue 34): the exact counts only of the two end
bins and inside the blocks :func:`fine_blocks_read` names — found from the block totals and
public parameters alone — plus the block totals. Counts replaced by garbage everywhere else,
with the exact totals, give the same bin for the same random bits on every data set tried
(ties, empty bins, all rows in one bin, no rows, a short last block, targets at the ends,
padded and offset targets): so an engine may count coarse blocks first and fine bins only in
those blocks, and the released law is unchanged on every data set."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpframe.mechanisms.quantiles import CumulativeCounts, fine_blocks_read, race_over_runs
from dpframe.mechanisms.randomness import RandomSource

K = CumulativeCounts.BLOCK
BINS = 8 * K + 37  # a short last block


def _data_sets(rng: np.random.Generator) -> list[np.ndarray]:
    """Bin counts of shapes that stress the window: dense, sparse, ties, one bin, none."""
    dense = rng.poisson(3.0, BINS)
    sparse = np.zeros(BINS, np.int64)
    sparse[rng.choice(BINS, 40, replace=False)] = rng.integers(1, 5, 40)
    one_bin = np.zeros(BINS, np.int64)
    one_bin[int(rng.integers(BINS))] = int(rng.integers(1, 10**6))
    ties = np.zeros(BINS, np.int64)
    ties[[0, BINS - 1, 3 * K, 3 * K + 1]] = [50, 50, 1000, 1]
    normal = np.bincount(np.clip(rng.normal(BINS / 2, BINS / 40, 20_000).astype(int), 0,
                                 BINS - 1), minlength=BINS)
    return [dense, sparse, one_bin, ties, normal, np.zeros(BINS, np.int64)]


def _garbled(counts: np.ndarray, keep: tuple[int, int], rng: np.random.Generator
             ) -> np.ndarray:
    """``counts`` with every bin but the two end bins and blocks ``keep[0] … keep[1]``
    replaced by random values."""
    out = rng.integers(0, 10**9, counts.size).astype(counts.dtype)
    sl = slice(keep[0] * K, (keep[1] + 1) * K)
    out[sl] = counts[sl]
    out[[0, -1]] = counts[[0, -1]]
    return out


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_draws_read_only_the_named_blocks(dtype):
    rng = np.random.default_rng(34)
    garbled_blocks = 0
    cases = [(0.5, Fraction(0), 0, 0.5), (0.0, Fraction(0), 0, 2.0), (1.0, Fraction(0), 0, 0.1),
             (0.25, Fraction(-7, 2), 3, 0.5), (0.9, Fraction(5), 9, 40.0)]
    for counts in _data_sets(rng):
        counts = counts.astype(dtype)
        totals = CumulativeCounts.block_totals(counts)
        exact = CumulativeCounts(counts)
        for q, offset, pad, lam in cases:
            keep = fine_blocks_read(totals, counts.size, q, offset, pad, lam)
            garbled = _garbled(counts, keep, rng)
            coarse = CumulativeCounts(garbled, block_totals=totals)
            for seed in range(3):
                want = race_over_runs(counts, exact, q, offset, pad, lam, RandomSource(seed))
                got = race_over_runs(garbled, coarse, q, offset, pad, lam, RandomSource(seed))
                assert got == want, (q, offset, pad, lam, seed)
            garbled_blocks += totals.size - max(0, keep[1] - keep[0] + 1)
    assert garbled_blocks > 50  # many cases leave blocks unread: the test is not vacuous


def test_the_window_blocks_are_read():
    """The control: garbling the named blocks too changes the draws (so the test above would
    see a read outside them)."""
    rng = np.random.default_rng(7)
    counts = _data_sets(rng)[4]  # normal rows: a window of a few blocks mid-range
    totals = CumulativeCounts.block_totals(counts)
    exact = CumulativeCounts(counts)
    k1, k2 = fine_blocks_read(totals, counts.size, 0.5, Fraction(0), 0, 2.0)
    assert 0 < k1 <= k2 < totals.size - 1
    garbled = _garbled(counts, (k1, k2), rng)
    garbled[k1 * K:(k2 + 1) * K] = rng.permutation(garbled[k1 * K:(k2 + 1) * K])
    coarse = CumulativeCounts(garbled, block_totals=totals)
    draws = [(race_over_runs(counts, exact, 0.5, Fraction(0), 0, 2.0, RandomSource(s)),
              race_over_runs(garbled, coarse, 0.5, Fraction(0), 0, 2.0, RandomSource(s)))
             for s in range(5)]
    assert any(a != b for a, b in draws)
