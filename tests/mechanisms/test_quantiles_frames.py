"""Quantiles and medians on frames (issue 12): one pipeline, verified frames, total releases.

* the bin-count aggregate is exact and the same on every path (numpy kernel, narwhals on pandas
  and Polars, DuckDB), with missing values following the declared rule;
* neighbour pairs (the boundary harness's rows) give the same outcome class and log, and the
  rank distances the mechanism scores change by at most what its ε pays for (Δ = 1 ungrouped;
  per group Δ_q = max(q, 1 − q) at ε/2, a replacement touching two groups by ≤ Δ_q each or
  one group by ≤ 1 ≤ 2Δ_q);
* brute force: the same on every replacement of one row of a small data set;
* the released value follows the mechanism's exact output law (sampling test through the whole
  pipeline); outputs stay inside the bounds, also for empty groups;
* bad input is refused before anything is read or spent.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import narwhals as nw
import numpy as np
import pandas as pd
import polars as pl
import pytest
from helpers.neighbours import NEIGHBOURS, base_data, protect, views, with_row
from scipy import stats

import dpframe as dpf
from dpframe import backends
from dpframe.engine import _aggregation as engine
from dpframe.engine._aggregation import Agg, Bins
from dpframe.mechanisms.quantiles import QuantileMechanism, rank_distances
from dpframe.release._pipeline import exact_measurements

IGNORED = {"time", "ledger_id", "release_id"}


def _comparable(frame: Any) -> list[dict[str, Any]]:
    entries = frame.dp.session.ledger.snapshot_document()["entries"]
    return [{k: v for k, v in e.items() if k not in IGNORED} for e in entries]


# -- the aggregate ------------------------------------------------------------------------
def _messy(n: int = 2000) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    x = rng.normal(40, 30, n)
    x[::17] = np.nan
    x[3], x[5], x[7] = np.inf, -np.inf, 1.7e308
    return pd.DataFrame({"x": x, "i": rng.integers(-50, 150, n),
                         "g": rng.choice(["a", "b", "c", "z"], n),
                         "h": rng.choice([1, 2], n)})


@pytest.mark.parametrize("policy", ["drop", 25.0])
@pytest.mark.parametrize("group", [None, "g", ("g", "h")])
@pytest.mark.parametrize("column", ["x", "i"])
def test_bin_counts_agree_on_every_path(policy, group, column):
    df = _messy()
    agg = Agg("bins", column, bins=Bins(0.0, 100.0, 64))
    keys: Any = None
    if group == "g":
        keys = ["a", "b", "c", "y"]
    elif group is not None:
        keys = list(itertools.product(["a", "b", "y"], [1, 2]))
    frames = {"pandas": df, "polars": pl.from_pandas(df, nan_to_null=False),
              "polars-lazy": pl.from_pandas(df, nan_to_null=False).lazy(),
              "polars-nulls": pl.from_pandas(df)}  # NaN as nulls: the validity bitmap path
    results = {}
    for name, frame in frames.items():
        for method in ("auto", "narwhals"):
            results[name, method] = backends.aggregate(
                frame, [agg], missing={column: policy}, group_by=group, keys=keys,
                method=method)[agg]
    # independent reference: numpy on the clamped, filled values, one group at a time
    values = df[column].to_numpy(dtype=float)
    present = ~np.isnan(values)
    if policy != "drop":
        values = np.where(present, values, policy)
        present = np.ones_like(present)
    cols = [] if group is None else [group] if isinstance(group, str) else list(group)
    tuples = [()] if not cols else [k if len(cols) > 1 else (k,) for k in keys]
    expected = np.zeros((len(tuples), 64))
    for gi, key in enumerate(tuples):
        mask = present.copy()
        for c, v in zip(cols, key, strict=True):
            mask &= (df[c] == v).to_numpy()
        x = np.clip(values[mask], 0.0, 100.0)
        j = np.minimum(np.floor((x - 0.0) * (64 / 100.0)), 63).astype(int)
        expected[gi] = np.bincount(j, minlength=64)
    for key, got in results.items():
        np.testing.assert_array_equal(got, expected, err_msg=str(key))


@pytest.mark.backends("duckdb", "spark", "dask")
def test_bin_counts_in_the_engines_equal_numpy(constructor):
    df = _messy(500)
    agg = Agg("bins", "x", bins=Bins(0.0, 100.0, 32))
    got = backends.aggregate(constructor(df), [agg], missing={"x": "drop"}, group_by="g",
                           keys=["a", "b", "c"])[agg]
    ref = backends.aggregate(df, [agg], missing={"x": "drop"}, group_by="g",
                           keys=["a", "b", "c"], method="numpy")[agg]
    np.testing.assert_array_equal(got, ref)


# -- neighbours ----------------------------------------------------------------------------
def _loss_units(counts: np.ndarray, other: np.ndarray, levels: list[float],
                grouped: bool) -> float:
    """The privacy loss of the change, in units of each level's ε (largest over levels).

    Ungrouped (Δ = 1): the largest change of a rank distance. Grouped (each group at ε/2 with
    Δ_q = max(q, 1 − q)): Σ over groups of the group's largest change / Δ_q, halved — at most
    1 when a replaced row leaves one group and joins another (each changes by ≤ Δ_q) and when
    it stays in its group (one group changes by ≤ 1 ≤ 2Δ_q)."""
    worst = 0.0
    for q in levels:
        gap = np.max(np.abs(rank_distances(counts, q) - rank_distances(other, q)), axis=-1)
        units = float(gap.max()) if not grouped else float(gap.sum()) / (2 * max(q, 1 - q))
        worst = max(worst, units)
    return worst


@pytest.mark.parametrize("missing", ["drop", 50.0])
@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("view", ["root", "filter", "with_columns", "rename"])
@pytest.mark.parametrize("pair", list(NEIGHBOURS))
@pytest.mark.backends("pandas", "polars", "polars-lazy", "duckdb")
def test_neighbours_same_outcome_and_log_and_rank_distances_within_sensitivity(
        constructor, pair, view, grouped, missing):
    col = {"with_columns": "age2", "rename": "years"}.get(view, "age")
    levels = [0.1, 0.5, 0.9]
    queries = {"q": dpf.quantile(col, levels, bins=32), "m": dpf.median(col, bins=32)}
    frames, outcomes = [], []
    for row in NEIGHBOURS[pair]:
        root = protect(constructor, with_row(base_data(), **row),
                       missing={"age": missing, "income": 0.0})
        frame = views()[view](root)
        frames.append(frame)
        target = frame.dp.groupby("g") if grouped else frame.dp
        table = target.release(queries, epsilon=1.0, random_state=3)
        outcomes.append((table.shape, list(table.columns), _comparable(frame)))
    assert outcomes[0] == outcomes[1]
    group = {"group_by": "g"} if grouped else {}
    exact = [exact_measurements(f, queries, **group) for f in frames]
    for key, (counts, sensitivity) in exact[0].items():
        other, sensitivity2 = exact[1][key]
        assert sensitivity == sensitivity2
        assert counts.shape == other.shape == ((3, 32) if grouped else (1, 32))
        lv = levels if key[0] == "q" else [0.5]
        assert _loss_units(counts, other, lv, grouped) <= 1.0 + 1e-12, key


@pytest.mark.parametrize("grouped", [False, True])
def test_brute_force_rank_distance_sensitivity(grouped):
    """Every replacement of one row of a small data set (values on a grid that covers every
    bin, below and above the bounds, missing) moves every rank distance by at most the logged
    Δ, for every level, in every group."""
    grid = [-5.0, 0.0, 12.5, 37.5, 50.0, 62.5, 99.0, 100.0, 130.0, math.nan]
    base = {"age": [12.5, 50.0, 50.0, 99.0], "g": ["a", "b", "a", "b"]}
    levels = [0.0, 0.25, 0.5, 0.9, 1.0]
    queries = {"q": dpf.quantile("age", levels, bins=8)}
    group = {"group_by": "g"} if grouped else {}

    def measure(data: dict[str, list[Any]]) -> tuple[np.ndarray, float]:
        pf = dpf.protect(pd.DataFrame(data), epsilon=1e6, bounds={"age": (0.0, 100.0)},
                         keys={"g": ["a", "b"]})
        return exact_measurements(pf, queries, **group)["q", "quantile"]

    counts, sensitivity = measure(base)
    assert sensitivity == (max(max(q, 1 - q) for q in levels) if grouped else 1.0)
    for i in range(len(base["age"])):
        for value, key in itertools.product(grid, ["a", "b"]):
            data = {k: list(v) for k, v in base.items()}
            data["age"][i], data["g"][i] = value, key
            other, _ = measure(data)
            assert _loss_units(counts, other, levels, grouped) <= 1.0 + 1e-12


# -- distribution and outputs --------------------------------------------------------------
@pytest.mark.slow
def test_pipeline_output_follows_the_mechanisms_exact_law():
    """The released median (bin midpoints) through frame.dp.median, seeded, against the exact
    output law of the mechanism on the exact bin counts (chi-square, p > 1e-3)."""
    bins, lo, hi, eps = 8, 0.0, 80.0, 0.5
    df = pd.DataFrame({"x": [5.0, 15.0, 15.0, 25.0, 35.0, 45.0, 55.0, 75.0, 79.0]})
    pf = dpf.protect(df, epsilon=1e9, bounds={"x": (lo, hi)})
    rng = np.random.default_rng(2026)
    draws = [pf.dp.median("x", epsilon=eps, bins=bins, random_state=rng) for _ in range(3000)]
    j = np.floor((np.asarray(draws) - lo) / (hi - lo) * bins).astype(int)
    counts = np.bincount(j, minlength=bins)
    exact = np.histogram(np.clip(df["x"], lo, hi), bins=bins, range=(lo, hi))[0]
    probs = QuantileMechanism(eps, lo, hi, 0.5, bins=bins).probabilities(exact)
    expected = probs * len(draws)
    keep = expected >= 5
    observed = np.append(counts[keep], counts[~keep].sum())
    wanted = np.append(expected[keep], expected[~keep].sum())
    if wanted[-1] == 0:
        observed, wanted = observed[:-1], wanted[:-1]
    assert stats.chisquare(observed, wanted * observed.sum() / wanted.sum()).pvalue > 1e-3


def test_outputs_inside_bounds_and_sorted_also_for_empty_groups(constructor):
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0] * 10, "g": ["a", "b"] * 20})
    pf = dpf.protect(constructor(df), epsilon=1e3, bounds={"x": (0.0, 10.0)},
                     keys={"g": ["a", "b", "empty"]})
    table = pf.dp.groupby("g").quantile("x", [0.9, 0.1, 0.5], epsilon=1.0, random_state=1)
    cols = ["quantile[0.9]", "quantile[0.1]", "quantile[0.5]"]
    values = np.column_stack([np.asarray(list(table[c]), dtype=float) for c in cols])
    assert values.shape == (3, 3)
    assert np.all((values >= 0.0) & (values <= 10.0))
    assert np.all(values[:, 1] <= values[:, 2]) and np.all(values[:, 2] <= values[:, 0])
    med = pf.dp.median("x", epsilon=1.0)
    assert 0.0 <= med <= 10.0
    levels = pf.dp.quantile("x", [0.25, 0.75], epsilon=1.0)
    assert list(levels["q"]) == [0.25, 0.75]
    assert levels.dp.log.shape[0] == 3  # the table carries the log of its release


def test_accurate_on_real_sized_data_and_logged():
    rng = np.random.default_rng(4)
    income = rng.lognormal(10, 0.8, 20_000)
    pf = dpf.protect(pd.DataFrame({"income": income}), epsilon=10,
                     bounds={"income": (0.0, 500_000.0)}, missing={"income": 0.0})
    median = pf.dp.median("income", epsilon=1.0)
    true = float(np.median(np.clip(income, 0, 500_000)))
    assert abs(median - true) < 0.02 * true
    entry = pf.dp.session.ledger.snapshot_document()["entries"][-1]
    assert entry["mechanism"] == "exponential-quantile"
    assert entry["epsilon"] == 1.0 and entry["sensitivity"] == 1.0
    assert entry["domain_lower"] == 0.0 and entry["domain_upper"] == 500_000.0
    assert "262144 equal public bins" in entry["formulation"]  # 2^⌈log₂(8·ε·n)⌉, n = 20 000
    assert entry["random_source"] == "secure"
    assert pf.dp.budget.epsilon_spent == pytest.approx(1.0)


def test_quantiles_in_one_release_with_other_queries(constructor):
    df = pd.DataFrame({"x": np.linspace(0, 100, 101), "g": ["a"] * 101})
    pf = dpf.protect(constructor(df), epsilon=100, bounds={"x": (0.0, 100.0)},
                     keys={"g": ["a"]})
    table = pf.dp.release({"n": dpf.count(), "iqr": dpf.quantile("x", [0.25, 0.75]),
                           "med": dpf.median("x")}, epsilon=10.0)
    assert list(table.columns) == ["n", "iqr[0.25]", "iqr[0.75]", "med"]
    entries = pf.dp.session.ledger.snapshot_document()["entries"]
    assert [e["name"] for e in entries] == ["n", "iqr", "med"]
    assert math.fsum(e["epsilon"] for e in entries) == pytest.approx(10.0)


# -- refusals before anything is read --------------------------------------------------------
@pytest.mark.parametrize("call, error", [
    (lambda pf: pf.dp.median("nobounds", epsilon=1), dpf.BoundsError),
    (lambda pf: pf.dp.median("s", epsilon=1), dpf.UnsupportedInputError),
    (lambda pf: pf.dp.quantile("x", 50, epsilon=1), dpf.ParameterError),
    (lambda pf: pf.dp.quantile("x", [0.5, 0.5], epsilon=1), dpf.ParameterError),
    (lambda pf: pf.dp.quantile("x", [], epsilon=1), dpf.ParameterError),
    (lambda pf: pf.dp.quantile("x", True, epsilon=1), dpf.ParameterError),
    (lambda pf: pf.dp.median("x", epsilon=1, bins=1), dpf.ParameterError),
    (lambda pf: pf.dp.median("x", epsilon=1, bins=2.5), dpf.ParameterError),
    (lambda pf: pf.dp.median("x", epsilon=0), dpf.ParameterError),
    (lambda pf: pf.dp.median("x", epsilon=1e-300), dpf.ParameterError),
    (lambda pf: pf.dp.epsilon_for(dpf.median("x"), 1.0), dpf.ParameterError),
])
def test_bad_input_is_refused_before_reading(call, error, monkeypatch):
    df = pd.DataFrame({"x": [1.0, 2.0], "nobounds": [1.0, 2.0], "s": ["a", "b"]})
    pf = dpf.protect(df, epsilon=1, bounds={"x": (0.0, 5.0)})
    reads = []
    monkeypatch.setattr(engine, "_bin_counts", lambda *a, **k: reads.append(a))
    with pytest.raises(error):
        call(pf)
    assert reads == [] and pf.dp.budget.epsilon_spent == 0


@pytest.mark.parametrize("bounds", [(-1e308, 1e308), (0.0, 1e-310), (-1e-320, 1e-320)])
def test_extreme_bounds_bin_every_value(bounds):
    """Binning halves before subtracting and divides by the public u/2 − l/2, so no value —
    ±1e308, inf, the bounds themselves, subnormals — can produce NaN or overflow, even when
    u − l or B/(u − l) is not a finite double."""
    values = [0.0, 1e300, -1e300, 1e308, -1e308, math.inf, -math.inf, bounds[0], bounds[1],
              5e-324]
    pf = dpf.protect(pd.DataFrame({"x": values}), epsilon=10, bounds={"x": bounds})
    for method in ("numpy", "narwhals"):
        agg = Agg("bins", "x", bins=Bins(float(bounds[0]), float(bounds[1]), 64))
        counts = backends.aggregate(pd.DataFrame({"x": values}), [agg], missing={"x": "drop"},
                                  method=method)[agg]
        assert counts.sum() == len(values)
    assert bounds[0] <= pf.dp.median("x", epsilon=1.0) <= bounds[1]


def test_bounds_too_close_to_bin_are_refused_before_reading():
    pf = dpf.protect(pd.DataFrame({"x": [0.0, 1.0]}), epsilon=1, bounds={"x": (0.0, 5e-324)})
    with pytest.raises(dpf.ParameterError, match="upper/2"):
        pf.dp.median("x", epsilon=1.0)
    assert pf.dp.budget.epsilon_spent == 0


def test_accuracy_reports_the_rank_error_before_spending():
    pf = dpf.protect(pd.DataFrame({"x": [1.0] * 100}), epsilon=1, bounds={"x": (0.0, 5.0)})
    table = pf.dp.accuracy({"m": dpf.median("x")}, epsilon=1.0)
    note = table["note"].iloc[0]
    lam = QuantileMechanism(1.0, 0.0, 5.0, 0.5).coefficients[0]
    assert f"±{math.log(2**16 / 0.05) / lam:.3g} rows" in note
    assert pf.dp.budget.epsilon_spent == 0


def test_a_derived_column_can_be_summarised_by_its_quantiles():
    pf = dpf.protect(pl.DataFrame({"x": [float(i) for i in range(200)]}), epsilon=10,
                     bounds={"x": (0.0, 200.0)})
    older = pf.dp.filter(nw.col("x") >= 100)
    med = older.dp.median("x", epsilon=5.0, random_state=0)
    assert 120 <= med <= 180


@pytest.mark.parametrize("grouped", [False, True])
def test_brute_force_with_several_rows_per_person(grouped):
    """Privacy unit with k = 2 rows: replacing ALL rows of one person (1–3 rows, anywhere, in any
    group) moves the rank distances by at most what ε pays for — ungrouped by ≤ k (logged
    sensitivity k), grouped Σ over groups ≤ 2·g'·k (each group at ε·½/g', calibrated at ε/k
    for a single-row change of ≤ 1), for a fixed bounding seed (bounding is unit-local)."""
    k = 2
    background = {"pid": [1, 1, 1, 2, 2], "age": [10.0, 60.0, 95.0, 40.0, 40.0],
                  "g": ["a", "b", "a", "b", "b"]}
    levels = [0.25, 0.5, 0.9]
    queries = {"q": dpf.quantile("age", levels, bins=8)}
    group = {"group_by": "g"} if grouped else {}

    def measure(rows: list[tuple[float, str]]) -> tuple[np.ndarray, float]:
        data = {c: list(v) for c, v in background.items()}
        for age, key in rows:
            data["pid"].append(3)
            data["age"].append(age)
            data["g"].append(key)
        pf = dpf.protect(pd.DataFrame(data), epsilon=1e6, bounds={"age": (0.0, 100.0)},
                         keys={"g": ["a", "b"]}, privacy_unit="pid", max_rows_per_unit=k)
        return exact_measurements(pf, queries, **group)["q", "quantile"]

    choices = [(5.0, "a"), (55.0, "b"), (120.0, "a"), (math.nan, "b")]
    persons = [list(p) for r in (1, 2, 3) for p in itertools.product(choices, repeat=r)][:60]
    measured = [measure(p) for p in persons]
    sensitivity = measured[0][1]
    assert sensitivity == k * 1.0
    touched = min(k, k)  # g' = min(g, k), g defaults to k
    for (a, _), (b, _) in itertools.combinations(measured, 2):
        for q in levels:
            gap = np.max(np.abs(rank_distances(a, q) - rank_distances(b, q)), axis=-1)
            assert (gap.sum() if grouped else gap.max()) <= (2 * touched * k if grouped
                                                              else k) + 1e-12
