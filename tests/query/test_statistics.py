"""Brute-force checks of every declared sensitivity and output domain
(:mod:`dpframe.query.statistics`).

For small n, enumerate data sets on a grid of values in [l, u] (endpoints included, since the
extremes of these statistics sit there), every neighbour, and the pre-noise statistic each
measurement computes — through the code that runs: the query's
:class:`~dpframe.query.statistics.Plan` built from a :class:`~dpframe.query.statistics.PlanContext`,
its exact aggregates computed by
:func:`dpframe.engine._aggregation.aggregate` on a small pandas frame, and each
:class:`~dpframe.query.statistics.Measurement`'s ``statistic``. The worst neighbouring pair must
stay
within the declared sensitivity, and for the public-size queries it must *reach* the analytic
value (so the declared Δ is tight, not just safe). Neighbours:

* public size: replace one row (n fixed);
* private size: add, remove or replace one row (what a replacement upstream does to a filter),
  and a value that becomes missing (dropped under the ``"drop"`` policy);
* group-by: a replacement may move a row between groups: each group changes by ≤ Δ and at most
  two groups change (which is why each group gets ε/2).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpframe as dpf
from dpframe import backends
from dpframe.query.statistics import (
    Count,
    Covariance,
    Mean,
    PlanContext,
    Proportions,
    Std,
    Sum,
    Variance,
)

BOUNDS = [(0.0, 1.0), (-1.5, 2.25), (2.0, 5.0), (-3.0, -1.0)]
GRID = 5  # values per axis
KEYS = ["a", "b", "c"]


def _grid(lo, hi):
    return [lo + (hi - lo) * i / (GRID - 1) for i in range(GRID)]


_PLANS: dict = {}
_AGGREGATES: dict = {}


def _ctx_key(ctx: PlanContext) -> tuple:
    return (ctx.size_public, ctx.n, ctx.bounds, ctx.grouped, ctx.count_cap, ctx.column,
            ctx.drops, ctx.n_groups, tuple(sorted(ctx.all_bounds.items())))


def _plan(query, ctx):
    key = (id(query), _ctx_key(ctx))
    if key not in _PLANS:
        _PLANS[key] = (query, query.plan(ctx))  # keep the query alive: its id stays unique
    return _PLANS[key][1]


def _aggregates(plan, values, groups=None, missing="drop"):
    """The exact aggregates of ``plan`` on a pandas frame holding ``values`` (and ``groups``),
    computed by the engine (cached per data set)."""
    key = (plan.aggregates, tuple(map(repr, values)), None if groups is None else tuple(groups),
           missing)
    if key not in _AGGREGATES:
        data = {"x": np.asarray(values, dtype=float)}
        if groups is not None:
            data["g"] = np.asarray(groups, dtype=object)
        _AGGREGATES[key] = backends.aggregate(
            pd.DataFrame(data), plan.aggregates, missing={"x": missing},
            group_by=None if groups is None else "g", keys=None if groups is None else KEYS)
    return _AGGREGATES[key]


def _measure(query, ctx, values, groups=None, missing="drop"):
    plan = _plan(query, ctx)
    aggs = _aggregates(plan, values, groups, missing)
    return plan, {m.name: np.asarray(m.statistic(aggs), dtype=float) for m in plan.measurements}


def _public_ctx(bounds, n):
    return PlanContext(True, n, bounds, count_cap=float(n), column="x",
                       all_bounds={"x": bounds})


def _private_ctx(bounds, n_root=8):
    # a filtered frame of a protected frame with n_root rows; the column drops missing values
    return PlanContext(False, n_root, bounds, count_cap=float(n_root), column="x", drops=True,
                       all_bounds={"x": bounds})


def _check(query, ctx_for, pairs, expect_tight=None, missing="drop"):
    worst: dict[str, float] = {}
    declared: dict[str, float] = {}
    for d1, d2 in pairs:
        plan, s1 = _measure(query, ctx_for(d1), d1, missing=missing)
        _, s2 = _measure(query, ctx_for(d1), d2, missing=missing)
        for m in plan.measurements:
            declared[m.name] = m.sensitivity
            for s in (s1[m.name], s2[m.name]):  # output domain contains the statistic
                assert np.all((m.lower <= s) & (s <= m.upper)), (m.name, s, m.lower, m.upper)
            moved = float(np.max(np.abs(s1[m.name] - s2[m.name])))
            worst[m.name] = max(worst.get(m.name, 0.0), moved)
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


def _add_remove_replace(lo, hi, n_max, missing=True):
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
                if missing:
                    yield data, [math.nan, *data[1:]]  # the value goes missing ("drop")


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


def test_public_size_missing_value_is_a_replacement_by_the_fill():
    """Under a fill policy a value that goes missing is replaced by the public fill value:
    a replacement neighbour, within the public-size sensitivity."""
    bounds, n = (-1.5, 2.25), 3
    vals = _grid(*bounds)
    pairs = [(list(d), [math.nan, *d[1:]]) for d in itertools.product(vals, repeat=n)]
    pairs += [(b, a) for a, b in pairs]
    ctx = lambda d: _public_ctx(bounds, n)  # noqa: E731
    for query in (Sum("x"), Mean("x"), Variance("x")):
        _check(query, ctx, pairs, missing=0.5)


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
    """max(|l|,|u|) holds for add/remove only; a replacement inside a filtered frame moves the
    sum by u − l, which is larger when l < 0 < u."""
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
        # and the code's public-size plan declares exactly this Δ (plus the float slack)
        declared = Variance("x").plan(_public_ctx((0.0, 1.0), n)).measurements[0].sensitivity
        assert float(worst) <= declared <= float(worst) * (1 + 1e-12)


def test_std_is_post_processing_of_variance():
    ctx = _public_ctx((0.0, 1.0), 4)
    assert [m.sensitivity for m in Std("x").plan(ctx).measurements] == [
        m.sensitivity for m in Variance("x").plan(ctx).measurements]


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=7),
    new=st.one_of(st.floats(-10, 10, allow_nan=False),
                  st.sampled_from([math.inf, -math.inf, 1e308, -1e308])),
    pos=st.integers(0, 6),
)
def test_variance_and_mean_random_replacements(data, new, pos):
    """Random replacements, including infinite and huge values (clamped to the bounds)."""
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
    group b (or to an undeclared key) changes both groups, each by at most Δ — hence ε/2 per
    group. The per-group aggregates come from the engine's group-by over the declared keys."""
    bounds = (0.0, 1.0)
    vals = _grid(*bounds)
    ctx = PlanContext(False, 6, bounds, grouped=True, count_cap=6.0, column="x", drops=True,
                      n_groups=len(KEYS), all_bounds={"x": bounds})
    for query in (Count(), Sum("x"), Mean("x"), Variance("x")):
        for rows in itertools.product(vals, repeat=2):
            groups = ["a", "b", "a"]
            values = [*rows, 0.5]
            plan, s1 = _measure(query, ctx, values, groups)
            for new_group, new_val in itertools.product(["a", "b", "c", "undeclared"], vals):
                _, s2 = _measure(query, ctx, [new_val, *values[1:]], [new_group, *groups[1:]])
                changed = np.zeros(len(KEYS), dtype=bool)
                for m in plan.measurements:
                    assert s1[m.name].shape == (len(KEYS),)
                    assert np.all(np.abs(s1[m.name] - s2[m.name]) <= m.sensitivity)
                    changed |= s1[m.name] != s2[m.name]
                assert changed.sum() <= 2


