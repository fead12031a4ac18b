"""Quantiles at parity with the other statistics: ci= (a rank interval), mechanism=, delta=,
and a default grid that follows the public size (docs/privacy.md Q.6, docs/frames.md)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpframe as dpf
from dpframe.mechanisms.quantiles import (
    DEFAULT_QUANTILE_BINS,
    MAX_DEFAULT_BINS,
    QuantileMechanism,
    bin_counts,
    default_bins,
    rank_distances,
)


def _frame(n: int = 3000, **protect: object) -> pd.DataFrame:
    x = np.random.default_rng(0).normal(50, 12, n)
    data = pd.DataFrame({"x": x, "g": np.arange(n) % 3})
    kw: dict = {"epsilon": 100, "bounds": {"x": (0, 100)}, "missing": {"x": 0.0},
                "keys": {"g": [0, 1, 2]}} | protect
    return dpf.protect(data, **kw)


def test_default_bins_follow_public_size_and_epsilon():
    assert default_bins(1000, 1.0) == DEFAULT_QUANTILE_BINS  # 8000 → floor 2^16
    assert default_bins(10**5, 1.0) == 2**20  # 8·10^5 → 2^20
    assert default_bins(10**6, 1.0) == MAX_DEFAULT_BINS
    assert default_bins(10**5, 0.1) == 2**17
    assert default_bins(10**5, None) == 2**20  # ε unknown: 1
    assert default_bins(10**6, 1.0, groups=1000) == 4096  # memory budget over groups
    with pytest.raises(dpf.ParameterError):
        default_bins(-1, 1.0)


@given(st.integers(0, 10**9), st.floats(1e-3, 1e3))
def test_default_bins_is_a_bounded_power_of_two_at_least_8_eps_n(n, eps):
    b = default_bins(n, eps)
    assert b & (b - 1) == 0 and DEFAULT_QUANTILE_BINS <= b <= MAX_DEFAULT_BINS
    assert b >= min(8 * eps * max(n, 1), MAX_DEFAULT_BINS)


def test_release_uses_the_rule_from_public_facts_on_a_private_size_frame():
    pf = _frame(3000, missing={})  # x drops missing values: private size; rule uses n = 3000
    pf.dp.median("x", epsilon=10.0, random_state=0)
    entry = pf.dp.session.ledger.snapshot_document()["entries"][-1]
    assert entry["size"] == "private"
    assert f"{default_bins(3000, 10.0)} equal public bins" in entry["formulation"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 15), min_size=0, max_size=40), st.sampled_from([0.1, 0.5, 0.9]),
       st.floats(0.2, 5.0), st.sampled_from([0.5, 0.9, 0.99]))
def test_rank_error_bounds_the_exact_law(rows, q, eps, level):
    """P(d_chosen ≥ r) under the exact law never exceeds α (the proof's claim)."""
    mech = QuantileMechanism(eps, 0.0, 16.0, q, bins=16)
    counts = np.bincount(np.asarray(rows, dtype=np.int64), minlength=16)
    r = mech.rank_error(1 - level)
    p = mech.probabilities(counts)
    d = rank_distances(counts, q)
    assert p[d >= r].sum() <= (1 - level) * (1 + 1e-9)


def test_rank_interval_covers_in_simulation():
    x = np.random.default_rng(5).normal(0, 1, 500)
    mech = QuantileMechanism(0.5, -4, 4, [0.25, 0.5], bins=256)
    counts = bin_counts(x, -4, 4, 256)
    r = mech.rank_error(0.1)
    cum = np.concatenate([[0], np.cumsum(counts)])
    misses = 0
    for seed in range(300):
        chosen = mech.sample(counts, random_state=seed).bins
        for j, q in zip(chosen, (0.25, 0.5), strict=True):
            t = q * 500
            misses += max(cum[j] - t, t - cum[j + 1], 0) >= r
    assert misses / 300 <= 0.1


def test_median_ci_gives_a_value_interval_and_a_rank_interval_in_levels():
    pf = _frame()
    est = pf.dp.median("x", epsilon=1.0, ci=0.95, random_state=1)
    assert isinstance(est, dpf.QuantileEstimate) and isinstance(est, dpf.Estimate)
    assert float(est) == est.value and 0 <= est.lower <= est.upper <= 100
    _, lower, upper, level = est  # unpacks as an Estimate
    assert (lower, upper, level) == (est.lower, est.upper, 0.95)
    # the point keeps 1 − ci_share of ε (0.5 by default); its rank interval at that share,
    # clipped at the largest rank distance of 3000 rows
    mech = QuantileMechanism(0.5, 0, 100, 0.5, bins=default_bins(3000, 1.0))
    assert est.rank_error == pytest.approx(min(mech.rank_error(0.05), 1500))
    assert est.q_lower == pytest.approx(0.5 - est.rank_error / 3000)
    assert est.q_upper == pytest.approx(0.5 + est.rank_error / 3000)
    assert est.level == 0.95
    entries = pf.dp.session.ledger.snapshot_document()["entries"][-3:]
    assert [e["part"] for e in entries] == ["quantile", "lower_bracket", "upper_bracket"]
    assert [e["epsilon"] for e in entries] == [0.5, 0.25, 0.25]
    assert pf.dp.budget.epsilon_spent == pytest.approx(1.0)


def test_ci_share_zero_spends_nothing_on_the_interval_and_states_the_bounds():
    pf = _frame()
    est = pf.dp.median("x", epsilon=1.0, ci=0.9, ci_share=0, random_state=1)
    assert (est.lower, est.upper) == (0.0, 100.0)
    entries = pf.dp.session.ledger.snapshot_document()["entries"]
    assert [e["part"] for e in entries] == ["quantile"] and entries[0]["epsilon"] == 1.0
    with pytest.raises(dpf.ParameterError, match="ci_share"):
        pf.dp.median("x", epsilon=1.0, ci=0.9, ci_share=1.0)
    assert pf.dp.budget.epsilon_spent == pytest.approx(1.0)


def test_private_size_gives_the_rank_error_only():
    pf = _frame(missing={})
    est = pf.dp.median("x", epsilon=1.0, ci=0.9, random_state=1)
    assert est.q_lower is None and est.q_upper is None and est.rank_error > 0
    assert est.lower <= est.upper


def test_median_in_release_with_ci_gets_its_interval_and_a_truthful_log():
    pf = _frame()
    table = pf.dp.release({"m": dpf.median("x"), "avg": dpf.mean("x")}, epsilon=1.0, ci=0.95,
                          random_state=2)
    assert {"m", "m_lower", "m_upper", "m_rank_error", "m_q_lower", "m_q_upper", "avg_lower",
            "avg_upper"} <= set(table.columns)
    assert list(table.columns).index("m") < list(table.columns).index("m_rank_error")
    entries = pf.dp.session.ledger.snapshot_document()["entries"]
    notes = {(e["name"], e["part"]): e["interval"] for e in entries}
    assert "value interval m_lower, m_upper from two bracketing releases" in notes["m", "quantile"]
    assert "m_rank_error" in notes["m", "quantile"] and "m_q_lower" in notes["m", "quantile"]
    assert notes["m", "upper_bracket"] == notes["m", "quantile"]
    assert notes["avg", "mean"].startswith("0.95 confidence interval released")


def test_several_levels_and_groups_with_ci():
    pf = _frame()
    levels = pf.dp.quantile("x", [0.25, 0.75], epsilon=1.0, ci=0.9, random_state=3)
    assert list(levels.columns) == ["q", "quantile", "lower", "upper", "rank_error"]
    assert levels["rank_error"].nunique() == 1
    assert (levels["lower"] <= levels["upper"]).all() and levels["lower"].is_monotonic_increasing
    grouped = pf.dp.groupby("g").median("x", epsilon=1.0, ci=0.9, random_state=3)
    assert {"median_lower", "median_upper", "median_rank_error"} <= set(grouped.columns)
    assert len(grouped) == 3
    assert "median_q_lower" not in grouped.columns  # group sizes are private
    table = pf.dp.release({"qs": dpf.quantile("x", [0.1, 0.9])}, epsilon=1.0, ci=0.9,
                          random_state=4)
    assert list(table.columns) == ["qs[0.1]", "qs[0.1]_lower", "qs[0.1]_upper", "qs[0.9]",
                                   "qs[0.9]_lower", "qs[0.9]_upper", "qs_rank_error"]


def test_without_ci_nothing_is_added_and_the_log_says_no_interval():
    pf = _frame()
    table = pf.dp.release({"m": dpf.median("x")}, epsilon=1.0, random_state=5)
    assert list(table.columns) == ["m"]
    assert pf.dp.session.ledger.snapshot_document()["entries"][-1]["interval"] is None


@pytest.mark.parametrize("mechanism", ["auto", "exponential"])
def test_quantile_mechanism_names_accepted(mechanism):
    pf = _frame()
    assert 0 <= pf.dp.quantile("x", 0.5, epsilon=1.0, mechanism=mechanism) <= 100
    assert 0 <= pf.dp.median("x", epsilon=1.0, mechanism=mechanism) <= 100


@pytest.mark.parametrize("kwargs, match", [
    ({"mechanism": "bounded"}, "exponential mechanism"),
    ({"mechanism": "laplace"}, "does not apply to quantiles"),
    ({"mechanism": "nope"}, "unknown mechanism"),
    ({"delta": "0"}, "must be a number"),
])
def test_bad_mechanism_or_delta_refused_before_spending(kwargs, match):
    pf = _frame()
    with pytest.raises(dpf.ParameterError, match=match):
        pf.dp.median("x", epsilon=1.0, **kwargs)
    if "mechanism" in kwargs:
        with pytest.raises(dpf.ParameterError, match=match):
            pf.dp.groupby("g").median("x", epsilon=1.0, **kwargs)
    assert pf.dp.budget.epsilon_spent == 0


def test_grouped_delta_charged_only_for_key_selection():
    """Issue 33 item 7: a δ is accepted as by every statistic and charged only where used —
    never by the (pure ε-DP) quantiles, by a key selection when keys come from the data."""
    pf = _frame()  # keys of g declared at protect: a δ buys nothing and is not charged
    pf.dp.groupby("g").median("x", epsilon=1.0, delta=1e-6)
    pf.dp.groupby("g", keys=[0, 1, 2]).quantile("x", 0.5, epsilon=1.0, delta=1e-6)
    assert pf.dp.budget.epsilon_spent == 2.0 and pf.dp.budget.delta_spent == 0
    x = np.random.default_rng(0).normal(50, 12, 3000)
    sel = dpf.protect(pd.DataFrame({"x": x, "g": np.arange(3000) % 2}), epsilon=100,
                      delta=1e-3, bounds={"x": (0, 100)}, missing={"x": 0.0})
    out = sel.dp.groupby("g").median("x", epsilon=1.0, delta=1e-6, random_state=0)
    assert "median" in out.columns  # keys selected from the data: δ pays for the selection
    assert sel.dp.budget.delta_spent == 1e-6


def test_rank_error_is_public():
    """r depends on ε, bins, levels and α only: equal on two different data sets."""
    a = QuantileMechanism(1.0, 0, 1, [0.1, 0.9], bins=1024)
    assert a.rank_error(0.05) == pytest.approx(
        (math.log(1023 * 2 / 0.05) + a.epsilon_overheads[0] / 2) / a.coefficients[0])
