"""Issue 33 item 7: ``"auto"`` spends δ only where it buys accuracy worth it, and δ means the
same for every statistic (docs/privacy.md, I.5 "δ under auto").

The rule (:func:`dpframe.mechanisms.choose_mechanism`): the bounded mechanism runs at the δ
asked for only when its certified worst-case RMSE is at least ``DELTA_MIN_GAIN`` (1 %) below
the best pure ε-DP candidate's (truncated, plain, or bounded at δ = 0); otherwise no δ is used
and none is charged. Quantiles (the exponential mechanism, pure ε-DP) accept a δ everywhere
and are never charged for it; only a key selection is.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.mechanisms import choose_mechanism
from dpframe.mechanisms.accuracy import DELTA_MIN_GAIN


def _gain(choice_delta: float, epsilon: float) -> float:
    """The real line's gain of the bounded scale ``Δ/(ε − ln(1 − δ))`` over ``Δ/ε``."""
    return 1.0 - epsilon / (epsilon - math.log1p(-choice_delta))


@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_real_line_spends_delta_only_beyond_the_threshold(epsilon: float) -> None:
    """The sum inside every private-size mean: at δ*, the bounded scale is exactly 1 % below
    the plain one; just below δ* the plain Laplace runs with δ = 0, just above the bounded one
    at δ."""
    threshold = -math.expm1(-epsilon * DELTA_MIN_GAIN / (1 - DELTA_MIN_GAIN))
    assert _gain(threshold, epsilon) == pytest.approx(DELTA_MIN_GAIN)
    below = choose_mechanism(epsilon, 1.0, None, None, 0.9 * threshold)
    above = choose_mechanism(epsilon, 1.0, None, None, 1.1 * threshold)
    assert (below.name, below.delta) == ("laplace", 0.0)
    assert "δ not spent" in below.reason
    assert (above.name, above.delta) == ("bounded", 1.1 * threshold)
    assert above.reason.endswith("δ spent")
    # the usual δ: the gain is δ/ε ≈ 1e-5, and auto used to spend δ for it
    usual = choose_mechanism(epsilon, 1.0, None, None, 1e-6)
    assert (usual.name, usual.delta) == ("laplace", 0.0)


def test_bounded_domain_keeps_bounded_but_spends_delta_only_when_worth_it() -> None:
    """On [0, 1] with Δ = ε = 1 the bounded mechanism wins (Holohan Fig. 3) at any δ; δ = 1e-6
    buys 1.5e-7 of its worst-case RMSE (run at δ = 0), δ = 0.2 buys 3.2 % (spent)."""
    small = choose_mechanism(1.0, 1.0, 0.0, 1.0, 1e-6)
    large = choose_mechanism(1.0, 1.0, 0.0, 1.0, 0.2)
    assert (small.name, small.delta) == ("bounded", 0.0)
    assert (large.name, large.delta) == ("bounded", 0.2)
    for choice in (small, large):
        pure, spent = choice.worst_case_mse["bounded at δ=0"], choice.worst_case_mse["bounded"]
        gain = 1 - math.sqrt(spent.upper / pure.lower)
        assert (gain >= DELTA_MIN_GAIN) == (choice.delta > 0)
    assert choose_mechanism(1.0, 1.0, 0.0, 1.0).delta == 0.0  # no δ asked, none used


def _frame(change_first: float | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"x": rng.uniform(0, 10, 400), "g": rng.integers(0, 2, 400)})
    if change_first is not None:
        df.loc[0, "x"] = change_first
    return df


def _protect(df: pd.DataFrame) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpf.PrivateSizeWarning)
        return dpf.protect(df, epsilon=100.0, delta=0.5, bounds={"x": (0, 10)},
                           keys={"g": [0, 1]})


