"""Brute-force checks of every declared sensitivity and output domain (DESIGN §4).

For small n, enumerate data sets on a grid of values in [l, u] (endpoints included, since the
extremes of these statistics sit there), every neighbour, and the pre-noise statistic each
measurement computes (through the same fixed-point representation the engine uses). The worst
neighbouring pair must stay within the declared sensitivity, and for the public-size queries
it must *reach* the analytic value (so the declared Δ is tight, not just safe). Neighbours:

* public size: replace one row (n fixed);
* private size: add, remove or replace one row (what a replacement upstream does to a filter);
* group-by: a replacement may move a row between groups: each group changes by ≤ Δ and at most
  two groups change (which is why each group gets ε/2).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpframe as dpf
from dpframe import engine
from dpframe.queries import Aggregates, Count, Mean, PlanContext, Std, Sum, Variance

BOUNDS = [(0.0, 1.0), (-1.5, 2.25), (2.0, 5.0), (-3.0, -1.0)]
GRID = 5  # values per axis


def _grid(lo, hi):
    return [lo + (hi - lo) * i / (GRID - 1) for i in range(GRID)]


_PLANS: dict = {}


def _plan(query, ctx):
    key = (id(query), ctx)
    if key not in _PLANS:
        plan = query.plan(ctx)
        lo, hi = ctx.bounds if ctx.bounds else (0.0, 1.0)
        _PLANS[key] = (query, plan,
                       engine.FixedPoint.choose(lo, hi, plan.center, ctx.row_cap, plan.squares))
    return _PLANS[key][1:]


def _measure(query, ctx, values):
    plan, fp = _plan(query, ctx)
    lo, hi = ctx.bounds if ctx.bounds else (0.0, 1.0)
    ks = [min(max(round((min(max(x, lo), hi) - fp.center) / fp.q), fp.k_lo), fp.k_hi)
          for x in values]
    agg = Aggregates(len(ks), sum(ks), sum(k * k for k in ks), fp.q)
    return plan, {m.name: m.statistic(agg) for m in plan.measurements}


def _public_ctx(bounds, n):
    return PlanContext(True, n, 4 * n, bounds, False, count_cap=float(n))


def _private_ctx(bounds, n_root=8):
    return PlanContext(False, n_root, 4 * n_root, bounds, False)


def _check(query, ctx_for, pairs, expect_tight=None):
    worst: dict[str, float] = {}
    declared: dict[str, float] = {}
    for d1, d2 in pairs:
        plan, s1 = _measure(query, ctx_for(d1), d1)
        _, s2 = _measure(query, ctx_for(d1), d2)
        for m in plan.measurements:
            declared[m.name] = m.sensitivity
            for s in (s1[m.name], s2[m.name]):  # output domain contains the statistic
                assert m.lower <= s <= m.upper, (m.name, s, m.lower, m.upper)
            worst[m.name] = max(worst.get(m.name, 0.0), abs(s1[m.name] - s2[m.name]))
    for name, w in worst.items():
        assert w <= declared[name], (query, name, w, declared[name])
    if expect_tight is not None:
        for name, analytic in expect_tight.items():
            assert worst[name] == pytest.approx(analytic, rel=1e-9), (name, worst[name])
    return worst


def _replacements(lo, hi, n):
    vals = _grid(lo, hi)
    for data in itertools.product(vals, repeat=n):
        for v in vals:
            if v != data[0]:
                yield list(data), [v, *data[1:]]


def _add_remove_replace(lo, hi, n_max):
    vals = _grid(lo, hi)
    for n in range(0, n_max + 1):
        for data in itertools.combinations_with_replacement(vals, n):
            data = list(data)
            for v in vals:
                yield data, [*data, v]  # add
                if data:
                    yield data, [v, *data[1:]]  # replace
            if data:
                yield data, data[1:]  # remove


@pytest.mark.parametrize("bounds", BOUNDS)
@pytest.mark.parametrize("n", [2, 3, 4])
def test_public_size_sensitivities_are_safe_and_tight(bounds, n):
    lo, hi = bounds
    w = hi - lo
    pairs = list(_replacements(lo, hi, n))
    ctx = lambda d: _public_ctx(bounds, n)  # noqa: E731
    _check(Count(), ctx, pairs)
    _check(Sum("x"), ctx, pairs, {"sum": w})
    _check(Mean("x"), ctx, pairs, {"mean": w / n})
    # Variance, ddof=1: Δ = w²/n (Liu Table 1) is attained at rows (l,...,l) -> (u,l,...,l)
    _check(Variance("x"), ctx, pairs, {"variance": w * w / n})


@pytest.mark.parametrize("bounds", BOUNDS)
def test_private_size_sensitivities_add_remove_replace(bounds):
    lo, hi = bounds
    w = hi - lo
    pairs = list(_add_remove_replace(lo, hi, 3))
    ctx = lambda d: _private_ctx(bounds)  # noqa: E731
    _check(Count(), ctx, pairs, {"count": 1.0})
    _check(Sum("x"), ctx, pairs, {"sum": max(w, abs(lo), abs(hi))})
    _check(Mean("x"), ctx, pairs, {"count": 1.0, "sum": w})
    _check(Variance("x"), ctx, pairs, {"count": 1.0, "sum": w, "sum_sq": (w / 2) ** 2})


def test_private_sum_needs_more_than_add_remove_when_bounds_straddle_zero():
    """DESIGN §4's max(|l|,|u|) holds for add/remove only; a replacement inside a filtered
    frame moves the sum by u − l, which is larger when l < 0 < u."""
    worst = _check(Sum("x"), lambda d: _private_ctx((-1.5, 2.25)),
                   list(_add_remove_replace(-1.5, 2.25, 2)))
    assert worst["sum"] == pytest.approx(3.75) and worst["sum"] > 2.25


def test_variance_sensitivity_derivation_by_exact_rationals():
    """Independent of the code: exact rational variance on a finer grid, n = 2..5."""
    for n in range(2, 5):
        vals = [Fraction(i, 4) for i in range(5)]  # [0, 1]
        worst = Fraction(0)

        def var(d):
            m = sum(d, Fraction(0)) / len(d)
            return sum(((x - m) ** 2 for x in d), Fraction(0)) / (len(d) - 1)

        for data in itertools.product(vals, repeat=n):
            v = var(data)
            for b in vals:
                worst = max(worst, abs(var((b, *data[1:])) - v))
        assert worst == Fraction(1, n)  # w²/n with w = 1
        # and the domain bound n/(4(n−1)) is respected and attained for even n
        top = max(var(d) for d in itertools.product([Fraction(0), Fraction(1)], repeat=n))
        assert top <= Fraction(n, 4 * (n - 1))
        if n % 2 == 0:
            assert top == Fraction(n, 4 * (n - 1))


def test_std_is_post_processing_of_variance():
    ctx = _public_ctx((0.0, 1.0), 4)
    assert [m.sensitivity for m in Std("x").plan(ctx).measurements] == [
        m.sensitivity for m in Variance("x").plan(ctx).measurements]


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=7),
    new=st.floats(-10, 10, allow_nan=False),
    pos=st.integers(0, 6),
)
def test_variance_and_mean_random_replacements(data, new, pos):
    bounds = (-10.0, 10.0)
    n = len(data)
    d2 = list(data)
    d2[pos % n] = new
    ctx = lambda d: _public_ctx(bounds, n)  # noqa: E731
    _check(Variance("x"), ctx, [(data, d2)])
    _check(Mean("x"), ctx, [(data, d2)])
    _check(Sum("x"), ctx, [(data, d2)])


def test_groupby_replacement_changes_at_most_two_groups_each_within_sensitivity():
    """Per-group statistics use the private formulations; a row moving from group a to
    group b changes both groups, each by at most Δ — hence ε/2 per group."""
    bounds = (0.0, 1.0)
    vals = _grid(*bounds)
    ctx = PlanContext(False, 6, 24, bounds, True, count_cap=6.0)
    for query in (Count(), Sum("x"), Mean("x"), Variance("x")):
        for rows in itertools.product(vals, repeat=2):
            groups = ["a", "b", "a"]
            data = list(zip(groups, [*rows, 0.5], strict=True))
            for new_group, new_val in itertools.product(["a", "b", "c"], vals):
                data2 = [(new_group, new_val), *data[1:]]
                changed = 0
                for g in "abc":
                    d1 = [x for k, x in data if k == g]
                    d2 = [x for k, x in data2 if k == g]
                    plan, s1 = _measure(query, ctx, d1)
                    _, s2 = _measure(query, ctx, d2)
                    moved = False
                    for m in plan.measurements:
                        assert abs(s1[m.name] - s2[m.name]) <= m.sensitivity
                        moved |= s1[m.name] != s2[m.name]
                    changed += moved
                assert changed <= 2


@pytest.mark.parametrize("backend", ["pandas", "polars", "polars-lazy"])
def test_engine_statistic_matches_brute_force_helper(backend):
    """The engine's in-frame fixed-point aggregates equal the helper's, so the brute-force
    results above are about the code that runs."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 3, 50)
    pdf = pd.DataFrame({"x": x})
    frame = {"pandas": pdf, "polars": pl.from_pandas(pdf),
             "polars-lazy": pl.from_pandas(pdf).lazy()}[backend]
    for query in (Sum("x"), Mean("x"), Variance("x")):
        for size_public in (True, False):
            ctx = PlanContext(size_public, 50, 200, (-1.5, 2.25), False, count_cap=50.0)
            plan, expected = _measure(query, ctx, list(x))
            fp = engine.FixedPoint.choose(-1.5, 2.25, plan.center, 200, plan.squares)
            agg = engine.aggregate(frame, column="x", fixed_point=fp, squares=plan.squares,
                                   row_cap=200, bounds=(-1.5, 2.25))[None]
            got = {m.name: m.statistic(agg) for m in plan.measurements}
            assert got == expected


def test_declared_sensitivity_is_logged():
    pf = dpf.protect(pd.DataFrame({"x": np.linspace(0, 1, 10)}), epsilon=1.0,
                     bounds={"x": (0, 1)})
    pf.dp.variance("x", epsilon=0.5, random_state=1)
    entry = pf.dp.log.iloc[-1]
    assert entry["sensitivity"] == pytest.approx(1 / 10)
    assert entry["domain_upper"] == pytest.approx(10 / 36)
    assert math.isclose(entry["domain_lower"], 0.0)
