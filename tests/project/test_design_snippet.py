"""The first-page example (verified derivations, budget spent to exactly 1.0) runs verbatim on
pandas, plus its Polars eager and lazy translations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf


def _census(n: int = 2000) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({
        "age": rng.integers(0, 100, n).astype("int64"),
        "income": rng.gamma(2.0, 30_000, n),
    })


SNIPPET = """\
import narwhals as nw            # row-wise expressions for any backend
import pandas as pd
import dpframe as dpf            # importing registers the .dp accessor / namespaces

df = pd.read_parquet("census.parquet")
pf = dpf.protect(df, epsilon=1.0, delta=1e-6,
                 bounds={"age": (0, 120), "income": (0, 250_000)},
                 missing={"income": 0.0})        # public rule for missing values

pf.dp.count(epsilon=0)                           # -> float: n is public, exact, free
pf.dp.mean("age", epsilon=0.3)                   # mechanism="auto" by default, logged
pf.dp.variance("income", epsilon=0.2, mechanism="truncated")
adults = pf.dp.filter(nw.col("age") >= 18)       # a verified, row-wise derivation
adults.dp.mean("income", epsilon=0.2)            # same budget: derived frames share it
pf.dp.budget                                     # spent / remaining epsilon and delta
pf.dp.log                                        # a DataFrame, one row per measurement

table = pf.dp.release(                           # one call, epsilon split across queries
    {"n": dpf.count(), "mean_age": dpf.mean("age"), "var_income": dpf.variance("income")},
    epsilon=0.3)                                 # -> one-row frame; its log travels with it
table.to_parquet("release.parquet")             # log stored in the file's metadata
"""


def test_design_snippet_verbatim_pandas(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _census().to_parquet("census.parquet")
    ns: dict = {}
    exec(compile(SNIPPET, "snippet", "exec"), ns)
    pf, table = ns["pf"], ns["table"]
    assert isinstance(table, pd.DataFrame) and table.shape == (1, 3)
    # 0 + 0.3 + 0.2 + 0.2 + 0.3 (the count of the public size is free), and it fitted:
    assert pf.dp.budget.epsilon_spent == pytest.approx(1.0)
    assert pf.dp.budget.epsilon_remaining == pytest.approx(0.0, abs=1e-12)
    log = pf.dp.log
    assert isinstance(log, pd.DataFrame)
    assert set(log["release_id"]) == {1, 2, 3, 4, 5}
    assert math.isclose(log["epsilon"].sum(), 1.0)
    assert (log["random_source"] == "secure").all()
    assert set(log["derivation"]) == {"protect", "protect > filter"}
    # age is int64 and income has a fill value: only the filtered release has a private size
    assert set(log.loc[log["derivation"] == "protect", "size"]) == {"public"}
    saved = dpf.read_log("release.parquet")
    assert saved["version"] == 2 and len(saved["entries"]) == len(log)  # 2: keys by reference
    # a share that truly exceeds the budget is refused and spends nothing
    with pytest.raises(dpf.BudgetExceededError):
        pf.dp.mean("age", epsilon=1e-6)
    assert pf.dp.budget.epsilon_spent == pytest.approx(1.0)


@pytest.mark.backends("polars", "polars-lazy")
def test_design_snippet_polars(constructor, tmp_path):
    log = _polars_snippet(constructor(_census()), constructor.lazy,
                          tmp_path / "release.parquet")
    engine = log["engine"][0]
    assert engine.startswith("polars-lazy" if constructor.lazy else "polars")
    if not constructor.lazy:
        assert not engine.startswith("polars-lazy")


def _polars_snippet(frame, lazy, path):
    pf = dpf.protect(frame, epsilon=1.0, delta=1e-6,
                     bounds={"age": (0, 120), "income": (0, 250_000)},
                     missing={"income": 0.0})
    a = pf.dp.count(epsilon=0)
    b = pf.dp.mean("age", epsilon=0.3)
    c = pf.dp.variance("income", epsilon=0.2, mechanism="truncated")
    # derived frames find their budget by provenance (no session needed): a LazyFrame's
    # native plan is verified; an eager frame derives through .dp
    adults = pf.filter(pl.col("age") >= 18) if lazy else pf.dp.filter(pl.col("age") >= 18)
    d = adults.dp.mean("income", epsilon=0.2)
    for v in (a, b, c, d):
        assert isinstance(v, float)
    assert 0 <= b <= 120
    table = pf.dp.release(
        {"n": dpf.count(), "mean_age": dpf.mean("age"), "var_income": dpf.variance("income")},
        epsilon=0.3)
    assert isinstance(table, pl.DataFrame) and table.shape == (1, 3)
    table.dp.write_parquet(path)
    assert pf.dp.budget.epsilon_remaining == pytest.approx(0.0, abs=1e-12)
    log = pf.dp.log
    assert isinstance(log, pl.DataFrame)
    assert log["release_id"].n_unique() == 5
    assert len(dpf.read_log(path)["entries"]) == log.height
    with pytest.raises(dpf.BudgetExceededError):
        pf.dp.mean("age", epsilon=1e-6)
    return log


def test_lazy_frame_stays_lazy_only_aggregates_collected(monkeypatch):
    """The LazyFrame itself is never collected: only the aggregation plan is (or nothing, when
    the plan is the bare scan of dpframe's in-memory copy, which the numpy kernel reads)."""
    lf = pl.from_pandas(_census()).lazy()
    pf = dpf.protect(lf, epsilon=1.0, bounds={"age": (0, 120)})
    collected_widths = []
    real_collect = pl.LazyFrame.collect

    def spy(self, *a, **k):
        out = real_collect(self, *a, **k)
        collected_widths.append(out.shape)
        return out

    monkeypatch.setattr(pl.LazyFrame, "collect", spy)
    pf.dp.mean("age", epsilon=0.5, random_state=0)
    pf.dp.filter(pl.col("age") >= 18).dp.mean("age", epsilon=0.2, random_state=0)
    assert collected_widths and all(shape[0] == 1 for shape in collected_widths)
