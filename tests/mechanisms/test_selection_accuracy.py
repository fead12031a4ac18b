"""Planning a key selection before spending (dpframe.mechanisms.selection,
dpframe.release._accuracy_planner).

``SelectionRule.keep_probability`` and ``smallest_kept`` are checked against two independent
computations: a quadrature of the Laplace law through dpframe's real snapping code (scipy's
quantile function on a fine grid of probabilities, each offset snapped by ``snap_to_cells``),
and sampling through the mechanism itself; then ``accuracy()`` is checked to report them.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import dpframe as dpf
from dpframe.mechanisms.selection import selection_rule
from dpframe.mechanisms.snapping import snap_to_cells
from dpframe.release import _accuracy_planner as planner

RULES = {  # (ε of the selection, δ, keys per unit, public n)
    "survey": (0.075, 1e-6, 1, 944),  # the issue's survey: ε = 0.15, half for the selection
    "unit scale": (2.0, 1e-3, 1, 30),
    "three keys per person": (1.0, 1e-5, 3, 5000),
    "fine": (20.0, 0.05, 1, 100),
}

#: probabilities u_i = (i + ½)/N: the quadrature's error on a probability is at most 1/N
N = 400_000


def _rule(name: str):
    eps, delta, m, n = RULES[name]
    return selection_rule(eps, delta, m, neighbours="replace", count_upper=float(n))


def _quadrature(rule, count: float) -> float:
    """P(snapped release > τ) for exact count ``count``, from scipy's Laplace quantiles
    pushed through the mechanism's own snapping (the real window, an unbounded component)."""
    offsets = stats.laplace.ppf((np.arange(N) + 0.5) / N, scale=rule.scale)
    anchor = np.full(N, float(count))
    window = rule.mechanism.plan.window
    out = snap_to_cells(anchor, offsets, rule.grid, np.full(N, -np.inf), np.full(N, np.inf),
                        window)
    return float(np.mean(out > rule.threshold))


@pytest.mark.parametrize("name", RULES)
def test_keep_probability_matches_a_quadrature_through_the_real_snapping(name):
    rule = _rule(name)
    for offset in (-3.0, -1.0, -0.3, 0.0, 0.4, 1.0, 2.5):
        count = max(round(rule.threshold + offset * rule.scale), 0)
        assert rule.keep_probability(count) == pytest.approx(
            _quadrature(rule, count), abs=2.0 / N)


@pytest.mark.parametrize("name", RULES)
@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99])
def test_smallest_kept_is_the_smallest_count_at_that_probability(name, q):
    rule = _rule(name)
    n = rule.smallest_kept(q)
    assert _quadrature(rule, n) >= q - 2.0 / N
    assert _quadrature(rule, n - 1) < q
    # the closed form: ⌈t* + δ_t + b·ln(1/(2(1 − q)))⌉ with t* within Λ/2 of τ
    assert abs(n - (rule.threshold + rule.scale * math.log(0.5 / (1 - q)))) <= 1 + rule.grid


@given(eps=st.floats(0.01, 20.0), log_delta=st.floats(-12.0, -1.0),
       m=st.integers(1, 5), n=st.integers(10, 10**6), q=st.floats(0.5, 0.999))
def test_smallest_kept_is_tight_for_any_calibration(eps, log_delta, m, n, q):
    """For any public parameters, ``smallest_kept(q)`` is kept with probability ≥ q even
    when the sampler's error δ_t works against it, and one fewer is not (it may reach q
    exactly only through that error: a coarse grid can put ``t*`` on a whole number), and the
    keep probability increases with the count."""
    rule = selection_rule(eps, 10.0**log_delta, m, neighbours="replace",
                          count_upper=float(n))

    def worst(count: int) -> float:  # the keep probability with the cut moved up by δ_t
        z = ((rule.cut() - count) + rule.delta_t) / rule.scale
        return 0.5 * math.exp(-z) if z >= 0 else 1.0 - 0.5 * math.exp(z)

    size = rule.smallest_kept(q)
    assert worst(size) >= q and rule.keep_probability(size) >= q
    assert size == 0 or worst(size - 1) < q
    assert rule.keep_probability(size + 1) >= rule.keep_probability(size)
    assert rule.smallest_kept(q) <= rule.smallest_kept(min(q + 0.0005, 0.9995))


