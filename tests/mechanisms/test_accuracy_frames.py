"""Accuracy a user can see (issue 13), through the frames API: ``ci=`` on every query,
group-by and analysis (coverage checked by simulation against the exact statistic of the
clamped data), ``mechanism="auto"`` (the logged choice is the one with the smaller certified
worst-case MSE), and the log fields that record both."""

from __future__ import annotations

import math

import narwhals as nw
import numpy as np
import pandas as pd
import pytest

import dpframe as dpf
from dpframe.mechanisms import choose_mechanism

LO, HI = 0.0, 100.0
RUNS = 200
LEVEL = 0.9


def frame(n: int = 40, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-10, 110, n)  # some values outside the bounds: clamped
    return pd.DataFrame({"x": x, "g": [["a", "b"][i % 2] for i in range(n)]})


def clamped(df: pd.DataFrame) -> np.ndarray:
    return np.clip(df["x"].to_numpy(), LO, HI)


def truths(df: pd.DataFrame) -> dict[str, float]:
    x = clamped(df)
    older = x[df["x"].to_numpy() >= 50]
    return {
        "count": float(len(x)), "sum": float(x.sum()), "mean": float(x.mean()),
        "variance": float(x.var(ddof=1)), "std": float(x.std(ddof=1)),
        "f_count": float(len(older)), "f_sum": float(older.sum()), "f_mean": float(older.mean()),
        "f_variance": float(older.var(ddof=1)), "f_std": float(older.std(ddof=1)),
    }


def covered(est: dpf.Estimate, truth: float) -> bool:
    tol = 1e-9 * (1.0 + abs(truth))  # the fixed-point grid moves values by ~1e-10 of the width
    return est.lower - tol <= truth <= est.upper + tol


@pytest.mark.slow
@pytest.mark.parametrize("query", ["count", "sum", "mean", "variance", "std"])
@pytest.mark.parametrize("view", ["root", "filter"])
@pytest.mark.parametrize("mechanism", ["bounded", "truncated"])
def test_ci_coverage_through_releases(query, view, mechanism):
    df = frame()
    truth = truths(df)[("f_" if view == "filter" else "") + query]
    pf = dpf.protect(df, epsilon=1e9, bounds={"x": (LO, HI)}, missing=0.0)
    target = pf.dp.filter(nw.col("x") >= 50) if view == "filter" else pf
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(RUNS):
        est = getattr(target.dp, query)("x", epsilon=1.0, ci=LEVEL, mechanism=mechanism,
                                        random_state=rng) if query != "count" else \
            target.dp.count(epsilon=1.0, ci=LEVEL, mechanism=mechanism, random_state=rng)
        assert isinstance(est, dpf.Estimate) and est.lower <= est.upper
        hits += covered(est, truth)
    # coverage ≥ level; allow 3.5 binomial standard errors of Monte Carlo noise
    assert hits / RUNS >= LEVEL - 3.5 * math.sqrt(LEVEL * (1 - LEVEL) / RUNS), hits / RUNS


@pytest.mark.slow
def test_ci_coverage_group_by_and_proportions():
    df = frame(60)
    pf = dpf.protect(df, epsilon=1e9, bounds={"x": (LO, HI)}, keys={"g": ["a", "b"]},
                     missing=0.0)
    x, g = clamped(df), df["g"].to_numpy()
    means = {k: float(x[g == k].mean()) for k in ("a", "b")}
    props = {k: float((g == k).mean()) for k in ("a", "b")}
    rng = np.random.default_rng(5)
    hit_mean = hit_prop = 0
    for _ in range(RUNS):
        t = pf.dp.groupby("g").mean("x", epsilon=1.0, ci=LEVEL, random_state=rng)
        hit_mean += all(lo <= means[k] <= hi for k, lo, hi in
                        zip(t["g"], t["mean_lower"], t["mean_upper"], strict=True))
        p = pf.dp.proportions("g", epsilon=1.0, ci=LEVEL, random_state=rng)
        hit_prop += all(lo <= props[k] <= hi for k, lo, hi in
                        zip(p["g"], p["proportion_lower"], p["proportion_upper"], strict=True))
    floor = LEVEL ** 2 - 3.5 * math.sqrt(LEVEL * (1 - LEVEL) / RUNS)  # two groups at once
    assert hit_mean / RUNS >= floor and hit_prop / RUNS >= floor


