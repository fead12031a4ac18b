"""The run sampler's faster form (issue 34) makes the same draws as the form it replaced.

:func:`race_over_runs` now takes the target rank apart in integers (:func:`_split_target`),
assembles its units in preallocated arrays, finds the cumulative counts of a small grid from
the bins with rows (:class:`NonzeroCounts`) and draws its coins with
:meth:`RandomSource.coins`. The sampler's law and its finite-precision argument are
unchanged; this file pins that down bit for bit on the seeded source: ``_reference_race``
below is the sampler as it was (commit b837f84), kept verbatim apart from names and its
one-line target helper inlined, and every draw of the new sampler -- with either form of
the cumulative counts, on int64 and on integer-valued double counts, through
:meth:`QuantileMechanism.sample` too -- is compared with it for many seeds on count vectors
chosen for their edge cases: one, two and three bins, no rows, every row in an end bin or
in one interior bin, integer and fractional targets on the edge of an empty run, padded and
offset targets (the brackets), windows cut by the score cap on both sides, scores exactly at
the cap, and the engine's two-pass counts (garbage outside the blocks a draw reads).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpframe.mechanisms.quantiles import (
    LOG_E_MAX,
    NONZERO_RANKS_MAX_BINS,
    SCORE_CAP,
    CumulativeCounts,
    NonzeroCounts,
    QuantileMechanism,
    _split_target,
    fine_blocks_read,
    log_exponential,
    race_over_runs,
)
from dpframe.mechanisms.randomness import RandomSource

SEEDS = range(15)


# -- the sampler as it was (b837f84) ---------------------------------------------------------
def _reference_log_exponential(u: np.ndarray, log_u: np.ndarray, coin: np.ndarray
                               ) -> np.ndarray:
    big = -(log_u - math.log(2.0))
    small = -np.log1p(-0.5 * u)
    out = np.log(np.where(coin, big, small))
    tiny = ~coin & (u < 2.0**-1000)
    if tiny.any():
        out = np.where(tiny, log_u - math.log(2.0), out)
    return out


def _reference_log_exponentials(source: RandomSource, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape)) if shape else 1
    u, log_u = source.uniform(size)
    coin = (source.words(size) & np.uint64(1)).astype(bool)
    return _reference_log_exponential(u, log_u, coin).reshape(shape)


def _reference_distances(lo: np.ndarray, hi: np.ndarray, whole: int, frac: float
                         ) -> np.ndarray:
    a = (lo - whole).astype(float) - frac
    b = (whole - hi).astype(float) + frac
    return np.maximum(np.maximum(a, b), 0.0)


def _reference_uniform_index(m: int, source: RandomSource) -> int:
    if m <= 1:
        return 0
    limit = (2**64 // m) * m
    while True:
        w = int(source.words(1)[0])
        if w < limit:
            return w % m


def _reference_window_units(counts: np.ndarray, ranks: CumulativeCounts, first: int,
                            last: int, pad: int, whole: int, above: int
                            ) -> tuple[np.ndarray, ...]:
    nz = np.nonzero(counts[first:last] != 0)[0] + first
    base = ranks.before(first) + pad
    rows = counts[nz].astype(np.int64)
    hi = np.cumsum(rows) + base
    lo = hi - rows
    if nz.size == 0:
        return (np.array([first]), np.array([last - first]), np.array([base]),
                np.array([base]))
    empty_after = np.append(nz[1:], last) - nz - 1
    below = hi <= whole
    grow_right = np.where(below, empty_after, 0)
    to_next = np.where(below, 0, empty_after)
    grow_left = np.concatenate([[nz[0] - first], to_next[:-1]])
    extra_start, extra_size, extra_rank = [], [], []
    if grow_left[0] > 0 and base < above:
        extra_start.append(first)
        extra_size.append(int(grow_left[0]))
        extra_rank.append(base)
        grow_left[0] = 0
    if to_next[-1] > 0:
        extra_start.append(int(nz[-1]) + 1)
        extra_size.append(int(to_next[-1]))
        extra_rank.append(int(hi[-1]))
    rank = np.asarray(extra_rank, dtype=np.int64)
    return (np.concatenate([nz - grow_left, np.asarray(extra_start, dtype=np.int64)]),
            np.concatenate([1 + grow_left + grow_right,
                            np.asarray(extra_size, dtype=np.int64)]),
            np.concatenate([lo, rank]), np.concatenate([hi, rank]))


def _reference_thresholds(t: Fraction, pad: int, coefficient: float
                          ) -> tuple[np.int64, np.int64]:
    reach = SCORE_CAP / coefficient + 2.0
    t_float = float(t)
    below = np.int64(max(min(math.floor(t_float - reach - pad), 2**62), -(2**62)))
    above = np.int64(max(min(math.ceil(t_float + reach - pad), 2**62), -(2**62)))
    return below, above


def _reference_race(counts: np.ndarray, ranks: CumulativeCounts, q: float, offset: Fraction,
                    padding: int, coefficient: float, source: RandomSource) -> int:
    b = counts.size
    pad = int(padding)
    n = ranks.total
    t = Fraction(q) * (n + 2 * pad) + offset
    whole = math.floor(t)
    frac = float(t - whole)
    starts, sizes = [np.array([0])], [np.array([1])]
    los, his = [np.array([0])], [np.array([int(counts[0]) + pad + (pad if b == 1 else 0)])]
    if b >= 2:
        starts.append(np.array([b - 1]))
        sizes.append(np.array([1]))
        los.append(np.array([n - int(counts[b - 1]) + pad]))
        his.append(np.array([n + 2 * pad]))
    capped_start, capped_size = [], []
    if b >= 3:
        below, above = _reference_thresholds(t, pad, coefficient)
        first = max(1, ranks.searchsorted(below, "right"))
        last = max(first, min(b - 1, ranks.searchsorted(above, "left") + 1))
        for lo_bin, hi_bin in ((1, first), (last, b - 1)):
            if hi_bin > lo_bin:
                capped_start.append(lo_bin)
                capped_size.append(hi_bin - lo_bin)
        if last > first:
            w_start, w_size, w_lo, w_hi = _reference_window_units(
                counts, ranks, first, last, pad, whole, whole + (t > whole))
            starts.append(w_start)
            sizes.append(w_size)
            los.append(w_lo)
            his.append(w_hi)
    d = _reference_distances(np.concatenate(los).astype(np.int64),
                             np.concatenate(his).astype(np.int64), whole, frac)
    score = np.append(np.minimum(coefficient * d, SCORE_CAP), [SCORE_CAP] * len(capped_start))
    start = np.concatenate([*starts, np.asarray(capped_start, dtype=np.int64)])
    size = np.concatenate([*sizes, np.asarray(capped_size, dtype=np.int64)])
    keys = score + _reference_log_exponentials(source, score.shape) - np.log(size.astype(float))
    unit = int(np.argmin(keys))
    return int(start[unit]) + _reference_uniform_index(int(size[unit]), source)


# -- count vectors and draw parameters -------------------------------------------------------
def _cases() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(34)
    out: list[tuple[str, np.ndarray]] = [
        ("one bin", np.array([7])), ("one empty bin", np.array([0])),
        ("two bins", np.array([3, 5])), ("three bins", np.array([2, 0, 2])),
        ("no rows", np.zeros(300, np.int64))]
    ends = np.zeros(300, np.int64)
    ends[0], ends[-1] = 40, 40
    out.append(("rows only at the ends", ends))
    one = np.zeros(300, np.int64)
    one[150] = 9
    out.append(("one interior bin", one))
    runs = np.zeros(400, np.int64)
    runs[[5, 6, 100, 101, 250, 399]] = [3, 1, 2, 2, 4, 1]  # even n: integer targets
    out.append(("long empty runs", runs))
    sparse = np.zeros(2048 + 11, np.int64)
    sparse[rng.choice(sparse.size, 90, replace=False)] = rng.integers(1, 4, 90)
    out.append(("sparse, short last block", sparse))
    out.append(("dense", rng.poisson(2.0, 3000)))
    out.append(("a small table on the default grid",
                np.bincount(rng.integers(0, 2**16, 1000), minlength=2**16)))
    return out


CASES = _cases()
#: (q, offset, padding, λ): the point release at a wide and a narrow window (λ = 100: C/λ = 8
#: ranks, so integer targets put bins exactly at the cap), and bracket-like padded and offset
#: targets
DRAWS = [(0.5, Fraction(0), 0, 0.4999999), (0.5, Fraction(0), 0, 100.0),
         (0.0, Fraction(0), 0, 2.0), (1.0, Fraction(0), 0, 2.0),
         (0.3, Fraction(-7, 3), 5, 0.25), (0.9, Fraction(11, 2), 2, 8.0)]


def _ranks(counts: np.ndarray) -> list[CumulativeCounts | NonzeroCounts]:
    return [CumulativeCounts(counts), NonzeroCounts(counts)]


@pytest.mark.parametrize(("name", "counts"), CASES, ids=[c[0] for c in CASES])
def test_race_is_bit_identical_to_the_reference(name: str, counts: np.ndarray) -> None:
    kinds = (np.int64, np.float64) if counts.size < 1000 else (np.float64,)  # (the engines')
    for kind in kinds:
        c = counts.astype(kind)
        reference_ranks = CumulativeCounts(c)
        for q, offset, pad, lam in DRAWS:
            for seed in SEEDS:
                want_source = RandomSource(seed)
                want = _reference_race(c, reference_ranks, q, offset, pad, lam, want_source)
                follow = want_source.words(2).tobytes()
                for ranks in _ranks(c):
                    source = RandomSource(seed)
                    got = race_over_runs(c, ranks, q, offset, pad, lam, source)
                    assert got == want, (name, kind, q, offset, pad, lam, seed, type(ranks))
                    assert source.words(2).tobytes() == follow  # the same words consumed


def test_sample_is_bit_identical_on_both_sides_of_the_nonzero_threshold() -> None:
    rng = np.random.default_rng(5)
    for bins in (NONZERO_RANKS_MAX_BINS, 2 * NONZERO_RANKS_MAX_BINS):
        counts = np.bincount(rng.integers(0, bins, 700), minlength=bins).astype(float)
        mech = QuantileMechanism(1.0, 0.0, 1.0, [0.2, 0.5], bins=bins)
        for seed in range(20):
            got = mech.sample(counts.reshape(1, -1), seed, exact_counts=True).bins[0]
            source, ranks = RandomSource(seed), CumulativeCounts(counts)
            want = [_reference_race(counts, ranks, q, Fraction(0), 0, lam, source)
                    for q, lam in zip(mech.levels, mech.coefficients, strict=True)]
            assert got.tolist() == sorted(want)


def test_nonzero_counts_read_the_two_pass_counts_as_the_exact_ones() -> None:
    """Garbage outside the blocks a draw reads (with the exact block totals): the same bin
    from :class:`NonzeroCounts` as from the exact counts."""
    rng = np.random.default_rng(8)
    k = CumulativeCounts.BLOCK
    counts = np.bincount(np.clip(rng.normal(8 * k, 300, 3000).astype(int), 0, 16 * k - 1),
                         minlength=16 * k)
    totals = CumulativeCounts.block_totals(counts)
    for q, offset, pad, lam in DRAWS[1:]:
        k1, k2 = fine_blocks_read(totals, counts.size, q, offset, pad, lam)
        garbled = np.zeros_like(counts)
        garbled[::k] = totals  # each unread block's total in its first bin
        for lo in range(max(k1, 0), min(k2, totals.size - 1) + 1):
            garbled[lo * k:(lo + 1) * k] = counts[lo * k:(lo + 1) * k]
        garbled[0], garbled[-1] = counts[0], counts[-1]
        garbled[:k], garbled[-k:] = counts[:k], counts[-k:]
        for seed in range(30):
            want = race_over_runs(counts, CumulativeCounts(counts), q, offset, pad, lam,
                                  RandomSource(seed))
            got = race_over_runs(garbled, NonzeroCounts(garbled), q, offset, pad, lam,
                                 RandomSource(seed))
            assert got == want, (q, offset, pad, lam, seed)


def test_split_target_is_the_fraction_arithmetic() -> None:
    rng = np.random.default_rng(3)
    qs = [0.0, 1.0, 0.5, 0.1, 1 / 3, 0.999999999, 2.0**-60, *rng.random(30).tolist()]
    offsets = [Fraction(0), Fraction(-7, 3), Fraction(5, 2), Fraction(10**20, 3)]
    for q in qs:
        for offset in offsets:
            for n, pad in ((0, 0), (1, 0), (7, 3), (10**15 + 1, 0), (2**52 - 1, 5)):
                t = Fraction(q) * (n + 2 * pad) + offset
                whole, frac, t_float, fractional = _split_target(n, q, offset, pad)
                assert whole == math.floor(t)
                assert frac.hex() == float(t - whole).hex()
                assert t_float.hex() == float(t).hex()
                assert fractional == (t > whole)


def test_log_exponential_is_bit_identical_at_the_edges() -> None:
    rng = np.random.default_rng(11)
    u = np.concatenate([rng.random(2000), [2.0**-1074, 2.0**-1022, 2.0**-1000, 2.0**-999,
                                           1e-300, 0.5, 1.0 - 2.0**-53, 2.0**-53]])
    log_u = np.log(u)
    for coin in (np.zeros(u.size, bool), np.ones(u.size, bool), rng.random(u.size) < 0.5):
        with np.errstate(divide="ignore"):  # (U/2 = 0 in a branch np.where then drops)
            got = log_exponential(u, log_u, coin)
            want = _reference_log_exponential(u, log_u, coin)
        assert got.tobytes() == want.tobytes()
        assert np.all(np.abs(got) <= LOG_E_MAX)


@pytest.mark.parametrize("n", [1, 9, 1000])
def test_seeded_coins_are_the_low_bits_of_the_words(n: int) -> None:
    a, b = RandomSource(77), RandomSource(77)
    assert a.coins(n).tolist() == ((b.words(n) & np.uint64(1)).astype(bool)).tolist()
    assert a.words(2).tobytes() == b.words(2).tobytes()


def test_secure_coins_are_fair_and_independent() -> None:
    """A chi-square test of the 16 patterns of four consecutive coins (fair and independent:
    each pattern ``1/16``), on coins from reads of several sizes."""
    source = RandomSource()
    coins = np.concatenate([source.coins(n) for n in (1, 7, 8, 13, 4000) * 20])
    assert coins.dtype == bool
    usable = coins[: coins.size // 4 * 4].reshape(-1, 4).astype(int)
    patterns = usable @ np.array([8, 4, 2, 1])
    observed = np.bincount(patterns, minlength=16)
    # (OS randomness: a fair source fails this 1 run in 10^7)
    assert stats.chisquare(observed).pvalue > 1e-7
