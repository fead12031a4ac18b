"""Exact sums of doubles as Python integers, for the ledger's budget arithmetic.

Every finite double is an integer multiple of ``2^-1074`` (the smallest subnormal), so a sum of
doubles is exactly ``u · 2^-1074`` for an integer ``u`` (its *units*), and adding or comparing
such sums is integer arithmetic: exact, with no rounding, and a few times cheaper than
:class:`fractions.Fraction` (no gcd on every operation). A budget limit that is not a multiple
of ``2^-1074`` (``total · (1 + 10⁻⁹)``) is compared through its floor: for an integer ``u`` and
a real ``L``, ``u ≤ L ⟺ u ≤ ⌊L⌋``, so the comparison stays exact.
"""

from __future__ import annotations

import functools
from fractions import Fraction

__all__ = ["UNIT_BITS", "floor_units", "to_float", "to_fraction", "units"]

UNIT_BITS = 1074
_ONE = 1 << UNIT_BITS


def units(x: Fraction) -> int | None:
    """``x · 2^1074`` when that is an integer (``x``'s denominator a power of two up to
    ``2^1074``, as for every double and every sum of doubles), else None."""
    d = x.denominator
    shift = d.bit_length() - 1
    if d & (d - 1) or shift > UNIT_BITS:
        return None
    return x.numerator << (UNIT_BITS - shift)


@functools.lru_cache(maxsize=64)
def floor_units(x: Fraction) -> int:
    """``⌊x · 2^1074⌋``: an integer ``u`` has ``u · 2^-1074 ≤ x`` exactly when
    ``u ≤ floor_units(x)``."""
    return (x.numerator << UNIT_BITS) // x.denominator


def to_fraction(u: int) -> Fraction:
    """The exact value ``u · 2^-1074``."""
    return Fraction(u, _ONE)


def to_float(u: int) -> float:
    """``u · 2^-1074`` rounded to the nearest double: Python's integer division is correctly
    rounded, as ``float(Fraction)`` (which divides numerator by denominator the same way), so
    the two give the same double for the same value."""
    return u / _ONE