def test_ci_columns_rows_and_log():
    pf = dpf.protect(frame(), epsilon=100.0, bounds={"x": (LO, HI)}, keys={"g": ["a", "b"]},
                     missing=0.0)
    table = pf.dp.release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=1.0, ci=0.95)
    assert list(table.columns) == ["n", "n_lower", "n_upper", "m", "m_lower", "m_upper"]
    assert (table["n_lower"] <= table["n_upper"]).all()
    described = pf.dp.describe(epsilon=1.0, ci=0.95)
    assert {"mean_lower", "std_upper", "count_lower"} <= set(described.index)
    matrix = dpf.protect(pd.DataFrame({"a": np.arange(50.0), "b": np.arange(50.0)[::-1]}),
                         epsilon=100.0, bounds={"a": (0, 50), "b": (0, 50)}, missing=0.0
                         ).dp.corr(["a", "b"], epsilon=5.0, ci=0.95)
    assert list(matrix.index.get_level_values(0).unique()) == ["estimate", "lower", "upper"]
    log = pf.dp.log
    assert log["interval"].iloc[-1].startswith("0.95 confidence interval")
    pf.dp.mean("x", epsilon=1.0)
    assert pd.isna(pf.dp.log["interval"].iloc[-1])
    with pytest.raises(dpf.ParameterError, match="ci must be"):
        pf.dp.mean("x", epsilon=1.0, ci=1.5)


def test_counts_are_integers_inside_their_domain():
    pf = dpf.protect(frame(), epsilon=100.0, bounds={"x": (LO, HI)}, keys={"g": ["a", "b"]})
    for _ in range(20):
        c = pf.dp.count(epsilon=0.5)
        assert float(c).is_integer() and 0 <= c <= 40
    groups = pf.dp.groupby("g").count(epsilon=0.5)["count"]
    assert all(float(v).is_integer() for v in groups)


@pytest.mark.parametrize(("epsilon", "bounds"), [(1.0, (0.0, 1.0)), (1.0, (0.0, 100.0)),
                                                  (0.1, (0.0, 3.0)), (4.0, (0.0, 10.0))])
def test_auto_logs_the_mechanism_with_the_smaller_worst_case_mse(epsilon, bounds):
    df = pd.DataFrame({"x": np.linspace(bounds[0], bounds[1], 50)})
    pf = dpf.protect(df, epsilon=100.0, bounds={"x": bounds}, missing=0.0)
    pf.dp.mean("x", epsilon=epsilon, mechanism="auto")
    entry = pf.dp.log.iloc[-1]
    expected = choose_mechanism(epsilon, entry["sensitivity"], entry["domain_lower"],
                                entry["domain_upper"])
    assert entry["mechanism"] == expected.name
    assert entry["mechanism_choice"].startswith("auto mechanism")
    brackets = expected.worst_case_mse
    others = [n for n in brackets if n != expected.name]
    assert all(brackets[expected.name].lower <= brackets[o].upper * (1 + 1e-5) for o in others)


def test_requested_mechanism_is_logged_as_requested():
    pf = dpf.protect(frame(), epsilon=100.0, bounds={"x": (LO, HI)}, missing=0.0)
    pf.dp.mean("x", epsilon=1.0, mechanism="truncated")
    assert pf.dp.log["mechanism_choice"].iloc[-1] == "requested"


# -- accuracy before spending -----------------------------------------------------------------
def test_accuracy_reads_nothing_and_spends_nothing(monkeypatch):
    from dpframe.engine import _aggregation as engine

    calls = {"n": 0}
    real = engine.aggregate
    monkeypatch.setattr(engine, "aggregate", lambda *a, **k: (calls.__setitem__(
        "n", calls["n"] + 1), real(*a, **k))[1])
    pf = dpf.protect(frame(), epsilon=1.0, bounds={"x": (LO, HI)}, keys={"g": ["a", "b"]},
                     missing=0.0)
    table = pf.dp.accuracy({"m": dpf.mean("x"), "v": dpf.variance("x"), "s": dpf.std("x")},
                           epsilon=1.0)
    assert (table["half_width"] > 0).all()
    pf.dp.groupby("g").accuracy({"m": dpf.mean("x")}, epsilon=1.0, min_rows=10)
    pf.dp.epsilon_for(dpf.mean("x"), 5.0)
    pf.dp.split({"m": (dpf.mean("x"), 5.0), "v": (dpf.variance("x"), 200.0)}, epsilon=1.0)
    assert calls["n"] == 0 and pf.dp.budget.epsilon_spent == 0.0
    assert len(pf.dp.log) == 0


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["bounded", "truncated"])
def test_accuracy_agrees_with_the_empirical_error_of_real_releases(mechanism):
    df = frame(200)
    pf = dpf.protect(df, epsilon=1e9, bounds={"x": (LO, HI)}, missing=0.0)
    target = pf.dp.filter(nw.col("x") >= 0)  # a private-size frame: the count is noised
    truth = float(len(df[df["x"] >= 0]))
    h = float(target.dp.accuracy({"n": dpf.count()}, epsilon=0.5, mechanism=mechanism,
                                 alpha=0.1)["half_width"].iloc[0])
    rng = np.random.default_rng(2)
    errors = np.array([abs(target.dp.count(epsilon=0.5, mechanism=mechanism, random_state=rng)
                           - truth) for _ in range(RUNS)])
    within = float(np.mean(errors <= h))
    assert within >= 0.9 - 3.5 * math.sqrt(0.09 / RUNS)
    # not vacuous: the empirical 90% quantile is close to the promised half-width (the true
    # count lies inside the domain, where the worst case is attained up to rounding to integers)
    assert np.quantile(errors, 0.9) >= 0.6 * h