@pytest.mark.parametrize("size_public", [True, False])
def test_proportions_each_cell_moves_at_most_its_sensitivity_and_two_cells_move(size_public):
    """Replacement neighbours: with the public n each proportion moves by ≤ 1/n, at most two
    move; on a private-size frame each per-cell count moves by ≤ 1 (also a row leaving the
    declared keys)."""
    n = 4
    labels = [*KEYS, "undeclared"]
    ctx = PlanContext(size_public, n, None, grouped=True, count_cap=float(n),
                      n_groups=len(KEYS))
    query = Proportions("rescale")
    worst, most_changed = 0.0, 0
    for groups in itertools.product(labels, repeat=n):
        plan, s1 = _measure(query, ctx, [0.0] * n, list(groups))
        for new in labels:
            _, s2 = _measure(query, ctx, [0.0] * n, [new, *groups[1:]])
            (m,) = plan.measurements
            moved = np.abs(s1[m.name] - s2[m.name])
            assert np.all(moved <= m.sensitivity)
            assert np.all((m.lower <= s1[m.name]) & (s1[m.name] <= m.upper))
            worst = max(worst, float(moved.max()))
            most_changed = max(most_changed, int((moved > 0).sum()))
    assert worst == pytest.approx(1 / n if size_public else 1.0)
    assert most_changed == 2
    assert plan.group_share == 0.5  # hence ε/2 per released cell


