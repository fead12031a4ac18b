"""Derived frames share one ledger and have a private size (decided by provenance)."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import polars as pl
import pytest

import dpframe as dpf


@pytest.fixture
def pf():
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"age": rng.integers(0, 100, 300), "income": rng.uniform(0, 1e5, 300),
                       "region": rng.choice(["n", "s"], 300)})
    return dpf.protect(df, epsilon=1.0, bounds={"age": (0, 120), "income": (0, 1e5)})


def _derived_pandas(pf):
    return {
        "filter": pf[pf.age >= 18],
        "copy": pf.copy(),
        "deepcopy": copy.deepcopy(pf),
        "assign": pf.assign(age2=pf.age * 2),
        "head": pf.head(50),
        "concat": pd.concat([pf.head(10), pf.tail(10)]),
        "dropna": pf.dropna(),
        "sample": pf.sample(20, random_state=0),
        "self-merge-columns": pf.merge(pf[["region"]].drop_duplicates(), on="region"),
        "columns": pf[["age", "income"]],
    }


def test_pandas_derived_frames_share_one_ledger_and_are_private(pf):
    spent = 0.0
    for name, frame in _derived_pandas(pf).items():
        assert frame.dp.session is pf.dp.session, name
        assert not frame.dp.is_size_public, name
        frame.dp.mean("age", epsilon=0.05, random_state=1)
        spent += 0.05
        assert pf.dp.budget.epsilon_spent == pytest.approx(spent), name
    assert pf.dp.is_size_public
    sizes = pf.dp.log["size"].tolist()
    assert set(sizes) == {"private"}
    assert pf.dp.log["formulation"].str.contains("noisy count").all()


def test_over_budget_raises_and_leaves_budget_unchanged(pf):
    pf[pf.age > 30].dp.mean("income", epsilon=0.9, random_state=0)
    before = pf.dp.budget
    n_log = len(pf.dp.log)
    for frame in _derived_pandas(pf).values():
        with pytest.raises(dpf.BudgetExceededError):
            frame.dp.count(epsilon=0.2)
        with pytest.raises(dpf.BudgetExceededError):
            frame.dp.release({"a": dpf.mean("age"), "b": dpf.count()}, epsilon=0.11)
    assert pf.dp.budget == before and len(pf.dp.log) == n_log


def test_merge_with_unprotected_frame_drops_attrs_name_the_session(pf):
    lookup = pd.DataFrame({"region": ["n", "s"], "code": [1, 2]})
    joined = pf.merge(lookup, on="region")
    with pytest.raises(dpf.NoLedgerError, match="session="):
        joined.dp.count(epsilon=0.1)
    joined.dp.mean("age", epsilon=0.1, session=pf.dp.session, random_state=0)
    with pf.dp.session:
        joined.dp.count(epsilon=0.1, random_state=0)
    assert pf.dp.budget.epsilon_spent == pytest.approx(0.2)
    assert (pf.dp.log["size"] == "private").all()


def test_deep_copy_keeps_one_ledger_never_a_fresh_budget(pf):
    clone = copy.deepcopy(pf)
    clone.dp.count(epsilon=0.4, random_state=0)
    pf.copy(deep=True).dp.count(epsilon=0.4, random_state=0)
    assert pf.dp.budget.epsilon_spent == pytest.approx(0.8)
    with pytest.raises(dpf.BudgetExceededError):
        clone.dp.count(epsilon=0.3)


def test_dropna_with_nothing_to_drop_is_still_private(pf):
    """pandas returns a copy sharing the index when nothing is dropped: a result-based test
    would call it public in that case only — data-dependent. Provenance says private."""
    d = pf.dropna()
    assert not d.dp.is_size_public


def test_protect_does_not_mark_the_callers_frame():
    df = pd.DataFrame({"x": [0.1, 0.2]})
    pf = dpf.protect(df, epsilon=1.0, bounds={"x": (0, 1)})
    assert "dpframe" not in df.attrs and pf is not df
    with pytest.raises(dpf.NoLedgerError, match=r"dpf\.protect"):
        df.dp.count(epsilon=0.1)


def test_in_place_row_mutation_of_the_protected_frame_is_refused(pf):
    pf.loc[10_000] = [1, 1.0, "n"]  # enlarges the protected frame in place
    with pytest.raises(dpf.LedgerError, match="changed in place"):
        pf.dp.count(epsilon=0.1)
    assert pf.dp.budget.epsilon_spent == 0


def test_polars_derived_frames_under_one_session():
    rng = np.random.default_rng(1)
    df = pl.DataFrame({"age": rng.integers(0, 100, 200), "income": rng.uniform(0, 1e5, 200)})
    with dpf.Session() as s:
        pf = dpf.protect(df, epsilon=1.0, bounds={"age": (0, 120), "income": (0, 1e5)})
        derived = [
            pf.filter(pl.col("age") >= 18),
            pf.select("age", "income"),
            pf.with_columns(x=pl.col("age") + 1),
            pf.head(10),
            pl.concat([pf.head(5), pf.tail(5)]),
            pf.lazy().filter(pl.col("age") > 3),
            pf.drop_nulls(),
            pf.clone(),
        ]
        for frame in derived:
            frame.dp.mean("income", epsilon=0.1, random_state=0)
            assert not frame.dp.is_size_public
        assert pf.dp.is_size_public
        assert s.budget.epsilon_spent == pytest.approx(0.8)
        with pytest.raises(dpf.BudgetExceededError):
            derived[0].dp.count(epsilon=0.3)
        assert s.budget.epsilon_spent == pytest.approx(0.8)
    # outside the with block: derived frames need the session named
    with pytest.raises(dpf.NoLedgerError, match="session"):
        derived[0].dp.count(epsilon=0.1)
    derived[0].dp.count(epsilon=0.1, session=s)
    assert pf.dp.budget.epsilon_spent == pytest.approx(0.9)  # the root finds its session


def test_polars_session_by_name_and_errors():
    s = dpf.Session(name="census-test")
    pf = dpf.protect(pl.DataFrame({"x": [0.2, 0.4]}), epsilon=1.0, bounds={"x": (0, 1)},
                     session="census-test")
    pf.filter(pl.col("x") > 0).dp.count(epsilon=0.1, session="census-test")
    assert s.budget.epsilon_spent == pytest.approx(0.1)
    with pytest.raises(dpf.LedgerError, match="one ledger per dataset"):
        dpf.protect(pl.DataFrame({"x": [0.1]}), epsilon=1.0, bounds={"x": (0, 1)}, session=s)
    with pytest.raises(dpf.NoLedgerError):
        pf.dp.count(epsilon=0.1, session="no-such-session")
    other = dpf.Session()
    dpf.protect(pl.DataFrame({"x": [0.1]}), epsilon=1.0, bounds={"x": (0, 1)}, session=other)
    with pytest.raises(dpf.LedgerError, match="different session"):
        pf.dp.count(epsilon=0.1, session=other)
    with pytest.raises(dpf.NoLedgerError, match="no protected data"):
        dpf.Session().budget
    with pytest.raises(dpf.NoLedgerError, match="no privacy budget"):
        pl.DataFrame({"x": [1.0]}).dp.count(epsilon=0.1)


def test_private_size_formulations_are_accurate_enough():
    rng = np.random.default_rng(9)
    df = pd.DataFrame({"x": rng.uniform(10, 20, 20_000)})
    pf = dpf.protect(df, epsilon=100.0, bounds={"x": (10, 20)})
    sub = pf[pf.x > 15]
    truth = df.x[df.x > 15]
    assert sub.dp.mean("x", epsilon=5, random_state=1) == pytest.approx(truth.mean(), abs=0.05)
    assert sub.dp.count(epsilon=5, random_state=2) == pytest.approx(len(truth), abs=10)
    assert sub.dp.sum("x", epsilon=5, random_state=3) == pytest.approx(truth.sum(), rel=0.01)
    assert sub.dp.variance("x", epsilon=20, random_state=4) == pytest.approx(truth.var(),
                                                                             rel=0.1)
    assert sub.dp.std("x", epsilon=20, random_state=4) == pytest.approx(truth.std(), rel=0.05)
    log = pf.dp.log
    var_parts = log[log["query"] == "variance"]["part"].tolist()
    assert var_parts == ["count", "sum", "sum_sq"]


def test_public_size_answers_are_accurate_and_in_domain():
    rng = np.random.default_rng(9)
    df = pl.DataFrame({"x": rng.uniform(10, 20, 5_000)})
    pf = dpf.protect(df.lazy(), epsilon=100.0, bounds={"x": (10, 20)})
    for mech in ("bounded", "truncated", "laplace"):
        m = pf.dp.mean("x", epsilon=5, mechanism=mech, random_state=1)
        assert 10 <= m <= 20 and m == pytest.approx(df["x"].mean(), abs=0.05)
    v = pf.dp.variance("x", epsilon=5, random_state=2)
    assert v == pytest.approx(df["x"].var(), rel=0.05)
    s = pf.dp.sum("x", epsilon=5, random_state=3)
    assert s == pytest.approx(df["x"].sum(), rel=1e-3)
    assert 0 <= pf.dp.count(epsilon=5, random_state=4) <= 5000


def test_size_is_public_only_on_the_protected_frame(pf):
    assert pf.dp.size == 300
    with pytest.raises(dpf.PrivateSizeError, match=r"dp\.count"):
        pf.head(3).dp.size


@pytest.mark.parametrize("backend", ["pandas", "polars"])
def test_large_private_size_frames_release_without_magnitude_errors(backend):
    """Unbounded domains (private counts and sums) get a public magnitude from row_cap."""
    x = np.random.default_rng(0).uniform(0, 10, 100_000)
    frame = pd.DataFrame({"x": x}) if backend == "pandas" else pl.DataFrame({"x": x})
    pf = dpf.protect(frame, epsilon=10.0, bounds={"x": (-5, 10)})
    sub = pf[pf.x > 1] if backend == "pandas" else pf.filter(pl.col("x") > 1)
    s = pf.dp.session
    assert sub.dp.count(epsilon=1, random_state=0, session=s) == pytest.approx(
        (x > 1).sum(), abs=50)
    assert sub.dp.sum("x", epsilon=1, random_state=0, session=s) == pytest.approx(
        x[x > 1].sum(), rel=1e-3)
    assert sub.dp.variance("x", epsilon=1, random_state=0, session=s) == pytest.approx(
        x[x > 1].var(ddof=1), rel=0.05)


def test_no_dp_namespace_on_polars_expr():
    assert not hasattr(pl.col("x"), "dp")