def test_epsilon_for_inverts_accuracy_and_split_meets_targets():
    pf = dpf.protect(frame(500), epsilon=1.0, bounds={"x": (LO, HI)}, missing=0.0)
    eps = pf.dp.epsilon_for(dpf.mean("x"), 1.0, alpha=0.05)
    at = pf.dp.accuracy({"m": dpf.mean("x")}, epsilon=eps,
                        mechanism="bounded")["half_width"].iloc[0]
    below = pf.dp.accuracy({"m": dpf.mean("x")}, epsilon=eps * 0.98,
                           mechanism="bounded")["half_width"].iloc[0]
    assert at <= 1.0 < below
    split = pf.dp.split({"m": (dpf.mean("x"), 1.0), "v": (dpf.variance("x"), 100.0)},
                        epsilon=2.0)
    assert split["epsilon"].sum() == pytest.approx(2.0)
    ratios = split["half_width"] / split["target"]
    assert ratios.max() == pytest.approx(ratios.min(), rel=1e-3)
    with pytest.raises(dpf.ParameterError, match="composed"):
        pf.dp.filter(nw.col("x") > 1).dp.epsilon_for(dpf.mean("x"), 1.0)


def test_count_of_a_public_size_frame_is_exact_free_and_logged():
    pf = dpf.protect(frame(), epsilon=2.0, bounds={"x": (LO, HI)}, missing=0.0)
    assert pf.dp.count(epsilon=0) == 40.0
    assert pf.dp.count(epsilon=0, ci=0.95) == (40.0, 40.0, 40.0, 0.95)
    table = pf.dp.release({"n": dpf.count()}, epsilon=0)
    assert table["n"].iloc[0] == 40.0 and pf.dp.budget.epsilon_spent == 0.0
    log = pf.dp.log
    assert (log["mechanism"] == "none (public size)").all() and (log["epsilon"] == 0.0).all()
    assert (log["size"] == "public").all()
    with pytest.raises(dpf.ParameterError, match="epsilon must be a finite number > 0"):
        pf.dp.mean("x", epsilon=0)
    with pytest.raises(dpf.ParameterError, match="epsilon must be a finite number > 0"):
        pf.dp.filter(nw.col("x") > 1).dp.count(epsilon=0)  # a private size needs noise
    # issue 23: asked with ε > 0 the public size is still exact and free, logged as public
    assert pf.dp.count(epsilon=0.5) == 40.0 and pf.dp.budget.epsilon_spent == 0.0
    assert pf.dp.describe(epsilon=0.5).loc["count", "x"] == 40.0  # exact in describe too
    both = pf.dp.release({"n": dpf.count(), "m": dpf.mean("x")}, epsilon=0.5, random_state=0)
    assert both["n"].iloc[0] == 40.0
    assert pf.dp.budget.epsilon_spent == pytest.approx(1.0)  # describe's 0.5 and the mean's
    log = pf.dp.log
    counts = log[log["query"] == "count"]
    assert (counts["epsilon"] == 0.0).all() and (counts["size"] == "public").all()
    assert log[log["name"] == "m"]["epsilon"].iloc[0] == pytest.approx(0.5)  # all of ε
    noisy = pf.dp.filter(nw.col("x") > -1e9).dp.count(epsilon=0.5)  # a private size: noised
    assert float(noisy).is_integer() and pf.dp.budget.epsilon_spent == pytest.approx(1.5)