def test_covariance_plan_sensitivities_brute_force():
    """Liu §4.1 through the code: the exact (co)variances of queries.Covariance, from the
    engine's fixed-point sums and products, move by at most their declared Δ under a
    replacement (covariance: before clipping to the released ±√(S*jj S*kk))."""
    n = 3
    bounds = {"x": (0.0, 1.0), "y": (-1.0, 2.0)}
    query = Covariance(["x", "y"])
    ctx = PlanContext(True, n, None, all_bounds=bounds)
    plan = query.plan(ctx)
    pts = list(itertools.product([0.0, 1.0], [-1.0, 2.0]))
    cache: dict = {}

    def stats(data):
        if data not in cache:
            df = pd.DataFrame(list(data), columns=["x", "y"])
            aggs = backends.aggregate(df, plan.aggregates, missing={"x": 0.5, "y": 0.5})
            cache[data] = {m.name: float(m.statistic(aggs)[0]) for m in plan.measurements}
        return cache[data]

    worst: dict[str, float] = {}
    for data in itertools.product(pts, repeat=n):
        s1 = stats(data)
        for new in pts:
            s2 = stats((new, *data[1:]))
            for name in s1:
                worst[name] = max(worst.get(name, 0.0), abs(s1[name] - s2[name]))
    declared = {m.name: m.sensitivity for m in plan.measurements}
    for name, w in worst.items():
        assert w <= declared[name], (name, w, declared[name])
    assert worst["variance[x]"] == pytest.approx(1 / n)  # w²/n, attained at the corners
    assert worst["covariance[x,y]"] == pytest.approx(3 / n)  # w_x·w_y/n


def test_engine_paths_give_the_brute_force_statistics(constructor):
    """The statistics above were computed on pandas (numpy kernel); every backend's engine
    path gives the same exact values, so the brute-force results are about the code that runs
    on every backend."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 3, 50)
    x[::7] = np.nan
    for query in (Count(), Sum("x"), Mean("x"), Variance("x")):
        for ctx in (_public_ctx((-1.5, 2.25), 50), _private_ctx((-1.5, 2.25), 50)):
            plan, expected = _measure(query, ctx, list(x), missing=0.5 if ctx.size_public
                                      else "drop")
            aggs = backends.aggregate(constructor({"x": x}), plan.aggregates,
                                    missing={"x": 0.5 if ctx.size_public else "drop"})
            got = {m.name: np.asarray(m.statistic(aggs), dtype=float)
                   for m in plan.measurements}
            assert got.keys() == expected.keys()
            for name in got:
                assert np.array_equal(got[name], expected[name]), (query, name)


def test_declared_sensitivity_is_logged():
    pf = dpf.protect(pd.DataFrame({"x": np.linspace(0, 1, 10)}), epsilon=1.0,
                     bounds={"x": (0, 1)}, missing=0.5)
    pf.dp.variance("x", epsilon=0.5, random_state=1)
    entry = pf.dp.log.iloc[-1]
    assert entry["sensitivity"] == pytest.approx(1 / 10)
    assert entry["domain_upper"] == pytest.approx(10 / 36)
    assert math.isclose(entry["domain_lower"], 0.0)
    assert entry["size"] == "public"
