"""Exact aggregation (Casacuberta et al. 2022): the computed statistic honours the declared
sensitivity in floating point, and integer columns never wrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe import backends
from dpframe.engine import _aggregation as engine
from dpframe.query.statistics import Mean, PlanContext, Sum, Variance

LO, HI = 1e12, 1e12 + 1
N = 10_000


def _pre_noise(frame, query, size_public, bounds=(LO, HI), n=N):
    """Each measurement's pre-noise statistic, computed as a release computes it: the query's
    plan on public facts, then the engine's exact aggregates of the frame."""
    ctx = PlanContext(size_public, n, bounds, column=query.column, count_cap=float(n),
                      drops=not size_public, all_bounds={query.column: bounds})
    plan = query.plan(ctx)
    aggs = backends.aggregate(frame, plan.aggregates, missing={query.column: "drop"})
    return plan, {m.name: m.statistic(aggs) for m in plan.measurements}


@pytest.mark.parametrize("query", [Sum("x"), Mean("x"), Variance("x")], ids=repr)
@pytest.mark.parametrize("size_public", [True, False])
def test_casacuberta_vector_one_row_change_within_sensitivity(constructor, query, size_public):
    rng = np.random.default_rng(11)
    base = LO + rng.random(N)
    # adversarial one-row changes: extremes and a value whose float sum would round badly
    for i, new in [(0, HI), (1, LO), (2, LO + 0.5), (3, HI - 2**-13)]:
        changed = base.copy()
        changed[i] = new
        plan, s1 = _pre_noise(constructor({"x": base}), query, size_public)
        _, s2 = _pre_noise(constructor({"x": changed}), query, size_public)
        for m in plan.measurements:
            assert np.all(np.abs(s1[m.name] - s2[m.name]) <= m.sensitivity), (m.name, s1, s2)


def test_naive_float_sum_would_break_the_sensitivity_the_engine_does_not():
    """Why this matters: on the same one-row changes numpy's float sum moves by more than the
    true change (rounding depends on every other row), while the engine's exact fixed-point
    sum moves by at most Δ = w."""
    rng = np.random.default_rng(11)
    base = LO + rng.random(N)
    plan, s_base = _pre_noise(pd.DataFrame({"x": base}), Sum("x"), True)
    (m,) = plan.measurements
    worst_float = worst_engine = 0.0
    for i in range(50):
        changed = base.copy()
        changed[i] = HI if base[i] < LO + 0.5 else LO
        moved = abs(float(np.sum(changed)) - float(np.sum(base)))
        worst_float = max(worst_float, moved - abs(changed[i] - base[i]))
        _, s_changed = _pre_noise(pd.DataFrame({"x": changed}), Sum("x"), True)
        worst_engine = max(worst_engine, float(abs(s_changed["sum"][0] - s_base["sum"][0])))
    assert worst_float > 0  # float rounding error on top of the true change
    assert worst_engine <= m.sensitivity == HI - LO


def test_public_sum_is_released_in_shifted_exact_coordinates():
    rng = np.random.default_rng(2)
    x = LO + rng.random(N)
    _, s = _pre_noise(pl.DataFrame({"x": x}), Sum("x"), True)
    exact = float(sum(np.float64(v) - LO for v in x))
    assert s["sum"][0] == pytest.approx(exact, abs=1e-6)  # quantum 2^-39 per row


@pytest.mark.parametrize("dtype", [pl.Int32, pl.Int64, pl.UInt32, pl.Int16])
def test_polars_integer_columns_never_wrap(dtype):
    if dtype == pl.Int16:
        values, hi = [2**14] * 4, 2**15
    else:
        values, hi = [2**30] * 2, 2**31
    df = pl.DataFrame({"x": values}, schema={"x": dtype})
    if dtype == pl.Int32:
        assert df["x"].sum() < 0  # the native sum wraps
    pf = dpf.protect(df, epsilon=1.0, bounds={"x": (0, hi)})
    _, s = _pre_noise(pf, Sum("x"), True, (0, hi), len(values))
    assert s["sum"][0] == sum(values)
    out = pf.dp.sum("x", epsilon=1.0, random_state=0)
    assert out > 0


def test_pandas_int64_extremes_never_wrap():
    big = 2**62
    df = pd.DataFrame({"x": np.array([big, big, big], dtype="int64")})
    pf = dpf.protect(df, epsilon=1.0, bounds={"x": (0, 2**63)})
    _, s = _pre_noise(pf, Sum("x"), True, (0.0, float(2**63)), 3)
    assert s["sum"][0] == pytest.approx(3 * big, rel=1e-12)


def test_fixed_point_keeps_sums_below_2_to_53():
    for lo, hi, cap, sq in [(0, 1, 10, False), (-1e300, 1e300, 10**9, True),
                            (LO, HI, 40_000, True), (0, 2**63, 12, False)]:
        fp = engine.FixedPoint.choose(lo, hi, (lo + hi) / 2, cap, sq)
        kmax = max(abs(fp.k_lo), abs(fp.k_hi))
        assert cap * (kmax * kmax if sq else kmax) < 2**53
        assert fp.center + fp.k_lo * fp.q >= lo and fp.center + fp.k_hi * fp.q <= hi


@pytest.mark.skip_backends("duckdb", "spark", "dask",
                           reason="the self-concat is written with pandas' and Polars' concat")
def test_no_row_cap_needed_row_duplication_is_refused_before_reading(constructor):
    """The old row cap refused *after* reading when a derived frame had too many rows (a
    data-dependent refusal, issue 10 item 1). Now no verified derivation can have more rows
    than the protected n, so the fixed-point grid is sized by n; a self-concat is refused
    structurally, before anything is read, and spends nothing."""
    pf = dpf.protect(constructor({"x": np.linspace(0, 1, 10)}), epsilon=1.0,
                     bounds={"x": (0, 1)})
    if constructor.family == "pandas":
        big, error = pd.concat([pf] * 5), dpf.DerivationError
    elif constructor.lazy:
        big, error = pl.concat([pf] * 5), dpf.DerivationError
    else:  # eager Polars keeps no plan: the concat has no protected root at all
        big, error = pl.concat([pf] * 5), dpf.NoLedgerError
    with pytest.raises(error):
        big.dp.sum("x", epsilon=0.1)
    assert pf.dp.budget.epsilon_spent == 0 and len(pf.dp.log) == 0
    # the largest verified frame is the protected one: its sums fit the grid sized by n
    assert 0 <= pf.dp.sum("x", epsilon=0.1, random_state=0) <= 10