@pytest.mark.parametrize("change", [None, 10.0])
def test_private_size_mean_charges_delta_only_when_worth_it(change: float | None) -> None:
    """Issue 33: the private-size mean's sum spent δ for a gain of δ/ε. Now δ = 1e-6 at ε = 1
    is not charged (plain Laplace on the real line, the count truncated), δ/ε = 0.1 is (on the
    sum only); the same on a neighbouring data set (the choice reads public facts only)."""
    pf = _protect(_frame(change))
    pf.dp.mean("x", epsilon=1.0, delta=1e-6, random_state=1)
    assert pf.dp.budget.delta_spent == 0.0
    pf.dp.mean("x", epsilon=1.0, delta=0.1, random_state=1)
    log = pf.dp.log
    assert list(zip(log["part"], log["mechanism"], log["delta"], strict=True)) == [
        ("count", "truncated", 0.0), ("sum", "laplace", 0.0),
        ("count", "truncated", 0.0), ("sum", "bounded", 0.05)]
    assert pf.dp.budget.delta_spent == 0.05


def test_quantiles_accept_delta_everywhere_and_are_never_charged_for_it() -> None:
    """The median/δ inconsistency resolved one way: ``.dp.median``, ``.dp.quantile``, a
    group-by with declared keys and ``release`` all answer a δ > 0 exactly as δ = 0 (same
    seeded values) and charge no δ; a bad δ, or δ > 0 with a named mechanism that uses none
    (as with the Laplace family's "truncated"), is refused before anything is spent."""
    answers = []
    for delta in (0.0, 1e-6):
        pf = _protect(_frame())
        answers.append((
            pf.dp.median("x", epsilon=0.5, delta=delta, random_state=4),
            pf.dp.quantile("x", [0.25, 0.75], epsilon=0.5, delta=delta,
                           random_state=4)["quantile"].tolist(),
            pf.dp.groupby("g").median("x", epsilon=0.5, delta=delta,
                                      random_state=4)["median"].tolist(),
            pf.dp.release({"m": dpf.median("x"), "n": dpf.count()}, epsilon=0.5, delta=delta,
                          random_state=4)["m"].tolist()))
        assert pf.dp.budget.delta_spent == 0.0
        assert set(pf.dp.log["delta"]) == {0.0}
    assert answers[0] == answers[1]
    pf = _protect(_frame())
    for bad in (-1e-6, 1.0, "0"):
        with pytest.raises(dpf.ParameterError):
            pf.dp.median("x", epsilon=0.5, delta=bad)
        with pytest.raises(dpf.ParameterError):
            pf.dp.groupby("g").median("x", epsilon=0.5, delta=bad)
    # as mechanism="truncated" with δ > 0: naming a mechanism that uses no δ and passing one
    for call in (lambda: pf.dp.median("x", epsilon=0.5, delta=1e-6, mechanism="exponential"),
                 lambda: pf.dp.groupby("g").quantile("x", 0.5, epsilon=0.5, delta=1e-6,
                                                     mechanism="exponential"),
                 lambda: pf.dp.release({"m": dpf.median("x")}, epsilon=0.5, delta=1e-6,
                                       mechanism="truncated")):
        with pytest.raises(dpf.ParameterError, match="does not use delta"):
            call()
    assert pf.dp.budget.epsilon_spent == 0.0


def test_the_example_prints_the_documented_gains(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/privacy.md quotes ``examples/auto_delta.py`` at ε = 1."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "auto_delta.py"
    spec = importlib.util.spec_from_file_location("dpframe_example_auto_delta", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--epsilon", "1"]) == 0
    out = capsys.readouterr().out
    for row in ("| 1 | ℝ | 1e-05 | 0.001 % | laplace | 0 |",
                "| 1 | ℝ | 0.01 | 0.995 % | laplace | 0 |",
                "| 1 | ℝ | 0.1 | 9.53 % | bounded | 0.1 |",
                "| 1 | [0, 1] | 0.01 | 0.146 % | bounded | 0 |",
                "| 1 | [0, 1] | 0.1 | 1.53 % | bounded | 0.1 |"):
        assert row in out
