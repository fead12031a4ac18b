"""Exact aggregation (Casacuberta et al. 2022): the computed statistic honours the declared
sensitivity in floating point, and integer columns never wrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf
from dpframe import engine
from dpframe.queries import Mean, PlanContext, Sum, Variance

LO, HI = 1e12, 1e12 + 1
N = 10_000


def _frames(values):
    pdf = pd.DataFrame({"x": values})
    return {"pandas": pdf, "polars": pl.from_pandas(pdf), "polars-lazy": pl.from_pandas(pdf).lazy()}


def _pre_noise(frame, query, size_public, n=N):
    ctx = PlanContext(size_public, n, 4 * n, (LO, HI), False, count_cap=float(n))
    plan = query.plan(ctx)
    fp = engine.FixedPoint.choose(LO, HI, plan.center, 4 * n, plan.squares)
    agg = engine.aggregate(frame, column="x", fixed_point=fp, squares=plan.squares,
                           row_cap=4 * n, bounds=(LO, HI))[None]
    return plan, {m.name: m.statistic(agg) for m in plan.measurements}


@pytest.mark.parametrize("backend", ["pandas", "polars", "polars-lazy"])
@pytest.mark.parametrize("query", [Sum("x"), Mean("x"), Variance("x")], ids=repr)
@pytest.mark.parametrize("size_public", [True, False])
def test_casacuberta_vector_one_row_change_within_sensitivity(backend, query, size_public):
    rng = np.random.default_rng(11)
    base = LO + rng.random(N)
    # adversarial one-row changes: extremes and a value whose float sum would round badly
    for i, new in [(0, HI), (1, LO), (2, LO + 0.5), (3, HI - 2**-13)]:
        changed = base.copy()
        changed[i] = new
        plan, s1 = _pre_noise(_frames(base)[backend], query, size_public)
        _, s2 = _pre_noise(_frames(changed)[backend], query, size_public)
        for m in plan.measurements:
            assert abs(s1[m.name] - s2[m.name]) <= m.sensitivity, (m.name, s1, s2)


def test_naive_float_sum_would_break_the_sensitivity():
    """Why this matters: numpy's float sum of the same vector moves by more than Δ = 1."""
    rng = np.random.default_rng(11)
    base = LO + rng.random(N)
    worst = 0.0
    for i in range(50):
        changed = base.copy()
        changed[i] = HI if base[i] < LO + 0.5 else LO
        moved = abs(float(np.sum(changed)) - float(np.sum(base)))
        worst = max(worst, moved - abs(changed[i] - base[i]))
    assert worst > 0  # float rounding error on top of the true change


def test_public_sum_is_released_in_shifted_exact_coordinates():
    rng = np.random.default_rng(2)
    x = LO + rng.random(N)
    _, s = _pre_noise(_frames(x)["polars"], Sum("x"), True)
    exact = float(sum(np.float64(v) - LO for v in x))
    assert s["sum"] == pytest.approx(exact, abs=1e-6)  # quantum 2^-39 per row


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
    _, s = _pre_noise_frame(pf, Sum("x"), (0, hi), len(values))
    assert s["sum"] == sum(values)
    out = pf.dp.sum("x", epsilon=1.0, random_state=0)
    assert out > 0


def _pre_noise_frame(frame, query, bounds, n):
    ctx = PlanContext(True, n, 4 * n, bounds, False, count_cap=float(n))
    plan = query.plan(ctx)
    fp = engine.FixedPoint.choose(*bounds, plan.center, 4 * n, plan.squares)
    agg = engine.aggregate(frame, column="x", fixed_point=fp, squares=plan.squares,
                           row_cap=4 * n, bounds=bounds)[None]
    return plan, {m.name: m.statistic(agg) for m in plan.measurements}


def test_pandas_int64_extremes_never_wrap():
    big = 2**62
    df = pd.DataFrame({"x": np.array([big, big, big], dtype="int64")})
    pf = dpf.protect(df, epsilon=1.0, bounds={"x": (0, 2**63)})
    _, s = _pre_noise_frame(pf, Sum("x"), (0.0, float(2**63)), 3)
    assert s["sum"] == pytest.approx(3 * big, rel=1e-12)


def test_fixed_point_keeps_sums_below_2_to_53():
    for lo, hi, cap, sq in [(0, 1, 10, False), (-1e300, 1e300, 10**9, True),
                            (LO, HI, 40_000, True), (0, 2**63, 12, False)]:
        fp = engine.FixedPoint.choose(lo, hi, (lo + hi) / 2, cap, sq)
        kmax = max(abs(fp.k_lo), abs(fp.k_hi))
        assert cap * (kmax * kmax if sq else kmax) < 2**53
        assert fp.center + fp.k_lo * fp.q >= lo and fp.center + fp.k_hi * fp.q <= hi


def test_row_cap_exceeded_refuses_and_spends_nothing():
    df = pd.DataFrame({"x": np.linspace(0, 1, 10)})
    pf = dpf.protect(df, epsilon=1.0, bounds={"x": (0, 1)})
    big = pd.concat([pf] * 5)  # 50 rows > cap 4 × 10
    with pytest.raises(dpf.UnsupportedInputError, match="row_cap"):
        big.dp.sum("x", epsilon=0.1)
    assert pf.dp.budget.epsilon_spent == 0