def test_the_issues_survey_numbers():
    rule = _rule("survey")
    assert rule.threshold == pytest.approx(350.9, abs=0.1)
    assert (rule.smallest_kept(0.5), rule.smallest_kept(0.95)) == (351, 413)


def test_sampling_through_the_mechanism_agrees():
    """20 000 draws of the mechanism's own sampler per count: the kept fraction is within
    five standard errors of ``keep_probability`` (scale 1: neighbouring counts differ a lot)."""
    rule = _rule("unit scale")
    rng = np.random.default_rng(5)
    draws = 20_000
    for count in range(rule.smallest_kept(0.5) - 3, rule.smallest_kept(0.99) + 1):
        noisy = rule.mechanism.sample(np.full(draws, float(count)), random_state=rng)
        kept = float(np.mean(np.asarray(noisy) > rule.threshold))
        p = rule.keep_probability(count)
        assert abs(kept - p) <= 5 * math.sqrt(p * (1 - p) / draws) + 1e-9


def test_smallest_kept_refuses_probabilities_below_a_half():
    with pytest.raises(dpf.ParameterError, match=r"\[0.5, 1\)"):
        _rule("fine").smallest_kept(0.3)


def _survey(n: int = 944) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return pd.DataFrame({"party": rng.choice(["dem", "rep", "ind", "other"], n),
                         "age": rng.uniform(18, 95, n)})


def test_accuracy_reports_the_selection_before_anything_is_spent():
    pf = dpf.protect(_survey(), epsilon=1.0, delta=1e-5, bounds={"age": (18.0, 95.0)})
    table = pf.dp.groupby("party").accuracy({"n": dpf.count(), "m": dpf.mean("age")},
                                            epsilon=0.15, delta=1e-6, alpha=0.1)
    assert list(table["name"]) == ["keys", "n", "m"]
    assert list(table.columns)[-3:] == ["threshold", "min_group_half", "min_group_1_alpha"]
    keys = table.iloc[0]
    rule = _rule("survey")
    assert keys["query"] == "key selection" and keys["epsilon"] == pytest.approx(0.075)
    assert keys["threshold"] == rule.threshold
    assert keys["min_group_half"] == rule.smallest_kept(0.5) == 351
    assert keys["min_group_1_alpha"] == rule.smallest_kept(0.9)
    assert "351 rows" in keys["note"] and "probability ≥ 0.9" in keys["note"]
    assert math.fsum(table["epsilon"]) == pytest.approx(0.15)  # the selection + the queries
    assert table["threshold"].iloc[1:].isna().all()
    assert pf.dp.budget.epsilon_spent == 0 and pf.dp.log.shape[0] == 0


def test_a_larger_selection_share_lowers_the_threshold():
    pf = dpf.protect(_survey(), epsilon=1.0, delta=1e-5, bounds={"age": (18.0, 95.0)})
    half = pf.dp.groupby("party").accuracy({"n": dpf.count()}, epsilon=0.15, delta=1e-6)
    most = pf.dp.groupby("party", selection_share=0.9).accuracy({"n": dpf.count()},
                                                                  epsilon=0.15, delta=1e-6)
    assert most["epsilon"].iloc[0] == pytest.approx(0.135)
    assert most["min_group_half"].iloc[0] < half["min_group_half"].iloc[0] * 0.6


