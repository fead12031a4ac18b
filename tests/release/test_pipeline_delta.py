"""δ is charged only to measurements whose mechanism uses it
(dpframe.release._pipeline.release_delta).

Under ``mechanism="auto"`` a measurement may get the truncated or plain Laplace mechanism,
which are pure ε-DP: composed with δ = 0, its share of the request's δ is not spent. What a
release charges is decided from public facts before the read, so neighbouring data sets are
charged the same.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf

PURE = ("truncated", "laplace")


def _frame(seed: int = 1, change_first: float | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x": rng.uniform(0, 10, 300), "y": rng.uniform(0, 5, 300),
                       "g": rng.integers(0, 3, 300)})
    if change_first is not None:
        df.loc[0, "x"] = change_first
    return df


def _protect(df: pd.DataFrame) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpf.protect(df, epsilon=1e3, delta=1e-3, bounds={"x": (0, 10), "y": (0, 5)},
                           keys={"g": [0, 1, 2]})


def _spent_delta(p: pd.DataFrame) -> float:
    return p.dp.budget.delta_spent


def _new_entries(p: pd.DataFrame, before: int) -> pd.DataFrame:
    return p.dp.log.iloc[before:]


@pytest.mark.parametrize("epsilon", [0.005, 1.0, 40.0])
def test_each_entry_charges_delta_only_for_a_mechanism_that_uses_it(epsilon: float) -> None:
    p = _protect(_frame())
    queries = {"m": dpf.mean("x"), "v": dpf.variance("y"), "h": dpf.histogram("x", bins=4)}
    p.dp.release(queries, epsilon=epsilon, delta=1e-3)
    log = _new_entries(p, 0)
    for mech, delta, why in zip(log["mechanism"], log["delta"], log["mechanism_choice"],
                                strict=True):
        if mech == "bounded" and why.endswith("δ spent"):  # auto's δ rule: worth ≥ 1 %
            assert delta > 0.0
        else:
            assert delta == 0.0
    assert math.isclose(_spent_delta(p), math.fsum(log["delta"]), rel_tol=1e-12, abs_tol=0)
    assert _spent_delta(p) <= 1e-3
    assert (_spent_delta(p) > 0) == (epsilon == 0.005)  # δ/ε of 0.2 buys accuracy; 1e-3 not


def test_all_bounded_charges_the_whole_request_and_all_pure_charges_none() -> None:
    p = _protect(_frame())
    # tiny ε: auto picks bounded for both parts of the private-size mean; δ/ε = 5 % buys the
    # sum (real line) a 4.8 % lower worst-case RMSE, the count (on [0, n]) only 0.1 %
    p.dp.mean("x", epsilon=0.002, delta=1e-4)
    log = _new_entries(p, 0).set_index("part")
    assert set(log["mechanism"]) == {"bounded"}
    assert log.loc["sum", "delta"] == 5e-5 and log.loc["count", "delta"] == 0.0
    assert _spent_delta(p) == 5e-5
    n = len(p.dp.log)
    p.dp.mean("x", epsilon=0.002, delta=1e-6)  # δ/ε = 0.05 % buys < 1 %: no δ anywhere
    assert dict(zip(*[_new_entries(p, n)[c] for c in ("part", "mechanism")], strict=True)) == {
        "count": "bounded", "sum": "laplace"}  # at δ = 0 the real line's laws coincide
    assert _spent_delta(p) == 5e-5
    n = len(p.dp.log)
    p.dp.mean("x", epsilon=50.0, delta=1e-6)  # large ε: pure mechanisms only
    assert set(_new_entries(p, n)["mechanism"]) <= set(PURE)
    assert _spent_delta(p) == 5e-5


def test_asking_for_bounded_charges_its_delta_as_before() -> None:
    p = _protect(_frame())
    p.dp.release({"m": dpf.mean("x"), "s": dpf.sum("y")}, epsilon=50.0, delta=1e-6,
                 mechanism="bounded")
    assert _spent_delta(p) == 1e-6


def test_a_mixed_release_charges_the_bounded_shares() -> None:
    p = _protect(_frame())
    # weights give one query a tiny ε (bounded under auto) and the other a large one (pure);
    # δ/ε = 2.5 % in both, so the bounded one's δ buys more than auto's 1 %
    p.dp.release({"small": dpf.mean("x"), "large": dpf.sum("y")}, epsilon=0.04, delta=1e-3,
                 weights=[1e-4, 1.0])
    log = _new_entries(p, 0)
    small, large = log[log["name"] == "small"], log[log["name"] == "large"]
    assert (small["mechanism"] == "bounded").any()
    assert large["mechanism"].isin(PURE).all()
    assert 0.0 < _spent_delta(p) < 1e-6
    assert math.isclose(_spent_delta(p), math.fsum(small["delta"]), rel_tol=1e-12)


def test_neighbouring_data_sets_are_charged_the_same() -> None:
    outcomes = []
    for change in (None, 10.0):
        p = _protect(_frame(change_first=change))
        p.dp.groupby("g").mean("x", epsilon=1.0, delta=1e-6)
        p.dp.release({"m": dpf.mean("x"), "h": dpf.histogram("x", bins=3)}, epsilon=0.01,
                     delta=1e-6)
        log = p.dp.log
        outcomes.append((_spent_delta(p), list(log["mechanism"]), list(log["delta"]),
                         list(log["epsilon"])))
    assert outcomes[0] == outcomes[1]
