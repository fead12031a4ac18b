"""Group-by over keys read from the data, privately (issue 12; docs/privacy.md section K).

A group-by without declared keys and with δ > 0 selects keys by noisy per-key counts and a
threshold; a key that one row holds is published with probability at most δ (measured here
through the whole pipeline); without δ it is refused before anything is read.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.engine import _aggregation as engine
from dpframe.release import _pipeline as release
from dpframe.release._key_observation import observed_keys


def _cities(n: int = 3000, rare: str = "hamlet") -> pd.DataFrame:
    rng = np.random.default_rng(8)
    city = rng.choice(["paris", "lyon", "nice"], n, p=[0.5, 0.3, 0.2]).astype(object)
    city[0] = rare  # one person holds this key
    return pd.DataFrame({"city": city, "sex": rng.choice(["F", "M"], n),
                         "income": rng.uniform(0, 100, n)})


@pytest.mark.backends("pandas", "polars", "polars-lazy", "duckdb", "spark", "dask")
def test_selected_keys_are_the_common_ones_sorted_and_logged(constructor):
    pf = dpf.protect(constructor(_cities()), epsilon=10, delta=1e-5,
                     bounds={"income": (0.0, 100.0)})
    table = pf.dp.groupby("city").mean("income", epsilon=1.0, delta=1e-6, random_state=7)
    assert constructor.column(table, "city") == ["lyon", "nice", "paris"]
    means = constructor.values(table, "mean")
    assert np.all(np.abs(means - 50) < 15)  # noise scale of each mean ≈ 1.5
    doc = pf.dp.session.ledger.snapshot_document()
    log = doc["entries"]
    assert [e["name"] for e in log] == ["keys", "mean", "mean"]
    assert log[0]["query"] == "key selection" and log[0]["delta"] == 1e-6
    assert math.fsum(e["epsilon"] for e in log) == pytest.approx(1.0)
    assert all(e["delta"] == 0.0 for e in log[1:])
    # the released keys are stored once in the ledger; entries name them by reference
    assert log[0]["group_keys"] == log[1]["group_keys"] == log[2]["group_keys"]
    assert doc["keys"][log[1]["group_keys"]] == '["lyon", "nice", "paris"]'
    budget = pf.dp.budget
    assert budget.epsilon_spent == pytest.approx(1.0)
    assert budget.delta_spent == pytest.approx(1e-6)


def test_several_columns_and_selection_share():
    pf = dpf.protect(_cities(), epsilon=10, delta=1e-5, bounds={"income": (0.0, 100.0)})
    table = pf.dp.groupby(["city", "sex"], selection_share=0.25).count(epsilon=2.0,
                                                                     delta=1e-6)
    assert list(zip(table["city"], table["sex"], strict=True)) == [
        (c, s) for c in ("lyon", "nice", "paris") for s in ("F", "M")]
    log = pf.dp.session.ledger.snapshot_document()["entries"]
    assert log[0]["epsilon"] == pytest.approx(0.5) and log[1]["epsilon"] == pytest.approx(1.5)


@pytest.mark.slow
def test_a_key_one_row_holds_is_published_with_probability_at_most_delta():
    """Through frame.dp.groupby(...).count: 300 independent releases at δ = 0.2 (large
    enough to measure); the rare key appears at a rate ≤ δ + 5 standard errors. The relative
    standard error, sqrt((1 - δ) / (δ · trials)) = 0.115, is that of 1 500 releases at
    δ = 0.05 (0.112) at a fifth of the releases."""
    delta, trials = 0.2, 300
    rng = np.random.default_rng(99)
    base = _cities(300)
    hits = 0
    for _ in range(trials):
        pf = dpf.protect(base.copy(), epsilon=1e3, delta=0.5, bounds={})
        table = pf.dp.groupby("city").count(epsilon=1.0, delta=delta, random_state=rng)
        hits += "hamlet" in list(table["city"])
    se = math.sqrt(delta * (1 - delta) / trials)
    assert hits / trials <= delta + 5 * se
    assert hits / trials >= 0.5 * delta  # the threshold is tight, not just safe


def test_without_delta_the_error_says_how_and_nothing_is_read(monkeypatch):
    pf = dpf.protect(_cities(), epsilon=10, delta=1e-5, bounds={"income": (0.0, 100.0)})
    calls: list[object] = []
    monkeypatch.setattr(release, "observed_keys", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(engine, "aggregate", lambda *a, **k: calls.append(a))
    with pytest.raises(dpf.ParameterError, match="delta > 0"):
        pf.dp.groupby("city").mean("income", epsilon=1.0)
    with pytest.raises(dpf.ParameterError, match="selection_share"):
        pf.dp.groupby("city", selection_share=1.0).count(epsilon=1.0, delta=1e-6)
    with pytest.raises(dpf.ParameterError, match="not in the frame"):
        pf.dp.groupby("nope").count(epsilon=1.0, delta=1e-6)
    with pytest.raises(dpf.BudgetExceededError):
        pf.dp.groupby("city").count(epsilon=1.0, delta=1e-3)
    assert calls == [] and pf.dp.budget.epsilon_spent == 0


def test_declared_keys_still_need_no_delta():
    pf = dpf.protect(_cities(), epsilon=10, bounds={"income": (0.0, 100.0)},
                     keys={"city": ["paris", "hamlet", "atlantis"]})
    table = pf.dp.groupby("city").count(epsilon=1.0)
    assert list(table["city"]) == ["paris", "hamlet", "atlantis"]


def test_when_no_key_passes_the_table_is_empty_and_the_budget_spent():
    tiny = pd.DataFrame({"city": ["a", "b", "c"], "income": [1.0, 2.0, 3.0]})
    pf = dpf.protect(tiny, epsilon=10, delta=1e-5, bounds={"income": (0.0, 5.0)})
    with pytest.warns(dpf.SelectionWarning, match="no group passed the key selection"):
        table = pf.dp.groupby("city").release({"n": dpf.count(), "m": dpf.median("income")},
                                              epsilon=0.5, delta=1e-7)
    assert list(table.columns) == ["city", "n", "m"] and len(table) == 0
    assert str(table["city"].dtype) != "object"
    assert pf.dp.budget.epsilon_spent == pytest.approx(0.5)
    assert len(pf.dp.session.ledger.snapshot_document()["entries"]) == 3


def test_with_several_rows_per_person_keys_count_persons_and_m_is_k():
    """One person with many rows of a rare key counts once (distinct units per key, after
    keeping k rows per person), and the threshold is calibrated for m = k keys per person."""
    from dpframe.datasets import visits

    df = visits(2000)
    df["visit_type"] = df["visit_type"].astype(str)
    rare = df.index[:1]
    df.loc[rare, "visit_type"] = "house call"
    extra = df.loc[rare].copy()
    df = pd.concat([df] + [extra] * 30, ignore_index=True)  # 31 rows, one person
    observed, counts = observed_keys(df, ["visit_type"], distinct="patient_id")
    assert dict(zip(observed, counts, strict=True))["house call"] == 1
    pf = dpf.protect(df, epsilon=10, delta=1e-5, bounds={"cost": (0.0, 2000.0)},
                     privacy_unit="patient_id", max_rows_per_unit=3)
    table = pf.dp.groupby("visit_type").count_units(epsilon=1.0, delta=1e-6, random_state=1)
    assert "house call" not in list(table["visit_type"])
    entry = pf.dp.session.ledger.snapshot_document()["entries"][0]
    assert "m = 3 keys per unit" in entry["formulation"]
    assert entry["privacy_unit"] == "patient_id"
