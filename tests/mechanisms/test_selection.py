"""Private key selection (issue 12): a key held by one unit is released with probability ≤ δ —
exactly from the formula (snapping included) and by simulation of the real mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpframe.errors import ParameterError
from dpframe.mechanisms import select_keys, selection_rule


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-2])
@pytest.mark.parametrize("m", [1, 3, 20])
@pytest.mark.parametrize("neighbours", ["add/remove", "replace"])
def test_formula_delta(eps, delta, m, neighbours):
    rule = selection_rule(eps, delta, m, neighbours=neighbours, count_upper=1e6)
    eps_key = eps / m if neighbours == "add/remove" else eps / (2 * m)
    assert rule.epsilon_per_key == pytest.approx(eps_key)
    # one key held by one unit (count 1): its pass probability, snapping included
    p1 = rule.pass_bound(1.0)
    assert p1 <= rule.pass_probability <= delta
    # all m keys one unit can bring in: together at most δ
    assert rule.unit_delta() <= delta * (1 + 1e-12)
    assert -math.expm1(m * math.log1p(-p1)) <= delta
    # the pure direction needs p ≤ 1 − e^{-ε_key}
    assert rule.pass_probability <= -math.expm1(-eps_key)
    # the threshold is tight: the continuous (unsnapped) pass probability at τ is not far below
    cont = 0.5 * math.exp(-(rule.threshold - 1.0) / rule.scale)
    assert cont >= 0.99 * rule.pass_probability * math.exp(-(rule.grid + 1e-9) / rule.scale)
    # the per-key Laplace spends its share exactly (snapping overhead included)
    assert rule.mechanism.privacy_loss() <= eps_key * (1 + 1e-9)


def test_threshold_formula_matches_closed_form():
    rule = selection_rule(1.0, 1e-6, 1, count_upper=1e4)
    b = rule.scale
    expected = 1 + rule.grid / 2 + rule.delta_t + b * math.log(1 / (2e-6))
    assert rule.threshold == pytest.approx(expected, rel=1e-9)
    assert rule.threshold > expected  # calibrated to p(1 − 1e-9): outward
    # monotone: more keys per unit or a smaller δ raise the threshold
    assert selection_rule(1.0, 1e-6, 5, count_upper=1e4).threshold > rule.threshold
    assert selection_rule(1.0, 1e-9, 1, count_upper=1e4).threshold > rule.threshold
    assert selection_rule(1.0, 1e-6, 1, max_count_per_key=3, count_upper=1e4).threshold > \
        rule.threshold


@pytest.mark.parametrize("count_upper", [1e3, None])  # fine grid, and the default (Λ = 1 at ε = 1)
def test_simulated_pass_probability(count_upper):
    """δ = 0.05 so the event is measurable: 200 000 releases of a count of 1."""
    delta, draws = 0.05, 200_000
    rule = selection_rule(1.0, delta, 1, count_upper=count_upper)
    noisy = rule.mechanism.sample(np.ones(draws), random_state=11)
    rate = float((noisy > rule.threshold).mean())
    se = math.sqrt(delta * (1 - delta) / draws)
    assert rate <= rule.pass_bound(1.0) + 5 * se
    assert rate <= delta + 5 * se
    assert rate >= 0.8 * delta  # the threshold is not needlessly high


def test_simulated_unit_with_several_keys():
    """One unit holding m = 4 keys alone: P(any of them released) ≤ δ, via select_keys."""
    delta, m, runs = 0.1, 4, 3000
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(runs):
        out = select_keys({f"k{i}": 1 for i in range(m)}, 2.0, delta, m, count_upper=100,
                          random_state=rng)
        hits += bool(out.keys)
    se = math.sqrt(delta * (1 - delta) / runs)
    assert hits / runs <= delta + 5 * se
    assert hits / runs >= 0.6 * delta


def test_pure_direction_limits_p():
    # δ large against ε: p is set by 1 − e^{-ε_key}, not by δ
    rule = selection_rule(0.01, 0.1, 1, count_upper=100)
    assert rule.pass_probability == pytest.approx(-math.expm1(-0.01), rel=1e-9)


def test_release_sorted_keys_counts_and_log():
    counts = {"zeta": 500, 7: 1, "alpha": 300, "mid": 120, "rare": 1}
    out = select_keys(counts, 1.0, 1e-6, count_upper=1000, random_state=4)
    assert out.keys == ["alpha", "mid", "zeta"]  # rare keys dropped, mixed types sorted
    assert (np.abs(out.noisy - np.array([300, 120, 500])) < 20).all()
    assert out.counts.dtype == np.int64 and (out.counts > out.threshold - 1).all()
    log = out.log
    for field in ("epsilon", "delta", "max_keys_per_unit", "threshold", "scale", "grid",
                  "epsilon_per_key", "pass_probability", "released_keys", "random_source"):
        assert field in log
    assert log["released_keys"] == 3 and log["random_source"] == "seeded"
    # (keys, counts) form and numeric keys sorted numerically
    out2 = select_keys(([10, 2, 33], [900, 900, 900]), 1.0, 1e-6, count_upper=1000)
    assert out2.keys == [2, 10, 33] and out2.log["random_source"] == "secure"
    empty = select_keys({}, 1.0, 1e-6)
    assert empty.keys == [] and empty.noisy.size == 0


@pytest.mark.parametrize(
    "kwargs",
    [{"delta": 0.0}, {"delta": 1.0}, {"epsilon": 0.0}, {"max_keys_per_unit": 0},
     {"max_keys_per_unit": 1.5}, {"neighbours": "swap"}, {"counts": {"a": -1}},
     {"counts": {"a": 5000}}, {"counts": (["a", "b"], [1])}, {"counts": 5},
     {"max_count_per_key": 0}],
)
def test_errors(kwargs):
    args = {"counts": {"a": 3}, "epsilon": 1.0, "delta": 1e-6, "count_upper": 1000} | kwargs
    with pytest.raises(ParameterError) as info:
        select_keys(args.pop("counts"), args.pop("epsilon"), args.pop("delta"), **args)
    if kwargs == {"delta": 0.0}:
        assert "keys=" in str(info.value) and "delta" in str(info.value)
