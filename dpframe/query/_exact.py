"""Exact arithmetic on public numbers for the statistics' sensitivities and domains.

Where an exact aggregate is divided (mean, variance) the correctly rounded float differs from
the exact rational by at most half an ulp, ``2⁻⁵³·M`` for a statistic bounded by ``M``; two
neighbours can therefore differ by ``Δ + 2⁻⁵²·M`` in floating point, and that proven bound is
the declared sensitivity (Casacuberta et al. 2022, §4: account for the arithmetic error).
Domain ends are rounded outwards and sensitivities upwards, so every float bound holds for the
exact rational it stands for.

The helpers are pure functions of public numbers, and planning calls them with the same few
bounds on every query of a frame: each is cached, which takes the rational arithmetic off a
repeated query's fixed cost.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

__all__ = [
    "FP_SLACK",
    "center",
    "frac",
    "interval_sensitivity",
    "quotient_sensitivity",
    "round_down",
    "round_up",
    "width",
]

FP_SLACK = 2.0**-52  # two half-ulps of a correctly rounded quotient, relative to its bound


@functools.lru_cache(maxsize=4096)
def round_up(x: Fraction | float) -> float:
    """The smallest float ≥ x (for upper ends of domains)."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < Fraction(x) else f


@functools.lru_cache(maxsize=4096)
def round_down(x: Fraction | float) -> float:
    """The largest float ≤ x (for lower ends of domains)."""
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > Fraction(x) else f


@functools.lru_cache(maxsize=4096)
def frac(x: float) -> Fraction:
    """``x`` as an exact rational."""
    return Fraction(x)


@functools.lru_cache(maxsize=4096)
def width(bounds: tuple[float, float]) -> Fraction:
    """``u − l`` exactly."""
    return frac(bounds[1]) - frac(bounds[0])


@functools.lru_cache(maxsize=4096)
def quotient_sensitivity(w: Fraction, n: int) -> float:
    """Δ of a shifted mean ``Σ(x − l)/n`` of values in a width-``w`` range: ``w/n`` plus the
    quotient's rounding slack ``2⁻⁵²·w``, rounded up and capped at ``w``."""
    return interval_sensitivity(w / n + Fraction(FP_SLACK) * w, 0.0, round_up(w))


@functools.lru_cache(maxsize=4096)
def interval_sensitivity(delta: Fraction | float, lower: float, upper: float) -> float:
    """Round Δ up to a float and cap it at the domain's width (no two outputs differ more)."""
    s = round_up(delta)
    if math.isfinite(lower) and math.isfinite(upper):
        s = min(s, upper - lower)
    return s


def center(lo: float, hi: float) -> float:
    """The centre ``l/2 + u/2`` (no overflow), kept in ``[l, u]``."""
    c = lo / 2 + hi / 2
    return min(max(c, lo), hi)