def test_defaults_are_auto_and_the_log_says_what_ran_and_why():
    """Issue 23: every statistic defaults to mechanism="auto"; the log names the mechanism run
    and the reason; "bounded" stays one argument away and is logged as requested."""
    pf = dpf.protect(frame(), epsilon=5.0, bounds={"x": (LO, HI)}, missing=0.0,
                     keys={"g": ["a", "b"]})
    pf.dp.mean("x", epsilon=0.5, random_state=0)
    pf.dp.groupby("g").count(epsilon=0.5, random_state=0)
    pf.dp.histogram("x", edges=[0, 50, 100], epsilon=0.5, random_state=0)
    pf.dp.mean("x", epsilon=0.5, mechanism="bounded", random_state=0)
    log = pf.dp.log
    auto, named = log.iloc[:-1], log.iloc[-1]
    assert auto["mechanism_choice"].str.startswith("auto mechanism on").all()
    assert set(auto["mechanism"]) <= {"bounded", "truncated", "laplace"}
    chosen = [c.rsplit("→", 1)[1] for c in auto["mechanism_choice"]]
    assert all(m in c for m, c in zip(auto["mechanism"], chosen, strict=True))
    assert named["mechanism"] == "bounded" and named["mechanism_choice"] == "requested"


def test_protect_names_private_size_columns_once_from_the_schema():
    """Issue 23: protect warns once, from the schema and the arguments only, which bounded
    columns drop missing values by default (their statistics are private-size) and how to keep
    n public; an explicit missing= silences it."""
    import warnings

    def notices(df, **kw):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            dpf.protect(df, epsilon=1.0, bounds={"x": (LO, HI), "k": (0, 9)}, **kw)
        return [str(w.message) for w in seen if issubclass(w.category, dpf.PrivateSizeWarning)]

    clean = pd.DataFrame({"x": [1.0, 2.0, 3.0], "k": [1, 2, 3]})  # float x, int64 k
    holes = pd.DataFrame({"x": [np.nan, 5.0, np.nan], "k": [4, 5, 6]})  # same schema
    first = notices(clean)
    assert len(first) == 1 and "'x'" in first[0] and "'k'" not in first[0]
    assert "missing={'x':" in first[0]
    assert notices(holes) == first  # no data read: the same text whatever the values
    assert notices(clean.copy(), missing="drop") == []  # chosen explicitly
    assert notices(clean.copy(), missing={"x": 0.0}) == []
    assert notices(clean.copy(), missing=0.0) == []
    assert len(notices(clean.copy(), missing={"k": 0})) == 1  # x still by default


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["bounded", "truncated"])
def test_count_half_widths_hold_for_the_released_integer(mechanism):
    """Issue 23: counts are released rounded, so a half-width ``h`` of the noisy count covered
    only 0.919 of released counts at a promised 0.95 (truncated, ε = 1, n = 944, a true count
    of 5). accuracy() now reports ⌊h + ½⌋ (dpframe.release._accuracy_planner.rounded_half_width),
    which holds for the rounded, clamped release at every true count; the raw h is shown to fall
    short."""
    from dpframe.mechanisms import make_mechanism
    from dpframe.mechanisms.accuracy import half_width

    n, draws, alpha = 944, 40_000, 0.05
    pf = dpf.protect(pd.DataFrame({"x": np.zeros(n)}), epsilon=10.0, bounds={"x": (LO, HI)},
                     missing=0.0)
    derived = pf.dp.filter(nw.col("x") >= 0)  # private size: the count is noised on [0, n]
    table = derived.dp.accuracy({"n": dpf.count()}, epsilon=1.0, mechanism=mechanism,
                                alpha=alpha)
    reported = float(table["half_width"].iloc[0])
    mech = make_mechanism(mechanism, epsilon=1.0, sensitivity=1.0, lower=0.0, upper=float(n))
    raw = half_width(mech, alpha)
    assert reported == math.floor(raw + 0.5) and reported.is_integer()
    sd = math.sqrt(alpha * (1 - alpha) / draws)
    coverage_raw = []
    for i, truth in enumerate((0.0, 1.0, 5.0, n / 2, float(n))):
        released = np.clip(np.rint(mech.sample(np.full(draws, truth), random_state=i)), 0, n)
        assert np.mean(np.abs(released - truth) <= reported) >= 1 - alpha - 4 * sd, truth
        coverage_raw.append(float(np.mean(np.abs(released - truth) <= raw)))
    if mechanism == "truncated":  # the overclaim the rounding rule removes
        assert min(coverage_raw) < 1 - alpha - 4 * sd
    eps = derived.dp.epsilon_for(dpf.count(), 3.0, mechanism=mechanism)
    again = derived.dp.accuracy({"n": dpf.count()}, epsilon=eps, mechanism=mechanism)
    assert float(again["half_width"].iloc[0]) <= 3.0


def test_rounded_half_width_bounds_every_rounded_error():
    from dpframe.release._accuracy_planner import rounded_half_width

    rng = np.random.default_rng(0)
    for h in (0.0, 0.2, 0.5, 0.7, 1.49, 1.5, 3.2, 3.7, 10.5):
        errors = rng.uniform(-h, h, 10_000)
        assert np.abs(np.rint(errors)).max() <= rounded_half_width(h)
