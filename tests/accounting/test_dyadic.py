"""The ledger's integer units of 2^-1074 (dpframe.accounting._dyadic) are exact: sums and
comparisons agree with Fraction arithmetic, and the budget never overspends."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from dpframe.accounting._dyadic import floor_units, to_float, to_fraction, units
from dpframe.accounting.ledger import Ledger, _limit
from dpframe.errors import BudgetExceededError


def _doubles(rng: random.Random, n: int) -> list[float]:
    out = [5e-324, 2.2250738585072014e-308, 0.1, 0.2, 0.3, 1e-9, 1.0, 1e300]
    out += [math.ldexp(rng.random(), rng.randint(-1074, 1000)) for _ in range(n)]
    return out


def test_units_sums_and_floats_match_fractions() -> None:
    rng = random.Random(1)
    xs = _doubles(rng, 200)
    total_u, total_f = 0, Fraction(0)
    for x in xs:
        u = units(Fraction(x))
        assert u is not None and to_fraction(u) == Fraction(x)
        total_u += u
        total_f += Fraction(x)
        assert to_fraction(total_u) == total_f
        assert to_float(total_u) == float(total_f)
    assert units(Fraction(1, 3)) is None and units(Fraction(1, 2**1075)) is None


def test_floor_units_comparison_is_exact() -> None:
    for total in (1.0, 0.3, 1e-300, 12345.678):
        lim = _limit(Fraction(total))
        f = floor_units(lim)
        assert to_fraction(f) <= lim < to_fraction(f + 1)


@pytest.mark.parametrize("shares", [[0.1, 0.2, 0.2, 0.2, 0.3], [1 / 3] * 3, [0.5, 0.5]])
def test_exact_split_spends_all_and_no_more(shares: list[float]) -> None:
    ledger = Ledger(1.0)
    for s in shares:
        ledger.commit(ledger.reserve(s), [{}])
    assert ledger._eps_spent == sum((Fraction(s) for s in shares), Fraction(0))
    assert ledger.budget.epsilon_spent == float(ledger._eps_spent)
    with pytest.raises(BudgetExceededError):
        ledger.reserve(1e-6)
    ledger.reserve(1e-10)  # (within the tolerance of one part in a billion)


def test_fraction_state_and_pending_take_the_exact_fraction_path() -> None:
    ledger = Ledger(1.0)
    ledger._eps_spent = Fraction(1, 3)  # not a sum of doubles: no units kept
    assert ledger._eps_units is None
    held = ledger.reserve(0.5)  # pending: the fraction comparison
    with pytest.raises(BudgetExceededError):
        ledger.reserve(1 / 6 + 1e-6)
    ledger.commit(held, [{}])
    assert ledger._eps_spent == Fraction(1, 3) + Fraction(0.5)
    ledger._eps_spent = Fraction(0.25)  # dyadic again: units resume
    assert ledger._eps_units == units(Fraction(0.25))
    ledger.commit(ledger.reserve(0.75), [{}])
    assert ledger._eps_spent == 1
    with pytest.raises(BudgetExceededError):
        ledger.reserve(2e-9)
