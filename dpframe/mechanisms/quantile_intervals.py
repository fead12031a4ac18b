"""Quantile intervals in values: two bracketing releases of the exponential mechanism.

A quantile released by :class:`~dpframe.mechanisms.quantiles.QuantileMechanism` comes with a
*rank* statement only (docs/privacy.md Q.6). To state an interval in the column's units, two
more releases over the same public bins, at a declared share of ε, pick a bin *below* and a
bin *above* the sample quantile; their outer edges are the interval. This module is that
pair: :class:`BracketMechanism` (one side) and :func:`value_interval` (the two sides put
together, post-processing).

**The lower bracket** (level ``q``, ``n`` rows, ``t = q·n``, cumulative counts ``L_j`` as in
:mod:`dpframe.mechanisms.quantiles`). With a public shift ``s = 1 + r`` (``r`` below) it runs
the exponential mechanism of ``quantiles`` on *padded* counts ``c'`` — ``R = ⌈s⌉`` public rows
added to the first and to the last bin — at the target rank ``t' = t − s + R``, and releases
the chosen bin's *lower* edge ``e_j``. Padding and shift are public constants: a neighbouring
data set changes every ``L'_j`` and ``t'`` exactly as it changes ``L_j`` and ``t``, so the
sensitivity (1 under replacement, ``max(q, 1 − q)`` under add/remove, Lemma Q1) and the
privacy proof (Theorem Q1, the race sampler's overhead ``4η``) are those of the quantile
mechanism unchanged. ``R ≥ s`` keeps ``t'`` inside ``[0, n + 2R]``, so some bin has padded
rank distance ``d'_j = 0`` whatever the private ``n``.

*Coverage.* With ``k = max(⌊t⌋, 1)``, call ``j ≥ 1`` *bad* if ``L_j ≥ k`` (at least ``k``
rows lie below ``e_j``, so ``e_j`` may exceed the order statistic ``x_(k)``); bin 0 is never bad
(``e_0 = l`` and the values are clamped to ``[l, u]``). A bad bin has
``d'_j ≥ L'_j − t' = L_j − t + s > s − 1 = r`` (``L_j ≥ k > t − 1``). As in Q.6 the
normaliser is ``≥ 1`` and at most ``B − 1`` bins are bad, each of weight ``≤ e^{−λr}``; the
sampler's rounding moves probabilities by ``≤ e^{2η}``:

    P(bad) ≤ (B − 1)·e^{2η − λr} = α_side / K   at   r = (ln((B − 1)·K/α_side) + 2η)/λ.

Off the bad event, ``e_j ≤ x_(max(⌊t⌋, 1))``. **The upper bracket** mirrors it: target
``t + s + R`` on the same padding, release the *upper* edge ``e_{j+1}``; a bad bin
(``j ≤ B − 2`` with ``L_{j+1} ≤ ⌈t⌉ < t + 1``) has ``d'_j ≥ t' − L'_{j+1} > r``, and off
the bad event
``x_(min(⌈t⌉ + 1, n)) ≤ e_{j+1}``. A bin's rows and its edges agree up to the binning's
rounding (``bin_index`` computes the bin from ``x/2 − l/2``, not from the edges), which the
released ends absorb by moving outward by :data:`EDGE_PAD` relative to the bounds' magnitude.

*The interval.* Each side takes ``α_side = α/2`` (``α = 1 − level``) and each of its ``K``
levels ``α/(2K)``: by the union bound over the ``2K`` bracket releases, with probability
``≥ level`` *for every data set*, every level's ``[lower, upper]`` contains every order
statistic ``x_(k)`` with ``⌊t⌋ ≤ k ≤ ⌈t⌉ + 1`` (within ``1..n``), hence the sample quantile
under every usual definition: an order statistic or interpolation at a position
``h ∈ [t, t + 1]`` (Hyndman & Fan's types 1–9; numpy/pandas ``"linear"``, Polars
``"nearest"``, ``"lower"``, ``"higher"``, ``"midpoint"``, the inverted CDF) of the values
clamped to the bounds. The ends are sorted over levels and a crossed pair is swapped
(post-processing that keeps the event: if ``a_i ≤ b_i`` for all ``i`` then the sorted ``a`` lie
below the sorted ``b``; a swap only widens). The point release is separate (its own share),
so its accuracy statement (the rank interval) is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe.errors import ParameterError
from dpframe.mechanisms.quantiles import (
    DEFAULT_QUANTILE_BINS,
    SCORE_CAP,
    QuantileMechanism,
    _check_counts,
    rank_distances,
)
from dpframe.mechanisms.randomness import RandomSource

__all__ = [
    "DEFAULT_CI_SHARE",
    "EDGE_PAD",
    "SIDES",
    "BracketMechanism",
    "check_ci_share",
    "value_interval",
]

#: Default share of a quantile's ε that ``ci=`` spends on the two bracketing releases (half,
#: a quarter each); the point release keeps the rest.
DEFAULT_CI_SHARE = 0.5
#: Outward move of a released end, relative to ``max(|l|, |u|)``: covers the difference between
#: the edge ``l + (u − l)·j/B`` and the threshold of the engines' binning rule (a few ulps).
EDGE_PAD = 2.0**-40
SIDES = ("lower", "upper")
#: Largest padding (rows) accepted: padded counts stay far below 2^52.
_MAX_PADDING = 2**50


def check_ci_share(ci_share: Any) -> float:
    """``ci_share`` in ``[0, 1)``: the share of a quantile's ε spent on its value interval
    (0: no value interval, the rank interval only, as before)."""
    if isinstance(ci_share, bool) or not isinstance(ci_share, int | float | np.integer
                                                    | np.floating):
        raise ParameterError(f"ci_share must be a number in [0, 1), got {ci_share!r}")
    try:
        s = float(ci_share)
    except OverflowError:
        s = math.inf
    if not 0.0 <= s < 1.0:
        raise ParameterError(f"ci_share must lie in [0, 1) (the share of the quantile's ε "
                             f"spent on its value interval), got {ci_share!r}")
    return s


class BracketMechanism(QuantileMechanism):
    """One side of a quantile's value interval (module docstring): the exponential mechanism
    on padded counts at a shifted target rank, releasing the chosen bin's outer edge.

    ``alpha_side``: the failure probability this side may use for all its levels together
    (``α/2`` for an interval at level ``1 − α``). Everything else as for
    :class:`~dpframe.mechanisms.quantiles.QuantileMechanism` (ε is the total over levels).
    """

    def __init__(
        self,
        epsilon: float,
        lower: float,
        upper: float,
        q: float | Sequence[float] = 0.5,
        *,
        side: str,
        alpha_side: float,
        bins: int = DEFAULT_QUANTILE_BINS,
        neighbours: str = "replace",
    ) -> None:
        super().__init__(epsilon, lower, upper, q, bins=bins, neighbours=neighbours)
        if side not in SIDES:
            raise ParameterError(f"side must be one of {SIDES}, got {side!r}")
        a = float(alpha_side)
        if not 0.0 < a < 1.0:
            raise ParameterError(f"alpha_side must lie in (0, 1), got {alpha_side!r}")
        self.side = side
        self.alpha_side = a
        k = len(self.levels)
        log_ratio = math.log(max(self.bins - 1, 1)) + math.log(k) - math.log(a)
        self.shifts: list[float] = []
        for lam, overhead in zip(self.coefficients, self.epsilon_overheads, strict=True):
            eta = overhead / 4.0
            if log_ratio + 2.0 * eta > SCORE_CAP:
                raise ParameterError("the interval's level is too close to 1 for the score "
                                     "cap; ask a smaller ci=")
            self.shifts.append(1.0 + (log_ratio + 2.0 * eta) / lam)
        padding = math.ceil(max(self.shifts))
        if padding > _MAX_PADDING:
            raise ParameterError("epsilon is too small for a quantile interval (the bracketing "
                                 "releases would need more than 2^50 ranks of margin)")
        self.padding = int(padding)

    def padded(self, counts: Any) -> np.ndarray:
        """The counts with :attr:`padding` public rows added to the first and the last bin."""
        c = np.atleast_2d(_check_counts(counts, self.bins)).copy()
        c[:, 0] += self.padding
        c[:, -1] += self.padding
        return c

    def target_offset(self, level: int) -> Fraction:
        """The public offset, exact, that puts the target at ``t' = q·n + R ∓ s`` (lower:
        minus) when the rank is measured on the padded counts (``q·(n + 2R) + offset``)."""
        s = Fraction(self.shifts[level])
        q = Fraction(self.levels[level])
        base = self.padding - 2 * q * self.padding
        return base - s if self.side == "lower" else base + s

    def scores(self, counts: Any, level: int = 0) -> np.ndarray:
        """``λ·min(d'_j, C/λ)`` on the padded counts at the shifted target."""
        c = np.asarray(counts)
        lam = self.coefficients[level]
        d = rank_distances(self.padded(c), self.levels[level], self.target_offset(level))
        out = np.minimum(lam * d, SCORE_CAP)
        return out if c.ndim == 2 else out[0]

    def _value(self, j: np.ndarray, source: RandomSource) -> np.ndarray:
        """The chosen bin's outer edge, moved outward by :data:`EDGE_PAD`, inside ``[l, u]``."""
        lo, hi, b = self.lower, self.upper, self.bins
        pad = EDGE_PAD * max(abs(lo), abs(hi))
        edge = j if self.side == "lower" else j + 1
        if math.isfinite(hi - lo):
            value = lo + (hi - lo) * (edge / b)
        else:
            value = 2.0 * (lo * 0.5 + (hi * 0.5 - lo * 0.5) * (edge / b))
        value = value - pad if self.side == "lower" else value + pad
        value = np.where(edge == 0, lo, np.where(edge == b, hi, value))
        return np.clip(value, lo, hi)

    def rank_error(self, alpha: float, max_rows: int | None = None) -> float:
        """Not a point release: its statement is the interval's (module docstring)."""
        raise ParameterError("a bracketing release has no rank interval of its own")

    def describe(self, random_source: str | None = None) -> dict[str, Any]:
        log = super().describe(random_source)
        log.update({"mechanism": f"exponential-quantile-{self.side}-bracket",
                    "side": self.side, "alpha_side": self.alpha_side,
                    "target_shift": list(self.shifts), "padding": self.padding,
                    "output": f"{self.side} edge of the chosen bin"})
        return log


def value_interval(lower_ends: Any, upper_ends: Any) -> tuple[np.ndarray, np.ndarray]:
    """The interval from the two sides' released ends (each already sorted over levels):
    a crossed pair is swapped, which only widens it (post-processing)."""
    lo = np.asarray(lower_ends, dtype=float)
    hi = np.asarray(upper_ends, dtype=float)
    return np.minimum(lo, hi), np.maximum(lo, hi)