def test_declared_keys_add_no_selection_row_or_columns():
    pf = dpf.protect(_survey(), epsilon=1.0, bounds={"age": (18.0, 95.0)},
                     keys={"party": ["dem", "rep", "ind", "other"]})
    table = pf.dp.groupby("party").accuracy({"n": dpf.count()}, epsilon=0.15)
    assert list(table["name"]) == ["n"]
    assert list(table.columns) == ["name", "query", "epsilon", "half_width", "alpha",
                                   "mechanisms", "note"]


def test_the_planned_threshold_is_the_one_the_release_uses():
    pf = dpf.protect(_survey(), epsilon=1.0, delta=1e-5, bounds={"age": (18.0, 95.0)})
    planned = planner.accuracy(pf, {"n": dpf.count()}, epsilon=0.3, delta=1e-6,
                               group_by="party", selection_share=0.4)
    pf.dp.groupby("party", selection_share=0.4).count(epsilon=0.3, delta=1e-6, random_state=1)
    entry = pf.dp.session.ledger.snapshot_document()["entries"][0]
    assert entry["query"] == "key selection"
    logged = re.search(r"threshold ([0-9.e+-]+);", entry["formulation"])
    assert logged is not None
    assert planned[0].threshold == pytest.approx(float(logged.group(1)), rel=1e-5)
    assert planned[0].note.count(f"Laplace, scale {entry['scale']:.4g}") == 1
    assert planned[0].epsilon == pytest.approx(entry["epsilon"])


def test_with_a_privacy_unit_groups_count_persons_and_m_is_k():
    from dpframe.datasets import visits

    df = visits(2000)
    df["visit_type"] = df["visit_type"].astype(str)
    pf = dpf.protect(df, epsilon=10, delta=1e-5, bounds={"cost": (0.0, 2000.0)},
                     privacy_unit="patient_id", max_rows_per_unit=3)
    table = pf.dp.groupby("visit_type").accuracy({"n": dpf.count_units()}, epsilon=1.0,
                                                 delta=1e-6)
    n_units = int(df["patient_id"].nunique())
    rule = selection_rule(0.5, 1e-6, 3, neighbours="replace", count_upper=float(n_units))
    assert table["threshold"].iloc[0] == pytest.approx(rule.threshold)
    assert "persons" in table["note"].iloc[0]


@pytest.mark.filterwarnings("ignore::dpframe.errors.SelectionWarning")  # (empty releases)
def test_planned_group_sizes_are_kept_as_often_as_promised_through_the_pipeline():
    """Plan with accuracy(), build groups of exactly the planned sizes, release 300 times
    through frame.dp.groupby(...).count: each group is kept at the rate keep_probability
    gives (within five standard errors), at least ½ and 1 − α."""
    alpha, trials, n = 0.1, 300, 32  # the plan depends on the public n only
    planning = dpf.protect(pd.DataFrame({"key": ["x"] * n}), epsilon=1.0, delta=1e-2,
                           bounds={})
    plan = planning.dp.groupby("key").accuracy({"n": dpf.count()}, epsilon=2.0, delta=1e-3,
                                               alpha=alpha)
    half, sure = int(plan["min_group_half"].iloc[0]), int(plan["min_group_1_alpha"].iloc[0])
    assert half + sure <= n  # the planned groups fit in n rows
    rows = ["a"] * half + ["b"] * sure + ["c"] * (n - half - sure)
    pf = dpf.protect(pd.DataFrame({"key": rows}), epsilon=1e4, delta=0.9, bounds={})
    kept = {"a": 0, "b": 0}
    for seed in range(trials):
        table = pf.dp.groupby("key").count(epsilon=2.0, delta=1e-3, random_state=seed)
        for key in kept:
            kept[key] += key in list(table["key"])
    rule = selection_rule(1.0, 1e-3, 1, neighbours="replace", count_upper=float(n))
    for key, size, floor in (("a", half, 0.5), ("b", sure, 1 - alpha)):
        p = rule.keep_probability(size)
        assert p >= floor
        assert abs(kept[key] / trials - p) <= 5 * math.sqrt(p * (1 - p) / trials)
