"""Quantiles from exact bin counts: the exponential mechanism over a fine public grid.

Input: the exact counts ``c_0 … c_{B-1}`` of rows per public bin of ``[l, u]`` (values clamped to
``[l, u]`` first; ``B`` equal bins, see :func:`bin_edges` and :func:`bin_counts` for the binning
rule), one vector per group. Output: one value per requested quantile, inside ``[l, u]``.

For a quantile ``q`` with ``n = Σ c`` rows, target rank ``t = q·n`` and cumulative counts
``L_j = Σ_{i<j} c_i``, the *rank distance* of bin ``j`` is

    d_j = dist(t, [L_j, L_{j+1}]) = max(L_j − t, t − L_{j+1}, 0),

zero exactly for the bins whose rows straddle the target rank. The mechanism picks bin ``j`` with
probability ``∝ exp(−λ·min(d_j, C/λ))``, ``λ = ε_q / (2Δ)`` (``ε_q`` the share of this quantile
after the finite-precision overhead; ``C`` = :data:`SCORE_CAP`, public), and releases the bin's
midpoint (or a uniform point in it). ``Δ`` is the sensitivity of ``d``: 1 under replacement
neighbours, ``max(q, 1−q)`` under add/remove (``docs/privacy.md``, section Q).

Sampling is an exponential race (equivalently Gumbel-max): ``argmin_j (λ min(d_j, C/λ) + ln E_j)``
with ``E_j`` independent Exp(1) drawn from full-precision uniforms with a fair coin choosing the
half of the inverse CDF, so ``ln E_j`` is accurate to ``2^-42`` absolute for every draw. The
computed keys differ from the exact ones by at most ``η`` (:func:`race_error`), which moves every
output probability by a factor in ``[e^{−2η}, e^{2η}]``: an ε overhead of ``4η`` per quantile
(about 1e-11), reserved before calibration. With many bins (``B ≥`` :data:`RUNS_MIN_BINS`) the
race is run over *runs* of bins that share a score (:func:`race_over_runs`: every bin with rows
with the run of empty bins beside it on the side away from the target, the capped bins below
and above the target), a run of ``m`` bins keyed ``score + ln E − ln m`` and the bin inside it
uniform: the same law at ``O(log B + rows near the target)`` per draw instead of ``B``
logarithms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe.errors import ParameterError
from dpframe.mechanisms.quantile_ranks import (
    NONZERO_RANKS_MAX_BINS,
    CumulativeCounts,
    NonzeroCounts,
    Ranks,
)
from dpframe.mechanisms.randomness import RandomSource, RandomState
from dpframe.mechanisms.snapping import CLIP

__all__ = [
    "DEFAULT_QUANTILE_BINS",
    "NEIGHBOURS",
    "QuantileMechanism",
    "QuantileRelease",
    "bin_counts",
    "bin_edges",
    "bin_index",
    "choose_bins",
    "default_bins",
    "race_error",
    "rank_distances",
    "release_quantiles",
]

#: Fewest bins the default rule (:func:`default_bins`) uses for one group (2^16): fine enough
#: that the grid is not what limits accuracy at n ≤ 10^4, ε ≤ 1
#: (benchmarks/reports/RESULTS-quantiles.md).
DEFAULT_QUANTILE_BINS = 2**16
#: Bins per unit of ``ε·n`` in the default rule: the grid's error, about a quarter of a bin
#: width, stays below the mechanism's own rank noise (≈ 1.4/ε rows) for data up to 8× denser
#: than uniform over the bounds near the quantile (docs/frames.md, "Quantile resolution").
BINS_PER_EPSILON_ROW = 8
#: Most bins the default rule picks (2^22: 32 MiB of counts, about 1–2 s of sampling).
MAX_DEFAULT_BINS = 2**22
#: Default budget of count cells (groups × bins) for :func:`choose_bins`: 2^22 int64 = 32 MiB.
DEFAULT_MAX_CELLS = 2**22
MIN_DEFAULT_BINS = 2**10
#: Largest number of bins accepted (memory: one int64 count per bin and group).
MAX_QUANTILE_BINS = 2**22
#: Cap on the score λ·d (public): bins whose score would exceed it get exactly C. Capping is
#: 1-Lipschitz, so the sensitivity is unchanged; capped bins carry probability ≤ e^-800 each.
SCORE_CAP = 800.0
#: Largest |ln E| a draw can produce: E ≥ 2^-2049 · ½ (bit-stream cap) and E ≤ -ln(2^-2049 / 2).
LOG_E_MAX = 1421.0
#: Relative error of numpy's log/log1p on doubles (documented < 1 ulp; measured in the tests).
LOG_RTOL = 2.0**-52
#: From this many bins on, the sampler races runs of bins with one score
#: (:func:`race_over_runs`, one group at a time); below it every bin races, all groups in one
#: vectorised pass (cheaper for many small groups). Both draw from the same law.
RUNS_MIN_BINS = 1024
#: ln of the largest number of bins one run of the sampler can hold (bounds |ln m|)
LOG_MAX_BINS = math.log(2.0**22) + 1e-9
NEIGHBOURS = ("replace", "add/remove")
OUTPUTS = ("midpoint", "uniform")


def _check_bounds(lower: float, upper: float) -> tuple[float, float]:
    try:
        lo, hi = float(lower), float(upper)
    except (TypeError, ValueError):
        raise ParameterError("lower and upper must be numbers (the declared bounds)") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or not lo < hi:
        raise ParameterError(
            f"quantiles need finite declared bounds lower < upper; got [{lower!r}, {upper!r}]"
        )
    return lo, hi


def _check_bins(bins: int) -> int:
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)):
        raise ParameterError(f"bins must be an int (number of equal public bins), got {bins!r}")
    b = int(bins)
    if not 1 <= b <= MAX_QUANTILE_BINS:
        raise ParameterError(f"bins must lie in [1, {MAX_QUANTILE_BINS}], got {b}")
    return b


def choose_bins(groups: int = 1, max_cells: int = DEFAULT_MAX_CELLS) -> int:
    """A power-of-two number of bins from public facts only: ``2^16`` for one group, fewer when
    ``groups × bins`` would exceed ``max_cells`` (memory of the per-group counts), never fewer
    than ``2^10``."""
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ParameterError(f"groups must be an int ≥ 1, got {groups!r}")
    per_group = max(int(max_cells) // int(groups), 1)
    bins = 1 << (per_group.bit_length() - 1)  # largest power of two ≤ per_group
    return int(min(DEFAULT_QUANTILE_BINS, max(MIN_DEFAULT_BINS, bins)))


def default_bins(n: int, epsilon: float | None = None, groups: int = 1,
                 max_cells: int = DEFAULT_MAX_CELLS) -> int:
    """The default number of bins from public facts only: the protected size ``n`` (an upper
    bound on the rows of any derivation or group, so it is also used where the size is
    private), the release's ε (None: 1) and the number of groups.

    ``B = 2^⌈log₂(8·ε·n)⌉`` limited to ``[2^16, 2^22]``, then to :func:`choose_bins`'s
    memory budget over ``groups``. Why ``ε·n``: the mechanism's rank error is about
    ``1.4/ε`` rows (median of a two-sided exponential with rate ``ε/2``), i.e. a value error of
    about ``1.4/(ε·n·f)`` for a density ``f`` at the quantile, while the grid adds about a
    quarter bin width ``(u − l)/(4B)``; the grid stays the smaller term while
    ``B ≥ 0.7·ε·n·f·(u − l)``, and ``8·ε·n`` covers densities up to about 11× the uniform
    density over the bounds. More bins never hurt accuracy (the law converges to the
    continuous exponential mechanism); they cost time and memory linearly.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ParameterError(f"n must be an int ≥ 0 (the public size), got {n!r}")
    eps = 1.0 if epsilon is None else float(epsilon)
    if not (math.isfinite(eps) and eps > 0):
        eps = 1.0
    target = BINS_PER_EPSILON_ROW * eps * max(int(n), 1)
    bins = DEFAULT_QUANTILE_BINS
    while bins < target and bins < MAX_DEFAULT_BINS:
        bins *= 2
    per_group = max(int(max_cells) // max(int(groups), 1), 1)
    cap = max(MIN_DEFAULT_BINS, 1 << (per_group.bit_length() - 1))
    return int(min(bins, cap))


def bin_edges(lower: float, upper: float, bins: int = DEFAULT_QUANTILE_BINS) -> np.ndarray:
    """The ``bins + 1`` public edges ``l + (u − l)·j/B`` (the ends exactly ``l`` and ``u``).
    When ``u − l`` overflows (bounds near ±1.8e308) the same value is computed on halves,
    ``2·(l/2 + (u/2 − l/2)·j/B)``, which is finite."""
    lo, hi = _check_bounds(lower, upper)
    b = _check_bins(bins)
    t = np.arange(b + 1, dtype=float) / b
    if math.isfinite(hi - lo):
        edges = lo + (hi - lo) * t
    else:
        edges = 2.0 * (lo * 0.5 + (hi * 0.5 - lo * 0.5) * t)
    edges[0], edges[-1] = lo, hi
    return edges


def bin_index(values: Any, lower: float, upper: float, bins: int = DEFAULT_QUANTILE_BINS
              ) -> np.ndarray:
    """Bin of each value: clamp to ``[l, u]``, then ``j = ⌊B·t⌋`` limited to ``B − 1`` with
    ``t = (x/2 − l/2) / (u/2 − l/2)`` (bins are ``[e_j, e_{j+1})``, the last one closed). Halving
    first keeps every intermediate finite for any finite bounds (``u − l`` itself overflows for
    bounds near ±1.8e308); the same IEEE operations, in the same order, as the engines'
    binning (:class:`dpframe.query._aggregates.Bins`), so the two agree bit for bit. A per-row map:
    neighbours stay neighbours. (Bounds so close that ``u/2 − l/2`` is 0, a few subnormals
    apart, use ``(x − l)/(u − l)``, exact there; the engines refuse such bounds.) Engines may
    compute it natively; any public per-row rule keeps the guarantee."""
    lo, hi = _check_bounds(lower, upper)
    b = _check_bins(bins)
    x = np.clip(np.asarray(values, dtype=float), lo, hi)
    if np.isnan(x).any():
        raise ParameterError("NaN values cannot be binned; drop or fill missing values first")
    half_lower, half_width = lo * 0.5, hi * 0.5 - lo * 0.5
    if half_width > 0:
        j = np.floor((x * 0.5 - half_lower) / half_width * b)
    else:  # bounds a few subnormals apart: halving would merge them; u − l is exact there
        j = np.floor((x - lo) / (hi - lo) * b)
    return np.clip(j, 0, b - 1).astype(np.int64)


def bin_counts(values: Any, lower: float, upper: float, bins: int = DEFAULT_QUANTILE_BINS
               ) -> np.ndarray:
    """Exact counts per bin (:func:`bin_index`): the aggregate the quantile mechanism reads."""
    b = _check_bins(bins)
    return np.bincount(bin_index(values, lower, upper, b), minlength=b).astype(np.int64)


def _check_counts(counts: Any, bins: int | None = None) -> np.ndarray:
    c = np.asarray(counts)
    if c.ndim not in (1, 2) or c.shape[-1] < 1:
        raise ParameterError("counts must be a vector of bin counts (2-D: one per group)")
    if c.dtype.kind == "f":
        if not np.isfinite(c).all() or (c != np.floor(c)).any():
            raise ParameterError("counts must be exact non-negative integers")
    elif c.dtype.kind not in "iu":
        raise ParameterError(f"counts must be integers, got dtype {c.dtype}")
    c = c.astype(np.int64, copy=False)
    if c.min(initial=0) < 0:  # (initial: a (0, B) array of no groups is valid)
        raise ParameterError("counts must be non-negative")
    if bins is not None and c.shape[-1] != bins:
        raise ParameterError(f"expected {bins} bin counts per group, got {c.shape[-1]}")
    if c.sum(axis=-1).max(initial=0) >= 2**52:
        raise ParameterError("more than 2^52 rows in one group is not supported")
    return c


def _check_q(q: Any) -> tuple[list[float], bool]:
    scalar = np.ndim(q) == 0
    qs = [q] if scalar else list(np.asarray(q, dtype=float).ravel())
    if not qs:
        raise ParameterError("q must be a number in [0, 1] or a non-empty list of them")
    out = []
    for v in qs:
        if isinstance(v, bool):
            raise ParameterError("q must be a number in [0, 1], not a bool")
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ParameterError(f"q must be a number in [0, 1], got {v!r}") from None
        if not 0.0 <= f <= 1.0:
            raise ParameterError(f"quantile levels must lie in [0, 1], got {f!r} (use 0.5 for"
                                 " the median, not 50)")
        out.append(f)
    return out, scalar


def rank_distances(counts: np.ndarray, q: float, offset: float | Fraction = 0.0) -> np.ndarray:
    """``d_j = max(L_j − t, t − L_{j+1}, 0)`` with ``t = q·n + offset`` (``offset`` a public
    shift of the target rank, 0 for the quantile itself; the bracketing releases of
    :mod:`dpframe.mechanisms.quantile_intervals` shift it), in float64 with error at most
    ``2^-53 (|d_j| + 1)``: ``t`` is split exactly into ``T + f`` (``T`` integer, ``0 ≤ f < 1``) by
    rational arithmetic, the integer parts are subtracted exactly in int64 and only ``f`` enters
    with one rounding. ``counts`` is (B,) or (G, B)."""
    c = np.atleast_2d(counts).astype(np.int64)
    upper_cum = np.cumsum(c, axis=1)  # L_{j+1}
    lower_cum = upper_cum - c  # L_j
    n = upper_cum[:, -1]
    qf = Fraction(q)
    shift = Fraction(offset)
    d = np.empty(c.shape, dtype=float)
    for g in range(c.shape[0]):
        t = qf * int(n[g]) + shift
        whole = math.floor(t)
        frac = float(t - whole)  # in [0, 1), rounded once
        a = (lower_cum[g] - whole).astype(float) - frac
        b = (whole - upper_cum[g]).astype(float) + frac
        d[g] = np.maximum(np.maximum(a, b), 0.0)
    return d if np.ndim(counts) == 2 else d[0]


def race_error(coefficient: float, cap: float = SCORE_CAP) -> float:
    """Bound ``η`` on |computed − exact| race key ``λ·min(d, C/λ) + ln E`` (docs/privacy.md Q.3).

    * score: ``d̃`` has error ``≤ 2^-53(d + 1)``; where ``λd ≤ 2C`` the product ``fl(λ d̃)`` is
      within ``λ·2^-53(d+1) + 2C·2^-53 ≤ (4C + λ)·2^-53`` of ``λd``; where ``λd > 2C`` both
      exact and computed scores are capped at ``C``;
    * ``ln E``: ``E`` is computed with relative error ``≤ 4·2^-52`` (discretisation of the uniform
      ``≤ 2·2^-52``, one log/log1p ``≤ 2^-52``, one subtraction), so ``ln Ẽ`` is within
      ``5·2^-52`` of ``ln E`` plus its own rounding ``LOG_RTOL·LOG_E_MAX``;
    * the sum: one rounding, ``≤ 2^-53 (C + LOG_E_MAX)``.
    """
    score = (4.0 * cap + coefficient) * 2.0**-53
    log_e = 5.0 * 2.0**-52 + 2.0 * LOG_RTOL * LOG_E_MAX
    total = 2.0**-53 * (cap + LOG_E_MAX + 1.0)
    # the run sampler (:func:`race_over_runs`) subtracts ln m, m ≤ B ≤ 2^22: its own rounding
    # and one more subtraction
    log_m = LOG_RTOL * LOG_MAX_BINS + 2.0**-53 * (cap + LOG_E_MAX + LOG_MAX_BINS + 1.0)
    return 2.0 * (score + log_e + total + log_m)  # factor 2: slack for the bound's own rounding


def _log_exponentials(source: RandomSource, shape: tuple[int, ...]) -> np.ndarray:
    """``ln E`` for independent Exp(1) variables, accurate in both tails.

    A fair coin picks the half of the inverse CDF: ``E = −ln(V/2)`` (``E ≥ ln 2``) or
    ``E = −log1p(−V/2)`` (``E < ln 2``), ``V`` a full-precision uniform. Both halves use ``V``
    where doubles are dense relative to the result, so ``E`` has relative error ``≤ 4·2^-52``.
    """
    size = math.prod(shape)
    u, log_u = source.uniform(size)
    coin = source.coins(size)  # (seeded: the low bit of each next word, as it always was)
    return log_exponential(u, log_u, coin).reshape(shape)


def log_exponential(u: np.ndarray, log_u: np.ndarray, coin: np.ndarray) -> np.ndarray:
    """``ln E`` from a full-precision uniform ``(U, ln U)`` and a fair coin (see above)."""
    big = np.subtract(math.log(2.0), log_u)  # −ln(U/2), ≥ ln 2 (= −(ln U − ln 2) exactly)
    small = np.log1p(np.multiply(u, -0.5))  # −ln(1 − U/2), < ln 2, negated below
    np.negative(small, out=small)
    np.copyto(small, big, where=coin)
    out = np.log(small, out=small)
    # below 2^-1000 (probability 2^-1000) U/2 may be subnormal: there ln E = ln(U/2) + O(U)
    if u.size and np.minimum.reduce(u, axis=None) < 2.0**-1000:
        tiny = ~coin & (u < 2.0**-1000)
        out = np.where(tiny, log_u - math.log(2.0), out)
    return out


def _unit_distances(lo: np.ndarray, hi: np.ndarray, whole: int, frac: float) -> np.ndarray:
    """``max(lo − t, t − hi, 0)`` for integer rank spans ``[lo, hi]`` and ``t = whole + frac``
    (``whole`` integer, ``0 ≤ frac < 1``): integer parts exact in int64, one rounding (the
    error bound of :func:`rank_distances`)."""
    a = (lo - whole).astype(float)
    a -= frac
    b = (whole - hi).astype(float)
    b += frac
    np.maximum(a, b, out=a)
    return np.maximum(a, 0.0, out=a)


def _uniform_index(m: int, source: RandomSource) -> int:
    """A uniform integer in ``[0, m)``, exactly: 64-bit words below the largest multiple of
    ``m`` (rejection; a word is rejected with probability ``< m/2^64``)."""
    if m <= 1:
        return 0
    limit = (2**64 // m) * m
    while True:
        w = int(source.words(1)[0])
        if w < limit:
            return w % m


def _window_units(counts: np.ndarray, ranks: Ranks, first: int, last: int,
                  pad: int, whole: int, above: int) -> tuple[np.ndarray, ...]:
    """Units of the window ``[first, last)`` of interior bins (``first ≥ 1``):
    ``(start, size, lo, hi)``, a run of bins and the padded rank span ``[lo, hi]``
    (``[cum[j−1] + R, cum[j] + R]``) they all have.

    Each bin with rows is a unit, together with the run of empty bins next to it on the side
    away from the target: a run of empty bins between bins ``i < k`` with rows has the rank
    span ``[r, r]``, ``r = cum[i] + R = cum[k−1] + R``; if ``r ≤ ⌊t⌋`` then bin ``i`` lies below
    the target (its span ends at ``r ≤ t``) and both have distance ``t − r``; otherwise
    ``r ≥ ⌈t⌉`` (``r`` is an integer), bin ``k`` lies above it and both have distance ``r − t``.
    (``whole`` = ⌊t⌋, ``above`` = ⌈t⌉; the distances agree as computed, too: the same
    operations on the same integer.) A run at an end of the window with no such neighbour
    inside it is a unit of its own. The cumulative counts are formed at the bins with rows only
    (``cum`` is constant over a run of empty bins), exactly in int64 (``ranks.window``)."""
    nz, rows, cum, before = ranks.window(first, last)
    base = before + pad  # cum[first − 1] + R: the rank of a leading empty run
    if nz.size == 0:
        return (np.array([first]), np.array([last - first]), np.array([base]),
                np.array([base]))
    hi = cum + pad  # cum[j] + R at each bin j with rows
    lo = hi - rows
    empty_after = np.empty_like(nz)  # the empty bins after each bin with rows
    np.subtract(nz[1:], nz[:-1], out=empty_after[:-1])
    empty_after[-1] = last - nz[-1]
    empty_after -= 1
    below = hi <= whole
    grow_right = np.where(below, empty_after, 0)  # runs joining the bin on their left
    to_next = empty_after - grow_right  # runs joining the bin on their right
    grow_left = np.empty_like(nz)
    grow_left[0] = nz[0] - first
    grow_left[1:] = to_next[:-1]
    extra_start, extra_size, extra_rank = [], [], []
    if grow_left[0] > 0 and base < above:  # the leading run lies below the target: alone
        extra_start.append(first)
        extra_size.append(int(grow_left[0]))
        extra_rank.append(base)
        grow_left[0] = 0
    if to_next[-1] > 0:  # the trailing run lies above the target, no bin after it: alone
        extra_start.append(int(nz[-1]) + 1)
        extra_size.append(int(to_next[-1]))
        extra_rank.append(int(hi[-1]))
    size = grow_left + grow_right
    size += 1
    start = nz - grow_left
    if not extra_start:
        return start, size, lo, hi
    rank = np.asarray(extra_rank, dtype=np.int64)
    return (np.concatenate([start, np.asarray(extra_start, dtype=np.int64)]),
            np.concatenate([size, np.asarray(extra_size, dtype=np.int64)]),
            np.concatenate([lo, rank]), np.concatenate([hi, rank]))


def _split_target(n: int, q: float, offset: Fraction, pad: int
                  ) -> tuple[int, float, float, bool]:
    """``(⌊t⌋, t − ⌊t⌋, t, t > ⌊t⌋)`` for the target rank ``t = q·(n + 2R) + offset``
    (exact), the two floats rounded once to nearest: the values ``math.floor(t)``,
    ``float(t − ⌊t⌋)``, ``float(t)`` give, from integers instead of
    :class:`~fractions.Fraction` arithmetic (``t = a/d`` with ``q = q₁/q₂`` exactly,
    ``a = q₁(n + 2R)o₂ + o₁q₂``, ``d = q₂o₂ > 0``; Python's ``int / int`` is correctly
    rounded whatever the fraction's reduction, as ``float(Fraction)`` is)."""
    qn, qd = Fraction(q).as_integer_ratio() if not isinstance(q, float) \
        else q.as_integer_ratio()
    on, od = offset.numerator, offset.denominator
    num = qn * (n + 2 * pad) * od + on * qd
    den = qd * od
    whole = num // den
    rest = num - whole * den
    return whole, rest / den, num / den, rest > 0


def _window_thresholds(t: float, pad: int, coefficient: float) -> tuple[np.int64, np.int64]:
    """The unpadded cumulative counts bounding the window of :func:`race_over_runs`: its
    interior bins are those from the first with ``cum > below`` to the first with
    ``cum ≥ above`` (inclusive); every other interior bin is at rank distance ``≥ C/λ``
    (``t``: the target rank, rounded to a double)."""
    reach = SCORE_CAP / coefficient + 2.0
    below = np.int64(max(min(math.floor(t - reach - pad), 2**62), -(2**62)))
    above = np.int64(max(min(math.ceil(t + reach - pad), 2**62), -(2**62)))
    return below, above


def fine_blocks_read(block_totals: np.ndarray, size: int, q: float, offset: Fraction,
                     padding: int, coefficient: float) -> tuple[int, int]:
    """The blocks ``[k₁, k₂]`` (of :data:`CumulativeCounts.BLOCK` bins; empty when
    ``k₁ > k₂``) whose exact counts one draw of :func:`race_over_runs` reads besides
    ``counts[0]`` and ``counts[B − 1]``, from the block totals and public parameters only.

    Besides the totals and the two end bins, the draw reads the counts of: the block ``k₁``
    where the cumulative counts pass ``below`` and the block ``k₂`` where they reach
    ``above`` (its two binary searches), the bins ``[first, last)`` of the window (``first``
    in block ``k₁``, or bin 1 of block 0 when ``k₁ = 0``; ``last − 1`` no further than the
    position found in block ``k₂``, or ``B − 2`` when that is past the end) and the prefix
    of ``first``'s block (:meth:`CumulativeCounts.before`): all inside blocks ``k₁ … k₂``
    (clipped to the last block). ``k₁``, ``k₂`` are binary searches of the cumulative block
    totals for thresholds computed from ``n`` (their sum) and the public ``q``, ``offset``,
    ``padding``, ``λ`` (:func:`_window_thresholds`). So counts that agree with the exact
    ones on these blocks and the two end bins, together with the exact totals, give every
    draw the same bin for the same random bits — the same law on every data set. The numpy
    engine counts fine bins only there (``dpframe.engine._bins.two_pass_counts``)."""
    block_end = np.cumsum(block_totals)
    blocks = block_end.size
    if blocks == 0 or size < 3:
        return 0, -1
    pad = int(padding)
    below, above = _window_thresholds(_split_target(int(block_end[-1]), q, offset, pad)[2],
                                      pad, coefficient)
    k1 = int(np.searchsorted(block_end, below, side="right"))
    k2 = int(np.searchsorted(block_end, above, side="left"))
    return min(k1, blocks - 1), min(k2, blocks - 1)


def race_over_runs(counts: np.ndarray, ranks: Ranks, q: float, offset: Fraction,
                   padding: int, coefficient: float, source: RandomSource) -> int:
    """One draw of the exponential mechanism's bin, racing *runs* of bins that share a score.

    The law is that of the per-bin race (module docstring): bin ``j`` with probability
    ``∝ exp(−min(λd_j, C))``, the rank spans those of the counts with ``padding`` public rows
    added to the first and the last bin and the target ``q·(n + 2·padding) + offset`` (0 and 0
    for the point release; :mod:`dpframe.mechanisms.quantile_intervals` for the brackets).
    It partitions the bins into *units* of equal exact score: the bins far enough from the
    target that their score is the cap ``C`` exactly — all bins below and all above a window
    of rank distance ``< C/λ + 2``, found by binary search on the cumulative counts (``L_j``
    does not decrease), two units; inside the window every bin with at least one row, together
    with the run of empty bins beside it on the side away from the target (a run between bins
    with rows has one rank, ``[r, r]``, which is the end of the bin before it when that bin
    lies below the target, ``r ≤ ⌊t⌋``, and otherwise the start of the bin after it, which then
    lies above, ``r ≥ ⌈t⌉``: the same distance either way; :func:`_window_units`), and a run
    at an edge of the window with no such neighbour alone. For a unit of ``m`` bins with
    score ``s``, ``min_{j ∈ unit} (s + ln E_j) = s + ln(E/m)`` in law (the minimum of ``m``
    independent Exp(1) is Exp(m)) and the winner inside is uniform; so racing the units with
    keys ``s + ln E − ln m`` and then drawing a uniform bin of the winning unit gives exactly
    the per-bin law.

    *Finite precision* (Gazeau, Miller and Palamidessi, §4.1: a pointwise bound on the
    computational error of a random variable bounds the probability of every output set by
    the exact probabilities of its ``±η``-expansions, Props. 4.1–4.2). Every computed key
    ``s̃ + ln Ẽ − ln m̃`` is within ``η`` (:func:`race_error`, which covers the score, ``ln E``,
    ``ln m ≤ ln 2^22`` and the two roundings of the sum) of the exact key for the same random
    bits. Unit ``u`` wins the computed race only if its exact key is within ``2η`` of every
    other exact key: that is the event that it wins the exact race with every other unit's
    score raised by ``2η`` (their weights multiplied by ``e^{−2η}``), of probability at most
    ``e^{2η}`` times its exact probability; symmetrically at least ``e^{−2η}`` times it;
    the uniform choice inside the unit is exact (:func:`_uniform_index`). The output is a bin,
    a discrete set, so no rounding step (their §4.2) is needed: each output probability is
    within a factor ``e^{±2η}`` of the exact law's, and the overhead ``4η`` per release is
    reserved before calibration (Q.3 of docs/privacy.md). The bound does not depend on the
    partition into units, so merging runs with their neighbours changes the random bits
    consumed, not the guarantee. Cost: one read-only pass over the counts per group
    (``ranks``: :class:`CumulativeCounts` or :class:`NonzeroCounts`, which answer alike), one
    over the window for its bins with rows (none for :class:`NonzeroCounts`), and
    ``O(log B + k)`` further work per draw, ``k`` the bins with rows within ``C/λ`` ranks of
    the target, not ``B`` logarithms.
    """
    b = counts.size
    pad = int(padding)
    n = ranks.total
    whole, frac, t, fractional = _split_target(n, q, offset, pad)
    # the end bins: spans [0, c_0 + R] and [n − c_{B−1} + R, n + 2R] (one span if B = 1)
    end_lo, end_hi = [0], [int(counts[0]) + pad + (pad if b == 1 else 0)]
    end_start = [0]
    if b >= 2:
        end_lo.append(n - int(counts[b - 1]) + pad)
        end_hi.append(n + 2 * pad)
        end_start.append(b - 1)
    capped: list[tuple[int, int]] = []  # (start, size): score C exactly
    window = None
    if b >= 3:  # interior bins 1 … B−2: spans [cum[j−1] + R, cum[j] + R]
        # (integer thresholds: cum > x ⟺ cum > ⌊x⌋, cum ≥ x ⟺ cum ≥ ⌈x⌉)
        below, above = _window_thresholds(t, pad, coefficient)
        first = max(1, ranks.searchsorted(below, "right"))
        last = max(first, min(b - 1, ranks.searchsorted(above, "left") + 1))
        capped = [(lo_bin, hi_bin - lo_bin) for lo_bin, hi_bin in ((1, first), (last, b - 1))
                  if hi_bin > lo_bin]
        if last > first:
            window = _window_units(counts, ranks, first, last, pad, whole, whole + fractional)
    # the units in race order: the end bins, the window's, the capped runs
    ends = len(end_lo)
    scored = ends + (0 if window is None else window[0].size)
    units = scored + len(capped)
    lo, hi = np.empty(scored, dtype=np.int64), np.empty(scored, dtype=np.int64)
    start, size = np.empty(units, dtype=np.int64), np.empty(units, dtype=np.int64)
    lo[:ends], hi[:ends], start[:ends], size[:ends] = end_lo, end_hi, end_start, 1
    if window is not None:
        start[ends:scored], size[ends:scored], lo[ends:], hi[ends:] = window
    for i, (run_start, run_size) in enumerate(capped, scored):
        start[i], size[i] = run_start, run_size
    score = np.empty(units)
    np.minimum(coefficient * _unit_distances(lo, hi, whole, frac), SCORE_CAP,
               out=score[:scored])
    score[scored:] = SCORE_CAP
    keys = _log_exponentials(source, score.shape)
    keys += score  # (score + ln E: one rounding, either order)
    keys -= np.log(size.astype(float))
    unit = int(np.argmin(keys))
    return int(start[unit]) + _uniform_index(int(size[unit]), source)


@dataclass(frozen=True)
class QuantileRelease:
    """Released values (one per group × quantile) and the public log fields."""

    values: np.ndarray  # shape (G, K) for grouped counts, (K,) for one vector
    bins: np.ndarray  # chosen bin indices, same shape
    log: dict[str, Any]


class QuantileMechanism:
    """Exponential mechanism over the bins of ``[lower, upper]`` for the levels ``q``.

    ``epsilon`` is the total for all levels (split equally: sequential composition, the levels
    are released independently and then sorted, which is post-processing). ``neighbours`` is
    ``"replace"`` (Δ = 1) or ``"add/remove"`` (Δ = ``max(q, 1 − q)``), see :meth:`sensitivity`.
    Which to use: the protected frame (public size) → ``"replace"``; a private-size derived frame,
    where a replacement upstream adds, removes *or* replaces a row → ``"replace"`` (Δ = 1 is the
    maximum over the three); one group of a group-by, which a replacement changes by an add or
    a remove and which gets ε/2 by the library's rule → ``"add/remove"``.
    """

    def __init__(
        self,
        epsilon: float,
        lower: float,
        upper: float,
        q: float | Sequence[float] = 0.5,
        *,
        bins: int = DEFAULT_QUANTILE_BINS,
        neighbours: str = "replace",
        output: str = "midpoint",
        sort: bool = True,
    ) -> None:
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer,
                                                                  np.floating)):
            raise ParameterError("epsilon must be a number > 0, e.g. epsilon=0.5")
        self.epsilon = float(epsilon)
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ParameterError(f"epsilon must be a finite number > 0, got {epsilon!r}")
        self.lower, self.upper = _check_bounds(lower, upper)
        self.bins = _check_bins(bins)
        self.levels, self.scalar = _check_q(q)
        if neighbours not in NEIGHBOURS:
            raise ParameterError(f"neighbours must be one of {NEIGHBOURS}, got {neighbours!r}")
        self.neighbours = neighbours
        if output not in OUTPUTS:
            raise ParameterError(f"output must be one of {OUTPUTS}, got {output!r}")
        self.output = output
        self.sort = bool(sort)
        k = len(self.levels)
        self.epsilon_each = self.epsilon / k
        # calibrate λ_i = (ε_i − overhead_i)/(2Δ_i); the overhead depends on λ only through a
        # (4C + λ)·2^-53 term, so one re-evaluation at the final λ suffices (checked below)
        self.sensitivities = [self.sensitivity(v) for v in self.levels]
        coefs, overheads = [], []
        for delta_i in self.sensitivities:
            overhead = 4.0 * race_error(self.epsilon_each / (2 * delta_i))
            if overhead >= self.epsilon_each:
                raise ParameterError("epsilon is too small for floating point; use a larger one")
            lam = (self.epsilon_each - overhead) / (2 * delta_i)
            assert 4.0 * race_error(lam) <= overhead
            coefs.append(lam)
            overheads.append(overhead)
        self.coefficients = coefs
        self.epsilon_overheads = overheads

    def sensitivity(self, q: float) -> float:
        """Largest change of any ``d_j`` between neighbours: 1 under replacement (``L_j`` and
        ``L_{j+1}`` move by at most 1, ``t`` is fixed); ``max(q, 1 − q)`` under add/remove (``t``
        moves by ``q`` and ``L_j, L_{j+1}`` by 0 or 1 in the same direction)."""
        if self.neighbours == "replace":
            return 1.0
        return max(q, 1.0 - q)

    #: public rows added to the first and the last bin before ranking (0: none; the
    #: bracketing releases of :mod:`dpframe.mechanisms.quantile_intervals` pad)
    padding: int = 0

    def target_offset(self, level: int) -> Fraction:
        """The public shift of the target rank (0: the quantile itself)."""
        return Fraction(0)

    @property
    def edges(self) -> np.ndarray:
        return bin_edges(self.lower, self.upper, self.bins)

    def scores(self, counts: Any, level: int = 0) -> np.ndarray:
        """``λ·min(d_j, C/λ)`` as computed by the sampler (for level index ``level``)."""
        c = _check_counts(counts, self.bins)
        lam = self.coefficients[level]
        return np.minimum(lam * rank_distances(c, self.levels[level]), SCORE_CAP)

    def probabilities(self, counts: Any, level: int = 0) -> np.ndarray:
        """The exact output law over bins, ``∝ exp(−score)`` (log-sum-exp in float64)."""
        s = -self.scores(counts, level)
        s = s - s.max(axis=-1, keepdims=True)
        w = np.exp(s)
        return w / w.sum(axis=-1, keepdims=True)

    def _value(self, j: np.ndarray, source: RandomSource) -> np.ndarray:
        lo, hi, b = self.lower, self.upper, self.bins
        if self.output == "midpoint":
            pos = (j + 0.5) / b
        else:
            u = source.uniform_values(j.size)
            pos = (j + u.reshape(j.shape)) / b
        return CLIP(lo + (hi - lo) * pos, lo, hi)

    def sample(self, counts: Any, random_state: RandomState = None, *,
               exact_counts: bool = False) -> QuantileRelease:
        """Release the quantiles for bin counts ``(B,)`` or ``(G, B)`` (one vector per group).

        ``random_state`` (int or numpy Generator) is for tests and simulations only; without it
        the randomness comes from the OS CSPRNG. ``exact_counts=True``: the caller guarantees
        that ``counts`` are exact non-negative integers, fewer than 2^52 per group, held as
        int64 or as integer-valued doubles (the engines' aggregates, which the engine has
        checked); from :data:`RUNS_MIN_BINS` bins on they are then read as given, without the
        checks' passes and an int64 copy (every sum of them is exact in either type).
        """
        if exact_counts and self.bins >= RUNS_MIN_BINS:
            c = np.asarray(counts)
            if c.ndim not in (1, 2) or c.shape[-1] != self.bins:
                raise ParameterError(f"expected {self.bins} bin counts per group")
        else:
            c = _check_counts(counts, self.bins)
        grouped = c.ndim == 2
        c2 = np.atleast_2d(c)
        source = RandomSource(random_state)
        chosen = np.empty((c2.shape[0], len(self.levels)), dtype=np.int64)
        if self.bins >= RUNS_MIN_BINS:  # one group at a time, racing runs of bins
            few = self.bins <= NONZERO_RANKS_MAX_BINS
            for g in range(c2.shape[0]):
                ranks: Ranks = NonzeroCounts(c2[g]) if few else CumulativeCounts(c2[g])
                for i, q in enumerate(self.levels):
                    chosen[g, i] = race_over_runs(c2[g], ranks, q, self.target_offset(i),
                                                  self.padding, self.coefficients[i], source)
        else:  # few bins: every bin races, all groups at once (the same law)
            for i in range(len(self.levels)):
                keys = self.scores(c2, i) + _log_exponentials(source, c2.shape)
                chosen[:, i] = np.argmin(keys, axis=1)
        values = self._value(chosen, source)
        if self.sort and len(self.levels) > 1:  # post-processing: monotone in q
            order = np.argsort(self.levels, kind="stable")
            values[:, order] = np.sort(values, axis=1)
            chosen[:, order] = np.sort(chosen, axis=1)
        if not grouped:
            values, chosen = values[0], chosen[0]
        return QuantileRelease(values, chosen, self.describe(source.kind))

    def rank_error(self, alpha: float, max_rows: int | None = None) -> float:
        """A half-width ``r`` (in rows) with ``P(every level's chosen bin has d_j ≤ r) ≥ 1 − α``
        — a rank interval, from public parameters only (docs/privacy.md, section Q.6).

        ``max_rows``: a public upper bound ``N`` on the rows counted (the protected size: it
        bounds every derivation and group). No rank distance exceeds ``n·max(q, 1 − q) ≤
        N·max(q, 1 − q)`` (``0 ≤ L_j ≤ n``), so ``r`` is clipped there: then the statement
        holds with probability 1, and ``r`` is at most the largest distance any data set of
        that size can produce (docs/privacy.md Q.6 on how close this is to the worst case).

        With ``K`` levels each gets ``α/K`` (union bound). For one level with rate ``λ``: at
        least one bin has ``d_j = 0`` (the bins' rank spans cover ``[0, n]``), so the
        normaliser is ≥ 1, and at most ``B − 1`` bins have ``d_j ≥ r``, each with weight
        ``≤ e^{−λr}`` while ``λr ≤ C``; the sampler's rounding moves probabilities by at most
        ``e^{2η}``. Hence ``P(d ≥ r) ≤ (B − 1)e^{2η − λr} = α/K`` at
        ``r = (ln((B − 1)K/α) + 2η)/λ``. The largest ``r`` over levels is used, so sorting the
        levels (post-processing) keeps the simultaneous statement.
        """
        a = float(alpha)
        if not 0.0 < a < 1.0:
            raise ParameterError(f"alpha must lie in (0, 1), got {alpha!r}")
        if self.bins == 1:
            return 0.0
        k = len(self.levels)
        out = 0.0
        for lam, overhead in zip(self.coefficients, self.epsilon_overheads, strict=True):
            eta = overhead / 4.0
            log_ratio = math.log(self.bins - 1) + math.log(k) - math.log(a)
            if log_ratio + 2 * eta > SCORE_CAP:
                return math.inf  # beyond the score cap: no useful bound
            out = max(out, (log_ratio + 2.0 * eta) / lam)
        if max_rows is not None:
            out = min(out, float(max_rows) * max(max(v, 1.0 - v) for v in self.levels))
        return out

    def privacy_loss(self) -> float:
        """Proven ε of one release: Σ_i (2Δ_i λ_i + 4η_i) — must not exceed ``epsilon``."""
        return sum(2 * d * lam + o for d, lam, o in
                   zip(self.sensitivities, self.coefficients, self.epsilon_overheads, strict=False))

    def describe(self, random_source: str | None = None) -> dict[str, Any]:
        """Public parameters for the accounting log."""
        log: dict[str, Any] = {
            "mechanism": "exponential-quantile",
            "epsilon": self.epsilon,
            "delta": 0.0,
            "q": list(self.levels),
            "epsilon_per_quantile": self.epsilon_each,
            "neighbours": self.neighbours,
            "sensitivity": list(self.sensitivities),
            "coefficient": list(self.coefficients),
            "score_cap": SCORE_CAP,
            "epsilon_overhead": float(sum(self.epsilon_overheads)),
            "bins": self.bins,
            "bin_width": (self.upper - self.lower) / self.bins,
            "lower": self.lower,
            "upper": self.upper,
            "output": self.output,
            "sorted": self.sort,
        }
        if random_source is not None:
            log["random_source"] = random_source
        return log


def release_quantiles(
    counts: Any,
    q: float | Sequence[float],
    epsilon: float,
    lower: float,
    upper: float,
    *,
    neighbours: str = "replace",
    output: str = "midpoint",
    random_state: RandomState = None,
) -> QuantileRelease:
    """One-call form: the number of bins is ``counts.shape[-1]`` (equal bins of [lower, upper])."""
    c = np.asarray(counts)
    if c.ndim not in (1, 2):
        raise ParameterError("counts must be a vector of bin counts (or one per group, 2-D)")
    mech = QuantileMechanism(epsilon, lower, upper, q, bins=int(c.shape[-1]),
                             neighbours=neighbours, output=output)
    return mech.sample(c, random_state=random_state)
