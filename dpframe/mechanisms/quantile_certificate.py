"""Brute-force certificate of the quantile mechanism's privacy loss (Smith 2011's exponential
mechanism over bins, as :class:`~dpframe.mechanisms.quantiles.QuantileMechanism` draws it).

For every pair of neighbouring data sets of at most ``max_rows`` rows over the mechanism's
bins (replace-one or add/remove, as the mechanism is calibrated), the continuous law's
log-probability of every bin is computed from rank distances taken independently from the
sorted rows, and the largest difference is the certified loss; it must not exceed ε. A check
for tests and audits (exhaustive: small ``max_rows`` and bins only), not used by a release.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

from dpframe.errors import ParameterError
from dpframe.mechanisms.quantiles import SCORE_CAP, QuantileMechanism

__all__ = ["quantile_privacy_loss"]


def _distances_from_rows(rows: Sequence[int], bins: int, q: Fraction) -> list[Fraction]:
    """``d_j`` computed independently: rank interval of bin j from the sorted rows."""
    n = len(rows)
    t = q * n
    out = []
    for j in range(bins):
        below = sum(1 for r in rows if r < j)
        upto = sum(1 for r in rows if r <= j)
        out.append(max(below - t, t - upto, Fraction(0)))
    return out


def _log_law(dist: list[Fraction], lam: float) -> list[float]:
    s = [-lam * min(float(d), SCORE_CAP / lam) for d in dist]
    top = max(s)
    z = math.log(math.fsum(math.exp(v - top) for v in s)) + top
    return [v - z for v in s]


def quantile_privacy_loss(
    mechanism: QuantileMechanism, max_rows: int
) -> tuple[float, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Brute-force worst-case privacy loss of the continuous law (no rounding) over every pair of
    neighbouring datasets with at most ``max_rows`` rows (exactly ``max_rows`` under replacement)
    on ``mechanism.bins`` bins, summed over the levels at their worst pairs (an upper bound of
    the composed loss). Distances come from the rows, not from the sampler's cumulative sums.

    Returns the loss (nats, without the rounding overhead) and the worst pair (as row
    multisets) of the first level.
    """
    b = mechanism.bins
    if b ** max_rows > 200_000:
        raise ParameterError("grid too large for brute force; use fewer bins or rows")
    sizes = [max_rows] if mechanism.neighbours == "replace" else list(range(max_rows + 1))
    datasets = [r for n in sizes for r in itertools.combinations_with_replacement(range(b), n)]
    total = 0.0
    worst_pair: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
    for i, q in enumerate(mechanism.levels):
        lam = mechanism.coefficients[i]
        qf = Fraction(q)
        laws = {r: _log_law(_distances_from_rows(r, b, qf), lam) for r in datasets}
        best = 0.0
        pair = worst_pair
        for r in datasets:
            for other in _neighbours(r, b, mechanism.neighbours, max_rows):
                diff = max(abs(x - y) for x, y in zip(laws[r], laws[other], strict=False))
                if diff > best:
                    best, pair = diff, (r, other)
        total += best
        if i == 0:
            worst_pair = pair
    return total, worst_pair


def _neighbours(rows: tuple[int, ...], bins: int, kind: str, max_rows: int):
    seen = set()
    if kind == "replace":
        for k in range(len(rows)):
            for v in range(bins):
                new = tuple(sorted((*rows[:k], v, *rows[k + 1:])))
                if new != rows and new not in seen:
                    seen.add(new)
                    yield new
    else:
        if len(rows) < max_rows:
            for v in range(bins):
                yield tuple(sorted((*rows, v)))
        for k in range(len(rows)):
            new = rows[:k] + rows[k + 1:]
            if new not in seen:
                seen.add(new)
                yield new
