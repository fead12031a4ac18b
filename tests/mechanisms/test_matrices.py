"""Tests of dpframe.mechanisms.matrices (the papers' formulas: proportions, covariance/correlation,
PSD projection) and of the same analyses through ``.dp`` (describe, proportions, cov/corr)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpframe.errors import ParameterError
from dpframe.mechanisms.matrices import (
    correlation_from_covariance,
    covariance_sensitivity,
    nearest_psd,
    project_psd,
    proportion_epsilon_share,
    release_covariance,
    release_proportions,
    variance_domain_upper,
    variance_sensitivity,
)

MECHS = ("bounded", "truncated")


def _random_symmetric(rng: np.random.Generator, p: int) -> np.ndarray:
    a = rng.normal(size=(p, p))
    return a + a.T


def _eig_clip(a: np.ndarray) -> np.ndarray:
    vals, vecs = np.linalg.eigh(0.5 * (a + a.T))
    return vecs @ np.diag(np.maximum(vals, 0.0)) @ vecs.T


# -- proportions ----------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", MECHS)
@pytest.mark.parametrize("method", ["rescale", "all_but_one"])
@pytest.mark.parametrize("epsilon", [0.01, 0.5, 5.0])
def test_proportions_sum_to_one_and_in_unit_interval(mechanism, method, epsilon):
    rng = np.random.default_rng(1)
    counts = rng.multinomial(60, [0.05, 0.15, 0.3, 0.5], size=200)
    rel = release_proportions(counts, 60, epsilon, mechanism=mechanism, method=method,
                              random_state=rng)
    assert rel.values.shape == (200, 4)
    assert np.allclose(rel.values.sum(axis=1), 1.0, atol=1e-12)
    assert (rel.values >= 0).all() and (rel.values <= 1).all()


def test_proportions_single_release_and_series():
    rel = release_proportions([10, 20, 30, 40], 100, 1.0, keys=["a", "b", "c", "d"],
                              column="cat", random_state=3)
    s = rel.to_series()
    assert list(s.index) == ["a", "b", "c", "d"]
    assert math.isclose(s.sum(), 1.0)
    assert len(rel.records) == 4
    assert all(r.epsilon == 0.5 and r.sensitivity >= 1 / 100 for r in rel.records)
    assert rel.records[0].columns == ("cat",)


def test_proportions_budget_share():
    assert proportion_epsilon_share(1) == 1.0
    assert proportion_epsilon_share(2) == 0.5
    assert proportion_epsilon_share(10) == 0.5
    rel = release_proportions([3, 7], 10, 1.0, method="all_but_one", random_state=0)
    assert len(rel.records) == 1 and rel.records[0].epsilon == 1.0
    rel = release_proportions([3, 7, 5], 15, 1.0, method="all_but_one", remainder=0,
                              random_state=0)
    assert len(rel.records) == 2 and all(r.epsilon == 0.5 for r in rel.records)
    assert np.isnan(rel.raw[0]) and not np.isnan(rel.raw[1:]).any()


def test_proportions_deterministic_with_seed():
    a = release_proportions([5, 5, 10], 20, 1.0, random_state=11).values
    b = release_proportions([5, 5, 10], 20, 1.0, random_state=11).values
    assert np.array_equal(a, b)


def test_proportions_errors():
    with pytest.raises(ParameterError):
        release_proportions([1, 2], 2, 1.0)  # counts exceed n
    with pytest.raises(ParameterError):
        release_proportions([1, 2], 3, 1.0, mechanism="laplace")
    with pytest.raises(ParameterError):
        release_proportions([1, 2], 3, 0.0)
    with pytest.raises(ParameterError):
        release_proportions([1, 2], 3, 1.0, method="tree")
    with pytest.raises(ParameterError):
        release_proportions([3], 3, 1.0)


# -- sensitivities (brute force on small n) -------------------------------------------------
def test_variance_and_covariance_sensitivity_brute_force():
    n = 3
    lx, ux, ly, uy = 0.0, 1.0, -1.0, 2.0
    gx = np.linspace(lx, ux, 3)  # the extremes of both bounds are attained on these grids
    gy = np.linspace(ly, uy, 3)
    pts = list(itertools.product(gx, gy))
    worst_v, worst_c, biggest_v = 0.0, 0.0, 0.0
    for data in itertools.product(pts, repeat=n):
        arr = np.array(data)
        cov = np.cov(arr.T, ddof=1)
        biggest_v = max(biggest_v, cov[0, 0])
        for new in pts:
            other = arr.copy()
            other[0] = new
            cov2 = np.cov(other.T, ddof=1)
            worst_v = max(worst_v, abs(cov2[0, 0] - cov[0, 0]))
            worst_c = max(worst_c, abs(cov2[0, 1] - cov[0, 1]))
    assert worst_v <= variance_sensitivity(n, ux - lx) + 1e-12
    assert worst_c <= covariance_sensitivity(n, ux - lx, uy - ly) + 1e-12
    assert math.isclose(worst_v, variance_sensitivity(n, ux - lx), rel_tol=1e-9)
    assert math.isclose(worst_c, covariance_sensitivity(n, ux - lx, uy - ly), rel_tol=1e-9)
    assert biggest_v <= variance_domain_upper(n, ux - lx) + 1e-12


# -- PSD projection -------------------------------------------------------------------------
@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_project_psd_matches_eigen_clipping(p):
    rng = np.random.default_rng(p)
    for _ in range(20):
        a = _random_symmetric(rng, p)
        assert np.allclose(project_psd(a), _eig_clip(a), atol=1e-10)
        assert np.allclose(nearest_psd(a), _eig_clip(a), atol=1e-10)


def test_project_psd_symmetrises_nonsymmetric_input():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 4))
    x = project_psd(a)
    assert np.allclose(x, x.T)
    assert np.allclose(x, _eig_clip(0.5 * (a + a.T)), atol=1e-10)


@pytest.mark.parametrize("p", [2, 4, 6])
def test_nearest_psd_idempotent_on_psd_input(p):
    rng = np.random.default_rng(10 + p)
    for _ in range(10):
        g = rng.normal(size=(p, p))
        s = g @ g.T
        assert np.allclose(nearest_psd(s), s, atol=1e-10)
        assert np.allclose(nearest_psd(s, diagonal=np.diag(s)), s, atol=1e-10)
        once = nearest_psd(_random_symmetric(rng, p), diagonal=np.ones(p))
        assert np.allclose(nearest_psd(once, diagonal=np.ones(p)), once, atol=1e-9)


def test_nearest_correlation_higham_example():
    """Higham (2002, §4): nearest correlation matrix of [[1,1,0],[1,1,1],[0,1,1]]."""
    a = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    x = nearest_psd(a, diagonal=np.ones(3))
    assert np.allclose(x[0, 1], 0.7607, atol=1e-4)
    assert np.allclose(x[0, 2], 0.1573, atol=1e-4)
    assert np.allclose(x[1, 2], 0.7607, atol=1e-4)


@pytest.mark.parametrize("seed", range(5))
def test_nearest_psd_with_diagonal_is_optimal(seed):
    """First-order optimality for the projection onto the convex set S ∩ U_d:
    ⟨A − X, Y − X⟩ ≤ 0 for every Y in the set."""
    rng = np.random.default_rng(seed)
    p = 5
    a = _random_symmetric(rng, p)
    d = rng.uniform(0.5, 2.0, size=p)
    x = nearest_psd(a, diagonal=d)
    assert np.linalg.eigvalsh(x).min() >= -1e-10
    assert np.allclose(np.diag(x), d)
    assert np.allclose(x, x.T)
    for _ in range(200):
        g = rng.normal(size=(p, p + 1))
        y = g @ g.T
        s = np.sqrt(d / np.diag(y))
        y = y * np.outer(s, s)
        assert np.sum((a - x) * (y - x)) <= 1e-6 * (1 + np.linalg.norm(a))
    assert np.linalg.norm(a - x) <= np.linalg.norm(a - np.diag(d)) + 1e-9


def test_nearest_psd_zero_diagonal_entry():
    a = np.array([[1.0, 0.9, 0.5], [0.9, 0.0, 0.3], [0.5, 0.3, 1.0]])
    x = nearest_psd(a, diagonal=[1.0, 0.0, 1.0])
    assert np.linalg.eigvalsh(x).min() >= -1e-10
    assert np.allclose(x[1], 0.0) and np.allclose(x[:, 1], 0.0)


# -- covariance -----------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", MECHS)
@pytest.mark.parametrize("p", [2, 3, 5])
def test_covariance_psd_symmetric_and_correlations_bounded(mechanism, p):
    rng = np.random.default_rng(p)
    n = 40
    bounds = [(0.0, 1.0)] * p
    for trial in range(15):
        x = rng.uniform(0, 1, size=(n, p))
        s = np.cov(x.T, ddof=1)
        rel = release_covariance(s, n, bounds, 0.5 + trial, mechanism=mechanism,
                                 random_state=rng)
        assert np.allclose(rel.cov, rel.cov.T)
        assert np.linalg.eigvalsh(rel.cov).min() >= -1e-10
        assert np.allclose(np.diag(rel.cov), np.diag(rel.raw))
        assert (np.abs(rel.corr) <= 1.0).all()
        assert np.allclose(np.diag(rel.corr), 1.0)
        assert np.linalg.eigvalsh(rel.corr).min() >= -1e-10
        ub = variance_domain_upper(n, 1.0)
        assert ((np.diag(rel.raw) >= 0) & (np.diag(rel.raw) <= ub)).all()
        off = np.abs(rel.raw) <= np.sqrt(np.outer(np.diag(rel.raw), np.diag(rel.raw))) + 1e-12
        assert off.all()


def test_covariance_records_and_budget_split():
    s = np.array([[1.0, 0.5], [0.5, 2.0]])
    rel = release_covariance(s, 200, [(-3, 3), (-4.5, 4.5)], 1.0, columns=["a", "b"],
                             random_state=0)
    assert [r.statistic for r in rel.records] == ["variance", "variance", "covariance"]
    assert all(math.isclose(r.epsilon, 1 / 3) for r in rel.records)
    assert math.isclose(rel.records[0].sensitivity, 36 / 200, rel_tol=1e-9)
    assert math.isclose(rel.records[2].sensitivity, 54 / 200, rel_tol=1e-9)
    assert rel.records[0].domain == (0.0, variance_domain_upper(200, 6.0))
    frame = rel.cov_frame()
    assert list(frame.columns) == ["a", "b"] and list(frame.index) == ["a", "b"]
    assert list(rel.corr_frame().columns) == ["a", "b"]
    # 2×2 with |S12*| ≤ √(S11* S22*) is already PSD: the projection does not move it
    assert np.allclose(rel.cov, rel.raw)


def test_covariance_large_epsilon_is_accurate():
    s = np.array([[0.08, 0.02], [0.02, 0.05]])
    rel = release_covariance(s, 10_000, [(0, 1), (0, 1)], 1000.0, random_state=1)
    assert np.allclose(rel.cov, s, atol=1e-3)


def test_correlation_from_covariance_zero_variance():
    r = correlation_from_covariance(np.array([[1.0, 0.0], [0.0, 0.0]]))
    assert np.array_equal(r, np.eye(2))


def test_covariance_errors():
    with pytest.raises(ParameterError):
        release_covariance(np.eye(2), 10, [(0, 1)], 1.0)
    with pytest.raises(ParameterError):
        release_covariance(np.eye(2), 1, [(0, 1), (0, 1)], 1.0)
    with pytest.raises(ParameterError):
        release_covariance(np.eye(2), 10, [(1, 0), (0, 1)], 1.0)
    with pytest.raises(ParameterError):
        release_covariance(np.eye(2), 10, [(0, 1), (0, 1)], 1.0, mechanism="truncated",
                           delta=1e-6)


# -- through the frames layer (.dp accessor): the same pipeline as every other statistic --
FILL = {"a": 0.5, "b": 1.0, "c": 0.5}  # public fill values keep n public (cov/corr need it)


def _frame(n: int = 400, seed: int = 0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "a": rng.uniform(-0.1, 1.1, n),  # some values outside the bounds: clamped
        "b": rng.uniform(0, 2, n),
        "cat": rng.choice(["x", "y", "z", "w"], n, p=[0.1, 0.2, 0.3, 0.4]),
    })
    df["c"] = 0.5 * df["a"] + 0.25 * df["b"]
    return df


def _protect(df, epsilon: float = 10.0, missing=None):
    import dpframe as dpf

    return dpf.protect(df, epsilon=epsilon, bounds={"a": (0, 1), "b": (0, 2), "c": (0, 1)},
                       keys={"cat": ["x", "y", "z", "w"]},
                       missing=FILL if missing is None else missing)


def test_exact_covariance_matches_pandas_on_clamped_data():
    """The exact (pre-noise) covariance the pipeline computes — queries.Covariance's
    statistics over the engine's fixed-point sums — equals pandas' on the clamped data."""
    from dpframe import backends
    from dpframe.query.statistics import Covariance, PlanContext

    df = _frame()
    bounds = {"a": (0, 1), "b": (0, 2), "c": (0, 1)}
    ctx = PlanContext(True, len(df), None, all_bounds=bounds)
    plan = Covariance(["a", "b", "c"]).plan(ctx)
    aggs = backends.aggregate(df, plan.aggregates, missing=FILL)
    exact = {m.name: float(m.statistic(aggs)[0]) for m in plan.measurements}
    ref = df.assign(a=df["a"].clip(0, 1), c=df["c"].clip(0, 1))[["a", "b", "c"]].cov()
    # equal up to the fixed-point quantum (2^-22 of the width here)
    for j, cj in enumerate("abc"):
        assert exact[f"variance[{cj}]"] == pytest.approx(ref.iloc[j, j], abs=1e-6)
        for ck in "abc"[j + 1:]:
            assert exact[f"covariance[{cj},{ck}]"] == pytest.approx(ref.loc[cj, ck], abs=1e-6)


@pytest.mark.parametrize("method", ["rescale", "all_but_one"])
def test_accessor_proportions(method):
    pf = _protect(_frame())
    out = pf.dp.proportions("cat", epsilon=1.0, method=method, remainder="x", random_state=1)
    assert list(out["cat"]) == ["x", "y", "z", "w"]
    assert math.isclose(out["proportion"].sum(), 1.0)
    assert ((out["proportion"] >= 0) & (out["proportion"] <= 1)).all()
    assert pf.dp.budget.epsilon_spent == pytest.approx(1.0)
    log = pf.dp.log
    assert (log["query"] == "proportions").all()
    assert log["sensitivity"].iloc[0] == pytest.approx(1 / len(pf), rel=1e-9)
    assert log["mechanism_epsilon"].iloc[0] == pytest.approx(0.5)  # ε/2 per cell


def test_accessor_proportions_same_noise_as_the_formula():
    """Issue 10 item 7: the same all_but_one analysis got 2.2× more noise through one path
    than the other. The frames path now plans exactly what analyses.release_proportions does:
    same per-cell ε share, sensitivity 1/n (plus float slack) and domain [0, 1]."""
    pf = _protect(_frame())
    pf.dp.proportions("cat", epsilon=1.0, method="all_but_one", random_state=1)
    log = pf.dp.log
    rel = release_proportions([40, 80, 120, 160], 400, 1.0, method="all_but_one",
                              random_state=1)
    assert len(log) == 1  # one measurement over the groups (the remainder is not released)
    assert log["mechanism_epsilon"].iloc[0] == pytest.approx(rel.records[0].epsilon)
    assert log["sensitivity"].iloc[0] == pytest.approx(rel.records[0].sensitivity, rel=1e-12)
    assert (log["domain_lower"].iloc[0], log["domain_upper"].iloc[0]) == (0.0, 1.0)


def test_accessor_proportions_private_size_and_errors():
    import narwhals as nw

    from dpframe.errors import ParameterError, PrivateSizeError

    pf = _protect(_frame())
    sub = pf.dp.filter(nw.col("a") > 0.3)
    out = sub.dp.proportions("cat", epsilon=1.0, random_state=2)
    assert math.isclose(out["proportion"].sum(), 1.0)
    with pytest.raises(PrivateSizeError):
        sub.dp.proportions("cat", epsilon=1.0, method="all_but_one")
    with pytest.raises(ParameterError, match="'rescale' or 'all_but_one'"):
        pf.dp.proportions("cat", epsilon=1.0, method="tree")
    with pytest.raises(ParameterError, match="remainder"):
        pf.dp.proportions("cat", epsilon=1.0, method="all_but_one", remainder="nope")
    with pytest.raises(ParameterError, match="random_state"):
        pf.dp.proportions("cat", epsilon=1.0, random_state="abc")
    with pytest.raises(ParameterError, match="random_state"):
        pf.dp.cov(["a", "b"], epsilon=1.0, random_state="abc")
    assert pf.dp.budget.epsilon_spent == pytest.approx(1.0)  # failures spent nothing
    # one pipeline: every mechanism is available; the plain Laplace output is post-processed
    # into [0, 1] with Σ = 1 like the others
    out = pf.dp.proportions("cat", epsilon=1.0, mechanism="laplace", random_state=3)
    assert math.isclose(out["proportion"].sum(), 1.0)
    assert ((out["proportion"] >= 0) & (out["proportion"] <= 1)).all()


def test_accessor_cov_and_corr():
    pf = _protect(_frame())
    cov = pf.dp.cov(["a", "b", "c"], epsilon=3.0, random_state=3)
    assert list(cov.columns) == ["a", "b", "c"] and list(cov.index) == ["a", "b", "c"]
    m = cov.to_numpy()
    assert np.allclose(m, m.T) and np.linalg.eigvalsh(m).min() >= -1e-10
    corr = pf.dp.corr(["a", "b", "c"], epsilon=3.0, random_state=4).to_numpy()
    assert (np.abs(corr) <= 1).all() and np.allclose(np.diag(corr), 1.0)
    log = pf.dp.log
    assert len(log) == 12  # 3 variances + 3 covariances, twice
    assert log["epsilon"].sum() == pytest.approx(6.0)
    assert pf.dp.budget.epsilon_spent == pytest.approx(6.0)
    assert (log["size"] == "public").all()
    # cov quantises (exact fixed-point sums): the quantum is logged (issue 10 item 7)
    assert log["fixed_point_quantum"].notna().all()


def test_accessor_cov_refuses_private_size_and_missing_bounds():
    import narwhals as nw

    import dpframe as dpf
    from dpframe.errors import BoundsError, PrivateSizeError

    df = _frame()
    pf = dpf.protect(df, epsilon=1.0, bounds={"a": (0, 1), "b": (0, 2)}, missing=0.5)
    with pytest.raises(PrivateSizeError):
        pf.dp.filter(nw.col("a") > 0.5).dp.cov(["a", "b"], epsilon=0.5)
    with pytest.raises(BoundsError):
        pf.dp.cov(["a", "c"], epsilon=0.5)
    # float columns under the "drop" policy: the size is private (a schema fact, not data)
    dropping = dpf.protect(_frame(), epsilon=1.0, bounds={"a": (0, 1), "b": (0, 2)})
    with pytest.raises(PrivateSizeError, match="missing="):
        dropping.dp.cov(["a", "b"], epsilon=0.5)
    # a derivation that keeps every row keeps the public size
    kept = pf.dp.select("a", "b")
    assert kept.dp.cov(["a", "b"], epsilon=0.5, random_state=0).shape == (2, 2)
    assert pf.dp.budget.epsilon_spent == 0.5
    assert dropping.dp.budget.epsilon_spent == 0.0


def test_accessor_describe():
    import narwhals as nw

    pf = _protect(_frame())
    t = pf.dp.describe(epsilon=1.2, columns=["a", "b"], random_state=5)
    assert list(t.index) == ["count", "mean", "std", "lower", "upper"]
    assert (t.loc["count"] >= 0).all() and (t.loc["count"] <= len(pf)).all()
    assert t.loc["count", "a"] == t.loc["count", "b"]  # one noisy count for the table
    assert t.loc["upper", "b"] == 2.0
    log = pf.dp.log
    assert list(log["name"]) == ["count", "mean[a]", "std[a]", "mean[b]", "std[b]"]
    assert log["epsilon"].sum() == pytest.approx(1.2)
    sub = pf.dp.filter(nw.col("b") > 1).dp.describe(epsilon=0.5, columns=["a"],
                                                    random_state=6)
    assert 0 <= sub.loc["count", "a"] <= len(pf)


def test_accessor_polars():
    import polars as pl  # a dependency of dpframe: never skipped

    import dpframe as dpf

    df = pl.from_pandas(_frame())
    pf = dpf.protect(df.lazy(), epsilon=5.0, bounds={"a": (0, 1), "b": (0, 2)},
                     keys={"cat": ["x", "y", "z", "w"]}, missing={"a": 0.5, "b": 1.0})
    cov = pf.dp.cov(["a", "b"], epsilon=1.0, random_state=1)
    assert cov.columns == ["column", "a", "b"]
    props = pf.dp.proportions("cat", epsilon=1.0, random_state=1)
    assert props["proportion"].sum() == pytest.approx(1.0)
    desc = pf.dp.describe(epsilon=1.0, random_state=1)
    assert desc["statistic"].to_list() == ["count", "mean", "std", "lower", "upper"]
    assert pf.dp.budget.epsilon_spent == pytest.approx(3.0)


@pytest.mark.backends("pandas", "polars", "polars-lazy", "duckdb", "dask", "spark")
def test_label_columns_of_result_tables_are_refused_before_spending(constructor):
    """A Polars describe table labels its rows in a ``statistic`` column, a cov/corr matrix in
    ``column`` (and ``statistic`` with ``ci=``): a data column of that name would replace the
    labels. Refused on every backend, before anything is read or spent."""
    import dpframe as dpf

    rng = np.random.default_rng(0)
    data = {"statistic": rng.uniform(0, 1, 40), "column": rng.uniform(0, 1, 40),
            "a": rng.uniform(0, 1, 40)}
    pf = dpf.protect(constructor(data), epsilon=5.0, missing=0.5,
                     bounds={"statistic": (0, 1), "column": (0, 1), "a": (0, 1)})
    calls = [lambda: pf.dp.describe(epsilon=1.0),
             lambda: pf.dp.describe(epsilon=1.0, columns=["statistic"]),
             lambda: pf.dp.cov(["column", "a"], epsilon=1.0),
             lambda: pf.dp.corr(["a", "statistic"], epsilon=1.0, ci=0.9)]
    for call in calls:
        with pytest.raises(ParameterError, match="label column"):
            call()
    assert pf.dp.budget.epsilon_spent == 0.0
    assert pf.dp.describe(epsilon=1.0, columns=["a"]).shape[1] in (1, 2)  # others: fine


@pytest.mark.backends("polars", "polars-lazy")
def test_renamed_columns_keep_their_labels(constructor):
    import dpframe as dpf

    data = {"statistic": [0.1, 0.5, 0.9, 0.3], "column": [0.2, 0.4, 0.6, 0.8]}
    pf = dpf.protect(constructor(data), epsilon=5.0, missing=0.5,
                     bounds={"statistic": (0, 1), "column": (0, 1)})
    renamed = pf.dp.rename({"statistic": "s", "column": "c"})
    desc = renamed.dp.describe(epsilon=1.0, random_state=1)
    assert desc.columns == ["statistic", "s", "c"]
    assert desc["statistic"].to_list() == ["count", "mean", "std", "lower", "upper"]
    cov = renamed.dp.cov(["s", "c"], epsilon=1.0, random_state=1, ci=0.9)
    assert cov.columns == ["statistic", "column", "s", "c"]
    assert cov["column"].to_list() == ["s", "c"] * 3
